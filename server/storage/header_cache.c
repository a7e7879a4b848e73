/* Header JSON cache (see header_cache.h): an instance of the cache core (cache.h)
 * keyed by "sha256\npath", whose entry holds one text. */
#include "header_cache.h"
#include "cache.h"
#include "sha256.h"

#include <stdlib.h>
#include <string.h>

typedef struct entry {
    tg_cache_entry core; /* first: the cache core's part */
    char *text;
    size_t text_len;
} entry;

struct tg_header_cache {
    tg_cache *entries;
};

static void destroy_entry(tg_cache_entry *e)
{
    free(((entry *)e)->text);
}

tg_header_cache *tg_header_cache_create(size_t bytes)
{
    tg_header_cache *cache = calloc(1, sizeof *cache);
    tg_cache_config config = {.bytes = bytes,
                              .entry_share = 8,
                              .shards = 1,
                              .buckets = 4096,
                              .entry_size = sizeof(entry),
                              .destroy = destroy_entry};
    if (cache == NULL || (cache->entries = tg_cache_create(&config)) == NULL) {
        free(cache);
        return NULL;
    }
    return cache;
}

void tg_header_cache_destroy(tg_header_cache *cache)
{
    if (cache == NULL)
        return;
    tg_cache_destroy(cache->entries);
    free(cache);
}

/* The key "sha256\npath" in buf (cap bytes) or, when longer, a malloc'd string
 * (the caller frees what is not buf); NULL when out of memory. */
static char *make_key(char *buf, size_t cap, const char *sha256, const char *path)
{
    size_t path_len = strlen(path);
    size_t need = TG_SHA256_HEX_LEN + 2 + path_len;
    char *key = need <= cap ? buf : malloc(need);
    if (key == NULL)
        return NULL;
    memcpy(key, sha256, TG_SHA256_HEX_LEN);
    key[TG_SHA256_HEX_LEN] = '\n';
    memcpy(key + TG_SHA256_HEX_LEN + 1, path, path_len + 1);
    return key;
}

typedef struct copy_out {
    char *copy;
    size_t *len;
} copy_out;

/* The core's visitor (under the lock): copies the text out. */
static tg_cache_use copy_text(tg_cache_entry *core, void *arg)
{
    const entry *e = (const entry *)core;
    copy_out *out = arg;
    out->copy = malloc(e->text_len + 1);
    if (out->copy == NULL)
        return TG_CACHE_MISS;
    memcpy(out->copy, e->text, e->text_len + 1);
    *out->len = e->text_len;
    return TG_CACHE_HIT;
}

char *tg_header_cache_get(tg_header_cache *cache, const char *sha256, const char *path, size_t *len)
{
    if (strlen(sha256) != TG_SHA256_HEX_LEN)
        return NULL;
    char buf[512];
    char *key = make_key(buf, sizeof buf, sha256, path);
    if (key == NULL)
        return NULL;
    copy_out out = {NULL, len};
    tg_cache_visit(cache->entries, key, copy_text, &out);
    if (key != buf)
        free(key);
    return out.copy;
}

void tg_header_cache_put(tg_header_cache *cache, const char *sha256, const char *path,
                         const char *text, size_t len)
{
    if (strlen(sha256) != TG_SHA256_HEX_LEN)
        return; /* not a blob's digest: nothing to key it by */
    /* what the key "sha256\npath" and the text take, as before the core */
    size_t charge = sizeof(entry) + TG_SHA256_HEX_LEN + 1 + strlen(path) + 1 + len + 1;
    if (charge > tg_cache_entry_bound(cache->entries))
        return;
    char buf[512];
    char *key = make_key(buf, sizeof buf, sha256, path);
    entry *e = key != NULL ? (entry *)tg_cache_entry_new(cache->entries, key) : NULL;
    if (key != buf)
        free(key);
    char *copy = e != NULL ? malloc(len + 1) : NULL;
    if (copy == NULL) {
        if (e != NULL)
            tg_cache_entry_free(cache->entries, &e->core);
        return;
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    e->text = copy;
    e->text_len = len;
    tg_cache_put(cache->entries, &e->core, charge);
}
