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

#define TG_CAT_MODEL_COLUMNS "id, org, name, description, created_at, downloads"
#define TG_CAT_VERSION_COLUMNS                                                                     \
    "id, model_id, number, state, created_at, published_at, digest, derived_from, derived_dtype,"  \
    " deprecated_at, deprecated_reason, deleted_at"
#define TG_CAT_FILE_COLUMNS                                                                        \
    "path, kind, size, sha256, tensors, parameters, nan, inf, created_at, source_url, code_reason"
#define TG_CAT_JOB_COLUMNS                                                                         \
    "j.id, j.state, j.model_id, m.org, m.name, j.source_version_id, v.number, j.dtype,"            \
    " j.tensors, j.bytes_done, j.bytes_total, j.attempts, j.result_version, j.error_reason,"       \
    " j.error_detail, j.created_at, j.started_at, j.finished_at, j.token_id, j.lease_owner,"       \
    " j.kind, j.url, j.path"
#define TG_CAT_REJECTION_COLUMNS                                                                   \
    "id, time, model, coalesce(version, -1), path, reason, format, detail, client, size,"          \
    " findings, sha256, namespace, token_id, route, job_id, outcome"
#define TG_CAT_JOB_FROM                                                                            \
    " FROM jobs j JOIN models m ON m.id = j.model_id JOIN versions v ON v.id = "                   \
    "j.source_version_id"

#define TG_CAT_AUDIT_COLUMNS                                                                       \
    "seq, time, token_id, namespace, action, resource, status, reason, request_id, client,"        \
    " user_agent, prev_hash, hash"

/* ---- statements both dialects agree on ----
 * Placeholders are "?" (numbered in order) or "?N" (one form per statement):
 * SQLite binds them as they are, PostgreSQL gets them as "$N"
 * (tg_cat_sql_numbered, at the call). Each backend binds the same values in the
 * same order; the statements that differ stay in the backend's own file. */

#define TG_CAT_SQL_SCHEMA_VERSION "SELECT coalesce(max(version), 0) FROM schema_migrations"
#define TG_CAT_SQL_PING "SELECT count(*) FROM schema_migrations"
#define TG_CAT_SQL_MODEL_GET                                                                       \
    "SELECT " TG_CAT_MODEL_COLUMNS " FROM models WHERE org = ? AND name = ?"
#define TG_CAT_SQL_MODEL_DELETE "DELETE FROM models WHERE id = ?"
#define TG_CAT_SQL_VERSION_GET                                                                     \
    "SELECT " TG_CAT_VERSION_COLUMNS " FROM versions WHERE model_id = ? AND number = ?"
#define TG_CAT_SQL_VERSION_BY_DIGEST                                                               \
    "SELECT " TG_CAT_VERSION_COLUMNS " FROM versions WHERE model_id = ? AND digest = ?"            \
    " ORDER BY number DESC LIMIT 1"
#define TG_CAT_SQL_VERSION_LATEST_PUBLISHED                                                        \
    "SELECT " TG_CAT_VERSION_COLUMNS " FROM versions WHERE model_id = ? AND state = 'published'"   \
    " AND deprecated_at IS NULL AND deleted_at IS NULL AND branch IS NULL"                         \
    " ORDER BY number DESC LIMIT 1"
#define TG_CAT_SQL_VERSION_LIST                                                                    \
    "SELECT " TG_CAT_VERSION_COLUMNS " FROM versions WHERE model_id = ? AND deleted_at IS NULL"    \
    " ORDER BY number"
/* a version by its commit id (the first 40 hex digits of its digest): published only,
 * the lower number on a prefix collision */
#define TG_CAT_SQL_VERSION_BY_COMMIT                                                               \
    "SELECT " TG_CAT_VERSION_COLUMNS " FROM versions WHERE model_id = ? AND state = 'published'"   \
    " AND substr(digest, 1, 40) = ? ORDER BY number LIMIT 1"
/* schema 10: the files that mark versions as holding code */
#define TG_CAT_SQL_CODE_FILES                                                                      \
    "SELECT v.number, f.path, f.code_reason FROM files f JOIN versions v ON v.id = f.version_id"   \
    " WHERE v.model_id = ?1 AND (?2 = 0 OR v.number = ?2) AND f.kind = 'code'"                     \
    " ORDER BY v.number, f.path"
