/* The request accessors and the responders (request.h): every answer a handler, the
 * authorization or the dispatcher gives goes through here. */
#include "request.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "audit.h"
#include "checks.h"
#include "log.h"
#include "reasons.h"
#include "response_cache.h"
#include "st_utf8.h"

/* ---- request accessors ---- */

const char *tg_param(const tg_request *req, const char *name)
{
    for (int i = 0; i < TG_PARAMS_MAX; i++)
        if (req->param_names[i] && strcmp(req->param_names[i], name) == 0)
            return req->params[i];
    return NULL;
}

const char *tg_header(const tg_request *req, const char *name)
{
    return MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, name);
}

const char *tg_query(const tg_request *req, const char *name)
{
    return MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, name);
}

uint64_t tg_request_body_size(const tg_request *req)
{
    const char *encoding = tg_header(req, "Transfer-Encoding");
    if (encoding != NULL && strcasestr(encoding, "chunked") != NULL)
        return ST_FILE_SIZE_UNKNOWN;
    const char *length = tg_header(req, "Content-Length");
    uint64_t value;
    if (length != NULL && tg_parse_u64(length, &value))
        return value;
    return ST_FILE_SIZE_UNKNOWN;
}

/* ---- responses ---- */

static const char *status_title(unsigned status);

/* Writes a complete small response on the connection's socket (see request.h). */
static void respond_raw(tg_request *req, unsigned status, const char *content_type,
                        const char *body)
{
    if (tg_audit_due(req, status))
        tg_audit_answer(req, status, NULL);
    req->responded = true;
    req->status = status;
    req->close_now = true;
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(req->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info == NULL)
        return;
    char head[512];
    size_t body_len = strlen(body);
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %u %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
                     status, status_title(status), content_type, body_len);
    if (n < 0 || (size_t)n >= sizeof head)
        return;
    struct iovec parts[2] = {{head, (size_t)n}, {(void *)(uintptr_t)body, body_len}};
    /* A few hundred bytes on a connection whose send buffer is empty: one writev.
     * The write side is then shut so the client sees the end of the response. */
    ssize_t written = writev(info->connect_fd, parts, 2);
    (void)written;
    shutdown(info->connect_fd, SHUT_WR);
    __atomic_fetch_add(&req->server->traffic->bytes_out, body_len, __ATOMIC_RELAXED);
}

void tg_respond(tg_request *req, unsigned status, struct MHD_Response *response,
                uint64_t body_bytes)
{
    if (req->responded) {
        if (response)
            MHD_destroy_response(response);
        return;
    }
    if (req->in_upload_data) {
        if (response)
            MHD_destroy_response(response);
        respond_raw(req, status, "text/plain", "");
        return;
    }
    /* the audit log's one place: every answer but a shared read passes here or
     * respond_raw, before it is queued */
    if (tg_audit_due(req, status))
        tg_audit_answer(req, status, response);
    req->responded = true;
    req->status = status;
    if (response == NULL) {
        tg_log(TG_LOG_ERROR, "out of memory building a %u response", status);
        req->close_now = true;
        return;
    }
    /* no-store unless the route chose its caching (the web page's assets) */
    if (MHD_get_response_header(response, "Cache-Control") == NULL)
        MHD_add_response_header(response, "Cache-Control", "no-store");
    if (req->close_after)
        MHD_add_response_header(response, "Connection", "close");
    MHD_queue_response(req->connection, status, response);
    MHD_destroy_response(response);
    if (!req->is_head)
        __atomic_fetch_add(&req->server->traffic->bytes_out, body_bytes, __ATOMIC_RELAXED);
}

bool tg_respond_shared(tg_request *req, unsigned status, struct MHD_Response *response,
                       uint64_t body_bytes)
{
    if (req->responded || req->in_upload_data || req->close_after)
        return false;
    if (MHD_queue_response(req->connection, status, response) != MHD_YES)
        return false;
    req->responded = true;
    req->status = status;
    if (!req->is_head)
        __atomic_fetch_add(&req->server->traffic->bytes_out, body_bytes, __ATOMIC_RELAXED);
    return true;
}

