/* The job pool, its lease renewer and cancel (see jobs.h). */
#include "jobs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "convert_job.h"
#include "import_job.h"
#include "job_worker.h"
#include "log.h"
#include "mirror_job.h"
#include "test_hooks.h"

/* The job kinds: what the pool runs for a job's kind. */
static const struct {
    const char *name;
    tg_job_outcome (*run)(const tg_jobs_context *context, const tg_job *job,
                          const tg_job_worker *worker);
} kinds[] = {
    {"convert", tg_convert_job_run},
    {"import", tg_import_job_run},
    {"mirror", tg_mirror_job_run},
};

/* A cancel asked through another replica is looked for this often. */
#define CANCEL_POLL_SECONDS 1

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;        /* a job was queued, or stop */
    pthread_cond_t renew_wake;  /* stop */
    pthread_mutex_t claim_lock; /* one claim at a time: the fair pick counts this pool's jobs */
    bool started;
    uint64_t queued; /* under lock: one more at each wake */
    tg_jobs_context context;
    unsigned count;
    tg_job_worker *workers;
    pthread_t renewer;
    bool renewer_started;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER,
          .renew_wake = PTHREAD_COND_INITIALIZER,
          .claim_lock = PTHREAD_MUTEX_INITIALIZER};

static bool pool_stopping(void)
{
    return tg_job_workers_stopping();
}

unsigned tg_jobs_lease_seconds(const tg_jobs_context *context)
{
    return context->lease_seconds > 0 ? context->lease_seconds : TG_JOB_LEASE_SECONDS_DEFAULT;
}

unsigned tg_jobs_namespace_limit(unsigned workers)
{
    return workers > 1 ? workers - 1 : 1;
}

/* A deadline seconds from now, for pthread_cond_timedwait. */
static struct timespec after_seconds(unsigned seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += seconds;
    return ts;
}

static time_t monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

/* ---- the renewer ---- */

/* Sets a worker's flag when it still runs job_id; caller holds pool.lock. */
static void flag_worker(tg_job_worker *worker, int64_t job_id, int *flag)
{
    if (worker->job_id == job_id)
        __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
}

/* One look at one worker's job: its lease renewed when due, else its cancel mark
 * read. Caller holds pool.lock, which is released around the catalog call. */
static void look_at(const tg_jobs_context *ctx, tg_job_worker *worker, tg_job *scratch)
{
    int64_t job_id = worker->job_id;
    if (job_id == 0)
        return;
    unsigned every = tg_jobs_lease_seconds(ctx) / 3 > 0 ? tg_jobs_lease_seconds(ctx) / 3 : 1;
    time_t now = monotonic_seconds();
    bool renew = now - worker->renewed >= (time_t)every;
    pthread_mutex_unlock(&pool.lock);
    tg_cat_status status = TG_CAT_OK;
    bool cancel = false;
    if (renew) {
        status = tg_catalog_job_renew(ctx->catalog, job_id);
        cancel = status == TG_CAT_CONFLICT;
    } else if (tg_catalog_job_get(ctx->catalog, job_id, scratch) == TG_CAT_OK) {
        cancel = scratch->cancel_requested;
    }
    /* not this handle's: taken over while it still runs, or ended (done by its worker a
     * moment ago, failed, its model deleted); only the first is worth a warning */
    bool elsewhere = status == TG_CAT_NOT_FOUND &&
                     tg_catalog_job_get(ctx->catalog, job_id, scratch) == TG_CAT_OK &&
                     scratch->state == TG_JOB_RUNNING;
    if (elsewhere)
        tg_log(TG_LOG_WARN, "job %lld: its lease is no longer this server's; stopping it",
               (long long)job_id);
    else if (status != TG_CAT_OK && status != TG_CAT_CONFLICT && status != TG_CAT_NOT_FOUND)
        tg_log(TG_LOG_WARN, "job %lld: its lease could not be renewed (the catalog failed)",
               (long long)job_id);
    pthread_mutex_lock(&pool.lock);
    if (renew && !tg_cat_failed(status) && worker->job_id == job_id)
        worker->renewed = now;
    if (status == TG_CAT_NOT_FOUND)
        flag_worker(worker, job_id, &worker->lease_lost);
    if (cancel)
        flag_worker(worker, job_id, &worker->cancelled);
}

