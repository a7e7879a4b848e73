/* The one cache core of the server's in-memory caches (index_cache.c,
 * parsed_header_cache.c, header_cache.c, response_cache.c): entries found by a
 * string key in a chained hash table, a least-recently-used list, a byte budget
 * (and an optional entry bound) with eviction, single-flight loading, reference
 * counts on entries in use, and clear. An instance is a tg_cache made with a
 * tg_cache_config and held by whoever owns it (no statics): each cache keeps only
 * what is its own (the key's shape, what an entry holds, how it is loaded).
 *
 * An instance's entry is its own struct whose first member is a tg_cache_entry;
 * the core allocates it (config.entry_size bytes, zeroed, the key copied after it)
 * and frees it after config.destroy has freed what it holds. An entry is
 *   loading   in the table, not on the list: its loader runs, others wait for it;
 *   kept      in the table and on the list, charged against the bounds;
 *   detached  in neither (served and not kept, failed, evicted or replaced while
 *             held, cleared while held): freed when its last holder releases it.
 * Eviction removes kept entries nobody holds, oldest first: an entry held while
 * the cache is over its bounds leaves when released.
 *
 * Sharding: config.shards mutexes, each over its own table, list and share of the
 * bounds; a key's shard is fixed by its hash. Locks are held for table and list
 * work only: a load runs unlocked, and entries leave memory after the unlock. */
#ifndef TG_CACHE_H
#define TG_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lru.h"

typedef struct tg_cache tg_cache;

typedef struct tg_cache_entry {
    tg_lru_node lru; /* first: a kept entry is its node */
    struct tg_cache_entry *next_in_bucket;
    uint64_t hash;
    const char *key; /* NUL-terminated, in the entry's allocation */
    size_t charge;   /* bytes counted against the budget while kept */
    unsigned refs;
    bool loading, kept;
    bool failed; /* its load failed: the instance's fields say why; never kept */
} tg_cache_entry;

typedef struct tg_cache_config {
    size_t bytes;       /* the byte budget, split evenly over the shards */
    size_t entries;     /* the entry bound, split likewise; 0: none */
    size_t entry_share; /* an entry may take at most a shard's bytes / entry_share */
    unsigned shards;    /* 0 counts as 1 */
    unsigned buckets;   /* hash chains per shard; 0 counts as 1 */
    unsigned loads;     /* loads running at once per shard; 0: no bound */
    size_t entry_size;  /* of the instance's entry (which begins with a tg_cache_entry) */
    /* frees what an entry holds (not the entry itself); NULL: nothing */
    void (*destroy)(tg_cache_entry *e);
} tg_cache_config;

/* NULL when out of memory. */
tg_cache *tg_cache_create(const tg_cache_config *config);
/* Frees every entry; none may be held. NULL is ignored. */
void tg_cache_destroy(tg_cache *cache);

/* The largest charge an entry may have to be kept (its shard's bytes / entry_share). */
size_t tg_cache_entry_bound(const tg_cache *cache);

/* ---- single-flight loading ---- */

typedef enum tg_cache_load {
    TG_CACHE_KEEP,  /* keep the entry (charged *charge; one above the entry bound is served only) */
    TG_CACHE_SERVE, /* serve it to its loader and waiters, then free it */
    TG_CACHE_FAILED, /* the same, marked failed: a failed load is never kept */
} tg_cache_load;

/* Fills the loading entry e (unlocked; e->key is its key) and sets *charge. */
typedef tg_cache_load (*tg_cache_loader)(tg_cache_entry *e, void *arg, size_t *charge);

/* The entry under key, held: kept, or loaded now by load(e, arg), once for all the
 * threads asking for it meanwhile (they wait and share its result, a failure too).
 * NULL when out of memory. The caller releases it. */
tg_cache_entry *tg_cache_acquire(tg_cache *cache, const char *key, tg_cache_loader load, void *arg);
/* Gives back a reference from tg_cache_acquire. */
void tg_cache_release(tg_cache *cache, tg_cache_entry *e);

/* ---- ready-made entries ---- */

typedef enum tg_cache_use {
    TG_CACHE_HIT,   /* used: counted a hit, made the newest */
    TG_CACHE_MISS,  /* not used: counted a miss, left as it is */
    TG_CACHE_STALE, /* not used and no longer good: counted a miss, removed */
} tg_cache_use;

/* Calls use(e, arg) on the kept entry under key while its shard's lock is held (so
 * use must be short and never take the lock again). True when use answered HIT;
 * a key not kept is a miss. */
bool tg_cache_visit(tg_cache *cache, const char *key,
                    tg_cache_use (*use)(tg_cache_entry *e, void *arg), void *arg);

/* A new entry for key (zeroed, not in the cache), or NULL when out of memory. */
tg_cache_entry *tg_cache_entry_new(const tg_cache *cache, const char *key);
/* Frees an entry tg_cache_put did not take (config.destroy, then the entry). */
void tg_cache_entry_free(const tg_cache *cache, tg_cache_entry *e);
/* Keeps e (from tg_cache_entry_new) charged `charge`, in place of any entry under
 * its key, evicting the oldest until the bounds hold. False, e freed, when the
 * charge is above the entry bound. */
bool tg_cache_put(tg_cache *cache, tg_cache_entry *e, size_t charge);

/* ---- the rest ---- */

/* Drops every kept entry (those held are freed when released); counters stay. */
void tg_cache_clear(tg_cache *cache);

typedef struct tg_cache_stats {
    size_t entries;     /* kept */
    size_t bytes;       /* charged by the kept entries */
    size_t in_use;      /* entries (kept or not) held now */
    uint64_t hits;      /* acquires of a kept or loading entry that did not fail; visits used */
    uint64_t misses;    /* visits not used */
    uint64_t loads;     /* loads run, successful or not */
    uint64_t not_kept;  /* loads served and then freed */
    uint64_t failures;  /* loads that failed */
    uint64_t evictions; /* kept entries dropped for the bounds */
} tg_cache_stats;

/* The counters, summed over the shards. */
void tg_cache_stats_get(tg_cache *cache, tg_cache_stats *out);

#endif
