/* Integration tests of tenant isolation across long work (issue 9): an upload, a
 * conversion job and their commits, with the model deleted, the token revoked or
 * the server killed in the middle. What was started for one tenant never lands in
 * another's rows (ids are never reused, and each commit re-checks the model's
 * identity and the token), nothing is left half-made: no row, no temp file, no
 * blob nothing references (`tensorgate gc --dry-run` finds none), and
 * `tensorgate fsck` passes. Also: unknown JSON members refused by POST /v1/models
 * and PUT .../aliases, and an index whose metadata is not an object refused at
 * publish. */
#include <pthread.h>

#include "harness.h"

#define BASE "/v1/models"

static const char *admin;

/* Runs a tensorgate command on the data dir; its exit status, stdout in out (may be NULL). */
static int tg_command(const char *args, it_buf *out)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' %s --data '%s' 2>/dev/null", it_binary, args, it_srv.data);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    char line[512];
    while (fgets(line, sizeof line, p) != NULL)
        if (out != NULL)
            it_buf_append(out, line, strlen(line));
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* fsck is clean and gc finds no blob that nothing references. A job's worker gives
 * its blobs back just after the job shows as failed (or gone), so gc is asked again
 * for up to 3 s until that has happened. */
static void check_store_clean(void)
{
    CHECK_EQ_U64(tg_command("fsck", NULL), 0);
    it_buf out = {0};
    bool orphan = true;
    for (int i = 0; i < 150 && orphan; i++) {
        if (i > 0)
            usleep(20 * 1000);
        out.len = 0;
        CHECK_EQ_U64(tg_command("gc --dry-run", &out), 0);
        orphan = out.data != NULL && out.len > 0 &&
                 strstr((const char *)out.data, "would remove") != NULL;
    }
    if (orphan) {
        fprintf(stderr, "orphan blobs: %s\n", (const char *)out.data);
        it_dump_log(it_srv.log);
    }
    CHECK(!orphan);
    it_buf_free(&out);
    CHECK_EQ_U64(it_count_tmp_settled(), 0);
}

/* The id of the newest token (`token list` is oldest first). */
static long long newest_token_id(void)
{
    it_buf out = {0};
    long long id = 0;
    if (tg_command("token list", &out) == 0 && out.data != NULL) {
        char *line = strtok((char *)out.data, "\n");
        for (; line != NULL; line = strtok(NULL, "\n"))
            id = atoll(line);
    }
    it_buf_free(&out);
    return id;
}

static void revoke_token(long long id)
{
    char args[64];
    snprintf(args, sizeof args, "token revoke %lld", id);
    CHECK_EQ_U64(tg_command(args, NULL), 0);
}

static void create_draft(const char *model, const char *tok)
{
    char body[256], url[256];
    snprintf(body, sizeof body, "{\"name\":\"%s\"}", model);
    it_response r = it_send_json("POST", BASE, tok, body);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    snprintf(url, sizeof url, BASE "/%s/versions", model);
    r = it_send_json("POST", url, tok, NULL);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
}

static void delete_model(const char *model)
{
    char url[256];
    snprintf(url, sizeof url, BASE "/%s", model);
    it_response r = it_send("DELETE", url, admin, NULL, 0);
    CHECK_STATUS(r, 204);
    it_response_free(&r);
}

static int file_count(const char *model, int version)
{
    char url[256];
    snprintf(url, sizeof url, BASE "/%s/versions/%d", model, version);
    it_response r = it_get(url);
    int count = r.status == 200 ? (int)json_array_size(json_object_get(r.json, "files")) : -1;
    it_response_free(&r);
    return count;
}

/* ---- an upload whose body is held open in the middle ---- */

typedef struct slow_upload {
    int fd;
    it_buf body;
} slow_upload;

/* Sends the head (Expect: 100-continue, so the server has run the upload's start,
 * its auth and look-ups, once "100 Continue" is back) and the first half of a JSON
 * body. */
