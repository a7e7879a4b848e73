/* Removing a blob no catalog row references, safely beside uploads, conversion
 * jobs and other servers' gc: the decision and the unlink are made under the
 * exclusive commit lock (blobstore.h), while every commit of a blob and its row holds
 * the shared one. Used by gc for each blob, and by the server for the blob a
 * draft's file no longer uses after a replace or a delete, so replaced content
 * does not pile up until the next gc. */
#ifndef TG_RECLAIM_H
#define TG_RECLAIM_H

#include <stdbool.h>

#include "blobstore.h"
#include "catalog.h"
#include "sha256.h"

typedef enum tg_reclaim_result {
    TG_RECLAIM_KEPT,    /* still referenced */
    TG_RECLAIM_REMOVED, /* unreferenced: removed (or, dry run, would be) */
    TG_RECLAIM_ERROR,   /* hex is not a digest, or the lock, the catalog or the unlink
                           failed; nothing removed */
} tg_reclaim_result;

tg_reclaim_result tg_blob_reclaim(tg_blobstore *store, tg_catalog *catalog, const char *hex,
                                  bool dry_run);

/* The blob path holds in version_id now, into hex; "" when it holds none. Read
 * before a row is replaced or deleted, to reclaim the blob after. */
void tg_file_blob(tg_catalog *catalog, int64_t version_id, const char *path,
                  char hex[TG_SHA256_HEX_LEN + 1]);

#endif
