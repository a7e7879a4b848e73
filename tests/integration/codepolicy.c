/* The code policy of a namespace (docs/DESIGN.md, "The code policy"), over real HTTP
 * against the real server (SQLite here; tests/scale/pg-suite.sh runs it again on the
 * PostgreSQL catalog): code is refused by default; an admin of the org allows it with
 * PUT /v1/namespaces/{org}/policy; Python source and a config.json with auto_map are
 * then admitted (uploads and imports), recorded as admitted_by_policy, and the version
 * is marked in every listing (version, files, model, model list, Hub info and list);
 * another namespace still refuses them, a pickle stays refused in the allowed one, and
 * turning the policy off refuses new code but leaves the mark. Who may read and set the
 * policy: an admin of the org or of every org; a write or read token, another org's
 * admin and no token may not. */
#include <pthread.h>

#include "harness.h"
#include "test.h"

static const char *admin_acme, *admin_other, *admin_any, *write_acme, *write_other, *read_any;

static const char modeling[] = "import torch\n\nclass XModel(torch.nn.Module):\n    pass\n";
static const char auto_map_config[] =
    "{\"model_type\": \"x\", \"auto_map\": {\"AutoModel\": \"modeling_x.XModel\"}}";

static it_response put_file(const char *model, int version, const char *path, const char *token,
                            const void *body, size_t len)
{
    char url[256];
    snprintf(url, sizeof url, "/v1/models/%s/versions/%d/files/%s", model, version, path);
    return it_send("PUT", url, token, body, len);
}

static bool array_has_string(const json_t *array, const char *text)
{
    size_t i;
    json_t *v;
    json_array_foreach(array, i, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), text) == 0)
            return true;
    }
    return false;
}

/* The member of array whose key is value, or NULL. */
static json_t *find_by(const json_t *array, const char *key, const char *value)
{
    size_t i;
    json_t *v;
    json_array_foreach(array, i, v)
    {
        const char *got = json_string_value(json_object_get(v, key));
        if (got != NULL && strcmp(got, value) == 0)
            return v;
    }
    return NULL;
}

static void set_policy(const char *org, const char *token, bool allow, long want_status)
{
    char url[128];
    snprintf(url, sizeof url, "/v1/namespaces/%s/policy", org);
    it_response r =
        it_send_json("PUT", url, token, allow ? "{\"allow_code\":true}" : "{\"allow_code\":false}");
    CHECK_STATUS(r, want_status);
    if (want_status == 200) {
        CHECK(json_is_true(json_object_get(r.json, "allow_code")) == allow);
        CHECK_STR(it_json_str(&r, "namespace"), org);
        CHECK(it_json_str(&r, "updated_at") != NULL);
    }
    it_response_free(&r);
}

TEST(policy_route_authorization)
{
    it_response r = it_get("/v1/namespaces/acme/policy");
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    const char *refused[] = {read_any, write_acme, admin_other};
    for (size_t i = 0; i < 3; i++) {
        r = it_request("GET", "/v1/namespaces/acme/policy",
                       &(it_request_opts){.token = refused[i]});
        CHECK_PROBLEM(r, 403, "forbidden");
        it_response_free(&r);
        r = it_send_json("PUT", "/v1/namespaces/acme/policy", refused[i], "{\"allow_code\":true}");
        CHECK_PROBLEM(r, 403, "forbidden");
        it_response_free(&r);
    }
    r = it_send_json("PUT", "/v1/namespaces/acme/policy", NULL, "{\"allow_code\":true}");
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    /* never set: the default, refused */
    r = it_request("GET", "/v1/namespaces/acme/policy", &(it_request_opts){.token = admin_acme});
    CHECK_STATUS(r, 200);
    CHECK(json_is_false(json_object_get(r.json, "allow_code")));
    CHECK(json_is_null(json_object_get(r.json, "updated_at")));
    it_response_free(&r);
    /* bad bodies and names change nothing */
    static const char *const bodies[] = {"{}", "{\"allow_code\":\"yes\"}", "{\"allow_code\":1}",
                                         "{\"allow_code\":true,\"quota\":1}"};
    for (size_t i = 0; i < 4; i++) {
        r = it_send_json("PUT", "/v1/namespaces/acme/policy", admin_acme, bodies[i]);
        CHECK_PROBLEM(r, 400, "invalid_request");
        it_response_free(&r);
    }
    r = it_send_json("PUT", "/v1/namespaces/acme/policy", admin_acme, "{\"allow_code\":tru");
    CHECK_PROBLEM(r, 400, "invalid_json");
    it_response_free(&r);
    r = it_send_json("PUT", "/v1/namespaces/.bad/policy", admin_any, "{\"allow_code\":true}");
    CHECK_PROBLEM(r, 400, "invalid_name");
    it_response_free(&r);
    r = it_request("GET", "/v1/namespaces/acme/policy", &(it_request_opts){.token = admin_any});
    CHECK_STATUS(r, 200);
    CHECK(json_is_false(json_object_get(r.json, "allow_code")));
    it_response_free(&r);
}

