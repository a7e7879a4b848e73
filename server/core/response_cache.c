/* Ready responses for immutable reads (see response_cache.h): SHARDS shards, each a
 * chained hash table over its own recency list and mutex. A response is queued
 * while its shard's mutex is held, so an eviction cannot free it between the find
 * and libmicrohttpd's own reference (MHD_queue_response takes one; the cache holds
 * one per entry; MHD_destroy_response drops ours). */
#include "response_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SHARDS 16
#define BUCKETS 256 /* per shard, chains */

typedef struct entry {
    struct entry *next_in_bucket;
    struct entry *newer, *older; /* recency list */
    uint64_t hash;
    uint64_t generation;
    uint64_t born; /* monotonic seconds */
    struct MHD_Response *response;
    unsigned status;
    size_t body_len;
    size_t charge;
    char key[]; /* NUL-terminated */
} entry;

typedef struct shard {
    pthread_mutex_t lock;
    entry *buckets[BUCKETS];
    entry *newest, *oldest;
    size_t used, budget;
    uint64_t hits, misses, entries;
} shard;

struct tg_response_cache {
    shard shards[SHARDS];
    unsigned ttl_seconds;
    /* atomic: deletes count in the high 32 bits (every entry), publishes and alias
     * moves in the low 32 (entries under moving keys only) */
    uint64_t generation;
};

#define DELETES(generation) ((generation) >> 32)

/* An entry kept under a moving key (tg_response_cache_moving_key): it starts with the
 * separator, which no plain key does (its first part, the kind, is never empty). */
static bool is_moving(const char *key)
{
    return key[0] == '\n';
}

static uint64_t hash_key(const char *key)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        h ^= *p;
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

static uint64_t now_seconds(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec;
}

tg_response_cache *tg_response_cache_create(size_t bytes, unsigned ttl_seconds)
{
    tg_response_cache *cache = calloc(1, sizeof *cache);
    if (cache == NULL)
        return NULL;
    cache->ttl_seconds = ttl_seconds;
    for (int s = 0; s < SHARDS; s++) {
        if (pthread_mutex_init(&cache->shards[s].lock, NULL) != 0) {
            for (int k = 0; k < s; k++)
                pthread_mutex_destroy(&cache->shards[k].lock);
            free(cache);
            return NULL;
        }
        cache->shards[s].budget = bytes / SHARDS;
    }
    return cache;
}

/* Unlinks e from its bucket and the recency list, drops its reference; lock held. */
static void remove_entry(shard *sh, entry *e)
{
    entry **at = &sh->buckets[e->hash % BUCKETS];
    while (*at != NULL && *at != e)
        at = &(*at)->next_in_bucket;
    if (*at == e)
        *at = e->next_in_bucket;
    if (e->newer)
        e->newer->older = e->older;
    else
        sh->newest = e->older;
    if (e->older)
        e->older->newer = e->newer;
    else
        sh->oldest = e->newer;
    sh->used -= e->charge;
    sh->entries--;
    MHD_destroy_response(e->response);
    free(e);
}

void tg_response_cache_destroy(tg_response_cache *cache)
{
    if (cache == NULL)
        return;
    for (int s = 0; s < SHARDS; s++) {
        shard *sh = &cache->shards[s];
        while (sh->oldest != NULL)
            remove_entry(sh, sh->oldest);
        pthread_mutex_destroy(&sh->lock);
    }
    free(cache);
}

uint64_t tg_response_cache_generation(const tg_response_cache *cache)
{
    return cache ? __atomic_load_n(&cache->generation, __ATOMIC_ACQUIRE) : 0;
}

void tg_response_cache_invalidate(tg_response_cache *cache)
{
    if (cache != NULL)
        __atomic_fetch_add(&cache->generation, (uint64_t)1 << 32, __ATOMIC_ACQ_REL);
}

void tg_response_cache_invalidate_moving(tg_response_cache *cache)
{
    /* a carry out of the low half only adds a delete: every entry goes, never a stale one kept */
    if (cache != NULL)
        __atomic_fetch_add(&cache->generation, 1, __ATOMIC_ACQ_REL);
}

/* Whether an entry made (or built from reads that began) at generation made still holds
 * at generation now. */
static bool same_generation(const char *key, uint64_t made, uint64_t now)
{
    return is_moving(key) ? made == now : DELETES(made) == DELETES(now);
}