/* Every second: each running job's lease is renewed every third of the lease, and
 * its cancel mark read between renewals (a cancel asked through another replica). */
static void *renewer_main(void *arg)
{
    const tg_jobs_context *ctx = arg;
    tg_job *scratch = malloc(sizeof *scratch);
    if (scratch == NULL) {
        tg_log(TG_LOG_ERROR, "job lease renewer: out of memory; leases are not renewed");
        return NULL;
    }
    pthread_mutex_lock(&pool.lock);
    while (!pool_stopping()) {
        struct timespec until = after_seconds(CANCEL_POLL_SECONDS);
        (void)pthread_cond_timedwait(&pool.renew_wake, &pool.lock, &until);
        for (unsigned i = 0; i < pool.count && !pool_stopping(); i++)
            look_at(ctx, &pool.workers[i], scratch);
    }
    pthread_mutex_unlock(&pool.lock);
    free(scratch);
    return NULL;
}

/* ---- the workers ---- */

static tg_job_outcome run_kind(const tg_jobs_context *ctx, const tg_job *job,
                               const tg_job_worker *worker)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(job->kind, kinds[i].name) == 0)
            return kinds[i].run(ctx, job, worker);
    tg_log(TG_LOG_ERROR, "job %lld: unknown kind '%s'", (long long)job->id, job->kind);
    tg_catalog_job_fail(ctx->catalog, job->id, "internal_error",
                        "the server does not know this kind of job");
    return TG_JOB_OUTCOME_FAILED;
}

static void set_job(tg_job_worker *worker, int64_t job_id)
{
    pthread_mutex_lock(&pool.lock);
    worker->job_id = job_id;
    worker->renewed = monotonic_seconds();
    __atomic_store_n(&worker->cancelled, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&worker->lease_lost, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&pool.lock);
}

/* Claims the next job fairly; false when there is none (or the catalog failed). */
static bool claim(const tg_jobs_context *ctx, tg_job_worker *worker, tg_job *job)
{
    pthread_mutex_lock(&pool.claim_lock);
    tg_cat_status status =
        tg_catalog_job_claim_fair(ctx->catalog, tg_jobs_namespace_limit(pool.count), job);
    if (status == TG_CAT_OK)
        set_job(worker, job->id); /* before the next claim counts it */
    pthread_mutex_unlock(&pool.claim_lock);
    return status == TG_CAT_OK;
}

static void run_claimed(const tg_jobs_context *ctx, tg_job_worker *worker, const tg_job *job)
{
    tg_job_outcome outcome = run_kind(ctx, job, worker);
    if (outcome == TG_JOB_OUTCOME_STOPPED) {
        /* the server is stopping: the lease goes at once, so another replica (or
         * this one, restarted) takes the job up without waiting for it to expire */
        (void)tg_catalog_job_release(ctx->catalog, job->id);
        tg_log(TG_LOG_INFO, "job %lld: stopped; it resumes at the next start", (long long)job->id);
    } else if (outcome == TG_JOB_OUTCOME_LEASE_LOST) {
        tg_log(TG_LOG_WARN, "job %lld: another replica took the job over; left to it",
               (long long)job->id);
    }
    set_job(worker, 0);
}

static void *worker_main(void *arg)
{
    tg_job_worker *worker = arg;
    const tg_jobs_context *ctx = &pool.context;
    tg_job *job = malloc(sizeof *job);
    if (job == NULL) {
        tg_log(TG_LOG_ERROR, "job worker: out of memory; it runs no job");
        return NULL;
    }
    /* Besides a wake (a job queued here), each worker looks for work on its own:
     * a job queued through another replica, or one whose holder died. */
    unsigned poll_every = tg_jobs_lease_seconds(ctx) / 2;
    if (poll_every < 1)
        poll_every = 1;
    if (poll_every > 5)
        poll_every = 5;
    uint64_t seen = 0;
    for (bool first = true;; first = false) {
        pthread_mutex_lock(&pool.lock);
        struct timespec until = after_seconds(poll_every);
        while (!first && !pool_stopping() && pool.queued == seen) {
            if (pthread_cond_timedwait(&pool.wake, &pool.lock, &until) == ETIMEDOUT)
                break;
        }
        seen = pool.queued;
        pthread_mutex_unlock(&pool.lock);
        if (pool_stopping())
            break;
        while (!pool_stopping() && claim(ctx, worker, job))
            run_claimed(ctx, worker, job);
    }
    free(job);
    return NULL;
}

