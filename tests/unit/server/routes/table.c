/* Unit tests for server/routes/table.c: the routing table against openapi.yaml (the
 * copy compiled into the server). Every operation of the document (path and
 * method) has exactly one row, and every row is an operation of the document;
 * a "head" operation is served by its path's GET row (a GET route answers HEAD).
 * A row's "{path*}" is the document's "{path}". Every row can be run (its pattern
 * is valid, its body kind has its functions), and every row is reachable: a
 * request made from its own pattern is matched first by that row. Every operation
 * names its scope (x-tensorgate-scope), and the row that serves it declares the same
 * (tg_route.auth; a HEAD operation's is its GET row's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedded.h"
#include "http_parse.h"
#include "route_table.h"
#include "test.h"

#define OPS_MAX 256

typedef struct operation {
    char method[8]; /* upper case */
    char path[256];
    char scope[32]; /* its x-tensorgate-scope, "" when it names none */
    unsigned rows;  /* rows of the table that serve it */
} operation;

static operation ops[OPS_MAX];
static size_t op_count;

/* The paths: section of the document, read simply: a line at indentation 2 that
 * starts with '/' is a path ("  /v1/models:"), a line at indentation 4 that is
 * get:, put:, post:, delete:, patch: or head: is an operation of the last path, and
 * "      x-tensorgate-scope: NAME" below it is that operation's scope. */
static void parse_openapi(const char *text)
{
    static const char *const methods[] = {"get", "put", "post", "delete", "patch", "head"};
    bool in_paths = false;
    char path[256] = "";
    for (const char *line = text; *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len == 6 && strncmp(line, "paths:", 6) == 0) {
            in_paths = true;
        } else if (in_paths && len > 0 && line[0] != ' ' && line[0] != '#') {
            break; /* the next top-level key */
        } else if (in_paths && len > 3 && strncmp(line, "  /", 3) == 0 && line[len - 1] == ':') {
            snprintf(path, sizeof path, "%.*s", (int)(len - 3), line + 2);
        } else if (in_paths && op_count > 0 && len > 26 &&
                   strncmp(line, "      x-tensorgate-scope: ", 26) == 0) {
            snprintf(ops[op_count - 1].scope, sizeof ops[op_count - 1].scope, "%.*s",
                     (int)(len - 26), line + 26);
        } else if (in_paths && len > 5 && strncmp(line, "    ", 4) == 0 && line[4] != ' ') {
            for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
                size_t ml = strlen(methods[m]);
                if (len != 4 + ml + 1 || strncmp(line + 4, methods[m], ml) != 0 ||
                    line[4 + ml] != ':')
                    continue;
                CHECK(path[0] != '\0' && op_count < OPS_MAX);
                if (path[0] == '\0' || op_count >= OPS_MAX)
                    break;
                operation *op = &ops[op_count++];
                for (size_t i = 0; i <= ml; i++)
                    op->method[i] = (char)(methods[m][i] >= 'a' && methods[m][i] <= 'z'
                                               ? methods[m][i] - 'a' + 'A'
                                               : methods[m][i]);
                snprintf(op->path, sizeof op->path, "%s", path);
            }
        }
        if (end == NULL)
            break;
        line = end + 1;
    }
}

/* The document's spelling of a pattern: "{name*}" becomes "{name}". */
static void document_path(const char *pattern, char *out, size_t out_len)
{
    size_t o = 0;
    for (const char *p = pattern; *p != '\0' && o + 1 < out_len; p++)
        if (!(p[0] == '*' && p[1] == '}'))
            out[o++] = *p;
    out[o] = '\0';
}

