/* The HTTP case runner: every .case file in tests/http/cases is one request and
 * what its answer must be (the format is tests/http/README.md). One server is
 * started, the world the cases name is provisioned (tokens of each kind, the
 * models acme/cases and other/cases with a published version 1 and a draft 2),
 * and each case is sent, in file-name order, through libcurl or, for a `raw:`
 * case, as the exact bytes over a plain socket. Each expectation is one check; a
 * failure is printed with the case's file name. An unknown key, a case without
 * `status:` or a directory without cases fails.
 *
 *     build/tests/integration/cases [BUILD [SUBSTRING]]   only the cases whose file name contains
 * SUBSTRING */
#include <ctype.h>

#include "harness.h"

#define CASES_DIR "tests/http/cases"
#define CASES_MAX 1024
#define CASE_HEADERS_MAX 64
#define CASE_EXPECTS_MAX 32
#define REPEAT_MAX (1024 * 1024)
#define RAW_REPLY_MAX (256 * 1024)
#define RAW_TIMEOUT_MS 5000

/* The fixture every published version holds (tensor "w", F32 [2, 3]). */
#define FIXTURE_MODEL "tests/corpus/cases/valid_dtype_f32.safetensors"
#define FIXTURE_CONFIG "{\"model_type\":\"cases\"}"

/* ---------- tokens ---------- */

typedef struct token_kind {
    const char *name;
    const char *scope; /* NULL: not issued by `token create` */
    const char *namespace_;
    char text[128];
} token_kind;

static token_kind token_kinds[] = {
    {"read", "read", NULL, ""},          {"read-acme", "read", "acme", ""},
    {"read-other", "read", "other", ""}, {"write", "write", NULL, ""},
    {"write-acme", "write", "acme", ""}, {"write-other", "write", "other", ""},
    {"admin", "admin", NULL, ""},        {"admin-other", "admin", "other", ""},
    {"unknown", NULL, NULL, ""},         {"revoked", NULL, NULL, ""},
};
#define TOKEN_KINDS (sizeof token_kinds / sizeof token_kinds[0])

static const char *token_text(const char *name)
{
    for (size_t i = 0; i < TOKEN_KINDS; i++)
        if (strcmp(token_kinds[i].name, name) == 0)
            return token_kinds[i].text;
    return NULL;
}

static bool provision_tokens(void)
{
    bool ok = true;
    for (size_t i = 0; i < TOKEN_KINDS; i++) {
        token_kind *k = &token_kinds[i];
        if (strcmp(k->name, "unknown") == 0)
            snprintf(k->text, sizeof k->text, "tg_%064d", 7); /* the form of one, never issued */
        else if (strcmp(k->name, "revoked") == 0)
            snprintf(k->text, sizeof k->text, "%s", it_token_revoked("admin", NULL));
        else
            snprintf(k->text, sizeof k->text, "%s", it_token(k->scope, k->namespace_));
        if (strncmp(k->text, "tg_", 3) != 0) {
            fprintf(stderr, "cases: could not make the %s token\n", k->name);
            ok = false;
        }
    }
    return ok;
}

/* ---------- the world the cases read ---------- */

static bool expect_status(it_response r, long status, const char *what)
{
    bool ok = r.status == status;
    if (!ok)
        fprintf(stderr, "cases: setup: %s -> %ld, expected %ld: %.300s\n", what, r.status, status,
                r.body.data ? (const char *)r.body.data : "");
    it_response_free(&r);
    return ok;
}

/* ORG/cases: version 1 published (model.safetensors, config.json; alias stable),
 * version 2 a draft holding model.safetensors. */
