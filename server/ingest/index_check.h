/* Publish-time agreement of model.safetensors.index.json with the shards (docs/DESIGN.md §3).
 * Pure: the caller reads the headers; these functions only compare names. */
#ifndef TG_INDEX_CHECK_H
#define TG_INDEX_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tg_shard {
    const char *path; /* the shard's path in the version */
    size_t tensor_count;
    const char *const *names; /* tensor names, NUL-terminated */
    uint64_t data_bytes;      /* the shard's tensor bytes (its data section size) */
} tg_shard;

/* True when the sharded files' tensor names are disjoint; otherwise detail names
 * the tensor and both files. */
bool tg_shards_disjoint(const tg_shard *shards, size_t count, char *detail, size_t detail_len);

struct json_t;
/* The shape both publish (through tg_index_check) and a conversion job require of a
 * parsed index: an object with a "weight_map" object and, if present, a "metadata"
 * object. On failure detail says which. */
bool tg_index_shape_check(const struct json_t *index, const char *index_path, char *detail,
                          size_t detail_len);

/* Checks an index (JSON text of the file at index_path) against shards (the
 * .safetensors files of the index's directory), of which only those the weight_map
 * names count (a consolidated.safetensors or a variant beside them is no shard of
 * it): every weight_map entry names a shard (relative to the index's directory)
 * that holds that tensor, no tensor is in two shards, every tensor of a named shard
 * is mapped, and metadata.total_size (if present) equals the sum of the named shards'
 * tensor bytes. On failure detail names the tensor and shard. */
bool tg_index_check(const char *index_path, const char *json_text, size_t json_len,
                    const tg_shard *shards, size_t count, char *detail, size_t detail_len);

/* True when path's last segment ends in ".safetensors.index.json". */
bool tg_is_index_path(const char *path);
/* True when path ends in ".safetensors". */
bool tg_is_safetensors_path(const char *path);
/* True when path's last segment is a shard name, PREFIX-NNNNN-of-MMMMM.safetensors
 * (digits, any count); key gets "DIR/PREFIX-of-MMMMM" (the set it belongs to). */
bool tg_shard_set_key(const char *path, char *key, size_t key_len);

#endif
