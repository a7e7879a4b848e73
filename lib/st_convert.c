/* dtype conversion kernels and NaN/Inf counting.
 *
 * Semantics follow PyTorch's Tensor.to() on CPU, which converts every pair
 * through float: F64 -> F16/BF16/F8 first rounds to F32 (so a double can be
 * rounded twice), and F8 <-> F16/BF16/F64 goes F8 -> F32 -> target. The
 * per-format rules, as c10 implements them:
 *   F16   RNE; overflow -> +-Inf; NaN -> sign | 0x7E00 (payload dropped);
 *         F16 -> F32 keeps the payload and sets the quiet bit.
 *   BF16  RNE; overflow -> +-Inf; NaN -> 0x7FC0 (sign dropped: c10's scalar
 *         rule; ATen's AVX2 copy kernel writes 0xFFFF instead for some elements,
 *         depending on the tensor's length, so the scalar rule is the defined one);
 *         BF16 -> F32 is a plain shift (payload and signalling bit kept).
 *   E4M3  (float8_e4m3fn) no Inf: |x| >= 480, Inf and NaN -> sign | 0x7F; values
 *         that round above 448 -> sign | 0x7F too; 0x7F/0xFF decode to sign | 0x7FF00000.
 *   E5M2  RNE; |x| >= 65536 and Inf -> sign | 0x7C; NaN -> sign | 0x7F; decodes as
 *         the F16 with the same high byte.
 * Every path (portable or SIMD) produces the same bytes. */
#include "st_convert.h"

#include <stdatomic.h>
#include <string.h>

/* ST_CONVERT_NO_SIMD builds the portable code alone (as on other architectures). */
#if (defined(__x86_64__) || defined(__i386__)) && !defined(ST_CONVERT_NO_SIMD)
#include <cpuid.h>
#include <immintrin.h>
#define ST_CONVERT_X86 1
#endif

/* Elements converted per step when a pair goes through an F32 staging block. */
#define STAGE_ELEMENTS 512

static atomic_bool force_portable_path;

bool st_convert_force_portable(bool on)
{
    return atomic_exchange(&force_portable_path, on);
}

static uint32_t float_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

