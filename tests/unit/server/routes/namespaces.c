/* server/routes/namespaces.c, black-box: GET and PUT /v1/namespaces/{org}/policy
 * against the real server through the integration harness (one server for the
 * program): the default, a change and its effect on an upload, and the refusals
 * openapi.yaml names. The whole policy (imports, marks, the Hub, PostgreSQL) is
 * tests/integration/codepolicy.c. */
#include "harness.h"

static const char *admin_acme, *admin_other, *write_acme;

TEST(policy_default_and_set)
{
    it_response r =
        it_request("GET", "/v1/namespaces/acme/policy", &(it_request_opts){.token = admin_acme});
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "namespace"), "acme");
    CHECK(json_is_false(json_object_get(r.json, "allow_code")));
    it_response_free(&r);
    CHECK_EQ_U64(it_make_version(write_acme, "acme/ns", NULL, NULL, false), 1);
    r = it_send("PUT", "/v1/models/acme/ns/versions/1/files/run.sh", write_acme,
                "#!/bin/sh\necho hi\n", 18);
    CHECK_PROBLEM(r, 422, "code_script");
    it_response_free(&r);
    r = it_send_json("PUT", "/v1/namespaces/acme/policy", admin_acme, "{\"allow_code\":true}");
    CHECK_STATUS(r, 200);
    CHECK(json_is_true(json_object_get(r.json, "allow_code")));
    it_response_free(&r);
    r = it_send("PUT", "/v1/models/acme/ns/versions/1/files/run.sh", write_acme,
                "#!/bin/sh\necho hi\n", 18);
    CHECK_STATUS(r, 201);
    CHECK_STR(it_json_str(&r, "kind"), "code");
    CHECK_STR(it_json_str(&r, "code"), "code_script");
    it_response_free(&r);
}

TEST(policy_refusals)
{
    it_response r =
        it_send_json("PUT", "/v1/namespaces/acme/policy", admin_other, "{\"allow_code\":true}");
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_send_json("PUT", "/v1/namespaces/acme/policy", write_acme, "{\"allow_code\":true}");
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_get("/v1/namespaces/acme/policy");
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    r = it_send_json("PUT", "/v1/namespaces/acme/policy", admin_acme, "{\"allow\":true}");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = it_send_json("PUT", "/v1/namespaces/acme/policy", admin_acme, "{\"allow_code\":null}");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = it_request("DELETE", "/v1/namespaces/acme/policy", &(it_request_opts){.token = admin_acme});
    CHECK_PROBLEM(r, 405, "method_not_allowed");
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    admin_acme = it_token("admin", "acme");
    admin_other = it_token("admin", "other");
    write_acme = it_token("write", "acme");
    RUN(policy_default_and_set);
    RUN(policy_refusals);
    return it_finish(argv[0]);
}
