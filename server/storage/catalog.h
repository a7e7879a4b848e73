/* The catalog: models, versions, files, aliases, rejections, tokens, jobs, webhooks.
 *
 * A narrow, SQL-free interface with a backend behind it (catalog_backend.h):
 * tg_catalog_open chooses it from the catalog URL: SQLite (catalog_sqlite.c: WAL,
 * one writer connection, a pool of read connections so reads run concurrently,
 * prepared statements, migrations applied in order at open; one server process
 * per file) or PostgreSQL (catalog_pg.c: a bounded connection pool, shared by any
 * number of server processes, every cross-process rule a transaction). Every function is safe to
 * call from any server thread. A write that has returned is seen by every call that starts after
 * it, on any thread. Records are plain structs with bounded fields; the HTTP layer validates names
 * and paths before they get here.
 *
 * Visitors (every `visit` callback below) run on the calling thread, row by row,
 * while the call reads from its own read connection: the catalog holds no lock
 * while a visitor runs. A visitor may therefore call any tg_catalog_* function,
 * writes included (a nested read gets another connection and sees what has been
 * committed; the outer iteration keeps the snapshot it started with), and may take
 * its own locks in any order. It should still be quick: the open read snapshot
 * keeps the WAL from being checkpointed past it. Copy what you need
 * (tg_file_records_collect) and do slow work (I/O, hashing, HTTP) after the call
 * returns. */
#ifndef TG_CATALOG_H
#define TG_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "audit_record.h"

#define TG_NAME_MAX 64  /* each of org and name */
#define TG_PATH_MAX 255 /* a file path inside a version */
#define TG_URL_MAX 2048 /* an import's source URL */
#define TG_DESCRIPTION_MAX 4096
#define TG_TIME_LEN 32 /* "2024-01-02T03:04:05Z" */
#define TG_DEPRECATION_REASON_MAX 512

typedef struct tg_catalog tg_catalog;

typedef enum tg_cat_status {
    TG_CAT_OK = 0,
    TG_CAT_NOT_FOUND,
    TG_CAT_EXISTS,   /* unique key taken */
    TG_CAT_CONFLICT, /* state forbids it (a published version) */
    TG_CAT_ERROR,    /* the catalog failed (a bug, a corrupt file, out of memory...) */
    /* The catalog could not be reached in time (PostgreSQL down, a connection lost,
     * a statement, a lock or the pool timed out): the server answers 503
     * catalog_unavailable with Retry-After (tg_respond_catalog_failure). */
    TG_CAT_UNAVAILABLE,
    /* The disk is full (SQLite's SQLITE_FULL or an I/O error with ENOSPC/EDQUOT,
     * PostgreSQL's 53100): nothing was changed; the server answers 507. */
    TG_CAT_FULL,
} tg_cat_status;

/* True for the statuses that say the catalog failed (TG_CAT_ERROR, TG_CAT_UNAVAILABLE,
 * TG_CAT_FULL), as against an answer about the data (not found, exists, conflict). */
static inline bool tg_cat_failed(tg_cat_status status)
{
    return status >= TG_CAT_ERROR;
}

typedef struct tg_model {
    int64_t id;
    char org[TG_NAME_MAX + 1];
    char name[TG_NAME_MAX + 1];
    char description[TG_DESCRIPTION_MAX + 1];
    char created_at[TG_TIME_LEN];
    int64_t downloads; /* the download counter (schema 15), as last flushed */
} tg_model;

typedef struct tg_version {
    int64_t id;
    int64_t model_id;
    int64_t number;
    bool published;
    char created_at[TG_TIME_LEN];
    char published_at[TG_TIME_LEN]; /* "" while a draft */
    char digest[65];                /* "" while a draft */
    int64_t derived_from;           /* source version number of a derived version, else 0 */
    char derived_dtype[16];         /* dtype a derived version was converted to, else "" */
    /* schema 16 (docs/MANUAL.md, "The life of a version"): when the version was
     * deprecated and why ("" when not), and when an admin deleted it ("" when not: a
     * deleted version is a tombstone without files whose routes answer 410) */
    char deprecated_at[TG_TIME_LEN];
    char deprecated_reason[TG_DEPRECATION_REASON_MAX + 1];
    char deleted_at[TG_TIME_LEN];
} tg_version;

typedef struct tg_file_record {
    char path[TG_PATH_MAX + 1];
    /* "safetensors", "json", "text", "gguf", png, jpeg, gif, webp, sentencepiece, or
     * "code" (schema 10: code a namespace's policy admitted, code_reason says which) */
    char kind[16];
    uint64_t size;
    char sha256[65];
    uint64_t tensors, parameters, nan, inf;
    char created_at[TG_TIME_LEN];
    char source_url[TG_URL_MAX + 1]; /* the URL an import fetched it from (schema 6), else "" */
    char code_reason[32]; /* kind "code": the code_* reason it was admitted under, else "" */
} tg_file_record;

/* A rejection's findings text: ST_PICKLE_FINDINGS_MAX entries of at most ~190 bytes. */
#define TG_REJECTION_FINDINGS_MAX 4096

/* One refusal of a body, as the catalog keeps it (schema 1, 7, 9). A struct, so a
 * field can be added without touching its writers: each writer memsets it and fills
 * what it knows; tg_catalog_rejection_add writes it in one statement of one
 * transaction. */
typedef struct tg_rejection {
    int64_t id;
    char time[TG_TIME_LEN];
    char model[2 * TG_NAME_MAX + 2]; /* "" when none */
    int64_t version;                 /* -1 when none */
    char path[TG_PATH_MAX + 1];      /* "" when none */
    char reason[48];
    char format[32];
    char detail[300];
    char client[64]; /* the client's address; "" when none (an import) */
    /* the refused file's size (schema 9): the bytes received when the body was read to
     * its end, else its declared length (or the bytes received when it declared none) */
    uint64_t size;
    /* a refused pickle's findings, the JSON array text of st_verdict_findings_json
     * (schema 7); "" when none */
    char findings[TG_REJECTION_FINDINGS_MAX];
    /* schema 9: the SHA-256 hex of the whole refused body, hashed as it streamed
     * through the gate; "" when the server did not read all of it */
    char sha256[65];
    char namespace_name[TG_NAME_MAX + 1]; /* the model's org; "" when none */
    int64_t token_id;                     /* the sending token's id; 0: anonymous or gone */
    char route[128];                      /* "PUT /v1/models/..." of an upload; "" else */
    int64_t job_id;                       /* the import job; 0 for an upload */
    /* schema 10: "refused" (the default; "" is written as it), or "admitted_by_policy":
     * code a namespace's policy let in (reason: the code_* reason it would have had) */
    char outcome[24];
} tg_rejection;

