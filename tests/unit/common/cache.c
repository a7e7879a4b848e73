/* Unit tests for common/cache.c, the cache core: the byte budget and the entry bound
 * with least-recently-used eviction (a visit or an acquire refreshing an entry), the
 * entry bound on one charge, a put replacing an entry, a stale visit removing it,
 * single-flight loading with threads (one load per key, the waiters share its result),
 * a failed load shared and not kept, a load served and not kept, reference counts
 * keeping an entry alive through eviction and clear until its release, and shards
 * (run under ASan+UBSan by make test, which sees a use after free). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "test.h"

typedef struct item {
    tg_cache_entry core; /* first */
    int *value;          /* malloc'd: ASan sees it read after it was freed */
} item;

static unsigned destroyed; /* destroy calls, all caches */

static void destroy_item(tg_cache_entry *e)
{
    free(((item *)e)->value);
    __atomic_fetch_add(&destroyed, 1, __ATOMIC_RELAXED);
}

static tg_cache *make(size_t bytes, size_t entries, unsigned shards, unsigned loads)
{
    tg_cache_config config = {.bytes = bytes,
                              .entries = entries,
                              .entry_share = 2,
                              .shards = shards,
                              .buckets = 8, /* small: chains are walked */
                              .loads = loads,
                              .entry_size = sizeof(item),
                              .destroy = destroy_item};
    tg_cache *cache = tg_cache_create(&config);
    CHECK(cache != NULL);
    return cache;
}

/* Puts key with value v charged `charge`; whether it was kept. */
static bool put(tg_cache *cache, const char *key, int v, size_t charge)
{
    item *e = (item *)tg_cache_entry_new(cache, key);
    CHECK(e != NULL);
    e->value = malloc(sizeof *e->value);
    *e->value = v;
    return tg_cache_put(cache, &e->core, charge);
}

static tg_cache_use read_value(tg_cache_entry *e, void *arg)
{
    *(int *)arg = *((item *)e)->value;
    return TG_CACHE_HIT;
}

/* The value kept under key, or -1. */
static int get(tg_cache *cache, const char *key)
{
    int v = -1;
    return tg_cache_visit(cache, key, read_value, &v) ? v : -1;
}

static tg_cache_stats stats_of(tg_cache *cache)
{
    tg_cache_stats s;
    tg_cache_stats_get(cache, &s);
    return s;
}

TEST(budget_and_eviction_order)
{
    tg_cache *cache = make(100, 0, 1, 0); /* an entry may take 50 */
    CHECK(tg_cache_entry_bound(cache) == 50);
    CHECK(put(cache, "a", 1, 30));
    CHECK(put(cache, "b", 2, 30));
    CHECK(put(cache, "c", 3, 30));
    CHECK_EQ_U64(stats_of(cache).bytes, 90);
    CHECK_EQ_U64(get(cache, "a"), 1); /* a is the newest now: b is the oldest */
    CHECK(put(cache, "d", 4, 30));
    CHECK_EQ_U64(get(cache, "b"), (uint64_t)-1);
    CHECK_EQ_U64(get(cache, "a"), 1);
    CHECK_EQ_U64(get(cache, "c"), 3);
    CHECK_EQ_U64(get(cache, "d"), 4);
    /* two go for one of 50: the least recent, a then c */
    CHECK(put(cache, "e", 5, 50));
    CHECK_EQ_U64(get(cache, "a"), (uint64_t)-1);
    CHECK_EQ_U64(get(cache, "c"), (uint64_t)-1);
    CHECK_EQ_U64(get(cache, "d"), 4);
    CHECK_EQ_U64(get(cache, "e"), 5);
    tg_cache_stats s = stats_of(cache);
    CHECK_EQ_U64(s.entries, 2);
    CHECK_EQ_U64(s.bytes, 80);
    CHECK_EQ_U64(s.evictions, 3);
    /* over the entry bound: not kept, freed */
    unsigned before = destroyed;
    CHECK(!put(cache, "f", 6, 51));
    CHECK_EQ_U64(destroyed, before + 1);
    CHECK_EQ_U64(get(cache, "f"), (uint64_t)-1);
    /* a second put replaces the first */
    CHECK(put(cache, "d", 40, 10));
    CHECK_EQ_U64(get(cache, "d"), 40);
    CHECK_EQ_U64(stats_of(cache).bytes, 60);
    tg_cache_destroy(cache);
}

