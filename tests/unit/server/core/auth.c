/* Unit tests for server/core/auth.c against a temporary catalog:
 * - tokens: the generated form and its hash, scope names, lookups by hash (unknown,
 *   revoked, empty and oversized tokens, namespaces, a failing hash);
 * - the checks a handler calls (tg_auth_require, tg_auth_require_scope, tg_auth_read,
 *   tg_auth_read_namespace, tg_auth_token_hash, tg_auth_namespace) and the one the
 *   dispatcher calls by the route's declared scope (tg_auth_route): they read the Authorization
 * header through libmicrohttpd and answer 401/403/500 on the connection, so this test runs a small
 * libmicrohttpd daemon of its own on 127.0.0.1 whose handler builds the tg_request and calls them,
 * and a raw HTTP client that reads the status and headers. Every request is a HEAD: tg_respond
 * counts body bytes into the server's metrics, which only http.c's daemon has, and a HEAD counts
 * none. So the problem bodies (their detail sentences) are not read here; tests/integration/auth.c
 *   reads them through the whole server. Tokens have no expiry in the catalog: a
 *   token is valid until revoked. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "sha256.h"
#include "test.h"

static char dir[64];
static tg_catalog *catalog;

/* The tokens of the catalog, by what they may do. */
static const char *token_admin = "tg_admin-token";
static const char *token_write = "tg_write-token";
static const char *token_read = "tg_read-token";
static const char *token_write_acme = "tg_write-acme-token"; /* limited to the org "acme" */
static const char *token_read_acme = "tg_read-acme-token";
static const char *token_revoked = "tg_revoked-token";
static const char *token_admin_acme = "tg_admin-acme-token";

static void add_token(const char *token, tg_scope scope, const char *namespace_or_null)
{
    char hash[65];
    CHECK(tg_sha256_hex(token, strlen(token), hash, "test") == 0);
    CHECK(tg_catalog_token_add(catalog, hash, scope, namespace_or_null) == TG_CAT_OK);
}

TEST(generated_tokens)
{
    char token[TG_TOKEN_LEN + 1], hash[65], again[TG_TOKEN_LEN + 1], hash2[65];
    CHECK(tg_token_generate(token, hash) == 0);
    CHECK_EQ_U64(strlen(token), TG_TOKEN_LEN);
    CHECK(strncmp(token, "tg_", 3) == 0);
    CHECK(tg_is_sha256_hex(token + 3));
    char want[65];
    CHECK(tg_sha256_hex(token, strlen(token), want, "test") == 0);
    CHECK_STR(hash, want); /* the catalog keeps exactly this */
    CHECK(tg_token_generate(again, hash2) == 0);
    CHECK(strcmp(token, again) != 0);
    CHECK(strcmp(hash, hash2) != 0);
    /* a hash that fails is an error, never a hash of what the buffer held */
    tg_sha256_fail_nth("token", 1);
    strcpy(hash, "stale");
    CHECK(tg_token_generate(token, hash) == -1);
    CHECK_STR(hash, "");
    tg_sha256_fail_nth("token", 0);
}

TEST(scope_names)
{
    CHECK(tg_scope_from_name("read") == TG_SCOPE_READ);
    CHECK(tg_scope_from_name("write") == TG_SCOPE_WRITE);
    CHECK(tg_scope_from_name("admin") == TG_SCOPE_ADMIN);
    CHECK(tg_scope_from_name("") == TG_SCOPE_NONE);
    CHECK(tg_scope_from_name("READ") == TG_SCOPE_NONE);
    CHECK(tg_scope_from_name("write ") == TG_SCOPE_NONE);
    CHECK(tg_scope_from_name("owner") == TG_SCOPE_NONE);
    /* scopes nest: admin > write > read > none */
    CHECK(TG_SCOPE_ADMIN > TG_SCOPE_WRITE && TG_SCOPE_WRITE > TG_SCOPE_READ &&
          TG_SCOPE_READ > TG_SCOPE_NONE);
}

