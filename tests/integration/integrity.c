/* Stored-content integrity and the answers at the edges of the disk, over real HTTP:
 *  - a blob cut short on disk: every read path (file GET/HEAD/Range, header, the
 *    tensor list, a tensor plain/slice/dtype/npy, the HF resolve and model routes)
 *    answers 500 blob_damaged at once (each request is bounded, so a hang fails),
 *    the blob gets a damage record and fsck reports it;
 *  - a blob cut short while it is being sent (file and plain tensor routes): the
 *    connection is closed before Content-Length, never a spinning worker;
 *  - re-uploading the same file heals a blob cut short or with a flipped bit;
 *  - a body shorter than its Content-Length, half-closed: 400 body_length_mismatch;
 *  - a full disk (a tmpfs mounted as the data directory; skipped when mount is not
 *    permitted): every catalog write answers 507 insufficient_storage, reads work. */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mount.h>
#include <sys/socket.h>

#include "harness.h"

#define MODEL "/v1/models/acme/integrity"
#define QUICK_SECONDS 10L

static const char *write_token;

/* A request that may not hang: QUICK_SECONDS at most. */
static it_response quick(const char *method, const char *path, const char *range)
{
    it_response r;
    memset(&r, 0, sizeof r);
    CURL *c = curl_easy_init();
    char url[2048], range_line[128];
    snprintf(url, sizeof url, "%s%s", it_srv.base, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, QUICK_SECONDS);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, it_write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, it_header_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r.headers);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    struct curl_slist *headers = NULL;
    if (range != NULL) {
        snprintf(range_line, sizeof range_line, "Range: %s", range);
        headers = curl_slist_append(headers, range_line);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    }
    r.curl_code = curl_easy_perform(c);
    if (r.curl_code == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    else
        fprintf(stderr, "%s %s: curl: %s\n", method, path, curl_easy_strerror(r.curl_code));
    curl_slist_free_all(headers);
    curl_easy_cleanup(c);
    if (r.body.len > 0 && r.body.data[0] == '{')
        r.json = json_loadb((const char *)r.body.data, r.body.len, 0, NULL);
    return r;
}

static void blob_path(const char *sha, char *out, size_t cap)
{
    snprintf(out, cap, "%s/blobs/sha256/%.2s/%s", it_srv.data, sha, sha);
}

static bool damage_recorded(const char *sha)
{
    char path[512];
    snprintf(path, sizeof path, "%s/damaged/%s", it_srv.data, sha);
    return access(path, F_OK) == 0;
}