static float bits_float(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* Rounds the magnitude of a finite float (abs_bits has no sign bit) to nearest even
 * in a binary format with mantissa_bits stored mantissa bits and exponent bias
 * `bias` (minimum normal exponent 1 - bias, subnormals below it). Returns the
 * magnitude code (biased exponent << mantissa_bits | mantissa). The exponent range
 * is not capped: the caller maps codes past its largest finite one.
 * Requires mantissa_bits <= 10 and the unbiased exponent to fit the caller's check. */
static uint32_t round_magnitude(uint32_t abs_bits, unsigned mantissa_bits, int bias)
{
    int float_exponent = (int)(abs_bits >> 23);
    uint32_t significand = abs_bits & 0x7FFFFFu;
    if (float_exponent == 0)
        float_exponent = 1; /* float subnormal: same scale as exponent 1, no hidden bit */
    else
        significand |= 0x800000u;
    int target_exponent = float_exponent - 127 + bias;
    unsigned shift;
    uint32_t code_base;
    if (target_exponent >= 1) {
        /* normal: keep mantissa_bits of the 23; the hidden bit is implied by the exponent */
        shift = 23 - mantissa_bits;
        code_base = ((uint32_t)target_exponent << mantissa_bits);
        significand &= 0x7FFFFFu;
    } else {
        /* subnormal: the code is significand * 2^(float_exponent - 150) / 2^(1 - bias -
         * mantissa_bits) */
        unsigned extra = (unsigned)(1 - target_exponent);
        shift = 23 - mantissa_bits + extra;
        /* significand < 2^24 <= half a unit once shift >= 25: rounds to zero */
        if (shift > 24)
            return 0;
        code_base = 0;
    }
    uint32_t kept = significand >> shift;
    uint32_t remainder = significand & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    uint32_t code = code_base + kept;
    /* a carry out of the mantissa correctly bumps the exponent (or subnormal -> normal) */
    if (remainder > half || (remainder == half && (code & 1u)))
        code++;
    return code;
}

uint16_t st_f32_to_f16(float value)
{
    uint32_t bits = float_bits(value);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t abs_bits = bits & 0x7FFFFFFFu;
    if (abs_bits > 0x7F800000u)
        return sign | 0x7E00u;
    /* 2^16 and above (Inf included) is past 65504 + half an ulp */
    if (abs_bits >= 0x47800000u)
        return sign | 0x7C00u;
    uint32_t code = round_magnitude(abs_bits, 10, 15);
    if (code > 0x7C00u)
        code = 0x7C00u;
    return (uint16_t)(sign | code);
}

float st_f16_to_f32(uint16_t half)
{
    uint32_t sign = (uint32_t)(half & 0x8000u) << 16;
    uint32_t exponent = (half >> 10) & 0x1Fu;
    uint32_t mantissa = half & 0x3FFu;
    if (exponent == 0x1F) {
        /* Inf, or NaN with its payload kept and the quiet bit set (as c10 and F16C do) */
        uint32_t quiet = mantissa != 0 ? 0x400000u : 0;
        return bits_float(sign | 0x7F800000u | quiet | (mantissa << 13));
    }
    if (exponent == 0) {
        /* subnormal or zero: mantissa * 2^-24 is exact in float */
        float magnitude = (float)mantissa * 0x1p-24f;
        return bits_float(sign | float_bits(magnitude));
    }
    return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

uint16_t st_f32_to_bf16(float value)
{
    uint32_t bits = float_bits(value);
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u)
        return 0x7FC0u;
    /* RNE on the low 16 bits; a carry rolls into the exponent, up to Inf */
    uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
    return (uint16_t)((bits + rounding) >> 16);
}

float st_bf16_to_f32(uint16_t bits)
{
    return bits_float((uint32_t)bits << 16);
}

uint8_t st_f32_to_f8e4m3(float value)
{
    uint32_t bits = float_bits(value);
    uint8_t sign = (uint8_t)(bits >> 24) & 0x80u;
    uint32_t abs_bits = bits & 0x7FFFFFFFu;
    /* 480 (the first value past the format) and above, Inf and NaN: all NaN */
    if (abs_bits >= 0x43F00000u)
        return sign | 0x7Fu;
    uint32_t code = round_magnitude(abs_bits, 3, 7);
    /* (464, 480) rounds up onto 0x7F, which is NaN in e4m3fn */
    if (code > 0x7Fu)
        code = 0x7Fu;
    return (uint8_t)(sign | code);
}

float st_f8e4m3_to_f32(uint8_t code)
{
    uint32_t sign = (uint32_t)(code & 0x80u) << 24;
    uint32_t exponent = (code >> 3) & 0xFu;
    uint32_t mantissa = code & 0x7u;
    if ((code & 0x7Fu) == 0x7Fu)
        return bits_float(sign | 0x7FF00000u);
    if (exponent == 0) {
        float magnitude = (float)mantissa * 0x1p-9f;
        return bits_float(sign | float_bits(magnitude));
    }
    return bits_float(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}

uint8_t st_f32_to_f8e5m2(float value)
{
    uint32_t bits = float_bits(value);
    uint8_t sign = (uint8_t)(bits >> 24) & 0x80u;
    uint32_t abs_bits = bits & 0x7FFFFFFFu;
    if (abs_bits > 0x7F800000u)
        return sign | 0x7Fu;
    /* 65536 and above (Inf included) is past 57344 + half an ulp */
    if (abs_bits >= 0x47800000u)
        return sign | 0x7Cu;
    uint32_t code = round_magnitude(abs_bits, 2, 15);
    if (code > 0x7Cu)
        code = 0x7Cu;
    return (uint8_t)(sign | code);
}

float st_f8e5m2_to_f32(uint8_t code)
{
    return st_f16_to_f32((uint16_t)(code << 8));
}

bool st_convert_supported(st_dtype from, st_dtype to)
{
    bool from_ok = from == ST_F64 || from == ST_F32 || from == ST_F16 || from == ST_BF16 ||
                   from == ST_F8_E4M3 || from == ST_F8_E5M2;
    bool to_ok = to == ST_F64 || to == ST_F32 || to == ST_F16 || to == ST_BF16 ||
                 to == ST_F8_E4M3 || to == ST_F8_E5M2;
    return from_ok && to_ok;
}

/* ---- portable block kernels (little-endian, unaligned) ---- */

static uint16_t load_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static void store_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static uint32_t load_u32(const uint8_t *p)
{
    /* The analyzer follows the AVX2 tail with an unmodelled block length; every
     * element read here was written by decode_block. */
    /* NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult) */
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static float load_f32(const uint8_t *p)
{
    return bits_float(load_u32(p));
}

static void store_f32(uint8_t *p, float value)
{
    uint32_t bits = float_bits(value);
    p[0] = (uint8_t)bits;
    p[1] = (uint8_t)(bits >> 8);
    p[2] = (uint8_t)(bits >> 16);
    p[3] = (uint8_t)(bits >> 24);
}

static uint64_t load_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void store_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static double load_f64(const uint8_t *p)
{
    uint64_t bits = load_u64(p);
    double value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static void store_f64(uint8_t *p, double value)
{
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    store_u64(p, bits);
}

/* Decodes n elements of `from` into floats (from is never F32 here, or F32 copies). */
static void decode_portable(st_dtype from, const uint8_t *src, float *out, size_t n)
{
    switch (from) {
    case ST_F64:
        for (size_t i = 0; i < n; i++)
            out[i] = (float)load_f64(src + 8 * i);
        break;
    case ST_F32:
        for (size_t i = 0; i < n; i++)
            out[i] = load_f32(src + 4 * i);
        break;
    case ST_F16:
        for (size_t i = 0; i < n; i++)
            out[i] = st_f16_to_f32(load_u16(src + 2 * i));
        break;
    case ST_BF16:
        for (size_t i = 0; i < n; i++)
            out[i] = st_bf16_to_f32(load_u16(src + 2 * i));
        break;
    case ST_F8_E4M3:
        for (size_t i = 0; i < n; i++)
            out[i] = st_f8e4m3_to_f32(src[i]);
        break;
    case ST_F8_E5M2:
        for (size_t i = 0; i < n; i++)
            out[i] = st_f8e5m2_to_f32(src[i]);
        break;
    default:
        break;
    }
}

/* Encodes n floats into `to`. */
static void encode_portable(st_dtype to, const float *in, uint8_t *dst, size_t n)
{
    switch (to) {
    case ST_F64:
        for (size_t i = 0; i < n; i++)
            store_f64(dst + 8 * i, (double)in[i]);
        break;
    case ST_F32:
        for (size_t i = 0; i < n; i++)
            store_f32(dst + 4 * i, in[i]);
        break;
    case ST_F16:
        for (size_t i = 0; i < n; i++)
            store_u16(dst + 2 * i, st_f32_to_f16(in[i]));
        break;
    case ST_BF16:
        for (size_t i = 0; i < n; i++)
            store_u16(dst + 2 * i, st_f32_to_bf16(in[i]));
        break;
    case ST_F8_E4M3:
        for (size_t i = 0; i < n; i++)
            dst[i] = st_f32_to_f8e4m3(in[i]);
        break;
    case ST_F8_E5M2:
        for (size_t i = 0; i < n; i++)
            dst[i] = st_f32_to_f8e5m2(in[i]);
        break;
    default:
        break;
    }
}

/* ---- x86 kernels: AVX2 + F16C, chosen at run time ---- */

#ifdef ST_CONVERT_X86

#define X86_TARGET __attribute__((target("avx2,f16c")))

/* __builtin_cpu_supports("avx2") also checks that the OS saves AVX state; clang's
 * builtin does not know "f16c", so that bit is read from CPUID leaf 1 directly. */
static bool x86_detect_avx2_f16c(void)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2"))
        return false;
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
        return false;
    return (ecx & bit_F16C) != 0;
}

/* CPUID can trap to the hypervisor (microseconds), and the scanner calls the counter
 * once per chunk: detect once. 0 = not yet known, 1 = absent, 2 = present; threads
 * racing on the first call store the same value. */
static atomic_int x86_avx2_f16c_state;

static bool x86_has_avx2_f16c(void)
{
    int state = atomic_load_explicit(&x86_avx2_f16c_state, memory_order_relaxed);
    if (state == 0) {
        state = x86_detect_avx2_f16c() ? 2 : 1;
        atomic_store_explicit(&x86_avx2_f16c_state, state, memory_order_relaxed);
    }
    return state == 2;
}

/* Outputs at least this large bypass the cache (non-temporal stores): a converted
 * tensor that big is written out, not reread soon, and streaming saves the read-for-
 * ownership of every destination line (about 2.5x on widening kernels). */
#define STREAMING_OUTPUT_BYTES (8u << 20)

/* Elements of `width` output bytes to convert one by one before dst + width * head is
 * aligned to `alignment`; SIZE_MAX when no head of fewer than n elements reaches it
 * (dst not a multiple of width, or the output too short). */
static size_t aligned_head(const uint8_t *dst, size_t width, size_t alignment, size_t n)
{
    for (size_t head = 0; head < alignment && head < n; head++) {
        if (((uintptr_t)(dst + width * head) & (alignment - 1)) == 0)
            return head;
    }
    return SIZE_MAX;
}

/* F32 -> F16 with F16C (RNE). F16C keeps NaN payloads; c10 writes sign | 0x7E00,
 * so NaN lanes (magnitude above 0x7C00) are rewritten. */
X86_TARGET static __m128i f16_round_lanes(__m256 x)
{
    const __m128i magnitude_mask = _mm_set1_epi16(0x7FFF);
    const __m128i sign_mask = _mm_set1_epi16((short)0x8000);
    const __m128i infinity = _mm_set1_epi16(0x7C00);
    const __m128i canonical_nan = _mm_set1_epi16(0x7E00);
    __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
    /* magnitudes are <= 0x7FFF, so the signed compare is exact */
    __m128i is_nan = _mm_cmpgt_epi16(_mm_and_si128(h, magnitude_mask), infinity);
    __m128i nan_value = _mm_or_si128(_mm_and_si128(h, sign_mask), canonical_nan);
    return _mm_blendv_epi8(h, nan_value, is_nan);
}

X86_TARGET static void f32_to_f16_avx2(const uint8_t *src, uint8_t *dst, size_t n)
{
    size_t i = 0;
    size_t head = n * 2 >= STREAMING_OUTPUT_BYTES ? aligned_head(dst, 2, 16, n) : SIZE_MAX;
    if (head != SIZE_MAX) {
        for (; i < head; i++)
            store_u16(dst + 2 * i, st_f32_to_f16(load_f32(src + 4 * i)));
        for (; i + 8 <= n; i += 8) {
            __m256 x = _mm256_loadu_ps((const float *)(const void *)(src + 4 * i));
            _mm_stream_si128((__m128i *)(void *)(dst + 2 * i), f16_round_lanes(x));
        }
        _mm_sfence();
    }
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps((const float *)(const void *)(src + 4 * i));
        _mm_storeu_si128((__m128i *)(void *)(dst + 2 * i), f16_round_lanes(x));
    }
    for (; i < n; i++)
        store_u16(dst + 2 * i, st_f32_to_f16(load_f32(src + 4 * i)));
}

X86_TARGET static void f16_to_f32_avx2(const uint8_t *src, uint8_t *dst, size_t n)
{
    size_t i = 0;
    size_t head = n * 4 >= STREAMING_OUTPUT_BYTES ? aligned_head(dst, 4, 32, n) : SIZE_MAX;
    if (head != SIZE_MAX) {
        for (; i < head; i++)
            store_f32(dst + 4 * i, st_f16_to_f32(load_u16(src + 2 * i)));
        for (; i + 8 <= n; i += 8) {
            __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + 2 * i));
            _mm256_stream_ps((float *)(void *)(dst + 4 * i), _mm256_cvtph_ps(h));
        }
        _mm_sfence();
    }
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + 2 * i));
        _mm256_storeu_ps((float *)(void *)(dst + 4 * i), _mm256_cvtph_ps(h));
    }
    for (; i < n; i++)
        store_f32(dst + 4 * i, st_f16_to_f32(load_u16(src + 2 * i)));
}