TEST(lookups_by_hash)
{
    tg_scope scope = TG_SCOPE_NONE;
    char ns[TG_NAME_MAX + 1];
    CHECK(tg_token_lookup(catalog, token_admin, &scope, ns, sizeof ns) == TG_CAT_OK);
    CHECK(scope == TG_SCOPE_ADMIN);
    CHECK_STR(ns, "");
    CHECK(tg_token_lookup(catalog, token_read, &scope, ns, sizeof ns) == TG_CAT_OK);
    CHECK(scope == TG_SCOPE_READ);
    CHECK(tg_token_lookup(catalog, token_write_acme, &scope, ns, sizeof ns) == TG_CAT_OK);
    CHECK(scope == TG_SCOPE_WRITE);
    CHECK_STR(ns, "acme");
    CHECK(tg_token_lookup(catalog, "tg_unknown", &scope, ns, sizeof ns) == TG_CAT_NOT_FOUND);
    CHECK(tg_token_lookup(catalog, "", &scope, ns, sizeof ns) == TG_CAT_NOT_FOUND);
    /* the catalog holds hashes, not tokens: the hash itself is not a token */
    char hash[65];
    CHECK(tg_sha256_hex(token_admin, strlen(token_admin), hash, "test") == 0);
    CHECK(tg_token_lookup(catalog, hash, &scope, ns, sizeof ns) == TG_CAT_NOT_FOUND);
    /* a revoked token is gone */
    CHECK(tg_token_lookup(catalog, token_revoked, &scope, ns, sizeof ns) == TG_CAT_NOT_FOUND);

    /* "hf_" + a tensorgate token (the form the Hugging Face JS client sends) is the
     * same token; "hf_" before anything else is not stripped */
    char prefixed[300];
    snprintf(prefixed, sizeof prefixed, "hf_%s", token_write_acme);
    CHECK(tg_token_lookup(catalog, prefixed, &scope, ns, sizeof ns) == TG_CAT_OK);
    CHECK(scope == TG_SCOPE_WRITE);
    CHECK_STR(ns, "acme");
    CHECK(tg_token_unprefix(prefixed) == prefixed + 3);
    CHECK(tg_token_unprefix("hf_other") != NULL &&
          strcmp(tg_token_unprefix("hf_other"), "hf_other") == 0);
    CHECK(strcmp(tg_token_unprefix("hf_"), "hf_") == 0);
    snprintf(prefixed, sizeof prefixed, "hf_%s", token_revoked);
    CHECK(tg_token_lookup(catalog, prefixed, &scope, ns, sizeof ns) == TG_CAT_NOT_FOUND);
    snprintf(prefixed, sizeof prefixed, "hf_hf_%s", token_read);
    CHECK(tg_token_lookup(catalog, prefixed, &scope, ns, sizeof ns) == TG_CAT_NOT_FOUND);

    /* 256 bytes is the longest token looked up; a longer one is refused before it is
     * hashed, even when its hash is in the catalog */
    char longest[258];
    memset(longest, 'k', 256);
    longest[256] = '\0';
    add_token(longest, TG_SCOPE_READ, NULL);
    CHECK(tg_token_lookup(catalog, longest, &scope, ns, sizeof ns) == TG_CAT_OK);
    memset(longest, 'l', 257);
    longest[257] = '\0';
    add_token(longest, TG_SCOPE_READ, NULL);
    CHECK(tg_token_lookup(catalog, longest, &scope, ns, sizeof ns) == TG_CAT_NOT_FOUND);

    /* the hash fails: an error, not "no such token" */
    tg_sha256_fail_nth("token", 1);
    CHECK(tg_token_lookup(catalog, token_admin, &scope, ns, sizeof ns) == TG_CAT_ERROR);
    tg_sha256_fail_nth("token", 0);
    CHECK(tg_token_lookup(catalog, token_admin, &scope, ns, sizeof ns) == TG_CAT_OK);
}

/* ---- the checks, over a libmicrohttpd connection ---- */

static tg_server server;
static struct MHD_Daemon *daemon_handle;
static uint16_t port;

/* What the handler saw, for the request just answered. */
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    bool ok;
    unsigned status; /* req.status: what the check answered; 0 when it answered nothing */
    char ns[TG_NAME_MAX + 1];
    int hash_rc;
    char hash[65];
} seen;