/* Runs tensorgate fsck; returns its exit status, stdout in out. */
static int fsck(char *out, size_t cap)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' fsck --data '%s' 2>/dev/null", it_binary, it_srv.data);
    out[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    size_t got = fread(out, 1, cap - 1, p);
    out[got] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void put_file(const char *path, const it_buf *content, char sha[65])
{
    it_response r = it_send("PUT", path, write_token, content->data, content->len);
    CHECK_STATUS(r, 201);
    it_sha256_hex(content->data, content->len, sha);
    CHECK_STR(it_json_str(&r, "sha256"), sha);
    it_response_free(&r);
}

static bool body_equals(const it_response *r, const it_buf *want)
{
    return r->body.len == want->len && memcmp(r->body.data, want->data, want->len) == 0;
}

static it_buf small_a, small_c, big;
static char sha_a[65], sha_c[65], sha_big[65];

TEST(setup)
{
    it_response r =
        it_send_json("POST", "/v1/models", write_token, "{\"name\":\"acme/integrity\"}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    for (int v = 0; v < 3; v++) {
        r = it_send_json("POST", MODEL "/versions", write_token, "{}");
        CHECK_STATUS(r, 201);
        it_response_free(&r);
    }
    const it_tensor_spec small[] = {{"w", "F32", 2, {64, 64}}, {"b", "F32", 1, {16}}};
    it_build_safetensors(&small_a, small, 2, NULL, 1);
    it_build_safetensors(&small_c, small, 2, NULL, 3);
    /* 32 MiB: far more than the socket buffers hold, so a cut at 16 MiB lies ahead of
     * whatever the server has read when the client has taken 64 KiB */
    const it_tensor_spec large[] = {{"big", "F32", 2, {2048, 4096}}};
    it_build_safetensors(&big, large, 1, NULL, 2);
    put_file(MODEL "/versions/1/files/a.safetensors", &small_a, sha_a);
    put_file(MODEL "/versions/2/files/big.safetensors", &big, sha_big);
    put_file(MODEL "/versions/3/files/c.safetensors", &small_c, sha_c);
    /* published, so the HF routes serve it */
    r = it_send_json("POST", MODEL "/versions/1/publish", write_token, NULL);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
}

#define V1 MODEL "/versions/1"

TEST(a_blob_cut_short_fails_every_read_path_at_once)
{
    char path[512];
    blob_path(sha_a, path, sizeof path);
    CHECK(truncate(path, (off_t)small_a.len - 100) == 0);
    static const char *const damaged[] = {
        V1 "/files/a.safetensors",
        V1 "/files/a.safetensors/header",
        V1 "/tensors",
        V1 "/tensors/w",
        V1 "/tensors/w?slice=0:2",
        V1 "/tensors/w?dtype=F16",
        V1 "/tensors/b?format=npy",
        "/acme/integrity/resolve/1/a.safetensors",
    };
    for (size_t i = 0; i < sizeof damaged / sizeof damaged[0]; i++) {
        it_response r = quick("GET", damaged[i], NULL);
        CHECK_PROBLEM(r, 500, "blob_damaged");
        if (r.status != 500)
            fprintf(stderr, "  (GET %s)\n", damaged[i]);
        it_response_free(&r);
    }
    it_response r = quick("GET", V1 "/files/a.safetensors", "bytes=0-9");
    CHECK_PROBLEM(r, 500, "blob_damaged");
    it_response_free(&r);
    r = quick("HEAD", V1 "/files/a.safetensors", NULL);
    CHECK_STATUS(r, 500);
    it_response_free(&r);
    r = quick("GET", V1 "/tensors/w", "bytes=0-3");
    CHECK_PROBLEM(r, 500, "blob_damaged");
    it_response_free(&r);
    /* the HF model info reads every header for its parameter counts */
    r = quick("GET", "/api/models/acme/integrity/revision/1", NULL);
    CHECK_STATUS(r, 500);
    it_response_free(&r);

    CHECK(damage_recorded(sha_a));
    char out[4096];
    CHECK(fsck(out, sizeof out) == 1);
    CHECK(strstr(out, sha_a) != NULL);
    CHECK(strstr(out, "size-mismatch") != NULL);
}

TEST(reuploading_heals_a_blob_cut_short)
{
    /* version 1 is published: the same content uploaded anywhere heals the blob */
    char sha[65];
    put_file(MODEL "/versions/3/files/a-again.safetensors", &small_a, sha);
    it_response r = quick("GET", V1 "/files/a.safetensors", NULL);
    CHECK_STATUS(r, 200);
    CHECK(body_equals(&r, &small_a));
    it_response_free(&r);
    r = quick("GET", V1 "/tensors/w?slice=0:2", NULL);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    CHECK(!damage_recorded(sha_a));
}

TEST(reuploading_heals_a_flipped_bit)
{
    char path[512];
    blob_path(sha_c, path, sizeof path);
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    unsigned char byte = 0;
    off_t at = (off_t)small_c.len - 10;
    CHECK(pread(fd, &byte, 1, at) == 1);
    byte ^= 0x10;
    CHECK(pwrite(fd, &byte, 1, at) == 1);
    close(fd);
    char out[4096];
    CHECK(fsck(out, sizeof out) == 1);
    CHECK(strstr(out, "hash-mismatch") != NULL);
    char sha[65];
    put_file(MODEL "/versions/3/files/c.safetensors", &small_c, sha);
    it_response r = quick("GET", MODEL "/versions/3/files/c.safetensors", NULL);
    CHECK_STATUS(r, 200);
    CHECK(body_equals(&r, &small_c));
    it_response_free(&r);
    /* fsck recorded the damage; the healing commit removed the record */
    CHECK(!damage_recorded(sha_c));
}

/* GETs path on a socket with a small receive buffer, takes 64 KiB of the body, cuts
 * the blob at `cut` bytes, then reads on: the server must close the connection
 * before Content-Length (within QUICK_SECONDS of silence), not hang. */
static void cut_while_sending(const char *path, const char *sha, off_t cut)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int small = 16 * 1024;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)it_srv.port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    char request[1024];
    int n = snprintf(request, sizeof request,
                     "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", path);
    CHECK(it_write_all(fd, request, (size_t)n));
    static char buf[65536], scratch[65536];
    size_t head = 0;
    unsigned long long content_length = 0, body = 0;
    bool closed = false, hung = false, cut_done = false;
    char blob[512];
    blob_path(sha, blob, sizeof blob);
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)QUICK_SECONDS * 1000) <= 0) {
            hung = true;
            break;
        }
        ssize_t got = content_length == 0 ? recv(fd, buf + head, sizeof buf - 1 - head, 0)
                                          : recv(fd, scratch, sizeof scratch, 0);
        if (got <= 0) {
            closed = true;
            break;
        }
        if (content_length == 0) {
            head += (size_t)got;
            buf[head] = '\0';
            char *end = strstr(buf, "\r\n\r\n");
            if (end == NULL)
                continue;
            CHECK(strncmp(buf, "HTTP/1.1 200", 12) == 0);
            char *cl = strcasestr(buf, "\r\nContent-Length:");
            content_length = cl ? strtoull(cl + 17, NULL, 10) : 0;
            CHECK(content_length > (unsigned long long)cut);
            if (content_length == 0)
                break;
            body = head - (size_t)(end + 4 - buf);
        } else {
            body += (unsigned long long)got;
        }
        if (!cut_done && body >= 65536) {
            CHECK(truncate(blob, cut) == 0);
            cut_done = true;
        }
    }
    close(fd);
    CHECK(cut_done);
    CHECK(!hung);
    CHECK(closed);
    CHECK(body < content_length);
    if (hung || !closed)
        fprintf(stderr, "  GET %s: %llu of %llu bytes, then %s\n", path, body, content_length,
                hung ? "nothing (the response hangs)" : "?");
    CHECK(damage_recorded(sha));
}

