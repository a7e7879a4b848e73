/* The preload flags of serve (preload_options.h). */
#include "preload_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

/* One server per process: the flags taken from argv and the environment. */
static tg_preload_service_options options;

static int parse_uids(const char *text, char *err, size_t err_len)
{
    options.allowed_count = 0;
    const char *p = text;
    while (*p) {
        char *end;
        unsigned long uid = strtoul(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0') || uid > 0xfffffffeUL ||
            options.allowed_count == TG_PRELOAD_SOCKET_UIDS_MAX) {
            snprintf(err, err_len, "--preload-allow-uid: '%s' is not a list of at most %d uids",
                     text, TG_PRELOAD_SOCKET_UIDS_MAX);
            return -1;
        }
        options.allowed_uids[options.allowed_count++] = (uid_t)uid;
        p = *end ? end + 1 : end;
    }
    return 0;
}

static int apply_option(const char *flag, const char *value, char *err, size_t err_len)
{
    uint64_t number = 0;
    if (strcmp(flag, "--preload-socket") == 0) {
        if (value[0] == '\0' || strlen(value) >= sizeof options.socket_path) {
            snprintf(err, err_len, "--preload-socket: the path is empty or too long");
            return -1;
        }
        snprintf(options.socket_path, sizeof options.socket_path, "%s", value);
        return 0;
    }
    if (strcmp(flag, "--preload-allow-uid") == 0)
        return parse_uids(value, err, err_len);
    if (tg_parse_bytes(value, &number) != 0) {
        snprintf(err, err_len, "%s: '%s' is not a number", flag, value);
        return -1;
    }
    if (strcmp(flag, "--preload-budget-host") == 0) {
        options.budget_host = number;
    } else if (strcmp(flag, "--preload-budget-cuda") == 0) {
        options.budget_cuda = number;
    } else if (strcmp(flag, "--preload-fake-devices") == 0 && number <= 16) {
        options.fake_devices = (unsigned)number;
    } else if (strcmp(flag, "--preload-copy-threads") == 0 && number >= 1 && number <= 64) {
        options.copy_threads = (unsigned)number;
    } else if (strcmp(flag, "--preload-max") == 0 && number <= 4096) {
        options.max_preloads = (unsigned)number;
    } else if (strcmp(flag, "--preload-max-per-namespace") == 0 && number <= 4096) {
        options.max_per_namespace = (unsigned)number;
    } else {
        snprintf(err, err_len, "%s: '%s' is out of range", flag, value);
        return -1;
    }
    return 0;
}

static const char *const option_flags[][2] = {
    {"--preload-socket", "TENSORGATE_PRELOAD_SOCKET"},
    {"--preload-allow-uid", "TENSORGATE_PRELOAD_ALLOW_UID"},
    {"--preload-budget-host", "TENSORGATE_PRELOAD_BUDGET_HOST"},
    {"--preload-budget-cuda", "TENSORGATE_PRELOAD_BUDGET_CUDA"},
    {"--preload-fake-devices", "TENSORGATE_PRELOAD_FAKE_DEVICES"},
    {"--preload-copy-threads", "TENSORGATE_PRELOAD_COPY_THREADS"},
    {"--preload-max", "TENSORGATE_PRELOAD_MAX"},
    {"--preload-max-per-namespace", "TENSORGATE_PRELOAD_MAX_PER_NAMESPACE"},
};
#define OPTION_COUNT (sizeof option_flags / sizeof option_flags[0])

int tg_preload_options_take(int *argc, char **argv, char *err, size_t err_len)
{
    memset(&options, 0, sizeof options);
    /* Tests only: while this file exists (at most 20 s), a load waits before it can
     * become resident, so a test can delete or revoke in the middle without timing. */
    const char *hold = getenv("TENSORGATE_TEST_PRELOAD_HOLD");
    if (hold != NULL && hold[0] != '\0')
        options.test_hold_path = hold;
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        const char *value = getenv(option_flags[i][1]);
        if (value && value[0] && apply_option(option_flags[i][0], value, err, err_len) != 0)
            return -1;
    }
    int kept = 1;
    for (int a = 1; a < *argc; a++) {
        const char *flag = NULL, *value = NULL;
        for (size_t i = 0; i < OPTION_COUNT && flag == NULL; i++) {
            size_t len = strlen(option_flags[i][0]);
            if (strncmp(argv[a], option_flags[i][0], len) != 0)
                continue;
            if (argv[a][len] == '=') {
                flag = option_flags[i][0];
                value = argv[a] + len + 1;
            } else if (argv[a][len] == '\0') {
                flag = option_flags[i][0];
                if (a + 1 >= *argc) {
                    snprintf(err, err_len, "%s needs a value", flag);
                    return -1;
                }
                value = argv[++a];
            }
        }
        if (flag == NULL) {
            argv[kept++] = argv[a];
            continue;
        }
        if (apply_option(flag, value, err, err_len) != 0)
            return -1;
    }
    argv[kept] = NULL;
    *argc = kept;
    return 0;
}

const char *tg_preload_options_usage(void)
{
    return "preload flags: [--preload-socket PATH] [--preload-allow-uid UID,...]\n"
           "               [--preload-budget-host BYTES] [--preload-budget-cuda BYTES]\n"
           "               [--preload-fake-devices N] [--preload-copy-threads N]\n"
           "               [--preload-max N] [--preload-max-per-namespace N]\n"
           "(env TENSORGATE_PRELOAD_SOCKET, _ALLOW_UID, _BUDGET_HOST, _BUDGET_CUDA, "
           "_FAKE_DEVICES,\n"
           "_COPY_THREADS, _MAX, _MAX_PER_NAMESPACE; the socket defaults to DATA/preload.sock;\n"
           "--preload-max 0 is a quarter of the descriptor limit (at most 4096),\n"
           "--preload-max-per-namespace 0 a quarter of --preload-max)\n";
}

const tg_preload_service_options *tg_preload_options_get(void)
{
    return &options;
}
