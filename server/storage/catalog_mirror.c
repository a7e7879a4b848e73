/* Mirrors of a Hub repository in the catalog (see catalog_mirror.h). */
#include "catalog_mirror.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog_backend.h"

typedef struct text_num {
    char s[24];
} text_num;

static text_num num(int64_t value)
{
    text_num n;
    snprintf(n.s, sizeof n.s, "%lld", (long long)value);
    return n;
}

typedef struct first_row {
    bool seen;
    int64_t id;
} first_row;

static void take_id(void *ctx, int columns, const char *const *values)
{
    first_row *row = ctx;
    if (!row->seen && columns > 0 && values[0] != NULL) {
        row->seen = true;
        row->id = strtoll(values[0], NULL, 10);
    }
}

tg_cat_status tg_catalog_mirror_job_create(tg_catalog *catalog, int64_t token_id, int64_t model_id,
                                           int64_t version_id, const char *url, const char *spec,
                                           bool partial, tg_job *out)
{
    static const char sql[] =
        "INSERT INTO jobs(kind, state, model_id, source_version_id, dtype, tensors, created_at,"
        " token_id, url, path) VALUES ('mirror', 'queued', ?, ?, ?, '[]', ?, ?, ?, ?)"
        " RETURNING id";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    text_num mid = num(model_id), vid = num(version_id), tid = num(token_id);
    const char *params[] = {
        mid.s, vid.s, partial ? "partial" : "", now, token_id > 0 ? tid.s : NULL, url, spec};
    first_row row = {0};
    tg_cat_status status = catalog->ops->mirror_exec(catalog, true, sql, 7, params, take_id, &row);
    if (status != TG_CAT_OK)
        return status;
    if (!row.seen)
        return TG_CAT_ERROR;
    return tg_catalog_job_get(catalog, row.id, out);
}

tg_cat_status tg_catalog_mirror_idle_draft(tg_catalog *catalog, int64_t model_id, tg_version *out)
{
    static const char sql[] =
        "SELECT v.number FROM versions v WHERE v.model_id = ? AND v.state = 'draft'"
        " AND NOT EXISTS (SELECT 1 FROM files f WHERE f.version_id = v.id)"
        " AND EXISTS (SELECT 1 FROM jobs j WHERE j.source_version_id = v.id"
        " AND j.kind = 'mirror')"
        " AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.source_version_id = v.id"
        " AND j.state IN ('queued', 'running'))"
        " ORDER BY v.number DESC LIMIT 1";
    text_num mid = num(model_id);
    const char *params[] = {mid.s};
    first_row row = {0};
    tg_cat_status status = catalog->ops->mirror_exec(catalog, false, sql, 1, params, take_id, &row);
    if (status != TG_CAT_OK)
        return status;
    if (!row.seen)
        return TG_CAT_NOT_FOUND;
    return tg_catalog_version_get(catalog, model_id, row.id, out);
}

typedef struct token_row {
    bool seen;
    char scope[16];
    char space[TG_NAME_MAX + 1];
    bool limited;
} token_row;

static void take_token(void *ctx, int columns, const char *const *values)
{
    token_row *t = ctx;
    if (t->seen || columns < 2)
        return;
    t->seen = true;
    snprintf(t->scope, sizeof t->scope, "%s", values[0] ? values[0] : "");
    t->limited = values[1] != NULL && values[1][0] != '\0';
    snprintf(t->space, sizeof t->space, "%s", values[1] ? values[1] : "");
}

tg_cat_status tg_catalog_mirror_token_check(tg_catalog *catalog, int64_t token_id, const char *org,
                                            const char **why)
{
    static const char sql[] = "SELECT scope, namespace FROM tokens WHERE id = ?";
    text_num tid = num(token_id);
    const char *params[] = {tid.s};
    token_row t = {0};
    tg_cat_status status =
        catalog->ops->mirror_exec(catalog, false, sql, 1, params, take_token, &t);
    if (status != TG_CAT_OK)
        return status;
    if (!t.seen) {
        *why = "token_revoked";
        return TG_CAT_NOT_FOUND;
    }
    if (strcmp(t.scope, "read") == 0 || t.scope[0] == '\0' ||
        (t.limited && strcmp(t.space, org) != 0)) {
        *why = "forbidden";
        return TG_CAT_NOT_FOUND;
    }
    return TG_CAT_OK;
}

typedef struct record_ctx {
    tg_mirror_record *out;
    bool seen;
    bool failed;
} record_ctx;

static void take_record(void *ctx, int columns, const char *const *v)
{
    record_ctx *r = ctx;
    if (r->seen || columns < 8)
        return;
    r->seen = true;
    tg_mirror_record *out = r->out;
    out->version_id = v[0] ? strtoll(v[0], NULL, 10) : 0;
    out->number = v[1] ? strtoll(v[1], NULL, 10) : 0;
    snprintf(out->endpoint, sizeof out->endpoint, "%s", v[2] ? v[2] : "");
    snprintf(out->repo, sizeof out->repo, "%s", v[3] ? v[3] : "");
    snprintf(out->revision, sizeof out->revision, "%s", v[4] ? v[4] : "");
    snprintf(out->commit, sizeof out->commit, "%s", v[5] ? v[5] : "");
    out->oids = strdup(v[6] ? v[6] : "{}");
    r->failed = out->oids == NULL;
    snprintf(out->created_at, sizeof out->created_at, "%s", v[7] ? v[7] : "");
}

