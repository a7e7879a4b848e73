/* The server as users meet it on a port and behind a reverse proxy:
 *  - a second `tensorgate serve` on the port of a running one exits 1 (docs/MANUAL.md's
 *    "cannot start") saying the port is in use, and never shares the port: every
 *    request still reaches the first registry;
 *  - paging through a real nginx run with the shipped docker/nginx-replicas.conf
 *    (rendered with this test's ports: the upstream and listen lines only, every
 *    proxy_set_header line as shipped): the Link of /api/models and of a tree,
 *    followed through nginx, gives the next page, with and without --trusted-proxy;
 *  - X-Forwarded-Host, X-Forwarded-Proto and Forwarded are believed only from a
 *    --trusted-proxy peer (a request from 127.0.0.2 with forged ones gets its Host's
 *    links), and --public-url wins over both. */
#include <sys/prctl.h>

#include "harness.h"

#define NGINX "/usr/sbin/nginx"
#define SHIPPED_CONF "docker/nginx-replicas.conf"
#define MODELS 5

static pid_t nginx_pid;
static int nginx_port;
static char nginx_base[64];
static const char *admin_token;

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static bool port_answers(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

static int count_lines(const char *path, const char *needle)
{
    it_buf text = {0};
    int count = 0;
    if (it_read_file(path, &text)) {
        it_buf_append(&text, "", 1);
        for (const char *p = (const char *)text.data; (p = strstr(p, needle)) != NULL; p++)
            count++;
    }
    it_buf_free(&text);
    return count;
}

/* Renders the shipped conf for the server's port and starts nginx on a free port. */
static bool start_nginx(void)
{
    char dir[400], conf[500], site[500], cmd[2000];
    snprintf(dir, sizeof dir, "%s/nginx", it_root_dir);
    snprintf(conf, sizeof conf, "%s/nginx.conf", dir);
    snprintf(site, sizeof site, "%s/site.conf", dir);
    nginx_port = free_port();
    snprintf(nginx_base, sizeof nginx_base, "http://127.0.0.1:%d", nginx_port);
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s' && sed -e 's/replica1:8080/127.0.0.1:%d/' -e '/replica2:8080/d' "
             "-e 's/listen 8080;/listen 127.0.0.1:%d;/' " SHIPPED_CONF " > '%s'",
             dir, it_srv.port, nginx_port, site);
    if (system(cmd) != 0)
        return false;
    /* the rendered file keeps every proxy_set_header line of the shipped one */
    int shipped = count_lines(SHIPPED_CONF, "proxy_set_header");
    CHECK(shipped >= 4 && count_lines(site, "proxy_set_header") == shipped);
    CHECK(count_lines(site, "proxy_set_header Host $http_host;") == 1);
    FILE *f = fopen(conf, "w");
    if (f == NULL)
        return false;
    fprintf(f,
            "%s\nworker_processes 1;\npid %s/nginx.pid;\nerror_log %s/error.log warn;\n"
            "daemon off;\nevents { worker_connections 64; }\nhttp {\n"
            "    access_log %s/access.log;\n    client_body_temp_path %s/body;\n"
            "    proxy_temp_path %s/proxy;\n    fastcgi_temp_path %s/fastcgi;\n"
            "    uwsgi_temp_path %s/uwsgi;\n    scgi_temp_path %s/scgi;\n    include %s;\n}\n",
            getuid() == 0 ? "user root;" : "", dir, dir, dir, dir, dir, dir, dir, dir, site);
    fclose(f);
    pid_t parent = getpid();
    nginx_pid = fork();
    if (nginx_pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        execl(NGINX, NGINX, "-c", conf, "-p", dir, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500 && nginx_pid > 0; i++) {
        if (port_answers(nginx_port))
            return true;
        if (waitpid(nginx_pid, NULL, WNOHANG) == nginx_pid) {
            nginx_pid = 0;
            break;
        }
        usleep(20 * 1000);
    }
    fprintf(stderr, "proxy: nginx (%s) did not start; see %s/error.log\n", NGINX, dir);
    return false;
}

static void stop_nginx(void)
{
    if (nginx_pid > 0) {
        kill(nginx_pid, SIGTERM);
        waitpid(nginx_pid, NULL, 0);
    }
    nginx_pid = 0;
}

/* A GET of path from base (another origin than the server's: nginx). */
static it_response get_via(const char *base, const char *path, const char *const *headers)
{
    char saved[sizeof it_srv.base];
    memcpy(saved, it_srv.base, sizeof saved);
    snprintf(it_srv.base, sizeof it_srv.base, "%s", base);
    it_response r = it_request("GET", path, &(it_request_opts){.headers = headers});
    memcpy(it_srv.base, saved, sizeof saved);
    return r;
}

/* A GET of the server from the source address 127.0.0.2 (outside 127.0.0.1/32). */
static it_response get_from_other_address(const char *path, const char *const *headers)
{
    it_response r;
    memset(&r, 0, sizeof r);
    char url[1024];
    snprintf(url, sizeof url, "%s%s", it_srv.base, path);
    CURL *c = curl_easy_init();
    struct curl_slist *list = NULL;
    for (int i = 0; headers != NULL && headers[i] != NULL; i++)
        list = curl_slist_append(list, headers[i]);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_INTERFACE, "127.0.0.2");
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, it_write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, it_header_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r.headers);
    r.curl_code = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(list);
    curl_easy_cleanup(c);
    return r;
}

