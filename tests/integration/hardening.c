/* Server hardening over real HTTP: a client that half-closes (shutdown(SHUT_WR))
 * mid-body gets its upload cleaned up at once (answer or close, never a wait for
 * the idle timeout; tmp/ empty; the refusal recorded); the body-length reason is
 * distinct from the gate's size_mismatch; a file path whose last segment is
 * `header` is refused. The server runs with a long idle timeout so that a
 * connection left hanging shows as a failure, not as a timeout. */
#include "harness.h"

#define VBASE "/v1/models/acme/edge/versions/1"
#define BODY_LENGTH_REASON "body_length_mismatch"

static const char *write_token;
static const char *admin_token;

static void setup(void)
{
    it_response r = it_send_json("POST", "/v1/models", write_token, "{\"name\":\"acme/edge\"}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send("POST", "/v1/models/acme/edge/versions", write_token, NULL, 0);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
}

/* Rejections recorded for path with this reason. */
static int rejections_for(const char *path, const char *reason)
{
    it_response r =
        it_request("GET", "/v1/rejections?limit=1000", &(it_request_opts){.token = admin_token});
    int n = 0;
    json_t *list = json_object_get(r.json, "rejections");
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *e = json_array_get(list, i);
        const char *p = json_string_value(json_object_get(e, "path"));
        const char *why = json_string_value(json_object_get(e, "reason"));
        if (p && why && strcmp(p, path) == 0 && strcmp(why, reason) == 0)
            n++;
    }
    it_response_free(&r);
    return n;
}

/* True when the server closes the connection within timeout_ms (recv reads 0). */
static bool server_closes(int fd, int timeout_ms)
{
    char scratch[4096];
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) <= 0)
            return false;
        ssize_t n = recv(fd, scratch, sizeof scratch, 0);
        if (n == 0)
            return true;
        if (n < 0)
            return errno == ECONNRESET;
    }
}

/* Sends the request head and `sent` body bytes, half-closes, and checks that the
 * server answers 400 with the body-length reason or closes without an answer, and
 * in both cases closes the connection promptly. */
static void half_close_upload(const char *path, const it_buf *file, size_t sent, bool chunked)
{
    int fd = it_connect();
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    char head[512];
    int hl;
    if (chunked)
        hl = snprintf(head, sizeof head,
                      "PUT " VBASE "/files/%s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Authorization: Bearer %s\r\nTransfer-Encoding: chunked\r\n\r\n",
                      path, write_token);
    else
        hl = snprintf(head, sizeof head,
                      "PUT " VBASE "/files/%s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Authorization: Bearer %s\r\nContent-Length: %zu\r\n\r\n",
                      path, write_token, file->len);
    CHECK(it_write_all(fd, head, (size_t)hl));
    if (sent > 0 && chunked) {
        char size_line[32];
        int sl = snprintf(size_line, sizeof size_line, "%zx\r\n", sent);
        CHECK(it_write_all(fd, size_line, (size_t)sl));
        CHECK(it_write_all(fd, file->data, sent));
        CHECK(it_write_all(fd, "\r\n", 2));
    } else if (sent > 0) {
        CHECK(it_write_all(fd, file->data, sent));
    }
    shutdown(fd, SHUT_WR);
    char resp[4096];
    size_t got = it_read_some(fd, resp, sizeof resp, 1500);
    if (got > 0) {
        bool is_400 = strncmp(resp, "HTTP/1.1 400 ", 13) == 0;
        CHECK(is_400);
        CHECK(strstr(resp, "\"reason\":\"" BODY_LENGTH_REASON "\"") != NULL);
        if (!is_400)
            fprintf(stderr, "  (half-closed upload of %s answered: %.200s)\n", path, resp);
    }
    /* the answer (if any) is followed by the close, not by a wait for more body */
    bool closed = strstr(resp, "Connection: close") != NULL || server_closes(fd, 1500);
    CHECK(closed);
    if (!closed)
        fprintf(stderr, "  (half-closed upload of %s: connection left open)\n", path);
    close(fd);
}

