/* The preload hand-off client; see tg_preload_client.h. */
#include "tg_preload_client.h"
#include "io.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

struct tg_preload_client {
    int socket_fd;
    int allocation_fd;
    char *reply; /* the layout line */
    json_t *layout_json;
    char device[32];
    uint64_t bytes;
    void *map;
    size_t map_len;
    size_t tensor_count;
    tg_preload_tensor *tensors;
};

/* Reads the reply line; the fd arrives as SCM_RIGHTS with its first bytes, so
 * every read is a recvmsg with room for one. */
static int receive_reply(tg_preload_client *c, char *err, size_t err_len)
{
    size_t len = 0, cap = 0;
    for (;;) {
        if (cap - len < 4096) {
            size_t new_cap = cap ? cap * 2 : 65536;
            if (new_cap > TG_PRELOAD_CLIENT_REPLY_MAX + 1) {
                snprintf(err, err_len, "the server's reply is longer than %u bytes",
                         TG_PRELOAD_CLIENT_REPLY_MAX);
                return -1;
            }
            char *grown = realloc(c->reply, new_cap);
            if (grown == NULL) {
                snprintf(err, err_len, "out of memory");
                return -1;
            }
            c->reply = grown;
            cap = new_cap;
        }
        union {
            char buf[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } control;
        struct iovec iov = {c->reply + len, cap - len - 1};
        struct msghdr msg = {0};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof control.buf;
        ssize_t n = recvmsg(c->socket_fd, &msg, MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, err_len, "reading the reply: %s", strerror(errno));
            return -1;
        }
        for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
            if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS &&
                cmsg->cmsg_len >= CMSG_LEN(sizeof(int))) {
                int fd;
                memcpy(&fd, CMSG_DATA(cmsg), sizeof fd);
                if (c->allocation_fd < 0)
                    c->allocation_fd = fd;
                else
                    close(fd);
            }
        }
        if (n == 0) {
            snprintf(err, err_len, "the server closed the connection before replying");
            return -1;
        }
        char *newline = memchr(c->reply + len, '\n', (size_t)n);
        len += (size_t)n;
        if (newline) {
            *newline = '\0';
            return 0;
        }
    }
}

static int parse_layout(tg_preload_client *c, char *err, size_t err_len)
{
    json_error_t error;
    c->layout_json = json_loads(c->reply, 0, &error);
    if (!json_is_object(c->layout_json)) {
        snprintf(err, err_len, "the server's reply is not JSON: %s", error.text);
        return -1;
    }
    const char *reason = json_string_value(json_object_get(c->layout_json, "error"));
    if (reason) {
        const char *detail = json_string_value(json_object_get(c->layout_json, "detail"));
        snprintf(err, err_len, "%s: %s", reason, detail ? detail : "refused");
        return -1;
    }
    json_t *layout = json_object_get(c->layout_json, "layout");
    json_t *bytes = json_object_get(c->layout_json, "bytes");
    const char *device = json_string_value(json_object_get(c->layout_json, "device"));
    if (!json_is_array(layout) || !json_is_integer(bytes) || json_integer_value(bytes) < 0 ||
        device == NULL) {
        snprintf(err, err_len, "the reply has no layout");
        return -1;
    }
    snprintf(c->device, sizeof c->device, "%s", device);
    c->bytes = (uint64_t)json_integer_value(bytes);
    c->tensor_count = json_array_size(layout);
    c->tensors = calloc(c->tensor_count ? c->tensor_count : 1, sizeof *c->tensors);
    if (c->tensors == NULL) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < c->tensor_count; i++) {
        json_t *e = json_array_get(layout, i);
        tg_preload_tensor *t = &c->tensors[i];
        json_t *shape = json_object_get(e, "shape");
        json_t *offset = json_object_get(e, "offset"), *size = json_object_get(e, "bytes");
        t->name = json_string_value(json_object_get(e, "name"));
        t->dtype = json_string_value(json_object_get(e, "dtype"));
        if (t->name == NULL || t->dtype == NULL || !json_is_array(shape) ||
            json_array_size(shape) > TG_PRELOAD_CLIENT_RANK_MAX || !json_is_integer(offset) ||
            !json_is_integer(size) || json_integer_value(offset) < 0 ||
            json_integer_value(size) < 0) {
            snprintf(err, err_len, "layout entry %zu is malformed", i);
            return -1;
        }
        t->offset = (uint64_t)json_integer_value(offset);
        t->bytes = (uint64_t)json_integer_value(size);
        /* Every tensor must lie inside the allocation before anyone reads through it. */
        if (t->offset > c->bytes || t->bytes > c->bytes - t->offset) {
            snprintf(err, err_len, "tensor %s lies outside the allocation", t->name);
            return -1;
        }
        t->rank = json_array_size(shape);
        for (size_t d = 0; d < t->rank; d++)
            t->shape[d] = (uint64_t)json_integer_value(json_array_get(shape, d));
    }
    return 0;
}

