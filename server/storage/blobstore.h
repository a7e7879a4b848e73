/* The blob store: immutable content named by the SHA-256 hex of its bytes, behind
 * a narrow interface with a backend (blobstore_backend.h), chosen by
 * tg_blobstore_open from a URL. Today that is the local directory
 * (blobstore_local.c over store.c: "file:DIR" or a plain path) or an S3-compatible
 * store (blobstore_s3.c: "s3://BUCKET[/PREFIX]"). Everything above
 * server/storage/ reaches blob bytes only through this header: it never names a
 * blob path.
 *
 * Writes: tg_blob_write_begin gives a writer; tg_blob_write appends; the caller
 * hashes as it writes and tg_blob_write_commit puts the bytes in under that
 * digest (the content is durable and complete before the name appears; a blob of
 * that name already there is replaced, which heals a damaged copy), or
 * tg_blob_write_abort drops them. Committing a blob and the catalog row that
 * references it happen under the shared commit lock; gc decides "unreferenced" and
 * removes under the exclusive one (tg_blobstore_lock, reclaim.h).
 *
 * Reads: tg_blob_open gives a reader of one blob, checked against the size the
 * catalog records; reads are ranged (tg_blob_read, tg_blob_read_at) and never
 * load a blob whole. On the local backend tg_blob_fd exposes the reader's file
 * descriptor so local reads may use pread or sendfile directly.
 *
 * Every function is safe from any thread; a writer or a reader is used by one
 * thread at a time. Damage records remember blobs a read found missing, of the
 * wrong size or cut short (`tensorgate fsck` re-hashes them).
 *
 * A store that cannot be reached now (S3: no answer, a timeout, a 5xx) fails with
 * errno EHOSTDOWN (TG_BLOB_UNAVAILABLE_ERRNO), so callers can answer 503. */
#ifndef TG_BLOBSTORE_H
#define TG_BLOBSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct tg_blobstore tg_blobstore;
typedef struct tg_blob_writer tg_blob_writer;
typedef struct tg_blob_reader tg_blob_reader;

typedef enum tg_store_status {
    TG_STORE_OK = 0,
    TG_STORE_NO_SPACE, /* ENOSPC / EDQUOT: the caller answers 507 */
    TG_STORE_ERROR,
} tg_store_status;

/* What opening a blob as the catalog describes it found. */
typedef enum tg_blob_check {
    TG_BLOB_OK = 0,
    TG_BLOB_MISSING,    /* no such blob */
    TG_BLOB_DAMAGED,    /* its size is not the catalog's, or a read ended early */
    TG_BLOB_UNREADABLE, /* it could not be opened otherwise (errno kept) */
} tg_blob_check;

/* True when text is exactly 64 lowercase hex digits: a blob name. */
int tg_is_sha256_hex(const char *text);

#define TG_BLOB_UNAVAILABLE_ERRNO EHOSTDOWN

/* What a remote backend needs beyond its URL (all optional; NULL/0: defaults). */
typedef struct tg_blobstore_options {
    const char *s3_endpoint; /* --s3-endpoint / TENSORGATE_S3_ENDPOINT; NULL: AWS's */
    const char *s3_region;   /* --s3-region / TENSORGATE_S3_REGION / AWS_REGION; NULL: us-east-1 */
    uint64_t max_blob;       /* the largest blob written (S3 part size: <= 10,000 parts) */
    bool gc_grace_set;       /* gc_grace given (else 3600 s) */
    uint64_t gc_grace;       /* seconds: gc leaves younger objects and uploads alone */
    bool download_redirect;  /* tg_blobstore_redirects: whole-file GETs answer 302 */
    const char *cache_dir;   /* a local read cache of ranges (S3), NULL: none */
    uint64_t cache_size;     /* its bound in bytes (0: 256 MiB) */

    /* The S3 credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: an s3://
     * store needs both; AWS_SESSION_TOKEN, NULL: none) and timeouts in seconds
     * (TENSORGATE_S3_CONNECT_TIMEOUT, 0: 5; TENSORGATE_S3_LOW_SPEED_TIME, 0: 15). */
    const char *s3_access_key_id;
    const char *s3_secret_access_key;
    const char *s3_session_token;
    long s3_connect_timeout;
    long s3_low_speed_time;
} tg_blobstore_options;

