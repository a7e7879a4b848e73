/* server/routes/bundle.c, black-box: GET|HEAD|POST .../versions/{rev}/bundle against
 * the real server (--auth-read, so tokens matter) through the integration harness
 * (tests/integration/harness.h). Every bundle the success cases get is written to a
 * file and checked byte for byte by tests/tensors/check_bundle.py, an independent
 * reader (json + NumPy indexing + torch conversions) that computes the expected
 * bundle from the uploaded files alone: names, globs, slices (::2,::2 and ::-1 among
 * them), dtype conversion, two shards, one file's metadata. Here: Range on the bundle
 * (several, across the header's end), ETag and 304, POST, HEAD, the CLI's `pull
 * --tensors` (the C client's tg_client_bundle) giving the same bytes, and every
 * refusal with its status and reason. */
#include "harness.h"
#include "tensorgate_client.h"

#define MODEL "acme/bun"
#define V1 "/v1/models/" MODEL "/versions/1/bundle"
#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"

static const char *read_acme, *write_acme, *read_other;
static it_buf shard1, shard2;
static char shard1_path[400], shard2_path[400], digest[80];
static json_t *cases; /* what check_bundle.py is given */
static int bundles;

static it_response get_as(const char *path, const char *token, const char *const *headers)
{
    it_request_opts o = {.token = token, .headers = headers};
    return it_request("GET", path, &o);
}

static it_response post_as(const char *path, const char *token, const char *json_text,
                           const char *const *headers)
{
    const char *h[8] = {"Content-Type: application/json", NULL};
    for (int i = 0; headers != NULL && headers[i] != NULL && i < 6; i++)
        h[i + 1] = headers[i];
    it_request_opts o = {.token = token,
                         .headers = h,
                         .body = json_text,
                         .body_len = strlen(json_text),
                         .has_body = true};
    return it_request("POST", path, &o);
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL && fwrite(data, 1, len, f) == len);
    if (f != NULL)
        fclose(f);
}

/* Records a bundle for check_bundle.py: selectors as given (NULL: every tensor). */
static void expect(const it_response *r, const char *const *selectors, const char *dtype,
                   bool both_shards, const char *metadata_from)
{
    char path[400];
    snprintf(path, sizeof path, "%s/bundle-%d.safetensors", it_root_dir, bundles++);
    write_file(path, r->body.data, r->body.len);
    json_t *sel = json_null();
    if (selectors != NULL) {
        sel = json_array();
        for (int i = 0; selectors[i] != NULL; i++)
            json_array_append_new(sel, json_string(selectors[i]));
    }
    json_t *sources = json_array();
    json_array_append_new(sources, json_string(shard1_path));
    if (both_shards)
        json_array_append_new(sources, json_string(shard2_path));
    json_array_append_new(cases,
                          json_pack("{s:s, s:o, s:o, s:s?, s:s, s:s, s:s?}", "bundle", path,
                                    "sources", sources, "selectors", sel, "dtype", dtype, "model",
                                    MODEL, "version", digest, "metadata_from", metadata_from));
}

