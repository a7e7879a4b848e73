/* The 22 safetensors dtypes: names, widths and checked size arithmetic. */
#ifndef ST_DTYPE_H
#define ST_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "st_error.h"

typedef enum st_dtype {
    ST_BOOL,
    ST_U8,
    ST_I8,
    ST_F8_E5M2,
    ST_F8_E4M3,
    ST_F8_E8M0,
    ST_F8_E4M3FNUZ,
    ST_F8_E5M2FNUZ,
    ST_I16,
    ST_U16,
    ST_F16,
    ST_BF16,
    ST_I32,
    ST_U32,
    ST_F32,
    ST_C64,
    ST_F64,
    ST_I64,
    ST_U64,
    ST_F4,
    ST_F6_E2M3,
    ST_F6_E3M2,
    ST_DTYPE_COUNT
} st_dtype;

/* "F32", "BF16", ...; NULL out of range. */
const char *st_dtype_name(st_dtype dtype);

/* Looks up an exact, case-sensitive name of len bytes. Returns false if unknown. */
bool st_dtype_from_name(const char *name, size_t len, st_dtype *out);

/* Bits per element: 4, 6, 8, 16, 32 or 64. */
unsigned st_dtype_bits(st_dtype dtype);

/* True for every floating-point dtype (F4, F6_*, F8_*, F16, BF16, F32, F64; C64 counts as float).
 */
bool st_dtype_is_float(st_dtype dtype);

/* Position in the reference writer's order: tensors are written by ascending rank
 * (U64 first ... BOOL last), then by name. */
unsigned st_dtype_writer_rank(st_dtype dtype);

/* Product of the shape; false on overflow. rank 0 (a scalar) gives 1. */
bool st_shape_elements(const uint64_t *shape, size_t rank, uint64_t *elements);

/* Bytes taken by `elements` values of dtype. Returns ST_OK, ST_SIZE_OVERFLOW, or
 * ST_SUB_BYTE_PARTIAL when elements * bits is not a multiple of 8. */
st_reason st_dtype_bytes(st_dtype dtype, uint64_t elements, uint64_t *bytes);

#endif
