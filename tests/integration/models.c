/* Publishing a sharded model and reading it back over real HTTP: list, header,
 * ranges, ETag/304, HEAD, aliases, publish rules (409, index_mismatch,
 * empty_version), one blob for identical content, restart keeps the catalog,
 * a newer catalog schema is refused. */
#include <pthread.h>
#include <sqlite3.h>

#include "harness.h"

static const char *write_token;
static const char *admin_token;

static it_buf shard1, shard2, index_json, config_json;
static char shard1_sha[65], shard2_sha[65];

static const it_tensor_spec shard1_tensors[] = {
    {"embed.weight", "F32", 2, {4, 2}},
    {"layers.0.weight", "F32", 2, {2, 2}},
};
static const it_tensor_spec shard2_tensors[] = {
    {"lm_head.weight", "F32", 2, {2, 4}},
    {"norm.weight", "F16", 1, {4}},
};

#define BASE "/v1/models/acme/tiny"
#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"
/* 4x2 + 2x2 F32 in shard 1, 2x4 F32 + 4 F16 in shard 2 */
#define TENSOR_BYTES (32 + 16 + 32 + 8)

static void build_files(void)
{
    it_build_safetensors(&shard1, shard1_tensors, 2, "{\"format\":\"pt\"}", 1);
    it_build_safetensors(&shard2, shard2_tensors, 2, NULL, 2);
    it_sha256_hex(shard1.data, shard1.len, shard1_sha);
    it_sha256_hex(shard2.data, shard2.len, shard2_sha);
    /* total_size counts tensor bytes (the data sections), as Hugging Face writes it */
    it_buf_printf(&index_json,
                  "{\"metadata\":{\"total_size\":%zu},\"weight_map\":{"
                  "\"embed.weight\":\"" SHARD1 "\",\"layers.0.weight\":\"" SHARD1 "\","
                  "\"lm_head.weight\":\"" SHARD2 "\",\"norm.weight\":\"" SHARD2 "\"}}",
                  (size_t)TENSOR_BYTES);
    it_buf_printf(&config_json, "{\"model_type\":\"tiny\",\"hidden_size\":2,\"vocab_size\":4}");
}

static it_response upload_to(const char *url, const it_buf *b)
{
    return it_send("PUT", url, write_token, b->data, b->len);
}

static it_response upload(const char *rev, const char *path, const it_buf *b)
{
    char url[512];
    snprintf(url, sizeof url, BASE "/versions/%s/files/%s", rev, path);
    return it_send("PUT", url, write_token, b->data, b->len);
}

TEST(publish_two_shard_model)
{
    it_response r = it_send_json("POST", "/v1/models", write_token,
                                 "{\"name\":\"acme/tiny\",\"description\":\"two shards\"}");
    CHECK_STATUS(r, 201);
    CHECK_STR(it_json_str(&r, "name"), "acme/tiny");
    it_response_free(&r);

    r = it_send_json("POST", "/v1/models", write_token, "{\"name\":\"acme/tiny\"}");
    CHECK_PROBLEM(r, 409, "model_exists");
    it_response_free(&r);

    r = it_send("POST", BASE "/versions", write_token, NULL, 0);
    CHECK_STATUS(r, 201);
    CHECK_EQ_U64(it_json_int(r.json, "version"), 1);
    CHECK_STR(it_json_str(&r, "state"), "draft");
    it_response_free(&r);

    r = upload("1", SHARD1, &shard1);
    CHECK_STATUS(r, 201);
    CHECK_STR(it_json_str(&r, "path"), SHARD1);
    CHECK_STR(it_json_str(&r, "kind"), "safetensors");
    CHECK_STR(it_json_str(&r, "sha256"), shard1_sha);
    CHECK_EQ_U64(it_json_int(r.json, "size"), shard1.len);
    CHECK_EQ_U64(it_json_int(r.json, "tensors"), 2);
    CHECK_EQ_U64(it_json_int(r.json, "parameters"), 12);
    CHECK_EQ_U64(it_json_int(r.json, "nan"), 0);
    CHECK_EQ_U64(it_json_int(r.json, "inf"), 0);
    it_response_free(&r);
    CHECK(it_blob_exists(shard1_sha));

    r = upload("1", SHARD2, &shard2);
    CHECK_STATUS(r, 201);
    CHECK_STR(it_json_str(&r, "sha256"), shard2_sha);
    CHECK_EQ_U64(it_json_int(r.json, "parameters"), 12);
    it_response_free(&r);

    r = upload("1", "model.safetensors.index.json", &index_json);
    CHECK_STATUS(r, 201);
    CHECK_STR(it_json_str(&r, "kind"), "json");
    it_response_free(&r);

    r = upload("1", "config.json", &config_json);
    CHECK_STATUS(r, 201);
    CHECK_STR(it_json_str(&r, "kind"), "json");
    it_response_free(&r);

    r = it_send("POST", BASE "/versions/1/publish", write_token, NULL, 0);
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "state"), "published");
    const char *digest = it_json_str(&r, "digest");
    CHECK(digest != NULL && strlen(digest) == 64 && strspn(digest, "0123456789abcdef") == 64);
    CHECK(json_is_string(json_object_get(r.json, "published_at")));
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "files")), 4);
    it_response_free(&r);
}

