/* Conversion of a published version into a new derived version, as a background
 * job (POST .../versions/{rev}/convert; GET /v1/jobs, GET and DELETE /v1/jobs/{id}).
 *
 * One worker thread runs the queued jobs of the catalog's jobs table in order.
 * A job converts, shard by shard, the floating tensors whose names match its
 * globs (bit-exact with PyTorch's .to()), streaming in bounded chunks with lib's
 * converter (lib/st_convert_stream.h); each new shard goes through the ingest
 * pipeline (server/ingest/pipeline.h: the gate, SHA-256 in the same pass, the blob
 * store) and is recorded in job_files. The indexes of changed directories are
 * rewritten with the new total_size; every other file is carried over (same
 * blob). The new version appears only when tg_catalog_job_commit inserts it with
 * all its files in one transaction.
 *
 * Crash safety: a killed server leaves its job "running"; at the next start the
 * job is queued again (tmp/ was emptied by the store) and resumes, skipping the
 * shards already in job_files, until it has been interrupted
 * TG_CONVERT_MAX_ATTEMPTS times, after which it is marked failed.
 *
 * Replicas (a shared PostgreSQL catalog): a claim is a lease (catalog.h) that a
 * renewer thread extends every third of --job-lease-seconds while the job runs;
 * the worker also looks for claimable jobs every few seconds, so a job queued
 * through another replica, or left by a replica that died (its lease expired),
 * is taken over and finished, its version committed once (only the lease
 * holder commits). A worker that finds its lease lost stops the job without
 * failing it. A running job
 * whose cancel was asked (DELETE /v1/jobs/{id}) is marked in the catalog and fails
 * with reason "cancelled" at the worker's next step, or at the next start.
 *
 * The job system sits below the HTTP layer: it works on a tg_jobs_context (the
 * catalog, the store, the limits it needs), never on the server or a request. */
#ifndef TG_CONVERT_JOB_H
#define TG_CONVERT_JOB_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr_policy.h"
#include "blobstore.h"
#include "catalog.h"
#include "st_dtype.h"

#define TG_CONVERT_GLOBS_MAX 64
#define TG_CONVERT_GLOB_LEN_MAX 256
#define TG_CONVERT_MAX_ATTEMPTS 3
#define TG_JOB_LEASE_SECONDS_DEFAULT 30

/* What the job system works with: the server's catalog and blob store, and the
 * limits it reads from the server's configuration. Made by cmd/serve.c for the
 * worker and by the routes that survey a version (server/routes/convert.c); the
 * catalog and the store must outlive the worker (tg_convert_jobs_stop). */
typedef struct tg_jobs_context {
    tg_catalog *catalog;
    tg_blobstore *store;
    uint64_t max_header; /* --max-header: the bound on N of the headers read and written */
    /* --job-lease-seconds: how long a claim holds a job without renewal (0: the
     * default, TG_JOB_LEASE_SECONDS_DEFAULT); the worker renews every third of it */
    unsigned lease_seconds;
    /* imports (server/jobs/import_job.h): the size limit (--max-body), the NaN/Inf
     * rule of uploads, and the address policy (--import-allow) */
    uint64_t max_body;
    bool refuse_nonfinite;
    tg_addr_policy import_policy;
    /* the server's publish lock (tg_server.publish_lock), held around an import's
     * catalog commit as around an upload's, so a publish never checks a draft that an
     * import changes under it; NULL: none (tests without a server) */
    pthread_mutex_t *publish_lock;
    /* called (when not NULL) after a job committed a derived version, which "latest"
     * names now: the server drops the answers it keeps for moving revisions */
    void (*version_published)(void *arg);
    void *version_published_arg;
} tg_jobs_context;

/* What to convert: the target dtype and tensor-name globs (fnmatch; none: all). */
typedef struct tg_convert_spec {
    st_dtype to;
    size_t glob_count;
    const char *globs[TG_CONVERT_GLOBS_MAX]; /* owned by the caller */
} tg_convert_spec;

/* What a conversion would do to a version, read from its shard headers. */
typedef struct tg_convert_survey {
    uint64_t bytes_total;    /* bytes of the shards it would write */
    size_t shards;           /* .safetensors files of the version */
    size_t shards_converted; /* those with a tensor that changes dtype */
    size_t tensors_converted;
    long unmatched_glob; /* index of the first glob matching no tensor, or -1 */
} tg_convert_survey;

/* True when dtype is a target the kernels convert to (F64, F32, F16, BF16, F8_E4M3, F8_E5M2). */
bool tg_convert_target_supported(st_dtype dtype);

/* Reads the headers of version_id's shards and fills out. Returns 0, or -1 with
 * detail on a server error (catalog, unreadable blob). */
int tg_convert_survey_version(const tg_jobs_context *context, int64_t version_id,
                              const tg_convert_spec *spec, tg_convert_survey *out, char *detail,
                              size_t detail_len);

/* Starts the worker (one per process) on a copy of context: jobs a previous process
 * left running are queued again (or failed after TG_CONVERT_MAX_ATTEMPTS), then
 * queued jobs run. Returns -1 with err set on failure. The environment variable
 * TENSORGATE_TEST_CONVERT_DELAY_MS (tests only) makes the worker write in 64 KiB
 * steps and sleep that long after each. */
int tg_convert_jobs_start(const tg_jobs_context *context, char *err, size_t err_len);
/* Tells the worker a job was queued. */
void tg_convert_jobs_wake(void);
/* Tells the worker that tg_catalog_job_cancel marked job_id, which is running:
 * it stops the job at its next step (the temp file goes, no version is made) and
 * fails it with reason "cancelled". A job between steps is refused at its next
 * job_files record or at its commit, so the mark alone is enough; this makes it
 * prompt. */
void tg_convert_jobs_cancel(int64_t job_id);
/* Stops the worker at its next step; a job in progress stays "running" and
 * resumes at the next start. */
void tg_convert_jobs_stop(void);

#endif
