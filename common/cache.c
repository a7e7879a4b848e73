/* The cache core (see cache.h): per shard a mutex, a condition variable for the
 * threads waiting on a load, a chained hash table, the recency list of lru.h and
 * the counters. Entries that leave the cache while the lock is held are chained on
 * a local list (through their recency node, unused by then) and freed after the
 * unlock, so a lock is never held across a free of a large entry. */
#include "cache.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct shard {
    pthread_mutex_t lock;
    pthread_cond_t loaded; /* signalled when an entry stops loading, or a load ends */
    tg_cache_entry **buckets;
    tg_lru recency;
    size_t bytes, entries; /* budget */
    unsigned loads_running;
    /* Invariant: stats.entries and stats.bytes are the count and the sum of charges
     * of the kept entries; stats.in_use counts the entries with refs > 0. */
    tg_cache_stats stats;
} shard;

struct tg_cache {
    tg_cache_config config;
    unsigned shard_count;
    shard shards[];
};

/* FNV-1a, its high bits folded in: the shard takes the low bits, the bucket the next. */
static uint64_t hash_key(const char *key)
{
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return h ^ (h >> 29);
}

static shard *shard_of(tg_cache *cache, uint64_t hash)
{
    return &cache->shards[hash % cache->shard_count];
}

static tg_cache_entry **bucket_of(const tg_cache *cache, shard *sh, uint64_t hash)
{
    return &sh->buckets[(hash / cache->shard_count) % cache->config.buckets];
}

tg_cache *tg_cache_create(const tg_cache_config *config)
{
    unsigned count = config->shards > 0 ? config->shards : 1;
    tg_cache *cache = calloc(1, sizeof *cache + count * sizeof(shard));
    if (cache == NULL)
        return NULL;
    cache->config = *config;
    cache->config.buckets = config->buckets > 0 ? config->buckets : 1;
    cache->config.entry_share = config->entry_share > 0 ? config->entry_share : 1;
    cache->shard_count = count;
    for (unsigned s = 0; s < count; s++) {
        shard *sh = &cache->shards[s];
        sh->bytes = config->bytes / count;
        sh->entries = config->entries > 0 ? (config->entries + count - 1) / count : SIZE_MAX;
        sh->buckets = calloc(cache->config.buckets, sizeof(tg_cache_entry *));
        if (sh->buckets == NULL || pthread_mutex_init(&sh->lock, NULL) != 0) {
            free(sh->buckets);
            cache->shard_count = s;
            tg_cache_destroy(cache);
            return NULL;
        }
        pthread_cond_init(&sh->loaded, NULL);
    }
    return cache;
}

size_t tg_cache_entry_bound(const tg_cache *cache)
{
    return cache->shards[0].bytes / cache->config.entry_share;
}

/* ---- entries (everything below runs under the shard's lock unless it says not) ---- */

tg_cache_entry *tg_cache_entry_new(const tg_cache *cache, const char *key)
{
    size_t len = strlen(key);
    tg_cache_entry *e = calloc(1, cache->config.entry_size + len + 1);
    if (e == NULL)
        return NULL;
    char *copy = (char *)e + cache->config.entry_size;
    memcpy(copy, key, len + 1);
    e->key = copy;
    e->hash = hash_key(copy);
    return e;
}

void tg_cache_entry_free(const tg_cache *cache, tg_cache_entry *e)
{
    if (cache->config.destroy != NULL)
        cache->config.destroy(e);
    free(e);
}

/* Puts e on the list of entries to free after the unlock. */
static void defer_free(tg_cache_entry **doomed, tg_cache_entry *e)
{
    e->lru.older = (tg_lru_node *)*doomed;
    *doomed = e;
}

/* Frees the entries defer_free chained (lock not held). */
static void free_doomed(const tg_cache *cache, tg_cache_entry *doomed)
{
    while (doomed != NULL) {
        tg_cache_entry *next = (tg_cache_entry *)doomed->lru.older;
        tg_cache_entry_free(cache, doomed);
        doomed = next;
    }
}

