/* The tensor routes over real HTTP: GET .../tensors lists every tensor across the
 * shards; GET|HEAD .../tensors/{name} finds the shard through the index (or the
 * shards' headers when there is no index) and serves the bytes with X-Tensor-*
 * headers; ?slice= ?dtype= ?format=npy and Range (on the representation), ETag,
 * If-None-Match, If-Range; every refusal as problem+json. Expected bodies are
 * computed from the uploaded bytes with the lib (st_slice_gather, st_convert,
 * st_npy_header); tests/tensors/check_values.py checks those against NumPy/torch. */
#include "harness.h"

#include "st_convert.h"
#include "st_header.h"
#include "st_npy.h"
#include "st_slice.h"
#include "st_write.h"

#define BASE "/v1/models/acme/tensors"
#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"

static const char *write_token;

typedef struct shard {
    uint8_t *bytes;
    size_t len;
    st_file file;
} shard;

static shard shards[3]; /* two shards of version 1, one file of draft version 2 */

static uint32_t rng_state = 12345;

static float next_float(void)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return ((float)((rng_state >> 8) % 20001) - 10000.0f) / 64.0f;
}

/* A shard of the given tensors with finite random values (floats) or bytes. */
static void build_shard(shard *out, const st_write_tensor *tensors, size_t count)
{
    void *data[8];
    for (size_t i = 0; i < count; i++) {
        uint64_t elements = 1, bytes = 0;
        st_shape_elements(tensors[i].shape, tensors[i].rank, &elements);
        st_dtype_bytes(tensors[i].dtype, elements, &bytes);
        float *values = malloc(elements * sizeof *values + 1);
        for (uint64_t e = 0; e < elements; e++)
            values[e] = next_float();
        data[i] = malloc(bytes + 1);
        if (tensors[i].dtype == ST_I64)
            for (uint64_t b = 0; b < bytes; b++)
                ((uint8_t *)data[i])[b] = (uint8_t)(b * 7);
        else
            st_convert(ST_F32, tensors[i].dtype, values, data[i], (size_t)elements);
        free(values);
    }
    st_error err;
    if (st_write_to_buffer(tensors, (const void *const *)data, count, NULL, 0, false, &out->bytes,
                           &out->len, &err) != ST_OK ||
        st_header_parse(out->bytes, out->len, out->len, NULL, &out->file, &err) != ST_OK) {
        fprintf(stderr, "building a shard failed: %s\n", err.detail);
        exit(2);
    }
    for (size_t i = 0; i < count; i++)
        free(data[i]);
}

static const uint64_t embed_shape[] = {512, 1024}, attn_shape[] = {6, 10}, head_shape[] = {8, 12},
                      ids_shape[] = {5}, draft_shape[] = {3, 4};

static void build_files(void)
{
    const st_write_tensor one[] = {{"embed.weight", ST_F32, 2, embed_shape},
                                   {"blocks/0/attn.weight", ST_BF16, 2, attn_shape}};
    const st_write_tensor two[] = {{"lm_head.weight", ST_F16, 2, head_shape},
                                   {"scale", ST_F32, 0, NULL},
                                   {"ids", ST_I64, 1, ids_shape}};
    const st_write_tensor draft[] = {{"only.weight", ST_F64, 2, draft_shape}};
    build_shard(&shards[0], one, 2);
    build_shard(&shards[1], two, 3);
    build_shard(&shards[2], draft, 1);
}

/* The expected representation, from the uploaded bytes. */
static uint8_t *expected(const shard *s, const char *name, const char *slice, const char *dtype,
                         bool npy, size_t *len)
{
    const st_tensor *t = st_file_find(&s->file, name, strlen(name));
    st_slice sl;
    const char *text = slice ? slice : "";
    if (t == NULL ||
        st_slice_parse(text, strlen(text), t->shape, t->rank, t->dtype, &sl, NULL) != ST_SLICE_OK)
        return NULL;
    st_dtype to = t->dtype;
    if (dtype != NULL && !st_dtype_from_name(dtype, strlen(dtype), &to))
        return NULL;
    uint8_t *gathered = malloc(sl.out_bytes + 1);
    st_slice_gather(&sl, s->bytes + s->file.data_start + t->begin, gathered);
    size_t body = (size_t)sl.out_elements * (st_dtype_bits(to) / 8);
    uint8_t header[2048];
    size_t header_len =
        npy ? st_npy_header(to, sl.out_shape, sl.out_rank, header, sizeof header) : 0;
    uint8_t *out = malloc(header_len + body + 1);
    memcpy(out, header, header_len);
    /* st_convert converts floats only; the same dtype is a copy for every dtype */
    if (to == t->dtype)
        memcpy(out + header_len, gathered, body);
    else
        st_convert(t->dtype, to, gathered, out + header_len, (size_t)sl.out_elements);
    free(gathered);
    *len = header_len + body;
    return out;
}