TEST(a_blob_cut_while_being_sent_closes_the_connection)
{
    off_t cut = 16 << 20;
    cut_while_sending(MODEL "/versions/2/files/big.safetensors", sha_big, cut);
    /* the server still answers, and the damage is now found before any byte is sent */
    it_response r = quick("GET", MODEL "/versions/2/files/big.safetensors", NULL);
    CHECK_PROBLEM(r, 500, "blob_damaged");
    it_response_free(&r);
    /* healed by the same upload, then the plain tensor route (whole file range) */
    char sha[65];
    put_file(MODEL "/versions/2/files/big.safetensors", &big, sha);
    r = quick("GET", MODEL "/versions/2/files/big.safetensors", NULL);
    CHECK_STATUS(r, 200);
    CHECK(body_equals(&r, &big));
    it_response_free(&r);
    cut_while_sending(MODEL "/versions/2/tensors/big", sha_big, cut);
    put_file(MODEL "/versions/2/files/big.safetensors", &big, sha);
    /* bodies read through a mapping of the blob (rows reversed, a conversion): the loads
     * past the new end raise SIGBUS, which costs the request, not the server */
    cut_while_sending(MODEL "/versions/2/tensors/big?slice=::-1", sha_big, cut);
    put_file(MODEL "/versions/2/files/big.safetensors", &big, sha);
    cut_while_sending(MODEL "/versions/2/tensors/big?dtype=F64", sha_big, cut);
    put_file(MODEL "/versions/2/files/big.safetensors", &big, sha);
    r = quick("GET", MODEL "/versions/2/tensors/big?slice=::-1", NULL);
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(r.body.len, 2048 * 4096 * 4);
    it_response_free(&r);
    char out[4096];
    CHECK(fsck(out, sizeof out) == 0);
    if (strstr(out, "mismatch") != NULL)
        fprintf(stderr, "fsck: %s\n", out);
}

TEST(a_half_closed_short_body_is_a_length_mismatch)
{
    /* a valid 80-byte file sent with Content-Length: 88, then a half-close */
    char header[72];
    snprintf(header, sizeof header, "%-64s",
             "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}");
    it_buf file = {0};
    it_build_raw_safetensors(&file, header, 8);
    CHECK_EQ_U64(file.len, 80);
    int fd = it_connect();
    CHECK(fd >= 0);
    /* corked: the request, the body and the FIN leave in one segment, so the FIN is
     * there when the server looks for it after the last body callback (server/core/
     * http.c, finish_truncated_body); a FIN that comes later, alone, is the race that
     * libmicrohttpd 0.9.75 loses (it closes without an answer) */
    int cork = 1;
    CHECK(setsockopt(fd, IPPROTO_TCP, TCP_CORK, &cork, sizeof cork) == 0);
    char request[1024];
    int n = snprintf(request, sizeof request,
                     "PUT " MODEL "/versions/3/files/short.safetensors HTTP/1.1\r\n"
                     "Host: localhost\r\nAuthorization: Bearer %s\r\n"
                     "Content-Type: application/octet-stream\r\nContent-Length: 88\r\n\r\n",
                     write_token);
    CHECK(it_write_all(fd, request, (size_t)n));
    CHECK(it_write_all(fd, file.data, file.len));
    shutdown(fd, SHUT_WR);
    char answer[4096];
    it_read_some(fd, answer, sizeof answer, (int)QUICK_SECONDS * 1000);
    close(fd);
    CHECK(strncmp(answer, "HTTP/1.1 400", 12) == 0);
    CHECK(strstr(answer, "\"body_length_mismatch\"") != NULL);
    if (strstr(answer, "body_length_mismatch") == NULL)
        fprintf(stderr, "  answer: %.300s\n", answer);
    it_response r = quick("GET", MODEL "/versions/3/files/short.safetensors", NULL);
    CHECK_PROBLEM(r, 404, "file_not_found");
    it_response_free(&r);
    CHECK(it_count_tmp_settled() == 0);
    it_buf_free(&file);
}

