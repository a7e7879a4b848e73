/* tensorgate serve | token | gc | fsck: the registry server and its maintenance commands. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "blob_options.h"
#include "blobstore.h"
#include "catalog.h"
#include "checks.h"
#include "commands.h"
#include "config.h"
#include "convert_job.h"
#include "http.h"
#include "log.h"
#include "parsed_header_cache.h"
#include "reclaim.h"
#include "resources.h"
#include "response_cache.h"
#include "route_table.h"
#include "routes_preloads.h"
#include "serve_options.h"
#include "sha256.h"

/* A maintenance command's --data must name a directory that serve made: one
 * holding the catalog file (or any directory, when TENSORGATE_CATALOG names a
 * catalog elsewhere). A mistyped path is refused before anything is created. */
static bool is_data_dir(const char *data_dir)
{
    char path[4200];
    struct stat st;
    const char *catalog = getenv("TENSORGATE_CATALOG");
    if (catalog != NULL && strncmp(catalog, "postgres", 8) == 0)
        return stat(data_dir, &st) == 0 && S_ISDIR(st.st_mode);
    if (snprintf(path, sizeof path, "%s/catalog.db", data_dir) >= (int)sizeof path)
        return false;
    return stat(data_dir, &st) == 0 && S_ISDIR(st.st_mode) && stat(path, &st) == 0 &&
           S_ISREG(st.st_mode);
}

/* How open_data treats the data directory: a maintenance command's (one serve
 * made: refused otherwise), token create's (also a missing or empty directory,
 * made as serve makes it: the first admin token exists before the first start),
 * or serve's (made if missing, then claimed). */
typedef enum { DATA_EXISTING, DATA_CREATE, DATA_SERVE } data_mode;

/* A directory token create may make a data directory of: a missing one (its
 * parent must exist, as for serve) or an empty one (a fresh container volume). */
static bool is_fresh_dir(const char *data_dir)
{
    DIR *dir = opendir(data_dir);
    if (dir == NULL)
        return errno == ENOENT;
    bool empty = true;
    const struct dirent *entry;
    while (empty && (entry = readdir(dir)) != NULL)
        empty = strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0;
    closedir(dir);
    return empty;
}

/* Opens the data directory: the blob store (layout created), the server's claim
 * on it (DATA_SERVE only; the maintenance commands run beside a server), then
 * the catalog (migrations applied). Both are opened by URL with the data
 * directory's own scheme ("file:", "sqlite:"): a directory whose name looks like a
 * URL is still a path. DATA_EXISTING refuses a directory that is_data_dir does not
 * accept, DATA_CREATE one that is neither that nor fresh (is_fresh_dir):
 * TG_EXIT_NOT_DATA_DIR, nothing created. On failure nothing stays open; the
 * result is -1 or TG_EXIT_NOT_DATA_DIR. */
static int open_data(const char *data_dir, tg_blobstore **blobs, tg_catalog **catalog,
                     data_mode mode, const char *command, const char *catalog_url)
{
    char err[512];
    char url[4200];
    *blobs = NULL;
    *catalog = NULL;
    bool known = mode == DATA_SERVE || is_data_dir(data_dir);
    if (!known && (mode == DATA_EXISTING || !is_fresh_dir(data_dir))) {
        fprintf(stderr,
                "tensorgate %s: %s is not a tensorgate data directory (no catalog.db)%s; give "
                "--data the directory `tensorgate serve --data` uses\n",
                command, data_dir, mode == DATA_CREATE ? " and not empty" : "");
        return TG_EXIT_NOT_DATA_DIR;
    }
    /* with a remote blob store the data directory still holds the SQLite catalog */
    if (!known && mode == DATA_CREATE)
        fprintf(stderr, "tensorgate %s: making a new data directory in %s\n", command, data_dir);
    if (mode != DATA_EXISTING && mkdir(data_dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "tensorgate %s: cannot make %s: %s\n", command, data_dir, strerror(errno));
        return -1;
    }
    tg_blob_options_url(data_dir, url, sizeof url); /* --blob-store, else file:DATA */
    if (tg_blobstore_open_options(url, tg_blob_options_get(), blobs, err, sizeof err) != 0 ||
        (mode == DATA_SERVE && tg_blobstore_claim(*blobs, err, sizeof err) != 0)) {
        fprintf(stderr, "tensorgate %s: %s\n", command, err);
        tg_blobstore_close(*blobs);
        *blobs = NULL;
        return -1;
    }
    /* --catalog / TENSORGATE_CATALOG (serve), TENSORGATE_CATALOG (the others), or
     * the data directory's SQLite file */
    if (catalog_url == NULL)
        catalog_url = getenv("TENSORGATE_CATALOG");
    if (catalog_url != NULL && catalog_url[0] != '\0')
        snprintf(url, sizeof url, "%s", catalog_url);
    else
        snprintf(url, sizeof url, "sqlite:%s/catalog.db", data_dir);
    if (tg_catalog_open(url, catalog, err, sizeof err) != TG_CAT_OK) {
        fprintf(stderr, "tensorgate %s: %s\n", command, err);
        tg_blobstore_close(*blobs);
        *blobs = NULL;
        return -1;
    }
    return 0;
}

