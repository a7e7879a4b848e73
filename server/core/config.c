/* Server configuration: every flag has a TENSORGATE_* environment variable;
 * flags win over the environment, the environment over defaults. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tg_config_defaults(tg_config *config)
{
    memset(config, 0, sizeof *config);
    snprintf(config->listen_host, sizeof config->listen_host, "127.0.0.1");
    config->listen_port = 8080;
    snprintf(config->data_dir, sizeof config->data_dir, "./data");
    config->max_body = 1ULL << 40;
    config->max_header = 100000000ULL;
    config->threads = 8;
    config->connection_timeout = 60;
    config->header_timeout = 30;
    config->connection_limit = 1024;
    config->per_ip_limit = 64; /* one client cannot take every connection */
    config->drain_limit = 64ULL << 20;
    config->header_memory = 1ULL << 30;
    config->header_memory_per_client = 256ULL << 20;
    config->max_uploads_per_namespace = 16;
    config->max_jobs = 1000;
    config->max_jobs_per_namespace = 64;
    config->header_cache_bytes = 256ULL << 20; /* TG_PARSED_HEADER_CACHE_BYTES */
    config->job_lease_seconds = 30;            /* TG_JOB_LEASE_SECONDS_DEFAULT */
    config->job_workers = 2;                   /* TG_JOB_WORKERS_DEFAULT */
    config->import_timeout = 3600;             /* TG_IMPORT_TIMEOUT_DEFAULT */
    config->import_min_rate = 64 << 10;        /* TG_IMPORT_MIN_RATE_DEFAULT */
    config->import_rate_window = 30;           /* TG_IMPORT_RATE_WINDOW_DEFAULT */
    config->response_cache_bytes = 64ULL << 20;
    config->response_cache_ttl = 5;
}

int tg_parse_listen(const char *text, char *host, size_t host_len, uint16_t *port)
{
    const char *colon;
    const char *host_begin = text;
    size_t hlen;
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (close == NULL || close[1] != ':')
            return -1;
        host_begin = text + 1;
        hlen = (size_t)(close - host_begin);
        colon = close + 1;
    } else {
        colon = strrchr(text, ':');
        if (colon == NULL)
            return -1;
        hlen = (size_t)(colon - text);
    }
    if (hlen == 0 || hlen >= host_len)
        return -1;
    const char *digits = colon + 1;
    if (*digits == '\0' || strlen(digits) > 5)
        return -1;
    unsigned long value = 0;
    for (const char *p = digits; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        value = value * 10 + (unsigned long)(*p - '0');
    }
    if (value > 65535)
        return -1;
    memcpy(host, host_begin, hlen);
    host[hlen] = '\0';
    *port = (uint16_t)value;
    return 0;
}

int tg_parse_bytes(const char *text, uint64_t *out)
{
    uint64_t value = 0;
    const char *p = text;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (__builtin_mul_overflow(value, 10, &value) ||
            __builtin_add_overflow(value, (uint64_t)(*p - '0'), &value))
            return -1;
    }
    unsigned shift = 0;
    switch (*p) {
    case '\0':
        break;
    case 'K':
    case 'k':
        shift = 10;
        p++;
        break;
    case 'M':
    case 'm':
        shift = 20;
        p++;
        break;
    case 'G':
    case 'g':
        shift = 30;
        p++;
        break;
    case 'T':
    case 't':
        shift = 40;
        p++;
        break;
    default:
        return -1;
    }
    if (*p == 'i' || *p == 'B')
        p += (*p == 'i' && p[1] == 'B') ? 2 : 1;
    if (*p != '\0')
        return -1;
    if (shift && value > (UINT64_MAX >> shift))
        return -1;
    *out = value << shift;
    return 0;
}

static int parse_unsigned(const char *text, unsigned minimum, unsigned maximum, unsigned *out)
{
    uint64_t value;
    if (tg_parse_bytes(text, &value) != 0 || value < minimum || value > maximum)
        return -1;
    *out = (unsigned)value;
    return 0;
}