/* RNE of 8 float lanes to BF16 in the low 16 bits of each 32-bit lane; NaN -> 0x7FC0. */
X86_TARGET static __m256i bf16_round_lanes(__m256i bits)
{
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i bias = _mm256_set1_epi32(0x7FFF);
    const __m256i magnitude_mask = _mm256_set1_epi32(0x7FFFFFFF);
    const __m256i infinity = _mm256_set1_epi32(0x7F800000);
    const __m256i canonical_nan = _mm256_set1_epi32(0x7FC0);
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), one);
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(bias, odd)), 16);
    __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, magnitude_mask), infinity);
    return _mm256_blendv_epi8(rounded, canonical_nan, is_nan);
}

/* 16 floats to 16 BF16 in element order. Each lane is <= 0xFFFF, so unsigned
 * saturation never clips; packus works per 128-bit half, the permute restores order. */
X86_TARGET static __m256i bf16_round_16(const uint8_t *src)
{
    __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)src);
    __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(src + 32));
    __m256i packed = _mm256_packus_epi32(bf16_round_lanes(a), bf16_round_lanes(b));
    return _mm256_permute4x64_epi64(packed, 0xD8);
}

X86_TARGET static void f32_to_bf16_avx2(const uint8_t *src, uint8_t *dst, size_t n)
{
    size_t i = 0;
    size_t head = n * 2 >= STREAMING_OUTPUT_BYTES ? aligned_head(dst, 2, 32, n) : SIZE_MAX;
    if (head != SIZE_MAX) {
        for (; i < head; i++)
            store_u16(dst + 2 * i, st_f32_to_bf16(load_f32(src + 4 * i)));
        for (; i + 16 <= n; i += 16)
            _mm256_stream_si256((__m256i *)(void *)(dst + 2 * i), bf16_round_16(src + 4 * i));
        _mm_sfence();
    }
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(void *)(dst + 2 * i), bf16_round_16(src + 4 * i));
    for (; i < n; i++)
        store_u16(dst + 2 * i, st_f32_to_bf16(load_f32(src + 4 * i)));
}

