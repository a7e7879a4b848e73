/* The one ingest pipeline: every file the server stores, and every body it scans,
 * goes through it in one pass. The gate (lib/st_gate.h) judges the bytes as they
 * come, SHA-256 hashes them, and a storing ingest writes them through a blob
 * writer of the blob store (blobstore.h); memory does not grow with the size (the gate buffers at
 * most a header, bounded by max_header, or a sidecar). A refusal stops the work at once: the writer
 * is dropped, nothing more is written (nor hashed, unless hash_after_stop). At the end the verdict
 * decides, and an accepted file is committed: described (kind, tensor counts, NaN/Inf stats), made
 * a durable blob under its digest, and recorded by the caller while the shared blobs lock keeps gc
 * from coming between the blob and its row.
 *
 * Used by uploads and scans (server/routes/upload.c, server/routes/scan.c) and by
 * conversion jobs (server/jobs/convert_job.c); it is the only user of the blob
 * store's write API (tg_blob_write_*) above server/storage/. It knows no HTTP: it takes
 * bytes (begin, feed, finish, then commit or abort) and reports a state, and for a
 * failure what failed, which its callers map to their answers (a 507 for
 * TG_INGEST_NO_SPACE, a recorded refusal for TG_INGEST_REFUSED, ...). Quotas and
 * budgets are the caller's: it passes the gate's memory budget hooks in.
 *
 * Fault injection, for tests: the writer's writes and the commit's fsync count
 * for TENSORGATE_TEST_ENOSPC_AT (server/storage/blobstore.h), the digest is named by the caller
 * (TENSORGATE_TEST_SHA256_FAIL, common/sha256.h). */
#ifndef TG_PIPELINE_H
#define TG_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blobstore.h"
#include "catalog.h"
#include "sha256.h"
#include "st_gate.h"

typedef enum tg_ingest_state {
    TG_INGEST_OPEN,            /* taking bytes; after tg_ingest_finish: accepted, ready to commit */
    TG_INGEST_REFUSED,         /* the gate refused (st_gate_verdict says why), or, with
                                * stop_when_certain, its refusal is certain and the format's
                                * name waits for the end (verdict_pending) */
    TG_INGEST_TOO_LARGE,       /* more than max_bytes were fed */
    TG_INGEST_LENGTH_MISMATCH, /* check_length: the source ended at another size than
                                * it declared (tg_ingest_received says where) */
    TG_INGEST_NO_SPACE,        /* the disk is full (the temp file's writes or the commit) */
    TG_INGEST_FAILED,          /* an I/O, allocation or digest failure: error says which */
    /* the gate's memory budget said no (its owner knows whose): the rest of the
     * source is not read (abandon) */
    TG_INGEST_OVER_BUDGET,
    TG_INGEST_COMMITTED, /* tg_ingest_commit stored the blob and ran the record step */
} tg_ingest_state;

/* What failed, for TG_INGEST_FAILED and TG_INGEST_NO_SPACE (os_errno has the errno). */
typedef enum tg_ingest_error {
    TG_INGEST_ERROR_NONE,
    TG_INGEST_ERROR_MEMORY, /* an allocation failed (the gate's, the SHA-256's, the stats') */
    TG_INGEST_ERROR_TEMP,   /* the temp file could not be made */
    TG_INGEST_ERROR_WRITE,  /* writing the temp file failed */
    TG_INGEST_ERROR_DIGEST, /* the SHA-256 failed: there is no digest to store it under */
    TG_INGEST_ERROR_LOCK,   /* the blobs lock could not be taken */
    TG_INGEST_ERROR_COMMIT, /* the blob could not be made durable or renamed into place */
} tg_ingest_error;

typedef struct tg_ingest_config {
    st_gate_kind kind;
    const char *name;      /* the file's path in its version (st_gate_config.name), or NULL;
                              borrowed for the ingest's life */
    uint64_t declared;     /* the size the source announced, or ST_FILE_SIZE_UNKNOWN */
    uint64_t max_bytes;    /* bytes taken at most (past it: TG_INGEST_TOO_LARGE); UINT64_MAX: any */
    uint64_t max_header;   /* the gate's bound on a safetensors header's N */
    bool refuse_nonfinite; /* NaN/Inf in floating tensors is a refusal */
    bool allow_code;       /* the namespace's code policy admits code (st_gate_config) */
    /* the gate's memory budget (st_gate_config), or NULL: none */
    bool (*reserve)(void *budget_context, size_t bytes);
    void (*release)(void *budget_context, size_t bytes);
    void *budget_context;
    tg_blobstore *store;     /* where the bytes are kept; NULL: nowhere (a scan) */
    const char *digest_name; /* the SHA-256's static name ("upload", "scan", "convert") */
    /* stop storing as soon as the refusal is certain (st_gate_refusal_certain), before
     * the gate's final verdict: the rest still feeds the gate (bounded), which names
     * the format at the end (verdict_pending) */
    bool stop_when_certain;
    bool hash_after_stop; /* the digest covers every byte fed, also after a stop */
    bool check_length;    /* a source that ends at another size than declared is
                           * TG_INGEST_LENGTH_MISMATCH (when the size decides, a
                           * size-based refusal becomes the mismatch too) */
    uint64_t drain_limit; /* bytes dropped after a stop before abandon is set */
} tg_ingest_config;

