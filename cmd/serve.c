/* tensorgate serve: the registry server. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "blob_options.h"
#include "blobstore.h"
#include "catalog.h"
#include "commands.h"
#include "config.h"
#include "convert_job.h"
#include "data_dir.h"
#include "http.h"
#include "log.h"
#include "preload_options.h"
#include "preload_service.h"
#include "reclaim.h"
#include "resources.h"
#include "response_cache.h"
#include "route_table.h"
#include "serve_options.h"
#include "version_sign.h"
#include "webhook_worker.h"

/* tg_jobs_context.version_published: a derived version is "latest" now. */
static void moving_revisions_changed(void *responses)
{
    tg_response_cache_invalidate_moving(responses);
}

/* What serve opened before its threads: the response cache (after the job worker
 * stopped, which may still tell it of a derived version) and the data. */
static void close_server(tg_server *server)
{
    tg_response_cache_destroy(server->responses);
    server->responses = NULL;
    tg_version_signer_free(server->signer);
    server->signer = NULL;
    tg_data_close(server->blobs, server->catalog);
}

int tg_cmd_serve(int argc, char **argv)
{
    static tg_server server;
    tg_config_defaults(&server.config);
    char err[512];
    /* The server's, the preload service's and the blob store's options, read by the one parser. */
    int loaded = tg_serve_options_load(&server.config, argc, argv, err, sizeof err);
    if (loaded == 1) {
        fputs(tg_serve_usage(), stdout);
        return 0;
    }
    if (loaded != 0) {
        fprintf(stderr, "tensorgate serve: %s\n%s", err, tg_serve_usage());
        return 2;
    }
    if (getenv("TENSORGATE_DEBUG") != NULL)
        tg_log_set_level(TG_LOG_DEBUG);
    /* the signing key is read before anything opens: a bad one stops the start */
    static tg_version_signer signer;
    if (server.config.signing_chain[0] != '\0' && server.config.signing_key[0] == '\0') {
        fprintf(stderr, "tensorgate serve: --signing-certificate-chain needs --signing-key\n");
        return 2;
    }
    if (server.config.signing_key[0] != '\0') {
        if (tg_version_signer_load(&signer, server.config.signing_key, server.config.signing_chain,
                                   err, sizeof err) != 0) {
            fprintf(stderr, "tensorgate serve: %s\n", err);
            return 2;
        }
        server.signer = &signer;
        tg_log(TG_LOG_INFO, "signing published versions with key %s (%s mode)", signer.hint,
               signer.chain.count ? "certificate" : "key");
    }
    /* Descriptors: the soft limit goes up to the hard one, then is shared out so no
     * one use (preloads, connections) can take what the others need (resources.h). */
    tg_fd_plan plan;
    tg_fd_plan_for(tg_fd_limit_raise(), &plan);
    if (server.config.connection_limit > plan.http_connections) {
        tg_log(TG_LOG_WARN, "descriptors: --max-connections %u lowered to %u for a limit of %llu",
               server.config.connection_limit, plan.http_connections,
               (unsigned long long)plan.fd_limit);
        server.config.connection_limit = plan.http_connections;
    }
    if (server.config.max_uploads == 0)
        server.config.max_uploads =
            plan.http_connections / 2 < 256 ? plan.http_connections / 2 : 256;
    tg_log(TG_LOG_INFO,
           "descriptors: %llu; at most %u connections, %u concurrent uploads, %u preloads",
           (unsigned long long)plan.fd_limit, server.config.connection_limit,
           server.config.max_uploads, plan.preloads);
    if (tg_resources_start() != 0) {
        fprintf(stderr, "tensorgate serve: out of memory\n");
        return 1;
    }
    tg_blob_options_set_max_blob(server.config.max_body);
    if (tg_data_open(server.config.data_dir, &server.blobs, &server.catalog, TG_DATA_SERVE, "serve",
                     server.config.catalog_url) != 0)
        return 1;
    pthread_mutex_init(&server.publish_lock, NULL);

    /* The signals are taken by sigwait in this thread; MHD's threads inherit the mask. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* The response cache exists before the worker, which tells it of derived versions,
     * and outlives it (tg_http_start uses it as it is; freed after the worker stopped). */
    if (server.config.response_cache_bytes > 0)
        server.responses = tg_response_cache_create((size_t)server.config.response_cache_bytes,
                                                    server.config.response_cache_ttl);
    /* The job pool starts first (jobs left running are queued again) so a POST can wake it. */
    tg_jobs_context jobs = {.catalog = server.catalog,
                            .store = server.blobs,
                            .max_header = server.config.max_header,
                            .lease_seconds = server.config.job_lease_seconds,
                            .workers = server.config.job_workers,
                            .import_timeout = server.config.import_timeout,
                            .import_min_rate = server.config.import_min_rate,
                            .import_rate_window = server.config.import_rate_window,
                            .max_body = server.config.max_body,
                            .namespace_quota = server.config.namespace_quota,
                            .refuse_nonfinite = server.config.refuse_nonfinite,
                            .import_policy = server.config.import_allow,
                            .publish_lock = &server.publish_lock,
                            .version_published = moving_revisions_changed,
                            .version_published_arg = server.responses,
                            .signer = server.signer};
    /* imports (server/jobs/import_job.h): libcurl once, before any thread uses it; the
     * ranges the operator opened to them are logged */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "tensorgate serve: libcurl could not start\n");
        close_server(&server);
        return 1;
    }
    for (size_t i = 0; i < server.config.import_allow.allow_count; i++) {
        char text[INET6_ADDRSTRLEN];
        const tg_cidr *cidr = &server.config.import_allow.allow[i];
        bool v4 = tg_cidr_is_v4(cidr);
        inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? cidr->addr + 12 : cidr->addr, text, sizeof text);
        tg_log(TG_LOG_WARN, "--import-allow %s/%u: imports from a URL may reach this range", text,
               v4 ? cidr->prefix - 96 : cidr->prefix);
    }
    if (tg_jobs_start(&jobs, err, sizeof err) != 0) {
        fprintf(stderr, "tensorgate serve: %s\n", err);
        close_server(&server);
        return 1;
    }
    tg_webhook_config webhooks = {.catalog = server.catalog,
                                  .policy = server.config.import_allow,
                                  .workers = server.config.webhook_workers,
                                  .max_attempts = server.config.webhook_attempts,
                                  .max_failures = server.config.webhook_max_failures,
                                  .backoff_ms = server.config.webhook_backoff_ms,
                                  .backoff_max_ms = server.config.webhook_backoff_max_ms,
                                  .timeout = server.config.webhook_timeout,
                                  .poll_ms = server.config.webhook_poll_ms};
    if (tg_webhooks_start(&webhooks, err, sizeof err) != 0) {
        fprintf(stderr, "tensorgate serve: %s\n", err);
        tg_jobs_stop();
        close_server(&server);
        return 1;
    }
    tg_preload_service_config preloads = {.options = tg_preload_options_get(),
                                          .catalog = server.catalog,
                                          .data_dir = server.config.data_dir,
                                          .default_max_preloads = plan.preloads,
                                          .hand_off_connections = plan.preload_connections,
                                          .token_lookup = tg_token_lookup};
    if (tg_preload_service_start(&preloads, &server.preloads, err, sizeof err) != 0) {
        fprintf(stderr, "tensorgate serve: %s\n", err);
        tg_webhooks_stop();
        tg_jobs_stop();
        close_server(&server);
        return 1;
    }
    size_t route_count = 0;
    const tg_route *routes = tg_routes(&route_count);
    if (tg_http_start(&server, routes, route_count, err, sizeof err) != 0) {
        fprintf(stderr, "tensorgate serve: %s\n", err);
        tg_preload_service_stop(server.preloads);
        tg_webhooks_stop();
        tg_jobs_stop();
        close_server(&server);
        return 1;
    }
    bool v6 = strchr(server.config.listen_host, ':') != NULL;
    fprintf(stderr, "tensorgate: listening on http://%s%s%s:%u\n", v6 ? "[" : "",
            server.config.listen_host, v6 ? "]" : "", server.port);
    fflush(stderr);
    tg_log(TG_LOG_INFO, "data %s, %u threads, catalog schema %d", server.config.data_dir,
           server.config.threads, tg_catalog_schema_version(server.catalog));

    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    tg_log(TG_LOG_INFO, "signal %d: stopping", signal_number);
    tg_http_stop(&server);
    tg_preload_service_stop(server.preloads);
    tg_webhooks_stop();
    tg_jobs_stop();
    pthread_mutex_destroy(&server.publish_lock);
    close_server(&server);
    tg_resources_stop();
    tg_log(TG_LOG_INFO, "stopped");
    return 0;
}
