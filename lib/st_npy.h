/* NumPy .npy headers (format version 1.0, or 2.0 when the header needs it), C order. */
#ifndef ST_NPY_H
#define ST_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "st_dtype.h"

/* NumPy's descr for dtype ("<f4", "|b1", "<c8", ...). False for dtypes NumPy lacks
 * (BF16, the F8_*, F6_* and F4 types). */
bool st_npy_descr(st_dtype dtype, const char **descr);

/* Writes the full header (magic, version, length, dict, padding to a multiple of 64)
 * into out. Returns its length, or 0 if the dtype has no NumPy equivalent or cap is
 * too small. 256 + 24 * rank bytes always suffice. */
size_t st_npy_header(st_dtype dtype, const uint64_t *shape, size_t rank, uint8_t *out, size_t cap);

#endif