TEST(list_and_get)
{
    it_response r = it_get("/v1/models?q=tin");
    CHECK_STATUS(r, 200);
    json_t *models = json_object_get(r.json, "models");
    bool found = false;
    for (size_t i = 0; i < json_array_size(models); i++) {
        const char *n = json_string_value(json_object_get(json_array_get(models, i), "name"));
        if (n != NULL && strcmp(n, "acme/tiny") == 0)
            found = true;
    }
    CHECK(found);
    CHECK(json_object_get(r.json, "next_cursor") != NULL);
    it_response_free(&r);

    r = it_get("/v1/models?q=no-such-model-xyz");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "models")), 0);
    it_response_free(&r);

    r = it_get(BASE);
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "description"), "two shards");
    CHECK_EQ_U64(it_json_int(json_object_get(r.json, "aliases"), "latest"), 1);
    json_t *v0 = json_array_get(json_object_get(r.json, "versions"), 0);
    CHECK_EQ_U64(it_json_int(v0, "version"), 1);
    CHECK_STR(json_string_value(json_object_get(v0, "state")), "published");
    it_response_free(&r);

    r = it_get(BASE "/versions/1/files");
    CHECK_STATUS(r, 200);
    json_t *files = json_object_get(r.json, "files");
    CHECK_EQ_U64(json_array_size(files), 4);
    int shards_seen = 0;
    for (size_t i = 0; i < json_array_size(files); i++) {
        json_t *f = json_array_get(files, i);
        const char *p = json_string_value(json_object_get(f, "path"));
        const char *sha = json_string_value(json_object_get(f, "sha256"));
        if (p != NULL && strcmp(p, SHARD1) == 0) {
            CHECK_STR(sha, shard1_sha);
            shards_seen++;
        }
        if (p != NULL && strcmp(p, SHARD2) == 0) {
            CHECK_STR(sha, shard2_sha);
            shards_seen++;
        }
    }
    CHECK_EQ_U64(shards_seen, 2);
    it_response_free(&r);

    /* paging: one file per page, the cursor walks all four */
    int pages = 0;
    char url[512] = BASE "/versions/1/files?limit=1";
    while (pages < 10) {
        r = it_get(url);
        CHECK_STATUS(r, 200);
        CHECK_EQ_U64(json_array_size(json_object_get(r.json, "files")), 1);
        pages++;
        const char *next = json_string_value(json_object_get(r.json, "next_cursor"));
        if (next == NULL) {
            it_response_free(&r);
            break;
        }
        char *escaped = curl_easy_escape(NULL, next, 0);
        snprintf(url, sizeof url, BASE "/versions/1/files?limit=1&cursor=%s", escaped);
        curl_free(escaped);
        it_response_free(&r);
    }
    CHECK_EQ_U64(pages, 4);

    r = it_get(BASE "/versions/1");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "files")), 4);
    it_response_free(&r);

    r = it_get("/v1/models/acme/nope");
    CHECK_PROBLEM(r, 404, "model_not_found");
    it_response_free(&r);
    r = it_get(BASE "/versions/99");
    CHECK_PROBLEM(r, 404, "version_not_found");
    it_response_free(&r);
    r = it_get(BASE "/versions/1/files/nope.safetensors");
    CHECK_PROBLEM(r, 404, "file_not_found");
    it_response_free(&r);
    r = it_get(BASE "/versions/stable");
    CHECK_STATUS(r, 404);
    it_response_free(&r);
}