/* tg_response_send for tg_respond_cached: req is the request to answer. */
static bool send_shared(void *req, unsigned status, struct MHD_Response *response,
                        uint64_t body_len)
{
    return tg_respond_shared(req, status, response, body_len);
}

bool tg_respond_cached(tg_request *req, const char *key)
{
    return tg_response_cache_answer(req->server->responses, key, send_shared, req);
}

int tg_text_end_line(char **text)
{
    size_t len = strlen(*text);
    if (len > 0 && (*text)[len - 1] == '\n')
        return 0;
    char *grown = realloc(*text, len + 2);
    if (grown == NULL) {
        free(*text);
        *text = NULL;
        return -1;
    }
    grown[len] = '\n';
    grown[len + 1] = '\0';
    *text = grown;
    return 0;
}

/* The one way a JSON or problem+json text is answered (it ends with a newline): takes text
 * (malloc'd; NULL answers 500 with no body); headers are name/value pairs, NULL-terminated (a pair
 * whose value is NULL is skipped); a 401 also says how to authenticate. Inside a
 * body's feed, where libmicrohttpd takes no response object, the plain text is
 * written on the socket without them. */
static void respond_text(tg_request *req, unsigned status, char *text, const char *content_type,
                         const char *const *headers)
{
    if (text == NULL || tg_text_end_line(&text) != 0) {
        tg_respond(req, 500, NULL, 0);
        return;
    }
    if (req->in_upload_data) {
        if (!req->responded)
            respond_raw(req, status, content_type, text);
        free(text);
        return;
    }
    size_t len = strlen(text);
    struct MHD_Response *response =
        MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (response == NULL) {
        free(text);
    } else {
        MHD_add_response_header(response, "Content-Type", content_type);
        for (size_t i = 0; headers != NULL && headers[i] != NULL; i += 2)
            if (headers[i + 1] != NULL)
                MHD_add_response_header(response, headers[i], headers[i + 1]);
        if (status == 401)
            MHD_add_response_header(response, "WWW-Authenticate", "Bearer realm=\"tensorgate\"");
    }
    tg_respond(req, status, response, len);
}

void tg_respond_json(tg_request *req, unsigned status, json_t *body)
{
    tg_respond_json_headers(req, status, body, NULL);
}

void tg_respond_json_headers(tg_request *req, unsigned status, json_t *body,
                             const char *const *headers)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    respond_text(req, status, text, "application/json", headers);
}

void tg_respond_json_typed(tg_request *req, unsigned status, json_t *body, const char *content_type,
                           const char *const *headers)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    respond_text(req, status, text, content_type, headers);
}

void tg_respond_empty(tg_request *req, unsigned status)
{
    struct MHD_Response *response =
        MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    tg_respond(req, status, response, 0);
}

/* The titles of the statuses this server seldom or never answers with itself (a
 * failed job's problem may carry 502 from its source), and a class's title for any
 * other: never a bare "Error". */
static const char *rare_status_title(unsigned status)
{
    static const struct {
        unsigned status;
        const char *title;
    } titles[] = {
        {200, "OK"},
        {201, "Created"},
        {202, "Accepted"},
        {204, "No Content"},
        {206, "Partial Content"},
        {301, "Moved Permanently"},
        {302, "Found"},
        {303, "See Other"},
        {304, "Not Modified"},
        {307, "Temporary Redirect"},
        {308, "Permanent Redirect"},
        {402, "Payment Required"},
        {407, "Proxy Authentication Required"},
        {410, "Gone"},
        {412, "Precondition Failed"},
        {417, "Expectation Failed"},
        {421, "Misdirected Request"},
        {423, "Locked"},
        {424, "Failed Dependency"},
        {425, "Too Early"},
        {426, "Upgrade Required"},
        {428, "Precondition Required"},
        {451, "Unavailable For Legal Reasons"},
        {502, "Bad Gateway"},
        {504, "Gateway Timeout"},
        {505, "HTTP Version Not Supported"},
        {506, "Variant Also Negotiates"},
        {508, "Loop Detected"},
        {510, "Not Extended"},
        {511, "Network Authentication Required"},
    };
    for (size_t i = 0; i < sizeof titles / sizeof titles[0]; i++)
        if (titles[i].status == status)
            return titles[i].title;
    if (status >= 400 && status < 500)
        return "Client Error";
    if (status >= 500 && status < 600)
        return "Server Error";
    return "Status";
}

