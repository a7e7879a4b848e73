/* A real server on an S3 blob store (--blob-store s3://BUCKET/PREFIX) against a
 * real Ceph RADOS Gateway: tests/scale/with-radosgw.sh starts it and sets
 * TENSORGATE_TEST_S3_ENDPOINT, TENSORGATE_TEST_S3_BUCKET, the AWS_* credentials
 * and TG_RGW_STOP / TG_RGW_START; without them this program checks nothing and
 * passes (the plain integration run).
 *
 * Upload (one part, and a multipart one above 5 MiB), whole-file, Range, ETag/304
 * and 416, tensor and slice GETs with the bytes uploaded; a refused upload (also
 * one past the first part) and a client gone mid-body leave no object and no
 * multipart upload; gc removes an
 * unreferenced object only past --gc-grace; fsck passes, then finds an object
 * overwritten; --download-redirect answers 302 to a presigned URL that serves the
 * bytes; the read cache counts hits in /metrics; radosgw stopped: /readyz 503
 * naming the blob store, reads and uploads 503 blob_store_unavailable with
 * Retry-After and no hang; radosgw back: everything serves again. */
#include "harness.h"

#define BASE "/v1/models/acme/s3"

static const char *endpoint, *bucket, *write_token;
static char prefix[64], store_url[160], cache_dir[400];
static it_buf small_file, big_file;

static const it_tensor_spec small_tensors[] = {{"embed.weight", "F32", 2, {64, 32}},
                                               {"scale", "F16", 1, {8}}};
static const it_tensor_spec big_tensors[] = {{"big.weight", "F32", 2, {1024, 1536}}};

/* `curl` against the bucket (SigV4), output through grep -c PATTERN when given. */
static int s3_curl_count(const char *args, const char *query, const char *pattern)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "curl -s --max-time 20 -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' --aws-sigv4 "
             "'aws:amz:%s:s3' --user \"$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY\" %s "
             "'%s/%s%s' | grep -o '%s' | wc -l",
             getenv("AWS_REGION") ? getenv("AWS_REGION") : "us-east-1", args, endpoint, bucket,
             query, pattern);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    int n = -1;
    if (fscanf(p, "%d", &n) != 1)
        n = -1;
    pclose(p);
    return n;
}

/* prefix + under, with '/' as %2F (a query value) */
static void encoded_prefix(const char *under, char *out, size_t len)
{
    char text[200];
    size_t n = 0;
    snprintf(text, sizeof text, "%s%s", prefix, under);
    for (const char *p = text; *p && n + 4 < len; p++) {
        if (*p == '/') {
            memcpy(out + n, "%2F", 3);
            n += 3;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
}

static int count_objects(const char *under)
{
    char q[300], enc[256];
    encoded_prefix(under, enc, sizeof enc);
    snprintf(q, sizeof q, "?list-type=2&prefix=%s", enc);
    return s3_curl_count("", q, "<Key>");
}

static int count_uploads(void)
{
    char q[300], enc[256];
    encoded_prefix("", enc, sizeof enc);
    snprintf(q, sizeof q, "?prefix=%s&uploads=", enc);
    return s3_curl_count("", q, "<Upload>");
}

/* PUTs a file's bytes at PREFIX/KEY. */
static bool put_object(const char *key, const void *data, size_t len)
{
    char path[300], args[400], q[300];
    snprintf(path, sizeof path, "%s/put.bin", it_root_dir);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, len, f) != len) {
        if (f)
            fclose(f);
        return false;
    }
    fclose(f);
    snprintf(args, sizeof args, "-o /dev/null -w '%%{http_code}\\n' -X PUT --data-binary @%s",
             path);
    snprintf(q, sizeof q, "/%s%s", prefix, key);
    return s3_curl_count(args, q, "200") == 1;
}

static it_response get_with(const char *path, const char *header)
{
    const char *headers[] = {header, NULL};
    it_request_opts o = {.headers = header ? headers : NULL};
    return it_request("GET", path, &o);
}

