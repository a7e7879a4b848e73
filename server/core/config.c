/* Server configuration: the defaults and the server's rows of the option table
 * (options.h), which also write its --help. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "options.h"

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
    config->webhook_workers = 1;
    config->webhook_attempts = 8;
    config->webhook_max_failures = 5;
    config->webhook_backoff_ms = 1000;
    config->webhook_backoff_max_ms = 60000;
    config->webhook_timeout = 10;
    config->webhook_poll_ms = 500;
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
    return tg_options_parse_bytes(text, out);
}

static int parse_listen(const tg_option_spec *spec, void *field, const char *value,
                        const char *origin, char *err, size_t err_len)
{
    (void)spec;
    tg_config *config = field; /* the row's offset is 0: the whole struct */
    if (tg_parse_listen(value, config->listen_host, sizeof config->listen_host,
                        &config->listen_port) != 0) {
        snprintf(err, err_len, "%s: '%s' is not HOST:PORT", origin, value);
        return -1;
    }
    return 0;
}

/* Appends to a tg_addr_policy; the environment's value is comma-separated. */
static int parse_cidrs(const tg_option_spec *spec, void *field, const char *value,
                       const char *origin, char *err, size_t err_len)
{
    (void)spec;
    char list[1024];
    if (strlen(value) >= sizeof list) {
        snprintf(err, err_len, "%s: the list is too long", origin);
        return -1;
    }
    snprintf(list, sizeof list, "%s", value);
    char *save = NULL;
    for (char *cidr = strtok_r(list, ", ", &save); cidr != NULL; cidr = strtok_r(NULL, ", ", &save))
        if (tg_addr_policy_allow(field, cidr) != 0) {
            snprintf(err, err_len,
                     "%s: '%s' is not a CIDR (a.b.c.d/n or v6/n, no host bits), or more "
                     "than %d were given",
                     origin, cidr, TG_ADDR_ALLOW_MAX);
            return -1;
        }
    return 0;
}

/* --public-url: checked and normalised (public_url.h). */
static int parse_url(const tg_option_spec *spec, void *field, const char *value, const char *origin,
                     char *err, size_t err_len)
{
    (void)spec;
    char why[400];
    if (tg_public_url_normalize(value, field, TG_PUBLIC_URL_MAX, why, sizeof why) != 0) {
        snprintf(err, err_len, "%s: %s", origin, why);
        return -1;
    }
    return 0;
}

#define FIELD(name) offsetof(tg_config, name)
#define PATH_MAX_OF(name) sizeof(((tg_config *)0)->name)

