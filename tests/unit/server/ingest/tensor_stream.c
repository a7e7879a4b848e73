/* server/ingest/tensor_stream.c: real safetensors files in a temp dir, streamed at random
 * positions and chunk sizes, compared byte for byte with an in-memory reference
 * (whole tensor -> st_slice_gather -> st_convert -> .npy header in front). */
#include "tensor_stream.h"
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "st_convert.h"
#include "st_npy.h"
#include "st_write.h"

#include "test.h"

/* tg_tensor_read_fn over a file descriptor (ctx: the descriptor, as (void *)(intptr_t)fd). */
static int fd_read(void *ctx, void *buf, size_t len, uint64_t offset)
{
    return tg_store_read_at((int)(intptr_t)ctx, buf, len, offset);
}

static char temp_dir[64];
/* stream_matches reads through a mapping of the file (tg_tensor_stream_map) */
static bool use_map;
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rng(void)
{
    /* xorshift64*: deterministic, the seed is printed */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

static uint64_t rng_below(uint64_t n)
{
    return n ? rng() % n : 0;
}

/* One tensor of a test file. */
typedef struct spec {
    const char *name;
    st_dtype dtype;
    size_t rank;
    uint64_t shape[8];
} spec;

typedef struct test_file {
    int fd;
    st_file file;
    uint8_t *bytes; /* the whole file */
    size_t len;
} test_file;

/* Writes a file of random tensor bytes; for float dtypes the bytes are finite values
 * mostly, but NaN/Inf patterns come along too (conversion must carry them). */
static bool make_file(const char *file_name, const spec *specs, size_t count, test_file *out)
{
    st_write_tensor tensors[16] = {{0}};
    uint8_t *data[16] = {0};
    const void *pointers[16] = {0};
    for (size_t i = 0; i < count; i++) {
        tensors[i] =
            (st_write_tensor){specs[i].name, specs[i].dtype, specs[i].rank, specs[i].shape};
        uint64_t elements = 1, bytes;
        st_shape_elements(specs[i].shape, specs[i].rank, &elements);
        st_dtype_bytes(specs[i].dtype, elements, &bytes);
        data[i] = malloc(bytes ? bytes : 1);
        for (uint64_t b = 0; b < bytes; b++)
            data[i][b] = (uint8_t)rng();
        pointers[i] = data[i];
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    st_error err;
    st_reason r = st_write_to_buffer(tensors, pointers, count, NULL, 0, false, &buf, &len, &err);
    for (size_t i = 0; i < count; i++)
        free(data[i]);
    if (r != ST_OK) {
        fprintf(stderr, "st_write_to_buffer: %s\n", err.detail);
        return false;
    }
    char path[128];
    snprintf(path, sizeof path, "%s/%s", temp_dir, file_name);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, buf, len) != (ssize_t)len) {
        free(buf);
        return false;
    }
    out->fd = fd;
    out->bytes = buf;
    out->len = len;
    if (st_header_parse(buf, len, len, NULL, &out->file, &err) != ST_OK) {
        fprintf(stderr, "st_header_parse: %s\n", err.detail);
        return false;
    }
    return true;
}

static void free_file(test_file *f)
{
    close(f->fd);
    st_file_free(&f->file);
    free(f->bytes);
}

static const st_tensor *find(const test_file *f, const char *name)
{
    return st_file_find(&f->file, name, strlen(name));
}

/* The expected body: computed from the whole file in memory with the lib's own
 * gather and conversion. NULL (and *len 0) when the options are refused. */
