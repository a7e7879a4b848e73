/* A failed SHA-256 is an error, never a digest: with TENSORGATE_TEST_SHA256_FAIL=WHAT:N
 * (common/sha256.h) the server's Nth OpenSSL call of the digests named WHAT fails, once.
 *  - publish: each of the version digest's calls (allocation, init, the one file's
 *    line, final) failing answers 500 internal and leaves the version a draft; the
 *    next publish freezes it with the digest of its manifest;
 *  - upload: the body's hash failing answers 500 internal and stores nothing (no blob,
 *    no file row); the same upload then succeeds. */
#include "harness.h"

static const char *write_token;
static it_buf file;
static char file_sha[65];

#define BASE "/v1/models/acme/digests"
#define PATH "model.safetensors"

static const it_tensor_spec tensors[] = {{"w", "F32", 2, {2, 2}}};

/* Restarts the server on the same data with TENSORGATE_TEST_SHA256_FAIL=spec. */
static bool restart_with(const char *spec)
{
    CHECK(it_server_stop() == 0);
    setenv("TENSORGATE_TEST_SHA256_FAIL", spec, 1);
    int started = it_server_start_args(NULL, NULL);
    unsetenv("TENSORGATE_TEST_SHA256_FAIL");
    CHECK(started == 0);
    if (started != 0)
        it_dump_log(it_srv.log);
    return started == 0;
}

static it_response upload(void)
{
    return it_send("PUT", BASE "/versions/1/files/" PATH, write_token, file.data, file.len);
}

TEST(failed_upload_digest_stores_nothing)
{
    it_response r = it_send_json("POST", "/v1/models", write_token, "{\"name\":\"acme/digests\"}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send("POST", BASE "/versions", write_token, NULL, 0);
    CHECK_STATUS(r, 201);
    it_response_free(&r);

    /* calls of an upload's digest: 1 allocation, 2 init, 3 the first update */
    for (int n = 1; n <= 3; n++) {
        char spec[32];
        snprintf(spec, sizeof spec, "upload:%d", n);
        if (!restart_with(spec))
            return;
        r = upload();
        CHECK_PROBLEM(r, 500, "internal");
        it_response_free(&r);
        CHECK(!it_blob_exists(file_sha));
        r = it_get(BASE "/versions/1/files");
        CHECK_STATUS(r, 200);
        CHECK_EQ_U64(json_array_size(json_object_get(r.json, "files")), 0);
        it_response_free(&r);
    }
    /* injected once: the same upload now succeeds */
    r = upload();
    CHECK_STATUS(r, 201);
    CHECK_STR(it_json_str(&r, "sha256"), file_sha);
    it_response_free(&r);
    CHECK(it_blob_exists(file_sha));
}

TEST(failed_version_digest_keeps_the_draft)
{
    /* the version digest's calls over one file: allocation, init, the line, final */
    for (int n = 1; n <= 4; n++) {
        char spec[32];
        snprintf(spec, sizeof spec, "manifest:%d", n);
        if (!restart_with(spec))
            return;
        it_response r = it_send("POST", BASE "/versions/1/publish", write_token, NULL, 0);
        CHECK_PROBLEM(r, 500, "internal");
        const char *detail = it_json_str(&r, "detail");
        CHECK(detail != NULL && strstr(detail, "digest") != NULL);
        it_response_free(&r);
        r = it_get(BASE "/versions/1");
        CHECK_STATUS(r, 200);
        CHECK_STR(it_json_str(&r, "state"), "draft");
        CHECK(json_is_null(json_object_get(r.json, "digest")));
        it_response_free(&r);
    }
    it_response r = it_send("POST", BASE "/versions/1/publish", write_token, NULL, 0);
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "state"), "published");
    /* the digest of the manifest: "path sha256 size\n" per file */
    char line[256], expected[65];
    int n = snprintf(line, sizeof line, "%s %s %zu\n", PATH, file_sha, file.len);
    it_sha256_hex(line, (size_t)n, expected);
    CHECK_STR(it_json_str(&r, "digest"), expected);
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    write_token = it_token("write", NULL);
    it_build_safetensors(&file, tensors, 1, NULL, 7);
    it_sha256_hex(file.data, file.len, file_sha);
    RUN(failed_upload_digest_stores_nothing);
    RUN(failed_version_digest_keeps_the_draft);
    it_buf_free(&file);
    return it_finish(argv[0]);
}
