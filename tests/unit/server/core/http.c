/* Unit tests for server/core/http.c: the router and the response functions, on an
 * in-process daemon (127.0.0.1, port 0) given a small table of test routes, driven
 * with libcurl. Covers the table handed at start (rows refused at start), path
 * split and pattern match ({placeholders}, {path*} over several segments, first
 * match wins), 404 not_found, 405 method_not_allowed with Allow, HEAD on GET routes,
 * parameters, the three body kinds (none, JSON bounded by TG_JSON_BODY_MAX, stream:
 * start, feed, finish, cleanup), the 500 of a handler that gives no answer, the
 * request counters of /metrics and problem+json with extra headers, as answered
 * through the responders of request.c (whose own unit test checks the problem body). */
#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http.h"
#include "test.h"

/* ---- the test routes ---- */

static int stream_cleanups; /* cleanup calls of the stream route (atomic) */

/* Answers 200 with the method, whether it was HEAD, and every parameter. */
static void echo_params(tg_request *req)
{
    json_t *body = json_object();
    json_t *params = json_object();
    if (body == NULL || params == NULL) {
        json_decref(body);
        json_decref(params);
        tg_respond_empty(req, 503);
        return;
    }
    for (int i = 0; i < TG_PARAMS_MAX; i++)
        if (req->param_names[i] != NULL)
            json_object_set_new(params, req->param_names[i], json_string(req->params[i]));
    json_object_set_new(body, "route", json_string(req->route->pattern));
    json_object_set_new(body, "method", json_string(req->method));
    json_object_set_new(body, "head", json_boolean(req->is_head));
    json_object_set_new(body, "params", params);
    tg_respond_json(req, 200, body);
}

static void answer_204(tg_request *req)
{
    tg_respond_empty(req, 204);
}

/* Gives no answer: the router answers 500 itself. */
static void silent(tg_request *req)
{
    (void)req;
}

/* A problem with extra headers (the pair whose value is NULL is left out), and 401
 * (which gets WWW-Authenticate). */
static void problem_headers(tg_request *req)
{
    const char *const headers[] = {"X-One", "1", "X-Skipped", NULL, "X-Two", "2", NULL};
    tg_respond_problem_headers(req, "model_exists", headers, "taken: %s", "yes");
}

/* 500 internal through its one function */
static void internal(tg_request *req)
{
    tg_respond_internal(req, "the %s failed (%d)", "disk", 5);
}

/* JSON with extra headers (Location; the NULL-valued pair left out). */
static void created(tg_request *req)
{
    const char *const headers[] = {"Location", "/t/items/7", "X-Skipped", NULL, NULL};
    tg_respond_json_headers(req, 201, json_pack("{s:i}", "id", 7), headers);
}

static void unauthorized(tg_request *req)
{
    tg_respond_problem(req, "unauthorized", "a token is needed");
}

/* ?limit= and ?cursor= through tg_list_params */
static void list(tg_request *req)
{
    unsigned limit = 0;
    char key[256];
    bool has_cursor = false;
    if (!tg_list_params(req, &limit, key, sizeof key, &has_cursor))
        return;
    tg_respond_json(req, 200, json_pack("{s:i}", "limit", (json_int_t)limit));
}

/* A JSON body: answers how many members it has; only "a" and "b" are known. */
static void json_route(tg_request *req)
{
    json_t *body = tg_json_body(req);
    if (body == NULL)
        return;
    static const char *const fields[] = {"a", "b", NULL};
    if (!tg_json_known_fields(req, body, fields)) {
        json_decref(body);
        return;
    }
    size_t members = json_object_size(body);
    json_decref(body);
    tg_respond_json(req, 200, json_pack("{s:i}", "members", (json_int_t)members));
}

/* A stream route: start refuses when X-Refuse is set, feed counts the bytes, the
 * finish answers the count and the declared size, cleanup frees the state. */
typedef struct stream_state {
    uint64_t bytes;
    unsigned feeds;
} stream_state;

static void stream_start(tg_request *req)
{
    if (tg_header(req, "X-Refuse") != NULL) {
        tg_respond_problem(req, "forbidden", "refused at the headers");
        return;
    }
    req->state = calloc(1, sizeof(stream_state));
    if (req->state == NULL)
        tg_respond_empty(req, 503);
}

