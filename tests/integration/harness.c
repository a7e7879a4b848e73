/* The integration-test harness's definitions (declared and described in harness.h):
 * compiled once per build and linked into every program that uses it. */
#define TG_IT_HARNESS_C
#include "harness.h"
#include "test_pg.h"

/* ---------- small buffers ---------- */

void it_buf_append(it_buf *b, const void *data, size_t len)
{
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len + 1)
            cap *= 2;
        unsigned char *grown = realloc(b->data, cap);
        if (grown == NULL) {
            fprintf(stderr, "harness: out of memory\n");
            _exit(3);
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0'; /* keeps text bodies printable */
}

void it_buf_printf(it_buf *b, const char *fmt, ...)
{
    char tmp[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        fprintf(stderr, "harness: it_buf_printf overflow\n");
        _exit(3);
    }
    it_buf_append(b, tmp, (size_t)n);
}

void it_buf_free(it_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

bool it_read_file(const char *path, it_buf *out)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return false;
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        it_buf_append(out, chunk, n);
    bool ok = ferror(f) == 0;
    fclose(f);
    return ok;
}

void it_sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256(data, len, md);
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* ---------- the server process ---------- */

char it_build_dir[512] = "build";
char it_binary[600];
it_server it_srv;
char it_root_dir[256];

void it_kill_server(void)
{
    if (it_srv.pid > 0) {
        kill(it_srv.pid, SIGKILL);
        waitpid(it_srv.pid, NULL, 0);
        it_srv.pid = 0;
    }
}

static void it_on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "harness: time limit reached, killing the server\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
        /* nothing more to do in a signal handler */
    }
    if (it_srv.pid > 0)
        kill(it_srv.pid, SIGKILL);
    _exit(124);
}

static int it_rm_rf(const char *path)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    return system(cmd);
}

static void it_cleanup(void)
{
    it_kill_server();
    if (it_root_dir[0] != '\0' && getenv("TG_IT_KEEP") == NULL)
        it_rm_rf(it_root_dir);
}

/* Reads the server's log and looks for the line that announces the port. */
static int it_read_port(const char *log)
{
    FILE *f = fopen(log, "r");
    if (f == NULL)
        return -1;
    char line[1024];
    int port = -1;
    const char *marker = "tensorgate: listening on http://";
    while (fgets(line, sizeof line, f) != NULL) {
        char *at = strstr(line, marker);
        if (at == NULL)
            continue;
        char *colon = strrchr(at + strlen(marker), ':');
        if (colon != NULL)
            port = atoi(colon + 1);
    }
    fclose(f);
    return port;
}

void it_dump_log(const char *log)
{
    FILE *f = fopen(log, "r");
    if (f == NULL)
        return;
    char line[1024];
    fprintf(stderr, "---- server log (%s) ----\n", log);
    while (fgets(line, sizeof line, f) != NULL)
        fputs(line, stderr);
    fprintf(stderr, "----\n");
    fclose(f);
}

/* Starts the server on it_srv.data with extra flags (NULL-terminated list).
 * Returns 0 once it listens; -1 (and the log dumped) if it exited or never
 * announced a port in time. *exit_status gets the status if it exited. */
int it_server_start_args(const char *const *extra, int *exit_status)
{
    char logname[64];
    static int starts;
    snprintf(logname, sizeof logname, "/server-%d.log", ++starts);
    snprintf(it_srv.log, sizeof it_srv.log, "%s%s", it_srv.root, logname);
    const char *argv[32];
    int argc = 0;
    argv[argc++] = it_binary;
    argv[argc++] = "serve";
    argv[argc++] = "--listen";
    argv[argc++] = "127.0.0.1:0";
    argv[argc++] = "--data";
    argv[argc++] = it_srv.data;
    for (int i = 0; extra != NULL && extra[i] != NULL && argc < 31; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;

    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* the server must not outlive the harness */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        int fd = open(it_srv.log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 2);
            dup2(fd, 1);
            close(fd);
        }
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) {
            dup2(devnull, 0);
            close(devnull);
        }
        execv(it_binary, (char *const *)argv);
        fprintf(stderr, "harness: exec %s: %s\n", it_binary, strerror(errno));
        _exit(127);
    }
    it_srv.pid = pid;
    for (int waited_ms = 0; waited_ms < IT_START_SECONDS * 1000; waited_ms += 20) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            it_srv.pid = 0;
            if (exit_status != NULL)
                *exit_status = status;
            return -1;
        }
        int port = it_read_port(it_srv.log);
        if (port > 0) {
            it_srv.port = port;
            snprintf(it_srv.base, sizeof it_srv.base, "http://127.0.0.1:%d", port);
            return 0;
        }
        usleep(20 * 1000);
    }
    fprintf(stderr, "harness: server did not announce a port within %d s\n", IT_START_SECONDS);
    it_kill_server();
    if (exit_status != NULL)
        *exit_status = -1;
    return -1;
}

