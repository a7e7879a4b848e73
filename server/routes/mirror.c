/* POST /v1/models/{org}/{name}/mirror {"endpoint", "repo", "revision", "token"?,
 * "allow_partial"?}: makes a draft version of the model and queues a mirror job
 * (server/jobs/mirror_job.h) that fills and publishes it from the upstream Hub
 * repository, answering 202 with the job (Location: /v1/jobs/{id}). Write scope of
 * the org's namespace, as an import. The endpoint is checked as an import's URL
 * (scheme, form, a numeric host the address policy forbids) and may not hold
 * credentials; the upstream token travels in the job's row like an import URL's
 * credentials (scrubbed when the job ends) and is never shown. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "catalog_mirror.h"
#include "import_job.h"
#include "routes.h"

#define MIRROR_TOKEN_MAX 1024

static bool printable(const char *text, size_t max, const char *extra_forbidden)
{
    size_t len = strlen(text);
    if (len == 0 || len > max)
        return false;
    for (const unsigned char *c = (const unsigned char *)text; *c; c++)
        if (*c <= 0x20 || *c >= 0x7F || strchr(extra_forbidden, *c) != NULL)
            return false;
    return true;
}

static bool good_repo(const char *repo)
{
    if (!printable(repo, TG_MIRROR_REPO_MAX, "") || repo[0] == '/' || strstr(repo, "..") != NULL)
        return false;
    for (const char *c = repo; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              strchr("-_./", *c) != NULL))
            return false;
    return repo[strlen(repo) - 1] != '/';
}

static const char *string_member(json_t *body, const char *name, bool *bad)
{
    json_t *value = json_object_get(body, name);
    if (value == NULL || json_is_null(value))
        return NULL;
    const char *text = json_string_value(value);
    if (text == NULL || strlen(text) != json_string_length(value))
        *bad = true;
    return text;
}

/* endpoint with the token as its userinfo's password (percent-encoded), or NULL. */
static char *job_url(const char *endpoint, const char *token)
{
    size_t len = strlen(endpoint) + 3 * (token ? strlen(token) : 0) + 16;
    char *out = malloc(len);
    if (out == NULL)
        return NULL;
    const char *rest = strstr(endpoint, "://");
    if (token == NULL || rest == NULL) {
        snprintf(out, len, "%s", endpoint);
        return out;
    }
    size_t at = (size_t)snprintf(out, len, "%.*s://token:", (int)(rest - endpoint), endpoint);
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *c = (const unsigned char *)token; *c; c++) {
        bool plain = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
                     (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || *c == '.';
        if (plain) {
            out[at++] = (char)*c;
        } else {
            out[at++] = '%';
            out[at++] = hex[*c >> 4];
            out[at++] = hex[*c & 15];
        }
    }
    snprintf(out + at, len - at, "@%s", rest + 3);
    return out;
}

void tg_route_model_mirror(tg_request *req)
{
    tg_server *server = req->server;
    tg_model *model = malloc(sizeof *model);
    tg_job *job = malloc(sizeof *job);
    json_t *body = NULL;
    char *url = NULL;
    if (model == NULL || job == NULL) {
        tg_respond_internal(req, "out of memory");
        goto out;
    }
    if (!tg_lookup_model(req, model))
        goto out;
    body = tg_json_body(req);
    if (body == NULL)
        goto out;
    static const char *const fields[] = {"endpoint", "repo",          "revision",
                                         "token",    "allow_partial", NULL};
    if (!tg_json_known_fields(req, body, fields))
        goto out;
    bool bad = false;
    const char *endpoint = string_member(body, "endpoint", &bad);
    const char *repo = string_member(body, "repo", &bad);
    const char *revision = string_member(body, "revision", &bad);
    const char *token = string_member(body, "token", &bad);
    json_t *partial = json_object_get(body, "allow_partial");
    if (bad || (partial != NULL && !json_is_boolean(partial))) {
        tg_respond_problem(req, "mirror_invalid",
                           "\"endpoint\", \"repo\", \"revision\" and \"token\" are strings; "
                           "\"allow_partial\" is a boolean");
        goto out;
    }
    if (revision == NULL)
        revision = "main";
    if (endpoint == NULL || repo == NULL) {
        tg_respond_problem(req, "mirror_invalid", "\"endpoint\" and \"repo\" are required");
        goto out;
    }
    if (!good_repo(repo)) {
        tg_respond_problem(req, "mirror_invalid",
                           "\"repo\" is 1 to %d bytes of letters, digits, '-', '_', '.' and '/'",
                           TG_MIRROR_REPO_MAX);
        goto out;
    }
    if (!printable(revision, TG_MIRROR_REVISION_MAX, "@")) {
        tg_respond_problem(req, "mirror_invalid",
                           "\"revision\" is 1 to %d printable ASCII bytes without '@'",
                           TG_MIRROR_REVISION_MAX);
        goto out;
    }
    if (token != NULL && !printable(token, MIRROR_TOKEN_MAX, "")) {
        tg_respond_problem(req, "mirror_invalid", "\"token\" is 1 to %d printable ASCII bytes",
                           MIRROR_TOKEN_MAX);
        goto out;
    }
    if (strchr(endpoint, '@') != NULL || strchr(endpoint, '?') != NULL ||
        strchr(endpoint, '#') != NULL) {
        tg_respond_problem(req, "mirror_invalid",
                           "\"endpoint\" may not hold credentials, a query or a fragment; send "
                           "the upstream token as \"token\"");
        goto out;
    }
    char detail[TG_JOB_DETAIL_MAX];
    const char *why =
        tg_import_url_check(&server->config.import_allow, endpoint, detail, sizeof detail);
    if (why != NULL) {
        tg_respond_problem(req, why, "\"endpoint\": %s", detail);
        goto out;
    }
    char spec[TG_MIRROR_REPO_MAX + TG_MIRROR_REVISION_MAX + 2];
    snprintf(spec, sizeof spec, "%s@%s", repo, revision);
    url = job_url(endpoint, token);
    if (url == NULL || strlen(url) > TG_URL_MAX) {
        tg_respond_problem(req, "mirror_invalid", "the endpoint and token are too long");
        goto out;
    }
    char token_hash[65];
    int64_t token_id = 0;
    int hashed = tg_auth_token_hash(req, token_hash);
    if (hashed < 0) {
        tg_respond_internal(req, "the token's SHA-256 failed");
        goto out;
    }
    if (hashed > 0 && tg_catalog_token_id(server->catalog, token_hash, &token_id) != TG_CAT_OK)
        token_id = 0;
    tg_jobs_admission_begin();
    if (!tg_jobs_admit(req, model->org, "jobs", NULL, NULL)) {
        tg_jobs_admission_end();
        goto out;
    }
    /* the empty draft an ended mirror left is filled again (the admission lock keeps
     * two mirrors of this server from taking the same one) */
    tg_version draft;
    tg_cat_status status = tg_catalog_mirror_idle_draft(server->catalog, model->id, &draft);
    if (status == TG_CAT_NOT_FOUND)
        status = tg_catalog_version_create(server->catalog, model->id, &draft);
    if (status == TG_CAT_OK)
        status = tg_catalog_mirror_job_create(server->catalog, token_id, model->id, draft.id, url,
                                              spec, json_is_true(partial), job);
    tg_jobs_admission_end();
    if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
        goto out;
    }
    tg_jobs_wake();
    tg_respond_job_accepted(req, job);
out:
    if (url != NULL) {
        explicit_bzero(url, strlen(url));
        free(url);
    }
    json_decref(body);
    free(model);
    free(job);
}
