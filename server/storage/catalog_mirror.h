/* Mirrors of a Hub repository in the catalog (schema 14; server/jobs/mirror_job.h):
 * the mirror jobs (kind "mirror"), which upstream repository and commit a published
 * version came from with the upstream blob id of each of its files, and a mirror
 * job's result. The statements are shared by both backends (catalog_backend.h's
 * mirror_exec). */
#ifndef TG_CATALOG_MIRROR_H
#define TG_CATALOG_MIRROR_H

#include <stdbool.h>
#include <stdint.h>

#include "catalog.h"

#define TG_MIRROR_REPO_MAX 200     /* "owner/name" upstream */
#define TG_MIRROR_REVISION_MAX 200 /* a branch, tag or commit upstream */

/* A published version that a mirror made. */
typedef struct tg_mirror_record {
    int64_t version_id;
    int64_t number;
    char endpoint[TG_URL_MAX + 1]; /* without credentials */
    char repo[TG_MIRROR_REPO_MAX + 1];
    char revision[TG_MIRROR_REVISION_MAX + 1];
    char commit[65];
    char created_at[TG_TIME_LEN];
    char *oids; /* malloc'd JSON object text {path: upstream blob id}; free it */
} tg_mirror_record;

/* Queues a mirror job of model_id filling the draft version_id: url is the upstream
 * endpoint (its userinfo the upstream token, scrubbed when the job ends), spec is
 * "REPO@REVISION", partial whether refused files may be left out. */
tg_cat_status tg_catalog_mirror_job_create(tg_catalog *catalog, int64_t token_id, int64_t model_id,
                                           int64_t version_id, const char *url, const char *spec,
                                           bool partial, tg_job *out);
/* The newest draft of model_id that an ended mirror job filled and left without
 * files (a failed mirror, or one of a commit already mirrored), which no queued or
 * running job fills: the next mirror fills it again rather than making another.
 * TG_CAT_NOT_FOUND when none. */
tg_cat_status tg_catalog_mirror_idle_draft(tg_catalog *catalog, int64_t model_id, tg_version *out);
/* Whether the token that asked for a mirror (by id) still exists with write scope
 * covering org: TG_CAT_OK, or TG_CAT_NOT_FOUND with *why "token_revoked" or
 * "forbidden". */
tg_cat_status tg_catalog_mirror_token_check(tg_catalog *catalog, int64_t token_id, const char *org,
                                            const char **why);
/* The mirror record of version_id: TG_CAT_NOT_FOUND when no mirror made it. */
tg_cat_status tg_catalog_mirror_version_get(tg_catalog *catalog, int64_t version_id,
                                            tg_mirror_record *out);
/* The newest version of model_id mirrored from endpoint's repo (commit NULL: any
 * commit; else that commit's). TG_CAT_NOT_FOUND when none. */
tg_cat_status tg_catalog_mirror_latest(tg_catalog *catalog, int64_t model_id, const char *endpoint,
                                       const char *repo, const char *commit, tg_mirror_record *out);
/* Records that the published version_id is a mirror of record's upstream. */
tg_cat_status tg_catalog_mirror_version_add(tg_catalog *catalog, int64_t model_id,
                                            const tg_mirror_record *record);
/* A mirror job's result (JSON text), set (replacing) and read (*out malloc'd, or
 * NULL when none). */
tg_cat_status tg_catalog_mirror_result_set(tg_catalog *catalog, int64_t job_id, const char *result);
tg_cat_status tg_catalog_mirror_result_get(tg_catalog *catalog, int64_t job_id, char **out);
/* The running mirror job job_id (no cancel asked, held by this handle) becomes done
 * with version number; TG_CAT_CONFLICT when it is not so (nothing changes). Its url
 * is scrubbed. */
tg_cat_status tg_catalog_mirror_job_done(tg_catalog *catalog, int64_t job_id, int64_t number);

#endif