/* Widens 8 BF16 values to F32 lanes. */
X86_TARGET static __m256i bf16_widen(__m128i h)
{
    return _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
}

X86_TARGET static void bf16_to_f32_avx2(const uint8_t *src, uint8_t *dst, size_t n)
{
    size_t i = 0;
    size_t head = n * 4 >= STREAMING_OUTPUT_BYTES ? aligned_head(dst, 4, 32, n) : SIZE_MAX;
    if (head != SIZE_MAX) {
        for (; i < head; i++)
            store_f32(dst + 4 * i, st_bf16_to_f32(load_u16(src + 2 * i)));
        for (; i + 8 <= n; i += 8) {
            __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + 2 * i));
            _mm256_stream_si256((__m256i *)(void *)(dst + 4 * i), bf16_widen(h));
        }
        _mm_sfence();
    }
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + 2 * i));
        _mm256_storeu_si256((__m256i *)(void *)(dst + 4 * i), bf16_widen(h));
    }
    for (; i < n; i++)
        store_f32(dst + 4 * i, st_bf16_to_f32(load_u16(src + 2 * i)));
}

/* F64 -> F32 (cvtpd2ps rounds by MXCSR, RNE by default, like the C cast). */
X86_TARGET static void f64_to_f32_avx2(const uint8_t *src, uint8_t *dst, size_t n)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256d x = _mm256_loadu_pd((const double *)(const void *)(src + 8 * i));
        _mm_storeu_ps((float *)(void *)(dst + 4 * i), _mm256_cvtpd_ps(x));
    }
    for (; i < n; i++)
        store_f32(dst + 4 * i, (float)load_f64(src + 8 * i));
}

