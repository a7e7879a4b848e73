/* libmicrohttpd glue: the router over the table given at start, the route's scope
 * (auth.c) before its handler, request lifecycle, metrics. Answers go through the
 * responders of request.c. */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "checks.h"
#include "downloads.h"
#include "header_cache.h"
#include "index_cache.h"
#include "log.h"
#include "parsed_header_cache.h"
#include "rate_limit.h"
#include "response_cache.h"
#include "st_buffer.h"

/* ---- metrics ---- */

static const unsigned known_statuses[] = {200, 201, 202, 204, 206, 304, 400, 401, 403,
                                          404, 405, 406, 409, 411, 413, 414, 415, 416,
                                          422, 429, 431, 500, 501, 503, 507};
#define STATUS_SLOTS (sizeof known_statuses / sizeof known_statuses[0] + 1)
#define REJECTION_REASONS_MAX 64
/* Request latency buckets (seconds, upper bounds; +Inf is the count). */
static const double latency_bounds[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1,
                                        0.25,  0.5,   1,    2.5,   5,    10};
#define LATENCY_BOUNDS (sizeof latency_bounds / sizeof latency_bounds[0])
/* One latency row: the buckets (not cumulative), the count, the sum in microseconds. */
#define LATENCY_SLOTS (LATENCY_BOUNDS + 2)

struct tg_metrics {
    /* by route row and status slot: metric_rows(route_count) * STATUS_SLOTS counters.
     * Rows: one per route, then one for requests that matched no route, then one per
     * route for HEAD (a GET route also answers HEAD, counted apart). */
    uint64_t *requests;
    /* by the same rows: LATENCY_SLOTS counters each (fixed memory per route) */
    uint64_t *latency;
    tg_traffic traffic;   /* the byte counters (request.h; tg_server.traffic) */
    pthread_mutex_t lock; /* guards the rejection table */
    struct {
        char reason[48];
        uint64_t count;
    } rejections[REJECTION_REASONS_MAX];
    uint64_t header_timeouts; /* connections closed by the header deadline */
    char *timeout_answer;     /* the whole 408 response the sweeper writes */
    /* the header-deadline sweeper thread */
    pthread_t sweeper;
    bool sweeper_running, sweeper_stop;
    pthread_mutex_t sweeper_lock;
    pthread_cond_t sweeper_wake;
};

static double monotonic_seconds(void);

static size_t metric_rows(size_t route_count)
{
    return 2 * route_count + 1;
}

static size_t status_slot(unsigned status)
{
    for (size_t i = 0; i < STATUS_SLOTS - 1; i++)
        if (known_statuses[i] == status)
            return i;
    return STATUS_SLOTS - 1;
}

void tg_metrics_rejection(tg_server *server, const char *reason)
{
    tg_metrics *m = server->metrics;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < REJECTION_REASONS_MAX; i++) {
        if (m->rejections[i].reason[0] == '\0')
            snprintf(m->rejections[i].reason, sizeof m->rejections[i].reason, "%s", reason);
        if (strcmp(m->rejections[i].reason, reason) == 0) {
            m->rejections[i].count++;
            break;
        }
    }
    pthread_mutex_unlock(&m->lock);
}

/* The /metrics text is a few kilobytes; this bounds it whatever the counters hold. */
#define METRICS_TEXT_MAX ((size_t)4 * 1024 * 1024)
/* libmicrohttpd's per-connection memory pool (see MHD_start_daemon below) */
#define TG_CONNECTION_POOL ((size_t)64 * 1024)

static void __attribute__((format(printf, 2, 3))) append(st_buffer *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)st_buffer_vprintf(b, fmt, ap); /* a failure is seen once, by st_buffer_take */
    va_end(ap);
}

/* A metrics row's labels (see struct tg_metrics). */
static const char *row_method(const tg_server *server, size_t r)
{
    if (r < server->route_count)
        return server->routes[r].method;
    return r == server->route_count ? "" : "HEAD";
}

static const char *row_pattern(const tg_server *server, size_t r)
{
    if (r < server->route_count)
        return server->routes[r].pattern;
    if (r == server->route_count)
        return "unmatched";
    return server->routes[r - server->route_count - 1].pattern;
}

/* Counts an answered request and its latency on its row. */
static void count_request(tg_server *server, const tg_request *req)
{
    size_t r = req->route ? (size_t)(req->route - server->routes) : server->route_count;
    if (req->route && req->is_head)
        r += server->route_count + 1;
    tg_metrics *m = server->metrics;
    __atomic_fetch_add(&m->requests[r * STATUS_SLOTS + status_slot(req->status)], 1,
                       __ATOMIC_RELAXED);
    double seconds = monotonic_seconds() - req->started_at;
    if (req->started_at <= 0 || seconds < 0)
        seconds = 0;
    uint64_t *row = &m->latency[r * LATENCY_SLOTS];
    size_t k = 0;
    while (k < LATENCY_BOUNDS && seconds > latency_bounds[k])
        k++;
    if (k < LATENCY_BOUNDS)
        __atomic_fetch_add(&row[k], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&row[LATENCY_BOUNDS + 1], (uint64_t)(seconds * 1e6), __ATOMIC_RELAXED);
    __atomic_fetch_add(&row[LATENCY_BOUNDS], 1, __ATOMIC_RELAXED); /* the count, last */
}

