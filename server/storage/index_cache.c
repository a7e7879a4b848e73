/* Weight maps of index blobs (see index_cache.h): an instance of the cache core
 * (cache.h) keyed by the blob's sha256, whose entry holds one map.
 *
 * A map is one allocation: `count` entries sorted by name, then an arena of
 * NUL-terminated strings the entries point into by offset; each distinct shard
 * string is stored once (an index names tens of shards for up to ~10^5 tensors). */
#include "index_cache.h"
#include "cache.h"
#include "sha256.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

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
    tg_cache_entry core; /* first: the cache core's part */
    weight_map *map;     /* NULL: the blob is not a usable index (remembered) */
} entry;

struct tg_index_cache {
    tg_cache *entries;
    uint64_t not_read; /* atomic: lookups refused because the blob is above the entry bound */
};

static void destroy_entry(tg_cache_entry *e)
{
    free(((entry *)e)->map);
}

tg_index_cache *tg_index_cache_create(size_t bytes, size_t entries)
{
    tg_index_cache *cache = calloc(1, sizeof *cache);
    tg_cache_config config = {.bytes = bytes,
                              .entries = entries > 0 ? entries : 1,
                              .entry_share = 2,
                              .shards = 1,
                              .buckets = 4096,
                              .loads = TG_INDEX_CACHE_BUILDS,
                              .entry_size = sizeof(entry),
                              .destroy = destroy_entry};
    if (cache == NULL || (cache->entries = tg_cache_create(&config)) == NULL) {
        free(cache);
        return NULL;
    }
    return cache;
}

void tg_index_cache_destroy(tg_index_cache *cache)
{
    if (cache == NULL)
        return;
    tg_cache_destroy(cache->entries);
    free(cache);
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

/* The answer for name in map (NULL: not an index). The caller holds the entry of a kept map. */
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

typedef struct lookup {
    tg_blobstore *store;
    size_t size, bound;
    const char *name;
    char *shard;
    size_t shard_len;
    bool answered; /* by the loader, from its own parse */
    tg_index_lookup result;
} lookup;

/* The core's loader: parses the blob into e, answers the loader's name from the
 * parse, and says whether to keep it. A map above the entry bound is kept as a
 * mark (later lookups read the shards instead); a failed read is not kept. */
static tg_cache_load load(tg_cache_entry *core, void *arg, size_t *charge)
{
    entry *e = (entry *)core;
    lookup *l = arg;
    weight_map *map = NULL;
    build_status status = build_map(l->store, core->key, l->size, &map);
    l->answered = true;
    l->result =
        status == BUILD_OK ? answer(map, l->name, l->shard, l->shard_len) : TG_INDEX_UNUSABLE;
    if (status == BUILD_FAILED)
        return TG_CACHE_FAILED;
    if (status == BUILD_OK && sizeof *e + map->bytes > l->bound) {
        free(map);
        map = NULL;
    }
    e->map = map;
    *charge = sizeof *e + (map ? map->bytes : 0);
    return TG_CACHE_KEEP;
}

/* The core's visitor (under the lock): answers from a kept entry. */
static tg_cache_use answer_kept(tg_cache_entry *core, void *arg)
{
    lookup *l = arg;
    l->result = answer(((const entry *)core)->map, l->name, l->shard, l->shard_len);
    return TG_CACHE_HIT;
}

tg_index_lookup tg_index_cache_lookup(tg_index_cache *cache, tg_blobstore *store,
                                      const char *sha256, uint64_t size, const char *name,
                                      char *shard, size_t shard_len)
{
    if (strlen(sha256) != TG_SHA256_HEX_LEN)
        return TG_INDEX_UNUSABLE;
    /* the blob's text is at most the map's size plus its JSON syntax, so a blob above
     * the entry bound is not read */
    lookup l = {.store = store,
                .size = (size_t)size,
                .bound = tg_cache_entry_bound(cache->entries),
                .name = name,
                .shard = shard,
                .shard_len = shard_len};
    if (size > l.bound) {
        __atomic_fetch_add(&cache->not_read, 1, __ATOMIC_RELAXED);
        return TG_INDEX_UNUSABLE;
    }
    /* a hit answers under the lock (one lock round); a miss loads, once for all askers */
    if (tg_cache_visit(cache->entries, sha256, answer_kept, &l))
        return l.result;
    tg_cache_entry *e = tg_cache_acquire(cache->entries, sha256, load, &l);
    if (e == NULL)
        return TG_INDEX_UNUSABLE;
    tg_index_lookup result = l.answered  ? l.result
                             : e->failed ? TG_INDEX_UNUSABLE
                                         : answer(((entry *)e)->map, name, shard, shard_len);
    tg_cache_release(cache->entries, e);
    return result;
}

void tg_index_cache_stats_get(tg_index_cache *cache, tg_index_cache_stats *out)
{
    tg_cache_stats s;
    tg_cache_stats_get(cache->entries, &s);
    *out = (tg_index_cache_stats){.entries = s.entries,
                                  .bytes = s.bytes,
                                  .hits = s.hits,
                                  .parses = s.loads,
                                  .not_read = __atomic_load_n(&cache->not_read, __ATOMIC_RELAXED),
                                  .evictions = s.evictions};
}
