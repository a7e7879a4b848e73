/* Unit tests for lib/st_convert_stream.c: the streaming file converter.
 *  - On the conversion vectors (tests/vectors: PyTorch's .to() of every pair of the
 *    six floating dtypes), a file holding in_<FROM>.bin as one tensor, beside a tensor
 *    that is not converted and a metadata entry, converts to exactly the file the
 *    reference writer (st_write_to_buffer) makes from <FROM>_to_<TO>.bin, whatever the
 *    chunk size (the smallest, an odd one, the default);
 *  - st_convert_choose: selection, dtypes that cannot convert, the count of changes;
 *  - a read or a write callback failing at its 1st, 2nd, ... call ends the conversion
 *    with READ_FAILED / WRITE_FAILED and a sentence, an allocation failing at each
 *    allocation with NO_MEMORY; no leak (LeakSanitizer in the ASan build);
 *  - a dtype pair it cannot convert is BAD_INPUT before anything is written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "st_alloc.h"
#include "st_convert.h"
#include "st_convert_stream.h"
#include "st_write.h"
#include "test.h"

static const st_dtype float_types[] = {ST_F64, ST_F32, ST_F16, ST_BF16, ST_F8_E4M3, ST_F8_E5M2};
#define FLOAT_TYPE_COUNT (sizeof float_types / sizeof float_types[0])

/* Reads a whole vector file; NULL when missing or empty. */
static uint8_t *read_vector(const char *name, size_t *len)
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
    if (fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        if (size > 0 && fseek(f, 0, SEEK_SET) == 0) {
            data = malloc((size_t)size);
            if (data != NULL && fread(data, 1, (size_t)size, f) != (size_t)size) {
                free(data);
                data = NULL;
            }
            *len = (size_t)size;
        }
    }
    fclose(f);
    return data;
}

/* ---- the callbacks: a file in memory, an output buffer ---- */

typedef struct memory_io {
    const uint8_t *in;
    size_t in_len;
    uint8_t *out;
    size_t out_len, out_cap;
    unsigned long reads, writes;               /* calls so far */
    unsigned long fail_read_at, fail_write_at; /* 0: none */
    size_t chunk;                              /* the chunk asked for (0: not checked) */
    bool short_write_seen; /* a write other than the last was not one whole chunk */
    size_t last_write;
} memory_io;

static int memory_read(void *ctx, void *buf, size_t len, uint64_t offset)
{
    memory_io *io = ctx;
    if (++io->reads == io->fail_read_at)
        return -1;
    if (offset > io->in_len || len > io->in_len - offset)
        return -1;
    memcpy(buf, io->in + offset, len);
    return 0;
}

static int memory_write(void *ctx, const void *data, size_t len)
{
    memory_io *io = ctx;
    if (++io->writes == io->fail_write_at)
        return -1;
    if (io->chunk != 0 && (len > io->chunk || (io->last_write != 0 && io->last_write != io->chunk)))
        io->short_write_seen = true;
    if (io->out_len + len > io->out_cap) {
        size_t cap = (io->out_len + len) * 2;
        uint8_t *bigger = realloc(io->out, cap);
        if (bigger == NULL)
            return -1;
        io->out = bigger;
        io->out_cap = cap;
    }
    memcpy(io->out + io->out_len, data, len);
    io->out_len += len;
    io->last_write = len;
    return 0;
}

/* ---- test files ---- */

static const uint64_t keep_shape[] = {3};
static const int32_t keep_values[] = {7, -1, 65536};
static const st_metadata_entry metadata[] = {{"format", "pt"}};

/* A file with tensor "x" (dtype, n elements of data) and "keep" (I32, 3 values). */
static uint8_t *make_file(st_dtype dtype, const void *data, uint64_t n, size_t *len)
{
    uint64_t shape[1] = {n};
    st_write_tensor tensors[2] = {{"x", dtype, 1, shape}, {"keep", ST_I32, 1, keep_shape}};
    const void *bytes[2] = {data, keep_values};
    uint8_t *file = NULL;
    st_error err;
    if (st_write_to_buffer(tensors, bytes, 2, metadata, 1, true, &file, len, &err) != ST_OK) {
        fprintf(stderr, "st_write_to_buffer: %s\n", err.detail);
        return NULL;
    }
    return file;
}