X86_TARGET static void f32_to_f64_avx2(const uint8_t *src, uint8_t *dst, size_t n)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m128 x = _mm_loadu_ps((const float *)(const void *)(src + 4 * i));
        _mm256_storeu_pd((double *)(void *)(dst + 8 * i), _mm256_cvtps_pd(x));
    }
    for (; i < n; i++)
        store_f64(dst + 8 * i, (double)load_f32(src + 4 * i));
}

/* Kernels that read or write F32 directly; NULL where only the portable path exists. */
typedef void (*x86_kernel)(const uint8_t *src, uint8_t *dst, size_t n);

static x86_kernel x86_decode_kernel(st_dtype from)
{
    switch (from) {
    case ST_F16:
        return f16_to_f32_avx2;
    case ST_BF16:
        return bf16_to_f32_avx2;
    case ST_F64:
        return f64_to_f32_avx2;
    default:
        return NULL;
    }
}

static x86_kernel x86_encode_kernel(st_dtype to)
{
    switch (to) {
    case ST_F16:
        return f32_to_f16_avx2;
    case ST_BF16:
        return f32_to_bf16_avx2;
    case ST_F64:
        return f32_to_f64_avx2;
    default:
        return NULL;
    }
}

#endif /* ST_CONVERT_X86 */

static bool use_simd(void)
{
#ifdef ST_CONVERT_X86
    return !atomic_load(&force_portable_path) && x86_has_avx2_f16c();
#else
    return false;
#endif
}