/* ---- a full disk ---- */

static char mount_dir[280];

/* Fills the file system of dir: writes until ENOSPC. Returns the filler's path. */
static void fill(const char *file)
{
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    static char chunk[65536];
    size_t size = sizeof chunk;
    while (fd >= 0 && size > 0) {
        if (write(fd, chunk, size) < 0)
            size /= 2; /* the last few pages */
    }
    if (fd >= 0)
        close(fd);
}

static void expect_full(it_response r, const char *what)
{
    CHECK_PROBLEM(r, 507, "insufficient_storage");
    if (r.status != 507)
        fprintf(stderr, "  (%s)\n", what);
    it_response_free(&r);
}

TEST(a_full_disk_answers_507_on_every_catalog_write)
{
    snprintf(mount_dir, sizeof mount_dir, "%.250s/full", it_srv.root);
    mkdir(mount_dir, 0700);
    if (mount("tmpfs", mount_dir, "tmpfs", 0, "size=8m") != 0) {
        printf("SKIP a_full_disk_answers_507_on_every_catalog_write: cannot mount a tmpfs (%s)\n",
               strerror(errno));
        return;
    }
    char saved_data[300];
    snprintf(saved_data, sizeof saved_data, "%s", it_srv.data);
    CHECK(it_server_stop() == 0);
    snprintf(it_srv.data, sizeof it_srv.data, "%s/data", mount_dir);
    CHECK(it_server_start_args(NULL, NULL) == 0);
    const char *token = it_token("write", "acme");
    it_response r = it_send_json("POST", "/v1/models", token, "{\"name\":\"acme/full\"}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    for (int v = 0; v < 2; v++) {
        r = it_send_json("POST", "/v1/models/acme/full/versions", token, "{}");
        CHECK_STATUS(r, 201);
        it_response_free(&r);
        r = it_send("PUT",
                    v == 0 ? "/v1/models/acme/full/versions/1/files/a.safetensors"
                           : "/v1/models/acme/full/versions/2/files/a.safetensors",
                    token, small_a.data, small_a.len);
        CHECK_STATUS(r, 201);
        it_response_free(&r);
    }
    r = it_send_json("POST", "/v1/models/acme/full/versions/1/publish", token, NULL);
    CHECK_STATUS(r, 200);
    it_response_free(&r);

    char filler[512];
    snprintf(filler, sizeof filler, "%s/filler", mount_dir);
    fill(filler);
    /* SQLite may still reuse room it holds (its WAL); models are created until the
     * first refusal, which must be the 507 */
    long status = 201;
    for (int i = 0; i < 2000 && status == 201; i++) {
        char body[96];
        snprintf(body, sizeof body, "{\"name\":\"acme/m%d\"}", i);
        r = it_send_json("POST", "/v1/models", token, body);
        status = r.status;
        if (status != 201)
            expect_full(r, "create a model");
        else
            it_response_free(&r);
    }
    expect_full(it_send_json("POST", "/v1/models/acme/full/versions", token, "{}"),
                "create a version");
    expect_full(it_send_json("POST", "/v1/models/acme/full/versions/2/publish", token, NULL),
                "publish");
    expect_full(
        it_send_json("PUT", "/v1/models/acme/full/aliases/stable", token, "{\"version\":1}"),
        "set an alias");
    /* reads keep working */
    r = it_get("/v1/models/acme/full");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    r = it_get("/v1/models/acme/full/versions/1/files/a.safetensors");
    CHECK_STATUS(r, 200);
    CHECK(body_equals(&r, &small_a));
    it_response_free(&r);
    /* room again: the same write succeeds */
    unlink(filler);
    r = it_send_json("PUT", "/v1/models/acme/full/aliases/stable", token, "{\"version\":1}");
    CHECK_STATUS(r, 200);
    it_response_free(&r);

    CHECK(it_server_stop() == 0);
    CHECK(umount(mount_dir) == 0);
    snprintf(it_srv.data, sizeof it_srv.data, "%s", saved_data);
    CHECK(it_server_start_args(NULL, NULL) == 0);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    write_token = it_token("write", "acme");
    RUN(setup);
    RUN(a_blob_cut_short_fails_every_read_path_at_once);
    RUN(reuploading_heals_a_blob_cut_short);
    RUN(reuploading_heals_a_flipped_bit);
    RUN(a_blob_cut_while_being_sent_closes_the_connection);
    RUN(a_half_closed_short_body_is_a_length_mismatch);
    RUN(a_full_disk_answers_507_on_every_catalog_write);
    it_buf_free(&small_a);
    it_buf_free(&small_c);
    it_buf_free(&big);
    return it_finish(argv[0]);
}