/* Bytes hashed on the feeding thread before the digest moves to a thread of its own. */
#define TG_INGEST_HASH_THREAD_AFTER ((uint64_t)4 * 1024 * 1024)

struct tg_hash_ring;

typedef struct tg_ingest {
    tg_ingest_config config;
    st_gate *gate;
    tg_sha256 sha; /* a failed update shows at the digest */
    /* past TG_INGEST_HASH_THREAD_AFTER bytes the SHA-256 runs on its own thread, fed
     * through a bounded ring of buffers (pipeline.c), so receiving, gating and writing
     * overlap with hashing; NULL before that, or when the thread could not start */
    struct tg_hash_ring *hasher;
    uint64_t hashed_inline; /* bytes hashed on the caller's thread */
    uint64_t hashed;        /* bytes hashed in all (the digest covers them, in order) */
    tg_blob_writer *writer; /* the blob being written; NULL when not storing or dropped */
    uint64_t seen;          /* bytes accepted into the gate, the hash and the temp file */
    uint64_t drained;       /* bytes fed and dropped after a stop */
    bool verdict_pending;   /* REFUSED while the gate waits for the end to name the format */
    bool abandon;           /* the rest of the source should not be read: over the budget,
                             * or more than drain_limit dropped after a stop */
    bool begun;             /* tg_ingest_begin ran: tg_ingest_abort has work */
    bool finished;          /* tg_ingest_finish ran */
    tg_ingest_state state;
    tg_ingest_error error;
    int os_errno;
} tg_ingest;

/* Starts an ingest: the gate, the digest and (with config->store) a temp file.
 * Returns 0, or -1 (state TG_INGEST_FAILED, error MEMORY, DIGEST or TEMP, errno
 * kept: EMFILE is not "out of memory"). Either way tg_ingest_abort frees it; a
 * zeroed tg_ingest may be aborted too. */
int tg_ingest_begin(tg_ingest *ingest, const tg_ingest_config *config);

/* Takes the next len bytes of the source. While OPEN they go through the gate, the
 * hash and the temp file; after a stop (or the finish) they are counted and dropped
 * (a pending verdict's gate still reads them, hash_after_stop still hashes them).
 * Returns the state. */
tg_ingest_state tg_ingest_feed(tg_ingest *ingest, const void *data, size_t len);

/* The source ended: its final verdict (the gate's st_gate_finish, or the pending
 * verdict's, when the source was whole), or TG_INGEST_LENGTH_MISMATCH (check_length).
 * Returns the state: OPEN means accepted. A second call changes nothing. */
tg_ingest_state tg_ingest_finish(tg_ingest *ingest);

/* Bytes fed in all (taken and dropped). */
uint64_t tg_ingest_received(const tg_ingest *ingest);

/* The SHA-256 hex of the bytes hashed (ends the digest). 0, or -1 with hex "": the
 * digest failed and the caller answers a server error. */
int tg_ingest_digest(tg_ingest *ingest, char hex[65]);

/* The SHA-256 hex of the whole source, for the record of a refusal: 0 when the
 * source ended (tg_ingest_finish ran), at its declared size if it declared one, and
 * every byte fed was hashed (a gate refusal with hash_after_stop keeps hashing; a stop
 * for size or budget does not); else -1 with hex "". Ends the digest. */
int tg_ingest_whole_digest(tg_ingest *ingest, char hex[65]);

/* The commit's record step, called with the blob durable and the shared blobs lock
 * held: the caller writes the catalog row(s) that reference file (stats: the JSON
 * text of its per-tensor [nan, inf] pairs, "[]" for a sidecar). A crash before it
 * leaves only an unreferenced blob, which gc removes. */
typedef void (*tg_ingest_record_fn)(void *ctx, const tg_file_record *file, const char *stats);

/* Commits a storing ingest that finished accepted (state OPEN after
 * tg_ingest_finish): file gets path, size, sha256, kind ("code" for code the policy admitted, with
 * code_reason; else "safetensors", "json" or
 * "text") and the tensor facts; what was written becomes the blob named by its
 * digest (tg_blob_write_commit, under the shared blobs lock); then record(ctx, file, stats)
 * runs under that lock. Returns 0 (state COMMITTED), or -1 with state NO_SPACE or
 * FAILED and error set (DIGEST, MEMORY, LOCK, COMMIT): nothing stored, no temp file
 * left, record not called. */
int tg_ingest_commit(tg_ingest *ingest, const char *path, tg_file_record *file,
                     tg_ingest_record_fn record, void *ctx);

/* Ends an ingest, whatever its state: the temp file (if any) goes, the gate and the
 * digest are freed. Safe twice, and on a zeroed tg_ingest. */
void tg_ingest_abort(tg_ingest *ingest);

#endif