static bool slow_upload_begin(slow_upload *u, const char *model, const char *path, const char *tok)
{
    memset(u, 0, sizeof *u);
    it_buf_append(&u->body, "{\"pad\":\"", 8);
    for (int i = 0; i < 4000; i++)
        it_buf_append(&u->body, "x", 1);
    it_buf_append(&u->body, "\"}", 2);
    u->fd = it_connect();
    if (u->fd < 0)
        return false;
    char head[1024];
    snprintf(head, sizeof head,
             "PUT " BASE "/%s/versions/1/files/%s HTTP/1.1\r\nHost: x\r\n"
             "Authorization: Bearer %s\r\nContent-Length: %zu\r\nExpect: 100-continue\r\n\r\n",
             model, path, tok, u->body.len);
    if (!it_write_all(u->fd, head, strlen(head)))
        return false;
    char reply[256];
    size_t got = 0;
    while (got + 1 < sizeof reply) {
        struct pollfd p = {u->fd, POLLIN, 0};
        if (poll(&p, 1, 10000) <= 0)
            return false;
        ssize_t n = recv(u->fd, reply + got, sizeof reply - 1 - got, 0);
        if (n <= 0)
            return false;
        got += (size_t)n;
        reply[got] = '\0';
        if (strstr(reply, "\r\n\r\n") != NULL)
            break;
    }
    if (strstr(reply, " 100 ") == NULL) {
        fprintf(stderr, "no 100 Continue: %s\n", reply);
        return false;
    }
    return it_write_all(u->fd, u->body.data, u->body.len / 2);
}

/* Sends the rest; the answer's status, its reason in reason_out. */
static int slow_upload_end(slow_upload *u, char *reason_out, size_t reason_len)
{
    reason_out[0] = '\0';
    int status = -1;
    if (it_write_all(u->fd, u->body.data + u->body.len / 2, u->body.len - u->body.len / 2)) {
        static char reply[8192];
        it_read_some(u->fd, reply, sizeof reply, 10000);
        sscanf(reply, "HTTP/1.1 %d", &status);
        const char *body = strstr(reply, "\r\n\r\n");
        json_t *json = body ? json_loads(body + 4, 0, NULL) : NULL;
        const char *reason = json_string_value(json_object_get(json, "reason"));
        snprintf(reason_out, reason_len, "%s", reason ? reason : "");
        json_decref(json);
    }
    close(u->fd);
    it_buf_free(&u->body);
    return status;
}

/* Issue 9's first case: an upload to other/evil v1, whose model an admin deletes
 * mid-body while acme/victim makes its draft v1 (the rowids the deleted rows had),
 * completed into acme's version. Now it is refused (404) and stores nothing. */
TEST(upload_to_deleted_model_lands_nowhere)
{
    const char *evil = it_token("write", "other");
    create_draft("other/evil", evil);
    slow_upload u;
    CHECK(slow_upload_begin(&u, "other/evil", "planted.json", evil));
    delete_model("other/evil");
    create_draft("acme/victim", admin);
    char reason[64];
    int status = slow_upload_end(&u, reason, sizeof reason);
    CHECK_EQ_U64(status, 404);
    CHECK_STR(reason, "version_not_found");
    CHECK_EQ_U64(file_count("acme/victim", 1), 0);
    it_response r = it_get(BASE "/acme/victim/versions/1/files/planted.json");
    CHECK_EQ_U64(r.status, 404);
    it_response_free(&r);
    check_store_clean();
    delete_model("acme/victim");
}

/* A token revoked while its upload's body is on the way: 401 token_revoked at the
 * commit, nothing stored. */