/* SIGTERM, then waits; returns the exit status (or -1 if it had to be killed). */
int it_server_stop(void)
{
    if (it_srv.pid <= 0)
        return -1;
    kill(it_srv.pid, SIGTERM);
    for (int waited_ms = 0; waited_ms < IT_STOP_SECONDS * 1000; waited_ms += 20) {
        int status;
        if (waitpid(it_srv.pid, &status, WNOHANG) == it_srv.pid) {
            it_srv.pid = 0;
            return status;
        }
        usleep(20 * 1000);
    }
    fprintf(stderr, "harness: server ignored SIGTERM for %d s, killing it\n", IT_STOP_SECONDS);
    it_kill_server();
    return -1;
}

/* Parses argv, arms the alarm, makes the temp directory and starts the server
 * with the given extra flags. Exits the program if the server cannot start. */
void it_init(int argc, char **argv, const char *const *extra_flags)
{
    if (argc > 1)
        snprintf(it_build_dir, sizeof it_build_dir, "%s", argv[1]);
    else if (getenv("TG_BUILD") != NULL)
        snprintf(it_build_dir, sizeof it_build_dir, "%s", getenv("TG_BUILD"));
    /* the test build of the binary: the same objects plus the test hooks (test_hooks.h) */
    snprintf(it_binary, sizeof it_binary, "%s/tensorgate-test", it_build_dir);
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, it_on_alarm);
    signal(SIGPIPE, SIG_IGN);
    alarm(IT_PROGRAM_SECONDS);
    atexit(it_cleanup);
    curl_global_init(CURL_GLOBAL_DEFAULT);

    /* TENSORGATE_CATALOG=postgresql://... (tests/scale/pg-suite.sh): every server and
     * command of this program uses that catalog, emptied here so the program
     * starts from nothing, as it does with a new SQLite file. */
    const char *catalog = getenv("TENSORGATE_CATALOG");
    if (catalog != NULL && strncmp(catalog, "postgres", 8) == 0 && !tg_test_pg_reset(catalog)) {
        fprintf(stderr, "harness: cannot empty the PostgreSQL catalog %s\n", catalog);
        exit(2);
    }
    snprintf(it_root_dir, sizeof it_root_dir, "/tmp/tg-it-XXXXXX");
    if (mkdtemp(it_root_dir) == NULL) {
        perror("harness: mkdtemp");
        exit(2);
    }
    snprintf(it_srv.root, sizeof it_srv.root, "%s", it_root_dir);
    snprintf(it_srv.data, sizeof it_srv.data, "%s/data", it_root_dir);
    if (access(it_binary, X_OK) != 0) {
        fprintf(stderr, "harness: %s is not built\n", it_binary);
        exit(2);
    }
    if (it_server_start_args(extra_flags, NULL) != 0) {
        it_dump_log(it_srv.log);
        fprintf(stderr, "harness: the server did not start\n");
        exit(2);
    }
}

/* Runs `tensorgate token create --data DIR --scope SCOPE [--namespace NS]` and
 * returns the last stdout line (static buffer per call slot). */
