/* POST|GET /v1/preloads, GET|DELETE /v1/preloads/{id}: each parses the request,
 * calls the manager of the server's preload service (preload_service.h) and
 * answers. */
#include "parsed_header_cache.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "checks.h"
#include "log.h"
#include "preload.h"
#include "preload_service.h"
#include "public_url.h"
#include "resources.h"
#include "routes.h"
#include "st_convert.h"
#include "st_header.h"

#define PATTERNS_MAX 1024

/* ---- POST /v1/preloads ---- */

typedef struct source_file {
    char path[TG_PATH_MAX + 1];
    char sha256[65];
    uint64_t size;
} source_file;

typedef struct file_collection {
    source_file *files;
    size_t count, cap;
    bool failed;
} file_collection;

static void collect_file(void *context, const tg_file_record *file)
{
    file_collection *c = context;
    if (c->failed || strcmp(file->kind, "safetensors") != 0)
        return;
    if (c->count == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        source_file *grown = realloc(c->files, cap * sizeof *grown);
        if (grown == NULL) {
            c->failed = true;
            return;
        }
        c->files = grown;
        c->cap = cap;
    }
    source_file *f = &c->files[c->count++];
    snprintf(f->path, sizeof f->path, "%s", file->path);
    snprintf(f->sha256, sizeof f->sha256, "%s", file->sha256);
    f->size = file->size;
}

static bool has_glob(const char *pattern)
{
    return strpbrk(pattern, "*?[") != NULL;
}

static void respond_status(tg_request *req, tg_preload_status status, const char *err)
{
    switch (status) {
    case TG_PRELOAD_BAD_DEVICE:
        tg_respond_problem(req, "invalid_device", "%s", err);
        break;
    case TG_PRELOAD_DEVICE_UNAVAILABLE:
        tg_respond_problem(req, "device_unavailable", "%s", err);
        break;
    case TG_PRELOAD_BUDGET:
        tg_respond_problem(req, "preload_budget", "%s", err);
        break;
    case TG_PRELOAD_QUOTA:
        tg_respond_quota(req, TG_TALLY_KEY_FULL, 5, "%s", err);
        break;
    case TG_PRELOAD_NOT_FOUND:
        tg_respond_problem(req, "preload_not_found", "%s", err);
        break;
    case TG_PRELOAD_NOT_RESIDENT:
        tg_respond_problem(req, "not_resident", "%s", err);
        break;
    case TG_PRELOAD_INVALID:
        tg_respond_problem(req, "unsupported_conversion", "%s", err);
        break;
    default:
        tg_respond_internal(req, "%s", err[0] ? err : "the preload failed");
        break;
    }
}

/* The preload's parts gathered from the catalog, freed together. */
typedef struct preload_sources {
    file_collection files;
    st_file *headers;
    const char **blob_names; /* each file's sha256, borrowed from files */
    tg_preload_source_tensor *tensors;
    size_t tensor_count;
} preload_sources;

static void sources_free(preload_sources *s)
{
    for (size_t i = 0; i < s->files.count; i++) {
        if (s->headers)
            st_file_free(&s->headers[i]);
    }
    free(s->headers);
    free(s->blob_names);
    free(s->tensors);
    free(s->files.files);
}

/* Reads every safetensors file's header of the version (in path order) and picks
 * the tensors that match a pattern, in file order. Answers the error itself. */