/* A route's declared scope by the contract's word for it (openapi.yaml). */
static tg_route_auth route_auth(const char *name)
{
    static const struct {
        const char *name;
        tg_route_auth auth;
    } names[] = {{"public", TG_AUTH_PUBLIC},
                 {"read", TG_AUTH_READ},
                 {"read-object", TG_AUTH_READ_OBJECT},
                 {"scan", TG_AUTH_SCAN},
                 {"write", TG_AUTH_WRITE},
                 {"write-object", TG_AUTH_WRITE_OBJECT},
                 {"admin", TG_AUTH_ADMIN},
                 {"admin-list", TG_AUTH_ADMIN_LIST},
                 {"token", TG_AUTH_TOKEN}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (name != NULL && strcmp(name, names[i].name) == 0)
            return names[i].auth;
    return (tg_route_auth)99; /* no scope: refused */
}

/* GET arguments: fn (require, scope, read, read_ns, hash, route, namespace), scope (a
 * scope name; for route, the route's declared scope), org (absent: NULL; for route,
 * the path's {org}), ns (namespace: the token's namespace the dispatcher left). */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)cls;
    (void)url;
    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)con_cls;
    tg_request req;
    memset(&req, 0, sizeof req);
    req.server = &server;
    req.connection = connection;
    req.method = method;
    req.is_head = strcmp(method, "HEAD") == 0;
    if (!req.is_head)
        return MHD_NO; /* see the top of the file */
    const char *fn = MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, "fn");
    const char *scope_name =
        MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, "scope");
    const char *org = MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, "org");
    tg_scope scope = tg_scope_from_name(scope_name ? scope_name : "");
    bool ok = false;
    char ns[TG_NAME_MAX + 1] = "unset";
    char hash[65] = "unset";
    int hash_rc = -2;
    if (fn == NULL)
        fn = "";
    if (strcmp(fn, "require") == 0)
        ok = tg_auth_require(&req, scope, org);
    else if (strcmp(fn, "scope") == 0)
        ok = tg_auth_require_scope(&req, scope);
    else if (strcmp(fn, "read") == 0)
        ok = tg_auth_read(&req, org);
    else if (strcmp(fn, "read_ns") == 0)
        ok = tg_auth_read_namespace(&req, org, ns, sizeof ns);
    else if (strcmp(fn, "route") == 0) {
        tg_route route = {"HEAD", "/check", TG_BODY_NONE, route_auth(scope_name), 0, NULL,
                          NULL,   NULL,     NULL};
        req.route = &route;
        req.param_names[0] = org ? "org" : NULL;
        req.params[0] = (char *)(uintptr_t)org;
        snprintf(req.token_namespace, sizeof req.token_namespace, "stale");
        ok = tg_auth_route(&req);
        snprintf(ns, sizeof ns, "%s", req.token_namespace);
        req.route = NULL;
        req.params[0] = NULL;
    } else if (strcmp(fn, "namespace") == 0) {
        const char *token_namespace =
            MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, "ns");
        snprintf(req.token_namespace, sizeof req.token_namespace, "%s",
                 token_namespace ? token_namespace : "");
        ok = tg_auth_namespace(&req, scope, org);
    } else if (strcmp(fn, "hash") == 0) {
        hash_rc = tg_auth_token_hash(&req, hash);
        ok = true; /* it answers nothing itself: the handler's 204 goes out */
    }
    pthread_mutex_lock(&seen_lock);
    seen.ok = ok;
    seen.status = req.responded ? req.status : 0;
    snprintf(seen.ns, sizeof seen.ns, "%s", ns);
    seen.hash_rc = hash_rc;
    snprintf(seen.hash, sizeof seen.hash, "%s", hash);
    pthread_mutex_unlock(&seen_lock);
    if (!req.responded)
        tg_respond_empty(&req, 204); /* the check let it through */
    return MHD_YES;
}