static const char *status_title(unsigned status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 406:
        return "Not Acceptable";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 411:
        return "Length Required";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 416:
        return "Range Not Satisfiable";
    case 422:
        return "Unprocessable Content";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 507:
        return "Insufficient Storage";
    default:
        return rare_status_title(status);
    }
}

/* Copies in to out as valid UTF-8: each byte that does not begin a valid sequence
 * becomes the text \xNN; truncated (on a character boundary) to fit out_len. */
static void utf8_clean(const char *in, char *out, size_t out_len)
{
    const unsigned char *p = (const unsigned char *)in;
    size_t n = strlen(in), o = 0;
    while (n > 0 && o + 1 < out_len) {
        size_t len = st_utf8_sequence_length(p, n);
        if (len == 0) {
            /* a byte that is not UTF-8 is written as text, \xNN, as details do elsewhere */
            if (o + 5 > out_len)
                break;
            snprintf(out + o, 5, "\\x%02x", p[0]);
            o += 4;
            len = 1;
        } else {
            if (o + len + 1 > out_len)
                break; /* never cut a character in half */
            memcpy(out + o, p, len);
            o += len;
        }
        p += len;
        n -= len;
    }
    out[o] = '\0';
}

json_t *tg_problem_json(unsigned status, const char *reason, const char *detail)
{
    char type[160];
    snprintf(type, sizeof type, "https://tensorgate.dev/problems/%s", reason);
    /* details echo client input (paths, names): make them valid UTF-8 so the
     * problem can always be written */
    char clean[2048];
    utf8_clean(detail, clean, sizeof clean);
    return json_pack("{s:s, s:s, s:i, s:s, s:s}", "type", type, "title", status_title(status),
                     "status", (json_int_t)status, "detail", clean, "reason", reason);
}

/* The one way a problem+json is answered: steals problem; headers as respond_text's. */
static void respond_problem_json(tg_request *req, unsigned status, json_t *problem,
                                 const char *const *headers)
{
    const char *reason = json_string_value(json_object_get(problem, "reason"));
    if (!req->responded)
        snprintf(req->reason, sizeof req->reason, "%s", reason ? reason : "");
    /* On the Hub's routes the problem is also the Hub's error body: its sentence under
     * "error" (what huggingface_hub and @huggingface/hub show the user), as
     * application/json (@huggingface/hub reads no other type). */
    bool hub_json =
        req->hub_errors && req->route != NULL && (req->route->flags & TG_ROUTE_HUB_JSON);
    if (req->hub_errors && problem != NULL)
        json_object_set(problem, "error", json_object_get(problem, "detail"));
    char *text = problem ? json_dumps(problem, JSON_COMPACT) : NULL;
    json_decref(problem);
    respond_text(req, status, text, hub_json ? "application/json" : "application/problem+json",
                 headers);
}

static void __attribute__((format(printf, 5, 0)))
respond_problem_va(tg_request *req, unsigned status, const char *reason, const char *const *headers,
                   const char *fmt, va_list ap)
{
    char detail[512];
    vsnprintf(detail, sizeof detail, fmt, ap);
    if (req->hub_errors && headers == NULL) {
        /* huggingface_hub maps RepoNotFound to RepositoryNotFoundError (repo_exists then
         * answers False) and GatedRepo to GatedRepoError; other statuses carry the
         * message only. */
        const char *code = status == 401 ? "RepoNotFound" : status == 403 ? "GatedRepo" : reason;
        const char *const hub_headers[] = {"X-Error-Code", code, "X-Error-Message", detail, NULL};
        respond_problem_json(req, status, tg_problem_json(status, reason, detail), hub_headers);
        return;
    }
    respond_problem_json(req, status, tg_problem_json(status, reason, detail), headers);
}

/* The status the reason table gives reason; 500 (logged) for a reason it lacks. */
static unsigned reason_status(const char *reason)
{
    unsigned status = tg_reason_status(reason);
    if (status == 0) {
        tg_log(TG_LOG_ERROR, "the reason '%s' is not in the reason table (reasons.c)", reason);
        return 500;
    }
    return status;
}

