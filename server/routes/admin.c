/* /healthz, /readyz, /metrics, /openapi.yaml, /v1/rejections */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "catalog.h"
#include "checks.h"
#include "embedded.h"
#include "preload_service.h"
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

typedef struct rejection_page {
    json_t *items;
    unsigned count;
    int64_t last_id;
} rejection_page;

static json_t *text_or_null(const char *text)
{
    return text[0] ? json_string(text) : json_null();
}

static void add_rejection(void *ctx, const tg_rejection *r)
{
    rejection_page *page = ctx;
    json_t *item = json_pack("{s:I, s:s, s:s, s:I}", "id", (json_int_t)r->id, "time", r->time,
                             "reason", r->reason, "size", (json_int_t)r->size);
    if (item == NULL)
        return;
    json_object_set_new(item, "model", text_or_null(r->model));
    json_object_set_new(item, "version", r->version >= 0 ? json_integer(r->version) : json_null());
    json_object_set_new(item, "path", text_or_null(r->path));
    json_object_set_new(item, "format", text_or_null(r->format));
    json_object_set_new(item, "detail", text_or_null(r->detail));
    json_object_set_new(item, "client", text_or_null(r->client));
    /* refused, or admitted_by_policy: code a namespace's policy let in (schema 10) */
    json_object_set_new(item, "outcome", json_string(r->outcome[0] ? r->outcome : "refused"));
    /* a refused pickle's findings, kept as JSON text; [] when none (or unreadable) */
    json_t *findings = r->findings[0] ? json_loads(r->findings, 0, NULL) : NULL;
    json_object_set_new(item, "findings", json_is_array(findings) ? findings : json_array());
    if (findings != NULL && !json_is_array(findings))
        json_decref(findings);
    json_array_append_new(page->items, item);
    page->count++;
}

void tg_route_rejections(tg_request *req)
{
    unsigned limit;
    char key[64];
    bool has_cursor;
    if (!tg_list_params(req, &limit, key, sizeof key, &has_cursor))
        return;
    uint64_t before = 0;
    if (has_cursor && (!tg_parse_u64(key, &before) || before == 0 || before > INT64_MAX)) {
        tg_respond_problem(req, "invalid_request", "the cursor is not one this server issued");
        return;
    }
    rejection_page page = {.items = json_array()};
    tg_cat_status status = tg_catalog_rejection_list(req->server->catalog, (int64_t)before,
                                                     limit + 1, add_rejection, &page);
    if (status != TG_CAT_OK) {
        json_decref(page.items);
        tg_respond_catalog_failure(req, status);
        return;
    }
    char next[32];
    bool has_next = page.count > limit;
    if (has_next) {
        json_array_remove(page.items, limit);
        json_int_t last =
            json_integer_value(json_object_get(json_array_get(page.items, limit - 1), "id"));
        snprintf(next, sizeof next, "%lld", (long long)last);
    }
    json_t *body = json_object();
    json_object_set(body, "rejections", page.items);
    tg_set_next_cursor(body, has_next ? next : NULL);
    json_decref(page.items);
    tg_respond_json(req, 200, body);
}
