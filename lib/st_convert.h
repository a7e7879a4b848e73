/* dtype conversion kernels, bit-exact with PyTorch's Tensor.to() (round to nearest
 * even; each format's NaN, Inf and overflow rules), and NaN/Inf counting.
 * Vectorised with F16C/AVX2 where the CPU has them (checked at run time),
 * portable C otherwise; both paths give identical bytes. All buffers are
 * little-endian and need not be aligned. */
#ifndef ST_CONVERT_H
#define ST_CONVERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "st_dtype.h"

/* True for every pair (also from == to) among F64, F32, F16, BF16, F8_E4M3, F8_E5M2. */
bool st_convert_supported(st_dtype from, st_dtype to);

/* Converts n elements. src and dst must not overlap. from == to copies. */
void st_convert(st_dtype from, st_dtype to, const void *src, void *dst, size_t n);

/* Forces the portable path (tests compare both paths); returns the previous setting. */
bool st_convert_force_portable(bool on);

/* Adds to *nan and *inf the NaN and infinite values among n elements of a floating
 * dtype (for C64 both parts count). Formats without NaN/Inf add nothing.
 * For sub-byte dtypes n must be whole bytes' worth. */
void st_count_nonfinite(st_dtype dtype, const void *src, uint64_t n, uint64_t *nan, uint64_t *inf);

/* Single-value helpers (the reference for the kernels and the tests). */
uint16_t st_f32_to_f16(float value);
float st_f16_to_f32(uint16_t bits);
uint16_t st_f32_to_bf16(float value);
float st_bf16_to_f32(uint16_t bits);
uint8_t st_f32_to_f8e4m3(float value);
float st_f8e4m3_to_f32(uint8_t bits);
uint8_t st_f32_to_f8e5m2(float value);
float st_f8e5m2_to_f32(uint8_t bits);

#endif
