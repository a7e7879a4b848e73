/* libmicrohttpd glue: starts and stops the daemon with the router (a routing table
 * given at start, matched in order: 404/405, parameters, the route's scope checked
 * before its handler: auth.h), and its metrics. The request each handler sees and the
 * one way to answer it are request.h's, included here for the handlers. The table
 * itself lives above, in server/routes/ (route_table.h): nothing here names a handler. */
#ifndef TG_HTTP_H
#define TG_HTTP_H

#include <stddef.h>

#include "request.h"

/* Starts the daemon on config->listen_host:listen_port with the routing table
 * routes[0..route_count) (kept, not copied: it must outlive the server; the first
 * pattern that matches with the right method wins, one that matches with another
 * method gives 405); fills server->port. Every pattern must pass tg_pattern_valid. */
int tg_http_start(tg_server *server, const tg_route *routes, size_t route_count, char *err,
                  size_t err_len);
void tg_http_stop(tg_server *server);

/* Metrics (Prometheus text, /metrics). */
void tg_metrics_rejection(tg_server *server, const char *reason);
char *tg_metrics_render(tg_server *server); /* malloc'd */

#endif
