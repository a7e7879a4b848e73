/* POST|GET /v1/preloads, GET|DELETE /v1/preloads/{id}; the preload service's
 * flags, start and stop; its /readyz and /metrics lines. */
#include "parsed_header_cache.h"
#include "routes_preloads.h"

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
#include "preload_socket.h"
#include "public_url.h"
#include "resources.h"
#include "routes.h"
#include "st_convert.h"
#include "st_header.h"

#define PATTERNS_MAX 1024

typedef struct preload_options {
    char socket_path[4096]; /* "" : DATA/preload.sock */
    uid_t allowed_uids[TG_PRELOAD_SOCKET_UIDS_MAX];
    size_t allowed_count;
    uint64_t budget_host, budget_cuda;
    unsigned fake_devices;
    unsigned copy_threads;
    unsigned max_preloads;      /* 0: from the descriptor limit (resources.h) */
    unsigned max_per_namespace; /* 0: a quarter of max_preloads */
} preload_options;

/* One server per process: the options taken from argv, then the running service. */
static preload_options options;
static tg_preload_manager *manager;
static tg_preload_socket *hand_off;
static tg_server *service_server;

/* ---- flags ---- */

static int parse_uids(const char *text, char *err, size_t err_len)
{
    options.allowed_count = 0;
    const char *p = text;
    while (*p) {
        char *end;
        unsigned long uid = strtoul(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0') || uid > 0xfffffffeUL ||
            options.allowed_count == TG_PRELOAD_SOCKET_UIDS_MAX) {
            snprintf(err, err_len, "--preload-allow-uid: '%s' is not a list of at most %d uids",
                     text, TG_PRELOAD_SOCKET_UIDS_MAX);
            return -1;
        }
        options.allowed_uids[options.allowed_count++] = (uid_t)uid;
        p = *end ? end + 1 : end;
    }
    return 0;
}

static int apply_option(const char *flag, const char *value, char *err, size_t err_len)
{
    uint64_t number = 0;
    if (strcmp(flag, "--preload-socket") == 0) {
        if (value[0] == '\0' || strlen(value) >= sizeof options.socket_path) {
            snprintf(err, err_len, "--preload-socket: the path is empty or too long");
            return -1;
        }
        snprintf(options.socket_path, sizeof options.socket_path, "%s", value);
        return 0;
    }
    if (strcmp(flag, "--preload-allow-uid") == 0)
        return parse_uids(value, err, err_len);
    if (tg_parse_bytes(value, &number) != 0) {
        snprintf(err, err_len, "%s: '%s' is not a number", flag, value);
        return -1;
    }
    if (strcmp(flag, "--preload-budget-host") == 0) {
        options.budget_host = number;
    } else if (strcmp(flag, "--preload-budget-cuda") == 0) {
        options.budget_cuda = number;
    } else if (strcmp(flag, "--preload-fake-devices") == 0 && number <= 16) {
        options.fake_devices = (unsigned)number;
    } else if (strcmp(flag, "--preload-copy-threads") == 0 && number >= 1 && number <= 64) {
        options.copy_threads = (unsigned)number;
    } else if (strcmp(flag, "--preload-max") == 0 && number <= 4096) {
        options.max_preloads = (unsigned)number;
    } else if (strcmp(flag, "--preload-max-per-namespace") == 0 && number <= 4096) {
        options.max_per_namespace = (unsigned)number;
    } else {
        snprintf(err, err_len, "%s: '%s' is out of range", flag, value);
        return -1;
    }
    return 0;
}

static const char *const option_flags[][2] = {
    {"--preload-socket", "TENSORGATE_PRELOAD_SOCKET"},
    {"--preload-allow-uid", "TENSORGATE_PRELOAD_ALLOW_UID"},
    {"--preload-budget-host", "TENSORGATE_PRELOAD_BUDGET_HOST"},
    {"--preload-budget-cuda", "TENSORGATE_PRELOAD_BUDGET_CUDA"},
    {"--preload-fake-devices", "TENSORGATE_PRELOAD_FAKE_DEVICES"},
    {"--preload-copy-threads", "TENSORGATE_PRELOAD_COPY_THREADS"},
    {"--preload-max", "TENSORGATE_PRELOAD_MAX"},
    {"--preload-max-per-namespace", "TENSORGATE_PRELOAD_MAX_PER_NAMESPACE"},
};
#define OPTION_COUNT (sizeof option_flags / sizeof option_flags[0])

