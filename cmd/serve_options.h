/* The option tables of `tensorgate serve`, registered in one place: the server's
 * (server/core/config.h), the preload service's (server/preload/preload_options.h)
 * and the blob store's (blob_options.h), read by the one parser (options.h). */
#ifndef TG_SERVE_OPTIONS_H
#define TG_SERVE_OPTIONS_H

#include <stddef.h>

#include "config.h"

/* Applies every table's environment variables, then argv (argv[0] is "serve") over
 * config (its defaults already in) and the modules' settings. 0; 1 when --help was
 * asked; -1 with one sentence in err (an unknown argument included). */
int tg_serve_options_load(tg_config *config, int argc, char **argv, char *err, size_t err_len);

/* serve's --help, generated from the tables. */
const char *tg_serve_usage(void);

#endif