/* schema 10: one row per namespace, one column per setting */
#define TG_CAT_SQL_NAMESPACE_GET                                                                   \
    "SELECT allow_code, updated_at, coalesce(quota_bytes, -1) FROM namespace_settings WHERE org "  \
    "= ?"
#define TG_CAT_SQL_NAMESPACE_SET_CODE                                                              \
    "INSERT INTO namespace_settings(org, allow_code, updated_at) VALUES (?, ?, ?)"                 \
    " ON CONFLICT (org) DO UPDATE SET allow_code = excluded.allow_code,"                           \
    " updated_at = excluded.updated_at"
#define TG_CAT_SQL_ALIAS_SET                                                                       \
    "INSERT INTO aliases(model_id, name, number) VALUES (?, ?, ?)"                                 \
    " ON CONFLICT (model_id, name) DO UPDATE SET number = excluded.number"
#define TG_CAT_SQL_ALIAS_GET "SELECT number FROM aliases WHERE model_id = ? AND name = ?"
#define TG_CAT_SQL_ALIAS_DELETE "DELETE FROM aliases WHERE model_id = ? AND name = ?"
/* a draft only (its files go with it, ON DELETE CASCADE): a published version stays */
#define TG_CAT_SQL_VERSION_DELETE_DRAFT "DELETE FROM versions WHERE id = ? AND state = 'draft'"
#define TG_CAT_SQL_SIGNING_SET                                                                     \
    "INSERT INTO namespace_signing(org, policy) VALUES (?, ?)"                                     \
    " ON CONFLICT (org) DO UPDATE SET policy = excluded.policy"
#define TG_CAT_SQL_SIGNING_GET "SELECT policy FROM namespace_signing WHERE org = ?"
#define TG_CAT_SQL_ALIAS_LIST "SELECT name, number FROM aliases WHERE model_id = ? ORDER BY name"
#define TG_CAT_SQL_TOKEN_SCOPE "SELECT scope, namespace FROM tokens WHERE hash = ?"
#define TG_CAT_SQL_FILE_GET                                                                        \
    "SELECT " TG_CAT_FILE_COLUMNS " FROM files WHERE version_id = ? AND path = ?"
#define TG_CAT_SQL_FILE_STATS "SELECT tensor_stats FROM files WHERE version_id = ? AND path = ?"
#define TG_CAT_SQL_FILE_DELETE "DELETE FROM files WHERE version_id = ? AND path = ?"
/* a rejection's columns, in the order of its parameters ("" and -1/0 bind as NULL) */
#define TG_CAT_SQL_REJECTION_ADD                                                                   \
    "INSERT INTO rejections(time, model, version, path, reason, format, detail, client, size,"     \
    " findings, sha256, namespace, token_id, route, job_id, outcome)"                              \
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
/* the rejections a tg_rejection_filter keeps, newest first: ?1 before_id (0: any),
 * ?2 reason, ?3 namespace, ?4 since, ?5 until, ?6 sha256 (NULL: any), ?7 the limit */
#define TG_CAT_SQL_REJECTION_LIST                                                                  \
    "SELECT " TG_CAT_REJECTION_COLUMNS " FROM rejections"                                          \
    " WHERE (CAST(?1 AS BIGINT) <= 0 OR id < CAST(?1 AS BIGINT))"                                  \
    " AND (CAST(?2 AS TEXT) IS NULL OR reason = CAST(?2 AS TEXT))"                                 \
    " AND (CAST(?3 AS TEXT) IS NULL OR namespace = CAST(?3 AS TEXT))"                              \
    " AND (CAST(?4 AS TEXT) IS NULL OR time >= CAST(?4 AS TEXT))"                                  \
    " AND (CAST(?5 AS TEXT) IS NULL OR time < CAST(?5 AS TEXT))"                                   \
    " AND (CAST(?6 AS TEXT) IS NULL OR sha256 = CAST(?6 AS TEXT))"                                 \
    " ORDER BY id DESC LIMIT CAST(?7 AS BIGINT)"
#define TG_CAT_SQL_TOKEN_ADD                                                                       \
    "INSERT INTO tokens(hash, scope, namespace, created_at) VALUES (?, ?, ?, ?)"
