/* Tokens and scopes (see auth.h). */
#include "auth.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>

#include "sha256.h"

int tg_token_generate(char token[TG_TOKEN_LEN + 1], char hash[65])
{
    unsigned char random[32];
    if (RAND_bytes(random, sizeof random) != 1)
        return -1;
    memcpy(token, "tg_", 3);
    tg_hex_encode(random, sizeof random, token + 3);
    return tg_sha256_hex(token, TG_TOKEN_LEN, hash, "token");
}

tg_scope tg_scope_from_name(const char *name)
{
    if (strcmp(name, "read") == 0)
        return TG_SCOPE_READ;
    if (strcmp(name, "write") == 0)
        return TG_SCOPE_WRITE;
    if (strcmp(name, "admin") == 0)
        return TG_SCOPE_ADMIN;
    return TG_SCOPE_NONE;
}

const char *tg_token_unprefix(const char *token)
{
    /* "hf_tg_<hex>": the Hugging Face JS client only sends tokens that start with
     * "hf_", so the tensorgate token behind that prefix is accepted as itself. */
    if (strncmp(token, "hf_tg_", 6) == 0)
        return token + 3;
    return token;
}

tg_cat_status tg_token_lookup(tg_catalog *catalog, const char *token, tg_scope *granted,
                              char *token_namespace, size_t namespace_size)
{
    token = tg_token_unprefix(token);
    size_t token_len = strlen(token);
    /* Only the hash is compared (in the catalog), so the token text never meets a
     * timing-sensitive comparison; an oversized value is refused before hashing. */
    if (token_len == 0 || token_len > 256)
        return TG_CAT_NOT_FOUND;
    char hash[65];
    if (tg_sha256_hex(token, token_len, hash, "token") != 0)
        return TG_CAT_ERROR;
    return tg_catalog_token_lookup(catalog, hash, granted, token_namespace, namespace_size);
}

int tg_auth_token_hash(const tg_request *req, char hash[65])
{
    hash[0] = '\0';
    const char *header = tg_header(req, "Authorization");
    if (header == NULL || strncasecmp(header, "Bearer ", 7) != 0)
        return 0;
    const char *token = header + 7;
    while (*token == ' ')
        token++;
    token = tg_token_unprefix(token);
    size_t token_len = strlen(token);
    if (token_len == 0 || token_len > 256)
        return 0;
    return tg_sha256_hex(token, token_len, hash, "token") == 0 ? 1 : -1;
}

/* The token's presence, validity and scope: answers 401/403 and returns false when one
 * fails; gives the token's namespace ("" when unlimited). */
static bool authorize_token(tg_request *req, tg_scope scope, char *token_namespace,
                            size_t namespace_size)
{
    token_namespace[0] = '\0';
    const char *header = tg_header(req, "Authorization");
    if (header == NULL) {
        tg_respond_problem(req, "unauthorized", "this route needs a bearer token");
        return false;
    }
    if (strncasecmp(header, "Bearer ", 7) != 0) {
        tg_respond_problem(req, "unauthorized",
                           "the Authorization header must be 'Bearer <token>'");
        return false;
    }
    const char *token = header + 7;
    while (*token == ' ')
        token++;
    tg_scope granted = TG_SCOPE_NONE;
    tg_cat_status status =
        tg_token_lookup(req->server->catalog, token, &granted, token_namespace, namespace_size);
    if (tg_cat_failed(status)) {
        tg_respond_catalog_failure_detail(req, status,
                                          "the token could not be checked (the token store "
                                          "or its hash failed)");
        return false;
    }
    if (status != TG_CAT_OK) {
        /* The Hub's words for a bad token: huggingface_hub then raises an HTTP error
         * (not "repository not found"). */
        const char *const hub_headers[] = {"X-Error-Message",
                                           "Invalid credentials in Authorization header", NULL};
        tg_respond_problem_headers(req, "unauthorized", req->hub_errors ? hub_headers : NULL,
                                   "the token is not valid");
        return false;
    }
    if (granted < scope) {
        tg_respond_problem(req, "forbidden", "the token's scope is too small for this route");
        return false;
    }
    return true;
}

