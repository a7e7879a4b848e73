/* Imports from a URL (POST .../versions/{rev}/files/{path}/import): the job kind
 * "import" of the job pool (jobs.h), run by tg_import_job_run. The file is fetched with libcurl,
 * only over http and https (redirects too, at most TG_IMPORT_MAX_REDIRECTS), every connection's
 * peer address checked by the address policy (addr_policy.h) in curl's socket-open callback, no
 * proxy. The bytes go through the one ingest pipeline (server/ingest/pipeline.h)
 * in ranges: the first 8 bytes, then the header (at most --max-header, or the
 * 64 KiB a sniffer needs), then the body, each a separate request, so a file the
 * gate refuses by its head (pickle, bad header, too large by its announced size)
 * is refused before its body is asked for. A transfer that breaks resumes with
 * Range from the byte it reached, at most TG_IMPORT_MAX_RESUMES times, when the
 * source's validator (ETag, else Last-Modified) and total size are unchanged. A
 * source that does not do ranges is read in one stream, stopped at the first
 * refusal. The file row records the URL without its credentials (files.source_url,
 * common/url_redact.h); the job's log lines show that form only; the row and the job's
 * "done" are one catalog transaction (tg_catalog_import_commit), re-checking that
 * the draft is still a draft, the job's token still covers the model and (on a
 * shared catalog) this server still holds the job's lease.
 *
 * Bounds: the whole import ends within --import-timeout seconds (import_timeout),
 * and the source must send at least --import-min-rate bytes per second on average
 * over each --import-rate-window seconds (import_too_slow), counted from the
 * start, connects and waits included. libcurl's progress callback, called at
 * least once a second even when no byte comes, checks them and the pool's
 * signals: a cancel fails the job with reason "cancelled" within a second (its
 * temp file goes; no file row, no blob), a stopping server or a lost lease stops
 * the transfer and leaves the job as it is.
 *
 * Failure reasons: import_url_invalid, import_scheme_forbidden,
 * import_address_forbidden, import_fetch_failed, import_source_changed,
 * import_too_large, import_timeout, import_too_slow, the gate's reasons for bad content,
 * insufficient_storage, cancelled, token_revoked, forbidden, version_published, internal_error. */
#ifndef TG_IMPORT_JOB_H
#define TG_IMPORT_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog.h"
#include "jobs.h"

#define TG_IMPORT_MAX_REDIRECTS 5
#define TG_IMPORT_MAX_RESUMES 3

/* Checks a URL before a job is queued: absolute, http or https, a host, at most
 * TG_URL_MAX bytes. Returns NULL when good, else the reason (import_url_invalid or
 * import_scheme_forbidden) with a sentence in detail. When the host is a numeric
 * address the policy forbids, the reason is import_address_forbidden. */
const char *tg_import_url_check(const tg_addr_policy *policy, const char *url, char *detail,
                                size_t detail_len);

/* The job kind "import" (jobs.h): fetches, ingests, commits (the job becomes done)
 * or fails the job with its reason. worker (may be NULL) is where the pool's
 * signals are read: a stopping server stops the transfer and the job stays
 * running, to be resumed at the next start (TG_JOB_OUTCOME_STOPPED); a lost lease
 * stops it and leaves the job to the replica that holds it. */
tg_job_outcome tg_import_job_run(const tg_jobs_context *context, const tg_job *job,
                                 const tg_job_worker *worker);

/* One file of a mirror (server/jobs/mirror_job.h), fetched as an import fetches
 * (the address policy, ranges, resumes, --import-timeout counted from started_ms,
 * --import-min-rate, the pool's signals) through the gate into the store, sending
 * bearer (when not NULL or "") as its Authorization to the first host only. The
 * stored file goes to commit (in place of an import's catalog commit), which
 * answers whether it recorded it; refused content is recorded as a rejection. */
typedef struct tg_import_file {
    const char *url;
    const char *path;
    const char *bearer;
    int64_t started_ms; /* tg_import_now_ms() of the mirror's start; 0: now */
    bool (*commit)(void *ctx, const tg_file_record *file, const char *stats);
    void *commit_ctx;
    /* out */
    char reason[48]; /* "" when stored */
    char detail[TG_JOB_DETAIL_MAX];
    bool refused;     /* the content's fault: the gate's reason, or import_too_large */
    bool stopped;     /* the server stops */
    bool lease_lost;  /* another replica holds the job */
    uint64_t fetched; /* bytes received from the source */
} tg_import_file;

/* True when the file was stored and committed; else file's reason says why. job is
 * the mirror's job (its model, its id for the rejection log). */
bool tg_import_fetch_file(const tg_jobs_context *context, const tg_job *job,
                          const tg_job_worker *worker, tg_import_file *file);
/* A monotonic clock in milliseconds, the one the deadline is counted on. */
int64_t tg_import_now_ms(void);

#endif