char *tg_metrics_render(tg_server *server)
{
    tg_metrics *m = server->metrics;
    st_buffer b;
    st_buffer_init(&b, METRICS_TEXT_MAX);
    append(&b, "# HELP tensorgate_requests_total HTTP requests by route and status.\n"
               "# TYPE tensorgate_requests_total counter\n");
    size_t route_count = server->route_count;
    for (size_t r = 0; r < metric_rows(route_count); r++) {
        const char *method = row_method(server, r), *pattern = row_pattern(server, r);
        for (size_t s = 0; s < STATUS_SLOTS; s++) {
            uint64_t count = __atomic_load_n(&m->requests[r * STATUS_SLOTS + s], __ATOMIC_RELAXED);
            if (count == 0)
                continue;
            char status[8];
            if (s < STATUS_SLOTS - 1)
                snprintf(status, sizeof status, "%u", known_statuses[s]);
            else
                snprintf(status, sizeof status, "other");
            append(&b, "tensorgate_requests_total{method=\"%s\",route=\"%s\",status=\"%s\"} %llu\n",
                   method, pattern, status, (unsigned long long)count);
        }
    }
    append(&b, "# HELP tensorgate_request_duration_seconds Request latency by route, from the "
               "request's first callback to its end.\n"
               "# TYPE tensorgate_request_duration_seconds histogram\n");
    for (size_t r = 0; r < metric_rows(route_count); r++) {
        const uint64_t *row = &m->latency[r * LATENCY_SLOTS];
        uint64_t count = __atomic_load_n(&row[LATENCY_BOUNDS], __ATOMIC_RELAXED);
        if (count == 0)
            continue;
        const char *method = row_method(server, r), *pattern = row_pattern(server, r);
        uint64_t cumulative = 0;
        for (size_t k = 0; k < LATENCY_BOUNDS; k++) {
            cumulative += __atomic_load_n(&row[k], __ATOMIC_RELAXED);
            append(
                &b,
                "tensorgate_request_duration_seconds_bucket{method=\"%s\",route=\"%s\",le=\"%g\"} "
                "%llu\n",
                method, pattern, latency_bounds[k], (unsigned long long)cumulative);
        }
        uint64_t micros = __atomic_load_n(&row[LATENCY_BOUNDS + 1], __ATOMIC_RELAXED);
        append(&b,
               "tensorgate_request_duration_seconds_bucket{method=\"%s\",route=\"%s\",le=\"+Inf\"} "
               "%llu\n"
               "tensorgate_request_duration_seconds_sum{method=\"%s\",route=\"%s\"} %.6f\n"
               "tensorgate_request_duration_seconds_count{method=\"%s\",route=\"%s\"} %llu\n",
               method, pattern, (unsigned long long)count, method, pattern, (double)micros / 1e6,
               method, pattern, (unsigned long long)count);
    }
    append(&b,
           "# HELP tensorgate_bytes_in_total Request body bytes received.\n"
           "# TYPE tensorgate_bytes_in_total counter\n"
           "tensorgate_bytes_in_total %llu\n"
           "# HELP tensorgate_bytes_out_total Response body bytes sent.\n"
           "# TYPE tensorgate_bytes_out_total counter\n"
           "tensorgate_bytes_out_total %llu\n",
           (unsigned long long)__atomic_load_n(&m->traffic.bytes_in, __ATOMIC_RELAXED),
           (unsigned long long)__atomic_load_n(&m->traffic.bytes_out, __ATOMIC_RELAXED));
    append(&b,
           "# HELP tensorgate_header_timeouts_total Connections closed because a request's head "
           "took longer than --header-timeout.\n"
           "# TYPE tensorgate_header_timeouts_total counter\n"
           "tensorgate_header_timeouts_total %llu\n",
           (unsigned long long)__atomic_load_n(&m->header_timeouts, __ATOMIC_RELAXED));
    append(&b,
           "# HELP tensorgate_audit_records_total Audit log records written (writes and "
           "authorization refusals).\n"
           "# TYPE tensorgate_audit_records_total counter\n"
           "tensorgate_audit_records_total %llu\n"
           "# HELP tensorgate_audit_failures_total Audit log records that could not be written "
           "(the catalog failed; each is logged whole).\n"
           "# TYPE tensorgate_audit_failures_total counter\n"
           "tensorgate_audit_failures_total %llu\n",
           (unsigned long long)__atomic_load_n(&server->audit.records, __ATOMIC_RELAXED),
           (unsigned long long)__atomic_load_n(&server->audit.failures, __ATOMIC_RELAXED));
    append(&b, "# HELP tensorgate_rejections_total Uploads refused, by reason.\n"
               "# TYPE tensorgate_rejections_total counter\n");
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < REJECTION_REASONS_MAX && m->rejections[i].reason[0]; i++)
        append(&b, "tensorgate_rejections_total{reason=\"%s\"} %llu\n", m->rejections[i].reason,
               (unsigned long long)m->rejections[i].count);
    pthread_mutex_unlock(&m->lock);
    char header_cache[2048];
    if (server->parsed_headers != NULL &&
        tg_parsed_header_metrics(server->parsed_headers, header_cache, sizeof header_cache) <
            (int)sizeof header_cache)
        append(&b, "%s", header_cache);
    return st_buffer_take(&b, NULL);
}

/* ---- routing ---- */

typedef tg_segment segment;

#define SEGMENTS_MAX TG_SEGMENTS_MAX

static int split_path(const char *path, segment *out)
{
    return tg_split_path(path, out, SEGMENTS_MAX);
}