void tg_respond_problem(tg_request *req, const char *reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    respond_problem_va(req, reason_status(reason), reason, NULL, fmt, ap);
    va_end(ap);
}

void tg_respond_problem_headers(tg_request *req, const char *reason, const char *const *headers,
                                const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    respond_problem_va(req, reason_status(reason), reason, headers, fmt, ap);
    va_end(ap);
}

void tg_respond_internal(tg_request *req, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    respond_problem_va(req, 500, "internal", NULL, fmt, ap);
    va_end(ap);
}

void tg_respond_catalog_failure_detail(tg_request *req, tg_cat_status status, const char *fmt, ...)
{
    if (status == TG_CAT_FULL) {
        /* a catalog write that failed for a full disk is the client-visible cause */
        respond_problem_json(req, 507,
                             tg_problem_json(507, "insufficient_storage",
                                             "the server's disk is full; the catalog could not "
                                             "record the change, and nothing was changed"),
                             NULL);
        return;
    }
    if (status == TG_CAT_UNAVAILABLE) {
        /* no fault of the server's code: a stable reason, and Retry-After, so clients
         * and balancers retry */
        const char *const retry[] = {"Retry-After", "1", NULL};
        respond_problem_json(req, 503,
                             tg_problem_json(503, "catalog_unavailable",
                                             "the catalog cannot be reached right now; retry the "
                                             "request"),
                             retry);
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    respond_problem_va(req, 500, "internal", NULL, fmt, ap);
    va_end(ap);
}

void tg_respond_catalog_failure(tg_request *req, tg_cat_status status)
{
    tg_respond_catalog_failure_detail(req, status, "the catalog failed");
}

void tg_respond_gate_problem(tg_request *req, const st_verdict *verdict)
{
    if (verdict->error.reason == ST_OUT_OF_MEMORY) {
        /* the server's failure, not a verdict on the file */
        tg_respond_internal(req,
                            "the server ran out of memory checking the file; nothing was stored");
        return;
    }
    unsigned status = tg_gate_reason_status(verdict->error.reason);
    const char *detail =
        verdict->error.detail[0] ? verdict->error.detail : "the upload was refused";
    json_t *problem = tg_problem_json(status, st_reason_name(verdict->error.reason), detail);
    if (problem) {
        json_object_set_new(problem, "offset",
                            verdict->error.offset == ST_NO_OFFSET
                                ? json_null()
                                : json_integer((json_int_t)verdict->error.offset));
        json_object_set_new(problem, "tensor", st_error_tensor_json(&verdict->error));
        json_object_set_new(problem, "format", json_string(st_format_name(verdict->format)));
        /* a refused pickle names what it would import and call */
        if (verdict->findings.count > 0)
            json_object_set_new(problem, "findings", st_verdict_findings_json(verdict));
    }
    /* the Hub's clients show X-Error-Message: the gate's reason and sentence */
    char message[600];
    snprintf(message, sizeof message, "%s: %s", st_reason_name(verdict->error.reason), detail);
    const char *const hub_headers[] = {"X-Error-Code", st_reason_name(verdict->error.reason),
                                       "X-Error-Message", message, NULL};
    if (req->hub_errors && problem != NULL)
        json_object_set_new(problem, "detail", json_string(message));
    respond_problem_json(req, status, problem, req->hub_errors ? hub_headers : NULL);
}

bool tg_list_params(tg_request *req, unsigned *limit, char *key, size_t key_len, bool *has_cursor)
{
    return tg_list_params_bounded(req, 50, 1000, limit, key, key_len, has_cursor);
}

bool tg_list_params_bounded(tg_request *req, unsigned default_limit, unsigned max_limit,
                            unsigned *limit, char *key, size_t key_len, bool *has_cursor)
{
    const char *limit_text = tg_query(req, "limit");
    uint64_t value = default_limit;
    if (limit_text != NULL &&
        (!tg_parse_u64(limit_text, &value) || value < 1 || value > max_limit)) {
        tg_respond_problem(req, "invalid_request", "limit must be an integer from 1 to %u",
                           max_limit);
        return false;
    }
    *limit = (unsigned)value;
    const char *cursor = tg_query(req, "cursor");
    *has_cursor = cursor != NULL && cursor[0] != '\0';
    key[0] = '\0';
    if (*has_cursor && tg_cursor_decode(cursor, key, key_len) != 0) {
        tg_respond_problem(req, "invalid_request", "the cursor is not one this server issued");
        return false;
    }
    return true;
}

void tg_set_next_cursor(json_t *body, const char *key_or_null)
{
    if (key_or_null == NULL) {
        json_object_set_new(body, "next_cursor", json_null());
        return;
    }
    char cursor[2048];
    if (tg_cursor_encode(key_or_null, cursor, sizeof cursor) != 0)
        json_object_set_new(body, "next_cursor", json_null());
    else
        json_object_set_new(body, "next_cursor", json_string(cursor));
}

json_t *tg_json_body(tg_request *req)
{
    if (req->body_too_large) {
        tg_respond_problem(req, "payload_too_large", "a JSON body is limited to %d bytes",
                           TG_JSON_BODY_MAX);
        return NULL;
    }
    if (req->body_len == 0)
        return json_object();
    if (!tg_json_depth_within(req->body, req->body_len, TG_JSON_DEPTH_MAX)) {
        tg_respond_problem(req, "json_too_deep",
                           "the body nests arrays and objects more than %d deep",
                           TG_JSON_DEPTH_MAX);
        return NULL;
    }
    json_error_t error;
    json_t *value = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &error);
    if (value == NULL) {
        tg_respond_problem(req, "invalid_json", "the body is not valid JSON: %s (line %d)",
                           error.text, error.line);
        return NULL;
    }
    if (!json_is_object(value)) {
        json_decref(value);
        tg_respond_problem(req, "invalid_json", "the body must be a JSON object");
        return NULL;
    }
    return value;
}