const char *it_token(const char *scope, const char *namespace_)
{
    static char tokens[16][256];
    static int next;
    char cmd[1200];
    if (namespace_ != NULL)
        snprintf(cmd, sizeof cmd, "'%s' token create --data '%s' --scope %s --namespace %s",
                 it_binary, it_srv.data, scope, namespace_);
    else
        snprintf(cmd, sizeof cmd, "'%s' token create --data '%s' --scope %s", it_binary,
                 it_srv.data, scope);
    FILE *p = popen(cmd, "r");
    char *out = tokens[next++ % 16];
    out[0] = '\0';
    if (p == NULL)
        return out;
    char line[256];
    while (fgets(line, sizeof line, p) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] != '\0')
            snprintf(out, 256, "%s", line);
    }
    int status = pclose(p);
    if (status != 0 || out[0] == '\0')
        fprintf(stderr, "harness: `%s` failed (status %d)\n", cmd, status);
    return out;
}

/* ---------- HTTP ---------- */

size_t it_write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    it_buf_append(userdata, ptr, size * nmemb);
    return size * nmemb;
}

size_t it_header_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    it_buf *h = userdata;
    /* a new status line starts a new header block (100 Continue, redirects) */
    if (size * nmemb >= 5 && memcmp(ptr, "HTTP/", 5) == 0)
        h->len = 0;
    it_buf_append(h, ptr, size * nmemb);
    return size * nmemb;
}

/* A request body given by a read callback with no known size: libcurl sends it chunked. */
typedef struct it_stream {
    const unsigned char *data;
    size_t len;
    size_t pos;
    size_t piece; /* at most this many bytes per callback */
} it_stream;

static size_t it_read_cb(char *buffer, size_t size, size_t nitems, void *userdata)
{
    it_stream *s = userdata;
    size_t room = size * nitems;
    size_t n = s->len - s->pos;
    if (n > room)
        n = room;
    if (s->piece > 0 && n > s->piece)
        n = s->piece;
    memcpy(buffer, s->data + s->pos, n);
    s->pos += n;
    return n;
}

void it_response_free(it_response *r)
{
    it_buf_free(&r->body);
    it_buf_free(&r->headers);
    if (r->json != NULL)
        json_decref(r->json);
    memset(r, 0, sizeof *r);
}

/* Performs METHOD base+path. The response must be freed with it_response_free. */
it_response it_request(const char *method, const char *path, const it_request_opts *o)
{
    it_response r;
    memset(&r, 0, sizeof r);
    it_request_opts none;
    memset(&none, 0, sizeof none);
    if (o == NULL)
        o = &none;
    CURL *c = curl_easy_init();
    /* long enough for every limit's test (the request target is bounded at 16 KiB) */
    static _Thread_local char url[20480];
    snprintf(url, sizeof url, "%s%s", it_srv.base, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, IT_REQUEST_SECONDS);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, it_write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, it_header_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r.headers);

    struct curl_slist *hl = NULL;
    char auth[400];
    if (o->token != NULL) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", o->token);
        hl = curl_slist_append(hl, auth);
    }
    for (int i = 0; o->headers != NULL && o->headers[i] != NULL; i++)
        hl = curl_slist_append(hl, o->headers[i]);
    /* no 100-continue round trip unless asked: the body follows the headers at once */
    if (o->expect_continue) {
        hl = curl_slist_append(hl, "Expect: 100-continue");
        curl_easy_setopt(c, CURLOPT_EXPECT_100_TIMEOUT_MS, (long)(IT_REQUEST_SECONDS * 1000));
    } else {
        hl = curl_slist_append(hl, "Expect:");
    }

    it_stream stream = {o->body, o->body_len, 0, 0};
    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (o->chunked) {
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, it_read_cb);
        curl_easy_setopt(c, CURLOPT_READDATA, &stream);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        hl = curl_slist_append(hl, "Content-Type: application/octet-stream");
    } else if (o->has_body) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, o->body_len ? o->body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->body_len);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        bool has_type = false;
        for (int i = 0; o->headers != NULL && o->headers[i] != NULL; i++)
            if (strncasecmp(o->headers[i], "Content-Type:", 13) == 0)
                has_type = true;
        if (!has_type)
            hl = curl_slist_append(hl, "Content-Type: application/octet-stream");
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    r.curl_code = curl_easy_perform(c);
    if (r.curl_code == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    else
        fprintf(stderr, "harness: %s %s: curl: %s\n", method, path,
                curl_easy_strerror(r.curl_code));
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    if (r.body.len > 0 && (r.body.data[0] == '{' || r.body.data[0] == '['))
        r.json = json_loadb((const char *)r.body.data, r.body.len, 0, NULL);
    return r;
}