static entry *find(shard *sh, uint64_t hash, const char *key)
{
    for (entry *e = sh->buckets[hash % BUCKETS]; e != NULL; e = e->next_in_bucket)
        if (e->hash == hash && strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

static void make_newest(shard *sh, entry *e)
{
    if (sh->newest == e)
        return;
    /* unlink */
    if (e->newer)
        e->newer->older = e->older;
    if (e->older)
        e->older->newer = e->newer;
    else
        sh->oldest = e->newer;
    /* push */
    e->older = sh->newest;
    e->newer = NULL;
    if (sh->newest)
        sh->newest->newer = e;
    sh->newest = e;
    if (sh->oldest == NULL)
        sh->oldest = e;
}

static bool fresh(const tg_response_cache *cache, const entry *e, uint64_t generation)
{
    if (!same_generation(e->key, e->generation, generation))
        return false;
    unsigned ttl = cache->ttl_seconds;
    if (is_moving(e->key) && (ttl == 0 || ttl > TG_RESPONSE_CACHE_MOVING_SECONDS))
        ttl = TG_RESPONSE_CACHE_MOVING_SECONDS;
    return ttl == 0 || now_seconds() - e->born < ttl;
}

bool tg_response_cache_answer(tg_response_cache *cache, tg_request *req, const char *key)
{
    if (cache == NULL)
        return false;
    uint64_t hash = hash_key(key);
    shard *sh = &cache->shards[hash % SHARDS];
    uint64_t generation = tg_response_cache_generation(cache);
    bool answered = false;
    pthread_mutex_lock(&sh->lock);
    entry *e = find(sh, hash, key);
    if (e != NULL && !fresh(cache, e, generation)) {
        remove_entry(sh, e);
        e = NULL;
    }
    if (e != NULL) {
        make_newest(sh, e);
        /* queued under the lock: the entry's reference keeps it alive until MHD has its own */
        answered = tg_respond_shared(req, e->status, e->response, e->body_len);
    }
    if (answered)
        sh->hits++;
    else
        sh->misses++;
    pthread_mutex_unlock(&sh->lock);
    return answered;
}

/* Keeps response (the caller's reference) under key; lock not held. */
static void keep(tg_response_cache *cache, const char *key, uint64_t generation, unsigned status,
                 struct MHD_Response *response, uint64_t body_len, size_t body_charge)
{
    uint64_t hash = hash_key(key);
    shard *sh = &cache->shards[hash % SHARDS];
    size_t key_len = strlen(key);
    size_t charge = sizeof(entry) + key_len + 1 + body_charge + 512; /* 512: MHD's headers */
    entry *e = charge <= sh->budget / 8 ? malloc(sizeof *e + key_len + 1) : NULL;
    if (e == NULL || MHD_add_response_header(response, "Cache-Control", "no-store") != MHD_YES) {
        MHD_destroy_response(response);
        free(e);
        return;
    }
    *e = (entry){.hash = hash,
                 .generation = generation,
                 .born = now_seconds(),
                 .response = response,
                 .status = status,
                 .body_len = body_len,
                 .charge = charge};
    memcpy(e->key, key, key_len + 1);
    pthread_mutex_lock(&sh->lock);
    if (!same_generation(key, generation, tg_response_cache_generation(cache))) {
        /* a delete (or, for a moving key, a publish or an alias move) happened while the
         * answer was being built: it may be stale */
        pthread_mutex_unlock(&sh->lock);
        MHD_destroy_response(response);
        free(e);
        return;
    }
    entry *old = find(sh, hash, key);
    if (old != NULL)
        remove_entry(sh, old);
    while (sh->oldest != NULL && sh->used + charge > sh->budget)
        /* remove_entry moves oldest on: the analyzer cannot follow the list's ends */
        /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc) */
        remove_entry(sh, sh->oldest);
    e->next_in_bucket = sh->buckets[hash % BUCKETS];
    sh->buckets[hash % BUCKETS] = e;
    e->older = sh->newest;
    if (sh->newest)
        sh->newest->newer = e;
    sh->newest = e;
    if (sh->oldest == NULL)
        sh->oldest = e;
    sh->used += charge;
    sh->entries++;
    pthread_mutex_unlock(&sh->lock);
}

void tg_response_cache_put(tg_response_cache *cache, const char *key, uint64_t generation,
                           unsigned status, const void *body, size_t len,
                           const char *const *headers)
{
    if (cache == NULL)
        return;
    shard *sh = &cache->shards[hash_key(key) % SHARDS];
    if (len + strlen(key) + sizeof(entry) + 512 > sh->budget / 8)
        return;
    void *copy = malloc(len > 0 ? len : 1);
    if (copy == NULL)
        return;
    memcpy(copy, body, len);
    struct MHD_Response *response =
        MHD_create_response_from_buffer(len, copy, MHD_RESPMEM_MUST_FREE);
    if (response == NULL) {
        free(copy);
        return;
    }
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i += 2)
        if (headers[i + 1] != NULL &&
            MHD_add_response_header(response, headers[i], headers[i + 1]) != MHD_YES) {
            MHD_destroy_response(response); /* frees copy */
            return;
        }
    keep(cache, key, generation, status, response, len, len);
}

void tg_response_cache_put_response(tg_response_cache *cache, const char *key, uint64_t generation,
                                    unsigned status, struct MHD_Response *response,
                                    uint64_t body_len)
{
    if (response == NULL)
        return;
    if (cache == NULL) {
        MHD_destroy_response(response);
        return;
    }
    keep(cache, key, generation, status, response, body_len, 0);
}

void tg_response_cache_get_stats(tg_response_cache *cache, tg_response_cache_stats *stats)
{
    *stats = (tg_response_cache_stats){0};
    if (cache == NULL)
        return;
    for (int s = 0; s < SHARDS; s++) {
        shard *sh = &cache->shards[s];
        pthread_mutex_lock(&sh->lock);
        stats->hits += sh->hits;
        stats->misses += sh->misses;
        stats->entries += sh->entries;
        stats->bytes += sh->used;
        pthread_mutex_unlock(&sh->lock);
    }
}

bool tg_response_cache_moving_key(char *out, size_t cap, const char *const *parts, size_t count)
{
    if (cap < 2 || !tg_response_cache_key(out + 1, cap - 1, parts, count))
        return false;
    out[0] = '\n';
    return true;
}

bool tg_response_cache_key(char *out, size_t cap, const char *const *parts, size_t count)
{
    size_t used = 0;
    for (size_t i = 0; i < count; i++) {
        const char *p = parts[i] ? parts[i] : "";
        if (strchr(p, '\n') != NULL)
            return false;
        size_t n = strlen(p);
        if (used + n + 2 > cap)
            return false;
        if (i > 0)
            out[used++] = '\n';
        memcpy(out + used, p, n);
        used += n;
    }
    if (cap == 0)
        return false;
    out[used] = '\0';
    return true;
}