/* Opens the store url names: "file:DIR" or a plain path is the local directory
 * DIR (the data directory: blobs under DIR/blobs/, writes in flight under DIR/tmp/,
 * damage records under DIR/damaged/; created when missing); "s3://BUCKET[/PREFIX]"
 * is an S3-compatible bucket (endpoint, region and credentials from options: the
 * store reads no environment; cmd/blob_options.h fills them); any other "scheme://"
 * is refused with a sentence in err. 0 or -1. tg_blobstore_open is open_options
 * with NULL. */
int tg_blobstore_open(const char *url, tg_blobstore **out, char *err, size_t err_len);
int tg_blobstore_open_options(const char *url, const tg_blobstore_options *options,
                              tg_blobstore **out, char *err, size_t err_len);

/* A presigned URL (SigV4 query string, valid expires seconds) of blob hex, for a
 * redirect: 0, or -1 with errno (ENOTSUP on a backend without URLs). */
int tg_blobstore_presign(tg_blobstore *store, const char *hex, unsigned expires, char *url,
                         size_t url_len);
/* gc's sweep of what uploads left: on S3, aborts the multipart uploads and removes
 * the temporary objects older than the gc grace period (a replica that died
 * mid-upload); the local store has nothing to do (its claim empties tmp/). The
 * number swept, or -1 when the store could not be listed. */
long tg_blobstore_sweep(tg_blobstore *store);
/* True when the store was opened with download_redirect and can presign. */
bool tg_blobstore_redirects(const tg_blobstore *store);
/* The read cache's hits and misses (both 0 without a cache). */
void tg_blobstore_cache_counts(const tg_blobstore *store, uint64_t *hits, uint64_t *misses);
/* Frees the store and releases its claim; no writer or reader may be open. */
void tg_blobstore_close(tg_blobstore *store);
/* The backend's name: "file" or "s3". */
const char *tg_blobstore_kind(const tg_blobstore *store);

/* Claims the store for the one server that writes through it, until close (local:
 * the data directory's serve.lock, taken without waiting, then the writes a stopped
 * server left in flight are removed). A second claim, in this process or another,
 * fails with a sentence in err. The maintenance commands (gc, fsck) do not claim:
 * they run beside a server. 0 or -1. */
int tg_blobstore_claim(tg_blobstore *store, char *err, size_t err_len);

/* The commit lock (across processes): shared while a blob is committed and its
 * catalog row written, exclusive while gc decides a blob is unreferenced and
 * removes it. Returns a handle for tg_blobstore_unlock, or -1 (errno EWOULDBLOCK
 * when !wait and the lock is held). */
int tg_blobstore_lock(tg_blobstore *store, bool exclusive, bool wait);
void tg_blobstore_unlock(tg_blobstore *store, int handle);

/* ---- writes ---- */

/* A new writer; *out NULL unless TG_STORE_OK. */
tg_store_status tg_blob_write_begin(tg_blobstore *store, tg_blob_writer **out);
/* Appends all of buf.
 *
 * Fault injection (test builds only): with the test hook
 * TENSORGATE_TEST_ENOSPC_AT=N (test_hooks.h; read once, at the first write) the Nth
 * write of the process fails with ENOSPC, once. On the local backend writes are counted from 1:
 * each write(2) of an append and the fsync of a commit. */
tg_store_status tg_blob_write(tg_blob_writer *writer, const void *buf, size_t len);
/* Puts what was written in as the blob named hex (the caller hashed it as it was
 * written) and frees the writer, whatever the answer; a failed commit leaves no
 * blob and nothing half-written. The caller holds the shared commit lock. */
