/* The streaming scanner: per-tensor and total NaN/Inf over a hand-built st_file, fed in
 * one piece, byte by byte and in random chunkings (all must agree with a per-element
 * reference), zero-size tensors, bytes past the data section; parameter counts. */
#include "st_stats.h"

#include <stdlib.h>

#include "st_convert.h"

#include "../test.h"

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint64_t next_random(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static uint64_t load_le(const uint8_t *p, size_t width)
{
    uint64_t v = 0;
    for (size_t i = width; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

/* Per-element reference, written from the formats' bit layouts (not from the kernels). */
static void classify(st_dtype dtype, const uint8_t *p, uint64_t bytes, uint64_t *nan, uint64_t *inf)
{
    switch (dtype) {
    case ST_F64:
        for (uint64_t i = 0; i + 8 <= bytes; i += 8) {
            uint64_t v = load_le(p + i, 8);
            bool all_ones = ((v >> 52) & 0x7FF) == 0x7FF, mantissa = (v & 0xFFFFFFFFFFFFFull) != 0;
            *nan += all_ones && mantissa;
            *inf += all_ones && !mantissa;
        }
        break;
    case ST_F32:
    case ST_C64:
        for (uint64_t i = 0; i + 4 <= bytes; i += 4) {
            uint64_t v = load_le(p + i, 4);
            bool all_ones = ((v >> 23) & 0xFF) == 0xFF, mantissa = (v & 0x7FFFFF) != 0;
            *nan += all_ones && mantissa;
            *inf += all_ones && !mantissa;
        }
        break;
    case ST_F16:
    case ST_BF16: {
        unsigned mantissa_bits = dtype == ST_F16 ? 10 : 7;
        unsigned exponent_ones = dtype == ST_F16 ? 0x1F : 0xFF;
        for (uint64_t i = 0; i + 2 <= bytes; i += 2) {
            uint64_t v = load_le(p + i, 2);
            bool all_ones = ((v >> mantissa_bits) & exponent_ones) == exponent_ones;
            bool mantissa = (v & ((1u << mantissa_bits) - 1)) != 0;
            *nan += all_ones && mantissa;
            *inf += all_ones && !mantissa;
        }
        break;
    }
    case ST_F8_E4M3:
        for (uint64_t i = 0; i < bytes; i++)
            *nan += (p[i] & 0x7F) == 0x7F;
        break;
    case ST_F8_E5M2:
        for (uint64_t i = 0; i < bytes; i++) {
            *nan += (p[i] & 0x7C) == 0x7C && (p[i] & 3) != 0;
            *inf += (p[i] & 0x7F) == 0x7C;
        }
        break;
    case ST_F8_E4M3FNUZ:
    case ST_F8_E5M2FNUZ:
        for (uint64_t i = 0; i < bytes; i++)
            *nan += p[i] == 0x80;
        break;
    case ST_F8_E8M0:
        for (uint64_t i = 0; i < bytes; i++)
            *nan += p[i] == 0xFF;
        break;
    default:
        break;
    }
}

enum { MAX_TENSORS = 32 };

struct fixture {
    st_file file;
    st_tensor tensors[MAX_TENSORS];
    uint64_t shapes[MAX_TENSORS][2];
    char names[MAX_TENSORS][32];
    uint8_t *data;
    uint64_t want_nan[MAX_TENSORS], want_inf[MAX_TENSORS];
    uint64_t total_nan, total_inf;
};

/* Lays out the tensors contiguously in the given order and fills the bytes with random
 * values, a share of them NaN/Inf patterns (also inside integer tensors, which must add nothing).
 */
static bool build_fixture(struct fixture *fx, const st_dtype *dtypes, const uint64_t *elements,
                          size_t count)
{
    memset(fx, 0, sizeof *fx);
    uint64_t offset = 0;
    for (size_t i = 0; i < count; i++) {
        st_tensor *t = &fx->tensors[i];
        snprintf(fx->names[i], sizeof fx->names[i], "t%02zu", i);
        t->name = fx->names[i];
        t->name_len = strlen(fx->names[i]);
        t->dtype = dtypes[i];
        fx->shapes[i][0] = elements[i];
        t->rank = 1;
        t->shape = fx->shapes[i];
        t->elements = elements[i];
        uint64_t bytes = 0;
        CHECK_EQ_U64(st_dtype_bytes(dtypes[i], elements[i], &bytes), ST_OK);
        t->begin = offset;
        t->end = offset + bytes;
        offset = t->end;
    }
    fx->file.tensor_count = count;
    fx->file.tensors = fx->tensors;
    fx->file.data_size = offset;
    fx->file.data_start = 8;
    fx->file.file_size = 8 + offset;
    fx->file.internal = NULL;
    fx->data = malloc(offset + 64);
    if (fx->data == NULL)
        return false;
    for (uint64_t i = 0; i < offset + 64; i++) {
        uint64_t r = next_random();
        /* bytes 0x7F/0xFF/0x80/0x7C are what makes NaN/Inf in most layouts */
        static const uint8_t special[] = {0x7F, 0xFF, 0x80, 0x7C, 0xFC, 0x00};
        fx->data[i] = (r & 7) == 0 ? special[(r >> 8) % 6] : (uint8_t)(r >> 16);
    }
    for (size_t i = 0; i < count; i++) {
        const st_tensor *t = &fx->tensors[i];
        classify(t->dtype, fx->data + t->begin, t->end - t->begin, &fx->want_nan[i],
                 &fx->want_inf[i]);
        fx->total_nan += fx->want_nan[i];
        fx->total_inf += fx->want_inf[i];
    }
    return true;
}

static void check_against_reference(const struct fixture *fx, const st_scanner *scanner)
{
    uint64_t bad = 0;
    for (size_t i = 0; i < fx->file.tensor_count; i++)
        bad += scanner->stats[i].nan != fx->want_nan[i] || scanner->stats[i].inf != fx->want_inf[i];
    CHECK_EQ_U64(bad, 0);
    CHECK_EQ_U64(scanner->total_nan, fx->total_nan);
    CHECK_EQ_U64(scanner->total_inf, fx->total_inf);
    CHECK_EQ_U64(scanner->position, fx->file.data_size);
}

static const st_dtype mixed_dtypes[] = {ST_F32,         ST_F16,         ST_F32 /* zero-size */,
                                        ST_BF16,        ST_I32,         ST_C64,
                                        ST_F64,         ST_F8_E4M3,     ST_F8_E5M2,
                                        ST_U8,          ST_F4,          ST_F8_E8M0,
                                        ST_F8_E4M3FNUZ, ST_F8_E5M2FNUZ, ST_BF16 /* zero-size */,
                                        ST_F16,         ST_F6_E2M3,     ST_I64,
                                        ST_F32,         ST_BF16 /* zero-size, last */};
static const uint64_t mixed_elements[] = {3001, 4099, 0,   2047, 1000, 555, 777, 1001, 999,   333,
                                          64,   300,  300, 300,  0,    1,   8,   17,   20000, 0};
#define MIXED_COUNT (sizeof mixed_dtypes / sizeof mixed_dtypes[0])

TEST(one_shot_matches_reference)
{
    struct fixture fx;
    CHECK(build_fixture(&fx, mixed_dtypes, mixed_elements, MIXED_COUNT));
    if (fx.data == NULL)
        return;
    CHECK(fx.total_nan > 0 && fx.total_inf > 0);
    st_scanner scanner;
    CHECK_EQ_U64(st_scanner_init(&scanner, &fx.file), 0);
    st_scanner_feed(&scanner, fx.data, fx.file.data_size);
    check_against_reference(&fx, &scanner);
    /* integer and sub-byte tensors count nothing even though their bytes hold NaN patterns */
    CHECK_EQ_U64(scanner.stats[4].nan + scanner.stats[4].inf, 0);
    CHECK_EQ_U64(scanner.stats[10].nan + scanner.stats[10].inf, 0);
    CHECK_EQ_U64(scanner.stats[2].nan + scanner.stats[2].inf, 0);
    st_scanner_free(&scanner);
    free(fx.data);
}

TEST(byte_by_byte_matches_reference)
{
    struct fixture fx;
    CHECK(build_fixture(&fx, mixed_dtypes, mixed_elements, MIXED_COUNT));
    if (fx.data == NULL)
        return;
    st_scanner scanner;
    CHECK_EQ_U64(st_scanner_init(&scanner, &fx.file), 0);
    for (uint64_t i = 0; i < fx.file.data_size; i++)
        st_scanner_feed(&scanner, fx.data + i, 1);
    check_against_reference(&fx, &scanner);
    st_scanner_free(&scanner);
    free(fx.data);
}

/* Random chunk sizes from 1 byte to 64 KiB, and empty feeds in between. */
TEST(random_chunkings_equal_one_shot)
{
    struct fixture fx;
    CHECK(build_fixture(&fx, mixed_dtypes, mixed_elements, MIXED_COUNT));
    if (fx.data == NULL)
        return;
    st_scanner one_shot;
    CHECK_EQ_U64(st_scanner_init(&one_shot, &fx.file), 0);
    st_scanner_feed(&one_shot, fx.data, fx.file.data_size);
    uint64_t bad = 0;
    for (int round = 0; round < 300; round++) {
        st_scanner scanner;
        CHECK_EQ_U64(st_scanner_init(&scanner, &fx.file), 0);
        uint64_t limits[] = {3, 17, 300, 5000, 65536};
        uint64_t limit = limits[round % 5];
        for (uint64_t at = 0; at < fx.file.data_size;) {
            uint64_t chunk = 1 + next_random() % limit;
            if (chunk > fx.file.data_size - at)
                chunk = fx.file.data_size - at;
            if (next_random() % 16 == 0)
                st_scanner_feed(&scanner, fx.data + at, 0);
            st_scanner_feed(&scanner, fx.data + at, (size_t)chunk);
            at += chunk;
        }
        for (size_t i = 0; i < fx.file.tensor_count; i++)
            bad += scanner.stats[i].nan != one_shot.stats[i].nan ||
                   scanner.stats[i].inf != one_shot.stats[i].inf;
        bad += scanner.total_nan != one_shot.total_nan || scanner.total_inf != one_shot.total_inf;
        bad += scanner.position != fx.file.data_size;
        st_scanner_free(&scanner);
    }
    CHECK_EQ_U64(bad, 0);
    check_against_reference(&fx, &one_shot);
    st_scanner_free(&one_shot);
    free(fx.data);
}

/* Both conversion paths give the same counts, so the scanner agrees with itself forced portable. */
TEST(portable_path_gives_same_counts)
{
    struct fixture fx;
    CHECK(build_fixture(&fx, mixed_dtypes, mixed_elements, MIXED_COUNT));
    if (fx.data == NULL)
        return;
    bool before = st_convert_force_portable(true);
    st_scanner scanner;
    CHECK_EQ_U64(st_scanner_init(&scanner, &fx.file), 0);
    for (uint64_t at = 0; at < fx.file.data_size; at += 777)
        st_scanner_feed(&scanner, fx.data + at,
                        (size_t)(fx.file.data_size - at < 777 ? fx.file.data_size - at : 777));
    st_convert_force_portable(before);
    check_against_reference(&fx, &scanner);
    st_scanner_free(&scanner);
    free(fx.data);
}

TEST(bytes_past_the_data_section_are_ignored)
{
    struct fixture fx;
    st_dtype dtypes[] = {ST_F32, ST_F16};
    uint64_t elements[] = {10, 3};
    CHECK(build_fixture(&fx, dtypes, elements, 2));
    if (fx.data == NULL)
        return;
    st_scanner scanner;
    CHECK_EQ_U64(st_scanner_init(&scanner, &fx.file), 0);
    /* the data plus 64 trailing bytes full of NaN patterns, in two uneven pieces */
    memset(fx.data + fx.file.data_size, 0xFF, 64);
    st_scanner_feed(&scanner, fx.data, 5);
    st_scanner_feed(&scanner, fx.data + 5, (size_t)fx.file.data_size - 5 + 64);
    CHECK_EQ_U64(scanner.stats[0].nan, fx.want_nan[0]);
    CHECK_EQ_U64(scanner.stats[1].nan, fx.want_nan[1]);
    CHECK_EQ_U64(scanner.total_nan, fx.total_nan);
    CHECK_EQ_U64(scanner.total_inf, fx.total_inf);
    CHECK_EQ_U64(scanner.position, fx.file.data_size + 64);
    st_scanner_free(&scanner);
    free(fx.data);
}

TEST(known_counts)
{
    /* F32: NaN, -Inf, 1.0, -NaN; BF16: +Inf, 1.0; F8_E4M3: 0x7F, 0x7E */
    uint8_t data[] = {0x00, 0x00, 0xC0, 0x7F, 0x00, 0x00, 0x80, 0xFF, 0x00, 0x00, 0x80,
                      0x3F, 0x01, 0x00, 0x80, 0xFF, 0x80, 0x7F, 0x80, 0x3F, 0x7F, 0x7E};
    uint64_t shape_f32[] = {2, 2}, shape_bf16[] = {2}, shape_e4m3[] = {2};
    st_tensor tensors[] = {
        {.name = "a",
         .name_len = 1,
         .dtype = ST_F32,
         .rank = 2,
         .shape = shape_f32,
         .elements = 4,
         .begin = 0,
         .end = 16},
        {.name = "b",
         .name_len = 1,
         .dtype = ST_BF16,
         .rank = 1,
         .shape = shape_bf16,
         .elements = 2,
         .begin = 16,
         .end = 20},
        {.name = "c",
         .name_len = 1,
         .dtype = ST_F8_E4M3,
         .rank = 1,
         .shape = shape_e4m3,
         .elements = 2,
         .begin = 20,
         .end = 22},
    };
    st_file file = {.header_size = 0,
                    .data_start = 8,
                    .file_size = 30,
                    .data_size = 22,
                    .tensor_count = 3,
                    .tensors = tensors,
                    .internal = NULL};
    st_scanner scanner;
    CHECK_EQ_U64(st_scanner_init(&scanner, &file), 0);
    st_scanner_feed(&scanner, data, 3);
    st_scanner_feed(&scanner, data + 3, sizeof data - 3);
    CHECK_EQ_U64(scanner.stats[0].nan, 2);
    CHECK_EQ_U64(scanner.stats[0].inf, 1);
    CHECK_EQ_U64(scanner.stats[1].nan, 0);
    CHECK_EQ_U64(scanner.stats[1].inf, 1);
    CHECK_EQ_U64(scanner.stats[2].nan, 1);
    CHECK_EQ_U64(scanner.total_nan, 3);
    CHECK_EQ_U64(scanner.total_inf, 2);
    st_scanner_free(&scanner);

    uint64_t counts[ST_DTYPE_COUNT], total = 0;
    st_file_parameter_counts(&file, counts, &total);
    CHECK_EQ_U64(counts[ST_F32], 4);
    CHECK_EQ_U64(counts[ST_BF16], 2);
    CHECK_EQ_U64(counts[ST_F8_E4M3], 2);
    CHECK_EQ_U64(counts[ST_F16], 0);
    CHECK_EQ_U64(total, 8);
}

TEST(parameter_counts_per_dtype)
{
    struct fixture fx;
    CHECK(build_fixture(&fx, mixed_dtypes, mixed_elements, MIXED_COUNT));
    uint64_t counts[ST_DTYPE_COUNT], total = 0, want[ST_DTYPE_COUNT] = {0}, want_total = 0;
    for (size_t i = 0; i < MIXED_COUNT; i++) {
        want[mixed_dtypes[i]] += mixed_elements[i];
        want_total += mixed_elements[i];
    }
    st_file_parameter_counts(&fx.file, counts, &total);
    for (unsigned d = 0; d < ST_DTYPE_COUNT; d++)
        CHECK_EQ_U64(counts[d], want[d]);
    CHECK_EQ_U64(total, want_total);
    CHECK_EQ_U64(counts[ST_F32], 3001 + 20000);
    free(fx.data);
}

TEST(empty_file)
{
    st_file file;
    memset(&file, 0, sizeof file);
    st_scanner scanner;
    CHECK_EQ_U64(st_scanner_init(&scanner, &file), 0);
    uint8_t junk[4] = {0xFF, 0xFF, 0xFF, 0xFF};
    st_scanner_feed(&scanner, junk, sizeof junk);
    CHECK_EQ_U64(scanner.total_nan + scanner.total_inf, 0);
    st_scanner_free(&scanner);
    uint64_t counts[ST_DTYPE_COUNT], total = 99;
    st_file_parameter_counts(&file, counts, &total);
    CHECK_EQ_U64(total, 0);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(one_shot_matches_reference);
    RUN(byte_by_byte_matches_reference);
    RUN(random_chunkings_equal_one_shot);
    RUN(portable_path_gives_same_counts);
    RUN(bytes_past_the_data_section_are_ignored);
    RUN(known_counts);
    RUN(parameter_counts_per_dtype);
    RUN(empty_file);
    return test_report(argv[0]);
}
