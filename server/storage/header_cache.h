/* Rendered header JSON of stored files, by (sha256, path). A blob's content is
 * immutable and its stats are derived from it, so an entry never goes stale: the
 * cache only has to stay bounded (least recently used entries leave first). An
 * instance of the cache core (cache.h), made by its owner (the server, a test). */
#ifndef TG_HEADER_CACHE_H
#define TG_HEADER_CACHE_H

#include <stddef.h>

#define TG_HEADER_CACHE_BYTES ((size_t)32 * 1024 * 1024)

typedef struct tg_header_cache tg_header_cache;

/* A cache of `bytes` (TG_HEADER_CACHE_BYTES in the server). NULL when out of memory. */
tg_header_cache *tg_header_cache_create(size_t bytes);
/* Frees the cache. NULL is ignored. */
void tg_header_cache_destroy(tg_header_cache *cache);

/* A malloc'd copy of the cached text (NUL-terminated, its length in *len), or NULL. */
char *tg_header_cache_get(tg_header_cache *cache, const char *sha256, const char *path,
                          size_t *len);
/* Keeps a copy of text; texts above an eighth of the budget are not kept. */
void tg_header_cache_put(tg_header_cache *cache, const char *sha256, const char *path,
                         const char *text, size_t len);

#endif