TEST(code_refused_by_default)
{
    CHECK_EQ_U64(it_make_version(write_acme, "acme/code", NULL, NULL, false), 1);
    it_response r =
        put_file("acme/code", 1, "modeling_x.py", write_acme, modeling, strlen(modeling));
    CHECK_PROBLEM(r, 422, "code_python");
    it_response_free(&r);
    r = put_file("acme/code", 1, "config.json", write_acme, auto_map_config,
                 strlen(auto_map_config));
    CHECK_PROBLEM(r, 422, "code_reference");
    it_response_free(&r);
}

TEST(allowed_code_is_admitted_and_marked)
{
    set_policy("acme", admin_acme, true, 200);
    it_response r =
        put_file("acme/code", 1, "modeling_x.py", write_acme, modeling, strlen(modeling));
    CHECK_STATUS(r, 201);
    CHECK_STR(it_json_str(&r, "kind"), "code");
    CHECK_STR(it_json_str(&r, "code"), "code_python");
    it_response_free(&r);
    r = put_file("acme/code", 1, "config.json", write_acme, auto_map_config,
                 strlen(auto_map_config));
    CHECK_STATUS(r, 201);
    CHECK_STR(it_json_str(&r, "kind"), "code");
    CHECK_STR(it_json_str(&r, "code"), "code_reference");
    it_response_free(&r);
    /* a pickle stays refused wherever it appears, under any name */
    r = put_file("acme/code", 1, "evil.py", write_acme, it_pickle_posix_system,
                 sizeof it_pickle_posix_system);
    CHECK_PROBLEM(r, 415, "refused_format");
    it_response_free(&r);
    r = put_file("acme/code", 1, "run.sh", write_acme, it_pickle_p0, strlen(it_pickle_p0));
    CHECK_PROBLEM(r, 415, "refused_format");
    it_response_free(&r);
    r = put_file("acme/code", 1, "weights.bin", write_acme, it_pickle_p2, sizeof it_pickle_p2);
    CHECK_PROBLEM(r, 415, "refused_format");
    it_response_free(&r);
    /* code that fails another rule too is refused for that rule */
    static const unsigned char binary[] = {'i', 'm', 'p', 0x00, 0x01, 0xff, 0xfe, '\n'};
    r = put_file("acme/code", 1, "binary.py", write_acme, binary, sizeof binary);
    CHECK_PROBLEM(r, 422, "sidecar_text_invalid");
    it_response_free(&r);
    r = put_file("acme/code", 1, "broken.json", write_acme, "{\"auto_map\": {", 14);
    CHECK_PROBLEM(r, 422, "sidecar_json_invalid");
    it_response_free(&r);
    /* plain files beside the code */
    it_tensor_spec spec = {"w", "F32", 2, {2, 3}};
    it_buf weights = {0};
    it_build_safetensors(&weights, &spec, 1, NULL, 1);
    r = put_file("acme/code", 1, "model.safetensors", write_acme, weights.data, weights.len);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    it_buf_free(&weights);
    r = put_file("acme/code", 1, "README.md", write_acme, "# x\n", 4);
    CHECK_STATUS(r, 201);
    CHECK_STR(it_json_str(&r, "kind"), "text");
    CHECK(json_object_get(r.json, "code") == NULL);
    it_response_free(&r);
    r = it_send_json("POST", "/v1/models/acme/code/versions/1/publish", write_acme, "{}");
    CHECK_STATUS(r, 200);
    CHECK(json_is_true(json_object_get(r.json, "holds_code")));
    it_response_free(&r);

    /* the version */
    r = it_get("/v1/models/acme/code/versions/1");
    CHECK_STATUS(r, 200);
    CHECK(json_is_true(json_object_get(r.json, "holds_code")));
    json_t *code = json_object_get(r.json, "code_files");
    CHECK_EQ_U64(json_array_size(code), 2);
    json_t *py = find_by(code, "path", "modeling_x.py");
    json_t *cfg = find_by(code, "path", "config.json");
    CHECK(py != NULL && cfg != NULL);
    CHECK_STR(json_string_value(json_object_get(py, "reason")), "code_python");
    CHECK_STR(json_string_value(json_object_get(cfg, "reason")), "code_reference");
    it_response_free(&r);
    /* its files */
    r = it_get("/v1/models/acme/code/versions/1/files");
    CHECK_STATUS(r, 200);
    json_t *files = json_object_get(r.json, "files");
    CHECK_EQ_U64(json_array_size(files), 4);
    json_t *file = find_by(files, "path", "modeling_x.py");
    CHECK_STR(json_string_value(json_object_get(file, "kind")), "code");
    CHECK_STR(json_string_value(json_object_get(file, "code")), "code_python");
    file = find_by(files, "path", "README.md");
    CHECK(file != NULL && json_object_get(file, "code") == NULL);
    it_response_free(&r);
    /* the model, its versions */
    r = it_get("/v1/models/acme/code");
    CHECK_STATUS(r, 200);
    CHECK(json_is_true(json_object_get(r.json, "holds_code")));
    json_t *versions = json_object_get(r.json, "versions");
    CHECK(json_is_true(json_object_get(json_array_get(versions, 0), "holds_code")));
    CHECK_EQ_U64(json_integer_value(json_array_get(json_object_get(r.json, "code_versions"), 0)),
                 1);
    it_response_free(&r);
    /* the model list's summary */
    r = it_get("/v1/models?q=acme/code");
    CHECK_STATUS(r, 200);
    json_t *summary = find_by(json_object_get(r.json, "models"), "name", "acme/code");
    CHECK(summary != NULL && json_is_true(json_object_get(summary, "holds_code")));
    it_response_free(&r);
    /* the Hub's model info and list: the custom_code tag and the files */
    r = it_get("/api/models/acme/code");
    CHECK_STATUS(r, 200);
    CHECK(array_has_string(json_object_get(r.json, "tags"), "custom_code"));
    CHECK(array_has_string(json_object_get(r.json, "codeFiles"), "modeling_x.py"));
    CHECK(array_has_string(json_object_get(r.json, "codeFiles"), "config.json"));
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "codeFiles")), 2);
    it_response_free(&r);
    r = it_get("/api/models?author=acme");
    CHECK_STATUS(r, 200);
    json_t *hub = find_by(r.json, "id", "acme/code");
    CHECK(hub != NULL && array_has_string(json_object_get(hub, "tags"), "custom_code"));
    it_response_free(&r);

    /* each admission is recorded like a refusal */
    r = it_request("GET", "/v1/rejections?limit=50", &(it_request_opts){.token = admin_any});
    CHECK_STATUS(r, 200);
    json_t *list = json_object_get(r.json, "rejections");
    bool admitted_py = false, admitted_cfg = false, refused_pickle = false;
    size_t i;
    json_t *item;
    json_array_foreach(list, i, item)
    {
        const char *path = json_string_value(json_object_get(item, "path"));
        const char *outcome = json_string_value(json_object_get(item, "outcome"));
        const char *reason = json_string_value(json_object_get(item, "reason"));
        if (path == NULL || outcome == NULL || reason == NULL)
            continue;
        if (strcmp(path, "modeling_x.py") == 0 && strcmp(outcome, "admitted_by_policy") == 0)
            admitted_py = strcmp(reason, "code_python") == 0;
        if (strcmp(path, "config.json") == 0 && strcmp(outcome, "admitted_by_policy") == 0)
            admitted_cfg = strcmp(reason, "code_reference") == 0;
        if (strcmp(path, "evil.py") == 0)
            refused_pickle = strcmp(outcome, "refused") == 0;
    }
    CHECK(admitted_py);
    CHECK(admitted_cfg);
    CHECK(refused_pickle);
    it_response_free(&r);
}