/* Decodes n (<= STAGE_ELEMENTS) elements to floats in stage. */
static void decode_block(st_dtype from, const uint8_t *src, float *stage, size_t n, bool simd)
{
#ifdef ST_CONVERT_X86
    x86_kernel kernel = simd ? x86_decode_kernel(from) : NULL;
    if (kernel != NULL) {
        kernel(src, (uint8_t *)stage, n);
        return;
    }
#else
    (void)simd;
#endif
    decode_portable(from, src, stage, n);
}

static void encode_block(st_dtype to, const float *stage, uint8_t *dst, size_t n, bool simd)
{
#ifdef ST_CONVERT_X86
    x86_kernel kernel = simd ? x86_encode_kernel(to) : NULL;
    if (kernel != NULL) {
        kernel((const uint8_t *)stage, dst, n);
        return;
    }
#else
    (void)simd;
#endif
    encode_portable(to, stage, dst, n);
}

void st_convert(st_dtype from, st_dtype to, const void *src, void *dst, size_t n)
{
    if (!st_convert_supported(from, to) || n == 0)
        return;
    const uint8_t *in = src;
    uint8_t *out = dst;
    size_t in_size = st_dtype_bits(from) / 8, out_size = st_dtype_bits(to) / 8;
    if (from == to) {
        /* n elements of a dtype that exists in memory: n * size cannot overflow */
        memcpy(out, in, n * in_size);
        return;
    }
    bool simd = use_simd();
#ifdef ST_CONVERT_X86
    /* a pair with F32 on one side and a kernel for the other runs in one pass */
    if (simd && from == ST_F32 && x86_encode_kernel(to) != NULL) {
        x86_encode_kernel(to)(in, out, n);
        return;
    }
    if (simd && to == ST_F32 && x86_decode_kernel(from) != NULL) {
        x86_decode_kernel(from)(in, out, n);
        return;
    }
#endif
    /* every other pair goes through float, as PyTorch's scalar conversions do */
    float stage[STAGE_ELEMENTS];
    for (size_t done = 0; done < n;) {
        size_t count = n - done < STAGE_ELEMENTS ? n - done : STAGE_ELEMENTS;
        const uint8_t *block_in = in + done * in_size;
        uint8_t *block_out = out + done * out_size;
        if (from == ST_F32)
            memcpy(stage, block_in, count * sizeof(float));
        else
            decode_block(from, block_in, stage, count, simd);
        if (to == ST_F32)
            memcpy(block_out, stage, count * sizeof(float));
        else
            encode_block(to, stage, block_out, count, simd);
        done += count;
    }
}

/* ---- NaN / Inf counting ---- */

static void count_f32_portable(const uint8_t *src, uint64_t n, uint64_t *nan, uint64_t *inf)
{
    uint64_t nans = 0, infs = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t magnitude = load_u32(src + 4 * i) & 0x7FFFFFFFu;
        nans += magnitude > 0x7F800000u;
        infs += magnitude == 0x7F800000u;
    }
    *nan += nans;
    *inf += infs;
}

static void count_f64_portable(const uint8_t *src, uint64_t n, uint64_t *nan, uint64_t *inf)
{
    uint64_t nans = 0, infs = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t magnitude = load_u64(src + 8 * i) & 0x7FFFFFFFFFFFFFFFull;
        nans += magnitude > 0x7FF0000000000000ull;
        infs += magnitude == 0x7FF0000000000000ull;
    }
    *nan += nans;
    *inf += infs;
}

/* 16-bit formats: infinity_bits is 0x7C00 (F16) or 0x7F80 (BF16). */
static void count_16_portable(const uint8_t *src, uint64_t n, uint16_t infinity_bits, uint64_t *nan,
                              uint64_t *inf)
{
    uint64_t nans = 0, infs = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint16_t magnitude = load_u16(src + 2 * i) & 0x7FFFu;
        nans += magnitude > infinity_bits;
        infs += magnitude == infinity_bits;
    }
    *nan += nans;
    *inf += infs;
}

/* 8-bit formats: E4M3 (fn) NaN is s.1111.111; E5M2 NaN is s.11111.{01,10,11}, Inf
 * s.11111.00; the FNUZ variants have one NaN, 0x80 (no -0); E8M0's NaN is 0xFF. */