/* tg_jobs_context.version_published: a derived version is "latest" now. */
static void moving_revisions_changed(void *responses)
{
    tg_response_cache_invalidate_moving(responses);
}

/* Closes what open_data opened (the claim goes with the blob store). */
static void close_data(tg_blobstore *blobs, tg_catalog *catalog)
{
    tg_catalog_close(catalog);
    tg_blobstore_close(blobs);
}

/* What serve opened before its threads: the response cache (after the job worker
 * stopped, which may still tell it of a derived version) and the data. */
static void close_server(tg_server *server)
{
    tg_response_cache_destroy(server->responses);
    server->responses = NULL;
    close_data(server->blobs, server->catalog);
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
    if (open_data(server.config.data_dir, &server.blobs, &server.catalog, DATA_SERVE, "serve",
                  server.config.catalog_url) != 0)
        return 1;
    pthread_mutex_init(&server.publish_lock, NULL);
    tg_parsed_header_cache_configure((size_t)server.config.header_cache_bytes,
                                     TG_PARSED_HEADER_CACHE_ENTRIES);

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
                            .refuse_nonfinite = server.config.refuse_nonfinite,
                            .import_policy = server.config.import_allow,
                            .publish_lock = &server.publish_lock,
                            .version_published = moving_revisions_changed,
                            .version_published_arg = server.responses};
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
    if (tg_preloads_start(&server, err, sizeof err) != 0) {
        fprintf(stderr, "tensorgate serve: %s\n", err);
        tg_jobs_stop();
        close_server(&server);
        return 1;
    }
    size_t route_count = 0;
    const tg_route *routes = tg_routes(&route_count);
    if (tg_http_start(&server, routes, route_count, err, sizeof err) != 0) {
        fprintf(stderr, "tensorgate serve: %s\n", err);
        tg_preloads_stop();
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
    tg_preloads_stop();
    tg_jobs_stop();
    pthread_mutex_destroy(&server.publish_lock);
    close_server(&server);
    tg_resources_stop();
    tg_log(TG_LOG_INFO, "stopped");
    return 0;
}

/* --data DIR (or TENSORGATE_DATA, or ./data) from a maintenance command's arguments. */
static const char *data_dir_default(void)
{
    const char *env = getenv("TENSORGATE_DATA");
    return (env && env[0]) ? env : "./data";
}

static int token_usage(FILE *out)
{
    fprintf(
        out,
        "usage: tensorgate token create [--data DIR] --scope read|write|admin [--namespace ORG]\n"
        "       tensorgate token list [--data DIR]\n"
        "       tensorgate token revoke [--data DIR] ID\n"
        "create prints the new token as the last line of stdout; it is shown only once.\n"
        "create makes DIR as serve does (migrated catalog, blob store) when it is missing\n"
        "or empty, so the first admin token can exist before the first start.\n"
        "list prints one line per token: id, scope, namespace (- if none), created\n"
        "(never the token). revoke deletes the token: the server refuses it (401) at once.\n"
        "Exit status: 0 done, 1 the catalog failed or no such token, 2 a usage error,\n"
        "3 DIR is not a tensorgate data directory (nothing is created; for create: and\n"
        "not empty).\n");
    return out == stdout ? 0 : 2;
}

static void print_token(void *ctx, const tg_token_info *token)
{
    (void)ctx;
    static const char *const scope_names[] = {"none", "read", "write", "admin"};
    unsigned scope = (unsigned)token->scope;
    printf("%lld\t%s\t%s\t%s\n", (long long)token->id, scope < 4 ? scope_names[scope] : "none",
           token->namespace_name[0] ? token->namespace_name : "-", token->created_at);
}

