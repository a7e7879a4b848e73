/* The preload service as the server runs it (preloads.c): the hand-off socket's
 * life, the preload flags, and the lines preloads add to /readyz and /metrics. The
 * server has one preload service (started by serve). Its /v1/preloads handlers are
 * declared with the others in routes.h. */
#ifndef TG_ROUTES_PRELOADS_H
#define TG_ROUTES_PRELOADS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"

/* Takes the preload flags out of argv (so tg_config_load sees the rest) after
 * reading their environment variables:
 *   --preload-socket PATH        TENSORGATE_PRELOAD_SOCKET       default DATA/preload.sock
 *   --preload-allow-uid UID[,..] TENSORGATE_PRELOAD_ALLOW_UID    besides the server's uid and root
 *   --preload-budget-host BYTES  TENSORGATE_PRELOAD_BUDGET_HOST  default half of the RAM
 *   --preload-budget-cuda BYTES  TENSORGATE_PRELOAD_BUDGET_CUDA  per device; default its total
 *   --preload-fake-devices N     TENSORGATE_PRELOAD_FAKE_DEVICES cuda:N served by the fake backend
 * (tests)
 *   --preload-copy-threads N     TENSORGATE_PRELOAD_COPY_THREADS copy workers per load (default 4)
 * Returns 0, or -1 with one sentence in err. */
int tg_preload_options_take(int *argc, char **argv, char *err, size_t err_len);
const char *tg_preload_options_usage(void);

/* Starts the manager (host backend, CUDA or fake backend) and the hand-off socket. */
int tg_preloads_start(tg_server *server, char *err, size_t err_len);
/* Closes the socket (ending every lease), then stops the manager. */
void tg_preloads_stop(void);

/* Adds "preload" (per device kind) and "gpu" ({"available":..,"reason":..}) to a
 * /readyz body. A GPU that is unavailable does not make the server unready. */
void tg_preloads_readyz(json_t *body);
/* Appends the preload metrics to a /metrics text (malloc'd; realloc'd here). */
char *tg_preloads_metrics_append(char *text);

/* DELETE of a model: revokes its preloads (reason "model_deleted"): their memory goes
 * now, or at the last lease's end, and each stays listed as failed, saying why. */
void tg_preloads_model_deleted(int64_t model_id, const char *org, const char *name);

#endif
