/* The catalog's backend-independent part (catalog.h): tg_catalog_open picks the
 * backend from the catalog URL, every other tg_catalog_* call goes through the
 * backend's operation table (catalog_backend.h), and the helpers that need no
 * database live here. */
#include "catalog.h"
#include "catalog_backend.h"
#include "embedded.h"
#include "log.h"
#include "url_redact.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void tg_time_now(char out[TG_TIME_LEN])
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(out, TG_TIME_LEN, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* migrations/NNNN_*.sql, in order, compiled in by scripts/embed-migrations.sh:
 * tg_migrations[i] is schema version i + 1. */
const char *tg_catalog_migration_sql(int number)
{
    if (number < 1 || number > (int)tg_migrations_count)
        return NULL;
    return tg_migrations[number - 1].sql;
}

int tg_catalog_known_schema_version(void)
{
    return (int)tg_migrations_count;
}

/* The status a backend's answer settles to: a failure the backend could not
 * classify (a connection that broke between two statements while PostgreSQL
 * restarts) is TG_CAT_UNAVAILABLE when the catalog does not answer a ping now
 * (SQLite always answers), so the server says 503, not 500. */
static tg_cat_status settle(tg_catalog *catalog, tg_cat_status status)
{
    if (status == TG_CAT_ERROR && catalog->ops->ping(catalog) != TG_CAT_OK)
        return TG_CAT_UNAVAILABLE;
    return status;
}

#define DEFAULT_JOB_LEASE_SECONDS 30
#define DEFAULT_JOB_MAX_ATTEMPTS 3

/* The lease identity of a new handle: host, pid and 64 random bits. */
void tg_catalog_init_identity(tg_catalog *catalog)
{
    char host[64] = "";
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    unsigned long long bits = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, &bits, sizeof bits) != (ssize_t)sizeof bits) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        bits = (unsigned long long)ts.tv_nsec ^ ((unsigned long long)ts.tv_sec << 20) ^
               (unsigned long long)(uintptr_t)catalog;
    }
    if (fd >= 0)
        close(fd);
    snprintf(catalog->lease_owner, sizeof catalog->lease_owner, "%s:%ld:%016llx", host,
             (long)getpid(), bits);
    catalog->job_lease_seconds = DEFAULT_JOB_LEASE_SECONDS;
    catalog->job_max_attempts = DEFAULT_JOB_MAX_ATTEMPTS;
}

void tg_catalog_set_job_lease(tg_catalog *catalog, unsigned lease_seconds, unsigned max_attempts)
{
    if (lease_seconds > 0)
        catalog->job_lease_seconds = lease_seconds;
    if (max_attempts > 0)
        catalog->job_max_attempts = max_attempts;
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const tg_file_record *)a)->path, ((const tg_file_record *)b)->path);
}

bool tg_catalog_files_match(const tg_file_record *given, size_t count,
                            const tg_file_records *stored)
{
    if (stored->failed || stored->count != count)
        return false;
    if (count == 0)
        return true;
    tg_file_record *a = malloc(count * sizeof *a);
    if (a == NULL)
        return false;
    memcpy(a, given, count * sizeof *a);
    qsort(a, count, sizeof *a, by_path);
    qsort(stored->items, count, sizeof *stored->items, by_path);
    bool same = true;
    for (size_t i = 0; i < count && same; i++)
        same = strcmp(a[i].path, stored->items[i].path) == 0 &&
               strcmp(a[i].sha256, stored->items[i].sha256) == 0 &&
               a[i].size == stored->items[i].size;
    free(a);
    return same;
}

tg_cat_status tg_catalog_version_publish_files(tg_catalog *catalog, int64_t version_id,
                                               const char *digest, const tg_file_record *files,
                                               size_t count, tg_version *out, const char **why)
{
    *why = NULL;
    return settle(catalog, catalog->ops->version_publish_files(catalog, version_id, digest, files,
                                                               count, out, why));
}

tg_cat_status tg_catalog_job_release(tg_catalog *catalog, int64_t job_id)
{
    return settle(catalog, catalog->ops->job_release(catalog, job_id));
}

tg_cat_status tg_catalog_job_renew(tg_catalog *catalog, int64_t job_id)
{
    return settle(catalog, catalog->ops->job_renew(catalog, job_id));
}

static const char *const job_state_names[] = {"queued", "running", "done", "failed"};

