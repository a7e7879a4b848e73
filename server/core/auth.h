/* Bearer tokens and scopes (docs/DESIGN.md §7). Tokens are "tg_" + 64 hex digits of
 * RAND_bytes, shown once ("hf_tg_..." is accepted as the same token); the catalog keeps only their
 * SHA-256 hex. Scopes nest: admin > write > read. A namespace-limited token acts only on that org.
 */
#ifndef TG_AUTH_H
#define TG_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "catalog.h"
#include "request.h"

#define TG_TOKEN_LEN (3 + 64)

/* A new random token (TG_TOKEN_LEN chars + NUL) and its hash. Returns -1 if the RNG or
 * the hash fails. */
int tg_token_generate(char token[TG_TOKEN_LEN + 1], char hash[65]);

tg_scope tg_scope_from_name(const char *name);

/* token without a leading "hf_" when what follows is a tensorgate token ("hf_tg_...":
 * the form the Hugging Face JS client accepts); else token itself. */
const char *tg_token_unprefix(const char *token);

/* Looks a bearer token up by its hash (an "hf_"-prefixed token as itself): TG_CAT_OK with its scope
 * and namespace ("" when unlimited), TG_CAT_NOT_FOUND for an unknown, empty or oversized (> 256
 * bytes) token, TG_CAT_ERROR when the catalog or the hash fails. */
tg_cat_status tg_token_lookup(tg_catalog *catalog, const char *token, tg_scope *granted,
                              char *token_namespace, size_t namespace_size);

/* The checks tg_auth_route is made of (a handler does not call them: its route's
 * row declares the scope, and the dispatcher checks it before the handler runs; the
 * one exception is a route whose need depends on its object: DELETE of a version
 * asks write of its row and admin, by tg_auth_require, for a published version). */
/* True when the request may go on: the token (if any is needed) has at least
 * scope, and its namespace (if limited) is org (org NULL: a route with no org, which
 * a namespace-limited token may not use above read). Otherwise answers 401/403 and
 * returns false. */
bool tg_auth_require(tg_request *req, tg_scope scope, const char *org);

/* The first half of tg_auth_require, for a route whose org is only known from its body
 * (write-object): answers 401/403 (and returns false) unless the request carries a
 * valid token of at least scope. The route then reads its body and calls
 * tg_auth_namespace with the org, so a request without a valid token is 401 whatever
 * its body holds. */
bool tg_auth_require_scope(tg_request *req, tg_scope scope);

/* The SHA-256 hex of the request's bearer token, for work that re-checks at its
 * commit that the token still exists (tg_commit_guard): 1, or 0 (hash "") when the
 * request carries none, or -1 (hash "") when the hash failed (answer 500). */
int tg_auth_token_hash(const tg_request *req, char hash[65]);

/* Authorizes the request for its route's declared scope (req->route->auth, request.h)
 * and fills req->token_namespace: true when the route may run, else false after
 * answering 401/403 (or 500 when the token store failed). Called by the dispatcher
 * (http.c) before the route's first callback, never by a handler. */
bool tg_auth_route(tg_request *req);
/* The object-level check of a read-object or write-object route, once the handler
 * knows the org its object belongs to (org NULL: none): a token limited to
 * req->token_namespace may read only that org's objects (or those of no org) and,
 * above read, act only on that org's. Answers 403 and returns false otherwise. */
bool tg_auth_namespace(tg_request *req, tg_scope scope, const char *org);

/* Reads: open unless --auth-read. */
bool tg_auth_read(tg_request *req, const char *org);
/* tg_auth_read for a list of what several orgs own: also gives the namespace the
 * token is limited to (namespace_size >= TG_NAME_MAX + 1; "" when reads are open
 * or the token is unlimited), so the list can keep to what the token may read. */
bool tg_auth_read_namespace(tg_request *req, const char *org, char *token_namespace,
                            size_t namespace_size);

#endif
