/* server/routes/import.c, black-box: POST .../versions/{rev}/files/{path}/import
 * against the real server through the integration harness, started with
 * --import-allow 127.0.0.1/32. The success path imports the server's own published
 * file (its file route, over loopback) into a draft: 202 with the job and its
 * Location, the job done, the file with the same SHA-256 and its source_url. Then
 * the refusals with the status and reason openapi.yaml names. */
#include "harness.h"

#define MODEL "/v1/models/acme/imp"

static const char *write_acme, *read_acme, *write_other;
static char source_sha[65];

static void wait_done(const char *location, char *state, size_t cap, char *reason, size_t rcap)
{
    snprintf(state, cap, "(none)");
    snprintf(reason, rcap, "%s", "");
    for (int i = 0; i < 1000; i++) {
        it_response r = it_get(location);
        const char *s = it_json_str(&r, "state");
        snprintf(state, cap, "%s", s ? s : "(none)");
        json_t *error = r.json ? json_object_get(r.json, "error") : NULL;
        const char *why = json_string_value(json_object_get(error, "reason"));
        snprintf(reason, rcap, "%s", why ? why : "");
        it_response_free(&r);
        if (strcmp(state, "done") == 0 || strcmp(state, "failed") == 0)
            return;
        usleep(20 * 1000);
    }
}

TEST(import_file)
{
    char body[512];
    snprintf(body, sizeof body, "{\"url\":\"%s" MODEL "/versions/1/files/model.safetensors\"}",
             it_srv.base);
    it_response r =
        it_send_json("POST", MODEL "/versions/2/files/copy.safetensors/import", write_acme, body);
    CHECK_STATUS(r, 202);
    CHECK_STR(it_json_str(&r, "kind"), "import");
    CHECK_STR(it_json_str(&r, "path"), "copy.safetensors");
    char location[128] = "", want[128];
    it_header(&r, "Location", location, sizeof location);
    snprintf(want, sizeof want, "/v1/jobs/%lld", it_json_int(r.json, "id"));
    CHECK_STR(location, want);
    it_response_free(&r);
    char state[32], reason[64];
    wait_done(location, state, sizeof state, reason, sizeof reason);
    CHECK_STR(state, "done");
    r = it_get(MODEL "/versions/2/files/copy.safetensors/header");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    r = it_get(MODEL "/versions/2/files");
    CHECK_STATUS(r, 200);
    json_t *files = json_object_get(r.json, "files");
    bool found = false;
    for (size_t i = 0; i < json_array_size(files); i++) {
        json_t *f = json_array_get(files, i);
        if (strcmp(json_string_value(json_object_get(f, "path")), "copy.safetensors") != 0)
            continue;
        found = true;
        CHECK_STR(json_string_value(json_object_get(f, "sha256")), source_sha);
        const char *source = json_string_value(json_object_get(f, "source_url"));
        CHECK(source != NULL && strstr(source, "/files/model.safetensors") != NULL);
    }
    CHECK(found);
    it_response_free(&r);
}

