/* The safetensors serializer. Produces the same bytes as the reference writer for
 * the same input: tensors ordered by dtype (st_dtype_writer_rank) then by name
 * (bytewise), compact JSON with __metadata__ first and the tensor fields in the
 * order dtype, shape, data_offsets, the header padded with spaces so the data
 * section starts at a multiple of 8. Metadata entries are written in the order
 * given (the reference uses a hash map, so only 0 or 1 entries are comparable). */
#ifndef ST_WRITE_H
#define ST_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "st_dtype.h"
#include "st_error.h"
#include "st_header.h"

typedef struct st_write_tensor {
    const char *name; /* UTF-8, NUL-terminated */
    st_dtype dtype;
    size_t rank;
    const uint64_t *shape;
} st_write_tensor;

typedef struct st_write_plan {
    uint8_t *header;   /* 8-byte length + JSON + padding; malloc'd */
    size_t header_len; /* 8 + N */
    size_t *order;     /* count indices into the input, in data-section order; malloc'd */
    uint64_t *begin;   /* per input tensor: data offset (relative to the data section) */
    uint64_t *bytes;   /* per input tensor: byte size */
    uint64_t data_size;
    size_t count;
} st_write_plan;

/* Plans a file: header bytes and where each tensor's data goes. metadata may be NULL
 * (no __metadata__ key); with has_metadata and metadata_count 0 an empty object is written.
 * Errors: duplicate or invalid names (ST_JSON_DUPLICATE_KEY, ST_TENSOR_NAME_*),
 * ST_SIZE_OVERFLOW, ST_SUB_BYTE_PARTIAL, ST_HEADER_TOO_LARGE. */
st_reason st_write_plan_make(const st_write_tensor *tensors, size_t count,
                             const st_metadata_entry *metadata, size_t metadata_count,
                             bool has_metadata, st_write_plan *plan, st_error *err);
void st_write_plan_free(st_write_plan *plan);

/* Whole file in memory: data[i] holds tensor i's bytes (plan.bytes[i] of them). */
st_reason st_write_to_buffer(const st_write_tensor *tensors, const void *const *data, size_t count,
                             const st_metadata_entry *metadata, size_t metadata_count,
                             bool has_metadata, uint8_t **out, size_t *out_len, st_error *err);

#endif