static void stream_feed(tg_request *req, const uint8_t *data, size_t len)
{
    (void)data;
    stream_state *state = req->state;
    if (state == NULL)
        return;
    state->bytes += len;
    state->feeds++;
}

static void stream_finish(tg_request *req)
{
    stream_state *state = req->state;
    if (state == NULL) {
        tg_respond_empty(req, 503);
        return;
    }
    uint64_t declared = tg_request_body_size(req);
    tg_respond_json(req, 200,
                    json_pack("{s:I, s:b, s:I}", "bytes", (json_int_t)state->bytes, "chunked",
                              declared == ST_FILE_SIZE_UNKNOWN, "declared",
                              (json_int_t)(declared == ST_FILE_SIZE_UNKNOWN ? 0 : declared)));
}

static void stream_cleanup(tg_request *req)
{
    free(req->state);
    req->state = NULL;
    __atomic_fetch_add(&stream_cleanups, 1, __ATOMIC_SEQ_CST);
}

static const tg_route test_routes[] = {
    {"GET", "/t/ping", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, echo_params, NULL, NULL, NULL},
    {"GET", "/t/items/{id}", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, echo_params, NULL, NULL, NULL},
    {"DELETE", "/t/items/{id}", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, answer_204, NULL, NULL, NULL},
    {"GET", "/t/files/{org}/{name}/{path*}/header", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, echo_params,
     NULL, NULL, NULL},
    {"GET", "/t/files/{org}/{name}/{path*}", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, echo_params, NULL,
     NULL, NULL},
    {"POST", "/t/json", TG_BODY_JSON, TG_AUTH_PUBLIC, 0, json_route, NULL, NULL, NULL},
    {"PUT", "/t/stream/{name}", TG_BODY_STREAM, TG_AUTH_PUBLIC, 0, stream_finish, stream_start,
     stream_feed, stream_cleanup},
    {"GET", "/t/silent", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, silent, NULL, NULL, NULL},
    {"GET", "/t/problem", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, problem_headers, NULL, NULL, NULL},
    {"GET", "/t/unauthorized", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, unauthorized, NULL, NULL, NULL},
    {"POST", "/t/created", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, created, NULL, NULL, NULL},
    {"GET", "/t/internal", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, internal, NULL, NULL, NULL},
    {"GET", "/t/list", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, list, NULL, NULL, NULL},
    /* last: matches only what nothing above did (as the Hub routes of the real table) */
    {"GET", "/{org}/{name}/raw/{rev}/{path*}", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, echo_params, NULL,
     NULL, NULL},
};
#define TEST_ROUTE_COUNT (sizeof test_routes / sizeof test_routes[0])

static tg_server server;

/* ---- the client ---- */

typedef struct response {
    long status;
    char body[70000];
    size_t body_len;
    char headers[8192];
    size_t headers_len;
    json_t *json; /* the body parsed, when it is JSON */
} response;

static size_t take_body(char *data, size_t size, size_t count, void *ctx)
{
    response *r = ctx;
    size_t n = size * count;
    size_t room = sizeof r->body - 1 - r->body_len;
    size_t take = n < room ? n : room;
    memcpy(r->body + r->body_len, data, take);
    r->body_len += take;
    r->body[r->body_len] = '\0';
    return n;
}

static size_t take_header(char *data, size_t size, size_t count, void *ctx)
{
    response *r = ctx;
    size_t n = size * count;
    size_t room = sizeof r->headers - 1 - r->headers_len;
    size_t take = n < room ? n : room;
    memcpy(r->headers + r->headers_len, data, take);
    r->headers_len += take;
    r->headers[r->headers_len] = '\0';
    return n;
}

/* The value of a response header (case-insensitive name), or "" when absent. */
static const char *header_value(const response *r, const char *name, char *out, size_t out_len)
{
    out[0] = '\0';
    size_t name_len = strlen(name);
    for (const char *line = r->headers; *line != '\0';) {
        const char *end = strstr(line, "\r\n");
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > name_len && strncasecmp(line, name, name_len) == 0 && line[name_len] == ':') {
            const char *v = line + name_len + 1;
            while (*v == ' ')
                v++;
            size_t vlen = len - (size_t)(v - line);
            snprintf(out, out_len, "%.*s", (int)vlen, v);
        }
        if (end == NULL)
            break;
        line = end + 2;
    }
    return out;
}

