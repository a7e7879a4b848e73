/* Unit tests for server/jobs/job_worker.c: what a job kind learns from its worker.
 * A pool-wide stop wins over a worker's own marks; a lost lease wins over a cancel
 * (the job is another replica's then, and nothing may be failed here); a NULL
 * worker (a kind run outside the pool, as in unit tests) only sees the stop; the
 * test delay reads back what was set. */
#include <stdbool.h>

#include "job_worker.h"
#include "test.h"

TEST(signals_in_order)
{
    tg_job_worker worker = {0};
    tg_job_workers_set_stopping(false);
    CHECK(tg_job_worker_signal(&worker) == TG_JOB_GO);
    CHECK(tg_job_worker_signal(NULL) == TG_JOB_GO);
    worker.cancelled = 1;
    CHECK(tg_job_worker_signal(&worker) == TG_JOB_CANCELLED);
    worker.lease_lost = 1;
    CHECK(tg_job_worker_signal(&worker) == TG_JOB_LEASE_LOST);
    tg_job_workers_set_stopping(true);
    CHECK(tg_job_workers_stopping());
    CHECK(tg_job_worker_signal(&worker) == TG_JOB_STOPPING);
    CHECK(tg_job_worker_signal(NULL) == TG_JOB_STOPPING);
    tg_job_workers_set_stopping(false);
    CHECK(!tg_job_workers_stopping());
    worker.cancelled = 0;
    worker.lease_lost = 0;
    CHECK(tg_job_worker_signal(&worker) == TG_JOB_GO);
}

TEST(test_delay)
{
    tg_job_workers_set_test_delay_ms(0);
    CHECK(tg_jobs_test_delay_ms() == 0);
    tg_job_workers_set_test_delay_ms(250);
    CHECK(tg_jobs_test_delay_ms() == 250);
    tg_job_workers_set_test_delay_ms(0);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(signals_in_order);
    RUN(test_delay);
    return test_report(argv[0]);
}
