/* The preload hand-off socket; see preload_socket.h. One thread accepts; each
 * connection gets a thread that does the handshake, then sleeps in poll() until
 * the peer closes (the lease's end) or the server stops. */
#include "preload_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "io.h"
#include "log.h"

#define CONNECTIONS_MAX 1024
#define HANDSHAKE_SECONDS 5
#define ACCEPT_RETRY_MS 100 /* after accept() found no descriptor or memory */

struct tg_preload_socket {
    tg_preload_socket_config config;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int listen_fd;
    int stop_pipe[2]; /* readable once stopping: wakes every poll() */
    pthread_t acceptor;
    pthread_mutex_t lock;
    pthread_cond_t drained;
    unsigned connections;
};

typedef struct connection {
    tg_preload_socket *server;
    int fd;
    struct ucred peer;
} connection;

static bool uid_allowed(const tg_preload_socket *s, uid_t uid)
{
    if (uid == 0 || uid == geteuid())
        return true;
    for (size_t i = 0; i < s->config.allowed_count; i++)
        if (s->config.allowed_uids[i] == uid)
            return true;
    return false;
}

static void send_error(int fd, const char *reason, const char *detail)
{
    json_t *body = json_pack("{s:s, s:s}", "error", reason, "detail", detail);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (text) {
        if (tg_send_all(fd, text, strlen(text)) == 0)
            (void)tg_send_all(fd, "\n", 1);
        free(text);
    }
}

/* The reply line with the fd riding on its first bytes. */
static int send_with_fd(int fd, const char *text, int passed_fd)
{
    size_t len = strlen(text);
    struct iovec iov = {(void *)(uintptr_t)text, len};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof control.buf;
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cmsg), &passed_fd, sizeof(int));
    ssize_t n;
    do {
        n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n <= 0)
        return -1;
    /* The rest (a large layout) follows as plain bytes. */
    if (tg_send_all(fd, text + n, len - (size_t)n) != 0)
        return -1;
    return tg_send_all(fd, "\n", 1);
}

/* Reads the request line (bounded, with the handshake timeout); NUL-terminated. */
static int read_line(int fd, char *line, size_t cap)
{
    size_t len = 0;
    while (len + 1 < cap) {
        ssize_t n = recv(fd, line + len, cap - 1 - len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        char *newline = memchr(line + len, '\n', (size_t)n);
        len += (size_t)n;
        if (newline) {
            *newline = '\0';
            return 0;
        }
    }
    return -1;
}

static void handle(connection *c)
{
    tg_preload_socket *s = c->server;
    char line[TG_PRELOAD_SOCKET_REQUEST_MAX + 1];
    struct timeval timeout = {HANDSHAKE_SECONDS, 0};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    if (read_line(c->fd, line, sizeof line) != 0) {
        send_error(c->fd, "invalid_request",
                   "send one line of JSON: {\"token\":\"...\",\"preload\":\"ID\"}");
        return;
    }
    json_error_t error;
    json_t *request = json_loads(line, JSON_REJECT_DUPLICATES, &error);
    const char *token = json_string_value(json_object_get(request, "token"));
    const char *id = json_string_value(json_object_get(request, "preload"));
    char model[256], why[32] = "", detail[300] = "";
    if (!json_is_object(request) || token == NULL || id == NULL) {
        send_error(c->fd, "invalid_request",
                   "the request must be {\"token\":\"...\",\"preload\":\"ID\"}");
    } else if (!tg_preload_model(s->config.manager, id, model, sizeof model)) {
        send_error(c->fd, "preload_not_found", "no such preload");
    } else if (!s->config.authorize(s->config.authorize_context, token, model, why, sizeof why,
                                    detail, sizeof detail)) {
        tg_log(TG_LOG_INFO, "preload socket: pid %d uid %u refused for %s: %s", (int)c->peer.pid,
               (unsigned)c->peer.uid, id, detail);
        send_error(c->fd, why, detail);
    } else {
        int allocation_fd = -1;
        char *layout = NULL;
        tg_preload_status status =
            tg_preload_lease(s->config.manager, id, &allocation_fd, &layout, detail, sizeof detail);
        if (status != TG_PRELOAD_OK) {
            /* A revoked preload says why ("model_deleted", "token_revoked", ...). */
            char reason[40] = "";
            if (status == TG_PRELOAD_NOT_RESIDENT &&
                !tg_preload_reason(s->config.manager, id, reason, sizeof reason))
                snprintf(reason, sizeof reason, "not_resident");
            send_error(c->fd,
                       status == TG_PRELOAD_NOT_FOUND      ? "preload_not_found"
                       : status == TG_PRELOAD_NOT_RESIDENT ? reason
                                                           : "internal",
                       detail);
        } else {
            int sent = send_with_fd(c->fd, layout, allocation_fd);
            close(allocation_fd);
            free(layout);
            if (sent == 0) {
                tg_log(TG_LOG_INFO, "preload socket: lease on %s to pid %d uid %u", id,
                       (int)c->peer.pid, (unsigned)c->peer.uid);
                /* The lease lasts as long as the connection: wait for the peer to close
                 * (or die) or for the server to stop. Bytes the peer sends are ignored. */
                struct pollfd fds[2] = {{c->fd, POLLIN, 0}, {s->stop_pipe[0], POLLIN, 0}};
                for (;;) {
                    int ready = poll(fds, 2, -1);
                    if (ready < 0 && errno == EINTR)
                        continue;
                    if (ready < 0 || fds[1].revents)
                        break;
                    if (fds[0].revents & (POLLERR | POLLHUP | POLLNVAL))
                        break;
                    char drain[256];
                    ssize_t n = recv(c->fd, drain, sizeof drain, MSG_DONTWAIT);
                    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                        break;
                }
                tg_log(TG_LOG_INFO, "preload socket: lease on %s by pid %d ended", id,
                       (int)c->peer.pid);
            }
            tg_preload_unlease(s->config.manager, id);
        }
    }
    json_decref(request);
}

static void *connection_main(void *arg)
{
    connection *c = arg;
    tg_preload_socket *s = c->server;
    handle(c);
    close(c->fd);
    free(c);
    pthread_mutex_lock(&s->lock);
    s->connections--;
    pthread_cond_broadcast(&s->drained);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static void *acceptor_main(void *arg)
{
    tg_preload_socket *s = arg;
    for (;;) {
        struct pollfd fds[2] = {{s->listen_fd, POLLIN, 0}, {s->stop_pipe[0], POLLIN, 0}};
        int ready = poll(fds, 2, -1);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready < 0 || fds[1].revents)
            break;
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            /* Out of descriptors or memory: the connection stays pending and poll()
             * reports it again at once, so wait a little (or for stop) instead of
             * spinning a core until some come back. */
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                struct pollfd stop = {s->stop_pipe[0], POLLIN, 0};
                (void)poll(&stop, 1, ACCEPT_RETRY_MS);
            }
            continue;
        }
        struct ucred peer;
        socklen_t peer_len = sizeof peer;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_len) != 0) {
            close(fd);
            continue;
        }
        if (!uid_allowed(s, peer.uid)) {
            tg_log(TG_LOG_WARN, "preload socket: refused pid %d uid %u (not an allowed uid)",
                   (int)peer.pid, (unsigned)peer.uid);
            send_error(fd, "forbidden_uid", "this uid may not use the preload socket");
            close(fd);
            continue;
        }
        tg_log(TG_LOG_DEBUG, "preload socket: connection from pid %d uid %u", (int)peer.pid,
               (unsigned)peer.uid);
        pthread_mutex_lock(&s->lock);
        bool room = s->connections <
                    (s->config.max_connections ? s->config.max_connections : CONNECTIONS_MAX);
        if (room)
            s->connections++;
        pthread_mutex_unlock(&s->lock);
        connection *c = room ? malloc(sizeof *c) : NULL;
        if (c == NULL) {
            send_error(fd, "busy", "too many preload connections");
            close(fd);
            if (room) {
                pthread_mutex_lock(&s->lock);
                s->connections--;
                pthread_mutex_unlock(&s->lock);
            }
            continue;
        }
        *c = (connection){s, fd, peer};
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 256 * 1024);
        if (pthread_create(&thread, &attr, connection_main, c) != 0) {
            send_error(fd, "busy", "cannot start a connection thread");
            close(fd);
            free(c);
            pthread_mutex_lock(&s->lock);
            s->connections--;
            pthread_mutex_unlock(&s->lock);
        }
        pthread_attr_destroy(&attr);
    }
    return NULL;
}

