/* server/routes/scan.c, black-box: POST /v1/scan (the gate's verdict, nothing
 * stored) against the real server through the integration harness
 * (tests/integration/harness.h), one server for the program. The main success
 * path (a valid body, a refused one: both 200 with the verdict), the SARIF form
 * (?format=sarif, Accept), and refusals with the status and reason openapi.yaml
 * names. (tests/sarif/run.sh validates the SARIF against its schema.) */
#include <unistd.h>

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

/* A refusal certain with far more than --drain-limit left: the answer comes before the
 * end of the body, so the SARIF artifact has the declared length and no hash (the
 * bytes read are not the file). Over a raw socket: the client sends the head only,
 * every byte of which the server reads, and then reads the answer. */
TEST(scan_sarif_early_answer)
{
    enum { HEAD = 64 * 1024 };
    static unsigned char body[HEAD];
    memcpy(body, it_pickle_posix_system, sizeof it_pickle_posix_system);
    int fd = it_connect();
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    static const char head[] = "POST /v1/scan?format=sarif&name=evil.bin HTTP/1.1\r\n"
                               "Host: localhost\r\n"
                               "Content-Type: application/octet-stream\r\n"
                               "Content-Length: 209715200\r\n\r\n";
    CHECK(it_write_all(fd, head, strlen(head)));
    CHECK(it_write_all(fd, body, sizeof body));
    static char answer[65536];
    size_t n = it_read_some(fd, answer, sizeof answer, 10000);
    close(fd);
    CHECK(n > 0 && strncmp(answer, "HTTP/1.1 200", 12) == 0);
    CHECK(strstr(answer, "application/sarif+json") != NULL);
    const char *json_start = strstr(answer, "\r\n\r\n");
    json_t *log = json_start != NULL ? json_loads(json_start + 4, 0, NULL) : NULL;
    CHECK(log != NULL);
    json_t *run = json_array_get(json_object_get(log, "runs"), 0);
    json_t *artifact = json_array_get(json_object_get(run, "artifacts"), 0);
    CHECK_EQ_U64(json_integer_value(json_object_get(artifact, "length")), 209715200);
    CHECK(artifact != NULL && json_object_get(artifact, "hashes") == NULL);
    json_t *result = json_array_get(json_object_get(run, "results"), 0);
    CHECK_STR(json_string_value(json_object_get(result, "ruleId")), "refused_format");
    json_t *finding = json_array_get(json_object_get(run, "results"), 1);
    CHECK_STR(json_string_value(json_object_get(finding, "ruleId")), "pickle_global_dangerous");
    json_decref(log);
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
    RUN(scan_sarif_early_answer);
    RUN(scan_refused);
    return it_finish(argv[0]);
}