/* token list [--data DIR] | token revoke [--data DIR] ID */
static int token_list_or_revoke(int argc, char **argv)
{
    bool revoke = strcmp(argv[1], "revoke") == 0;
    const char *data_dir = data_dir_default(), *id_text = NULL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            return token_usage(stdout);
        } else if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) {
            data_dir = argv[++i];
        } else if (revoke && id_text == NULL && argv[i][0] != '-') {
            id_text = argv[i];
        } else {
            fprintf(stderr, "tensorgate token: unexpected argument '%s'\n", argv[i]);
            return token_usage(stderr);
        }
    }
    uint64_t id = 0;
    if (revoke && (id_text == NULL || !tg_parse_u64(id_text, &id) || id == 0 || id > INT64_MAX)) {
        fprintf(stderr,
                "tensorgate token revoke: give the token's id (see `tensorgate token list`)\n");
        return 2;
    }
    tg_blobstore *blobs = NULL;
    tg_catalog *catalog = NULL;
    int opened = open_data(data_dir, &blobs, &catalog, DATA_EXISTING, "token", NULL);
    if (opened != 0)
        return opened == TG_EXIT_NOT_DATA_DIR ? opened : 1;
    int rc = 0;
    if (!revoke) {
        printf("id\tscope\tnamespace\tcreated\n");
        if (tg_catalog_token_each(catalog, print_token, NULL) != TG_CAT_OK) {
            fprintf(stderr, "tensorgate token list: the catalog failed\n");
            rc = 1;
        }
    } else {
        tg_cat_status status = tg_catalog_token_revoke(catalog, (int64_t)id);
        if (status == TG_CAT_OK) {
            fprintf(stderr, "tensorgate: revoked token %llu\n", (unsigned long long)id);
        } else if (status == TG_CAT_NOT_FOUND) {
            fprintf(stderr, "tensorgate token revoke: no token has id %llu\n",
                    (unsigned long long)id);
            rc = 1;
        } else {
            fprintf(stderr, "tensorgate token revoke: the catalog failed\n");
            rc = 1;
        }
    }
    close_data(blobs, catalog);
    return rc;
}

int tg_cmd_token(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return token_usage(argc < 2 ? stderr : stdout);
    if (strcmp(argv[1], "list") == 0 || strcmp(argv[1], "revoke") == 0)
        return token_list_or_revoke(argc, argv);
    if (strcmp(argv[1], "create") != 0) {
        fprintf(stderr, "tensorgate token: unknown action '%s'\n", argv[1]);
        return token_usage(stderr);
    }
    const char *data_dir = data_dir_default(), *scope_name = NULL, *namespace_name = NULL;
    for (int i = 2; i < argc; i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return token_usage(stdout);
        if (strcmp(argv[i], "--data") == 0 && value) {
            data_dir = value;
            i++;
        } else if (strcmp(argv[i], "--scope") == 0 && value) {
            scope_name = value;
            i++;
        } else if (strcmp(argv[i], "--namespace") == 0 && value) {
            namespace_name = value;
            i++;
        } else {
            fprintf(stderr, "tensorgate token: unexpected argument '%s'\n", argv[i]);
            return token_usage(stderr);
        }
    }
    tg_scope scope = scope_name ? tg_scope_from_name(scope_name) : TG_SCOPE_NONE;
    if (scope == TG_SCOPE_NONE) {
        fprintf(stderr, "tensorgate token: --scope must be read, write or admin\n");
        return 2;
    }
    if (namespace_name != NULL && !tg_valid_name_part(namespace_name)) {
        fprintf(stderr, "tensorgate token: --namespace must be an org name\n");
        return 2;
    }
    tg_blobstore *blobs = NULL;
    tg_catalog *catalog = NULL;
    int opened = open_data(data_dir, &blobs, &catalog, DATA_CREATE, "token", NULL);
    if (opened != 0)
        return opened == TG_EXIT_NOT_DATA_DIR ? opened : 1;
    char token[TG_TOKEN_LEN + 1], hash[65];
    int rc = 1;
    if (tg_token_generate(token, hash) != 0) {
        fprintf(stderr, "tensorgate token: the random number generator failed\n");
    } else if (tg_catalog_token_add(catalog, hash, scope, namespace_name) != TG_CAT_OK) {
        fprintf(stderr, "tensorgate token: cannot store the token\n");
    } else {
        fprintf(stderr, "tensorgate: created %s %s token%s%s; it is shown once:\n",
                scope == TG_SCOPE_ADMIN ? "an" : "a", scope_name,
                namespace_name ? " for namespace " : "", namespace_name ? namespace_name : "");
        printf("%s\n", token);
        rc = 0;
    }
    close_data(blobs, catalog);
    return rc;
}

