/* Streaming ingest: the gate, SHA-256 and (for uploads) a temp file, fed in one
 * pass from libmicrohttpd's upload callback. Memory does not grow with the body:
 * the gate buffers at most the header (bounded by --max-header) or a sidecar. */
#ifndef TG_UPLOAD_H
#define TG_UPLOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "http.h"
#include "resources.h"
#include "sha256.h"

typedef enum tg_ingest_state {
    TG_INGEST_OPEN,      /* still reading */
    TG_INGEST_REFUSED,   /* the gate refused, or (storing ingest) its refusal is certain:
                          * see st_gate_verdict and verdict_pending */
    TG_INGEST_TOO_LARGE, /* more than --max-body */
    TG_INGEST_NO_SPACE,  /* disk full while writing the temp file */
    TG_INGEST_FAILED,    /* I/O or allocation failure */
    /* the header memory budget refused (budget.refused says whose): 429 quota_exceeded
     * or 503 resource_exhausted, connection closed */
    TG_INGEST_OVER_BUDGET,
} tg_ingest_state;

typedef struct tg_ingest {
    st_gate *gate;
    tg_sha256 sha;          /* a failed update shows at tg_ingest_digest */
    tg_blob_writer *writer; /* the blob being written; NULL when not storing (scan) or dropped */
    uint64_t declared;      /* Content-Length, or ST_FILE_SIZE_UNKNOWN (chunked) */
    uint64_t seen;          /* body bytes accepted into the gate/hash */
    uint64_t max_body;
    uint64_t drained; /* bytes dropped after the ingest stopped */
    uint64_t drain_limit;
    bool hash_after_stop;   /* scan: the verdict's sha256 covers the whole body */
    bool stop_when_certain; /* upload: stop storing once st_gate_refusal_certain() */
    bool verdict_pending;   /* REFUSED while the gate waits for the end to name the
                             * format: the drained rest still feeds the gate */
    tg_ingest_state state;
    tg_header_budget budget; /* the gate's buffer is charged to the client and the server */
} tg_ingest;

/* with_file: write to a temp file in the store; such an ingest also stops (temp file
 * deleted, nothing more written or hashed) as soon as the refusal is certain, before
 * the gate's final verdict (stop_when_certain). Returns -1 on allocation/I-O failure. */
int tg_ingest_init(tg_ingest *ingest, tg_request *req, st_gate_kind kind, uint64_t declared,
                   bool with_file);
/* Answers an ingest stopped as TG_INGEST_OVER_BUDGET (429 or 503, with the numbers). */
void tg_ingest_respond_over_budget(tg_ingest *ingest, tg_request *req);
/* Consumes one chunk. Sets req->close_now when too much was drained after a stop. */
void tg_ingest_feed(tg_ingest *ingest, tg_request *req, const uint8_t *data, size_t len);
/* At the end of the body: runs st_gate_finish when still open or the verdict is pending. */
void tg_ingest_finish(tg_ingest *ingest);
/* SHA-256 hex of the bytes hashed. Returns 0, or -1 (hex "") when the digest failed:
 * the caller answers 500 internal. */
int tg_ingest_digest(tg_ingest *ingest, char hex[65]);
void tg_ingest_free(tg_ingest *ingest);

#endif
