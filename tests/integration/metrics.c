/* /metrics against a real server, scraped before and after some requests: HEAD is
 * counted as HEAD (not as GET), each route has a latency histogram (_bucket with
 * cumulative le buckets ending at +Inf, _sum, _count) that grows by the requests
 * made; the conversion jobs by state (tensorgate_jobs) count a new job; the bytes of
 * resident preloads per device (tensorgate_preload_resident_bytes) grow by a preload
 * that became resident; and every JSON or problem+json body ends with a newline, its
 * Content-Length counting it. */
#include "harness.h"

/* The value of the sample line that starts with `series` (labels included), or -1. */
static long long sample(const char *text, const char *series)
{
    char key[512];
    snprintf(key, sizeof key, "\n%s ", series);
    const char *at = text ? strstr(text, key) : NULL;
    return at ? strtoll(at + strlen(key), NULL, 10) : -1;
}

static char *scrape(void)
{
    it_response r = it_get("/metrics");
    CHECK(r.status == 200);
    char *text = NULL;
    if (r.body.data != NULL) {
        text = malloc(r.body.len + 2);
        if (text != NULL) {
            text[0] = '\n'; /* the first line matches "\nNAME" too */
            memcpy(text + 1, r.body.data, r.body.len);
            text[r.body.len + 1] = '\0';
        }
    }
    it_response_free(&r);
    return text;
}

#define MODELS_GET "{method=\"GET\",route=\"/v1/models\""
#define MODELS_HEAD "{method=\"HEAD\",route=\"/v1/models\""

static long long zero_if_absent(long long v)
{
    return v < 0 ? 0 : v;
}

static void head_is_counted_as_head_and_latency_is_a_histogram(void)
{
    char *before = scrape();
    CHECK(before != NULL);
    for (int i = 0; i < 3; i++) {
        it_response r = it_request("HEAD", "/v1/models", NULL);
        CHECK(r.status == 200);
        it_response_free(&r);
    }
    it_response g = it_get("/v1/models");
    CHECK(g.status == 200);
    it_response_free(&g);

    long long head_before =
        zero_if_absent(sample(before, "tensorgate_requests_total" MODELS_HEAD ",status=\"200\"}"));
    long long get_before =
        zero_if_absent(sample(before, "tensorgate_requests_total" MODELS_GET ",status=\"200\"}"));
    /* A request is counted when libmicrohttpd reports it completed, which on a
     * loaded machine can come after the client has its answer and sent the next
     * request to another worker thread: scrape again (for at most 5 s) until the
     * last request shows, then compare exactly. */
    char *after = NULL;
    long long head_after = -1, get_after = -1;
    for (int tries = 0; tries < 100; tries++) {
        free(after);
        after = scrape();
        CHECK(after != NULL);
        if (after == NULL)
            break;
        head_after = sample(after, "tensorgate_requests_total" MODELS_HEAD ",status=\"200\"}");
        get_after = sample(after, "tensorgate_requests_total" MODELS_GET ",status=\"200\"}");
        if (head_after - head_before >= 3 && get_after - get_before >= 1)
            break;
        usleep(50 * 1000);
    }
    if (after == NULL) {
        free(before);
        return;
    }
    CHECK(head_after - head_before == 3);
    CHECK(get_after - get_before == 1);

    CHECK(strstr(after, "\n# TYPE tensorgate_request_duration_seconds histogram\n") != NULL);
    const char *rows[] = {MODELS_GET, MODELS_HEAD};
    long long grew[] = {1, 3};
    for (int k = 0; k < 2; k++) {
        char series[256];
        snprintf(series, sizeof series, "tensorgate_request_duration_seconds_count%s}", rows[k]);
        long long count_before = zero_if_absent(sample(before, series));
        long long count_after = sample(after, series);
        CHECK(count_after - count_before == grew[k]);
        snprintf(series, sizeof series, "tensorgate_request_duration_seconds_bucket%s,le=\"+Inf\"}",
                 rows[k]);
        CHECK(sample(after, series) == count_after);
        snprintf(series, sizeof series, "tensorgate_request_duration_seconds_sum%s}", rows[k]);
        CHECK(sample(after, series) >= 0);
        /* cumulative buckets: each le is at most the next */
        snprintf(series, sizeof series,
                 "tensorgate_request_duration_seconds_bucket%s,le=\"0.001\"}", rows[k]);
        long long small = sample(after, series);
        snprintf(series, sizeof series, "tensorgate_request_duration_seconds_bucket%s,le=\"10\"}",
                 rows[k]);
        long long large = sample(after, series);
        CHECK(small >= 0 && small <= large && large <= count_after);
    }
    free(before);
    free(after);
}

