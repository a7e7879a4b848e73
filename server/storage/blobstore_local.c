/* The local-directory blob store backend (blobstore_backend.h) over the data
 * directory's layout and locks of store.h: blobs in DIR/blobs/sha256/ab/<hex>,
 * writes in flight as temp files in DIR/tmp/, damage records in DIR/damaged/, the
 * claim as DIR/serve.lock and the commit lock as DIR/blobs.lock (flock). A reader
 * is an open descriptor, exposed by tg_blob_fd for pread and sendfile. */
#include "blobstore.h"
#include "blobstore_backend.h"
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

typedef struct local_store {
    tg_blobstore base; /* first: a tg_blobstore * points here */
    tg_store dir;
    int claim_fd; /* serve.lock while claimed, else -1 */
} local_store;

typedef struct local_writer {
    tg_blob_writer base;
    int fd;
    char temp_path[4400];
} local_writer;

static const tg_blobstore_ops local_ops;

static local_store *local(tg_blobstore *store)
{
    return (local_store *)store;
}

static void local_close(tg_blobstore *store)
{
    local_store *s = local(store);
    tg_store_unlock(s->claim_fd);
    free(s);
}

static int local_claim(tg_blobstore *store, char *err, size_t err_len)
{
    local_store *s = local(store);
    if (s->claim_fd >= 0) {
        snprintf(err, err_len, "the data directory %s is already claimed by this process",
                 s->dir.root);
        return -1;
    }
    s->claim_fd = tg_store_claim(&s->dir, err, err_len);
    return s->claim_fd < 0 ? -1 : 0;
}

static int local_lock(tg_blobstore *store, bool exclusive, bool wait)
{
    return tg_store_lock_blobs(&local(store)->dir, exclusive, wait);
}

static void local_unlock(tg_blobstore *store, int handle)
{
    (void)store;
    tg_store_unlock(handle);
}

static tg_store_status local_write_begin(tg_blobstore *store, tg_blob_writer **out)
{
    local_writer *w = calloc(1, sizeof *w);
    if (w == NULL)
        return TG_STORE_ERROR;
    w->base.store = store;
    if (tg_store_temp_create(&local(store)->dir, &w->fd, w->temp_path, sizeof w->temp_path) != 0) {
        tg_store_status status =
            (errno == ENOSPC || errno == EDQUOT) ? TG_STORE_NO_SPACE : TG_STORE_ERROR;
        free(w);
        return status;
    }
    *out = &w->base;
    return TG_STORE_OK;
}

static tg_store_status local_write(tg_blob_writer *writer, const void *buf, size_t len)
{
    return tg_store_write_all(((local_writer *)writer)->fd, buf, len);
}

static tg_store_status local_write_commit(tg_blob_writer *writer, const char *hex)
{
    local_writer *w = (local_writer *)writer;
    tg_store_status status =
        tg_store_commit_blob(&local(writer->store)->dir, w->fd, w->temp_path, hex);
    free(w);
    return status;
}

static void local_write_abort(tg_blob_writer *writer)
{
    local_writer *w = (local_writer *)writer;
    tg_store_temp_discard(w->fd, w->temp_path);
    free(w);
}

static tg_blob_reader *local_open(tg_blobstore *store, const char *hex, uint64_t size,
                                  tg_blob_check *check)
{
    tg_blob_reader *r = malloc(sizeof *r);
    if (r == NULL) {
        *check = TG_BLOB_UNREADABLE;
        errno = ENOMEM;
        return NULL;
    }
    local_store *s = local(store);
    int fd;
    if (size != TG_BLOB_SIZE_UNCHECKED) {
        fd = tg_store_open_blob_checked(&s->dir, hex, size, check);
    } else {
        struct stat st;
        fd = tg_store_open_blob(&s->dir, hex);
        *check = fd < 0 && errno == ENOENT ? TG_BLOB_MISSING : TG_BLOB_UNREADABLE;
        if (fd >= 0 && fstat(fd, &st) != 0) {
            int saved = errno;
            close(fd);
            fd = -1;
            errno = saved;
        }
        size = fd >= 0 ? (uint64_t)st.st_size : 0;
    }
    if (fd < 0) {
        int saved = errno;
        free(r);
        errno = saved;
        return NULL;
    }
    *check = TG_BLOB_OK;
    r->store = store;
    r->size = size;
    r->fd = fd;
    snprintf(r->hex, sizeof r->hex, "%s", hex);
    return r;
}

static ssize_t local_read(tg_blob_reader *reader, void *buf, size_t len, uint64_t offset)
{
    return pread(reader->fd, buf, len, (off_t)offset);
}

static void local_reader_close(tg_blob_reader *reader)
{
    close(reader->fd);
    free(reader);
}

static int local_stat(tg_blobstore *store, const char *hex, uint64_t *size)
{
    char path[4400];
    struct stat st;
    if (tg_store_blob_path(&local(store)->dir, hex, path, sizeof path) != 0) {
        errno = EINVAL;
        return -1;
    }
    if (stat(path, &st) != 0)
        return -1;
    *size = (uint64_t)st.st_size;
    return 0;
}

static int local_remove(tg_blobstore *store, const char *hex)
{
    return tg_store_remove_blob(&local(store)->dir, hex);
}

static int local_each(tg_blobstore *store, int (*visit)(void *ctx, const char *hex), void *ctx)
{
    return tg_store_each_blob(&local(store)->dir, visit, ctx);
}

static int local_space(tg_blobstore *store, uint64_t *free_bytes)
{
    struct statvfs vfs;
    if (statvfs(local(store)->dir.blob_dir, &vfs) != 0)
        return -1;
    *free_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    return 0;
}

static void local_mark_damaged(tg_blobstore *store, const char *hex, const char *why)
{
    tg_store_record_damage(&local(store)->dir, hex, why);
}

static bool local_damage_record(tg_blobstore *store, const char *hex, char *why, size_t why_len)
{
    return tg_store_damage_record(&local(store)->dir, hex, why, why_len);
}

static void local_clear_damaged(tg_blobstore *store, const char *hex)
{
    tg_store_clear_damaged(&local(store)->dir, hex);
}

static int local_each_damaged(tg_blobstore *store, int (*visit)(void *ctx, const char *hex),
                              void *ctx)
{
    return tg_store_each_damaged(&local(store)->dir, visit, ctx);
}

static const tg_blobstore_ops local_ops = {
    .kind = "file",
    .close = local_close,
    .claim = local_claim,
    .lock = local_lock,
    .unlock = local_unlock,
    .write_begin = local_write_begin,
    .write = local_write,
    .write_commit = local_write_commit,
    .write_abort = local_write_abort,
    .open = local_open,
    .read = local_read,
    .reader_close = local_reader_close,
    .stat = local_stat,
    .remove = local_remove,
    .each = local_each,
    .space = local_space,
    .mark_damaged = local_mark_damaged,
    .damage_record = local_damage_record,
    .clear_damaged = local_clear_damaged,
    .each_damaged = local_each_damaged,
};

int tg_blobstore_local_open(const char *dir, tg_blobstore **out, char *err, size_t err_len)
{
    *out = NULL;
    if (dir[0] == '\0') {
        snprintf(err, err_len, "the local blob store needs a directory path");
        return -1;
    }
    local_store *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    s->base.ops = &local_ops;
    s->claim_fd = -1;
    if (tg_store_open(&s->dir, dir, err, err_len) != 0) {
        free(s);
        return -1;
    }
    *out = &s->base;
    return 0;
}