int tg_preload_socket_start(const tg_preload_socket_config *config, tg_preload_socket **out,
                            char *err, size_t err_len)
{
    tg_preload_socket *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    s->config = *config;
    s->listen_fd = -1;
    s->stop_pipe[0] = s->stop_pipe[1] = -1;
    if (strlen(config->path) >= sizeof s->path) {
        snprintf(err, err_len, "the preload socket path %s is longer than %zu bytes", config->path,
                 sizeof s->path - 1);
        goto fail;
    }
    snprintf(s->path, sizeof s->path, "%s", config->path);
    struct stat st;
    if (lstat(s->path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(err, err_len, "%s exists and is not a socket", s->path);
            goto fail;
        }
        unlink(s->path); /* left by a server that did not stop cleanly */
    }
    s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    memcpy(address.sun_path, s->path, strlen(s->path) + 1);
    if (s->listen_fd < 0 || bind(s->listen_fd, (struct sockaddr *)&address, sizeof address) != 0 ||
        listen(s->listen_fd, 64) != 0) {
        snprintf(err, err_len, "cannot listen on %s: %s", s->path, strerror(errno));
        goto fail;
    }
    /* Other users' processes can connect only when uids were allowed; the peer
     * credentials are checked either way. */
    chmod(s->path, config->allowed_count ? 0666 : 0600);
    if (pipe2(s->stop_pipe, O_CLOEXEC) != 0) {
        snprintf(err, err_len, "pipe: %s", strerror(errno));
        goto fail;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->drained, NULL);
    if (pthread_create(&s->acceptor, NULL, acceptor_main, s) != 0) {
        snprintf(err, err_len, "cannot start the preload socket thread");
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->drained);
        goto fail;
    }
    *out = s;
    return 0;
fail:
    if (s->listen_fd >= 0) {
        close(s->listen_fd);
        unlink(s->path);
    }
    if (s->stop_pipe[0] >= 0) {
        close(s->stop_pipe[0]);
        close(s->stop_pipe[1]);
    }
    free(s);
    return -1;
}

void tg_preload_socket_stop(tg_preload_socket *s)
{
    if (s == NULL)
        return;
    if (write(s->stop_pipe[1], "x", 1) != 1)
        tg_log(TG_LOG_ERROR, "preload socket: cannot signal the threads to stop");
    pthread_join(s->acceptor, NULL);
    close(s->listen_fd);
    unlink(s->path);
    pthread_mutex_lock(&s->lock);
    while (s->connections > 0)
        pthread_cond_wait(&s->drained, &s->lock);
    pthread_mutex_unlock(&s->lock);
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->drained);
    free(s);
}
