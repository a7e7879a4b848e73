/* The preload service's options, as rows of the option table (options.h): the
 * hand-off socket, the uids it lets in, the memory budgets, the copy workers and
 * the preload counts. cmd/serve.c hands the rows to the one parser; the service
 * (preload_service.h) is started on what they filled. */
#ifndef TG_PRELOAD_OPTIONS_H
#define TG_PRELOAD_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "options.h"
#include "preload_service.h"
#include "preload_socket.h"

/* The settings the rows fill are the service's options (preload_service.h). */
typedef tg_preload_service_options tg_preload_options;

/* The rows, filling the one process's tg_preload_options (reset to zeros first). */
tg_option_table tg_preload_option_table(void);

/* What the rows filled. */
const tg_preload_options *tg_preload_options_get(void);

#endif
