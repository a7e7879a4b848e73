/* Hub writes (catalog.h, schema 17), written once for both backends over their
 * run_steps operation (catalog_backend.h): the LFS objects waiting for their commit
 * (hub_lfs_pending), the href signing secret every replica shares (hub_secrets), the
 * kinds of aliases (branch, tag), the branch a version was committed on, and quota
 * reservations (upload_reservations, serialised per org by quota_locks). Integers go
 * to the database as text and are cast there (CAST(? AS BIGINT)). */
#include "catalog.h"
#include "catalog_backend.h"
#include "catalog_sql.h"

#include <inttypes.h>
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

static num u64(uint64_t v)
{
    num out;
    snprintf(out.s, sizeof out.s, "%" PRIu64, v);
    return out;
}

static tg_cat_status run(tg_catalog *catalog, bool write, tg_cat_step *steps, size_t count)
{
    return catalog->ops->run_steps(catalog, write, steps, count);
}

/* ---- pending LFS objects ---- */

tg_cat_status tg_catalog_hub_pending_put(tg_catalog *catalog, const char *org, const char *model,
                                         int64_t token_id, const tg_file_record *file,
                                         const char *stats)
{
    static const char sql[] =
        "INSERT INTO hub_lfs_pending (org, sha256, size, kind, tensors, parameters, nan, inf,"
        " code_reason, stats, model, token_id, created_at) VALUES (?1, ?2, CAST(?3 AS BIGINT),"
        " ?4, CAST(?5 AS BIGINT), CAST(?6 AS BIGINT), CAST(?7 AS BIGINT), CAST(?8 AS BIGINT), ?9,"
        " ?10, ?11, CAST(?12 AS BIGINT), ?13) ON CONFLICT (org, sha256) DO UPDATE SET"
        " size = excluded.size, kind = excluded.kind, tensors = excluded.tensors,"
        " parameters = excluded.parameters, nan = excluded.nan, inf = excluded.inf,"
        " code_reason = excluded.code_reason, stats = excluded.stats, model = excluded.model,"
        " token_id = excluded.token_id, created_at = excluded.created_at";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    num size = u64(file->size), tensors = u64(file->tensors), parameters = u64(file->parameters),
        nan = u64(file->nan), inf = u64(file->inf), token = n64(token_id);
    const char *params[] = {org,
                            file->sha256,
                            size.s,
                            file->kind,
                            tensors.s,
                            parameters.s,
                            nan.s,
                            inf.s,
                            file->code_reason,
                            stats ? stats : "[]",
                            model,
                            token_id > 0 ? token.s : NULL,
                            now};
    tg_cat_step step = {sql, 13, params, NULL, NULL, true, 0};
    return run(catalog, true, &step, 1);
}

typedef struct pending_read {
    tg_file_record *file;
    char **stats;
    size_t stats_cap;
    bool failed;
} pending_read;

static void read_pending(void *ctx, tg_cat_row row)
{
    pending_read *r = ctx;
    tg_file_record *f = r->file;
    memset(f, 0, sizeof *f);
    row.text(&row, 0, f->sha256, sizeof f->sha256);
    f->size = (uint64_t)row.integer(&row, 1);
    row.text(&row, 2, f->kind, sizeof f->kind);
    f->tensors = (uint64_t)row.integer(&row, 3);
    f->parameters = (uint64_t)row.integer(&row, 4);
    f->nan = (uint64_t)row.integer(&row, 5);
    f->inf = (uint64_t)row.integer(&row, 6);
    row.text(&row, 7, f->code_reason, sizeof f->code_reason);
    row.text(&row, 8, f->created_at, sizeof f->created_at);
    /* the stats text's length in characters: at most 4 bytes each in UTF-8 */
    int64_t chars = row.integer(&row, 9);
    r->stats_cap = chars > 0 ? (size_t)chars * 4 + 1 : 1;
}

static void read_stats(void *ctx, tg_cat_row row)
{
    pending_read *r = ctx;
    if (r->stats == NULL)
        return;
    free(*r->stats);
    *r->stats = malloc(r->stats_cap);
    if (*r->stats == NULL) {
        r->failed = true;
        return;
    }
    row.text(&row, 0, *r->stats, r->stats_cap);
}

tg_cat_status tg_catalog_hub_pending_get(tg_catalog *catalog, const char *org, const char *sha256,
                                         uint64_t size, const char *since, tg_file_record *file,
                                         char **stats)
{
    static const char meta_sql[] =
        "SELECT sha256, size, kind, tensors, parameters, nan, inf, code_reason, created_at,"
        " length(stats) FROM hub_lfs_pending WHERE org = ?1 AND sha256 = ?2"
        " AND size = CAST(?3 AS BIGINT) AND created_at >= ?4";
    static const char stats_sql[] =
        "SELECT stats FROM hub_lfs_pending WHERE org = ?1 AND sha256 = ?2"
        " AND size = CAST(?3 AS BIGINT) AND created_at >= ?4";
    tg_file_record local = {0};
    num n = u64(size);
    const char *params[] = {org, sha256, n.s, since};
    pending_read r = {.file = file ? file : &local, .stats = stats};
    if (stats != NULL)
        *stats = NULL;
    tg_cat_step steps[] = {
        {meta_sql, 4, params, read_pending, &r, true, 0},
        {stats_sql, 4, params, read_stats, &r, true, 0},
    };
    tg_cat_status status = run(catalog, false, steps, stats != NULL ? 2 : 1);
    if (status == TG_CAT_OK && r.failed)
        status = TG_CAT_ERROR;
    if (status != TG_CAT_OK && stats != NULL) {
        free(*stats);
        *stats = NULL;
    }
    return status;
}