const char *tg_job_state_name(tg_job_state state)
{
    return (unsigned)state < sizeof job_state_names / sizeof job_state_names[0]
               ? job_state_names[state]
               : "unknown";
}

void tg_file_records_collect(void *ctx, const tg_file_record *file)
{
    tg_file_records *list = ctx;
    if (list->failed)
        return;
    if (list->count == list->cap) {
        size_t cap = list->cap ? list->cap * 2 : 16;
        tg_file_record *grown = realloc(list->items, cap * sizeof *grown);
        if (grown == NULL) {
            list->failed = true;
            return;
        }
        list->items = grown;
        list->cap = cap;
    }
    list->items[list->count++] = *file;
}

/* The length of a URL scheme followed by "://" at the start of text (letters,
 * digits, '+', '-', '.' after a first letter), else 0. */
tg_cat_status tg_catalog_file_put(tg_catalog *catalog, int64_t version_id,
                                  const tg_file_record *file, const char *tensor_stats)
{
    return settle(catalog, catalog->ops->file_put_guarded(catalog, NULL, version_id, file,
                                                          tensor_stats, NULL));
}

tg_cat_status tg_catalog_job_create(tg_catalog *catalog, int64_t model_id,
                                    int64_t source_version_id, const char *dtype,
                                    const char *tensors_json, uint64_t bytes_total, tg_job *out,
                                    bool *existing)
{
    return settle(catalog,
                  catalog->ops->job_create_by(catalog, 0, model_id, source_version_id, dtype,
                                              tensors_json, bytes_total, out, existing));
}

/* ---- dispatch: each call goes to the backend's operation of the same name ---- */

void tg_catalog_close(tg_catalog *catalog)
{
    if (catalog != NULL)
        catalog->ops->close(catalog);
}

const char *tg_catalog_kind(const tg_catalog *catalog)
{
    return catalog->ops->name;
}

tg_cat_status tg_catalog_ping(tg_catalog *catalog)
{
    return catalog->ops->ping(catalog);
}

int tg_catalog_schema_version(tg_catalog *catalog)
{
    return catalog->ops->schema_version(catalog);
}

tg_cat_status tg_catalog_model_create(tg_catalog *catalog, const char *org, const char *name,
                                      const char *description, tg_model *out)
{
    return settle(catalog, catalog->ops->model_create(catalog, org, name, description, out));
}

tg_cat_status tg_catalog_model_get(tg_catalog *catalog, const char *org, const char *name,
                                   tg_model *out)
{
    return settle(catalog, catalog->ops->model_get(catalog, org, name, out));
}

tg_cat_status tg_catalog_model_list(tg_catalog *catalog, const char *org, const char *query,
                                    const char *after_org, const char *after_name, unsigned limit,
                                    void (*visit)(void *ctx, const tg_model *model), void *ctx)
{
    return settle(catalog, catalog->ops->model_list(catalog, org, query, after_org, after_name,
                                                    limit, visit, ctx));
}

tg_cat_status tg_catalog_model_delete(tg_catalog *catalog, int64_t model_id)
{
    return settle(catalog, catalog->ops->model_delete(catalog, model_id));
}

tg_cat_status tg_catalog_tag_list(tg_catalog *catalog, int64_t model_id, int64_t version_id,
                                  void (*visit)(void *ctx, const char *key, const char *value),
                                  void *ctx)
{
    return settle(catalog, catalog->ops->tag_list(catalog, model_id, version_id, visit, ctx));
}

tg_cat_status tg_catalog_version_description(tg_catalog *catalog, int64_t version_id,
                                             char out[TG_DESCRIPTION_MAX + 1])
{
    return settle(catalog, catalog->ops->version_description(catalog, version_id, out));
}

tg_cat_status tg_catalog_meta_update(tg_catalog *catalog, int64_t model_id, int64_t version_id,
                                     const char *description, const tg_tag_change *changes,
                                     size_t count, unsigned max_tags, const char **why)
{
    const char *ignored = NULL;
    return settle(catalog,
                  catalog->ops->meta_update(catalog, model_id, version_id, description, changes,
                                            count, max_tags, why ? why : &ignored));
}

tg_cat_status tg_catalog_version_hub_tags_set(tg_catalog *catalog, int64_t version_id,
                                              const char *const *tags, size_t count)
{
    return settle(catalog, catalog->ops->version_hub_tags_set(catalog, version_id, tags, count));
}

