/* Tokens and scopes over real HTTP: missing or unknown token 401 (with
 * WWW-Authenticate: Bearer), too little scope or another namespace 403,
 * nothing stored by a refused write; --auth-read closes the reads. */
#include "harness.h"

static const char *read_token, *read_acme, *write_acme, *write_other, *write_any, *admin_token;

static void check_unauthorized(const it_response *r)
{
    CHECK_PROBLEM(*r, 401, "unauthorized");
    char h[256];
    const char *www = it_header(r, "WWW-Authenticate", h, sizeof h);
    CHECK(www != NULL && strncasecmp(www, "Bearer", 6) == 0);
}

TEST(model_creation_scopes)
{
    const char *body = "{\"name\":\"acme/auth\"}";
    it_response r = it_send_json("POST", "/v1/models", NULL, body);
    check_unauthorized(&r);
    it_response_free(&r);
    r = it_send_json("POST", "/v1/models", "not-a-token", body);
    check_unauthorized(&r);
    it_response_free(&r);
    r = it_send_json("POST", "/v1/models", read_token, body);
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_send_json("POST", "/v1/models", write_other, body);
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    /* The token is judged before the body: a bad body without a valid token is 401, a
     * read token's is 403, never the body's 400 (which would tell a stranger how far it got). */
    static const char *const bad_bodies[] = {"{", "{\"name\":\"no-slash\"}", "{\"x\":1}"};
    for (size_t i = 0; i < sizeof bad_bodies / sizeof bad_bodies[0]; i++) {
        r = it_send_json("POST", "/v1/models", NULL, bad_bodies[i]);
        check_unauthorized(&r);
        it_response_free(&r);
        r = it_send_json("POST", "/v1/models", read_token, bad_bodies[i]);
        CHECK_PROBLEM(r, 403, "forbidden");
        it_response_free(&r);
        r = it_send_json("POST", "/v1/models", write_acme, bad_bodies[i]);
        CHECK(r.status == 400);
        it_response_free(&r);
    }
    /* nothing was created by the refused requests */
    r = it_get("/v1/models/acme/auth");
    CHECK_PROBLEM(r, 404, "model_not_found");
    it_response_free(&r);

    r = it_send_json("POST", "/v1/models", write_acme, body);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    /* an unlimited write token and admin act on any org */
    r = it_send_json("POST", "/v1/models", write_any, "{\"name\":\"other/auth\"}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send_json("POST", "/v1/models", admin_token, "{\"name\":\"third/auth\"}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
}

TEST(version_and_upload_scopes)
{
    it_response r = it_send("POST", "/v1/models/acme/auth/versions", NULL, NULL, 0);
    check_unauthorized(&r);
    it_response_free(&r);
    r = it_send("POST", "/v1/models/acme/auth/versions", write_other, NULL, 0);
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_send("POST", "/v1/models/acme/auth/versions", write_acme, NULL, 0);
    CHECK_STATUS(r, 201);
    it_response_free(&r);

    it_tensor_spec t = {"w", "F32", 1, {8}};
    it_buf b = {0};
    it_build_safetensors(&b, &t, 1, NULL, 9);
    int blobs_before = it_count_blobs();
    const char *url = "/v1/models/acme/auth/versions/1/files/model.safetensors";
    r = it_send("PUT", url, NULL, b.data, b.len);
    check_unauthorized(&r);
    it_response_free(&r);
    r = it_send("PUT", url, read_token, b.data, b.len);
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_send("PUT", url, write_other, b.data, b.len);
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    CHECK_EQ_U64(it_count_blobs(), blobs_before);
    CHECK_EQ_U64(it_count_tmp_settled(), 0);
    r = it_get("/v1/models/acme/auth/versions/1/files");
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "files")), 0);
    it_response_free(&r);

    r = it_send("PUT", url, write_acme, b.data, b.len);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    /* reads are open by default */
    r = it_get(url);
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(r.body.len, b.len);
    it_response_free(&r);

    r = it_send("POST", "/v1/models/acme/auth/versions/1/publish", write_other, NULL, 0);
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_send("POST", "/v1/models/acme/auth/versions/1/publish", write_acme, NULL, 0);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    r = it_send_json("PUT", "/v1/models/acme/auth/aliases/prod", write_other, "{\"version\":1}");
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    it_buf_free(&b);
}