/* ---- start, wake, cancel, stop ---- */

int tg_jobs_start(const tg_jobs_context *context, char *err, size_t err_len)
{
    unsigned requeued = 0, failed = 0;
    tg_catalog_set_job_lease(context->catalog, tg_jobs_lease_seconds(context), TG_JOB_MAX_ATTEMPTS);
    if (tg_catalog_job_recover(context->catalog, TG_JOB_MAX_ATTEMPTS, &requeued, &failed) !=
        TG_CAT_OK) {
        snprintf(err, err_len, "cannot recover the jobs of a previous run");
        return -1;
    }
    if (requeued > 0 || failed > 0)
        tg_log(TG_LOG_INFO, "jobs interrupted by the last stop: %u resumed, %u given up", requeued,
               failed);
    const char *delay = tg_test_hook(TG_HOOK_CONVERT_DELAY_MS);
    unsigned count = context->workers > 0 ? context->workers : TG_JOB_WORKERS_DEFAULT;
    if (count > TG_JOB_WORKERS_MAX)
        count = TG_JOB_WORKERS_MAX;
    tg_job_worker *workers = calloc(count, sizeof *workers);
    if (workers == NULL) {
        snprintf(err, err_len, "cannot start the job workers: out of memory");
        return -1;
    }
    pthread_mutex_lock(&pool.lock);
    unsigned delay_ms = delay ? (unsigned)strtoul(delay, NULL, 10) : 0;
    tg_job_workers_set_test_delay_ms(delay_ms > 10000 ? 10000 : delay_ms);
    pool.context = *context;
    tg_job_workers_set_stopping(false);
    pool.workers = workers;
    pool.count = count;
    pool.started = true;
    int rc = 0;
    for (unsigned i = 0; i < count && rc == 0; i++) {
        rc = pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]);
        workers[i].started = rc == 0;
    }
    if (rc == 0) {
        rc = pthread_create(&pool.renewer, NULL, renewer_main, &pool.context);
        pool.renewer_started = rc == 0;
    }
    pthread_mutex_unlock(&pool.lock);
    if (rc != 0) {
        snprintf(err, err_len, "cannot start the job workers: %s", strerror(rc));
        tg_jobs_stop();
        return -1;
    }
    tg_log(TG_LOG_INFO, "job pool: %u workers, at most %u running jobs per namespace", count,
           tg_jobs_namespace_limit(count));
    return 0;
}

void tg_jobs_wake(void)
{
    pthread_mutex_lock(&pool.lock);
    pool.queued++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
}

void tg_jobs_cancel(int64_t job_id)
{
    pthread_mutex_lock(&pool.lock);
    for (unsigned i = 0; i < pool.count; i++)
        flag_worker(&pool.workers[i], job_id, &pool.workers[i].cancelled);
    pthread_mutex_unlock(&pool.lock);
}

void tg_jobs_stop(void)
{
    pthread_mutex_lock(&pool.lock);
    bool started = pool.started;
    tg_job_workers_set_stopping(true);
    pthread_cond_broadcast(&pool.wake);
    pthread_cond_broadcast(&pool.renew_wake);
    pthread_mutex_unlock(&pool.lock);
    if (!started)
        return;
    for (unsigned i = 0; i < pool.count; i++)
        if (pool.workers[i].started)
            pthread_join(pool.workers[i].thread, NULL);
    if (pool.renewer_started)
        pthread_join(pool.renewer, NULL);
    pthread_mutex_lock(&pool.lock);
    free(pool.workers);
    pool.workers = NULL;
    pool.count = 0;
    pool.started = false;
    pool.renewer_started = false;
    pthread_mutex_unlock(&pool.lock);
}