_Static_assert(TG_PARAMS_MAX >= TG_ROUTE_PARAMS_MAX, "a request holds every placeholder");

/* Fills req->param_names/params (malloc'd) from the spans of a match; false when
 * out of memory. */
static bool take_params(const tg_param_span *spans, int count, tg_request *req)
{
    for (int i = 0; i < count; i++) {
        req->param_names[i] = spans[i].name;
        req->params[i] = strndup(spans[i].text, spans[i].len);
        if (req->params[i] == NULL)
            return false;
    }
    return true;
}

/* ---- request lifecycle ---- */

static void client_address(struct MHD_Connection *connection, char *out, size_t out_len)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(out, out_len, "unknown");
    if (info == NULL || info->client_addr == NULL)
        return;
    const struct sockaddr *sa = info->client_addr;
    socklen_t len =
        sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    getnameinfo(sa, len, out, (socklen_t)out_len, NULL, 0, NI_NUMERICHOST);
}

/* Route lookup: sets req->route, or answers 404/405. */
static void route_request(tg_request *req, const char *url)
{
    if (req->url_has_nul) {
        /* libmicrohttpd decodes %00 into a NUL, which would silently end the path or
         * value there (a.safetensors%00x would name a.safetensors) */
        tg_respond_problem(req, "invalid_request",
                           "the URL holds an encoded NUL byte (%%00); paths, names and query "
                           "values cannot contain one");
        return;
    }
    if (req->target.length > TG_URI_MAX) {
        tg_respond_problem(req, "uri_too_long", "the request target has %zu bytes, more than %d",
                           req->target.length, TG_URI_MAX);
        return;
    }
    if (req->target.query_args > TG_QUERY_ARGS_MAX) {
        tg_respond_problem(req, "too_many_query_arguments",
                           "the query has %zu arguments, more than %d", req->target.query_args,
                           TG_QUERY_ARGS_MAX);
        return;
    }
    segment url_segments[SEGMENTS_MAX];
    int url_count = split_path(url, url_segments);
    if (url_count < 0) {
        tg_respond_problem(req, "not_found", "no such route");
        return;
    }
    const char *match_method = req->is_head ? "GET" : req->method;
    const tg_route *routes = req->server->routes;
    char allow[128] = "";
    /* the patterns were split at start (tg_http_start): a row costs a count check,
     * then a memcmp per literal segment */
    const tg_pattern *patterns = req->server->patterns;
    for (size_t i = 0; i < req->server->route_count; i++) {
        if (!tg_pattern_first_may_match(&patterns[i], url_segments, url_count)) {
            i = patterns[i].next_group - 1; /* the rows that start as this one fail too */
            continue;
        }
        tg_param_span spans[TG_ROUTE_PARAMS_MAX];
        int count = 0;
        if (!tg_pattern_match(&patterns[i], url_segments, url_count, spans, &count))
            continue;
        if (strcmp(routes[i].method, match_method) == 0) {
            if (!take_params(spans, count, req)) {
                tg_respond_internal(req, "out of memory");
                return;
            }
            req->route = &routes[i];
            return;
        }
        if (strstr(allow, routes[i].method) == NULL) {
            size_t used = strlen(allow);
            snprintf(allow + used, sizeof allow - used, "%s%s%s", used ? ", " : "",
                     routes[i].method, strcmp(routes[i].method, "GET") == 0 ? ", HEAD" : "");
        }
    }
    if (allow[0] == '\0') {
        tg_respond_problem(req, "not_found", "no such route");
        return;
    }
    const char *const headers[] = {"Allow", allow, NULL};
    tg_respond_problem_headers(req, "method_not_allowed", headers,
                               "%s is not allowed here; allowed: %s", req->method, allow);
}

/* True when the client has shut its sending side and nothing of it is left unread:
 * a one-byte MSG_PEEK reads 0 (end of stream) rather than a byte or EAGAIN. */
