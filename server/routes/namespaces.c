/* /v1/namespaces/{org}/policy: a namespace's code policy (docs/DESIGN.md, "The code
 * policy"). An admin of the org (or of every org) reads it and sets whether code
 * (modeling_x.py, a config.json with auto_map, ...) may be uploaded and imported into
 * the org's models. The setting lives in the catalog's namespace_settings table
 * (schema 10); an org never set refuses code. Changing it admits or refuses new files
 * only: a version that holds code stays marked whatever the policy says later. */
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "catalog.h"
#include "checks.h"
#include "log.h"
#include "routes.h"
#include "sha256.h"

static bool valid_org(tg_request *req, const char **org)
{
    *org = tg_param(req, "org");
    if (*org == NULL || !tg_valid_name_part(*org)) {
        tg_respond_problem(req, "invalid_name",
                           "a namespace is [A-Za-z0-9][A-Za-z0-9._-]{0,63}, no \"..\"");
        return false;
    }
    return true;
}

static void respond_policy(tg_request *req, const char *org, const tg_namespace_settings *settings)
{
    json_t *body = json_pack("{s:s, s:b}", "namespace", org, "allow_code", settings->allow_code);
    if (body != NULL)
        json_object_set_new(body, "updated_at",
                            settings->updated_at[0] ? json_string(settings->updated_at)
                                                    : json_null());
    tg_respond_json(req, 200, body);
}

void tg_route_namespace_policy_get(tg_request *req)
{
    const char *org;
    if (!valid_org(req, &org))
        return;
    tg_namespace_settings settings;
    tg_cat_status status = tg_catalog_namespace_get(req->server->catalog, org, &settings);
    if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
        return;
    }
    respond_policy(req, org, &settings);
}

void tg_route_namespace_policy_set(tg_request *req)
{
    const char *org;
    if (!valid_org(req, &org))
        return;
    json_t *body = tg_json_body(req);
    if (body == NULL)
        return;
    static const char *const fields[] = {"allow_code", NULL};
    if (!tg_json_known_fields(req, body, fields)) {
        json_decref(body);
        return;
    }
    json_t *allow = json_object_get(body, "allow_code");
    if (!json_is_boolean(allow)) {
        tg_respond_problem(req, "invalid_request", "\"allow_code\" (true or false) is required");
        json_decref(body);
        return;
    }
    bool allow_code = json_is_true(allow);
    json_decref(body);
    tg_namespace_settings before, after;
    tg_cat_status status = tg_catalog_namespace_get(req->server->catalog, org, &before);
    if (status == TG_CAT_OK)
        status = tg_catalog_namespace_set_code(req->server->catalog, org, allow_code, &after);
    if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
        return;
    }
    /* every change of the policy leaves a line in the log, with who asked from where */
    tg_log(TG_LOG_WARN, "namespace %s: code policy set to %s (was %s) by %s", org,
           allow_code ? "allow" : "refuse", before.allow_code ? "allow" : "refuse", req->client);
    respond_policy(req, org, &after);
}

/* ---- the storage quota (docs/MANUAL.md, "Storage quotas") ---- */

tg_cat_status tg_namespace_quota(tg_server *server, const char *org, uint64_t *quota,
                                 uint64_t *usage)
{
    tg_namespace_settings settings;
    tg_cat_status status = tg_catalog_namespace_get(server->catalog, org, &settings);
    if (status != TG_CAT_OK)
        return status;
    *quota =
        settings.quota_bytes >= 0 ? (uint64_t)settings.quota_bytes : server->config.namespace_quota;
    return tg_catalog_namespace_usage(server->catalog, org, usage);
}

bool tg_quota_admits(tg_request *req, const char *org, uint64_t incoming)
{
    uint64_t quota = 0, usage = 0;
    tg_cat_status status = tg_namespace_quota(req->server, org, &quota, &usage);
    if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
        return false;
    }
    if (quota > 0 && (incoming > quota || usage > quota - incoming)) {
        tg_respond_problem(req, "storage_quota_exceeded",
                           "namespace %s holds %llu bytes of its quota of %llu; %llu more bytes "
                           "do not fit",
                           org, (unsigned long long)usage, (unsigned long long)quota,
                           (unsigned long long)incoming);
        return false;
    }
    return true;
}

