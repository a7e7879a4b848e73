/* Weight maps of index blobs (see index_cache.h): a chained hash table by sha256
 * over a doubly linked recency list, one mutex and one condition variable.
 *
 * A map is one allocation: `count` entries sorted by name, then an arena of
 * NUL-terminated strings the entries point into by offset; each distinct shard
 * string is stored once (an index names tens of shards for up to ~10^5 tensors). */
#include "index_cache.h"
#include "lru.h"
#include "sha_table.h"

#include <assert.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct map_entry {
    uint32_t name;  /* arena offset */
    uint32_t shard; /* arena offset */
} map_entry;

typedef struct weight_map {
    size_t count;
    size_t bytes; /* of this allocation */
    const char *arena;
    map_entry entries[]; /* sorted by name (strcmp) */
} weight_map;

typedef struct entry {
    tg_lru_node lru; /* first: an entry is its node; a loading entry is not on the list */
    tg_sha_node key; /* in the table while findable */
    bool loading;    /* one thread is parsing the blob; others wait on `loaded` */
    weight_map *map; /* NULL: the blob is not a usable index (remembered) */
    size_t charge;   /* bytes counted against the budget */
} entry;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
/* signalled when an entry stops loading, or a parse ends */
static pthread_cond_t loaded = PTHREAD_COND_INITIALIZER;
static tg_sha_table table;
static tg_lru recency;
static size_t budget_bytes = TG_INDEX_CACHE_BYTES;
static size_t budget_entries = TG_INDEX_CACHE_ENTRIES;
static unsigned builds_running;
/* Invariant: stats.bytes and stats.entries are the sums over the entries on the
 * recency list (the kept ones); loading entries are charged nothing. */
static tg_index_cache_stats stats;

/* Checks the invariant above by walking the list (under the lock; O(entries)). */
static void check_stats(void)
{
    uint64_t entries = 0, bytes = 0;
    for (const tg_lru_node *n = recency.newest; n != NULL; n = n->older) {
        assert(!((const struct entry *)n)->loading);
        entries++;
        bytes += ((const struct entry *)n)->charge;
    }
    assert(stats.entries == entries && stats.bytes == bytes);
    (void)entries;
    (void)bytes;
}

/* ---- the table ---- */

static entry *find(const char *sha256)
{
    return TG_SHA_ENTRY(tg_sha_table_find(&table, sha256), entry, key);
}

static void unlink_bucket(entry *e)
{
    tg_sha_table_remove(&table, &e->key);
}

/* Removes a kept entry (under the lock); readers copy answers out under the same
 * lock, so nothing can still be reading its map. */
static void remove_kept(entry *e)
{
    assert(!e->loading && stats.entries > 0 && stats.bytes >= e->charge);
    unlink_bucket(e);
    tg_lru_unlink(&recency, &e->lru);
    stats.bytes -= e->charge;
    stats.entries--;
    free(e->map);
    free(e);
}

/* ---- building a map from the index text ---- */

typedef struct pair {
    const char *name, *shard; /* strings of the JSON tree */
    uint32_t shard_offset;
} pair;

static int by_shard(const void *a, const void *b)
{
    return strcmp(((const pair *)a)->shard, ((const pair *)b)->shard);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const pair *)a)->name, ((const pair *)b)->name);
}

/* Copies s into the arena at *used; its offset. The caller sized the arena. */
static uint32_t arena_add(char *arena, size_t *used, const char *s)
{
    size_t at = *used, len = strlen(s) + 1;
    memcpy(arena + at, s, len);
    *used += len;
    return (uint32_t)at;
}

/* The map of pairs (n >= 0), sorted here; NULL when out of memory or too large for
 * 32-bit offsets. Shard strings are stored once: sorting by shard puts equal ones
 * side by side. */
