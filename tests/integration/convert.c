/* Integration tests of POST .../versions/{rev}/convert and /v1/jobs: a derived
 * version with converted shards (values checked against /usr/bin/python3 torch
 * .to() by tests/convert/check_values.py), a rewritten index, carried-over files
 * (same blobs); the request errors; jobs cut by kill -9 of the server: resumed to
 * completion after the restart or, after too many interruptions, marked failed,
 * never a half version, tmp/ cleaned; cancelled jobs (queued and running: no
 * version, latest unmoved, tmp/ clean), an equal POST answered with the running
 * job; the job list's filters, pages and read rule. */
#include "harness.h"

static const char *token;

#define BASE "/v1/models"

/* Deterministic bits: ~1/8 special F32 values (NaN payloads, +-Inf, subnormals,
 * FLT_MAX, rounding ties), the rest random bit patterns of all exponents. */
static uint32_t f32_bits(uint32_t *state)
{
    static const uint32_t specials[] = {
        0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fbfffffu, /* NaNs: quiet, signed, signalling */
        0x7f800000u, 0xff800000u,                           /* +-Inf */
        0x00000001u, 0x807fffffu, 0x00400000u,              /* subnormals */
        0x7f7fffffu, 0xff7fffffu,                           /* +-FLT_MAX: BF16 rounds up to Inf */
        0x3f808000u, 0x3f818000u, 0x3f80ffffu,              /* BF16 ties to even, and just below */
        0x47800000u, 0x477ff000u, 0x38800000u, 0x33800000u, /* F16 overflow, max, tiny, half-min */
        0x00000000u, 0x80000000u,                           /* +-0 */
    };
    *state = *state * 1103515245u + 12345u;
    uint32_t pick = *state >> 16;
    *state = *state * 1103515245u + 12345u;
    uint32_t random_bits = (*state & 0xffff0000u) | (pick & 0xffffu);
    if (pick % 8 == 0)
        return specials[(pick / 8) % (sizeof specials / sizeof specials[0])];
    return random_bits;
}

/* A safetensors file whose float data are f32_bits (F32) or their F16 truncation. */
static void build_values(it_buf *out, const it_tensor_spec *t, int count, const char *metadata,
                         unsigned seed)
{
    it_build_safetensors(out, t, count, metadata, seed);
    uint64_t offset = 8 + it_header_len(out);
    uint32_t state = seed * 2654435761u + 7;
    for (int i = 0; i < count; i++) {
        uint64_t elements = 1;
        for (int d = 0; d < t[i].ndim; d++)
            elements *= t[i].shape[d];
        uint64_t width = it_dtype_bytes(t[i].dtype);
        for (uint64_t e = 0; e < elements; e++) {
            uint32_t bits = f32_bits(&state);
            if (strcmp(t[i].dtype, "F32") == 0)
                memcpy(out->data + offset + e * 4, &bits, 4);
            else if (strcmp(t[i].dtype, "F16") == 0 || strcmp(t[i].dtype, "BF16") == 0) {
                uint16_t half = (uint16_t)(bits >> 16);
                memcpy(out->data + offset + e * 2, &half, 2);
            }
        }
        offset += elements * width;
    }
}

static it_response put_file(const char *model, int version, const char *path, const it_buf *b)
{
    char url[512];
    snprintf(url, sizeof url, BASE "/%s/versions/%d/files/%s", model, version, path);
    return it_send("PUT", url, token, b->data, b->len);
}

/* Creates model org/name with version 1 holding files, and publishes it. */
static void publish_model(const char *model, const char *const *paths, const it_buf *files,
                          int count)
{
    char body[256], url[256];
    snprintf(body, sizeof body, "{\"name\":\"%s\"}", model);
    it_response r = it_send_json("POST", BASE, token, body);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    snprintf(url, sizeof url, BASE "/%s/versions", model);
    r = it_send_json("POST", url, token, NULL);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    for (int i = 0; i < count; i++) {
        r = put_file(model, 1, paths[i], &files[i]);
        CHECK_STATUS(r, 201);
        it_response_free(&r);
    }
    snprintf(url, sizeof url, BASE "/%s/versions/1/publish", model);
    r = it_send_json("POST", url, token, NULL);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
}

/* POST convert; returns the job id (0 on failure). */
static long long start_convert(const char *model, const char *rev, const char *body)
{
    char url[256];
    snprintf(url, sizeof url, BASE "/%s/versions/%s/convert", model, rev);
    it_response r = it_send_json("POST", url, token, body);
    CHECK_STATUS(r, 202);
    long long id = r.json ? it_json_int(r.json, "id") : 0;
    char location[128], expected[64];
    it_header(&r, "Location", location, sizeof location);
    snprintf(expected, sizeof expected, "/v1/jobs/%lld", id);
    CHECK_STR(location, expected);
    const char *state = it_json_str(&r, "state");
    CHECK(state != NULL && (strcmp(state, "queued") == 0 || strcmp(state, "running") == 0 ||
                            strcmp(state, "done") == 0));
    it_response_free(&r);
    return id > 0 ? id : 0;
}

