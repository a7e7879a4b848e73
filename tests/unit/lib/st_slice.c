#include "st_slice.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../test.h"

/* The NumPy vectors (tests/unit/lib/vectors/slice.tsv, made by gen_vectors.py there) are
 * read from the repository root (where scripts/run-tests.sh runs), or from
 * $TG_VECTORS_DIR. */
static FILE *open_vectors(const char *name)
{
    char path[1024];
    const char *dir = getenv("TG_VECTORS_DIR");
    if (dir != NULL) {
        snprintf(path, sizeof path, "%s/%s", dir, name);
        return fopen(path, "r");
    }
    snprintf(path, sizeof path, "tests/unit/lib/vectors/%s", name);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        fprintf(stderr, "cannot open %s (run from the repository root or set TG_VECTORS_DIR)\n",
                path);
    return f;
}

/* "2,3,4" -> dims; "-" -> rank 0. Returns the rank, or SIZE_MAX on a malformed field. */
static size_t parse_dims(const char *text, uint64_t *dims, size_t cap)
{
    if (strcmp(text, "-") == 0)
        return 0;
    size_t n = 0;
    const char *p = text;
    while (*p != '\0') {
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p || n >= cap)
            return SIZE_MAX;
        dims[n++] = v;
        p = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0')
            return SIZE_MAX;
    }
    return n;
}

/* Checks the invariants every successful parse must keep, on a tensor whose element i
 * holds the value i (I32), and that the gathered values are `expected` (count values). */
static void check_selection(const st_slice *s, const uint64_t *shape, size_t rank,
                            const uint64_t *expected, size_t count, const char *label)
{
    uint64_t elements = 1;
    for (size_t d = 0; d < rank; d++)
        elements *= shape[d];
    CHECK_EQ_U64(s->out_elements, count);
    CHECK_EQ_U64(s->out_bytes, count * 4);
    CHECK_EQ_U64(s->out_bytes, s->run_count * s->run_bytes);
    int32_t *tensor = malloc(elements * 4 + 1);
    int32_t *out = malloc(count * 4 + 1);
    for (uint64_t i = 0; i < elements; i++)
        tensor[i] = (int32_t)i;
    st_slice_gather(s, (const uint8_t *)tensor, (uint8_t *)out);
    size_t wrong = 0;
    for (size_t i = 0; i < count; i++)
        wrong += (uint64_t)out[i] != expected[i];
    if (wrong != 0)
        fprintf(stderr, "gather differs from NumPy for %s\n", label);
    CHECK_EQ_U64(wrong, 0);

    st_slice_cursor cursor;
    st_slice_cursor_init(&cursor, s);
    uint64_t offset, i = 0, bad = 0;
    while (st_slice_cursor_next(&cursor, &offset)) {
        bad += offset != st_slice_run_offset(s, i);
        bad += offset + s->run_bytes > elements * 4;
        i++;
    }
    CHECK_EQ_U64(i, s->run_count);
    CHECK_EQ_U64(bad, 0);
    free(tensor);
    free(out);
}

