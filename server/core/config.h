/* Server configuration: defaults, then TENSORGATE_* environment variables, then flags. */
#ifndef TG_CONFIG_H
#define TG_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr_policy.h"
#include "options.h"
#include "public_url.h"

typedef struct tg_config {
    char listen_host[256];    /* TENSORGATE_LISTEN / --listen HOST:PORT */
    uint16_t listen_port;     /* 0 picks a free port */
    char data_dir[4096];      /* TENSORGATE_DATA / --data */
    bool auth_read;           /* TENSORGATE_AUTH_READ / --auth-read: reads need a token */
    uint64_t max_body;        /* TENSORGATE_MAX_BODY / --max-body: largest upload (413 above) */
    uint64_t namespace_quota; /* TENSORGATE_NAMESPACE_QUOTA / --namespace-quota: the storage
                                 quota of a namespace an admin set none for; 0: none */
    uint64_t max_header; /* TENSORGATE_MAX_HEADER / --max-header: largest safetensors header N */
    unsigned threads;    /* TENSORGATE_THREADS / --threads: MHD thread pool size */
    unsigned connection_timeout; /* TENSORGATE_TIMEOUT / --timeout: idle seconds before a connection
                                    is dropped */
    unsigned header_timeout;   /* TENSORGATE_HEADER_TIMEOUT / --header-timeout: seconds a request's
                                  head may take */
    unsigned connection_limit; /* TENSORGATE_MAX_CONNECTIONS / --max-connections */
    unsigned per_ip_limit;     /* TENSORGATE_MAX_PER_IP / --max-per-ip */
    uint64_t drain_limit; /* TENSORGATE_DRAIN_LIMIT / --drain-limit: body bytes read after a refusal
                             before closing */
    bool refuse_nonfinite; /* TENSORGATE_REFUSE_NONFINITE / --refuse-nonfinite */
    unsigned rate_limit; /* TENSORGATE_RATE_LIMIT / --rate-limit: requests per second per client IP,
                            0 = off */
    unsigned rate_burst; /* TENSORGATE_RATE_BURST / --rate-burst: bucket size, 0 = twice the rate */
    bool scan_auth;      /* TENSORGATE_SCAN_AUTH / --scan-auth: POST /v1/scan needs a read token */
    uint64_t
        header_memory; /* TENSORGATE_HEADER_MEMORY / --header-memory: all gates' buffers together */
    uint64_t header_memory_per_client; /* TENSORGATE_HEADER_MEMORY_PER_CLIENT /
                                          --header-memory-per-client */
    unsigned max_uploads; /* TENSORGATE_MAX_UPLOADS / --max-uploads: concurrent uploads, 0 = from
                             the fd limit */
    unsigned max_uploads_per_namespace; /* TENSORGATE_MAX_UPLOADS_PER_NAMESPACE /
                                           --max-uploads-per-namespace */
    unsigned max_jobs; /* TENSORGATE_MAX_JOBS / --max-jobs: queued + running jobs */
    unsigned
        max_jobs_per_namespace;  /* TENSORGATE_MAX_JOBS_PER_NAMESPACE / --max-jobs-per-namespace */
    uint64_t header_cache_bytes; /* TENSORGATE_HEADER_CACHE_BYTES / --header-cache-bytes: parsed
                                    headers kept */
    char catalog_url[4096];      /* TENSORGATE_CATALOG / --catalog: "" is sqlite:DATA/catalog.db;
                                    postgresql://... is a catalog shared by replicas */
    unsigned job_lease_seconds;  /* TENSORGATE_JOB_LEASE_SECONDS / --job-lease-seconds */
    unsigned job_workers;        /* TENSORGATE_JOB_WORKERS / --job-workers: the job pool */
    unsigned import_timeout; /* TENSORGATE_IMPORT_TIMEOUT / --import-timeout: seconds, 0 = none */
    uint64_t
        import_min_rate; /* TENSORGATE_IMPORT_MIN_RATE / --import-min-rate: bytes/s, 0 = none */
    unsigned import_rate_window; /* TENSORGATE_IMPORT_RATE_WINDOW / --import-rate-window: seconds */
    uint64_t response_cache_bytes; /* TENSORGATE_RESPONSE_CACHE_BYTES / --response-cache-bytes:
                                      ready responses of published versions, 0 = off */
    unsigned response_cache_ttl;   /* TENSORGATE_RESPONSE_CACHE_TTL / --response-cache-ttl: seconds
                                      a ready response is served (other replicas' deletes) */
    /* webhook delivery (server/jobs/webhook_worker.h): --webhook-workers (0: none),
     * --webhook-attempts, --webhook-max-failures, --webhook-backoff-ms,
     * --webhook-backoff-max-ms, --webhook-timeout (seconds), --webhook-poll-ms */
    unsigned webhook_workers;
    unsigned webhook_attempts;
    unsigned webhook_max_failures;
    unsigned webhook_backoff_ms;
    unsigned webhook_backoff_max_ms;
    unsigned webhook_timeout;
    unsigned webhook_poll_ms;
    /* TENSORGATE_IMPORT_ALLOW (CIDRs, comma-separated) / --import-allow CIDR (repeatable):
     * ranges imports may reach although the SSRF policy forbids them (addr_policy.h) */
    tg_addr_policy import_allow;
    /* TENSORGATE_TRUSTED_PROXY / --trusted-proxy CIDR (repeatable): peers whose Forwarded
     * and X-Forwarded-* headers are believed; TENSORGATE_PUBLIC_URL / --public-url: the
     * scheme://host[:port][/prefix] of absolute links (public_url.h) */
    tg_addr_policy trusted_proxies;
    char public_url[TG_PUBLIC_URL_MAX];
    /* TENSORGATE_SIGNING_KEY / --signing-key PEM: every published version gets a
     * model.server.sig signed with it (docs/SIGNING.md); "" signs nothing.
     * TENSORGATE_SIGNING_CERTIFICATE_CHAIN / --signing-certificate-chain PEM: the
     * key's certificate first, then the chain (certificate mode); "" is key mode. */
    char signing_key[4096];
    char signing_chain[4096];
} tg_config;

void tg_config_defaults(tg_config *config);

/* Splits "HOST:PORT" ("[v6]:PORT" too). Returns 0, or -1 if malformed. */
int tg_parse_listen(const char *text, char *host, size_t host_len, uint16_t *port);

/* Parses a byte count: digits with an optional K/M/G/T suffix (powers of 1024);
 * tg_options_parse_bytes (options.h). */
int tg_parse_bytes(const char *text, uint64_t *out);

/* The server's rows of the option table (options.h), filling config; the
 * defaults are tg_config_defaults' (the table has no reset). */
tg_option_table tg_config_option_table(tg_config *config);

/* Applies the environment then argv (argv[0] is the command name) over the
 * server's rows alone. On error writes one sentence to err and returns -1;
 * returns 1 when --help was asked. */
int tg_config_load(tg_config *config, int argc, char **argv, char *err, size_t err_len);

/* --help of the server's rows alone (generated from the table). */
const char *tg_config_usage(void);

#endif
