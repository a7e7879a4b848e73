/* The preload service's options, as rows of the option table (options.h): the
 * hand-off socket, the uids it lets in, the memory budgets, the copy workers and
 * the preload counts. cmd/serve.c hands the rows to the one parser; the service
 * (server/routes/preloads.c) reads what they filled. */
#ifndef TG_PRELOAD_OPTIONS_H
#define TG_PRELOAD_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "options.h"
#include "preload_socket.h"

typedef struct tg_preload_options {
    char socket_path[4096]; /* "" : DATA/preload.sock */
    uid_t allowed_uids[TG_PRELOAD_SOCKET_UIDS_MAX];
    size_t allowed_count;
    uint64_t budget_host, budget_cuda; /* 0: half of the RAM; each device's total */
    unsigned fake_devices;             /* cuda:N served by the fake backend (tests) */
    unsigned copy_threads;             /* 0: the manager's default */
    unsigned max_preloads;             /* 0: from the descriptor limit (resources.h) */
    unsigned max_per_namespace;        /* 0: a quarter of max_preloads */
} tg_preload_options;

/* The rows, filling the one process's tg_preload_options (reset to zeros first). */
tg_option_table tg_preload_option_table(void);

/* What the rows filled. */
const tg_preload_options *tg_preload_options_get(void);

#endif