TEST(import_refused)
{
    it_response r = it_send_json("POST", MODEL "/versions/2/files/x.safetensors/import", write_acme,
                                 "{\"url\":\"file:///etc/passwd\"}");
    CHECK_PROBLEM(r, 422, "import_scheme_forbidden");
    it_response_free(&r);
    r = it_send_json("POST", MODEL "/versions/2/files/x.safetensors/import", write_acme,
                     "{\"url\":\"http://10.0.0.1/x\"}");
    CHECK_PROBLEM(r, 422, "import_address_forbidden");
    it_response_free(&r);
    r = it_send_json("POST", MODEL "/versions/2/files/x.safetensors/import", write_acme,
                     "{\"url\":\"nope\"}");
    CHECK_PROBLEM(r, 400, "import_url_invalid");
    it_response_free(&r);
    r = it_send_json("POST", MODEL "/versions/2/files/x.safetensors/import", write_acme, "{}");
    CHECK_PROBLEM(r, 400, "import_url_invalid");
    it_response_free(&r);
    r = it_send_json("POST", MODEL "/versions/2/files/x.safetensors/import", write_acme,
                     "{\"url\":\"http://127.0.0.1/x\",\"more\":1}");
    CHECK_STATUS(r, 400);
    it_response_free(&r);
    r = it_send_json("POST", MODEL "/versions/1/files/x.safetensors/import", write_acme,
                     "{\"url\":\"http://127.0.0.1/x\"}");
    CHECK_PROBLEM(r, 409, "version_published");
    it_response_free(&r);
    r = it_send_json("POST", MODEL "/versions/2/files/a/header/import", write_acme,
                     "{\"url\":\"http://127.0.0.1/x\"}");
    CHECK_PROBLEM(r, 400, "invalid_path");
    it_response_free(&r);
    r = it_send_json("POST", MODEL "/versions/2/files/x.safetensors/import", read_acme,
                     "{\"url\":\"http://127.0.0.1/x\"}");
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_send_json("POST", MODEL "/versions/2/files/x.safetensors/import", write_other,
                     "{\"url\":\"http://127.0.0.1/x\"}");
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_send_json("POST", MODEL "/versions/2/files/x.safetensors/import", NULL,
                     "{\"url\":\"http://127.0.0.1/x\"}");
    CHECK_STATUS(r, 401);
    it_response_free(&r);
    r = it_send_json("POST", "/v1/models/acme/none/versions/1/files/x.safetensors/import",
                     write_acme, "{\"url\":\"http://127.0.0.1/x\"}");
    CHECK_PROBLEM(r, 404, "model_not_found");
    it_response_free(&r);
}

/* An accepted import is bounded by the room its namespace's quota leaves when it
 * fetches (schema 16 quotas): a source larger than that fails the job with
 * storage_quota_exceeded, and no file row is made. */
TEST(import_bounded_by_quota)
{
    const char *admin = it_token("admin", NULL);
    it_response r = it_get("/v1/namespaces/acme");
    long long usage = it_json_int(r.json, "usage_bytes");
    it_response_free(&r);
    char body[512];
    snprintf(body, sizeof body, "{\"quota_bytes\":%lld}", usage + 1000);
    r = it_send_json("PUT", "/v1/namespaces/acme/quota", admin, body);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    snprintf(body, sizeof body,
             "{\"url\":\"%s/v1/models/other/src/versions/1/files/big.safetensors\"}", it_srv.base);
    r = it_send_json("POST", MODEL "/versions/2/files/big.safetensors/import", write_acme, body);
    CHECK_STATUS(r, 202); /* there is room when it is accepted */
    char location[128] = "";
    it_header(&r, "Location", location, sizeof location);
    it_response_free(&r);
    char state[32], reason[64];
    wait_done(location, state, sizeof state, reason, sizeof reason);
    CHECK_STR(state, "failed");
    CHECK_STR(reason, "storage_quota_exceeded");
    r = it_get(MODEL "/versions/2/files/big.safetensors/header");
    CHECK_STATUS(r, 404);
    it_response_free(&r);
    r = it_get("/v1/namespaces/acme");
    CHECK(it_json_int(r.json, "usage_bytes") == usage);
    it_response_free(&r);
    r = it_send_json("PUT", "/v1/namespaces/acme/quota", admin, "{\"quota_bytes\":null}");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    static const char *const flags[] = {"--import-allow", "127.0.0.1/32", NULL};
    it_init(argc, argv, flags);
    write_acme = it_token("write", "acme");
    read_acme = it_token("read", "acme");
    write_other = it_token("write", "other");
    it_tensor_spec t[] = {{"l.weight", "F32", 2, {64, 64}}, {"l.bias", "F32", 1, {64}}};
    it_buf file = {0};
    it_build_safetensors(&file, t, 2, NULL, 7);
    it_sha256_hex(file.data, file.len, source_sha);
    CHECK_EQ_U64(it_make_version(write_acme, "acme/imp", "model.safetensors", &file, true), 1);
    CHECK_EQ_U64(it_make_version(write_acme, "acme/imp", NULL, NULL, false), 2);
    it_buf_free(&file);
    it_tensor_spec big[] = {{"w", "F32", 2, {128, 128}}};
    it_build_safetensors(&file, big, 1, NULL, 9);
    CHECK_EQ_U64(it_make_version(write_other, "other/src", "big.safetensors", &file, true), 1);
    it_buf_free(&file);
    RUN(import_file);
    RUN(import_refused);
    RUN(import_bounded_by_quota);
    return it_finish(argv[0]);
}
