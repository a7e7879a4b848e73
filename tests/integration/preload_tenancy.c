/* A preload in the middle of its load, or resident and leased, crossed with what
 * may happen meanwhile: its model deleted, the token that asked for it revoked, the
 * server stopped or killed. The server runs with TENSORGATE_TEST_PRELOAD_HOLD: while
 * that file exists a load waits after its copy (loading, its memory held), so each
 * test acts in the middle and then lets it go on, without deciding on timing.
 *
 * What must hold: a preload whose model is gone, or whose token was revoked, is
 * never handed out (the socket answers the reason), gives its memory back (the
 * device's used_bytes return to 0) and says why on GET (state failed, reason);
 * a model of the same name made again is another model; after a restart no preload
 * is left and the data directory passes `tensorgate fsck`. */
#include "harness.h"

/* The client library has no Makefile rule of its own yet: compiled in here. */
#include "tg_preload_client.h"

static char hold_path[300];
static char socket_path[400];
static const char *admin_token;
static const char *write_token;
static const char *read_token;

static void hold(bool on)
{
    if (on) {
        int fd = open(hold_path, O_WRONLY | O_CREAT, 0644);
        CHECK(fd >= 0);
        if (fd >= 0)
            close(fd);
    } else {
        unlink(hold_path);
    }
}

static void remove_hold(void)
{
    if (hold_path[0] != '\0')
        unlink(hold_path);
}

/* A model org/NAME with one published version of two F32 tensors. */
static void make_model(const char *name)
{
    char body[128], path[128];
    snprintf(body, sizeof body, "{\"name\":\"org/%s\"}", name);
    it_response r = it_send_json("POST", "/v1/models", write_token, body);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    snprintf(path, sizeof path, "/v1/models/org/%s/versions", name);
    r = it_send("POST", path, write_token, NULL, 0);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    it_tensor_spec tensors[] = {{"w", "F32", 2, {64, 64}}, {"b", "F32", 1, {64}}};
    it_buf file = {0};
    it_build_safetensors(&file, tensors, 2, NULL, 7);
    snprintf(path, sizeof path, "/v1/models/org/%s/versions/1/files/model.safetensors", name);
    r = it_send("PUT", path, write_token, file.data, file.len);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    snprintf(path, sizeof path, "/v1/models/org/%s/versions/1/publish", name);
    r = it_send("POST", path, write_token, NULL, 0);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    it_buf_free(&file);
}

static void delete_model(const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/models/org/%s", name);
    it_response r = it_request("DELETE", path, &(it_request_opts){.token = admin_token});
    CHECK_STATUS(r, 204);
    it_response_free(&r);
}

/* POST /v1/preloads of org/NAME with token; id gets its id. */
static bool post_preload(const char *name, const char *token, char id[17])
{
    char body[128];
    snprintf(body, sizeof body, "{\"model\":\"org/%s\"}", name);
    it_response r = it_send_json("POST", "/v1/preloads", token, body);
    CHECK_STATUS(r, 202);
    const char *text = it_json_str(&r, "id");
    snprintf(id, 17, "%s", text ? text : "");
    bool ok = r.status == 202 && text != NULL;
    it_response_free(&r);
    return ok;
}

/* GET /v1/preloads/{id} (the caller frees it). */
static it_response get_preload(const char *id)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/preloads/%s", id);
    return it_get(path);
}

/* Polls GET until the state is want ("gone": 404), at most ~10 s. */
static bool wait_state(const char *id, const char *want)
{
    for (int i = 0; i < 500; i++) {
        it_response r = get_preload(id);
        bool done = strcmp(want, "gone") == 0 ? r.status == 404
                                              : r.status == 200 && it_json_str(&r, "state") &&
                                                    strcmp(it_json_str(&r, "state"), want) == 0;
        it_response_free(&r);
        if (done)
            return true;
        usleep(20 * 1000);
    }
    fprintf(stderr, "preload %s never became %s\n", id, want);
    return false;
}

/* Polls GET until the preload shows `leases` leases, at most ~10 s. */
static bool wait_leases(const char *id, long long leases)
{
    for (int i = 0; i < 500; i++) {
        it_response r = get_preload(id);
        bool done = r.status == 200 && it_json_int(r.json, "leases") == leases;
        it_response_free(&r);
        if (done)
            return true;
        usleep(20 * 1000);
    }
    return false;
}

/* The host device's used_bytes in GET /v1/preloads. */
static long long host_used_bytes(void)
{
    it_response r = it_get("/v1/preloads");
    long long used = -1;
    json_t *devices = json_object_get(r.json, "devices");
    for (size_t i = 0; i < json_array_size(devices); i++) {
        json_t *d = json_array_get(devices, i);
        const char *name = json_string_value(json_object_get(d, "device"));
        if (name != NULL && strcmp(name, "host") == 0)
            used = it_json_int(d, "used_bytes");
    }
    it_response_free(&r);
    return used;
}