/* The URL of a Link: <URL>; rel="next" into out; false when there is none. */
static bool next_url(const it_response *r, char *out, size_t cap)
{
    char link[2048];
    out[0] = '\0';
    if (it_header(r, "Link", link, sizeof link) == NULL || link[0] != '<')
        return false;
    char *end = strstr(link, ">; rel=\"next\"");
    if (end == NULL)
        return false;
    *end = '\0';
    snprintf(out, cap, "%s", link + 1);
    return true;
}

/* Pages of path through nginx, following each Link through nginx: every page must
 * be on nginx's origin; returns the items seen. */
static size_t page_through_nginx(const char *path, int *pages)
{
    char url[2048];
    snprintf(url, sizeof url, "%s%s", nginx_base, path);
    size_t items = 0;
    size_t base_len = strlen(nginx_base);
    for (*pages = 0; url[0] != '\0' && *pages < 20; (*pages)++) {
        bool on_nginx = strncmp(url, nginx_base, base_len) == 0 && url[base_len] == '/';
        CHECK(on_nginx);
        if (!on_nginx) {
            fprintf(stderr, "  Link leads to %s, not through nginx (%s)\n", url, nginx_base);
            break;
        }
        it_response r = get_via(nginx_base, url + base_len, NULL);
        CHECK_STATUS(r, 200);
        items += json_array_size(r.json);
        next_url(&r, url, sizeof url);
        it_response_free(&r);
    }
    return items;
}

/* each published: the Hub's list shows only models with a published version */
static void create_models(void)
{
    it_buf weights = {0};
    const it_tensor_spec tensor = {"w", "F32", 1, {4, 0, 0, 0}};
    it_build_safetensors(&weights, &tensor, 1, NULL, 5);
    for (int i = 0; i < MODELS; i++) {
        char name[64];
        snprintf(name, sizeof name, "acme/page-%d", i);
        CHECK(it_make_version(admin_token, name, "model.safetensors", &weights, true) == 1);
    }
    it_buf_free(&weights);
}

/* acme/tree-paged version 1, published: model.safetensors, config.json, README.md */
static void create_tree(void)
{
    const it_tensor_spec tensor[] = {{"w", "F32", 2, {2, 3, 0, 0}}};
    it_buf file = {0};
    it_build_safetensors(&file, tensor, 1, NULL, 7);
    CHECK(it_make_version(admin_token, "acme/tree-paged", "model.safetensors", &file, false) == 1);
    static const char *const sidecars[][2] = {{"config.json", "{\"model_type\":\"proxy\"}"},
                                              {"README.md", "# paged\n"}};
    for (size_t i = 0; i < 2; i++) {
        char url[200];
        snprintf(url, sizeof url, "/v1/models/acme/tree-paged/versions/1/files/%s", sidecars[i][0]);
        it_response r = it_send("PUT", url, admin_token, sidecars[i][1], strlen(sidecars[i][1]));
        CHECK_STATUS(r, 201);
        it_response_free(&r);
    }
    it_response r =
        it_send("POST", "/v1/models/acme/tree-paged/versions/1/publish", admin_token, NULL, 0);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    it_buf_free(&file);
}

static void restart(const char *const *flags)
{
    int status = it_server_stop();
    CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(it_server_start_args(flags, NULL) == 0);
}

/* A second serve on the port of a running one: exit 1, "in use", and the first one
 * keeps every request. */
TEST(second_server_on_a_port_in_use)
{
    char listen[64], data[400], log[400];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", it_srv.port);
    snprintf(data, sizeof data, "%s/second", it_root_dir);
    snprintf(log, sizeof log, "%s/second.log", it_root_dir);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execl(it_binary, it_binary, "serve", "--listen", listen, "--data", data, (char *)NULL);
        _exit(127);
    }
    int status = -1;
    bool exited = false;
    for (int i = 0; i < 500 && !exited; i++) {
        exited = waitpid(pid, &status, WNOHANG) == pid;
        if (!exited)
            usleep(20 * 1000);
    }
    CHECK(exited);
    if (!exited) {
        fprintf(stderr, "  a second server started on %s\n", listen);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    CHECK(exited && WIFEXITED(status) && WEXITSTATUS(status) == 1);
    CHECK(count_lines(log, "the port is in use") == 1);
    if (count_lines(log, "the port is in use") != 1)
        it_dump_log(log);
    /* every request reaches the first registry, which holds acme/page-0 */
    int found = 0;
    for (int i = 0; i < 20; i++) {
        it_response r = it_get("/v1/models/acme/page-0");
        found += r.status == 200;
        it_response_free(&r);
    }
    CHECK(found == 20);
}