TEST(upload_with_token_revoked_mid_body_stores_nothing)
{
    const char *writer = it_token("write", "acme");
    long long id = newest_token_id();
    CHECK(id > 0);
    create_draft("acme/revoked", writer);
    slow_upload u;
    CHECK(slow_upload_begin(&u, "acme/revoked", "late.json", writer));
    revoke_token(id);
    char reason[64];
    int status = slow_upload_end(&u, reason, sizeof reason);
    CHECK_EQ_U64(status, 401);
    CHECK_STR(reason, "token_revoked");
    CHECK_EQ_U64(file_count("acme/revoked", 1), 0);
    check_store_clean();
    delete_model("acme/revoked");
}

/* An upload that loses to a publish gets 409 and gives its blob back at once. */
TEST(upload_losing_to_publish_leaves_no_blob)
{
    create_draft("acme/race", admin);
    it_response first =
        it_send("PUT", BASE "/acme/race/versions/1/files/config.json", admin, "{}", 2);
    CHECK_STATUS(first, 201);
    it_response_free(&first);
    slow_upload u;
    CHECK(slow_upload_begin(&u, "acme/race", "lost.json", admin));
    it_response r = it_send_json("POST", BASE "/acme/race/versions/1/publish", admin, NULL);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    char reason[64];
    int status = slow_upload_end(&u, reason, sizeof reason);
    CHECK_EQ_U64(status, 409);
    CHECK_STR(reason, "version_published");
    check_store_clean();
    delete_model("acme/race");
}

/* Publish and a model DELETE sent at the same moment, from two threads, a dozen
 * times: whichever wins, the model is gone afterwards, its file's blob with it, and
 * the store is clean (fsck, no orphan for gc). Publish answers 200 when it came
 * first and 404 when the delete did; nothing else. */
typedef struct race_call {
    const char *method;
    char url[256];
    long status;
} race_call;

static void *race_send(void *arg)
{
    race_call *c = arg;
    it_response r = it_send_json(c->method, c->url, admin, NULL);
    c->status = r.status;
    it_response_free(&r);
    return NULL;
}

TEST(publish_racing_delete_leaves_one_outcome)
{
    for (int i = 0; i < 12; i++) {
        char model[64], url[256];
        snprintf(model, sizeof model, "acme/pubdel%d", i);
        create_draft(model, admin);
        it_tensor_spec t = {"w", "F32", 1, {64 + (uint64_t)i}};
        it_buf file = {0};
        it_build_safetensors(&file, &t, 1, NULL, (unsigned)(1000 + i));
        snprintf(url, sizeof url, BASE "/%s/versions/1/files/model.safetensors", model);
        it_response up = it_send("PUT", url, admin, file.data, file.len);
        CHECK_STATUS(up, 201);
        char sha[65] = "";
        if (it_json_str(&up, "sha256") != NULL)
            snprintf(sha, sizeof sha, "%s", it_json_str(&up, "sha256"));
        it_response_free(&up);
        it_buf_free(&file);

        race_call publish = {.method = "POST"}, del = {.method = "DELETE"};
        snprintf(publish.url, sizeof publish.url, BASE "/%s/versions/1/publish", model);
        snprintf(del.url, sizeof del.url, BASE "/%s", model);
        pthread_t a, b;
        CHECK(pthread_create(&a, NULL, race_send, &publish) == 0);
        CHECK(pthread_create(&b, NULL, race_send, &del) == 0);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        CHECK_EQ_U64(del.status, 204);
        CHECK(publish.status == 200 || publish.status == 404);
        snprintf(url, sizeof url, BASE "/%s", model);
        it_response r = it_get(url);
        CHECK_PROBLEM(r, 404, "model_not_found");
        it_response_free(&r);
        CHECK(sha[0] != '\0' && !it_blob_exists(sha));
    }
    check_store_clean();
}