static bool client_finished_sending(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info == NULL)
        return false;
    char byte;
    return recv(info->connect_fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* A stream route whose client half-closed (shutdown(SHUT_WR)) before sending all of its
 * Content-Length: the body can never complete. libmicrohttpd 0.9.75 would wait for the
 * rest until the idle timeout: with MHD_USE_EPOLL it is edge-triggered and, after a short
 * read, misses a FIN that came with the last data (about half the time); otherwise it
 * sees the FIN only after the callback and closes without an answer. So after each body
 * callback the socket is peeked: at the end of the stream the handler answers now (on
 * the socket, as from inside the body) and the connection is closed, which runs the
 * route's cleanup at once (temp file deleted). Chunked bodies are not checked: whether
 * the last chunk arrived is known only to libmicrohttpd. Returns true when it answered. */
static bool finish_truncated_body(tg_request *req)
{
    if (req->responded || req->close_now || req->route == NULL ||
        req->route->body != TG_BODY_STREAM)
        return false;
    uint64_t declared = tg_request_body_size(req);
    if (declared == ST_FILE_SIZE_UNKNOWN || req->bytes_in >= declared ||
        !client_finished_sending(req->connection))
        return false;
    req->in_upload_data = true;
    req->route->handle(req);
    req->in_upload_data = false;
    req->close_now = true;
    return true;
}

/* The route's declared scope (tg_route.auth), checked once per request before its
 * first callback, where the handler used to check it itself: true when the route
 * may run; false when the request is answered (401/403/500, or already before).
 * The route's error dialect is switched on here, as its handler did first thing. */
static bool route_authorized(tg_request *req)
{
    if (req->responded)
        return false;
    if (req->authorized)
        return true;
    req->hub_errors = (req->route->flags & TG_ROUTE_HUB_ERRORS) != 0;
    req->authorized = tg_auth_route(req);
    return req->authorized;
}

/* 429 rate_limited with Retry-After (seconds). */
static void respond_rate_limited(tg_request *req, unsigned retry_after)
{
    char seconds[16];
    snprintf(seconds, sizeof seconds, "%u", retry_after);
    const char *const headers[] = {"Retry-After", seconds, NULL};
    tg_respond_problem_headers(
        req, "rate_limited", headers,
        "more than %u requests per second from this client; retry after %u s",
        req->server->config.rate_limit, retry_after);
}

/* True when the request has a body to read: chunked, or a Content-Length above 0. */
static bool declares_body(const tg_request *req)
{
    const char *encoding = tg_header(req, "Transfer-Encoding");
    if (encoding != NULL)
        return true;
    const char *length = tg_header(req, "Content-Length");
    return length != NULL && strspn(length, "0") != strlen(length);
}

/* The request's state lives with its connection: allocated when libmicrohttpd accepts
 * the connection (on_connection), reset by each request on it (on_uri), released when
 * the request ends (on_completed) and freed when the connection closes. Nothing is
 * allocated per request before on_request, and what a request holds is released at
 * the latest when its connection closes: libmicrohttpd 0.9.75 ends some requests it
 * refuses itself without the completion callback (a query with thousands of
 * arguments exhausts the connection's pool), and they used to leak their state. */

/* Connections in the header phase: from the accept, or from the end of the previous
 * request on a kept-alive connection, to the request's first on_request. Used by
 * refuse_from_log and by the header deadline (header_sweeper); each entry is touched
 * only by the thread that serves its connection, and by the sweeper under the lock. */
static pthread_mutex_t phase_lock = PTHREAD_MUTEX_INITIALIZER;
static tg_request *phase_head;

static double monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* since: when the head began (0: now). */
static void phase_enter(tg_request *req, double since)
{
    pthread_mutex_lock(&phase_lock);
    req->phase_since = since > 0 ? since : monotonic_seconds();
    req->owner = pthread_self();
    req->phase_prev = NULL;
    req->phase_next = phase_head;
    if (phase_head != NULL)
        phase_head->phase_prev = req;
    phase_head = req;
    req->in_header_phase = true;
    pthread_mutex_unlock(&phase_lock);
}

static void phase_leave(tg_request *req)
{
    if (!req->in_header_phase)
        return;
    pthread_mutex_lock(&phase_lock);
    if (req->phase_prev != NULL)
        req->phase_prev->phase_next = req->phase_next;
    else
        phase_head = req->phase_next;
    if (req->phase_next != NULL)
        req->phase_next->phase_prev = req->phase_prev;
    req->phase_prev = req->phase_next = NULL;
    req->in_header_phase = false;
    pthread_mutex_unlock(&phase_lock);
}

/* Releases what the request holds (route cleanup, parameters, body) and counts it. */
static void end_request(tg_server *server, tg_request *req, enum MHD_RequestTerminationCode code)
{
    phase_leave(req);
    if (!req->live)
        return;
    req->live = false;
    if (req->route && req->route->cleanup)
        req->route->cleanup(req);
    if (req->responded)
        count_request(server, req);
    if (code != MHD_REQUEST_TERMINATED_COMPLETED_OK && req->route)
        tg_log(TG_LOG_DEBUG, "%s %s from %s ended early (code %d)", req->method,
               req->route->pattern, req->client, (int)code);
    for (int i = 0; i < TG_PARAMS_MAX; i++) {
        free(req->params[i]);
        req->params[i] = NULL;
    }
    free(req->body);
    req->body = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    (void)connection;
    tg_server *server = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        tg_request *fresh = calloc(1, sizeof(tg_request)); /* NULL: its requests are refused */
        *socket_context = fresh;
        if (fresh != NULL) {
            fresh->server = server;
            fresh->connection = connection;
            phase_enter(fresh, 0); /* the first head's clock starts at the accept */
        }
        return;
    }
    tg_request *req = *socket_context;
    if (req != NULL) {
        end_request(server, req, MHD_REQUEST_TERMINATED_WITH_ERROR);
        free(req);
    }
    *socket_context = NULL;
}

static enum MHD_Result collect_field(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    tg_framing_add(cls, key, value ? value : "");
    return MHD_YES;
}