/* What tg_catalog_rejection_list keeps: NULL (or 0) members match everything. Times
 * are the catalog's "YYYY-MM-DDTHH:MM:SSZ" texts: since inclusive, until exclusive. */
typedef struct tg_rejection_filter {
    int64_t before_id; /* only ids below it (the page's cursor); 0: from the newest */
    const char *reason;
    const char *namespace_name;
    const char *since;
    const char *until;
    const char *sha256; /* 64 lowercase hex digits */
} tg_rejection_filter;

typedef enum tg_scope { TG_SCOPE_NONE = 0, TG_SCOPE_READ, TG_SCOPE_WRITE, TG_SCOPE_ADMIN } tg_scope;

/* Opens (creating) the catalog that url names and applies pending migrations:
 * "sqlite:PATH" or a plain file path is the SQLite backend; "postgresql://...",
 * "postgres://..." (libpq URIs) and "postgresql:" followed by libpq keyword=value
 * pairs ("postgresql:host=/run/pg dbname=tg") the PostgreSQL backend; any other
 * "scheme://" is refused with a sentence. A catalog whose schema is newer than this
 * binary knows is refused. err gets one sentence. */
tg_cat_status tg_catalog_open(const char *url, tg_catalog **out, char *err, size_t err_len);
/* Closes every connection the catalog holds; no call may be in flight. */
void tg_catalog_close(tg_catalog *catalog);

/* The catalog of a data directory (catalog_data.c): the SQLite file serve makes in
 * it when no catalog URL is given. */
#define TG_CATALOG_FILE "catalog.db"
/* Opens url (as tg_catalog_open) or, when url is NULL or "", the data directory's
 * SQLite file. */
tg_cat_status tg_catalog_open_data(const char *url, const char *data_dir, tg_catalog **out,
                                   char *err, size_t err_len);
/* Whether data_dir is a directory serve made with this catalog URL (NULL: none):
 * one holding TG_CATALOG_FILE, or any directory when url names a PostgreSQL
 * catalog (which lives elsewhere). */
bool tg_catalog_data_dir_made(const char *data_dir, const char *url);

/* The backend's name: "sqlite" or "postgresql" (for /readyz). */
const char *tg_catalog_kind(const tg_catalog *catalog);
/* A trivial query, for /readyz. */
tg_cat_status tg_catalog_ping(tg_catalog *catalog);
/* The schema version the catalog is at, and the newest this binary knows. */
int tg_catalog_schema_version(tg_catalog *catalog);
int tg_catalog_known_schema_version(void);
/* The SQL text of migration number (1-based); NULL beyond the last. */
const char *tg_catalog_migration_sql(int number);

/* models */
tg_cat_status tg_catalog_model_create(tg_catalog *catalog, const char *org, const char *name,
                                      const char *description, tg_model *out);
tg_cat_status tg_catalog_model_get(tg_catalog *catalog, const char *org, const char *name,
                                   tg_model *out);
/* Models ordered by (org, name) after the key (after_org, after_name) (both NULL: from
 * the start), of org (NULL: every org), whose "org/name" contains query (NULL: all);
 * at most limit. */
tg_cat_status tg_catalog_model_list(tg_catalog *catalog, const char *org, const char *query,
                                    const char *after_org, const char *after_name, unsigned limit,
                                    void (*visit)(void *ctx, const tg_model *model), void *ctx);
tg_cat_status tg_catalog_model_delete(tg_catalog *catalog, int64_t model_id);

/* versions */
tg_cat_status tg_catalog_version_create(tg_catalog *catalog, int64_t model_id, tg_version *out);
tg_cat_status tg_catalog_version_get(tg_catalog *catalog, int64_t model_id, int64_t number,
                                     tg_version *out);
tg_cat_status tg_catalog_version_by_digest(tg_catalog *catalog, int64_t model_id,
                                           const char *digest, tg_version *out);
/* The published version of model_id whose commit id (the first 40 hex digits of
 * its digest, as the Hub clients take it) is commit; two at once would be a SHA-256
 * prefix collision: the lower number wins. TG_CAT_OK, NOT_FOUND or ERROR. */
tg_cat_status tg_catalog_version_by_commit(tg_catalog *catalog, int64_t model_id,
                                           const char *commit, tg_version *out);
tg_cat_status tg_catalog_version_latest_published(tg_catalog *catalog, int64_t model_id,
                                                  tg_version *out);
tg_cat_status tg_catalog_version_list(tg_catalog *catalog, int64_t model_id,
                                      void (*visit)(void *ctx, const tg_version *version),
                                      void *ctx);
/* Draft -> published with digest; TG_CAT_CONFLICT when already published. */
tg_cat_status tg_catalog_version_publish(tg_catalog *catalog, int64_t version_id,
                                         const char *digest, tg_version *out);

/* Publishes only when the draft's files are still exactly files[0..count) (by
 * path, sha256 and size, in any order): the check and the change are one
 * transaction, and file puts and deletes of the version (through any replica)
 * wait for it. TG_CAT_CONFLICT with *why "version_published" (already published or
 * gone) or "version_changed" (its files are not these: nothing published). */
tg_cat_status tg_catalog_version_publish_files(tg_catalog *catalog, int64_t version_id,
                                               const char *digest, const tg_file_record *files,
                                               size_t count, tg_version *out, const char **why);

/* aliases (the automatic "latest" is not stored) */
tg_cat_status tg_catalog_alias_set(tg_catalog *catalog, int64_t model_id, const char *alias,
                                   int64_t number);
tg_cat_status tg_catalog_alias_get(tg_catalog *catalog, int64_t model_id, const char *alias,
                                   int64_t *number);
