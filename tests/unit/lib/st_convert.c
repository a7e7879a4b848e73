/* Conversion kernels against the vectors of tests/vectors (generated from torch 1.13 and
 * an exact OFP8 reference by gen_convert_vectors.py), on the portable and the SIMD path,
 * aligned and not; NaN/Inf counting against a per-element reference.
 * Reads the vectors from $TG_VECTORS_DIR or tests/vectors (run from the repo root). */
#include "st_convert.h"

#include <math.h>
#include <stdlib.h>

#include "../test.h"

static const st_dtype convert_types[] = {ST_F64, ST_F32, ST_F16, ST_BF16, ST_F8_E4M3, ST_F8_E5M2};
#define CONVERT_TYPE_COUNT (sizeof convert_types / sizeof convert_types[0])

static size_t width(st_dtype dtype)
{
    return st_dtype_bits(dtype) / 8;
}

/* Reads a whole file; NULL when missing or empty. */
static uint8_t *read_file(const char *name, size_t *len)
{
    const char *dir = getenv("TG_VECTORS_DIR");
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir != NULL ? dir : "tests/vectors", name);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "cannot open %s (run from the repository root or set TG_VECTORS_DIR)\n",
                path);
        return NULL;
    }
    uint8_t *data = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (size == cap) {
            cap = cap == 0 ? 1 << 16 : cap * 2;
            uint8_t *bigger = realloc(data, cap);
            if (bigger == NULL)
                break;
            data = bigger;
        }
        size_t got = fread(data + size, 1, cap - size, f);
        if (got == 0)
            break;
        size += got;
    }
    fclose(f);
    if (size == 0) {
        free(data);
        return NULL;
    }
    *len = size;
    return data;
}

