/* Parsed safetensors headers of stored blobs (lib's st_file), and parsed GGUF headers
 * (lib's st_gguf_file with the header bytes it points into), parsed once and shared
 * by the blob's sha256, so a tensor GET on a file with a 20 MB header does not read
 * and parse the whole header again for every request.
 *
 * A blob's content is immutable, so an entry never goes stale: the cache only has
 * to stay bounded, by bytes and by entry count (least recently used entries leave
 * first). An entry is charged what its parsed form holds (the st_file's one
 * allocation: tensor table, name index, shapes, strings) plus its bookkeeping.
 *
 * Readers hold a reference: tg_parsed_header_acquire hands out a const st_file that
 * stays valid until the matching tg_parsed_header_release, whatever happens to the
 * cache meanwhile. Eviction passes over entries in use; they leave once released
 * (so the cache may exceed its byte bound by what readers hold at that moment).
 *
 * One thread parses a given blob while the others asking for it wait and share
 * the result (a failure too, with its error); at most TG_PARSED_HEADER_PARSES
 * parses run at once, which bounds the memory parsing takes (a parse needs a few
 * times the header's size). A parse whose result is larger than half the byte
 * budget (or any, with a budget of 0) serves the requests that waited for it and
 * is then freed, not kept. Failures are not remembered.
 *
 * An instance of the cache core (cache.h), made by its owner (the server, a test).
 * Thread-safe. */
#ifndef TG_PARSED_HEADER_CACHE_H
#define TG_PARSED_HEADER_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "blobstore.h"
#include "st_gguf.h"
#include "st_header.h"

/* Default byte budget (--header-cache-bytes) and entry bound. */
#define TG_PARSED_HEADER_CACHE_BYTES ((size_t)256 * 1024 * 1024)
#define TG_PARSED_HEADER_CACHE_ENTRIES 1024
/* Parses running at once. */
#define TG_PARSED_HEADER_PARSES 2

/* Reads blob sha256 (size bytes, as the catalog records it) through the checked
 * open (blobstore.h) and parses its header with max_header as the bound on N; no cache.
 * 0 and out filled (free it with st_file_free); -1 the blob is damaged (missing, the
 * wrong size, or a header that no longer reads; recorded for fsck); -2 it cannot be
 * read otherwise (errno kept: EMFILE is not damage) or N is over a lowered
 * max_header. err is set on failure and out left empty. */
int tg_header_read_parse(tg_blobstore *store, const char *sha256, uint64_t size,
                         uint64_t max_header, st_file *out, st_error *err);

/* A stored GGUF file's header: its bytes (from offset 0 to the end of the tensor
 * table) and the validator's parse of them (st_gguf.h), which points into bytes. */
typedef struct tg_gguf_header {
    uint8_t *bytes;
    size_t len;
    st_gguf_file file;
} tg_gguf_header;

/* As tg_header_read_parse, for a blob of kind gguf: reads the header in growing
 * prefixes (the parse says how many bytes it wants) up to max_header and parses it
 * with st_gguf_parse_header, the gate's own parser. Free out with tg_gguf_header_free. */
int tg_gguf_read_parse(tg_blobstore *store, const char *sha256, uint64_t size, uint64_t max_header,
                       tg_gguf_header *out, st_error *err);
void tg_gguf_header_free(tg_gguf_header *header);

typedef struct tg_parsed_header_cache tg_parsed_header_cache;

/* A cache bounded by bytes and entries (an entry may take half the bytes; 0 bytes
 * keeps nothing); the defaults are the ones above. NULL when out of memory. */
tg_parsed_header_cache *tg_parsed_header_cache_create(size_t bytes, size_t entries);
/* Frees the cache (nothing may be held). NULL is ignored. */
void tg_parsed_header_cache_destroy(tg_parsed_header_cache *cache);

/* The parsed header of blob sha256, from the cache or read and parsed now (keyed by
 * sha256 alone: a server passes the same max_header every time). NULL with err set
 * when it cannot be read or parsed, *failure (may be NULL) tg_header_read_parse's
 * -1 or -2, and errno its errno. The caller must release what it gets. */
const st_file *tg_parsed_header_acquire(tg_parsed_header_cache *cache, tg_blobstore *store,
                                        const char *sha256, uint64_t size, uint64_t max_header,
                                        st_error *err, int *failure);
/* Gives back a reference from tg_parsed_header_acquire (NULL is ignored). */
void tg_parsed_header_release(tg_parsed_header_cache *cache, const st_file *file);

/* The same for a GGUF blob (kind gguf): its parsed header, kept in the same cache and
 * budget (an entry is charged its header bytes and tables) under its own key. */
const tg_gguf_header *tg_parsed_gguf_acquire(tg_parsed_header_cache *cache, tg_blobstore *store,
                                             const char *sha256, uint64_t size, uint64_t max_header,
                                             st_error *err, int *failure);
void tg_parsed_gguf_release(tg_parsed_header_cache *cache, const tg_gguf_header *header);

typedef struct tg_parsed_header_stats {
    size_t entries;     /* kept */
    size_t bytes;       /* charged by the kept entries */
    size_t in_use;      /* entries (kept or not) that readers hold now */
    uint64_t hits;      /* acquires answered from a kept entry or a parse under way */
    uint64_t parses;    /* blobs read and parsed, successfully or not */
    uint64_t not_kept;  /* parses served and then freed: larger than half the budget */
    uint64_t failures;  /* parses that failed */
    uint64_t evictions; /* kept entries dropped for the bounds */
} tg_parsed_header_stats;

void tg_parsed_header_stats_get(tg_parsed_header_cache *cache, tg_parsed_header_stats *out);

/* Writes the counters in the Prometheus text format (for /metrics) into buf; the
 * length written, as snprintf counts it. */
int tg_parsed_header_metrics(tg_parsed_header_cache *cache, char *buf, size_t cap);

#endif
