/* The life of a version (deprecation, deletion of a published version) and the
 * storage quota of a namespace (catalog.h, schema 16), written once for both
 * backends over their run_steps operation (catalog_backend.h). Each change and its
 * webhook event (version.deprecated, version.deleted: TG_CAT_SQL_WEBHOOK_EVENT_ADD,
 * docs/WEBHOOKS.md) commit in one transaction. Integers go to the database as text
 * and are cast there (CAST(? AS BIGINT)), which both dialects read the same way. */
#include "catalog.h"
#include "catalog_backend.h"
#include "catalog_sql.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct num {
    char s[24];
} num;

static num n64(int64_t v)
{
    num out;
    snprintf(out.s, sizeof out.s, "%" PRId64, v);
    return out;
}

static tg_cat_status run(tg_catalog *catalog, bool write, tg_cat_step *steps, size_t count)
{
    return catalog->ops->run_steps(catalog, write, steps, count);
}

tg_cat_status tg_catalog_namespace_set_quota(tg_catalog *catalog, const char *org,
                                             int64_t quota_bytes, tg_namespace_settings *out)
{
    static const char sql[] =
        "INSERT INTO namespace_settings (org, allow_code, updated_at, quota_bytes)"
        " VALUES (?1, 0, ?2, CAST(?3 AS BIGINT)) ON CONFLICT (org) DO UPDATE SET"
        " quota_bytes = excluded.quota_bytes, updated_at = excluded.updated_at";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    num quota = n64(quota_bytes);
    const char *params[] = {org, now, quota_bytes < 0 ? NULL : quota.s};
    tg_cat_step step = {sql, 3, params, NULL, NULL, true, 0};
    tg_cat_status status = run(catalog, true, &step, 1);
    if (status == TG_CAT_OK && out != NULL)
        status = tg_catalog_namespace_get(catalog, org, out);
    return status;
}

static void read_u64(void *ctx, tg_cat_row row)
{
    int64_t v = row.integer(&row, 0);
    *(uint64_t *)ctx = v > 0 ? (uint64_t)v : 0;
}

tg_cat_status tg_catalog_namespace_usage(tg_catalog *catalog, const char *org, uint64_t *bytes)
{
    /* one blob counts once in its namespace: the largest size recorded for it (a
     * blob's size is its content's, so every row agrees) */
    static const char sql[] = "SELECT " TG_CAT_SQL_NAMESPACE_USAGE_OF("?1");
    *bytes = 0;
    const char *params[] = {org};
    tg_cat_step step = {sql, 1, params, read_u64, bytes, false, 0};
    return run(catalog, false, &step, 1);
}

/* the event's data as JSON text (malloc'd), NULL when out of memory */
static char *event_data(const tg_model *model, const tg_version *version, const char *key,
                        const char *text)
{
    char full[2 * TG_NAME_MAX + 2];
    snprintf(full, sizeof full, "%s/%s", model->org, model->name);
    json_t *data = json_pack("{s:s, s:I, s:s}", "model", full, "version",
                             (json_int_t)version->number, "digest", version->digest);
    if (data != NULL && key != NULL)
        json_object_set_new(data, key, json_string(text));
    char *out = data ? json_dumps(data, JSON_COMPACT) : NULL;
    json_decref(data);
    return out;
}

tg_cat_status tg_catalog_version_deprecate(tg_catalog *catalog, const tg_model *model,
                                           const tg_version *version, const char *reason)
{
    static const char mark_sql[] =
        "UPDATE versions SET deprecated_at = ?, deprecated_reason = ? WHERE id = CAST(? AS BIGINT)"
        " AND state = 'published' AND deleted_at IS NULL";
    static const char event_sql[] = TG_CAT_SQL_WEBHOOK_EVENT_ADD;
    char now[TG_TIME_LEN], id[TG_WEBHOOK_ID_LEN];
    tg_time_now(now);
    tg_webhook_new_id(id);
    num vid = n64(version->id);
    const char *mark_params[] = {reason ? now : NULL, reason, vid.s};
    char *data = reason ? event_data(model, version, "reason", reason) : NULL;
    if (reason != NULL && data == NULL)
        return TG_CAT_ERROR;
    const char *event_params[] = {id, model->org, "version.deprecated", now, data};
    tg_cat_step steps[] = {
        {mark_sql, 3, mark_params, NULL, NULL, true, 0},
        {event_sql, 5, event_params, NULL, NULL, false, 0},
    };
    tg_cat_status status = run(catalog, true, steps, reason ? 2 : 1);
    free(data);
    return status;
}

tg_cat_status tg_catalog_version_delete_published(tg_catalog *catalog, const tg_model *model,
                                                  const tg_version *version)
{
    static const char mark_sql[] = "UPDATE versions SET deleted_at = ? WHERE id = CAST(? AS BIGINT)"
                                   " AND state = 'published' AND deleted_at IS NULL";
    static const char files_sql[] = "DELETE FROM files WHERE version_id = CAST(? AS BIGINT)";
    static const char aliases_sql[] =
        "DELETE FROM aliases WHERE model_id = CAST(? AS BIGINT) AND number = CAST(? AS BIGINT)";
    static const char event_sql[] = TG_CAT_SQL_WEBHOOK_EVENT_ADD;
    char now[TG_TIME_LEN], id[TG_WEBHOOK_ID_LEN];
    tg_time_now(now);
    tg_webhook_new_id(id);
    num vid = n64(version->id), mid = n64(model->id), number = n64(version->number);
    char *data = event_data(model, version, NULL, NULL);
    if (data == NULL)
        return TG_CAT_ERROR;
    const char *mark_params[] = {now, vid.s};
    const char *files_params[] = {vid.s};
    const char *alias_params[] = {mid.s, number.s};
    const char *event_params[] = {id, model->org, "version.deleted", now, data};
    tg_cat_step steps[] = {
        {mark_sql, 2, mark_params, NULL, NULL, true, 0},
        {files_sql, 1, files_params, NULL, NULL, false, 0},
        {aliases_sql, 2, alias_params, NULL, NULL, false, 0},
        {event_sql, 5, event_params, NULL, NULL, false, 0},
    };
    tg_cat_status status = run(catalog, true, steps, 4);
    free(data);
    return status;
}