/* A failed preload that says why, holds no memory and is DELETEd with 204. */
static void check_revoked_and_delete(const char *id, const char *reason)
{
    it_response r = get_preload(id);
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "state"), "failed");
    CHECK_STR(it_json_str(&r, "reason"), reason);
    CHECK(it_json_str(&r, "error") != NULL && strlen(it_json_str(&r, "error")) > 0);
    CHECK(it_json_int(r.json, "mapped_bytes") == 0);
    it_response_free(&r);
    CHECK(host_used_bytes() == 0);
    /* never handed out: the socket says why */
    tg_preload_client *client = NULL;
    char err[512] = "";
    CHECK(tg_preload_open(socket_path, read_token, id, &client, err, sizeof err) != 0);
    CHECK(strncmp(err, reason, strlen(reason)) == 0);
    if (strncmp(err, reason, strlen(reason)) != 0)
        fprintf(stderr, "the socket answered: %s\n", err);
    if (client != NULL)
        tg_preload_close(client);
    char path[64];
    snprintf(path, sizeof path, "/v1/preloads/%s", id);
    r = it_request("DELETE", path, &(it_request_opts){.token = write_token});
    CHECK_STATUS(r, 204);
    it_response_free(&r);
    CHECK(wait_state(id, "gone"));
}

/* `tensorgate token create` for a write token on org, and its id (the newest). */
static const char *write_token_with_id(long long *id)
{
    const char *token = it_token("write", "org");
    char cmd[1200], line[512];
    snprintf(cmd, sizeof cmd, "'%s' token list --data '%s'", it_binary, it_srv.data);
    FILE *p = popen(cmd, "r");
    *id = 0;
    while (p != NULL && fgets(line, sizeof line, p) != NULL)
        if (atoll(line) > *id)
            *id = atoll(line);
    CHECK(p != NULL && pclose(p) == 0 && *id > 0);
    return token;
}

static void revoke_token(long long id)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' token revoke --data '%s' %lld 2>/dev/null", it_binary,
             it_srv.data, id);
    CHECK(system(cmd) == 0);
}

