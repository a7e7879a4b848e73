/* POST /v1/models/{org}/{name}/versions/{rev}/convert and GET /v1/jobs/{id}.
 *
 * The POST checks everything that can be checked at once (scope, the version is
 * published, the dtype is a conversion target, the globs are well formed and each
 * matches a tensor, something would change), queues a job and answers 202 with
 * its URL; the work runs in the background (convert_job.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "checks.h"
#include "convert_job.h"
#include "routes.h"

/* The HTTP status a failed job's problem carries, by reason. */
static unsigned failure_status(const char *reason)
{
    if (strcmp(reason, "insufficient_storage") == 0)
        return 507;
    if (strcmp(reason, "index_mismatch") == 0 || strcmp(reason, "nothing_to_convert") == 0)
        return 422;
    return 500;
}

static json_t *job_json(const tg_job *job)
{
    char url[64], model[2 * TG_NAME_MAX + 2];
    snprintf(url, sizeof url, "/v1/jobs/%lld", (long long)job->id);
    snprintf(model, sizeof model, "%s/%s", job->org, job->name);
    json_t *tensors = json_loads(job->tensors, 0, NULL);
    json_t *body = json_pack("{s:I, s:s, s:s, s:s, s:s, s:I, s:s, s:o, s:{s:I, s:I}, s:I, s:s}",
                             "id", (json_int_t)job->id, "url", url, "kind", "convert", "state",
                             tg_job_state_name(job->state), "model", model, "source_version",
                             (json_int_t)job->source_number, "dtype", job->dtype, "tensors",
                             tensors ? tensors : json_array(), "progress", "bytes_done",
                             (json_int_t)job->bytes_done, "bytes_total",
                             (json_int_t)job->bytes_total, "attempts", (json_int_t)job->attempts,
                             "created_at", job->created_at);
    if (body == NULL)
        return NULL;
    json_object_set_new(body, "started_at",
                        job->started_at[0] ? json_string(job->started_at) : json_null());
    json_object_set_new(body, "finished_at",
                        job->finished_at[0] ? json_string(job->finished_at) : json_null());
    if (job->state == TG_JOB_DONE) {
        char version_url[3 * TG_NAME_MAX + 64];
        snprintf(version_url, sizeof version_url, "/v1/models/%s/%s/versions/%lld", job->org,
                 job->name, (long long)job->result_version);
        json_object_set_new(body, "version", json_integer((json_int_t)job->result_version));
        json_object_set_new(body, "version_url", json_string(version_url));
    } else {
        json_object_set_new(body, "version", json_null());
        json_object_set_new(body, "version_url", json_null());
    }
    if (job->state == TG_JOB_FAILED)
        json_object_set_new(body, "error",
                            tg_problem_json(failure_status(job->error_reason), job->error_reason,
                                            job->error_detail));
    else
        json_object_set_new(body, "error", json_null());
    return body;
}

/* 202 with Location: the job to poll. */
static void respond_accepted(tg_request *req, const tg_job *job)
{
    json_t *body = job_json(job);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (text == NULL) {
        tg_respond_problem(req, 500, "internal", "out of memory");
        return;
    }
    size_t len = strlen(text);
    struct MHD_Response *response = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (response == NULL) {
        free(text);
        tg_respond(req, 500, NULL, 0);
        return;
    }
    char location[64];
    snprintf(location, sizeof location, "/v1/jobs/%lld", (long long)job->id);
    MHD_add_response_header(response, "Content-Type", "application/json");
    MHD_add_response_header(response, "Location", location);
    MHD_add_response_header(response, "Retry-After", "1");
    tg_respond(req, 202, response, len);
}

/* Reads {"dtype": NAME, "tensors": [GLOB, ...]} into spec (globs point into body).
 * Answers 400/422 and returns false when it is not acceptable. */