TEST(header_route)
{
    it_response r = it_get(BASE "/versions/1/files/" SHARD1 "/header");
    CHECK_STATUS(r, 200);
    uint64_t n = it_header_len(&shard1);
    CHECK_STR(it_json_str(&r, "sha256"), shard1_sha);
    CHECK_EQ_U64(it_json_int(r.json, "size"), shard1.len);
    CHECK_EQ_U64(it_json_int(r.json, "header_size"), n);
    CHECK_EQ_U64(it_json_int(r.json, "data_start"), 8 + n);
    CHECK_STR(json_string_value(json_object_get(json_object_get(r.json, "metadata"), "format")),
              "pt");
    json_t *tensors = json_object_get(r.json, "tensors");
    CHECK_EQ_U64(json_array_size(tensors), 2);
    /* absolute offsets: embed.weight is first in the data section (32 bytes) */
    for (size_t i = 0; i < json_array_size(tensors); i++) {
        json_t *t = json_array_get(tensors, i);
        const char *name = json_string_value(json_object_get(t, "name"));
        json_t *off = json_object_get(t, "data_offsets");
        uint64_t b = (uint64_t)json_integer_value(json_array_get(off, 0));
        uint64_t e = (uint64_t)json_integer_value(json_array_get(off, 1));
        if (name != NULL && strcmp(name, "embed.weight") == 0) {
            CHECK_EQ_U64(b, 8 + n);
            CHECK_EQ_U64(e, 8 + n + 32);
            CHECK_STR(json_string_value(json_object_get(t, "dtype")), "F32");
            CHECK_EQ_U64(json_array_size(json_object_get(t, "shape")), 2);
        } else {
            CHECK_STR(name, "layers.0.weight");
            CHECK_EQ_U64(b, 8 + n + 32);
            CHECK_EQ_U64(e, 8 + n + 48);
        }
    }
    CHECK_EQ_U64(it_json_int(json_object_get(r.json, "parameters"), "F32"), 12);
    CHECK_EQ_U64(it_json_int(r.json, "parameters_total"), 12);
    CHECK_EQ_U64(it_json_int(r.json, "nan_total"), 0);
    it_response_free(&r);

    r = it_get(BASE "/versions/1/files/" SHARD2 "/header");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(it_json_int(json_object_get(r.json, "parameters"), "F16"), 4);
    CHECK_EQ_U64(it_json_int(json_object_get(r.json, "parameters"), "F32"), 8);
    it_response_free(&r);

    r = it_get(BASE "/versions/1/files/config.json/header");
    CHECK_PROBLEM(r, 404, "not_safetensors");
    it_response_free(&r);
}

static it_response get_range(const char *path, const char *range)
{
    char hdr[128];
    snprintf(hdr, sizeof hdr, "Range: %s", range);
    const char *headers[] = {hdr, NULL};
    it_request_opts o;
    memset(&o, 0, sizeof o);
    o.headers = headers;
    return it_request("GET", path, &o);
}

