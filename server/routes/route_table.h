/* The routing table of the server: every route (method, pattern, body kind, the
 * scope it needs, its flags and its handler functions) in one table, in server/routes/table.c. The
 * HTTP layer (server/core/http.c) knows no handler: cmd/serve.c hands this table to tg_http_start,
 * which matches each request against it in order. The handlers themselves are declared in routes.h,
 * one resource per file. */
#ifndef TG_ROUTE_TABLE_H
#define TG_ROUTE_TABLE_H

#include <stddef.h>

#include "http.h"

/* The table, in matching order (the first pattern that matches with the right
 * method wins), and its length in *count. Static: never freed. */
const tg_route *tg_routes(size_t *count);

#endif
