/* server/routes/hf.c, black-box: the Hugging Face Hub read routes (/api/models,
 * /api/models/{org}/{name}, .../revision/{rev}, .../tree/{rev}[/{path}],
 * /{org}/{name}/resolve/{rev}/{path} and /raw/) against the real server through
 * the integration harness (tests/integration/harness.h), one server for the
 * program. Each route's main success path, and the 404s with the X-Error-Code
 * and reason openapi.yaml names. */
#include "harness.h"

static const char *write_acme;
static it_buf file;
static char sha[65];
static char digest[65];
static char commit[41]; /* the Hub commit id: the first 40 hex digits of digest */

static void check_header(const it_response *r, const char *name, const char *want)
{
    char got[256];
    const char *value = it_header(r, name, got, sizeof got);
    CHECK_STR(value, want);
}

static void check_hub_404(const char *path, const char *error_code, const char *reason)
{
    it_response r = it_get(path);
    CHECK_PROBLEM(r, 404, reason);
    check_header(&r, "X-Error-Code", error_code);
    it_response_free(&r);
}

TEST(model_list_and_info)
{
    it_response r = it_get("/api/models?search=acme/hub");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(json_array_size(r.json), 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(r.json, 0), "id")), "acme/hub");
    it_response_free(&r);
    r = it_get("/api/models/acme/hub");
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "id"), "acme/hub");
    CHECK_STR(it_json_str(&r, "sha"), commit);
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "siblings")), 1);
    it_response_free(&r);
    r = it_get("/api/models/acme/hub/revision/main");
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "sha"), commit);
    it_response_free(&r);
    check_hub_404("/api/models/acme/absent", "RepoNotFound", "model_not_found");
    check_hub_404("/api/models/acme/hub/revision/7", "RevisionNotFound", "version_not_found");
}

TEST(tree)
{
    it_response r = it_get("/api/models/acme/hub/tree/main");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(json_array_size(r.json), 1);
    json_t *entry = json_array_get(r.json, 0);
    CHECK_STR(json_string_value(json_object_get(entry, "path")), "model.safetensors");
    CHECK_STR(json_string_value(json_object_get(entry, "type")), "file");
    CHECK_STR(json_string_value(json_object_get(entry, "oid")), sha);
    it_response_free(&r);
    check_hub_404("/api/models/acme/hub/tree/main/nothing-here", "EntryNotFound", "file_not_found");
}

TEST(resolve_and_raw)
{
    it_response r = it_get("/acme/hub/resolve/main/model.safetensors");
    CHECK_STATUS(r, 200);
    CHECK(r.body.len == file.len && memcmp(r.body.data, file.data, file.len) == 0);
    check_header(&r, "X-Repo-Commit", commit);
    it_response_free(&r);
    /* a Range is always 206, also the first byte only */
    static const char *const first[] = {"Range: bytes=0-0", NULL};
    r = it_request("GET", "/acme/hub/raw/main/model.safetensors",
                   &(it_request_opts){.headers = first});
    CHECK_STATUS(r, 206);
    char want[64];
    snprintf(want, sizeof want, "bytes 0-0/%zu", file.len);
    check_header(&r, "Content-Range", want);
    it_response_free(&r);
    r = it_request("HEAD", "/acme/hub/raw/main/model.safetensors", NULL);
    CHECK_STATUS(r, 200);
    snprintf(want, sizeof want, "%zu", file.len);
    check_header(&r, "Content-Length", want);
    it_response_free(&r);
    check_hub_404("/acme/hub/resolve/main/absent.json", "EntryNotFound", "file_not_found");
    check_hub_404("/acme/absent/resolve/main/model.safetensors", "RepoNotFound", "model_not_found");
}

TEST(refs_commits_paths_info_whoami)
{
    it_response r = it_get("/api/models/acme/hub/refs");
    CHECK_STATUS(r, 200);
    json_t *main_ref = json_array_get(json_object_get(r.json, "branches"), 0);
    CHECK_STR(json_string_value(json_object_get(main_ref, "targetCommit")), commit);
    it_response_free(&r);
    check_hub_404("/api/models/acme/absent/refs", "RepoNotFound", "model_not_found");
    r = it_get("/api/models/acme/hub/commits/main");
    CHECK_STATUS(r, 200);
    CHECK_STR(json_string_value(json_object_get(json_array_get(r.json, 0), "id")), commit);
    it_response_free(&r);
    check_hub_404("/api/models/acme/hub/commits/7", "RevisionNotFound", "version_not_found");
    r = it_send_json("POST", "/api/models/acme/hub/paths-info/main", NULL,
                     "{\"paths\":[\"model.safetensors\",\"absent\"]}");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(json_array_size(r.json), 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(r.json, 0), "oid")), sha);
    it_response_free(&r);
    r = it_send_json("POST", "/api/models/acme/hub/paths-info/main", NULL, "[]");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = it_get("/api/whoami-v2");
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    r = it_request("GET", "/api/whoami-v2", &(it_request_opts){.token = write_acme});
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "name"), "acme");
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    write_acme = it_token("write", "acme");
    it_tensor_spec t = {"w", "F16", 1, {6}};
    it_build_safetensors(&file, &t, 1, NULL, 10);
    it_sha256_hex(file.data, file.len, sha);
    CHECK_EQ_U64(it_make_version(write_acme, "acme/hub", "model.safetensors", &file, true), 1);
    it_response r = it_get("/v1/models/acme/hub/versions/1");
    snprintf(digest, sizeof digest, "%s",
             it_json_str(&r, "digest") ? it_json_str(&r, "digest") : "");
    it_response_free(&r);
    CHECK_EQ_U64(strlen(digest), 64);
    snprintf(commit, sizeof commit, "%.40s", digest);
    RUN(model_list_and_info);
    RUN(tree);
    RUN(resolve_and_raw);
    RUN(refs_commits_paths_info_whoami);
    it_buf_free(&file);
    return it_finish(argv[0]);
}
