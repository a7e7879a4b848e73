/* POST .../versions/{rev}/files/{path}/import {"url": URL}: queues an import job
 * (server/jobs/import_job.h) that fetches the URL into {path} of the draft {rev},
 * and answers 202 with the job (Location: /v1/jobs/{id}), like a conversion. The
 * same authorisation as an upload to that draft (write scope, the org's namespace),
 * the same path rules; the URL is checked before the job is queued (scheme, form,
 * a numeric host the SSRF policy forbids); every address it resolves to is checked
 * again by the job at each connect. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "checks.h"
#include "convert_job.h"
#include "import_job.h"
#include "routes.h"

void tg_route_file_import(tg_request *req)
{
    tg_server *server = req->server;
    tg_model *model = malloc(sizeof *model);
    tg_job *job = malloc(sizeof *job);
    json_t *body = NULL;
    if (model == NULL || job == NULL) {
        tg_respond_internal(req, "out of memory");
        goto out;
    }
    if (!tg_lookup_model(req, model))
        goto out;
    const char *path = tg_param(req, "path");
    const char *why = NULL;
    if (path == NULL || !tg_valid_file_path(path, &why)) {
        tg_respond_problem(req, "invalid_path", "%s", why ? why : "the file path is invalid");
        goto out;
    }
    const char *last_slash = strrchr(path, '/');
    if (strcmp(last_slash ? last_slash + 1 : path, "header") == 0) {
        tg_respond_problem(
            req, "invalid_path",
            "a file path may not end in the segment 'header' (reserved for the header route)");
        goto out;
    }
    tg_version version;
    if (!tg_lookup_version(req, model, &version))
        goto out;
    if (version.published) {
        tg_respond_problem(req, "version_published",
                           "version %lld is published; its files cannot change",
                           (long long)version.number);
        goto out;
    }
    /* a namespace already at its storage quota takes no import (docs/MANUAL.md,
     * "Storage quotas"; the job itself is bounded by the room left when it fetches) */
    if (!tg_quota_admits(req, model->org, 1))
        goto out;
    body = tg_json_body(req);
    if (body == NULL)
        goto out;
    static const char *const fields[] = {"url", NULL};
    if (!tg_json_known_fields(req, body, fields))
        goto out;
    json_t *url_value = json_object_get(body, "url");
    const char *url = json_string_value(url_value);
    if (url == NULL || strlen(url) != json_string_length(url_value)) {
        tg_respond_problem(req, "import_url_invalid", "\"url\" (an http or https URL) is required");
        goto out;
    }
    char detail[TG_JOB_DETAIL_MAX];
    const char *bad = tg_import_url_check(&server->config.import_allow, url, detail, sizeof detail);
    if (bad != NULL) {
        tg_respond_problem(req, bad, "%s", detail);
        goto out;
    }
    /* the job remembers its token: its commit fails it if the token was revoked by then */
    char token_hash[65];
    int64_t token_id = 0;
    int hashed = tg_auth_token_hash(req, token_hash);
    if (hashed < 0) {
        tg_respond_internal(req, "the token's SHA-256 failed");
        goto out;
    }
    if (hashed > 0 && tg_catalog_token_id(server->catalog, token_hash, &token_id) != TG_CAT_OK)
        token_id = 0;
    bool existing = false;
    tg_jobs_admission_begin(); /* --max-jobs and --max-jobs-per-namespace hold for imports too */
    if (!tg_jobs_admit(req, model->org, "jobs", NULL, NULL)) {
        tg_jobs_admission_end();
        goto out;
    }
    tg_cat_status status = tg_catalog_import_job_create(server->catalog, token_id, model->id,
                                                        version.id, path, url, job, &existing);
    tg_jobs_admission_end();
    if (status == TG_CAT_NOT_FOUND) {
        tg_respond_problem(req, "version_not_found", "the version was deleted");
        goto out;
    }
    if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
        goto out;
    }
    if (!existing)
        tg_jobs_wake();
    tg_respond_job_accepted(req, job);
out:
    json_decref(body);
    free(model);
    free(job);
}
