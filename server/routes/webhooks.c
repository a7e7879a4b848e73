/* /v1/namespaces/{org}/webhooks...: a namespace's webhook subscriptions (an admin
 * of the namespace manages them), their deliveries, a ping and a redelivery. The
 * secret is write-only: it is returned once, by the POST that made it (the one the
 * caller gave, or one made here), and never again. A target URL is judged at
 * subscription time by the address policy of imports (--import-allow), and again
 * at each delivery's connect (server/jobs/webhook_worker.c). docs/WEBHOOKS.md. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "catalog.h"
#include "checks.h"
#include "import_job.h"
#include "routes.h"
#include "webhook_worker.h"

#define DELIVERIES_DEFAULT 50
#define DELIVERIES_MAX 200

/* The event types a subscription may ask for ("ping" is sent by the ping route
 * to one subscription, never subscribed to). */
static const char *const event_types[] = {
    "model.created",   "version.published", "alias.moved",  "version.deprecated",
    "version.deleted", "upload.refused",    "job.finished", "signature.invalid",
};
#define EVENT_TYPES (sizeof event_types / sizeof event_types[0])

/* {org} is a name; the route's scope (admin of org) was checked by the dispatcher. */
static const char *namespace_param(tg_request *req)
{
    const char *org = tg_param(req, "org");
    if (org == NULL || !tg_valid_name_part(org)) {
        tg_respond_problem(req, "invalid_name", "the namespace is not a valid name");
        return NULL;
    }
    return org;
}

static bool id_param(tg_request *req, const char *name, int64_t *out)
{
    uint64_t value = 0;
    const char *text = tg_param(req, name);
    if (text == NULL || !tg_parse_u64(text, &value) || value == 0 || value > INT64_MAX) {
        tg_respond_problem(
            req, strcmp(name, "id") == 0 ? "webhook_not_found" : "webhook_delivery_not_found",
            "no such %s", strcmp(name, "id") == 0 ? "webhook" : "delivery");
        return false;
    }
    *out = (int64_t)value;
    return true;
}

static json_t *string_or_null(const char *text)
{
    return text[0] ? json_string(text) : json_null();
}

static json_t *hook_json(const tg_webhook *hook)
{
    json_t *events = json_array();
    const char *p = hook->events;
    while (p != NULL && *p) {
        if (*p == ',') {
            p++;
            continue;
        }
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        json_array_append_new(events, json_stringn(p, len));
        p += len;
    }
    json_t *body = json_pack("{s:I, s:s, s:s, s:o, s:b, s:I}", "id", (json_int_t)hook->id,
                             "namespace", hook->org, "url", hook->url, "events", events, "enabled",
                             hook->enabled, "consecutive_failures", (json_int_t)hook->failures);
    if (body == NULL)
        return NULL;
    json_object_set_new(body, "disabled_reason", string_or_null(hook->disabled_reason));
    json_object_set_new(body, "created_at", json_string(hook->created_at));
    json_object_set_new(body, "updated_at", json_string(hook->updated_at));
    return body;
}

static json_t *time_ms_json(int64_t ms)
{
    time_t seconds = (time_t)(ms / 1000);
    struct tm tm;
    char text[96];
    if (gmtime_r(&seconds, &tm) == NULL)
        return json_null();
    snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
    return json_string(text);
}

static json_t *delivery_json(const tg_webhook_delivery *d)
{
    json_t *body =
        json_pack("{s:I, s:I, s:s, s:s, s:s, s:I}", "id", (json_int_t)d->id, "subscription_id",
                  (json_int_t)d->subscription_id, "event_id", d->event_id, "type", d->type, "state",
                  d->state, "attempts", (json_int_t)d->attempts);
    if (body == NULL)
        return NULL;
    bool pending = strcmp(d->state, "pending") == 0;
    json_object_set_new(body, "next_attempt",
                        pending ? time_ms_json(d->next_attempt) : json_null());
    json_object_set_new(body, "last_status",
                        d->last_status > 0 ? json_integer((json_int_t)d->last_status)
                                           : json_null());
    json_object_set_new(body, "last_error", string_or_null(d->last_error));
    json_object_set_new(body, "created_at", json_string(d->created_at));
    json_object_set_new(body, "updated_at", json_string(d->updated_at));
    json_object_set_new(body, "delivered_at", string_or_null(d->delivered_at));
    return body;
}