TEST(numpy_vectors)
{
    FILE *f = open_vectors("slice.tsv");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    static char line[1 << 16];
    size_t cases = 0, mismatches = 0;
    uint64_t *expected = malloc(sizeof(uint64_t) * 8192);
    while (fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char *fields[5] = {0};
        size_t nf = 0;
        char *p = line;
        for (; nf < 5; nf++) {
            fields[nf] = p;
            char *tab = strchr(p, '\t');
            if (tab == NULL) {
                nf++;
                break;
            }
            *tab = '\0';
            p = tab + 1;
        }
        uint64_t shape[ST_SLICE_RANK_MAX];
        size_t rank = parse_dims(fields[0], shape, ST_SLICE_RANK_MAX);
        CHECK(rank != SIZE_MAX && nf >= 4);
        if (rank == SIZE_MAX || nf < 4)
            continue;
        cases++;
        st_slice s;
        st_slice_error err;
        st_slice_status status =
            st_slice_parse(fields[1], strlen(fields[1]), shape, rank, ST_I32, &s, &err);
        st_slice_status want = ST_SLICE_OK;
        if (strcmp(fields[2], "err") == 0) {
            want = strcmp(fields[3], "too_many") == 0      ? ST_SLICE_TOO_MANY_INDICES
                   : strcmp(fields[3], "step_zero") == 0   ? ST_SLICE_STEP_ZERO
                   : strcmp(fields[3], "index_range") == 0 ? ST_SLICE_INDEX_RANGE
                                                           : ST_SLICE_SYNTAX;
        }
        if (status != want) {
            mismatches++;
            fprintf(stderr, "shape %s slice \"%s\": status %d, NumPy says %s (%s)\n", fields[0],
                    fields[1], status, fields[2], err.detail);
            continue;
        }
        if (want != ST_SLICE_OK)
            continue;
        uint64_t out_shape[ST_SLICE_RANK_MAX];
        size_t out_rank = parse_dims(fields[3], out_shape, ST_SLICE_RANK_MAX);
        CHECK_EQ_U64(s.out_rank, out_rank);
        bool same_shape = s.out_rank == out_rank;
        for (size_t d = 0; same_shape && d < out_rank; d++)
            same_shape = s.out_shape[d] == out_shape[d];
        if (!same_shape) {
            mismatches++;
            fprintf(stderr, "shape %s slice \"%s\": output shape differs from %s\n", fields[0],
                    fields[1], fields[3]);
            continue;
        }
        size_t count = 0;
        if (nf >= 5 && strcmp(fields[4], "-") != 0)
            count = parse_dims(fields[4], expected, 8192);
        CHECK(count != SIZE_MAX);
        if (count == SIZE_MAX)
            continue;
        char label[200];
        snprintf(label, sizeof label, "shape %.60s slice \"%.120s\"", fields[0], fields[1]);
        check_selection(&s, shape, rank, expected, count, label);
    }
    fclose(f);
    free(expected);
    CHECK(cases > 2000);
    CHECK_EQ_U64(mismatches, 0);
}

TEST(error_details)
{
    uint64_t shape[] = {3, 4};
    st_slice s;
    st_slice_error err;
    CHECK_EQ_U64(st_slice_parse("0,7", 3, shape, 2, ST_F32, &s, &err), ST_SLICE_INDEX_RANGE);
    CHECK_STR(err.detail, "index 7 is out of bounds for dimension 1 with size 4");
    CHECK_EQ_U64(err.dim, 1);
    CHECK_EQ_U64(st_slice_parse("-4", 2, shape, 2, ST_F32, &s, &err), ST_SLICE_INDEX_RANGE);
    CHECK_STR(err.detail, "index -4 is out of bounds for dimension 0 with size 3");
    CHECK_EQ_U64(st_slice_parse(":,1::0", 6, shape, 2, ST_F32, &s, &err), ST_SLICE_STEP_ZERO);
    CHECK_EQ_U64(err.dim, 1);
    CHECK_EQ_U64(st_slice_parse("1,2,3", 5, shape, 2, ST_F32, &s, &err), ST_SLICE_TOO_MANY_INDICES);
    CHECK_STR(err.detail, "too many indices: the tensor has 2 dimensions, but 3 were given");
    CHECK_EQ_U64(err.dim, ST_SLICE_NO_DIM);
    CHECK_EQ_U64(st_slice_parse("-9223372036854775808", 20, shape, 2, ST_F32, &s, &err),
                 ST_SLICE_INDEX_RANGE);
    CHECK_STR(err.detail,
              "index -9223372036854775808 is out of bounds for dimension 0 with size 3");
    CHECK_EQ_U64(st_slice_parse("0,99999999999999999999", 22, shape, 2, ST_F32, &s, &err),
                 ST_SLICE_OVERFLOW);
    CHECK_STR(err.detail, "an integer in index 1 is outside the signed 64-bit range "
                          "[-9223372036854775808, 9223372036854775807]");
    CHECK_EQ_U64(st_slice_parse("1, 2", 4, shape, 2, ST_F32, &s, &err), ST_SLICE_SYNTAX);
    CHECK_STR(err.detail, "unexpected byte 0x20 at position 2");
}