TEST(entry_bound)
{
    tg_cache *cache = make(1000, 2, 1, 0);
    CHECK(put(cache, "a", 1, 1));
    CHECK(put(cache, "b", 2, 1));
    CHECK(put(cache, "c", 3, 1));
    CHECK_EQ_U64(stats_of(cache).entries, 2);
    CHECK_EQ_U64(get(cache, "a"), (uint64_t)-1);
    CHECK_EQ_U64(get(cache, "b"), 2);
    tg_cache_destroy(cache);
}

static tg_cache_use stale(tg_cache_entry *e, void *arg)
{
    (void)e;
    (void)arg;
    return TG_CACHE_STALE;
}

static tg_cache_use unused(tg_cache_entry *e, void *arg)
{
    (void)e;
    (void)arg;
    return TG_CACHE_MISS;
}

TEST(visits)
{
    tg_cache *cache = make(1000, 0, 1, 0);
    CHECK(put(cache, "a", 1, 10));
    CHECK(!tg_cache_visit(cache, "a", unused, NULL)); /* a miss that keeps it */
    CHECK_EQ_U64(get(cache, "a"), 1);
    CHECK(!tg_cache_visit(cache, "a", stale, NULL)); /* a miss that removes it */
    CHECK_EQ_U64(get(cache, "a"), (uint64_t)-1);
    tg_cache_stats s = stats_of(cache);
    CHECK_EQ_U64(s.hits, 1);
    CHECK_EQ_U64(s.misses, 3);
    CHECK_EQ_U64(s.entries, 0);
    CHECK_EQ_U64(s.bytes, 0);
    tg_cache_destroy(cache);
}

/* ---- loading ---- */

typedef struct loader {
    tg_cache_load result;
    size_t charge;
    int value;
    unsigned calls;    /* atomic */
    unsigned sleep_us; /* how long a load takes */
} loader;

static tg_cache_load load_item(tg_cache_entry *e, void *arg, size_t *charge)
{
    loader *l = arg;
    __atomic_fetch_add(&l->calls, 1, __ATOMIC_RELAXED);
    if (l->sleep_us > 0)
        usleep(l->sleep_us);
    ((item *)e)->value = malloc(sizeof(int));
    *((item *)e)->value = l->value;
    *charge = l->charge;
    return l->result;
}

static item *acquire(tg_cache *cache, const char *key, loader *l)
{
    return (item *)tg_cache_acquire(cache, key, load_item, l);
}

TEST(loads_once_and_keeps)
{
    tg_cache *cache = make(1000, 0, 1, 0);
    loader l = {TG_CACHE_KEEP, 10, 7, 0, 0};
    item *a = acquire(cache, "k", &l);
    CHECK(a != NULL && !a->core.failed && *a->value == 7);
    item *b = acquire(cache, "k", &l);
    CHECK(b == a);
    CHECK_EQ_U64(l.calls, 1);
    tg_cache_stats s = stats_of(cache);
    CHECK_EQ_U64(s.in_use, 1);
    CHECK_EQ_U64(s.hits, 1);
    CHECK_EQ_U64(s.loads, 1);
    CHECK_EQ_U64(s.entries, 1);
    tg_cache_release(cache, &a->core);
    tg_cache_release(cache, &b->core);
    CHECK_EQ_U64(stats_of(cache).in_use, 0);
    CHECK_EQ_U64(get(cache, "k"), 7); /* a loaded entry is visited like a put one */
    tg_cache_destroy(cache);
}