tg_cat_status tg_catalog_hub_tag_list(tg_catalog *catalog, int64_t model_id,
                                      void (*visit)(void *ctx, const char *tag), void *ctx)
{
    return settle(catalog, catalog->ops->hub_tag_list(catalog, model_id, visit, ctx));
}

tg_cat_status tg_catalog_downloads_add(tg_catalog *catalog, const int64_t *model_ids,
                                       const uint64_t *counts, size_t n)
{
    return settle(catalog, catalog->ops->downloads_add(catalog, model_ids, counts, n));
}

tg_cat_status tg_catalog_model_search(tg_catalog *catalog, const tg_model_search *search,
                                      void (*visit)(void *ctx, const tg_model *model), void *ctx)
{
    return settle(catalog, catalog->ops->model_search(catalog, search, visit, ctx));
}

tg_cat_status tg_catalog_version_create(tg_catalog *catalog, int64_t model_id, tg_version *out)
{
    return settle(catalog, catalog->ops->version_create(catalog, model_id, out));
}

tg_cat_status tg_catalog_version_get(tg_catalog *catalog, int64_t model_id, int64_t number,
                                     tg_version *out)
{
    return settle(catalog, catalog->ops->version_get(catalog, model_id, number, out));
}

tg_cat_status tg_catalog_version_by_digest(tg_catalog *catalog, int64_t model_id,
                                           const char *digest, tg_version *out)
{
    return settle(catalog, catalog->ops->version_by_digest(catalog, model_id, digest, out));
}

tg_cat_status tg_catalog_version_latest_published(tg_catalog *catalog, int64_t model_id,
                                                  tg_version *out)
{
    return settle(catalog, catalog->ops->version_latest_published(catalog, model_id, out));
}

tg_cat_status tg_catalog_version_list(tg_catalog *catalog, int64_t model_id,
                                      void (*visit)(void *ctx, const tg_version *version),
                                      void *ctx)
{
    return settle(catalog, catalog->ops->version_list(catalog, model_id, visit, ctx));
}

tg_cat_status tg_catalog_version_publish(tg_catalog *catalog, int64_t version_id,
                                         const char *digest, tg_version *out)
{
    return settle(catalog, catalog->ops->version_publish(catalog, version_id, digest, out));
}

tg_cat_status tg_catalog_code_files(tg_catalog *catalog, int64_t model_id, int64_t number,
                                    void (*visit)(void *ctx, int64_t number, const char *path,
                                                  const char *code_reason),
                                    void *ctx)
{
    return settle(catalog, catalog->ops->code_files(catalog, model_id, number, visit, ctx));
}

tg_cat_status tg_catalog_namespace_get(tg_catalog *catalog, const char *org,
                                       tg_namespace_settings *out)
{
    memset(out, 0, sizeof *out);
    tg_cat_status status = settle(catalog, catalog->ops->namespace_get(catalog, org, out));
    if (status == TG_CAT_NOT_FOUND) {
        memset(out, 0, sizeof *out); /* never set: the defaults */
        out->quota_bytes = -1;
        status = TG_CAT_OK;
    }
    return status;
}

tg_cat_status tg_catalog_namespace_set_code(tg_catalog *catalog, const char *org, bool allow_code,
                                            tg_namespace_settings *out)
{
    char now[TG_TIME_LEN];
    tg_time_now(now);
    tg_cat_status status =
        settle(catalog, catalog->ops->namespace_set_code(catalog, org, allow_code, now));
    if (status == TG_CAT_OK && out != NULL)
        status = tg_catalog_namespace_get(catalog, org, out);
    return status;
}

tg_cat_status tg_catalog_alias_set(tg_catalog *catalog, int64_t model_id, const char *alias,
                                   int64_t number)
{
    return settle(catalog, catalog->ops->alias_set(catalog, model_id, alias, number));
}

tg_cat_status tg_catalog_alias_delete(tg_catalog *catalog, int64_t model_id, const char *alias)
{
    return settle(catalog, catalog->ops->alias_delete(catalog, model_id, alias));
}

tg_cat_status tg_catalog_version_delete_draft(tg_catalog *catalog, int64_t version_id)
{
    return settle(catalog, catalog->ops->version_delete_draft(catalog, version_id));
}