TEST(ranges_etag_head)
{
    const char *url = BASE "/versions/1/files/" SHARD1;
    char h[256], want[256];

    it_response r = it_get(url);
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(r.body.len, shard1.len);
    CHECK(r.body.len == shard1.len && memcmp(r.body.data, shard1.data, shard1.len) == 0);
    snprintf(want, sizeof want, "\"%s\"", shard1_sha);
    CHECK_STR(it_header(&r, "ETag", h, sizeof h), want);
    CHECK_STR(it_header(&r, "Accept-Ranges", h, sizeof h), "bytes");
    it_response_free(&r);

    /* one tensor's bytes by its absolute offsets */
    uint64_t ds = 8 + it_header_len(&shard1);
    char range[64];
    snprintf(range, sizeof range, "bytes=%llu-%llu", (unsigned long long)ds,
             (unsigned long long)(ds + 31));
    r = get_range(url, range);
    CHECK_STATUS(r, 206);
    CHECK_EQ_U64(r.body.len, 32);
    CHECK(r.body.len == 32 && memcmp(r.body.data, shard1.data + ds, 32) == 0);
    snprintf(want, sizeof want, "bytes %llu-%llu/%zu", (unsigned long long)ds,
             (unsigned long long)(ds + 31), shard1.len);
    CHECK_STR(it_header(&r, "Content-Range", h, sizeof h), want);
    it_response_free(&r);

    /* suffix range: the last 5 bytes */
    r = get_range(url, "bytes=-5");
    CHECK_STATUS(r, 206);
    CHECK(r.body.len == 5 && memcmp(r.body.data, shard1.data + shard1.len - 5, 5) == 0);
    it_response_free(&r);

    /* open range from 10 */
    r = get_range(url, "bytes=10-");
    CHECK_STATUS(r, 206);
    CHECK(r.body.len == shard1.len - 10 &&
          memcmp(r.body.data, shard1.data + 10, shard1.len - 10) == 0);
    it_response_free(&r);

    /* end past the file is clamped to the last byte */
    snprintf(range, sizeof range, "bytes=0-%zu", shard1.len + 1000);
    r = get_range(url, range);
    CHECK_STATUS(r, 206);
    CHECK_EQ_U64(r.body.len, shard1.len);
    it_response_free(&r);

    /* unsatisfiable: starts at the size */
    snprintf(range, sizeof range, "bytes=%zu-", shard1.len);
    r = get_range(url, range);
    CHECK_STATUS(r, 416);
    snprintf(want, sizeof want, "bytes */%zu", shard1.len);
    CHECK_STR(it_header(&r, "Content-Range", h, sizeof h), want);
    CHECK_STR(it_reason(&r), "range_not_satisfiable");
    it_response_free(&r);

    /* multi-range: the whole body, 200 (documented) */
    r = get_range(url, "bytes=0-1,4-5");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(r.body.len, shard1.len);
    it_response_free(&r);

    /* HEAD: the size, the ETag, no body */
    r = it_request("HEAD", url, NULL);
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(r.body.len, 0);
    snprintf(want, sizeof want, "%zu", shard1.len);
    CHECK_STR(it_header(&r, "Content-Length", h, sizeof h), want);
    snprintf(want, sizeof want, "\"%s\"", shard1_sha);
    CHECK_STR(it_header(&r, "ETag", h, sizeof h), want);
    it_response_free(&r);

    /* If-None-Match with the ETag: 304, with another: 200 */
    char inm[200];
    snprintf(inm, sizeof inm, "If-None-Match: \"%s\"", shard1_sha);
    const char *hdrs[] = {inm, NULL};
    it_request_opts o;
    memset(&o, 0, sizeof o);
    o.headers = hdrs;
    r = it_request("GET", url, &o);
    CHECK_STATUS(r, 304);
    CHECK_EQ_U64(r.body.len, 0);
    it_response_free(&r);
    const char *other[] = {"If-None-Match: \"0000\"", NULL};
    o.headers = other;
    r = it_request("GET", url, &o);
    CHECK_STATUS(r, 200);
    it_response_free(&r);

    /* the same bytes through `latest` and through the digest */
    r = it_get(BASE "/versions/1");
    char digest[65] = "";
    if (it_json_str(&r, "digest") != NULL)
        snprintf(digest, sizeof digest, "%s", it_json_str(&r, "digest"));
    it_response_free(&r);
    r = it_get(BASE "/versions/latest/files/" SHARD2);
    CHECK_STATUS(r, 200);
    CHECK(r.body.len == shard2.len && memcmp(r.body.data, shard2.data, shard2.len) == 0);
    it_response_free(&r);
    char durl[300];
    snprintf(durl, sizeof durl, BASE "/versions/%s/files/" SHARD2, digest);
    r = it_get(durl);
    CHECK_STATUS(r, 200);
    CHECK(r.body.len == shard2.len && memcmp(r.body.data, shard2.data, shard2.len) == 0);
    it_response_free(&r);
}