static bool parse_bool(const char *text)
{
    return strcmp(text, "1") == 0 || strcmp(text, "true") == 0 || strcmp(text, "yes") == 0 ||
           strcmp(text, "on") == 0;
}

typedef enum option_type {
    OPT_LISTEN,
    OPT_PATH,
    OPT_BYTES,
    OPT_COUNT,
    OPT_FLAG,
    OPT_CIDRS, /* appends to a tg_addr_policy; the environment's value is comma-separated */
    OPT_URL    /* --public-url: checked and normalised (public_url.h) */
} option_type;

typedef struct option_spec {
    const char *flag;
    const char *env;
    option_type type;
    size_t offset;
    unsigned minimum, maximum;
} option_spec;

static const option_spec options[] = {
    {"--listen", "TENSORGATE_LISTEN", OPT_LISTEN, 0, 0, 0},
    {"--data", "TENSORGATE_DATA", OPT_PATH, offsetof(tg_config, data_dir), 0, 0},
    {"--auth-read", "TENSORGATE_AUTH_READ", OPT_FLAG, offsetof(tg_config, auth_read), 0, 0},
    {"--max-body", "TENSORGATE_MAX_BODY", OPT_BYTES, offsetof(tg_config, max_body), 0, 0},
    {"--max-header", "TENSORGATE_MAX_HEADER", OPT_BYTES, offsetof(tg_config, max_header), 0, 0},
    {"--threads", "TENSORGATE_THREADS", OPT_COUNT, offsetof(tg_config, threads), 1, 256},
    {"--timeout", "TENSORGATE_TIMEOUT", OPT_COUNT, offsetof(tg_config, connection_timeout), 1,
     86400},
    {"--header-timeout", "TENSORGATE_HEADER_TIMEOUT", OPT_COUNT,
     offsetof(tg_config, header_timeout), 1, 86400},
    {"--max-connections", "TENSORGATE_MAX_CONNECTIONS", OPT_COUNT,
     offsetof(tg_config, connection_limit), 1, 100000},
    {"--max-per-ip", "TENSORGATE_MAX_PER_IP", OPT_COUNT, offsetof(tg_config, per_ip_limit), 0,
     100000},
    {"--drain-limit", "TENSORGATE_DRAIN_LIMIT", OPT_BYTES, offsetof(tg_config, drain_limit), 0, 0},
    {"--refuse-nonfinite", "TENSORGATE_REFUSE_NONFINITE", OPT_FLAG,
     offsetof(tg_config, refuse_nonfinite), 0, 0},
    {"--rate-limit", "TENSORGATE_RATE_LIMIT", OPT_COUNT, offsetof(tg_config, rate_limit), 0,
     1000000},
    {"--rate-burst", "TENSORGATE_RATE_BURST", OPT_COUNT, offsetof(tg_config, rate_burst), 0,
     1000000},
    {"--scan-auth", "TENSORGATE_SCAN_AUTH", OPT_FLAG, offsetof(tg_config, scan_auth), 0, 0},
    {"--header-memory-per-client", "TENSORGATE_HEADER_MEMORY_PER_CLIENT", OPT_BYTES,
     offsetof(tg_config, header_memory_per_client), 0, 0},
    {"--header-memory", "TENSORGATE_HEADER_MEMORY", OPT_BYTES, offsetof(tg_config, header_memory),
     0, 0},
    {"--max-uploads-per-namespace", "TENSORGATE_MAX_UPLOADS_PER_NAMESPACE", OPT_COUNT,
     offsetof(tg_config, max_uploads_per_namespace), 1, 1000000},
    {"--max-uploads", "TENSORGATE_MAX_UPLOADS", OPT_COUNT, offsetof(tg_config, max_uploads), 0,
     1000000},
    {"--max-jobs-per-namespace", "TENSORGATE_MAX_JOBS_PER_NAMESPACE", OPT_COUNT,
     offsetof(tg_config, max_jobs_per_namespace), 1, 1000000},
    {"--max-jobs", "TENSORGATE_MAX_JOBS", OPT_COUNT, offsetof(tg_config, max_jobs), 1, 1000000},
    {"--header-cache-bytes", "TENSORGATE_HEADER_CACHE_BYTES", OPT_BYTES,
     offsetof(tg_config, header_cache_bytes), 0, 0},
    {"--catalog", "TENSORGATE_CATALOG", OPT_PATH, offsetof(tg_config, catalog_url), 0, 0},
    {"--job-lease-seconds", "TENSORGATE_JOB_LEASE_SECONDS", OPT_COUNT,
     offsetof(tg_config, job_lease_seconds), 2, 3600},
    {"--response-cache-bytes", "TENSORGATE_RESPONSE_CACHE_BYTES", OPT_BYTES,
     offsetof(tg_config, response_cache_bytes), 0, 0},
    {"--response-cache-ttl", "TENSORGATE_RESPONSE_CACHE_TTL", OPT_COUNT,
     offsetof(tg_config, response_cache_ttl), 0, 86400},
    {"--import-allow", "TENSORGATE_IMPORT_ALLOW", OPT_CIDRS, offsetof(tg_config, import_allow), 0,
     0},
    {"--trusted-proxy", "TENSORGATE_TRUSTED_PROXY", OPT_CIDRS, offsetof(tg_config, trusted_proxies),
     0, 0},
    {"--public-url", "TENSORGATE_PUBLIC_URL", OPT_URL, offsetof(tg_config, public_url), 0, 0},
    {"--job-workers", "TENSORGATE_JOB_WORKERS", OPT_COUNT, offsetof(tg_config, job_workers), 1, 64},
    {"--import-timeout", "TENSORGATE_IMPORT_TIMEOUT", OPT_COUNT,
     offsetof(tg_config, import_timeout), 0, 604800},
    {"--import-min-rate", "TENSORGATE_IMPORT_MIN_RATE", OPT_BYTES,
     offsetof(tg_config, import_min_rate), 0, 0},
    {"--import-rate-window", "TENSORGATE_IMPORT_RATE_WINDOW", OPT_COUNT,
     offsetof(tg_config, import_rate_window), 1, 3600},
};