/* One request: method, path (sent as is), optional body (chunked when chunked is
 * set: then body must be NUL-terminated), optional extra request header line. Fills r; the caller
 * frees r->json. */
static void request(const char *method, const char *path, const char *body, size_t body_len,
                    bool chunked, const char *extra_header, response *r)
{
    memset(r, 0, sizeof *r);
    CURL *curl = curl_easy_init();
    if (curl == NULL) {
        r->status = -1;
        return;
    }
    char url[32 * 1024];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", server.port, path);
    struct curl_slist *headers = NULL;
    if (extra_header != NULL)
        headers = curl_slist_append(headers, extra_header);
    if (body != NULL) {
        headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
        headers = curl_slist_append(headers, "Expect:");
        if (chunked)
            headers = curl_slist_append(headers, "Transfer-Encoding: chunked");
    }
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, take_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, take_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, r);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    else
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    if (body != NULL) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        if (!chunked)
            curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    if (headers != NULL)
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    CURLcode rc = curl_easy_perform(curl);
    if (rc == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r->status);
    else
        r->status = -1;
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    if (r->body_len > 0)
        r->json = json_loadb(r->body, r->body_len, 0, NULL);
}

static void get(const char *path, response *r)
{
    request("GET", path, NULL, 0, false, NULL, r);
}

static const char *json_str(json_t *object, const char *key)
{
    return json_string_value(json_object_get(object, key));
}

static const char *param_of(const response *r, const char *name)
{
    return json_str(json_object_get(r->json, "params"), name);
}

/* ---- tests ---- */