TEST(published_is_frozen)
{
    it_response r = upload("1", "extra.json", &config_json);
    CHECK_PROBLEM(r, 409, "version_published");
    it_response_free(&r);
    r = it_send("DELETE", BASE "/versions/1/files/config.json", write_token, NULL, 0);
    CHECK_PROBLEM(r, 409, "version_published");
    it_response_free(&r);
    r = it_send("POST", BASE "/versions/1/publish", write_token, NULL, 0);
    CHECK_PROBLEM(r, 409, "version_published");
    it_response_free(&r);
    r = it_get(BASE "/versions/1/files");
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "files")), 4);
    it_response_free(&r);
}

TEST(aliases)
{
    it_response r = it_send_json("PUT", BASE "/aliases/stable", write_token, "{\"version\":1}");
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "alias"), "stable");
    CHECK_EQ_U64(it_json_int(r.json, "version"), 1);
    it_response_free(&r);

    static const char *const reserved[] = {"latest", "LATEST", "main", "Main", "HEAD", "head"};
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
        char url[256];
        snprintf(url, sizeof url, BASE "/aliases/%s", reserved[i]);
        r = it_send_json("PUT", url, write_token, "{\"version\":1}");
        CHECK_PROBLEM(r, 400, "reserved_alias");
        it_response_free(&r);
    }

    r = it_get(BASE "/versions/stable/files/" SHARD1);
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(r.body.len, shard1.len);
    it_response_free(&r);

    r = it_get(BASE);
    CHECK_EQ_U64(it_json_int(json_object_get(r.json, "aliases"), "stable"), 1);
    it_response_free(&r);

    r = it_send_json("PUT", BASE "/aliases/stable", write_token, "{\"version\":");
    CHECK_PROBLEM(r, 400, "invalid_json");
    it_response_free(&r);
}

TEST(identical_content_stored_once)
{
    int blobs_before = it_count_blobs();
    CHECK_EQ_U64(blobs_before, 4);
    it_response r = it_send("POST", BASE "/versions", write_token, NULL, 0);
    CHECK_STATUS(r, 201);
    CHECK_EQ_U64(it_json_int(r.json, "version"), 2);
    it_response_free(&r);
    r = upload("2", SHARD1, &shard1);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    /* same bytes under another path too */
    r = upload("2", "copy/model.safetensors", &shard1);
    CHECK_STATUS(r, 201);
    CHECK_STR(it_json_str(&r, "path"), "copy/model.safetensors");
    it_response_free(&r);
    CHECK_EQ_U64(it_count_blobs(), blobs_before);

    r = it_send("POST", BASE "/versions/2/publish", write_token, NULL, 0);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    r = it_get(BASE);
    CHECK_EQ_U64(it_json_int(json_object_get(r.json, "aliases"), "latest"), 2);
    it_response_free(&r);
    r = it_get(BASE "/versions/2/files/copy/model.safetensors");
    CHECK_STATUS(r, 200);
    CHECK(r.body.len == shard1.len && memcmp(r.body.data, shard1.data, shard1.len) == 0);
    it_response_free(&r);
}