/* The server killed mid-body: after the restart no row, no temp file, no blob. */
TEST(upload_cut_by_restart_leaves_nothing)
{
    create_draft("acme/restart", admin);
    slow_upload u;
    CHECK(slow_upload_begin(&u, "acme/restart", "cut.json", admin));
    it_kill_server();
    close(u.fd);
    it_buf_free(&u.body);
    if (it_server_start_args(NULL, NULL) != 0) {
        it_dump_log(it_srv.log);
        exit(2);
    }
    CHECK_EQ_U64(file_count("acme/restart", 1), 0);
    check_store_clean();
    delete_model("acme/restart");
}

/* ---- conversion jobs ---- */

static const it_tensor_spec big[] = {{"x.weight", "F32", 2, {512, 1024}}};

static void restart_with_convert_delay(const char *delay_ms)
{
    it_kill_server();
    if (delay_ms != NULL)
        setenv("TENSORGATE_TEST_CONVERT_DELAY_MS", delay_ms, 1);
    else
        unsetenv("TENSORGATE_TEST_CONVERT_DELAY_MS");
    if (it_server_start_args(NULL, NULL) != 0) {
        it_dump_log(it_srv.log);
        exit(2);
    }
}

static void publish_big(const char *model, const char *tok)
{
    create_draft(model, tok);
    it_buf file = {0};
    it_build_safetensors(&file, big, 1, NULL, 5);
    char url[256];
    snprintf(url, sizeof url, BASE "/%s/versions/1/files/model.safetensors", model);
    it_response r = it_send("PUT", url, tok, file.data, file.len);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    it_buf_free(&file);
    snprintf(url, sizeof url, BASE "/%s/versions/1/publish", model);
    r = it_send_json("POST", url, tok, NULL);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
}

static long long start_convert(const char *model, const char *tok)
{
    char url[256];
    snprintf(url, sizeof url, BASE "/%s/versions/1/convert", model);
    it_response r = it_send_json("POST", url, tok, "{\"dtype\":\"F16\"}");
    CHECK_STATUS(r, 202);
    long long id = r.json ? it_json_int(r.json, "id") : 0;
    it_response_free(&r);
    return id;
}

static it_response get_job(long long id)
{
    char url[64];
    snprintf(url, sizeof url, "/v1/jobs/%lld", id);
    return it_get(url);
}

/* Polls until the job is done or failed, or gone (404), at most 60 s. */
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

/* Waits until the job runs and has written something. */
static bool wait_progress(long long id)
{
    for (int i = 0; i < 1500; i++) {
        it_response r = get_job(id);
        const char *state = it_json_str(&r, "state");
        bool ok = state && strcmp(state, "running") == 0 &&
                  it_json_int(json_object_get(r.json, "progress"), "bytes_done") > 0;
        it_response_free(&r);
        if (ok)
            return true;
        usleep(10 * 1000);
    }
    return false;
}

static const char *job_error(const it_response *r)
{
    return json_string_value(json_object_get(json_object_get(r->json, "error"), "reason"));
}

/* Issue 9's second case: a job of a deleted model kept running under its old id,
 * the next job (another namespace's) got that id, the dead job's progress, and was
 * failed as cancelled by nobody. Now the new job has a new id and completes. */
TEST(job_of_deleted_model_touches_no_other_job)
{
    restart_with_convert_delay("50");
    const char *evil = it_token("write", "other");
    publish_big("other/evil", evil);
    long long dead = start_convert("other/evil", evil);
    CHECK(wait_progress(dead));
    delete_model("other/evil");
    publish_big("acme/victim", admin);
    long long fresh = start_convert("acme/victim", admin);
    CHECK(fresh != dead);
    it_response r = wait_job(fresh);
    CHECK_STR(it_json_str(&r, "state"), "done");
    CHECK(job_error(&r) == NULL);
    CHECK_EQ_U64(it_json_int(r.json, "version"), 2);
    it_response_free(&r);
    r = get_job(dead);
    CHECK_EQ_U64(r.status, 404);
    it_response_free(&r);
    CHECK_EQ_U64(file_count("acme/victim", 2), 1);
    check_store_clean();
    delete_model("acme/victim");
    check_store_clean();
}

