/* What the SQL catalog backends (catalog_sqlite.c, catalog_pg.c) share, written
 * once: the column lists, the row decoders (over tg_cat_row, a small reader each
 * backend implements for its own result type), the enum <-> text tables, the SQL
 * text of every statement both dialects agree on (with "?" or "?N" placeholders,
 * which tg_cat_sql_numbered rewrites to PostgreSQL's "$N"), and the migration
 * driver (over tg_cat_migrator, which each backend implements). A backend keeps
 * only what truly differs: connections, transactions, locking and the statements
 * whose dialects differ. Only server/storage/ includes this header. */
#ifndef TG_CATALOG_SQL_H
#define TG_CATALOG_SQL_H

#include "catalog.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- column lists: the decoders below read them in this order ---- */

#define TG_CAT_MODEL_COLUMNS "id, org, name, description, created_at"
#define TG_CAT_VERSION_COLUMNS                                                                     \
    "id, model_id, number, state, created_at, published_at, digest, derived_from, derived_dtype"
#define TG_CAT_FILE_COLUMNS                                                                        \
    "path, kind, size, sha256, tensors, parameters, nan, inf, created_at, source_url"
#define TG_CAT_JOB_COLUMNS                                                                         \
    "j.id, j.state, j.model_id, m.org, m.name, j.source_version_id, v.number, j.dtype,"            \
    " j.tensors, j.bytes_done, j.bytes_total, j.attempts, j.result_version, j.error_reason,"       \
    " j.error_detail, j.created_at, j.started_at, j.finished_at, j.token_id, j.lease_owner,"       \
    " j.kind, j.url, j.path"
#define TG_CAT_JOB_FROM                                                                            \
    " FROM jobs j JOIN models m ON m.id = j.model_id JOIN versions v ON v.id = "                   \
    "j.source_version_id"

/* ---- rows ---- */

/* One row of a backend's result, as the decoders read it: a column's integer
 * (SQL NULL reads as 0) and its text (NULL reads as "", cut to len - 1 bytes). */
typedef struct tg_cat_row tg_cat_row;
struct tg_cat_row {
    int64_t (*integer)(const tg_cat_row *row, int column);
    void (*text)(const tg_cat_row *row, int column, char *dst, size_t len);
    const void *result; /* the backend's: an SQLite statement, a PGresult */
    int index;          /* the row's number within result (PostgreSQL) */
};

/* Decoders of the column lists above (a row is passed by value: the backend's
 * sq_row(st) or pg_row(result, i) makes one). */
void tg_cat_read_model(tg_cat_row row, tg_model *out);
void tg_cat_read_version(tg_cat_row row, tg_version *out);
void tg_cat_read_file(tg_cat_row row, tg_file_record *out);
void tg_cat_read_job(tg_cat_row row, tg_job *out);

/* ---- enum <-> text ---- */

/* A token scope as stored ("read", "write", "admin"); NULL for TG_SCOPE_NONE. */
const char *tg_cat_scope_name(tg_scope scope);
/* The scope text names; TG_SCOPE_NONE for anything else (NULL included). */
tg_scope tg_cat_scope_from_name(const char *text);
/* The job state text names (tg_job_state_name's); TG_JOB_FAILED for anything else. */
tg_job_state tg_cat_job_state_from_name(const char *text);

/* ---- placeholders ---- */

/* Writes sql into out (out_len bytes) with each placeholder outside a quoted
 * literal numbered the PostgreSQL way: "?" is "$k" for the k-th plain "?", "?N"
 * is "$N". False (out undefined) when out is too small. */
bool tg_cat_sql_numbered(const char *sql, char *out, size_t out_len);

/* ---- migrations ---- */

/* What the migration driver needs of a backend, on the one connection the backend
 * holds for the whole run (under its lock). Each answers 0, or -1 with err filled
 * (one sentence). */
typedef struct tg_cat_migrator {
    void *ctx;
    /* The schema version the catalog is at (0: a new catalog). */
    int (*version)(void *ctx, int *version, char *err, size_t err_len);
    /* Applies migration number and records it, in one transaction. */
    int (*apply)(void *ctx, int number, char *err, size_t err_len);
} tg_cat_migrator;

/* Brings the catalog to schema version known: refuses one that is newer (err says
 * so), applies the missing migrations in order. TG_CAT_OK or TG_CAT_ERROR. */
tg_cat_status tg_cat_migrate(const tg_cat_migrator *migrator, int known, char *err, size_t err_len);

#endif
