#include "st_dtype.h"

#include <string.h>

struct dtype_info {
    const char *name;
    unsigned bits;
    bool is_float;
    unsigned writer_rank;
};

/* writer_rank follows the reference writer: descending alignment, U64 first, BOOL last. */
static const struct dtype_info dtypes[ST_DTYPE_COUNT] = {
    [ST_BOOL] = {"BOOL", 8, false, 21},
    [ST_U8] = {"U8", 8, false, 17},
    [ST_I8] = {"I8", 8, false, 16},
    [ST_F8_E5M2] = {"F8_E5M2", 8, true, 15},
    [ST_F8_E4M3] = {"F8_E4M3", 8, true, 14},
    [ST_F8_E8M0] = {"F8_E8M0", 8, true, 13},
    [ST_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8, true, 12},
    [ST_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8, true, 11},
    [ST_I16] = {"I16", 16, false, 10},
    [ST_U16] = {"U16", 16, false, 9},
    [ST_F16] = {"F16", 16, true, 8},
    [ST_BF16] = {"BF16", 16, true, 7},
    [ST_I32] = {"I32", 32, false, 6},
    [ST_U32] = {"U32", 32, false, 5},
    [ST_F32] = {"F32", 32, true, 4},
    [ST_C64] = {"C64", 64, true, 3},
    [ST_F64] = {"F64", 64, true, 2},
    [ST_I64] = {"I64", 64, false, 1},
    [ST_U64] = {"U64", 64, false, 0},
    [ST_F4] = {"F4", 4, true, 20},
    [ST_F6_E2M3] = {"F6_E2M3", 6, true, 19},
    [ST_F6_E3M2] = {"F6_E3M2", 6, true, 18},
};

const char *st_dtype_name(st_dtype dtype)
{
    if ((unsigned)dtype >= ST_DTYPE_COUNT)
        return NULL;
    return dtypes[dtype].name;
}

bool st_dtype_from_name(const char *name, size_t len, st_dtype *out)
{
    for (unsigned i = 0; i < ST_DTYPE_COUNT; i++) {
        if (strlen(dtypes[i].name) == len && memcmp(dtypes[i].name, name, len) == 0) {
            *out = (st_dtype)i;
            return true;
        }
    }
    return false;
}

unsigned st_dtype_bits(st_dtype dtype)
{
    return (unsigned)dtype < ST_DTYPE_COUNT ? dtypes[dtype].bits : 0;
}

bool st_dtype_is_float(st_dtype dtype)
{
    return (unsigned)dtype < ST_DTYPE_COUNT && dtypes[dtype].is_float;
}

unsigned st_dtype_writer_rank(st_dtype dtype)
{
    return (unsigned)dtype < ST_DTYPE_COUNT ? dtypes[dtype].writer_rank : ST_DTYPE_COUNT;
}

bool st_shape_elements(const uint64_t *shape, size_t rank, uint64_t *elements)
{
    uint64_t n = 1;
    for (size_t i = 0; i < rank; i++) {
        if (__builtin_mul_overflow(n, shape[i], &n))
            return false;
    }
    *elements = n;
    return true;
}

st_reason st_dtype_bytes(st_dtype dtype, uint64_t elements, uint64_t *bytes)
{
    uint64_t bits;
    if (__builtin_mul_overflow(elements, (uint64_t)st_dtype_bits(dtype), &bits))
        return ST_SIZE_OVERFLOW;
    if (bits % 8 != 0)
        return ST_SUB_BYTE_PARTIAL;
    *bytes = bits / 8;
    return ST_OK;
}
