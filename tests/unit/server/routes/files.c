/* server/routes/files.c, black-box: GET .../versions/{rev}/files, GET, HEAD and
 * DELETE .../files/{path}, GET .../files/{path}/header, GET .../card against the real server
 * through the integration harness (tests/integration/harness.h), one server for
 * the program. Each route's main success path, and refusals with the status and
 * reason openapi.yaml names. */
#include "harness.h"

#define V1 "/v1/models/acme/files/versions/1"
#define V2 "/v1/models/acme/files/versions/2"

static const char *write_acme;
static it_buf file;
static char sha[65];

TEST(list_files)
{
    it_response r = it_get(V1 "/files");
    CHECK_STATUS(r, 200);
    json_t *files = json_object_get(r.json, "files");
    CHECK_EQ_U64(json_array_size(files), 2);
    json_t *first = json_array_get(files, 0);
    CHECK_STR(json_string_value(json_object_get(first, "path")), "config.json");
    CHECK_STR(json_string_value(json_object_get(json_array_get(files, 1), "sha256")), sha);
    it_response_free(&r);
    r = it_get(V1 "/files?limit=1");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "files")), 1);
    it_response_free(&r);
    r = it_get("/v1/models/acme/files/versions/9/files");
    CHECK_PROBLEM(r, 404, "version_not_found");
    it_response_free(&r);
}

TEST(download_file)
{
    it_response r = it_get(V1 "/files/model.safetensors");
    CHECK_STATUS(r, 200);
    CHECK(r.body.len == file.len && memcmp(r.body.data, file.data, file.len) == 0);
    char etag[128], want[80];
    snprintf(want, sizeof want, "\"%s\"", sha);
    it_header(&r, "ETag", etag, sizeof etag);
    CHECK_STR(etag, want);
    it_response_free(&r);
    /* one range */
    static const char *const range[] = {"Range: bytes=0-7", NULL};
    r = it_request("GET", V1 "/files/model.safetensors", &(it_request_opts){.headers = range});
    CHECK_STATUS(r, 206);
    CHECK(r.body.len == 8 && memcmp(r.body.data, file.data, 8) == 0);
    it_response_free(&r);
    /* If-None-Match with the ETag */
    char inm[128];
    snprintf(inm, sizeof inm, "If-None-Match: %s", want);
    const char *const cond[] = {inm, NULL};
    r = it_request("GET", V1 "/files/model.safetensors", &(it_request_opts){.headers = cond});
    CHECK_STATUS(r, 304);
    it_response_free(&r);
    static const char *const past[] = {"Range: bytes=100000-", NULL};
    r = it_request("GET", V1 "/files/model.safetensors", &(it_request_opts){.headers = past});
    CHECK_PROBLEM(r, 416, "range_not_satisfiable");
    it_response_free(&r);
    r = it_get(V1 "/files/missing.safetensors");
    CHECK_PROBLEM(r, 404, "file_not_found");
    it_response_free(&r);
}

TEST(head_file)
{
    it_response r = it_request("HEAD", V1 "/files/model.safetensors", NULL);
    CHECK_STATUS(r, 200);
    char length[32], want[32];
    snprintf(want, sizeof want, "%zu", file.len);
    it_header(&r, "Content-Length", length, sizeof length);
    CHECK_STR(length, want);
    CHECK_EQ_U64(r.body.len, 0);
    it_response_free(&r);
    r = it_request("HEAD", V1 "/files/missing.safetensors", NULL);
    CHECK_STATUS(r, 404);
    CHECK_EQ_U64(r.body.len, 0);
    it_response_free(&r);
}

TEST(file_header)
{
    it_response r = it_get(V1 "/files/model.safetensors/header");
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "path"), "model.safetensors");
    CHECK_STR(it_json_str(&r, "sha256"), sha);
    CHECK_EQ_U64(it_json_int(r.json, "data_start"), 8 + it_header_len(&file));
    json_t *tensors = json_object_get(r.json, "tensors");
    CHECK_EQ_U64(json_array_size(tensors), 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(tensors, 0), "name")), "w");
    it_response_free(&r);
    /* a sidecar has no safetensors header */
    r = it_get(V1 "/files/config.json/header");
    CHECK_PROBLEM(r, 404, "not_safetensors");
    it_response_free(&r);
}