static tg_cache_entry *find(const tg_cache *cache, shard *sh, uint64_t hash, const char *key)
{
    for (tg_cache_entry *e = *bucket_of(cache, sh, hash); e != NULL; e = e->next_in_bucket)
        if (e->hash == hash && strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

static void add_to_table(const tg_cache *cache, shard *sh, tg_cache_entry *e)
{
    tg_cache_entry **bucket = bucket_of(cache, sh, e->hash);
    e->next_in_bucket = *bucket;
    *bucket = e;
}

static void remove_from_table(const tg_cache *cache, shard *sh, tg_cache_entry *e)
{
    tg_cache_entry **link = bucket_of(cache, sh, e->hash);
    while (*link != e)
        link = &(*link)->next_in_bucket;
    *link = e->next_in_bucket;
    e->next_in_bucket = NULL;
}

/* Takes a kept entry out of the table and the list; frees it (after the unlock)
 * unless someone holds it. */
static void drop_kept(const tg_cache *cache, shard *sh, tg_cache_entry *e, tg_cache_entry **doomed)
{
    assert(e->kept && sh->stats.entries > 0 && sh->stats.bytes >= e->charge);
    remove_from_table(cache, sh, e);
    tg_lru_unlink(&sh->recency, &e->lru);
    e->kept = false;
    sh->stats.entries--;
    sh->stats.bytes -= e->charge;
    if (e->refs == 0)
        defer_free(doomed, e);
}

/* Evicts kept entries nobody holds, oldest first, until both bounds hold (or only
 * entries in use are left over them). */
static void trim(const tg_cache *cache, shard *sh, tg_cache_entry **doomed)
{
    tg_lru_node *n = sh->recency.oldest;
    while (n != NULL && (sh->stats.entries > sh->entries || sh->stats.bytes > sh->bytes)) {
        tg_cache_entry *e = (tg_cache_entry *)n;
        n = n->newer;
        if (e->refs > 0)
            continue;
        drop_kept(cache, sh, e, doomed);
        sh->stats.evictions++;
    }
}

/* Keeps e (in the table already) charged `charge` as the newest entry. */
static void keep(const tg_cache *cache, shard *sh, tg_cache_entry *e, size_t charge,
                 tg_cache_entry **doomed)
{
    e->charge = charge;
    e->kept = true;
    tg_lru_push_newest(&sh->recency, &e->lru);
    sh->stats.entries++;
    sh->stats.bytes += charge;
    trim(cache, sh, doomed);
}

static void touch(shard *sh, tg_cache_entry *e)
{
    tg_lru_unlink(&sh->recency, &e->lru);
    tg_lru_push_newest(&sh->recency, &e->lru);
}

static void hold(shard *sh, tg_cache_entry *e)
{
    if (e->refs++ == 0)
        sh->stats.in_use++;
}

static void unhold(const tg_cache *cache, shard *sh, tg_cache_entry *e, tg_cache_entry **doomed)
{
    assert(e->refs > 0 && sh->stats.in_use > 0);
    if (--e->refs > 0)
        return;
    sh->stats.in_use--;
    if (e->kept)
        trim(cache, sh, doomed); /* it may have been left over the bounds while in use */
    else if (!e->loading)
        defer_free(doomed, e);
}

/* ---- single-flight loading ---- */

/* Runs the load of e, which the caller holds and which is in the table (called
 * with the lock held, returns with it held). */
static void load(tg_cache *cache, shard *sh, tg_cache_entry *e, tg_cache_loader loader, void *arg,
                 tg_cache_entry **doomed)
{
    while (cache->config.loads > 0 && sh->loads_running >= cache->config.loads)
        pthread_cond_wait(&sh->loaded, &sh->lock);
    sh->loads_running++;
    pthread_mutex_unlock(&sh->lock);
    size_t charge = 0;
    tg_cache_load result = loader(e, arg, &charge);
    pthread_mutex_lock(&sh->lock);
    assert(sh->loads_running > 0 && e->loading && !e->kept && e->refs > 0);
    sh->loads_running--;
    sh->stats.loads++;
    e->loading = false;
    if (result == TG_CACHE_KEEP && charge <= tg_cache_entry_bound(cache)) {
        keep(cache, sh, e, charge, doomed);
    } else {
        remove_from_table(cache, sh, e);
        e->failed = result == TG_CACHE_FAILED;
        if (e->failed)
            sh->stats.failures++;
        else
            sh->stats.not_kept++;
    }
    pthread_cond_broadcast(&sh->loaded);
}

tg_cache_entry *tg_cache_acquire(tg_cache *cache, const char *key, tg_cache_loader loader,
                                 void *arg)
{
    uint64_t hash = hash_key(key);
    shard *sh = shard_of(cache, hash);
    tg_cache_entry *doomed = NULL;
    pthread_mutex_lock(&sh->lock);
    tg_cache_entry *e = find(cache, sh, hash, key);
    if (e != NULL) {
        hold(sh, e); /* so it outlives its load, whatever the load decides */
        while (e->loading)
            pthread_cond_wait(&sh->loaded, &sh->lock);
        if (!e->failed)
            sh->stats.hits++;
        if (e->kept)
            touch(sh, e);
    } else if ((e = tg_cache_entry_new(cache, key)) != NULL) {
        e->loading = true;
        add_to_table(cache, sh, e);
        hold(sh, e);
        load(cache, sh, e, loader, arg, &doomed);
    }
    pthread_mutex_unlock(&sh->lock);
    free_doomed(cache, doomed);
    return e;
}

void tg_cache_release(tg_cache *cache, tg_cache_entry *e)
{
    shard *sh = shard_of(cache, e->hash);
    tg_cache_entry *doomed = NULL;
    pthread_mutex_lock(&sh->lock);
    unhold(cache, sh, e, &doomed);
    pthread_mutex_unlock(&sh->lock);
    free_doomed(cache, doomed);
}

/* ---- ready-made entries ---- */

bool tg_cache_visit(tg_cache *cache, const char *key,
                    tg_cache_use (*use)(tg_cache_entry *e, void *arg), void *arg)
{
    uint64_t hash = hash_key(key);
    shard *sh = shard_of(cache, hash);
    tg_cache_entry *doomed = NULL;
    pthread_mutex_lock(&sh->lock);
    tg_cache_entry *e = find(cache, sh, hash, key);
    tg_cache_use used = e != NULL && e->kept ? use(e, arg) : TG_CACHE_MISS;
    if (used == TG_CACHE_HIT) {
        touch(sh, e);
        sh->stats.hits++;
    } else {
        sh->stats.misses++;
        if (used == TG_CACHE_STALE)
            drop_kept(cache, sh, e, &doomed);
    }
    pthread_mutex_unlock(&sh->lock);
    free_doomed(cache, doomed);
    return used == TG_CACHE_HIT;
}

bool tg_cache_put(tg_cache *cache, tg_cache_entry *e, size_t charge)
{
    if (charge > tg_cache_entry_bound(cache)) {
        tg_cache_entry_free(cache, e);
        return false;
    }
    shard *sh = shard_of(cache, e->hash);
    tg_cache_entry *doomed = NULL;
    pthread_mutex_lock(&sh->lock);
    tg_cache_entry *old = find(cache, sh, e->hash, e->key);
    assert(old == NULL || old->kept); /* a cache puts or loads, never both */
    if (old != NULL)
        drop_kept(cache, sh, old, &doomed); /* a concurrent miss built it too */
    add_to_table(cache, sh, e);
    keep(cache, sh, e, charge, &doomed);
    pthread_mutex_unlock(&sh->lock);
    free_doomed(cache, doomed);
    return true;
}

/* ---- the rest ---- */

void tg_cache_clear(tg_cache *cache)
{
    for (unsigned s = 0; s < cache->shard_count; s++) {
        shard *sh = &cache->shards[s];
        tg_cache_entry *doomed = NULL;
        pthread_mutex_lock(&sh->lock);
        while (sh->recency.oldest != NULL)
            drop_kept(cache, sh, (tg_cache_entry *)sh->recency.oldest, &doomed);
        pthread_mutex_unlock(&sh->lock);
        free_doomed(cache, doomed);
    }
}

void tg_cache_destroy(tg_cache *cache)
{
    if (cache == NULL)
        return;
    tg_cache_clear(cache);
    for (unsigned s = 0; s < cache->shard_count; s++) {
        shard *sh = &cache->shards[s];
        assert(sh->stats.in_use == 0);
        pthread_mutex_destroy(&sh->lock);
        pthread_cond_destroy(&sh->loaded);
        free(sh->buckets);
    }
    free(cache);
}

/* Checks the invariant of shard's stats by walking the list (O(entries)). */
static void check_stats(const shard *sh)
{
    size_t entries = 0, bytes = 0;
    for (const tg_lru_node *n = sh->recency.newest; n != NULL; n = n->older) {
        const tg_cache_entry *e = (const tg_cache_entry *)n;
        assert(e->kept && !e->loading && !e->failed);
        entries++;
        bytes += e->charge;
    }
    assert(sh->stats.entries == entries && sh->stats.bytes == bytes);
    (void)entries;
    (void)bytes;
}

void tg_cache_stats_get(tg_cache *cache, tg_cache_stats *out)
{
    *out = (tg_cache_stats){0};
    for (unsigned s = 0; s < cache->shard_count; s++) {
        shard *sh = &cache->shards[s];
        pthread_mutex_lock(&sh->lock);
        check_stats(sh);
        out->entries += sh->stats.entries;
        out->bytes += sh->stats.bytes;
        out->in_use += sh->stats.in_use;
        out->hits += sh->stats.hits;
        out->misses += sh->stats.misses;
        out->loads += sh->stats.loads;
        out->not_kept += sh->stats.not_kept;
        out->failures += sh->stats.failures;
        out->evictions += sh->stats.evictions;
        pthread_mutex_unlock(&sh->lock);
    }
}