/* The framing checks of http_parse.c on the request's header fields. */
static bool framing_refused(tg_request *req, const char *version, tg_refusal *refusal)
{
    tg_framing framing = {0};
    MHD_get_connection_values(req->connection, MHD_HEADER_KIND, collect_field, &framing);
    const union MHD_ConnectionInfo *size =
        MHD_get_connection_info(req->connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    bool http_1_0 = version != NULL && strcmp(version, "HTTP/1.0") == 0;
    /* the target has its own bound (414 uri_too_long, answered at routing) */
    size_t head = size ? size->header_size : 0;
    size_t fields = head > req->target.length ? head - req->target.length : 0;
    return tg_framing_verdict(&framing, http_1_0, fields, refusal);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    tg_server *server = cls;
    tg_request *req = *con_cls;
    if (req == NULL)
        return MHD_NO; /* no state for this connection (out of memory) */
    if (!req->started) {
        req->started = true;
        req->started_at = monotonic_seconds();
        phase_leave(req);
        req->server = server;
        req->connection = connection;
        req->method = method;
        req->is_head = strcmp(method, "HEAD") == 0;
        req->url = url;
        if (req->client[0] == '\0')
            client_address(connection, req->client, sizeof req->client);
        /* Framing first, before any handler: a request whose end is in doubt is refused
         * and its connection closed, so nothing after it can run as another request. */
        tg_refusal refusal;
        bool refused = framing_refused(req, version, &refusal);
        unsigned retry_after =
            tg_rate_limit_take(req->client, server->config.rate_limit, server->config.rate_burst);
        if (refused) {
            req->close_after = refusal.close;
            tg_respond_problem(req, refusal.reason, "%s", refusal.detail);
            return MHD_YES;
        }
        if (retry_after != 0) {
            respond_rate_limited(req, retry_after);
            return req->close_now ? MHD_NO : MHD_YES;
        }
        /* libmicrohttpd 0.9 closes the connection after a response queued at the headers
         * (it will not read past an unread body), so a request without a body is answered
         * on the next call instead, when the request is complete and the connection can be
         * kept alive. One that declares a body is still answered (and closed) now. */
        if (!declares_body(req))
            return MHD_YES;
        route_request(req, url);
        if (req->responded)
            return MHD_YES;
        const tg_route *route = req->route;
        if (route->body == TG_BODY_NONE) {
            if (route_authorized(req))
                route->handle(req);
        } else if (route->body == TG_BODY_JSON) {
            const char *length = tg_header(req, "Content-Length");
            uint64_t declared;
            if (length && tg_parse_u64(length, &declared) && declared > TG_JSON_BODY_MAX)
                tg_respond_problem(req, "payload_too_large", "a JSON body is limited to %d bytes",
                                   TG_JSON_BODY_MAX);
        } else if (route_authorized(req)) {
            route->start(req);
        }
        if (req->close_now)
            return MHD_NO;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t len = *upload_data_size;
        *upload_data_size = 0;
        req->bytes_in += len;
        __atomic_fetch_add(&server->metrics->traffic.bytes_in, len, __ATOMIC_RELAXED);
        if (req->route == NULL || req->responded)
            return req->close_now ? MHD_NO : MHD_YES;
        if (req->route->body == TG_BODY_JSON) {
            /* Bounded: past the limit the rest is dropped and the handler answers 413. */
            if (req->body_too_large || req->body_len + len > TG_JSON_BODY_MAX) {
                req->body_too_large = true;
                return MHD_YES;
            }
            char *grown = realloc(req->body, req->body_len + len + 1);
            if (grown == NULL)
                return MHD_NO;
            req->body = grown;
            memcpy(req->body + req->body_len, upload_data, len);
            req->body_len += len;
            req->body[req->body_len] = '\0';
        } else if (req->route->body == TG_BODY_STREAM) {
            req->in_upload_data = true;
            req->route->feed(req, (const uint8_t *)upload_data, len);
            req->in_upload_data = false;
            finish_truncated_body(req);
            if (req->close_now)
                return MHD_NO;
        }
        return MHD_YES;
    }
    if (!req->responded && req->route == NULL) {
        /* a request without a body, deferred from the first call */
        route_request(req, url);
        if (!req->responded && req->route->body == TG_BODY_STREAM && route_authorized(req))
            req->route->start(req);
    }
    if (!req->responded && req->route != NULL && route_authorized(req))
        req->route->handle(req);
    if (!req->responded)
        tg_respond_internal(req, "the handler gave no answer");
    return req->close_now ? MHD_NO : MHD_YES;
}

/* The raw request target, before libmicrohttpd decodes it or splits its query: the
 * connection's request state is reset here, so that what decoding hides (an encoded
 * NUL) and the target's size are known. Over TG_URI_MAX bytes or TG_QUERY_ARGS_MAX
 * arguments the query is cut off here, in libmicrohttpd's buffer (0.9.75 passes the
 * buffer that it then parses, and splits the arguments after this callback):
 * thousands of arguments would exhaust the connection's memory pool, and
 * libmicrohttpd would then end the request with no answer. The request is answered
 * 414 or 400 instead. The return value becomes the request's *con_cls. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *connection)
{
    tg_server *server = cls;
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    tg_request *req = info ? info->socket_context : NULL;
    if (req == NULL)
        return NULL;
    /* the head's clock keeps running from the accept or the previous request's end */
    double since = req->in_header_phase ? req->phase_since : 0;
    /* a request libmicrohttpd ended without the completion callback */
    end_request(server, req, MHD_REQUEST_TERMINATED_WITH_ERROR);
    /* the peer's address is the connection's: formatted once, kept across its requests */
    char client[sizeof req->client];
    memcpy(client, req->client, sizeof client);
    memset(req, 0, sizeof *req);
    memcpy(req->client, client, sizeof client);
    req->server = server;
    req->connection = connection;
    req->live = true;
    tg_target_inspect(uri, &req->target);
    req->url_has_nul = req->target.has_nul;
    if (req->target.length > TG_URI_MAX || req->target.query_args > TG_QUERY_ARGS_MAX) {
        char *query = strchr(uri, '?');
        if (query != NULL)
            query[1] = '\0';
    }
    phase_enter(req, since);
    return req;
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                         enum MHD_RequestTerminationCode code)
{
    (void)connection;
    tg_request *req = *con_cls;
    if (req != NULL) {
        end_request(cls, req, code);
        /* a kept-alive connection waits for its next head: the deadline applies again */
        if (code == MHD_REQUEST_TERMINATED_COMPLETED_OK)
            phase_enter(req, 0);
    }
    *con_cls = NULL;
}