TEST(half_closed_uploads_end_at_once)
{
    it_tensor_spec t = {"w", "F32", 1, {4096}};
    it_buf b = {0};
    it_build_safetensors(&b, &t, 1, NULL, 4);
    /* The lost FIN was a race (about half of the tries hung), hence several tries. */
    enum { TRIES = 10 };
    for (int i = 0; i < TRIES; i++) {
        char path[64];
        snprintf(path, sizeof path, "cut%d.safetensors", i);
        half_close_upload(path, &b, b.len / 2, false);
        CHECK_EQ_U64(rejections_for(path, BODY_LENGTH_REASON), 1);
    }
    /* headers only, then the half-close */
    half_close_upload("nobody.safetensors", &b, 0, false);
    CHECK_EQ_U64(rejections_for("nobody.safetensors", BODY_LENGTH_REASON), 1);
    /* chunked: the last chunk never comes */
    half_close_upload("chunk.safetensors", &b, b.len / 2, true);
    CHECK_EQ_U64(rejections_for("chunk.safetensors", BODY_LENGTH_REASON), 1);
    /* nothing of them is left: no temp file, no catalog row */
    CHECK_EQ_U64(it_count_tmp_settled(), 0);
    CHECK_EQ_U64(it_count_blobs(), 0);
    it_response r = it_get(VBASE "/files");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "files")), 0);
    it_response_free(&r);

    /* a whole body followed by a half-close is a normal upload */
    int fd = it_connect();
    CHECK(fd >= 0);
    if (fd >= 0) {
        char head[512];
        int hl = snprintf(head, sizeof head,
                          "PUT " VBASE "/files/whole.safetensors HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          "Authorization: Bearer %s\r\nContent-Length: %zu\r\n\r\n",
                          write_token, b.len);
        CHECK(it_write_all(fd, head, (size_t)hl));
        CHECK(it_write_all(fd, b.data, b.len));
        shutdown(fd, SHUT_WR);
        char resp[4096];
        it_read_some(fd, resp, sizeof resp, 3000);
        CHECK(strncmp(resp, "HTTP/1.1 201 ", 13) == 0);
        close(fd);
    }
    it_buf_free(&b);
}

TEST(header_segment_refused)
{
    it_tensor_spec t = {"w", "F32", 1, {4}};
    it_buf b = {0};
    it_build_safetensors(&b, &t, 1, NULL, 7);
    static const char *const refused[] = {"sub/header", "header", "a/b/header"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char url[256];
        snprintf(url, sizeof url, VBASE "/files/%s", refused[i]);
        it_response r = it_send("PUT", url, write_token, b.data, b.len);
        CHECK_PROBLEM(r, 400, "invalid_path");
        it_response_free(&r);
    }
    CHECK_EQ_U64(it_count_tmp_settled(), 0);
    /* `header` elsewhere in the path, or inside a segment, is an ordinary name */
    static const char *const allowed[] = {"header/x.safetensors", "sub/header.safetensors",
                                          "sub/headers"};
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++) {
        char url[256];
        snprintf(url, sizeof url, VBASE "/files/%s", allowed[i]);
        it_response r = it_send("PUT", url, write_token, b.data, b.len);
        CHECK_STATUS(r, 201);
        it_response_free(&r);
    }
    /* and the header route of a stored file still works */
    it_response r = it_get(VBASE "/files/sub/header.safetensors/header");
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "path"), "sub/header.safetensors");
    it_response_free(&r);
    it_buf_free(&b);
}

/* The header JSON is cached by (sha256, path): the same blob under two paths gives
 * each its own path, and a repeat is byte-identical to the first rendering. */