static bool start_daemon(void)
{
    struct sockaddr_in address;
    memset(&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    daemon_handle =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL, NULL, on_request,
                         NULL, MHD_OPTION_SOCK_ADDR, &address, MHD_OPTION_END);
    CHECK(daemon_handle != NULL);
    if (daemon_handle == NULL)
        return false;
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(daemon_handle, MHD_DAEMON_INFO_BIND_PORT);
    port = info ? info->port : 0;
    CHECK(port != 0);
    return port != 0;
}

/* One HEAD request: target (path and query), authorization (the whole header value;
 * NULL: no header). Returns the HTTP status (0 on failure); head gets the response
 * head for header checks. */
static unsigned head_request(const char *target, const char *authorization, char *head,
                             size_t head_len)
{
    head[0] = '\0';
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    if (fd < 0)
        return 0;
    struct timeval timeout = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    struct sockaddr_in address;
    memset(&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        CHECK(false);
        close(fd);
        return 0;
    }
    char request[2048];
    int n = snprintf(request, sizeof request,
                     "HEAD %s HTTP/1.1\r\nHost: test\r\n%s%s%s"
                     "Connection: close\r\n\r\n",
                     target, authorization ? "Authorization: " : "",
                     authorization ? authorization : "", authorization ? "\r\n" : "");
    CHECK(n > 0 && (size_t)n < sizeof request);
    CHECK(send(fd, request, (size_t)n, MSG_NOSIGNAL) == n);
    size_t len = 0;
    for (;;) {
        ssize_t got = recv(fd, head + len, head_len - 1 - len, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        len += (size_t)got;
        if (len + 1 >= head_len)
            break;
    }
    head[len] = '\0';
    close(fd);
    unsigned status = 0;
    if (sscanf(head, "HTTP/1.1 %u", &status) != 1)
        return 0;
    return status;
}

static char last_head[4096];

/* The status a check answers (204: it let the request through), and what it said. */
static unsigned check_status(const char *fn, const char *scope, const char *org,
                             const char *authorization)
{
    char target[256];
    snprintf(target, sizeof target, "/check?fn=%s%s%s%s%s", fn, scope ? "&scope=" : "",
             scope ? scope : "", org ? "&org=" : "", org ? org : "");
    unsigned status = head_request(target, authorization, last_head, sizeof last_head);
    pthread_mutex_lock(&seen_lock);
    bool ok = seen.ok;
    unsigned answered = seen.status;
    pthread_mutex_unlock(&seen_lock);
    /* true exactly when the check answered nothing and the handler's 204 went out */
    CHECK(ok == (status == 204));
    CHECK(ok ? answered == 0 : answered == status);
    if (status != 204 && status != 0)
        CHECK(strstr(last_head, "Content-Type: application/problem+json") != NULL);
    /* a 401 says how to authenticate */
    CHECK((status == 401) ==
          (strstr(last_head, "WWW-Authenticate: Bearer realm=\"tensorgate\"") != NULL));
    return status;
}

static const char *bearer(const char *token)
{
    static char value[8][320];
    static int next;
    char *out = value[next++ % 8];
    snprintf(out, 320, "Bearer %s", token);
    return out;
}

TEST(require_presence_validity_and_scope)
{
    /* no header, another scheme, an empty token, an unknown or revoked one: 401 */
    CHECK_EQ_U64(check_status("require", "read", "acme", NULL), 401);
    CHECK_EQ_U64(check_status("require", "read", "acme", "Basic dXNlcjpwYXNz"), 401);
    CHECK_EQ_U64(check_status("require", "read", "acme", "Bearer"), 401);
    CHECK_EQ_U64(check_status("require", "read", "acme", "Bearer "), 401);
    CHECK_EQ_U64(check_status("require", "read", "acme", bearer("tg_unknown")), 401);
    CHECK_EQ_U64(check_status("require", "read", "acme", bearer(token_revoked)), 401);
    char hash[65];
    CHECK(tg_sha256_hex(token_admin, strlen(token_admin), hash, "test") == 0);
    CHECK_EQ_U64(check_status("require", "read", "acme", bearer(hash)), 401);

    /* the scheme is case-insensitive and spaces before the token are skipped */
    char value[320];
    snprintf(value, sizeof value, "bearer %s", token_admin);
    CHECK_EQ_U64(check_status("require", "admin", "acme", value), 204);
    snprintf(value, sizeof value, "BEARER    %s", token_admin);
    CHECK_EQ_U64(check_status("require", "admin", "acme", value), 204);

    /* scopes nest: a smaller one is 403 */
    CHECK_EQ_U64(check_status("require", "read", "acme", bearer(token_read)), 204);
    CHECK_EQ_U64(check_status("require", "write", "acme", bearer(token_read)), 403);
    CHECK_EQ_U64(check_status("require", "write", "acme", bearer(token_write)), 204);
    CHECK_EQ_U64(check_status("require", "admin", "acme", bearer(token_write)), 403);
    CHECK_EQ_U64(check_status("require", "admin", NULL, bearer(token_admin)), 204);
    CHECK_EQ_U64(check_status("require", "read", NULL, bearer(token_admin)), 204);

    /* the hash of the token fails: 500, not 401 */
    tg_sha256_fail_nth("token", 1);
    CHECK_EQ_U64(check_status("require", "read", "acme", bearer(token_admin)), 500);
    tg_sha256_fail_nth("token", 0);
}

/* A namespace-limited token acts only on its org; above read it may not use a route
 * without an org; reads without an org (lists) it may. */
TEST(require_matches_the_org)
{
    CHECK_EQ_U64(check_status("require", "write", "acme", bearer(token_write_acme)), 204);
    CHECK_EQ_U64(check_status("require", "write", "other", bearer(token_write_acme)), 403);
    CHECK_EQ_U64(check_status("require", "write", "acm", bearer(token_write_acme)), 403);
    CHECK_EQ_U64(check_status("require", "write", "acmex", bearer(token_write_acme)), 403);
    CHECK_EQ_U64(check_status("require", "write", "ACME", bearer(token_write_acme)), 403);
    CHECK_EQ_U64(check_status("require", "write", NULL, bearer(token_write_acme)), 403);
    CHECK_EQ_U64(check_status("require", "admin", "acme", bearer(token_write_acme)), 403);
    CHECK_EQ_U64(check_status("require", "read", "acme", bearer(token_write_acme)), 204);
    CHECK_EQ_U64(check_status("require", "read", "other", bearer(token_write_acme)), 403);
    CHECK_EQ_U64(check_status("require", "read", NULL, bearer(token_write_acme)), 204);
    CHECK_EQ_U64(check_status("require", "read", "acme", bearer(token_read_acme)), 204);
    CHECK_EQ_U64(check_status("require", "read", "other", bearer(token_read_acme)), 403);
    CHECK_EQ_U64(check_status("require", "write", "acme", bearer(token_read_acme)), 403);
    /* unlimited tokens act on every org */
    CHECK_EQ_U64(check_status("require", "write", "other", bearer(token_write)), 204);
    CHECK_EQ_U64(check_status("require", "write", NULL, bearer(token_write)), 204);
}

/* The first half, for a route whose org is in its body: presence, validity, scope;
 * the org is not judged yet. */
TEST(require_scope_ignores_the_org)
{
    CHECK_EQ_U64(check_status("scope", "write", "other", bearer(token_write_acme)), 204);
    CHECK_EQ_U64(check_status("scope", "write", NULL, bearer(token_write_acme)), 204);
    CHECK_EQ_U64(check_status("scope", "write", NULL, bearer(token_read_acme)), 403);
    CHECK_EQ_U64(check_status("scope", "admin", NULL, bearer(token_write)), 403);
    CHECK_EQ_U64(check_status("scope", "write", NULL, NULL), 401);
    CHECK_EQ_U64(check_status("scope", "read", NULL, bearer(token_revoked)), 401);
}

TEST(reads_open_or_closed)
{
    server.config.auth_read = false;
    /* open reads: anything goes, a bad token included, and no namespace is given */
    CHECK_EQ_U64(check_status("read", NULL, "acme", NULL), 204);
    CHECK_EQ_U64(check_status("read", NULL, "acme", bearer("tg_unknown")), 204);
    CHECK_EQ_U64(check_status("read_ns", NULL, "other", bearer(token_read_acme)), 204);
    pthread_mutex_lock(&seen_lock);
    CHECK_STR(seen.ns, "");
    pthread_mutex_unlock(&seen_lock);

    server.config.auth_read = true;
    CHECK_EQ_U64(check_status("read", NULL, "acme", NULL), 401);
    CHECK_EQ_U64(check_status("read", NULL, "acme", bearer("tg_unknown")), 401);
    CHECK_EQ_U64(check_status("read", NULL, "acme", bearer(token_read)), 204);
    CHECK_EQ_U64(check_status("read", NULL, "acme", bearer(token_read_acme)), 204);
    CHECK_EQ_U64(check_status("read", NULL, "other", bearer(token_read_acme)), 403);
    CHECK_EQ_U64(check_status("read", NULL, NULL, bearer(token_read_acme)), 204);
    /* a list across orgs learns the namespace it must keep to */
    CHECK_EQ_U64(check_status("read_ns", NULL, NULL, bearer(token_read_acme)), 204);
    pthread_mutex_lock(&seen_lock);
    CHECK_STR(seen.ns, "acme");
    pthread_mutex_unlock(&seen_lock);
    CHECK_EQ_U64(check_status("read_ns", NULL, NULL, bearer(token_admin)), 204);
    pthread_mutex_lock(&seen_lock);
    CHECK_STR(seen.ns, "");
    pthread_mutex_unlock(&seen_lock);
    CHECK_EQ_U64(check_status("read_ns", NULL, "other", bearer(token_write_acme)), 403);
    CHECK_EQ_U64(check_status("read_ns", NULL, NULL, NULL), 401);
    server.config.auth_read = false;
}

static const char *seen_namespace(void)
{
    static char ns[TG_NAME_MAX + 1];
    pthread_mutex_lock(&seen_lock);
    snprintf(ns, sizeof ns, "%s", seen.ns);
    pthread_mutex_unlock(&seen_lock);
    return ns;
}

/* The dispatcher's check by a route's declared scope: each kind as the handler's own
 * check used to be, and the token's namespace left for the handler. */
TEST(route_scopes)
{
    server.config.auth_read = false;
    server.config.scan_auth = false;
    /* public and token: nothing looked at, whatever is sent */
    CHECK_EQ_U64(check_status("route", "public", NULL, NULL), 204);
    CHECK_EQ_U64(check_status("route", "public", NULL, bearer("tg_unknown")), 204);
    CHECK_EQ_U64(check_status("route", "token", NULL, NULL), 204);
    CHECK_STR(seen_namespace(), "");
    /* open reads: read, read-object and scan let anything through, no namespace */
    CHECK_EQ_U64(check_status("route", "read", "other", bearer(token_read_acme)), 204);
    CHECK_STR(seen_namespace(), "");
    CHECK_EQ_U64(check_status("route", "read-object", NULL, NULL), 204);
    CHECK_EQ_U64(check_status("route", "scan", NULL, bearer("tg_unknown")), 204);
    /* --scan-auth: any valid token, a namespace-limited one too */
    server.config.scan_auth = true;
    CHECK_EQ_U64(check_status("route", "scan", NULL, NULL), 401);
    CHECK_EQ_U64(check_status("route", "scan", NULL, bearer(token_read_acme)), 204);
    server.config.scan_auth = false;
    /* write: on the path's org; write-object: the scope only, the namespace left */
    CHECK_EQ_U64(check_status("route", "write", "acme", NULL), 401);
    CHECK_EQ_U64(check_status("route", "write", "acme", bearer(token_read)), 403);
    CHECK_EQ_U64(check_status("route", "write", "acme", bearer(token_write_acme)), 204);
    CHECK_EQ_U64(check_status("route", "write", "other", bearer(token_write_acme)), 403);
    CHECK_EQ_U64(check_status("route", "write-object", NULL, bearer(token_write_acme)), 204);
    CHECK_STR(seen_namespace(), "acme");
    CHECK_EQ_U64(check_status("route", "write-object", NULL, bearer(token_read_acme)), 403);
    CHECK_EQ_U64(check_status("route", "write-object", NULL, bearer(token_revoked)), 401);
    /* admin: on the path's org, never on a route without one for a limited token */
    CHECK_EQ_U64(check_status("route", "admin", "acme", bearer(token_write)), 403);
    CHECK_EQ_U64(check_status("route", "admin", "acme", bearer(token_admin)), 204);
    CHECK_EQ_U64(check_status("route", "admin", NULL, bearer(token_admin)), 204);
    CHECK_EQ_U64(check_status("route", "admin", NULL, bearer(token_admin_acme)), 403);
    /* admin-list: admin scope; a limited token passes, its namespace left for the list */
    CHECK_EQ_U64(check_status("route", "admin-list", NULL, NULL), 401);
    CHECK_EQ_U64(check_status("route", "admin-list", NULL, bearer(token_write)), 403);
    CHECK_EQ_U64(check_status("route", "admin-list", NULL, bearer(token_admin)), 204);
    CHECK_STR(seen_namespace(), "");
    CHECK_EQ_U64(check_status("route", "admin-list", NULL, bearer(token_admin_acme)), 204);
    CHECK_STR(seen_namespace(), "acme");
    /* closed reads */
    server.config.auth_read = true;
    CHECK_EQ_U64(check_status("route", "read", "acme", NULL), 401);
    CHECK_EQ_U64(check_status("route", "read", "acme", bearer(token_read_acme)), 204);
    CHECK_EQ_U64(check_status("route", "read", "other", bearer(token_read_acme)), 403);
    CHECK_EQ_U64(check_status("route", "read", NULL, bearer(token_read_acme)), 204);
    CHECK_STR(seen_namespace(), "acme"); /* a list keeps to it */
    /* read-object: the path's org is not the object's; the handler judges it */
    CHECK_EQ_U64(check_status("route", "read-object", "other", bearer(token_read_acme)), 204);
    CHECK_STR(seen_namespace(), "acme");
    CHECK_EQ_U64(check_status("route", "read-object", NULL, bearer("tg_unknown")), 401);
    CHECK_EQ_U64(check_status("route", "scan", NULL, NULL), 401);
    server.config.auth_read = false;
    /* a route that declares no known scope is refused, never let through */
    CHECK_EQ_U64(check_status("route", "owner", NULL, bearer(token_admin)), 500);
}

/* The object-level half: the token's namespace against the object's org. */
TEST(namespace_of_the_object)
{
    /* unlimited: every org */
    CHECK_EQ_U64(check_status("namespace", "write", "other", NULL), 204);
    CHECK_EQ_U64(check_status("namespace&ns=acme", "write", "acme", NULL), 204);
    CHECK_EQ_U64(check_status("namespace&ns=acme", "write", "other", NULL), 403);
    CHECK(strstr(last_head, "Content-Type: application/problem+json") != NULL);
    /* above read, an object of no org is another namespace's */
    CHECK_EQ_U64(check_status("namespace&ns=acme", "write", NULL, NULL), 403);
    CHECK_EQ_U64(check_status("namespace&ns=acme", "read", NULL, NULL), 204);
    CHECK_EQ_U64(check_status("namespace&ns=acme", "read", "other", NULL), 403);
    CHECK_EQ_U64(check_status("namespace&ns=acme", "read", "acme", NULL), 204);
}

/* The token's hash for a commit-time re-check: it answers nothing itself. */
TEST(token_hash_of_the_request)
{
    char want[65];
    CHECK(tg_sha256_hex(token_write, strlen(token_write), want, "test") == 0);
    CHECK_EQ_U64(check_status("hash", NULL, NULL, bearer(token_write)), 204);
    pthread_mutex_lock(&seen_lock);
    CHECK(seen.hash_rc == 1);
    CHECK_STR(seen.hash, want);
    pthread_mutex_unlock(&seen_lock);
    char value[320];
    snprintf(value, sizeof value, "bEaReR   %s", token_write);
    CHECK_EQ_U64(check_status("hash", NULL, NULL, value), 204);
    pthread_mutex_lock(&seen_lock);
    CHECK(seen.hash_rc == 1);
    CHECK_STR(seen.hash, want);
    pthread_mutex_unlock(&seen_lock);

    /* none: no header, another scheme, an empty or oversized token */
    char oversized[300];
    memset(oversized, 'z', 257);
    oversized[257] = '\0';
    const char *none[] = {NULL, "Basic dXNlcjpwYXNz", "Bearer ", bearer(oversized)};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        CHECK_EQ_U64(check_status("hash", NULL, NULL, none[i]), 204);
        pthread_mutex_lock(&seen_lock);
        CHECK(seen.hash_rc == 0);
        CHECK_STR(seen.hash, "");
        pthread_mutex_unlock(&seen_lock);
    }
    /* the hash fails: -1 and "" (the caller answers 500) */
    tg_sha256_fail_nth("token", 1);
    CHECK_EQ_U64(check_status("hash", NULL, NULL, bearer(token_write)), 204);
    tg_sha256_fail_nth("token", 0);
    pthread_mutex_lock(&seen_lock);
    CHECK(seen.hash_rc == -1);
    CHECK_STR(seen.hash, "");
    pthread_mutex_unlock(&seen_lock);
}

