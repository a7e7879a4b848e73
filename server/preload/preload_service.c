/* The preload service (preload_service.h): the manager and the hand-off socket of
 * one server, and the catalog checks they call back into. */
#include "preload_service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "preload_backend.h"
#include "test_hooks.h"

struct tg_preload_service {
    tg_preload_manager *manager;
    tg_preload_socket *hand_off; /* NULL: preloads work without hand-off */
    tg_catalog *catalog;
    tg_preload_token_lookup_fn token_lookup;
};

/* The hand-off socket's check: the token has read scope on the model's namespace. */
static bool authorize_token(void *context, const char *token, const char *model, char *why,
                            size_t why_len, char *detail, size_t detail_len)
{
    const tg_preload_service *service = context;
    tg_scope granted = TG_SCOPE_NONE;
    char token_namespace[TG_NAME_MAX + 1] = "";
    tg_cat_status status = service->token_lookup(service->catalog, token, &granted, token_namespace,
                                                 sizeof token_namespace);
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

/* The sentence of a re-check that revoked a preload for why. */
static void revoked_detail(const char *why, const char *model, const char *org, char *detail,
                           size_t detail_len)
{
    if (strcmp(why, "model_deleted") == 0)
        snprintf(detail, detail_len, "model %s was deleted; the preload's memory is released",
                 model);
    else if (strcmp(why, "version_deleted") == 0)
        snprintf(detail, detail_len,
                 "the version of %s was deleted; the preload's memory is released", model);
    else if (strcmp(why, "token_revoked") == 0)
        snprintf(
            detail, detail_len,
            "the token that asked for the preload was revoked; the preload's memory is released");
    else
        snprintf(detail, detail_len,
                 "the token that asked for the preload no longer covers '%s'; the preload's memory "
                 "is released",
                 org);
}

/* The manager's re-check (when a load ends, before each hand-out): the model and
 * version are still the ones asked for and the asking token still covers the org. */
static tg_preload_recheck_result recheck_preload(void *context, const tg_preload_identity *identity,
                                                 char *reason, size_t reason_len, char *detail,
                                                 size_t detail_len)
{
    const tg_preload_service *service = context;
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
        tg_catalog_guard_check(service->catalog, &guard, identity->version_id, &why);
    if (status == TG_CAT_OK)
        return TG_PRELOAD_RECHECK_OK;
    if (status != TG_CAT_NOT_FOUND || why == NULL) {
        snprintf(detail, detail_len, "the catalog failed while re-checking the preload");
        return TG_PRELOAD_RECHECK_ERROR;
    }
    snprintf(reason, reason_len, "%s", why);
    revoked_detail(why, identity->model, org, detail, detail_len);
    return TG_PRELOAD_RECHECK_REVOKED;
}

void tg_preload_service_model_deleted(tg_preload_service *service, int64_t model_id,
                                      const char *org, const char *name)
{
    if (service == NULL)
        return;
    char detail[300];
    snprintf(detail, sizeof detail, "model %s/%s was deleted; the preload's memory is released",
             org, name);
    unsigned touched = tg_preload_revoke_model(service->manager, model_id, "model_deleted", detail);
    if (touched > 0)
        tg_log(TG_LOG_INFO, "preload: %u preload(s) of %s/%s revoked with the model", touched, org,
               name);
}

/* Logs what the CUDA backend found. */
static void log_devices(tg_preload_manager *manager)
{
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
}

/* Makes the manager with its backends; 0, or -1 with err. */
static int start_manager(const tg_preload_service_config *config, tg_preload_service *service,
                         char *err, size_t err_len)
{
    const tg_preload_service_options *options = config->options;
    /* Each held host preload is a descriptor: the count is a share of the limit. */
    unsigned max_preloads =
        options->max_preloads ? options->max_preloads : config->default_max_preloads;
    unsigned max_per_namespace =
        options->max_per_namespace ? options->max_per_namespace : max_preloads / 4;
    if (max_per_namespace == 0)
        max_per_namespace = 1;
    tg_preload_manager_config manager_config = {
        .max_preloads = max_preloads,
        .max_per_owner = max_per_namespace,
        .host = tg_preload_host_backend(),
        .cuda =
            options->fake_devices
                ? tg_preload_fake_backend((int)options->fake_devices,
                                          options->budget_cuda ? options->budget_cuda : 1ULL << 30)
                : tg_preload_cuda_backend(),
        .host_budget = options->budget_host,
        .cuda_budget = options->budget_cuda,
        .copy_threads = options->copy_threads,
        .recheck = recheck_preload,
        .recheck_context = service,
        .test_hold_path = tg_test_hook(TG_HOOK_PRELOAD_HOLD), /* test builds only */
    };
    tg_log(TG_LOG_INFO,
           "preload: at most %u preloads, %u per namespace or token, %u hand-off connections",
           max_preloads, max_per_namespace, config->hand_off_connections);
    if (manager_config.host == NULL || manager_config.cuda == NULL) {
        if (manager_config.host)
            manager_config.host->destroy(manager_config.host->context);
        if (manager_config.cuda)
            manager_config.cuda->destroy(manager_config.cuda->context);
        snprintf(err, err_len, "out of memory starting the preload backends");
        return -1;
    }
    if (tg_preload_manager_create(&manager_config, &service->manager, err, err_len) != 0)
        return -1;
    log_devices(service->manager);
    return 0;
}

/* Starts the hand-off socket; 0 (also when the default path failed), or -1 with err. */
static int start_socket(const tg_preload_service_config *config, tg_preload_service *service,
                        char *err, size_t err_len)
{
    const tg_preload_service_options *options = config->options;
    tg_preload_socket_config socket_config = {.manager = service->manager,
                                              .authorize = authorize_token,
                                              .authorize_context = service,
                                              .allowed_count = options->allowed_count,
                                              .max_connections = config->hand_off_connections};
    memcpy(socket_config.allowed_uids, options->allowed_uids, sizeof options->allowed_uids);
    char path[4200];
    bool default_path = options->socket_path[0] == '\0';
    if (default_path)
        snprintf(path, sizeof path, "%s/preload.sock", config->data_dir);
    else
        snprintf(path, sizeof path, "%s", options->socket_path);
    socket_config.path = path;
    char socket_err[512];
    if (tg_preload_socket_start(&socket_config, &service->hand_off, socket_err,
                                sizeof socket_err) != 0) {
        /* A path that was asked for must work; the default may be too long for a
         * unix socket (108 bytes), and then preloads work without hand-off. */
        service->hand_off = NULL;
        if (!default_path) {
            snprintf(err, err_len, "%s", socket_err);
            return -1;
        }
        tg_log(TG_LOG_WARN, "preload: no hand-off socket: %s (use --preload-socket)", socket_err);
    } else {
        tg_log(TG_LOG_INFO, "preload: hand-off socket %s", path);
    }
    return 0;
}

int tg_preload_service_start(const tg_preload_service_config *config, tg_preload_service **out,
                             char *err, size_t err_len)
{
    *out = NULL;
    tg_preload_service *service = calloc(1, sizeof *service);
    if (service == NULL) {
        snprintf(err, err_len, "out of memory starting the preload service");
        return -1;
    }
    service->catalog = config->catalog;
    service->token_lookup = config->token_lookup;
    if (start_manager(config, service, err, err_len) != 0) {
        free(service);
        return -1;
    }
    if (start_socket(config, service, err, err_len) != 0) {
        tg_preload_manager_destroy(service->manager);
        free(service);
        return -1;
    }
    *out = service;
    return 0;
}

void tg_preload_service_stop(tg_preload_service *service)
{
    if (service == NULL)
        return;
    tg_preload_socket_stop(service->hand_off);
    tg_preload_manager_destroy(service->manager);
    free(service);
}

tg_preload_manager *tg_preload_service_manager(const tg_preload_service *service)
{
    return service ? service->manager : NULL;
}

void tg_preload_service_readyz(const tg_preload_service *service, json_t *body)
{
    if (body == NULL)
        return;
    if (service == NULL) {
        json_object_set_new(
            body, "gpu",
            json_pack("{s:b, s:s}", "available", 0, "reason", "preloads are not started"));
        return;
    }
    json_t *devices = tg_preload_devices_status(service->manager);
    json_t *cuda = json_object_get(devices, "cuda");
    json_t *gpu = json_pack("{s:O}", "available", json_object_get(cuda, "available"));
    if (gpu && json_object_get(cuda, "reason"))
        json_object_set(gpu, "reason", json_object_get(cuda, "reason"));
    json_object_set_new(body, "gpu", gpu);
    json_object_set_new(body, "preload", devices);
}

char *tg_preload_service_metrics_append(const tg_preload_service *service, char *text)
{
    if (text == NULL || service == NULL)
        return text;
    char *extra = tg_preload_metrics(service->manager);
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
