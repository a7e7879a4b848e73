/* Header JSON cache (see header_cache.h): the shared hash table of sha_table.h,
 * keyed by (sha256, path), over the recency list of lru.h, one mutex, a byte budget. */
#include "header_cache.h"
#include "lru.h"
#include "sha_table.h"

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    tg_lru_node lru; /* first: an entry is its node */
    tg_sha_node key; /* (sha256, path); key.name is `path` */
    char *path;
    char *text;
    size_t text_len;
    size_t charge; /* bytes counted against the budget */
} entry;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static tg_sha_table table;
static tg_lru recency;
/* Invariant: used_bytes is the sum of the charges of the entries in the table. */
static size_t used_bytes;

static entry *find(const char *sha256, const char *path)
{
    return TG_SHA_ENTRY(tg_sha_table_find_named(&table, sha256, path), entry, key);
}

static void remove_entry(entry *e)
{
    tg_sha_table_remove(&table, &e->key);
    tg_lru_unlink(&recency, &e->lru);
    assert(used_bytes >= e->charge);
    used_bytes -= e->charge;
    free(e->path);
    free(e->text);
    free(e);
}

char *tg_header_cache_get(const char *sha256, const char *path, size_t *len)
{
    char *copy = NULL;
    pthread_mutex_lock(&cache_lock);
    entry *e = find(sha256, path);
    if (e != NULL) {
        copy = malloc(e->text_len + 1);
        if (copy) {
            memcpy(copy, e->text, e->text_len + 1);
            *len = e->text_len;
        }
        tg_lru_unlink(&recency, &e->lru);
        tg_lru_push_newest(&recency, &e->lru);
    }
    pthread_mutex_unlock(&cache_lock);
    return copy;
}

void tg_header_cache_put(const char *sha256, const char *path, const char *text, size_t len)
{
    if (strlen(sha256) != TG_SHA256_HEX_LEN)
        return; /* not a blob's digest: nothing to key it by */
    size_t path_len = strlen(path);
    /* what the key "sha256\npath" and the text take, as before the shared table */
    size_t charge = sizeof(entry) + TG_SHA256_HEX_LEN + 1 + path_len + 1 + len + 1;
    if (charge > TG_HEADER_CACHE_BYTES / 8)
        return;
    entry *e = calloc(1, sizeof *e);
    char *path_copy = malloc(path_len + 1);
    char *copy = malloc(len + 1);
    if (e == NULL || path_copy == NULL || copy == NULL) {
        free(e);
        free(path_copy);
        free(copy);
        return;
    }
    memcpy(path_copy, path, path_len + 1);
    memcpy(copy, text, len);
    copy[len] = '\0';
    e->path = path_copy;
    e->text = copy;
    e->text_len = len;
    e->charge = charge;
    pthread_mutex_lock(&cache_lock);
    entry *old = find(sha256, path);
    if (old != NULL)
        remove_entry(old); /* a concurrent miss rendered it too */
    while (used_bytes + charge > TG_HEADER_CACHE_BYTES && recency.oldest)
        remove_entry((entry *)recency.oldest);
    tg_sha_table_add_named(&table, &e->key, sha256, e->path);
    tg_lru_push_newest(&recency, &e->lru);
    used_bytes += charge;
    /* an entry takes at most an eighth of the budget, and the oldest went until it fit */
    assert(used_bytes <= TG_HEADER_CACHE_BYTES);
    pthread_mutex_unlock(&cache_lock);
}

void tg_header_cache_clear(void)
{
    pthread_mutex_lock(&cache_lock);
    while (recency.oldest)
        /* remove_entry unlinks the entry before freeing it, so oldest moves on. */
        /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc) */
        remove_entry((entry *)recency.oldest);
    assert(used_bytes == 0);
    pthread_mutex_unlock(&cache_lock);
}
