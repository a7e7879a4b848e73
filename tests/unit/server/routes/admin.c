/* server/routes/admin.c, black-box: GET /healthz, /readyz, /metrics,
 * /openapi.yaml and /v1/rejections against the real server through the
 * integration harness (tests/integration/harness.h), one server for the
 * program. Each route's main success path, and refusals with the status and
 * reason openapi.yaml names. */
#include "harness.h"

static const char *admin, *read_any, *write_acme;

TEST(health_and_readiness)
{
    it_response r = it_get("/healthz");
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "status"), "ok");
    it_response_free(&r);
    r = it_get("/readyz");
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "status"), "ready");
    CHECK_STR(it_json_str(&r, "catalog"), "ok");
    it_response_free(&r);
    r = it_request("POST", "/healthz", NULL);
    CHECK_PROBLEM(r, 405, "method_not_allowed");
    it_response_free(&r);
}

TEST(metrics)
{
    it_response r = it_get("/metrics");
    CHECK_STATUS(r, 200);
    CHECK(r.body.data != NULL && strstr((const char *)r.body.data, "# TYPE ") != NULL);
    it_response_free(&r);
}

TEST(openapi_document)
{
    it_buf repo = {0};
    CHECK(it_read_file("openapi.yaml", &repo));
    it_response r = it_get("/openapi.yaml");
    CHECK_STATUS(r, 200);
    char type[64];
    it_header(&r, "Content-Type", type, sizeof type);
    CHECK_STR(type, "application/yaml");
    CHECK(r.body.len == repo.len && repo.len > 0 && memcmp(r.body.data, repo.data, repo.len) == 0);
    it_response_free(&r);
    it_buf_free(&repo);
}

TEST(rejections)
{
    CHECK_EQ_U64(it_make_version(write_acme, "acme/adm", NULL, NULL, false), 1);
    it_response r = it_send("PUT", "/v1/models/acme/adm/versions/1/files/p.safetensors", write_acme,
                            it_pickle_p2, sizeof it_pickle_p2);
    CHECK_PROBLEM(r, 415, "refused_format");
    it_response_free(&r);
    r = it_request("GET", "/v1/rejections", &(it_request_opts){.token = admin});
    CHECK_STATUS(r, 200);
    json_t *list = json_object_get(r.json, "rejections");
    CHECK_EQ_U64(json_array_size(list), 1);
    json_t *first = json_array_get(list, 0);
    CHECK_STR(json_string_value(json_object_get(first, "path")), "p.safetensors");
    CHECK_STR(json_string_value(json_object_get(first, "reason")), "refused_format");
    CHECK_STR(json_string_value(json_object_get(first, "format")), "pickle");
    CHECK_STR(json_string_value(json_object_get(first, "model")), "acme/adm");
    it_response_free(&r);
    /* admin only */
    r = it_request("GET", "/v1/rejections", &(it_request_opts){.token = read_any});
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_get("/v1/rejections");
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    admin = it_token("admin", NULL);
    read_any = it_token("read", NULL);
    write_acme = it_token("write", "acme");
    RUN(health_and_readiness);
    RUN(metrics);
    RUN(openapi_document);
    RUN(rejections);
    return it_finish(argv[0]);
}