it_response it_get(const char *path)
{
    return it_request("GET", path, NULL);
}

it_response it_send(const char *method, const char *path, const char *token, const void *body,
                    size_t len)
{
    it_request_opts o;
    memset(&o, 0, sizeof o);
    o.token = token;
    o.body = body;
    o.body_len = len;
    o.has_body = body != NULL;
    return it_request(method, path, &o);
}

it_response it_send_json(const char *method, const char *path, const char *token,
                         const char *json_text)
{
    static const char *const json_type[] = {"Content-Type: application/json", NULL};
    it_request_opts o;
    memset(&o, 0, sizeof o);
    o.token = token;
    o.headers = json_type;
    o.body = json_text;
    o.body_len = json_text ? strlen(json_text) : 0;
    o.has_body = json_text != NULL;
    return it_request(method, path, &o);
}

/* Value of header NAME in the response (case-insensitive), copied into out. */
const char *it_header(const it_response *r, const char *name, char *out, size_t cap)
{
    out[0] = '\0';
    if (r->headers.data == NULL)
        return NULL;
    size_t nlen = strlen(name);
    const char *p = (const char *)r->headers.data;
    while (*p != '\0') {
        const char *eol = strstr(p, "\n");
        size_t line_len = eol ? (size_t)(eol - p) : strlen(p);
        if (line_len > nlen && strncasecmp(p, name, nlen) == 0 && p[nlen] == ':') {
            const char *v = p + nlen + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t vlen = line_len - (size_t)(v - p);
            while (vlen > 0 && (v[vlen - 1] == '\r' || v[vlen - 1] == ' '))
                vlen--;
            if (vlen >= cap)
                vlen = cap - 1;
            memcpy(out, v, vlen);
            out[vlen] = '\0';
            return out;
        }
        if (eol == NULL)
            break;
        p = eol + 1;
    }
    return NULL;
}

const char *it_json_str(const it_response *r, const char *key)
{
    if (r->json == NULL)
        return NULL;
    return json_string_value(json_object_get(r->json, key));
}

long long it_json_int(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

const char *it_reason(const it_response *r)
{
    return it_json_str(r, "reason");
}

/* Prints what went wrong with a setup request; true when it had the status. */
static bool setup_step(it_response *r, long status, const char *what)
{
    bool ok = r->status == status;
    if (!ok)
        fprintf(stderr, "harness: %s -> %ld, expected %ld: %.300s\n", what, r->status, status,
                r->body.data ? (const char *)r->body.data : "");
    return ok;
}

int it_make_version(const char *token, const char *model, const char *path, const it_buf *file,
                    bool publish)
{
    char url[600], body[300];
    snprintf(body, sizeof body, "{\"name\":\"%s\"}", model);
    it_response r = it_send_json("POST", "/v1/models", token, body);
    bool ok = r.status == 409 ? strcmp(it_reason(&r) ? it_reason(&r) : "", "model_exists") == 0
                              : setup_step(&r, 201, body);
    it_response_free(&r);
    if (!ok)
        return -1;
    snprintf(url, sizeof url, "/v1/models/%s/versions", model);
    r = it_send("POST", url, token, NULL, 0);
    long long version = setup_step(&r, 201, url) ? it_json_int(r.json, "version") : -1;
    it_response_free(&r);
    if (version <= 0)
        return -1;
    if (file != NULL) {
        snprintf(url, sizeof url, "/v1/models/%s/versions/%lld/files/%s", model, version, path);
        r = it_send("PUT", url, token, file->data, file->len);
        ok = setup_step(&r, 201, url);
        it_response_free(&r);
        if (!ok)
            return -1;
    }
    if (publish) {
        snprintf(url, sizeof url, "/v1/models/%s/versions/%lld/publish", model, version);
        r = it_send("POST", url, token, NULL, 0);
        ok = setup_step(&r, 200, url);
        it_response_free(&r);
        if (!ok)
            return -1;
    }
    return (int)version;
}

/* ---------- the data directory ---------- */

/* Number of regular files below dir (recursively); 0 if it does not exist. */
static int it_count_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char sub[1024];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(sub, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode))
            count += it_count_files(sub);
        else
            count++;
    }
    closedir(d);
    return count;
}