tg_store_status tg_blob_write_commit(tg_blob_writer *writer, const char *hex);
/* Drops what was written and frees the writer; NULL is allowed. */
void tg_blob_write_abort(tg_blob_writer *writer);

/* ---- reads ---- */

/* size for a reader whose size is not checked (fsck: it compares what it reads). */
#define TG_BLOB_SIZE_UNCHECKED UINT64_MAX

/* Opens the blob named hex for reading. size is the catalog's size of it: a
 * missing blob or one of another size is recorded as damaged (*check MISSING or
 * DAMAGED, errno ENOENT or EIO). TG_BLOB_SIZE_UNCHECKED checks and records nothing.
 * Returns the reader, or NULL with *check saying why (never OK) and errno set. */
tg_blob_reader *tg_blob_open(tg_blobstore *store, const char *hex, uint64_t size,
                             tg_blob_check *check);
/* The blob's size as stored, and its name. */
uint64_t tg_blob_size(const tg_blob_reader *reader);
const char *tg_blob_name(const tg_blob_reader *reader);
/* Reads up to len bytes at offset: the count (0 at or past the end), or -1 with
 * errno (EINTR is retried). */
ssize_t tg_blob_read(tg_blob_reader *reader, void *buf, size_t len, uint64_t offset);
/* Tells the reader that the bytes [offset, offset + length) will be read next, in
 * order, from offset on: a backend that fetches over the network asks for exactly
 * those, in one transfer started at the first read (S3: one ranged GET, no 4 MiB
 * window first; the local backend ignores it). Reads elsewhere still work, as
 * without it. */
void tg_blob_read_span(tg_blob_reader *reader, uint64_t offset, uint64_t length);
/* Reads exactly len bytes at offset: 0, or -1 with errno: EIO when the blob ends
 * first (it is shorter than the catalog says; the caller marks it damaged),
 * EOVERFLOW when offset + len passes INT64_MAX. */
int tg_blob_read_at(tg_blob_reader *reader, void *buf, size_t len, uint64_t offset);
/* The reader's file descriptor on the local backend (for pread and sendfile;
 * owned by the reader, valid until tg_blob_close), -1 on a backend without one. */
int tg_blob_fd(const tg_blob_reader *reader);
/* NULL is allowed. */
void tg_blob_close(tg_blob_reader *reader);

/* ---- stat, delete, list (gc) ---- */

/* The stored size of hex: 0, or -1 with errno (ENOENT when there is no such blob). */
int tg_blob_stat(tg_blobstore *store, const char *hex, uint64_t *size);
/* Removes one blob: 0, or -1 with errno (ENOENT when there was none). The caller
 * holds the exclusive commit lock (reclaim.h). */
int tg_blob_remove(tg_blobstore *store, const char *hex);
/* Calls visit for every blob name stored; stops when visit returns nonzero. 0, or
 * -1 when the listing could not be read. */
int tg_blob_each(tg_blobstore *store, int (*visit)(void *ctx, const char *hex), void *ctx);

/* ---- health, for /readyz ---- */

/* 0 when the store can be reached now, with *free_bytes the room left for new
 * blobs (UINT64_MAX when the backend has no such limit); -1 (errno) when not. */
int tg_blobstore_space(tg_blobstore *store, uint64_t *free_bytes);

/* ---- damage records ---- */

/* Records hex as damaged (one line: what was found and when) and logs an error
 * line; best effort (a full disk may refuse the record; the log line still goes
 * out). A commit of the same content removes the record. */
void tg_blob_mark_damaged(tg_blobstore *store, const char *hex, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* True when hex has a damage record; why (may be NULL) gets its line. */
bool tg_blob_damage_record(tg_blobstore *store, const char *hex, char *why, size_t why_len);
void tg_blob_clear_damaged(tg_blobstore *store, const char *hex);
/* Calls visit for every damage record (a blob name); stops when visit returns
 * nonzero. 0, or -1 when the records could not be listed. */
int tg_blob_each_damaged(tg_blobstore *store, int (*visit)(void *ctx, const char *hex), void *ctx);

#endif