static void data_only_usage(FILE *out, const char *command, bool dry_run)
{
    fprintf(out, "usage: tensorgate %s [--data DIR]%s\n", command, dry_run ? " [--dry-run]" : "");
    if (dry_run)
        fprintf(out, "Deletes the blobs no catalog row references (--dry-run: lists them).\n"
                     "Exit status: 0 done, 1 a blob could not be removed, 2 a usage error,\n");
    else
        fprintf(out, "Re-hashes every blob against the catalog.\n"
                     "Exit status: 0 all whole, 1 a blob is bad, 2 the catalog or SHA-256 failed\n"
                     "or a usage error,\n");
    fprintf(out, "3 DIR is not a tensorgate data directory (nothing is created).\n"
                 "DIR defaults to $TENSORGATE_DATA, else ./data.\n");
    fputs(tg_blob_options_usage(), out);
}

/* NULL with *exit_status set: the command ends (--help: 0; a usage error: 2). */
static const char *parse_data_only(int argc, char **argv, const char *command, bool *dry_run,
                                   int *exit_status)
{
    const char *data_dir = data_dir_default();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            data_only_usage(stdout, command, dry_run != NULL);
            *exit_status = 0;
            return NULL;
        }
        if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) {
            data_dir = argv[++i];
        } else if (dry_run && strcmp(argv[i], "--dry-run") == 0) {
            *dry_run = true;
        } else {
            data_only_usage(stderr, command, dry_run != NULL);
            *exit_status = 2;
            return NULL;
        }
    }
    return data_dir;
}

typedef struct gc_state {
    tg_blobstore *blobs;
    tg_catalog *catalog;
    bool dry_run;
    unsigned long removed, kept, errors;
    unsigned long long bytes;
} gc_state;

/* One blob: decided and removed under the exclusive blobs lock (reclaim.h), so gc
 * is safe beside a running server. */
static int gc_visit(void *ctx, const char *hex)
{
    gc_state *gc = ctx;
    uint64_t size = 0;
    if (tg_blob_stat(gc->blobs, hex, &size) != 0)
        size = 0;
    switch (tg_blob_reclaim(gc->blobs, gc->catalog, hex, gc->dry_run)) {
    case TG_RECLAIM_KEPT:
        gc->kept++;
        break;
    case TG_RECLAIM_REMOVED:
        printf("%s %s\n", gc->dry_run ? "would remove" : "removed", hex);
        gc->removed++;
        gc->bytes += size;
        break;
    case TG_RECLAIM_ERROR:
        fprintf(stderr, "tensorgate gc: %s: %s\n", hex, strerror(errno));
        gc->errors++;
        break;
    }
    return 0;
}

int tg_cmd_gc(int argc, char **argv)
{
    bool dry_run = false;
    int exit_status = 0;
    char err[512];
    if (tg_blob_options_take(&argc, argv, err, sizeof err) != 0) {
        fprintf(stderr, "tensorgate gc: %s\n%s", err, tg_blob_options_usage());
        return 2;
    }
    const char *data_dir = parse_data_only(argc, argv, "gc", &dry_run, &exit_status);
    if (data_dir == NULL)
        return exit_status;
    gc_state gc = {.dry_run = dry_run};
    tg_blobstore *blobs = NULL;
    tg_catalog *catalog = NULL;
    int opened = open_data(data_dir, &blobs, &catalog, DATA_EXISTING, "gc", NULL);
    if (opened != 0)
        return opened == TG_EXIT_NOT_DATA_DIR ? opened : 1;
    gc.blobs = blobs;
    gc.catalog = catalog;
    if (tg_blob_each(blobs, gc_visit, &gc) != 0) {
        fprintf(stderr, "tensorgate gc: the blob store could not be listed: %s\n", strerror(errno));
        gc.errors++;
    }
    /* uploads a stopped replica left in an S3 store (past --gc-grace) */
    long swept = dry_run ? 0 : tg_blobstore_sweep(blobs);
    if (swept < 0)
        gc.errors++;
    else if (swept > 0)
        fprintf(stderr, "tensorgate gc: %ld stale upload(s) removed\n", swept);
    close_data(blobs, catalog);
    fprintf(stderr, "tensorgate gc: %lu blob(s) %s (%llu bytes), %lu kept, %lu error(s)\n",
            gc.removed, dry_run ? "unreferenced" : "removed", gc.bytes, gc.kept, gc.errors);
    return gc.errors ? 1 : 0;
}

typedef struct fsck_state {
    tg_blobstore *blobs;
    tg_catalog *catalog;
    unsigned long checked, bad, healed;
    bool failed; /* a blob could not be hashed in this process: exit 2 */
} fsck_state;

/* One blob's verdict; a damaged one is recorded (blobstore.h), a whole one's record goes. */
static void fsck_bad(fsck_state *fsck, const char *sha256, bool recorded, const char *why)
{
    fsck->bad++;
    if (!recorded)
        tg_blob_mark_damaged(fsck->blobs, sha256, "fsck: %s", why);
}