static uint64_t element_bits(const uint8_t *p, size_t w)
{
    uint64_t v = 0;
    for (size_t i = w; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

/* Converts every vector input on one path at one misalignment and counts differing elements. */
static uint64_t check_pair_once(st_dtype from, st_dtype to, const uint8_t *in, const uint8_t *want,
                                size_t n, bool portable, size_t misalign)
{
    uint8_t *src = malloc(n * width(from) + misalign);
    uint8_t *dst = malloc(n * width(to) + misalign);
    if (src == NULL || dst == NULL) {
        free(src);
        free(dst);
        return n;
    }
    memcpy(src + misalign, in, n * width(from));
    memset(dst, 0xA5, n * width(to) + misalign);
    bool before = st_convert_force_portable(portable);
    st_convert(from, to, src + misalign, dst + misalign, n);
    st_convert_force_portable(before);
    uint64_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t got = element_bits(dst + misalign + i * width(to), width(to));
        uint64_t expect = element_bits(want + i * width(to), width(to));
        if (got != expect && bad++ < 4)
            fprintf(stderr, "  %s->%s %s+%zu: in %#" PRIx64 " got %#" PRIx64 " want %#" PRIx64 "\n",
                    st_dtype_name(from), st_dtype_name(to), portable ? "portable" : "simd",
                    misalign, element_bits(in + i * width(from), width(from)), got, expect);
    }
    free(src);
    free(dst);
    return bad;
}

TEST(every_pair_matches_vectors_on_both_paths)
{
    unsigned pairs_checked = 0;
    for (size_t a = 0; a < CONVERT_TYPE_COUNT; a++) {
        st_dtype from = convert_types[a];
        char name[64];
        snprintf(name, sizeof name, "in_%s.bin", st_dtype_name(from));
        size_t in_len = 0;
        uint8_t *in = read_file(name, &in_len);
        CHECK(in != NULL);
        if (in == NULL)
            continue;
        size_t n = in_len / width(from);
        for (size_t b = 0; b < CONVERT_TYPE_COUNT; b++) {
            st_dtype to = convert_types[b];
            if (to == from)
                continue;
            snprintf(name, sizeof name, "%s_to_%s.bin", st_dtype_name(from), st_dtype_name(to));
            size_t want_len = 0;
            uint8_t *want = read_file(name, &want_len);
            CHECK(want != NULL);
            if (want == NULL)
                continue;
            CHECK_EQ_U64(want_len, n * width(to));
            if (want_len == n * width(to)) {
                for (int portable = 0; portable <= 1; portable++)
                    for (size_t misalign = 0; misalign <= 3; misalign += 3)
                        CHECK_EQ_U64(check_pair_once(from, to, in, want, n, portable, misalign), 0);
                pairs_checked++;
            }
            free(want);
        }
        free(in);
    }
    CHECK_EQ_U64(pairs_checked, 30);
}

/* The single-value helpers are the portable path's reference: check them too. */
TEST(single_value_helpers_match_vectors)
{
    size_t len, want_len;
    uint8_t *in = read_file("in_F32.bin", &len);
    CHECK(in != NULL);
    if (in != NULL) {
        size_t n = len / 4;
        const char *names[] = {"F32_to_F16.bin", "F32_to_BF16.bin", "F32_to_F8_E4M3.bin",
                               "F32_to_F8_E5M2.bin"};
        for (int k = 0; k < 4; k++) {
            uint8_t *want = read_file(names[k], &want_len);
            CHECK(want != NULL);
            if (want == NULL)
                continue;
            uint64_t bad = 0;
            for (size_t i = 0; i < n; i++) {
                float value;
                memcpy(&value, in + 4 * i, 4);
                uint64_t got = k == 0   ? st_f32_to_f16(value)
                               : k == 1 ? st_f32_to_bf16(value)
                               : k == 2 ? st_f32_to_f8e4m3(value)
                                        : st_f32_to_f8e5m2(value);
                uint64_t expect = k < 2 ? element_bits(want + 2 * i, 2) : want[i];
                bad += got != expect;
            }
            CHECK_EQ_U64(bad, 0);
            free(want);
        }
        free(in);
    }
    /* decoders over every code */
    uint8_t *f16 = read_file("F16_to_F32.bin", &len);
    uint8_t *bf16 = read_file("BF16_to_F32.bin", &want_len);
    CHECK(f16 != NULL && bf16 != NULL);
    if (f16 != NULL && bf16 != NULL) {
        uint64_t bad = 0;
        for (uint32_t code = 0; code < 65536; code++) {
            float h = st_f16_to_f32((uint16_t)code), b = st_bf16_to_f32((uint16_t)code);
            bad += memcmp(&h, f16 + 4 * code, 4) != 0;
            bad += memcmp(&b, bf16 + 4 * code, 4) != 0;
        }
        CHECK_EQ_U64(bad, 0);
    }
    free(f16);
    free(bf16);
    uint8_t *e4 = read_file("F8_E4M3_to_F32.bin", &len);
    uint8_t *e5 = read_file("F8_E5M2_to_F32.bin", &want_len);
    CHECK(e4 != NULL && e5 != NULL);
    if (e4 != NULL && e5 != NULL) {
        uint64_t bad = 0;
        for (uint32_t code = 0; code < 256; code++) {
            float a = st_f8e4m3_to_f32((uint8_t)code), b = st_f8e5m2_to_f32((uint8_t)code);
            bad += memcmp(&a, e4 + 4 * code, 4) != 0;
            bad += memcmp(&b, e5 + 4 * code, 4) != 0;
        }
        CHECK_EQ_U64(bad, 0);
    }
    free(e4);
    free(e5);
}

/* Facts from the formats' definitions, independent of the vector files. */
TEST(known_values)
{
    CHECK_EQ_U64(st_f32_to_f16(1.0f), 0x3C00);
    CHECK_EQ_U64(st_f32_to_f16(65504.0f), 0x7BFF);
    CHECK_EQ_U64(st_f32_to_f16(65520.0f), 0x7C00); /* halfway to 2^16 ties to even: Inf */
    CHECK_EQ_U64(st_f32_to_f16(-0.0f), 0x8000);
    CHECK_EQ_U64(st_f32_to_f16(0x1p-24f), 0x0001);
    CHECK_EQ_U64(st_f32_to_f16(0x1p-25f), 0x0000); /* half the smallest subnormal ties to 0 */
    CHECK_EQ_U64(st_f32_to_f16(-NAN), 0xFE00);
    CHECK_EQ_U64(st_f32_to_bf16(1.00390625f), 0x3F80); /* 1 + 2^-8: tie to even */
    CHECK_EQ_U64(st_f32_to_bf16(-NAN), 0x7FC0);
    CHECK_EQ_U64(st_f32_to_bf16(INFINITY), 0x7F80);
    CHECK_EQ_U64(st_f32_to_f8e4m3(448.0f), 0x7E);
    CHECK_EQ_U64(st_f32_to_f8e4m3(464.0f), 0x7E);
    CHECK_EQ_U64(st_f32_to_f8e4m3(470.0f), 0x7F);
    CHECK_EQ_U64(st_f32_to_f8e4m3(-INFINITY), 0xFF);
    CHECK_EQ_U64(st_f32_to_f8e5m2(57344.0f), 0x7B);
    CHECK_EQ_U64(st_f32_to_f8e5m2(61440.0f), 0x7C);
    CHECK_EQ_U64(st_f32_to_f8e5m2(-NAN), 0xFF);
    CHECK(st_f8e4m3_to_f32(0x38) == 1.0f);
    CHECK(st_f8e4m3_to_f32(0x01) == 0x1p-9f);
    CHECK(isnan(st_f8e4m3_to_f32(0xFF)));
    CHECK(st_f8e5m2_to_f32(0x7C) == INFINITY);
    /* double rounding, as torch does it: F64 -> F32 -> F16 */
    double above_half = 1.0 + 0x1p-11 + 0x1p-40;
    uint16_t h = 0;
    st_convert(ST_F64, ST_F16, &above_half, &h, 1);
    CHECK_EQ_U64(h, 0x3C00);
}

TEST(supported_pairs)
{
    unsigned supported = 0;
    for (unsigned a = 0; a < ST_DTYPE_COUNT; a++)
        for (unsigned b = 0; b < ST_DTYPE_COUNT; b++)
            supported += st_convert_supported((st_dtype)a, (st_dtype)b);
    CHECK_EQ_U64(supported, 36);
    CHECK(st_convert_supported(ST_F8_E4M3, ST_F64));
    CHECK(!st_convert_supported(ST_F32, ST_I32));
    CHECK(!st_convert_supported(ST_C64, ST_F32));
    CHECK(!st_convert_supported(ST_F8_E4M3FNUZ, ST_F32));
    /* from == to copies the bytes unchanged, NaN payloads included */
    uint8_t in[24], out[24];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (uint8_t)(0xF1 + 7 * i);
    for (size_t k = 0; k < CONVERT_TYPE_COUNT; k++) {
        memset(out, 0, sizeof out);
        st_convert(convert_types[k], convert_types[k], in, out, 24 / width(convert_types[k]));
        CHECK(memcmp(in, out, sizeof in) == 0);
    }
}

/* Pseudo-random bits, fixed seed (xorshift64*). */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t next_random(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* SIMD bodies and scalar tails at every short length and offset: same bytes as portable,
 * and nothing written past n elements. */
TEST(short_lengths_and_offsets_agree_across_paths)
{
    enum { MAX_N = 70, PAD = 8 };
    uint8_t src[MAX_N * 8 + PAD], simd_out[MAX_N * 8 + 2 * PAD], portable_out[MAX_N * 8 + 2 * PAD];
    uint64_t bad = 0;
    for (size_t a = 0; a < CONVERT_TYPE_COUNT; a++) {
        for (size_t b = 0; b < CONVERT_TYPE_COUNT; b++) {
            st_dtype from = convert_types[a], to = convert_types[b];
            for (size_t n = 0; n <= MAX_N; n++) {
                size_t offset = n % 5;
                for (size_t i = 0; i < sizeof src; i++)
                    src[i] = (uint8_t)next_random();
                memset(simd_out, 0x5A, sizeof simd_out);
                memset(portable_out, 0x5A, sizeof portable_out);
                bool before = st_convert_force_portable(false);
                st_convert(from, to, src + offset, simd_out + offset, n);
                st_convert_force_portable(true);
                st_convert(from, to, src + offset, portable_out + offset, n);
                st_convert_force_portable(before);
                bad += memcmp(simd_out, portable_out, sizeof simd_out) != 0;
                for (size_t i = offset + n * width(to); i < sizeof simd_out; i++)
                    bad += simd_out[i] != 0x5A;
                for (size_t i = 0; i < offset; i++)
                    bad += simd_out[i] != 0x5A;
            }
        }
    }
    CHECK_EQ_U64(bad, 0);
}

/* Outputs of 8 MiB and more take the non-temporal store path: same bytes as portable,
 * at every destination misalignment (including ones that never reach alignment). */
TEST(large_outputs_agree_across_paths)
{
    const size_t n = (9u << 20) / 4 + 37;     /* F32 output just over 9 MiB; 16-bit over 4.5 MiB */
    const size_t big_n = (9u << 20) / 2 + 37; /* 16-bit outputs over 9 MiB */
    uint8_t *src = malloc(big_n * 4 + 8);
    uint8_t *simd_out = malloc(big_n * 4 + 8), *portable_out = malloc(big_n * 4 + 8);
    CHECK(src != NULL && simd_out != NULL && portable_out != NULL);
    if (src != NULL && simd_out != NULL && portable_out != NULL) {
        for (size_t i = 0; i < big_n * 4 + 8; i++)
            src[i] = (uint8_t)next_random();
        struct {
            st_dtype from, to;
            size_t count;
        } cases[] = {{ST_F16, ST_F32, n},
                     {ST_BF16, ST_F32, n},
                     {ST_F32, ST_F16, big_n},
                     {ST_F32, ST_BF16, big_n}};
        size_t misaligns[] = {0, 1, 2, 6};
        for (size_t k = 0; k < 4; k++) {
            for (size_t m = 0; m < 4; m++) {
                size_t out_bytes = cases[k].count * width(cases[k].to) + misaligns[m];
                memset(simd_out, 0, out_bytes);
                memset(portable_out, 0xFF, out_bytes);
                bool before = st_convert_force_portable(false);
                st_convert(cases[k].from, cases[k].to, src + 3, simd_out + misaligns[m],
                           cases[k].count);
                st_convert_force_portable(true);
                st_convert(cases[k].from, cases[k].to, src + 3, portable_out + misaligns[m],
                           cases[k].count);
                st_convert_force_portable(before);
                CHECK(memcmp(simd_out + misaligns[m], portable_out + misaligns[m],
                             out_bytes - misaligns[m]) == 0);
            }
        }
    }
    free(src);
    free(simd_out);
    free(portable_out);
}

/* Per-element reference for counting: decode and classify. */
static void reference_count(st_dtype dtype, const uint8_t *p, uint64_t n, uint64_t *nan,
                            uint64_t *inf)
{
    for (uint64_t i = 0; i < n; i++) {
        double v = 0;
        switch (dtype) {
        case ST_F64:
            memcpy(&v, p + 8 * i, 8);
            break;
        case ST_F32: {
            float f;
            memcpy(&f, p + 4 * i, 4);
            v = f;
            break;
        }
        case ST_F16:
            v = st_f16_to_f32((uint16_t)element_bits(p + 2 * i, 2));
            break;
        case ST_BF16:
            v = st_bf16_to_f32((uint16_t)element_bits(p + 2 * i, 2));
            break;
        case ST_F8_E4M3:
            v = st_f8e4m3_to_f32(p[i]);
            break;
        case ST_F8_E5M2:
            v = st_f8e5m2_to_f32(p[i]);
            break;
        case ST_F8_E4M3FNUZ:
        case ST_F8_E5M2FNUZ:
            v = p[i] == 0x80 ? NAN : 0;
            break;
        case ST_F8_E8M0:
            v = p[i] == 0xFF ? NAN : 0;
            break;
        default:
            break;
        }
        *nan += isnan(v) != 0;
        *inf += isinf(v) != 0;
    }
}

static void count_with(bool portable, st_dtype dtype, const uint8_t *p, uint64_t n, uint64_t *nan,
                       uint64_t *inf)
{
    bool before = st_convert_force_portable(portable);
    st_count_nonfinite(dtype, p, n, nan, inf);
    st_convert_force_portable(before);
}

TEST(count_every_code_of_small_formats)
{
    static uint8_t all16[65536 * 2];
    for (uint32_t code = 0; code < 65536; code++) {
        all16[2 * code] = (uint8_t)code;
        all16[2 * code + 1] = (uint8_t)(code >> 8);
    }
    uint8_t all8[256];
    for (unsigned code = 0; code < 256; code++)
        all8[code] = (uint8_t)code;
    for (int portable = 0; portable <= 1; portable++) {
        uint64_t nan = 0, inf = 0;
        count_with(portable, ST_F16, all16, 65536, &nan, &inf);
        CHECK_EQ_U64(nan, 2 * 1023);
        CHECK_EQ_U64(inf, 2);
        nan = inf = 0;
        count_with(portable, ST_BF16, all16, 65536, &nan, &inf);
        CHECK_EQ_U64(nan, 2 * 127);
        CHECK_EQ_U64(inf, 2);
        struct {
            st_dtype dtype;
            uint64_t nan, inf;
        } cases[] = {{ST_F8_E4M3, 2, 0},     {ST_F8_E5M2, 6, 2}, {ST_F8_E4M3FNUZ, 1, 0},
                     {ST_F8_E5M2FNUZ, 1, 0}, {ST_F8_E8M0, 1, 0}, {ST_U8, 0, 0},
                     {ST_I8, 0, 0},          {ST_BOOL, 0, 0},    {ST_F4, 0, 0},
                     {ST_F6_E2M3, 0, 0}};
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            /* the sub-byte dtypes read as many whole bytes as fit in all8 */
            uint64_t n = cases[k].dtype == ST_F4 ? 512 : cases[k].dtype == ST_F6_E2M3 ? 340 : 256;
            nan = inf = 0;
            count_with(portable, cases[k].dtype, all8, n, &nan, &inf);
            CHECK_EQ_U64(nan, cases[k].nan);
            CHECK_EQ_U64(inf, cases[k].inf);
        }
        nan = inf = 0;
        count_with(portable, ST_I32, all16, 65536 / 2, &nan, &inf);
        CHECK_EQ_U64(nan + inf, 0);
    }
}

/* Random buffers sprinkled with NaN/Inf, large enough to cross every counter flush
 * (16-bit lanes flush every 2^13 steps, byte lanes every 255), at odd offsets. */
TEST(count_random_buffers_against_reference)
{
    const size_t bytes = (1u << 21) + 64;
    uint8_t *buf = malloc(bytes);
    CHECK(buf != NULL);
    if (buf == NULL)
        return;
    st_dtype types[] = {ST_F64,     ST_F32,         ST_F16,         ST_BF16,   ST_F8_E4M3,
                        ST_F8_E5M2, ST_F8_E4M3FNUZ, ST_F8_E5M2FNUZ, ST_F8_E8M0};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        st_dtype dtype = types[k];
        size_t w = width(dtype);
        for (size_t i = 0; i < bytes; i++)
            buf[i] = (uint8_t)next_random();
        /* more non-finite values: about 1 element in 8 gets an all-ones exponent,
         * and a quarter of those a zero mantissa (Inf) */
        for (size_t i = 0; i + w <= bytes && w >= 2; i += w) {
            if (next_random() % 8 != 0)
                continue;
            bool infinite = (next_random() & 3) == 0;
            uint8_t *e = buf + i;
            if (dtype == ST_F64) {
                e[7] |= 0x7F, e[6] |= 0xF0;
                if (infinite)
                    memset(e, 0, 6), e[6] &= 0xF0;
            } else if (dtype == ST_F32) {
                e[3] |= 0x7F, e[2] |= 0x80;
                if (infinite)
                    e[0] = e[1] = 0, e[2] &= 0x80;
            } else if (dtype == ST_F16) {
                e[1] |= 0x7C;
                if (infinite)
                    e[0] = 0, e[1] &= 0xFC;
            } else {
                e[1] |= 0x7F, e[0] |= 0x80;
                if (infinite)
                    e[0] &= 0x80;
            }
        }
        for (size_t offset = 0; offset < 3; offset++) {
            uint64_t n = (bytes - offset) / w - (uint64_t)(next_random() % 100);
            uint64_t want_nan = 0, want_inf = 0;
            reference_count(dtype, buf + offset, n, &want_nan, &want_inf);
            for (int portable = 0; portable <= 1; portable++) {
                uint64_t nan = 7, inf = 9; /* counts are added to what is there */
                count_with(portable, dtype, buf + offset, n, &nan, &inf);
                CHECK_EQ_U64(nan, want_nan + 7);
                CHECK_EQ_U64(inf, want_inf + 9);
            }
            CHECK(dtype == ST_F8_E4M3 || dtype >= ST_F8_E8M0 || want_nan > 0);
        }
    }
    /* C64 counts both parts: the same bytes as 2n F32 */
    uint64_t c_nan = 0, c_inf = 0, f_nan = 0, f_inf = 0;
    count_with(false, ST_C64, buf + 1, 1000, &c_nan, &c_inf);
    reference_count(ST_F32, buf + 1, 2000, &f_nan, &f_inf);
    CHECK_EQ_U64(c_nan, f_nan);
    CHECK_EQ_U64(c_inf, f_inf);
    free(buf);
}

