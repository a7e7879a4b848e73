/* Index/shard agreement (see index_check.h). */
#include "index_check.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool ends_with(const char *text, const char *suffix)
{
    size_t len = strlen(text), suffix_len = strlen(suffix);
    return len >= suffix_len && strcmp(text + len - suffix_len, suffix) == 0;
}

bool tg_is_index_path(const char *path)
{
    return ends_with(path, ".safetensors.index.json");
}

bool tg_is_safetensors_path(const char *path)
{
    return ends_with(path, ".safetensors");
}

typedef struct located_name {
    const char *name;
    size_t shard;
} located_name;

static int compare_located(const void *a, const void *b)
{
    const located_name *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c != 0)
        return c;
    return (x->shard > y->shard) - (x->shard < y->shard);
}

/* Every (name, shard) sorted by name; NULL on allocation failure (count 0 gives a
 * valid 1-entry allocation so NULL always means failure). */
static located_name *sorted_names(const tg_shard *shards, size_t count, size_t *total)
{
    size_t n = 0;
    for (size_t s = 0; s < count; s++) {
        if (__builtin_add_overflow(n, shards[s].tensor_count, &n))
            return NULL;
    }
    located_name *all = calloc(n ? n : 1, sizeof *all);
    if (all == NULL)
        return NULL;
    size_t i = 0;
    for (size_t s = 0; s < count; s++)
        for (size_t t = 0; t < shards[s].tensor_count; t++)
            all[i++] = (located_name){shards[s].names[t], s};
    qsort(all, n, sizeof *all, compare_located);
    *total = n;
    return all;
}

static bool check_disjoint(const tg_shard *shards, const located_name *all, size_t n, char *detail,
                           size_t detail_len)
{
    for (size_t i = 1; i < n; i++) {
        if (strcmp(all[i - 1].name, all[i].name) == 0) {
            snprintf(detail, detail_len, "tensor '%.200s' is in both %s and %s", all[i].name,
                     shards[all[i - 1].shard].path, shards[all[i].shard].path);
            return false;
        }
    }
    return true;
}

bool tg_shards_disjoint(const tg_shard *shards, size_t count, char *detail, size_t detail_len)
{
    size_t n = 0;
    located_name *all = sorted_names(shards, count, &n);
    if (all == NULL) {
        snprintf(detail, detail_len, "out of memory while comparing shards");
        return false;
    }
    bool ok = check_disjoint(shards, all, n, detail, detail_len);
    free(all);
    return ok;
}

