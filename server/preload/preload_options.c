/* The preload service's rows of the option table (preload_options.h). */
#include "preload_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One preload service per process: what its rows filled. */
static tg_preload_options options;

static void reset(void *target)
{
    memset(target, 0, sizeof(tg_preload_options));
}

static int parse_socket(const tg_option_spec *spec, void *field, const char *value,
                        const char *origin, char *err, size_t err_len)
{
    if (value[0] == '\0' || strlen(value) >= spec->maximum) {
        snprintf(err, err_len, "%s: the path is empty or too long", origin);
        return -1;
    }
    snprintf(field, spec->maximum, "%s", value);
    return 0;
}

static int parse_uids(const tg_option_spec *spec, void *field, const char *value,
                      const char *origin, char *err, size_t err_len)
{
    (void)spec;
    tg_preload_options *o = field; /* the row's offset is 0: the whole struct */
    o->allowed_count = 0;
    const char *p = value;
    while (*p) {
        char *end;
        unsigned long uid = strtoul(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0') || uid > 0xfffffffeUL ||
            o->allowed_count == TG_PRELOAD_SOCKET_UIDS_MAX) {
            snprintf(err, err_len, "%s: '%s' is not a list of at most %d uids", origin, value,
                     TG_PRELOAD_SOCKET_UIDS_MAX);
            return -1;
        }
        o->allowed_uids[o->allowed_count++] = (uid_t)uid;
        p = *end ? end + 1 : end;
    }
    return 0;
}

static int parse_number(const char *value, const char *origin, uint64_t *number, char *err,
                        size_t err_len)
{
    if (tg_options_parse_bytes(value, number) != 0) {
        snprintf(err, err_len, "%s: '%s' is not a number", origin, value);
        return -1;
    }
    return 0;
}

static int parse_budget(const tg_option_spec *spec, void *field, const char *value,
                        const char *origin, char *err, size_t err_len)
{
    (void)spec;
    return parse_number(value, origin, field, err, err_len);
}

static int parse_count(const tg_option_spec *spec, void *field, const char *value,
                       const char *origin, char *err, size_t err_len)
{
    uint64_t number = 0;
    if (parse_number(value, origin, &number, err, err_len) != 0)
        return -1;
    if (number < spec->minimum || number > spec->maximum) {
        snprintf(err, err_len, "%s: '%s' is out of range", origin, value);
        return -1;
    }
    *(unsigned *)field = (unsigned)number;
    return 0;
}

#define FIELD(name) offsetof(tg_preload_options, name)

static const tg_option_spec preload_options[] = {
    {"--preload-socket", "TENSORGATE_PRELOAD_SOCKET", "PATH", parse_socket, FIELD(socket_path), 0,
     sizeof options.socket_path, false, "DATA/preload.sock",
     "The Unix socket preloads are handed off on."},
    {"--preload-allow-uid", "TENSORGATE_PRELOAD_ALLOW_UID", "UID,...", parse_uids, 0, 0, 0, false,
     NULL, "Uids the socket lets in besides the server's and root."},
    {"--preload-budget-host", "TENSORGATE_PRELOAD_BUDGET_HOST", "BYTES", parse_budget,
     FIELD(budget_host), 0, 0, false, NULL,
     "Host memory preloads may hold; default: half of the RAM."},
    {"--preload-budget-cuda", "TENSORGATE_PRELOAD_BUDGET_CUDA", "BYTES", parse_budget,
     FIELD(budget_cuda), 0, 0, false, NULL,
     "Device memory preloads may hold, per device; default: its total."},
    {"--preload-fake-devices", "TENSORGATE_PRELOAD_FAKE_DEVICES", "N", parse_count,
     FIELD(fake_devices), 0, 16, false, NULL, "cuda:N served by the fake backend (tests)."},
    {"--preload-copy-threads", "TENSORGATE_PRELOAD_COPY_THREADS", "N", parse_count,
     FIELD(copy_threads), 1, 64, false, "4", "Copy workers per load."},
    {"--preload-max", "TENSORGATE_PRELOAD_MAX", "N", parse_count, FIELD(max_preloads), 0, 4096,
     false, "0", "Preloads at once; 0: a quarter of the descriptor limit (at most 4096)."},
    {"--preload-max-per-namespace", "TENSORGATE_PRELOAD_MAX_PER_NAMESPACE", "N", parse_count,
     FIELD(max_per_namespace), 0, 4096, false, "0",
     "Preloads of one namespace or token; 0: a quarter of --preload-max."},
};

tg_option_table tg_preload_option_table(void)
{
    return (tg_option_table){.title = "preload",
                             .specs = preload_options,
                             .count = TG_OPTION_COUNT(preload_options),
                             .target = &options,
                             .reset = reset};
}

const tg_preload_options *tg_preload_options_get(void)
{
    return &options;
}