tg_cat_status tg_catalog_alias_get(tg_catalog *catalog, int64_t model_id, const char *alias,
                                   int64_t *number)
{
    return settle(catalog, catalog->ops->alias_get(catalog, model_id, alias, number));
}

tg_cat_status tg_catalog_signing_set(tg_catalog *catalog, const char *org, const char *policy)
{
    return settle(catalog, catalog->ops->signing_set(catalog, org, policy));
}

tg_cat_status tg_catalog_signing_get(tg_catalog *catalog, const char *org, char **policy)
{
    *policy = NULL;
    return settle(catalog, catalog->ops->signing_get(catalog, org, policy));
}

tg_cat_status tg_catalog_alias_list(tg_catalog *catalog, int64_t model_id,
                                    void (*visit)(void *ctx, const char *alias, int64_t number),
                                    void *ctx)
{
    return settle(catalog, catalog->ops->alias_list(catalog, model_id, visit, ctx));
}

tg_cat_status tg_catalog_file_put_guarded(tg_catalog *catalog, const tg_commit_guard *guard,
                                          int64_t version_id, const tg_file_record *file,
                                          const char *tensor_stats, const char **why)
{
    return settle(catalog, catalog->ops->file_put_guarded(catalog, guard, version_id, file,
                                                          tensor_stats, why));
}

tg_cat_status tg_catalog_guard_check(tg_catalog *catalog, const tg_commit_guard *guard,
                                     int64_t version_id, const char **why)
{
    return settle(catalog, catalog->ops->guard_check(catalog, guard, version_id, why));
}

tg_cat_status tg_catalog_file_get(tg_catalog *catalog, int64_t version_id, const char *path,
                                  tg_file_record *out)
{
    return settle(catalog, catalog->ops->file_get(catalog, version_id, path, out));
}

tg_cat_status tg_catalog_file_stats(tg_catalog *catalog, int64_t version_id, const char *path,
                                    char **tensor_stats)
{
    return settle(catalog, catalog->ops->file_stats(catalog, version_id, path, tensor_stats));
}

tg_cat_status tg_catalog_file_delete(tg_catalog *catalog, int64_t version_id, const char *path)
{
    return settle(catalog, catalog->ops->file_delete(catalog, version_id, path));
}

tg_cat_status tg_catalog_file_list(tg_catalog *catalog, int64_t version_id, const char *after_path,
                                   unsigned limit,
                                   void (*visit)(void *ctx, const tg_file_record *file), void *ctx)
{
    return settle(catalog,
                  catalog->ops->file_list(catalog, version_id, after_path, limit, visit, ctx));
}

tg_cat_status tg_catalog_rejection_add(tg_catalog *catalog, const tg_rejection *rejection)
{
    return settle(catalog, catalog->ops->rejection_add(catalog, rejection));
}

tg_cat_status tg_catalog_rejection_list(tg_catalog *catalog, const tg_rejection_filter *filter,
                                        unsigned limit,
                                        void (*visit)(void *ctx, const tg_rejection *rejection),
                                        void *ctx)
{
    static const tg_rejection_filter all = {0};
    return settle(catalog,
                  catalog->ops->rejection_list(catalog, filter ? filter : &all, limit, visit, ctx));
}

tg_cat_status tg_catalog_audit_append(tg_catalog *catalog, const char *token_hash,
                                      tg_audit_record *record)
{
    return settle(catalog, catalog->ops->audit_append(catalog, token_hash, record));
}

tg_cat_status tg_catalog_audit_list(tg_catalog *catalog, const tg_audit_filter *filter,
                                    unsigned limit,
                                    void (*visit)(void *ctx, const tg_audit_record *record),
                                    void *ctx)
{
    return settle(catalog, catalog->ops->audit_list(catalog, filter, limit, visit, ctx));
}

tg_cat_status tg_catalog_token_add(tg_catalog *catalog, const char *hash, tg_scope scope,
                                   const char *namespace_or_null)
{
    return settle(catalog, catalog->ops->token_add(catalog, hash, scope, namespace_or_null));
}

tg_cat_status tg_catalog_token_lookup(tg_catalog *catalog, const char *hash, tg_scope *scope,
                                      char *namespace_out, size_t namespace_len)
{
    return settle(catalog,
                  catalog->ops->token_lookup(catalog, hash, scope, namespace_out, namespace_len));
}

