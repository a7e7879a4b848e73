/* /healthz, /readyz, /metrics, /openapi.yaml, /v1/rejections */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "catalog.h"
#include "checks.h"
#include "embedded.h"
#include "log.h"
#include "preload_service.h"
#include "public_url.h"
#include "reasons.h"
#include "resources.h"
#include "routes.h"

void tg_route_healthz(tg_request *req)
{
    tg_respond_json(req, 200, json_pack("{s:s}", "status", "ok"));
}

void tg_route_readyz(tg_request *req)
{
    tg_server *server = req->server;
    bool catalog_ok = tg_catalog_ping(server->catalog) == TG_CAT_OK;
    uint64_t free_bytes = 0;
    bool store_ok = tg_blobstore_space(server->blobs, &free_bytes) == 0;
    json_t *body = json_pack("{s:s, s:s, s:s, s:i}", "status",
                             (catalog_ok && store_ok) ? "ready" : "not_ready", "catalog",
                             catalog_ok ? "ok" : "error", "store", store_ok ? "ok" : "error",
                             "schema_version", tg_catalog_schema_version(server->catalog));
    if (store_ok && free_bytes != UINT64_MAX && body)
        json_object_set_new(body, "store_free_bytes", json_integer((json_int_t)free_bytes));
    if (body) /* which blob store ("file", "s3"), and why not ready */
        json_object_set_new(body, "blob_store", json_string(tg_blobstore_kind(server->blobs)));
    if (body) /* which catalog ("sqlite", "postgresql") */
        json_object_set_new(body, "catalog_backend", json_string(tg_catalog_kind(server->catalog)));
    if (!store_ok && body)
        json_object_set_new(body, "reason", json_string("blob_store_unavailable"));
    if (!catalog_ok && body) /* the catalog first: without it nothing is served */
        json_object_set_new(body, "reason", json_string("catalog_unavailable"));
    /* "gpu" and "preload"; an absent GPU leaves the server ready */
    tg_preload_service_readyz(req->server->preloads, body);
    tg_respond_json(req, (catalog_ok && store_ok) ? 200 : 503, body);
}

/* Appends the conversion jobs by state (from the catalog) to a /metrics text
 * (realloc'd; NULL stays NULL, and a failure frees it). A catalog that cannot
 * count leaves the lines out. */
static char *jobs_metrics_append(tg_catalog *catalog, char *text)
{
    uint64_t counts[TG_JOB_STATES];
    if (text == NULL || tg_catalog_job_counts(catalog, counts) != TG_CAT_OK)
        return text;
    char lines[512];
    int n = snprintf(lines, sizeof lines,
                     "# HELP tensorgate_jobs Conversion jobs by state (the catalog's).\n"
                     "# TYPE tensorgate_jobs gauge\n");
    for (int i = 0; i < TG_JOB_STATES && n > 0 && (size_t)n < sizeof lines; i++)
        n += snprintf(lines + n, sizeof lines - (size_t)n, "tensorgate_jobs{state=\"%s\"} %llu\n",
                      tg_job_state_name((tg_job_state)i), (unsigned long long)counts[i]);
    if (n < 0 || (size_t)n >= sizeof lines)
        return text;
    size_t len = strlen(text);
    char *grown = realloc(text, len + (size_t)n + 1);
    if (grown == NULL) {
        free(text);
        return NULL;
    }
    memcpy(grown + len, lines, (size_t)n + 1);
    return grown;
}

/* Appends the blob store's read cache counters (S3 with --cache-dir). */
static char *cache_metrics_append(tg_blobstore *blobs, char *text)
{
    uint64_t hits = 0, misses = 0;
    if (text == NULL)
        return NULL;
    tg_blobstore_cache_counts(blobs, &hits, &misses);
    char lines[400];
    int n = snprintf(lines, sizeof lines,
                     "# HELP tensorgate_blob_cache_hits_total Blob reads served by the local "
                     "read cache.\n# TYPE tensorgate_blob_cache_hits_total counter\n"
                     "tensorgate_blob_cache_hits_total %llu\n"
                     "# HELP tensorgate_blob_cache_misses_total Blob reads the cache sent to the "
                     "store.\n# TYPE tensorgate_blob_cache_misses_total counter\n"
                     "tensorgate_blob_cache_misses_total %llu\n",
                     (unsigned long long)hits, (unsigned long long)misses);
    if (n < 0 || (size_t)n >= sizeof lines)
        return text;
    size_t len = strlen(text);
    char *grown = realloc(text, len + (size_t)n + 1);
    if (grown == NULL) {
        free(text);
        return NULL;
    }
    memcpy(grown + len, lines, (size_t)n + 1);
    return grown;
}