static uint8_t *reference(const test_file *f, const st_tensor *t, const tg_tensor_options *o,
                          size_t *len)
{
    st_slice slice;
    const char *text = o->slice ? o->slice : "";
    if (st_slice_parse(text, strlen(text), t->shape, t->rank, t->dtype, &slice, NULL) !=
        ST_SLICE_OK)
        return NULL;
    st_dtype to = t->dtype;
    if (o->dtype && o->dtype[0])
        st_dtype_from_name(o->dtype, strlen(o->dtype), &to);
    uint8_t *gathered = malloc(slice.out_bytes ? slice.out_bytes : 1);
    st_slice_gather(&slice, f->bytes + f->file.data_start + t->begin, gathered);
    size_t body = (size_t)slice.out_bytes;
    uint8_t *converted = gathered;
    if (to != t->dtype) {
        body = (size_t)slice.out_elements * (st_dtype_bits(to) / 8);
        converted = malloc(body ? body : 1);
        st_convert(t->dtype, to, gathered, converted, (size_t)slice.out_elements);
        free(gathered);
    }
    uint8_t header[2048];
    size_t header_len = 0;
    if (o->format && strcmp(o->format, "npy") == 0)
        header_len = st_npy_header(to, slice.out_shape, slice.out_rank, header, sizeof header);
    uint8_t *out = malloc(header_len + body + 1);
    memcpy(out, header, header_len);
    memcpy(out + header_len, converted, body);
    free(converted);
    *len = header_len + body;
    return out;
}

/* Streams the whole body sequentially with chunk sizes drawn up to max_chunk, then
 * reads random (position, length) windows; all compared with the reference. */
static bool stream_matches(const test_file *f, const char *name, const tg_tensor_options *o,
                           size_t max_chunk, int random_reads)
{
    const st_tensor *t = find(f, name);
    size_t ref_len = 0;
    uint8_t *ref = t ? reference(f, t, o, &ref_len) : NULL;
    tg_tensor_stream *s = NULL;
    tg_tensor_error err;
    bool ok = ref != NULL && tg_tensor_stream_open(fd_read, (void *)(intptr_t)f->fd, &f->file, t, o,
                                                   &s, &err) == 0;
    if (!ok) {
        fprintf(stderr, "open %s slice=%s dtype=%s format=%s: %s\n", name, o->slice, o->dtype,
                o->format, s ? "" : err.detail);
        free(ref);
        return false;
    }
    const tg_tensor_plan *plan = tg_tensor_stream_plan(s);
    ok = plan->length == ref_len;
    /* an empty tensor has nothing to map: it refuses, and reads stay on read() */
    if (use_map && tg_tensor_stream_map(s, f->fd) != 0)
        ok = ok && t->end == t->begin && errno == EINVAL;
    if (ok && plan->contiguous)
        ok = plan->contiguous_offset + ref_len <= f->len &&
             memcmp(f->bytes + plan->contiguous_offset, ref, ref_len) == 0;
    uint8_t *got = malloc(ref_len + 1);
    uint64_t pos = 0;
    while (ok && pos < ref_len) {
        size_t chunk = 1 + (size_t)rng_below(max_chunk);
        ssize_t n = tg_tensor_stream_read(s, pos, got + pos, chunk);
        if (n <= 0 || (size_t)n > chunk || (n < (ssize_t)chunk && pos + (uint64_t)n != ref_len))
            ok = false;
        else
            pos += (uint64_t)n;
    }
    ok = ok && tg_tensor_stream_read(s, ref_len, got, 16) == 0 && memcmp(got, ref, ref_len) == 0;
    for (int i = 0; ok && i < random_reads && ref_len > 0; i++) {
        uint64_t at = rng_below(ref_len);
        size_t chunk = 1 + (size_t)rng_below(i % 2 ? 64 : max_chunk);
        ssize_t n = tg_tensor_stream_read(s, at, got, chunk);
        size_t expect = (size_t)(ref_len - at < chunk ? ref_len - at : chunk);
        ok = n == (ssize_t)expect && memcmp(got, ref + at, expect) == 0;
        if (!ok)
            fprintf(stderr, "random read at %llu of %zu gave %zd\n", (unsigned long long)at, chunk,
                    n);
    }
    if (!ok)
        fprintf(stderr, "mismatch: %s slice=%s dtype=%s format=%s (len %zu, plan %llu)\n", name,
                o->slice ? o->slice : "", o->dtype ? o->dtype : "", o->format ? o->format : "",
                ref_len, (unsigned long long)plan->length);
    free(got);
    free(ref);
    tg_tensor_stream_free(s);
    return ok;
}