const char *tg_config_usage(void)
{
    return "usage: tensorgate serve [--listen HOST:PORT] [--data DIR] [--auth-read]\n"
           "                        [--max-body BYTES] [--max-header BYTES] [--threads N]\n"
           "                        [--timeout SECONDS] [--header-timeout SECONDS]\n"
           "                        [--max-connections N] [--max-per-ip N]\n"
           "                        [--drain-limit BYTES] [--refuse-nonfinite]\n"
           "                        [--rate-limit REQUESTS_PER_SECOND] [--rate-burst N]\n"
           "                        [--scan-auth] [--header-memory BYTES]\n"
           "                        [--header-memory-per-client BYTES] [--max-uploads N]\n"
           "                        [--max-uploads-per-namespace N] [--max-jobs N]\n"
           "                        [--max-jobs-per-namespace N]\n"
           "                        [--header-cache-bytes BYTES]\n"
           "                        [--catalog URL] [--job-lease-seconds N]\n"
           "                        [--response-cache-bytes BYTES] [--response-cache-ttl SECONDS]\n"
           "                        [--import-allow CIDR]... [--trusted-proxy CIDR]...\n"
           "                        [--public-url URL] [--job-workers N]\n"
           "                        [--import-timeout SECONDS] [--import-min-rate BYTES]\n"
           "                        [--import-rate-window SECONDS]\n"
           "Each flag has an environment variable: TENSORGATE_LISTEN, TENSORGATE_DATA,\n"
           "TENSORGATE_AUTH_READ, TENSORGATE_MAX_BODY, TENSORGATE_MAX_HEADER, TENSORGATE_THREADS,\n"
           "TENSORGATE_TIMEOUT, TENSORGATE_HEADER_TIMEOUT, TENSORGATE_MAX_CONNECTIONS,\n"
           "TENSORGATE_MAX_PER_IP,\n"
           "TENSORGATE_DRAIN_LIMIT, TENSORGATE_REFUSE_NONFINITE, TENSORGATE_RATE_LIMIT,\n"
           "TENSORGATE_RATE_BURST, TENSORGATE_SCAN_AUTH, TENSORGATE_HEADER_MEMORY,\n"
           "TENSORGATE_HEADER_MEMORY_PER_CLIENT, TENSORGATE_MAX_UPLOADS,\n"
           "TENSORGATE_MAX_UPLOADS_PER_NAMESPACE, TENSORGATE_MAX_JOBS, "
           "TENSORGATE_MAX_JOBS_PER_NAMESPACE, TENSORGATE_HEADER_CACHE_BYTES,\n"
           "TENSORGATE_CATALOG, TENSORGATE_JOB_LEASE_SECONDS,\n"
           "TENSORGATE_RESPONSE_CACHE_BYTES, TENSORGATE_RESPONSE_CACHE_TTL,\n"
           "TENSORGATE_IMPORT_ALLOW, TENSORGATE_TRUSTED_PROXY (comma-separated CIDRs),\n"
           "TENSORGATE_PUBLIC_URL, TENSORGATE_JOB_WORKERS, TENSORGATE_IMPORT_TIMEOUT,\n"
           "TENSORGATE_IMPORT_MIN_RATE, TENSORGATE_IMPORT_RATE_WINDOW.\n"
           "Defaults: 127.0.0.1:8080, ./data; --rate-limit 0 (off), --rate-burst 0 (twice the "
           "rate);\n"
           "--timeout 60, --header-timeout 30 (a request's head, kept-alive waits included);\n"
           "--header-memory 1G, --header-memory-per-client 256M (0: no bound); --max-uploads 0\n"
           "(from the descriptor limit), --max-uploads-per-namespace 16; --max-jobs 1000,\n"
           "--max-jobs-per-namespace 64. --max-connections is lowered to what the descriptor\n"
           "limit can carry. --header-cache-bytes 256M (parsed safetensors headers kept for\n"
           "tensor reads; 0 keeps none). --response-cache-bytes 64M (ready answers of\n"
           "published versions; 0 keeps none), --response-cache-ttl 5 (seconds one is served:\n"
           "another replica's delete is seen within it; 0: until evicted; answers for latest,\n"
           "main or an alias: 1 s at most).\n"
           "--catalog: sqlite:PATH (default: catalog.db in --data) or postgresql://USER@HOST/DB\n"
           "(any libpq URI, or postgresql:KEY=VALUE ...: a catalog shared by replicas);\n"
           "--job-lease-seconds 30 (a job's claim; renewed every third of it).\n"
           "--job-workers 2 (jobs run at once; one namespace runs at most N-1 of them when N > 1,\n"
           "so another namespace's job always finds a worker; a free worker goes to the\n"
           "namespace running the fewest).\n"
           "--import-timeout 3600 (seconds an import may take; 0: no deadline),\n"
           "--import-min-rate 64K (bytes per second a source must average over each\n"
           "--import-rate-window 30 seconds; 0: no minimum): slower imports fail with\n"
           "import_timeout or import_too_slow.\n"
           "--import-allow: a CIDR that imports from a URL may reach although it is loopback,\n"
           "private, link-local or metadata (repeatable).\n"
           "--public-url: scheme://host[:port][/prefix] of the absolute links the server\n"
           "builds (paging Link headers); default: the request's Host. --trusted-proxy: a\n"
           "CIDR whose peers' Forwarded and X-Forwarded-Proto/-Host/-Port are believed\n"
           "(repeatable; default: none).\n";
}