TEST(delete_file)
{
    CHECK_EQ_U64(it_make_version(write_acme, "acme/files", "model.safetensors", &file, false), 2);
    it_response r = it_send("DELETE", V2 "/files/model.safetensors", write_acme, NULL, 0);
    CHECK_STATUS(r, 204);
    it_response_free(&r);
    r = it_get(V2 "/files/model.safetensors");
    CHECK_PROBLEM(r, 404, "file_not_found");
    it_response_free(&r);
    /* a published version keeps its files */
    r = it_send("DELETE", V1 "/files/model.safetensors", write_acme, NULL, 0);
    CHECK_PROBLEM(r, 409, "version_published");
    it_response_free(&r);
    r = it_send("DELETE", V1 "/files/model.safetensors", NULL, NULL, 0);
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
}

/* GET .../card: README.md as safe HTML and its front matter as JSON (after delete_file:
 * version 2 is a draft) */
TEST(card)
{
    it_response r = it_get(V1 "/card");
    CHECK_PROBLEM(r, 404, "file_not_found");
    it_response_free(&r);
    static const char readme[] = "---\nlicense: mit\ntags: [a, b]\n---\n# Title\n\n"
                                 "<script>alert(1)</script>\n\n[x](javascript:alert(1)) *em*\n";
    r = it_send("PUT", V2 "/files/README.md", write_acme, readme, strlen(readme));
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_get(V2 "/card");
    CHECK_STATUS(r, 200);
    const char *html = it_json_str(&r, "html");
    CHECK(html != NULL && strstr(html, "<h1>Title</h1>") != NULL && strstr(html, "<em>em</em>"));
    CHECK(html != NULL && strstr(html, "<script") == NULL && strstr(html, "javascript:") == NULL &&
          strstr(html, "license") == NULL);
    json_t *data = json_object_get(r.json, "card_data");
    CHECK_STR(json_string_value(json_object_get(data, "license")), "mit");
    CHECK_EQ_U64(json_array_size(json_object_get(data, "tags")), 2);
    CHECK(json_is_false(json_object_get(r.json, "truncated")));
    CHECK_EQ_U64(it_json_int(r.json, "size"), strlen(readme));
    it_response_free(&r);
    /* past TG_CARD_MAX (128 KiB): the start is rendered, marked truncated */
    size_t big = 200 * 1024;
    char *text = malloc(big);
    CHECK(text != NULL);
    if (text != NULL) {
        for (size_t i = 0; i < big; i++)
            text[i] = i % 64 == 63 ? '\n' : 'x';
        r = it_send("PUT", V2 "/files/README.md", write_acme, text, big);
        CHECK_STATUS(r, 201);
        it_response_free(&r);
        free(text);
        r = it_get(V2 "/card");
        CHECK_STATUS(r, 200);
        CHECK(json_is_true(json_object_get(r.json, "truncated")));
        CHECK(json_is_null(json_object_get(r.json, "card_data")));
        it_response_free(&r);
    }
    r = it_get("/v1/models/acme/files/versions/9/card");
    CHECK_PROBLEM(r, 404, "version_not_found");
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    write_acme = it_token("write", "acme");
    it_tensor_spec t = {"w", "F32", 2, {2, 3}};
    it_build_safetensors(&file, &t, 1, NULL, 3);
    it_sha256_hex(file.data, file.len, sha);
    /* version 1: model.safetensors and config.json, published */
    bool ready = it_make_version(write_acme, "acme/files", "model.safetensors", &file, false) == 1;
    static const char config[] = "{\"model_type\":\"unit\"}";
    it_response r = it_send("PUT", V1 "/files/config.json", write_acme, config, strlen(config));
    ready = ready && r.status == 201;
    it_response_free(&r);
    r = it_send("POST", V1 "/publish", write_acme, NULL, 0);
    ready = ready && r.status == 200;
    it_response_free(&r);
    CHECK(ready);
    RUN(list_files);
    RUN(download_file);
    RUN(head_file);
    RUN(file_header);
    RUN(delete_file);
    RUN(card);
    it_buf_free(&file);
    return it_finish(argv[0]);
}