/* The header deadline (--header-timeout): libmicrohttpd 0.9.75's timeout is an idle
 * timeout, so a client that sends one header byte every few seconds (slowloris) would
 * hold its connection for ever. Once a second the sweeper shuts down the socket of
 * every connection whose head has taken longer than the deadline; libmicrohttpd then
 * sees the end of the stream and closes it. A head already begun (its request line
 * read) is told why first with 408 request_timeout. The lock makes this safe:
 * libmicrohttpd calls on_connection(CLOSED), which takes the entry off the list under
 * the same lock, before it closes the descriptor. */
static void sweep_header_deadlines(tg_server *server)
{
    double now = monotonic_seconds();
    double limit = (double)server->config.header_timeout;
    pthread_mutex_lock(&phase_lock);
    for (tg_request *r = phase_head; r != NULL; r = r->phase_next) {
        if (r->header_deadline_hit || now - r->phase_since <= limit)
            continue;
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(r->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (info == NULL)
            continue;
        r->header_deadline_hit = true;
        const char *answer = server->metrics->timeout_answer;
        if (r->live && answer != NULL)
            (void)!send(info->connect_fd, answer, strlen(answer), MSG_DONTWAIT | MSG_NOSIGNAL);
        shutdown(info->connect_fd, SHUT_RDWR);
        __atomic_fetch_add(&server->metrics->header_timeouts, 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&phase_lock);
}

/* The 408 the sweeper writes, head and problem+json body, made once at start. */
static char *timeout_answer_text(void)
{
    json_t *problem = tg_problem_json(
        408, "request_timeout",
        "the request's head was not complete within the header timeout (--header-timeout)");
    char *body = problem ? json_dumps(problem, JSON_COMPACT) : NULL;
    json_decref(problem);
    if (body == NULL)
        return NULL;
    char *text = NULL;
    if (asprintf(&text,
                 "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/problem+json\r\n"
                 "Connection: close\r\nContent-Length: %zu\r\n\r\n%s\n",
                 strlen(body) + 1, body) < 0)
        text = NULL;
    free(body);
    return text;
}

static void *header_sweeper(void *arg)
{
    tg_server *server = arg;
    pthread_mutex_lock(&server->metrics->sweeper_lock);
    while (!server->metrics->sweeper_stop) {
        struct timespec wake;
        clock_gettime(CLOCK_REALTIME, &wake);
        wake.tv_sec += 1;
        pthread_cond_timedwait(&server->metrics->sweeper_wake, &server->metrics->sweeper_lock,
                               &wake);
        if (server->metrics->sweeper_stop)
            break;
        pthread_mutex_unlock(&server->metrics->sweeper_lock);
        sweep_header_deadlines(server);
        pthread_mutex_lock(&server->metrics->sweeper_lock);
    }
    pthread_mutex_unlock(&server->metrics->sweeper_lock);
    return NULL;
}

/* libmicrohttpd 0.9.75 refuses a Content-Length it cannot parse ("-1", "+80", "abc") or
 * that overflows by itself, before any callback of the request, and writes that
 * answer's head twice (the second becomes the body of the first). Its log message is
 * the only notice. It is written by the thread that serves the connection, while that
 * connection is the one of the thread's requests in the header phase whose header is
 * complete (its size is known only from then on). That request is answered here on
 * the socket (problem+json, Connection: close, write side shut): libmicrohttpd's own
 * answer then cannot be sent and the connection closes. When no single request fits,
 * nothing is done. */
/* True when the request's Content-Length is not digits that fit 64 bits: what
 * libmicrohttpd refused, checked again so that no other request is answered. */
static bool content_length_unparsable(tg_request *req)
{
    const char *value =
        MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, "Content-Length");
    if (value == NULL)
        return false;
    uint64_t n = 0;
    for (const char *p = value; *p != '\0'; p++)
        if (*p < '0' || *p > '9' || __builtin_mul_overflow(n, 10, &n) ||
            __builtin_add_overflow(n, (uint64_t)(*p - '0'), &n))
            return true;
    return value[0] == '\0';
}

static void refuse_from_log(tg_server *server, const char *reason, const char *detail)
{
    pthread_t self = pthread_self();
    tg_request *found = NULL;
    int candidates = 0;
    pthread_mutex_lock(&phase_lock);
    for (tg_request *r = phase_head; r != NULL; r = r->phase_next) {
        if (!pthread_equal(r->owner, self) ||
            MHD_get_connection_info(r->connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE) == NULL)
            continue;
        found = r;
        candidates++;
    }
    pthread_mutex_unlock(&phase_lock);
    if (candidates != 1 || found->responded || !content_length_unparsable(found))
        return;
    phase_leave(found);
    found->started = true; /* libmicrohttpd will not call on_request for it */
    client_address(found->connection, found->client, sizeof found->client);
    tg_rate_limit_take(found->client, server->config.rate_limit, server->config.rate_burst);
    found->in_upload_data = true; /* answer on the socket */
    tg_respond_problem(found, reason, "%s", detail);
    found->in_upload_data = false;
}

static void __attribute__((format(printf, 2, 0))) on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t len = strlen(line);
    while (len > 0 && line[len - 1] == '\n')
        line[--len] = '\0';
    tg_log(TG_LOG_DEBUG, "microhttpd: %s", line);
    /* the messages of libmicrohttpd 0.9.75's parse_connection_headers() */
    if (strncmp(line, "Failed to parse `Content-Length' header", 39) == 0)
        refuse_from_log(cls, "bad_content_length",
                        "Content-Length must be a decimal number of bytes");
    else if (strncmp(line, "Too large value of 'Content-Length' header", 42) == 0)
        refuse_from_log(cls, "payload_too_large", "Content-Length is larger than 2^64 - 1 bytes");
}

