/* Unit tests for server/preload/preload_service.c: the preload service as serve
 * runs it, over a real SQLite catalog and a real unix socket in a temporary
 * directory, with the fake CUDA backend:
 * - start makes the manager (host and fake cuda devices) and the hand-off socket at
 *   DATA/preload.sock; /readyz gets "gpu" and "preload", /metrics the preload lines;
 *   stop removes the socket;
 * - the socket answers for the service's manager (an unknown preload is refused);
 * - a socket path that was asked for must work (start fails, nothing left running);
 *   a default one that cannot be bound leaves preloads working without hand-off;
 * - no service (preloads not started): no manager, /readyz says so, /metrics and a
 *   model's deletion are untouched. */
#include <jansson.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "preload_service.h"
#include "test.h"

static char temp_dir[64];
static tg_catalog *catalog;

/* auth.h's tg_token_lookup as the test sees it: no token is known. */
static tg_cat_status lookup(tg_catalog *in, const char *token, tg_scope *granted,
                            char *token_namespace, size_t namespace_size)
{
    (void)in;
    (void)token;
    (void)token_namespace;
    (void)namespace_size;
    *granted = TG_SCOPE_NONE;
    return TG_CAT_NOT_FOUND;
}

static tg_preload_service_config config_with(const tg_preload_service_options *options,
                                             const char *data_dir)
{
    return (tg_preload_service_config){.options = options,
                                       .catalog = catalog,
                                       .data_dir = data_dir,
                                       .default_max_preloads = 64,
                                       .hand_off_connections = 8,
                                       .token_lookup = lookup};
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* One request line on the hand-off socket at path; the reply line in reply. */
static bool exchange(const char *path, const char *request, char *reply, size_t reply_len)
{
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof address.sun_path)
        return false;
    memcpy(address.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval timeout = {10, 0}; /* a silent socket fails the test, not hangs it */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) != 0 ||
        send(fd, request, strlen(request), MSG_NOSIGNAL) != (ssize_t)strlen(request)) {
        if (fd >= 0)
            close(fd);
        return false;
    }
    size_t got = 0;
    while (got + 1 < reply_len) {
        ssize_t n = recv(fd, reply + got, 1, 0);
        if (n <= 0 || reply[got] == '\n')
            break;
        got++;
    }
    reply[got] = '\0';
    close(fd);
    return got > 0;
}

TEST(start_readyz_metrics_and_stop)
{
    tg_preload_service_options options = {.fake_devices = 2, .budget_host = 16u << 20};
    tg_preload_service_config config = config_with(&options, temp_dir);
    tg_preload_service *service = NULL;
    char err[256] = "";
    CHECK(tg_preload_service_start(&config, &service, err, sizeof err) == 0);
    if (service == NULL) {
        fprintf(stderr, "start: %s\n", err);
        return;
    }
    CHECK(tg_preload_service_manager(service) != NULL);
    char socket_path[128];
    snprintf(socket_path, sizeof socket_path, "%s/preload.sock", temp_dir);
    CHECK(exists(socket_path));

    json_t *body = json_object();
    tg_preload_service_readyz(service, body);
    CHECK(json_is_true(json_object_get(json_object_get(body, "gpu"), "available")));
    CHECK(json_is_object(json_object_get(body, "preload")));
    json_decref(body);

    char *text = strdup("tensorgate_up 1\n");
    text = tg_preload_service_metrics_append(service, text);
    CHECK(text != NULL && strncmp(text, "tensorgate_up 1\n", 16) == 0);
    CHECK(text != NULL &&
          strstr(text, "tensorgate_preload_budget_bytes{device=\"cuda:1\"}") != NULL);
    free(text);

    /* the socket answers for the service's manager: no such preload (yet) */
    char reply[512];
    CHECK(exchange(socket_path, "{\"token\":\"tg_unknown\",\"preload\":\"0123456789abcdef\"}\n",
                   reply, sizeof reply));
    CHECK(strstr(reply, "\"preload_not_found\"") != NULL);

    tg_preload_service_model_deleted(service, 12345, "acme", "none"); /* nothing to revoke */
    tg_preload_service_stop(service);
    CHECK(!exists(socket_path));
}

TEST(an_asked_socket_path_must_work)
{
    tg_preload_service_options options = {0};
    snprintf(options.socket_path, sizeof options.socket_path, "%s/missing/dir/preload.sock",
             temp_dir);
    tg_preload_service_config config = config_with(&options, temp_dir);
    tg_preload_service *service = (tg_preload_service *)&options; /* set to NULL on failure */
    char err[256] = "";
    CHECK(tg_preload_service_start(&config, &service, err, sizeof err) == -1);
    CHECK(service == NULL);
    CHECK(err[0] != '\0');
}

TEST(a_default_socket_that_cannot_bind_leaves_preloads_working)
{
    /* DATA/preload.sock longer than a unix socket's 108 bytes */
    char data_dir[300];
    snprintf(data_dir, sizeof data_dir, "%s/%0120d", temp_dir, 0);
    CHECK(mkdir(data_dir, 0700) == 0);
    tg_preload_service_options options = {0};
    tg_preload_service_config config = config_with(&options, data_dir);
    tg_preload_service *service = NULL;
    char err[256] = "";
    CHECK(tg_preload_service_start(&config, &service, err, sizeof err) == 0);
    CHECK(tg_preload_service_manager(service) != NULL);
    tg_preload_service_stop(service);
    rmdir(data_dir);
}

TEST(no_service_is_preloads_not_started)
{
    CHECK(tg_preload_service_manager(NULL) == NULL);
    json_t *body = json_object();
    tg_preload_service_readyz(NULL, body);
    json_t *gpu = json_object_get(body, "gpu");
    CHECK(json_is_false(json_object_get(gpu, "available")));
    CHECK_STR(json_string_value(json_object_get(gpu, "reason")), "preloads are not started");
    CHECK(json_object_get(body, "preload") == NULL);
    json_decref(body);
    char *text = strdup("x 1\n");
    char *same = tg_preload_service_metrics_append(NULL, text);
    CHECK(same == text);
    free(same);
    tg_preload_service_model_deleted(NULL, 1, "acme", "m");
    tg_preload_service_stop(NULL);
}

int main(int argc, char **argv)
{
    (void)argc;
    tg_log_set_level(TG_LOG_ERROR);
    snprintf(temp_dir, sizeof temp_dir, "/tmp/tg-psvc-XXXXXX");
    CHECK(mkdtemp(temp_dir) != NULL);
    char url[128], err[256] = "";
    snprintf(url, sizeof url, "sqlite:%s/catalog.db", temp_dir);
    CHECK(tg_catalog_open(url, &catalog, err, sizeof err) == TG_CAT_OK);
    RUN(start_readyz_metrics_and_stop);
    RUN(an_asked_socket_path_must_work);
    RUN(a_default_socket_that_cannot_bind_leaves_preloads_working);
    RUN(no_service_is_preloads_not_started);
    tg_catalog_close(catalog);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", temp_dir);
    CHECK(system(command) == 0);
    return test_report(argv[0]);
}