TEST(hostile_text)
{
    uint64_t shape[] = {3, 4, 5};
    struct {
        const char *text;
        size_t len; /* 0: strlen */
        st_slice_status want;
    } cases[] = {
        {"--1", 0, ST_SLICE_SYNTAX},
        {"1::0", 0, ST_SLICE_STEP_ZERO},
        {":::", 0, ST_SLICE_SYNTAX},
        {",,", 0, ST_SLICE_SYNTAX},
        {",", 0, ST_SLICE_SYNTAX},
        {"1,", 0, ST_SLICE_SYNTAX},
        {",1", 0, ST_SLICE_SYNTAX},
        {"1:2:3:4", 0, ST_SLICE_SYNTAX},
        {" 1", 0, ST_SLICE_SYNTAX},
        {"1 ", 0, ST_SLICE_SYNTAX},
        {"1\0", 2, ST_SLICE_SYNTAX},
        {"\0", 1, ST_SLICE_SYNTAX},
        {"-", 0, ST_SLICE_SYNTAX},
        {"1:-", 0, ST_SLICE_SYNTAX},
        {"+1", 0, ST_SLICE_SYNTAX},
        {"1.5", 0, ST_SLICE_SYNTAX},
        {"0x1", 0, ST_SLICE_SYNTAX},
        {"...", 0, ST_SLICE_SYNTAX},
        {"None", 0, ST_SLICE_SYNTAX},
        {"\xff", 0, ST_SLICE_SYNTAX},
        {"99999999999999999999", 0, ST_SLICE_OVERFLOW},
        /* INT64_MIN fits int64 (NumPy takes it): out of range as an index, a bound or a
         * step as a slice; one less does not fit */
        {"-9223372036854775808", 0, ST_SLICE_INDEX_RANGE},
        {"-9223372036854775808:", 0, ST_SLICE_OK},
        {":-9223372036854775808", 0, ST_SLICE_OK},
        {"::-9223372036854775808", 0, ST_SLICE_OK},
        {"-9223372036854775808:9223372036854775807:-9223372036854775808", 0, ST_SLICE_OK},
        {"-9223372036854775809", 0, ST_SLICE_OVERFLOW},
        {"9223372036854775808", 0, ST_SLICE_OVERFLOW},
        {"-0", 0, ST_SLICE_OK},
        {"9223372036854775807:", 0, ST_SLICE_OK},
        {"::-9223372036854775807", 0, ST_SLICE_OK},
        {"99999999999999999999999999999999:,", 0, ST_SLICE_SYNTAX},
        {"1,2,3,4", 0, ST_SLICE_TOO_MANY_INDICES},
        {"1,2,3,4 ", 0, ST_SLICE_SYNTAX},
        {"", 0, ST_SLICE_OK},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        st_slice s;
        st_slice_error err;
        size_t len = cases[i].len ? cases[i].len : strlen(cases[i].text);
        st_slice_status got = st_slice_parse(cases[i].text, len, shape, 3, ST_U8, &s, &err);
        if (got != cases[i].want)
            fprintf(stderr, "case %zu: status %d, want %d (%s)\n", i, got, cases[i].want,
                    err.detail);
        CHECK_EQ_U64(got, cases[i].want);
        CHECK(got == ST_SLICE_OK || err.detail[0] != '\0');
    }
    /* 10 kB of text: refused by length; 4096 bytes of valid-looking text: refused by grammar
     * or rank, never read out of bounds */
    char *big = malloc(10240);
    memset(big, '1', 10240);
    st_slice s;
    st_slice_error err;
    CHECK_EQ_U64(st_slice_parse(big, 10240, shape, 3, ST_U8, &s, &err), ST_SLICE_SYNTAX);
    CHECK_EQ_U64(st_slice_parse(big, ST_SLICE_TEXT_MAX, shape, 3, ST_U8, &s, &err),
                 ST_SLICE_OVERFLOW);
    for (size_t i = 1; i < ST_SLICE_TEXT_MAX; i += 2)
        big[i] = ',';
    CHECK_EQ_U64(st_slice_parse(big, ST_SLICE_TEXT_MAX - 1, shape, 3, ST_U8, &s, &err),
                 ST_SLICE_TOO_MANY_INDICES);
    memset(big, ':', ST_SLICE_TEXT_MAX);
    CHECK_EQ_U64(st_slice_parse(big, ST_SLICE_TEXT_MAX, shape, 3, ST_U8, &s, &err),
                 ST_SLICE_SYNTAX);
    free(big);
}

