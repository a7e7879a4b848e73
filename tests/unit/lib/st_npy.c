#include "st_npy.h"

#include <stdlib.h>
#include <unistd.h>

#include "../test.h"

/* Expected headers: tests/unit/lib/vectors/npy.tsv, written by gen_vectors.py there from
 * numpy.lib.format (numpy.save's own header writer). Read from the repository root or
 * $TG_VECTORS_DIR. */
static FILE *open_vectors(const char *name)
{
    char path[1024];
    const char *dir = getenv("TG_VECTORS_DIR");
    snprintf(path, sizeof path, "%s/%s", dir != NULL ? dir : "tests/unit/lib/vectors", name);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        fprintf(stderr, "cannot open %s (run from the repository root or set TG_VECTORS_DIR)\n",
                path);
    return f;
}

/* "2,3" -> dims, "-" -> rank 0, "VALUE*COUNT" repeats. SIZE_MAX when malformed. */
static size_t parse_dims(const char *text, uint64_t *dims, size_t cap)
{
    if (strcmp(text, "-") == 0)
        return 0;
    size_t n = 0;
    const char *p = text;
    while (*p != '\0') {
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p)
            return SIZE_MAX;
        unsigned long long repeat = 1;
        if (*end == '*') {
            p = end + 1;
            repeat = strtoull(p, &end, 10);
        }
        for (unsigned long long i = 0; i < repeat; i++) {
            if (n >= cap)
                return SIZE_MAX;
            dims[n++] = v;
        }
        if (*end != ',' && *end != '\0')
            return SIZE_MAX;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

static size_t parse_hex(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = strlen(hex) / 2;
    if (n > cap)
        return SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return SIZE_MAX;
        out[i] = (uint8_t)v;
    }
    return n;
}

/* Writes header + data to a file in dir and reads the whole file back. */
static size_t write_and_read_back(const char *dir, const uint8_t *header, size_t header_len,
                                  const uint8_t *data, size_t data_len, uint8_t *back, size_t cap)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/t.npy", dir);
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return SIZE_MAX;
    fwrite(header, 1, header_len, f);
    fwrite(data, 1, data_len, f);
    fclose(f);
    f = fopen(path, "rb");
    if (f == NULL)
        return SIZE_MAX;
    size_t n = fread(back, 1, cap, f);
    fclose(f);
    unlink(path);
    return n;
}

TEST(headers_match_numpy)
{
    FILE *f = open_vectors("npy.tsv");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    char dir[] = "/tmp/tg_npy_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    size_t line_cap = 1 << 19;
    char *line = malloc(line_cap);
    uint64_t *shape = malloc(sizeof(uint64_t) * 4096);
    uint8_t *want = malloc(1 << 18);
    uint8_t *got = malloc(1 << 18);
    uint8_t *back = malloc(1 << 18);
    size_t cases = 0, mismatches = 0, version2 = 0;
    while (fgets(line, (int)line_cap, f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char *name = line;
        char *dims = strchr(name, '\t');
        CHECK(dims != NULL);
        if (dims == NULL)
            continue;
        *dims++ = '\0';
        char *hex = strchr(dims, '\t');
        CHECK(hex != NULL);
        if (hex == NULL)
            continue;
        *hex++ = '\0';
        st_dtype dtype;
        CHECK(st_dtype_from_name(name, strlen(name), &dtype));
        size_t rank = parse_dims(dims, shape, 4096);
        size_t want_len = parse_hex(hex, want, 1 << 18);
        CHECK(rank != SIZE_MAX && want_len != SIZE_MAX);
        if (rank == SIZE_MAX || want_len == SIZE_MAX)
            continue;
        cases++;
        size_t cap = 256 + 24 * rank;
        size_t len = st_npy_header(dtype, shape, rank, got, cap);
        /* the header is followed by a few data bytes in the file, as np.save would */
        static const uint8_t data[] = {1, 2, 3, 4, 5, 6, 7, 8};
        size_t file_len = write_and_read_back(dir, got, len, data, sizeof data, back, 1 << 18);
        bool same = len == want_len && file_len == len + sizeof data &&
                    memcmp(back, want, want_len) == 0 && memcmp(back + len, data, sizeof data) == 0;
        if (!same) {
            mismatches++;
            fprintf(stderr, "%s shape %.60s: header differs from NumPy's (%zu vs %zu bytes)\n",
                    name, dims, len, want_len);
        }
        CHECK_EQ_U64(len % 64, 0);
        version2 += len > 6 && got[6] == 2;
        /* one byte short of the needed room: refused, nothing claimed */
        CHECK_EQ_U64(st_npy_header(dtype, shape, rank, got, len - 1), 0);
    }
    fclose(f);
    rmdir(dir);
    free(line);
    free(shape);
    free(want);
    free(got);
    free(back);
    CHECK(cases > 100);
    CHECK_EQ_U64(version2, 1);
    CHECK_EQ_U64(mismatches, 0);
}

TEST(known_header)
{
    /* the example of the NumPy format documentation, for a (2, 3) float32 array, as
     * NumPy 1.23+ writes it (21 - 1 spare spaces for growth of the first axis) */
    uint64_t shape[] = {2, 3};
    uint8_t out[512];
    size_t len = st_npy_header(ST_F32, shape, 2, out, sizeof out);
    CHECK_EQ_U64(len, 128);
    CHECK(memcmp(out, "\x93NUMPY\x01\x00\x76\x00", 10) == 0);
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    CHECK(memcmp(out + 10, dict, strlen(dict)) == 0);
    CHECK_EQ_U64(out[127], '\n');
    for (size_t i = 10 + strlen(dict); i < 127; i++)
        CHECK(out[i] == ' ');
    uint64_t one[] = {5};
    len = st_npy_header(ST_BOOL, one, 1, out, sizeof out);
    CHECK(len > 0 && memmem(out, len, "'descr': '|b1'", 14) != NULL);
    CHECK(memmem(out, len, "'shape': (5,), }", 16) != NULL);
    len = st_npy_header(ST_C64, NULL, 0, out, sizeof out);
    CHECK(len > 0 && memmem(out, len, "'shape': (), }", 14) != NULL);
}

TEST(descr_table)
{
    const char *d = NULL;
    CHECK(st_npy_descr(ST_F16, &d));
    CHECK_STR(d, "<f2");
    CHECK(st_npy_descr(ST_U8, &d));
    CHECK_STR(d, "|u1");
    CHECK(st_npy_descr(ST_I64, &d));
    CHECK_STR(d, "<i8");
    st_dtype missing[] = {ST_BF16,        ST_F8_E5M2, ST_F8_E4M3, ST_F8_E8M0, ST_F8_E4M3FNUZ,
                          ST_F8_E5M2FNUZ, ST_F6_E2M3, ST_F6_E3M2, ST_F4,      ST_DTYPE_COUNT};
    uint64_t shape[] = {4};
    uint8_t out[512];
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        CHECK(!st_npy_descr(missing[i], &d));
        CHECK_EQ_U64(st_npy_header(missing[i], shape, 1, out, sizeof out), 0);
    }
    unsigned have = 0;
    for (unsigned i = 0; i < ST_DTYPE_COUNT; i++)
        have += st_npy_descr((st_dtype)i, &d);
    CHECK_EQ_U64(have, 13);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(headers_match_numpy);
    RUN(known_header);
    RUN(descr_table);
    return test_report(argv[0]);
}
