/* server/routes/scan.c, black-box: POST /v1/scan (the gate's verdict, nothing
 * stored) against the real server through the integration harness
 * (tests/integration/harness.h), one server for the program. The main success
 * path (a valid body, a refused one: both 200 with the verdict), the SARIF form
 * (?format=sarif, Accept), and refusals with the status and reason openapi.yaml
 * names. (tests/sarif/run.sh validates the SARIF against its schema.) */
#include "harness.h"

TEST(scan_verdicts)
{
    it_tensor_spec t = {"w", "F32", 1, {16}};
    it_buf file = {0};
    it_build_safetensors(&file, &t, 1, NULL, 5);
    char sha[65];
    it_sha256_hex(file.data, file.len, sha);
    it_response r = it_send("POST", "/v1/scan", NULL, file.data, file.len);
    CHECK_STATUS(r, 200);
    CHECK(json_is_true(json_object_get(r.json, "valid")));
    CHECK_STR(it_json_str(&r, "format"), "safetensors");
    CHECK_STR(it_json_str(&r, "sha256"), sha);
    CHECK_EQ_U64(it_json_int(r.json, "size"), file.len);
    CHECK(json_is_null(json_object_get(r.json, "reason")));
    it_response_free(&r);
    /* a refused body is still 200: the verdict is the answer */
    r = it_send("POST", "/v1/scan", NULL, it_pickle_p2, sizeof it_pickle_p2);
    CHECK_STATUS(r, 200);
    CHECK(json_is_false(json_object_get(r.json, "valid")));
    CHECK_STR(it_json_str(&r, "reason"), "refused_format");
    CHECK_STR(it_json_str(&r, "format"), "pickle");
    CHECK(it_json_str(&r, "detail") != NULL);
    CHECK_EQ_U64(it_json_int(r.json, "size"), sizeof it_pickle_p2);
    it_response_free(&r);
    /* kind=sidecar admits JSON; the default kind does not */
    static const char json[] = "{\"a\":1}";
    r = it_send("POST", "/v1/scan?kind=sidecar", NULL, json, strlen(json));
    CHECK_STATUS(r, 200);
    CHECK(json_is_true(json_object_get(r.json, "valid")));
    it_response_free(&r);
    r = it_send("POST", "/v1/scan", NULL, json, strlen(json));
    CHECK_STATUS(r, 200);
    CHECK(json_is_false(json_object_get(r.json, "valid")));
    it_response_free(&r);
    /* nothing was stored */
    CHECK_EQ_U64(it_count_blobs(), 0);
    CHECK_EQ_U64(it_count_tmp_settled(), 0);
    it_buf_free(&file);
}

static bool has_header(const it_response *r, const char *line)
{
    return r->headers.data != NULL && strstr((const char *)r->headers.data, line) != NULL;
}

TEST(scan_sarif)
{
    it_response r = it_send("POST", "/v1/scan?format=sarif&name=evil.bin", NULL, it_pickle_p2,
                            sizeof it_pickle_p2);
    CHECK_STATUS(r, 200);
    CHECK(has_header(&r, "Content-Type: application/sarif+json"));
    CHECK(has_header(&r, "Vary: Accept"));
    CHECK_STR(it_json_str(&r, "version"), "2.1.0");
    json_t *run = json_array_get(json_object_get(r.json, "runs"), 0);
    json_t *result = json_array_get(json_object_get(run, "results"), 0);
    CHECK_STR(json_string_value(json_object_get(result, "ruleId")), "refused_format");
    CHECK_STR(json_string_value(json_object_get(result, "level")), "error");
    json_t *artifact = json_array_get(json_object_get(run, "artifacts"), 0);
    CHECK_STR(json_string_value(json_object_get(json_object_get(artifact, "location"), "uri")),
              "evil.bin");
    CHECK_EQ_U64(json_integer_value(json_object_get(artifact, "length")), sizeof it_pickle_p2);
    it_response_free(&r);
    /* Accept decides without ?format=: SARIF when ranked above JSON, else JSON */
    static const char *const sarif_only[] = {"Accept: application/sarif+json", NULL};
    static const char *const json_first[] = {
        "Accept: application/json, application/sarif+json;q=0.9", NULL};
    static const char *const sarif_first[] = {
        "Accept: application/json;q=0.5, application/sarif+json", NULL};
    const char *const *accepts[] = {sarif_only, json_first, sarif_first};
    bool want_sarif[] = {true, false, true};
    for (size_t i = 0; i < 3; i++) {
        it_request_opts o = {.headers = accepts[i],
                             .body = it_pickle_p2,
                             .body_len = sizeof it_pickle_p2,
                             .has_body = true};
        r = it_request("POST", "/v1/scan", &o);
        CHECK_STATUS(r, 200);
        CHECK(has_header(&r, "Content-Type: application/sarif+json") == want_sarif[i]);
        CHECK((json_object_get(r.json, "runs") != NULL) == want_sarif[i]);
        it_response_free(&r);
    }
    /* ?format=json wins over Accept */
    it_request_opts o = {.headers = sarif_only,
                         .body = it_pickle_p2,
                         .body_len = sizeof it_pickle_p2,
                         .has_body = true};
    r = it_request("POST", "/v1/scan?format=json", &o);
    CHECK(has_header(&r, "Content-Type: application/json"));
    it_response_free(&r);
}

TEST(scan_refused)
{
    it_response r = it_send("POST", "/v1/scan?format=xml", NULL, "{}", 2);
    CHECK_PROBLEM(r, 400, "invalid_format");
    it_response_free(&r);
    r = it_send("POST", "/v1/scan?format=", NULL, "{}", 2);
    CHECK_PROBLEM(r, 400, "invalid_format");
    it_response_free(&r);
    r = it_send("POST", "/v1/scan?kind=pickle", NULL, "{}", 2);
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = it_request("GET", "/v1/scan", NULL);
    CHECK_PROBLEM(r, 405, "method_not_allowed");
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    RUN(scan_verdicts);
    RUN(scan_sarif);
    RUN(scan_refused);
    return it_finish(argv[0]);
}