/* Removes an alias; TG_CAT_NOT_FOUND when the model has none of that name. */
tg_cat_status tg_catalog_alias_delete(tg_catalog *catalog, int64_t model_id, const char *alias);
/* Removes a draft version and its files (a Hub commit that could not be published
 * takes back the draft it made); TG_CAT_NOT_FOUND when version_id is no draft (gone,
 * or published: a published version is never removed this way). */
tg_cat_status tg_catalog_version_delete_draft(tg_catalog *catalog, int64_t version_id);
tg_cat_status tg_catalog_alias_list(tg_catalog *catalog, int64_t model_id,
                                    void (*visit)(void *ctx, const char *alias, int64_t number),
                                    void *ctx);

/* A namespace's signature policy (schema 9, docs/SIGNING.md): a JSON text the
 * routes write and read whole (server/routes/signing.c). get: *policy malloc'd,
 * TG_CAT_NOT_FOUND when the namespace has none. set replaces it. */
tg_cat_status tg_catalog_signing_set(tg_catalog *catalog, const char *org, const char *policy);
tg_cat_status tg_catalog_signing_get(tg_catalog *catalog, const char *org, char **policy);

/* files: put replaces a file of the same path; put and delete answer
 * TG_CAT_CONFLICT when the version is published. tensor_stats is JSON text. */
tg_cat_status tg_catalog_file_put(tg_catalog *catalog, int64_t version_id,
                                  const tg_file_record *file, const char *tensor_stats);
/* What an upload that began earlier re-checks in the transaction of its commit: the
 * model still exists with the id, org and name it had at the start (ids are never
 * reused, schema 3), the version is one of its drafts, and the token (by hash; NULL:
 * none to check) still exists, has write scope and covers org. A failed check
 * answers TG_CAT_NOT_FOUND (why: "version_not_found", "token_revoked",
 * "forbidden") or TG_CAT_CONFLICT (why: "version_published"), writing nothing. */
typedef struct tg_commit_guard {
    int64_t model_id;
    const char *org;
    const char *name;
    const char *token_hash;
} tg_commit_guard;
tg_cat_status tg_catalog_file_put_guarded(tg_catalog *catalog, const tg_commit_guard *guard,
                                          int64_t version_id, const tg_file_record *file,
                                          const char *tensor_stats, const char **why);
/* The same re-check for work that reads a version rather than writing one (a
 * preload, before it becomes resident and before each hand-out): the model still
 * exists with the guard's id, org and name, version_id is still one of its versions
 * (draft or published), and the token (NULL: none) still exists, has write scope and
 * covers org. A failed check answers TG_CAT_NOT_FOUND with why "model_deleted",
 * "version_deleted", "token_revoked" or "forbidden". Writes nothing. */
tg_cat_status tg_catalog_guard_check(tg_catalog *catalog, const tg_commit_guard *guard,
                                     int64_t version_id, const char **why);
tg_cat_status tg_catalog_file_get(tg_catalog *catalog, int64_t version_id, const char *path,
                                  tg_file_record *out);
/* Per-tensor [[nan, inf], ...] in file order, malloc'd JSON text. */
tg_cat_status tg_catalog_file_stats(tg_catalog *catalog, int64_t version_id, const char *path,
                                    char **tensor_stats);
tg_cat_status tg_catalog_file_delete(tg_catalog *catalog, int64_t version_id, const char *path);
/* Files ordered by path after after_path (NULL: from the start); limit 0 means all. */
tg_cat_status tg_catalog_file_list(tg_catalog *catalog, int64_t version_id, const char *after_path,
                                   unsigned limit,
                                   void (*visit)(void *ctx, const tg_file_record *file), void *ctx);

/* The files of kind "code" (schema 10) of model_id's version number, or of every
 * version when number is 0, ordered by version number then path: what marks a version
 * as holding code (the mark is these rows, never a flag of its own). */
tg_cat_status tg_catalog_code_files(tg_catalog *catalog, int64_t model_id, int64_t number,
                                    void (*visit)(void *ctx, int64_t number, const char *path,
                                                  const char *code_reason),
                                    void *ctx);

/* A growable array of file records in the order visited; failed means an
 * allocation failed and the array is incomplete. Start from {0}; free items. */
typedef struct tg_file_records {
    tg_file_record *items;
    size_t count, cap;
    bool failed;
} tg_file_records;
/* A visit for tg_catalog_file_list and tg_catalog_job_file_list: appends *file to
 * the tg_file_records ctx. */
void tg_file_records_collect(void *ctx, const tg_file_record *file);

/* Per-namespace settings (schema 10, table namespace_settings: one row per org an
 * admin has set something for, one column per setting; an org without a row has
 * every default). */
typedef struct tg_namespace_settings {
    bool allow_code;              /* the code policy (docs/DESIGN.md): default false */
    int64_t quota_bytes;          /* schema 16: the org's storage quota; -1 when unset */
    char updated_at[TG_TIME_LEN]; /* when a setting last changed; "" when never */
} tg_namespace_settings;
/* The settings of org; an org never set answers TG_CAT_OK with the defaults. */
tg_cat_status tg_catalog_namespace_get(tg_catalog *catalog, const char *org,
                                       tg_namespace_settings *out);
/* Sets org's code policy (creating its row), leaving any other setting as it is;
 * out (may be NULL) gets the settings as stored. */
tg_cat_status tg_catalog_namespace_set_code(tg_catalog *catalog, const char *org, bool allow_code,
                                            tg_namespace_settings *out);

/* ---- the life of a version and quotas (schema 16, catalog_lifecycle.c) ---- */
/* Sets org's storage quota in bytes (-1: unset, the server default applies), leaving
 * any other setting as it is; out (may be NULL) gets the settings as stored. */
tg_cat_status tg_catalog_namespace_set_quota(tg_catalog *catalog, const char *org,
                                             int64_t quota_bytes, tg_namespace_settings *out);
/* The bytes org's models hold: the size of each distinct blob (sha256) of the files
 * of its versions, drafts included, counted once however many files name it. */
tg_cat_status tg_catalog_namespace_usage(tg_catalog *catalog, const char *org, uint64_t *bytes);
/* Marks a published, not deleted version deprecated with reason (may be "") and
 * sends a version.deprecated event, or (reason NULL) takes the mark away.
 * TG_CAT_NOT_FOUND when version_id is no such version (a draft, deleted, gone). */
