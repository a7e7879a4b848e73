/* GET /v1/jobs, GET /v1/jobs/{id} and DELETE /v1/jobs/{id}: the background jobs
 * that POST .../versions/{rev}/convert queues (routes_convert.c), which the
 * worker in convert_job.c runs.
 *
 * Reads follow the read rule (open unless --auth-read, then read scope on the
 * job's org); the list keeps to the org of a namespace-limited token, so it never
 * shows a job that GET /v1/jobs/{id} would refuse. A cancel needs write scope on
 * the job's org, like the POST that queued it. A job the token may not read (another
 * namespace's, under --auth-read) answers 404 job_not_found like a missing id, to
 * GET and DELETE alike: nothing tells a token which ids other namespaces hold. A
 * job's JSON holds its kind's own members only (dtype and tensors for a conversion,
 * source_url and path for an import). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "catalog_mirror.h"
#include "checks.h"
#include "convert_job.h"
#include "public_url.h"
#include "resources.h"
#include "routes.h"
#include "st_error.h"
#include "url_redact.h"

/* The HTTP status a failed job's problem carries, by reason. */
static unsigned failure_status(const char *reason)
{
    /* imports (import_job.h): the source's fault, the URL's, or the content's (a gate reason) */
    if (strcmp(reason, "import_too_large") == 0)
        return 413;
    if (strcmp(reason, "import_fetch_failed") == 0 || strcmp(reason, "import_source_changed") == 0)
        return 502;
    if (strcmp(reason, "import_timeout") == 0 || strcmp(reason, "import_too_slow") == 0)
        return 504;
    if (strcmp(reason, "import_url_invalid") == 0)
        return 400;
    if (strncmp(reason, "mirror_upstream_", 16) == 0) /* mirrors (mirror_job.h) */
        return 502;
    if (strcmp(reason, "mirror_refused") == 0 || strcmp(reason, "empty_version") == 0)
        return 422;
    if (strncmp(reason, "import_", 7) == 0)
        return 422;
    if (strcmp(reason, "version_published") == 0)
        return 409;
    for (int r = 1; r < ST_REASON_COUNT; r++)
        if (strcmp(reason, st_reason_name((st_reason)r)) == 0)
            return 422;
    if (strcmp(reason, "insufficient_storage") == 0)
        return 507;
    if (strcmp(reason, "index_mismatch") == 0 || strcmp(reason, "nothing_to_convert") == 0)
        return 422;
    if (strcmp(reason, "cancelled") == 0)
        return 409;
    if (strcmp(reason, "token_revoked") == 0)
        return 401;
    if (strcmp(reason, "forbidden") == 0)
        return 403;
    return 500;
}

/* The members that depend on how the job ended: version, version_url, error. */
static void set_outcome(json_t *body, const tg_job *job)
{
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
}

json_t *tg_job_json(const tg_job *job)
{
    char url[64], model[2 * TG_NAME_MAX + 2];
    snprintf(url, sizeof url, "/v1/jobs/%lld", (long long)job->id);
    snprintf(model, sizeof model, "%s/%s", job->org, job->name);
    bool import = strcmp(job->kind, "import") == 0;
    bool mirror = strcmp(job->kind, "mirror") == 0;
    json_t *body = json_pack(
        "{s:I, s:s, s:s, s:s, s:s, s:I, s:{s:I, s:I}, s:I, s:s, s:b}", "id", (json_int_t)job->id,
        "url", url, "kind",
        import   ? "import"
        : mirror ? "mirror"
                 : "convert",
        "state", tg_job_state_name(job->state), "model", model, "source_version",
        (json_int_t)job->source_number, "progress", "bytes_done", (json_int_t)job->bytes_done,
        "bytes_total", (json_int_t)job->bytes_total, "attempts", (json_int_t)job->attempts,
        "created_at", job->created_at, "cancel_requested", job->cancel_requested);
    if (body == NULL)
        return NULL;
    if (!import && !mirror) { /* a conversion's own members (an import's are below) */
        json_t *tensors = json_loads(job->tensors, 0, NULL);
        json_object_set_new(body, "dtype", json_string(job->dtype));
        json_object_set_new(body, "tensors", tensors ? tensors : json_array());
    }
    json_object_set_new(body, "started_at",
                        job->started_at[0] ? json_string(job->started_at) : json_null());
    json_object_set_new(body, "finished_at",
                        job->finished_at[0] ? json_string(job->finished_at) : json_null());
    /* the server process that holds a running job's lease, as HOST:PID (the
     * lease owner without its random part): which replica runs it */
    json_t *worker = json_null();
    if (job->state == TG_JOB_RUNNING && job->worker[0] != '\0') {
        const char *last = strrchr(job->worker, ':');
        int len = last != NULL ? (int)(last - job->worker) : (int)strlen(job->worker);
        worker = json_stringn(job->worker, (size_t)len);
    }
    json_object_set_new(body, "worker", worker);
    if (import) {                   /* the source URL and the draft's file path */
        char shown[TG_URL_MAX + 1]; /* never its credentials (url_redact.h) */
        (void)tg_url_redact(job->url, shown, sizeof shown);
        json_object_set_new(body, "source_url", json_string(shown));
        json_object_set_new(body, "path", json_string(job->path));
    }
    if (mirror) { /* the upstream, never its token (mirror_job.h); the result: tg_route_job_get */
        char shown[TG_URL_MAX + 1];
        (void)tg_url_redact(job->url, shown, sizeof shown);
        const char *at = strrchr(job->path, '@');
        int repo_len = at != NULL ? (int)(at - job->path) : (int)strlen(job->path);
        json_object_set_new(body, "upstream",
                            json_pack("{s:s, s:s%, s:s, s:b}", "endpoint", shown, "repo", job->path,
                                      (size_t)repo_len, "revision", at != NULL ? at + 1 : "",
                                      "allow_partial", strcmp(job->dtype, "partial") == 0));
    }
    set_outcome(body, job);
    return body;
}