/* tensorgate fsck's exit status (0: the data directory is consistent). */
static int fsck(void)
{
    char cmd[1200], line[512];
    snprintf(cmd, sizeof cmd, "'%s' fsck --data '%s' 2>&1", it_binary, it_srv.data);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    while (fgets(line, sizeof line, p) != NULL)
        fprintf(stderr, "fsck: %s", line);
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void restart(void)
{
    if (it_server_start_args(NULL, NULL) != 0) {
        it_dump_log(it_srv.log);
        fprintf(stderr, "the server did not restart\n");
        exit(2);
    }
}

TEST(model_deleted_while_loading)
{
    make_model("a");
    hold(true);
    char id[17];
    CHECK(post_preload("a", write_token, id));
    CHECK(wait_state(id, "loading"));
    CHECK(host_used_bytes() > 0);
    /* the DELETE stops the load at once: the hold is still there */
    delete_model("a");
    CHECK(wait_state(id, "failed"));
    check_revoked_and_delete(id, "model_deleted");
    hold(false);

    /* The same name made again is another model: its preloads work, the old one's
     * revocation does not touch them. */
    make_model("a");
    char again[17];
    CHECK(post_preload("a", write_token, again));
    CHECK(wait_state(again, "resident"));
    tg_preload_client *client = NULL;
    char err[512] = "";
    CHECK(tg_preload_open(socket_path, read_token, again, &client, err, sizeof err) == 0);
    if (client != NULL)
        tg_preload_close(client);
    /* the server sees the close a little later; unleased, DELETE is immediate */
    CHECK(wait_leases(again, 0));
    char path[64];
    snprintf(path, sizeof path, "/v1/preloads/%s", again);
    it_response r = it_request("DELETE", path, &(it_request_opts){.token = write_token});
    CHECK_STATUS(r, 204);
    it_response_free(&r);
    CHECK(wait_state(again, "gone"));
    delete_model("a");
}

TEST(model_deleted_while_leased)
{
    make_model("b");
    char id[17];
    CHECK(post_preload("b", write_token, id));
    CHECK(wait_state(id, "resident"));
    tg_preload_client *client = NULL;
    char err[512] = "";
    CHECK(tg_preload_open(socket_path, read_token, id, &client, err, sizeof err) == 0);
    if (client == NULL)
        return;
    const tg_preload_tensor *w = tg_preload_find(client, "w");
    CHECK(w != NULL && tg_preload_data(client, w) != NULL);
    float first = w ? *(const float *)tg_preload_data(client, w) : 0;

    delete_model("b");
    /* Leased: the lessee keeps its memory until it lets go, nobody gets a new lease. */
    it_response r = get_preload(id);
    CHECK_STR(it_json_str(&r, "state"), "evicting");
    CHECK_STR(it_json_str(&r, "reason"), "model_deleted");
    CHECK(it_json_int(r.json, "leases") == 1);
    it_response_free(&r);
    tg_preload_client *second = NULL;
    CHECK(tg_preload_open(socket_path, read_token, id, &second, err, sizeof err) != 0);
    CHECK(strncmp(err, "model_deleted", 13) == 0);
    if (second != NULL)
        tg_preload_close(second);
    CHECK(w != NULL && *(const float *)tg_preload_data(client, w) == first);
    CHECK(host_used_bytes() > 0);

    /* The lease's end releases the memory; the record stays to say why. */
    tg_preload_close(client);
    CHECK(wait_state(id, "failed"));
    check_revoked_and_delete(id, "model_deleted");
}

TEST(token_revoked_while_loading)
{
    make_model("c");
    long long token_id = 0;
    const char *token = write_token_with_id(&token_id);
    hold(true);
    char id[17];
    CHECK(post_preload("c", token, id));
    CHECK(wait_state(id, "loading"));
    revoke_token(token_id);
    hold(false);
    /* the load's end re-checks the token before the preload can become resident */
    CHECK(wait_state(id, "failed"));
    check_revoked_and_delete(id, "token_revoked");
    delete_model("c");
}

TEST(token_revoked_while_resident)
{
    make_model("d");
    long long token_id = 0;
    const char *token = write_token_with_id(&token_id);
    char id[17];
    CHECK(post_preload("d", token, id));
    CHECK(wait_state(id, "resident"));
    revoke_token(token_id);
    /* the next hand-out re-checks: refused with the reason, the memory goes */
    tg_preload_client *client = NULL;
    char err[512] = "";
    CHECK(tg_preload_open(socket_path, read_token, id, &client, err, sizeof err) != 0);
    CHECK(strncmp(err, "token_revoked", 13) == 0);
    if (client != NULL)
        tg_preload_close(client);
    CHECK(wait_state(id, "failed"));
    check_revoked_and_delete(id, "token_revoked");
    delete_model("d");
}

TEST(restart_in_the_middle)
{
    make_model("e");
    /* SIGTERM while a load is held: a clean exit, nothing left behind */
    hold(true);
    char id[17];
    CHECK(post_preload("e", write_token, id));
    CHECK(wait_state(id, "loading"));
    int status = it_server_stop();
    CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(fsck() == 0);
    restart();
    CHECK(wait_state(id, "gone"));
    it_response r = it_get("/v1/preloads");
    CHECK_STATUS(r, 200);
    CHECK(json_array_size(json_object_get(r.json, "preloads")) == 0);
    it_response_free(&r);
    CHECK(host_used_bytes() == 0);

    /* kill -9 while one is held and another resident and leased */
    char leased[17];
    hold(false);
    CHECK(post_preload("e", write_token, leased));
    CHECK(wait_state(leased, "resident"));
    tg_preload_client *client = NULL;
    char err[512] = "";
    CHECK(tg_preload_open(socket_path, read_token, leased, &client, err, sizeof err) == 0);
    hold(true);
    CHECK(post_preload("e", write_token, id));
    CHECK(wait_state(id, "loading"));
    it_kill_server();
    /* the lessee keeps the memory it mapped; the server's record of it is gone */
    const tg_preload_tensor *w = client ? tg_preload_find(client, "w") : NULL;
    CHECK(w != NULL && tg_preload_data(client, w) != NULL);
    CHECK(fsck() == 0);
    hold(false);
    restart();
    CHECK(wait_state(id, "gone"));
    CHECK(wait_state(leased, "gone"));
    r = it_get("/v1/preloads");
    CHECK(json_array_size(json_object_get(r.json, "preloads")) == 0);
    it_response_free(&r);
    CHECK(host_used_bytes() == 0);
    if (client != NULL) {
        /* a lease on the old server's socket: nothing to end on the new one */
        tg_preload_close(client);
    }
    /* the new server works on the same data */
    CHECK(post_preload("e", write_token, id));
    CHECK(wait_state(id, "resident"));
    CHECK(fsck() == 0);
}

int main(int argc, char **argv)
{
    snprintf(hold_path, sizeof hold_path, "/tmp/tg-preload-hold-%d", (int)getpid());
    unlink(hold_path);
    atexit(remove_hold);
    setenv("TENSORGATE_TEST_PRELOAD_HOLD", hold_path, 1);
    it_init(argc, argv, NULL);
    snprintf(socket_path, sizeof socket_path, "%s/preload.sock", it_srv.data);
    admin_token = it_token("admin", NULL);
    write_token = it_token("write", "org");
    read_token = it_token("read", "org");
    RUN(model_deleted_while_loading);
    RUN(model_deleted_while_leased);
    RUN(token_revoked_while_loading);
    RUN(token_revoked_while_resident);
    RUN(restart_in_the_middle);
    return it_finish(argv[0]);
}
