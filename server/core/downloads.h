/* The download counter (the Hub's "downloads" of a model): counted in memory on the
 * request path, added to the catalog in batches (tg_catalog_downloads_add, which
 * adds: replicas sharing a catalog never overwrite each other's counts). A flush
 * thread writes the pending counts every flush_ms, tg_downloads_flush writes them
 * at once (a listing does, so that it sees this replica's own downloads), and
 * tg_downloads_stop writes what is left. A count the catalog refused (unavailable)
 * stays pending for the next flush. Which requests count is the routes' choice
 * (tg_count_download, routes.h; docs/MANUAL.md "Download counts"). */
#ifndef TG_DOWNLOADS_H
#define TG_DOWNLOADS_H

#include <stdbool.h>
#include <stdint.h>

#include "catalog.h"

typedef struct tg_downloads tg_downloads;

/* How often the server's counter writes its counts (tg_http_start). */
#define TG_DOWNLOADS_FLUSH_MS 5000

/* Distinct models counted between two flushes before a count flushes at once. */
#define TG_DOWNLOADS_PENDING_MAX 4096

/* A counter writing into catalog; flush_ms 0: no thread (flushes are explicit).
 * NULL when out of memory or the thread cannot start. */
tg_downloads *tg_downloads_start(tg_catalog *catalog, unsigned flush_ms);
/* Counts one download of model_id. */
void tg_downloads_count(tg_downloads *downloads, int64_t model_id);
/* Writes every pending count now; false when the catalog refused some (kept). */
bool tg_downloads_flush(tg_downloads *downloads);
/* The number of distinct models with a pending count. */
unsigned tg_downloads_pending(tg_downloads *downloads);
/* Stops the thread, writes what is pending (logged when it cannot), frees. NULL: nothing. */
void tg_downloads_stop(tg_downloads *downloads);

#endif