void tg_route_metrics(tg_request *req)
{
    char *text = cache_metrics_append(
        req->server->blobs,
        jobs_metrics_append(req->server->catalog,
                            tg_resources_metrics_append(tg_preload_service_metrics_append(
                                req->server->preloads, tg_metrics_render(req->server)))));
    if (text == NULL) {
        tg_respond_internal(req, "out of memory");
        return;
    }
    size_t len = strlen(text);
    struct MHD_Response *response =
        MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (response)
        MHD_add_response_header(response, "Content-Type",
                                "text/plain; version=0.0.4; charset=utf-8");
    else
        free(text);
    tg_respond(req, 200, response, len);
}

void tg_route_openapi(tg_request *req)
{
    struct MHD_Response *response = MHD_create_response_from_buffer(
        tg_openapi_yaml_len, (void *)(uintptr_t)tg_openapi_yaml, MHD_RESPMEM_PERSISTENT);
    if (response)
        MHD_add_response_header(response, "Content-Type", "application/yaml");
    tg_respond(req, 200, response, tg_openapi_yaml_len);
}

/* GET /v1/reasons: every reason code a problem answer can carry, with its status:
 * the service's (the reason table, reasons.h) and the gate's (lib/st_error.h;
 * out_of_memory is answered as the service's internal_error, so it is not listed). */
void tg_route_reasons(tg_request *req)
{
    json_t *list = json_array();
    size_t count = 0;
    const tg_reason *service = tg_reasons(&count);
    for (size_t i = 0; list != NULL && i < count; i++)
        json_array_append_new(list,
                              json_pack("{s:s, s:i, s:s}", "reason", service[i].name, "status",
                                        (int)service[i].status, "source", "service"));
    for (int r = ST_OK + 1; list != NULL && r < ST_REASON_COUNT; r++) {
        if (r == ST_OUT_OF_MEMORY)
            continue;
        json_array_append_new(
            list, json_pack("{s:s, s:i, s:s}", "reason", st_reason_name((st_reason)r), "status",
                            (int)tg_gate_reason_status((st_reason)r), "source", "gate"));
    }
    tg_respond_json(req, 200, list ? json_pack("{s:o}", "reasons", list) : NULL);
}

/* ---- GET /v1/rejections ---- */

/* A page of the JSON answer: 1..REJECTIONS_LIMIT_MAX records, REJECTIONS_LIMIT_DEFAULT
 * when not asked; the JSON-lines export reads the catalog REJECTIONS_EXPORT_PAGE
 * records at a time (a record is at most ~5 KiB: findings included). */
#define REJECTIONS_LIMIT_DEFAULT 100
#define REJECTIONS_LIMIT_MAX 1000
#define REJECTIONS_EXPORT_PAGE 100

static json_t *text_or_null(const char *text)
{
    return text[0] ? json_string(text) : json_null();
}

static json_t *id_or_null(int64_t id)
{
    return id > 0 ? json_integer((json_int_t)id) : json_null();
}

/* One record as the API shows it (openapi.yaml: Rejection). */
static json_t *rejection_json(const tg_rejection *r)
{
    json_t *item = json_pack("{s:I, s:s, s:s, s:I}", "id", (json_int_t)r->id, "time", r->time,
                             "reason", r->reason, "size", (json_int_t)r->size);
    if (item == NULL)
        return NULL;
    json_object_set_new(item, "sha256", text_or_null(r->sha256));
    json_object_set_new(item, "namespace", text_or_null(r->namespace_name));
    json_object_set_new(item, "model", text_or_null(r->model));
    json_object_set_new(item, "version", r->version >= 0 ? json_integer(r->version) : json_null());
    json_object_set_new(item, "path", text_or_null(r->path));
    json_object_set_new(item, "format", text_or_null(r->format));
    json_object_set_new(item, "detail", text_or_null(r->detail));
    json_object_set_new(item, "client", text_or_null(r->client));
    json_object_set_new(item, "token_id", id_or_null(r->token_id));
    json_object_set_new(item, "route", text_or_null(r->route));
    json_object_set_new(item, "job_id", id_or_null(r->job_id));
    /* refused, or admitted_by_policy: code a namespace's policy let in (schema 10) */
    json_object_set_new(item, "outcome", json_string(r->outcome[0] ? r->outcome : "refused"));
    /* a refused pickle's findings, kept as JSON text; [] when none (or unreadable) */
    json_t *findings = r->findings[0] ? json_loads(r->findings, 0, NULL) : NULL;
    json_object_set_new(item, "findings", json_is_array(findings) ? findings : json_array());
    if (findings != NULL && !json_is_array(findings))
        json_decref(findings);
    return item;
}

