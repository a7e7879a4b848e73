/* The catalog backend interface: what a storage engine implements to hold the
 * catalog (catalog.h). A backend fills one tg_catalog_ops table, embeds struct
 * tg_catalog as the first member of its own state, and is chosen by
 * tg_catalog_open from the catalog URL ("sqlite:PATH" or a plain path:
 * catalog_sqlite.c; "postgresql://...", "postgres://..." or "postgresql:" followed
 * by a libpq keyword/value string: catalog_pg.c).
 * catalog.c dispatches every public tg_catalog_* call through the table, so
 * callers never know which backend they talk to. Each operation has the meaning,
 * the arguments and the answers catalog.h documents for the public function of
 * the same name (tg_catalog_file_put and tg_catalog_job_create are the guarded
 * and the token-recording operation with no guard and token 0). Every operation
 * is required: catalog.c calls each without a check. What SQL backends share
 * (column lists, row decoders, statements, the migration driver) is in
 * catalog_sql.h. Backends also
 * keep the visitor rule of catalog.h: no lock of theirs is held while a visitor
 * runs. Only server/storage/ includes this header. */
#ifndef TG_CATALOG_BACKEND_H
#define TG_CATALOG_BACKEND_H

#include "catalog.h"
#include "catalog_sql.h"

/* One statement of a run_steps call (schema 12: what catalog_webhooks.c writes once
 * for both backends): SQL text in the shared form (catalog_sql.h: "?" or "?N"
 * placeholders; an integer parameter is written CAST(? AS BIGINT)), n text
 * parameters (NULL: SQL NULL), and a visitor called for each row the statement
 * returns (a SELECT, or RETURNING), with the backend's lock held: it only copies.
 * A parameter may point into a buffer an earlier step's visitor fills. required:
 * a statement that touched or returned no row ends the run with TG_CAT_NOT_FOUND
 * (a write run is then rolled back). rows gets the number touched or returned. */
typedef struct tg_cat_step {
    const char *sql;
    int n;
    const char *const *params;
    void (*row)(void *ctx, tg_cat_row row);
    void *ctx;
    bool required;
    long rows;
} tg_cat_step;

