/* The blob store's backend-independent part (blobstore.h): every call goes
 * through the backend's operation table (blobstore_backend.h); the exact-read
 * loop and the damage record's sentence and log line are here, once for every
 * backend, which call back into them. Which backend a URL opens is
 * blobstore_open.c's: this file names none. */
#include "blobstore.h"
#include "blobstore_backend.h"
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void tg_blobstore_close(tg_blobstore *store)
{
    if (store != NULL)
        store->ops->close(store);
}

const char *tg_blobstore_kind(const tg_blobstore *store)
{
    return store->ops->kind;
}

int tg_blobstore_claim(tg_blobstore *store, char *err, size_t err_len)
{
    return store->ops->claim(store, err, err_len);
}

int tg_blobstore_lock(tg_blobstore *store, bool exclusive, bool wait)
{
    return store->ops->lock(store, exclusive, wait);
}

void tg_blobstore_unlock(tg_blobstore *store, int handle)
{
    if (handle >= 0)
        store->ops->unlock(store, handle);
}

tg_store_status tg_blob_write_begin(tg_blobstore *store, tg_blob_writer **out)
{
    *out = NULL;
    return store->ops->write_begin(store, out);
}

tg_store_status tg_blob_write(tg_blob_writer *writer, const void *buf, size_t len)
{
    return writer->store->ops->write(writer, buf, len);
}

tg_store_status tg_blob_write_commit(tg_blob_writer *writer, const char *hex)
{
    return writer->store->ops->write_commit(writer, hex);
}

void tg_blob_write_abort(tg_blob_writer *writer)
{
    if (writer != NULL)
        writer->store->ops->write_abort(writer);
}

tg_blob_reader *tg_blob_open(tg_blobstore *store, const char *hex, uint64_t size,
                             tg_blob_check *check)
{
    if (!tg_is_sha256_hex(hex)) {
        *check = TG_BLOB_UNREADABLE;
        errno = EINVAL;
        return NULL;
    }
    return store->ops->open(store, hex, size, check);
}

uint64_t tg_blob_size(const tg_blob_reader *reader)
{
    return reader->size;
}

const char *tg_blob_name(const tg_blob_reader *reader)
{
    return reader->hex;
}

int tg_blob_fd(const tg_blob_reader *reader)
{
    return reader->fd;
}

void tg_blob_read_span(tg_blob_reader *reader, uint64_t offset, uint64_t length)
{
    if (offset >= reader->size || length == 0)
        return;
    reader->span_start = offset;
    reader->span_end = length > reader->size - offset ? reader->size : offset + length;
}

ssize_t tg_blob_read(tg_blob_reader *reader, void *buf, size_t len, uint64_t offset)
{
    if (offset > (uint64_t)INT64_MAX) {
        errno = EOVERFLOW;
        return -1;
    }
    for (;;) {
        ssize_t n = reader->store->ops->read(reader, buf, len, offset);
        if (n >= 0 || errno != EINTR)
            return n;
    }
}

int tg_blob_read_at(tg_blob_reader *reader, void *buf, size_t len, uint64_t offset)
{
    if (offset > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - offset) {
        errno = EOVERFLOW;
        return -1;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t n = tg_blob_read(reader, (char *)buf + done, len - done, offset + done);
        if (n < 0)
            return -1;
        if (n == 0) {
            errno = EIO; /* the blob ends before the catalog says it does */
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}

void tg_blob_close(tg_blob_reader *reader)
{
    if (reader != NULL)
        reader->store->ops->reader_close(reader);
}

int tg_blob_stat(tg_blobstore *store, const char *hex, uint64_t *size)
{
    if (!tg_is_sha256_hex(hex)) {
        errno = EINVAL;
        return -1;
    }
    return store->ops->stat(store, hex, size);
}

int tg_blob_remove(tg_blobstore *store, const char *hex)
{
    if (!tg_is_sha256_hex(hex)) {
        errno = EINVAL;
        return -1;
    }
    return store->ops->remove(store, hex);
}

int tg_blob_each(tg_blobstore *store, int (*visit)(void *ctx, const char *hex), void *ctx)
{
    return store->ops->each(store, visit, ctx);
}

int tg_blobstore_space(tg_blobstore *store, uint64_t *free_bytes)
{
    return store->ops->space(store, free_bytes);
}

void tg_blob_mark_damaged(tg_blobstore *store, const char *hex, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    tg_log(TG_LOG_ERROR, "blob %s is damaged: %s; run tensorgate fsck (or upload the file again)",
           hex, why);
    if (tg_is_sha256_hex(hex))
        store->ops->mark_damaged(store, hex, why);
}

bool tg_blob_damage_record(tg_blobstore *store, const char *hex, char *why, size_t why_len)
{
    return tg_is_sha256_hex(hex) && store->ops->damage_record(store, hex, why, why_len);
}

void tg_blob_clear_damaged(tg_blobstore *store, const char *hex)
{
    if (tg_is_sha256_hex(hex))
        store->ops->clear_damaged(store, hex);
}

int tg_blob_each_damaged(tg_blobstore *store, int (*visit)(void *ctx, const char *hex), void *ctx)
{
    return store->ops->each_damaged(store, visit, ctx);
}
