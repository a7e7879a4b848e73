/* The HTTP side of the ingest pipeline (server/ingest/pipeline.h), shared by the
 * upload (PUT .../files/{path}) and scan (POST /v1/scan) routes: a request body fed
 * from libmicrohttpd's upload callback, the server's limits (--max-body,
 * --drain-limit, --max-header, --refuse-nonfinite) and the gate's header memory
 * charged to the client and the server (--header-memory-per-client,
 * --header-memory). */
#ifndef TG_UPLOAD_H
#define TG_UPLOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "http.h"
#include "pipeline.h"
#include "resources.h"

typedef struct tg_body_ingest {
    tg_ingest ingest;
    tg_header_budget budget; /* the gate's buffer is charged to the client and the server */
} tg_body_ingest;

/* Starts the pipeline on req's body (declared: Content-Length, or
 * ST_FILE_SIZE_UNKNOWN). with_file: an upload, which stores the body in a temp file,
 * stops (temp file deleted, nothing more written or hashed) as soon as its refusal
 * is certain, and is refused for a body that ends short of its Content-Length; else
 * a scan, which stores nothing and hashes the whole body. body must not move while
 * the ingest runs (the gate holds &body->budget). name: the file's path
 * (st_gate_config.name: names that mark code are refused), or NULL; it must outlive
 * the ingest. allow_code: the namespace's code policy admits code (an upload into a
 * namespace that allows it; st_gate_config.allow_code). Returns -1 on allocation or I/O failure
 * (errno kept); tg_ingest_abort(&body->ingest) frees it either way. */
int tg_body_ingest_begin(tg_body_ingest *body, tg_request *req, st_gate_kind kind, const char *name,
                         uint64_t declared, bool with_file, bool allow_code);
/* Feeds one chunk of the body. Sets req->close_now when the rest should not be read
 * (over the header memory budget, or too much drained after a stop). */
tg_ingest_state tg_body_ingest_feed(tg_body_ingest *body, tg_request *req, const uint8_t *data,
                                    size_t len);
/* Answers an ingest stopped as TG_INGEST_OVER_BUDGET (429 or 503, with the numbers). */
void tg_body_ingest_respond_over_budget(tg_body_ingest *body, tg_request *req);

#endif