static bool choose_tensors(tg_request *req, const tg_version *version, json_t *patterns,
                           preload_sources *s)
{
    tg_server *server = req->server;
    tg_cat_status status =
        tg_catalog_file_list(server->catalog, version->id, NULL, 0, collect_file, &s->files);
    if (status != TG_CAT_OK || s->files.failed) {
        tg_respond_catalog_failure(req, status);
        return false;
    }
    size_t n = s->files.count;
    s->headers = calloc(n ? n : 1, sizeof *s->headers);
    s->blob_names = calloc(n ? n : 1, sizeof *s->blob_names);
    if (s->headers == NULL || s->blob_names == NULL) {
        tg_respond_internal(req, "out of memory");
        return false;
    }
    size_t total_tensors = 0;
    for (size_t i = 0; i < n; i++) {
        st_error error;
        errno = 0;
        s->blob_names[i] = s->files.files[i].sha256;
        if (tg_header_read_parse(server->blobs, s->files.files[i].sha256, s->files.files[i].size,
                                 server->config.max_header, &s->headers[i], &error) != 0) {
            if (tg_errno_is_exhaustion(errno))
                tg_respond_exhausted(req, NULL);
            else
                tg_respond_internal(req, "the stored blob of %s cannot be read (run fsck)",
                                    s->files.files[i].path);
            return false;
        }
        total_tensors += s->headers[i].tensor_count;
    }
    size_t pattern_count = json_array_size(patterns);
    bool *pattern_matched = calloc(pattern_count ? pattern_count : 1, sizeof *pattern_matched);
    s->tensors = calloc(total_tensors ? total_tensors : 1, sizeof *s->tensors);
    if (pattern_matched == NULL || s->tensors == NULL) {
        free(pattern_matched);
        tg_respond_internal(req, "out of memory");
        return false;
    }
    for (size_t f = 0; f < n; f++) {
        const st_file *h = &s->headers[f];
        /* st_file keeps tensors sorted by offset: file order. */
        for (size_t t = 0; t < h->tensor_count; t++) {
            const st_tensor *tensor = &h->tensors[t];
            bool chosen = pattern_count == 0;
            for (size_t p = 0; p < pattern_count; p++) {
                if (fnmatch(json_string_value(json_array_get(patterns, p)), tensor->name, 0) == 0) {
                    chosen = true;
                    pattern_matched[p] = true;
                }
            }
            if (!chosen)
                continue;
            s->tensors[s->tensor_count++] =
                (tg_preload_source_tensor){tensor->name,
                                           tensor->dtype,
                                           tensor->rank,
                                           tensor->shape,
                                           f,
                                           h->data_start + tensor->begin,
                                           tensor->end - tensor->begin};
        }
    }
    for (size_t p = 0; p < pattern_count; p++) {
        const char *pattern = json_string_value(json_array_get(patterns, p));
        if (!pattern_matched[p] && !has_glob(pattern)) {
            free(pattern_matched);
            tg_respond_problem(req, "tensor_not_found", "version %lld has no tensor %s",
                               (long long)version->number, pattern);
            return false;
        }
    }
    free(pattern_matched);
    if (s->tensor_count == 0) {
        tg_respond_problem(req, "no_tensors", "no tensor of version %lld matches the patterns",
                           (long long)version->number);
        return false;
    }
    return true;
}

/* Resolves "version" (a number, "latest", an alias or a digest) the way {rev} is
 * resolved in URLs: it becomes the request's {rev} parameter for tg_lookup_version. */
static bool lookup_version_text(tg_request *req, const tg_model *model, const char *text,
                                tg_version *version)
{
    int slot = -1;
    for (int i = 0; i < TG_PARAMS_MAX && slot < 0; i++)
        if (req->param_names[i] == NULL && req->params[i] == NULL)
            slot = i;
    char *copy = strdup(text);
    if (slot < 0 || copy == NULL) {
        free(copy);
        tg_respond_internal(req, "out of memory");
        return false;
    }
    req->param_names[slot] = "rev";
    req->params[slot] = copy; /* freed with the request */
    return tg_lookup_version(req, model, version);
}

/* The running manager, NULL when preloads are not started. */
static tg_preload_manager *preload_manager(const tg_request *req)
{
    return tg_preload_service_manager(req->server->preloads);
}