static bool body_equals(const it_response *r, const void *data, size_t len)
{
    return r->body.len == len && memcmp(r->body.data, data, len) == 0;
}

/* Runs tensorgate CMD --data DATA --blob-store URL EXTRA; the exit status. */
static int run_command(const char *cmd, const char *extra)
{
    char line[2048];
    snprintf(line, sizeof line,
             "%s %s --data %s --blob-store %s --s3-endpoint %s %s >%s/%s.out 2>&1", it_binary, cmd,
             it_srv.data, store_url, endpoint, extra, it_root_dir, cmd);
    int status = system(line);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static bool restart(const char *const *extra)
{
    CHECK(it_server_stop() == 0);
    int started = it_server_start_args(extra, NULL);
    CHECK(started == 0);
    if (started != 0)
        it_dump_log(it_srv.log);
    return started == 0;
}

TEST(upload_and_read_back)
{
    CHECK(it_make_version(write_token, "acme/s3", "model.safetensors", &small_file, false) == 1);
    char url[256];
    snprintf(url, sizeof url, BASE "/versions/1/files/big.safetensors");
    it_response r = it_send("PUT", url, write_token, big_file.data, big_file.len);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send("POST", BASE "/versions/1/publish", write_token, NULL, 0);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    CHECK(count_objects("sha256/") == 2);
    CHECK(count_objects("tmp/") == 0);
    CHECK(count_uploads() == 0);

    /* whole files */
    r = it_get(BASE "/versions/1/files/model.safetensors");
    CHECK_STATUS(r, 200);
    CHECK(body_equals(&r, small_file.data, small_file.len));
    char etag[100], value[200], sha[65];
    it_header(&r, "ETag", etag, sizeof etag);
    it_sha256_hex(small_file.data, small_file.len, sha);
    char want_etag[80];
    snprintf(want_etag, sizeof want_etag, "\"%s\"", sha);
    CHECK_STR(etag, want_etag);
    it_response_free(&r);
    r = it_get(BASE "/versions/1/files/big.safetensors");
    CHECK_STATUS(r, 200);
    CHECK(body_equals(&r, big_file.data, big_file.len));
    it_response_free(&r);

    /* HEAD: the same headers, no body */
    it_request_opts head_opts = {0};
    r = it_request("HEAD", BASE "/versions/1/files/big.safetensors", &head_opts);
    CHECK_STATUS(r, 200);
    char want_length[32];
    snprintf(want_length, sizeof want_length, "%zu", big_file.len);
    CHECK_STR(it_header(&r, "Content-Length", value, sizeof value), want_length);
    CHECK(r.body.len == 0);
    it_response_free(&r);

    /* Range, across the 4 MiB read windows too */
    r = get_with(BASE "/versions/1/files/big.safetensors", "Range: bytes=4194000-4195000");
    CHECK_STATUS(r, 206);
    CHECK(body_equals(&r, big_file.data + 4194000, 1001));
    char want_range[80];
    snprintf(want_range, sizeof want_range, "bytes 4194000-4195000/%zu", big_file.len);
    CHECK_STR(it_header(&r, "Content-Range", value, sizeof value), want_range);
    it_response_free(&r);
    r = get_with(BASE "/versions/1/files/model.safetensors", "Range: bytes=-100");
    CHECK_STATUS(r, 206);
    CHECK(body_equals(&r, small_file.data + small_file.len - 100, 100));
    it_response_free(&r);
    r = get_with(BASE "/versions/1/files/model.safetensors", "Range: bytes=99999999-");
    CHECK_PROBLEM(r, 416, "range_not_satisfiable");
    it_response_free(&r);
    char inm[120];
    snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
    r = get_with(BASE "/versions/1/files/model.safetensors", inm);
    CHECK_STATUS(r, 304);
    CHECK(r.body.len == 0);
    it_response_free(&r);

    /* tensors and slices: the bytes of the file */
    r = it_get(BASE "/versions/1/tensors/embed.weight");
    CHECK_STATUS(r, 200);
    uint64_t n = it_header_len(&small_file);
    CHECK(body_equals(&r, small_file.data + 8 + n, 64 * 32 * 4));
    it_response_free(&r);
    r = it_get(BASE "/versions/1/tensors/embed.weight?slice=1:3");
    CHECK_STATUS(r, 200);
    CHECK(body_equals(&r, small_file.data + 8 + n + 32 * 4, 2 * 32 * 4));
    CHECK_STR(it_header(&r, "X-Tensor-Shape", value, sizeof value), "[2,32]");
    it_response_free(&r);
    r = it_get(BASE "/versions/1/tensors/big.weight?slice=1000:1002");
    CHECK_STATUS(r, 200);
    uint64_t bn = it_header_len(&big_file);
    CHECK(body_equals(&r, big_file.data + 8 + bn + 1000ULL * 1536 * 4, 2 * 1536 * 4));
    it_response_free(&r);
}

TEST(refused_uploads_leave_nothing)
{
    it_response r = it_send("POST", BASE "/versions", write_token, NULL, 0);
    CHECK_STATUS(r, 201);
    int rev = (int)it_json_int(r.json, "version");
    it_response_free(&r);
    int objects = count_objects("");
    char url[256];
    /* refused at the header */
    snprintf(url, sizeof url, BASE "/versions/%d/files/bad.safetensors", rev);
    r = it_send("PUT", url, write_token, "not a safetensors file at all", 29);
    CHECK(r.status >= 400 && r.status < 500);
    it_response_free(&r);
    /* refused at the end, after more than one 5 MiB part went into a multipart upload */
    snprintf(url, sizeof url, BASE "/versions/%d/files/cut.safetensors", rev);
    r = it_send("PUT", url, write_token, big_file.data, big_file.len - 1000);
    CHECK(r.status >= 400 && r.status < 500);
    it_response_free(&r);
    CHECK(count_objects("") == objects);
    CHECK(count_objects("tmp/") == 0);
    CHECK(count_uploads() == 0);
}

TEST(broken_client_leaves_nothing)
{
    it_response r = it_send("POST", BASE "/versions", write_token, NULL, 0);
    CHECK_STATUS(r, 201);
    int rev = (int)it_json_int(r.json, "version");
    it_response_free(&r);
    int objects = count_objects("");
    /* more than one part sent, then the connection goes away */
    int fd = it_connect();
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    char head[512];
    int n = snprintf(head, sizeof head,
                     "PUT " BASE "/versions/%d/files/broken.safetensors HTTP/1.1\r\n"
                     "Host: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     rev, write_token, big_file.len);
    CHECK(it_write_all(fd, head, (size_t)n));
    CHECK(it_write_all(fd, big_file.data, big_file.len - 100000));
    bool started = false; /* the first 5 MiB part went into a multipart upload */
    for (int i = 0; i < 50 && !started; i++) {
        started = count_uploads() == 1;
        if (!started)
            usleep(100000);
    }
    CHECK(started);
    close(fd);
    bool clean = false;
    for (int i = 0; i < 50 && !clean; i++) {
        clean = count_uploads() == 0 && count_objects("") == objects;
        if (!clean)
            usleep(100000);
    }
    CHECK(clean);
    CHECK(count_objects("tmp/") == 0);
}

TEST(gc_and_fsck)
{
    /* an object nothing references, as a replica that died between its copy and its row */
    unsigned char stray[100];
    memset(stray, 's', sizeof stray);
    char sha[65], key[200];
    it_sha256_hex(stray, sizeof stray, sha);
    snprintf(key, sizeof key, "sha256/%.2s/%s", sha, sha);
    CHECK(put_object(key, stray, sizeof stray));
    /* and a multipart upload a replica left under tmp/ */
    char enc_q[300];
    snprintf(enc_q, sizeof enc_q, "-o /dev/null -w '%%{http_code}\\n' -X POST");
    char q[200];
    snprintf(q, sizeof q, "/%stmp/left-behind?uploads=", prefix);
    CHECK(s3_curl_count(enc_q, q, "200") == 1);
    CHECK(count_uploads() == 1);
    int before = count_objects("sha256/");
    CHECK(run_command("gc", "--gc-grace 3600") == 0); /* too young: kept */
    CHECK(count_objects("sha256/") == before);
    sleep(1);
    CHECK(run_command("gc", "--gc-grace 0 --dry-run") == 0); /* changes nothing */
    CHECK(count_objects("sha256/") == before);
    CHECK(count_uploads() == 1);
    CHECK(run_command("gc", "--gc-grace 0") == 0);
    CHECK(count_objects("sha256/") == before - 1);
    CHECK(count_uploads() == 0);
    it_response r = it_get(BASE "/versions/1/files/model.safetensors");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    CHECK(run_command("fsck", "") == 0);
    /* the small file's object overwritten with other bytes of the same size */
    it_sha256_hex(small_file.data, small_file.len, sha);
    snprintf(key, sizeof key, "sha256/%.2s/%s", sha, sha);
    unsigned char *other = malloc(small_file.len);
    if (other != NULL) {
        memcpy(other, small_file.data, small_file.len);
        other[small_file.len - 1] ^= 0xff;
        CHECK(put_object(key, other, small_file.len));
        CHECK(run_command("fsck", "") == 1);
        char out[600];
        snprintf(out, sizeof out, "%s/fsck.out", it_root_dir);
        it_buf text = {0};
        CHECK(it_read_file(out, &text) && strstr((char *)text.data, "hash-mismatch") != NULL);
        it_buf_free(&text);
        /* healed: the right bytes back */
        CHECK(put_object(key, small_file.data, small_file.len));
        CHECK(run_command("fsck", "") == 0);
        free(other);
    }
}

static size_t count_cb(char *p, size_t s, size_t n, void *ctx)
{
    it_buf_append(ctx, p, s * n);
    return s * n;
}

TEST(download_redirect_and_cache)
{
    const char *const flags[] = {"--blob-store",        store_url,     "--s3-endpoint", endpoint,
                                 "--download-redirect", "--cache-dir", cache_dir,       NULL};
    if (!restart(flags))
        return;
    it_response r = it_get(BASE "/versions/1/files/big.safetensors");
    CHECK_STATUS(r, 302);
    char location[4096] = "";
    it_header(&r, "Location", location, sizeof location);
    CHECK(strncmp(location, endpoint, strlen(endpoint)) == 0);
    CHECK(strstr(location, "X-Amz-Signature=") != NULL);
    it_response_free(&r);
    CURL *curl = curl_easy_init();
    it_buf got = {0};
    long status = 0;
    if (curl != NULL) {
        curl_easy_setopt(curl, CURLOPT_URL, location);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, count_cb);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &got);
        curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
        CHECK(curl_easy_perform(curl) == CURLE_OK);
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(curl);
    }
    CHECK(status == 200 && got.len == big_file.len &&
          memcmp(got.data, big_file.data, got.len) == 0);
    it_buf_free(&got);
    /* ranges are still served here, through the cache (a miss, then hits) */
    for (int i = 0; i < 3; i++) {
        r = get_with(BASE "/versions/1/files/big.safetensors", "Range: bytes=10-20");
        CHECK_STATUS(r, 206);
        CHECK(body_equals(&r, big_file.data + 10, 11));
        it_response_free(&r);
    }
    r = it_get("/metrics");
    CHECK_STATUS(r, 200);
    const char *hits = strstr((char *)r.body.data, "\ntensorgate_blob_cache_hits_total ");
    const char *misses = strstr((char *)r.body.data, "\ntensorgate_blob_cache_misses_total ");
    CHECK(hits != NULL && misses != NULL);
    if (hits != NULL && misses != NULL) {
        CHECK(atoll(hits + strlen("\ntensorgate_blob_cache_hits_total ")) >= 2);
        CHECK(atoll(misses + strlen("\ntensorgate_blob_cache_misses_total ")) >= 1);
    }
    it_response_free(&r);
}