typedef struct tg_catalog_ops {
    const char *name; /* "sqlite" */
    /* Frees everything the backend holds, connections included. */
    void (*close)(tg_catalog *catalog);
    tg_cat_status (*ping)(tg_catalog *catalog);
    int (*schema_version)(tg_catalog *catalog);

    tg_cat_status (*model_create)(tg_catalog *catalog, const char *org, const char *name,
                                  const char *description, tg_model *out);
    tg_cat_status (*model_get)(tg_catalog *catalog, const char *org, const char *name,
                               tg_model *out);
    tg_cat_status (*model_list)(tg_catalog *catalog, const char *org, const char *query,
                                const char *after_org, const char *after_name, unsigned limit,
                                void (*visit)(void *ctx, const tg_model *model), void *ctx);
    tg_cat_status (*model_delete)(tg_catalog *catalog, int64_t model_id);

    /* registry metadata (schema 15) */
    tg_cat_status (*tag_list)(tg_catalog *catalog, int64_t model_id, int64_t version_id,
                              void (*visit)(void *ctx, const char *key, const char *value),
                              void *ctx);
    tg_cat_status (*version_description)(tg_catalog *catalog, int64_t version_id,
                                         char out[TG_DESCRIPTION_MAX + 1]);
    tg_cat_status (*meta_update)(tg_catalog *catalog, int64_t model_id, int64_t version_id,
                                 const char *description, const tg_tag_change *changes,
                                 size_t count, unsigned max_tags, const char **why);
    tg_cat_status (*version_hub_tags_set)(tg_catalog *catalog, int64_t version_id,
                                          const char *const *tags, size_t count);
    tg_cat_status (*hub_tag_list)(tg_catalog *catalog, int64_t model_id,
                                  void (*visit)(void *ctx, const char *tag), void *ctx);
    tg_cat_status (*downloads_add)(tg_catalog *catalog, const int64_t *model_ids,
                                   const uint64_t *counts, size_t n);
    tg_cat_status (*model_search)(tg_catalog *catalog, const tg_model_search *search,
                                  void (*visit)(void *ctx, const tg_model *model), void *ctx);

    tg_cat_status (*version_create)(tg_catalog *catalog, int64_t model_id, tg_version *out);
    tg_cat_status (*version_get)(tg_catalog *catalog, int64_t model_id, int64_t number,
                                 tg_version *out);
    tg_cat_status (*version_by_digest)(tg_catalog *catalog, int64_t model_id, const char *digest,
                                       tg_version *out);
    tg_cat_status (*version_latest_published)(tg_catalog *catalog, int64_t model_id,
                                              tg_version *out);
    tg_cat_status (*version_list)(tg_catalog *catalog, int64_t model_id,
                                  void (*visit)(void *ctx, const tg_version *version), void *ctx);
    tg_cat_status (*version_publish)(tg_catalog *catalog, int64_t version_id, const char *digest,
                                     tg_version *out);

    tg_cat_status (*code_files)(tg_catalog *catalog, int64_t model_id, int64_t number,
                                void (*visit)(void *ctx, int64_t number, const char *path,
                                              const char *code_reason),
                                void *ctx);
    tg_cat_status (*namespace_get)(tg_catalog *catalog, const char *org,
                                   tg_namespace_settings *out);
    tg_cat_status (*namespace_set_code)(tg_catalog *catalog, const char *org, bool allow_code,
                                        const char *now);
    tg_cat_status (*alias_set)(tg_catalog *catalog, int64_t model_id, const char *alias,
                               int64_t number);
    tg_cat_status (*alias_get)(tg_catalog *catalog, int64_t model_id, const char *alias,
                               int64_t *number);
    tg_cat_status (*alias_delete)(tg_catalog *catalog, int64_t model_id, const char *alias);
    tg_cat_status (*version_delete_draft)(tg_catalog *catalog, int64_t version_id);
    tg_cat_status (*alias_list)(tg_catalog *catalog, int64_t model_id,
                                void (*visit)(void *ctx, const char *alias, int64_t number),
                                void *ctx);

    tg_cat_status (*signing_set)(tg_catalog *catalog, const char *org, const char *policy);
    tg_cat_status (*signing_get)(tg_catalog *catalog, const char *org, char **policy);

    /* guard NULL: only the draft check of tg_catalog_file_put */
    tg_cat_status (*file_put_guarded)(tg_catalog *catalog, const tg_commit_guard *guard,
                                      int64_t version_id, const tg_file_record *file,
                                      const char *tensor_stats, const char **why);
    tg_cat_status (*guard_check)(tg_catalog *catalog, const tg_commit_guard *guard,
                                 int64_t version_id, const char **why);
    tg_cat_status (*file_get)(tg_catalog *catalog, int64_t version_id, const char *path,
                              tg_file_record *out);
    tg_cat_status (*file_stats)(tg_catalog *catalog, int64_t version_id, const char *path,
                                char **tensor_stats);
    tg_cat_status (*file_delete)(tg_catalog *catalog, int64_t version_id, const char *path);
    tg_cat_status (*file_list)(tg_catalog *catalog, int64_t version_id, const char *after_path,
                               unsigned limit, void (*visit)(void *ctx, const tg_file_record *file),
                               void *ctx);

    tg_cat_status (*rejection_add)(tg_catalog *catalog, const tg_rejection *rejection);
    tg_cat_status (*rejection_list)(tg_catalog *catalog, const tg_rejection_filter *filter,
                                    unsigned limit,
                                    void (*visit)(void *ctx, const tg_rejection *rejection),
                                    void *ctx);

    tg_cat_status (*token_add)(tg_catalog *catalog, const char *hash, tg_scope scope,
                               const char *namespace_or_null);
    tg_cat_status (*token_lookup)(tg_catalog *catalog, const char *hash, tg_scope *scope,
                                  char *namespace_out, size_t namespace_len);
    tg_cat_status (*token_each)(tg_catalog *catalog,
                                void (*visit)(void *ctx, const tg_token_info *token), void *ctx);
    tg_cat_status (*token_id)(tg_catalog *catalog, const char *hash, int64_t *id);
    tg_cat_status (*token_revoke)(tg_catalog *catalog, int64_t id);

    tg_cat_status (*blob_each)(tg_catalog *catalog,
                               int (*visit)(void *ctx, const char *sha256, uint64_t size),
                               void *ctx);
    tg_cat_status (*model_blobs)(tg_catalog *catalog, int64_t model_id,
                                 void (*visit)(void *ctx, const char *sha256), void *ctx);
    tg_cat_status (*blob_referenced)(tg_catalog *catalog, const char *sha256, bool *referenced);

    /* token_id 0: no token recorded (tg_catalog_job_create) */
    tg_cat_status (*job_create_by)(tg_catalog *catalog, int64_t token_id, int64_t model_id,
                                   int64_t source_version_id, const char *dtype,
                                   const char *tensors_json, uint64_t bytes_total, tg_job *out,
                                   bool *existing);
    tg_cat_status (*job_get)(tg_catalog *catalog, int64_t job_id, tg_job *out);
    tg_cat_status (*job_list)(tg_catalog *catalog, const tg_job_filter *filter, int64_t before_id,
                              unsigned limit, void (*visit)(void *ctx, const tg_job *job),
                              void *ctx);
    tg_cat_status (*job_counts)(tg_catalog *catalog, uint64_t counts[TG_JOB_STATES]);
    tg_cat_status (*job_cancel)(tg_catalog *catalog, int64_t job_id, tg_job_state *was,
                                tg_job *out);
    /* namespace_limit: tg_catalog_job_claim_fair's (0: none) */
    tg_cat_status (*job_claim)(tg_catalog *catalog, unsigned namespace_limit, tg_job *out);
    tg_cat_status (*job_recover)(tg_catalog *catalog, int64_t max_attempts, unsigned *requeued,
                                 unsigned *failed);
    tg_cat_status (*job_progress)(tg_catalog *catalog, int64_t job_id, uint64_t bytes_done,
                                  uint64_t bytes_total);
    tg_cat_status (*job_fail)(tg_catalog *catalog, int64_t job_id, const char *reason,
                              const char *detail);
    tg_cat_status (*job_file_put)(tg_catalog *catalog, int64_t job_id, const tg_file_record *file,
                                  const char *tensor_stats);
    tg_cat_status (*job_file_list)(tg_catalog *catalog, int64_t job_id,
                                   void (*visit)(void *ctx, const tg_file_record *file), void *ctx);
    tg_cat_status (*job_commit)(tg_catalog *catalog, int64_t job_id, const char *digest,
                                tg_version *out);
    /* schema 5: job leases. claim, progress, job_file_put, fail and commit of a
     * running job act only for the lease holder (catalog->lease_owner). */
    tg_cat_status (*job_renew)(tg_catalog *catalog, int64_t job_id);
    tg_cat_status (*job_release)(tg_catalog *catalog, int64_t job_id);
    tg_cat_status (*version_publish_files)(tg_catalog *catalog, int64_t version_id,
                                           const char *digest, const tg_file_record *files,
                                           size_t count, tg_version *out, const char **why);
    /* schema 6: imports */
    tg_cat_status (*import_job_create)(tg_catalog *catalog, int64_t token_id, int64_t model_id,
                                       int64_t version_id, const char *path, const char *url,
                                       tg_job *out, bool *existing);
    tg_cat_status (*import_commit)(tg_catalog *catalog, int64_t job_id,
                                   const tg_commit_guard *guard, int64_t version_id,
                                   const tg_file_record *file, const char *tensor_stats,
                                   const char **why);
    /* schema 6: the ended (done or failed)
     * import jobs whose url may hold credentials (an "@", a "#", or a query other
     * than "?REDACTED"), job_id's (0: any), ids above after_id in id order, at most
     * limit; and the url of an ended job replaced (tg_catalog_job_scrub_urls) */
    tg_cat_status (*job_ended_urls)(tg_catalog *catalog, int64_t job_id, int64_t after_id,
                                    unsigned limit,
                                    void (*visit)(void *ctx, int64_t id, const char *url),
                                    void *ctx);
    tg_cat_status (*job_set_ended_url)(tg_catalog *catalog, int64_t job_id, const char *url);

    /* schema 12: runs steps[0..count) in order; write: in one write transaction
     * (every step or none), else as reads. A unique key taken answers TG_CAT_EXISTS,
     * a missing foreign key parent TG_CAT_NOT_FOUND. */
    tg_cat_status (*run_steps)(tg_catalog *catalog, bool write, tg_cat_step *steps, size_t count);
    /* versions by commit id */
    tg_cat_status (*version_by_commit)(tg_catalog *catalog, int64_t model_id, const char *commit,
                                       tg_version *out);

    /* schema 14: one statement of catalog_mirror.c (mirrors of a Hub repository): the
     * parameters $1..$n as text (NULL: SQL NULL), first named in order; each row's
     * columns as text (NULL for SQL NULL) to visit (NULL: rows are not read). A
     * statement that writes is run on the writer. */
    tg_cat_status (*mirror_exec)(tg_catalog *catalog, bool write, const char *sql, int n,
                                 const char *const *params,
                                 void (*visit)(void *ctx, int columns, const char *const *values),
                                 void *ctx);

    /* schema 11: the audit log */
    tg_cat_status (*audit_append)(tg_catalog *catalog, const char *token_hash,
                                  tg_audit_record *record);
    tg_cat_status (*audit_list)(tg_catalog *catalog, const tg_audit_filter *filter, unsigned limit,
                                void (*visit)(void *ctx, const tg_audit_record *record), void *ctx);
} tg_catalog_ops;