/* Revoking takes effect from the next request on. */
TEST(revocation_is_immediate)
{
    const char *token = "tg_soon-revoked";
    add_token(token, TG_SCOPE_WRITE, NULL);
    CHECK_EQ_U64(check_status("require", "write", "acme", bearer(token)), 204);
    char hash[65];
    CHECK(tg_sha256_hex(token, strlen(token), hash, "test") == 0);
    int64_t id = 0;
    CHECK(tg_catalog_token_id(catalog, hash, &id) == TG_CAT_OK);
    CHECK(tg_catalog_token_revoke(catalog, id) == TG_CAT_OK);
    CHECK_EQ_U64(check_status("require", "write", "acme", bearer(token)), 401);
    CHECK_EQ_U64(check_status("require", "read", NULL, bearer(token)), 401);
}

int main(int argc, char **argv)
{
    (void)argc;
    snprintf(dir, sizeof dir, "/tmp/tg-auth-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    char db_path[128], err[256] = "";
    snprintf(db_path, sizeof db_path, "%s/catalog.db", dir);
    CHECK(tg_catalog_open(db_path, &catalog, err, sizeof err) == TG_CAT_OK);
    if (catalog == NULL) {
        fprintf(stderr, "catalog: %s\n", err);
        return test_report(argv[0]);
    }
    add_token(token_admin, TG_SCOPE_ADMIN, NULL);
    add_token(token_write, TG_SCOPE_WRITE, NULL);
    add_token(token_read, TG_SCOPE_READ, NULL);
    add_token(token_write_acme, TG_SCOPE_WRITE, "acme");
    add_token(token_read_acme, TG_SCOPE_READ, "acme");
    add_token(token_revoked, TG_SCOPE_ADMIN, NULL);
    add_token(token_admin_acme, TG_SCOPE_ADMIN, "acme");
    char hash[65];
    int64_t id = 0;
    CHECK(tg_sha256_hex(token_revoked, strlen(token_revoked), hash, "test") == 0);
    CHECK(tg_catalog_token_id(catalog, hash, &id) == TG_CAT_OK);
    CHECK(tg_catalog_token_revoke(catalog, id) == TG_CAT_OK);

    RUN(generated_tokens);
    RUN(scope_names);
    RUN(lookups_by_hash);

    server.catalog = catalog;
    if (start_daemon()) {
        RUN(require_presence_validity_and_scope);
        RUN(require_matches_the_org);
        RUN(require_scope_ignores_the_org);
        RUN(reads_open_or_closed);
        RUN(route_scopes);
        RUN(namespace_of_the_object);
        RUN(token_hash_of_the_request);
        RUN(revocation_is_immediate);
        MHD_stop_daemon(daemon_handle);
    }
    tg_catalog_close(catalog);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", dir);
    CHECK(system(command) == 0);
    return test_report(argv[0]);
}