TEST(selections)
{
    /* names across both shards, in the order asked */
    it_response r = get_as(V1 "?tensors=scale,blk.0.w,ids", read_acme, NULL);
    CHECK_STATUS(r, 200);
    char type[64];
    it_header(&r, "Content-Type", type, sizeof type);
    CHECK_STR(type, "application/octet-stream");
    const char *s1[] = {"scale", "blk.0.w", "ids", NULL};
    expect(&r, s1, NULL, true, NULL);
    it_response_free(&r);
    /* globs (file order, then offset), a repeat kept once, '?' */
    r = get_as(V1 "?tensors=blk.*.b&tensors=blk.?.w,blk.1.b", read_acme, NULL);
    CHECK_STATUS(r, 200);
    const char *s2[] = {"blk.*.b", "blk.?.w", "blk.1.b", NULL};
    expect(&r, s2, NULL, true, NULL);
    it_response_free(&r);
    /* slices: a comma inside brackets belongs to the slice */
    r = get_as(V1 "?tensors=a[::2,::2],blk.1.w[::-1],blk.0.b[1:5],blk.1.b[1,:,::3]", read_acme,
               NULL);
    CHECK_STATUS(r, 200);
    const char *s3[] = {"a[::2,::2]", "blk.1.w[::-1]", "blk.0.b[1:5]", "blk.1.b[1,:,::3]", NULL};
    expect(&r, s3, NULL, true, NULL);
    it_response_free(&r);
    /* a contiguous slice (whole rows) and a dtype: floats converted, I64 as stored */
    r = get_as(V1 "?tensors=a[2:5],blk.1.w,ids,blk.0.b&dtype=BF16", read_acme, NULL);
    CHECK_STATUS(r, 200);
    const char *s4[] = {"a[2:5]", "blk.1.w", "ids", "blk.0.b", NULL};
    expect(&r, s4, "BF16", true, NULL);
    it_response_free(&r);
    r = get_as(V1 "?tensors=a[1:7:2,::-2],blk.0.b&dtype=F64", read_acme, NULL);
    CHECK_STATUS(r, 200);
    const char *s5[] = {"a[1:7:2,::-2]", "blk.0.b", NULL};
    expect(&r, s5, "F64", false, shard1_path);
    it_response_free(&r);
    /* every tensor of the version; and one file's, with its metadata */
    r = get_as(V1, read_acme, NULL);
    CHECK_STATUS(r, 200);
    expect(&r, NULL, NULL, true, NULL);
    it_response_free(&r);
    /* a POST without a body: every tensor too */
    it_request_opts o = {.token = read_acme};
    r = it_request("POST", V1, &o);
    CHECK_STATUS(r, 200);
    expect(&r, NULL, NULL, true, NULL);
    it_response_free(&r);
    r = get_as(V1 "?file=" SHARD1, read_acme, NULL);
    CHECK_STATUS(r, 200);
    expect(&r, NULL, NULL, false, shard1_path);
    it_response_free(&r);
    /* POST: the same selection as a JSON body */
    r = post_as(V1, read_acme,
                "{\"tensors\": [\"blk.1.b[:,::-1]\", \"a[::2,::2]\", \"sc*\"], \"dtype\": \"F32\"}",
                NULL);
    CHECK_STATUS(r, 200);
    const char *s6[] = {"blk.1.b[:,::-1]", "a[::2,::2]", "sc*", NULL};
    expect(&r, s6, "F32", true, NULL);
    it_response_free(&r);
}

/* The same bytes as GET with Range, as 206 with Content-Range. */
static void check_range(const it_buf *whole, const char *etag, uint64_t first, uint64_t last,
                        bool post)
{
    char range[64], content_range[96], want[96];
    snprintf(range, sizeof range, "Range: bytes=%llu-%llu", (unsigned long long)first,
             (unsigned long long)last);
    const char *h[] = {range, NULL};
    it_response r = post ? post_as(V1, read_acme, "{\"tensors\": [\"a[::2,::2]\", \"blk.*\"]}", h)
                         : get_as(V1 "?tensors=a[::2,::2],blk.*", read_acme, h);
    CHECK_STATUS(r, 206);
    uint64_t end = last < whole->len ? last : whole->len - 1;
    CHECK(r.body.len == end - first + 1 &&
          memcmp(r.body.data, whole->data + first, (size_t)(end - first + 1)) == 0);
    it_header(&r, "Content-Range", content_range, sizeof content_range);
    snprintf(want, sizeof want, "bytes %llu-%llu/%zu", (unsigned long long)first,
             (unsigned long long)end, whole->len);
    CHECK_STR(content_range, want);
    char tag[80];
    it_header(&r, "ETag", tag, sizeof tag);
    CHECK_STR(tag, etag);
    it_response_free(&r);
}