TEST(document_read)
{
    parse_openapi((const char *)tg_openapi_yaml);
    /* a sanity floor: the document has dozens of operations, and these among them */
    CHECK(op_count >= 30);
    bool healthz = false, upload = false, head = false;
    for (size_t i = 0; i < op_count; i++) {
        healthz |= strcmp(ops[i].path, "/healthz") == 0 && strcmp(ops[i].method, "GET") == 0;
        upload |= strcmp(ops[i].path, "/v1/models/{org}/{name}/versions/{rev}/files/{path}") == 0 &&
                  strcmp(ops[i].method, "PUT") == 0;
        head |= strcmp(ops[i].method, "HEAD") == 0;
    }
    CHECK(healthz);
    CHECK(upload);
    CHECK(head);
}

/* Each row is an operation of the document (its method, or HEAD through GET, under
 * its path); each operation is served by exactly one row. */
TEST(table_matches_document)
{
    size_t count = 0;
    const tg_route *routes = tg_routes(&count);
    CHECK(routes != NULL && count > 0);
    for (size_t r = 0; r < count; r++) {
        char path[256];
        document_path(routes[r].pattern, path, sizeof path);
        bool found = false;
        for (size_t i = 0; i < op_count; i++) {
            if (strcmp(ops[i].path, path) != 0)
                continue;
            bool serves =
                strcmp(ops[i].method, routes[r].method) == 0 ||
                (strcmp(ops[i].method, "HEAD") == 0 && strcmp(routes[r].method, "GET") == 0);
            if (!serves)
                continue;
            ops[i].rows++;
            if (strcmp(ops[i].method, routes[r].method) == 0)
                found = true;
        }
        if (!found)
            fprintf(stderr, "table.c: the row %s %s is not an operation of openapi.yaml\n",
                    routes[r].method, routes[r].pattern);
        CHECK(found);
    }
    for (size_t i = 0; i < op_count; i++) {
        if (ops[i].rows != 1)
            fprintf(stderr, "openapi.yaml: %s %s is served by %u rows of the table, not 1\n",
                    ops[i].method, ops[i].path, ops[i].rows);
        CHECK_EQ_U64(ops[i].rows, 1);
    }
}

/* The contract's word for a row's scope (openapi.yaml, info: Auth). */
static const char *scope_name(tg_route_auth auth)
{
    switch (auth) {
    case TG_AUTH_PUBLIC:
        return "public";
    case TG_AUTH_READ:
        return "read";
    case TG_AUTH_READ_OBJECT:
        return "read-object";
    case TG_AUTH_SCAN:
        return "scan";
    case TG_AUTH_WRITE:
        return "write";
    case TG_AUTH_WRITE_OBJECT:
        return "write-object";
    case TG_AUTH_ADMIN:
        return "admin";
    case TG_AUTH_ADMIN_LIST:
        return "admin-list";
    case TG_AUTH_TOKEN:
        return "token";
    }
    return "?";
}

/* Each operation names a scope, and the row serving it declares that scope. */
TEST(scopes_match_document)
{
    size_t count = 0;
    const tg_route *routes = tg_routes(&count);
    for (size_t i = 0; i < op_count; i++) {
        if (ops[i].scope[0] == '\0')
            fprintf(stderr, "openapi.yaml: %s %s names no x-tensorgate-scope\n", ops[i].method,
                    ops[i].path);
        CHECK(ops[i].scope[0] != '\0');
        const char *method = strcmp(ops[i].method, "HEAD") == 0 ? "GET" : ops[i].method;
        for (size_t r = 0; r < count; r++) {
            char path[256];
            document_path(routes[r].pattern, path, sizeof path);
            if (strcmp(path, ops[i].path) != 0 || strcmp(routes[r].method, method) != 0)
                continue;
            const char *declared = scope_name(routes[r].auth);
            if (strcmp(declared, ops[i].scope) != 0)
                fprintf(stderr, "table.c: %s %s declares %s, openapi.yaml's %s says %s\n",
                        routes[r].method, routes[r].pattern, declared, ops[i].method, ops[i].scope);
            CHECK_STR(declared, ops[i].scope);
        }
    }
}