/* The part of every backend's state the dispatch reads: the backend's struct
 * starts with it, so a tg_catalog * is a pointer to the backend's state. */
struct tg_catalog {
    const tg_catalog_ops *ops;
    /* Job leases (tg_catalog_set_job_lease), filled by tg_catalog_open: who this
     * handle is as a lease holder (host, pid and random bits: one per process
     * and open), how long a claim or a renewal holds a job, and how many claims a
     * job whose lease expired may have had before it fails as "interrupted". */
    char lease_owner[96];
    unsigned job_lease_seconds;
    unsigned job_max_attempts;
};

/* The SQLite backend (catalog_sqlite.c): path is a file name (never ":memory:",
 * whose connections could not share it). */
tg_cat_status tg_catalog_sqlite_open(const char *path, tg_catalog **out, char *err, size_t err_len);

/* The PostgreSQL backend (catalog_pg.c): conninfo is any libpq connection string
 * (a postgresql:// URI or keyword=value pairs). */
tg_cat_status tg_catalog_pg_open(const char *conninfo, tg_catalog **out, char *err, size_t err_len);

/* Fills a freshly opened handle's lease identity and job defaults (catalog.c);
 * tg_catalog_open (catalog_data.c) calls it after the backend opened. */
void tg_catalog_init_identity(tg_catalog *catalog);

/* True when stored (a version's rows) holds exactly the files of given[0..count),
 * by path, sha256 and size, in any order (for version_publish_files). */
bool tg_catalog_files_match(const tg_file_record *given, size_t count,
                            const tg_file_records *stored);

#endif