tg_cat_status tg_catalog_version_deprecate(tg_catalog *catalog, const tg_model *model,
                                           const tg_version *version, const char *reason);
/* Deletes a published version: it stays as a tombstone (deleted_at set), its files
 * rows and the aliases that point at it go, and a version.deleted event is sent, in
 * one transaction. TG_CAT_NOT_FOUND when it is no published, undeleted version. */
tg_cat_status tg_catalog_version_delete_published(tg_catalog *catalog, const tg_model *model,
                                                  const tg_version *version);

/* Records one rejection (its id is the catalog's), in one transaction. */
tg_cat_status tg_catalog_rejection_add(tg_catalog *catalog, const tg_rejection *rejection);
/* Visits at most limit rejections that match filter (NULL: all), newest first (by
 * id, descending). */
tg_cat_status tg_catalog_rejection_list(tg_catalog *catalog, const tg_rejection_filter *filter,
                                        unsigned limit,
                                        void (*visit)(void *ctx, const tg_rejection *rejection),
                                        void *ctx);

/* tokens, stored by SHA-256 hex of the token text */
tg_cat_status tg_catalog_token_add(tg_catalog *catalog, const char *hash, tg_scope scope,
                                   const char *namespace_or_null);
tg_cat_status tg_catalog_token_lookup(tg_catalog *catalog, const char *hash, tg_scope *scope,
                                      char *namespace_out, size_t namespace_len);

/* One token's public facts (never the token or its hash). */
typedef struct tg_token_info {
    int64_t id;
    tg_scope scope;
    char namespace_name[TG_NAME_MAX + 1]; /* "" when not namespace-limited */
    char created_at[TG_TIME_LEN];
} tg_token_info;
/* Every token, oldest first. */
tg_cat_status tg_catalog_token_each(tg_catalog *catalog,
                                    void (*visit)(void *ctx, const tg_token_info *token),
                                    void *ctx);
/* The id of the token with this hash; NOT_FOUND if none. */
tg_cat_status tg_catalog_token_id(tg_catalog *catalog, const char *hash, int64_t *id);
/* Deletes the token: it is refused (401) from the next request on. NOT_FOUND if no such id. */
tg_cat_status tg_catalog_token_revoke(tg_catalog *catalog, int64_t id);

/* The audit log (schema 11, audit_record.h): append-only, one hash chain.
 * tg_catalog_audit_append appends record: in one transaction that serialises every
 * append (SQLite: BEGIN IMMEDIATE; PostgreSQL: a transaction-level advisory lock, so
 * replicas on one database make one chain) it resolves the token by its hash
 * (token_hash NULL or unknown: anonymous, token_id 0 and namespace ""), takes the
 * last record's seq and hash, and fills record's token_id, namespace_name, seq,
 * prev_hash and hash before the insert. There is no update or delete: the tables
 * refuse both (triggers), and an edit made around them is found by the chain. */
tg_cat_status tg_catalog_audit_append(tg_catalog *catalog, const char *token_hash,
                                      tg_audit_record *record);
/* What tg_catalog_audit_list keeps: every field set narrows (NULL or 0: any). */
typedef struct tg_audit_filter {
    const char *since, *until; /* record times, tg_audit_record.time's form: since <= t < until */
    int64_t token_id;          /* > 0: that token; -1: anonymous records; 0: any */
    const char *namespace_name;
    const char *action;
    const char *resource_prefix;
    unsigned status;   /* the exact status */
    int outcome;       /* TG_AUDIT_OUTCOME_* */
    int64_t after_seq; /* records after this seq (paging) */
} tg_audit_filter;
enum {
    TG_AUDIT_OUTCOME_ANY = 0,
    TG_AUDIT_OUTCOME_SUCCESS, /* status below 400 */
    TG_AUDIT_OUTCOME_REFUSED, /* 401 or 403 */
    TG_AUDIT_OUTCOME_FAILURE, /* 400 and above */
};
/* Records that pass filter, in seq order, at most limit (1..). */
tg_cat_status tg_catalog_audit_list(tg_catalog *catalog, const tg_audit_filter *filter,
                                    unsigned limit,
                                    void (*visit)(void *ctx, const tg_audit_record *record),
                                    void *ctx);

/* ---- Hub writes (schema 17, catalog_hub.c; docs/HF_CLIENTS.md, "Writes") ---- */
/* An LFS object a Hub client uploaded and the gate accepted, waiting for its commit:
 * one row per namespace (org) and sha256, of file's size, kind, tensor facts and
 * code_reason, with stats (JSON text), the model ("org/name") and the batch request's
 * token id (0: none). Putting it again refreshes it (its created_at is now). */
tg_cat_status tg_catalog_hub_pending_put(tg_catalog *catalog, const char *org, const char *model,
                                         int64_t token_id, const tg_file_record *file,
                                         const char *stats);
/* org's pending object sha256 of size created at or after since (a catalog time):
 * TG_CAT_OK with *file (path "") and, when stats is not NULL, *stats (malloc'd);
 * TG_CAT_NOT_FOUND when none. */
tg_cat_status tg_catalog_hub_pending_get(tg_catalog *catalog, const char *org, const char *sha256,
                                         uint64_t size, const char *since, tg_file_record *file,
                                         char **stats);
/* Removes org's pending object sha256 (a commit took it); NOT_FOUND when none. */
tg_cat_status tg_catalog_hub_pending_delete(tg_catalog *catalog, const char *org,
                                            const char *sha256);
/* Removes every pending object created before before and visits the sha256 of each
 * removed (to reclaim its blob after the call: visitors only copy). */
tg_cat_status tg_catalog_hub_pending_expire(tg_catalog *catalog, const char *before,
                                            void (*visit)(void *ctx, const char *sha256),
                                            void *ctx);
/* The shared secret name (hex text): the one stored, else candidate is stored and
 * answered. value gets at most cap - 1 bytes. */
tg_cat_status tg_catalog_hub_secret(tg_catalog *catalog, const char *name, const char *candidate,
                                    char *value, size_t cap);
