/* Unit tests for server/preload/preload_socket.c: the hand-off protocol
 * (server/preload/preload_socket.h, docs/preload-handoff.md) over a real unix socket in a
 * temporary directory, in front of a preload manager with the host backend:
 * - a good request gets the layout line with the memfd attached (SCM_RIGHTS), and
 *   the open connection is the lease (a DELETE waits for it; closing ends it);
 * - the refusals, each one JSON line {"error","detail"} and then the close: a
 *   malformed line, a request of the wrong shape, a line over
 *   TG_PRELOAD_SOCKET_REQUEST_MAX, a connection closed before its newline, an
 *   unknown preload, a wrong or too narrow token, a preload that is loading, was
 *   revoked or cannot be re-checked, too many connections, a uid not allowed;
 * - start (a stale socket file replaced, any other file refused, the mode) and stop
 *   (every lease ended, the file removed);
 * - running out of descriptors does not make the acceptor spin. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "blobstore.h"
#include "log.h"
#include "preload_socket.h"
#include "sha256.h"
#include "test.h"

static char temp_dir[64];
static char socket_path[128];
/* the data file: a blob of a local blob store in temp_dir/store */
static tg_blobstore *blobs;
static char data_blob[TG_SHA256_HEX_LEN + 1];
static char hold_path[128];
static unsigned char file_bytes[4096];

/* ---- the server side: a manager, a re-check and an authorizer the tests steer ---- */

static tg_preload_recheck_result recheck_mode = TG_PRELOAD_RECHECK_OK;
static char recheck_reason[40] = "token_revoked";

static tg_preload_recheck_result recheck(void *context, const tg_preload_identity *identity,
                                         char *reason, size_t reason_len, char *detail,
                                         size_t detail_len)
{
    (void)context;
    (void)identity;
    tg_preload_recheck_result mode = __atomic_load_n(&recheck_mode, __ATOMIC_ACQUIRE);
    if (mode == TG_PRELOAD_RECHECK_REVOKED) {
        snprintf(reason, reason_len, "%s", recheck_reason);
        snprintf(detail, detail_len, "the token that asked for it was revoked");
    } else if (mode == TG_PRELOAD_RECHECK_ERROR) {
        snprintf(detail, detail_len, "the catalog failed");
    }
    return mode;
}

static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static char seen_token[64], seen_model[300];

/* "good" may read org/m; "narrow" is a token of another namespace; anything else is
 * not a token. */
static bool authorize(void *context, const char *token, const char *model, char *why,
                      size_t why_len, char *detail, size_t detail_len)
{
    (void)context;
    pthread_mutex_lock(&seen_lock);
    snprintf(seen_token, sizeof seen_token, "%s", token);
    snprintf(seen_model, sizeof seen_model, "%s", model);
    pthread_mutex_unlock(&seen_lock);
    if (strcmp(token, "good") == 0 && strcmp(model, "org/m") == 0)
        return true;
    if (strcmp(token, "narrow") == 0) {
        snprintf(why, why_len, "forbidden");
        snprintf(detail, detail_len, "the token is limited to the namespace 'other'");
        return false;
    }
    snprintf(why, why_len, "unauthorized");
    snprintf(detail, detail_len, "the token is not valid");
    return false;
}

static tg_preload_manager *manager;

/* A resident (or, with hold, loading) host preload of the first `bytes` of the data
 * file as one U8 tensor "t", for model_id. */
static bool submit(int64_t model_id, uint64_t bytes, char id[TG_PRELOAD_ID_LEN + 1], bool wait)
{
    static uint64_t shapes[32][1];
    static int next;
    uint64_t *shape = shapes[next++ % 32];
    shape[0] = bytes;
    tg_preload_source_tensor t = {"t", ST_U8, 1, shape, 0, 0, bytes};
    const char *files[] = {data_blob};
    tg_preload_request r = {"org/m", 1, "host", false,    ST_U8,    blobs, 1,
                            files,   1, &t,     "ns:org", model_id, 10,    NULL};
    char err[300] = "";
    tg_preload_status status = tg_preload_submit(manager, &r, id, err, sizeof err);
    CHECK(status == TG_PRELOAD_OK);
    if (status != TG_PRELOAD_OK) {
        fprintf(stderr, "submit: %s\n", err);
        return false;
    }
    if (wait) {
        const char *state = tg_preload_wait(manager, id, 10000);
        CHECK(state != NULL && strcmp(state, "resident") == 0);
        return state != NULL && strcmp(state, "resident") == 0;
    }
    return true;
}