/* The shipped conf with the server's default trust (no proxy believed): the Host
 * nginx passes is the client's, so each Link leads through nginx to the next page. */
TEST(paging_through_shipped_nginx)
{
    CHECK(start_nginx());
    int pages = 0;
    CHECK_EQ_U64(page_through_nginx("/api/models?search=page-&limit=2", &pages), MODELS);
    CHECK(pages == 3);
    /* list_repo_tree and HfFileSystem.find page the tree the same way */
    CHECK_EQ_U64(page_through_nginx("/api/models/acme/tree-paged/tree/main?limit=1", &pages), 3);
    CHECK(pages == 3);
    stop_nginx();
}

/* With --trusted-proxy 127.0.0.1/32: nginx's X-Forwarded-* are believed (paging
 * works as well), a trusted peer's X-Forwarded-Host is used, and forged ones from
 * 127.0.0.2 are ignored. */
TEST(forwarded_headers_only_from_trusted_proxies)
{
    static const char *const flags[] = {"--trusted-proxy", "127.0.0.1/32", NULL};
    restart(flags);
    CHECK(start_nginx());
    int pages = 0;
    CHECK_EQ_U64(page_through_nginx("/api/models?search=page-&limit=2", &pages), MODELS);
    CHECK(pages == 3);
    stop_nginx();

    static const char *const forged[] = {"X-Forwarded-Host: evil.example:81",
                                         "X-Forwarded-Proto: https", NULL};
    static const char *const forged_rfc[] = {"Forwarded: proto=https;host=evil.example:82", NULL};
    char url[2048], want[128];
    it_response r = it_request("GET", "/api/models?search=page-&limit=2",
                               &(it_request_opts){.headers = forged});
    CHECK(next_url(&r, url, sizeof url));
    CHECK(strncmp(url, "https://evil.example:81/api/models?", 35) == 0);
    it_response_free(&r);
    r = it_request("GET", "/api/models?search=page-&limit=2",
                   &(it_request_opts){.headers = forged_rfc});
    CHECK(next_url(&r, url, sizeof url));
    CHECK(strncmp(url, "https://evil.example:82/api/models?", 35) == 0);
    it_response_free(&r);

    snprintf(want, sizeof want, "%s/api/models?", it_srv.base);
    for (int i = 0; i < 2; i++) {
        r = get_from_other_address("/api/models?search=page-&limit=2", i ? forged_rfc : forged);
        CHECK_STATUS(r, 200);
        CHECK(next_url(&r, url, sizeof url));
        CHECK(strncmp(url, want, strlen(want)) == 0);
        if (strncmp(url, want, strlen(want)) != 0)
            fprintf(stderr, "  untrusted peer's Link: %s\n", url);
        it_response_free(&r);
    }
}

/* --public-url: every Link starts with it, whatever the headers; a bad one is refused
 * at start (exit 2). */
TEST(public_url)
{
    static const char *const flags[] = {"--trusted-proxy", "127.0.0.1/32", "--public-url",
                                        "https://models.example/tg/", NULL};
    restart(flags);
    static const char *const forged[] = {"X-Forwarded-Host: evil.example", NULL};
    char url[2048];
    it_response r = it_request("GET", "/api/models?search=page-&limit=2",
                               &(it_request_opts){.headers = forged});
    CHECK(next_url(&r, url, sizeof url));
    CHECK(strncmp(url, "https://models.example/tg/api/models?", 37) == 0);
    it_response_free(&r);

    static const char *const bad[] = {"--public-url", "https://models.example/tg?x", NULL};
    int status = it_server_stop();
    CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(it_server_start_args(bad, &status) == -1);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 2);
    CHECK(count_lines(it_srv.log, "--public-url") >= 1);
    CHECK(it_server_start_args(NULL, NULL) == 0);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    admin_token = it_token("admin", NULL);
    create_models();
    create_tree();
    RUN(second_server_on_a_port_in_use);
    RUN(paging_through_shipped_nginx);
    RUN(forwarded_headers_only_from_trusted_proxies);
    RUN(public_url);
    stop_nginx();
    return it_finish(argv[0]);
}