/* An alias with its kind: "alias" (/v1, the CLI), "branch" or "tag" (the Hub routes). */
typedef void (*tg_alias_kind_visit)(void *ctx, const char *alias, int64_t number, const char *kind);
tg_cat_status tg_catalog_alias_list_kinds(tg_catalog *catalog, int64_t model_id,
                                          tg_alias_kind_visit visit, void *ctx);
/* Sets alias (kind "branch" or "tag") to number, making it or (overwrite) moving it;
 * TG_CAT_EXISTS when it exists and overwrite is false. */
tg_cat_status tg_catalog_alias_set_kind(tg_catalog *catalog, int64_t model_id, const char *alias,
                                        int64_t number, const char *kind, bool overwrite);
/* alias's number and kind (kind: 8 bytes); NOT_FOUND when none. */
tg_cat_status tg_catalog_alias_kind(tg_catalog *catalog, int64_t model_id, const char *alias,
                                    int64_t *number, char kind[8]);
/* Marks a draft as made for branch (schema 17: never "latest" once published). */
tg_cat_status tg_catalog_version_set_branch(tg_catalog *catalog, int64_t version_id,
                                            const char *branch);
/* Moves branch from number from to number to, only when it is still at from:
 * TG_CAT_CONFLICT when it is not (moved or gone). */
tg_cat_status tg_catalog_branch_move(tg_catalog *catalog, int64_t model_id, const char *branch,
                                     int64_t from, int64_t to);
/* Reserves bytes against org's quota (id: the reservation's name, unique), only when
 * org's usage, its live reservations (made at or after since) and bytes together stay
 * within quota; TG_CAT_CONFLICT when they would not. One check-and-insert per org at a
 * time, across replicas (quota_locks). Reservations made before since are removed. */
tg_cat_status tg_catalog_quota_reserve(tg_catalog *catalog, const char *org, const char *id,
                                       uint64_t bytes, uint64_t quota, const char *since);
/* The bytes org's reservations made at or after since hold. */
tg_cat_status tg_catalog_quota_reserved(tg_catalog *catalog, const char *org, const char *since,
                                        uint64_t *bytes);
/* Releases a reservation (at the upload's end); NOT_FOUND when gone. */
tg_cat_status tg_catalog_quota_release(tg_catalog *catalog, const char *id);

/* blobs: every distinct (sha256, size) a file row or a job's file row (job_files) references */
tg_cat_status tg_catalog_blob_each(tg_catalog *catalog,
                                   int (*visit)(void *ctx, const char *sha256, uint64_t size),
                                   void *ctx);
/* Every blob a file of one of the model's versions or of its jobs references (read
 * before deleting the model, to reclaim those nothing else uses after). */
tg_cat_status tg_catalog_model_blobs(tg_catalog *catalog, int64_t model_id,
                                     void (*visit)(void *ctx, const char *sha256), void *ctx);
tg_cat_status tg_catalog_blob_referenced(tg_catalog *catalog, const char *sha256, bool *referenced);

/* jobs (schema 2): background work such as conversion into a derived version.
 * A job's finished files wait in job_files; tg_catalog_job_commit inserts the new
 * version and all its files in one transaction, so nothing of it is visible before. */
#define TG_JOB_TENSORS_MAX 8192 /* the JSON text of a job's tensor globs */
#define TG_JOB_DETAIL_MAX 300

typedef enum tg_job_state {
    TG_JOB_QUEUED,
    TG_JOB_RUNNING,
    TG_JOB_DONE,
    TG_JOB_FAILED
} tg_job_state;
#define TG_JOB_STATES 4 /* the number of tg_job_state values */

typedef struct tg_job {
    int64_t id;
    tg_job_state state;
    int64_t model_id;
    char org[TG_NAME_MAX + 1];
    char name[TG_NAME_MAX + 1];
    int64_t source_version_id;
    int64_t source_number;
    char dtype[16];
    char tensors[TG_JOB_TENSORS_MAX]; /* JSON array of globs */
    uint64_t bytes_done, bytes_total;
    int64_t attempts;
    int64_t result_version; /* the new version's number when done, else 0 */
    /* "" unless failed, or "cancelled" on a running job whose cancel was asked
     * (the worker stops it at its next step and fails it with that reason) */
    char error_reason[48];
    char error_detail[TG_JOB_DETAIL_MAX];
    bool cancel_requested; /* error_reason is "cancelled", in any state */
    char created_at[TG_TIME_LEN];
    char started_at[TG_TIME_LEN];  /* "" until started */
    char finished_at[TG_TIME_LEN]; /* "" until done or failed */
    int64_t token_id;              /* the token that asked for it (schema 3), else 0 */
    /* the lease holder of a running job: "HOST:PID:RANDOM", one server process
     * (schema 5; tg_catalog_set_job_lease); "" when none */
    char worker[96];
    char kind[16];              /* "convert" or "import" (schema 6) */
    char url[TG_URL_MAX + 1];   /* import: the source URL, else "" */
    char path[TG_PATH_MAX + 1]; /* import: the file path in the draft, else "" */
} tg_job;

const char *tg_job_state_name(tg_job_state state);

/* A queued conversion job of source_version_id (a published version of model_id).
 * Idempotent: when a job with the same source version, dtype and tensors text is
 * queued or running (and not being cancelled), out gets that job and *existing is
 * true; otherwise a new job is queued and *existing is false. */
tg_cat_status tg_catalog_job_create(tg_catalog *catalog, int64_t model_id,
                                    int64_t source_version_id, const char *dtype,
                                    const char *tensors_json, uint64_t bytes_total, tg_job *out,
                                    bool *existing);
/* The same, recording the token that asks (token_id > 0): tg_catalog_job_commit fails
 * the job (reason "token_revoked" or "forbidden", answering TG_CAT_CONFLICT) when that
 * token was revoked or no longer covers the model by then. */
tg_cat_status tg_catalog_job_create_by(tg_catalog *catalog, int64_t token_id, int64_t model_id,
                                       int64_t source_version_id, const char *dtype,
                                       const char *tensors_json, uint64_t bytes_total, tg_job *out,
                                       bool *existing);
tg_cat_status tg_catalog_job_get(tg_catalog *catalog, int64_t job_id, tg_job *out);