TEST(store_away_then_back)
{
    const char *const flags[] = {"--blob-store", store_url, "--s3-endpoint", endpoint, NULL};
    if (!restart(flags))
        return;
    CHECK(system(getenv("TG_RGW_STOP")) == 0);
    time_t start = time(NULL);
    it_response r = it_get("/readyz");
    CHECK_STATUS(r, 503);
    CHECK_STR(it_json_str(&r, "store"), "error");
    CHECK_STR(it_json_str(&r, "blob_store"), "s3");
    CHECK_STR(it_json_str(&r, "reason"), "blob_store_unavailable");
    it_response_free(&r);
    r = it_get(BASE "/versions/1/files/model.safetensors");
    CHECK_PROBLEM(r, 503, "blob_store_unavailable");
    char value[64];
    CHECK_STR(it_header(&r, "Retry-After", value, sizeof value), "5");
    it_response_free(&r);
    r = it_get(BASE "/versions/1/tensors/big.weight?slice=0:1");
    CHECK(r.status == 503 || r.curl_code != CURLE_OK);
    it_response_free(&r);
    r = it_send("POST", BASE "/versions", write_token, NULL, 0);
    CHECK_STATUS(r, 201);
    int rev = (int)it_json_int(r.json, "version");
    it_response_free(&r);
    char url[256];
    snprintf(url, sizeof url, BASE "/versions/%d/files/model.safetensors", rev);
    r = it_send("PUT", url, write_token, small_file.data, small_file.len);
    CHECK_PROBLEM(r, 503, "blob_store_unavailable");
    it_response_free(&r);
    CHECK(time(NULL) - start < 20); /* nothing hung */

    CHECK(system(getenv("TG_RGW_START")) == 0);
    bool ready = false;
    for (int i = 0; i < 100 && !ready; i++) {
        r = it_get("/readyz");
        ready = r.status == 200;
        it_response_free(&r);
        if (!ready)
            usleep(100000);
    }
    CHECK(ready);
    r = it_get(BASE "/versions/1/files/model.safetensors");
    CHECK_STATUS(r, 200);
    CHECK(body_equals(&r, small_file.data, small_file.len));
    it_response_free(&r);
    r = it_send("PUT", url, write_token, small_file.data, small_file.len);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    endpoint = getenv("TENSORGATE_TEST_S3_ENDPOINT");
    bucket = getenv("TENSORGATE_TEST_S3_BUCKET");
    if (endpoint == NULL || bucket == NULL || getenv("TG_RGW_STOP") == NULL) {
        printf("%s: no radosgw (tests/scale/with-radosgw.sh runs this): 0 passed, 0 failed\n",
               argv[0]);
        return 0;
    }
    snprintf(prefix, sizeof prefix, "it-%ld-%d/", (long)time(NULL), (int)getpid());
    snprintf(store_url, sizeof store_url, "s3://%s/%s", bucket, prefix);
    store_url[strlen(store_url) - 1] = '\0'; /* no trailing slash */
    const char *const flags[] = {"--blob-store", store_url, "--s3-endpoint", endpoint, NULL};
    it_init(argc, argv, flags);
    snprintf(cache_dir, sizeof cache_dir, "%s/cache", it_root_dir);
    write_token = it_token("write", "acme");
    it_build_safetensors(&small_file, small_tensors, 2, NULL, 3);
    it_build_safetensors(&big_file, big_tensors, 1, NULL, 5);
    RUN(upload_and_read_back);
    RUN(refused_uploads_leave_nothing);
    RUN(broken_client_leaves_nothing);
    RUN(gc_and_fsck);
    RUN(download_redirect_and_cache);
    RUN(store_away_then_back);
    it_buf_free(&small_file);
    it_buf_free(&big_file);
    return it_finish(argv[0]);
}