TEST(publish_checks)
{
    /* version 3: the index maps lm_head.weight to the shard that lacks it */
    it_response r = it_send("POST", BASE "/versions", write_token, NULL, 0);
    CHECK_STATUS(r, 201);
    CHECK_EQ_U64(it_json_int(r.json, "version"), 3);
    it_response_free(&r);
    it_buf bad_index = {0};
    it_buf_printf(&bad_index, "{\"metadata\":{\"total_size\":88},\"weight_map\":{"
                              "\"embed.weight\":\"" SHARD1 "\",\"layers.0.weight\":\"" SHARD1 "\","
                              "\"lm_head.weight\":\"" SHARD1 "\",\"norm.weight\":\"" SHARD2 "\"}}");
    r = upload("3", SHARD1, &shard1);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = upload("3", SHARD2, &shard2);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = upload("3", "model.safetensors.index.json", &bad_index);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send("POST", BASE "/versions/3/publish", write_token, NULL, 0);
    CHECK_PROBLEM(r, 422, "index_mismatch");
    const char *detail = it_json_str(&r, "detail");
    CHECK(detail != NULL && strstr(detail, "lm_head.weight") != NULL);
    it_response_free(&r);
    r = it_get(BASE "/versions/3");
    CHECK_STR(it_json_str(&r, "state"), "draft");
    it_response_free(&r);

    /* an index that forgets a shard tensor is refused too */
    it_buf short_index = {0};
    it_buf_printf(&short_index, "{\"metadata\":{\"total_size\":88},\"weight_map\":{"
                                "\"embed.weight\":\"" SHARD1 "\",\"layers.0.weight\":\"" SHARD1
                                "\",\"lm_head.weight\":\"" SHARD2 "\"}}");
    r = upload("3", "model.safetensors.index.json", &short_index);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send("POST", BASE "/versions/3/publish", write_token, NULL, 0);
    CHECK_PROBLEM(r, 422, "index_mismatch");
    it_response_free(&r);

    /* replacing the index with the right one lets it publish */
    r = upload("3", "model.safetensors.index.json", &index_json);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_get(BASE "/versions/3/files");
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "files")), 3);
    it_response_free(&r);
    r = it_send("POST", BASE "/versions/3/publish", write_token, NULL, 0);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    it_buf_free(&bad_index);
    it_buf_free(&short_index);

    /* version 4: nothing in it */
    r = it_send("POST", BASE "/versions", write_token, NULL, 0);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send("POST", BASE "/versions/4/publish", write_token, NULL, 0);
    CHECK_PROBLEM(r, 422, "empty_version");
    it_response_free(&r);

    /* an alias can only point at a published version */
    r = it_send_json("PUT", BASE "/aliases/next", write_token, "{\"version\":4}");
    CHECK_PROBLEM(r, 409, "version_not_published");
    it_response_free(&r);

    /* a draft's file can be deleted */
    r = upload("4", "config.json", &config_json);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send("DELETE", BASE "/versions/4/files/config.json", write_token, NULL, 0);
    CHECK_STATUS(r, 204);
    it_response_free(&r);
    r = it_get(BASE "/versions/4/files/config.json");
    CHECK_PROBLEM(r, 404, "file_not_found");
    it_response_free(&r);
}

TEST(restart_keeps_catalog)
{
    int status = it_server_stop();
    CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(it_server_start_args(NULL, NULL) == 0);

    it_response r = it_get(BASE);
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "versions")), 4);
    CHECK_EQ_U64(it_json_int(json_object_get(r.json, "aliases"), "latest"), 3);
    CHECK_EQ_U64(it_json_int(json_object_get(r.json, "aliases"), "stable"), 1);
    it_response_free(&r);
    r = it_get(BASE "/versions/1/files/" SHARD2);
    CHECK_STATUS(r, 200);
    CHECK(r.body.len == shard2.len && memcmp(r.body.data, shard2.data, shard2.len) == 0);
    it_response_free(&r);
    r = it_get(BASE "/versions/1/files/" SHARD1 "/header");
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "sha256"), shard1_sha);
    it_response_free(&r);
}

/* gc beside a running server. The server is restarted with its commit widened
 * (TENSORGATE_TEST_COMMIT_DELAY_MS) and a file is uploaded whose blob is already
 * there, unreferenced (left by a crash): the store keeps the blob, then adds
 * the row. gc runs inside that gap. Commits and gc exclude each other
 * (blobs.lock), so gc waits and then sees the blob referenced; without the lock
 * it would remove the blob under the new row. gc must also leave tmp/ alone. */
static const char notes_text[] = "notes that only this test uploads\n";

static void *upload_notes(void *arg)
{
    const char *url = arg;
    it_response r = it_send("PUT", url, write_token, notes_text, sizeof notes_text - 1);
    long status = r.status;
    it_response_free(&r);
    return (void *)status;
}