TEST(failed_load_is_not_kept)
{
    tg_cache *cache = make(1000, 0, 1, 0);
    loader l = {TG_CACHE_FAILED, 0, -5, 0, 0};
    unsigned before = destroyed;
    item *e = acquire(cache, "bad", &l);
    CHECK(e != NULL && e->core.failed && *e->value == -5); /* its error, for the caller */
    tg_cache_release(cache, &e->core);
    CHECK_EQ_U64(destroyed, before + 1);
    e = acquire(cache, "bad", &l); /* tried again */
    CHECK(e != NULL && e->core.failed);
    tg_cache_release(cache, &e->core);
    tg_cache_stats s = stats_of(cache);
    CHECK_EQ_U64(l.calls, 2);
    CHECK_EQ_U64(s.failures, 2);
    CHECK_EQ_U64(s.entries, 0);
    CHECK_EQ_U64(s.hits, 0);
    CHECK_EQ_U64(s.in_use, 0);
    /* served, not kept: a load above the entry bound, or one that says so */
    loader big = {TG_CACHE_KEEP, 501, 1, 0, 0}, once = {TG_CACHE_SERVE, 1, 2, 0, 0};
    e = acquire(cache, "big", &big);
    CHECK(e != NULL && !e->core.failed && *e->value == 1);
    tg_cache_release(cache, &e->core);
    e = acquire(cache, "once", &once);
    CHECK(e != NULL && *e->value == 2);
    tg_cache_release(cache, &e->core);
    s = stats_of(cache);
    CHECK_EQ_U64(s.not_kept, 2);
    CHECK_EQ_U64(s.entries, 0);
    CHECK_EQ_U64(destroyed, before + 4);
    tg_cache_destroy(cache);
}

TEST(a_held_entry_outlives_eviction_and_clear)
{
    tg_cache *cache = make(1000, 1, 1, 0);
    loader l = {TG_CACHE_KEEP, 10, 1, 0, 0};
    item *held = acquire(cache, "a", &l);
    l.value = 2;
    item *b = acquire(cache, "b", &l);
    CHECK_EQ_U64(stats_of(cache).entries, 2); /* over the one-entry bound by what is held */
    unsigned before = destroyed;
    tg_cache_release(cache, &b->core); /* a is the oldest but held: b, the newcomer, goes */
    CHECK_EQ_U64(destroyed, before + 1);
    CHECK_EQ_U64(stats_of(cache).entries, 1);
    CHECK_EQ_U64(*held->value, 1);
    l.value = 3;
    item *c = acquire(cache, "c", &l);
    tg_cache_release(cache, &held->core); /* now a, the oldest and free, goes */
    CHECK_EQ_U64(destroyed, before + 2);
    CHECK_EQ_U64(*c->value, 3);
    tg_cache_release(cache, &c->core); /* c is within the bound: kept */
    CHECK_EQ_U64(destroyed, before + 2);
    tg_cache_stats s = stats_of(cache);
    CHECK_EQ_U64(s.entries, 1);
    CHECK_EQ_U64(s.evictions, 2);
    CHECK_EQ_U64(get(cache, "c"), 3);

    /* cleared while held: readable until released, then freed; a new load meanwhile */
    held = acquire(cache, "c", &l);
    tg_cache_clear(cache);
    CHECK_EQ_U64(stats_of(cache).entries, 0);
    CHECK_EQ_U64(stats_of(cache).bytes, 0);
    CHECK_EQ_U64(destroyed, before + 2);
    CHECK_EQ_U64(*held->value, 3);
    l.value = 4;
    item *fresh = acquire(cache, "c", &l);
    CHECK(fresh != held && *fresh->value == 4);
    tg_cache_release(cache, &fresh->core);
    tg_cache_release(cache, &held->core);
    CHECK_EQ_U64(destroyed, before + 3);
    CHECK_EQ_U64(stats_of(cache).in_use, 0);
    tg_cache_destroy(cache);
    CHECK_EQ_U64(destroyed, before + 4);
}

/* ---- threads ---- */

#define THREADS 8

typedef struct worker {
    tg_cache *cache;
    loader *load;
    const char *key;
    item *got;
} worker;

static pthread_barrier_t start_line;

static void *acquire_one(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(&start_line);
    w->got = acquire(w->cache, w->key, w->load);
    return NULL;
}

/* THREADS threads acquire key at once, through a load of 50 ms; the entries they got. */
static void acquire_together(tg_cache *cache, const char *key, loader *l, worker *workers)
{
    pthread_t threads[THREADS];
    pthread_barrier_init(&start_line, NULL, THREADS);
    for (unsigned t = 0; t < THREADS; t++) {
        workers[t] = (worker){cache, l, key, NULL};
        CHECK(pthread_create(&threads[t], NULL, acquire_one, &workers[t]) == 0);
    }
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    pthread_barrier_destroy(&start_line);
}

