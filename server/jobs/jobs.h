/* The job system: one queue (the catalog's jobs table) and one pool of workers
 * that run its jobs, whatever their kind. A job kind is a row of jobs.c's table,
 * {"convert", tg_convert_job_run} (convert_job.h) and {"import", tg_import_job_run}
 * (import_job.h): the pool claims a job, hands it to its kind's run, and the run
 * ends it in the catalog (done, failed) or reports that it stopped.
 *
 * The pool: --job-workers threads (TG_JOB_WORKERS_DEFAULT). A queued job wakes
 * them (tg_jobs_wake); each also looks for work every few seconds, so a job
 * queued through another replica, or left by a replica that died (its lease
 * expired), is taken up.
 *
 * Fairness across namespaces (the org of a job's model): a claim takes the oldest
 * claimable job of the namespace that runs the fewest jobs in this pool, and a
 * namespace never takes the last free worker of a pool of two or more
 * (tg_jobs_namespace_limit: at most workers - 1 jobs of one namespace run at
 * once), so a job of another namespace always finds a worker within one job's
 * time, however many jobs one namespace queued and however long they run. Both
 * catalog backends decide the claim in one statement
 * (tg_catalog_job_claim_fair); the pool's claims are one at a time.
 *
 * Leases: a claim is a lease (catalog.h). The pool's renewer thread extends the
 * lease of every running job every third of --job-lease-seconds, and looks each
 * second for a cancel asked through another replica. A job whose lease was lost
 * (this server could not renew in time and another replica took it over) is
 * told to stop (TG_JOB_LEASE_LOST) and is neither failed nor cleaned here.
 *
 * Cancel (DELETE /v1/jobs/{id}): the catalog marks the job; tg_jobs_cancel tells
 * the worker that runs it, whose kind looks at tg_job_worker_signal at every step
 * (a converted chunk, every libcurl progress call: at least once a second) and
 * fails the job with reason "cancelled", leaving no temp file, job file or blob.
 *
 * The job system sits below the HTTP layer: it works on a tg_jobs_context (the
 * catalog, the store, the limits it needs), never on the server or a request. */
#ifndef TG_JOBS_H
#define TG_JOBS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr_policy.h"
#include "blobstore.h"
#include "catalog.h"

#define TG_JOB_WORKERS_DEFAULT 2
#define TG_JOB_WORKERS_MAX 64
#define TG_JOB_MAX_ATTEMPTS 3
#define TG_JOB_LEASE_SECONDS_DEFAULT 30
#define TG_IMPORT_TIMEOUT_DEFAULT 3600               /* seconds */
#define TG_IMPORT_MIN_RATE_DEFAULT ((uint64_t)65536) /* bytes per second */
#define TG_IMPORT_RATE_WINDOW_DEFAULT 30             /* seconds */

/* What the job system works with: the server's catalog and blob store, and the
 * limits it reads from the server's configuration. Made by cmd/serve.c for the
 * pool and by the routes that survey a version (server/routes/convert.c); the
 * catalog and the store must outlive the pool (tg_jobs_stop). */
typedef struct tg_jobs_context {
    tg_catalog *catalog;
    tg_blobstore *store;
    uint64_t max_header; /* --max-header: the bound on N of the headers read and written */
    /* --job-lease-seconds: how long a claim holds a job without renewal (0: the
     * default, TG_JOB_LEASE_SECONDS_DEFAULT); the renewer renews every third of it */
    unsigned lease_seconds;
    unsigned workers; /* --job-workers: the pool's threads (0: TG_JOB_WORKERS_DEFAULT) */
    /* imports (server/jobs/import_job.h): the size limit (--max-body), the NaN/Inf
     * rule of uploads, and the address policy (--import-allow) */
    uint64_t max_body;
    /* --namespace-quota: the storage quota of a namespace without its own (0: none);
     * an import is bounded by the room its namespace's quota leaves when it fetches */
    uint64_t namespace_quota;
    bool refuse_nonfinite;
    tg_addr_policy import_policy;
    /* --import-timeout: seconds an import may take in all (0: no deadline);
     * --import-min-rate: the least average bytes per second over each
     * --import-rate-window seconds (0: no minimum) */
    unsigned import_timeout;
    uint64_t import_min_rate;
    unsigned import_rate_window;
    /* the server's publish lock (tg_server.publish_lock), held around an import's
     * catalog commit as around an upload's, so a publish never checks a draft that an
     * import changes under it; NULL: none (tests without a server) */
    pthread_mutex_t *publish_lock;
    /* called (when not NULL) after a job committed a derived version, which "latest"
     * names now: the server drops the answers it keeps for moving revisions */
    void (*version_published)(void *arg);
    void *version_published_arg;
    /* the server's signing identity (version_sign.h): a derived version gets its
     * model.server.sig at the commit; NULL: none */
    const struct tg_version_signer *signer;
} tg_jobs_context;

/* A worker of the pool, as a job kind sees it: where it learns that it must stop. */
typedef struct tg_job_worker tg_job_worker;

/* Why a running job must stop now. */
typedef enum tg_job_signal {
    TG_JOB_GO,         /* keep going */
    TG_JOB_STOPPING,   /* the server stops: the job stays running, resumed later */
    TG_JOB_CANCELLED,  /* DELETE /v1/jobs/{id}: fail it with reason "cancelled" */
    TG_JOB_LEASE_LOST, /* another replica holds it now: leave it as it is */
} tg_job_signal;

/* What the worker running the job was told (atomic reads; a NULL worker: GO). */
tg_job_signal tg_job_worker_signal(const tg_job_worker *worker);

/* How a kind's run ended. DONE and FAILED: the run ended the job in the catalog.
 * STOPPED: the job stays running and the pool gives its lease up. LEASE_LOST: the
 * job is another replica's; nothing is touched. */
typedef enum tg_job_outcome {
    TG_JOB_OUTCOME_DONE,
    TG_JOB_OUTCOME_FAILED,
    TG_JOB_OUTCOME_STOPPED,
    TG_JOB_OUTCOME_LEASE_LOST,
} tg_job_outcome;

/* The lease length of this context's claims. */
unsigned tg_jobs_lease_seconds(const tg_jobs_context *context);

/* The most jobs of one namespace that run at once in a pool of workers threads:
 * workers - 1 (one worker stays for the other namespaces), at least 1. */
unsigned tg_jobs_namespace_limit(unsigned workers);

/* TENSORGATE_TEST_CONVERT_DELAY_MS (tests only, read at tg_jobs_start, at most
 * 10000): conversions write in 64 KiB steps and sleep this long after each. */
unsigned tg_jobs_test_delay_ms(void);

/* Starts the pool (one per process) on a copy of context: jobs a previous process
 * left running are queued again (or failed after TG_JOB_MAX_ATTEMPTS), then
 * queued jobs run. Returns -1 with err set on failure. */
int tg_jobs_start(const tg_jobs_context *context, char *err, size_t err_len);
/* Tells the pool a job was queued. */
void tg_jobs_wake(void);
/* Tells the worker running job_id (if one does here) that tg_catalog_job_cancel
 * marked it: the job stops at its next step and fails with reason "cancelled". A
 * job between steps is refused at its next catalog record or at its commit, so
 * the mark alone is enough; this makes it prompt. */
void tg_jobs_cancel(int64_t job_id);
/* Stops the pool: each worker stops its job at its next step; a job in progress
 * stays "running" (its lease given up) and resumes at the next start. */
void tg_jobs_stop(void);

#endif