/* The filters of one request, checked and normalized; filter points into them. */
typedef struct rejection_query {
    tg_rejection_filter filter;
    char reason[48];
    char namespace_name[TG_NAME_MAX + 1];
    char since[TG_UTC_TEXT_LEN];
    char until[TG_UTC_TEXT_LEN];
    char sha256[65];
    unsigned limit;
    bool limit_given;
    bool jsonl;
} rejection_query;

static bool reason_text(const char *text)
{
    size_t len = strlen(text);
    if (len == 0 || len >= 48)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!((text[i] >= 'a' && text[i] <= 'z') || (text[i] >= '0' && text[i] <= '9') ||
              text[i] == '_'))
            return false;
    return true;
}

/* Whether the client asked for JSON lines: ?format=jsonl, or an Accept naming
 * application/x-ndjson (?format=json wins over Accept). */
static bool wants_jsonl(tg_request *req, const char *format, bool *ok)
{
    *ok = true;
    if (format != NULL) {
        if (strcmp(format, "jsonl") == 0)
            return true;
        if (strcmp(format, "json") == 0)
            return false;
        tg_respond_problem(req, "invalid_format",
                           "format must be \"json\" or \"jsonl\", not \"%.32s\"", format);
        *ok = false;
        return false;
    }
    const char *accept = tg_header(req, "Accept");
    return accept != NULL && strcasestr(accept, "application/x-ndjson") != NULL;
}

/* Reads and checks the query; answers 400 (or 403) and returns false on a bad one. */
static bool rejection_query_parse(tg_request *req, rejection_query *q)
{
    static const char *const names[] = {"reason", "namespace", "since",  "until", "sha256",
                                        "limit",  "cursor",    "format", NULL};
    memset(q, 0, sizeof *q);
    if (!tg_query_known(req, names))
        return false;
    const char *reason = tg_query(req, "reason");
    if (reason != NULL) {
        if (!reason_text(reason)) {
            tg_respond_problem(req, "invalid_filter",
                               "reason must be a reason code ([a-z0-9_], 1 to 47 characters)");
            return false;
        }
        snprintf(q->reason, sizeof q->reason, "%s", reason);
        q->filter.reason = q->reason;
    }
    const char *ns = tg_query(req, "namespace");
    if (ns != NULL && !tg_valid_name_part(ns)) {
        tg_respond_problem(req, "invalid_filter", "namespace must be an org name");
        return false;
    }
    /* a namespace-limited admin token lists its own namespace only */
    if (req->token_namespace[0] != '\0' && ns != NULL && strcmp(ns, req->token_namespace) != 0) {
        tg_respond_problem(req, "forbidden", "the token is limited to the namespace '%s'",
                           req->token_namespace);
        return false;
    }
    if (req->token_namespace[0] != '\0')
        ns = req->token_namespace;
    if (ns != NULL) {
        snprintf(q->namespace_name, sizeof q->namespace_name, "%s", ns);
        q->filter.namespace_name = q->namespace_name;
    }
    const char *since = tg_query(req, "since"), *until = tg_query(req, "until");
    if (since != NULL && !tg_rfc3339_utc(since, q->since, sizeof q->since)) {
        tg_respond_problem(req, "invalid_time",
                           "since must be an RFC 3339 date-time such as 2026-05-01T00:00:00Z");
        return false;
    }
    if (until != NULL && !tg_rfc3339_utc(until, q->until, sizeof q->until)) {
        tg_respond_problem(req, "invalid_time",
                           "until must be an RFC 3339 date-time such as 2026-05-01T00:00:00Z");
        return false;
    }
    if (since != NULL && until != NULL && strcmp(q->since, q->until) > 0) {
        tg_respond_problem(req, "invalid_time", "since (%s) is after until (%s)", q->since,
                           q->until);
        return false;
    }
    q->filter.since = since != NULL ? q->since : NULL;
    q->filter.until = until != NULL ? q->until : NULL;
    const char *sha256 = tg_query(req, "sha256");
    if (sha256 != NULL) {
        if (!tg_sha256_text_lower(sha256, q->sha256, sizeof q->sha256)) {
            tg_respond_problem(req, "invalid_sha256", "sha256 must be 64 hex digits");
            return false;
        }
        q->filter.sha256 = q->sha256;
    }
    const char *limit = tg_query(req, "limit");
    uint64_t value = REJECTIONS_LIMIT_DEFAULT;
    if (limit != NULL &&
        (!tg_parse_u64(limit, &value) || value < 1 || value > REJECTIONS_LIMIT_MAX)) {
        tg_respond_problem(req, "invalid_limit", "limit must be an integer from 1 to %u",
                           REJECTIONS_LIMIT_MAX);
        return false;
    }
    q->limit = (unsigned)value;
    q->limit_given = limit != NULL;
    const char *cursor = tg_query(req, "cursor");
    if (cursor != NULL) {
        char key[32];
        uint64_t before = 0;
        if (tg_cursor_decode(cursor, key, sizeof key) != 0 || !tg_parse_u64(key, &before) ||
            before == 0 || before > INT64_MAX) {
            tg_respond_problem(req, "invalid_cursor", "the cursor is not one this server issued");
            return false;
        }
        q->filter.before_id = (int64_t)before;
    }
    bool ok;
    q->jsonl = wants_jsonl(req, tg_query(req, "format"), &ok);
    return ok;
}

