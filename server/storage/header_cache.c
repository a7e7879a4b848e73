/* Header JSON cache (see header_cache.h): a chained hash table over a doubly
 * linked recency list, one mutex, a byte budget. */
#include "header_cache.h"
#include "lru.h"

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS 4096

typedef struct entry {
    tg_lru_node lru; /* first: an entry is its node */
    struct entry *bucket_next;
    uint64_t hash;
    char *key; /* "sha256\npath" */
    char *text;
    size_t text_len;
    size_t charge; /* bytes counted against the budget */
} entry;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static entry *buckets[BUCKETS];
static tg_lru recency;
/* Invariant: used_bytes is the sum of the charges of the entries in the table. */
static size_t used_bytes;

static uint64_t hash_key(const char *sha256, const char *path)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = sha256; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h = (h ^ '\n') * 1099511628211ull;
    for (const char *p = path; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

static bool key_equals(const entry *e, const char *sha256, const char *path)
{
    size_t sha_len = strlen(sha256);
    return strncmp(e->key, sha256, sha_len) == 0 && e->key[sha_len] == '\n' &&
           strcmp(e->key + sha_len + 1, path) == 0;
}

static void remove_entry(entry *e)
{
    entry **link = &buckets[e->hash % BUCKETS];
    while (*link != e)
        link = &(*link)->bucket_next;
    *link = e->bucket_next;
    tg_lru_unlink(&recency, &e->lru);
    assert(used_bytes >= e->charge);
    used_bytes -= e->charge;
    free(e->key);
    free(e->text);
    free(e);
}

char *tg_header_cache_get(const char *sha256, const char *path, size_t *len)
{
    uint64_t h = hash_key(sha256, path);
    char *copy = NULL;
    pthread_mutex_lock(&cache_lock);
    for (entry *e = buckets[h % BUCKETS]; e; e = e->bucket_next) {
        if (e->hash != h || !key_equals(e, sha256, path))
            continue;
        copy = malloc(e->text_len + 1);
        if (copy) {
            memcpy(copy, e->text, e->text_len + 1);
            *len = e->text_len;
        }
        tg_lru_unlink(&recency, &e->lru);
        tg_lru_push_newest(&recency, &e->lru);
        break;
    }
    pthread_mutex_unlock(&cache_lock);
    return copy;
}

void tg_header_cache_put(const char *sha256, const char *path, const char *text, size_t len)
{
    size_t key_len = strlen(sha256) + 1 + strlen(path);
    size_t charge = sizeof(entry) + key_len + 1 + len + 1;
    if (charge > TG_HEADER_CACHE_BYTES / 8)
        return;
    entry *e = calloc(1, sizeof *e);
    char *key = malloc(key_len + 1);
    char *copy = malloc(len + 1);
    if (e == NULL || key == NULL || copy == NULL) {
        free(e);
        free(key);
        free(copy);
        return;
    }
    memcpy(key, sha256, strlen(sha256));
    key[strlen(sha256)] = '\n';
    memcpy(key + strlen(sha256) + 1, path, strlen(path) + 1);
    memcpy(copy, text, len);
    copy[len] = '\0';
    e->hash = hash_key(sha256, path);
    e->key = key;
    e->text = copy;
    e->text_len = len;
    e->charge = charge;
    pthread_mutex_lock(&cache_lock);
    for (entry *old = buckets[e->hash % BUCKETS]; old; old = old->bucket_next) {
        if (old->hash == e->hash && key_equals(old, sha256, path)) {
            remove_entry(old); /* a concurrent miss rendered it too */
            break;
        }
    }
    while (used_bytes + charge > TG_HEADER_CACHE_BYTES && recency.oldest)
        remove_entry((entry *)recency.oldest);
    e->bucket_next = buckets[e->hash % BUCKETS];
    buckets[e->hash % BUCKETS] = e;
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
