/* Mirrors of a Hub repository (POST /v1/models/{org}/{name}/mirror): the job kind
 * "mirror" of the job pool (jobs.h), run by tg_mirror_job_run, into the draft
 * version the route made (the job's source version).
 *
 * The job's row (catalog_mirror.h) holds the upstream endpoint as its url, with
 * the upstream token as the url's password while the job is queued or running
 * (the catalog scrubs it when the job ends, as an import's URL), "REPO@REVISION"
 * as its path, and "partial" as its dtype when refused files may be left out.
 *
 * The run: GET {endpoint}/api/models/{repo}/revision/{revision}?blobs=true pins
 * the revision to its commit ("sha") and lists its files ("siblings": rfilename,
 * size, blobId, lfs.sha256), every connection judged by the import address
 * policy. A commit of that repository the model already mirrored ends the job done
 * with that version (nothing new). Otherwise each file whose upstream blob id (the
 * LFS sha256, else the git blob id) equals the one the model's newest mirror of
 * the same repository recorded for that path, or whose LFS sha256 is the sha256 of
 * a file of that version, is copied from the catalog (no download); every other
 * file is fetched from {endpoint}/{repo}/resolve/{commit}/{path} through the gate
 * (import_job.h's tg_import_fetch_file: the import's policy, bounds, cancel). A file
 * the gate refuses is listed with its reason in the job's result (and the
 * rejection log); any other failure fails the job. With refused files and no
 * "partial", the job fails with reason mirror_refused, the draft's files go and
 * nothing is published; else the draft is published (its digest over its files,
 * tg_catalog_version_publish_files) and recorded as a mirror of the upstream
 * repository and commit (catalog_mirror.h), shown in the version's JSON.
 *
 * Failure reasons: mirror_refused, mirror_upstream_failed (the upstream answered
 * an error, or could not be reached), mirror_upstream_invalid (its answer is not
 * the Hub's), import_address_forbidden, import_timeout, import_too_slow,
 * import_source_changed (a file's sha256 is not its LFS oid), empty_version,
 * index_mismatch (the shards and their index disagree, as publish checks),
 * cancelled, token_revoked and forbidden (the token that asked was revoked, or no
 * longer covers the model, when the job would publish), version_published,
 * internal_error. */
#ifndef TG_MIRROR_JOB_H
#define TG_MIRROR_JOB_H

#include "jobs.h"

#define TG_MIRROR_MAX_FILES 1000
#define TG_MIRROR_INFO_MAX ((size_t)16 << 20) /* the upstream's revision answer */

tg_job_outcome tg_mirror_job_run(const tg_jobs_context *context, const tg_job *job,
                                 const tg_job_worker *worker);

#endif