/* The namespace half of tg_auth_require: a token limited to token_namespace (not "")
 * may act above read only on org (never on no org), and read only org (or no org). */
static bool authorize_namespace(tg_request *req, tg_scope scope, const char *org,
                                const char *token_namespace)
{
    if (token_namespace[0] != '\0' && scope > TG_SCOPE_READ &&
        (org == NULL || strcmp(org, token_namespace) != 0)) {
        tg_respond_problem(req, "forbidden", "the token is limited to the namespace '%s'",
                           token_namespace);
        return false;
    }
    if (token_namespace[0] != '\0' && scope == TG_SCOPE_READ && org != NULL &&
        strcmp(org, token_namespace) != 0) {
        tg_respond_problem(req, "forbidden", "the token is limited to the namespace '%s'",
                           token_namespace);
        return false;
    }
    return true;
}

/* tg_auth_require, also giving the token's namespace ("" when unlimited). */
static bool authorize(tg_request *req, tg_scope scope, const char *org, char *token_namespace,
                      size_t namespace_size)
{
    if (!authorize_token(req, scope, token_namespace, namespace_size))
        return false;
    return authorize_namespace(req, scope, org, token_namespace);
}

bool tg_auth_require_scope(tg_request *req, tg_scope scope)
{
    char token_namespace[TG_NAME_MAX + 1];
    return authorize_token(req, scope, token_namespace, sizeof token_namespace);
}

bool tg_auth_require(tg_request *req, tg_scope scope, const char *org)
{
    char token_namespace[TG_NAME_MAX + 1];
    return authorize(req, scope, org, token_namespace, sizeof token_namespace);
}

bool tg_auth_read(tg_request *req, const char *org)
{
    if (!req->server->config.auth_read)
        return true;
    return tg_auth_require(req, TG_SCOPE_READ, org);
}

bool tg_auth_read_namespace(tg_request *req, const char *org, char *token_namespace,
                            size_t namespace_size)
{
    token_namespace[0] = '\0';
    if (!req->server->config.auth_read)
        return true;
    return authorize(req, TG_SCOPE_READ, org, token_namespace, namespace_size);
}

bool tg_auth_namespace(tg_request *req, tg_scope scope, const char *org)
{
    return authorize_namespace(req, scope, org, req->token_namespace);
}

bool tg_auth_route(tg_request *req)
{
    const char *org = tg_param(req, "org"); /* NULL: the pattern has no {org} */
    char *token_namespace = req->token_namespace;
    size_t size = sizeof req->token_namespace;
    token_namespace[0] = '\0';
    switch (req->route->auth) {
    case TG_AUTH_PUBLIC:
    case TG_AUTH_TOKEN:
        return true;
    case TG_AUTH_READ:
        return tg_auth_read_namespace(req, org, token_namespace, size);
    case TG_AUTH_READ_OBJECT:
        return tg_auth_read_namespace(req, NULL, token_namespace, size);
    case TG_AUTH_SCAN:
        if (req->server->config.scan_auth)
            return authorize(req, TG_SCOPE_READ, NULL, token_namespace, size);
        return tg_auth_read_namespace(req, NULL, token_namespace, size);
    case TG_AUTH_WRITE:
        return authorize(req, TG_SCOPE_WRITE, org, token_namespace, size);
    case TG_AUTH_WRITE_OBJECT:
        return authorize_token(req, TG_SCOPE_WRITE, token_namespace, size);
    case TG_AUTH_ADMIN:
        return authorize(req, TG_SCOPE_ADMIN, org, token_namespace, size);
    case TG_AUTH_ADMIN_LIST:
        return authorize_token(req, TG_SCOPE_ADMIN, token_namespace, size);
    }
    /* a value outside the enum: refused, never let through */
    tg_respond_internal(req, "the route declares no known scope");
    return false;
}