tg_cat_status tg_catalog_hub_pending_delete(tg_catalog *catalog, const char *org,
                                            const char *sha256)
{
    static const char sql[] = "DELETE FROM hub_lfs_pending WHERE org = ? AND sha256 = ?";
    const char *params[] = {org, sha256};
    tg_cat_step step = {sql, 2, params, NULL, NULL, true, 0};
    return run(catalog, true, &step, 1);
}

typedef struct expire_visit {
    void (*visit)(void *ctx, const char *sha256);
    void *ctx;
} expire_visit;

static void read_expired(void *ctx, tg_cat_row row)
{
    expire_visit *e = ctx;
    char sha256[65];
    row.text(&row, 0, sha256, sizeof sha256);
    if (e->visit != NULL)
        e->visit(e->ctx, sha256);
}

tg_cat_status tg_catalog_hub_pending_expire(tg_catalog *catalog, const char *before,
                                            void (*visit)(void *ctx, const char *sha256), void *ctx)
{
    static const char sql[] = "DELETE FROM hub_lfs_pending WHERE created_at < ? RETURNING sha256";
    expire_visit e = {visit, ctx};
    const char *params[] = {before};
    tg_cat_step step = {sql, 1, params, read_expired, &e, false, 0};
    return run(catalog, true, &step, 1);
}

/* ---- the shared href secret ---- */

typedef struct text_out {
    char *dst;
    size_t cap;
} text_out;

static void read_text(void *ctx, tg_cat_row row)
{
    text_out *t = ctx;
    row.text(&row, 0, t->dst, t->cap);
}

tg_cat_status tg_catalog_hub_secret(tg_catalog *catalog, const char *name, const char *candidate,
                                    char *value, size_t cap)
{
    static const char insert_sql[] =
        "INSERT INTO hub_secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING";
    static const char select_sql[] = "SELECT value FROM hub_secrets WHERE name = ?";
    const char *insert_params[] = {name, candidate};
    const char *select_params[] = {name};
    text_out out = {value, cap};
    tg_cat_step steps[] = {
        {insert_sql, 2, insert_params, NULL, NULL, false, 0},
        {select_sql, 1, select_params, read_text, &out, true, 0},
    };
    return run(catalog, true, steps, 2);
}

/* ---- branches and tags ---- */

typedef struct kinds_visit {
    tg_alias_kind_visit visit;
    void *ctx;
} kinds_visit;

static void read_alias_kind(void *ctx, tg_cat_row row)
{
    kinds_visit *k = ctx;
    char name[TG_NAME_MAX + 1], kind[8];
    row.text(&row, 0, name, sizeof name);
    row.text(&row, 2, kind, sizeof kind);
    k->visit(k->ctx, name, row.integer(&row, 1), kind);
}

tg_cat_status tg_catalog_alias_list_kinds(tg_catalog *catalog, int64_t model_id,
                                          tg_alias_kind_visit visit, void *ctx)
{
    static const char sql[] = "SELECT name, number, kind FROM aliases"
                              " WHERE model_id = CAST(? AS BIGINT) ORDER BY name";
    num m = n64(model_id);
    const char *params[] = {m.s};
    kinds_visit k = {visit, ctx};
    tg_cat_step step = {sql, 1, params, read_alias_kind, &k, false, 0};
    return run(catalog, false, &step, 1);
}

tg_cat_status tg_catalog_alias_set_kind(tg_catalog *catalog, int64_t model_id, const char *alias,
                                        int64_t number, const char *kind, bool overwrite)
{
    static const char create_sql[] =
        "INSERT INTO aliases (model_id, name, number, kind) VALUES (CAST(?1 AS BIGINT), ?2,"
        " CAST(?3 AS BIGINT), ?4) ON CONFLICT (model_id, name) DO NOTHING";
    static const char set_sql[] =
        "INSERT INTO aliases (model_id, name, number, kind) VALUES (CAST(?1 AS BIGINT), ?2,"
        " CAST(?3 AS BIGINT), ?4) ON CONFLICT (model_id, name) DO UPDATE SET"
        " number = excluded.number, kind = excluded.kind";
    num m = n64(model_id), n = n64(number);
    const char *params[] = {m.s, alias, n.s, kind};
    tg_cat_step step = {overwrite ? set_sql : create_sql, 4, params, NULL, NULL, true, 0};
    tg_cat_status status = run(catalog, true, &step, 1);
    return status == TG_CAT_NOT_FOUND ? TG_CAT_EXISTS : status;
}

