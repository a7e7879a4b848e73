/* The audit log's writer (docs/SECURITY.md, "The audit log"): every answer the
 * responders of request.c give goes past tg_audit_answer just before it is queued.
 * A write (any method but GET and HEAD) on a route of the table, and an authorization
 * refusal (401, 403) on any route, becomes one record in the catalog
 * (tg_catalog_audit_append), written in the request's own thread before the client
 * sees the answer; a successful read costs one comparison and is not recorded.
 *
 * When the record cannot be written (the catalog down or full), the answer still goes
 * out as it was (the change, if any, is already committed: a 5xx now would make a
 * client repeat a write that happened), the whole record is logged at error level
 * ("audit: record not written: ..."), and tensorgate_audit_failures_total counts it.
 *
 * This file calls nothing of request.c or auth.c (request.c calls it): it reads the
 * request's fields and libmicrohttpd's headers itself. */
#ifndef TG_AUDIT_H
#define TG_AUDIT_H

#include <stdbool.h>

#include "request.h"

/* True when an answer of this status to req is recorded. */
bool tg_audit_due(const tg_request *req, unsigned status);

/* Records req's answer (status, req->reason) in the catalog; response (NULL when the
 * answer is written on the socket) gets the X-Request-Id header. */
void tg_audit_answer(tg_request *req, unsigned status, struct MHD_Response *response);

#endif