static it_response get_job(long long id)
{
    char url[64];
    snprintf(url, sizeof url, "/v1/jobs/%lld", id);
    return it_get(url);
}

/* Polls the job until it is done or failed (or 60 s); returns the last response. */
static it_response wait_job(long long id)
{
    it_response r = {0};
    for (int i = 0; i < 3000; i++) {
        it_response_free(&r);
        r = get_job(id);
        const char *state = it_json_str(&r, "state");
        if (r.status != 200 || state == NULL || strcmp(state, "done") == 0 ||
            strcmp(state, "failed") == 0)
            return r;
        usleep(20 * 1000);
    }
    return r;
}

static long long progress_of(const it_response *r, const char *key)
{
    return r->json ? it_json_int(json_object_get(r->json, "progress"), key) : -1;
}

/* Downloads a file of a version into dir/name; returns its bytes in out. */
static bool download(const char *model, int version, const char *path, const char *file,
                     it_buf *out)
{
    char url[512];
    snprintf(url, sizeof url, BASE "/%s/versions/%d/files/%s", model, version, path);
    it_response r = it_get(url);
    bool ok = r.status == 200;
    out->len = 0;
    if (ok)
        it_buf_append(out, r.body.data, r.body.len);
    FILE *f = ok ? fopen(file, "wb") : NULL;
    if (f != NULL) {
        ok = fwrite(r.body.data, 1, r.body.len, f) == r.body.len;
        fclose(f);
    } else {
        ok = false;
    }
    it_response_free(&r);
    return ok;
}

/* Runs the torch value check on version 1's and version N's copies of path. */
static void check_values(const char *model, int version, const char *path, const char *dtype,
                         const char *globs)
{
    char source[400], converted[400];
    snprintf(source, sizeof source, "%s/src-%s", it_srv.root, path);
    snprintf(converted, sizeof converted, "%s/v%d-%s", it_srv.root, version, path);
    it_buf a = {0}, b = {0};
    CHECK(download(model, 1, path, source, &a));
    CHECK(download(model, version, path, converted, &b));
    char command[1400];
    snprintf(command, sizeof command,
             "/usr/bin/python3 tests/convert/check_values.py '%s' '%s' %s '%s' >&2", source,
             converted, dtype, globs);
    int status = system(command);
    CHECK(status == 0);
    it_buf_free(&a);
    it_buf_free(&b);
}

static json_t *get_json(const char *url, long *status)
{
    it_response r = it_get(url);
    *status = r.status;
    json_t *value = r.json ? json_incref(r.json) : NULL;
    it_response_free(&r);
    return value;
}

static const json_t *file_entry(const json_t *version, const char *path)
{
    const json_t *files = json_object_get(version, "files");
    for (size_t i = 0; i < json_array_size(files); i++) {
        const json_t *f = json_array_get(files, i);
        if (strcmp(json_string_value(json_object_get(f, "path")), path) == 0)
            return f;
    }
    return NULL;
}

static const char *sha_of(const json_t *version, const char *path)
{
    const json_t *f = file_entry(version, path);
    return f ? json_string_value(json_object_get(f, "sha256")) : "";
}

/* ---- the sharded model every value test uses ---- */

static const it_tensor_spec shard1[] = {
    {"a.weight", "F32", 2, {64, 33}},
    {"a.bias", "F32", 1, {33}},
    {"emb.weight", "F16", 2, {16, 8}},
    {"empty.weight", "F32", 2, {0, 4}},
};
static const it_tensor_spec shard2[] = {
    {"b.weight", "F32", 2, {40, 40}},
    {"pos", "I64", 1, {10}},
    {"scale.weight", "BF16", 0, {0}},
};
static const char *const paths[] = {"model-00001-of-00002.safetensors",
                                    "model-00002-of-00002.safetensors",
                                    "model.safetensors.index.json", "config.json"};
static it_buf files[4];

static void build_model(void)
{
    build_values(&files[0], shard1, 4, "{\"format\":\"pt\"}", 1);
    build_values(&files[1], shard2, 3, NULL, 2);
    uint64_t total = (files[0].len - 8 - it_header_len(&files[0])) +
                     (files[1].len - 8 - it_header_len(&files[1]));
    it_buf_printf(
        &files[2],
        "{\n  \"metadata\": {\"total_size\": %llu, \"note\": \"kept\"},\n  \"weight_map\": {\n"
        "    \"a.weight\": \"%s\", \"a.bias\": \"%s\", \"emb.weight\": \"%s\",\n"
        "    \"empty.weight\": \"%s\", \"b.weight\": \"%s\", \"pos\": \"%s\",\n"
        "    \"scale.weight\": \"%s\"\n  }\n}\n",
        (unsigned long long)total, paths[0], paths[0], paths[0], paths[0], paths[1], paths[1],
        paths[1]);
    it_buf_printf(&files[3], "{\"architectures\":[\"Test\"]}\n");
}