typedef struct alias_read {
    int64_t *number;
    char *kind;
} alias_read;

static void read_alias(void *ctx, tg_cat_row row)
{
    alias_read *a = ctx;
    *a->number = row.integer(&row, 0);
    row.text(&row, 1, a->kind, 8);
}

tg_cat_status tg_catalog_alias_kind(tg_catalog *catalog, int64_t model_id, const char *alias,
                                    int64_t *number, char kind[8])
{
    static const char sql[] =
        "SELECT number, kind FROM aliases WHERE model_id = CAST(? AS BIGINT) AND name = ?";
    num m = n64(model_id);
    const char *params[] = {m.s, alias};
    alias_read a = {number, kind};
    tg_cat_step step = {sql, 2, params, read_alias, &a, true, 0};
    return run(catalog, false, &step, 1);
}

tg_cat_status tg_catalog_version_set_branch(tg_catalog *catalog, int64_t version_id,
                                            const char *branch)
{
    static const char sql[] =
        "UPDATE versions SET branch = ? WHERE id = CAST(? AS BIGINT) AND state = 'draft'";
    num v = n64(version_id);
    const char *params[] = {branch, v.s};
    tg_cat_step step = {sql, 2, params, NULL, NULL, true, 0};
    return run(catalog, true, &step, 1);
}

tg_cat_status tg_catalog_branch_move(tg_catalog *catalog, int64_t model_id, const char *branch,
                                     int64_t from, int64_t to)
{
    static const char sql[] =
        "UPDATE aliases SET number = CAST(?4 AS BIGINT) WHERE model_id = CAST(?1 AS BIGINT)"
        " AND name = ?2 AND number = CAST(?3 AS BIGINT)";
    num m = n64(model_id), f = n64(from), t = n64(to);
    const char *params[] = {m.s, branch, f.s, t.s};
    tg_cat_step step = {sql, 4, params, NULL, NULL, true, 0};
    tg_cat_status status = run(catalog, true, &step, 1);
    return status == TG_CAT_NOT_FOUND ? TG_CAT_CONFLICT : status;
}

/* ---- quota reservations ---- */

tg_cat_status tg_catalog_quota_reserve(tg_catalog *catalog, const char *org, const char *id,
                                       uint64_t bytes, uint64_t quota, const char *since)
{
    /* the lock row first: PostgreSQL holds its row lock to the commit, so the check
     * and the insert of one org run one at a time (SQLite has one writer anyway) */
    static const char lock_sql[] = "INSERT INTO quota_locks (org) VALUES (?)"
                                   " ON CONFLICT (org) DO UPDATE SET org = excluded.org";
    static const char stale_sql[] =
        "DELETE FROM upload_reservations WHERE org = ? AND created_at < ?";
    static const char reserve_sql[] =
        "INSERT INTO upload_reservations (id, org, bytes, created_at)"
        " SELECT ?1, ?2, CAST(?3 AS BIGINT), ?4 WHERE " TG_CAT_SQL_NAMESPACE_USAGE_OF(
            "?2") " + (SELECT coalesce(sum(bytes), 0) FROM upload_reservations WHERE org = ?2)"
                  " + CAST(?3 AS BIGINT) <= CAST(?5 AS BIGINT)";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    num b = u64(bytes), q = u64(quota);
    const char *lock_params[] = {org};
    const char *stale_params[] = {org, since};
    const char *reserve_params[] = {id, org, b.s, now, q.s};
    tg_cat_step steps[] = {
        {lock_sql, 1, lock_params, NULL, NULL, false, 0},
        {stale_sql, 2, stale_params, NULL, NULL, false, 0},
        {reserve_sql, 5, reserve_params, NULL, NULL, true, 0},
    };
    tg_cat_status status = run(catalog, true, steps, 3);
    return status == TG_CAT_NOT_FOUND ? TG_CAT_CONFLICT : status;
}

static void read_u64(void *ctx, tg_cat_row row)
{
    int64_t v = row.integer(&row, 0);
    *(uint64_t *)ctx = v > 0 ? (uint64_t)v : 0;
}

tg_cat_status tg_catalog_quota_reserved(tg_catalog *catalog, const char *org, const char *since,
                                        uint64_t *bytes)
{
    static const char sql[] = "SELECT CAST(coalesce(sum(bytes), 0) AS BIGINT)"
                              " FROM upload_reservations WHERE org = ? AND created_at >= ?";
    *bytes = 0;
    const char *params[] = {org, since};
    tg_cat_step step = {sql, 2, params, read_u64, bytes, false, 0};
    return run(catalog, false, &step, 1);
}

tg_cat_status tg_catalog_quota_release(tg_catalog *catalog, const char *id)
{
    static const char sql[] = "DELETE FROM upload_reservations WHERE id = ?";
    const char *params[] = {id};
    tg_cat_step step = {sql, 1, params, NULL, NULL, true, 0};
    return run(catalog, true, &step, 1);
}