tg_cat_status tg_catalog_token_each(tg_catalog *catalog,
                                    void (*visit)(void *ctx, const tg_token_info *token), void *ctx)
{
    return settle(catalog, catalog->ops->token_each(catalog, visit, ctx));
}

tg_cat_status tg_catalog_token_id(tg_catalog *catalog, const char *hash, int64_t *id)
{
    return settle(catalog, catalog->ops->token_id(catalog, hash, id));
}

tg_cat_status tg_catalog_token_revoke(tg_catalog *catalog, int64_t id)
{
    return settle(catalog, catalog->ops->token_revoke(catalog, id));
}

tg_cat_status tg_catalog_blob_each(tg_catalog *catalog,
                                   int (*visit)(void *ctx, const char *sha256, uint64_t size),
                                   void *ctx)
{
    return settle(catalog, catalog->ops->blob_each(catalog, visit, ctx));
}

tg_cat_status tg_catalog_model_blobs(tg_catalog *catalog, int64_t model_id,
                                     void (*visit)(void *ctx, const char *sha256), void *ctx)
{
    return settle(catalog, catalog->ops->model_blobs(catalog, model_id, visit, ctx));
}

tg_cat_status tg_catalog_blob_referenced(tg_catalog *catalog, const char *sha256, bool *referenced)
{
    return settle(catalog, catalog->ops->blob_referenced(catalog, sha256, referenced));
}

tg_cat_status tg_catalog_job_create_by(tg_catalog *catalog, int64_t token_id, int64_t model_id,
                                       int64_t source_version_id, const char *dtype,
                                       const char *tensors_json, uint64_t bytes_total, tg_job *out,
                                       bool *existing)
{
    return settle(catalog,
                  catalog->ops->job_create_by(catalog, token_id, model_id, source_version_id, dtype,
                                              tensors_json, bytes_total, out, existing));
}

tg_cat_status tg_catalog_job_get(tg_catalog *catalog, int64_t job_id, tg_job *out)
{
    return settle(catalog, catalog->ops->job_get(catalog, job_id, out));
}

tg_cat_status tg_catalog_job_counts(tg_catalog *catalog, uint64_t counts[TG_JOB_STATES])
{
    for (int i = 0; i < TG_JOB_STATES; i++)
        counts[i] = 0;
    return settle(catalog, catalog->ops->job_counts(catalog, counts));
}

tg_cat_status tg_catalog_job_list(tg_catalog *catalog, const tg_job_filter *filter,
                                  int64_t before_id, unsigned limit,
                                  void (*visit)(void *ctx, const tg_job *job), void *ctx)
{
    return settle(catalog, catalog->ops->job_list(catalog, filter, before_id, limit, visit, ctx));
}

tg_cat_status tg_catalog_job_cancel(tg_catalog *catalog, int64_t job_id, tg_job_state *was,
                                    tg_job *out)
{
    tg_cat_status status = settle(catalog, catalog->ops->job_cancel(catalog, job_id, was, out));
    if (status == TG_CAT_OK && *was == TG_JOB_QUEUED) /* failed now */
        tg_catalog_job_scrub_urls(catalog, job_id);
    return status;
}

tg_cat_status tg_catalog_job_claim(tg_catalog *catalog, tg_job *out)
{
    return tg_catalog_job_claim_fair(catalog, 0, out);
}

tg_cat_status tg_catalog_job_claim_fair(tg_catalog *catalog, unsigned namespace_limit, tg_job *out)
{
    tg_cat_status status = settle(catalog, catalog->ops->job_claim(catalog, namespace_limit, out));
    tg_catalog_job_scrub_urls(catalog, 0); /* the jobs whose lease expired for good */
    return status;
}

tg_cat_status tg_catalog_job_recover(tg_catalog *catalog, int64_t max_attempts, unsigned *requeued,
                                     unsigned *failed)
{
    tg_cat_status status =
        settle(catalog, catalog->ops->job_recover(catalog, max_attempts, requeued, failed));
    tg_catalog_job_scrub_urls(catalog, 0); /* also what an older server left */
    return status;
}

tg_cat_status tg_catalog_job_progress(tg_catalog *catalog, int64_t job_id, uint64_t bytes_done,
                                      uint64_t bytes_total)
{
    return settle(catalog, catalog->ops->job_progress(catalog, job_id, bytes_done, bytes_total));
}