/* Which jobs a list keeps; each member set to NULL (state: has_state false) keeps all. */
typedef struct tg_job_filter {
    bool has_state;
    tg_job_state state;
    const char *org;  /* jobs of this org's models */
    const char *name; /* with org: jobs of the model org/name */
} tg_job_filter;
/* Jobs matching filter, newest first (id descending), with id < before_id (0: from
 * the newest); at most limit. */
tg_cat_status tg_catalog_job_list(tg_catalog *catalog, const tg_job_filter *filter,
                                  int64_t before_id, unsigned limit,
                                  void (*visit)(void *ctx, const tg_job *job), void *ctx);
/* How many jobs are in each state (counts indexed by tg_job_state), for /metrics. */
tg_cat_status tg_catalog_job_counts(tg_catalog *catalog, uint64_t counts[TG_JOB_STATES]);
/* Cancels a job; *was gets its state before. A queued job fails at once with
 * reason "cancelled" (files an interrupted attempt left in job_files go). A
 * running job keeps running, marked (cancel_requested) for the worker, which
 * stops it and fails it; tg_catalog_job_commit refuses a marked job and
 * tg_catalog_job_recover fails one. A done or failed job is left as it is. out
 * gets the job after. TG_CAT_NOT_FOUND when there is no such job. */
tg_cat_status tg_catalog_job_cancel(tg_catalog *catalog, int64_t job_id, tg_job_state *was,
                                    tg_job *out);
/* Job leases (schema 5). A claim gives this catalog handle (one per server
 * process: its lease owner) the job for lease_seconds (default 30); the worker
 * renews it while it works. Progress, job files, the commit and a failure of a
 * running job are accepted only from its lease holder. A running job whose lease
 * expired is claimed again by any handle (another replica takes over a dead
 * one's job), or fails with reason "interrupted" once claimed max_attempts times
 * (default 3), or "cancelled" when its cancel was asked. */
void tg_catalog_set_job_lease(tg_catalog *catalog, unsigned lease_seconds, unsigned max_attempts);
/* Extends the lease of a job this handle holds: TG_CAT_OK; TG_CAT_CONFLICT when
 * its cancel was asked (the lease is still extended); TG_CAT_NOT_FOUND when the
 * job is no longer this handle's (taken over, done, failed or gone). */
tg_cat_status tg_catalog_job_renew(tg_catalog *catalog, int64_t job_id);
/* Gives up the lease of a job this handle holds (a stopping server): it stays
 * running, claimable at once by any handle. TG_CAT_NOT_FOUND when not held. */
tg_cat_status tg_catalog_job_release(tg_catalog *catalog, int64_t job_id);
/* Claims a job that is queued, or running with an expired lease: it becomes
 * running under this handle's lease, attempts + 1. The pick is fair across
 * namespaces (the org of the job's model): the oldest claimable job of the
 * namespace with the fewest jobs running under this handle's live leases; and
 * when namespace_limit > 0, never one of a namespace that already runs
 * namespace_limit jobs under them. TG_CAT_NOT_FOUND if none may be claimed. */
tg_cat_status tg_catalog_job_claim_fair(tg_catalog *catalog, unsigned namespace_limit, tg_job *out);
/* tg_catalog_job_claim_fair with no limit. */
tg_cat_status tg_catalog_job_claim(tg_catalog *catalog, tg_job *out);
/* At start: jobs left running by a stopped or killed server go back to queued, or
 * fail with reason "interrupted" once they have been tried max_attempts times;
 * a running job whose cancel was asked fails with reason "cancelled". SQLite (one
 * process per catalog) takes every running job as left so; PostgreSQL (shared by
 * replicas) only those whose lease expired. */
tg_cat_status tg_catalog_job_recover(tg_catalog *catalog, int64_t max_attempts, unsigned *requeued,
                                     unsigned *failed);
tg_cat_status tg_catalog_job_progress(tg_catalog *catalog, int64_t job_id, uint64_t bytes_done,
                                      uint64_t bytes_total);
/* queued or running -> failed; its job_files rows go (their blobs become garbage
 * for gc). detail NULL keeps the detail a cancel stored. */
tg_cat_status tg_catalog_job_fail(tg_catalog *catalog, int64_t job_id, const char *reason,
                                  const char *detail);
/* Records a finished file of a running job (replacing one of the same path). */
tg_cat_status tg_catalog_job_file_put(tg_catalog *catalog, int64_t job_id,
                                      const tg_file_record *file, const char *tensor_stats);
tg_cat_status tg_catalog_job_file_list(tg_catalog *catalog, int64_t job_id,
                                       void (*visit)(void *ctx, const tg_file_record *file),
                                       void *ctx);
/* One transaction: a new published version of the job's model (next number) with
 * digest and lineage (derived_from = the source's number, derived_dtype = the job's
 * dtype), whose files are the source version's files with the job's files in place
 * of (or added to) those of the same path; the job becomes done with that number.
 * TG_CAT_NOT_FOUND when the job is gone (its model was deleted), TG_CAT_CONFLICT
 * when it is not running or its cancel was asked. */
tg_cat_status tg_catalog_job_commit(tg_catalog *catalog, int64_t job_id, const char *digest,
                                    tg_version *out);

/* Imports (schema 6): a job of kind "import" fetches url into the file path of the
 * draft version version_id (source_version_id) of model_id. Idempotent like
 * conversions: a queued or running import of the same version, path and url is
 * returned with *existing true. NOT_FOUND when the version is gone. */
tg_cat_status tg_catalog_import_job_create(tg_catalog *catalog, int64_t token_id, int64_t model_id,
                                           int64_t version_id, const char *path, const char *url,
                                           tg_job *out, bool *existing);
/* One transaction: the import job job_id (running, no cancel asked) becomes done and
 * file (its source_url set) is put into its draft, after the guard's checks
 * (tg_catalog_file_put_guarded) and, when the job has a token, that the token still
 * covers the model. TG_CAT_CONFLICT with *why "cancelled", "version_published" or
 * "lease_lost" (another handle holds the running job),
 * TG_CAT_NOT_FOUND with *why ("version_not_found", "token_revoked", "forbidden"). */
tg_cat_status tg_catalog_import_commit(tg_catalog *catalog, int64_t job_id,
                                       const tg_commit_guard *guard, int64_t version_id,
                                       const tg_file_record *file, const char *tensor_stats,
                                       const char **why);