bool tg_json_known_fields(tg_request *req, json_t *body, const char *const *fields)
{
    const char *key;
    json_t *value;
    json_object_foreach(body, key, value)
    {
        size_t i = 0;
        while (fields[i] != NULL && strcmp(fields[i], key) != 0)
            i++;
        if (fields[i] != NULL)
            continue;
        char names[256] = "";
        for (size_t f = 0; fields[f] != NULL; f++) {
            size_t used = strlen(names);
            snprintf(names + used, sizeof names - used, "%s\"%s\"", f ? ", " : "", fields[f]);
        }
        if (fields[0] == NULL)
            tg_respond_problem(req, "invalid_request",
                               "unknown field \"%.64s\": this route takes an empty body or {}",
                               key);
        else
            tg_respond_problem(req, "invalid_request",
                               "unknown field \"%.64s\": the body may have %s", key, names);
        return false;
    }
    return true;
}

typedef struct query_check {
    const char *const *names;
    unsigned seen[32]; /* how often each name came */
    const char *unknown;
    const char *repeated;
} query_check;

static enum MHD_Result check_argument(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value)
{
    (void)kind;
    (void)value;
    query_check *check = cls;
    size_t i = 0;
    while (check->names[i] != NULL && strcmp(check->names[i], key) != 0)
        i++;
    if (check->names[i] == NULL || i >= sizeof check->seen / sizeof check->seen[0]) {
        check->unknown = key;
        return MHD_NO;
    }
    if (++check->seen[i] > 1) {
        check->repeated = key;
        return MHD_NO;
    }
    return MHD_YES;
}

bool tg_query_known(tg_request *req, const char *const *names)
{
    query_check check = {.names = names};
    MHD_get_connection_values(req->connection, MHD_GET_ARGUMENT_KIND, check_argument, &check);
    if (check.unknown == NULL && check.repeated == NULL)
        return true;
    char list[256] = "";
    for (size_t i = 0; names[i] != NULL; i++) {
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", names[i]);
    }
    if (check.unknown != NULL)
        tg_respond_problem(req, "unknown_parameter",
                           "unknown query parameter \"%.64s\": this route takes %s", check.unknown,
                           list);
    else
        tg_respond_problem(req, "invalid_request",
                           "the query parameter \"%.64s\" is given twice; give it once",
                           check.repeated);
    return false;
}