/* {id}: a decimal job number; false for anything else (answered as an unknown job). */
static bool parse_job_id(const char *text, int64_t *id)
{
    uint64_t value = 0;
    bool digits = text != NULL && text[0] != '\0' && strspn(text, "0123456789") == strlen(text);
    if (!digits || !tg_parse_u64(text, &value) || value == 0 || value > INT64_MAX)
        return false;
    *id = (int64_t)value;
    return true;
}

/* Looks {id} up into job. TG_CAT_NOT_FOUND also for an id that is not a number. */
static tg_cat_status lookup_job(tg_request *req, int64_t *id, tg_job *job)
{
    if (!parse_job_id(tg_param(req, "id"), id))
        return TG_CAT_NOT_FOUND;
    return tg_catalog_job_get(req->server->catalog, *id, job);
}

static void respond_job(tg_request *req, unsigned status, const tg_job *job)
{
    json_t *body = tg_job_json(job);
    if (body != NULL && strcmp(job->kind, "mirror") == 0) {
        /* a mirror's result: what was fetched, copied and refused (mirror_job.h) */
        char *text = NULL;
        json_t *result = NULL;
        if (tg_catalog_mirror_result_get(req->server->catalog, job->id, &text) == TG_CAT_OK &&
            text != NULL)
            result = json_loads(text, 0, NULL);
        free(text);
        json_object_set_new(body, "result", result ? result : json_null());
    }
    if (body == NULL)
        tg_respond_internal(req, "out of memory");
    else
        tg_respond_json(req, status, body);
}

/* ---- GET /v1/jobs ---- */

typedef struct job_page {
    json_t *jobs;
    unsigned count;
    bool failed; /* a job could not be rendered (memory) */
} job_page;

static void add_job(void *ctx, const tg_job *job)
{
    job_page *page = ctx;
    json_t *item = tg_job_json(job);
    if (item == NULL || json_array_append_new(page->jobs, item) != 0)
        page->failed = true;
    page->count++;
}

/* ?state= and ?model=org/name into filter (org and name hold the model's parts).
 * Answers 400 invalid_request and returns false on a bad value. */
static bool read_job_filter(tg_request *req, tg_job_filter *filter, char org[TG_NAME_MAX + 1],
                            char name[TG_NAME_MAX + 1])
{
    memset(filter, 0, sizeof *filter);
    const char *state = tg_query(req, "state");
    if (state != NULL) {
        for (int s = TG_JOB_QUEUED; s <= TG_JOB_FAILED && !filter->has_state; s++) {
            if (strcmp(state, tg_job_state_name((tg_job_state)s)) == 0) {
                filter->has_state = true;
                filter->state = (tg_job_state)s;
            }
        }
        if (!filter->has_state) {
            tg_respond_problem(req, "invalid_request",
                               "state must be queued, running, done or failed, not \"%.32s\"",
                               state);
            return false;
        }
    }
    const char *model = tg_query(req, "model");
    if (model == NULL)
        return true;
    const char *slash = strchr(model, '/');
    size_t org_len = slash ? (size_t)(slash - model) : 0;
    if (slash == NULL || org_len > TG_NAME_MAX || strlen(slash + 1) > TG_NAME_MAX) {
        tg_respond_problem(req, "invalid_request", "model must be \"org/name\"");
        return false;
    }
    memcpy(org, model, org_len);
    org[org_len] = '\0';
    snprintf(name, TG_NAME_MAX + 1, "%s", slash + 1);
    if (!tg_valid_name_part(org) || !tg_valid_name_part(name)) {
        tg_respond_problem(req, "invalid_request", "model must be \"org/name\"");
        return false;
    }
    filter->org = org;
    filter->name = name;
    return true;
}