TEST(runs_merge_whole_trailing_dimensions)
{
    uint64_t shape[] = {10, 4, 6};
    st_slice s;
    st_slice_error err;
    /* whole tensor, a row range, one index: each one contiguous run */
    const char *contiguous[] = {"", ":", "2:5", "3", "3,1:3", "3,2", "3,2,1:4", "3,2,5", "2:3,1:2"};
    for (size_t i = 0; i < sizeof contiguous / sizeof contiguous[0]; i++) {
        CHECK_EQ_U64(
            st_slice_parse(contiguous[i], strlen(contiguous[i]), shape, 3, ST_F32, &s, &err),
            ST_SLICE_OK);
        CHECK_EQ_U64(s.run_count, 1);
        CHECK_EQ_U64(s.run_bytes, s.out_bytes);
    }
    CHECK_EQ_U64(st_slice_parse(":,1:3", 5, shape, 3, ST_F32, &s, &err), ST_SLICE_OK);
    CHECK_EQ_U64(s.run_count, 10);
    CHECK_EQ_U64(s.run_bytes, 2 * 6 * 4);
    CHECK_EQ_U64(st_slice_run_offset(&s, 3), (3 * 24 + 6) * 4);
    CHECK_EQ_U64(st_slice_parse("::-1", 4, shape, 3, ST_F32, &s, &err), ST_SLICE_OK);
    CHECK_EQ_U64(s.run_count, 10);
    CHECK_EQ_U64(s.run_bytes, 24 * 4);
    CHECK_EQ_U64(st_slice_run_offset(&s, 0), 9 * 24 * 4);
    CHECK_EQ_U64(st_slice_parse(":,:,::2", 7, shape, 3, ST_F32, &s, &err), ST_SLICE_OK);
    CHECK_EQ_U64(s.run_count, 10 * 4 * 3);
    CHECK_EQ_U64(s.run_bytes, 4);
    /* a scalar is one run of one element */
    CHECK_EQ_U64(st_slice_parse("", 0, NULL, 0, ST_F64, &s, &err), ST_SLICE_OK);
    CHECK_EQ_U64(s.run_count, 1);
    CHECK_EQ_U64(s.run_bytes, 8);
    CHECK_EQ_U64(s.out_rank, 0);
    /* an empty selection has no runs */
    CHECK_EQ_U64(st_slice_parse("3:3", 3, shape, 3, ST_F32, &s, &err), ST_SLICE_OK);
    CHECK_EQ_U64(s.run_count, 0);
    CHECK_EQ_U64(s.out_bytes, 0);
    CHECK_EQ_U64(s.out_shape[0], 0);
}

