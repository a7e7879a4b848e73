/* The preload service as the server runs it: the manager (preload.h) with its
 * backends (host, CUDA or fake), the hand-off socket (preload_socket.h) in front of
 * it, the catalog checks both call back into (a token's read scope on a model's
 * namespace; a preload's model, version and token still being what they were),
 * and the lines preloads add to /readyz and /metrics. cmd/serve.c starts one per
 * process and hands it to the routes through the server (http.h); the routes of
 * /v1/preloads parse requests, call the manager the service holds and answer. */
#ifndef TG_PRELOAD_SERVICE_H
#define TG_PRELOAD_SERVICE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "catalog.h"
#include "preload.h"
#include "preload_socket.h"

/* The preload flags (cmd/preload_options.h parses them); zero is each default. */
typedef struct tg_preload_service_options {
    char socket_path[4096]; /* "": DATA/preload.sock */
    uid_t allowed_uids[TG_PRELOAD_SOCKET_UIDS_MAX];
    size_t allowed_count;
    uint64_t budget_host, budget_cuda; /* 0: half of the RAM; each device's total */
    unsigned fake_devices;             /* cuda:N served by the fake backend (tests) */
    unsigned copy_threads;             /* copy workers per load; 0: 4 */
    unsigned max_preloads;             /* 0: default_max_preloads below */
    unsigned max_per_namespace;        /* 0: a quarter of max_preloads */
} tg_preload_service_options;

/* The token check of the hand-off socket: auth.h's tg_token_lookup. */
typedef tg_cat_status (*tg_preload_token_lookup_fn)(tg_catalog *catalog, const char *token,
                                                    tg_scope *granted, char *token_namespace,
                                                    size_t namespace_size);

typedef struct tg_preload_service_config {
    const tg_preload_service_options *options;
    tg_catalog *catalog;           /* re-checks and tokens; outlives the service */
    const char *data_dir;          /* the default socket's folder */
    unsigned default_max_preloads; /* the descriptor plan's share (resources.h) */
    unsigned hand_off_connections; /* the same for hand-off connections */
    tg_preload_token_lookup_fn token_lookup;
} tg_preload_service_config;

typedef struct tg_preload_service tg_preload_service;

/* Starts the manager and the hand-off socket. A socket path that was asked for
 * must work; the default one may fail (a path too long for a unix socket), and then
 * preloads work without hand-off. 0, or -1 with one sentence in err. */
int tg_preload_service_start(const tg_preload_service_config *config, tg_preload_service **out,
                             char *err, size_t err_len);
/* Closes the socket (ending every lease), then stops the manager. NULL is a no-op. */
void tg_preload_service_stop(tg_preload_service *service);

/* The manager the routes call; NULL when service is NULL (preloads not started). */
tg_preload_manager *tg_preload_service_manager(const tg_preload_service *service);

/* Adds "preload" (per device kind) and "gpu" ({"available":..,"reason":..}) to a
 * /readyz body. A GPU that is unavailable does not make the server unready. */
void tg_preload_service_readyz(const tg_preload_service *service, json_t *body);
/* Appends the preload metrics to a /metrics text (malloc'd; realloc'd here). */
char *tg_preload_service_metrics_append(const tg_preload_service *service, char *text);

/* A model was deleted: revokes its preloads (reason "model_deleted"): their memory
 * goes now, or at the last lease's end, and each stays listed as failed, saying why. */
void tg_preload_service_model_deleted(tg_preload_service *service, int64_t model_id,
                                      const char *org, const char *name);

#endif