/* "url": checked as an import's URL (http or https, absolute, no control bytes, a
 * numeric host the policy forbids refused now; names are judged at each connect). */
static bool read_url(tg_request *req, json_t *value, const char **out)
{
    if (!json_is_string(value)) {
        tg_respond_problem(req, "webhook_url_invalid",
                           "\"url\" (an http or https URL) is required");
        return false;
    }
    const char *url = json_string_value(value);
    char detail[256];
    const char *bad =
        tg_import_url_check(&req->server->config.import_allow, url, detail, sizeof detail);
    if (bad != NULL) {
        bool address = strcmp(bad, "import_address_forbidden") == 0;
        if (address) { /* the import's sentence names imports: say it for webhooks */
            const char *cut = strstr(detail, "; imports may not reach it");
            if (cut != NULL)
                snprintf((char *)cut, sizeof detail - (size_t)(cut - detail),
                         "; a webhook may not target it (--import-allow)");
        }
        tg_respond_problem(req, address ? "webhook_address_forbidden" : "webhook_url_invalid", "%s",
                           detail);
        return false;
    }
    *out = url;
    return true;
}

/* "events": a non-empty array of known types, each once, into ",a,b," text. */
static bool read_events(tg_request *req, json_t *value, char out[TG_WEBHOOK_EVENTS_MAX])
{
    if (!json_is_array(value) || json_array_size(value) == 0 ||
        json_array_size(value) > EVENT_TYPES) {
        tg_respond_problem(req, "webhook_events_invalid",
                           "\"events\" must be a non-empty array of event types");
        return false;
    }
    size_t n = 0;
    out[n++] = ',';
    out[n] = '\0';
    size_t i;
    json_t *item;
    json_array_foreach(value, i, item)
    {
        const char *type = json_string_value(item);
        size_t k = 0;
        while (type != NULL && k < EVENT_TYPES && strcmp(type, event_types[k]) != 0)
            k++;
        if (type == NULL || k == EVENT_TYPES) {
            tg_respond_problem(req, "webhook_events_invalid",
                               "\"%.64s\" is not an event type; the types are model.created, "
                               "version.published, alias.moved, version.deprecated, "
                               "version.deleted, upload.refused, job.finished, signature.invalid",
                               type ? type : "(not a string)");
            return false;
        }
        char marked[TG_WEBHOOK_TYPE_MAX + 2];
        snprintf(marked, sizeof marked, ",%s,", type);
        if (strstr(out, marked) != NULL) {
            tg_respond_problem(req, "webhook_events_invalid", "\"%s\" is listed twice", type);
            return false;
        }
        n += (size_t)snprintf(out + n, TG_WEBHOOK_EVENTS_MAX - n, "%s,", type);
    }
    return true;
}

/* A secret: 16 to 128 visible ASCII bytes (it travels in a header). */
static bool read_secret(tg_request *req, json_t *value, char out[TG_WEBHOOK_SECRET_MAX + 1])
{
    if (value == NULL || json_is_null(value)) { /* made here, shown once */
        char token[TG_TOKEN_LEN + 1], hash[65];
        if (tg_token_generate(token, hash) != 0) {
            tg_respond_internal(req, "no random bytes for a secret");
            return false;
        }
        snprintf(out, TG_WEBHOOK_SECRET_MAX + 1, "whsec_%s", tg_token_unprefix(token));
        return true;
    }
    const char *text = json_string_value(value);
    size_t len = text ? strlen(text) : 0;
    bool ok = text != NULL && len >= 16 && len <= TG_WEBHOOK_SECRET_MAX;
    for (size_t i = 0; ok && i < len; i++)
        ok = (unsigned char)text[i] > 0x20 && (unsigned char)text[i] < 0x7F;
    if (!ok) {
        tg_respond_problem(req, "webhook_secret_invalid",
                           "\"secret\" must be 16 to %d visible ASCII characters (no spaces)",
                           TG_WEBHOOK_SECRET_MAX);
        return false;
    }
    snprintf(out, TG_WEBHOOK_SECRET_MAX + 1, "%s", text);
    return true;
}

