/* Unit tests for server/core/audit.c: which answers the audit log records
 * (tg_audit_due). What a record holds, over real HTTP, is tested with the route
 * (tests/unit/server/routes/audit.c) and by tests/audit/run.sh.
 * - a write method (POST, PUT, DELETE, PATCH, anything but GET and HEAD) on a route
 *   is recorded whatever its status;
 * - GET and HEAD are recorded only when refused (401, 403);
 * - a request that matched no route, or a server without a catalog, is not. */
#include <string.h>

#include "audit.h"
#include "test.h"

TEST(what_is_recorded)
{
    tg_server server;
    memset(&server, 0, sizeof server);
    server.catalog = (tg_catalog *)&server; /* any non-NULL: tg_audit_due only tests it */
    tg_route route = {"GET", "/v1/models", TG_BODY_NONE, TG_AUTH_READ, 0, NULL, NULL, NULL, NULL};
    tg_request req;
    memset(&req, 0, sizeof req);
    req.server = &server;
    req.route = &route;

    static const char *const writes[] = {"POST", "PUT", "DELETE", "PATCH"};
    for (size_t i = 0; i < sizeof writes / sizeof writes[0]; i++) {
        req.method = writes[i];
        CHECK(tg_audit_due(&req, 200));
        CHECK(tg_audit_due(&req, 201));
        CHECK(tg_audit_due(&req, 404));
        CHECK(tg_audit_due(&req, 503));
    }
    req.method = "GET";
    CHECK(!tg_audit_due(&req, 200));
    CHECK(!tg_audit_due(&req, 404));
    CHECK(tg_audit_due(&req, 401));
    CHECK(tg_audit_due(&req, 403));
    req.method = "HEAD";
    req.is_head = true;
    CHECK(!tg_audit_due(&req, 200));
    CHECK(tg_audit_due(&req, 403));

    req.is_head = false;
    req.method = "POST";
    req.route = NULL; /* 404 or 405 before any route */
    CHECK(!tg_audit_due(&req, 404));
    CHECK(!tg_audit_due(&req, 401));
    req.route = &route;
    server.catalog = NULL;
    CHECK(!tg_audit_due(&req, 201));
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(what_is_recorded);
    return test_report(argv[0]);
}