TEST(gc_beside_a_running_server)
{
    CHECK(it_server_stop() == 0);
    setenv("TENSORGATE_TEST_COMMIT_DELAY_MS", "800", 1);
    CHECK(it_server_start_args(NULL, NULL) == 0);
    unsetenv("TENSORGATE_TEST_COMMIT_DELAY_MS");
    it_response r = it_send("POST", BASE "/versions", write_token, NULL, 0);
    CHECK_STATUS(r, 201);
    char url[512];
    snprintf(url, sizeof url, BASE "/versions/%lld/files/notes.txt",
             (long long)it_json_int(r.json, "version"));
    it_response_free(&r);
    /* the blob is already in the store with no row: what a crash between a blob's
     * commit and its row, or a deleted model, leaves behind */
    char hex[65], blob_dir[512], blob[700];
    it_sha256_hex(notes_text, sizeof notes_text - 1, hex);
    snprintf(blob_dir, sizeof blob_dir, "%s/blobs/sha256/%.2s", it_srv.data, hex);
    mkdir(blob_dir, 0755);
    snprintf(blob, sizeof blob, "%s/%s", blob_dir, hex);
    FILE *f = fopen(blob, "wb");
    CHECK(f != NULL && fwrite(notes_text, 1, sizeof notes_text - 1, f) == sizeof notes_text - 1);
    if (f != NULL)
        fclose(f);
    /* an upload in flight, as the server's tmp/ holds it */
    char in_flight[512];
    snprintf(in_flight, sizeof in_flight, "%s/tmp/upload-inflight", it_srv.data);
    close(open(in_flight, O_CREAT | O_WRONLY, 0600));

    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, upload_notes, url) == 0);
    usleep(300 * 1000); /* the upload is inside its 800 ms gap */
    char command[1200];
    snprintf(command, sizeof command, "'%s' gc --data '%s' >/dev/null 2>&1", it_binary,
             it_srv.data);
    CHECK(system(command) == 0);
    void *status = NULL;
    pthread_join(thread, &status);
    CHECK_EQ_U64((long)status, 201);
    CHECK(access(in_flight, F_OK) == 0);
    unlink(in_flight);
    r = it_get(url);
    CHECK_STATUS(r, 200);
    CHECK(r.body.len == sizeof notes_text - 1 &&
          memcmp(r.body.data, notes_text, sizeof notes_text - 1) == 0);
    it_response_free(&r);
    CHECK(it_server_stop() == 0);
    CHECK(it_server_start_args(NULL, NULL) == 0);
}

/* A draft's file that is replaced or deleted gives its blob back at once when no
 * other row uses it; content another file still uses stays. */
TEST(replaced_content_reclaimed)
{
    it_response r = it_send("POST", BASE "/versions", write_token, NULL, 0);
    CHECK_STATUS(r, 201);
    char base[256];
    snprintf(base, sizeof base, BASE "/versions/%lld/files",
             (long long)it_json_int(r.json, "version"));
    it_response_free(&r);
    char url[512], shared_url[512];
    snprintf(url, sizeof url, "%s/readme.txt", base);
    snprintf(shared_url, sizeof shared_url, "%s/" SHARD1, base);
    int blobs = it_count_blobs();
    static const char *const texts[] = {"first draft text\n", "second draft text\n", "third\n"};
    for (size_t i = 0; i < 3; i++) {
        r = it_send("PUT", url, write_token, texts[i], strlen(texts[i]));
        CHECK_STATUS(r, 201);
        it_response_free(&r);
        CHECK_EQ_U64(it_count_blobs(), blobs + 1); /* the replaced text is gone */
    }
    r = it_send("DELETE", url, write_token, NULL, 0);
    CHECK_STATUS(r, 204);
    it_response_free(&r);
    CHECK_EQ_U64(it_count_blobs(), blobs);
    /* shard 1's bytes are version 1's too: deleting this copy keeps the blob */
    r = upload_to(shared_url, &shard1);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send("DELETE", shared_url, write_token, NULL, 0);
    CHECK_STATUS(r, 204);
    it_response_free(&r);
    CHECK_EQ_U64(it_count_blobs(), blobs);
    r = it_get(BASE "/versions/1/files/" SHARD1);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
}