static weight_map *map_from_pairs(pair *pairs, size_t n)
{
    qsort(pairs, n, sizeof *pairs, by_shard);
    size_t arena_len = 0;
    for (size_t i = 0; i < n; i++) {
        arena_len += strlen(pairs[i].name) + 1;
        if (i == 0 || strcmp(pairs[i].shard, pairs[i - 1].shard) != 0)
            arena_len += strlen(pairs[i].shard) + 1;
    }
    size_t head = sizeof(weight_map) + n * sizeof(map_entry);
    if (arena_len > UINT32_MAX)
        return NULL;
    weight_map *map = malloc(head + arena_len);
    if (map == NULL)
        return NULL;
    char *arena = (char *)map + head;
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || strcmp(pairs[i].shard, pairs[i - 1].shard) != 0)
            pairs[i].shard_offset = arena_add(arena, &used, pairs[i].shard);
        else
            pairs[i].shard_offset = pairs[i - 1].shard_offset;
    }
    qsort(pairs, n, sizeof *pairs, by_name);
    for (size_t i = 0; i < n; i++) {
        map->entries[i].name = arena_add(arena, &used, pairs[i].name);
        map->entries[i].shard = pairs[i].shard_offset;
    }
    map->count = n;
    map->bytes = head + arena_len;
    map->arena = arena;
    return map;
}

typedef enum build_status { BUILD_OK, BUILD_NOT_INDEX, BUILD_FAILED } build_status;

/* The map of a parsed index: its "weight_map" must be an object of strings (the
 * parse refused duplicate names and \u0000). */
static build_status map_from_json(json_t *root, weight_map **out)
{
    json_t *object = json_object_get(root, "weight_map");
    if (!json_is_object(object))
        return BUILD_NOT_INDEX;
    size_t n = json_object_size(object);
    pair *pairs = malloc((n ? n : 1) * sizeof *pairs);
    if (pairs == NULL)
        return BUILD_FAILED;
    size_t i = 0;
    for (void *it = json_object_iter(object); it && i < n; it = json_object_iter_next(object, it)) {
        json_t *value = json_object_iter_value(it);
        if (!json_is_string(value)) {
            free(pairs);
            return BUILD_NOT_INDEX;
        }
        pairs[i++] = (pair){json_object_iter_key(it), json_string_value(value), 0};
    }
    *out = map_from_pairs(pairs, i);
    free(pairs);
    return *out ? BUILD_OK : BUILD_FAILED;
}

/* Reads exactly size bytes of the blob into a malloc'd buffer, or NULL. */
static char *read_blob(tg_blobstore *store, const char *sha256, size_t size)
{
    tg_blob_check check;
    tg_blob_reader *blob = tg_blob_open(store, sha256, TG_BLOB_SIZE_UNCHECKED, &check);
    if (blob == NULL)
        return NULL;
    char *text = malloc(size ? size : 1);
    if (text != NULL && tg_blob_read_at(blob, text, size, 0) != 0) {
        free(text);
        text = NULL;
    }
    tg_blob_close(blob);
    return text;
}

/* Reads and parses one index blob (size already checked against the entry bound).
 * BUILD_FAILED: unreadable or out of memory, worth trying again later. */
static build_status build_map(tg_blobstore *store, const char *sha256, size_t size,
                              weight_map **out)
{
    *out = NULL;
    char *text = read_blob(store, sha256, size);
    if (text == NULL)
        return BUILD_FAILED;
    json_error_t error;
    json_t *root = json_loadb(text, size, JSON_REJECT_DUPLICATES, &error);
    free(text);
    if (root == NULL)
        return json_error_code(&error) == json_error_out_of_memory ? BUILD_FAILED : BUILD_NOT_INDEX;
    build_status status = map_from_json(root, out);
    json_decref(root);
    return status;
}

/* ---- answers ---- */

typedef struct probe {
    const char *arena;
    const char *name;
} probe;

static int compare_probe(const void *key, const void *element)
{
    const probe *p = key;
    return strcmp(p->name, p->arena + ((const map_entry *)element)->name);
}

/* The answer for name in map (NULL: not an index). Called under the lock for a kept map. */
static tg_index_lookup answer(const weight_map *map, const char *name, char *shard,
                              size_t shard_len)
{
    if (map == NULL)
        return TG_INDEX_UNUSABLE;
    probe key = {map->arena, name};
    const map_entry *found =
        bsearch(&key, map->entries, map->count, sizeof *map->entries, compare_probe);
    if (found == NULL)
        return TG_INDEX_ABSENT;
    const char *value = map->arena + found->shard;
    size_t len = strlen(value);
    if (len >= shard_len)
        return TG_INDEX_UNUSABLE;
    memcpy(shard, value, len + 1);
    return TG_INDEX_FOUND;
}

/* ---- the lookup ---- */

static size_t entry_bound(void)
{
    return budget_bytes / 2;
}