/* The server's options, in the order --help lists them. */
static const tg_option_spec options[] = {
    {"--listen", "TENSORGATE_LISTEN", "HOST:PORT", parse_listen, 0, 0, 0, false, "127.0.0.1:8080",
     "The address to listen on ([v6]:PORT for IPv6; port 0 picks a free one)."},
    {"--data", "TENSORGATE_DATA", "DIR", tg_option_text, FIELD(data_dir), 0, PATH_MAX_OF(data_dir),
     false, "./data", "The data directory: the SQLite catalog and the local blob store."},
    {"--auth-read", "TENSORGATE_AUTH_READ", NULL, tg_option_switch, FIELD(auth_read), 0, 0, false,
     NULL, "Reads need a token too."},
    {"--max-body", "TENSORGATE_MAX_BODY", "BYTES", tg_option_bytes, FIELD(max_body), 0, 0, false,
     "1T", "The largest upload (413 above)."},
    {"--max-header", "TENSORGATE_MAX_HEADER", "BYTES", tg_option_bytes, FIELD(max_header), 0, 0,
     false, "100000000", "The largest safetensors header."},
    {"--threads", "TENSORGATE_THREADS", "N", tg_option_count, FIELD(threads), 1, 256, false, "8",
     "The HTTP thread pool."},
    {"--timeout", "TENSORGATE_TIMEOUT", "SECONDS", tg_option_count, FIELD(connection_timeout), 1,
     86400, false, "60", "Idle seconds before a connection is dropped."},
    {"--header-timeout", "TENSORGATE_HEADER_TIMEOUT", "SECONDS", tg_option_count,
     FIELD(header_timeout), 1, 86400, false, "30",
     "Seconds a request's head may take, kept-alive waits included."},
    {"--max-connections", "TENSORGATE_MAX_CONNECTIONS", "N", tg_option_count,
     FIELD(connection_limit), 1, 100000, false, "1024",
     "Connections at once; lowered to what the descriptor limit can carry."},
    {"--max-per-ip", "TENSORGATE_MAX_PER_IP", "N", tg_option_count, FIELD(per_ip_limit), 0, 100000,
     false, "64", "Connections at once from one client address."},
    {"--drain-limit", "TENSORGATE_DRAIN_LIMIT", "BYTES", tg_option_bytes, FIELD(drain_limit), 0, 0,
     false, "64M", "Body bytes read after a refusal before the connection is closed."},
    {"--refuse-nonfinite", "TENSORGATE_REFUSE_NONFINITE", NULL, tg_option_switch,
     FIELD(refuse_nonfinite), 0, 0, false, NULL,
     "Uploads holding NaN or infinite values are refused."},
    {"--rate-limit", "TENSORGATE_RATE_LIMIT", "REQUESTS_PER_SECOND", tg_option_count,
     FIELD(rate_limit), 0, 1000000, false, "0", "Requests per second per client IP; 0: off."},
    {"--rate-burst", "TENSORGATE_RATE_BURST", "N", tg_option_count, FIELD(rate_burst), 0, 1000000,
     false, "0", "The rate limit's bucket size; 0: twice the rate."},
    {"--scan-auth", "TENSORGATE_SCAN_AUTH", NULL, tg_option_switch, FIELD(scan_auth), 0, 0, false,
     NULL, "POST /v1/scan needs a read token."},
    {"--header-memory", "TENSORGATE_HEADER_MEMORY", "BYTES", tg_option_bytes, FIELD(header_memory),
     0, 0, false, "1G", "All gates' header buffers together; 0: no bound."},
    {"--header-memory-per-client", "TENSORGATE_HEADER_MEMORY_PER_CLIENT", "BYTES", tg_option_bytes,
     FIELD(header_memory_per_client), 0, 0, false, "256M",
     "One client's share of the header memory; 0: no bound."},
    {"--namespace-quota", "TENSORGATE_NAMESPACE_QUOTA", "BYTES", tg_option_bytes,
     FIELD(namespace_quota), 0, 0, false, "0",
     "Stored bytes of a namespace without a quota of its own; 0: no bound."},
    {"--max-uploads", "TENSORGATE_MAX_UPLOADS", "N", tg_option_count, FIELD(max_uploads), 0,
     1000000, false, "0", "Concurrent uploads; 0: from the descriptor limit."},
    {"--max-uploads-per-namespace", "TENSORGATE_MAX_UPLOADS_PER_NAMESPACE", "N", tg_option_count,
     FIELD(max_uploads_per_namespace), 1, 1000000, false, "16",
     "Concurrent uploads of one namespace."},
    {"--max-jobs", "TENSORGATE_MAX_JOBS", "N", tg_option_count, FIELD(max_jobs), 1, 1000000, false,
     "1000", "Queued and running jobs."},
    {"--max-jobs-per-namespace", "TENSORGATE_MAX_JOBS_PER_NAMESPACE", "N", tg_option_count,
     FIELD(max_jobs_per_namespace), 1, 1000000, false, "64",
     "Queued and running jobs of one namespace."},
    {"--header-cache-bytes", "TENSORGATE_HEADER_CACHE_BYTES", "BYTES", tg_option_bytes,
     FIELD(header_cache_bytes), 0, 0, false, "256M",
     "Parsed safetensors headers kept for tensor reads; 0 keeps none."},
    {"--catalog", "TENSORGATE_CATALOG", "URL", tg_option_text, FIELD(catalog_url), 0,
     PATH_MAX_OF(catalog_url), false, NULL,
     "sqlite:PATH (default: catalog.db in --data) or postgresql://USER@HOST/DB (any libpq URI, "
     "or postgresql:KEY=VALUE ...: a catalog shared by replicas)."},
    {"--job-lease-seconds", "TENSORGATE_JOB_LEASE_SECONDS", "N", tg_option_count,
     FIELD(job_lease_seconds), 2, 3600, false, "30", "A job's claim; renewed every third of it."},
    {"--response-cache-bytes", "TENSORGATE_RESPONSE_CACHE_BYTES", "BYTES", tg_option_bytes,
     FIELD(response_cache_bytes), 0, 0, false, "64M",
     "Ready answers of published versions; 0 keeps none."},
    {"--response-cache-ttl", "TENSORGATE_RESPONSE_CACHE_TTL", "SECONDS", tg_option_count,
     FIELD(response_cache_ttl), 0, 86400, false, "5",
     "Seconds a ready answer is served: another replica's delete is seen within it; 0: until "
     "evicted; answers for latest, main or an alias: 1 s at most."},
    {"--import-allow", "TENSORGATE_IMPORT_ALLOW", "CIDR", parse_cidrs, FIELD(import_allow), 0, 0,
     true, NULL,
     "A range that imports from a URL may reach although it is loopback, private, link-local or "
     "metadata (the environment's value: comma-separated CIDRs)."},
    {"--trusted-proxy", "TENSORGATE_TRUSTED_PROXY", "CIDR", parse_cidrs, FIELD(trusted_proxies), 0,
     0, true, NULL,
     "Peers whose Forwarded and X-Forwarded-Proto/-Host/-Port are believed (the environment's "
     "value: comma-separated CIDRs; default: none)."},
    {"--public-url", "TENSORGATE_PUBLIC_URL", "URL", parse_url, FIELD(public_url), 0, 0, false,
     NULL,
     "scheme://host[:port][/prefix] of the absolute links the server builds (paging Link "
     "headers); default: the request's Host."},
    {"--signing-key", "TENSORGATE_SIGNING_KEY", "PEM", tg_option_text, FIELD(signing_key), 0,
     PATH_MAX_OF(signing_key), false, NULL,
     "An EC private key (P-256, P-384, P-521; PEM, unencrypted): every version published gets "
     "a model.server.sig (OpenSSF model signing v1) made with it, from the catalog's digests; "
     "its public key is served at /.well-known/tensorgate/signing-keys."},
    {"--signing-certificate-chain", "TENSORGATE_SIGNING_CERTIFICATE_CHAIN", "PEM", tg_option_text,
     FIELD(signing_chain), 0, PATH_MAX_OF(signing_chain), false, NULL,
     "With --signing-key: the key's certificate, then the certificates up to a root (PEM): "
     "signatures carry the chain (certificate mode) instead of the key's hint."},
    {"--job-workers", "TENSORGATE_JOB_WORKERS", "N", tg_option_count, FIELD(job_workers), 1, 64,
     false, "2",
     "Jobs run at once; one namespace runs at most N-1 of them when N > 1, so another "
     "namespace's job always finds a worker; a free worker goes to the namespace running the "
     "fewest."},
    {"--import-timeout", "TENSORGATE_IMPORT_TIMEOUT", "SECONDS", tg_option_count,
     FIELD(import_timeout), 0, 604800, false, "3600",
     "Seconds an import may take; 0: no deadline. A slower import fails with import_timeout."},
    {"--import-min-rate", "TENSORGATE_IMPORT_MIN_RATE", "BYTES", tg_option_bytes,
     FIELD(import_min_rate), 0, 0, false, "64K",
     "Bytes per second a source must average over each --import-rate-window; 0: no minimum. A "
     "slower import fails with import_too_slow."},
    {"--webhook-workers", "TENSORGATE_WEBHOOK_WORKERS", "N", tg_option_count,
     FIELD(webhook_workers), 0, 16, false, "1",
     "Threads sending webhook deliveries; 0: this replica sends none (another does)."},
    {"--webhook-attempts", "TENSORGATE_WEBHOOK_ATTEMPTS", "N", tg_option_count,
     FIELD(webhook_attempts), 1, 100, false, "8",
     "Sends of one webhook delivery before it is marked failed."},
    {"--webhook-max-failures", "TENSORGATE_WEBHOOK_MAX_FAILURES", "N", tg_option_count,
     FIELD(webhook_max_failures), 0, 100000, false, "5",
     "Failed deliveries in a row that disable a webhook subscription; 0: never."},
    {"--webhook-backoff-ms", "TENSORGATE_WEBHOOK_BACKOFF_MS", "MS", tg_option_count,
     FIELD(webhook_backoff_ms), 1, 86400000, false, "1000",
     "The delay before a webhook's first retry; it doubles with each failed attempt."},
    {"--webhook-backoff-max-ms", "TENSORGATE_WEBHOOK_BACKOFF_MAX_MS", "MS", tg_option_count,
     FIELD(webhook_backoff_max_ms), 1, 86400000, false, "60000",
     "The longest delay between a webhook's attempts (a Retry-After may ask for more, up to "
     "an hour)."},
    {"--webhook-timeout", "TENSORGATE_WEBHOOK_TIMEOUT", "SECONDS", tg_option_count,
     FIELD(webhook_timeout), 1, 300, false, "10",
     "Seconds one webhook request may take, connection included."},
    {"--webhook-poll-ms", "TENSORGATE_WEBHOOK_POLL_MS", "MS", tg_option_count,
     FIELD(webhook_poll_ms), 10, 60000, false, "500",
     "How often an idle webhook worker looks for due deliveries."},
    {"--import-rate-window", "TENSORGATE_IMPORT_RATE_WINDOW", "SECONDS", tg_option_count,
     FIELD(import_rate_window), 1, 3600, false, "30", "The window of --import-min-rate."},
};

tg_option_table tg_config_option_table(tg_config *config)
{
    return (tg_option_table){
        .title = "server", .specs = options, .count = TG_OPTION_COUNT(options), .target = config};
}

const char *tg_config_usage(void)
{
    static char usage[16384];
    tg_config scratch;
    tg_option_table table = tg_config_option_table(&scratch);
    if (usage[0] == '\0')
        tg_options_usage("tensorgate serve", &table, 1, usage, sizeof usage);
    return usage;
}

int tg_config_load(tg_config *config, int argc, char **argv, char *err, size_t err_len)
{
    tg_option_table table = tg_config_option_table(config);
    return tg_options_load(&table, 1, &argc, argv, false, err, err_len);
}