static void respond_hook_failure(tg_request *req, tg_cat_status status, int64_t id)
{
    if (status == TG_CAT_NOT_FOUND)
        tg_respond_problem(req, "webhook_not_found", "this namespace has no webhook %" PRId64, id);
    else
        tg_respond_catalog_failure(req, status);
}

void tg_route_webhook_create(tg_request *req)
{
    const char *org = namespace_param(req);
    if (org == NULL)
        return;
    json_t *body = tg_json_body(req);
    if (body == NULL)
        return;
    static const char *const fields[] = {"url", "events", "secret", NULL};
    const char *url = NULL;
    char events[TG_WEBHOOK_EVENTS_MAX], secret[TG_WEBHOOK_SECRET_MAX + 1];
    tg_webhook hook;
    if (tg_json_known_fields(req, body, fields) &&
        read_url(req, json_object_get(body, "url"), &url) &&
        read_events(req, json_object_get(body, "events"), events) &&
        read_secret(req, json_object_get(body, "secret"), secret)) {
        tg_cat_status status =
            tg_catalog_webhook_create(req->server->catalog, org, url, secret, events, &hook);
        if (status != TG_CAT_OK) {
            tg_respond_catalog_failure(req, status);
        } else {
            json_t *answer = hook_json(&hook);
            if (answer != NULL) /* the only time the secret is shown */
                json_object_set_new(answer, "secret", json_string(secret));
            tg_respond_json(req, 201, answer);
        }
    }
    json_decref(body);
}

static void add_hook(void *ctx, const tg_webhook *hook)
{
    json_array_append_new(ctx, hook_json(hook));
}

void tg_route_webhooks_list(tg_request *req)
{
    const char *org = namespace_param(req);
    if (org == NULL)
        return;
    json_t *items = json_array();
    tg_cat_status status = tg_catalog_webhook_list(req->server->catalog, org, add_hook, items);
    if (status != TG_CAT_OK) {
        json_decref(items);
        tg_respond_catalog_failure(req, status);
        return;
    }
    tg_respond_json(req, 200, json_pack("{s:o}", "webhooks", items));
}

void tg_route_webhook_get(tg_request *req)
{
    const char *org = namespace_param(req);
    int64_t id;
    if (org == NULL || !id_param(req, "id", &id))
        return;
    tg_webhook hook;
    tg_cat_status status = tg_catalog_webhook_get(req->server->catalog, org, id, &hook);
    if (status != TG_CAT_OK)
        respond_hook_failure(req, status, id);
    else
        tg_respond_json(req, 200, hook_json(&hook));
}

void tg_route_webhook_update(tg_request *req)
{
    const char *org = namespace_param(req);
    int64_t id;
    if (org == NULL || !id_param(req, "id", &id))
        return;
    json_t *body = tg_json_body(req);
    if (body == NULL)
        return;
    static const char *const fields[] = {"url", "events", "enabled", NULL};
    const char *url = NULL;
    char events_text[TG_WEBHOOK_EVENTS_MAX];
    const char *events = NULL;
    int enabled = -1;
    json_t *url_value = json_object_get(body, "url");
    json_t *events_value = json_object_get(body, "events");
    json_t *enabled_value = json_object_get(body, "enabled");
    if (!tg_json_known_fields(req, body, fields) ||
        (url_value != NULL && !read_url(req, url_value, &url)) ||
        (events_value != NULL && !read_events(req, events_value, events_text)))
        goto out;
    if (events_value != NULL)
        events = events_text;
    if (enabled_value != NULL) {
        if (!json_is_boolean(enabled_value)) {
            tg_respond_problem(req, "invalid_request", "\"enabled\" must be true or false");
            goto out;
        }
        enabled = json_is_true(enabled_value) ? 1 : 0;
    }
    tg_webhook hook;
    tg_cat_status status =
        tg_catalog_webhook_update(req->server->catalog, org, id, url, events, enabled, &hook);
    if (status != TG_CAT_OK) {
        respond_hook_failure(req, status, id);
    } else {
        if (enabled == 1)
            tg_webhooks_wake(); /* its pending deliveries are due again */
        tg_respond_json(req, 200, hook_json(&hook));
    }
out:
    json_decref(body);
}

void tg_route_webhook_delete(tg_request *req)
{
    const char *org = namespace_param(req);
    int64_t id;
    if (org == NULL || !id_param(req, "id", &id))
        return;
    tg_cat_status status = tg_catalog_webhook_delete(req->server->catalog, org, id);
    if (status != TG_CAT_OK)
        respond_hook_failure(req, status, id);
    else
        tg_respond_empty(req, 204);
}