static bool parse(const uint8_t *file, size_t len, st_file *out)
{
    st_error err;
    memset(out, 0, sizeof *out);
    if (st_header_parse(file, len, len, NULL, out, &err) != ST_OK) {
        fprintf(stderr, "st_header_parse: %s\n", err.detail);
        return false;
    }
    return true;
}

/* Converts every tensor of in that converts to `to`, with the given chunk. */
static st_convert_status convert_all(const st_file *in, st_dtype to, size_t chunk, memory_io *io,
                                     st_error *err)
{
    st_dtype *dtypes = calloc(in->tensor_count + 1, sizeof *dtypes);
    if (dtypes == NULL)
        return ST_CONVERT_NO_MEMORY;
    st_convert_choose(in, to, NULL, NULL, dtypes);
    st_convert_options options = {.dtypes = dtypes, .chunk_bytes = chunk};
    st_convert_status status =
        st_convert_stream(in, memory_read, io, memory_write, io, &options, err);
    free(dtypes);
    return status;
}

TEST(vectors_convert_as_the_reference_writer_lays_them_out)
{
    static const size_t chunks[] = {ST_CONVERT_CHUNK_MIN, 1000, 0};
    unsigned pairs = 0;
    for (size_t a = 0; a < FLOAT_TYPE_COUNT; a++) {
        st_dtype from = float_types[a];
        char name[64];
        snprintf(name, sizeof name, "in_%s.bin", st_dtype_name(from));
        size_t in_len = 0;
        uint8_t *in_data = read_vector(name, &in_len);
        CHECK(in_data != NULL);
        if (in_data == NULL)
            continue;
        uint64_t n = in_len / (st_dtype_bits(from) / 8);
        size_t file_len = 0;
        uint8_t *file = make_file(from, in_data, n, &file_len);
        st_file parsed;
        CHECK(file != NULL && parse(file, file_len, &parsed));
        for (size_t b = 0; file != NULL && b < FLOAT_TYPE_COUNT; b++) {
            st_dtype to = float_types[b];
            if (to == from)
                continue;
            snprintf(name, sizeof name, "%s_to_%s.bin", st_dtype_name(from), st_dtype_name(to));
            size_t want_len = 0;
            uint8_t *want_data = read_vector(name, &want_len);
            CHECK(want_data != NULL);
            size_t want_file_len = 0;
            uint8_t *want_file = want_data ? make_file(to, want_data, n, &want_file_len) : NULL;
            CHECK(want_file != NULL);
            for (size_t c = 0; want_file != NULL && c < sizeof chunks / sizeof chunks[0]; c++) {
                size_t chunk = chunks[c] ? chunks[c] : ST_CONVERT_CHUNK_DEFAULT;
                memory_io io = {.in = file, .in_len = file_len, .chunk = chunk};
                st_error err;
                CHECK_EQ_U64(convert_all(&parsed, to, chunks[c], &io, &err), ST_CONVERT_OK);
                CHECK_EQ_U64(io.out_len, want_file_len);
                CHECK(io.out_len == want_file_len && memcmp(io.out, want_file, want_file_len) == 0);
                CHECK(!io.short_write_seen); /* every write but the last: one whole chunk */
                free(io.out);
            }
            pairs++;
            free(want_file);
            free(want_data);
        }
        if (file != NULL)
            st_file_free(&parsed);
        free(file);
        free(in_data);
    }
    CHECK_EQ_U64(pairs, 30);
}

static bool select_weights(void *ctx, const char *name)
{
    unsigned *calls = ctx;
    (*calls)++;
    return strstr(name, "weight") != NULL;
}