static void create_preload(tg_request *req, json_t *body)
{
    tg_preload_manager *manager = preload_manager(req);
    if (manager == NULL) {
        tg_respond_problem(req, "device_unavailable", "preloads are not started");
        return;
    }
    static const char *const fields[] = {"model", "version", "tensors", "device", "dtype", NULL};
    if (!tg_json_known_fields(req, body, fields))
        return;
    const char *model_name = json_string_value(json_object_get(body, "model"));
    json_t *version_value = json_object_get(body, "version");
    json_t *patterns = json_object_get(body, "tensors");
    json_t *device_value = json_object_get(body, "device");
    json_t *dtype_value = json_object_get(body, "dtype");
    char org[TG_NAME_MAX + 2] = "", name[TG_NAME_MAX + 2] = "";
    const char *slash = model_name ? strchr(model_name, '/') : NULL;
    if (slash && (size_t)(slash - model_name) < sizeof org && strlen(slash + 1) < sizeof name) {
        memcpy(org, model_name, (size_t)(slash - model_name));
        snprintf(name, sizeof name, "%s", slash + 1);
    }
    if (!tg_valid_name_part(org) || !tg_valid_name_part(name)) {
        tg_respond_problem(req, "invalid_name",
                           "\"model\" must be \"org/name\", each part "
                           "[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
        return;
    }
    if (!tg_auth_namespace(req, TG_SCOPE_WRITE, org))
        return;
    char version_text[32];
    if (version_value == NULL) {
        snprintf(version_text, sizeof version_text, "latest");
    } else if (json_is_integer(version_value) && json_integer_value(version_value) >= 0) {
        snprintf(version_text, sizeof version_text, "%lld",
                 (long long)json_integer_value(version_value));
    } else if (!json_is_string(version_value) || json_string_length(version_value) == 0 ||
               json_string_length(version_value) >= 128) {
        tg_respond_problem(req, "invalid_request",
                           "\"version\" must be a number, an alias or a digest");
        return;
    }
    const char *version_string =
        json_is_string(version_value) ? json_string_value(version_value) : version_text;
    if (patterns != NULL &&
        (!json_is_array(patterns) || json_array_size(patterns) > PATTERNS_MAX)) {
        tg_respond_problem(req, "invalid_request",
                           "\"tensors\" must be an array of at most %d name patterns",
                           PATTERNS_MAX);
        return;
    }
    for (size_t i = 0; i < json_array_size(patterns); i++) {
        json_t *p = json_array_get(patterns, i);
        if (!json_is_string(p) || json_string_length(p) == 0 || json_string_length(p) > 1024) {
            tg_respond_problem(req, "invalid_request",
                               "each of \"tensors\" must be a tensor name or a glob");
            return;
        }
    }
    const char *device = device_value ? json_string_value(device_value) : "host";
    if (device == NULL) {
        tg_respond_problem(req, "invalid_device", "\"device\" must be \"host\" or \"cuda:N\"");
        return;
    }
    st_dtype dtype = ST_F32;
    bool convert = dtype_value != NULL && !json_is_null(dtype_value);
    if (convert) {
        const char *dtype_name = json_string_value(dtype_value);
        if (dtype_name == NULL || !st_dtype_from_name(dtype_name, strlen(dtype_name), &dtype) ||
            !st_convert_supported(dtype, ST_F32)) {
            tg_respond_problem(req, "invalid_request",
                               "\"dtype\" must be one of F64, F32, F16, BF16, F8_E4M3, F8_E5M2");
            return;
        }
    }
    char err[512] = "";
    tg_preload_status status = tg_preload_check_device(manager, device, err, sizeof err);
    if (status != TG_PRELOAD_OK) {
        respond_status(req, status, err);
        return;
    }
    tg_model *model = tg_model_alloc(req);
    if (model == NULL)
        return;
    tg_cat_status found = tg_catalog_model_get(req->server->catalog, org, name, model);
    tg_version version;
    preload_sources sources = {0};
    if (found == TG_CAT_NOT_FOUND) {
        tg_respond_problem(req, "model_not_found", "no model %s/%s", org, name);
    } else if (found != TG_CAT_OK) {
        tg_respond_catalog_failure(req, found);
    } else if (lookup_version_text(req, model, version_string, &version) &&
               choose_tensors(req, &version, patterns, &sources)) {
        char model_text[2 * (TG_NAME_MAX + 2) + 2];
        snprintf(model_text, sizeof model_text, "%s/%s", org, name);
        char owner[TG_TALLY_KEY_MAX];
        tg_request_owner(req, owner, sizeof owner);
        char token_hash[65];
        (void)tg_auth_token_hash(req, token_hash);
        tg_preload_request request = {model_text,
                                      version.number,
                                      device,
                                      convert,
                                      dtype,
                                      req->server->blobs,
                                      sources.files.count,
                                      sources.blob_names,
                                      sources.tensor_count,
                                      sources.tensors,
                                      owner,
                                      model->id,
                                      version.id,
                                      token_hash};
        char id[TG_PRELOAD_ID_LEN + 1];
        status = tg_preload_submit(manager, &request, id, err, sizeof err);
        if (status != TG_PRELOAD_OK) {
            respond_status(req, status, err);
        } else {
            tg_log(TG_LOG_INFO, "preload %s: %s v%lld, %zu tensors to %s, by %s", id, model_text,
                   (long long)version.number, sources.tensor_count, device, req->client);
            char path[64], location[TG_PUBLIC_URL_MAX + 64];
            snprintf(path, sizeof path, "/v1/preloads/%s", id);
            tg_request_public_path(req, path, location, sizeof location);
            const char *const headers[] = {"Location", location, NULL};
            tg_respond_json_headers(req, 202, tg_preload_describe(manager, id, true), headers);
        }
    }
    sources_free(&sources);
    free(model);
}

void tg_route_preload_create(tg_request *req)
{
    /* the namespace is checked once the body names the model */
    json_t *body = tg_json_body(req);
    if (body == NULL)
        return;
    create_preload(req, body);
    json_decref(body);
}

/* ---- GET /v1/preloads, GET|DELETE /v1/preloads/{id} ---- */

/* Keeps the preloads of org's models only (the org of a namespace-limited token). */
static void keep_org(json_t *list, const char *org)
{
    json_t *preloads = json_object_get(list, "preloads");
    size_t org_len = strlen(org);
    for (size_t i = json_array_size(preloads); i-- > 0;) {
        const char *model =
            json_string_value(json_object_get(json_array_get(preloads, i), "model"));
        if (model == NULL || strncmp(model, org, org_len) != 0 || model[org_len] != '/')
            json_array_remove(preloads, i);
    }
}

void tg_route_preloads_list(tg_request *req)
{
    const char *token_namespace = req->token_namespace;
    tg_preload_manager *manager = preload_manager(req);
    if (manager == NULL) {
        tg_respond_problem(req, "device_unavailable", "preloads are not started");
        return;
    }
    json_t *list = tg_preload_list(manager);
    if (list != NULL && token_namespace[0] != '\0')
        keep_org(list, token_namespace);
    tg_respond_json(req, 200, list);
}

/* The {id} and the org of its model; answers 404 itself. */
static bool lookup_preload(tg_request *req, const char **id, char *org, size_t org_len)
{
    *id = tg_param(req, "id");
    char model[2 * TG_NAME_MAX + 2];
    tg_preload_manager *manager = preload_manager(req);
    if (manager == NULL || *id == NULL || strlen(*id) != TG_PRELOAD_ID_LEN ||
        !tg_preload_model(manager, *id, model, sizeof model)) {
        /* under --auth-read, only a reader learns that an id does not exist (the route's
         * scope: read-object) */
        tg_respond_problem(req, "preload_not_found", "no preload %s", *id ? *id : "");
        return false;
    }
    snprintf(org, org_len, "%.*s", (int)strcspn(model, "/"), model);
    return true;
}

void tg_route_preload_get(tg_request *req)
{
    const char *id;
    char org[TG_NAME_MAX + 1];
    if (!lookup_preload(req, &id, org, sizeof org) || !tg_auth_namespace(req, TG_SCOPE_READ, org))
        return;
    json_t *body = tg_preload_describe(preload_manager(req), id, true);
    if (body == NULL)
        tg_respond_problem(req, "preload_not_found", "no preload %s", id);
    else
        tg_respond_json(req, 200, body);
}

void tg_route_preload_delete(tg_request *req)
{
    const char *id = tg_param(req, "id");
    char org[TG_NAME_MAX + 1];
    char model[2 * TG_NAME_MAX + 2];
    tg_preload_manager *manager = preload_manager(req);
    if (manager == NULL || id == NULL || !tg_preload_model(manager, id, model, sizeof model)) {
        /* Only a writer learns that an id does not exist. */
        if (tg_auth_namespace(req, TG_SCOPE_WRITE, NULL))
            tg_respond_problem(req, "preload_not_found", "no preload %s", id ? id : "");
        return;
    }
    snprintf(org, sizeof org, "%.*s", (int)strcspn(model, "/"), model);
    if (!tg_auth_namespace(req, TG_SCOPE_WRITE, org))
        return;
    bool deferred = false;
    tg_preload_status status = tg_preload_evict(manager, id, &deferred);
    if (status != TG_PRELOAD_OK) {
        respond_status(req, status, "the preload is gone");
        return;
    }
    if (!deferred) {
        tg_respond_empty(req, 204);
        return;
    }
    /* Leased (or loading): freed when the last lease ends. */
    json_t *body = tg_preload_describe(manager, id, false);
    if (body == NULL)
        tg_respond_empty(req, 204);
    else
        tg_respond_json(req, 202, body);
}