/* A token revoked while its job runs: the job fails token_revoked, makes no version. */
TEST(job_of_revoked_token_makes_no_version)
{
    const char *writer = it_token("write", "acme");
    long long token_id = newest_token_id();
    publish_big("acme/tokjob", writer);
    long long id = start_convert("acme/tokjob", writer);
    CHECK(wait_progress(id));
    revoke_token(token_id);
    it_response r = wait_job(id);
    CHECK_STR(it_json_str(&r, "state"), "failed");
    CHECK_STR(job_error(&r), "token_revoked");
    it_response_free(&r);
    r = it_get(BASE "/acme/tokjob/versions/2");
    CHECK_EQ_U64(r.status, 404);
    it_response_free(&r);
    check_store_clean();
    delete_model("acme/tokjob");
    restart_with_convert_delay(NULL);
}

/* POST /v1/models and PUT .../aliases/{alias} refuse unknown members, as the
 * schema (additionalProperties: false) and the other routes do. */
TEST(unknown_fields_are_refused)
{
    it_response r = it_send_json("POST", BASE, admin, "{\"name\":\"acme/strict\",\"privat\":true}");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = it_get(BASE "/acme/strict");
    CHECK_EQ_U64(r.status, 404);
    it_response_free(&r);
    create_draft("acme/strict", admin);
    r = it_send("PUT", BASE "/acme/strict/versions/1/files/config.json", admin, "{}", 2);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send_json("POST", BASE "/acme/strict/versions/1/publish", admin, NULL);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    r = it_send_json("PUT", BASE "/acme/strict/aliases/prod", admin,
                     "{\"version\":1,\"force\":true}");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = it_get(BASE "/acme/strict/aliases/prod");
    CHECK(r.status != 200);
    it_response_free(&r);
    delete_model("acme/strict");
}

/* An index whose metadata is not an object is refused at publish, by the same check
 * a conversion of the version would apply (it used to publish, then fail every job). */
TEST(index_metadata_must_be_an_object)
{
    create_draft("acme/indexed", admin);
    static const it_tensor_spec t[] = {{"w", "F32", 1, {4}}};
    it_buf shard = {0};
    it_build_safetensors(&shard, t, 1, NULL, 3);
    it_response r =
        it_send("PUT", BASE "/acme/indexed/versions/1/files/model-00001-of-00001.safetensors",
                admin, shard.data, shard.len);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    it_buf_free(&shard);
    const char *index = "{\"metadata\":\"total_size=16\","
                        "\"weight_map\":{\"w\":\"model-00001-of-00001.safetensors\"}}";
    r = it_send("PUT", BASE "/acme/indexed/versions/1/files/model.safetensors.index.json", admin,
                index, strlen(index));
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send_json("POST", BASE "/acme/indexed/versions/1/publish", admin, NULL);
    CHECK_PROBLEM(r, 422, "index_mismatch");
    CHECK(r.body.data != NULL && strstr((const char *)r.body.data, "not an object") != NULL);
    it_response_free(&r);
    delete_model("acme/indexed");
    check_store_clean();
}

int main(int argc, char **argv)
{
    unsetenv("TENSORGATE_TEST_CONVERT_DELAY_MS");
    it_init(argc, argv, NULL);
    admin = it_token("admin", NULL);
    RUN(upload_to_deleted_model_lands_nowhere);
    RUN(upload_with_token_revoked_mid_body_stores_nothing);
    RUN(upload_losing_to_publish_leaves_no_blob);
    RUN(upload_cut_by_restart_leaves_nothing);
    RUN(publish_racing_delete_leaves_one_outcome);
    RUN(job_of_deleted_model_touches_no_other_job);
    RUN(job_of_revoked_token_makes_no_version);
    RUN(unknown_fields_are_refused);
    RUN(index_metadata_must_be_an_object);
    return it_finish(argv[0]);
}