TEST(admin_only)
{
    it_response r = it_send("DELETE", "/v1/models/acme/auth", NULL, NULL, 0);
    check_unauthorized(&r);
    it_response_free(&r);
    r = it_send("DELETE", "/v1/models/acme/auth", write_acme, NULL, 0);
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_request("GET", "/v1/rejections", &(it_request_opts){.token = read_token});
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_request("GET", "/v1/rejections", &(it_request_opts){.token = "bogus"});
    check_unauthorized(&r);
    it_response_free(&r);
    r = it_request("GET", "/v1/rejections", &(it_request_opts){.token = admin_token});
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    r = it_send("DELETE", "/v1/models/acme/auth", admin_token, NULL, 0);
    CHECK_STATUS(r, 204);
    it_response_free(&r);
}

TEST(auth_read)
{
    /* restart the same data directory with --auth-read */
    int status = it_server_stop();
    CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    static const char *const flags[] = {"--auth-read", NULL};
    CHECK(it_server_start_args(flags, NULL) == 0);

    it_response r = it_get("/v1/models");
    check_unauthorized(&r);
    it_response_free(&r);
    r = it_get("/v1/models/other/auth");
    check_unauthorized(&r);
    it_response_free(&r);
    r = it_request("GET", "/v1/models", &(it_request_opts){.token = read_token});
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    r = it_request("GET", "/v1/models/other/auth", &(it_request_opts){.token = read_token});
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    /* a read token limited to acme lists acme's models only (both model lists),
     * and is refused other orgs' items */
    /* published: the Hub's list shows only models with a published version */
    it_buf weights = {0};
    const it_tensor_spec tensor = {"w", "F32", 1, {4, 0, 0, 0}};
    it_build_safetensors(&weights, &tensor, 1, NULL, 3);
    CHECK(it_make_version(write_acme, "acme/listed", "model.safetensors", &weights, true) == 1);
    it_buf_free(&weights);
    static const char *const lists[] = {"/v1/models?limit=100", "/api/models?limit=100"};
    for (size_t i = 0; i < 2; i++) {
        r = it_request("GET", lists[i], &(it_request_opts){.token = read_acme});
        CHECK_STATUS(r, 200);
        json_t *models = json_is_array(r.json) ? r.json : json_object_get(r.json, "models");
        CHECK_EQ_U64(json_array_size(models), 1);
        for (size_t m = 0; m < json_array_size(models); m++) {
            json_t *item = json_array_get(models, m);
            const char *name = json_string_value(json_object_get(item, "name"));
            if (name == NULL)
                name = json_string_value(json_object_get(item, "id"));
            CHECK(name != NULL && strncmp(name, "acme/", 5) == 0);
        }
        it_response_free(&r);
    }
    r = it_request("GET", "/v1/models/other/auth", &(it_request_opts){.token = read_acme});
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_request("GET", "/v1/preloads", &(it_request_opts){.token = read_acme});
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    /* whether a preload id exists is told to readers only */
    r = it_get("/v1/preloads/0123456789abcdef0123456789abcdef");
    check_unauthorized(&r);
    it_response_free(&r);
    /* health stays open for probes */
    r = it_get("/healthz");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    read_token = it_token("read", NULL);
    read_acme = it_token("read", "acme");
    write_acme = it_token("write", "acme");
    write_other = it_token("write", "other");
    write_any = it_token("write", NULL);
    admin_token = it_token("admin", NULL);
    RUN(model_creation_scopes);
    RUN(version_and_upload_scopes);
    RUN(admin_only);
    RUN(auth_read);
    return it_finish(argv[0]);
}