static json_int_t leases_of(const char *id)
{
    json_t *d = tg_preload_describe(manager, id, false);
    json_int_t leases = d ? json_integer_value(json_object_get(d, "leases")) : -1;
    json_decref(d);
    return leases;
}

static char *state_of(const char *id, char *state, size_t len)
{
    json_t *d = tg_preload_describe(manager, id, false);
    snprintf(state, len, "%s", d ? json_string_value(json_object_get(d, "state")) : "gone");
    json_decref(d);
    return state;
}

static void sleep_ms(long ms)
{
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
    }
}

/* Waits (at most 5 s) until the preload holds `leases` leases. */
static bool leases_become(const char *id, json_int_t leases)
{
    for (int i = 0; i < 500; i++) {
        if (leases_of(id) == leases)
            return true;
        sleep_ms(10);
    }
    return false;
}

/* ---- the client side ---- */

/* address for path (which the tests keep short). */
static struct sockaddr_un address_of(const char *path)
{
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    CHECK(len < sizeof address.sun_path);
    if (len < sizeof address.sun_path)
        memcpy(address.sun_path, path, len + 1);
    return address;
}

static int connect_to(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    if (fd < 0)
        return -1;
    struct timeval timeout = {10, 0}; /* a server that never answers fails the test, not hangs it */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    struct sockaddr_un address = address_of(path);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        fprintf(stderr, "connect %s: %s\n", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static bool send_text(int fd, const char *text, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = send(fd, text + done, len - done, MSG_NOSIGNAL);
        if (n <= 0)
            return false;
        done += (size_t)n;
    }
    return true;
}

/* Reads one reply line (NUL-terminated, without its newline) and the descriptor
 * riding on it (*passed, -1 when none). 0, or -1 when the connection ended first. */
static int read_reply(int fd, char *line, size_t cap, int *passed)
{
    *passed = -1;
    size_t len = 0;
    while (len + 1 < cap) {
        union {
            char buf[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } control;
        struct iovec iov = {line + len, cap - 1 - len};
        struct msghdr msg = {0};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof control.buf;
        ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                memcpy(passed, CMSG_DATA(c), sizeof(int));
        CHECK((msg.msg_flags & MSG_CTRUNC) == 0);
        len += (size_t)n;
        line[len] = '\0';
        char *newline = memchr(line, '\n', len);
        if (newline != NULL) {
            CHECK(newline == line + len - 1); /* one line, nothing after it */
            *newline = '\0';
            return 0;
        }
    }
    return -1;
}

/* True when the server has closed the connection: EOF next, or ECONNRESET when it
 * closed with bytes of ours it had not read (an over-long line). */
static bool closed_by_server(int fd)
{
    char byte;
    ssize_t n = recv(fd, &byte, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* Sends request (len bytes) on a new connection to path and checks the answer is
 * the refusal {"error":reason,...} followed by the close; detail gets its detail. */
static void expect_refusal_at(const char *path, const char *request, size_t len, const char *reason,
                              char *detail, size_t detail_len)
{
    if (detail_len > 0)
        detail[0] = '\0';
    int fd = connect_to(path);
    if (fd < 0)
        return;
    /* "busy" is answered at the accept, without reading: the close may beat the send */
    bool sent = send_text(fd, request, len);
    CHECK(sent || strcmp(reason, "busy") == 0);
    char line[1024];
    int passed = -1;
    CHECK(read_reply(fd, line, sizeof line, &passed) == 0);
    CHECK(passed == -1); /* no descriptor with a refusal */
    if (passed >= 0)
        close(passed);
    json_error_t error;
    json_t *reply = json_loads(line, 0, &error);
    CHECK(json_is_object(reply));
    CHECK_EQ_U64(json_object_size(reply), 2);
    const char *got = json_string_value(json_object_get(reply, "error"));
    CHECK_STR(got, reason);
    if (got == NULL || strcmp(got, reason) != 0)
        fprintf(stderr, "  the reply was: %s\n", line);
    const char *text = json_string_value(json_object_get(reply, "detail"));
    CHECK(text != NULL && text[0] != '\0');
    if (text != NULL && detail_len > 0)
        snprintf(detail, detail_len, "%s", text);
    json_decref(reply);
    CHECK(closed_by_server(fd));
    close(fd);
}

static void expect_refusal(const char *request, const char *reason, char *detail, size_t detail_len)
{
    expect_refusal_at(socket_path, request, strlen(request), reason, detail, detail_len);
}

static char *request_for(const char *token, const char *id)
{
    static char text[256];
    snprintf(text, sizeof text, "{\"token\":\"%s\",\"preload\":\"%s\"}\n", token, id);
    return text;
}

/* Takes a lease over a new connection: returns the connection (the lease; -1 on
 * failure), *fd_out the memfd, reply_out the parsed layout line. */
static int take_lease_at(const char *path, const char *request, size_t len, int *fd_out,
                         json_t **reply_out)
{
    *fd_out = -1;
    *reply_out = NULL;
    int fd = connect_to(path);
    if (fd < 0)
        return -1;
    CHECK(send_text(fd, request, len));
    static char line[1 << 16];
    int passed = -1;
    CHECK(read_reply(fd, line, sizeof line, &passed) == 0);
    CHECK(passed >= 0);
    json_error_t error;
    json_t *reply = json_loads(line, 0, &error);
    CHECK(json_is_object(reply) && json_object_get(reply, "error") == NULL);
    if (json_object_get(reply, "error") != NULL)
        fprintf(stderr, "  the reply was: %s\n", line);
    *fd_out = passed;
    *reply_out = reply;
    return fd;
}

static int take_lease(const char *id, int *fd_out, json_t **reply_out)
{
    const char *request = request_for("good", id);
    return take_lease_at(socket_path, request, strlen(request), fd_out, reply_out);
}

static tg_preload_socket *start_socket(const char *path, unsigned max_connections,
                                       const uid_t *uids, size_t uid_count)
{
    tg_preload_socket_config config = {.path = path,
                                       .manager = manager,
                                       .authorize = authorize,
                                       .max_connections = max_connections};
    for (size_t i = 0; i < uid_count; i++)
        config.allowed_uids[i] = uids[i];
    config.allowed_count = uid_count;
    tg_preload_socket *s = NULL;
    char err[256] = "";
    CHECK(tg_preload_socket_start(&config, &s, err, sizeof err) == 0);
    if (s == NULL)
        fprintf(stderr, "socket start: %s\n", err);
    return s;
}

/* ---- the tests ---- */

TEST(a_good_request_gets_the_layout_and_the_memfd)
{
    char id[TG_PRELOAD_ID_LEN + 1];
    if (!submit(1, 1000, id, true))
        return;
    int memfd = -1;
    json_t *reply = NULL;
    int lease = take_lease(id, &memfd, &reply);
    if (lease < 0 || reply == NULL) {
        json_decref(reply);
        if (lease >= 0)
            close(lease);
        return;
    }
    pthread_mutex_lock(&seen_lock);
    CHECK_STR(seen_token, "good");
    CHECK_STR(seen_model, "org/m"); /* the preload's model is what the token is judged for */
    pthread_mutex_unlock(&seen_lock);
    CHECK_STR(json_string_value(json_object_get(reply, "preload")), id);
    CHECK_STR(json_string_value(json_object_get(reply, "model")), "org/m");
    CHECK_STR(json_string_value(json_object_get(reply, "device")), "host");
    CHECK(json_is_true(json_object_get(reply, "mappable")));
    json_t *layout = json_object_get(reply, "layout");
    CHECK_EQ_U64(json_array_size(layout), 1);
    json_t *tensor = json_array_get(layout, 0);
    CHECK_STR(json_string_value(json_object_get(tensor, "name")), "t");
    CHECK_EQ_U64(json_integer_value(json_object_get(tensor, "bytes")), 1000);
    uint64_t offset = (uint64_t)json_integer_value(json_object_get(tensor, "offset"));
    uint64_t mapped = (uint64_t)json_integer_value(json_object_get(reply, "mapped_bytes"));
    struct stat st;
    CHECK(fstat(memfd, &st) == 0 && (uint64_t)st.st_size == mapped);
    CHECK((fcntl(memfd, F_GETFL) & O_ACCMODE) == O_RDONLY);
    const unsigned char *map = mmap(NULL, mapped, PROT_READ, MAP_SHARED, memfd, 0);
    CHECK(map != MAP_FAILED);
    if (map != MAP_FAILED) {
        CHECK(memcmp(map + offset, file_bytes, 1000) == 0);
        munmap((void *)map, mapped);
    }
    close(memfd);
    json_decref(reply);

    /* the open connection is the lease: bytes the consumer sends do not end it, a
     * DELETE waits for it, and closing it ends it (and the deferred DELETE happens) */
    CHECK_EQ_U64(leases_of(id), 1);
    CHECK(send_text(lease, "anything\n", 9));
    sleep_ms(50);
    CHECK_EQ_U64(leases_of(id), 1);
    bool deferred = false;
    CHECK(tg_preload_evict(manager, id, &deferred) == TG_PRELOAD_OK);
    CHECK(deferred);
    char state[32];
    CHECK_STR(state_of(id, state, sizeof state), "evicting");
    close(lease);
    const char *end = tg_preload_wait(manager, id, 5000);
    CHECK(end != NULL && strcmp(end, "gone") == 0);
}

/* A request may come in pieces, and what follows its newline is ignored. */
TEST(a_request_in_pieces)
{
    char id[TG_PRELOAD_ID_LEN + 1];
    if (!submit(1, 100, id, true))
        return;
    int fd = connect_to(socket_path);
    if (fd < 0)
        return;
    const char *request = request_for("good", id);
    size_t len = strlen(request);
    CHECK(send_text(fd, request, 5));
    sleep_ms(20);
    CHECK(send_text(fd, request + 5, len - 5));
    CHECK(send_text(fd, "{\"more\":1}\n", 11));
    char line[4096];
    int memfd = -1;
    CHECK(read_reply(fd, line, sizeof line, &memfd) == 0);
    CHECK(memfd >= 0);
    CHECK(strstr(line, "\"layout\"") != NULL);
    if (memfd >= 0)
        close(memfd);
    CHECK(leases_become(id, 1));
    close(fd);
    CHECK(leases_become(id, 0));
    bool deferred = true;
    CHECK(tg_preload_evict(manager, id, &deferred) == TG_PRELOAD_OK && !deferred);
}

TEST(malformed_and_misshapen_requests)
{
    char detail[512];
    const char *shape = "the request must be {\"token\":\"...\",\"preload\":\"ID\"}";
    expect_refusal("not json\n", "invalid_request", detail, sizeof detail);
    CHECK_STR(detail, shape);
    expect_refusal("\n", "invalid_request", detail, sizeof detail);
    CHECK_STR(detail, shape);
    expect_refusal("[\"good\",\"0123456789abcdef\"]\n", "invalid_request", detail, sizeof detail);
    CHECK_STR(detail, shape);
    expect_refusal("{\"token\":\"good\"}\n", "invalid_request", detail, sizeof detail);
    expect_refusal("{\"preload\":\"0123456789abcdef\"}\n", "invalid_request", detail,
                   sizeof detail);
    expect_refusal("{\"token\":7,\"preload\":\"0123456789abcdef\"}\n", "invalid_request", detail,
                   sizeof detail);
    expect_refusal("{\"token\":\"good\",\"preload\":null}\n", "invalid_request", detail,
                   sizeof detail);
    /* duplicate members are refused, not resolved one way or the other */
    expect_refusal("{\"token\":\"x\",\"token\":\"good\",\"preload\":\"0123456789abcdef\"}\n",
                   "invalid_request", detail, sizeof detail);
    CHECK_STR(detail, shape);
    /* the connection ends before the newline */
    int fd = connect_to(socket_path);
    if (fd >= 0) {
        CHECK(send_text(fd, "{\"token\":\"good\"", 15));
        CHECK(shutdown(fd, SHUT_WR) == 0);
        char line[1024];
        int passed = -1;
        CHECK(read_reply(fd, line, sizeof line, &passed) == 0);
        CHECK(strstr(line, "\"error\":\"invalid_request\"") != NULL);
        CHECK(strstr(line, "send one line of JSON") != NULL);
        CHECK(closed_by_server(fd));
        close(fd);
    }
}

/* TG_PRELOAD_SOCKET_REQUEST_MAX bytes is the most a request line takes, its newline
 * included: one byte more and it is refused without being parsed. */
TEST(request_line_length_limit)
{
    char id[TG_PRELOAD_ID_LEN + 1];
    if (!submit(1, 100, id, true))
        return;
    static char request[TG_PRELOAD_SOCKET_REQUEST_MAX + 2];
    /* a good request padded with spaces to exactly the limit */
    size_t len = TG_PRELOAD_SOCKET_REQUEST_MAX;
    memset(request, ' ', len);
    const char *body = request_for("good", id);
    memcpy(request, body, strlen(body) - 1); /* without its newline */
    request[len - 1] = '\n';
    int memfd = -1;
    json_t *reply = NULL;
    int lease = take_lease_at(socket_path, request, len, &memfd, &reply);
    CHECK(lease >= 0 && memfd >= 0);
    json_decref(reply);
    if (memfd >= 0)
        close(memfd);
    if (lease >= 0)
        close(lease);
    CHECK(leases_become(id, 0));

    /* one more space: over the limit */
    memset(request, ' ', len + 1);
    memcpy(request, body, strlen(body) - 1);
    request[len] = '\n';
    char detail[512];
    expect_refusal_at(socket_path, request, len + 1, "invalid_request", detail, sizeof detail);
    CHECK_STR(detail, "send one line of JSON: {\"token\":\"...\",\"preload\":\"ID\"}");
    /* no newline at all: refused once the limit is read, without waiting for more */
    memset(request, 'a', len);
    expect_refusal_at(socket_path, request, len, "invalid_request", detail, sizeof detail);
    CHECK(strncmp(detail, "send one line of JSON", 21) == 0);
    CHECK_EQ_U64(leases_of(id), 0);
    bool deferred = true;
    CHECK(tg_preload_evict(manager, id, &deferred) == TG_PRELOAD_OK && !deferred);
}

TEST(unknown_preload_and_wrong_tokens)
{
    char detail[512];
    expect_refusal(request_for("good", "0123456789abcdef"), "preload_not_found", detail,
                   sizeof detail);
    CHECK_STR(detail, "no such preload");

    char id[TG_PRELOAD_ID_LEN + 1];
    if (!submit(1, 100, id, true))
        return;
    expect_refusal(request_for("wrong", id), "unauthorized", detail, sizeof detail);
    CHECK_STR(detail, "the token is not valid");
    expect_refusal(request_for("", id), "unauthorized", detail, sizeof detail);
    expect_refusal(request_for("narrow", id), "forbidden", detail, sizeof detail);
    CHECK_STR(detail, "the token is limited to the namespace 'other'");
    CHECK_EQ_U64(leases_of(id), 0); /* no refusal took a lease */
    bool deferred = true;
    CHECK(tg_preload_evict(manager, id, &deferred) == TG_PRELOAD_OK && !deferred);
}

/* A preload that cannot be handed out says why: still loading ("not_resident"),
 * revoked (its reason), or a re-check that could not tell ("internal"). */
TEST(not_resident_revoked_and_recheck_failures)
{
    char detail[512], state[32];
    /* loading: held after its copy while the hold file exists */
    FILE *hold = fopen(hold_path, "w");
    CHECK(hold != NULL);
    if (hold != NULL)
        fclose(hold);
    char loading[TG_PRELOAD_ID_LEN + 1];
    if (submit(5, 100, loading, false)) {
        for (int i = 0; i < 500 && strcmp(state_of(loading, state, sizeof state), "loading"); i++)
            sleep_ms(10);
        CHECK_STR(state, "loading");
        expect_refusal(request_for("good", loading), "not_resident", detail, sizeof detail);
        CHECK(strstr(detail, "not resident") != NULL);
        unlink(hold_path);
        const char *end = tg_preload_wait(manager, loading, 10000);
        CHECK(end != NULL && strcmp(end, "resident") == 0);
        int memfd = -1;
        json_t *reply = NULL;
        int lease = take_lease(loading, &memfd, &reply); /* and now it is handed out */
        CHECK(lease >= 0 && memfd >= 0);
        json_decref(reply);
        if (memfd >= 0)
            close(memfd);
        if (lease >= 0)
            close(lease);
        CHECK(leases_become(loading, 0));
    }
    unlink(hold_path);

    /* revoked with the model: the revocation's reason */
    char revoked[TG_PRELOAD_ID_LEN + 1];
    if (submit(3, 100, revoked, true)) {
        CHECK_EQ_U64(tg_preload_revoke_model(manager, 3, "model_deleted", "the model was deleted"),
                     1);
        expect_refusal(request_for("good", revoked), "model_deleted", detail, sizeof detail);
        CHECK(strstr(detail, "the model was deleted") != NULL);
    }

    /* the re-check before the hand-out cannot tell: internal, and nothing revoked */
    char checked[TG_PRELOAD_ID_LEN + 1];
    if (submit(4, 100, checked, true)) {
        __atomic_store_n(&recheck_mode, TG_PRELOAD_RECHECK_ERROR, __ATOMIC_RELEASE);
        expect_refusal(request_for("good", checked), "internal", detail, sizeof detail);
        CHECK(strstr(detail, "the catalog failed") != NULL);
        CHECK_STR(state_of(checked, state, sizeof state), "resident");
        CHECK_EQ_U64(leases_of(checked), 0);
        /* the re-check revokes it now: the re-check's reason, and it stays revoked */
        __atomic_store_n(&recheck_mode, TG_PRELOAD_RECHECK_REVOKED, __ATOMIC_RELEASE);
        expect_refusal(request_for("good", checked), "token_revoked", detail, sizeof detail);
        CHECK(strstr(detail, "revoked") != NULL);
        __atomic_store_n(&recheck_mode, TG_PRELOAD_RECHECK_OK, __ATOMIC_RELEASE);
        expect_refusal(request_for("good", checked), "token_revoked", detail, sizeof detail);
    }
    __atomic_store_n(&recheck_mode, TG_PRELOAD_RECHECK_OK, __ATOMIC_RELEASE);
}

/* max_connections: past it a connection is answered "busy" at once; stop ends every
 * lease and removes the socket file. */
TEST(busy_past_max_connections_and_stop_ends_leases)
{
    char path[128];
    snprintf(path, sizeof path, "%s/small.sock", temp_dir);
    tg_preload_socket *s = start_socket(path, 1, NULL, 0);
    if (s == NULL)
        return;
    char id[TG_PRELOAD_ID_LEN + 1];
    if (!submit(1, 100, id, true)) {
        tg_preload_socket_stop(s);
        return;
    }
    const char *request = request_for("good", id);
    int memfd = -1;
    json_t *reply = NULL;
    int lease = take_lease_at(path, request, strlen(request), &memfd, &reply);
    json_decref(reply);
    if (memfd >= 0)
        close(memfd);
    char detail[512];
    expect_refusal_at(path, request, strlen(request), "busy", detail, sizeof detail);
    CHECK_STR(detail, "too many preload connections");
    CHECK_EQ_U64(leases_of(id), 1);

    /* once the lease ends there is room again */
    if (lease >= 0)
        close(lease);
    CHECK(leases_become(id, 0));
    lease = -1;
    for (int i = 0; i < 200 && lease < 0; i++) {
        /* the connection's thread counts itself out just after the lease ends */
        reply = NULL;
        int fd = connect_to(path);
        if (fd < 0)
            break;
        /* a "busy" answer may close the connection before the request is sent:
         * a failed send is one more try, like a refusal */
        bool sent = send_text(fd, request, strlen(request));
        char line[4096];
        int passed = -1;
        if (sent && read_reply(fd, line, sizeof line, &passed) == 0 && passed >= 0) {
            close(passed);
            lease = fd;
        } else {
            close(fd);
            sleep_ms(10);
        }
    }
    CHECK(lease >= 0);
    CHECK(leases_become(id, 1));

    /* stop: the held connection is closed by the server and its lease released */
    tg_preload_socket_stop(s);
    if (lease >= 0) {
        CHECK(closed_by_server(lease));
        close(lease);
    }
    CHECK_EQ_U64(leases_of(id), 0);
    struct stat st;
    CHECK(lstat(path, &st) != 0 && errno == ENOENT);
    tg_preload_socket_stop(NULL); /* a no-op */
}

TEST(start_replaces_a_stale_socket_and_refuses_other_files)
{
    char path[128];
    snprintf(path, sizeof path, "%s/stale.sock", temp_dir);
    /* a socket file a server that did not stop cleanly left behind */
    int stale = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un address = address_of(path);
    CHECK(stale >= 0 && bind(stale, (struct sockaddr *)&address, sizeof address) == 0);
    close(stale);
    tg_preload_socket *s = start_socket(path, 0, NULL, 0);
    if (s != NULL) {
        struct stat st;
        CHECK(lstat(path, &st) == 0 && S_ISSOCK(st.st_mode));
        CHECK((st.st_mode & 0777) == 0600); /* only this uid (and root) without allowed uids */
        char detail[512];
        expect_refusal_at(path, "x\n", 2, "invalid_request", detail, sizeof detail);
        tg_preload_socket_stop(s);
    }

    /* allowed uids open the mode; the credentials are still checked */
    uid_t uids[1] = {4242};
    s = start_socket(path, 0, uids, 1);
    if (s != NULL) {
        struct stat st;
        CHECK(lstat(path, &st) == 0 && (st.st_mode & 0777) == 0666);
        tg_preload_socket_stop(s);
    }

    /* a regular file there is not replaced */
    char file[128];
    snprintf(file, sizeof file, "%s/not-a-socket", temp_dir);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    if (f != NULL) {
        fputs("keep me\n", f);
        fclose(f);
    }
    tg_preload_socket_config config = {.path = file, .manager = manager, .authorize = authorize};
    tg_preload_socket *none = NULL;
    char err[256] = "";
    CHECK(tg_preload_socket_start(&config, &none, err, sizeof err) == -1);
    CHECK(none == NULL);
    char want[300];
    snprintf(want, sizeof want, "%s exists and is not a socket", file);
    CHECK_STR(err, want);
    struct stat st;
    CHECK(stat(file, &st) == 0 && st.st_size == 8);

    /* a path longer than sun_path */
    char long_path[200];
    memset(long_path, 'p', sizeof long_path - 1);
    long_path[sizeof long_path - 1] = '\0';
    long_path[0] = '/';
    config.path = long_path;
    CHECK(tg_preload_socket_start(&config, &none, err, sizeof err) == -1);
    CHECK(strstr(err, "is longer than") != NULL);

    /* a directory that does not exist */
    char missing[160];
    snprintf(missing, sizeof missing, "%s/no/such/dir.sock", temp_dir);
    config.path = missing;
    CHECK(tg_preload_socket_start(&config, &none, err, sizeof err) == -1);
    CHECK(strncmp(err, "cannot listen on ", 17) == 0);
}

/* A peer whose uid is neither the server's, root, nor allowed is refused before it
 * can send anything; an allowed one gets the protocol. Needs root to connect as
 * other uids. */
TEST(peer_uid_is_checked)
{
    if (geteuid() != 0) {
        printf("note: not root; the peer uid checks are skipped\n");
        CHECK(true);
        return;
    }
    char path[128];
    snprintf(path, sizeof path, "%s/uids.sock", temp_dir);
    CHECK(chmod(temp_dir, 0711) == 0); /* other uids may reach the socket file */
    uid_t uids[1] = {4242};
    tg_preload_socket *s = start_socket(path, 0, uids, 1);
    if (s == NULL)
        return;
    const uid_t as[2] = {65534, 4242};
    const char *want[2] = {"\"error\":\"forbidden_uid\"", "\"error\":\"invalid_request\""};
    for (int i = 0; i < 2; i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            if (setgid(65534) != 0 || setuid(as[i]) != 0)
                _exit(3);
            int fd = socket(AF_UNIX, SOCK_STREAM, 0);
            struct sockaddr_un address = address_of(path);
            if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) != 0)
                _exit(4);
            (void)send(fd, "x\n", 2, MSG_NOSIGNAL);
            char line[512];
            ssize_t n = recv(fd, line, sizeof line - 1, MSG_WAITALL);
            if (n <= 0)
                _exit(5);
            line[n] = '\0';
            _exit(strstr(line, want[i]) != NULL ? 0 : 6);
        }
        int status = -1;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fprintf(stderr, "  uid %u: child status %d\n", (unsigned)as[i], status);
    }
    tg_preload_socket_stop(s);
    CHECK(chmod(temp_dir, 0700) == 0);
}

static double cpu_seconds(void)
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec / 1e6 +
           (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec / 1e6;
}

/* With no descriptor left, accept() fails while the connection stays pending, so
 * poll() reports it again at once: the acceptor must wait instead of spinning a core
 * until descriptors come back, and then serve the connection that waited. */
TEST(out_of_descriptors_the_acceptor_waits)
{
    char id[TG_PRELOAD_ID_LEN + 1];
    if (!submit(1, 100, id, true))
        return;
    int client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(client >= 0);
    if (client < 0)
        return;
    struct timeval timeout = {10, 0};
    setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    struct rlimit limit, low;
    CHECK(getrlimit(RLIMIT_NOFILE, &limit) == 0);
    int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
    CHECK(probe >= 0);
    close(probe);
    low = limit;
    low.rlim_cur = (rlim_t)probe; /* no new descriptor from here on */
    CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
    struct sockaddr_un address = address_of(socket_path);
    CHECK(connect(client, (struct sockaddr *)&address, sizeof address) == 0); /* pending */
    double before = cpu_seconds();
    sleep_ms(400);
    double used = cpu_seconds() - before;
    CHECK(setrlimit(RLIMIT_NOFILE, &limit) == 0);
    if (used >= 0.15)
        fprintf(stderr, "  the process used %.3f s of CPU in 0.4 s without descriptors\n", used);
    CHECK(used < 0.15);

    /* descriptors are back: the connection that waited is served */
    const char *request = request_for("good", id);
    CHECK(send_text(client, request, strlen(request)));
    char line[4096];
    int memfd = -1;
    CHECK(read_reply(client, line, sizeof line, &memfd) == 0);
    CHECK(memfd >= 0);
    if (memfd >= 0)
        close(memfd);
    close(client);
    CHECK(leases_become(id, 0));
}

int main(int argc, char **argv)
{
    (void)argc;
    snprintf(temp_dir, sizeof temp_dir, "/tmp/tg-psock-XXXXXX");
    CHECK(mkdtemp(temp_dir) != NULL);
    snprintf(socket_path, sizeof socket_path, "%s/preload.sock", temp_dir);
    snprintf(hold_path, sizeof hold_path, "%s/hold", temp_dir);
    for (size_t i = 0; i < sizeof file_bytes; i++)
        file_bytes[i] = (unsigned char)(i * 31 + 7);
    char store_dir[128], store_err[256] = "";
    snprintf(store_dir, sizeof store_dir, "%s/store", temp_dir);
    tg_blob_writer *writer = NULL;
    CHECK(tg_blobstore_open(store_dir, &blobs, store_err, sizeof store_err) == 0);
    CHECK(tg_sha256_hex(file_bytes, sizeof file_bytes, data_blob, "test") == 0);
    CHECK(blobs != NULL && tg_blob_write_begin(blobs, &writer) == TG_STORE_OK);
    CHECK(writer != NULL && tg_blob_write(writer, file_bytes, sizeof file_bytes) == TG_STORE_OK);
    CHECK(writer != NULL && tg_blob_write_commit(writer, data_blob) == TG_STORE_OK);

    tg_preload_manager_config config = {.host = tg_preload_host_backend(),
                                        .cuda = tg_preload_fake_backend(0, 0),
                                        .host_budget = 64u << 20,
                                        .recheck = recheck,
                                        .test_hold_path = hold_path};
    char err[256] = "";
    tg_log_set_level(TG_LOG_WARN); /* each lease and refusal is an info line */
    CHECK(tg_preload_manager_create(&config, &manager, err, sizeof err) == 0);
    if (manager == NULL) {
        fprintf(stderr, "manager: %s\n", err);
        return test_report(argv[0]);
    }
    tg_preload_socket *s = start_socket(socket_path, 0, NULL, 0);
    if (s != NULL) {
        RUN(a_good_request_gets_the_layout_and_the_memfd);
        RUN(a_request_in_pieces);
        RUN(malformed_and_misshapen_requests);
        RUN(request_line_length_limit);
        RUN(unknown_preload_and_wrong_tokens);
        RUN(not_resident_revoked_and_recheck_failures);
        RUN(busy_past_max_connections_and_stop_ends_leases);
        RUN(start_replaces_a_stale_socket_and_refuses_other_files);
        RUN(peer_uid_is_checked);
        RUN(out_of_descriptors_the_acceptor_waits);
        tg_preload_socket_stop(s);
    }
    tg_preload_manager_destroy(manager);
    tg_blobstore_close(blobs);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", temp_dir);
    CHECK(system(command) == 0);
    return test_report(argv[0]);
}