static void count_8_portable(st_dtype dtype, const uint8_t *src, uint64_t n, uint64_t *nan,
                             uint64_t *inf)
{
    uint64_t nans = 0, infs = 0;
    switch (dtype) {
    case ST_F8_E4M3:
        for (uint64_t i = 0; i < n; i++)
            nans += (src[i] & 0x7Fu) == 0x7Fu;
        break;
    case ST_F8_E5M2:
        for (uint64_t i = 0; i < n; i++) {
            unsigned magnitude = src[i] & 0x7Fu;
            nans += magnitude > 0x7Cu;
            infs += magnitude == 0x7Cu;
        }
        break;
    case ST_F8_E4M3FNUZ:
    case ST_F8_E5M2FNUZ:
        for (uint64_t i = 0; i < n; i++)
            nans += src[i] == 0x80u;
        break;
    case ST_F8_E8M0:
        for (uint64_t i = 0; i < n; i++)
            nans += src[i] == 0xFFu;
        break;
    default:
        break;
    }
    *nan += nans;
    *inf += infs;
}

#ifdef ST_CONVERT_X86

/* Sums the eight 32-bit lanes of v (each a count, non-negative). */
X86_TARGET static uint64_t sum_lanes_32(__m256i v)
{
    uint32_t lanes[8];
    _mm256_storeu_si256((__m256i *)(void *)lanes, v);
    uint64_t sum = 0;
    for (int i = 0; i < 8; i++)
        sum += lanes[i];
    return sum;
}

/* Counts over 32-bit words; each iteration adds at most 2 per lane, and lanes are
 * flushed every 2^20 iterations, far below 2^31. */
X86_TARGET static uint64_t count_f32_avx2(const uint8_t *src, uint64_t n, uint64_t *nan,
                                          uint64_t *inf)
{
    const __m256i magnitude_mask = _mm256_set1_epi32(0x7FFFFFFF);
    const __m256i infinity = _mm256_set1_epi32(0x7F800000);
    uint64_t i = 0;
    while (n - i >= 16) {
        uint64_t block_end = n - i > (16ull << 20) ? i + (16ull << 20) : n - (n - i) % 16;
        __m256i nans = _mm256_setzero_si256(), infs = _mm256_setzero_si256();
        for (; i < block_end; i += 16) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(src + 4 * i));
            __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(src + 4 * i + 32));
            a = _mm256_and_si256(a, magnitude_mask);
            b = _mm256_and_si256(b, magnitude_mask);
            /* a compare yields -1 per true lane: subtracting counts it */
            nans = _mm256_sub_epi32(nans, _mm256_cmpgt_epi32(a, infinity));
            nans = _mm256_sub_epi32(nans, _mm256_cmpgt_epi32(b, infinity));
            infs = _mm256_sub_epi32(infs, _mm256_cmpeq_epi32(a, infinity));
            infs = _mm256_sub_epi32(infs, _mm256_cmpeq_epi32(b, infinity));
        }
        *nan += sum_lanes_32(nans);
        *inf += sum_lanes_32(infs);
    }
    return i;
}

/* 16-bit words: per-lane 16-bit counters gain at most 2 per iteration and are flushed
 * (widened) every 2^13 iterations, so a lane stays <= 2^14, inside signed 16 bits. */
X86_TARGET static uint64_t count_16_avx2(const uint8_t *src, uint64_t n, uint16_t infinity_bits,
                                         uint64_t *nan, uint64_t *inf)
{
    const __m256i magnitude_mask = _mm256_set1_epi16(0x7FFF);
    const __m256i infinity = _mm256_set1_epi16((short)infinity_bits);
    const __m256i ones = _mm256_set1_epi16(1);
    uint64_t i = 0;
    while (n - i >= 32) {
        uint64_t block_end = n - i > (32ull << 13) ? i + (32ull << 13) : n - (n - i) % 32;
        __m256i nans = _mm256_setzero_si256(), infs = _mm256_setzero_si256();
        for (; i < block_end; i += 32) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(src + 2 * i));
            __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(src + 2 * i + 32));
            a = _mm256_and_si256(a, magnitude_mask);
            b = _mm256_and_si256(b, magnitude_mask);
            nans = _mm256_sub_epi16(nans, _mm256_cmpgt_epi16(a, infinity));
            nans = _mm256_sub_epi16(nans, _mm256_cmpgt_epi16(b, infinity));
            infs = _mm256_sub_epi16(infs, _mm256_cmpeq_epi16(a, infinity));
            infs = _mm256_sub_epi16(infs, _mm256_cmpeq_epi16(b, infinity));
        }
        /* madd (signed) with 1 widens lane pairs to 32 bits */
        *nan += sum_lanes_32(_mm256_madd_epi16(nans, ones));
        *inf += sum_lanes_32(_mm256_madd_epi16(infs, ones));
    }
    return i;
}