TEST(sub_byte_dtypes)
{
    st_slice s;
    st_slice_error err;
    uint64_t f4[] = {4, 6};
    /* F4: 2 values per byte, rows of 3 bytes */
    CHECK_EQ_U64(st_slice_parse(":,0:2", 5, f4, 2, ST_F4, &s, &err), ST_SLICE_OK);
    CHECK_EQ_U64(s.run_count, 4);
    CHECK_EQ_U64(s.run_bytes, 1);
    CHECK_EQ_U64(st_slice_run_offset(&s, 2), 6);
    CHECK_EQ_U64(s.out_bytes, 4);
    uint8_t tensor[12], out[12];
    for (unsigned i = 0; i < 12; i++)
        tensor[i] = (uint8_t)(0x10 * i + i);
    st_slice_gather(&s, tensor, out);
    CHECK(out[0] == tensor[0] && out[1] == tensor[3] && out[2] == tensor[6] && out[3] == tensor[9]);
    CHECK_EQ_U64(st_slice_parse("1:3", 3, f4, 2, ST_F4, &s, &err), ST_SLICE_OK);
    CHECK_EQ_U64(s.run_count, 1);
    CHECK_EQ_U64(s.run_bytes, 6);
    CHECK_EQ_U64(s.first_offset, 3);
    CHECK_EQ_U64(st_slice_parse("::2", 3, f4, 2, ST_F4, &s, &err), ST_SLICE_OK);
    CHECK_EQ_U64(s.run_count, 2);
    CHECK_EQ_U64(st_slice_parse(":,1:3", 5, f4, 2, ST_F4, &s, &err), ST_SLICE_SUB_BYTE);
    CHECK(strstr(err.detail, "F4") != NULL);
    CHECK_EQ_U64(st_slice_parse(":,0:3", 5, f4, 2, ST_F4, &s, &err), ST_SLICE_SUB_BYTE);
    CHECK_EQ_U64(st_slice_parse("1,2:4", 5, f4, 2, ST_F4, &s, &err), ST_SLICE_OK);
    CHECK_EQ_U64(st_slice_parse("1,3", 3, f4, 2, ST_F4, &s, &err), ST_SLICE_SUB_BYTE);
    CHECK_EQ_U64(st_slice_parse("1:1", 3, f4, 2, ST_F4, &s, &err), ST_SLICE_OK); /* empty */
    uint64_t f4_odd[] = {5, 3};
    /* rows of 1.5 bytes: only pairs of rows starting at an even row are whole bytes */
    CHECK_EQ_U64(st_slice_parse("0:2", 3, f4_odd, 2, ST_F4, &s, &err), ST_SLICE_OK);
    CHECK_EQ_U64(s.run_bytes, 3);
    CHECK_EQ_U64(st_slice_parse("1:3", 3, f4_odd, 2, ST_F4, &s, &err), ST_SLICE_SUB_BYTE);
    CHECK_EQ_U64(st_slice_parse("::2", 3, f4_odd, 2, ST_F4, &s, &err), ST_SLICE_SUB_BYTE);
    /* F6: 4 values in 3 bytes */
    uint64_t f6[] = {8};
    CHECK_EQ_U64(st_slice_parse("4:8", 3, f6, 1, ST_F6_E2M3, &s, &err), ST_SLICE_OK);
    CHECK_EQ_U64(s.first_offset, 3);
    CHECK_EQ_U64(s.run_bytes, 3);
    CHECK_EQ_U64(st_slice_parse("2:6", 3, f6, 1, ST_F6_E3M2, &s, &err), ST_SLICE_SUB_BYTE);
    CHECK_EQ_U64(st_slice_parse("::-1", 4, f6, 1, ST_F6_E3M2, &s, &err), ST_SLICE_SUB_BYTE);
    uint64_t f6_rows[] = {3, 4};
    CHECK_EQ_U64(st_slice_parse("::-1", 4, f6_rows, 2, ST_F6_E3M2, &s, &err), ST_SLICE_OK);
    CHECK_EQ_U64(s.run_count, 3);
    CHECK_EQ_U64(s.run_bytes, 3);
    CHECK_EQ_U64(st_slice_run_offset(&s, 0), 6);
    CHECK_EQ_U64(st_slice_run_offset(&s, 2), 0);
    CHECK_EQ_U64(st_slice_parse("::-1,::-1", 9, f6_rows, 2, ST_F6_E3M2, &s, &err),
                 ST_SLICE_SUB_BYTE);
    /* a scalar F4 is half a byte */
    CHECK_EQ_U64(st_slice_parse("", 0, NULL, 0, ST_F4, &s, &err), ST_SLICE_SUB_BYTE);
    CHECK_EQ_U64(err.dim, ST_SLICE_NO_DIM);
    CHECK(strstr(err.detail, "scalar") != NULL);
}