int it_count_blobs(void)
{
    char dir[400];
    snprintf(dir, sizeof dir, "%s/blobs", it_srv.data);
    return it_count_files(dir);
}

/* Files left in tmp/, waiting up to 3 s for in-flight cleanup to finish. */
int it_count_tmp_settled(void)
{
    char dir[400];
    snprintf(dir, sizeof dir, "%s/tmp", it_srv.data);
    int n = it_count_files(dir);
    for (int i = 0; i < 150 && n != 0; i++) {
        usleep(20 * 1000);
        n = it_count_files(dir);
    }
    return n;
}

bool it_blob_exists(const char *sha_hex)
{
    char p[512];
    snprintf(p, sizeof p, "%s/blobs/sha256/%.2s/%s", it_srv.data, sha_hex, sha_hex);
    return access(p, F_OK) == 0;
}

/* ---------- file builders ---------- */

uint64_t it_dtype_bytes(const char *dtype)
{
    if (strcmp(dtype, "F64") == 0 || strcmp(dtype, "I64") == 0 || strcmp(dtype, "U64") == 0)
        return 8;
    if (strcmp(dtype, "F32") == 0 || strcmp(dtype, "I32") == 0 || strcmp(dtype, "U32") == 0)
        return 4;
    if (strcmp(dtype, "F16") == 0 || strcmp(dtype, "BF16") == 0 || strcmp(dtype, "I16") == 0)
        return 2;
    return 1;
}

/* Builds a valid safetensors file: tensors laid out in order, header padded with
 * spaces to a multiple of 8, data filled from `seed` (deterministic, finite
 * floats for F32: small integers). metadata_json may be NULL or an object text. */
void it_build_safetensors(it_buf *out, const it_tensor_spec *t, int count,
                          const char *metadata_json, unsigned seed)
{
    it_buf h = {0};
    uint64_t offset = 0;
    it_buf_append(&h, "{", 1);
    if (metadata_json != NULL)
        it_buf_printf(&h, "\"__metadata__\":%s", metadata_json);
    for (int i = 0; i < count; i++) {
        uint64_t n = it_dtype_bytes(t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++)
            n *= t[i].shape[d];
        if (i > 0 || metadata_json != NULL)
            it_buf_append(&h, ",", 1);
        it_buf_printf(&h, "\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i].name, t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++)
            it_buf_printf(&h, "%s%llu", d ? "," : "", (unsigned long long)t[i].shape[d]);
        it_buf_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                      (unsigned long long)(offset + n));
        offset += n;
    }
    it_buf_append(&h, "}", 1);
    while ((8 + h.len) % 8 != 0)
        it_buf_append(&h, " ", 1);
    uint64_t hl = h.len;
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(hl >> (8 * i));
    out->len = 0;
    it_buf_append(out, le, 8);
    it_buf_append(out, h.data, h.len);
    uint32_t state = seed * 2654435761u + 1;
    for (int i = 0; i < count; i++) {
        uint64_t elems = 1;
        for (int d = 0; d < t[i].ndim; d++)
            elems *= t[i].shape[d];
        for (uint64_t e = 0; e < elems; e++) {
            state = state * 1103515245u + 12345u;
            if (strcmp(t[i].dtype, "F32") == 0) {
                float f = (float)((state >> 16) % 200) - 100.0f;
                it_buf_append(out, &f, 4);
            } else if (strcmp(t[i].dtype, "F16") == 0) {
                uint16_t v = 0x3c00; /* 1.0 */
                it_buf_append(out, &v, 2);
            } else {
                unsigned char b[8];
                for (uint64_t k = 0; k < it_dtype_bytes(t[i].dtype); k++)
                    b[k] = (unsigned char)(state >> (k % 4 * 8));
                it_buf_append(out, b, it_dtype_bytes(t[i].dtype));
            }
        }
    }
    it_buf_free(&h);
}