/* The cursor is the id of the last job sent: the next page starts below it, so
 * jobs queued during a walk never shift it (they come first, on a new walk). */
static bool read_before_id(tg_request *req, const char *key, bool has_cursor, int64_t *before)
{
    *before = 0;
    if (!has_cursor)
        return true;
    if (!parse_job_id(key, before)) {
        tg_respond_problem(req, "invalid_request", "the cursor is not one this server issued");
        return false;
    }
    return true;
}

void tg_route_jobs_list(tg_request *req)
{
    tg_job_filter filter;
    char org[TG_NAME_MAX + 1], name[TG_NAME_MAX + 1];
    const char *token_namespace = req->token_namespace;
    if (!read_job_filter(req, &filter, org, name) ||
        !tg_auth_namespace(req, TG_SCOPE_READ, filter.org))
        return;
    if (token_namespace[0] != '\0' && filter.org == NULL)
        filter.org = token_namespace; /* the jobs this token may read one by one */
    unsigned limit;
    char key[64];
    bool has_cursor;
    int64_t before;
    if (!tg_list_params(req, &limit, key, sizeof key, &has_cursor) ||
        !read_before_id(req, key, has_cursor, &before))
        return;
    job_page page = {.jobs = json_array()};
    /* One more than asked tells whether a next page exists. */
    tg_cat_status status = page.jobs ? tg_catalog_job_list(req->server->catalog, &filter, before,
                                                           limit + 1, add_job, &page)
                                     : TG_CAT_ERROR;
    if (status != TG_CAT_OK || page.failed) {
        json_decref(page.jobs);
        tg_respond_catalog_failure_detail(req, status, "the catalog failed listing the jobs");
        return;
    }
    char next[32];
    bool has_next = page.count > limit;
    if (has_next) {
        json_array_remove(page.jobs, limit);
        json_t *last = json_array_get(page.jobs, limit - 1);
        snprintf(next, sizeof next, "%lld",
                 (long long)json_integer_value(json_object_get(last, "id")));
    }
    json_t *body = json_object();
    json_object_set_new(body, "jobs", page.jobs);
    tg_set_next_cursor(body, has_next ? next : NULL);
    tg_respond_json(req, 200, body);
}

/* ---- GET /v1/jobs/{id} ---- */

/* A job a token may not see (another namespace's, under --auth-read or for a cancel)
 * answers as a missing one: the same 404 for both, so walking the sequential ids
 * tells a namespace-limited token nothing about the other namespaces' jobs. */
static void respond_no_job(tg_request *req)
{
    tg_respond_problem(req, "job_not_found", "no job '%.32s'", tg_param(req, "id"));
}

static bool in_namespace(const tg_job *job, const char *token_namespace)
{
    return token_namespace[0] == '\0' || strcmp(job->org, token_namespace) == 0;
}

void tg_route_job_get(tg_request *req)
{
    tg_job *job = malloc(sizeof *job);
    if (job == NULL) {
        tg_respond_internal(req, "out of memory");
        return;
    }
    int64_t id = 0;
    const char *token_namespace = req->token_namespace;
    tg_cat_status status = lookup_job(req, &id, job);
    if (status != TG_CAT_OK && status != TG_CAT_NOT_FOUND) {
        tg_respond_catalog_failure(req, status);
    } else if (status == TG_CAT_OK && in_namespace(job, token_namespace)) {
        respond_job(req, 200, job);
    } else {
        respond_no_job(req);
    }
    free(job);
}

/* ---- DELETE /v1/jobs/{id} ---- */

/* Answers a cancel by the state the job was in: queued -> failed now (200),
 * running -> stops at the worker's next step (202), done or failed -> 409. */
static void respond_cancel(tg_request *req, tg_job_state was, const tg_job *job)
{
    switch (was) {
    case TG_JOB_QUEUED:
        respond_job(req, 200, job);
        return;
    case TG_JOB_RUNNING:
        tg_jobs_cancel(job->id);
        respond_job(req, 202, job);
        return;
    case TG_JOB_DONE:
        tg_respond_problem(req, "job_finished",
                           "job %lld is done (version %lld); only a queued or running job can be "
                           "cancelled",
                           (long long)job->id, (long long)job->result_version);
        return;
    case TG_JOB_FAILED:
        break;
    }
    tg_respond_problem(
        req, "job_finished",
        "job %lld already failed (%s); only a queued or running job can be cancelled",
        (long long)job->id, job->error_reason);
}