TEST(derived_version_bf16)
{
    publish_model("acme/conv", paths, files, 4);
    long long id =
        start_convert("acme/conv", "latest", "{\"dtype\":\"BF16\",\"tensors\":[\"*.weight\"]}");
    it_response r = wait_job(id);
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "state"), "done");
    CHECK_EQ_U64(it_json_int(r.json, "version"), 2);
    CHECK_EQ_U64(it_json_int(r.json, "source_version"), 1);
    CHECK_STR(it_json_str(&r, "dtype"), "BF16");
    CHECK_STR(it_json_str(&r, "version_url"), "/v1/models/acme/conv/versions/2");
    CHECK(json_is_null(json_object_get(r.json, "error")));
    CHECK(progress_of(&r, "bytes_total") > 0);
    CHECK(progress_of(&r, "bytes_done") == progress_of(&r, "bytes_total"));
    it_response_free(&r);

    long status;
    json_t *v1 = get_json(BASE "/acme/conv/versions/1", &status);
    json_t *v2 = get_json(BASE "/acme/conv/versions/2", &status);
    CHECK(status == 200 && v1 != NULL && v2 != NULL);
    if (v1 == NULL || v2 == NULL)
        return;
    CHECK_STR(json_string_value(json_object_get(v2, "state")), "published");
    CHECK_EQ_U64(json_integer_value(json_object_get(v2, "derived_from")), 1);
    CHECK_STR(json_string_value(json_object_get(v2, "dtype")), "BF16");
    CHECK(json_is_null(json_object_get(v1, "derived_from")));
    CHECK(json_is_null(json_object_get(v1, "dtype")));
    const char *digest = json_string_value(json_object_get(v2, "digest"));
    CHECK(digest != NULL && strlen(digest) == 64);
    CHECK_EQ_U64(json_array_size(json_object_get(v2, "files")), 4);
    /* carried over: the same blob */
    CHECK_STR(sha_of(v2, "config.json"), sha_of(v1, "config.json"));
    /* converted: new blobs, stored */
    for (int i = 0; i < 3; i++) {
        CHECK(strcmp(sha_of(v2, paths[i]), sha_of(v1, paths[i])) != 0);
        CHECK(it_blob_exists(sha_of(v2, paths[i])));
    }
    const json_t *made = file_entry(v2, paths[0]);
    CHECK_EQ_U64(json_integer_value(json_object_get(made, "tensors")), 4);
    CHECK(json_integer_value(json_object_get(made, "nan")) > 0); /* NaNs stay NaN */
    /* the derived version resolves by number, digest and latest */
    char url[256];
    snprintf(url, sizeof url, BASE "/acme/conv/versions/%s", digest ? digest : "x");
    json_t *by_digest = get_json(url, &status);
    CHECK(status == 200 && json_integer_value(json_object_get(by_digest, "version")) == 2);
    json_decref(by_digest);
    json_t *latest = get_json(BASE "/acme/conv/versions/latest", &status);
    CHECK(status == 200 && json_integer_value(json_object_get(latest, "version")) == 2);
    json_decref(latest);

    /* values: torch .to() of the originals, bit for bit */
    check_values("acme/conv", 2, paths[0], "BF16", "*.weight");
    check_values("acme/conv", 2, paths[1], "BF16", "*.weight");

    /* the index: same map and other metadata, total_size = the new shards' tensor bytes */
    it_buf index = {0}, s1 = {0}, s2 = {0};
    char scratch[400];
    snprintf(scratch, sizeof scratch, "%s/scratch", it_srv.root);
    CHECK(download("acme/conv", 2, paths[2], scratch, &index));
    CHECK(download("acme/conv", 2, paths[0], scratch, &s1));
    CHECK(download("acme/conv", 2, paths[1], scratch, &s2));
    json_t *new_index = json_loadb((const char *)index.data, index.len, 0, NULL);
    json_t *old_index = json_loadb((const char *)files[2].data, files[2].len, 0, NULL);
    uint64_t data_bytes = (s1.len - 8 - it_header_len(&s1)) + (s2.len - 8 - it_header_len(&s2));
    json_t *metadata = json_object_get(new_index, "metadata");
    CHECK_EQ_U64(json_integer_value(json_object_get(metadata, "total_size")), data_bytes);
    CHECK_STR(json_string_value(json_object_get(metadata, "note")), "kept");
    CHECK(json_equal(json_object_get(new_index, "weight_map"),
                     json_object_get(old_index, "weight_map")));
    CHECK(data_bytes < files[0].len + files[1].len);
    json_decref(new_index);
    json_decref(old_index);
    it_buf_free(&index);
    it_buf_free(&s1);
    it_buf_free(&s2);
    json_decref(v1);
    json_decref(v2);
}