/* Sub-byte refusals name the dimension whose selection cuts a byte. */
TEST(sub_byte_errors_name_the_dimension)
{
    st_slice s;
    st_slice_error err;
    uint64_t f4[] = {4, 6};
    /* stepping the last dimension makes runs of one value: dimension 1, not 0 */
    CHECK_EQ_U64(st_slice_parse(":,::2", 5, f4, 2, ST_F4, &s, &err), ST_SLICE_SUB_BYTE);
    CHECK_EQ_U64(err.dim, 1);
    CHECK(strstr(err.detail, "dimension 1") != NULL && strstr(err.detail, "dimension 0") == NULL);
    CHECK_EQ_U64(st_slice_parse("::-1,::-1", 9, f4, 2, ST_F4, &s, &err), ST_SLICE_SUB_BYTE);
    CHECK_EQ_U64(err.dim, 1);
    /* three values of each row */
    CHECK_EQ_U64(st_slice_parse(":,0:3", 5, f4, 2, ST_F4, &s, &err), ST_SLICE_SUB_BYTE);
    CHECK_EQ_U64(err.dim, 1);
    CHECK(strstr(err.detail, "runs of 3 values") != NULL);
    /* a row starting at an odd column */
    CHECK_EQ_U64(st_slice_parse("2,1:3", 5, f4, 2, ST_F4, &s, &err), ST_SLICE_SUB_BYTE);
    CHECK_EQ_U64(err.dim, 1);
    CHECK(strstr(err.detail, "dimension 1 starts at index 1") != NULL);
    /* rows of 1.5 bytes: an odd row starts inside a byte (dimension 0) */
    uint64_t f4_odd[] = {5, 3};
    CHECK_EQ_U64(st_slice_parse("1:3", 3, f4_odd, 2, ST_F4, &s, &err), ST_SLICE_SUB_BYTE);
    CHECK_EQ_U64(err.dim, 0);
    CHECK(strstr(err.detail, "dimension 0 starts at index 1") != NULL);
    /* stepping rows of 1.5 bytes by 2 (3 bytes) is fine; by 1 row in a loop it is not */
    CHECK_EQ_U64(st_slice_parse("::2,0:2", 7, f4_odd, 2, ST_F4, &s, &err), ST_SLICE_OK);
    CHECK_EQ_U64(st_slice_parse("::3,0:2", 7, f4_odd, 2, ST_F4, &s, &err), ST_SLICE_SUB_BYTE);
    CHECK_EQ_U64(err.dim, 0);
    CHECK(strstr(err.detail, "stepping dimension 0 by 3") != NULL);
    /* F6 in 3-D: the last dimension reversed */
    uint64_t f6[] = {2, 3, 4};
    CHECK_EQ_U64(st_slice_parse(":,:,::-1", 8, f6, 3, ST_F6_E3M2, &s, &err), ST_SLICE_SUB_BYTE);
    CHECK_EQ_U64(err.dim, 2);
}