/* An import job's url may hold credentials (userinfo, a query): the row keeps it
 * whole only while the job is queued or running. When a job ends (the job calls
 * above that end one: fail, cancel, import commit, and claim and recover, which fail
 * the jobs given up) its url is replaced by its redacted form (common/url_redact.h).
 * This does it for job_id, or for every ended import job (job_id 0); best effort
 * (a catalog error is logged; the routes show the redacted form anyway). */
void tg_catalog_job_scrub_urls(tg_catalog *catalog, int64_t job_id);

/* ---- registry metadata (schema 15) ----
 * Key/value tags of a model (version_id 0) or of one of its versions, and the
 * description of either. Keys and values are validated by the HTTP layer (their
 * bounds below); the catalog keeps at most max_tags per object. */
#define TG_TAGS_MAX 32
#define TG_TAG_KEY_MAX 64
#define TG_TAG_VALUE_MAX 256
#define TG_HUB_TAG_MAX 300 /* one Hub tag ("license:apache-2.0"), as stored */
#define TG_HUB_TAGS_MAX 64 /* Hub tags kept per published version */

typedef struct tg_tag_change {
    const char *key;
    const char *value; /* NULL: delete the key */
} tg_tag_change;

/* The tags of model_id (version_id 0) or of version_id, ordered by key. */
tg_cat_status tg_catalog_tag_list(tg_catalog *catalog, int64_t model_id, int64_t version_id,
                                  void (*visit)(void *ctx, const char *key, const char *value),
                                  void *ctx);
/* A version's description into out ("" when none). */
tg_cat_status tg_catalog_version_description(tg_catalog *catalog, int64_t version_id,
                                             char out[TG_DESCRIPTION_MAX + 1]);
/* One transaction: sets the description (NULL: kept) of model_id (version_id 0)
 * or of version_id (one of model_id's versions), and applies changes in order (a
 * value replaces the key's, NULL deletes the key; keys not named are kept).
 * TG_CAT_NOT_FOUND (*why "model_not_found" / "version_not_found") when the object
 * is gone; TG_CAT_CONFLICT (*why "too_many_tags") when the object would have more
 * than max_tags tags afterwards: nothing is changed then. */
tg_cat_status tg_catalog_meta_update(tg_catalog *catalog, int64_t model_id, int64_t version_id,
                                     const char *description, const tg_tag_change *changes,
                                     size_t count, unsigned max_tags, const char **why);
/* Replaces the Hub tags recorded for version_id (at its publication) with tags[0..count). */
tg_cat_status tg_catalog_version_hub_tags_set(tg_catalog *catalog, int64_t version_id,
                                              const char *const *tags, size_t count);
/* The Hub tags of model_id beyond "safetensors": its registry tags as "key" (empty
 * value) or "key:value", then the recorded Hub tags of its latest published version. */
tg_cat_status tg_catalog_hub_tag_list(tg_catalog *catalog, int64_t model_id,
                                      void (*visit)(void *ctx, const char *tag), void *ctx);
/* One transaction: adds counts[i] to the download counter of model_ids[i], for
 * i < n (replicas add; never overwrite); a model that is gone is skipped. */
tg_cat_status tg_catalog_downloads_add(tg_catalog *catalog, const int64_t *model_ids,
                                       const uint64_t *counts, size_t n);

#define TG_SEARCH_TAGS_MAX 8
/* Which models tg_catalog_model_search visits; all members zero or NULL: every model,
 * by (org, name). */
typedef struct tg_model_search {
    const char *org;        /* of this org only */
    const char *name_query; /* "org/name" contains it (byte-wise) */
    const char *text;       /* "org/name", the description or a tag value contains it (any case
                               of ASCII letters) */
    /* every one of these model tags: key present (value NULL) or key = value */
    const char *tag_keys[TG_SEARCH_TAGS_MAX];
    const char *tag_values[TG_SEARCH_TAGS_MAX];
    unsigned tag_count;
    /* every one of these Hub tags ("safetensors" matches every model; else a registry
     * tag as "key" or "key:value", or a Hub tag of the latest published version) */
    const char *hub_tags[TG_SEARCH_TAGS_MAX];
    unsigned hub_tag_count;
    bool published_only; /* only models with a published version */
    bool by_downloads;   /* order by downloads descending, then (org, name) */
    /* after this key of the order (a cursor): after_downloads only by_downloads */
    bool has_after;
    int64_t after_downloads;
    const char *after_org, *after_name;
    unsigned limit;
} tg_model_search;
tg_cat_status tg_catalog_model_search(tg_catalog *catalog, const tg_model_search *search,
                                      void (*visit)(void *ctx, const tg_model *model), void *ctx);
/* ---- webhooks (schema 12; catalog_webhooks.c, over both backends) ----
 *
 * Subscriptions per namespace, the event outbox and the deliveries. Events are
 * written by the catalog itself, in the transaction of the change they report
 * (triggers of migration 12: model.created, version.published, alias.moved,
 * upload.refused, job.finished), and only when an enabled subscription of the
 * namespace asks for the type; an event fans out, in the same transaction, into
 * one pending delivery per such subscription. The server's delivery workers
 * (server/jobs/webhook_worker.c) claim due deliveries under a lease, send them and
 * record the outcome. docs/WEBHOOKS.md tells the whole story. */
#define TG_WEBHOOK_EVENTS_MAX 512 /* the ",type,type," text of a subscription */
#define TG_WEBHOOK_SECRET_MAX 128
#define TG_WEBHOOK_ID_LEN 40     /* "evt_" + 32 hex digits + NUL, with room */
#define TG_WEBHOOK_TYPE_MAX 32   /* "version.published" */
#define TG_WEBHOOK_DATA_MAX 8192 /* an event's data: a JSON object */
#define TG_WEBHOOK_ERROR_MAX 300

typedef struct tg_webhook {
    int64_t id;
    char org[TG_NAME_MAX + 1];
    char url[TG_URL_MAX + 1];
    char events[TG_WEBHOOK_EVENTS_MAX]; /* ",model.created,version.published," */
    bool enabled;
    int64_t failures;                           /* failed deliveries in a row */
    char disabled_reason[TG_WEBHOOK_ERROR_MAX]; /* "" while enabled */
    char created_at[TG_TIME_LEN];
    char updated_at[TG_TIME_LEN];
} tg_webhook;