int tg_preload_open(const char *socket_path, const char *token, const char *preload_id,
                    tg_preload_client **out, char *err, size_t err_len)
{
    *out = NULL;
    tg_preload_client *c = calloc(1, sizeof *c);
    if (c == NULL) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    c->allocation_fd = -1;
    c->socket_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (strlen(socket_path) >= sizeof address.sun_path) {
        snprintf(err, err_len, "the socket path is too long");
        goto fail;
    }
    memcpy(address.sun_path, socket_path, strlen(socket_path) + 1);
    if (c->socket_fd < 0 ||
        connect(c->socket_fd, (struct sockaddr *)&address, sizeof address) != 0) {
        snprintf(err, err_len, "cannot connect to %s: %s", socket_path, strerror(errno));
        goto fail;
    }
    json_t *request = json_pack("{s:s, s:s}", "token", token, "preload", preload_id);
    char *line = request ? json_dumps(request, JSON_COMPACT) : NULL;
    json_decref(request);
    int sent = line ? tg_send_all(c->socket_fd, line, strlen(line)) : -1;
    if (sent == 0)
        sent = tg_send_all(c->socket_fd, "\n", 1);
    free(line);
    if (sent != 0) {
        snprintf(err, err_len, "sending the request: %s", strerror(errno));
        goto fail;
    }
    if (receive_reply(c, err, err_len) != 0 || parse_layout(c, err, err_len) != 0)
        goto fail;
    if (c->allocation_fd < 0) {
        snprintf(err, err_len, "the server sent no file descriptor");
        goto fail;
    }
    if (json_is_true(json_object_get(c->layout_json, "mappable")) && c->bytes > 0) {
        struct stat st;
        if (fstat(c->allocation_fd, &st) != 0 || (uint64_t)st.st_size < c->bytes) {
            snprintf(err, err_len, "the shared memory is smaller than the layout says");
            goto fail;
        }
        c->map_len = (size_t)c->bytes;
        c->map = mmap(NULL, c->map_len, PROT_READ, MAP_SHARED, c->allocation_fd, 0);
        if (c->map == MAP_FAILED) {
            c->map = NULL;
            snprintf(err, err_len, "mapping the shared memory: %s", strerror(errno));
            goto fail;
        }
    }
    *out = c;
    return 0;
fail:
    tg_preload_close(c);
    return -1;
}

void tg_preload_close(tg_preload_client *c)
{
    if (c == NULL)
        return;
    if (c->map)
        munmap(c->map, c->map_len);
    if (c->allocation_fd >= 0)
        close(c->allocation_fd);
    if (c->socket_fd >= 0)
        close(c->socket_fd);
    free(c->tensors);
    json_decref(c->layout_json);
    free(c->reply);
    free(c);
}

size_t tg_preload_tensor_count(const tg_preload_client *c)
{
    return c->tensor_count;
}

const tg_preload_tensor *tg_preload_tensor_at(const tg_preload_client *c, size_t index)
{
    return index < c->tensor_count ? &c->tensors[index] : NULL;
}

const tg_preload_tensor *tg_preload_find(const tg_preload_client *c, const char *name)
{
    for (size_t i = 0; i < c->tensor_count; i++)
        if (strcmp(c->tensors[i].name, name) == 0)
            return &c->tensors[i];
    return NULL;
}

const void *tg_preload_data(const tg_preload_client *c, const tg_preload_tensor *t)
{
    if (c->map == NULL || t == NULL)
        return NULL;
    return (const char *)c->map + t->offset;
}

int tg_preload_fd(const tg_preload_client *c)
{
    return c->allocation_fd;
}

const char *tg_preload_device(const tg_preload_client *c)
{
    return c->device;
}

uint64_t tg_preload_bytes(const tg_preload_client *c)
{
    return c->bytes;
}

const char *tg_preload_layout_json(const tg_preload_client *c)
{
    return c->reply ? c->reply : "";
}