/* Uniform buffers: every lane counts every step, the worst case for the narrow counters. */
TEST(count_saturated_buffers)
{
    const size_t bytes = 3u << 20;
    uint8_t *buf = malloc(bytes);
    CHECK(buf != NULL);
    if (buf == NULL)
        return;
    for (int portable = 0; portable <= 1; portable++) {
        uint64_t nan = 0, inf = 0;
        for (size_t i = 0; i < bytes; i += 2)
            buf[i] = 0x01, buf[i + 1] = 0x7C; /* F16 NaN */
        count_with(portable, ST_F16, buf, bytes / 2, &nan, &inf);
        CHECK_EQ_U64(nan, bytes / 2);
        memset(buf, 0x80, bytes);
        nan = inf = 0;
        count_with(portable, ST_F8_E4M3FNUZ, buf, bytes, &nan, &inf);
        CHECK_EQ_U64(nan, bytes);
        memset(buf, 0xFC, bytes);
        nan = inf = 0;
        count_with(portable, ST_F8_E5M2, buf, bytes, &nan, &inf);
        CHECK_EQ_U64(inf, bytes);
        CHECK_EQ_U64(nan, 0);
        for (size_t i = 0; i < bytes; i += 4)
            buf[i] = 0, buf[i + 1] = 0, buf[i + 2] = 0x80, buf[i + 3] = 0xFF; /* F32 -Inf */
        nan = inf = 0;
        count_with(portable, ST_F32, buf, bytes / 4, &nan, &inf);
        CHECK_EQ_U64(inf, bytes / 4);
    }
    free(buf);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(every_pair_matches_vectors_on_both_paths);
    RUN(single_value_helpers_match_vectors);
    RUN(known_values);
    RUN(supported_pairs);
    RUN(short_lengths_and_offsets_agree_across_paths);
    RUN(large_outputs_agree_across_paths);
    RUN(count_every_code_of_small_formats);
    RUN(count_random_buffers_against_reference);
    RUN(count_saturated_buffers);
    return test_report(argv[0]);
}