static const spec small_specs[] = {
    {"f32_3d", ST_F32, 3, {4, 5, 6}},
    {"f16_2d", ST_F16, 2, {7, 9}},
    {"bf16_2d", ST_BF16, 2, {5, 8}},
    {"f64_1d", ST_F64, 1, {33}},
    {"e4m3", ST_F8_E4M3, 2, {6, 10}},
    {"e5m2", ST_F8_E5M2, 2, {6, 10}},
    {"i32", ST_I32, 2, {3, 4}},
    {"u8", ST_U8, 1, {17}},
    {"f4", ST_F4, 2, {4, 8}},
    {"f6", ST_F6_E2M3, 2, {3, 8}},
    {"scalar", ST_F32, 0, {0}},
    {"empty", ST_F32, 2, {3, 0}},
    {"five_d", ST_BF16, 5, {2, 3, 1, 4, 5}},
};

static const char *const float_dtypes[] = {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"};

TEST(every_slice_dtype_and_format)
{
    test_file f;
    CHECK(make_file("small.safetensors", small_specs, sizeof small_specs / sizeof small_specs[0],
                    &f));
    static const char *const slices_3d[] = {
        NULL,         "",         "1",       "-1",           "1:3",        "::2",
        "::-1",       "-3:-1",    "1,2",     ":,1:4:2,::-2", "3:0:-1,4,5", "0:0",
        "::-2,::3,1", "-100:100", ":,:,2:3", "2,-1,-6"};
    for (size_t i = 0; i < sizeof slices_3d / sizeof slices_3d[0]; i++) {
        for (size_t d = 0; d <= sizeof float_dtypes / sizeof float_dtypes[0]; d++) {
            const char *dtype = d == 0 ? NULL : float_dtypes[d - 1];
            tg_tensor_options raw = {slices_3d[i], dtype, NULL};
            tg_tensor_options npy = {slices_3d[i], dtype, "npy"};
            CHECK(stream_matches(&f, "f32_3d", &raw, 50, 40));
            /* npy only where NumPy has the output dtype */
            const char *ignored;
            st_dtype to = ST_F32;
            if (dtype)
                st_dtype_from_name(dtype, strlen(dtype), &to);
            if (st_npy_descr(to, &ignored))
                CHECK(stream_matches(&f, "f32_3d", &npy, 300, 40));
        }
    }
    /* every source float dtype to every target, with strided slices */
    static const char *const float_tensors[] = {"f16_2d", "bf16_2d", "f64_1d", "e4m3", "e5m2"};
    static const char *const slices_2d[] = {NULL, "::-1", "1:4,::3", "-1", "::2,-2::-3"};
    for (size_t t = 0; t < sizeof float_tensors / sizeof float_tensors[0]; t++) {
        for (size_t i = 0; i < sizeof slices_2d / sizeof slices_2d[0]; i++) {
            const char *text = slices_2d[i];
            if (strcmp(float_tensors[t], "f64_1d") == 0 && text && strchr(text, ','))
                text = "3:30:4";
            for (size_t d = 0; d < sizeof float_dtypes / sizeof float_dtypes[0]; d++) {
                tg_tensor_options o = {text, float_dtypes[d], NULL};
                CHECK(stream_matches(&f, float_tensors[t], &o, 20, 30));
            }
        }
    }
    /* non-float and sub-byte tensors: raw copies; integers also as npy */
    tg_tensor_options i32_npy = {"::-1,1:", NULL, "npy"}, u8 = {"::-3", NULL, "npy"};
    tg_tensor_options f4 = {"1:3,2:6", NULL, NULL}, f4_rev = {"::-1", NULL, NULL};
    tg_tensor_options f6 = {"::-2,4:", NULL, NULL}, f6_same = {NULL, "F6_E2M3", NULL};
    CHECK(stream_matches(&f, "i32", &i32_npy, 7, 20));
    CHECK(stream_matches(&f, "u8", &u8, 3, 20));
    CHECK(stream_matches(&f, "f4", &f4, 5, 20));
    CHECK(stream_matches(&f, "f4", &f4_rev, 5, 20));
    CHECK(stream_matches(&f, "f6", &f6, 5, 20));
    CHECK(stream_matches(&f, "f6", &f6_same, 5, 20));
    /* scalar, empty and 5-D */
    tg_tensor_options scalar = {NULL, "F16", "npy"}, scalar_raw = {"", "BF16", NULL};
    tg_tensor_options empty = {":,0:0", "F16", "npy"}, empty_raw = {NULL, NULL, NULL};
    tg_tensor_options five = {"1,::-1,:,1:3,::2", "F32", "npy"},
                      five_raw = {"-1,0:2,0,::-1", NULL, NULL};
    CHECK(stream_matches(&f, "scalar", &scalar, 3, 10));
    CHECK(stream_matches(&f, "scalar", &scalar_raw, 1, 10));
    CHECK(stream_matches(&f, "empty", &empty, 100, 10));
    CHECK(stream_matches(&f, "empty", &empty_raw, 100, 10));
    CHECK(stream_matches(&f, "five_d", &five, 13, 30));
    CHECK(stream_matches(&f, "five_d", &five_raw, 13, 30));
    free_file(&f);
}

TEST(plans)
{
    test_file f;
    CHECK(make_file("plans.safetensors", small_specs, sizeof small_specs / sizeof small_specs[0],
                    &f));
    const st_tensor *t = find(&f, "f32_3d");
    tg_tensor_stream *s;
    tg_tensor_error err;
    /* whole tensor, raw: the tensor's own bytes, one sendfile range */
    tg_tensor_options whole = {NULL, NULL, NULL};
    CHECK(tg_tensor_stream_open(NULL, NULL, &f.file, t, &whole, &s, &err) == 0);
    const tg_tensor_plan *p = tg_tensor_stream_plan(s);
    CHECK(p->contiguous);
    CHECK_EQ_U64(p->contiguous_offset, f.file.data_start + t->begin);
    CHECK_EQ_U64(p->source_begin, f.file.data_start + t->begin);
    CHECK_EQ_U64(p->source_end, f.file.data_start + t->end);
    CHECK_EQ_U64(p->length, 4 * 5 * 6 * 4);
    CHECK_EQ_U64(p->out_rank, 3);
    CHECK(!p->converts);
    char text[TG_TENSOR_SHAPE_TEXT_MAX];
    tg_tensor_shape_text(p->out_shape, p->out_rank, text, sizeof text);
    CHECK_STR(text, "[4,5,6]");
    /* no fd: plans work, reads refuse */
    uint8_t byte;
    CHECK(tg_tensor_stream_read(s, 0, &byte, 1) == -1 && errno == EBADF);
    tg_tensor_stream_free(s);
    /* rows 1..2 are one contiguous range */
    tg_tensor_options rows = {"1:3", NULL, NULL};
    CHECK(tg_tensor_stream_open(NULL, NULL, &f.file, t, &rows, &s, &err) == 0);
    p = tg_tensor_stream_plan(s);
    CHECK(p->contiguous);
    CHECK_EQ_U64(p->contiguous_offset, f.file.data_start + t->begin + 1 * 5 * 6 * 4);
    CHECK_EQ_U64(p->length, 2 * 5 * 6 * 4);
    tg_tensor_stream_free(s);
    /* a strided slice, a conversion or npy is generated */
    tg_tensor_options strided = {"::2", NULL, NULL}, conv = {NULL, "BF16", NULL},
                      npy = {NULL, NULL, "npy"}, same = {NULL, "F32", NULL};
    CHECK(tg_tensor_stream_open(NULL, NULL, &f.file, t, &strided, &s, &err) == 0);
    CHECK(!tg_tensor_stream_plan(s)->contiguous);
    CHECK_EQ_U64(tg_tensor_stream_plan(s)->out_shape[0], 2);
    tg_tensor_stream_free(s);
    CHECK(tg_tensor_stream_open(NULL, NULL, &f.file, t, &conv, &s, &err) == 0);
    CHECK(!tg_tensor_stream_plan(s)->contiguous && tg_tensor_stream_plan(s)->converts);
    CHECK_EQ_U64(tg_tensor_stream_plan(s)->length, 4 * 5 * 6 * 2);
    CHECK_EQ_U64(tg_tensor_stream_plan(s)->out_dtype, ST_BF16);
    tg_tensor_stream_free(s);
    CHECK(tg_tensor_stream_open(NULL, NULL, &f.file, t, &npy, &s, &err) == 0);
    CHECK(!tg_tensor_stream_plan(s)->contiguous);
    CHECK_EQ_U64(tg_tensor_stream_plan(s)->header_length % 64, 0);
    CHECK_EQ_U64(tg_tensor_stream_plan(s)->length,
                 tg_tensor_stream_plan(s)->header_length + 4 * 5 * 6 * 4);
    /* the npy header alone is served without a file */
    uint8_t magic[6];
    CHECK(tg_tensor_stream_read(s, 0, magic, 6) == 6 && memcmp(magic, "\x93NUMPY", 6) == 0);
    tg_tensor_stream_free(s);
    CHECK(tg_tensor_stream_open(NULL, NULL, &f.file, t, &same, &s, &err) == 0);
    CHECK(tg_tensor_stream_plan(s)->contiguous && !tg_tensor_stream_plan(s)->converts);
    tg_tensor_stream_free(s);
    /* empty selection: length 0, contiguous */
    tg_tensor_options none = {"2:2", NULL, NULL};
    CHECK(tg_tensor_stream_open(NULL, NULL, &f.file, t, &none, &s, &err) == 0);
    CHECK(tg_tensor_stream_plan(s)->contiguous);
    CHECK_EQ_U64(tg_tensor_stream_plan(s)->length, 0);
    CHECK_EQ_U64(tg_tensor_stream_plan(s)->out_shape[0], 0);
    tg_tensor_stream_free(s);
    /* shapes as JSON */
    uint64_t shape[] = {0, 18446744073709551615ULL};
    CHECK(tg_tensor_shape_text(shape, 0, text, sizeof text) == 2);
    CHECK_STR(text, "[]");
    CHECK(tg_tensor_shape_text(shape, 2, text, sizeof text) > 0);
    CHECK_STR(text, "[0,18446744073709551615]");
    CHECK(tg_tensor_shape_text(shape, 2, text, 10) == 0);
    free_file(&f);
}

/* Opens and expects a refusal; returns the error. */
static tg_tensor_error refused(const test_file *f, const char *name, const char *slice,
                               const char *dtype, const char *format)
{
    tg_tensor_options o = {slice, dtype, format};
    tg_tensor_stream *s = (tg_tensor_stream *)&o; /* must be reset to NULL */
    tg_tensor_error err;
    int rc = tg_tensor_stream_open(fd_read, (void *)(intptr_t)f->fd, &f->file, find(f, name), &o,
                                   &s, &err);
    CHECK(rc == -1);
    CHECK(s == NULL);
    CHECK(err.reason != NULL && err.detail[0] != '\0');
    if (rc == 0)
        tg_tensor_stream_free(s);
    return err;
}

TEST(errors)
{
    test_file f;
    CHECK(make_file("errors.safetensors", small_specs, sizeof small_specs / sizeof small_specs[0],
                    &f));
    tg_tensor_error e = refused(&f, "f32_3d", "1,7", NULL, NULL);
    CHECK_EQ_U64(e.status, 400);
    CHECK_STR(e.reason, "slice_out_of_range");
    CHECK_EQ_U64(e.dim, 1);
    CHECK(strstr(e.detail, "dimension 1") && strstr(e.detail, "size 5") && strstr(e.detail, "7"));
    e = refused(&f, "f32_3d", "-5", NULL, NULL);
    CHECK(strstr(e.detail, "dimension 0") && strstr(e.detail, "-5") && strstr(e.detail, "size 4"));
    e = refused(&f, "f32_3d", "::0", NULL, NULL);
    CHECK_EQ_U64(e.status, 400);
    CHECK_STR(e.reason, "invalid_slice");
    CHECK(strstr(e.detail, "dimension 0") != NULL);
    e = refused(&f, "f32_3d", ":,:,:,1", NULL, NULL);
    CHECK_STR(e.reason, "invalid_slice");
    CHECK(strstr(e.detail, "too many indices") != NULL);
    CHECK(strstr(e.detail, "dimension 3") == NULL);
    CHECK_EQ_U64(e.dim, SIZE_MAX);
    e = refused(&f, "f32_3d", "-9223372036854775808", NULL, NULL);
    CHECK_STR(e.reason, "slice_out_of_range");
    static const char *const hostile[] = {
        "1:2:3:4", "a",    " 1",  "1,", ",",  "--1",      "1::0", "99999999999999999999",
        "1;2",     "\xff", "0x1", "+1", "1 ", ":,:,:,:,:"};
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        e = refused(&f, "f32_3d", hostile[i], NULL, NULL);
        CHECK_EQ_U64(e.status, 400);
    }
    char long_text[5000];
    memset(long_text, ':', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    CHECK_EQ_U64(refused(&f, "f32_3d", long_text, NULL, NULL).status, 400);
    /* sub-byte slices that cut a byte */
    e = refused(&f, "f4", ":,1:4", NULL, NULL);
    CHECK_EQ_U64(e.status, 400);
    CHECK(strstr(e.detail, "F4") != NULL);
    /* dtypes */
    e = refused(&f, "f32_3d", NULL, "f32", NULL);
    CHECK_EQ_U64(e.status, 400);
    CHECK_STR(e.reason, "invalid_dtype");
    CHECK(strstr(e.detail, "\"f32\"") != NULL);
    e = refused(&f, "f32_3d", NULL, "F32\"<script>", NULL);
    CHECK(strstr(e.detail, "<script>") == NULL);
    e = refused(&f, "i32", NULL, "F32", NULL);
    CHECK_EQ_U64(e.status, 422);
    CHECK_STR(e.reason, "unsupported_conversion");
    CHECK(strstr(e.detail, "I32") && strstr(e.detail, "F32"));
    e = refused(&f, "f32_3d", NULL, "I8", NULL);
    CHECK_EQ_U64(e.status, 422);
    e = refused(&f, "f4", NULL, "F32", NULL);
    CHECK_EQ_U64(e.status, 422);
    /* formats */
    e = refused(&f, "f32_3d", NULL, NULL, "npz");
    CHECK_EQ_U64(e.status, 400);
    CHECK_STR(e.reason, "invalid_format");
    e = refused(&f, "bf16_2d", NULL, NULL, "npy");
    CHECK_EQ_U64(e.status, 406);
    CHECK_STR(e.reason, "npy_unsupported_dtype");
    CHECK(strstr(e.detail, "BF16") && strstr(e.detail, "?dtype=F32"));
    e = refused(&f, "f32_3d", NULL, "F8_E4M3", "npy");
    CHECK_EQ_U64(e.status, 406);
    CHECK(strstr(e.detail, "F8_E4M3") && strstr(e.detail, "?dtype=F32"));
    e = refused(&f, "f4", NULL, NULL, "npy");
    CHECK_EQ_U64(e.status, 406);
    CHECK(strstr(e.detail, "format=raw") != NULL && strstr(e.detail, "?dtype=F32") == NULL);
    /* the order of checks: format, then dtype, then slice */
    CHECK_STR(refused(&f, "f32_3d", "9", "nope", "npz").reason, "invalid_format");
    CHECK_STR(refused(&f, "f32_3d", "9", "nope", NULL).reason, "invalid_dtype");
    free_file(&f);
}

/* Tensors larger than the window: refills forward, backward and sparse, runs larger
 * than a chunk, conversion across window edges. */
TEST(larger_than_the_window)
{
    static const spec big[] = {
        {"rows", ST_F32, 2, {1536, 1024}}, /* 6 MiB, rows of 4 KiB */
        {"wide", ST_F32, 2, {16, 65536}},  /* rows of 256 KiB: columns are sparse */
        {"long", ST_BF16, 1, {1600000}},   /* one run of 3.2 MB */
        {"huge", ST_F32, 2, {6, 300000}},  /* rows of 1.2 MB, more than a window */
    };
    test_file f;
    CHECK(make_file("big.safetensors", big, 4, &f));
    /* the strided ones cover the row-at-once gather: rows and outer walk in the same
     * or opposite directions, rows of 1, 2, 3 and many elements, windows mid-row */
    static const char *const row_slices[] = {
        NULL,       "::-1",      "::3,5:900", "::-7,::-2", ":,7",     "100:1400,-1",
        "::2,::2",  "::-1,1::2", "::2,::-2",  "::-3,::-5", ":,::341", "7:1500:5,3:10:2",
        "::-1,::4", ":,-2::-511"};
    for (size_t i = 0; i < sizeof row_slices / sizeof row_slices[0]; i++) {
        tg_tensor_options raw = {row_slices[i], NULL, NULL},
                          conv = {row_slices[i], "F8_E5M2", NULL},
                          npy = {row_slices[i], "F16", "npy"};
        CHECK(stream_matches(&f, "rows", &raw, 3 << 20, 20));
        CHECK(stream_matches(&f, "rows", &conv, 70000, 20));
        CHECK(stream_matches(&f, "rows", &npy, 1 << 16, 20));
    }
    static const char *const wide_slices[] = {
        ":,5", "::-1,-3", ":,::40000", "::-2,::-65535", "3:9,100:70000", "::-3,::3", ":,::-2"};
    for (size_t i = 0; i < sizeof wide_slices / sizeof wide_slices[0]; i++) {
        tg_tensor_options raw = {wide_slices[i], NULL, NULL}, conv = {wide_slices[i], "F16", NULL};
        CHECK(stream_matches(&f, "wide", &raw, 9, 20));
        CHECK(stream_matches(&f, "wide", &conv, 1 << 20, 20));
    }
    /* rows far apart are read one at a time (::2,::2), unless a row overfills a window */
    static const char *const huge_slices[] = {"::2,::2",       "::-2,::3",          "::2,::-2",
                                              "1::3,::299999", "::5,1023:263169:2", ":,::-4096"};
    for (size_t i = 0; i < sizeof huge_slices / sizeof huge_slices[0]; i++) {
        tg_tensor_options raw = {huge_slices[i], NULL, NULL}, conv = {huge_slices[i], "BF16", NULL};
        CHECK(stream_matches(&f, "huge", &raw, 3 << 20, 20));
        CHECK(stream_matches(&f, "huge", &conv, 1 << 18, 20));
    }
    tg_tensor_options whole = {NULL, "F64", "npy"}, rev = {"::-1", "F32", NULL},
                      part = {"12345:1500000:3", NULL, NULL};
    CHECK(stream_matches(&f, "long", &whole, 5 << 20, 20));
    CHECK(stream_matches(&f, "long", &rev, 1 << 20, 20));
    CHECK(stream_matches(&f, "long", &part, 1 << 20, 20));
    free_file(&f);
}

/* A file cut short after its header was parsed: reads fail with EIO, never overread. */
TEST(truncated_file)
{
    static const spec one[] = {{"t", ST_F32, 2, {64, 64}}};
    test_file f;
    CHECK(make_file("cut.safetensors", one, 1, &f));
    CHECK(ftruncate(f.fd, (off_t)(f.len - 100)) == 0);
    tg_tensor_options conv = {"::2", "F16", NULL};
    tg_tensor_stream *s;
    tg_tensor_error err;
    CHECK(tg_tensor_stream_open(fd_read, (void *)(intptr_t)f.fd, &f.file, find(&f, "t"), &conv, &s,
                                &err) == 0);
    uint64_t length = tg_tensor_stream_plan(s)->length;
    uint8_t buf[512];
    /* windows read ahead, so the start may fail too; the end must */
    ssize_t first = tg_tensor_stream_read(s, 0, buf, sizeof buf);
    CHECK(first == (ssize_t)sizeof buf || (first == -1 && errno == EIO));
    errno = 0;
    CHECK(tg_tensor_stream_read(s, length - 10, buf, 10) == -1 && errno == EIO);
    errno = 0;
    CHECK(tg_tensor_stream_read(s, 2, buf, 10) == -1 && errno == EIO);
    CHECK(tg_tensor_stream_read(s, length + 1, buf, 1) == -1 && errno == EINVAL);
    tg_tensor_stream_free(s);
    free_file(&f);
}

/* The mapped reads: every case above again, read in place from the page cache. */
TEST(mapped_matches_read)
{
    use_map = true;
    every_slice_dtype_and_format();
    larger_than_the_window();
    use_map = false;
}

/* Which streams the routes map: more than one window of tensor, and a conversion or
 * runs of a page or more; never a contiguous body (sendfile) or a small tensor. */
TEST(map_pays_choice)
{
    static const spec specs[] = {
        {"rows", ST_F32, 2, {1536, 1024}}, /* 6 MiB, rows of 4 KiB */
        {"small", ST_F32, 2, {64, 64}},
    };
    test_file f;
    CHECK(make_file("pays.safetensors", specs, 2, &f));
    static const struct {
        const char *name, *slice, *dtype;
        bool pays;
    } cases[] = {
        {"rows", "::-1", NULL, true},     {"rows", "::2", NULL, true},
        {"rows", NULL, "F16", true},      {"rows", "::2,::2", "BF16", true},
        {"rows", "::2,::2", NULL, false}, {"rows", ":,::-1", NULL, false},
        {"rows", NULL, NULL, false},      {"rows", "3:900", NULL, false},
        {"small", "::-1", "F16", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_tensor_options o = {cases[i].slice, cases[i].dtype, NULL};
        tg_tensor_stream *s;
        tg_tensor_error err;
        CHECK(tg_tensor_stream_open(NULL, NULL, &f.file, find(&f, cases[i].name), &o, &s, &err) ==
              0);
        CHECK(tg_tensor_stream_map_pays(s) == cases[i].pays);
        tg_tensor_stream_free(s);
    }
    free_file(&f);
}

/* A file cut short behind a mapped stream: the loads past its end raise SIGBUS, which
 * the guard turns into EIO for that read; the process goes on, and so does the stream
 * for the bytes still in the file. */
TEST(mapped_truncated_file)
{
    static const spec one[] = {{"t", ST_F32, 2, {1024, 1024}}}; /* 4 MiB */
    test_file f;
    CHECK(make_file("cut-mapped.safetensors", one, 1, &f));
    const st_tensor *t = find(&f, "t");
    tg_tensor_options strided = {"::2,::2", NULL, NULL}, conv = {"::-1", "F16", NULL};
    tg_tensor_stream *s, *c;
    tg_tensor_error err;
    CHECK(tg_tensor_stream_open(fd_read, (void *)(intptr_t)f.fd, &f.file, t, &strided, &s, &err) ==
          0);
    CHECK(tg_tensor_stream_open(fd_read, (void *)(intptr_t)f.fd, &f.file, t, &conv, &c, &err) == 0);
    CHECK(tg_tensor_stream_map(s, f.fd) == 0);
    CHECK(tg_tensor_stream_map(c, f.fd) == 0);
    uint64_t length = tg_tensor_stream_plan(s)->length;
    uint8_t *buf = malloc(1 << 16);
    CHECK(tg_tensor_stream_read(s, 0, buf, 4096) == 4096);
    /* keep the first MiB of the tensor's bytes (and the header before them) */
    CHECK(ftruncate(f.fd, (off_t)(f.file.data_start + t->begin + (1 << 20))) == 0);
    errno = 0;
    CHECK(tg_tensor_stream_read(s, length - 4096, buf, 4096) == -1 && errno == EIO);
    errno = 0;
    CHECK(tg_tensor_stream_read(c, 0, buf, 1 << 16) == -1 && errno == EIO); /* reversed: the end */
    /* the start of the tensor is still in the file, and reads again */
    CHECK(tg_tensor_stream_read(s, 0, buf, 4096) == 4096);
    size_t ref_len = 0;
    uint8_t *ref = reference(&f, t, &strided, &ref_len);
    CHECK(ref != NULL && memcmp(buf, ref, 4096) == 0);
    free(ref);
    free(buf);
    tg_tensor_stream_free(s);
    tg_tensor_stream_free(c);
    free_file(&f);
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *seed = getenv("TG_TEST_SEED");
    if (seed)
        rng_state = strtoull(seed, NULL, 0) | 1;
    printf("seed 0x%llx (TG_TEST_SEED)\n", (unsigned long long)rng_state);
    snprintf(temp_dir, sizeof temp_dir, "/tmp/tg_tensor_stream_XXXXXX");
    if (mkdtemp(temp_dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    RUN(every_slice_dtype_and_format);
    RUN(plans);
    RUN(errors);
    RUN(larger_than_the_window);
    RUN(truncated_file);
    RUN(mapped_matches_read);
    RUN(mapped_truncated_file);
    RUN(map_pays_choice);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", temp_dir);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", temp_dir);
    return test_report(argv[0]);
}
