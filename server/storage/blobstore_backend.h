/* The blob store backend interface: what a storage engine implements to hold the
 * blobs of blobstore.h. A backend fills one tg_blobstore_ops table and embeds
 * struct tg_blobstore as the first member of its state (and tg_blob_writer,
 * tg_blob_reader as the first member of its writers and readers); tg_blobstore_open
 * (blobstore_open.c) chooses it from the URL ("file:DIR" or a path:
 * blobstore_local.c; "s3://...": blobstore_s3.c). blobstore.c dispatches every
 * public call and adds what needs no backend (tg_blob_read_at's loop, formatting damage records).
 * Each operation means what blobstore.h says of the public function of the same
 * name. Only server/storage/ includes this header. */
#ifndef TG_BLOBSTORE_BACKEND_H
#define TG_BLOBSTORE_BACKEND_H

#include "blobstore.h"
#include "sha256.h"

typedef struct tg_blobstore_ops {
    const char *kind; /* "file", "s3" */
    void (*close)(tg_blobstore *store);
    int (*claim)(tg_blobstore *store, char *err, size_t err_len);
    int (*lock)(tg_blobstore *store, bool exclusive, bool wait);
    void (*unlock)(tg_blobstore *store, int handle);

    tg_store_status (*write_begin)(tg_blobstore *store, tg_blob_writer **out);
    tg_store_status (*write)(tg_blob_writer *writer, const void *buf, size_t len);
    /* frees the writer in every case */
    tg_store_status (*write_commit)(tg_blob_writer *writer, const char *hex);
    void (*write_abort)(tg_blob_writer *writer);

    /* fills the reader's common part (store, size, fd, hex) */
    tg_blob_reader *(*open)(tg_blobstore *store, const char *hex, uint64_t size,
                            tg_blob_check *check);
    /* one read: may return fewer than len bytes; 0 at the end */
    ssize_t (*read)(tg_blob_reader *reader, void *buf, size_t len, uint64_t offset);
    void (*reader_close)(tg_blob_reader *reader);

    int (*stat)(tg_blobstore *store, const char *hex, uint64_t *size);
    int (*remove)(tg_blobstore *store, const char *hex);
    int (*each)(tg_blobstore *store, int (*visit)(void *ctx, const char *hex), void *ctx);
    int (*space)(tg_blobstore *store, uint64_t *free_bytes);

    /* why is the formatted sentence; the log line is blobstore.c's */
    void (*mark_damaged)(tg_blobstore *store, const char *hex, const char *why);
    bool (*damage_record)(tg_blobstore *store, const char *hex, char *why, size_t why_len);
    void (*clear_damaged)(tg_blobstore *store, const char *hex);
    int (*each_damaged)(tg_blobstore *store, int (*visit)(void *ctx, const char *hex), void *ctx);
} tg_blobstore_ops;

struct tg_blobstore {
    const tg_blobstore_ops *ops;
};

struct tg_blob_writer {
    tg_blobstore *store;
};

struct tg_blob_reader {
    tg_blobstore *store;
    uint64_t size; /* as stored */
    int fd;        /* the local backend's descriptor, else -1 */
    char hex[TG_SHA256_HEX_LEN + 1];
    /* tg_blob_read_span: the bytes [span_start, span_end) will be read in order
     * (span_end 0: not told); the backend sets both to 0 at open */
    uint64_t span_start, span_end;
};

/* The local-directory backend (blobstore_local.c) over the data directory dir. */
int tg_blobstore_local_open(const char *dir, tg_blobstore **out, char *err, size_t err_len);
/* The S3 backend (blobstore_s3.c) for url "s3://BUCKET[/PREFIX]". */
int tg_blobstore_s3_open(const char *url, const tg_blobstore_options *options, tg_blobstore **out,
                         char *err, size_t err_len);

#endif