int tg_preload_options_take(int *argc, char **argv, char *err, size_t err_len)
{
    memset(&options, 0, sizeof options);
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        const char *value = getenv(option_flags[i][1]);
        if (value && value[0] && apply_option(option_flags[i][0], value, err, err_len) != 0)
            return -1;
    }
    int kept = 1;
    for (int a = 1; a < *argc; a++) {
        const char *flag = NULL, *value = NULL;
        for (size_t i = 0; i < OPTION_COUNT && flag == NULL; i++) {
            size_t len = strlen(option_flags[i][0]);
            if (strncmp(argv[a], option_flags[i][0], len) != 0)
                continue;
            if (argv[a][len] == '=') {
                flag = option_flags[i][0];
                value = argv[a] + len + 1;
            } else if (argv[a][len] == '\0') {
                flag = option_flags[i][0];
                if (a + 1 >= *argc) {
                    snprintf(err, err_len, "%s needs a value", flag);
                    return -1;
                }
                value = argv[++a];
            }
        }
        if (flag == NULL) {
            argv[kept++] = argv[a];
            continue;
        }
        if (apply_option(flag, value, err, err_len) != 0)
            return -1;
    }
    argv[kept] = NULL;
    *argc = kept;
    return 0;
}

const char *tg_preload_options_usage(void)
{
    return "preload flags: [--preload-socket PATH] [--preload-allow-uid UID,...]\n"
           "               [--preload-budget-host BYTES] [--preload-budget-cuda BYTES]\n"
           "               [--preload-fake-devices N] [--preload-copy-threads N]\n"
           "               [--preload-max N] [--preload-max-per-namespace N]\n"
           "(env TENSORGATE_PRELOAD_SOCKET, _ALLOW_UID, _BUDGET_HOST, _BUDGET_CUDA, "
           "_FAKE_DEVICES,\n"
           "_COPY_THREADS, _MAX, _MAX_PER_NAMESPACE; the socket defaults to DATA/preload.sock;\n"
           "--preload-max 0 is a quarter of the descriptor limit (at most 4096),\n"
           "--preload-max-per-namespace 0 a quarter of --preload-max)\n";
}

/* ---- the service ---- */

/* The hand-off socket's check: the token has read scope on the model's namespace. */
static bool authorize_token(void *context, const char *token, const char *model, char *why,
                            size_t why_len, char *detail, size_t detail_len)
{
    tg_server *server = context;
    tg_scope granted = TG_SCOPE_NONE;
    char token_namespace[TG_NAME_MAX + 1] = "";
    tg_cat_status status =
        tg_token_lookup(server->catalog, token, &granted, token_namespace, sizeof token_namespace);
    if (status != TG_CAT_OK || granted < TG_SCOPE_READ) {
        snprintf(why, why_len, "unauthorized");
        snprintf(detail, detail_len, "%s",
                 tg_cat_failed(status) ? "the token store is unavailable"
                                       : "the token is not valid");
        return false;
    }
    size_t org_len = strcspn(model, "/");
    if (token_namespace[0] != '\0' &&
        (strlen(token_namespace) != org_len || strncmp(token_namespace, model, org_len) != 0)) {
        snprintf(why, why_len, "forbidden");
        snprintf(detail, detail_len, "the token is limited to the namespace '%s'", token_namespace);
        return false;
    }
    return true;
}

/* The manager's re-check (when a load ends, before each hand-out): the model and
 * version are still the ones asked for and the asking token still covers the org. */