static int apply(tg_config *config, const option_spec *spec, const char *value, const char *origin,
                 char *err, size_t err_len)
{
    char *field = (char *)config + spec->offset;
    switch (spec->type) {
    case OPT_LISTEN:
        if (tg_parse_listen(value, config->listen_host, sizeof config->listen_host,
                            &config->listen_port) != 0) {
            snprintf(err, err_len, "%s: '%s' is not HOST:PORT", origin, value);
            return -1;
        }
        return 0;
    case OPT_PATH:
        if (value[0] == '\0' || strlen(value) >= sizeof config->data_dir) {
            snprintf(err, err_len, "%s: path is empty or too long", origin);
            return -1;
        }
        snprintf(field, sizeof config->data_dir, "%s", value);
        return 0;
    case OPT_BYTES:
        if (tg_parse_bytes(value, (uint64_t *)(void *)field) != 0) {
            snprintf(err, err_len, "%s: '%s' is not a byte count", origin, value);
            return -1;
        }
        return 0;
    case OPT_COUNT:
        if (parse_unsigned(value, spec->minimum, spec->maximum, (unsigned *)(void *)field) != 0) {
            snprintf(err, err_len, "%s: '%s' is not a number in %u..%u", origin, value,
                     spec->minimum, spec->maximum);
            return -1;
        }
        return 0;
    case OPT_FLAG:
        *(bool *)(void *)field = parse_bool(value);
        return 0;
    case OPT_CIDRS: {
        char list[1024];
        if (strlen(value) >= sizeof list) {
            snprintf(err, err_len, "%s: the list is too long", origin);
            return -1;
        }
        snprintf(list, sizeof list, "%s", value);
        char *save = NULL;
        for (char *cidr = strtok_r(list, ", ", &save); cidr != NULL;
             cidr = strtok_r(NULL, ", ", &save))
            if (tg_addr_policy_allow((tg_addr_policy *)(void *)field, cidr) != 0) {
                snprintf(err, err_len,
                         "%s: '%s' is not a CIDR (a.b.c.d/n or v6/n, no host bits), or more "
                         "than %d were given",
                         origin, cidr, TG_ADDR_ALLOW_MAX);
                return -1;
            }
        return 0;
    }
    case OPT_URL: {
        char why[400];
        if (tg_public_url_normalize(value, field, TG_PUBLIC_URL_MAX, why, sizeof why) != 0) {
            snprintf(err, err_len, "%s: %s", origin, why);
            return -1;
        }
        return 0;
    }
    }
    return -1;
}