typedef struct tg_webhook_delivery {
    int64_t id;
    int64_t subscription_id;
    char event_id[TG_WEBHOOK_ID_LEN];
    char type[TG_WEBHOOK_TYPE_MAX];
    char state[16];                        /* "pending", "delivered", "failed" */
    int64_t attempts;                      /* sends tried so far */
    int64_t next_attempt;                  /* Unix milliseconds of the next try, while pending */
    int64_t last_status;                   /* the last answer's HTTP status, 0 when none came */
    char last_error[TG_WEBHOOK_ERROR_MAX]; /* "" when none */
    char created_at[TG_TIME_LEN];
    char updated_at[TG_TIME_LEN];
    char delivered_at[TG_TIME_LEN]; /* "" until delivered */
} tg_webhook_delivery;

/* A claimed delivery: what the worker sends. */
typedef struct tg_webhook_send {
    int64_t delivery_id;
    int64_t subscription_id;
    int64_t attempts; /* this one included */
    char event_id[TG_WEBHOOK_ID_LEN];
    char type[TG_WEBHOOK_TYPE_MAX];
    char org[TG_NAME_MAX + 1];
    char created_at[TG_TIME_LEN];
    char url[TG_URL_MAX + 1];
    char secret[TG_WEBHOOK_SECRET_MAX + 1];
    char data[TG_WEBHOOK_DATA_MAX];
} tg_webhook_send;

/* A new enabled subscription of org (events in the ",a,b," form). */
tg_cat_status tg_catalog_webhook_create(tg_catalog *catalog, const char *org, const char *url,
                                        const char *secret, const char *events, tg_webhook *out);
/* NOT_FOUND when there is no such subscription in org. */
tg_cat_status tg_catalog_webhook_get(tg_catalog *catalog, const char *org, int64_t id,
                                     tg_webhook *out);
tg_cat_status tg_catalog_webhook_list(tg_catalog *catalog, const char *org,
                                      void (*visit)(void *ctx, const tg_webhook *hook), void *ctx);
/* Changes what is given: url and events (NULL: kept), enabled (-1: kept, 0, 1;
 * enabling clears the failure count and the reason). out gets the subscription after. */
tg_cat_status tg_catalog_webhook_update(tg_catalog *catalog, const char *org, int64_t id,
                                        const char *url, const char *events, int enabled,
                                        tg_webhook *out);
/* The subscription and its deliveries go. */
tg_cat_status tg_catalog_webhook_delete(tg_catalog *catalog, const char *org, int64_t id);
/* A "ping" event for this one subscription (enabled or not), with its delivery;
 * event_id gets its id. */
tg_cat_status tg_catalog_webhook_ping(tg_catalog *catalog, const char *org, int64_t id,
                                      char event_id[TG_WEBHOOK_ID_LEN]);
/* An event of type for org with data (a JSON object's text), in a transaction of
 * its own; written (and fanned out) only when a subscription asks for the type.
 * Inside a backend transaction, use TG_CAT_SQL_WEBHOOK_EVENT_ADD (catalog_sql.h). */
tg_cat_status tg_catalog_webhook_event_add(tg_catalog *catalog, const char *org, const char *type,
                                           const char *data_json);
/* Deliveries of subscription id of org, newest first, id < before_id (0: from the
 * newest); at most limit. NOT_FOUND when no such subscription. */
tg_cat_status tg_catalog_webhook_deliveries(
    tg_catalog *catalog, const char *org, int64_t id, int64_t before_id, unsigned limit,
    void (*visit)(void *ctx, const tg_webhook_delivery *delivery), void *ctx);
tg_cat_status tg_catalog_webhook_delivery_get(tg_catalog *catalog, const char *org, int64_t id,
                                              int64_t delivery_id, tg_webhook_delivery *out);
/* The delivery is pending again, due now, with a fresh count of attempts (the same
 * event id goes out again). */
tg_cat_status tg_catalog_webhook_redeliver(tg_catalog *catalog, const char *org, int64_t id,
                                           int64_t delivery_id, tg_webhook_delivery *out);
/* Claims the oldest due pending delivery (of an enabled subscription, or a ping)
 * whose lease is free or expired, for lease_seconds under this handle's lease
 * owner; attempts + 1. NOT_FOUND when none is due. Several replicas never claim
 * the same one at once (PostgreSQL: FOR UPDATE SKIP LOCKED; SQLite: one writer). */
tg_cat_status tg_catalog_webhook_claim(tg_catalog *catalog, unsigned lease_seconds,
                                       tg_webhook_send *out);

typedef enum tg_webhook_outcome {
    TG_WEBHOOK_DELIVERED, /* 2xx: done; the subscription's failure count is cleared */
    TG_WEBHOOK_RETRY,     /* pending again, due at next_attempt */
    TG_WEBHOOK_GAVE_UP,   /* failed for good; the subscription's failure count + 1, and
                           * past max_failures in a row it is disabled */
} tg_webhook_outcome;
/* Records the outcome of the attempt of a delivery this handle holds the lease of
 * (NOT_FOUND when it does not any more: nothing changes). */
tg_cat_status tg_catalog_webhook_record(tg_catalog *catalog, int64_t delivery_id,
                                        tg_webhook_outcome outcome, int http_status,
                                        const char *error, int64_t next_attempt,
                                        unsigned max_failures);
/* At a server's start on SQLite (one process per catalog): the leases a killed
 * process left are cleared, so its deliveries are due at once. PostgreSQL: nothing
 * (another replica may hold them; they expire). */
tg_cat_status tg_catalog_webhook_recover(tg_catalog *catalog);
/* The wall clock in Unix milliseconds (next_attempt and leases use it). */
int64_t tg_webhook_now_ms(void);
/* "evt_" and 32 random hex digits. */
void tg_webhook_new_id(char out[TG_WEBHOOK_ID_LEN]);

/* Current UTC time as "YYYY-MM-DDTHH:MM:SSZ". */
void tg_time_now(char out[TG_TIME_LEN]);

#endif