/* A row the router cannot run is refused at start, naming the row. */
TEST(start_refuses_bad_rows)
{
    static const tg_route unknown_placeholder[] = {
        {"GET", "/t/{bogus}", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, echo_params, NULL, NULL, NULL}};
    static const tg_route five_placeholders[] = {{"GET", "/{org}/{name}/{rev}/{alias}/{id}",
                                                  TG_BODY_NONE, TG_AUTH_PUBLIC, 0, echo_params,
                                                  NULL, NULL, NULL}};
    static const tg_route stream_without_feed[] = {{"PUT", "/t/s", TG_BODY_STREAM, TG_AUTH_PUBLIC,
                                                    0, stream_finish, stream_start, NULL, NULL}};
    static const tg_route no_handler[] = {
        {"GET", "/t/x", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, NULL, NULL, NULL, NULL}};
    static const tg_route no_pattern[] = {
        {"GET", NULL, TG_BODY_NONE, TG_AUTH_PUBLIC, 0, echo_params, NULL, NULL, NULL}};
    /* a scope outside tg_route_auth: a row the dispatcher could not authorize by */
    static const tg_route no_scope[] = {
        {"GET", "/t/y", TG_BODY_NONE, (tg_route_auth)99, 0, echo_params, NULL, NULL, NULL}};
    struct {
        const tg_route *row;
        const char *named;
    } cases[] = {
        {unknown_placeholder, "route GET /t/{bogus}"},
        {five_placeholders, "route GET /{org}/{name}/{rev}/{alias}/{id}"},
        {stream_without_feed, "route PUT /t/s"},
        {no_handler, "route GET /t/x"},
        {no_pattern, "route GET ?"},
        {no_scope, "route GET /t/y"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_server bad = {0};
        tg_config_defaults(&bad.config);
        bad.config.listen_port = 0;
        char err[256] = "";
        CHECK(tg_http_start(&bad, cases[i].row, 1, err, sizeof err) == -1);
        CHECK(strstr(err, cases[i].named) == err);
        CHECK(bad.daemon == NULL && bad.metrics == NULL);
    }
}

TEST(fixed_route)
{
    response r;
    get("/t/ping", &r);
    CHECK_EQ_U64(r.status, 200);
    CHECK_STR(json_str(r.json, "route"), "/t/ping");
    CHECK_STR(json_str(r.json, "method"), "GET");
    char value[256];
    CHECK_STR(header_value(&r, "Content-Type", value, sizeof value), "application/json");
    CHECK_STR(header_value(&r, "Cache-Control", value, sizeof value), "no-store");
    json_decref(r.json);
    /* a GET route answers HEAD: same status, no body */
    request("HEAD", "/t/ping", NULL, 0, false, NULL, &r);
    CHECK_EQ_U64(r.status, 200);
    CHECK_EQ_U64(r.body_len, 0);
    json_decref(r.json);
}

TEST(params)
{
    response r;
    get("/t/items/42", &r);
    CHECK_EQ_U64(r.status, 200);
    CHECK_STR(json_str(r.json, "route"), "/t/items/{id}");
    CHECK_STR(param_of(&r, "id"), "42");
    json_decref(r.json);
    /* percent-decoded */
    get("/t/items/a%20b", &r);
    CHECK_STR(param_of(&r, "id"), "a b");
    json_decref(r.json);
    /* {path*} takes one or more segments; the more specific row listed first wins */
    get("/t/files/acme/m/a/b/c.bin", &r);
    CHECK_STR(json_str(r.json, "route"), "/t/files/{org}/{name}/{path*}");
    CHECK_STR(param_of(&r, "org"), "acme");
    CHECK_STR(param_of(&r, "name"), "m");
    CHECK_STR(param_of(&r, "path"), "a/b/c.bin");
    json_decref(r.json);
    get("/t/files/acme/m/a/b/header", &r);
    CHECK_STR(json_str(r.json, "route"), "/t/files/{org}/{name}/{path*}/header");
    CHECK_STR(param_of(&r, "path"), "a/b");
    json_decref(r.json);
    get("/t/files/acme/m/x", &r);
    CHECK_STR(param_of(&r, "path"), "x");
    json_decref(r.json);
    /* "header" alone is a path: {path*} needs at least one segment before /header */
    get("/t/files/acme/m/header", &r);
    CHECK_STR(json_str(r.json, "route"), "/t/files/{org}/{name}/{path*}");
    CHECK_STR(param_of(&r, "path"), "header");
    json_decref(r.json);
    /* the catch-all pattern, last, gets what nothing else matched; four parameters */
    get("/acme/m/raw/main/dir/w.bin", &r);
    CHECK_EQ_U64(r.status, 200);
    CHECK_STR(json_str(r.json, "route"), "/{org}/{name}/raw/{rev}/{path*}");
    CHECK_STR(param_of(&r, "org"), "acme");
    CHECK_STR(param_of(&r, "name"), "m");
    CHECK_STR(param_of(&r, "rev"), "main");
    CHECK_STR(param_of(&r, "path"), "dir/w.bin");
    json_decref(r.json);
    /* a path with t/ first is matched against the catch-all too */
    get("/t/ping/raw/main/x", &r);
    CHECK_STR(json_str(r.json, "route"), "/{org}/{name}/raw/{rev}/{path*}");
    CHECK_STR(param_of(&r, "org"), "t");
    json_decref(r.json);
}

static void check_not_found(const char *path)
{
    response r;
    get(path, &r);
    CHECK_EQ_U64(r.status, 404);
    CHECK_STR(json_str(r.json, "reason"), "not_found");
    char value[256];
    CHECK_STR(header_value(&r, "Content-Type", value, sizeof value), "application/problem+json");
    json_decref(r.json);
}

TEST(not_found)
{
    check_not_found("/nope");
    check_not_found("/");
    check_not_found("/t");
    check_not_found("/t/items");         /* a prefix of a pattern */
    check_not_found("/t/items/1/2");     /* longer than {id} */
    check_not_found("/t/items//");       /* an empty {id} */
    check_not_found("/t/files/acme/m");  /* {path*} needs one segment */
    check_not_found("/acme/m/raw/main"); /* and here too */
    check_not_found("/t/pingx");         /* a literal segment matches whole */
    /* more segments than the router splits */
    char deep[2000] = "";
    for (int i = 0; i < TG_SEGMENTS_MAX + 2; i++)
        strcat(deep, "/a");
    check_not_found(deep);
}

TEST(method_not_allowed)
{
    response r;
    request("POST", "/t/items/1", "{}", 2, false, NULL, &r);
    CHECK_EQ_U64(r.status, 405);
    CHECK_STR(json_str(r.json, "reason"), "method_not_allowed");
    char value[256];
    CHECK_STR(header_value(&r, "Allow", value, sizeof value), "GET, HEAD, DELETE");
    CHECK(strstr(json_str(r.json, "detail"), "POST is not allowed here") != NULL);
    json_decref(r.json);
    request("DELETE", "/t/items/1", NULL, 0, false, NULL, &r);
    CHECK_EQ_U64(r.status, 204);
    json_decref(r.json);
    /* HEAD of a route that has no GET */
    request("HEAD", "/t/json", NULL, 0, false, NULL, &r);
    CHECK_EQ_U64(r.status, 405);
    CHECK_STR(header_value(&r, "Allow", value, sizeof value), "POST");
    json_decref(r.json);
    request("PATCH", "/t/ping", NULL, 0, false, NULL, &r);
    CHECK_EQ_U64(r.status, 405);
    CHECK_STR(header_value(&r, "Allow", value, sizeof value), "GET, HEAD");
    json_decref(r.json);
    /* a method no route has, on no route, is 404 */
    request("PATCH", "/nope", NULL, 0, false, NULL, &r);
    CHECK_EQ_U64(r.status, 404);
    json_decref(r.json);
}

/* What the router refuses before matching: %00, an over-long target, too many
 * query arguments. */
TEST(refused_targets)
{
    response r;
    get("/t/items/a%00b", &r);
    CHECK_EQ_U64(r.status, 400);
    CHECK_STR(json_str(r.json, "reason"), "invalid_request");
    json_decref(r.json);
    static char path[TG_URI_MAX + 64];
    snprintf(path, sizeof path, "/t/ping?x=");
    size_t used = strlen(path);
    memset(path + used, 'a', TG_URI_MAX);
    path[used + TG_URI_MAX] = '\0';
    get(path, &r);
    CHECK_EQ_U64(r.status, 414);
    CHECK_STR(json_str(r.json, "reason"), "uri_too_long");
    json_decref(r.json);
    snprintf(path, sizeof path, "/t/ping?");
    for (int i = 0; i <= TG_QUERY_ARGS_MAX; i++) {
        used = strlen(path);
        snprintf(path + used, sizeof path - used, "%sa%d=1", i ? "&" : "", i);
    }
    get(path, &r);
    CHECK_EQ_U64(r.status, 400);
    CHECK_STR(json_str(r.json, "reason"), "too_many_query_arguments");
    json_decref(r.json);
}

TEST(no_answer_is_500)
{
    response r;
    get("/t/silent", &r);
    CHECK_EQ_U64(r.status, 500);
    CHECK_STR(json_str(r.json, "reason"), "internal");
    CHECK_STR(json_str(r.json, "detail"), "the handler gave no answer");
    CHECK_STR(json_str(r.json, "title"), "Internal Server Error");
    json_decref(r.json);
    get("/t/internal", &r);
    CHECK_EQ_U64(r.status, 500);
    CHECK_STR(json_str(r.json, "reason"), "internal");
    CHECK_STR(json_str(r.json, "type"), "https://tensorgate.dev/problems/internal");
    CHECK_STR(json_str(r.json, "detail"), "the disk failed (5)");
    CHECK_EQ_U64(json_integer_value(json_object_get(r.json, "status")), 500);
    json_decref(r.json);
}

TEST(json_body)
{
    response r;
    const char *body = "{\"a\":1,\"b\":[2]}";
    request("POST", "/t/json", body, strlen(body), false, NULL, &r);
    CHECK_EQ_U64(r.status, 200);
    CHECK_EQ_U64(json_integer_value(json_object_get(r.json, "members")), 2);
    json_decref(r.json);
    request("POST", "/t/json", "", 0, false, NULL, &r); /* empty: {} */
    CHECK_EQ_U64(r.status, 200);
    CHECK_EQ_U64(json_integer_value(json_object_get(r.json, "members")), 0);
    json_decref(r.json);
    request("POST", "/t/json", "{\"c\":1}", 7, false, NULL, &r);
    CHECK_EQ_U64(r.status, 400);
    CHECK_STR(json_str(r.json, "reason"), "invalid_request");
    json_decref(r.json);
    request("POST", "/t/json", "[1]", 3, false, NULL, &r);
    CHECK_EQ_U64(r.status, 400);
    CHECK_STR(json_str(r.json, "reason"), "invalid_json");
    json_decref(r.json);
    /* over TG_JSON_BODY_MAX: refused at the headers (Content-Length) or, chunked, once
     * the body passed the bound */
    static char big[TG_JSON_BODY_MAX + 2];
    memset(big, ' ', sizeof big - 1);
    request("POST", "/t/json", big, sizeof big - 1, false, NULL, &r);
    CHECK_EQ_U64(r.status, 413);
    CHECK_STR(json_str(r.json, "reason"), "payload_too_large");
    json_decref(r.json);
    request("POST", "/t/json", big, sizeof big - 1, true, NULL, &r);
    CHECK_EQ_U64(r.status, 413);
    CHECK_STR(json_str(r.json, "reason"), "payload_too_large");
    json_decref(r.json);
}

static void wait_cleanups(int expected)
{
    for (int i = 0; i < 200 && __atomic_load_n(&stream_cleanups, __ATOMIC_SEQ_CST) < expected; i++)
        usleep(10 * 1000);
    CHECK_EQ_U64(__atomic_load_n(&stream_cleanups, __ATOMIC_SEQ_CST), expected);
}

TEST(stream_body)
{
    static char body[300001]; /* NUL-terminated: a chunked body is sent up to the NUL */
    memset(body, 'x', sizeof body - 1);
    int cleanups = __atomic_load_n(&stream_cleanups, __ATOMIC_SEQ_CST);
    response r;
    request("PUT", "/t/stream/s", body, sizeof body - 1, false, NULL, &r);
    CHECK_EQ_U64(r.status, 200);
    CHECK_EQ_U64(json_integer_value(json_object_get(r.json, "bytes")), sizeof body - 1);
    CHECK_EQ_U64(json_integer_value(json_object_get(r.json, "declared")), sizeof body - 1);
    CHECK(json_is_false(json_object_get(r.json, "chunked")));
    json_decref(r.json);
    wait_cleanups(cleanups + 1);
    request("PUT", "/t/stream/s", body, sizeof body - 1, true, NULL, &r);
    CHECK_EQ_U64(r.status, 200);
    CHECK_EQ_U64(json_integer_value(json_object_get(r.json, "bytes")), sizeof body - 1);
    CHECK(json_is_true(json_object_get(r.json, "chunked")));
    json_decref(r.json);
    wait_cleanups(cleanups + 2);
    /* no body at all: start and the finish still run */
    request("PUT", "/t/stream/s", NULL, 0, false, "Content-Length: 0", &r);
    CHECK_EQ_U64(r.status, 200);
    CHECK_EQ_U64(json_integer_value(json_object_get(r.json, "bytes")), 0);
    json_decref(r.json);
    wait_cleanups(cleanups + 3);
    /* start answers: the body is not read and cleanup still runs */
    request("PUT", "/t/stream/s", body, 1000, false, "X-Refuse: 1", &r);
    CHECK_EQ_U64(r.status, 403);
    CHECK_STR(json_str(r.json, "reason"), "forbidden");
    json_decref(r.json);
    wait_cleanups(cleanups + 4);
}

TEST(problems)
{
    response r;
    char value[256];
    get("/t/problem", &r);
    CHECK_EQ_U64(r.status, 409);
    CHECK_STR(header_value(&r, "X-One", value, sizeof value), "1");
    CHECK_STR(header_value(&r, "X-Two", value, sizeof value), "2");
    CHECK_STR(header_value(&r, "X-Skipped", value, sizeof value), "");
    CHECK_STR(header_value(&r, "Content-Type", value, sizeof value), "application/problem+json");
    CHECK_STR(json_str(r.json, "type"), "https://tensorgate.dev/problems/model_exists");
    CHECK_STR(json_str(r.json, "title"), "Conflict");
    CHECK_EQ_U64(json_integer_value(json_object_get(r.json, "status")), 409);
    CHECK_STR(json_str(r.json, "detail"), "taken: yes");
    json_decref(r.json);
    request("POST", "/t/created", NULL, 0, false, NULL, &r);
    CHECK_EQ_U64(r.status, 201);
    CHECK_STR(header_value(&r, "Location", value, sizeof value), "/t/items/7");
    CHECK_STR(header_value(&r, "X-Skipped", value, sizeof value), "");
    CHECK_STR(header_value(&r, "Content-Type", value, sizeof value), "application/json");
    CHECK_EQ_U64(json_integer_value(json_object_get(r.json, "id")), 7);
    json_decref(r.json);
    get("/t/unauthorized", &r);
    CHECK_EQ_U64(r.status, 401);
    CHECK_STR(header_value(&r, "WWW-Authenticate", value, sizeof value),
              "Bearer realm=\"tensorgate\"");
    json_decref(r.json);
    get("/t/list?limit=0", &r);
    CHECK_EQ_U64(r.status, 400);
    CHECK_STR(json_str(r.json, "detail"), "limit must be an integer from 1 to 1000");
    json_decref(r.json);
    get("/t/list?limit=7", &r);
    CHECK_EQ_U64(json_integer_value(json_object_get(r.json, "limit")), 7);
    json_decref(r.json);
    get("/t/list?cursor=zz", &r);
    CHECK_EQ_U64(r.status, 400);
    CHECK_STR(json_str(r.json, "detail"), "the cursor is not one this server issued");
    json_decref(r.json);
}

/* /metrics counts requests by the table's rows (method and pattern) and status, a
 * HEAD as HEAD, with a latency histogram per row; the unmatched ones on their own line. */
TEST(metrics)
{
    char *text = tg_metrics_render(&server);
    CHECK(text != NULL);
    if (text == NULL)
        return;
    /* the GET and the HEAD, each as itself */
    CHECK(strstr(text, "tensorgate_requests_total{method=\"GET\",route=\"/t/ping\",status=\"200\"} "
                       "1\n") != NULL);
    CHECK(strstr(text,
                 "tensorgate_requests_total{method=\"HEAD\",route=\"/t/ping\",status=\"200\"} "
                 "1\n") != NULL);
    CHECK(strstr(text,
                 "tensorgate_request_duration_seconds_count{method=\"HEAD\",route=\"/t/ping\"} "
                 "1\n") != NULL);
    CHECK(strstr(text,
                 "tensorgate_request_duration_seconds_bucket{method=\"GET\",route=\"/t/ping\","
                 "le=\"+Inf\"} 1\n") != NULL);
    CHECK(strstr(text, "tensorgate_requests_total{method=\"DELETE\",route=\"/t/items/{id}\","
                       "status=\"204\"} 1\n") != NULL);
    CHECK(strstr(text, "tensorgate_requests_total{method=\"GET\",route=\"/t/silent\","
                       "status=\"500\"} 1\n") != NULL);
    CHECK(
        strstr(text, "tensorgate_requests_total{method=\"\",route=\"unmatched\",status=\"404\"}") !=
        NULL);
    CHECK(strstr(text, "tensorgate_bytes_in_total ") != NULL);
    free(text);
}

int main(int argc, char **argv)
{
    (void)argc;
    signal(SIGPIPE, SIG_IGN);
    alarm(120); /* a hung request fails the program */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        fprintf(stderr, "curl_global_init failed\n");
        return 1;
    }
    RUN(start_refuses_bad_rows);

    tg_config_defaults(&server.config);
    server.config.listen_port = 0;
    server.config.threads = 2;
    server.config.rate_limit = 0;
    char err[256];
    if (tg_http_start(&server, test_routes, TEST_ROUTE_COUNT, err, sizeof err) != 0) {
        fprintf(stderr, "tg_http_start: %s\n", err);
        return 1;
    }
    CHECK(server.port != 0);
    CHECK(server.routes == test_routes && server.route_count == TEST_ROUTE_COUNT);
    RUN(fixed_route);
    RUN(params);
    RUN(not_found);
    RUN(method_not_allowed);
    RUN(refused_targets);
    RUN(no_answer_is_500);
    RUN(json_body);
    RUN(stream_body);
    RUN(problems);
    RUN(metrics);
    tg_http_stop(&server);
    CHECK(server.daemon == NULL && server.metrics == NULL);
    curl_global_cleanup();
    return test_report(argv[0]);
}
