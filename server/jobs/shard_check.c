/* The publish-time check of a version's shards (see shard_check.h). */
#include "shard_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index_check.h"
#include "log.h"
#include "parsed_header_cache.h"

static size_t dir_length(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? (size_t)(slash - path) + 1 : 0;
}

static bool same_dir(const char *a, const char *b)
{
    size_t len = dir_length(a);
    return len == dir_length(b) && strncmp(a, b, len) == 0;
}

typedef struct loaded_shard {
    st_file file;
    const char **names;
} loaded_shard;

/* Reads an index file's bytes (a sidecar, so bounded by the sidecar limit). */
static char *read_small_blob(tg_blobstore *blobs, const tg_file_record *file)
{
    if (file->size > 64ULL * 1024 * 1024)
        return NULL;
    tg_blob_check check;
    tg_blob_reader *blob = tg_blob_open(blobs, file->sha256, TG_BLOB_SIZE_UNCHECKED, &check);
    if (blob == NULL)
        return NULL;
    char *text = malloc(file->size + 1);
    if (text != NULL && tg_blob_read_at(blob, text, (size_t)file->size, 0) != 0) {
        free(text);
        text = NULL;
    }
    tg_blob_close(blob);
    if (text)
        text[file->size] = '\0';
    return text;
}

/* Without an index: the files of one shard set (PREFIX-NNNNN-of-MMMMM.safetensors)
 * must hold disjoint tensors; any other file (model.safetensors beside its variant
 * model.fp16.safetensors, a consolidated.safetensors) is a whole model of its own.
 * Returns 0 ok, 1 overlap (detail set), -1 out of memory. */
static int check_shard_sets(const tg_shard *shards, size_t count, char *detail, size_t detail_len)
{
    tg_shard *group = calloc(count, sizeof *group);
    if (group == NULL)
        return -1;
    int result = 0;
    char key[TG_PATH_MAX + 1], other[TG_PATH_MAX + 1];
    for (size_t a = 0; a < count && result == 0; a++) {
        if (!tg_shard_set_key(shards[a].path, key, sizeof key))
            continue;
        bool first = true;
        for (size_t b = 0; b < a && first; b++)
            if (tg_shard_set_key(shards[b].path, other, sizeof other) && strcmp(key, other) == 0)
                first = false;
        if (!first)
            continue;
        size_t members = 0;
        for (size_t b = a; b < count; b++)
            if (tg_shard_set_key(shards[b].path, other, sizeof other) && strcmp(key, other) == 0)
                group[members++] = shards[b];
        if (members > 1 && !tg_shards_disjoint(group, members, detail, detail_len))
            result = 1;
    }
    free(group);
    return result;
}

/* Checks every directory of the version: with an index, the index against the
 * .safetensors files of that directory it names; without, that the files of each
 * shard set there hold disjoint tensors.
 * Returns 0 ok, 1 mismatch (detail set), -1 a header or index could not be read. */
int tg_shard_check(tg_blobstore *blobs, uint64_t max_header, const tg_file_records *files,
                   char *detail, size_t detail_len)
{
    loaded_shard *loaded = calloc(files->count ? files->count : 1, sizeof *loaded);
    tg_shard *shards = calloc(files->count ? files->count : 1, sizeof *shards);
    int result = -1;
    if (loaded == NULL || shards == NULL)
        goto out;
    /* Load every .safetensors header once. */
    for (size_t i = 0; i < files->count; i++) {
        const tg_file_record *f = &files->items[i];
        if (strcmp(f->kind, "safetensors") != 0 || !tg_is_safetensors_path(f->path))
            continue;
        st_error err;
        if (tg_header_read_parse(blobs, f->sha256, f->size, max_header, &loaded[i].file, &err) !=
            0) {
            tg_log(TG_LOG_ERROR, "shard check: cannot read the header of %s (%s): %s", f->path,
                   f->sha256, err.detail);
            goto out;
        }
        loaded[i].names = calloc(loaded[i].file.tensor_count ? loaded[i].file.tensor_count : 1,
                                 sizeof *loaded[i].names);
        if (loaded[i].names == NULL)
            goto out;
        for (size_t t = 0; t < loaded[i].file.tensor_count; t++)
            loaded[i].names[t] = loaded[i].file.tensors[t].name;
    }
    result = 0;
    for (size_t i = 0; i < files->count && result == 0; i++) {
        const tg_file_record *anchor = &files->items[i];
        bool is_index = tg_is_index_path(anchor->path);
        /* Each directory is checked once: at its index, or at its first shard when it has none. */
        bool dir_has_index = false, first_shard_of_dir = true;
        for (size_t j = 0; j < files->count; j++) {
            if (!same_dir(anchor->path, files->items[j].path))
                continue;
            if (tg_is_index_path(files->items[j].path))
                dir_has_index = true;
            if (j < i && loaded[j].names != NULL)
                first_shard_of_dir = false;
        }
        bool anchor_is_shard = loaded[i].names != NULL;
        if (!is_index && !(anchor_is_shard && !dir_has_index && first_shard_of_dir))
            continue;
        size_t count = 0;
        for (size_t j = 0; j < files->count; j++) {
            if (loaded[j].names == NULL || !same_dir(anchor->path, files->items[j].path))
                continue;
            shards[count].path = files->items[j].path;
            shards[count].tensor_count = loaded[j].file.tensor_count;
            shards[count].names = loaded[j].names;
            shards[count].data_bytes = loaded[j].file.data_size;
            count++;
        }
        if (is_index) {
            char *text = read_small_blob(blobs, anchor);
            if (text == NULL) {
                result = -1;
                break;
            }
            if (!tg_index_check(anchor->path, text, anchor->size, shards, count, detail,
                                detail_len))
                result = 1;
            free(text);
        } else if (count > 1) {
            result = check_shard_sets(shards, count, detail, detail_len);
        }
    }
out:
    if (loaded) {
        for (size_t i = 0; i < files->count; i++) {
            free(loaded[i].names);
            st_file_free(&loaded[i].file);
        }
    }
    free(loaded);
    free(shards);
    return result;
}