static void cancel_job(tg_request *req, int64_t id, tg_job *job)
{
    tg_job_state was = TG_JOB_QUEUED;
    tg_cat_status status = tg_catalog_job_cancel(req->server->catalog, id, &was, job);
    if (status == TG_CAT_OK)
        respond_cancel(req, was, job);
    else if (status == TG_CAT_NOT_FOUND) /* its model was deleted meanwhile */
        tg_respond_problem(req, "job_not_found", "no job %lld", (long long)id);
    else
        tg_respond_catalog_failure(req, status);
}

void tg_route_job_delete(tg_request *req)
{
    tg_job *job = malloc(sizeof *job);
    if (job == NULL) {
        tg_respond_internal(req, "out of memory");
        return;
    }
    int64_t id = 0;
    const char *token_namespace = req->token_namespace;
    tg_cat_status status = lookup_job(req, &id, job);
    if (status != TG_CAT_OK && status != TG_CAT_NOT_FOUND) {
        tg_respond_catalog_failure(req, status);
    } else if (status == TG_CAT_OK && in_namespace(job, token_namespace)) {
        cancel_job(req, id, job);
    } else if (status == TG_CAT_OK && !req->server->config.auth_read) {
        /* another namespace's job while reads are open (GET shows it to anyone): no
         * existence to hide */
        tg_respond_problem(req, "forbidden", "the token is limited to the namespace '%s'",
                           token_namespace);
    } else {
        respond_no_job(req); /* missing, or a job this token cannot read */
    }
    free(job);
}

/* ---- a new job: admission and the 202 ---- */

void tg_respond_job_accepted(tg_request *req, const tg_job *job)
{
    json_t *body = tg_job_json(job);
    if (body == NULL) {
        tg_respond_internal(req, "out of memory");
        return;
    }
    char path[64], location[TG_PUBLIC_URL_MAX + 64];
    snprintf(path, sizeof path, "/v1/jobs/%lld", (long long)job->id);
    tg_request_public_path(req, path, location, sizeof location);
    const char *const headers[] = {"Location", location, "Retry-After", "1", NULL};
    tg_respond_json_headers(req, 202, body, headers);
}

static pthread_mutex_t admission_lock = PTHREAD_MUTEX_INITIALIZER;

void tg_jobs_admission_begin(void)
{
    pthread_mutex_lock(&admission_lock);
}

void tg_jobs_admission_end(void)
{
    pthread_mutex_unlock(&admission_lock);
}

typedef struct job_count {
    const char *org;
    unsigned all, of_org;
    bool (*equal)(void *context, const tg_job *job);
    void *context;
    bool found_equal;
} job_count;

static void count_job(void *context, const tg_job *job)
{
    job_count *c = context;
    c->all++;
    c->of_org += strcmp(job->org, c->org) == 0;
    if (c->equal != NULL && c->equal(c->context, job))
        c->found_equal = true;
}

bool tg_jobs_admit(tg_request *req, const char *org, const char *what,
                   bool (*equal)(void *context, const tg_job *job), void *context)
{
    const tg_config *config = &req->server->config;
    job_count count = {org, 0, 0, equal, context, false};
    tg_job_filter filter = {.has_state = true, .state = TG_JOB_QUEUED};
    tg_cat_status status = tg_catalog_job_list(req->server->catalog, &filter, 0,
                                               config->max_jobs + 1u, count_job, &count);
    filter.state = TG_JOB_RUNNING;
    if (status == TG_CAT_OK)
        status = tg_catalog_job_list(req->server->catalog, &filter, 0, config->max_jobs + 1u,
                                     count_job, &count);
    if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
        return false;
    }
    if (count.found_equal)
        return true;
    if (count.of_org >= config->max_jobs_per_namespace) {
        tg_respond_quota(req, TG_TALLY_KEY_FULL, 10,
                         "%s has %u %s queued or running, its limit (--max-jobs-per-namespace); "
                         "retry when one ends",
                         org, count.of_org, what);
        return false;
    }
    if (count.all >= config->max_jobs) {
        tg_respond_quota(req, TG_TALLY_GLOBAL_FULL, 10,
                         "the server has %u %s queued or running, its limit (--max-jobs); "
                         "retry later",
                         count.all, what);
        return false;
    }
    return true;
}