TEST(derived_version_f16_all_tensors)
{
    /* no globs: every floating tensor; from version 1 again (not from the BF16 one) */
    long long id = start_convert("acme/conv", "1", "{\"dtype\":\"F16\"}");
    it_response r = wait_job(id);
    CHECK_STR(it_json_str(&r, "state"), "done");
    CHECK_EQ_U64(it_json_int(r.json, "version"), 3);
    it_response_free(&r);
    check_values("acme/conv", 3, paths[0], "F16", "");
    check_values("acme/conv", 3, paths[1], "F16", "");
    long status;
    json_t *model = get_json(BASE "/acme/conv", &status);
    CHECK_EQ_U64(json_integer_value(json_object_get(json_object_get(model, "aliases"), "latest")),
                 3);
    json_decref(model);
}

TEST(request_errors)
{
    const char *url = BASE "/acme/conv/versions/1/convert";
    it_response r = it_send_json("POST", url, NULL, "{\"dtype\":\"BF16\"}");
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    r = it_send_json("POST", url, token, "{\"dtype\":\"I8\"}");
    CHECK_PROBLEM(r, 422, "unsupported_dtype");
    it_response_free(&r);
    r = it_send_json("POST", url, token, "{\"dtype\":\"F8_E8M0\"}");
    CHECK_PROBLEM(r, 422, "unsupported_dtype");
    it_response_free(&r);
    r = it_send_json("POST", url, token, "{\"dtype\":\"BF16\",\"tensors\":[\"nope.*\"]}");
    CHECK_PROBLEM(r, 422, "tensors_not_found");
    it_response_free(&r);
    r = it_send_json("POST", url, token, "{\"dtype\":\"F32\",\"tensors\":[\"pos\",\"a.*\"]}");
    CHECK_PROBLEM(r, 422, "nothing_to_convert");
    it_response_free(&r);
    r = it_send_json("POST", url, token, "{\"dtype\":\"BF16\",\"tensors\":[]}");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = it_send_json("POST", url, token, "{\"dtype\":\"BF16\",\"tensors\":[\"\"]}");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = it_send_json("POST", url, token, "{\"dtype\":\"BF16\",\"tensor\":[\"a\"]}");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = it_send_json("POST", url, token, "{\"tensors\":[\"a\"]}");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = it_send_json("POST", url, token, "{\"dtype\":");
    CHECK_PROBLEM(r, 400, "invalid_json");
    it_response_free(&r);
    r = it_send_json("POST", BASE "/acme/conv/versions/9/convert", token, "{\"dtype\":\"BF16\"}");
    CHECK_PROBLEM(r, 404, "version_not_found");
    it_response_free(&r);
    r = it_send_json("POST", BASE "/acme/none/versions/1/convert", token, "{\"dtype\":\"BF16\"}");
    CHECK_PROBLEM(r, 404, "model_not_found");
    it_response_free(&r);
    /* a draft cannot be converted */
    r = it_send_json("POST", BASE "/acme/conv/versions", token, NULL);
    CHECK_STATUS(r, 201);
    long long draft = r.json ? it_json_int(r.json, "version") : 0;
    it_response_free(&r);
    char draft_url[128];
    snprintf(draft_url, sizeof draft_url, BASE "/acme/conv/versions/%lld/convert", draft);
    r = it_send_json("POST", draft_url, token, "{\"dtype\":\"BF16\"}");
    CHECK_PROBLEM(r, 409, "version_not_published");
    it_response_free(&r);
    r = it_get("/v1/jobs/999999");
    CHECK_PROBLEM(r, 404, "job_not_found");
    it_response_free(&r);
    r = it_get("/v1/jobs/abc");
    CHECK_PROBLEM(r, 404, "job_not_found");
    it_response_free(&r);
    r = it_get(url);
    CHECK_PROBLEM(r, 405, "method_not_allowed");
    it_response_free(&r);
}

/* ---- interrupted jobs ---- */

/* mirrors TG_CONVERT_MAX_ATTEMPTS: the job fails at the start after this many kills */
#define TG_IT_ATTEMPTS 3

static const it_tensor_spec big1[] = {{"x.weight", "F32", 2, {512, 1024}}};
static const it_tensor_spec big2[] = {{"y.weight", "F32", 2, {512, 1024}}};
static const char *const big_paths[] = {"model-00001-of-00002.safetensors",
                                        "model-00002-of-00002.safetensors", "config.json"};
static it_buf big_files[3];