/* One server per data directory: a second one is refused at once and says why. */
TEST(second_server_refused)
{
    char command[1200];
    snprintf(command, sizeof command,
             "'%s' serve --listen 127.0.0.1:0 --data '%s' 2>&1 | grep -q 'another tensorgate serve "
             "is using the data directory'",
             it_binary, it_srv.data);
    CHECK(system(command) == 0);
    snprintf(command, sizeof command, "'%s' serve --listen 127.0.0.1:0 --data '%s' 2>/dev/null",
             it_binary, it_srv.data);
    int status = system(command);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    /* the first one still serves */
    it_response r = it_get("/healthz");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
}

TEST(delete_model)
{
    it_response r = it_send("DELETE", BASE, write_token, NULL, 0);
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_send("DELETE", BASE, admin_token, NULL, 0);
    CHECK_STATUS(r, 204);
    it_response_free(&r);
    r = it_get(BASE);
    CHECK_PROBLEM(r, 404, "model_not_found");
    it_response_free(&r);
}

/* Bumps the catalog's schema version past what the binary knows, by both the
 * SQLite user_version and, when present, a migrations bookkeeping table. */
static int bump_schema(const char *db_path)
{
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return -1;
    }
    int rc = sqlite3_exec(db, "PRAGMA user_version = 9999;", NULL, NULL, NULL);
    /* a table of applied migrations, whatever its name, gets a far-future row */
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT name FROM sqlite_master WHERE type='table' AND "
                           "(name LIKE '%migration%' OR name LIKE '%schema%')",
                           -1, &st, NULL) == SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW) {
            char sql[400];
            const char *table = (const char *)sqlite3_column_text(st, 0);
            snprintf(sql, sizeof sql,
                     "INSERT INTO \"%s\" (version, applied_at) VALUES (9999, '2099-01-01')", table);
            if (sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK)
                continue;
            snprintf(sql, sizeof sql, "INSERT INTO \"%s\" (version) VALUES (9999)", table);
            if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
                fprintf(stderr, "note: could not add a row to %s: %s\n", sqlite3_column_text(st, 0),
                        sqlite3_errmsg(db));
        }
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return rc == SQLITE_OK ? 0 : -1;
}

TEST(newer_schema_refused)
{
    int status = it_server_stop();
    CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char db[400];
    snprintf(db, sizeof db, "%s/catalog.db", it_srv.data);
    CHECK(bump_schema(db) == 0);
    int exit_status = 0;
    int started = it_server_start_args(NULL, &exit_status);
    CHECK(started != 0);
    CHECK(exit_status != -1 && WIFEXITED(exit_status) && WEXITSTATUS(exit_status) != 0);
    if (started == 0) {
        it_server_stop();
    } else {
        /* the refusal names the schema in the log */
        FILE *f = fopen(it_srv.log, "r");
        char text[4096] = "";
        if (f != NULL) {
            size_t n = fread(text, 1, sizeof text - 1, f);
            text[n] = '\0';
            fclose(f);
        }
        CHECK(strstr(text, "schema") != NULL || strstr(text, "version") != NULL);
    }
    /* restart on a fresh directory so it_finish has a server to stop */
    snprintf(it_srv.data, sizeof it_srv.data, "%s/data2", it_srv.root);
    CHECK(it_server_start_args(NULL, NULL) == 0);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    write_token = it_token("write", "acme");
    admin_token = it_token("admin", NULL);
    build_files();
    RUN(publish_two_shard_model);
    RUN(list_and_get);
    RUN(header_route);
    RUN(ranges_etag_head);
    RUN(published_is_frozen);
    RUN(aliases);
    RUN(identical_content_stored_once);
    RUN(publish_checks);
    RUN(restart_keeps_catalog);
    RUN(gc_beside_a_running_server);
    RUN(replaced_content_reclaimed);
    RUN(second_server_refused);
    RUN(delete_model);
    RUN(newer_schema_refused);
    it_buf_free(&shard1);
    it_buf_free(&shard2);
    it_buf_free(&index_json);
    it_buf_free(&config_json);
    return it_finish(argv[0]);
}