TEST(choose_selects_converts_and_counts)
{
    const uint64_t shape[] = {2};
    const uint8_t zeros[16] = {0};
    st_write_tensor tensors[] = {
        {"a.weight", ST_F32, 1, shape}, /* selected, converts */
        {"a.bias", ST_F32, 1, shape},   /* not selected */
        {"b.weight", ST_F16, 1, shape}, /* already the target */
        {"c.weight", ST_I64, 1, shape}, /* selected, not floating */
    };
    const void *data[] = {zeros, zeros, zeros, zeros};
    uint8_t *file = NULL;
    size_t len = 0;
    st_error err;
    CHECK(st_write_to_buffer(tensors, data, 4, NULL, 0, false, &file, &len, &err) == ST_OK);
    st_file in;
    if (file == NULL || !parse(file, len, &in)) {
        free(file);
        return;
    }
    st_dtype dtypes[4];
    unsigned calls = 0;
    CHECK_EQ_U64(st_convert_choose(&in, ST_F16, select_weights, &calls, dtypes), 1);
    CHECK_EQ_U64(calls, 4);
    for (size_t i = 0; i < in.tensor_count; i++) {
        const st_tensor *t = &in.tensors[i];
        st_dtype want = strcmp(t->name, "a.weight") == 0 ? ST_F16 : t->dtype;
        CHECK_EQ_U64(dtypes[i], want);
    }
    /* no selector: every floating tensor that differs */
    CHECK_EQ_U64(st_convert_choose(&in, ST_BF16, NULL, NULL, dtypes), 3);
    /* the plan's size: three 2-element BF16 tensors and one I64 */
    st_write_plan plan;
    CHECK(st_convert_plan(&in, dtypes, &plan, &err) == ST_OK);
    CHECK_EQ_U64(plan.data_size, 3 * 4 + 16);
    st_write_plan_free(&plan);
    /* a pair it cannot convert: I64 -> F16 */
    for (size_t i = 0; i < in.tensor_count; i++)
        dtypes[i] = in.tensors[i].dtype == ST_I64 ? ST_F16 : in.tensors[i].dtype;
    memory_io io = {.in = file, .in_len = len};
    st_convert_options options = {.dtypes = dtypes, .chunk_bytes = 0};
    CHECK_EQ_U64(st_convert_stream(&in, memory_read, &io, memory_write, &io, &options, &err),
                 ST_CONVERT_BAD_INPUT);
    CHECK_STR(err.tensor, "c.weight");
    CHECK_EQ_U64(io.writes, 0);
    CHECK_EQ_U64(io.reads, 0);
    st_file_free(&in);
    free(file);
}

TEST(a_file_without_tensors_is_its_header)
{
    uint8_t *file = NULL;
    size_t len = 0;
    st_error err;
    CHECK(st_write_to_buffer(NULL, NULL, 0, metadata, 1, true, &file, &len, &err) == ST_OK);
    st_file in;
    if (file == NULL || !parse(file, len, &in)) {
        free(file);
        return;
    }
    memory_io io = {.in = file, .in_len = len};
    st_dtype none[1] = {ST_F32};
    st_convert_options options = {.dtypes = none, .chunk_bytes = 0};
    CHECK_EQ_U64(st_convert_stream(&in, memory_read, &io, memory_write, &io, &options, &err),
                 ST_CONVERT_OK);
    CHECK(io.out_len == len && memcmp(io.out, file, len) == 0);
    CHECK_EQ_U64(io.reads, 0);
    free(io.out);
    st_file_free(&in);
    free(file);
}

/* A file of F32 tensors of several sizes, converted to BF16 in 64-byte chunks: many
 * reads and writes to fail one at a time. */
static uint8_t *many_calls_file(size_t *len)
{
    static float values[300];
    for (size_t i = 0; i < 300; i++)
        values[i] = (float)i * 0.37f - 20.0f;
    const uint64_t s1[] = {300}, s2[] = {17}, s3[] = {2, 5};
    st_write_tensor tensors[] = {
        {"big", ST_F32, 1, s1}, {"odd", ST_F32, 1, s2}, {"ints", ST_I32, 2, s3}};
    const void *data[] = {values, values, values};
    uint8_t *file = NULL;
    st_error err;
    if (st_write_to_buffer(tensors, data, 3, metadata, 1, true, &file, len, &err) != ST_OK)
        return NULL;
    return file;
}