static bool read_convert_body(tg_request *req, json_t *body, tg_convert_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    json_t *dtype = json_object_get(body, "dtype");
    json_t *tensors = json_object_get(body, "tensors");
    const char *key;
    json_t *value;
    json_object_foreach(body, key, value) {
        if (strcmp(key, "dtype") != 0 && strcmp(key, "tensors") != 0) {
            tg_respond_problem(req, 400, "invalid_request",
                               "unknown field \"%.64s\": the body has \"dtype\" and \"tensors\"", key);
            return false;
        }
    }
    if (!json_is_string(dtype)) {
        tg_respond_problem(req, 400, "invalid_request", "\"dtype\" (a dtype name such as \"BF16\") is required");
        return false;
    }
    const char *name = json_string_value(dtype);
    if (!st_dtype_from_name(name, strlen(name), &spec->to) || !tg_convert_target_supported(spec->to)) {
        tg_respond_problem(req, 422, "unsupported_dtype",
                           "cannot convert to \"%.32s\": the targets are F64, F32, F16, BF16, "
                           "F8_E4M3 and F8_E5M2",
                           name);
        return false;
    }
    if (tensors == NULL)
        return true; /* every floating tensor */
    if (!json_is_array(tensors) || json_array_size(tensors) == 0 ||
        json_array_size(tensors) > TG_CONVERT_GLOBS_MAX) {
        tg_respond_problem(req, 400, "invalid_request",
                           "\"tensors\" is an array of 1 to %d name globs (omit it for all tensors)",
                           TG_CONVERT_GLOBS_MAX);
        return false;
    }
    for (size_t i = 0; i < json_array_size(tensors); i++) {
        const char *glob = json_string_value(json_array_get(tensors, i));
        size_t len = glob ? strlen(glob) : 0;
        if (glob == NULL || len == 0 || len > TG_CONVERT_GLOB_LEN_MAX ||
            len != json_string_length(json_array_get(tensors, i))) {
            tg_respond_problem(req, 400, "invalid_request",
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
    if (!tg_auth_require(req, TG_SCOPE_WRITE, tg_param(req, "org")))
        return;
    tg_server *server = req->server;
    tg_model *model = malloc(sizeof *model);
    tg_job *job = malloc(sizeof *job);
    json_t *body = NULL;
    char *globs_text = NULL;
    if (model == NULL || job == NULL) {
        tg_respond_problem(req, 500, "internal", "out of memory");
        goto out;
    }
    tg_version version;
    if (!tg_lookup_model(req, model) || !tg_lookup_version(req, model, &version))
        goto out;
    if (!version.published) {
        tg_respond_problem(req, 409, "version_not_published",
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
    if (tg_convert_survey_version(server, version.id, &spec, &survey, detail, sizeof detail) != 0) {
        tg_respond_problem(req, 500, "internal", "%s", detail);
        goto out;
    }
    if (survey.unmatched_glob >= 0) {
        tg_respond_problem(req, 422, "tensors_not_found",
                           "\"%s\" matches no tensor of %s/%s version %lld",
                           spec.globs[survey.unmatched_glob], model->org, model->name,
                           (long long)version.number);
        goto out;
    }
    if (survey.tensors_converted == 0) {
        tg_respond_problem(req, 422, "nothing_to_convert",
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
        tg_respond_problem(req, 400, "invalid_request", "\"tensors\" is too long");
        goto out;
    }
    tg_cat_status status = tg_catalog_job_create(server->catalog, model->id, version.id,
                                                 st_dtype_name(spec.to), globs_text,
                                                 survey.bytes_total, job);
    if (status == TG_CAT_NOT_FOUND) {
        tg_respond_problem(req, 404, "version_not_found", "the version was deleted");
        goto out;
    }
    if (status != TG_CAT_OK) {
        tg_respond_problem(req, 500, "internal", "the catalog failed");
        goto out;
    }
    tg_convert_jobs_wake();
    respond_accepted(req, job);
out:
    free(globs_text);
    json_decref(body);
    free(model);
    free(job);
}

void tg_route_job_get(tg_request *req)
{
    const char *id_text = tg_param(req, "id");
    uint64_t id = 0;
    bool digits = id_text != NULL && id_text[0] != '\0' && strspn(id_text, "0123456789") == strlen(id_text);
    if (!digits || !tg_parse_u64(id_text, &id) || id == 0 || id > INT64_MAX) {
        /* reads may need a token: answer the same 404 a missing job gets after auth */
        if (tg_auth_read(req, NULL))
            tg_respond_problem(req, 404, "job_not_found", "no job '%.32s'", id_text ? id_text : "");
        return;
    }
    tg_job *job = malloc(sizeof *job);
    if (job == NULL) {
        tg_respond_problem(req, 500, "internal", "out of memory");
        return;
    }
    tg_cat_status status = tg_catalog_job_get(req->server->catalog, (int64_t)id, job);
    if (status == TG_CAT_OK) {
        if (tg_auth_read(req, job->org)) {
            json_t *body = job_json(job);
            if (body == NULL)
                tg_respond_problem(req, 500, "internal", "out of memory");
            else
                tg_respond_json(req, 200, body);
        }
    } else if (status == TG_CAT_NOT_FOUND) {
        if (tg_auth_read(req, NULL))
            tg_respond_problem(req, 404, "job_not_found", "no job %llu", (unsigned long long)id);
    } else {
        tg_respond_problem(req, 500, "internal", "the catalog failed");
    }
    free(job);
}