static tg_preload_recheck_result recheck_preload(void *context, const tg_preload_identity *identity,
                                                 char *reason, size_t reason_len, char *detail,
                                                 size_t detail_len)
{
    tg_server *server = context;
    if (identity->model_id <= 0)
        return TG_PRELOAD_RECHECK_OK; /* not from the catalog: nothing to check */
    char org[TG_NAME_MAX + 1], name[TG_NAME_MAX + 1];
    size_t org_len = strcspn(identity->model, "/");
    snprintf(org, sizeof org, "%.*s", (int)org_len, identity->model);
    snprintf(name, sizeof name, "%s",
             identity->model[org_len] ? identity->model + org_len + 1 : "");
    tg_commit_guard guard = {.model_id = identity->model_id,
                             .org = org,
                             .name = name,
                             .token_hash = identity->token_hash[0] ? identity->token_hash : NULL};
    const char *why = NULL;
    tg_cat_status status =
        tg_catalog_guard_check(server->catalog, &guard, identity->version_id, &why);
    if (status == TG_CAT_OK)
        return TG_PRELOAD_RECHECK_OK;
    if (status != TG_CAT_NOT_FOUND || why == NULL) {
        snprintf(detail, detail_len, "the catalog failed while re-checking the preload");
        return TG_PRELOAD_RECHECK_ERROR;
    }
    snprintf(reason, reason_len, "%s", why);
    if (strcmp(why, "model_deleted") == 0)
        snprintf(detail, detail_len, "model %s was deleted; the preload's memory is released",
                 identity->model);
    else if (strcmp(why, "version_deleted") == 0)
        snprintf(detail, detail_len,
                 "the version of %s was deleted; the preload's memory is released",
                 identity->model);
    else if (strcmp(why, "token_revoked") == 0)
        snprintf(
            detail, detail_len,
            "the token that asked for the preload was revoked; the preload's memory is released");
    else
        snprintf(detail, detail_len,
                 "the token that asked for the preload no longer covers '%s'; the preload's memory "
                 "is released",
                 org);
    return TG_PRELOAD_RECHECK_REVOKED;
}

void tg_preloads_model_deleted(int64_t model_id, const char *org, const char *name)
{
    if (manager == NULL)
        return;
    char detail[300];
    snprintf(detail, sizeof detail, "model %s/%s was deleted; the preload's memory is released",
             org, name);
    unsigned touched = tg_preload_revoke_model(manager, model_id, "model_deleted", detail);
    if (touched > 0)
        tg_log(TG_LOG_INFO, "preload: %u preload(s) of %s/%s revoked with the model", touched, org,
               name);
}

int tg_preloads_start(tg_server *server, char *err, size_t err_len)
{
    /* Each held host preload is a descriptor: the count is a share of the limit. */
    tg_fd_plan plan;
    tg_fd_plan_for(tg_fd_limit(), &plan);
    unsigned max_preloads = options.max_preloads ? options.max_preloads : plan.preloads;
    unsigned max_per_namespace =
        options.max_per_namespace ? options.max_per_namespace : max_preloads / 4;
    if (max_per_namespace == 0)
        max_per_namespace = 1;
    tg_preload_manager_config config = {
        .max_preloads = max_preloads,
        .max_per_owner = max_per_namespace,
        .host = tg_preload_host_backend(),
        .cuda = options.fake_devices ? tg_preload_fake_backend(
                                           (int)options.fake_devices,
                                           options.budget_cuda ? options.budget_cuda : 1ULL << 30)
                                     : tg_preload_cuda_backend(),
        .host_budget = options.budget_host,
        .cuda_budget = options.budget_cuda,
        .copy_threads = options.copy_threads,
        .recheck = recheck_preload,
        .recheck_context = server,
    };
    /* Tests only: while this file exists (at most 20 s), a load waits before it can
     * become resident, so a test can delete or revoke in the middle without timing. */
    const char *hold = getenv("TENSORGATE_TEST_PRELOAD_HOLD");
    if (hold != NULL && hold[0] != '\0')
        config.test_hold_path = hold;
    tg_log(TG_LOG_INFO,
           "preload: at most %u preloads, %u per namespace or token, %u hand-off connections",
           max_preloads, max_per_namespace, plan.preload_connections);
    if (config.host == NULL || config.cuda == NULL) {
        if (config.host)
            config.host->destroy(config.host->context);
        if (config.cuda)
            config.cuda->destroy(config.cuda->context);
        snprintf(err, err_len, "out of memory starting the preload backends");
        return -1;
    }
    if (tg_preload_manager_create(&config, &manager, err, err_len) != 0)
        return -1;
    service_server = server;
    json_t *devices = tg_preload_devices_status(manager);
    json_t *cuda = json_object_get(devices, "cuda");
    if (json_is_true(json_object_get(cuda, "available")))
        tg_log(TG_LOG_INFO, "preload: %lld CUDA device(s) (%s backend)",
               (long long)json_integer_value(json_object_get(cuda, "devices")),
               json_string_value(json_object_get(cuda, "backend")));
    else
        tg_log(TG_LOG_INFO, "preload: GPU unavailable: %s",
               json_string_value(json_object_get(cuda, "reason")));
    json_decref(devices);

    tg_preload_socket_config socket_config = {.manager = manager,
                                              .authorize = authorize_token,
                                              .authorize_context = server,
                                              .allowed_count = options.allowed_count,
                                              .max_connections = plan.preload_connections};
    memcpy(socket_config.allowed_uids, options.allowed_uids, sizeof options.allowed_uids);
    char path[4200];
    bool default_path = options.socket_path[0] == '\0';
    if (default_path)
        snprintf(path, sizeof path, "%s/preload.sock", server->config.data_dir);
    else
        snprintf(path, sizeof path, "%s", options.socket_path);
    socket_config.path = path;
    char socket_err[512];
    if (tg_preload_socket_start(&socket_config, &hand_off, socket_err, sizeof socket_err) != 0) {
        /* A path that was asked for must work; the default may be too long for a
         * unix socket (108 bytes), and then preloads work without hand-off. */
        if (!default_path) {
            snprintf(err, err_len, "%s", socket_err);
            tg_preload_manager_destroy(manager);
            manager = NULL;
            return -1;
        }
        tg_log(TG_LOG_WARN, "preload: no hand-off socket: %s (use --preload-socket)", socket_err);
        hand_off = NULL;
    } else {
        tg_log(TG_LOG_INFO, "preload: hand-off socket %s", path);
    }
    return 0;
}