TEST(a_failing_callback_at_each_call_ends_cleanly)
{
    size_t len = 0;
    uint8_t *file = many_calls_file(&len);
    st_file in;
    if (file == NULL || !parse(file, len, &in)) {
        CHECK(false);
        free(file);
        return;
    }
    /* a whole run: how many calls each side gets, and the output */
    memory_io whole = {.in = file, .in_len = len};
    st_error err;
    CHECK_EQ_U64(convert_all(&in, ST_BF16, 64, &whole, &err), ST_CONVERT_OK);
    CHECK(whole.reads > 5 && whole.writes > 5);
    for (unsigned long k = 1; k <= whole.reads; k++) {
        memory_io io = {.in = file, .in_len = len, .fail_read_at = k};
        CHECK_EQ_U64(convert_all(&in, ST_BF16, 64, &io, &err), ST_CONVERT_READ_FAILED);
        CHECK_EQ_U64(io.reads, k); /* nothing read after the failure */
        CHECK(err.detail[0] != '\0' && err.tensor[0] != '\0');
        CHECK(io.out_len < whole.out_len);
        free(io.out);
    }
    for (unsigned long k = 1; k <= whole.writes; k++) {
        memory_io io = {.in = file, .in_len = len, .fail_write_at = k};
        CHECK_EQ_U64(convert_all(&in, ST_BF16, 64, &io, &err), ST_CONVERT_WRITE_FAILED);
        CHECK_EQ_U64(io.writes, k); /* nothing written after the failure */
        CHECK(err.detail[0] != '\0');
        /* what was written is the start of the whole output */
        CHECK(io.out_len < whole.out_len &&
              (io.out_len == 0 || memcmp(io.out, whole.out, io.out_len) == 0));
        free(io.out);
    }
    free(whole.out);
    st_file_free(&in);
    free(file);
}

typedef struct alloc_counter {
    unsigned long calls, fail_at;
} alloc_counter;

static bool refuse_nth(void *ctx, size_t size)
{
    (void)size;
    alloc_counter *c = ctx;
    return ++c->calls == c->fail_at;
}

TEST(a_failing_allocation_at_each_allocation_ends_cleanly)
{
    size_t len = 0;
    uint8_t *file = many_calls_file(&len);
    st_file in;
    if (file == NULL || !parse(file, len, &in)) {
        CHECK(false);
        free(file);
        return;
    }
    st_dtype dtypes[3];
    st_convert_choose(&in, ST_F16, NULL, NULL, dtypes);
    st_convert_options options = {.dtypes = dtypes, .chunk_bytes = 64};
    unsigned long failed_runs = 0;
    for (unsigned long k = 1; k <= 40; k++) {
        alloc_counter counter = {0, k};
        st_alloc_set_refuse(refuse_nth, &counter);
        memory_io io = {.in = file, .in_len = len};
        st_error err;
        st_convert_status status =
            st_convert_stream(&in, memory_read, &io, memory_write, &io, &options, &err);
        st_alloc_set_refuse(NULL, NULL);
        free(io.out);
        if (counter.calls < k) {
            CHECK_EQ_U64(status, ST_CONVERT_OK); /* fewer allocations than k: a whole run */
            break;
        }
        /* the plan's own allocation failures are reported as its reasons (st_write.c) */
        CHECK(status == ST_CONVERT_NO_MEMORY || status == ST_CONVERT_BAD_INPUT);
        CHECK(err.detail[0] != '\0');
        failed_runs++;
    }
    CHECK(failed_runs >= 3); /* the dtypes table, the plan, the two buffers */
    st_file_free(&in);
    free(file);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(vectors_convert_as_the_reference_writer_lays_them_out);
    RUN(choose_selects_converts_and_counts);
    RUN(a_file_without_tensors_is_its_header);
    RUN(a_failing_callback_at_each_call_ends_cleanly);
    RUN(a_failing_allocation_at_each_allocation_ends_cleanly);
    return test_report(argv[0]);
}