TEST(sizes_are_checked)
{
    st_slice s;
    st_slice_error err;
    uint64_t huge[] = {1ULL << 62, 2};
    CHECK_EQ_U64(st_slice_parse("0", 1, huge, 2, ST_F32, &s, &err), ST_SLICE_OVERFLOW);
    uint64_t beyond_int64[] = {UINT64_MAX, 1};
    CHECK_EQ_U64(st_slice_parse("", 0, beyond_int64, 2, ST_U8, &s, &err), ST_SLICE_OVERFLOW);
    /* empty tensors whose other dimensions multiply past 2^64 are still fine */
    uint64_t empty[] = {1ULL << 40, 1ULL << 40, 0};
    CHECK_EQ_U64(st_slice_parse("5,::3", 5, empty, 3, ST_U8, &s, &err), ST_SLICE_OK);
    CHECK_EQ_U64(s.out_elements, 0);
    CHECK_EQ_U64(s.out_rank, 2);
    CHECK_EQ_U64(s.out_shape[0], ((1ULL << 40) + 2) / 3);
    /* large strides: offsets beyond 32 bits */
    uint64_t big[] = {1ULL << 30, 1ULL << 29};
    CHECK_EQ_U64(st_slice_parse("5,7", 3, big, 2, ST_U16, &s, &err), ST_SLICE_OK);
    CHECK_EQ_U64(s.run_count, 1);
    CHECK_EQ_U64(st_slice_run_offset(&s, 0), ((5ULL << 29) + 7) * 2);
    CHECK_EQ_U64(st_slice_parse("-3::-1000000,-1", 15, big, 2, ST_U16, &s, &err), ST_SLICE_OK);
    CHECK_EQ_U64(s.run_count, ((1ULL << 30) - 3) / 1000000 + 1);
    uint64_t last = st_slice_run_offset(&s, s.run_count - 1);
    CHECK_EQ_U64(
        last,
        (((1ULL << 30) - 3 - (s.run_count - 1) * 1000000) * (1ULL << 29) + (1ULL << 29) - 1) * 2);
    st_slice_cursor cursor;
    st_slice_cursor_init(&cursor, &s);
    uint64_t offset, seen = 0, final_offset = 0;
    while (st_slice_cursor_next(&cursor, &offset)) {
        final_offset = offset;
        seen++;
    }
    CHECK_EQ_U64(seen, s.run_count);
    CHECK_EQ_U64(final_offset, last);
    /* rank bound */
    uint64_t many[ST_SLICE_RANK_MAX + 1];
    for (size_t i = 0; i <= ST_SLICE_RANK_MAX; i++)
        many[i] = 1;
    CHECK_EQ_U64(st_slice_parse("", 0, many, ST_SLICE_RANK_MAX + 1, ST_U8, &s, &err),
                 ST_SLICE_RANK);
    CHECK_EQ_U64(st_slice_parse("0", 1, many, ST_SLICE_RANK_MAX, ST_U8, &s, &err), ST_SLICE_OK);
    CHECK_EQ_U64(s.out_rank, ST_SLICE_RANK_MAX - 1);
    CHECK_EQ_U64(s.run_count, 1);
}

/* ---- the vector fast paths of st_slice_strided_copy against the portable loop ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Both paths on the same input: the same bytes, and the bytes after count elements
 * untouched. */
static bool same_copy(const uint8_t *src, int64_t step, uint64_t count, size_t size)
{
    size_t out_len = (size_t)count * size;
    uint8_t *fast = malloc(out_len + 16), *slow = malloc(out_len + 16);
    if (fast == NULL || slow == NULL) {
        free(fast);
        free(slow);
        return false;
    }
    memset(fast, 0xA5, out_len + 16);
    memset(slow, 0xA5, out_len + 16);
    bool before = st_slice_force_portable(true);
    st_slice_strided_copy(slow, src, step, count, size);
    st_slice_force_portable(false);
    st_slice_strided_copy(fast, src, step, count, size);
    st_slice_force_portable(before);
    bool ok = memcmp(fast, slow, out_len + 16) == 0;
    /* and the portable loop against the definition */
    for (uint64_t k = 0; ok && k < count; k++)
        ok = memcmp(slow + k * size, src + (int64_t)k * step, size) == 0;
    free(fast);
    free(slow);
    return ok;
}

TEST(strided_fast_paths_match_portable)
{
    enum { BYTES = 1 << 16 };
    uint8_t *buf = malloc(BYTES);
    CHECK(buf != NULL);
    if (buf == NULL)
        return;
    for (size_t i = 0; i < BYTES; i++)
        buf[i] = (uint8_t)rnd();
    const size_t sizes[] = {1, 2, 4, 8, 3};
    int mismatches = 0, runs = 0;
    for (int trial = 0; trial < 4000; trial++) {
        size_t size = sizes[rnd() % 5];
        int64_t steps[] = {2 * (int64_t)size, -(int64_t)size, (int64_t)size, 3 * (int64_t)size,
                           -2 * (int64_t)size};
        int64_t step = steps[rnd() % 5];
        uint64_t count = 1 + rnd() % (trial % 3 == 0 ? 40 : 3000);
        uint64_t magnitude = (uint64_t)(step < 0 ? -step : step);
        uint64_t span = (count - 1) * magnitude + size;
        if (span > BYTES)
            continue;
        uint64_t lo = rnd() % (BYTES - span + 1);
        const uint8_t *first = step < 0 ? buf + lo + span - size : buf + lo;
        runs++;
        if (!same_copy(first, step, count, size))
            mismatches++;
    }
    CHECK(runs > 3000);
    CHECK_EQ_U64(mismatches, 0);
    free(buf);
}

