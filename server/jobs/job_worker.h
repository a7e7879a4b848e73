/* The worker of the job pool as both sides see it (server/jobs/jobs.c runs the
 * workers; the job kinds, convert_job.c and import_job.c, ask theirs whether to go
 * on through tg_job_worker_signal, declared in jobs.h). Kept apart from jobs.c so
 * that the pool calls the kinds and the kinds call only this file: the folder reads
 * top-down (scripts/layer-check.sh fails on a circle). */
#ifndef TG_JOB_WORKER_H
#define TG_JOB_WORKER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "jobs.h"

struct tg_job_worker {
    pthread_t thread;
    bool started;
    int64_t job_id; /* the job it runs (under pool.lock), 0 when idle */
    /* set by tg_jobs_cancel and the renewer for job_id, cleared at each claim (atomic) */
    int cancelled;
    int lease_lost;
    time_t renewed; /* when the renewer last renewed job_id's lease (renewer only) */
};

/* The pool stops (true, once, from tg_jobs_stop) or starts (false): every worker's
 * signal turns TG_JOB_STOPPING. Atomic. */
void tg_job_workers_set_stopping(bool stopping);
bool tg_job_workers_stopping(void);

/* The test delay tg_jobs_test_delay_ms answers (set at tg_jobs_start). */
void tg_job_workers_set_test_delay_ms(unsigned delay_ms);

#endif
