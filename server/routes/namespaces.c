/* /v1/namespaces/{org}/policy: a namespace's code policy (docs/DESIGN.md, "The code
 * policy"). An admin of the org (or of every org) reads it and sets whether code
 * (modeling_x.py, a config.json with auto_map, ...) may be uploaded and imported into
 * the org's models. The setting lives in the catalog's namespace_settings table
 * (schema 10); an org never set refuses code. Changing it admits or refuses new files
 * only: a version that holds code stays marked whatever the policy says later. */
#include <stdio.h>
#include <string.h>

#include "catalog.h"
#include "checks.h"
#include "log.h"
#include "routes.h"

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