/* The elements at the very end of a readable page, a PROT_NONE page after it (and
 * for a reversed walk at the very start, a guard page before it): a vector that read
 * one byte outside the elements would fault. */
TEST(strided_fast_paths_stay_inside)
{
    long page = sysconf(_SC_PAGESIZE);
    CHECK(page > 0);
    if (page <= 0)
        return;
    uint8_t *map =
        mmap(NULL, (size_t)page * 3, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(map != MAP_FAILED);
    if (map == MAP_FAILED)
        return;
    uint8_t *guard_lo = map, *data = map + page, *guard_hi = map + 2 * page;
    CHECK(mprotect(guard_lo, (size_t)page, PROT_NONE) == 0);
    CHECK(mprotect(guard_hi, (size_t)page, PROT_NONE) == 0);
    for (long i = 0; i < page; i++)
        data[i] = (uint8_t)(i * 7 + 1);
    int ok = 0, total = 0;
    for (size_t size = 1; size <= 4; size *= 2)
        for (uint64_t count = 1; count < 200; count++) {
            /* "::2" ending on the page's last byte */
            uint64_t span = (count - 1) * 2 * size + size;
            total++;
            ok += same_copy(data + page - span, 2 * (int64_t)size, count, size);
            /* reversed, its lowest element on the page's first byte */
            total++;
            ok += same_copy(data + (count - 1) * size, -(int64_t)size, count, size);
        }
    CHECK_EQ_U64(ok, total);
    munmap(map, (size_t)page * 3);
}

/* Whole gathers on random shapes and slices, fast against portable. */
TEST(gather_fast_matches_portable)
{
    const st_dtype dtypes[] = {ST_U8, ST_BF16, ST_F32, ST_F64};
    const char *forms[] = {"::2", "::-1", ":", "1:", "::3", "::-2", "2:-1"};
    int compared = 0, mismatches = 0;
    for (int trial = 0; trial < 600; trial++) {
        size_t rank = 1 + rnd() % 3;
        uint64_t shape[3];
        uint64_t elements = 1;
        for (size_t d = 0; d < rank; d++) {
            shape[d] = 1 + rnd() % (d + 1 == rank ? 300 : 12);
            elements *= shape[d];
        }
        st_dtype dtype = dtypes[rnd() % 4];
        size_t esize = st_dtype_bits(dtype) / 8;
        char text[64];
        size_t len = 0;
        for (size_t d = 0; d < rank; d++)
            len += (size_t)snprintf(text + len, sizeof text - len, "%s%s", d ? "," : "",
                                    forms[rnd() % 7]);
        st_slice slice;
        st_slice_error err;
        if (st_slice_parse(text, len, shape, rank, dtype, &slice, &err) != ST_SLICE_OK)
            continue;
        uint8_t *tensor = malloc(elements * esize);
        uint8_t *a = malloc(slice.out_bytes + 1), *b = malloc(slice.out_bytes + 1);
        if (tensor && a && b) {
            for (uint64_t i = 0; i < elements * esize; i++)
                tensor[i] = (uint8_t)rnd();
            bool before = st_slice_force_portable(true);
            st_slice_gather(&slice, tensor, a);
            st_slice_force_portable(false);
            st_slice_gather(&slice, tensor, b);
            st_slice_force_portable(before);
            compared++;
            if (memcmp(a, b, slice.out_bytes) != 0) {
                mismatches++;
                fprintf(stderr, "gather mismatch: %s on rank %zu\n", text, rank);
            }
        }
        free(tensor);
        free(a);
        free(b);
    }
    CHECK(compared > 300);
    CHECK_EQ_U64(mismatches, 0);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(numpy_vectors);
    RUN(error_details);
    RUN(hostile_text);
    RUN(runs_merge_whole_trailing_dimensions);
    RUN(sub_byte_dtypes);
    RUN(sub_byte_errors_name_the_dimension);
    RUN(sizes_are_checked);
    RUN(strided_fast_paths_match_portable);
    RUN(strided_fast_paths_stay_inside);
    RUN(gather_fast_matches_portable);
    return test_report(argv[0]);
}