TEST(range_and_etag)
{
    it_response r = get_as(V1 "?tensors=a[::2,::2],blk.*", read_acme, NULL);
    CHECK_STATUS(r, 200);
    const char *s[] = {"a[::2,::2]", "blk.*", NULL};
    expect(&r, s, NULL, true, NULL);
    char etag[80], ranges[32], length[32];
    it_header(&r, "ETag", etag, sizeof etag);
    it_header(&r, "Accept-Ranges", ranges, sizeof ranges);
    it_header(&r, "Content-Length", length, sizeof length);
    CHECK_STR(ranges, "bytes");
    CHECK(etag[0] == '"' && strlen(etag) > 10);
    CHECK_EQ_U64(strtoull(length, NULL, 10), r.body.len);
    it_buf whole = {0};
    it_buf_append(&whole, r.body.data, r.body.len);
    it_response_free(&r);
    uint64_t data_start = 8 + it_header_len(&whole);
    check_range(&whole, etag, 0, 7, false);                           /* the length */
    check_range(&whole, etag, data_start - 5, data_start + 9, false); /* across the header end */
    check_range(&whole, etag, data_start + 3, whole.len - 2, false);  /* across tensors */
    check_range(&whole, etag, whole.len - 1, whole.len + 100, false); /* the last byte */
    check_range(&whole, etag, 5, data_start + 17, true);              /* on POST */
    /* 416 past the end */
    char beyond[64];
    snprintf(beyond, sizeof beyond, "Range: bytes=%zu-", whole.len);
    const char *h416[] = {beyond, NULL};
    r = get_as(V1 "?tensors=a[::2,::2],blk.*", read_acme, h416);
    CHECK_PROBLEM(r, 416, "range_not_satisfiable");
    it_response_free(&r);
    /* If-None-Match: 304 on GET; another selection has another tag */
    char inm[120];
    snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
    const char *h304[] = {inm, NULL};
    r = get_as(V1 "?tensors=a[::2,::2],blk.*", read_acme, h304);
    CHECK_STATUS(r, 304);
    CHECK_EQ_U64(r.body.len, 0);
    it_response_free(&r);
    /* the same bytes with another shape ([6] and [1,6]) have two tags */
    r = get_as(V1 "?tensors=a[2]", read_acme, NULL);
    CHECK_STATUS(r, 200);
    char tag_row[80], tag_rows[80];
    it_header(&r, "ETag", tag_row, sizeof tag_row);
    it_response_free(&r);
    r = get_as(V1 "?tensors=a[2:3]", read_acme, NULL);
    CHECK_STATUS(r, 200);
    it_header(&r, "ETag", tag_rows, sizeof tag_rows);
    it_response_free(&r);
    CHECK(strcmp(tag_row, tag_rows) != 0);
    r = get_as(V1 "?tensors=a[::2,::2],blk.*&dtype=F32", read_acme, h304);
    CHECK_STATUS(r, 200);
    it_header(&r, "ETag", inm, sizeof inm);
    CHECK(strcmp(inm, etag) != 0);
    it_response_free(&r);
    /* HEAD: the headers, no body */
    it_request_opts o = {.token = read_acme};
    r = it_request("HEAD", V1 "?tensors=a[::2,::2],blk.*", &o);
    CHECK_STATUS(r, 200);
    it_header(&r, "Content-Length", length, sizeof length);
    CHECK_EQ_U64(strtoull(length, NULL, 10), whole.len);
    CHECK_EQ_U64(r.body.len, 0);
    it_response_free(&r);
    it_buf_free(&whole);
}

