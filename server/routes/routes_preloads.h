/* The preload service as the server runs it (preloads.c): the hand-off socket's
 * life (its options: server/preload/preload_options.h), and the lines preloads add
 * to /readyz and /metrics. The server has one preload service (started by serve). Its /v1/preloads
 * handlers are declared with the others in routes.h. */
#ifndef TG_ROUTES_PRELOADS_H
#define TG_ROUTES_PRELOADS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"

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