#define RECORD_SELECT                                                                              \
    "SELECT m.version_id, v.number, m.endpoint, m.repo, m.revision, m.upstream_commit, m.oids,"    \
    " m.created_at FROM mirror_versions m JOIN versions v ON v.id = m.version_id"

static tg_cat_status one_record(tg_catalog *catalog, const char *sql, int n,
                                const char *const *params, tg_mirror_record *out)
{
    memset(out, 0, sizeof *out);
    record_ctx r = {.out = out};
    tg_cat_status status =
        catalog->ops->mirror_exec(catalog, false, sql, n, params, take_record, &r);
    if (status == TG_CAT_OK && r.failed)
        status = TG_CAT_ERROR;
    if (status == TG_CAT_OK && !r.seen)
        status = TG_CAT_NOT_FOUND;
    if (status != TG_CAT_OK) {
        free(out->oids);
        out->oids = NULL;
    }
    return status;
}

tg_cat_status tg_catalog_mirror_version_get(tg_catalog *catalog, int64_t version_id,
                                            tg_mirror_record *out)
{
    static const char sql[] = RECORD_SELECT " WHERE m.version_id = ?";
    text_num vid = num(version_id);
    const char *params[] = {vid.s};
    return one_record(catalog, sql, 1, params, out);
}

tg_cat_status tg_catalog_mirror_latest(tg_catalog *catalog, int64_t model_id, const char *endpoint,
                                       const char *repo, const char *commit, tg_mirror_record *out)
{
    static const char any_sql[] = RECORD_SELECT " WHERE m.model_id = ? AND m.endpoint = ? AND "
                                                "m.repo = ? ORDER BY m.version_id DESC LIMIT 1";
    static const char commit_sql[] = RECORD_SELECT
        " WHERE m.model_id = ? AND m.endpoint = ? AND m.repo = ? AND m.upstream_commit = ?"
        " ORDER BY m.version_id DESC LIMIT 1";
    text_num mid = num(model_id);
    const char *params[] = {mid.s, endpoint, repo, commit};
    return one_record(catalog, commit ? commit_sql : any_sql, commit ? 4 : 3, params, out);
}

tg_cat_status tg_catalog_mirror_version_add(tg_catalog *catalog, int64_t model_id,
                                            const tg_mirror_record *record)
{
    static const char sql[] =
        "INSERT INTO mirror_versions(version_id, model_id, endpoint, repo, revision,"
        " upstream_commit, oids, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    text_num vid = num(record->version_id), mid = num(model_id);
    const char *params[] = {vid.s,
                            mid.s,
                            record->endpoint,
                            record->repo,
                            record->revision,
                            record->commit,
                            record->oids ? record->oids : "{}",
                            now};
    return catalog->ops->mirror_exec(catalog, true, sql, 8, params, NULL, NULL);
}

tg_cat_status tg_catalog_mirror_result_set(tg_catalog *catalog, int64_t job_id, const char *result)
{
    static const char drop_sql[] = "DELETE FROM mirror_results WHERE job_id = ?";
    static const char sql[] = "INSERT INTO mirror_results(job_id, result) VALUES (?, ?)";
    text_num jid = num(job_id);
    const char *params[] = {jid.s, result};
    tg_cat_status status =
        catalog->ops->mirror_exec(catalog, true, drop_sql, 1, params, NULL, NULL);
    if (status == TG_CAT_OK)
        status = catalog->ops->mirror_exec(catalog, true, sql, 2, params, NULL, NULL);
    return status;
}

typedef struct text_ctx {
    char *text;
    bool seen;
} text_ctx;

static void take_text(void *ctx, int columns, const char *const *values)
{
    text_ctx *t = ctx;
    if (!t->seen && columns > 0) {
        t->seen = true;
        t->text = values[0] ? strdup(values[0]) : NULL;
    }
}

tg_cat_status tg_catalog_mirror_result_get(tg_catalog *catalog, int64_t job_id, char **out)
{
    static const char sql[] = "SELECT result FROM mirror_results WHERE job_id = ?";
    text_num jid = num(job_id);
    const char *params[] = {jid.s};
    text_ctx t = {0};
    tg_cat_status status = catalog->ops->mirror_exec(catalog, false, sql, 1, params, take_text, &t);
    *out = t.text;
    return status;
}

tg_cat_status tg_catalog_mirror_job_done(tg_catalog *catalog, int64_t job_id, int64_t number)
{
    static const char sql[] =
        "UPDATE jobs SET state = 'done', finished_at = ?, result_version = ?,"
        " lease_owner = NULL, lease_expires = NULL"
        " WHERE id = ? AND kind = 'mirror' AND state = 'running' AND error_reason IS NULL"
        " AND (lease_owner IS NULL OR lease_owner = ?) RETURNING id";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    text_num n = num(number), jid = num(job_id);
    const char *params[] = {now, n.s, jid.s, catalog->lease_owner};
    first_row row = {0};
    tg_cat_status status = catalog->ops->mirror_exec(catalog, true, sql, 4, params, take_id, &row);
    if (status == TG_CAT_OK && !row.seen)
        status = TG_CAT_CONFLICT;
    tg_catalog_job_scrub_urls(catalog, job_id);
    return status;
}
