/* server/routes/mirror.c, black-box: POST /v1/models/{org}/{name}/mirror against the
 * real server through the integration harness, started with --import-allow
 * 127.0.0.1/32. The server mirrors its own published model (it serves the Hub read
 * API, over loopback): 202 with the job and its Location, the job done, a
 * published version whose upstream names the repository and commit and whose file
 * has the source's SHA-256; the same commit again is already mirrored (the same
 * version), and the draft it left empty is the next mirror's. Then the refusals with the status and
 * reason openapi.yaml names. (The whole story, against a second server: tests/mirror/run.sh.) */
#include "harness.h"

#define DST "/v1/models/acme/dst/mirror"

static const char *write_acme, *read_acme, *write_other;
static char source_sha[65];

static json_t *wait_job(const char *location)
{
    for (int i = 0; i < 1000; i++) {
        it_response r = it_get(location);
        const char *s = it_json_str(&r, "state");
        if (s != NULL && (strcmp(s, "done") == 0 || strcmp(s, "failed") == 0)) {
            json_t *job = json_incref(r.json);
            it_response_free(&r);
            return job;
        }
        it_response_free(&r);
        usleep(20 * 1000);
    }
    return NULL;
}

static json_t *post_mirror(void)
{
    char body[512];
    snprintf(body, sizeof body, "{\"endpoint\":\"%s\",\"repo\":\"acme/src\",\"revision\":\"main\"}",
             it_srv.base);
    it_response r = it_send_json("POST", DST, write_acme, body);
    CHECK_STATUS(r, 202);
    CHECK_STR(it_json_str(&r, "kind"), "mirror");
    char location[128] = "";
    it_header(&r, "Location", location, sizeof location);
    it_response_free(&r);
    json_t *job = wait_job(location);
    CHECK(job != NULL);
    return job;
}

TEST(mirror_own_model)
{
    json_t *job = post_mirror();
    CHECK_STR(json_string_value(json_object_get(job, "state")), "done");
    long long number = it_json_int(job, "version");
    json_t *result = json_object_get(job, "result");
    CHECK_EQ_U64(json_integer_value(json_object_get(result, "fetched_files")), 1);
    CHECK(json_is_false(json_object_get(result, "already_mirrored")));
    json_decref(job);
    char path[128];
    snprintf(path, sizeof path, "/v1/models/acme/dst/versions/%lld", number);
    it_response r = it_get(path);
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "state"), "published");
    json_t *upstream = r.json ? json_object_get(r.json, "upstream") : NULL;
    CHECK_STR(json_string_value(json_object_get(upstream, "repo")), "acme/src");
    CHECK_STR(json_string_value(json_object_get(upstream, "endpoint")), it_srv.base);
    CHECK(strlen(json_string_value(json_object_get(upstream, "commit")) ?: "") == 40);
    json_t *file = json_array_get(json_object_get(r.json, "files"), 0);
    CHECK_STR(json_string_value(json_object_get(file, "sha256")), source_sha);
    it_response_free(&r);
    /* the same commit again: that version, nothing new */
    job = post_mirror();
    CHECK_STR(json_string_value(json_object_get(job, "state")), "done");
    CHECK_EQ_U64((uint64_t)it_json_int(job, "version"), (uint64_t)number);
    CHECK(json_is_true(json_object_get(json_object_get(job, "result"), "already_mirrored")));
    long long idle = it_json_int(job, "source_version");
    json_decref(job);
    /* that run left its draft empty: the next one fills the same draft */
    job = post_mirror();
    CHECK_EQ_U64((uint64_t)it_json_int(job, "source_version"), (uint64_t)idle);
    json_decref(job);
}

TEST(mirror_refused)
{
    static const char good[] = "{\"endpoint\":\"http://127.0.0.1:1\",\"repo\":\"a/b\"}";
    it_response r = it_send_json("POST", DST, write_acme, "{\"repo\":\"a/b\"}");
    CHECK_PROBLEM(r, 400, "mirror_invalid");
    it_response_free(&r);
    r = it_send_json("POST", DST, write_acme,
                     "{\"endpoint\":\"http://127.0.0.1:1\",\"repo\":\"a b\"}");
    CHECK_PROBLEM(r, 400, "mirror_invalid");
    it_response_free(&r);
    r = it_send_json("POST", DST, write_acme,
                     "{\"endpoint\":\"http://127.0.0.1:1\",\"repo\":\"a/b\",\"revision\":\"x@y\"}");
    CHECK_PROBLEM(r, 400, "mirror_invalid");
    it_response_free(&r);
    r = it_send_json("POST", DST, write_acme,
                     "{\"endpoint\":\"http://127.0.0.1:1\",\"repo\":\"a/b\",\"allow_partial\":1}");
    CHECK_PROBLEM(r, 400, "mirror_invalid");
    it_response_free(&r);
    r = it_send_json("POST", DST, write_acme,
                     "{\"endpoint\":\"http://u:p@127.0.0.1:1\",\"repo\":\"a/b\"}");
    CHECK_PROBLEM(r, 400, "mirror_invalid");
    it_response_free(&r);
    r = it_send_json("POST", DST, write_acme, "{\"endpoint\":\"nope\",\"repo\":\"a/b\"}");
    CHECK_PROBLEM(r, 400, "import_url_invalid");
    it_response_free(&r);
    r = it_send_json("POST", DST, write_acme,
                     "{\"endpoint\":\"ftp://127.0.0.1\",\"repo\":\"a/b\"}");
    CHECK_PROBLEM(r, 422, "import_scheme_forbidden");
    it_response_free(&r);
    r = it_send_json("POST", DST, write_acme,
                     "{\"endpoint\":\"http://10.0.0.1\",\"repo\":\"a/b\"}");
    CHECK_PROBLEM(r, 422, "import_address_forbidden");
    it_response_free(&r);
    r = it_send_json("POST", DST, write_acme,
                     "{\"endpoint\":\"http://127.0.0.1:1\",\"repo\":\"a/b\",\"more\":1}");
    CHECK_STATUS(r, 400);
    it_response_free(&r);
    r = it_send_json("POST", DST, read_acme, good);
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_send_json("POST", DST, write_other, good);
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_send_json("POST", DST, NULL, good);
    CHECK_STATUS(r, 401);
    it_response_free(&r);
    r = it_send_json("POST", "/v1/models/acme/none/mirror", write_acme, good);
    CHECK_PROBLEM(r, 404, "model_not_found");
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    static const char *const flags[] = {"--import-allow", "127.0.0.1/32", NULL};
    it_init(argc, argv, flags);
    write_acme = it_token("write", "acme");
    read_acme = it_token("read", "acme");
    write_other = it_token("write", "other");
    it_tensor_spec t[] = {{"l.weight", "F32", 2, {16, 16}}};
    it_buf file = {0};
    it_build_safetensors(&file, t, 1, NULL, 7);
    it_sha256_hex(file.data, file.len, source_sha);
    CHECK_EQ_U64(it_make_version(write_acme, "acme/src", "model.safetensors", &file, true), 1);
    it_buf_free(&file);
    it_response r = it_send_json("POST", "/v1/models", write_acme, "{\"name\":\"acme/dst\"}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    RUN(mirror_own_model);
    RUN(mirror_refused);
    return it_finish(argv[0]);
}