int tg_config_load(tg_config *config, int argc, char **argv, char *err, size_t err_len)
{
    const size_t option_count = sizeof options / sizeof options[0];
    for (size_t i = 0; i < option_count; i++) {
        const char *value = getenv(options[i].env);
        if (value != NULL && value[0] != '\0' &&
            apply(config, &options[i], value, options[i].env, err, err_len) != 0)
            return -1;
    }
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
            return 1;
        const option_spec *spec = NULL;
        const char *value = NULL;
        for (size_t i = 0; i < option_count && spec == NULL; i++) {
            size_t flag_len = strlen(options[i].flag);
            if (strncmp(arg, options[i].flag, flag_len) != 0)
                continue;
            if (arg[flag_len] == '\0') {
                spec = &options[i];
            } else if (arg[flag_len] == '=') {
                spec = &options[i];
                value = arg + flag_len + 1;
            }
        }
        if (spec == NULL) {
            snprintf(err, err_len, "unknown argument '%s'", arg);
            return -1;
        }
        if (spec->type == OPT_FLAG && value == NULL) {
            value = "1";
        } else if (value == NULL) {
            if (a + 1 >= argc) {
                snprintf(err, err_len, "%s needs a value", spec->flag);
                return -1;
            }
            value = argv[++a];
        }
        if (apply(config, spec, value, spec->flag, err, err_len) != 0)
            return -1;
    }
    return 0;
}