TEST(header_cache_per_path)
{
    it_tensor_spec t[] = {{"a", "F32", 2, {3, 5}}, {"b", "F16", 1, {7}}};
    it_buf b = {0};
    it_build_safetensors(&b, t, 2, NULL, 11);
    static const char *const paths[] = {"one.safetensors", "dir/two.safetensors"};
    for (int i = 0; i < 2; i++) {
        char url[256];
        snprintf(url, sizeof url, VBASE "/files/%s", paths[i]);
        it_response r = it_send("PUT", url, write_token, b.data, b.len);
        CHECK_STATUS(r, 201);
        it_response_free(&r);
    }
    for (int i = 0; i < 2; i++) {
        char url[256];
        snprintf(url, sizeof url, VBASE "/files/%s/header", paths[i]);
        it_response first = it_get(url);
        it_response again = it_get(url);
        CHECK_STATUS(first, 200);
        CHECK_STATUS(again, 200);
        CHECK_STR(it_json_str(&first, "path"), paths[i]);
        CHECK(first.body.len == again.body.len &&
              memcmp(first.body.data, again.body.data, first.body.len) == 0);
        CHECK_EQ_U64(json_array_size(json_object_get(again.json, "tensors")), 2);
        char ct[128];
        it_header(&again, "Content-Type", ct, sizeof ct);
        CHECK_STR(ct, "application/json");
        it_response_free(&first);
        it_response_free(&again);
    }
    it_buf_free(&b);
}