TEST(refusals)
{
    it_response r = get_as(V1 "?tensors=nope", read_acme, NULL);
    CHECK_PROBLEM(r, 404, "tensor_not_found");
    CHECK(strstr((const char *)r.body.data, "nope") != NULL);
    it_response_free(&r);
    r = get_as(V1 "?tensors=a,zz*", read_acme, NULL);
    CHECK_PROBLEM(r, 404, "tensor_not_found");
    it_response_free(&r);
    const char *bad[] = {
        V1 "?tensors=a[1", V1 "?tensors=a[]", V1 "?tensors=a,,b", V1 "?tensors=[0]",
        V1 "?tensors=a]",  V1 "?tensors=",    V1 "?tensors"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = get_as(bad[i], read_acme, NULL);
        CHECK_PROBLEM(r, 400, "invalid_selector");
        it_response_free(&r);
    }
    r = get_as(V1 "?tensors=a[x]", read_acme, NULL);
    CHECK_PROBLEM(r, 400, "invalid_slice");
    it_response_free(&r);
    r = get_as(V1 "?tensors=a[9]", read_acme, NULL);
    CHECK_PROBLEM(r, 400, "slice_out_of_range");
    it_response_free(&r);
    r = get_as(V1 "?tensors=a&dtype=f16", read_acme, NULL);
    CHECK_PROBLEM(r, 400, "invalid_dtype");
    it_response_free(&r);
    r = get_as(V1 "?tensors=a&dtype=I32", read_acme, NULL);
    CHECK_PROBLEM(r, 422, "unsupported_conversion");
    it_response_free(&r);
    r = get_as(V1 "?tensors=a&dtype=F16&dtype=F32", read_acme, NULL);
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = get_as(V1 "?file=nothere.safetensors", read_acme, NULL);
    CHECK_PROBLEM(r, 404, "file_not_found");
    it_response_free(&r);
    r = get_as("/v1/models/acme/bun/versions/9/bundle", read_acme, NULL);
    CHECK_PROBLEM(r, 404, "version_not_found");
    it_response_free(&r);
    /* a name in two files: 409, and file= chooses */
    r = get_as("/v1/models/acme/dup/versions/1/bundle?tensors=a", read_acme, NULL);
    CHECK_PROBLEM(r, 409, "ambiguous_tensor");
    it_response_free(&r);
    r = get_as("/v1/models/acme/dup/versions/1/bundle?tensors=*", read_acme, NULL);
    CHECK_PROBLEM(r, 409, "ambiguous_tensor");
    it_response_free(&r);
    r = get_as("/v1/models/acme/dup/versions/1/bundle?tensors=a&file=copy.safetensors", read_acme,
               NULL);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    /* GGUF */
    r = get_as("/v1/models/acme/gg/versions/1/bundle", read_acme, NULL);
    CHECK_PROBLEM(r, 422, "unsupported_tensor");
    it_response_free(&r);
    /* too many: 257 globs; a POST body over 1 MiB */
    it_buf many = {0};
    it_buf_printf(&many, "{\"tensors\": [\"a*\"");
    for (int i = 0; i < 256; i++)
        it_buf_printf(&many, ", \"b%d*\"", i);
    it_buf_printf(&many, "]}");
    r = post_as(V1, read_acme, (const char *)many.data, NULL);
    CHECK_PROBLEM(r, 413, "bundle_too_large");
    it_response_free(&r);
    many.len = 0;
    it_buf_printf(&many, "{\"tensors\": [\"a\"");
    while (many.len < 1024 * 1024 + 16)
        it_buf_printf(&many, ", \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"");
    it_buf_printf(&many, "]}");
    {
        const char *h[] = {"Content-Type: application/json", NULL};
        it_request_opts o = {.token = read_acme,
                             .headers = h,
                             .body = many.data,
                             .body_len = many.len,
                             .has_body = true,
                             .expect_continue = true};
        r = it_request("POST", V1, &o);
        CHECK_PROBLEM(r, 413, "bundle_too_large");
        it_response_free(&r);
    }
    /* 65,537 selectors (names repeat: the selector bound, before any lookup) */
    many.len = 0;
    it_buf_printf(&many, "{\"tensors\": [\"a\"");
    for (int i = 0; i < 65536; i++)
        it_buf_append(&many, ",\"a\"", 4);
    it_buf_printf(&many, "]}");
    r = post_as(V1, read_acme, (const char *)many.data, NULL);
    CHECK_PROBLEM(r, 413, "bundle_too_large");
    it_response_free(&r);
    it_buf_free(&many);
    /* bodies */
    r = post_as(V1, read_acme, "{\"tensors\": []}", NULL);
    CHECK_PROBLEM(r, 400, "invalid_selector");
    it_response_free(&r);
    r = post_as(V1, read_acme, "{\"tensors\": [3]}", NULL);
    CHECK_PROBLEM(r, 400, "invalid_selector");
    it_response_free(&r);
    r = post_as(V1, read_acme, "{\"tensor\": [\"a\"]}", NULL);
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = post_as(V1, read_acme, "[1]", NULL);
    CHECK_PROBLEM(r, 400, "invalid_json");
    it_response_free(&r);
    /* tokens: none, another namespace's, on GET and POST */
    r = get_as(V1 "?tensors=a", NULL, NULL);
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    r = get_as(V1 "?tensors=a", read_other, NULL);
    CHECK_STATUS(r, 403);
    it_response_free(&r);
    r = post_as(V1, read_other, "{\"tensors\": [\"a\"]}", NULL);
    CHECK_STATUS(r, 403);
    it_response_free(&r);
    r = post_as(V1, NULL, "{\"tensors\": [\"a\"]}", NULL);
    CHECK_STATUS(r, 401);
    it_response_free(&r);
}

/* tensorgate pull --tensors: the C client's bundle call gives the route's bytes;
 * --slice applies to every selector without its own */
TEST(cli_pull_tensors)
{
    char out[400], cmd[2048];
    snprintf(out, sizeof out, "%s/pulled.safetensors", it_root_dir);
    snprintf(cmd, sizeof cmd,
             "TENSORGATE_TOKEN=%s %s/tensorgate pull %s@1 --url %s --tensors 'a,blk.1.*' "
             "--tensors 'ids[::-1]' --slice '::2' --dtype F16 -o %s >%s/pull.out 2>&1",
             read_acme, it_build_dir, MODEL, it_srv.base, out, it_root_dir);
    int rc = system(cmd);
    CHECK(rc == 0);
    if (rc != 0) {
        snprintf(cmd, sizeof cmd, "cat %s/pull.out >&2", it_root_dir);
        CHECK(system(cmd) == 0);
    }
    it_response r = get_as(V1 "?tensors=a[::2],blk.1.*[::2],ids[::-1]&dtype=F16", read_acme, NULL);
    CHECK_STATUS(r, 200);
    it_buf got = {0};
    CHECK(it_read_file(out, &got));
    CHECK(got.len == r.body.len && memcmp(got.data, r.body.data, got.len) == 0);
    const char *s[] = {"a[::2]", "blk.1.*[::2]", "ids[::-1]", NULL};
    expect(&r, s, "F16", true, NULL);
    it_response_free(&r);
    it_buf_free(&got);
    /* a selector that matches nothing: the CLI fails and leaves no file */
    snprintf(out, sizeof out, "%s/none.safetensors", it_root_dir);
    snprintf(cmd, sizeof cmd,
             "TENSORGATE_TOKEN=%s %s/tensorgate pull %s@1 --url %s --tensors nope -o %s "
             ">%s/pull.out 2>&1",
             read_acme, it_build_dir, MODEL, it_srv.base, out, it_root_dir);
    rc = system(cmd);
    CHECK(rc != 0);
    CHECK(access(out, F_OK) != 0);
}

/* The model's download count, as a sorted list writes it first (-1: not listed). */
static long long downloads_of(const char *model)
{
    it_response r = get_as("/v1/models?q=acme/bun&sort=downloads&direction=-1", read_acme, NULL);
    long long n = -1;
    size_t i;
    json_t *item;
    json_array_foreach(json_object_get(r.json, "models"), i, item)
    {
        if (strcmp(json_string_value(json_object_get(item, "name")), model) == 0)
            n = json_integer_value(json_object_get(item, "downloads"));
    }
    it_response_free(&r);
    return n;
}

/* a bundle GET counts one download; a HEAD or a Range past byte 0 does not */
TEST(downloads)
{
    long long before = downloads_of(MODEL);
    CHECK(before >= 1);
    it_response r = get_as(V1 "?tensors=a", read_acme, NULL);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    CHECK(downloads_of(MODEL) == before + 1);
    it_request_opts o = {.token = read_acme};
    r = it_request("HEAD", V1 "?tensors=a", &o);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    const char *h[] = {"Range: bytes=8-", NULL};
    r = get_as(V1 "?tensors=a", read_acme, h);
    CHECK_STATUS(r, 206);
    it_response_free(&r);
    CHECK(downloads_of(MODEL) == before + 1);
}

/* the C client's buffer call: the route's bytes; a buffer too small; a refusal's
 * reason */
TEST(client_buffer)
{
    tgc_error e;
    tgc_client *c = tgc_connect(&(tgc_options){.base_url = it_srv.base, .token = read_acme}, &e);
    CHECK(c != NULL);
    if (c == NULL)
        return;
    const char *sel[] = {"blk.*[::-1]", "ids", NULL};
    tgc_bundle_request req = {sel, "F16", NULL};
    static unsigned char buf[1 << 16];
    uint64_t got = 0;
    CHECK(tgc_bundle_to_buffer(c, MODEL, "1", &req, buf, sizeof buf, &got, &e) == 0);
    it_response r = get_as(V1 "?tensors=blk.*%5B::-1%5D,ids&dtype=F16", read_acme, NULL);
    CHECK_STATUS(r, 200);
    CHECK(got == r.body.len && memcmp(buf, r.body.data, (size_t)got) == 0);
    it_response_free(&r);
    CHECK(tgc_bundle_to_buffer(c, MODEL, "1", &req, buf, 16, &got, &e) == -1);
    CHECK_STR(e.reason, TGC_REASON_TOO_SMALL);
    const char *none[] = {"nope*", NULL};
    tgc_bundle_request missing = {none, NULL, NULL};
    CHECK(tgc_bundle_to_buffer(c, MODEL, "1", &missing, buf, sizeof buf, &got, &e) == -1);
    CHECK_STR(e.reason, "tensor_not_found");
    CHECK(e.status == 404);
    tgc_close(c);
}

/* 65,537 tensors selected (empty ones: a small file): 413 */
TEST(too_many_tensors)
{
    enum { N = 65537 };
    it_tensor_spec *t = calloc(N, sizeof *t);
    char(*names)[16] = calloc(N, sizeof *names);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "e%05d", i);
        t[i] = (it_tensor_spec){names[i], "F32", 1, {0}};
    }
    it_buf file = {0};
    it_build_safetensors(&file, t, N, NULL, 1);
    CHECK_EQ_U64(it_make_version(write_acme, "acme/many", "model.safetensors", &file, false), 1);
    it_response r = get_as("/v1/models/acme/many/versions/1/bundle", read_acme, NULL);
    CHECK_PROBLEM(r, 413, "bundle_too_large");
    it_response_free(&r);
    /* 65,437 of them are served (the header alone: the tensors are empty) */
    r = get_as("/v1/models/acme/many/versions/1/bundle?tensors=e0*,e1*,e2*,e3*,e4*,e5*,"
               "e60*,e61*,e62*,e63*,e64*,e650*,e651*,e652*,e653*,e6550?,e6551?,e6552?,e6553?",
               read_acme, NULL);
    CHECK_STATUS(r, 200);
    CHECK(r.body.len > 8 && it_header_len(&r.body) + 8 == r.body.len);
    it_response_free(&r);
    it_buf_free(&file);
    free(names);
    free(t);
}

