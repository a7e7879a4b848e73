/* The strict safetensors header parser and validator (docs/DESIGN.md §3).
 *
 * It reads a buffer that holds at least the first 8+N bytes of a file plus the
 * file's total size, so a server can judge a header before the body arrives.
 * Everything the file says is checked before it is used; every allocation is
 * bounded by N, which is bounded by limits->max_header_size. */
#ifndef ST_HEADER_H
#define ST_HEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "st_dtype.h"
#include "st_error.h"

#define ST_HEADER_SIZE_MAX 100000000ULL /* the reference implementation's bound on N */
#define ST_JSON_DEPTH_MAX 64            /* default nesting bound */
#define ST_FILE_SIZE_UNKNOWN UINT64_MAX /* streaming without Content-Length */

typedef struct st_limits {
    uint64_t max_header_size; /* N above this is ST_HEADER_TOO_LARGE; 0 means ST_HEADER_SIZE_MAX */
    unsigned max_depth;       /* JSON nesting bound; 0 means ST_JSON_DEPTH_MAX */
    /* Optional (NULL: none). The parser calls it, as it moves through the header, with
     * a range [from, to) of buf (offsets from buf's start) that it is done reading for
     * now: the UTF-8 pass gives the whole header back, the JSON pass then what lies
     * behind it, about every ST_HEADER_RELEASE_STEP bytes. The bytes must stay readable
     * (the parser may look at them again): a caller whose buf is a read-only file
     * mapping may madvise(MADV_DONTNEED) the pages, so the header is never resident
     * whole beside the parser's records. Nothing else changes. */
    void (*release)(void *context, uint64_t from, uint64_t to);
    void *release_context;
} st_limits;

#define ST_HEADER_RELEASE_STEP (1u << 18)

typedef struct st_tensor {
    const char *name; /* decoded UTF-8, NUL-terminated, owned by the st_file */
    size_t name_len;
    st_dtype dtype;
    size_t rank;
    const uint64_t *shape; /* rank entries, owned by the st_file */
    uint64_t elements;     /* product of shape */
    uint64_t begin, end;   /* data_offsets, relative to the data section */
} st_tensor;

typedef struct st_metadata_entry {
    const char *key; /* decoded UTF-8, NUL-terminated */
    const char *value;
} st_metadata_entry;

typedef struct st_file {
    uint64_t header_size; /* N */
    uint64_t data_start;  /* 8 + N: absolute offset of the data section */
    uint64_t file_size;   /* as passed, or ST_FILE_SIZE_UNKNOWN */
    uint64_t data_size;   /* end of the last tensor: the data section's exact size */
    size_t tensor_count;
    st_tensor *tensors; /* sorted by begin offset (file order); ties by name */
    size_t metadata_count;
    st_metadata_entry *metadata; /* in header order */
    bool has_metadata;           /* __metadata__ was present (possibly empty) */
    void *internal;              /* arena and name index; owned */
} st_file;

/* Reads N from the first 8 bytes and checks the framing that needs only N:
 * file_size >= 8 (ST_FILE_TOO_SMALL), N <= limit (ST_HEADER_TOO_LARGE),
 * 8 + N <= file_size (ST_HEADER_TRUNCATED). prefix_len may be < 8 only to
 * report ST_FILE_TOO_SMALL. limits may be NULL for the defaults. */
st_reason st_header_length(const uint8_t *prefix, size_t prefix_len, uint64_t file_size,
                           const st_limits *limits, uint64_t *header_size, st_error *err);

/* Parses and validates. buf holds the file's first buf_len bytes, buf_len >= 8 + N
 * (a shorter buffer is ST_HEADER_TRUNCATED). file_size is the whole file's size and
 * is used for the exact-coverage rules; ST_FILE_SIZE_UNKNOWN skips the rules that need
 * it (ST_DATA_TRAILING / ST_DATA_TRUNCATED / ST_HEADER_TRUNCATED against the file) and the
 * caller must then check at the end that the size is data_start + data_size. On ST_OK, out is
 * filled and must be freed with st_file_free; on error, out is left empty (safe to free) and err is
 * set. ST_OUT_OF_MEMORY is an allocation failure, not a verdict on the header. */
st_reason st_header_parse(const uint8_t *buf, size_t buf_len, uint64_t file_size,
                          const st_limits *limits, st_file *out, st_error *err);

/* st_header_parse for a caller that wants the verdict alone (`tensorgate validate`):
 * every rule is checked in the same order and gives the same reason, offset, tensor
 * and sentence, but on ST_OK out holds only the sizes and counts (header_size,
 * data_start, file_size, data_size, tensor_count, metadata_count, has_metadata):
 * tensors, metadata and internal stay NULL and st_file_find finds nothing. The tensor
 * table is never built, so the peak memory is the parser's working records alone. */
st_reason st_header_check(const uint8_t *buf, size_t buf_len, uint64_t file_size,
                          const st_limits *limits, st_file *out, st_error *err);

void st_file_free(st_file *file);

/* Finds a tensor by exact name (O(log n)); NULL if absent. */
const st_tensor *st_file_find(const st_file *file, const char *name, size_t name_len);

/* Value of a __metadata__ key, or NULL. */
const char *st_file_metadata(const st_file *file, const char *key);

#endif