#define TG_CAT_SQL_TOKEN_EACH "SELECT id, scope, namespace, created_at FROM tokens ORDER BY id"
#define TG_CAT_SQL_TOKEN_REVOKE "DELETE FROM tokens WHERE id = ?"
/* schema 17: a Hub LFS object waiting for its commit is referenced too (gc keeps it) */
#define TG_CAT_SQL_BLOB_REFERENCED                                                                 \
    "SELECT 1 FROM files WHERE sha256 = ?1"                                                        \
    " UNION ALL SELECT 1 FROM job_files WHERE sha256 = ?1"                                         \
    " UNION ALL SELECT 1 FROM hub_lfs_pending WHERE sha256 = ?1 LIMIT 1"
/* The bytes org (the placeholder p) holds, a parenthesised scalar subquery: each
 * distinct blob (sha256) of the files of its models' versions, and of its pending Hub
 * LFS objects (schema 17), counted once at its size. */
#define TG_CAT_SQL_NAMESPACE_USAGE_OF(p)                                                           \
    "(SELECT CAST(coalesce(sum(size), 0) AS BIGINT) FROM (SELECT f.sha256 AS sha256,"              \
    " max(f.size) AS size FROM files f JOIN versions v ON v.id = f.version_id"                     \
    " JOIN models m ON m.id = v.model_id WHERE m.org = " p " GROUP BY f.sha256"                    \
    " UNION SELECT sha256, size FROM hub_lfs_pending WHERE org = " p ") blobs)"
#define TG_CAT_SQL_TOKEN_ID "SELECT id FROM tokens WHERE hash = ?"
/* the audit log (schema 11): the appender's token, the chain's last row, the insert,
 * and the filtered list (every filter NULL or 0 when unset; CASTs so that PostgreSQL
 * knows each parameter's type) */
#define TG_CAT_SQL_AUDIT_TOKEN "SELECT id, coalesce(namespace, '') FROM tokens WHERE hash = ?"
#define TG_CAT_SQL_AUDIT_LAST "SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1"
#define TG_CAT_SQL_AUDIT_INSERT                                                                    \
    "INSERT INTO audit_log(" TG_CAT_AUDIT_COLUMNS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, " \
    "?)"
#define TG_CAT_SQL_AUDIT_LIST                                                                      \
    "SELECT " TG_CAT_AUDIT_COLUMNS " FROM audit_log WHERE seq > CAST(?1 AS BIGINT)"                \
    " AND (CAST(?2 AS TEXT) IS NULL OR time >= CAST(?2 AS TEXT))"                                  \
    " AND (CAST(?3 AS TEXT) IS NULL OR time < CAST(?3 AS TEXT))"                                   \
    " AND (CAST(?4 AS BIGINT) = 0 OR (CAST(?4 AS BIGINT) > 0 AND token_id = CAST(?4 AS BIGINT))"   \
    " OR (CAST(?4 AS BIGINT) < 0 AND token_id IS NULL))"                                           \
    " AND (CAST(?5 AS TEXT) IS NULL OR namespace = CAST(?5 AS TEXT))"                              \
    " AND (CAST(?6 AS TEXT) IS NULL OR action = CAST(?6 AS TEXT))"                                 \
    " AND (CAST(?7 AS TEXT) IS NULL"                                                               \
    " OR substr(resource, 1, length(CAST(?7 AS TEXT))) = CAST(?7 AS TEXT))"                        \
    " AND (CAST(?8 AS INTEGER) = 0 OR status = CAST(?8 AS INTEGER))"                               \
    " AND (CAST(?9 AS INTEGER) = 0 OR (CAST(?9 AS INTEGER) = 1 AND status < 400)"                  \
    " OR (CAST(?9 AS INTEGER) = 2 AND status IN (401, 403))"                                       \
    " OR (CAST(?9 AS INTEGER) = 3 AND status >= 400))"                                             \
    " ORDER BY seq LIMIT CAST(?10 AS BIGINT)"
#define TG_CAT_SQL_MODEL_BLOBS                                                                     \
    "SELECT f.sha256 FROM files f JOIN versions v ON v.id = f.version_id WHERE v.model_id = ?1"    \
    " UNION SELECT jf.sha256 FROM job_files jf JOIN jobs j ON j.id = jf.job_id"                    \
    " WHERE j.model_id = ?1"
#define TG_CAT_SQL_JOB_GET "SELECT " TG_CAT_JOB_COLUMNS TG_CAT_JOB_FROM " WHERE j.id = ?"
#define TG_CAT_SQL_JOB_COUNTS "SELECT state, count(*) FROM jobs GROUP BY state"
#define TG_CAT_SQL_JOB_RELEASE                                                                     \
    "UPDATE jobs SET lease_expires = 0 WHERE id = ? AND state = 'running' AND lease_owner = ?"
