/* Conversion of a published version into a new derived version, as a background
 * job of kind "convert" (POST .../versions/{rev}/convert; GET /v1/jobs, GET and
 * DELETE /v1/jobs/{id}), run by the job pool (jobs.h).
 *
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
 * TG_JOB_MAX_ATTEMPTS times, after which it is marked failed.
 *
 * Replicas (a shared PostgreSQL catalog): the pool renews the job's lease while
 * it runs; a job whose lease was lost stops without failing (the replica that
 * took it over finishes it with the files recorded so far, and only the lease
 * holder commits). A cancel (tg_jobs_cancel) or a stopping server is seen after
 * each converted chunk: a cancelled job fails with reason "cancelled", its temp
 * file, job files and their blobs gone. */
#ifndef TG_CONVERT_JOB_H
#define TG_CONVERT_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog.h"
#include "jobs.h"
#include "st_dtype.h"

#define TG_CONVERT_GLOBS_MAX 64
#define TG_CONVERT_GLOB_LEN_MAX 256
#define TG_CONVERT_MAX_ATTEMPTS TG_JOB_MAX_ATTEMPTS

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

/* The job kind "convert" (jobs.h): runs the claimed job to its commit (done), or
 * fails it with its reason; stops (the job stays running) when the worker is told
 * the server stops or the lease was lost. TENSORGATE_TEST_CONVERT_DELAY_MS (tests
 * only, tg_jobs_test_delay_ms) makes it write in 64 KiB steps and sleep that long
 * after each. */
tg_job_outcome tg_convert_job_run(const tg_jobs_context *context, const tg_job *job,
                                  const tg_job_worker *worker);

#endif