/* ---- the JSON answer: one page, its next cursor and Link ---- */

typedef struct rejection_page {
    json_t *items;
    unsigned count;
    int64_t last_id;
    bool failed; /* out of memory: a record is missing, so the page is not answered */
} rejection_page;

static void add_rejection(void *ctx, const tg_rejection *r)
{
    rejection_page *page = ctx;
    json_t *item = rejection_json(r);
    if (item == NULL || json_array_append_new(page->items, item) != 0) {
        page->failed = true;
        return;
    }
    page->count++;
    page->last_id = r->id;
}

/* The Link to the next page: these filters (normalized) from cursor on. */
static void next_link(tg_request *req, const rejection_query *q, const char *cursor, char *out,
                      size_t cap)
{
    char origin[TG_PUBLIC_URL_MAX];
    tg_request_origin(req, origin, sizeof origin);
    char query[512];
    int n = snprintf(query, sizeof query, "limit=%u&cursor=%s", q->limit, cursor);
    const struct {
        const char *name, *value;
    } args[] = {{"reason", q->filter.reason},
                {"namespace", tg_query(req, "namespace") ? q->namespace_name : NULL},
                {"since", q->filter.since},
                {"until", q->filter.until},
                {"sha256", q->filter.sha256}};
    for (size_t i = 0; i < sizeof args / sizeof args[0] && n > 0 && (size_t)n < sizeof query; i++)
        if (args[i].value != NULL)
            n += snprintf(query + n, sizeof query - (size_t)n, "&%s=%s", args[i].name,
                          args[i].value);
    snprintf(out, cap, "<%s/v1/rejections?%s>; rel=\"next\"", origin, query);
}

static void respond_page(tg_request *req, const rejection_query *q)
{
    rejection_page page = {.items = json_array()};
    tg_cat_status status = page.items == NULL
                               ? TG_CAT_ERROR
                               : tg_catalog_rejection_list(req->server->catalog, &q->filter,
                                                           q->limit + 1, add_rejection, &page);
    if (status != TG_CAT_OK) {
        json_decref(page.items);
        tg_respond_catalog_failure(req, status);
        return;
    }
    if (page.failed) {
        json_decref(page.items);
        tg_respond_internal(req, "out of memory");
        return;
    }
    bool has_next = page.count > q->limit;
    char key[32], cursor[64], link[TG_PUBLIC_URL_MAX + 700];
    if (has_next) {
        json_array_remove(page.items, q->limit);
        json_int_t last =
            json_integer_value(json_object_get(json_array_get(page.items, q->limit - 1), "id"));
        snprintf(key, sizeof key, "%lld", (long long)last);
        if (tg_cursor_encode(key, cursor, sizeof cursor) != 0)
            has_next = false;
        else
            next_link(req, q, cursor, link, sizeof link);
    }
    json_t *body = json_object();
    json_object_set(body, "rejections", page.items);
    json_object_set_new(body, "next_cursor", has_next ? json_string(cursor) : json_null());
    json_decref(page.items);
    const char *const headers[] = {"Link", has_next ? link : NULL, NULL};
    tg_respond_json_headers(req, 200, body, headers);
}