/* The Hub's error dialect is declared by the Hub routes, and by them only. */
TEST(hub_errors_flag)
{
    size_t count = 0;
    const tg_route *routes = tg_routes(&count);
    for (size_t r = 0; r < count; r++) {
        bool hub = strncmp(routes[r].pattern, "/api/", 5) == 0 ||
                   strncmp(routes[r].pattern, "/{org}/", 7) == 0 ||
                   strncmp(routes[r].pattern, "/datasets/", 10) == 0 ||
                   strncmp(routes[r].pattern, "/spaces/", 8) == 0;
        /* whoami answers its own 401 in the Hub's words */
        if (strcmp(routes[r].pattern, "/api/whoami-v2") == 0)
            hub = false;
        if (hub != ((routes[r].flags & TG_ROUTE_HUB_ERRORS) != 0))
            fprintf(stderr, "table.c: %s %s: the Hub error flag is %s\n", routes[r].method,
                    routes[r].pattern, hub ? "missing" : "set on a route of tensorgate's own");
        CHECK_EQ_U64(hub, (routes[r].flags & TG_ROUTE_HUB_ERRORS) != 0);
    }
}

TEST(rows_runnable)
{
    size_t count = 0;
    const tg_route *routes = tg_routes(&count);
    for (size_t r = 0; r < count; r++) {
        char why[128] = "";
        bool valid = tg_pattern_valid(routes[r].pattern, why, sizeof why);
        if (!valid)
            fprintf(stderr, "table.c: %s %s: %s\n", routes[r].method, routes[r].pattern, why);
        CHECK(valid);
        CHECK(routes[r].handle != NULL);
        if (routes[r].body == TG_BODY_STREAM)
            CHECK(routes[r].start != NULL && routes[r].feed != NULL && routes[r].cleanup != NULL);
        else
            CHECK(routes[r].start == NULL && routes[r].feed == NULL);
        /* a body to read only where the method has one; the one DELETE with a body is
         * the Hub's repository delete, whose clients send the repository in it */
        bool hub_delete = strcmp(routes[r].method, "DELETE") == 0 &&
                          strcmp(routes[r].pattern, "/api/repos/delete") == 0;
        if (strcmp(routes[r].method, "GET") == 0 ||
            (strcmp(routes[r].method, "DELETE") == 0 && !hub_delete))
            CHECK(routes[r].body == TG_BODY_NONE);
    }
}

/* A request built from a row's own pattern ("{x}" -> "x1", "{x*}" -> "d/x1") is
 * matched first by that row: no row above it hides it. */
TEST(rows_reachable)
{
    size_t count = 0;
    const tg_route *routes = tg_routes(&count);
    for (size_t r = 0; r < count; r++) {
        char url[512];
        size_t o = 0;
        for (const char *p = routes[r].pattern; *p != '\0' && o + 8 < sizeof url;) {
            if (*p != '{') {
                url[o++] = *p++;
                continue;
            }
            const char *close = strchr(p, '}');
            if (close == NULL)
                break;
            if (close[-1] == '*') {
                memcpy(url + o, "d/", 2);
                o += 2;
            }
            memcpy(url + o, "x1", 2);
            o += 2;
            p = close + 1;
        }
        url[o] = '\0';
        tg_segment segments[TG_SEGMENTS_MAX];
        int n = tg_split_path(url, segments, TG_SEGMENTS_MAX);
        CHECK(n > 0);
        size_t first = count;
        for (size_t i = 0; i < count && first == count; i++)
            if (strcmp(routes[i].method, routes[r].method) == 0 &&
                tg_match_pattern(routes[i].pattern, segments, n, NULL, NULL))
                first = i;
        if (first != r)
            fprintf(stderr, "table.c: %s %s (as %s) is matched by row %zu, not its own %zu\n",
                    routes[r].method, routes[r].pattern, url, first, r);
        CHECK_EQ_U64(first, r);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(document_read);
    RUN(table_matches_document);
    RUN(scopes_match_document);
    RUN(hub_errors_flag);
    RUN(rows_runnable);
    RUN(rows_reachable);
    return test_report(argv[0]);
}