#define TG_CAT_SQL_JOB_PROGRESS                                                                    \
    "UPDATE jobs SET bytes_done = ?, bytes_total = ? WHERE id = ?"                                 \
    " AND (lease_owner IS NULL OR lease_owner = ?)"
#define TG_CAT_SQL_JOB_FAIL                                                                        \
    "UPDATE jobs SET state = 'failed', finished_at = ?, error_reason = ?,"                         \
    " error_detail = coalesce(?, error_detail), lease_owner = NULL"                                \
    " WHERE id = ? AND state IN ('queued', 'running')"
#define TG_CAT_SQL_JOB_FILES_DROP "DELETE FROM job_files WHERE job_id = ?"
#define TG_CAT_SQL_JOB_CANCEL_RUNNING                                                              \
    "UPDATE jobs SET error_reason = 'cancelled',"                                                  \
    " error_detail = 'cancelled while it ran; its partial output was discarded'"                   \
    " WHERE id = ? AND state = 'running'"
#define TG_CAT_SQL_JOB_FILE_LIST                                                                   \
    "SELECT path, kind, size, sha256, tensors, parameters, nan, inf, '', NULL, NULL"               \
    " FROM job_files WHERE job_id = ? ORDER BY path"
#define TG_CAT_SQL_JOB_COMMIT_CARRIED                                                              \
    "INSERT INTO files(version_id, path, kind, size, sha256, tensors, parameters, nan, inf,"       \
    " tensor_stats, created_at, code_reason)"                                                      \
    " SELECT ?1, path, kind, size, sha256, tensors, parameters, nan, inf, tensor_stats, ?2,"       \
    " code_reason FROM files WHERE version_id = ?3"                                                \
    " AND path NOT IN (SELECT path FROM job_files WHERE job_id = ?4)"
#define TG_CAT_SQL_JOB_COMMIT_MADE                                                                 \
    "INSERT INTO files(version_id, path, kind, size, sha256, tensors, parameters, nan, inf,"       \
    " tensor_stats, created_at)"                                                                   \
    " SELECT ?1, path, kind, size, sha256, tensors, parameters, nan, inf, tensor_stats, ?2"        \
    " FROM job_files WHERE job_id = ?3"
#define TG_CAT_SQL_JOB_COMMIT_DONE                                                                 \
    "UPDATE jobs SET state = 'done', result_version = ?, finished_at = ?,"                         \
    " bytes_done = bytes_total, lease_owner = NULL WHERE id = ?"
#define TG_CAT_SQL_IMPORT_JOB_ACTIVE                                                               \
    "SELECT id FROM jobs WHERE state IN ('queued', 'running') AND error_reason IS NULL"            \
    " AND kind = 'import' AND source_version_id = ? AND path = ? AND url = ?"                      \
    " ORDER BY id LIMIT 1"
#define TG_CAT_SQL_JOB_SET_ENDED_URL                                                               \
    "UPDATE jobs SET url = ?1 WHERE id = ?2 AND state IN ('done', 'failed')"

/* registry metadata (schema 15) */
#define TG_CAT_SQL_MODEL_TAG_LIST                                                                  \
    "SELECT key, value FROM model_tags WHERE model_id = ? ORDER BY key"
#define TG_CAT_SQL_VERSION_TAG_LIST                                                                \
    "SELECT key, value FROM version_tags WHERE version_id = ? ORDER BY key"
#define TG_CAT_SQL_MODEL_TAG_SET                                                                   \
    "INSERT INTO model_tags(model_id, key, value) VALUES (?, ?, ?)"                                \
    " ON CONFLICT (model_id, key) DO UPDATE SET value = excluded.value"
#define TG_CAT_SQL_VERSION_TAG_SET                                                                 \
    "INSERT INTO version_tags(version_id, key, value) VALUES (?, ?, ?)"                            \
    " ON CONFLICT (version_id, key) DO UPDATE SET value = excluded.value"