/* Keeps a loaded entry (under the lock): evicts the least recently used entries
 * until it fits both bounds, then puts it first. */
static void keep(entry *e, weight_map *map)
{
    assert(e->loading);
    e->loading = false;
    e->map = map;
    e->charge = sizeof *e + (map ? map->bytes : 0);
    while (recency.oldest != NULL &&
           (stats.entries + 1 > budget_entries || stats.bytes + e->charge > budget_bytes)) {
        remove_kept((entry *)recency.oldest);
        stats.evictions++;
    }
    tg_lru_push_newest(&recency, &e->lru);
    stats.entries++;
    stats.bytes += e->charge;
}

/* Parses the blob for the loading entry e (the caller holds the lock and returns
 * with it held), keeps the result when it is one to keep, and answers name. */
static tg_index_lookup load(entry *e, tg_blobstore *store, uint64_t size, const char *name,
                            char *shard, size_t shard_len)
{
    while (builds_running >= TG_INDEX_CACHE_BUILDS)
        pthread_cond_wait(&loaded, &cache_lock);
    builds_running++;
    pthread_mutex_unlock(&cache_lock);
    weight_map *map = NULL;
    build_status status = build_map(store, e->key.sha256, (size_t)size, &map);
    pthread_mutex_lock(&cache_lock);
    assert(builds_running > 0);
    builds_running--;
    stats.parses++;
    tg_index_lookup result =
        status == BUILD_OK ? answer(map, name, shard, shard_len) : TG_INDEX_UNUSABLE;
    if (status == BUILD_FAILED) {
        /* not remembered: the next lookup tries again */
        unlink_bucket(e);
        free(e);
    } else if (status == BUILD_OK && sizeof *e + map->bytes > entry_bound()) {
        /* answered from this parse; later lookups read the shards instead */
        free(map);
        keep(e, NULL);
    } else {
        keep(e, map);
    }
    pthread_cond_broadcast(&loaded);
    return result;
}

tg_index_lookup tg_index_cache_lookup(tg_blobstore *store, const char *sha256, uint64_t size,
                                      const char *name, char *shard, size_t shard_len)
{
    if (strlen(sha256) != TG_SHA256_HEX_LEN)
        return TG_INDEX_UNUSABLE;
    pthread_mutex_lock(&cache_lock);
    /* the blob's text is at most the map's size plus its JSON syntax, so a blob above
     * the entry bound is not read */
    if (size > entry_bound()) {
        stats.not_read++;
        pthread_mutex_unlock(&cache_lock);
        return TG_INDEX_UNUSABLE;
    }
    entry *e;
    while ((e = find(sha256)) != NULL && e->loading)
        pthread_cond_wait(&loaded, &cache_lock);
    tg_index_lookup result = TG_INDEX_UNUSABLE;
    if (e != NULL) {
        stats.hits++;
        tg_lru_unlink(&recency, &e->lru);
        tg_lru_push_newest(&recency, &e->lru);
        result = answer(e->map, name, shard, shard_len);
    } else if ((e = calloc(1, sizeof *e)) != NULL) {
        e->loading = true;
        tg_sha_table_add(&table, &e->key, sha256);
        result = load(e, store, size, name, shard, shard_len);
    }
    pthread_mutex_unlock(&cache_lock);
    return result;
}

void tg_index_cache_stats_get(tg_index_cache_stats *out)
{
    pthread_mutex_lock(&cache_lock);
    check_stats();
    *out = stats;
    pthread_mutex_unlock(&cache_lock);
}

/* Drops the kept entries; loading ones belong to their loaders. Under the lock. */
static void drop_kept(void)
{
    while (recency.oldest)
        /* remove_kept unlinks the entry before freeing it, so oldest moves on. */
        /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc) */
        remove_kept((entry *)recency.oldest);
}

void tg_index_cache_configure(size_t bytes, size_t entries)
{
    pthread_mutex_lock(&cache_lock);
    drop_kept();
    budget_bytes = bytes;
    budget_entries = entries > 0 ? entries : 1;
    pthread_mutex_unlock(&cache_lock);
}

void tg_index_cache_clear(void)
{
    pthread_mutex_lock(&cache_lock);
    drop_kept();
    assert(stats.entries == 0 && stats.bytes == 0);
    stats = (tg_index_cache_stats){0}; /* entries and bytes are 0 with every kept entry gone */
    pthread_mutex_unlock(&cache_lock);
}