/* The catalog time TG_RESERVATION_SECONDS ago: older reservations are stale. */
static void reservation_since(char out[TG_TIME_LEN])
{
    time_t at = time(NULL) - TG_RESERVATION_SECONDS;
    struct tm tm;
    gmtime_r(&at, &tm);
    strftime(out, TG_TIME_LEN, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

tg_cat_status tg_quota_reserve(tg_server *server, const char *org, uint64_t bytes, uint64_t *quota,
                               uint64_t *usage, char *id, size_t cap)
{
    id[0] = '\0';
    tg_cat_status status = tg_namespace_quota(server, org, quota, usage);
    if (status != TG_CAT_OK || *quota == 0)
        return status; /* unbounded: nothing to reserve */
    if (bytes > *quota || *usage > *quota - bytes)
        return TG_CAT_CONFLICT;
    unsigned char random[16];
    if (getrandom(random, sizeof random, 0) != (ssize_t)sizeof random || cap < 37)
        return TG_CAT_ERROR;
    char hex[33];
    tg_hex_encode(random, sizeof random, hex);
    char since[TG_TIME_LEN];
    reservation_since(since);
    char name[40];
    snprintf(name, sizeof name, "rsv_%s", hex);
    status = tg_catalog_quota_reserve(server->catalog, org, name, bytes, *quota, since);
    if (status == TG_CAT_OK)
        snprintf(id, cap, "%s", name);
    return status;
}

void tg_quota_release(tg_server *server, char *id)
{
    if (id == NULL || id[0] == '\0')
        return;
    if (tg_cat_failed(tg_catalog_quota_release(server->catalog, id)))
        tg_log(TG_LOG_WARN, "cannot release the quota reservation %s (it expires in a day)", id);
    id[0] = '\0';
}

static void respond_namespace(tg_request *req, const char *org)
{
    tg_namespace_settings settings;
    uint64_t quota = 0, usage = 0;
    uint64_t reserved = 0;
    char since[TG_TIME_LEN];
    reservation_since(since);
    tg_cat_status status = tg_catalog_namespace_get(req->server->catalog, org, &settings);
    if (status == TG_CAT_OK)
        status = tg_namespace_quota(req->server, org, &quota, &usage);
    if (status == TG_CAT_OK)
        status = tg_catalog_quota_reserved(req->server->catalog, org, since, &reserved);
    if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
        return;
    }
    json_t *body =
        json_pack("{s:s, s:I, s:I, s:b, s:b}", "namespace", org, "usage_bytes", (json_int_t)usage,
                  "reserved_bytes", (json_int_t)reserved, "quota_default", settings.quota_bytes < 0,
                  "allow_code", settings.allow_code);
    if (body != NULL)
        json_object_set_new(body, "quota_bytes",
                            quota > 0 ? json_integer((json_int_t)quota) : json_null());
    tg_respond_json(req, 200, body);
}

/* GET /v1/namespaces/{org}: its usage and quota (read scope of the namespace). */
void tg_route_namespace_get(tg_request *req)
{
    const char *org;
    if (valid_org(req, &org))
        respond_namespace(req, org);
}

/* PUT /v1/namespaces/{org}/quota {"quota_bytes": N | null} (admin): null goes back to
 * the server's --namespace-quota, 0 is no bound. Lowering it below the usage refuses
 * new bytes only: nothing stored is removed. */
void tg_route_namespace_quota_set(tg_request *req)
{
    const char *org;
    if (!valid_org(req, &org))
        return;
    json_t *body = tg_json_body(req);
    if (body == NULL)
        return;
    static const char *const fields[] = {"quota_bytes", NULL};
    if (!tg_json_known_fields(req, body, fields)) {
        json_decref(body);
        return;
    }
    json_t *value = json_object_get(body, "quota_bytes");
    if (value == NULL ||
        !(json_is_null(value) || (json_is_integer(value) && json_integer_value(value) >= 0))) {
        tg_respond_problem(req, "invalid_request",
                           "\"quota_bytes\" (bytes, 0 for no bound, or null for the default) is "
                           "required");
        json_decref(body);
        return;
    }
    int64_t quota = json_is_null(value) ? -1 : (int64_t)json_integer_value(value);
    json_decref(body);
    tg_cat_status status = tg_catalog_namespace_set_quota(req->server->catalog, org, quota, NULL);
    if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
        return;
    }
    tg_log(TG_LOG_WARN, "namespace %s: quota set to %lld by %s", org, (long long)quota,
           req->client);
    respond_namespace(req, org);
}