/* A safetensors file with an exact header text (not padded) and data bytes. */
void it_build_raw_safetensors(it_buf *out, const char *header, size_t data_len)
{
    uint64_t hl = strlen(header);
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(hl >> (8 * i));
    out->len = 0;
    it_buf_append(out, le, 8);
    it_buf_append(out, header, strlen(header));
    for (size_t i = 0; i < data_len; i++) {
        unsigned char z = 0;
        it_buf_append(out, &z, 1);
    }
}

/* Header size N and data start of a safetensors buffer. */
uint64_t it_header_len(const it_buf *b)
{
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | b->data[i];
    return n;
}

uint32_t it_crc32(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return c ^ 0xffffffffu;
}

void it_put_u16(it_buf *b, uint16_t v)
{
    unsigned char x[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    it_buf_append(b, x, 2);
}

void it_put_u32(it_buf *b, uint32_t v)
{
    unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    it_buf_append(b, x, 4);
}

/* A stored (uncompressed) ZIP archive with the given members, as PyTorch writes
 * its checkpoints (torch.save): archive/data.pkl, archive/version, archive/data/0. */
void it_build_zip(it_buf *out, const char *const *names, const it_buf *contents, int count)
{
    it_buf central = {0};
    out->len = 0;
    for (int i = 0; i < count; i++) {
        uint32_t offset = (uint32_t)out->len;
        uint32_t crc = it_crc32(contents[i].data, contents[i].len);
        uint16_t nlen = (uint16_t)strlen(names[i]);
        it_put_u32(out, 0x04034b50);
        it_put_u16(out, 20); /* version needed */
        it_put_u16(out, 0);  /* flags */
        it_put_u16(out, 0);  /* stored */
        it_put_u16(out, 0);
        it_put_u16(out, 0x21); /* time, date */
        it_put_u32(out, crc);
        it_put_u32(out, (uint32_t)contents[i].len);
        it_put_u32(out, (uint32_t)contents[i].len);
        it_put_u16(out, nlen);
        it_put_u16(out, 0);
        it_buf_append(out, names[i], nlen);
        it_buf_append(out, contents[i].data, contents[i].len);

        it_put_u32(&central, 0x02014b50);
        it_put_u16(&central, 20);
        it_put_u16(&central, 20);
        it_put_u16(&central, 0);
        it_put_u16(&central, 0);
        it_put_u16(&central, 0);
        it_put_u16(&central, 0x21);
        it_put_u32(&central, crc);
        it_put_u32(&central, (uint32_t)contents[i].len);
        it_put_u32(&central, (uint32_t)contents[i].len);
        it_put_u16(&central, nlen);
        it_put_u16(&central, 0); /* extra */
        it_put_u16(&central, 0); /* comment */
        it_put_u16(&central, 0); /* disk */
        it_put_u16(&central, 0); /* internal attrs */
        it_put_u32(&central, 0); /* external attrs */
        it_put_u32(&central, offset);
        it_buf_append(&central, names[i], nlen);
    }
    uint32_t cd_offset = (uint32_t)out->len;
    it_buf_append(out, central.data, central.len);
    it_put_u32(out, 0x06054b50);
    it_put_u16(out, 0);
    it_put_u16(out, 0);
    it_put_u16(out, (uint16_t)count);
    it_put_u16(out, (uint16_t)count);
    it_put_u32(out, (uint32_t)central.len);
    it_put_u32(out, cd_offset);
    it_put_u16(out, 0);
    it_buf_free(&central);
}

/* A protocol-2 pickle of {'w': 1} like torch.save's data.pkl would start. */
const unsigned char it_pickle_p2[] = {0x80, 0x02, '}', 'q',  0x00, 'X',  0x01, 0x00, 0x00,
                                      0x00, 'w',  'q', 0x01, 'K',  0x01, 's',  '.'};
/* pickle.dumps({'w': 1}, protocol=4) */
const unsigned char it_pickle_p4[] = {0x80, 0x04, 0x95, 0x0a, 0x00, 0x00, 0x00,
                                      0x00, 0x00, 0x00, 0x00, '}',  0x94, 0x8c,
                                      0x01, 'w',  0x94, 'K',  0x01, 's',  '.'};
/* a protocol-0 os.system('echo hi') (plain ASCII text that imports and calls; a
 * data-only protocol-0 pickle is text since issue 23) */
const char it_pickle_p0[] = "cos\nsystem\n(S'echo hi'\ntR.";
/* os.system('echo hi') as pickle.dumps(protocol=2) writes it on Linux: posix.system */
const unsigned char it_pickle_posix_system[] = {
    0x80, 0x02, 'c',  'p', 'o',  's',  'i',  'x',  '\n', 's',  'y', 's',  't',
    'e',  'm',  '\n', 'q', 0x00, 'X',  0x07, 0x00, 0x00, 0x00, 'e', 'c',  'h',
    'o',  ' ',  'h',  'i', 'q',  0x01, 0x85, 'q',  0x02, 'R',  'q', 0x03, '.'};

void it_build_pytorch_zip(it_buf *out)
{
    const char *names[3] = {"archive/data.pkl", "archive/version", "archive/data/0"};
    it_buf c[3] = {{0}, {0}, {0}};
    it_buf_append(&c[0], it_pickle_p2, sizeof it_pickle_p2);
    it_buf_append(&c[1], "3\n", 2);
    float zero[4] = {0};
    it_buf_append(&c[2], zero, sizeof zero);
    it_build_zip(out, names, c, 3);
    for (int i = 0; i < 3; i++)
        it_buf_free(&c[i]);
}

/* numpy.save of float32 zeros(4) (format 1.0: header padded to a multiple of 64). */
void it_build_npy(it_buf *out)
{
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
    it_buf h = {0};
    it_buf_append(&h, dict, strlen(dict));
    while ((10 + h.len + 1) % 64 != 0)
        it_buf_append(&h, " ", 1);
    it_buf_append(&h, "\n", 1);
    out->len = 0;
    it_buf_append(out, "\x93NUMPY\x01\x00", 8);
    it_put_u16(out, (uint16_t)h.len);
    it_buf_append(out, h.data, h.len);
    float zero[4] = {0};
    it_buf_append(out, zero, sizeof zero);
    it_buf_free(&h);
}

/* GGUF v3 with no tensors and no metadata (magic, version, counts). */
void it_build_gguf(it_buf *out)
{
    out->len = 0;
    it_buf_append(out, "GGUF", 4);
    it_put_u32(out, 3);
    unsigned char zeros[16] = {0};
    it_buf_append(out, zeros, 16);
}

/* ---------- raw sockets (for what libcurl hides) ---------- */

int it_connect(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)it_srv.port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
}