TEST(other_namespace_still_refuses)
{
    CHECK_EQ_U64(it_make_version(write_other, "other/code", NULL, NULL, false), 1);
    it_response r =
        put_file("other/code", 1, "modeling_x.py", write_other, modeling, strlen(modeling));
    CHECK_PROBLEM(r, 422, "code_python");
    it_response_free(&r);
    r = put_file("other/code", 1, "config.json", write_other, auto_map_config,
                 strlen(auto_map_config));
    CHECK_PROBLEM(r, 422, "code_reference");
    it_response_free(&r);
    r = it_request("GET", "/v1/namespaces/other/policy", &(it_request_opts){.token = admin_other});
    CHECK_STATUS(r, 200);
    CHECK(json_is_false(json_object_get(r.json, "allow_code")));
    it_response_free(&r);
}

static void wait_job(const char *location, char *state, size_t cap, char *reason, size_t rcap)
{
    snprintf(state, cap, "(none)");
    reason[0] = '\0';
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

/* An import follows the rule of an upload: the source is the published modeling_x.py */
static void import_into(const char *model, const char *token, char *state, char *reason)
{
    char body[512], url[256], location[128] = "";
    snprintf(body, sizeof body, "{\"url\":\"%s/acme/code/resolve/1/modeling_x.py\"}", it_srv.base);
    snprintf(url, sizeof url, "/v1/models/%s/versions/2/files/modeling_x.py/import", model);
    it_response r = it_send_json("POST", url, token, body);
    CHECK_STATUS(r, 202);
    it_header(&r, "Location", location, sizeof location);
    it_response_free(&r);
    wait_job(location, state, 32, reason, 64);
}

TEST(imports_follow_the_policy)
{
    char state[32], reason[64];
    CHECK_EQ_U64(it_make_version(write_acme, "acme/code", NULL, NULL, false), 2);
    import_into("acme/code", write_acme, state, reason);
    CHECK_STR(state, "done");
    it_response r = it_get("/v1/models/acme/code/versions/2/files");
    json_t *file = find_by(json_object_get(r.json, "files"), "path", "modeling_x.py");
    CHECK(file != NULL);
    CHECK_STR(json_string_value(json_object_get(file, "kind")), "code");
    CHECK_STR(json_string_value(json_object_get(file, "code")), "code_python");
    it_response_free(&r);
    r = it_get("/v1/models/acme/code/versions/2");
    CHECK(json_is_true(json_object_get(r.json, "holds_code")));
    it_response_free(&r);
    CHECK_EQ_U64(it_make_version(write_other, "other/code", NULL, NULL, false), 2);
    import_into("other/code", write_other, state, reason);
    CHECK_STR(state, "failed");
    CHECK_STR(reason, "code_python");
}

/* A conversion carries the code over to its derived version, marked as well */
TEST(derived_versions_keep_the_mark)
{
    it_response r = it_send_json("POST", "/v1/models/acme/code/versions/1/convert", write_acme,
                                 "{\"dtype\":\"F16\"}");
    CHECK_STATUS(r, 202);
    char location[128] = "", state[32], reason[64];
    it_header(&r, "Location", location, sizeof location);
    it_response_free(&r);
    wait_job(location, state, sizeof state, reason, sizeof reason);
    CHECK_STR(state, "done");
    r = it_get(location);
    long long derived = it_json_int(r.json, "version");
    it_response_free(&r);
    char url[128];
    snprintf(url, sizeof url, "/v1/models/acme/code/versions/%lld", derived);
    r = it_get(url);
    CHECK_STATUS(r, 200);
    CHECK(json_is_true(json_object_get(r.json, "holds_code")));
    json_t *code = json_object_get(r.json, "code_files");
    CHECK_EQ_U64(json_array_size(code), 2);
    json_t *py = find_by(code, "path", "modeling_x.py");
    CHECK(py != NULL &&
          strcmp(json_string_value(json_object_get(py, "reason")), "code_python") == 0);
    it_response_free(&r);
}

TEST(policy_off_refuses_new_code_and_keeps_the_mark)
{
    set_policy("acme", admin_any, false, 200);
    it_response r = it_get("/v1/models/acme/code/versions/1");
    CHECK(json_is_true(json_object_get(r.json, "holds_code")));
    it_response_free(&r);
    r = it_get("/api/models/acme/code");
    CHECK(array_has_string(json_object_get(r.json, "tags"), "custom_code"));
    it_response_free(&r);
    int draft = it_make_version(write_acme, "acme/code", NULL, NULL, false);
    CHECK(draft > 3); /* 2: the import's draft, 3: the derived version */
    r = put_file("acme/code", draft, "modeling_x.py", write_acme, modeling, strlen(modeling));
    CHECK_PROBLEM(r, 422, "code_python");
    it_response_free(&r);
    /* the draft that took code while it was allowed keeps it, marked */
    r = it_get("/v1/models/acme/code/versions/2");
    CHECK(json_is_true(json_object_get(r.json, "holds_code")));
    it_response_free(&r);
    /* a version without code is not marked */
    char url[128];
    snprintf(url, sizeof url, "/v1/models/acme/code/versions/%d", draft);
    r = it_get(url);
    CHECK(json_is_false(json_object_get(r.json, "holds_code")));
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "code_files")), 0);
    it_response_free(&r);
}