void tg_route_webhook_ping(tg_request *req)
{
    const char *org = namespace_param(req);
    int64_t id;
    if (org == NULL || !id_param(req, "id", &id))
        return;
    char event_id[TG_WEBHOOK_ID_LEN];
    tg_cat_status status = tg_catalog_webhook_ping(req->server->catalog, org, id, event_id);
    if (status != TG_CAT_OK) {
        respond_hook_failure(req, status, id);
        return;
    }
    tg_webhooks_wake();
    tg_respond_json(req, 202, json_pack("{s:s, s:s}", "event_id", event_id, "type", "ping"));
}

typedef struct delivery_page {
    json_t *items;
    size_t count;
} delivery_page;

static void add_delivery(void *ctx, const tg_webhook_delivery *delivery)
{
    delivery_page *page = ctx;
    json_array_append_new(page->items, delivery_json(delivery));
    page->count++;
}

void tg_route_webhook_deliveries(tg_request *req)
{
    const char *org = namespace_param(req);
    int64_t id;
    if (org == NULL || !id_param(req, "id", &id))
        return;
    unsigned limit;
    char key[64];
    bool has_cursor;
    if (!tg_list_params_bounded(req, DELIVERIES_DEFAULT, DELIVERIES_MAX, &limit, key, sizeof key,
                                &has_cursor))
        return;
    uint64_t before = 0;
    if (has_cursor && (!tg_parse_u64(key, &before) || before == 0 || before > INT64_MAX)) {
        tg_respond_problem(req, "invalid_request", "the cursor is not one this server issued");
        return;
    }
    delivery_page page = {.items = json_array()};
    tg_cat_status status = tg_catalog_webhook_deliveries(
        req->server->catalog, org, id, (int64_t)before, limit + 1, add_delivery, &page);
    if (status != TG_CAT_OK) {
        json_decref(page.items);
        respond_hook_failure(req, status, id);
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
    json_object_set(body, "deliveries", page.items);
    tg_set_next_cursor(body, has_next ? next : NULL);
    json_decref(page.items);
    tg_respond_json(req, 200, body);
}

static void respond_delivery_failure(tg_request *req, tg_catalog *catalog, const char *org,
                                     int64_t id, int64_t delivery_id, tg_cat_status status)
{
    if (status != TG_CAT_NOT_FOUND) {
        tg_respond_catalog_failure(req, status);
        return;
    }
    tg_webhook hook;
    if (tg_catalog_webhook_get(catalog, org, id, &hook) == TG_CAT_NOT_FOUND)
        tg_respond_problem(req, "webhook_not_found", "this namespace has no webhook %" PRId64, id);
    else
        tg_respond_problem(req, "webhook_delivery_not_found",
                           "webhook %" PRId64 " has no delivery %" PRId64, id, delivery_id);
}

void tg_route_webhook_delivery_get(tg_request *req)
{
    const char *org = namespace_param(req);
    int64_t id, delivery_id;
    if (org == NULL || !id_param(req, "id", &id) || !id_param(req, "delivery", &delivery_id))
        return;
    tg_webhook_delivery delivery;
    tg_cat_status status =
        tg_catalog_webhook_delivery_get(req->server->catalog, org, id, delivery_id, &delivery);
    if (status != TG_CAT_OK)
        respond_delivery_failure(req, req->server->catalog, org, id, delivery_id, status);
    else
        tg_respond_json(req, 200, delivery_json(&delivery));
}

void tg_route_webhook_redeliver(tg_request *req)
{
    const char *org = namespace_param(req);
    int64_t id, delivery_id;
    if (org == NULL || !id_param(req, "id", &id) || !id_param(req, "delivery", &delivery_id))
        return;
    tg_webhook_delivery delivery;
    tg_cat_status status =
        tg_catalog_webhook_redeliver(req->server->catalog, org, id, delivery_id, &delivery);
    if (status != TG_CAT_OK) {
        respond_delivery_failure(req, req->server->catalog, org, id, delivery_id, status);
        return;
    }
    tg_webhooks_wake();
    tg_respond_json(req, 202, delivery_json(&delivery));
}