static bool body_is(const it_response *r, const uint8_t *want, size_t len)
{
    return want != NULL && r->body.len == len && (len == 0 || memcmp(r->body.data, want, len) == 0);
}

static it_response get_with(const char *url, const char *const *headers)
{
    it_request_opts o;
    memset(&o, 0, sizeof o);
    o.headers = headers;
    return it_request("GET", url, &o);
}

TEST(publish_a_sharded_version)
{
    it_response r = it_send_json("POST", "/v1/models", write_token, "{\"name\":\"acme/tensors\"}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send_json("POST", BASE "/versions", write_token, "{}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send("PUT", BASE "/versions/1/files/" SHARD1, write_token, shards[0].bytes,
                shards[0].len);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send("PUT", BASE "/versions/1/files/" SHARD2, write_token, shards[1].bytes,
                shards[1].len);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    it_buf index = {0};
    it_buf_printf(&index,
                  "{\"metadata\":{\"total_size\":%llu},\"weight_map\":{"
                  "\"embed.weight\":\"" SHARD1 "\",\"blocks/0/attn.weight\":\"" SHARD1 "\","
                  "\"lm_head.weight\":\"" SHARD2 "\",\"scale\":\"" SHARD2 "\",\"ids\":\"" SHARD2
                  "\"}}",
                  (unsigned long long)(shards[0].file.data_size + shards[1].file.data_size));
    r = it_send("PUT", BASE "/versions/1/files/model.safetensors.index.json", write_token,
                index.data, index.len);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    it_buf_free(&index);
    r = it_send_json("POST", BASE "/versions/1/publish", write_token, NULL);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    /* version 2: a draft with one file and no index */
    r = it_send_json("POST", BASE "/versions", write_token, "{}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send("PUT", BASE "/versions/2/files/weights/model.safetensors", write_token,
                shards[2].bytes, shards[2].len);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
}

TEST(list_every_tensor)
{
    it_response r = it_get(BASE "/versions/latest/tensors");
    CHECK_STATUS(r, 200);
    json_t *tensors = json_object_get(r.json, "tensors");
    CHECK_EQ_U64(json_array_size(tensors), 5);
    CHECK_EQ_U64(it_json_int(r.json, "count"), 5);
    size_t seen = 0;
    for (size_t i = 0; i < json_array_size(tensors); i++) {
        json_t *t = json_array_get(tensors, i);
        const char *name = json_string_value(json_object_get(t, "name"));
        const char *file = json_string_value(json_object_get(t, "file"));
        const shard *s = file && strcmp(file, SHARD1) == 0 ? &shards[0] : &shards[1];
        const st_tensor *want = name ? st_file_find(&s->file, name, strlen(name)) : NULL;
        CHECK(want != NULL);
        if (want == NULL)
            continue;
        seen++;
        CHECK_STR(json_string_value(json_object_get(t, "dtype")), st_dtype_name(want->dtype));
        json_t *shape = json_object_get(t, "shape");
        CHECK_EQ_U64(json_array_size(shape), want->rank);
        for (size_t d = 0; d < want->rank; d++)
            CHECK_EQ_U64(json_integer_value(json_array_get(shape, d)), want->shape[d]);
        json_t *offsets = json_object_get(t, "data_offsets");
        CHECK_EQ_U64(json_integer_value(json_array_get(offsets, 0)),
                     s->file.data_start + want->begin);
        CHECK_EQ_U64(json_integer_value(json_array_get(offsets, 1)),
                     s->file.data_start + want->end);
    }
    CHECK_EQ_U64(seen, 5);
    it_response_free(&r);
    /* the draft's single file, and an unknown version */
    r = it_get(BASE "/versions/2/tensors");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(it_json_int(r.json, "count"), 1);
    it_response_free(&r);
    r = it_get(BASE "/versions/9/tensors");
    CHECK_PROBLEM(r, 404, "version_not_found");
    it_response_free(&r);
}

/* Paging: limit=2 walks version 1's five tensors in three pages, in the same order
 * as the whole list; every page says the total; bad limits and cursors are 400. */
TEST(list_pages)
{
    it_response all = it_get(BASE "/versions/1/tensors");
    CHECK_STATUS(all, 200);
    CHECK(json_is_null(json_object_get(all.json, "next_cursor")));
    CHECK_EQ_U64(it_json_int(all.json, "total"), 5);
    json_t *every = json_object_get(all.json, "tensors");
    char url[512] = BASE "/versions/1/tensors?limit=2";
    size_t pages = 0, seen = 0;
    while (pages < 10) {
        it_response r = it_get(url);
        CHECK_STATUS(r, 200);
        pages++;
        json_t *tensors = json_object_get(r.json, "tensors");
        CHECK_EQ_U64(it_json_int(r.json, "total"), 5);
        CHECK_EQ_U64(it_json_int(r.json, "count"), json_array_size(tensors));
        CHECK_EQ_U64(json_array_size(tensors), pages < 3 ? 2 : 1);
        for (size_t i = 0; i < json_array_size(tensors); i++, seen++)
            CHECK(json_equal(json_array_get(tensors, i), json_array_get(every, seen)));
        const char *next = json_string_value(json_object_get(r.json, "next_cursor"));
        if (next == NULL) {
            it_response_free(&r);
            break;
        }
        char *escaped = curl_easy_escape(NULL, next, 0);
        snprintf(url, sizeof url, BASE "/versions/1/tensors?limit=2&cursor=%s", escaped);
        curl_free(escaped);
        it_response_free(&r);
    }
    CHECK_EQ_U64(pages, 3);
    CHECK_EQ_U64(seen, 5);
    it_response_free(&all);

    /* a page that ends on the last tensor has no next page */
    it_response r = it_get(BASE "/versions/1/tensors?limit=5");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(it_json_int(r.json, "count"), 5);
    CHECK(json_is_null(json_object_get(r.json, "next_cursor")));
    it_response_free(&r);

    static const char *const bad[] = {
        BASE "/versions/1/tensors?limit=0",
        BASE "/versions/1/tensors?limit=10001",
        BASE "/versions/1/tensors?limit=x",
        BASE "/versions/1/tensors?cursor=%25%25%25",
        BASE "/versions/1/tensors?cursor=YWJj", /* "abc": no file/tensor split */
        /* "model-00001-of-00002.safetensors\nnope": no such tensor there */
        BASE "/versions/1/tensors?cursor=bW9kZWwtMDAwMDEtb2YtMDAwMDIuc2FmZXRlbnNvcnMKbm9wZQ",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = it_get(bad[i]);
        CHECK_PROBLEM(r, 400, "invalid_request");
        it_response_free(&r);
    }
}

TEST(whole_tensors_and_headers)
{
    char value[256];
    /* through the index, from the second shard */
    it_response r = it_get(BASE "/versions/1/tensors/lm_head.weight");
    CHECK_STATUS(r, 200);
    size_t len;
    uint8_t *want = expected(&shards[1], "lm_head.weight", NULL, NULL, false, &len);
    CHECK(body_is(&r, want, len));
    free(want);
    CHECK_STR(it_header(&r, "X-Tensor-Dtype", value, sizeof value), "F16");
    CHECK_STR(it_header(&r, "X-Tensor-Shape", value, sizeof value), "[8,12]");
    CHECK_STR(it_header(&r, "X-Tensor-File", value, sizeof value), SHARD2);
    CHECK_STR(it_header(&r, "Accept-Ranges", value, sizeof value), "bytes");
    const st_tensor *t = st_file_find(&shards[1].file, "lm_head.weight", 14);
    char offsets[64];
    snprintf(offsets, sizeof offsets, "[%llu,%llu]",
             (unsigned long long)(shards[1].file.data_start + t->begin),
             (unsigned long long)(shards[1].file.data_start + t->end));
    CHECK_STR(it_header(&r, "X-Tensor-Data-Offsets", value, sizeof value), offsets);
    /* the offsets really are where the bytes are in the file */
    CHECK(memcmp(r.body.data, shards[1].bytes + shards[1].file.data_start + t->begin, r.body.len) ==
          0);
    it_response_free(&r);
    /* a name with '/', raw and percent-encoded; a scalar; 2 MiB through sendfile */
    static const char *const urls[] = {BASE "/versions/1/tensors/blocks/0/attn.weight",
                                       BASE "/versions/1/tensors/blocks%2F0%2Fattn.weight"};
    for (int i = 0; i < 2; i++) {
        r = it_get(urls[i]);
        CHECK_STATUS(r, 200);
        want = expected(&shards[0], "blocks/0/attn.weight", NULL, NULL, false, &len);
        CHECK(body_is(&r, want, len));
        free(want);
        CHECK_STR(it_header(&r, "X-Tensor-Dtype", value, sizeof value), "BF16");
        it_response_free(&r);
    }
    r = it_get(BASE "/versions/1/tensors/scale");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(r.body.len, 4);
    CHECK_STR(it_header(&r, "X-Tensor-Shape", value, sizeof value), "[]");
    it_response_free(&r);
    r = it_get(BASE "/versions/1/tensors/embed.weight");
    CHECK_STATUS(r, 200);
    want = expected(&shards[0], "embed.weight", NULL, NULL, false, &len);
    CHECK(body_is(&r, want, len));
    CHECK_EQ_U64(len, 512 * 1024 * 4);
    free(want);
    it_response_free(&r);
    /* no index: found by reading the draft's header */
    r = it_get(BASE "/versions/2/tensors/only.weight");
    CHECK_STATUS(r, 200);
    want = expected(&shards[2], "only.weight", NULL, NULL, false, &len);
    CHECK(body_is(&r, want, len));
    free(want);
    CHECK_STR(it_header(&r, "X-Tensor-File", value, sizeof value), "weights/model.safetensors");
    it_response_free(&r);
    /* HEAD: the length and headers, no body */
    r = it_request("HEAD", BASE "/versions/1/tensors/embed.weight?slice=::2,::-3&dtype=BF16", NULL);
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(r.body.len, 0);
    char length[32];
    snprintf(length, sizeof length, "%d", 256 * 342 * 2);
    CHECK_STR(it_header(&r, "Content-Length", value, sizeof value), length);
    CHECK_STR(it_header(&r, "X-Tensor-Shape", value, sizeof value), "[256,342]");
    it_response_free(&r);
}

/* One case: URL query, expected body from the lib. */
static void check_case(const shard *s, const char *name, const char *url_name, const char *query,
                       const char *slice, const char *dtype, bool npy, const char *want_dtype,
                       const char *want_shape)
{
    char url[512], value[256];
    snprintf(url, sizeof url, BASE "/versions/1/tensors/%s?%s", url_name, query);
    it_response r = it_get(url);
    CHECK_STATUS(r, 200);
    size_t len = 0;
    uint8_t *want = expected(s, name, slice, dtype, npy, &len);
    CHECK(body_is(&r, want, len));
    if (!body_is(&r, want, len))
        fprintf(stderr, "  body of %s: %zu bytes, expected %zu\n", url, r.body.len, len);
    CHECK_STR(it_header(&r, "X-Tensor-Dtype", value, sizeof value), want_dtype);
    CHECK_STR(it_header(&r, "X-Tensor-Shape", value, sizeof value), want_shape);
    it_header(&r, "Content-Type", value, sizeof value);
    CHECK_STR(value, npy ? "application/x-npy" : "application/octet-stream");
    free(want);
    it_response_free(&r);
}

TEST(slices_conversions_npy)
{
    check_case(&shards[0], "embed.weight", "embed.weight", "slice=1:3", "1:3", NULL, false, "F32",
               "[2,1024]");
    check_case(&shards[0], "embed.weight", "embed.weight", "slice=::-5,7::9&dtype=F16", "::-5,7::9",
               "F16", false, "F16", "[103,113]");
    check_case(&shards[0], "embed.weight", "embed.weight", "slice=%3A%2C-1&format=npy", ":,-1",
               NULL, true, "F32", "[512]");
    check_case(&shards[0], "embed.weight", "embed.weight", "dtype=F8_E4M3", NULL, "F8_E4M3", false,
               "F8_E4M3", "[512,1024]");
    check_case(&shards[0], "embed.weight", "embed.weight", "dtype=F64&format=npy&slice=-2", "-2",
               "F64", true, "F64", "[1024]");
    check_case(&shards[0], "blocks/0/attn.weight", "blocks%2F0%2Fattn.weight",
               "dtype=F32&format=npy&slice=::2,::-3", "::2,::-3", "F32", true, "F32", "[3,4]");
    check_case(&shards[1], "lm_head.weight", "lm_head.weight", "slice=0:0", "0:0", NULL, false,
               "F16", "[0,12]");
    check_case(&shards[1], "lm_head.weight", "lm_head.weight", "slice=3,4&format=npy", "3,4", NULL,
               true, "F16", "[]");
    check_case(&shards[1], "ids", "ids", "format=npy&slice=::-1", "::-1", NULL, true, "I64", "[5]");
    check_case(&shards[1], "scale", "scale", "dtype=BF16", NULL, "BF16", false, "BF16", "[]");
}

TEST(ranges_on_the_representation)
{
    char value[256];
    size_t len;
    uint8_t *want = expected(&shards[0], "embed.weight", "::3,1::2", "BF16", false, &len);
    const char *url = BASE "/versions/1/tensors/embed.weight?slice=::3,1::2&dtype=BF16";
    /* a range starting and ending inside elements */
    static const char *const mid[] = {"Range: bytes=3-100000", NULL};
    it_response r = get_with(url, mid);
    CHECK_STATUS(r, 206);
    CHECK(want != NULL && r.body.len == 99998 && memcmp(r.body.data, want + 3, 99998) == 0);
    char expect_range[64];
    snprintf(expect_range, sizeof expect_range, "bytes 3-100000/%zu", len);
    CHECK_STR(it_header(&r, "Content-Range", value, sizeof value), expect_range);
    char etag[128];
    it_header(&r, "ETag", etag, sizeof etag);
    CHECK(etag[0] == '"');
    it_response_free(&r);
    /* suffix range; a contiguous slice (sendfile) with a range */
    static const char *const suffix[] = {"Range: bytes=-7", NULL};
    r = get_with(url, suffix);
    CHECK_STATUS(r, 206);
    CHECK(want != NULL && r.body.len == 7 && memcmp(r.body.data, want + len - 7, 7) == 0);
    it_response_free(&r);
    free(want);
    want = expected(&shards[0], "embed.weight", "100:200", NULL, false, &len);
    static const char *const plain[] = {"Range: bytes=10-4097", NULL};
    r = get_with(BASE "/versions/1/tensors/embed.weight?slice=100:200", plain);
    CHECK_STATUS(r, 206);
    CHECK(want != NULL && r.body.len == 4088 && memcmp(r.body.data, want + 10, 4088) == 0);
    free(want);
    it_response_free(&r);
    /* npy with a range across the header's end */
    want = expected(&shards[0], "embed.weight", "5", "F16", true, &len);
    static const char *const across[] = {"Range: bytes=100-200", NULL};
    r = get_with(BASE "/versions/1/tensors/embed.weight?slice=5&dtype=F16&format=npy", across);
    CHECK_STATUS(r, 206);
    CHECK(want != NULL && r.body.len == 101 && memcmp(r.body.data, want + 100, 101) == 0);
    free(want);
    it_response_free(&r);
    /* unsatisfiable */
    static const char *const beyond[] = {"Range: bytes=999999999-", NULL};
    r = get_with(url, beyond);
    CHECK_PROBLEM(r, 416, "range_not_satisfiable");
    const char *content_range = it_header(&r, "Content-Range", value, sizeof value);
    CHECK(content_range != NULL && strncmp(content_range, "bytes */", 8) == 0);
    it_response_free(&r);
    /* a first-byte-pos past u64 is as unsatisfiable as one just past the end, on the
     * tensor route and the file route alike (the range parser is shared) */
    static const char *const huge[] = {"Range: bytes=99999999999999999999-", NULL};
    static const char *const largest[] = {"Range: bytes=18446744073709551615-", NULL};
    const char *const targets[] = {url, BASE "/versions/1/files/" SHARD1};
    for (size_t t = 0; t < 2; t++) {
        r = get_with(targets[t], huge);
        CHECK_PROBLEM(r, 416, "range_not_satisfiable");
        it_response_free(&r);
        r = get_with(targets[t], largest);
        CHECK_PROBLEM(r, 416, "range_not_satisfiable");
        it_response_free(&r);
    }
    /* validators: 304 for the same representation, not for another one */
    char inm[160];
    snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
    const char *const cond[] = {inm, NULL};
    r = get_with(url, cond);
    CHECK_STATUS(r, 304);
    it_response_free(&r);
    r = get_with(BASE "/versions/1/tensors/embed.weight?slice=::3,1::2&dtype=F16", cond);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    /* If-Range with another validator: the whole representation */
    const char *const stale[] = {"Range: bytes=0-9", "If-Range: \"0123\"", NULL};
    r = get_with(url, stale);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    char if_range[160];
    snprintf(if_range, sizeof if_range, "If-Range: %s", etag);
    const char *const fresh[] = {"Range: bytes=0-9", if_range, NULL};
    r = get_with(url, fresh);
    CHECK_STATUS(r, 206);
    CHECK_EQ_U64(r.body.len, 10);
    it_response_free(&r);
}

TEST(refusals)
{
    it_response r = it_get(BASE "/versions/1/tensors/missing.weight");
    CHECK_PROBLEM(r, 404, "tensor_not_found");
    it_response_free(&r);
    r = it_get(BASE "/versions/7/tensors/embed.weight");
    CHECK_PROBLEM(r, 404, "version_not_found");
    it_response_free(&r);
    r = it_get(BASE "/versions/1/tensors/embed.weight?slice=0,1024");
    CHECK_PROBLEM(r, 400, "slice_out_of_range");
    const char *detail = it_json_str(&r, "detail");
    CHECK(detail && strstr(detail, "dimension 1") && strstr(detail, "1024"));
    it_response_free(&r);
    r = it_get(BASE "/versions/1/tensors/embed.weight?slice=::0");
    CHECK_PROBLEM(r, 400, "invalid_slice");
    it_response_free(&r);
    r = it_get(BASE "/versions/1/tensors/embed.weight?slice=1%3A2%3A3%3A4");
    CHECK_PROBLEM(r, 400, "invalid_slice");
    it_response_free(&r);
    r = it_get(BASE "/versions/1/tensors/embed.weight?slice=0,0,0");
    CHECK_PROBLEM(r, 400, "invalid_slice");
    /* more indices than dimensions: said as such, with no made-up "dimension 2" */
    detail = it_json_str(&r, "detail");
    CHECK(detail && strstr(detail, "too many indices") && strstr(detail, "2 dimensions") &&
          strstr(detail, "3 were given") && !strstr(detail, "dimension 2"));
    it_response_free(&r);
    r = it_get(BASE "/versions/1/tensors/embed.weight?dtype=float32");
    CHECK_PROBLEM(r, 400, "invalid_dtype");
    it_response_free(&r);
    r = it_get(BASE "/versions/1/tensors/ids?dtype=F32");
    CHECK_PROBLEM(r, 422, "unsupported_conversion");
    it_response_free(&r);
    r = it_get(BASE "/versions/1/tensors/blocks%2F0%2Fattn.weight?format=npy");
    CHECK_PROBLEM(r, 406, "npy_unsupported_dtype");
    detail = it_json_str(&r, "detail");
    CHECK(detail && strstr(detail, "?dtype=F32"));
    it_response_free(&r);
    r = it_get(BASE "/versions/1/tensors/embed.weight?format=pickle");
    CHECK_PROBLEM(r, 400, "invalid_format");
    it_response_free(&r);
    /* the same tensor name in a draft without it */
    r = it_get(BASE "/versions/2/tensors/embed.weight");
    CHECK_PROBLEM(r, 404, "tensor_not_found");
    it_response_free(&r);
}

/* docs/MANUAL.md "Limits": the ?slice= text is read up to 4,096 bytes (at the limit it is
 * judged as a slice, one past it is 400 invalid_slice whatever it holds), and one
 * Range is honoured (two or more: the whole representation, 200). */
TEST(limits_at_and_past)
{
    char path[8192];
    int prefix = snprintf(path, sizeof path, BASE "/versions/1/tensors/embed.weight?slice=");
    /* "000...01:3": leading zeros make any length; 4,096 bytes in all */
    size_t text = 4096;
    memset(path + prefix, '0', text - 3);
    memcpy(path + prefix + text - 3, "1:3", 4);
    it_response r = it_get(path);
    CHECK_STATUS(r, 200);
    char h[64];
    CHECK_STR(it_header(&r, "X-Tensor-Shape", h, sizeof h), "[2,1024]");
    it_response_free(&r);
    memset(path + prefix, '0', text - 2);
    memcpy(path + prefix + text - 2, "1:3", 4); /* 4,097 bytes */
    r = it_get(path);
    CHECK_PROBLEM(r, 400, "invalid_slice");
    const char *detail = it_json_str(&r, "detail");
    CHECK(detail && strstr(detail, "4096"));
    it_response_free(&r);

    static const char *const one[] = {"Range: bytes=0-3", NULL};
    r = it_request("GET", BASE "/versions/1/tensors/embed.weight",
                   &(it_request_opts){.headers = one});
    CHECK_STATUS(r, 206);
    CHECK_EQ_U64(r.body.len, 4);
    it_response_free(&r);
    static const char *const two[] = {"Range: bytes=0-3,8-11", NULL};
    r = it_request("GET", BASE "/versions/1/tensors/embed.weight",
                   &(it_request_opts){.headers = two});
    CHECK_STATUS(r, 200);
    it_response whole = it_get(BASE "/versions/1/tensors/embed.weight");
    CHECK_EQ_U64(r.body.len, whole.body.len);
    it_response_free(&whole);
    it_response_free(&r);
}

/* Indexes that do not help (not a weight_map of strings, or naming the wrong shard)
 * leave the shards' headers to find the tensor; a second GET through the same index
 * blob (now cached) gives the same answer. */
TEST(unhelpful_indexes_fall_back_to_the_headers)
{
    it_response r = it_send_json("POST", BASE "/versions", write_token, "{}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send("PUT", BASE "/versions/3/files/a/model.safetensors", write_token, shards[2].bytes,
                shards[2].len);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    static const char bad_value[] = "{\"weight_map\":{\"only.weight\":5}}";
    static const char wrong_shard[] =
        "{\"weight_map\":{\"only.weight\":\"model-00009-of-00009.safetensors\"}}";
    r = it_send("PUT", BASE "/versions/3/files/a/model.safetensors.index.json", write_token,
                bad_value, strlen(bad_value));
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send("PUT", BASE "/versions/3/files/b/model.safetensors.index.json", write_token,
                wrong_shard, strlen(wrong_shard));
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    for (int round = 0; round < 2; round++) {
        char value[256];
        r = it_get(BASE "/versions/3/tensors/only.weight");
        CHECK_STATUS(r, 200);
        CHECK_STR(it_header(&r, "X-Tensor-File", value, sizeof value), "a/model.safetensors");
        it_response_free(&r);
        r = it_get(BASE "/versions/3/tensors/missing");
        CHECK_PROBLEM(r, 404, "tensor_not_found");
        it_response_free(&r);
        /* the published version's index, cached after the first GET */
        r = it_get(BASE "/versions/1/tensors/ids");
        CHECK_STATUS(r, 200);
        CHECK_STR(it_header(&r, "X-Tensor-File", value, sizeof value), SHARD2);
        it_response_free(&r);
    }
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    write_token = it_token("write", "acme");
    build_files();
    RUN(publish_a_sharded_version);
    RUN(list_every_tensor);
    RUN(list_pages);
    RUN(whole_tensors_and_headers);
    RUN(slices_conversions_npy);
    RUN(ranges_on_the_representation);
    RUN(refusals);
    RUN(limits_at_and_past);
    RUN(unhelpful_indexes_fall_back_to_the_headers);
    for (int i = 0; i < 3; i++) {
        st_file_free(&shards[i].file);
        free(shards[i].bytes);
    }
    return it_finish(argv[0]);
}