/* The policy turned off while an upload of code is between its blob and its row (the
 * server restarted with TENSORGATE_TEST_COMMIT_DELAY_MS): the commit re-reads it and
 * refuses the code, as a new upload would be; no row, the blob given back. */
static const char race_text[] = "# only the race test uploads this\nimport os\n";

static void *upload_race(void *arg)
{
    it_response r = it_send("PUT", arg, write_acme, race_text, sizeof race_text - 1);
    const char *reason = it_reason(&r);
    long result = r.status == 422 && reason != NULL && strcmp(reason, "code_python") == 0 ? 1 : 0;
    it_response_free(&r);
    return (void *)result;
}

TEST(policy_turned_off_during_an_upload)
{
    CHECK(it_server_stop() == 0);
    setenv("TENSORGATE_TEST_COMMIT_DELAY_MS", "4000", 1);
    CHECK(it_server_start_args((const char *const[]){"--import-allow", "127.0.0.1/32", NULL},
                               NULL) == 0);
    unsetenv("TENSORGATE_TEST_COMMIT_DELAY_MS");
    set_policy("acme", admin_acme, true, 200);
    int draft = it_make_version(write_acme, "acme/race", NULL, NULL, false);
    CHECK(draft == 1);
    char url[128], hex[65];
    snprintf(url, sizeof url, "/v1/models/acme/race/versions/1/files/modeling_race.py");
    it_sha256_hex(race_text, sizeof race_text - 1, hex);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, upload_race, url) == 0);
    /* the blob is durable before the row: the upload is then inside its 4 s gap */
    for (int i = 0; i < 300 && !it_blob_exists(hex); i++)
        usleep(10 * 1000);
    CHECK(it_blob_exists(hex));
    set_policy("acme", admin_acme, false, 200);
    void *refused = NULL;
    pthread_join(thread, &refused);
    CHECK((long)refused == 1);
    it_response r = it_get(url);
    CHECK_PROBLEM(r, 404, "file_not_found");
    it_response_free(&r);
    CHECK(!it_blob_exists(hex));
    r = it_request("GET", "/v1/rejections?limit=5", &(it_request_opts){.token = admin_any});
    json_t *record = find_by(json_object_get(r.json, "rejections"), "path", "modeling_race.py");
    CHECK(record != NULL);
    CHECK_STR(json_string_value(json_object_get(record, "outcome")), "refused");
    CHECK(strstr(json_string_value(json_object_get(record, "detail")), "turned off") != NULL);
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    static const char *const flags[] = {"--import-allow", "127.0.0.1/32", NULL};
    it_init(argc, argv, flags);
    admin_acme = it_token("admin", "acme");
    admin_other = it_token("admin", "other");
    admin_any = it_token("admin", NULL);
    write_acme = it_token("write", "acme");
    write_other = it_token("write", "other");
    read_any = it_token("read", NULL);
    RUN(policy_route_authorization);
    RUN(code_refused_by_default);
    RUN(allowed_code_is_admitted_and_marked);
    RUN(other_namespace_still_refuses);
    RUN(imports_follow_the_policy);
    RUN(derived_versions_keep_the_mark);
    RUN(policy_off_refuses_new_code_and_keeps_the_mark);
    RUN(policy_turned_off_during_an_upload);
    return it_finish(argv[0]);
}