static int fsck_visit(void *ctx, const char *sha256, uint64_t size)
{
    fsck_state *fsck = ctx;
    fsck->checked++;
    char record[320];
    bool recorded = tg_blob_damage_record(fsck->blobs, sha256, record, sizeof record);
    if (recorded)
        printf("recorded-damaged %s (%s)\n", sha256, record);
    tg_blob_check check;
    tg_blob_reader *blob = tg_blob_open(fsck->blobs, sha256, TG_BLOB_SIZE_UNCHECKED, &check);
    if (blob == NULL) {
        printf("missing %s\n", sha256);
        fsck_bad(fsck, sha256, recorded, "missing");
        return 0;
    }
    tg_sha256 sha;
    (void)tg_sha256_init(&sha, "fsck");
    static unsigned char buf[1 << 20];
    uint64_t total = 0;
    ssize_t n;
    while ((n = tg_blob_read(blob, buf, sizeof buf, total)) > 0) {
        (void)tg_sha256_update(&sha, buf, (size_t)n); /* a failure shows at the final */
        total += (uint64_t)n;
    }
    tg_blob_close(blob);
    char hex[65];
    bool hashed = tg_sha256_final_hex(&sha, hex) == 0;
    if (!hashed) {
        /* the hash failed, not the blob: nothing is marked, fsck fails */
        printf("hash-failed %s (SHA-256 failed in this process)\n", sha256);
        fsck->failed = true;
    } else if (n < 0) {
        printf("unreadable %s\n", sha256);
        fsck_bad(fsck, sha256, recorded, "unreadable");
    } else if (total != size) {
        printf("size-mismatch %s (catalog %llu, blob %llu)\n", sha256, (unsigned long long)size,
               (unsigned long long)total);
        fsck_bad(fsck, sha256, recorded, "size differs from the catalog's");
    } else if (strcmp(hex, sha256) != 0) {
        printf("hash-mismatch %s (content hashes to %s)\n", sha256, hex);
        fsck_bad(fsck, sha256, recorded, "content hashes to another digest");
    } else if (recorded) {
        /* repaired since (or a false alarm): whole now, the record goes */
        printf("whole-again %s (its damage record is removed)\n", sha256);
        tg_blob_clear_damaged(fsck->blobs, sha256);
        fsck->healed++;
    }
    return 0;
}

/* A damage record of a blob no file references any more (gc removed it): dropped. */
static int fsck_record_visit(void *ctx, const char *sha256)
{
    fsck_state *fsck = ctx;
    bool referenced = true;
    if (tg_catalog_blob_referenced(fsck->catalog, sha256, &referenced) == TG_CAT_OK &&
        !referenced) {
        printf("stale-record %s (no file uses this blob; the record is removed)\n", sha256);
        tg_blob_clear_damaged(fsck->blobs, sha256);
    }
    return 0;
}

int tg_cmd_fsck(int argc, char **argv)
{
    int exit_status = 0;
    char err[512];
    if (tg_blob_options_take(&argc, argv, err, sizeof err) != 0) {
        fprintf(stderr, "tensorgate fsck: %s\n%s", err, tg_blob_options_usage());
        return 2;
    }
    const char *data_dir = parse_data_only(argc, argv, "fsck", NULL, &exit_status);
    if (data_dir == NULL)
        return exit_status;
    tg_blobstore *blobs = NULL;
    tg_catalog *catalog = NULL;
    int opened = open_data(data_dir, &blobs, &catalog, DATA_EXISTING, "fsck", NULL);
    if (opened != 0)
        return opened == TG_EXIT_NOT_DATA_DIR ? opened : 2;
    fsck_state fsck = {.blobs = blobs, .catalog = catalog};
    tg_cat_status status = tg_catalog_blob_each(catalog, fsck_visit, &fsck);
    if (status == TG_CAT_OK)
        tg_blob_each_damaged(blobs, fsck_record_visit, &fsck);
    close_data(blobs, catalog);
    if (status != TG_CAT_OK) {
        fprintf(stderr, "tensorgate fsck: the catalog could not be read\n");
        return 2;
    }
    fprintf(stderr, "tensorgate fsck: %lu blob(s) checked, %lu bad, %lu whole again\n",
            fsck.checked, fsck.bad, fsck.healed);
    if (fsck.failed) {
        fprintf(stderr, "tensorgate fsck: SHA-256 failed; some blobs were not checked\n");
        return 2;
    }
    return fsck.bad ? 1 : 0;
}
