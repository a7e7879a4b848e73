/* The worker's side that job kinds see (job_worker.h): the pool-wide stop, the
 * worker's cancel and lease-lost marks, and the tests' conversion delay. */
#include "job_worker.h"

static int stopping;           /* atomic: tg_job_workers_set_stopping */
static unsigned test_delay_ms; /* atomic: set at start, read by conversions */

void tg_job_workers_set_stopping(bool value)
{
    __atomic_store_n(&stopping, value ? 1 : 0, __ATOMIC_RELEASE);
}

bool tg_job_workers_stopping(void)
{
    return __atomic_load_n(&stopping, __ATOMIC_ACQUIRE) != 0;
}

void tg_job_workers_set_test_delay_ms(unsigned delay_ms)
{
    __atomic_store_n(&test_delay_ms, delay_ms, __ATOMIC_RELEASE);
}

unsigned tg_jobs_test_delay_ms(void)
{
    return __atomic_load_n(&test_delay_ms, __ATOMIC_ACQUIRE);
}

tg_job_signal tg_job_worker_signal(const tg_job_worker *worker)
{
    if (tg_job_workers_stopping())
        return TG_JOB_STOPPING;
    if (worker == NULL)
        return TG_JOB_GO;
    if (__atomic_load_n(&worker->lease_lost, __ATOMIC_ACQUIRE))
        return TG_JOB_LEASE_LOST;
    if (__atomic_load_n(&worker->cancelled, __ATOMIC_ACQUIRE))
        return TG_JOB_CANCELLED;
    return TG_JOB_GO;
}
