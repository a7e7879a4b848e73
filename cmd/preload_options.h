/* The preload flags of serve, each with a TENSORGATE_PRELOAD_* environment variable:
 * taken out of argv before the command's own parser sees it, kept here for the one
 * process, and handed to the preload service (preload_service.h) at start.
 *   --preload-socket PATH        TENSORGATE_PRELOAD_SOCKET       default DATA/preload.sock
 *   --preload-allow-uid UID[,..] TENSORGATE_PRELOAD_ALLOW_UID    besides the server's uid and root
 *   --preload-budget-host BYTES  TENSORGATE_PRELOAD_BUDGET_HOST  default half of the RAM
 *   --preload-budget-cuda BYTES  TENSORGATE_PRELOAD_BUDGET_CUDA  per device; default its total
 *   --preload-fake-devices N     TENSORGATE_PRELOAD_FAKE_DEVICES cuda:N served by the fake backend
 * (tests)
 *   --preload-copy-threads N     TENSORGATE_PRELOAD_COPY_THREADS copy workers per load (default 4)
 *   --preload-max N, --preload-max-per-namespace N (TENSORGATE_PRELOAD_MAX, _MAX_PER_NAMESPACE) */
#ifndef TG_PRELOAD_OPTIONS_H
#define TG_PRELOAD_OPTIONS_H

#include <stddef.h>

#include "preload_service.h"

/* Reads the environment, then removes the flags from argv (argc updated). 0, or -1
 * with one sentence in err. */
int tg_preload_options_take(int *argc, char **argv, char *err, size_t err_len);
/* What was taken. */
const tg_preload_service_options *tg_preload_options_get(void);
/* The flags' lines for --help. */
const char *tg_preload_options_usage(void);

#endif
