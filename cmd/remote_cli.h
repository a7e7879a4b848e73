/* What the server commands share (cmd/remote.c defines it): the common options
 * (--url, --token, --json, --help, ...), the connection, the error report and exit
 * status, and the escaping of every string a server sends. cmd/registry.c uses it
 * for the registry commands (model, models, version, alias, namespace quota|show).
 * Exit statuses: 0 done; 1 the server refused; 2 usage or local error; 3 the server
 * could not be reached or failed (docs/MANUAL.md, "The CLI"). */
#ifndef TG_REMOTE_CLI_H
#define TG_REMOTE_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tensorgate_client.h"

typedef struct remote_opts {
    const char *url;
    const char *token;
    bool json;
    unsigned parallel;
    uint64_t limit_rate;
    long stall_timeout_s; /* 0: the library's default (30) */
    bool no_fsync;        /* pull --no-fsync (tgc_options.no_fsync) */
} remote_opts;

/* An extra option's val (struct option) must not collide with the common ones:
 * the registry commands use values from here on. */
#define TG_REMOTE_EXTRA_OPT 2000

/* s with its control characters shown as \xHH (a server chose it); "-" for NULL. The
 * result lives until eight later calls. */
const char *tg_remote_shown(const char *s);
/* Reports a failed call (stderr, and {"error":...} on stdout with --json); returns
 * the exit status it stands for. */
int tg_remote_fail(const char *cmd, const remote_opts *ro, const tgc_error *e);
/* j as one compact JSON line on stdout (nothing for NULL). */
void tg_remote_print_json(json_t *j);
/* "tensorgate CMD: TEXT" and the usage on stderr; returns 2. */
int tg_remote_usage_error(const char *cmd, const char *text, void (*usage)(FILE *));
/* The help text of the common options and the exit statuses. */
void tg_remote_common_help(FILE *out);
/* Parses the common options and extra (vals from TG_REMOTE_EXTRA_OPT, handed to
 * on_extra, which returns 0 when it took the value); the operands start at optind.
 * Returns -1 to go on, or the exit status (0 after --help). */
int tg_remote_parse(const char *cmd, int argc, char **argv, remote_opts *ro,
                    const struct option *extra, void (*usage)(FILE *),
                    int (*on_extra)(int opt, const char *arg, void *ud), void *ud);
/* A client for ro's server (the defaults from the environment filled in); NULL with
 * *status set after reporting the failure. */
tgc_client *tg_remote_connect(const char *cmd, remote_opts *ro, int *status);
/* "1.5 GiB" */
void tg_remote_human_size(uint64_t bytes, char *out, size_t cap);

#endif
