/* POST /v1/models/{org}/{name}/versions/{rev}/convert.
 *
 * The POST checks everything that can be checked at once (scope, the version is
 * published, the dtype is a conversion target, the globs are well formed and each
 * matches a tensor, something would change), queues a job and answers 202 with
 * its URL; the work runs in the background (convert_job.c), the job is read and
 * cancelled at /v1/jobs (routes_jobs.c). A POST equal to a job still queued or
 * running (same source version, dtype and globs as given) gets that job: a
 * retried request never makes a second identical version. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "convert_job.h"
#include "routes.h"

/* The job asked for: a job queued or running for the same source version, dtype
 * and globs (as given), not being cancelled, is equal (and answered, never refused). */
typedef struct wanted_job {
    int64_t version_id;
    const char *dtype, *tensors;
} wanted_job;

static bool equal_job(void *context, const tg_job *job)
{
    const wanted_job *w = context;
    return job->source_version_id == w->version_id && strcmp(job->dtype, w->dtype) == 0 &&
           strcmp(job->tensors, w->tensors) == 0 && !job->cancel_requested;
}

/* Reads {"dtype": NAME, "tensors": [GLOB, ...]} into spec (globs point into body).
 * Answers 400/422 and returns false when it is not acceptable. */
static bool read_convert_body(tg_request *req, json_t *body, tg_convert_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    json_t *dtype = json_object_get(body, "dtype");
    json_t *tensors = json_object_get(body, "tensors");
    static const char *const fields[] = {"dtype", "tensors", NULL};
    if (!tg_json_known_fields(req, body, fields))
        return false;
    if (!json_is_string(dtype)) {
        tg_respond_problem(req, "invalid_request",
                           "\"dtype\" (a dtype name such as \"BF16\") is required");
        return false;
    }
    const char *name = json_string_value(dtype);
    if (!st_dtype_from_name(name, strlen(name), &spec->to) ||
        !tg_convert_target_supported(spec->to)) {
        tg_respond_problem(req, "unsupported_dtype",
                           "cannot convert to \"%.32s\": the targets are F64, F32, F16, BF16, "
                           "F8_E4M3 and F8_E5M2",
                           name);
        return false;
    }
    if (tensors == NULL)
        return true; /* every floating tensor */
    if (!json_is_array(tensors) || json_array_size(tensors) == 0 ||
        json_array_size(tensors) > TG_CONVERT_GLOBS_MAX) {
        tg_respond_problem(
            req, "invalid_request",
            "\"tensors\" is an array of 1 to %d name globs (omit it for all tensors)",
            TG_CONVERT_GLOBS_MAX);
        return false;
    }
    for (size_t i = 0; i < json_array_size(tensors); i++) {
        const char *glob = json_string_value(json_array_get(tensors, i));
        size_t len = glob ? strlen(glob) : 0;
        if (glob == NULL || len == 0 || len > TG_CONVERT_GLOB_LEN_MAX ||
            len != json_string_length(json_array_get(tensors, i))) {
            tg_respond_problem(req, "invalid_request",
                               "\"tensors\"[%zu] must be a non-empty glob of at most %d bytes", i,
                               TG_CONVERT_GLOB_LEN_MAX);
            return false;
        }
        spec->globs[spec->glob_count++] = glob;
    }
    return true;
}

void tg_route_version_convert(tg_request *req)
{
    tg_server *server = req->server;
    tg_model *model = malloc(sizeof *model);
    tg_job *job = malloc(sizeof *job);
    json_t *body = NULL;
    char *globs_text = NULL;
    if (model == NULL || job == NULL) {
        tg_respond_internal(req, "out of memory");
        goto out;
    }
    tg_version version;
    if (!tg_lookup_model(req, model) || !tg_lookup_version(req, model, &version))
        goto out;
    if (!version.published) {
        tg_respond_problem(req, "version_not_published",
                           "version %lld is a draft; only a published version can be converted",
                           (long long)version.number);
        goto out;
    }
    body = tg_json_body(req);
    if (body == NULL)
        goto out;
    tg_convert_spec spec;
    if (!read_convert_body(req, body, &spec))
        goto out;
    tg_convert_survey survey;
    char detail[512];
    tg_jobs_context jobs = {.catalog = server->catalog,
                            .store = server->blobs,
                            .max_header = server->config.max_header};
    if (tg_convert_survey_version(&jobs, version.id, &spec, &survey, detail, sizeof detail) != 0) {
        tg_respond_internal(req, "%s", detail);
        goto out;
    }
    if (survey.unmatched_glob >= 0) {
        tg_respond_problem(
            req, "tensors_not_found", "\"%s\" matches no tensor of %s/%s version %lld",
            spec.globs[survey.unmatched_glob], model->org, model->name, (long long)version.number);
        goto out;
    }
    if (survey.tensors_converted == 0) {
        tg_respond_problem(req, "nothing_to_convert",
                           "no floating tensor%s of version %lld has a dtype other than %s (of %zu "
                           "shards)",
                           spec.glob_count ? " matching the globs" : "", (long long)version.number,
                           st_dtype_name(spec.to), survey.shards);
        goto out;
    }
    json_t *globs = json_array();
    for (size_t g = 0; globs && g < spec.glob_count; g++)
        json_array_append_new(globs, json_string(spec.globs[g]));
    globs_text = globs ? json_dumps(globs, JSON_COMPACT) : NULL;
    json_decref(globs);
    if (globs_text == NULL || strlen(globs_text) >= TG_JOB_TENSORS_MAX) {
        tg_respond_problem(req, "invalid_request", "\"tensors\" is too long");
        goto out;
    }
    bool existing = false;
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
    wanted_job wanted = {version.id, st_dtype_name(spec.to), globs_text};
    tg_jobs_admission_begin();
    if (!tg_jobs_admit(req, model->org, "conversion jobs", equal_job, &wanted)) {
        tg_jobs_admission_end();
        goto out;
    }
    tg_cat_status status = tg_catalog_job_create_by(server->catalog, token_id, model->id,
                                                    version.id, st_dtype_name(spec.to), globs_text,
                                                    survey.bytes_total, job, &existing);
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
    free(globs_text);
    json_decref(body);
    free(model);
    free(job);
}