bool it_write_all(int fd, const void *data, size_t len)
{
    const unsigned char *p = data;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n <= 0)
            return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

/* Reads from fd until the peer closes, the timeout, or `cap` bytes. */
size_t it_read_some(int fd, char *out, size_t cap, int timeout_ms)
{
    size_t got = 0;
    while (got + 1 < cap) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) <= 0)
            break;
        ssize_t n = recv(fd, out + got, cap - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        /* stop once a whole response head and a small body are in */
        out[got] = '\0';
        if (strstr(out, "\r\n\r\n") != NULL)
            timeout_ms = 300;
    }
    out[got] = '\0';
    return got;
}

/* ---------- tokens: revoked ones ---------- */

/* Creates a token (as it_token) and revokes it with `tensorgate token revoke`, so
 * the text is one the server once knew and must now refuse. The id revoked is the
 * newest in `tensorgate token list` (ids grow). Returns "" if anything failed. */
const char *it_token_revoked(const char *scope, const char *namespace_)
{
    const char *token = it_token(scope, namespace_);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' token list --data '%s'", it_binary, it_srv.data);
    FILE *p = popen(cmd, "r");
    long long newest = 0;
    char line[512];
    while (p != NULL && fgets(line, sizeof line, p) != NULL) {
        long long id = atoll(line); /* the header line reads 0 */
        if (id > newest)
            newest = id;
    }
    if (p == NULL || pclose(p) != 0 || newest <= 0 || token[0] == '\0') {
        fprintf(stderr, "harness: `%s` failed\n", cmd);
        return "";
    }
    snprintf(cmd, sizeof cmd, "'%s' token revoke --data '%s' %lld 2>/dev/null", it_binary,
             it_srv.data, newest);
    if (system(cmd) != 0) {
        fprintf(stderr, "harness: `%s` failed\n", cmd);
        return "";
    }
    return token;
}