static void restart(const char *delay_ms)
{
    it_kill_server();
    if (delay_ms)
        setenv("TENSORGATE_TEST_CONVERT_DELAY_MS", delay_ms, 1);
    else
        unsetenv("TENSORGATE_TEST_CONVERT_DELAY_MS");
    if (it_server_start_args(NULL, NULL) != 0) {
        it_dump_log(it_srv.log);
        fprintf(stderr, "the server did not restart\n");
        exit(2);
    }
}

/* Waits until the job runs with the given attempt count and bytes_done >= at_least. */
static bool wait_running(long long id, long long attempts, long long at_least)
{
    for (int i = 0; i < 1500; i++) {
        it_response r = get_job(id);
        const char *state = it_json_str(&r, "state");
        bool ok = state && strcmp(state, "running") == 0 &&
                  it_json_int(r.json, "attempts") == attempts &&
                  progress_of(&r, "bytes_done") >= at_least;
        it_response_free(&r);
        if (ok)
            return true;
        usleep(10 * 1000);
    }
    return false;
}

/* Only version 1 is visible, by every route. */
static void check_no_half_version(const char *model)
{
    char url[256];
    long status;
    snprintf(url, sizeof url, BASE "/%s", model);
    json_t *m = get_json(url, &status);
    CHECK_EQ_U64(json_array_size(json_object_get(m, "versions")), 1);
    CHECK_EQ_U64(json_integer_value(json_object_get(json_object_get(m, "aliases"), "latest")), 1);
    json_decref(m);
    snprintf(url, sizeof url, BASE "/%s/versions/2", model);
    it_response r = it_get(url);
    CHECK_PROBLEM(r, 404, "version_not_found");
    it_response_free(&r);
}

static bool log_contains(const char *needle)
{
    FILE *f = fopen(it_srv.log, "r");
    if (f == NULL)
        return false;
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof line, f) != NULL)
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

TEST(kill_9_mid_job_resumes)
{
    build_values(&big_files[0], big1, 1, NULL, 11);
    build_values(&big_files[1], big2, 1, NULL, 12);
    it_buf_printf(&big_files[2], "{}\n");
    publish_model("acme/big", big_paths, big_files, 3);
    restart("20"); /* 64 KiB steps, 20 ms each: a shard takes ~0.6 s */
    long long id = start_convert("acme/big", "1", "{\"dtype\":\"BF16\"}");
    /* past the first shard (1 MiB + header), inside the second */
    CHECK(wait_running(id, 1, (1 << 20) + 64 * 1024));
    check_no_half_version("acme/big");
    restart(NULL); /* kill -9, then start again */
    it_response r = wait_job(id);
    CHECK_STR(it_json_str(&r, "state"), "done");
    CHECK_EQ_U64(it_json_int(r.json, "attempts"), 2);
    CHECK_EQ_U64(it_json_int(r.json, "version"), 2);
    it_response_free(&r);
    CHECK(log_contains("resuming at"));
    check_values("acme/big", 2, big_paths[0], "BF16", "");
    check_values("acme/big", 2, big_paths[1], "BF16", "");
    /* nothing left over: no temp files, and every blob is a file of a version */
    CHECK_EQ_U64(it_count_tmp_settled(), 0);
    it_kill_server(); /* gc wants the data directory to itself */
    char command[1000];
    snprintf(command, sizeof command,
             "'%s' gc --dry-run --data '%s' 2>/dev/null | grep -c 'would remove'", it_binary,
             it_srv.data);
    FILE *gc = popen(command, "r");
    char count[32] = "";
    if (gc != NULL) {
        if (fgets(count, sizeof count, gc) == NULL)
            count[0] = '\0';
        pclose(gc);
    }
    CHECK_STR(count, "0\n");
    restart(NULL);
}

TEST(kill_9_too_often_fails)
{
    restart("20");
    long long id = start_convert("acme/big", "1", "{\"dtype\":\"F16\",\"tensors\":[\"x.*\"]}");
    for (long long attempt = 1; attempt <= TG_IT_ATTEMPTS; attempt++) {
        CHECK(wait_running(id, attempt, 1));
        restart("20");
    }
    it_response r = wait_job(id);
    CHECK_STR(it_json_str(&r, "state"), "failed");
    json_t *error = r.json ? json_object_get(r.json, "error") : NULL;
    CHECK_STR(json_string_value(json_object_get(error, "reason")), "interrupted");
    CHECK_EQ_U64(json_integer_value(json_object_get(error, "status")), 500);
    CHECK(json_is_null(json_object_get(r.json, "version")));
    it_response_free(&r);
    /* no version 3; latest is still the resumed job's version 2 */
    long status;
    json_t *m = get_json(BASE "/acme/big", &status);
    CHECK_EQ_U64(json_array_size(json_object_get(m, "versions")), 2);
    CHECK_EQ_U64(json_integer_value(json_object_get(json_object_get(m, "aliases"), "latest")), 2);
    json_decref(m);
    CHECK_EQ_U64(it_count_tmp_settled(), 0);
}

