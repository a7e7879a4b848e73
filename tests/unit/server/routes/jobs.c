/* server/routes/jobs.c, black-box: GET /v1/jobs, GET and DELETE /v1/jobs/{id}
 * against the real server through the integration harness
 * (tests/integration/harness.h), one server for the program. Each route's main
 * success path, and refusals with the status and reason openapi.yaml names. */
#include "harness.h"

static const char *write_acme, *write_any, *write_other;
static long long job;

static bool job_done(void)
{
    char url[64];
    snprintf(url, sizeof url, "/v1/jobs/%lld", job);
    for (int i = 0; i < 1000; i++) {
        it_response r = it_get(url);
        const char *state = it_json_str(&r, "state");
        bool done = state != NULL && strcmp(state, "done") == 0;
        it_response_free(&r);
        if (done)
            return true;
        usleep(20 * 1000);
    }
    return false;
}

TEST(get_job)
{
    CHECK(job_done());
    char url[64];
    snprintf(url, sizeof url, "/v1/jobs/%lld", job);
    it_response r = it_get(url);
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(it_json_int(r.json, "id"), job);
    CHECK_STR(it_json_str(&r, "state"), "done");
    CHECK_STR(it_json_str(&r, "model"), "acme/jobs");
    CHECK_EQ_U64(it_json_int(r.json, "version"), 2);
    it_response_free(&r);
    r = it_get("/v1/jobs/999999");
    CHECK_PROBLEM(r, 404, "job_not_found");
    it_response_free(&r);
    r = it_get("/v1/jobs/abc");
    CHECK_PROBLEM(r, 404, "job_not_found");
    it_response_free(&r);
}

TEST(list_jobs)
{
    it_response r = it_get("/v1/jobs?state=done&model=acme/jobs");
    CHECK_STATUS(r, 200);
    json_t *jobs = json_object_get(r.json, "jobs");
    CHECK_EQ_U64(json_array_size(jobs), 1);
    CHECK_EQ_U64(it_json_int(json_array_get(jobs, 0), "id"), job);
    it_response_free(&r);
    r = it_get("/v1/jobs?state=queued");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "jobs")), 0);
    it_response_free(&r);
    r = it_get("/v1/jobs?state=sleeping");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = it_get("/v1/jobs?model=no-slash");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
}

TEST(cancel_job)
{
    char url[64];
    snprintf(url, sizeof url, "/v1/jobs/%lld", job);
    /* a finished job cannot be cancelled */
    it_response r = it_send("DELETE", url, write_acme, NULL, 0);
    CHECK_PROBLEM(r, 409, "job_finished");
    it_response_free(&r);
    r = it_send("DELETE", url, NULL, NULL, 0);
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    /* an unknown id is 404 job_not_found for every write token, a namespace's own too */
    r = it_send("DELETE", "/v1/jobs/999999", write_any, NULL, 0);
    CHECK_PROBLEM(r, 404, "job_not_found");
    it_response_free(&r);
    r = it_send("DELETE", "/v1/jobs/999999", write_acme, NULL, 0);
    CHECK_PROBLEM(r, 404, "job_not_found");
    it_response_free(&r);
    r = it_send("DELETE", "/v1/jobs/999999", write_other, NULL, 0);
    CHECK_PROBLEM(r, 404, "job_not_found");
    it_response_free(&r);
    /* another namespace's job, readable by all (reads are open): 403, not a cancel */
    r = it_send("DELETE", url, write_other, NULL, 0);
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
}

/* A conversion's JSON holds its own members, not an import's. */
TEST(convert_job_members)
{
    char url[64];
    snprintf(url, sizeof url, "/v1/jobs/%lld", job);
    it_response r = it_get(url);
    CHECK_STR(it_json_str(&r, "kind"), "convert");
    CHECK_STR(it_json_str(&r, "dtype"), "BF16");
    CHECK(r.json != NULL && json_is_array(json_object_get(r.json, "tensors")));
    CHECK(r.json != NULL && json_object_get(r.json, "source_url") == NULL);
    CHECK(r.json != NULL && json_object_get(r.json, "path") == NULL);
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    write_acme = it_token("write", "acme");
    write_any = it_token("write", NULL);
    write_other = it_token("write", "other");
    it_tensor_spec t = {"w", "F32", 1, {8}};
    it_buf file = {0};
    it_build_safetensors(&file, &t, 1, NULL, 8);
    CHECK_EQ_U64(it_make_version(write_acme, "acme/jobs", "model.safetensors", &file, true), 1);
    it_buf_free(&file);
    it_response r = it_send_json("POST", "/v1/models/acme/jobs/versions/1/convert", write_acme,
                                 "{\"dtype\":\"BF16\"}");
    CHECK_STATUS(r, 202);
    job = it_json_int(r.json, "id");
    it_response_free(&r);
    RUN(get_job);
    RUN(list_jobs);
    RUN(cancel_job);
    RUN(convert_job_members);
    return it_finish(argv[0]);
}