/* ---- the JSON-lines export: page by page, as the client reads ---- */

typedef struct rejection_export {
    tg_catalog *catalog;
    rejection_query q; /* q.filter.before_id moves down a page at a time */
    uint64_t left;     /* records still to send (the limit, when one was given) */
    bool end;          /* the catalog has no more */
    char *text;        /* the current page's lines */
    size_t len, cap, pos;
    bool failed; /* out of memory building a line */
} rejection_export;

static void export_line(void *ctx, const tg_rejection *r)
{
    rejection_export *e = ctx;
    json_t *item = rejection_json(r);
    char *line = item ? json_dumps(item, JSON_COMPACT) : NULL;
    json_decref(item);
    size_t n = line ? strlen(line) : 0;
    if (line != NULL && e->len + n + 1 > e->cap) {
        size_t cap = (e->len + n + 1) * 2;
        char *grown = realloc(e->text, cap);
        if (grown != NULL) {
            e->text = grown;
            e->cap = cap;
        }
    }
    if (line == NULL || e->len + n + 1 > e->cap) {
        e->failed = true;
    } else {
        memcpy(e->text + e->len, line, n);
        e->text[e->len + n] = '\n';
        e->len += n + 1;
    }
    free(line);
    e->q.filter.before_id = r->id;
    e->left--;
}

/* Reads the next page into e->text: TG_CAT_OK (e->end when it was the last). */
static tg_cat_status export_fill(rejection_export *e)
{
    e->len = e->pos = 0;
    uint64_t want = e->left < REJECTIONS_EXPORT_PAGE ? e->left : REJECTIONS_EXPORT_PAGE;
    uint64_t before = e->left;
    tg_cat_status status = want == 0 ? TG_CAT_OK
                                     : tg_catalog_rejection_list(e->catalog, &e->q.filter,
                                                                 (unsigned)want, export_line, e);
    if (status == TG_CAT_OK && (before - e->left < want || e->left == 0))
        e->end = true;
    return e->failed ? TG_CAT_ERROR : status;
}

static ssize_t export_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    rejection_export *e = cls;
    while (e->pos == e->len) {
        if (e->end)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (export_fill(e) != TG_CAT_OK) {
            /* the client sees a cut stream (no last chunk), never a short list as whole */
            tg_log(TG_LOG_ERROR, "the rejections export failed reading the catalog");
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
    size_t n = e->len - e->pos < max ? e->len - e->pos : max;
    memcpy(buf, e->text + e->pos, n);
    e->pos += n;
    return (ssize_t)n;
}

static void export_free(void *cls)
{
    rejection_export *e = cls;
    free(e->text);
    free(e);
}

static void respond_export(tg_request *req, const rejection_query *q)
{
    rejection_export *e = calloc(1, sizeof *e);
    if (e == NULL) {
        tg_respond_internal(req, "out of memory");
        return;
    }
    e->catalog = req->server->catalog;
    e->q = *q;
    /* the filter's texts are the copy's own */
    e->q.filter.reason = q->filter.reason ? e->q.reason : NULL;
    e->q.filter.namespace_name = q->filter.namespace_name ? e->q.namespace_name : NULL;
    e->q.filter.since = q->filter.since ? e->q.since : NULL;
    e->q.filter.until = q->filter.until ? e->q.until : NULL;
    e->q.filter.sha256 = q->filter.sha256 ? e->q.sha256 : NULL;
    e->left = q->limit_given ? q->limit : UINT64_MAX;
    /* the first page before the answer: a catalog failure is still a proper 503 */
    tg_cat_status status = export_fill(e);
    if (status != TG_CAT_OK) {
        export_free(e);
        tg_respond_catalog_failure(req, status);
        return;
    }
    struct MHD_Response *response =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, export_read, e, export_free);
    if (response == NULL) {
        export_free(e);
        tg_respond_internal(req, "out of memory");
        return;
    }
    MHD_add_response_header(response, "Content-Type", "application/x-ndjson");
    tg_respond(req, 200, response, 0);
}

void tg_route_rejections(tg_request *req)
{
    rejection_query q;
    if (!rejection_query_parse(req, &q))
        return;
    if (q.jsonl)
        respond_export(req, &q);
    else
        respond_page(req, &q);
}