#define TG_CAT_SQL_MODEL_TAG_DELETE "DELETE FROM model_tags WHERE model_id = ? AND key = ?"
#define TG_CAT_SQL_VERSION_TAG_DELETE "DELETE FROM version_tags WHERE version_id = ? AND key = ?"
#define TG_CAT_SQL_MODEL_TAG_COUNT "SELECT count(*) FROM model_tags WHERE model_id = ?"
#define TG_CAT_SQL_VERSION_TAG_COUNT "SELECT count(*) FROM version_tags WHERE version_id = ?"
#define TG_CAT_SQL_MODEL_DESCRIBE "UPDATE models SET description = ? WHERE id = ?"
#define TG_CAT_SQL_VERSION_DESCRIBE "UPDATE versions SET description = ? WHERE id = ?"
#define TG_CAT_SQL_MODEL_EXISTS "SELECT 1 FROM models WHERE id = ?"
#define TG_CAT_SQL_VERSION_OF_MODEL "SELECT 1 FROM versions WHERE id = ? AND model_id = ?"
#define TG_CAT_SQL_VERSION_DESCRIPTION "SELECT description FROM versions WHERE id = ?"
#define TG_CAT_SQL_HUB_TAGS_DROP "DELETE FROM version_hub_tags WHERE version_id = ?"
#define TG_CAT_SQL_HUB_TAG_ADD                                                                     \
    "INSERT INTO version_hub_tags(version_id, tag) VALUES (?, ?) ON CONFLICT DO NOTHING"
#define TG_CAT_SQL_HUB_TAG_LIST                                                                    \
    "SELECT CASE WHEN value = '' THEN key ELSE key || ':' || value END, 0, key"                    \
    " FROM model_tags WHERE model_id = ?1"                                                         \
    " UNION ALL SELECT tag, 1, tag FROM version_hub_tags WHERE version_id ="                       \
    " (SELECT id FROM versions WHERE model_id = ?1 AND state = 'published'"                        \
    " AND branch IS NULL ORDER BY number DESC LIMIT 1) ORDER BY 2, 3"
/* a converted version keeps its source's Hub tags (the same card; its GGUF files too) */
#define TG_CAT_SQL_HUB_TAGS_COPY                                                                   \
    "INSERT INTO version_hub_tags(version_id, tag)"                                                \
    " SELECT ?1, tag FROM version_hub_tags WHERE version_id = ?2"
#define TG_CAT_SQL_DOWNLOADS_ADD "UPDATE models SET downloads = downloads + ? WHERE id = ?"

/* The SQL of a model search (tg_model_search) into out, with "?N" placeholders
 * for the text values it puts in binds (*bind_count of them, at most
 * TG_CAT_SEARCH_BINDS); pg: PostgreSQL's dialect (strpos), else SQLite's (instr).
 * False when out is too small. */
#define TG_CAT_SEARCH_BINDS (8 + 3 * TG_SEARCH_TAGS_MAX)
bool tg_cat_sql_model_search(const tg_model_search *search, bool pg, char *out, size_t out_len,
                             const char *binds[TG_CAT_SEARCH_BINDS], int *bind_count);
/* Schema 12: an event into the webhook outbox, inside whatever transaction runs it
 * (so it commits or rolls back with the change it reports). Parameters: id
 * (tg_webhook_new_id), org, type, created_at (tg_time_now), data (a JSON object's
 * text). Written only when an enabled subscription of org asks for type; the
 * webhook_fanout trigger makes its deliveries. A backend operation that records
 * a change with an event (say, a signature check's failure: "signature.invalid")
 * runs this statement on its transaction's connection, with these five text
 * parameters, before its COMMIT. */
#define TG_CAT_SQL_WEBHOOK_EVENT_ADD                                                               \
    "INSERT INTO webhook_events (id, org, type, created_at, data)"                                 \
    " SELECT CAST(?1 AS TEXT), CAST(?2 AS TEXT), CAST(?3 AS TEXT), CAST(?4 AS TEXT),"              \
    " CAST(?5 AS TEXT) WHERE EXISTS (SELECT 1 FROM webhook_subscriptions WHERE org = ?2"           \
    " AND enabled = 1 AND events LIKE '%,' || ?3 || ',%')"

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
void tg_cat_read_audit(tg_cat_row row, tg_audit_record *out); /* TG_CAT_AUDIT_COLUMNS */
void tg_cat_read_job(tg_cat_row row, tg_job *out);
void tg_cat_read_rejection(tg_cat_row row, tg_rejection *out);
/* A row of TG_CAT_SQL_JOB_COUNTS (state, count) into counts; a state this binary
 * does not know is left out. */
void tg_cat_read_job_count(tg_cat_row row, uint64_t counts[TG_JOB_STATES]);

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