static bool provision_model(const char *org, const it_buf *model_file)
{
    const char *admin = token_text("admin");
    char url[256], body[128];
    snprintf(body, sizeof body, "{\"name\":\"%s/cases\"}", org);
    bool ok = expect_status(it_send_json("POST", "/v1/models", admin, body), 201, body);
    for (int v = 1; v <= 2; v++) {
        snprintf(url, sizeof url, "/v1/models/%s/cases/versions", org);
        ok = expect_status(it_send("POST", url, admin, NULL, 0), 201, url) && ok;
        snprintf(url, sizeof url, "/v1/models/%s/cases/versions/%d/files/model.safetensors", org,
                 v);
        ok = expect_status(it_send("PUT", url, admin, model_file->data, model_file->len), 201,
                           url) &&
             ok;
    }
    snprintf(url, sizeof url, "/v1/models/%s/cases/versions/1/files/config.json", org);
    ok = expect_status(it_send("PUT", url, admin, FIXTURE_CONFIG, strlen(FIXTURE_CONFIG)), 201,
                       url) &&
         ok;
    snprintf(url, sizeof url, "/v1/models/%s/cases/versions/1/publish", org);
    ok = expect_status(it_send("POST", url, admin, NULL, 0), 200, url) && ok;
    snprintf(url, sizeof url, "/v1/models/%s/cases/aliases/stable", org);
    ok = expect_status(it_send_json("PUT", url, admin, "{\"version\":1}"), 200, url) && ok;
    return ok;
}

/* ---------- a case ---------- */

typedef struct expect_header {
    char *name;
    char *value; /* NULL: the header must be absent */
    bool prefix; /* value is a prefix */
} expect_header;

typedef struct case_file {
    const char *file; /* for messages */
    char *method;
    it_buf path;
    const char *token; /* NULL: none */
    char *headers[CASE_HEADERS_MAX + 1];
    int header_count;
    it_buf body;
    bool has_body;
    bool json_body;
    bool chunked;
    it_buf raw; /* the exact request bytes, when raw */
    bool is_raw;
    long status;
    char *reason;
    expect_header expect_headers[CASE_EXPECTS_MAX];
    int expect_header_count;
    char *body_contains[CASE_EXPECTS_MAX];
    int body_contains_count;
    char *json_keys[CASE_EXPECTS_MAX];
    char *json_values[CASE_EXPECTS_MAX];
    int json_count;
    int expect_close;     /* -1 not asked, 0 open, 1 closed */
    int expect_responses; /* raw: number of status lines, 0 when not asked */
} case_file;

static void case_free(case_file *c)
{
    free(c->method);
    it_buf_free(&c->path);
    for (int i = 0; i < c->header_count; i++)
        free(c->headers[i]);
    it_buf_free(&c->body);
    it_buf_free(&c->raw);
    free(c->reason);
    for (int i = 0; i < c->expect_header_count; i++) {
        free(c->expect_headers[i].name);
        free(c->expect_headers[i].value);
    }
    for (int i = 0; i < c->body_contains_count; i++)
        free(c->body_contains[i]);
    for (int i = 0; i < c->json_count; i++) {
        free(c->json_keys[i]);
        free(c->json_values[i]);
    }
}

static char *dup_or_die(const char *s)
{
    char *d = strdup(s);
    if (d == NULL) {
        fprintf(stderr, "cases: out of memory\n");
        exit(3);
    }
    return d;
}