TEST(missing_source_blob_fails_the_job)
{
    /* a first shard of 2 MiB of BF16 output: ~0.6 s at the test delay */
    static const it_tensor_spec bigger1[] = {{"x.weight", "F32", 2, {1024, 1024}}};
    it_buf parts[2] = {{0}, {0}};
    build_values(&parts[0], bigger1, 1, NULL, 21);
    build_values(&parts[1], big2, 1, NULL, 22);
    publish_model("acme/broken", big_paths, parts, 2);
    long status;
    json_t *v1 = get_json(BASE "/acme/broken/versions/1", &status);
    char blob[600];
    snprintf(blob, sizeof blob, "%s/blobs/sha256/%.2s/%s", it_srv.data, sha_of(v1, big_paths[1]),
             sha_of(v1, big_paths[1]));
    json_decref(v1);
    long long id = start_convert("acme/broken", "1", "{\"dtype\":\"BF16\"}");
    CHECK(wait_running(id, 1, 1));
    CHECK(unlink(blob) == 0); /* the second shard's source vanishes mid-job */
    it_response r = wait_job(id);
    CHECK_STR(it_json_str(&r, "state"), "failed");
    json_t *error = r.json ? json_object_get(r.json, "error") : NULL;
    CHECK_STR(json_string_value(json_object_get(error, "reason")), "source_unreadable");
    CHECK_STR(json_string_value(json_object_get(error, "type")),
              "https://tensorgate.dev/problems/source_unreadable");
    it_response_free(&r);
    check_no_half_version("acme/broken");
    CHECK_EQ_U64(it_count_tmp_settled(), 0);
    it_buf_free(&parts[0]);
    it_buf_free(&parts[1]);
}

/* ---- the job list, cancel and idempotent submission ---- */

static it_response delete_job(long long id, const char *with_token)
{
    char url[64];
    snprintf(url, sizeof url, "/v1/jobs/%lld", id);
    return it_request("DELETE", url, &(it_request_opts){.token = with_token});
}

static long long versions_of(const char *model, long long *latest)
{
    char url[256];
    long status;
    snprintf(url, sizeof url, BASE "/%s", model);
    json_t *m = get_json(url, &status);
    long long count = (long long)json_array_size(json_object_get(m, "versions"));
    *latest = json_integer_value(json_object_get(json_object_get(m, "aliases"), "latest"));
    json_decref(m);
    return count;
}

static const char *error_reason_of(const it_response *r)
{
    json_t *error = r->json ? json_object_get(r->json, "error") : NULL;
    return json_string_value(json_object_get(error, "reason"));
}

static long long error_status_of(const it_response *r)
{
    json_t *error = r->json ? json_object_get(r->json, "error") : NULL;
    return it_json_int(error, "status");
}