/* Runs `tensorgate token ACTION --data DIR [ARG]`; stdout into out, returns the exit code. */
static int token_command(const char *action, const char *arg, char *out, size_t cap)
{
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "'%s' token %s --data '%s' %s 2>/dev/null", it_binary, action,
             it_srv.data, arg ? arg : "");
    FILE *p = popen(cmd, "r");
    size_t got = 0;
    out[0] = '\0';
    if (p == NULL)
        return -1;
    size_t n;
    while (got + 1 < cap && (n = fread(out + got, 1, cap - 1 - got, p)) > 0)
        got += n;
    out[got] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(token_list_and_revoke)
{
    const char *token = it_token("write", "revokeme");
    it_response r = it_send_json("POST", "/v1/models", token, "{\"name\":\"revokeme/m\"}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);

    char list[8192];
    CHECK_EQ_U64(token_command("list", NULL, list, sizeof list), 0);
    CHECK(strncmp(list, "id\tscope\tnamespace\tcreated\n", 27) == 0);
    /* never the token (nor its hash) */
    CHECK(strstr(list, token) == NULL);
    CHECK(strstr(list, token + 3) == NULL);
    long long id = -1;
    for (char *line = strtok(list, "\n"); line; line = strtok(NULL, "\n")) {
        char scope[16], ns[80], created[40];
        long long line_id;
        if (sscanf(line, "%lld\t%15s\t%79s\t%39s", &line_id, scope, ns, created) == 4 &&
            strcmp(ns, "revokeme") == 0) {
            CHECK_STR(scope, "write");
            CHECK(strlen(created) == 20 && created[10] == 'T');
            id = line_id;
        }
    }
    CHECK(id > 0);
    char id_text[32];
    snprintf(id_text, sizeof id_text, "%lld", id);
    char out[256];
    CHECK_EQ_U64(token_command("revoke", id_text, out, sizeof out), 0);
    /* the running server refuses it from the next request on */
    r = it_send("POST", "/v1/models/revokeme/m/versions", token, NULL, 0);
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    /* other tokens still work; a second revoke of the id fails */
    r = it_send("POST", "/v1/models/acme/edge/versions", write_token, NULL, 0);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    CHECK_EQ_U64(token_command("revoke", id_text, out, sizeof out), 1);
    CHECK(token_command("list", NULL, list, sizeof list) == 0 && strstr(list, "revokeme") == NULL);
    CHECK_EQ_U64(token_command("revoke", "abc", out, sizeof out), 2);
}

/* Reads requests' answers on one connection: each GET without a body keeps the
 * connection open for the next (libmicrohttpd closed it after every answer given
 * at the headers, which cost a TCP handshake per request). */
TEST(get_keeps_connection_alive)
{
    int fd = it_connect();
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    static const char *const paths[] = {"/healthz", VBASE "/files/sub/header.safetensors/header",
                                        "/v1/no/such/route", "/healthz"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        char head[512];
        int hl =
            snprintf(head, sizeof head, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", paths[i]);
        CHECK(it_write_all(fd, head, (size_t)hl));
        char resp[8192];
        size_t got = it_read_some(fd, resp, sizeof resp, 2000);
        CHECK(got > 0);
        bool ok = strncmp(resp, i == 2 ? "HTTP/1.1 404 " : "HTTP/1.1 200 ", 13) == 0;
        CHECK(ok);
        CHECK(strcasestr(resp, "Connection: close") == NULL);
        if (!ok || strcasestr(resp, "Connection: close") != NULL) {
            fprintf(stderr, "  (request %zu on one connection: %.120s)\n", i, resp);
            break;
        }
    }
    close(fd);
}

/* %00 would end a decoded path or value early (a%00b.safetensors would name a):
 * refused before routing. Input that is not UTF-8, or that a detail cuts inside
 * a character, still gets its problem+json (the detail shows the bytes as \xNN). */
TEST(encoded_nul_and_bad_utf8)
{
    it_tensor_spec t = {"w", "F32", 1, {4}};
    it_buf b = {0};
    it_build_safetensors(&b, &t, 1, NULL, 7);
    it_response r = it_send("PUT", VBASE "/files/a%00b.safetensors", write_token, b.data, b.len);
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    it_buf_free(&b);
    r = it_get(VBASE "/files/a");
    CHECK_PROBLEM(r, 404, "file_not_found");
    it_response_free(&r);
    static const char *const nul_urls[] = {"/v1/jobs/1%00", VBASE "/tensors/w%00zz",
                                           "/v1/models?q=a%00b", VBASE "/files%00"};
    for (size_t i = 0; i < sizeof nul_urls / sizeof nul_urls[0]; i++) {
        r = it_get(nul_urls[i]);
        CHECK_PROBLEM(r, 400, "invalid_request");
        it_response_free(&r);
    }

    char long_name[512];
    snprintf(long_name, sizeof long_name, VBASE "/tensors/%0199d%%C3%%A9", 0);
    const struct {
        const char *url;
        unsigned status;
        const char *reason;
    } bad[] = {
        {VBASE "/tensors/%ff", 404, "tensor_not_found"},
        {long_name, 404, "tensor_not_found"},
        {"/v1/jobs/%ff%fe", 404, "job_not_found"},
        {"/v1/preloads/%ff%fe", 404, "preload_not_found"},
        {"/api/models/acme/edge/tree/%ff%fe", 404, "version_not_found"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = it_get(bad[i].url);
        CHECK_PROBLEM(r, bad[i].status, bad[i].reason);
        if (i == 0)
            CHECK(strstr(it_json_str(&r, "detail"), "\\xff") != NULL);
        it_response_free(&r);
    }
}

/* An upload refused for a tensor name holding U+0000 names the tensor in full. */
TEST(refused_name_in_full)
{
    it_buf b = {0};
    it_build_raw_safetensors(
        &b, "{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    it_response r = it_send("PUT", VBASE "/files/nul.safetensors", write_token, b.data, b.len);
    CHECK_STATUS(r, 422);
    /* the body holds \u0000, which jansson reads only when asked to */
    json_t *problem = json_loadb((const char *)r.body.data, r.body.len, JSON_ALLOW_NUL, NULL);
    CHECK_STR(json_string_value(json_object_get(problem, "reason")), "tensor_name_control");
    json_t *tensor = json_object_get(problem, "tensor");
    CHECK(json_string_length(tensor) == 3 && memcmp(json_string_value(tensor), "a\0b", 3) == 0);
    json_decref(problem);
    it_response_free(&r);
    it_buf_free(&b);
}

/* Bodies a route does not take are refused, and refused bodies make nothing: a
 * version POST takes no body or {}, a preload POST only its own fields. */
TEST(bodies_checked)
{
    it_response first = it_send_json("POST", "/v1/models/acme/edge/versions", write_token, "{}");
    CHECK_STATUS(first, 201);
    long long before = it_json_int(first.json, "version");
    it_response_free(&first);
    static const char *const bad_versions[][2] = {{"not json", "invalid_json"},
                                                  {"[]", "invalid_json"},
                                                  {"{\"a\":1,\"a\":2}", "invalid_json"},
                                                  {"{\"version\":5}", "invalid_request"}};
    for (size_t i = 0; i < sizeof bad_versions / sizeof bad_versions[0]; i++) {
        it_response r = it_send("POST", "/v1/models/acme/edge/versions", write_token,
                                bad_versions[i][0], strlen(bad_versions[i][0]));
        CHECK_PROBLEM(r, 400, bad_versions[i][1]);
        it_response_free(&r);
    }
    /* none of them made a draft: the next one is numbered right after the first */
    it_response r = it_send_json("POST", "/v1/models/acme/edge/versions", write_token, "{}");
    CHECK_STATUS(r, 201);
    CHECK_EQ_U64(it_json_int(r.json, "version"), before + 1);
    it_response_free(&r);
    r = it_send_json("POST", "/v1/preloads", write_token,
                     "{\"model\":\"acme/edge\",\"device\":\"host\",\"extra\":1}");
    CHECK_PROBLEM(r, 400, "invalid_request");
    CHECK(strstr(it_json_str(&r, "detail"), "extra") != NULL);
    it_response_free(&r);
}

/* One client address holds at most --max-per-ip connections (default 64): the next
 * is closed at once, and a slot frees when one of its connections closes. */
TEST(connections_per_client_bounded)
{
    CHECK(it_server_stop() == 0);
    static const char *const flags[] = {"--timeout", "100", "--max-per-ip", "2", NULL};
    CHECK(it_server_start_args(flags, NULL) == 0);
    int held[2] = {it_connect(), it_connect()};
    CHECK(held[0] >= 0 && held[1] >= 0);
    usleep(200 * 1000); /* both accepted */
    int extra = it_connect();
    CHECK(extra >= 0);
    static const char get[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    char resp[1024];
    if (extra >= 0) {
        it_write_all(extra, get, sizeof get - 1);
        CHECK_EQ_U64(it_read_some(extra, resp, sizeof resp, 2000), 0);
        close(extra);
    }
    close(held[0]);
    usleep(200 * 1000);
    int again = it_connect();
    CHECK(again >= 0);
    if (again >= 0) {
        CHECK(it_write_all(again, get, sizeof get - 1));
        size_t got = it_read_some(again, resp, sizeof resp - 1, 2000);
        resp[got] = '\0';
        CHECK(strncmp(resp, "HTTP/1.1 200", 12) == 0);
        close(again);
    }
    close(held[1]);
    CHECK(it_server_stop() == 0);
    static const char *const normal[] = {"--timeout", "100", NULL};
    CHECK(it_server_start_args(normal, NULL) == 0);
}

int main(int argc, char **argv)
{
    static const char *const flags[] = {"--timeout", "100", NULL};
    it_init(argc, argv, flags);
    write_token = it_token("write", "acme");
    admin_token = it_token("admin", NULL);
    setup();
    RUN(half_closed_uploads_end_at_once);
    RUN(header_segment_refused);
    RUN(get_keeps_connection_alive);
    RUN(header_cache_per_path);
    RUN(token_list_and_revoke);
    RUN(encoded_nul_and_bad_utf8);
    RUN(refused_name_in_full);
    RUN(bodies_checked);
    RUN(connections_per_client_bounded);
    return it_finish(argv[0]);
}