static void check_ends_with_newline(const char *method, const char *path, const char *token,
                                    const char *json_text, long want_status)
{
    it_response r = it_send_json(method, path, token, json_text);
    CHECK(r.status == want_status);
    CHECK(r.body.len > 0 && ((const char *)r.body.data)[r.body.len - 1] == '\n');
    char length[32];
    CHECK(it_header(&r, "Content-Length", length, sizeof length) != NULL &&
          (size_t)strtoll(length, NULL, 10) == r.body.len);
    it_response_free(&r);
}

static void json_bodies_end_with_a_newline(void)
{
    const char *token = it_token("write", "acme");
    check_ends_with_newline("GET", "/v1/models", NULL, NULL, 200);           /* JSON */
    check_ends_with_newline("GET", "/v1/models/acme/none", NULL, NULL, 404); /* problem */
    check_ends_with_newline("POST", "/v1/models", token, "{\"name\":", 400); /* bad JSON */
    check_ends_with_newline("POST", "/v1/models", token, "{\"name\":\"acme/m\"}", 201);
    check_ends_with_newline("POST", "/v1/models", NULL, "{\"name\":\"acme/n\"}", 401);
}

static long long jobs_total(const char *text)
{
    static const char *const states[] = {"queued", "running", "done", "failed"};
    long long total = 0;
    for (int i = 0; i < 4; i++) {
        char series[64];
        snprintf(series, sizeof series, "tensorgate_jobs{state=\"%s\"}", states[i]);
        long long v = sample(text, series);
        CHECK(v >= 0);
        total += v < 0 ? 0 : v;
    }
    return total;
}

static long long resident_host_bytes(void)
{
    char *text = scrape();
    long long v = sample(text, "tensorgate_preload_resident_bytes{device=\"host\"}");
    free(text);
    return v;
}

static void jobs_and_preloads_are_counted(void)
{
    const char *token = it_token("write", NULL);
    it_tensor_spec t[] = {{"w", "F32", 2, {8, 8, 0, 0}}};
    it_buf file = {0};
    it_build_safetensors(&file, t, 1, NULL, 7);
    CHECK(it_make_version(token, "acme/jm", "model.safetensors", &file, true) == 1);
    it_buf_free(&file);

    char *before = scrape();
    long long jobs_before = jobs_total(before);
    free(before);
    it_response r =
        it_send_json("POST", "/v1/models/acme/jm/versions/1/convert", token, "{\"dtype\":\"F16\"}");
    CHECK(r.status == 202);
    it_response_free(&r);
    char *after = scrape();
    CHECK(jobs_total(after) == jobs_before + 1);
    free(after);

    CHECK(resident_host_bytes() == 0);
    r = it_send_json("POST", "/v1/preloads", token, "{\"model\":\"acme/jm\",\"version\":1}");
    CHECK(r.status == 202 || r.status == 201);
    it_response_free(&r);
    long long resident = 0;
    for (int i = 0; i < 500 && resident <= 0; i++) {
        resident = resident_host_bytes();
        if (resident <= 0)
            usleep(20 * 1000);
    }
    CHECK(resident >= 8 * 8 * 4);
}

int main(int argc, char **argv)
{
    static const char *const flags[] = {"--preload-budget-host", "1048576", NULL};
    it_init(argc, argv, flags);
    RUN(head_is_counted_as_head_and_latency_is_a_histogram);
    RUN(json_bodies_end_with_a_newline);
    RUN(jobs_and_preloads_are_counted);
    return it_finish(argv[0]);
}