/* One check of the case: counted, and printed with the case's file name when it fails. */
static void case_check(const case_file *c, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void case_check(const case_file *c, bool ok, const char *fmt, ...)
{
    if (ok) {
        test_checks_passed++;
        return;
    }
    test_checks_failed++;
    fprintf(stderr, "%s: ", c->file);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static int hex_digit(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Appends value to out with %repeat[N x TEXT]% and %token% expanded and, when
 * escapes, \r \n \t \\ \xHH. Returns false (err filled) on a malformed macro. */
static bool expand(const char *value, const char *token, bool escapes, it_buf *out, char *err,
                   size_t err_len)
{
    it_buf step = {0};
    const char *p = value;
    while (*p != '\0') {
        if (strncmp(p, "%repeat[", 8) == 0) {
            char *end;
            unsigned long n = strtoul(p + 8, &end, 10);
            const char *close = strstr(p, "]%");
            if (end == p + 8 || strncmp(end, " x ", 3) != 0 || close == NULL || close < end + 3 ||
                n > REPEAT_MAX) {
                snprintf(err, err_len, "malformed %%repeat[N x TEXT]%% (N at most %d)", REPEAT_MAX);
                it_buf_free(&step);
                return false;
            }
            const char *text = end + 3;
            size_t text_len = (size_t)(close - text);
            if (n * text_len > REPEAT_MAX) {
                snprintf(err, err_len, "%%repeat%% of more than %d bytes", REPEAT_MAX);
                it_buf_free(&step);
                return false;
            }
            for (unsigned long i = 0; i < n; i++)
                it_buf_append(&step, text, text_len);
            p = close + 2;
        } else if (strncmp(p, "%token%", 7) == 0) {
            it_buf_append(&step, token ? token : "", token ? strlen(token) : 0);
            p += 7;
        } else {
            it_buf_append(&step, p, 1);
            p++;
        }
    }
    if (!escapes) {
        it_buf_append(out, step.data ? step.data : (const unsigned char *)"", step.len);
        it_buf_free(&step);
        return true;
    }
    for (size_t i = 0; i < step.len; i++) {
        char ch = (char)step.data[i];
        if (ch != '\\' || i + 1 == step.len) {
            it_buf_append(out, &ch, 1);
            continue;
        }
        char next = (char)step.data[++i];
        char emit;
        if (next == 'r') {
            emit = '\r';
        } else if (next == 'n') {
            emit = '\n';
        } else if (next == 't') {
            emit = '\t';
        } else if (next == '\\') {
            emit = '\\';
        } else if (next == 'x' && i + 2 < step.len && hex_digit((char)step.data[i + 1]) >= 0 &&
                   hex_digit((char)step.data[i + 2]) >= 0) {
            emit =
                (char)(hex_digit((char)step.data[i + 1]) * 16 + hex_digit((char)step.data[i + 2]));
            i += 2;
        } else {
            snprintf(err, err_len, "unknown escape \\%c", next);
            it_buf_free(&step);
            return false;
        }
        it_buf_append(out, &emit, 1);
    }
    it_buf_free(&step);
    return true;
}

/* Splits "Name: value" into its parts (malloc'd); false when there is no colon. */
static bool split_header(const char *line, char **name, char **value)
{
    const char *colon = strchr(line, ':');
    if (colon == NULL || colon == line)
        return false;
    *name = dup_or_die(line);
    (*name)[colon - line] = '\0';
    const char *v = colon + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    *value = dup_or_die(v);
    return true;
}

/* Parses one case file. Returns false (and err) on a malformed file. Values
 * that name the token are expanded after the whole file is read. */
static bool case_parse(case_file *c, char *text, char *err, size_t err_len)
{
    c->status = -1;
    c->expect_close = -1;
    char *raw_lines[512];
    int raw_count = 0;
    bool raw_line_ends[512];
    char *header_values[CASE_HEADERS_MAX];
    int header_value_count = 0;
    char *path_text = NULL;
    char *body_text = NULL;
    const char *body_file = NULL;
    int line_no = 0;
    for (char *line = text, *next; line != NULL; line = next) {
        line_no++;
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        size_t len = strlen(line);
        if (len > 0 && line[len - 1] == '\r')
            line[--len] = '\0';
        if (line[0] == '#' || len == 0)
            continue;
        char *colon = strchr(line, ':');
        if (colon == NULL) {
            snprintf(err, err_len, "line %d: no \"key:\"", line_no);
            return false;
        }
        *colon = '\0';
        const char *key = line;
        char *value = colon + 1;
        if (*value == ' ')
            value++;
        if (strcmp(key, "method") == 0) {
            free(c->method);
            c->method = dup_or_die(value);
        } else if (strcmp(key, "path") == 0) {
            path_text = value;
        } else if (strcmp(key, "token") == 0) {
            if (strncmp(value, "text:", 5) == 0) {
                c->token = value + 5;
            } else if (strcmp(value, "none") == 0) {
                c->token = NULL;
            } else {
                c->token = token_text(value);
                if (c->token == NULL) {
                    snprintf(err, err_len, "line %d: unknown token kind \"%s\"", line_no, value);
                    return false;
                }
            }
        } else if (strcmp(key, "header") == 0) {
            if (header_value_count == CASE_HEADERS_MAX) {
                snprintf(err, err_len, "line %d: more than %d headers", line_no, CASE_HEADERS_MAX);
                return false;
            }
            header_values[header_value_count++] = value; /* expanded below */
        } else if (strcmp(key, "body") == 0 || strcmp(key, "json") == 0) {
            body_text = value;
            c->has_body = true;
            c->json_body = strcmp(key, "json") == 0;
        } else if (strcmp(key, "body-file") == 0) {
            body_file = value;
            c->has_body = true;
        } else if (strcmp(key, "chunked") == 0) {
            c->chunked = strcmp(value, "yes") == 0;
        } else if (strcmp(key, "raw") == 0 || strcmp(key, "raw-data") == 0) {
            if (raw_count == (int)(sizeof raw_lines / sizeof raw_lines[0])) {
                snprintf(err, err_len, "line %d: too many raw lines", line_no);
                return false;
            }
            raw_line_ends[raw_count] = strcmp(key, "raw") == 0;
            raw_lines[raw_count++] = value;
            c->is_raw = true;
        } else if (strcmp(key, "status") == 0) {
            char *end;
            c->status = strtol(value, &end, 10);
            if (end == value || *end != '\0' || c->status < 100 || c->status > 599) {
                snprintf(err, err_len, "line %d: status is not an HTTP status", line_no);
                return false;
            }
        } else if (strcmp(key, "reason") == 0) {
            free(c->reason);
            c->reason = dup_or_die(value);
        } else if (strcmp(key, "expect-header") == 0 || strcmp(key, "expect-header-prefix") == 0 ||
                   strcmp(key, "expect-no-header") == 0) {
            if (c->expect_header_count == CASE_EXPECTS_MAX) {
                snprintf(err, err_len, "line %d: too many header expectations", line_no);
                return false;
            }
            expect_header *e = &c->expect_headers[c->expect_header_count];
            if (strcmp(key, "expect-no-header") == 0) {
                e->name = dup_or_die(value);
                e->value = NULL;
            } else if (!split_header(value, &e->name, &e->value)) {
                snprintf(err, err_len, "line %d: expected \"Name: value\"", line_no);
                return false;
            }
            e->prefix = strcmp(key, "expect-header-prefix") == 0;
            c->expect_header_count++;
        } else if (strcmp(key, "expect-body-contains") == 0) {
            if (c->body_contains_count == CASE_EXPECTS_MAX) {
                snprintf(err, err_len, "line %d: too many body expectations", line_no);
                return false;
            }
            c->body_contains[c->body_contains_count++] = dup_or_die(value);
        } else if (strcmp(key, "expect-json") == 0) {
            if (c->json_count == CASE_EXPECTS_MAX ||
                !split_header(value, &c->json_keys[c->json_count],
                              &c->json_values[c->json_count])) {
                snprintf(err, err_len, "line %d: expected \"key: value\" (at most %d)", line_no,
                         CASE_EXPECTS_MAX);
                return false;
            }
            c->json_count++;
        } else if (strcmp(key, "expect-close") == 0) {
            c->expect_close = strcmp(value, "yes") == 0;
        } else if (strcmp(key, "expect-responses") == 0) {
            char *end;
            long n = strtol(value, &end, 10);
            c->expect_responses = n > 0 && n < 1000 && *end == '\0' ? (int)n : 0;
            if (c->expect_responses == 0) {
                snprintf(err, err_len, "line %d: expect-responses needs a positive count", line_no);
                return false;
            }
        } else {
            snprintf(err, err_len, "line %d: unknown key \"%s\"", line_no, key);
            return false;
        }
    }
    if (c->status < 0) {
        snprintf(err, err_len, "no status:");
        return false;
    }
    if (c->is_raw == (path_text != NULL)) {
        snprintf(err, err_len, "a case has either path: or raw: lines");
        return false;
    }
    if (c->is_raw && (c->has_body || header_value_count > 0 || c->method != NULL || c->chunked)) {
        snprintf(err, err_len, "a raw case carries its method, headers and body in raw: lines");
        return false;
    }
    if (!c->is_raw && (c->expect_close >= 0 || c->expect_responses > 0)) {
        snprintf(err, err_len, "expect-close and expect-responses are for raw cases");
        return false;
    }
    if (body_text != NULL && body_file != NULL) {
        snprintf(err, err_len, "body: or json: or body-file:, not two of them");
        return false;
    }
    if (c->method == NULL)
        c->method = dup_or_die("GET");
    /* expansions (the token is known now) */
    for (int i = 0; i < raw_count; i++) {
        if (!expand(raw_lines[i], c->token, true, &c->raw, err, err_len))
            return false;
        if (raw_line_ends[i])
            it_buf_append(&c->raw, "\r\n", 2);
    }
    if (path_text != NULL && !expand(path_text, c->token, false, &c->path, err, err_len))
        return false;
    for (int i = 0; i < header_value_count; i++) {
        it_buf h = {0};
        if (!expand(header_values[i], c->token, false, &h, err, err_len)) {
            it_buf_free(&h);
            return false;
        }
        c->headers[c->header_count++] = dup_or_die(h.data ? (const char *)h.data : "");
        it_buf_free(&h);
    }
    if (body_text != NULL && !expand(body_text, c->token, false, &c->body, err, err_len))
        return false;
    if (body_file != NULL && !it_read_file(body_file, &c->body)) {
        snprintf(err, err_len, "body-file %s cannot be read", body_file);
        return false;
    }
    return true;
}

/* ---------- sending ---------- */

/* "HTTP/1.x NNN " at p. */
static bool is_status_line(const char *p)
{
    return strncmp(p, "HTTP/1.", 7) == 0 && isdigit((unsigned char)p[7]) && p[8] == ' ' &&
           isdigit((unsigned char)p[9]) && isdigit((unsigned char)p[10]) &&
           isdigit((unsigned char)p[11]) && p[12] == ' ';
}

/* Status lines in a reply: an answer's body need not end in a newline, so the
 * next answer may follow it on the same line. */
static int count_status_lines(const char *reply)
{
    int n = 0;
    for (const char *p = strstr(reply, "HTTP/1."); p != NULL; p = strstr(p + 1, "HTTP/1."))
        n += is_status_line(p);
    return n;
}

/* Sends the raw bytes in one write and reads the reply: until the server closes,
 * or RAW_TIMEOUT_MS pass with nothing, or (when neither the close nor the number
 * of answers is asked about) the first answer is complete by its Content-Length. */
static it_response send_raw(const case_file *c, bool *closed, int *responses)
{
    it_response r;
    memset(&r, 0, sizeof r);
    *closed = false;
    *responses = 0;
    int fd = it_connect();
    if (fd < 0) {
        r.curl_code = CURLE_COULDNT_CONNECT;
        return r;
    }
    bool wait_for_close = c->expect_close >= 0 || c->expect_responses > 0;
    it_buf reply = {0};
    if (it_write_all(fd, c->raw.data, c->raw.len)) {
        char chunk[16384];
        while (reply.len < RAW_REPLY_MAX) {
            struct pollfd p = {fd, POLLIN, 0};
            if (poll(&p, 1, RAW_TIMEOUT_MS) <= 0)
                break;
            ssize_t n = recv(fd, chunk, sizeof chunk, 0);
            if (n <= 0) {
                *closed = n == 0 || errno == ECONNRESET;
                break;
            }
            it_buf_append(&reply, chunk, (size_t)n);
            const char *head_end = strstr((const char *)reply.data, "\r\n\r\n");
            if (!wait_for_close && head_end != NULL) {
                it_response probe = {0};
                it_buf_append(&probe.headers, reply.data, (size_t)(head_end - (char *)reply.data));
                char length[32];
                bool sized = it_header(&probe, "Content-Length", length, sizeof length) != NULL;
                it_buf_free(&probe.headers);
                size_t body_have = reply.len - (size_t)(head_end + 4 - (char *)reply.data);
                if (sized && body_have >= strtoull(length, NULL, 10))
                    break;
            }
        }
    }
    close(fd);
    if (reply.len == 0) {
        r.curl_code = CURLE_GOT_NOTHING;
        return r;
    }
    const char *text = (const char *)reply.data;
    if (is_status_line(text))
        r.status = strtol(text + 9, NULL, 10);
    *responses = count_status_lines(text);
    const char *head_end = strstr(text, "\r\n\r\n");
    size_t head_len = head_end ? (size_t)(head_end - text) : reply.len;
    it_buf_append(&r.headers, text, head_len);
    if (head_end != NULL) {
        const char *body = head_end + 4;
        size_t body_len = reply.len - (size_t)(body - text);
        char length[32];
        if (it_header(&r, "Content-Length", length, sizeof length) != NULL &&
            strtoull(length, NULL, 10) < body_len)
            body_len = (size_t)strtoull(length, NULL, 10);
        it_buf_append(&r.body, body, body_len);
        if (body_len > 0 && (body[0] == '{' || body[0] == '['))
            r.json = json_loadb(body, body_len, 0, NULL);
    }
    it_buf_free(&reply);
    return r;
}

static it_response send_case(const case_file *c)
{
    it_request_opts o;
    memset(&o, 0, sizeof o);
    o.token = c->token;
    const char *headers[CASE_HEADERS_MAX + 2];
    int n = 0;
    for (int i = 0; i < c->header_count; i++)
        headers[n++] = c->headers[i];
    if (c->json_body)
        headers[n++] = "Content-Type: application/json";
    headers[n] = NULL;
    o.headers = headers;
    if (c->has_body) {
        o.body = c->body.data ? (const void *)c->body.data : "";
        o.body_len = c->body.len;
        o.has_body = true;
        o.chunked = c->chunked;
    }
    return it_request(c->method, (const char *)c->path.data, &o);
}

/* ---------- judging ---------- */

static void case_run(case_file *c)
{
    bool closed = false;
    int responses = 0;
    it_response r = c->is_raw ? send_raw(c, &closed, &responses) : send_case(c);
    const char *body = r.body.data ? (const char *)r.body.data : "";
    case_check(c, r.status == c->status, "status %ld, expected %ld; body: %.400s", r.status,
               c->status, body);
    if (c->reason != NULL) {
        const char *reason = it_reason(&r);
        case_check(c, reason != NULL && strcmp(reason, c->reason) == 0,
                   "reason \"%s\", expected \"%s\"", reason ? reason : "(none)", c->reason);
        char type[128];
        it_header(&r, "Content-Type", type, sizeof type);
        case_check(c, strcmp(type, "application/problem+json") == 0,
                   "Content-Type \"%s\", expected application/problem+json", type);
    }
    for (int i = 0; i < c->expect_header_count; i++) {
        const expect_header *e = &c->expect_headers[i];
        char got[1024];
        bool present = it_header(&r, e->name, got, sizeof got) != NULL;
        if (e->value == NULL)
            case_check(c, !present, "header %s: \"%s\", expected none", e->name, got);
        else if (e->prefix)
            case_check(c, present && strncmp(got, e->value, strlen(e->value)) == 0,
                       "header %s: \"%s\", expected it to start \"%s\"", e->name,
                       present ? got : "(absent)", e->value);
        else
            case_check(c, present && strcmp(got, e->value) == 0,
                       "header %s: \"%s\", expected \"%s\"", e->name, present ? got : "(absent)",
                       e->value);
    }
    for (int i = 0; i < c->body_contains_count; i++)
        case_check(c, strstr(body, c->body_contains[i]) != NULL,
                   "body does not contain \"%s\": %.400s", c->body_contains[i], body);
    for (int i = 0; i < c->json_count; i++) {
        json_t *v = r.json ? json_object_get(r.json, c->json_keys[i]) : NULL;
        char got[256] = "(absent)";
        if (json_is_string(v))
            snprintf(got, sizeof got, "%s", json_string_value(v));
        else if (json_is_integer(v))
            snprintf(got, sizeof got, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        else if (json_is_true(v) || json_is_false(v))
            snprintf(got, sizeof got, "%s", json_is_true(v) ? "true" : "false");
        else if (json_is_null(v))
            snprintf(got, sizeof got, "null");
        case_check(c, strcmp(got, c->json_values[i]) == 0, "JSON %s is %s, expected %s",
                   c->json_keys[i], got, c->json_values[i]);
    }
    if (c->expect_close >= 0)
        case_check(c, closed == (c->expect_close == 1), "the connection was %s, expected %s",
                   closed ? "closed" : "left open", c->expect_close ? "a close" : "it open");
    if (c->expect_responses > 0)
        case_check(c, responses == c->expect_responses, "%d answers, expected %d", responses,
                   c->expect_responses);
    it_response_free(&r);
}

static int name_order(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_cases(const char *filter)
{
    DIR *d = opendir(CASES_DIR);
    if (d == NULL) {
        fprintf(stderr, "cases: %s: %s (run from the repository root)\n", CASES_DIR,
                strerror(errno));
        test_checks_failed++;
        return 0;
    }
    char *names[CASES_MAX];
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".case") != 0)
            continue;
        if (filter != NULL && strstr(e->d_name, filter) == NULL)
            continue;
        if (count == CASES_MAX) {
            fprintf(stderr, "cases: more than %d cases\n", CASES_MAX);
            test_checks_failed++;
            break;
        }
        names[count++] = dup_or_die(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)count, sizeof names[0], name_order);
    for (int i = 0; i < count; i++) {
        char file[600];
        snprintf(file, sizeof file, "%s/%s", CASES_DIR, names[i]);
        it_buf text = {0};
        case_file c;
        memset(&c, 0, sizeof c);
        c.file = file;
        char err[256] = "";
        if (!it_read_file(file, &text)) {
            case_check(&c, false, "cannot be read");
        } else if (!case_parse(&c, text.data ? (char *)text.data : (char *)"", err, sizeof err)) {
            case_check(&c, false, "%s", err);
        } else {
            case_run(&c);
        }
        case_free(&c);
        it_buf_free(&text);
        free(names[i]);
    }
    return count;
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    const char *filter = argc > 2 ? argv[2] : NULL;
    it_buf model_file = {0};
    bool ready = provision_tokens();
    if (!it_read_file(FIXTURE_MODEL, &model_file)) {
        fprintf(stderr, "cases: %s cannot be read (run from the repository root)\n", FIXTURE_MODEL);
        ready = false;
    }
    ready = ready && provision_model("acme", &model_file) && provision_model("other", &model_file);
    CHECK(ready);
    it_buf_free(&model_file);
    if (ready) {
        int count = run_cases(filter);
        printf("cases: %d case files\n", count);
        CHECK(count > 0);
    }
    return it_finish(argv[0]);
}