tg_cat_status tg_catalog_job_fail(tg_catalog *catalog, int64_t job_id, const char *reason,
                                  const char *detail)
{
    tg_cat_status status = settle(catalog, catalog->ops->job_fail(catalog, job_id, reason, detail));
    tg_catalog_job_scrub_urls(catalog, job_id);
    return status;
}

tg_cat_status tg_catalog_job_file_put(tg_catalog *catalog, int64_t job_id,
                                      const tg_file_record *file, const char *tensor_stats)
{
    return settle(catalog, catalog->ops->job_file_put(catalog, job_id, file, tensor_stats));
}

tg_cat_status tg_catalog_job_file_list(tg_catalog *catalog, int64_t job_id,
                                       void (*visit)(void *ctx, const tg_file_record *file),
                                       void *ctx)
{
    return settle(catalog, catalog->ops->job_file_list(catalog, job_id, visit, ctx));
}

tg_cat_status tg_catalog_job_commit(tg_catalog *catalog, int64_t job_id, const char *digest,
                                    tg_version *out)
{
    return settle(catalog, catalog->ops->job_commit(catalog, job_id, digest, out));
}

tg_cat_status tg_catalog_import_job_create(tg_catalog *catalog, int64_t token_id, int64_t model_id,
                                           int64_t version_id, const char *path, const char *url,
                                           tg_job *out, bool *existing)
{
    *existing = false;
    return settle(catalog, catalog->ops->import_job_create(catalog, token_id, model_id, version_id,
                                                           path, url, out, existing));
}

tg_cat_status tg_catalog_import_commit(tg_catalog *catalog, int64_t job_id,
                                       const tg_commit_guard *guard, int64_t version_id,
                                       const tg_file_record *file, const char *tensor_stats,
                                       const char **why)
{
    *why = NULL;
    tg_cat_status status =
        settle(catalog, catalog->ops->import_commit(catalog, job_id, guard, version_id, file,
                                                    tensor_stats, why));
    tg_catalog_job_scrub_urls(catalog, job_id);
    return status;
}

#define SCRUB_BATCH 16

typedef struct scrub_batch {
    size_t count;
    int64_t ids[SCRUB_BATCH];
    char urls[SCRUB_BATCH][TG_URL_MAX + 1];
} scrub_batch;

static void scrub_visit(void *ctx, int64_t id, const char *url)
{
    scrub_batch *batch = ctx;
    if (batch->count >= SCRUB_BATCH)
        return;
    batch->ids[batch->count] = id;
    snprintf(batch->urls[batch->count], sizeof batch->urls[0], "%s", url);
    batch->count++;
}

void tg_catalog_job_scrub_urls(tg_catalog *catalog, int64_t job_id)
{
    scrub_batch *batch = malloc(sizeof *batch);
    if (batch == NULL) {
        tg_log(TG_LOG_ERROR, "catalog: out of memory redacting the URLs of ended jobs");
        return;
    }
    int64_t after = 0;
    tg_cat_status status = TG_CAT_OK;
    do {
        batch->count = 0;
        status =
            catalog->ops->job_ended_urls(catalog, job_id, after, SCRUB_BATCH, scrub_visit, batch);
        for (size_t i = 0; status == TG_CAT_OK && i < batch->count; i++) {
            char shown[TG_URL_MAX + 1];
            after = batch->ids[i];
            if (tg_url_redact(batch->urls[i], shown, sizeof shown) &&
                tg_cat_failed(catalog->ops->job_set_ended_url(catalog, batch->ids[i], shown)))
                status = TG_CAT_ERROR;
        }
    } while (status == TG_CAT_OK && batch->count == SCRUB_BATCH);
    if (tg_cat_failed(status))
        tg_log(TG_LOG_ERROR, "catalog: the URLs of ended import jobs could not be redacted");
    free(batch);
}

/* ---- versions by commit id ---- */

tg_cat_status tg_catalog_version_by_commit(tg_catalog *catalog, int64_t model_id,
                                           const char *commit, tg_version *out)
{
    if (strlen(commit) != 40 || strspn(commit, "0123456789abcdef") != 40)
        return TG_CAT_NOT_FOUND;
    return catalog->ops->version_by_commit(catalog, model_id, commit, out);
}
