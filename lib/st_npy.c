/* .npy headers, byte for byte what numpy.save writes (numpy.lib.format, NumPy >= 1.23):
 *
 *   magic "\x93NUMPY", version (1, 0), u16 LE length, then the dict
 *   "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
 *   followed by spare spaces for in-place growth of the first axis
 *   (21 - digits of shape[0], none for a scalar), then spaces and one '\n' so that
 *   magic + length + dict is a multiple of 64. NumPy pads by 64 - (total % 64), so a
 *   total already on a multiple of 64 still gets 64 spaces. Version (2, 0), with a u32
 *   length, only when the padded dict exceeds 65535 bytes. */
#include "st_npy.h"

#include <string.h>

#define NPY_ALIGN 64
#define NPY_MAGIC_LEN 6
#define NPY_GROWTH_AXIS_MAX_DIGITS 21

static const char npy_dict_head[] = "{'descr': '";
static const char npy_dict_middle[] = "', 'fortran_order': False, 'shape': (";
static const char npy_dict_tail[] = "), }";

/* NumPy's descr per dtype; NULL where NumPy has no such dtype (BF16, F8_*, F6_*, F4). */
static const char *const npy_descr_of[ST_DTYPE_COUNT] = {
    [ST_BOOL] = "|b1", [ST_U8] = "|u1",  [ST_I8] = "|i1",  [ST_I16] = "<i2", [ST_U16] = "<u2",
    [ST_F16] = "<f2",  [ST_I32] = "<i4", [ST_U32] = "<u4", [ST_F32] = "<f4", [ST_I64] = "<i8",
    [ST_U64] = "<u8",  [ST_F64] = "<f8", [ST_C64] = "<c8",
};

bool st_npy_descr(st_dtype dtype, const char **descr)
{
    if ((unsigned)dtype >= ST_DTYPE_COUNT || npy_descr_of[dtype] == NULL)
        return false;
    *descr = npy_descr_of[dtype];
    return true;
}

static size_t decimal_digits(uint64_t v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

static size_t write_decimal(uint64_t v, uint8_t *out)
{
    size_t n = decimal_digits(v);
    for (size_t i = n; i-- > 0;) {
        out[i] = (uint8_t)('0' + v % 10);
        v /= 10;
    }
    return n;
}

/* Python's repr of a tuple of ints: "()", "(5,)", "(2, 3)" (without the parentheses). */
static size_t shape_text_len(const uint64_t *shape, size_t rank)
{
    size_t n = 0;
    for (size_t i = 0; i < rank; i++)
        n += decimal_digits(shape[i]) + (i + 1 < rank ? 2 : 0);
    return n + (rank == 1 ? 1 : 0);
}

size_t st_npy_header(st_dtype dtype, const uint64_t *shape, size_t rank, uint8_t *out, size_t cap)
{
    const char *descr;
    if (!st_npy_descr(dtype, &descr))
        return 0;
    /* rank is bounded by the caller's memory (shape holds rank entries), so these sizes
     * (at most 22 bytes per dimension plus constants) cannot overflow size_t */
    size_t growth = rank > 0 ? NPY_GROWTH_AXIS_MAX_DIGITS - decimal_digits(shape[0]) : 0;
    size_t dict_len = (sizeof npy_dict_head - 1) + strlen(descr) + (sizeof npy_dict_middle - 1) +
                      shape_text_len(shape, rank) + (sizeof npy_dict_tail - 1) + growth;
    size_t with_newline = dict_len + 1;
    size_t prefix = NPY_MAGIC_LEN + 2 + 2;
    size_t pad = NPY_ALIGN - (prefix + with_newline) % NPY_ALIGN;
    unsigned version = 1;
    if (with_newline + pad > 65535) {
        version = 2;
        prefix = NPY_MAGIC_LEN + 2 + 4;
        pad = NPY_ALIGN - (prefix + with_newline) % NPY_ALIGN;
    }
    size_t total = prefix + with_newline + pad;
    size_t header_len = with_newline + pad;
    if (total > cap || header_len > UINT32_MAX)
        return 0;

    uint8_t *p = out;
    memcpy(p, "\x93NUMPY", NPY_MAGIC_LEN);
    p += NPY_MAGIC_LEN;
    *p++ = (uint8_t)version;
    *p++ = 0;
    unsigned length_bytes = version == 1 ? 2 : 4;
    for (unsigned i = 0; i < length_bytes; i++)
        *p++ = (uint8_t)(header_len >> (8 * i));
    memcpy(p, npy_dict_head, sizeof npy_dict_head - 1);
    p += sizeof npy_dict_head - 1;
    memcpy(p, descr, strlen(descr));
    p += strlen(descr);
    memcpy(p, npy_dict_middle, sizeof npy_dict_middle - 1);
    p += sizeof npy_dict_middle - 1;
    for (size_t i = 0; i < rank; i++) {
        p += write_decimal(shape[i], p);
        if (i + 1 < rank) {
            *p++ = ',';
            *p++ = ' ';
        }
    }
    if (rank == 1)
        *p++ = ',';
    memcpy(p, npy_dict_tail, sizeof npy_dict_tail - 1);
    p += sizeof npy_dict_tail - 1;
    memset(p, ' ', growth + pad);
    p += growth + pad;
    *p++ = '\n';
    return (size_t)(p - out);
}