static const located_name *find_name(const located_name *all, size_t n, const char *name)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(all[mid].name, name);
        if (c == 0)
            return &all[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

bool tg_index_shape_check(const struct json_t *index, const char *index_path, char *detail,
                          size_t detail_len)
{
    if (index == NULL || !json_is_object(index)) {
        snprintf(detail, detail_len, "%s is not a JSON object", index_path);
        return false;
    }
    if (!json_is_object(json_object_get(index, "weight_map"))) {
        snprintf(detail, detail_len, "%s has no \"weight_map\" object", index_path);
        return false;
    }
    json_t *metadata = json_object_get(index, "metadata");
    if (metadata != NULL && !json_is_object(metadata)) {
        snprintf(detail, detail_len, "%s has a \"metadata\" that is not an object", index_path);
        return false;
    }
    return true;
}

bool tg_index_check(const char *index_path, const char *json_text, size_t json_len,
                    const tg_shard *shards, size_t count, char *detail, size_t detail_len)
{
    json_error_t error;
    json_t *index = json_loadb(json_text, json_len, JSON_REJECT_DUPLICATES, &error);
    if (!tg_index_shape_check(index, index_path, detail, detail_len)) {
        json_decref(index);
        return false;
    }
    json_t *weight_map = json_object_get(index, "weight_map");
    const char *slash = strrchr(index_path, '/');
    size_t dir_len = slash ? (size_t)(slash - index_path) + 1 : 0;
    /* Only the files the index names are its shards: a consolidated.safetensors or a
     * variant (model.fp16.safetensors) beside them is no part of it. */
    tg_shard *named = calloc(count ? count : 1, sizeof *named);
    size_t named_count = 0;
    if (named == NULL) {
        snprintf(detail, detail_len, "out of memory while checking %s", index_path);
        json_decref(index);
        return false;
    }
    for (size_t s = 0; s < count; s++) {
        const char *path = shards[s].path;
        if (strncmp(path, index_path, dir_len) != 0)
            continue;
        const char *tensor_name;
        json_t *value;
        json_object_foreach(weight_map, tensor_name, value)
        {
            const char *file = json_string_value(value);
            if (file != NULL && strcmp(path + dir_len, file) == 0) {
                named[named_count++] = shards[s];
                break;
            }
        }
    }
    shards = named;
    count = named_count;
    size_t n = 0;
    located_name *all = sorted_names(shards, count, &n);
    bool ok = false;
    if (all == NULL) {
        snprintf(detail, detail_len, "out of memory while checking %s", index_path);
        goto out;
    }
    if (!check_disjoint(shards, all, n, detail, detail_len))
        goto out;
    const char *tensor;
    json_t *file_value;
    json_object_foreach(weight_map, tensor, file_value)
    {
        const char *file = json_string_value(file_value);
        if (file == NULL) {
            snprintf(detail, detail_len, "weight_map entry '%.200s' is not a file name", tensor);
            goto out;
        }
        size_t shard = count;
        for (size_t s = 0; s < count; s++) {
            const char *path = shards[s].path;
            if (strncmp(path, index_path, dir_len) == 0 && strcmp(path + dir_len, file) == 0) {
                shard = s;
                break;
            }
        }
        if (shard == count) {
            snprintf(
                detail, detail_len,
                "weight_map maps tensor '%.200s' to '%.200s', which is not a .safetensors file "
                "of this version",
                tensor, file);
            goto out;
        }
        const located_name *found = find_name(all, n, tensor);
        if (found == NULL) {
            snprintf(detail, detail_len,
                     "weight_map maps tensor '%.200s' to %s, which does not hold it", tensor,
                     shards[shard].path);
            goto out;
        }
        if (found->shard != shard) {
            snprintf(detail, detail_len, "weight_map maps tensor '%.200s' to %s, but it is in %s",
                     tensor, shards[shard].path, shards[found->shard].path);
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (json_object_get(weight_map, all[i].name) == NULL) {
            snprintf(detail, detail_len, "tensor '%.200s' of %s is missing from the weight_map",
                     all[i].name, shards[all[i].shard].path);
            goto out;
        }
    }
    json_t *metadata = json_object_get(index, "metadata");
    json_t *total_size = json_is_object(metadata) ? json_object_get(metadata, "total_size") : NULL;
    if (total_size != NULL && !json_is_null(total_size)) {
        uint64_t sum = 0;
        for (size_t s = 0; s < count; s++)
            if (__builtin_add_overflow(sum, shards[s].data_bytes, &sum))
                sum = UINT64_MAX;
        if (!json_is_integer(total_size) || json_integer_value(total_size) < 0 ||
            (uint64_t)json_integer_value(total_size) != sum) {
            snprintf(detail, detail_len,
                     "%s says total_size is %lld but the shards hold %llu bytes of tensors",
                     index_path,
                     json_is_integer(total_size) ? (long long)json_integer_value(total_size) : -1LL,
                     (unsigned long long)sum);
            goto out;
        }
    }
    ok = true;
out:
    free(all);
    free(named);
    json_decref(index);
    return ok;
}

bool tg_shard_set_key(const char *path, char *key, size_t key_len)
{
    static const char suffix[] = ".safetensors";
    size_t len = strlen(path), suffix_len = sizeof suffix - 1;
    if (len <= suffix_len || strcmp(path + len - suffix_len, suffix) != 0)
        return false;
    /* backwards over the stem: MMMMM, "-of-", NNNNN, "-" */
    const char *end = path + len - suffix_len, *p = end;
    while (p > path && p[-1] >= '0' && p[-1] <= '9')
        p--;
    const char *total = p;
    if (total == end || p - path < 4 || memcmp(p - 4, "-of-", 4) != 0)
        return false;
    p -= 4;
    const char *number_end = p;
    while (p > path && p[-1] >= '0' && p[-1] <= '9')
        p--;
    if (p == number_end || p == path || p[-1] != '-')
        return false;
    int written = snprintf(key, key_len, "%.*s-of-%.*s", (int)(p - 1 - path), path,
                           (int)(end - total), total);
    return written > 0 && (size_t)written < key_len;
}
