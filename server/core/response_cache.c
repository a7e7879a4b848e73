/* Ready responses for immutable reads (see response_cache.h): an instance of the
 * cache core (cache.h) in SHARDS shards, whose entry holds one libmicrohttpd
 * response. A response is queued while its shard's mutex is held (the core's
 * visit), so an eviction cannot free it between the find and libmicrohttpd's own
 * reference (MHD_queue_response takes one; the cache holds one per entry;
 * MHD_destroy_response drops ours). What is this file's own: the generations and
 * the TTL that decide whether an entry may still be served. */
#include "response_cache.h"
#include "cache.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SHARDS 16
#define BUCKETS 256     /* per shard, chains */
#define MHD_HEADERS 512 /* charged for what libmicrohttpd holds beside the body */

typedef struct entry {
    tg_cache_entry core; /* first: the cache core's part (the key is core.key) */
    uint64_t generation;
    uint64_t born; /* monotonic seconds */
    struct MHD_Response *response;
    unsigned status;
    size_t body_len;
} entry;

struct tg_response_cache {
    tg_cache *entries;
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

static uint64_t now_seconds(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec;
}

static void destroy_entry(tg_cache_entry *e)
{
    MHD_destroy_response(((entry *)e)->response);
}

tg_response_cache *tg_response_cache_create(size_t bytes, unsigned ttl_seconds)
{
    tg_response_cache *cache = calloc(1, sizeof *cache);
    tg_cache_config config = {.bytes = bytes,
                              .entry_share = 8,
                              .shards = SHARDS,
                              .buckets = BUCKETS,
                              .entry_size = sizeof(entry),
                              .destroy = destroy_entry};
    if (cache == NULL || (cache->entries = tg_cache_create(&config)) == NULL) {
        free(cache);
        return NULL;
    }
    cache->ttl_seconds = ttl_seconds;
    return cache;
}

void tg_response_cache_destroy(tg_response_cache *cache)
{
    if (cache == NULL)
        return;
    tg_cache_destroy(cache->entries);
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

static bool fresh(const tg_response_cache *cache, const entry *e, uint64_t generation)
{
    if (!same_generation(e->core.key, e->generation, generation))
        return false;
    unsigned ttl = cache->ttl_seconds;
    if (is_moving(e->core.key) && (ttl == 0 || ttl > TG_RESPONSE_CACHE_MOVING_SECONDS))
        ttl = TG_RESPONSE_CACHE_MOVING_SECONDS;
    return ttl == 0 || now_seconds() - e->born < ttl;
}

typedef struct answering {
    const tg_response_cache *cache;
    uint64_t generation;
    tg_response_send send;
    void *ctx;
} answering;

/* The core's visitor (under the shard's lock): sends the entry when it still holds. */
static tg_cache_use send_entry(tg_cache_entry *core, void *arg)
{
    const entry *e = (const entry *)core;
    const answering *a = arg;
    if (!fresh(a->cache, e, a->generation))
        return TG_CACHE_STALE;
    /* queued under the lock: the entry's reference keeps it alive until MHD has its own */
    return a->send(a->ctx, e->status, e->response, e->body_len) ? TG_CACHE_HIT : TG_CACHE_MISS;
}

bool tg_response_cache_answer(tg_response_cache *cache, const char *key, tg_response_send send,
                              void *ctx)
{
    if (cache == NULL)
        return false;
    answering a = {cache, tg_response_cache_generation(cache), send, ctx};
    return tg_cache_visit(cache->entries, key, send_entry, &a);
}

/* Keeps response (the caller's reference) under key. */
static void keep(tg_response_cache *cache, const char *key, uint64_t generation, unsigned status,
                 struct MHD_Response *response, uint64_t body_len, size_t body_charge)
{
    size_t charge = sizeof(entry) + strlen(key) + 1 + body_charge + MHD_HEADERS;
    entry *e = charge <= tg_cache_entry_bound(cache->entries)
                   ? (entry *)tg_cache_entry_new(cache->entries, key)
                   : NULL;
    if (e == NULL || MHD_add_response_header(response, "Cache-Control", "no-store") != MHD_YES ||
        /* a delete (or, for a moving key, a publish or an alias move) happened while the
         * answer was being built: it may be stale (one after this check is caught by
         * the entry's generation when it is read) */
        !same_generation(key, generation, tg_response_cache_generation(cache))) {
        MHD_destroy_response(response);
        free(e);
        return;
    }
    e->generation = generation;
    e->born = now_seconds();
    e->response = response;
    e->status = status;
    e->body_len = body_len;
    tg_cache_put(cache->entries, &e->core, charge);
}

void tg_response_cache_put(tg_response_cache *cache, const char *key, uint64_t generation,
                           unsigned status, const void *body, size_t len,
                           const char *const *headers)
{
    if (cache == NULL ||
        len + strlen(key) + sizeof(entry) + MHD_HEADERS > tg_cache_entry_bound(cache->entries))
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
    tg_cache_stats s;
    tg_cache_stats_get(cache->entries, &s);
    *stats = (tg_response_cache_stats){
        .hits = s.hits, .misses = s.misses, .entries = s.entries, .bytes = s.bytes};
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
