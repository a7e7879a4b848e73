/* The weight maps of stored *.safetensors.index.json blobs, parsed once and kept by
 * the blob's sha256, so a tensor GET finds its shard with a binary search instead
 * of reading and parsing the whole index (which can be tens of MB) every time.
 *
 * A blob's content is immutable, so an entry never goes stale: the cache only has
 * to stay bounded, by entry count and by bytes (least recently used entries leave
 * first). An index too big to keep is not read at all, and one that is not an
 * index with a weight_map of strings is remembered as such: both answer
 * TG_INDEX_UNUSABLE, and the caller reads the shards' headers instead.
 *
 * An instance of the cache core (cache.h), made by its owner (the server, a test):
 * a hit answers under the core's lock and a load's askers hold its entry, so
 * eviction never frees a map a reader is using. One thread parses a given blob
 * while the others asking for it wait and share its result; at most
 * TG_INDEX_CACHE_BUILDS parses run at once, which bounds the memory parsing takes.
 * Thread-safe. */
#ifndef TG_INDEX_CACHE_H
#define TG_INDEX_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "blobstore.h"

#define TG_INDEX_CACHE_BYTES ((size_t)64 * 1024 * 1024)
#define TG_INDEX_CACHE_ENTRIES 64
/* Parses running at once (each holds the index text and its JSON tree). */
#define TG_INDEX_CACHE_BUILDS 2

typedef struct tg_index_cache tg_index_cache;

/* A cache bounded by bytes and entries (an entry may take half the bytes); the
 * defaults are the TG_INDEX_CACHE_* above. NULL when out of memory. */
tg_index_cache *tg_index_cache_create(size_t bytes, size_t entries);
/* Frees the cache (no lookup may be running). NULL is ignored. */
void tg_index_cache_destroy(tg_index_cache *cache);

typedef enum tg_index_lookup {
    TG_INDEX_FOUND,    /* shard holds the weight_map's value for the name */
    TG_INDEX_ABSENT,   /* the weight_map has no such name */
    TG_INDEX_UNUSABLE, /* too big to keep, unreadable, not a weight_map of strings, or the
                          value does not fit shard: read the shards' headers instead */
} tg_index_lookup;

/* Looks name up in the weight_map of the index blob sha256 (size bytes, as the
 * catalog records it), parsing and caching the blob on a miss. On TG_INDEX_FOUND
 * shard holds the entry's value (relative to the index's directory), NUL-terminated. */
tg_index_lookup tg_index_cache_lookup(tg_index_cache *cache, tg_blobstore *store,
                                      const char *sha256, uint64_t size, const char *name,
                                      char *shard, size_t shard_len);

typedef struct tg_index_cache_stats {
    size_t entries;    /* kept: weight maps and "unusable" marks */
    size_t bytes;      /* charged against the byte bound */
    uint64_t hits;     /* lookups answered from an entry */
    uint64_t parses;   /* blobs read and parsed */
    uint64_t not_read; /* lookups refused because the blob is above the entry bound */
    uint64_t evictions;
} tg_index_cache_stats;

void tg_index_cache_stats_get(tg_index_cache *cache, tg_index_cache_stats *out);

#endif