/* A row the router can run: a method, a pattern that can match (not too many or
 * unknown placeholders), the functions its body kind needs. */
static bool route_valid(const tg_route *route, char *why, size_t why_len)
{
    if (route->method == NULL || route->pattern == NULL) {
        snprintf(why, why_len, "a route needs a method and a pattern");
        return false;
    }
    if (!tg_pattern_valid(route->pattern, why, why_len))
        return false;
    if (route->handle == NULL ||
        (route->body == TG_BODY_STREAM && (route->start == NULL || route->feed == NULL))) {
        snprintf(why, why_len, "a route needs a handler (a stream route also start and feed)");
        return false;
    }
    if (route->auth > TG_AUTH_TOKEN) {
        snprintf(why, why_len, "a route needs a scope (tg_route_auth)");
        return false;
    }
    return true;
}

/* Why the daemon could not listen on address, in one sentence: a bind of our own
 * (SO_REUSEADDR, as libmicrohttpd binds: a port in TIME_WAIT is free, one another
 * process listens on is not) tells "in use" from "not an address of this host". The
 * daemon is started without SO_REUSEPORT, so a second server never shares a port. */
static void listen_failure(const tg_server *server, const struct addrinfo *address, char *err,
                           size_t err_len)
{
    const char *host = server->config.listen_host;
    unsigned port = server->config.listen_port;
    int fd = socket(address->ai_family, address->ai_socktype | SOCK_CLOEXEC, 0);
    int one = 1;
    int bind_errno = 0;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, address->ai_addr, address->ai_addrlen) != 0)
        bind_errno = errno;
    if (fd >= 0)
        close(fd);
    if (bind_errno == EADDRINUSE)
        snprintf(err, err_len,
                 "cannot listen on %s:%u: the port is in use (another server listens on "
                 "it); stop it or give --listen another port",
                 host, port);
    else if (bind_errno != 0)
        snprintf(err, err_len, "cannot listen on %s:%u: %s", host, port, strerror(bind_errno));
    else
        snprintf(err, err_len, "cannot listen on %s:%u (the HTTP daemon could not start)", host,
                 port);
}

/* tg_server.caches_owned: the caches tg_http_start made. */
enum { OWN_RESPONSES = 1, OWN_PARSED_HEADERS = 2, OWN_INDEXES = 4, OWN_HEADERS = 8 };

/* The caches of tg_server the caller left NULL, made from the config and owned:
 * 0, or -1 when out of memory. */
static int open_caches(tg_server *server)
{
    const tg_config *c = &server->config;
    if (c->response_cache_bytes > 0 && server->responses == NULL) {
        server->responses =
            tg_response_cache_create((size_t)c->response_cache_bytes, c->response_cache_ttl);
        server->caches_owned |= OWN_RESPONSES;
    }
    if (server->parsed_headers == NULL) {
        server->parsed_headers = tg_parsed_header_cache_create((size_t)c->header_cache_bytes,
                                                               TG_PARSED_HEADER_CACHE_ENTRIES);
        server->caches_owned |= OWN_PARSED_HEADERS;
    }
    if (server->indexes == NULL) {
        server->indexes = tg_index_cache_create(TG_INDEX_CACHE_BYTES, TG_INDEX_CACHE_ENTRIES);
        server->caches_owned |= OWN_INDEXES;
    }
    if (server->headers == NULL) {
        server->headers = tg_header_cache_create(TG_HEADER_CACHE_BYTES);
        server->caches_owned |= OWN_HEADERS;
    }
    return server->parsed_headers && server->indexes && server->headers ? 0 : -1;
}

/* Frees the caches open_caches made. */
static void close_caches(tg_server *server)
{
    if (server->caches_owned & OWN_RESPONSES) {
        tg_response_cache_destroy(server->responses);
        server->responses = NULL;
    }
    if (server->caches_owned & OWN_PARSED_HEADERS) {
        tg_parsed_header_cache_destroy(server->parsed_headers);
        server->parsed_headers = NULL;
    }
    if (server->caches_owned & OWN_INDEXES) {
        tg_index_cache_destroy(server->indexes);
        server->indexes = NULL;
    }
    if (server->caches_owned & OWN_HEADERS) {
        tg_header_cache_destroy(server->headers);
        server->headers = NULL;
    }
    server->caches_owned = 0;
}