TEST(cancel_queued_and_running_jobs)
{
    restart("100"); /* 64 KiB steps, 100 ms each: a 1 MiB shard takes ~1.6 s */
    long long versions_before, latest_before, latest;
    versions_before = versions_of("acme/big", &latest_before);
    int blobs_before = it_count_blobs();
    long long running = start_convert("acme/big", "1", "{\"dtype\":\"F16\"}");
    /* past the first shard (its blob is in the store and in job_files) */
    CHECK(wait_running(running, 1, (1 << 20) + 64 * 1024));
    /* the same request again: the same job, not a second identical version */
    CHECK_EQ_U64(start_convert("acme/big", "1", "{\"dtype\":\"F16\"}"), running);
    /* another dtype: a new job, queued behind the running one */
    long long queued = start_convert("acme/big", "1", "{\"dtype\":\"BF16\"}");
    CHECK(queued != running && queued > 0);
    it_response r = get_job(queued);
    CHECK_STR(it_json_str(&r, "state"), "queued");
    it_response_free(&r);

    /* a queued job is cancelled at once */
    r = delete_job(queued, token);
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "state"), "failed");
    CHECK_STR(error_reason_of(&r), "cancelled");
    CHECK_EQ_U64(error_status_of(&r), 409);
    CHECK(json_is_true(json_object_get(r.json, "cancel_requested")));
    it_response_free(&r);
    r = delete_job(queued, token);
    CHECK_PROBLEM(r, 409, "job_finished");
    it_response_free(&r);

    /* only a writer of the job's org may cancel */
    r = delete_job(running, NULL);
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    r = delete_job(running, "tg_0000000000000000000000000000000000000000000000000000000000000000");
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    r = delete_job(running, it_token("read", NULL));
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = delete_job(running, it_token("write", "other"));
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);

    /* a running job: 202 as it is now, then stopped by the worker */
    r = delete_job(running, token);
    CHECK_STATUS(r, 202);
    CHECK_STR(it_json_str(&r, "state"), "running");
    CHECK(json_is_true(json_object_get(r.json, "cancel_requested")));
    CHECK(json_is_null(json_object_get(r.json, "error")));
    it_response_free(&r);
    /* a cancelled job is not the one an equal request gets */
    long long after = start_convert("acme/big", "1", "{\"dtype\":\"F16\"}");
    CHECK(after != running && after > 0);
    it_response d = delete_job(after, token);
    CHECK(d.status == 200 || d.status == 202);
    it_response_free(&d);
    r = wait_job(running);
    CHECK_STR(it_json_str(&r, "state"), "failed");
    CHECK_STR(error_reason_of(&r), "cancelled");
    CHECK_EQ_U64(error_status_of(&r), 409);
    CHECK(json_is_null(json_object_get(r.json, "version")));
    CHECK(progress_of(&r, "bytes_done") < progress_of(&r, "bytes_total"));
    it_response_free(&r);
    r = wait_job(after);
    CHECK_STR(error_reason_of(&r), "cancelled");
    it_response_free(&r);

    /* no version appeared, latest did not move, no temp file is left, and the
     * finished shard's blob is given back by the worker just after the job fails
     * (waited for, up to 3 s) */
    CHECK_EQ_U64(versions_of("acme/big", &latest), versions_before);
    CHECK_EQ_U64(latest, latest_before);
    CHECK_EQ_U64(it_count_tmp_settled(), 0);
    for (int i = 0; i < 150 && it_count_blobs() != blobs_before; i++)
        usleep(20 * 1000);
    CHECK_EQ_U64(it_count_blobs(), blobs_before);

    /* done jobs cannot be cancelled; unknown ids are 404 for a writer */
    r = it_get("/v1/jobs?state=done&limit=1");
    json_t *done = json_array_get(json_object_get(r.json, "jobs"), 0);
    long long done_id = it_json_int(done, "id");
    it_response_free(&r);
    CHECK(done_id > 0);
    r = delete_job(done_id, token);
    CHECK_PROBLEM(r, 409, "job_finished");
    it_response_free(&r);
    r = delete_job(999999, token);
    CHECK_PROBLEM(r, 404, "job_not_found");
    it_response_free(&r);
    r = it_request("DELETE", "/v1/jobs/abc", &(it_request_opts){.token = token});
    CHECK_PROBLEM(r, 404, "job_not_found");
    it_response_free(&r);
    r = delete_job(999999, NULL);
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    restart(NULL);
}

/* Walks GET /v1/jobs{query} page by page (limit 2); returns every id seen, in order. */
static size_t walk_jobs(const char *query, long long *ids, size_t cap)
{
    char url[512], cursor[256] = "";
    size_t count = 0;
    for (int page = 0; page < 100; page++) {
        snprintf(url, sizeof url, "/v1/jobs?limit=2%s%s%s", query, cursor[0] ? "&cursor=" : "",
                 cursor);
        it_response r = it_get(url);
        CHECK_STATUS(r, 200);
        json_t *jobs = r.json ? json_object_get(r.json, "jobs") : NULL;
        CHECK(json_array_size(jobs) <= 2);
        for (size_t i = 0; i < json_array_size(jobs) && count < cap; i++)
            ids[count++] = it_json_int(json_array_get(jobs, i), "id");
        const char *next =
            r.json ? json_string_value(json_object_get(r.json, "next_cursor")) : NULL;
        snprintf(cursor, sizeof cursor, "%s", next ? next : "");
        it_response_free(&r);
        if (cursor[0] == '\0')
            break;
    }
    return count;
}

/* Every job of the list matches key=value (a string member). */
static bool all_jobs_have(const char *url, const char *key, const char *value, size_t *count)
{
    it_response r = it_get(url);
    json_t *jobs = r.json ? json_object_get(r.json, "jobs") : NULL;
    bool all = r.status == 200 && json_is_array(jobs);
    for (size_t i = 0; all && i < json_array_size(jobs); i++)
        all = strcmp(json_string_value(json_object_get(json_array_get(jobs, i), key)), value) == 0;
    *count = json_array_size(jobs);
    it_response_free(&r);
    return all;
}