/* a blob gone after its header was parsed (and cached): 500 blob_damaged before any
 * byte of the bundle */
TEST(damaged_blob)
{
    it_buf file = {0};
    it_tensor_spec t[] = {{"g", "F32", 1, {16}}};
    it_build_safetensors(&file, t, 1, NULL, 99);
    CHECK_EQ_U64(it_make_version(write_acme, "acme/gone", "model.safetensors", &file, true), 1);
    it_response r = get_as("/v1/models/acme/gone/versions/1/bundle", read_acme, NULL);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    char sha[65], path[512];
    it_sha256_hex(file.data, file.len, sha);
    snprintf(path, sizeof path, "%s/blobs/sha256/%.2s/%s", it_srv.data, sha, sha);
    CHECK(unlink(path) == 0);
    r = get_as("/v1/models/acme/gone/versions/1/bundle?tensors=g", read_acme, NULL);
    CHECK_PROBLEM(r, 500, "blob_damaged");
    it_response_free(&r);
    it_buf_free(&file);
}

int main(int argc, char **argv)
{
    const char *flags[] = {"--auth-read", NULL};
    it_init(argc, argv, flags);
    write_acme = it_token("write", "acme");
    read_acme = it_token("read", "acme");
    read_other = it_token("read", "other");
    cases = json_array();
    it_tensor_spec one[] = {{"a", "F32", 2, {8, 6}},
                            {"blk.0.w", "BF16", 2, {4, 10}},
                            {"blk.0.b", "F16", 1, {6}},
                            {"ids", "I64", 1, {5}}};
    it_tensor_spec two[] = {
        {"blk.1.w", "F32", 2, {3, 5}}, {"blk.1.b", "F16", 3, {2, 2, 4}}, {"scale", "F32", 0, {0}}};
    it_build_safetensors(&shard1, one, 4, "{\"format\":\"pt\",\"note\":\"a \\\"quoted\\\" one\"}",
                         3);
    it_build_safetensors(&shard2, two, 3, NULL, 4);
    snprintf(shard1_path, sizeof shard1_path, "%s/%s", it_root_dir, SHARD1);
    snprintf(shard2_path, sizeof shard2_path, "%s/%s", it_root_dir, SHARD2);
    write_file(shard1_path, shard1.data, shard1.len);
    write_file(shard2_path, shard2.data, shard2.len);
    CHECK_EQ_U64(it_make_version(write_acme, MODEL, SHARD1, &shard1, false), 1);
    it_response r = it_send("PUT", "/v1/models/" MODEL "/versions/1/files/" SHARD2, write_acme,
                            shard2.data, shard2.len);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send_json("POST", "/v1/models/" MODEL "/versions/1/publish", write_acme, "{}");
    CHECK_STATUS(r, 200);
    snprintf(digest, sizeof digest, "sha256:%s",
             it_json_str(&r, "digest") ? it_json_str(&r, "digest") : "");
    it_response_free(&r);
    /* two files holding the same name; a GGUF-only version */
    CHECK_EQ_U64(it_make_version(write_acme, "acme/dup", "model.safetensors", &shard1, false), 1);
    r = it_send("PUT", "/v1/models/acme/dup/versions/1/files/copy.safetensors", write_acme,
                shard1.data, shard1.len);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    /* GGUF v3: no tensors, general.architecture only */
    it_buf gguf = {0};
    it_buf_append(&gguf, "GGUF", 4);
    it_put_u32(&gguf, 3);
    const unsigned char counts[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1};
    it_buf_append(&gguf, counts, 16);
    const unsigned char key_len[8] = {20};
    it_buf_append(&gguf, key_len, 8);
    it_buf_append(&gguf, "general.architecture", 20);
    it_put_u32(&gguf, 8); /* a string */
    const unsigned char value_len[8] = {5};
    it_buf_append(&gguf, value_len, 8);
    it_buf_append(&gguf, "llama", 5);
    CHECK_EQ_U64(it_make_version(write_acme, "acme/gg", "m.gguf", &gguf, true), 1);
    it_buf_free(&gguf);
    RUN(selections);
    RUN(range_and_etag);
    RUN(refusals);
    RUN(cli_pull_tensors);
    RUN(client_buffer);
    RUN(downloads);
    RUN(damaged_blob);
    RUN(too_many_tensors);
    /* every bundle above, checked by the independent reader */
    char path[400], cmd[1024];
    snprintf(path, sizeof path, "%s/cases.json", it_root_dir);
    CHECK(json_dump_file(cases, path, 0) == 0);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/tensors/check_bundle.py %s >&2", path);
    int rc = system(cmd);
    CHECK(WIFEXITED(rc) && (WEXITSTATUS(rc) == 0 || WEXITSTATUS(rc) == 77));
    json_decref(cases);
    it_buf_free(&shard1);
    it_buf_free(&shard2);
    return it_finish(argv[0]);
}