int tg_http_start(tg_server *server, const tg_route *routes, size_t route_count, char *err,
                  size_t err_len)
{
    /* a row that cannot be run is a bug in the table */
    for (size_t i = 0; i < route_count; i++) {
        char why[128];
        if (!route_valid(&routes[i], why, sizeof why)) {
            snprintf(err, err_len, "route %s %s: %s", routes[i].method ? routes[i].method : "?",
                     routes[i].pattern ? routes[i].pattern : "?", why);
            return -1;
        }
    }
    server->routes = routes;
    server->route_count = route_count;
    server->patterns = calloc(route_count ? route_count : 1, sizeof *server->patterns);
    if (server->patterns == NULL) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < route_count; i++)
        tg_pattern_compile(routes[i].pattern, &server->patterns[i]);
    for (size_t i = route_count; i-- > 0;)
        server->patterns[i].next_group =
            i + 1 < route_count &&
                    tg_pattern_same_first(&server->patterns[i], &server->patterns[i + 1])
                ? server->patterns[i + 1].next_group
                : i + 1;
    server->metrics = calloc(1, sizeof *server->metrics);
    if (server->metrics == NULL) {
        free(server->patterns);
        server->patterns = NULL;
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    server->metrics->requests = calloc(metric_rows(route_count) * STATUS_SLOTS, sizeof(uint64_t));
    server->metrics->latency = calloc(metric_rows(route_count) * LATENCY_SLOTS, sizeof(uint64_t));
    if (server->metrics->requests == NULL || server->metrics->latency == NULL) {
        free(server->metrics->requests);
        free(server->metrics->latency);
        free(server->metrics);
        server->metrics = NULL;
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    pthread_mutex_init(&server->metrics->lock, NULL);
    server->traffic = &server->metrics->traffic;
    if (open_caches(server) != 0) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    server->downloads = tg_downloads_start(server->catalog, TG_DOWNLOADS_FLUSH_MS);
    if (server->downloads == NULL) {
        snprintf(err, err_len, "cannot start the download counter");
        return -1;
    }

    struct addrinfo hints = {0}, *resolved = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
    char port_text[8];
    snprintf(port_text, sizeof port_text, "%u", server->config.listen_port);
    int rc = getaddrinfo(server->config.listen_host, port_text, &hints, &resolved);
    if (rc != 0 || resolved == NULL) {
        snprintf(err, err_len, "cannot resolve listen address %s: %s", server->config.listen_host,
                 gai_strerror(rc));
        return -1;
    }
    /* poll(), level-triggered, rather than MHD_USE_EPOLL: 0.9.75's edge-triggered epoll
     * loses a client's FIN that arrives with its last data (see finish_truncated_body),
     * leaving the connection and its upload until the idle timeout. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
    if (resolved->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    server->daemon = MHD_start_daemon(
        flags, server->config.listen_port, NULL, NULL, on_request, server, MHD_OPTION_SOCK_ADDR,
        resolved->ai_addr, MHD_OPTION_THREAD_POOL_SIZE, server->config.threads,
        MHD_OPTION_CONNECTION_TIMEOUT, server->config.connection_timeout,
        MHD_OPTION_CONNECTION_LIMIT, server->config.connection_limit,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, server->config.per_ip_limit,
        /* Bounds what one connection may hold: request line + headers + read buffer.
         * libmicrohttpd 0.9.75 zeroes the whole pool between two requests of a
         * keep-alive connection (MHD_pool_reset): at 256 KiB that memset was 85% of
         * the instructions of a header GET (callgrind), so the pool is kept at
         * 64 KiB, still above the 32 KiB head limit (docs/PERFORMANCE.md). */
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)TG_CONNECTION_POOL, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, server, MHD_OPTION_URI_LOG_CALLBACK, on_uri, server,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, server, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log,
        server, MHD_OPTION_END);
    if (server->daemon == NULL)
        listen_failure(server, resolved, err, err_len);
    freeaddrinfo(resolved);
    if (server->daemon == NULL)
        return -1;
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(server->daemon, MHD_DAEMON_INFO_BIND_PORT);
    server->port = info ? info->port : server->config.listen_port;
    server->metrics->timeout_answer = timeout_answer_text();
    pthread_mutex_init(&server->metrics->sweeper_lock, NULL);
    pthread_cond_init(&server->metrics->sweeper_wake, NULL);
    if (pthread_create(&server->metrics->sweeper, NULL, header_sweeper, server) != 0) {
        snprintf(err, err_len, "cannot start the header-deadline thread");
        MHD_stop_daemon(server->daemon);
        server->daemon = NULL;
        return -1;
    }
    server->metrics->sweeper_running = true;
    return 0;
}

void tg_http_stop(tg_server *server)
{
    if (server->metrics && server->metrics->sweeper_running) {
        pthread_mutex_lock(&server->metrics->sweeper_lock);
        server->metrics->sweeper_stop = true;
        pthread_cond_signal(&server->metrics->sweeper_wake);
        pthread_mutex_unlock(&server->metrics->sweeper_lock);
        pthread_join(server->metrics->sweeper, NULL);
        server->metrics->sweeper_running = false;
    }
    if (server->daemon) {
        MHD_stop_daemon(server->daemon);
        server->daemon = NULL;
    }
    /* no request runs now: the last counts are written */
    tg_downloads_stop(server->downloads);
    server->downloads = NULL;
    close_caches(server);
    free(server->patterns);
    server->patterns = NULL;
    if (server->metrics) {
        free(server->metrics->timeout_answer);
        free(server->metrics->requests);
        free(server->metrics->latency);
        pthread_mutex_destroy(&server->metrics->lock);
        free(server->metrics);
        server->metrics = NULL;
        server->traffic = NULL;
    }
}