TEST(job_list)
{
    it_response r = it_get("/v1/jobs?limit=1000");
    CHECK_STATUS(r, 200);
    json_t *jobs = r.json ? json_object_get(r.json, "jobs") : NULL;
    size_t total = json_array_size(jobs);
    CHECK(total >= 8);
    CHECK(json_is_null(json_object_get(r.json, "next_cursor")));
    /* newest first; each item is the job as GET /v1/jobs/{id} shows it */
    json_t *newest = json_array_get(jobs, 0);
    long long newest_id = it_json_int(newest, "id");
    it_response one = get_job(newest_id);
    CHECK(one.json != NULL && json_equal(one.json, newest));
    it_response_free(&one);
    it_response_free(&r);

    /* the pages cover every job once, newest first */
    long long ids[256];
    size_t walked = walk_jobs("", ids, 256);
    CHECK_EQ_U64(walked, total);
    CHECK_EQ_U64(ids[0], newest_id);
    for (size_t i = 1; i < walked; i++)
        CHECK(ids[i] < ids[i - 1]); /* descending: no duplicate */

    /* filters, alone and together, also when paged */
    size_t done = 0, failed = 0, conv = 0, big_failed = 0, running = 0;
    CHECK(all_jobs_have("/v1/jobs?state=done", "state", "done", &done));
    CHECK(all_jobs_have("/v1/jobs?state=failed", "state", "failed", &failed));
    CHECK(all_jobs_have("/v1/jobs?state=running", "state", "running", &running));
    CHECK(all_jobs_have("/v1/jobs?model=acme/conv", "model", "acme/conv", &conv));
    CHECK(all_jobs_have("/v1/jobs?state=failed&model=acme/big", "model", "acme/big", &big_failed));
    CHECK(done >= 3 && failed >= 4 && running == 0 && conv == 2 && big_failed >= 3);
    CHECK_EQ_U64(walk_jobs("&state=failed", ids, 256), failed);
    size_t none = 0;
    CHECK(all_jobs_have("/v1/jobs?model=acme/none", "model", "", &none) && none == 0);

    /* bad values */
    static const char *const bad[] = {
        "/v1/jobs?state=cancelled", "/v1/jobs?state=",      "/v1/jobs?model=acme",
        "/v1/jobs?model=acme/",     "/v1/jobs?model=a/b/c", "/v1/jobs?model=acme/..",
        "/v1/jobs?limit=0",         "/v1/jobs?limit=1001",  "/v1/jobs?cursor=!!",
        "/v1/jobs?cursor=YWJj"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = it_get(bad[i]);
        CHECK_PROBLEM(r, 400, "invalid_request");
        it_response_free(&r);
    }
}

/* Under --auth-read the list needs a read token and keeps to a namespace-limited
 * token's org, as GET /v1/jobs/{id} does. */
TEST(job_list_auth_read)
{
    static const it_tensor_spec small[] = {{"w.weight", "F32", 1, {8}}};
    it_buf file = {0};
    build_values(&file, small, 1, NULL, 31);
    const char *path = "model.safetensors";
    publish_model("zeta/small", &path, &file, 1);
    it_buf_free(&file);
    long long zeta_job = start_convert("zeta/small", "1", "{\"dtype\":\"BF16\"}");
    it_response r = wait_job(zeta_job);
    CHECK_STR(it_json_str(&r, "state"), "done");
    it_response_free(&r);

    it_kill_server();
    static const char *const auth_read[] = {"--auth-read", NULL};
    if (it_server_start_args(auth_read, NULL) != 0) {
        it_dump_log(it_srv.log);
        fprintf(stderr, "the server did not restart\n");
        exit(2);
    }
    r = it_get("/v1/jobs");
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    const char *acme_reader = it_token("read", "acme");
    r = it_request("GET", "/v1/jobs?limit=1000", &(it_request_opts){.token = acme_reader});
    CHECK_STATUS(r, 200);
    json_t *jobs = r.json ? json_object_get(r.json, "jobs") : NULL;
    CHECK(json_array_size(jobs) > 0);
    for (size_t i = 0; i < json_array_size(jobs); i++)
        CHECK(strncmp(json_string_value(json_object_get(json_array_get(jobs, i), "model")), "acme/",
                      5) == 0);
    it_response_free(&r);
    r = it_request("GET", "/v1/jobs?model=zeta/small", &(it_request_opts){.token = acme_reader});
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_request("GET", "/v1/jobs?model=zeta/small",
                   &(it_request_opts){.token = it_token("read", NULL)});
    CHECK_STATUS(r, 200);
    jobs = r.json ? json_object_get(r.json, "jobs") : NULL;
    CHECK(json_array_size(jobs) == 1 && it_json_int(json_array_get(jobs, 0), "id") == zeta_job);
    it_response_free(&r);
    restart(NULL);
}

int main(int argc, char **argv)
{
    unsetenv("TENSORGATE_TEST_CONVERT_DELAY_MS");
    it_init(argc, argv, NULL);
    token = it_token("write", NULL);
    build_model();
    RUN(derived_version_bf16);
    RUN(derived_version_f16_all_tensors);
    RUN(request_errors);
    RUN(kill_9_mid_job_resumes);
    RUN(kill_9_too_often_fails);
    RUN(missing_source_blob_fails_the_job);
    RUN(cancel_queued_and_running_jobs);
    RUN(job_list);
    RUN(job_list_auth_read);
    for (int i = 0; i < 4; i++)
        it_buf_free(&files[i]);
    for (int i = 0; i < 3; i++)
        it_buf_free(&big_files[i]);
    return it_finish(argv[0]);
}