/* Sums 32 byte counters (each <= 255) into a 64-bit total. */
X86_TARGET static uint64_t sum_bytes(__m256i counters)
{
    __m256i sums = _mm256_sad_epu8(counters, _mm256_setzero_si256());
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)(void *)lanes, sums);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

/* 8-bit formats: byte counters flushed every 255 iterations. NaN is
 * (b & nan_mask) == nan_value, or for E5M2 a magnitude above 0x7C (Inf == 0x7C). */
X86_TARGET static uint64_t count_8_avx2(st_dtype dtype, const uint8_t *src, uint64_t n,
                                        uint64_t *nan, uint64_t *inf)
{
    uint8_t nan_mask = 0xFF, nan_value = 0;
    bool e5m2 = dtype == ST_F8_E5M2;
    if (dtype == ST_F8_E4M3) {
        nan_mask = 0x7F;
        nan_value = 0x7F;
    } else if (dtype == ST_F8_E4M3FNUZ || dtype == ST_F8_E5M2FNUZ) {
        nan_value = 0x80;
    } else if (dtype == ST_F8_E8M0) {
        nan_value = 0xFF;
    } else if (e5m2) {
        nan_mask = 0x7F;
    } else {
        return n;
    }
    const __m256i mask = _mm256_set1_epi8((char)nan_mask);
    const __m256i value = _mm256_set1_epi8((char)nan_value);
    const __m256i infinity = _mm256_set1_epi8(0x7C);
    uint64_t i = 0;
    while (n - i >= 32) {
        uint64_t block_end = n - i > 32ull * 255 ? i + 32ull * 255 : n - (n - i) % 32;
        __m256i nans = _mm256_setzero_si256(), infs = _mm256_setzero_si256();
        for (; i < block_end; i += 32) {
            __m256i b = _mm256_and_si256(
                _mm256_loadu_si256((const __m256i *)(const void *)(src + i)), mask);
            if (e5m2) {
                /* magnitudes are <= 0x7F: the signed byte compare is exact */
                nans = _mm256_sub_epi8(nans, _mm256_cmpgt_epi8(b, infinity));
                infs = _mm256_sub_epi8(infs, _mm256_cmpeq_epi8(b, infinity));
            } else {
                nans = _mm256_sub_epi8(nans, _mm256_cmpeq_epi8(b, value));
            }
        }
        *nan += sum_bytes(nans);
        *inf += sum_bytes(infs);
    }
    return i;
}

#endif /* ST_CONVERT_X86 */

void st_count_nonfinite(st_dtype dtype, const void *src, uint64_t n, uint64_t *nan, uint64_t *inf)
{
    const uint8_t *bytes = src;
    bool simd = use_simd();
    uint64_t done = 0;
    switch (dtype) {
    case ST_C64:
        /* both parts are F32 values; n C64 elements sit in memory, so 2n fits */
        n *= 2;
        /* fall through */
    case ST_F32:
#ifdef ST_CONVERT_X86
        if (simd)
            done = count_f32_avx2(bytes, n, nan, inf);
#endif
        count_f32_portable(bytes + 4 * done, n - done, nan, inf);
        break;
    case ST_F64:
        count_f64_portable(bytes, n, nan, inf);
        break;
    case ST_F16:
    case ST_BF16: {
        uint16_t infinity_bits = dtype == ST_F16 ? 0x7C00u : 0x7F80u;
#ifdef ST_CONVERT_X86
        if (simd)
            done = count_16_avx2(bytes, n, infinity_bits, nan, inf);
#endif
        count_16_portable(bytes + 2 * done, n - done, infinity_bits, nan, inf);
        break;
    }
    case ST_F8_E4M3:
    case ST_F8_E5M2:
    case ST_F8_E4M3FNUZ:
    case ST_F8_E5M2FNUZ:
    case ST_F8_E8M0:
#ifdef ST_CONVERT_X86
        if (simd)
            done = count_8_avx2(dtype, bytes, n, nan, inf);
#endif
        count_8_portable(dtype, bytes + done, n - done, nan, inf);
        break;
    default:
        /* integers, BOOL, F4 and F6_* have no NaN or Inf encodings */
        (void)simd;
        break;
    }
}