void tg_preloads_stop(void)
{
    tg_preload_socket_stop(hand_off);
    hand_off = NULL;
    tg_preload_manager_destroy(manager);
    manager = NULL;
}

void tg_preloads_readyz(json_t *body)
{
    if (body == NULL)
        return;
    if (manager == NULL) {
        json_object_set_new(
            body, "gpu",
            json_pack("{s:b, s:s}", "available", 0, "reason", "preloads are not started"));
        return;
    }
    json_t *devices = tg_preload_devices_status(manager);
    json_t *cuda = json_object_get(devices, "cuda");
    json_t *gpu = json_pack("{s:O}", "available", json_object_get(cuda, "available"));
    if (gpu && json_object_get(cuda, "reason"))
        json_object_set(gpu, "reason", json_object_get(cuda, "reason"));
    json_object_set_new(body, "gpu", gpu);
    json_object_set_new(body, "preload", devices);
}

char *tg_preloads_metrics_append(char *text)
{
    if (text == NULL || manager == NULL)
        return text;
    char *extra = tg_preload_metrics(manager);
    if (extra == NULL)
        return text;
    size_t len = strlen(text), extra_len = strlen(extra);
    char *joined = realloc(text, len + extra_len + 1);
    if (joined != NULL) {
        memcpy(joined + len, extra, extra_len + 1);
        text = joined;
    }
    free(extra);
    return text;
}

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
        tg_respond_problem(req, 400, "invalid_device", "%s", err);
        break;
    case TG_PRELOAD_DEVICE_UNAVAILABLE:
        tg_respond_problem(req, 503, "device_unavailable", "%s", err);
        break;
    case TG_PRELOAD_BUDGET:
        tg_respond_problem(req, 507, "preload_budget", "%s", err);
        break;
    case TG_PRELOAD_QUOTA:
        tg_respond_quota(req, TG_TALLY_KEY_FULL, 5, "%s", err);
        break;
    case TG_PRELOAD_NOT_FOUND:
        tg_respond_problem(req, 404, "preload_not_found", "%s", err);
        break;
    case TG_PRELOAD_NOT_RESIDENT:
        tg_respond_problem(req, 409, "not_resident", "%s", err);
        break;
    case TG_PRELOAD_INVALID:
        tg_respond_problem(req, 422, "unsupported_conversion", "%s", err);
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
            tg_respond_problem(req, 404, "tensor_not_found", "version %lld has no tensor %s",
                               (long long)version->number, pattern);
            return false;
        }
    }
    free(pattern_matched);
    if (s->tensor_count == 0) {
        tg_respond_problem(req, 422, "no_tensors", "no tensor of version %lld matches the patterns",
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

static void create_preload(tg_request *req, json_t *body)
{
    if (manager == NULL) {
        tg_respond_problem(req, 503, "device_unavailable", "preloads are not started");
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
        tg_respond_problem(req, 400, "invalid_name",
                           "\"model\" must be \"org/name\", each part "
                           "[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
        return;
    }
    if (!tg_auth_require(req, TG_SCOPE_WRITE, org))
        return;
    char version_text[32];
    if (version_value == NULL) {
        snprintf(version_text, sizeof version_text, "latest");
    } else if (json_is_integer(version_value) && json_integer_value(version_value) >= 0) {
        snprintf(version_text, sizeof version_text, "%lld",
                 (long long)json_integer_value(version_value));
    } else if (!json_is_string(version_value) || json_string_length(version_value) == 0 ||
               json_string_length(version_value) >= 128) {
        tg_respond_problem(req, 400, "invalid_request",
                           "\"version\" must be a number, an alias or a digest");
        return;
    }
    const char *version_string =
        json_is_string(version_value) ? json_string_value(version_value) : version_text;
    if (patterns != NULL &&
        (!json_is_array(patterns) || json_array_size(patterns) > PATTERNS_MAX)) {
        tg_respond_problem(req, 400, "invalid_request",
                           "\"tensors\" must be an array of at most %d name patterns",
                           PATTERNS_MAX);
        return;
    }
    for (size_t i = 0; i < json_array_size(patterns); i++) {
        json_t *p = json_array_get(patterns, i);
        if (!json_is_string(p) || json_string_length(p) == 0 || json_string_length(p) > 1024) {
            tg_respond_problem(req, 400, "invalid_request",
                               "each of \"tensors\" must be a tensor name or a glob");
            return;
        }
    }
    const char *device = device_value ? json_string_value(device_value) : "host";
    if (device == NULL) {
        tg_respond_problem(req, 400, "invalid_device", "\"device\" must be \"host\" or \"cuda:N\"");
        return;
    }
    st_dtype dtype = ST_F32;
    bool convert = dtype_value != NULL && !json_is_null(dtype_value);
    if (convert) {
        const char *dtype_name = json_string_value(dtype_value);
        if (dtype_name == NULL || !st_dtype_from_name(dtype_name, strlen(dtype_name), &dtype) ||
            !st_convert_supported(dtype, ST_F32)) {
            tg_respond_problem(req, 400, "invalid_request",
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
        tg_respond_problem(req, 404, "model_not_found", "no model %s/%s", org, name);
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
    /* No token, or one that cannot write anywhere: 401/403 before the body is judged;
     * the namespace is checked once the body names the model. */
    if (!tg_auth_require_scope(req, TG_SCOPE_WRITE))
        return;
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
    char token_namespace[TG_NAME_MAX + 1];
    if (!tg_auth_read_namespace(req, NULL, token_namespace, sizeof token_namespace))
        return;
    if (manager == NULL) {
        tg_respond_problem(req, 503, "device_unavailable", "preloads are not started");
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
    if (manager == NULL || *id == NULL || strlen(*id) != TG_PRELOAD_ID_LEN ||
        !tg_preload_model(manager, *id, model, sizeof model)) {
        /* under --auth-read, only a reader learns that an id does not exist */
        if (tg_auth_read(req, NULL))
            tg_respond_problem(req, 404, "preload_not_found", "no preload %s", *id ? *id : "");
        return false;
    }
    snprintf(org, org_len, "%.*s", (int)strcspn(model, "/"), model);
    return true;
}

void tg_route_preload_get(tg_request *req)
{
    const char *id;
    char org[TG_NAME_MAX + 1];
    if (!lookup_preload(req, &id, org, sizeof org) || !tg_auth_read(req, org))
        return;
    json_t *body = tg_preload_describe(manager, id, true);
    if (body == NULL)
        tg_respond_problem(req, 404, "preload_not_found", "no preload %s", id);
    else
        tg_respond_json(req, 200, body);
}

void tg_route_preload_delete(tg_request *req)
{
    const char *id = tg_param(req, "id");
    char org[TG_NAME_MAX + 1];
    char model[2 * TG_NAME_MAX + 2];
    if (manager == NULL || id == NULL || !tg_preload_model(manager, id, model, sizeof model)) {
        /* Only a writer learns that an id does not exist. */
        if (tg_auth_require(req, TG_SCOPE_WRITE, NULL))
            tg_respond_problem(req, 404, "preload_not_found", "no preload %s", id ? id : "");
        return;
    }
    snprintf(org, sizeof org, "%.*s", (int)strcspn(model, "/"), model);
    if (!tg_auth_require(req, TG_SCOPE_WRITE, org))
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