TEST(single_flight)
{
    tg_cache *cache = make(1000, 0, 1, 0);
    worker workers[THREADS];
    loader l = {TG_CACHE_KEEP, 10, 9, 0, 50000};
    acquire_together(cache, "k", &l, workers);
    CHECK_EQ_U64(l.calls, 1);
    for (unsigned t = 0; t < THREADS; t++) {
        CHECK(workers[t].got == workers[0].got && *workers[t].got->value == 9);
        tg_cache_release(cache, &workers[t].got->core);
    }
    tg_cache_stats s = stats_of(cache);
    CHECK_EQ_U64(s.loads, 1);
    CHECK_EQ_U64(s.hits, THREADS - 1);
    CHECK_EQ_U64(s.in_use, 0);
    /* a failure is shared with the waiters, then forgotten */
    loader bad = {TG_CACHE_FAILED, 0, -1, 0, 50000};
    unsigned before = destroyed;
    acquire_together(cache, "bad", &bad, workers);
    CHECK_EQ_U64(bad.calls, 1);
    for (unsigned t = 0; t < THREADS; t++) {
        CHECK(workers[t].got == workers[0].got && workers[t].got->core.failed);
        tg_cache_release(cache, &workers[t].got->core);
    }
    CHECK_EQ_U64(destroyed, before + 1);
    CHECK_EQ_U64(stats_of(cache).entries, 1);
    tg_cache_destroy(cache);
}

/* Loads running at once never pass config.loads. */
static unsigned running, most;

static tg_cache_load load_counted(tg_cache_entry *e, void *arg, size_t *charge)
{
    unsigned now = __atomic_add_fetch(&running, 1, __ATOMIC_SEQ_CST);
    unsigned seen = __atomic_load_n(&most, __ATOMIC_SEQ_CST);
    while (now > seen && !__atomic_compare_exchange_n(&most, &seen, now, false, __ATOMIC_SEQ_CST,
                                                      __ATOMIC_SEQ_CST))
        ;
    usleep(20000);
    __atomic_sub_fetch(&running, 1, __ATOMIC_SEQ_CST);
    return load_item(e, arg, charge);
}

typedef struct distinct {
    tg_cache *cache;
    loader *load;
    unsigned id;
} distinct;

static void *acquire_distinct(void *arg)
{
    distinct *d = arg;
    char key[16];
    snprintf(key, sizeof key, "k%u", d->id);
    pthread_barrier_wait(&start_line);
    tg_cache_entry *e = tg_cache_acquire(d->cache, key, load_counted, d->load);
    CHECK(e != NULL);
    if (e != NULL)
        tg_cache_release(d->cache, e);
    return NULL;
}

TEST(loads_at_once_are_bounded)
{
    tg_cache *cache = make(1000, 0, 1, 2);
    loader l = {TG_CACHE_KEEP, 10, 1, 0, 0};
    pthread_t threads[THREADS];
    distinct ds[THREADS];
    pthread_barrier_init(&start_line, NULL, THREADS);
    for (unsigned t = 0; t < THREADS; t++) {
        ds[t] = (distinct){cache, &l, t};
        CHECK(pthread_create(&threads[t], NULL, acquire_distinct, &ds[t]) == 0);
    }
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    pthread_barrier_destroy(&start_line);
    CHECK_EQ_U64(l.calls, THREADS);
    CHECK(most >= 1 && most <= 2);
    CHECK_EQ_U64(stats_of(cache).entries, THREADS);
    tg_cache_destroy(cache);
}

TEST(shards)
{
    /* 4 shards of 250 bytes: 1000 puts of 10 keep about 100, none over its shard */
    tg_cache *cache = make(1000, 0, 4, 0);
    char key[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "key%d", i);
        CHECK(put(cache, key, i, 10));
    }
    tg_cache_stats s = stats_of(cache);
    CHECK(s.bytes <= 1000 && s.bytes > 900);
    CHECK_EQ_U64(s.entries * 10, s.bytes);
    CHECK_EQ_U64(s.entries + s.evictions, 1000);
    CHECK_EQ_U64(get(cache, "key999"), 999);
    tg_cache_destroy(cache);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(budget_and_eviction_order);
    RUN(entry_bound);
    RUN(visits);
    RUN(loads_once_and_keeps);
    RUN(failed_load_is_not_kept);
    RUN(a_held_entry_outlives_eviction_and_clear);
    RUN(single_flight);
    RUN(loads_at_once_are_bounded);
    RUN(shards);
    return test_report(argv[0]);
}
