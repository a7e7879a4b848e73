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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

typedef struct local_store {
    tg_blobstore base; /* first: a tg_blobstore * points here */
    tg_store dir;
    int claim_fd; /* serve.lock while claimed, else -1 */
} local_store;

/* Large writes bypass the page cache. Past its first DIRECT_AFTER bytes (written
 * through the page cache, as every small file is), a temp file is switched to
 * O_DIRECT and the rest goes to it in whole DIRECT_BLOCKs from aligned buffers, written
 * by a thread of the writer's own so that the receive path never waits on the disk
 * (it waits only when all DIRECT_SLOTS blocks are still being written); the tail
 * (under one block) is written through the page cache at commit, before the fsync.
 * Why: filling fresh page-cache pages is the most expensive part of an upload on a
 * machine whose free memory is not resident (a virtual machine: 3.6 s of system time
 * per GiB here), and an upload's bytes are seldom read back soon (docs/PERFORMANCE.md,
 * goal 5). A file system that refuses O_DIRECT (at fcntl, or with EINVAL at the
 * first write) keeps the page cache. */
#define DIRECT_AFTER ((uint64_t)4 << 20)
#define DIRECT_BLOCK ((size_t)1 << 20)
#define DIRECT_SLOTS 3u

typedef struct direct_writer {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    unsigned char *memory; /* DIRECT_SLOTS blocks, page-aligned (mmap) */
    uint64_t slot_offset[DIRECT_SLOTS];
    bool ready[DIRECT_SLOTS]; /* full: waiting for its write, or being written */
    unsigned fill;            /* the slot being filled (producer's) */
    size_t held;              /* bytes in it */
    uint64_t fill_offset;     /* the file offset of its first byte */
    unsigned next_write;      /* the slot the thread writes next */
    bool stop;                /* no more blocks: write what is ready, then end */
    tg_store_status status;   /* the first failed write's (sticky), or a cancel */
    int error;                /* its errno */
} direct_writer;

typedef struct local_writer {
    tg_blob_writer base;
    int fd;
    uint64_t written;      /* bytes written through the page cache so far */
    bool direct_tried;     /* past DIRECT_AFTER: direct was tried once */
    direct_writer *direct; /* non-NULL: the rest goes through it */
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

static void direct_off(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0 && (flags & O_DIRECT) != 0)
        (void)fcntl(fd, F_SETFL, flags & ~O_DIRECT);
}

/* One block at its offset; a file system that took O_DIRECT but refuses the write
 * gets it (and the rest of the file) through the page cache. */
static tg_store_status direct_write_block(int fd, const unsigned char *block, uint64_t offset)
{
    tg_store_status status = tg_store_pwrite_all(fd, block, DIRECT_BLOCK, offset);
    if (status == TG_STORE_ERROR && errno == EINVAL) {
        direct_off(fd);
        status = tg_store_pwrite_all(fd, block, DIRECT_BLOCK, offset);
    }
    return status;
}

static void *direct_main(void *arg)
{
    local_writer *w = arg;
    direct_writer *d = w->direct;
    pthread_mutex_lock(&d->lock);
    for (;;) {
        unsigned i = d->next_write;
        while (!d->ready[i] && !d->stop)
            pthread_cond_wait(&d->changed, &d->lock);
        if (!d->ready[i])
            break; /* stopped, nothing left */
        bool skip = d->status != TG_STORE_OK;
        pthread_mutex_unlock(&d->lock);
        tg_store_status status = TG_STORE_OK;
        int error = 0;
        if (!skip) {
            status =
                direct_write_block(w->fd, d->memory + (size_t)i * DIRECT_BLOCK, d->slot_offset[i]);
            error = errno;
        }
        pthread_mutex_lock(&d->lock);
        if (status != TG_STORE_OK && d->status == TG_STORE_OK) {
            d->status = status;
            d->error = error;
        }
        d->ready[i] = false;
        d->next_write = (i + 1) % DIRECT_SLOTS;
        pthread_cond_broadcast(&d->changed);
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

/* Switches w to O_DIRECT at w->written (a multiple of DIRECT_BLOCK) with its thread;
 * on any failure w stays on the page cache. */
static void direct_start(local_writer *w)
{
    w->direct_tried = true;
    direct_writer *d = calloc(1, sizeof *d);
    if (d == NULL)
        return;
    int flags = fcntl(w->fd, F_GETFL);
    /* mmap, not malloc: the blocks go back to the system when the upload ends (malloc
     * would keep them in its heap after its mmap threshold grew: RSS crept up by a
     * few MiB under a stream of uploads, bench/memory.sh) */
    void *memory = mmap(NULL, DIRECT_BLOCK * DIRECT_SLOTS, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) {
        free(d);
        return;
    }
    d->memory = memory;
    if (flags < 0 || fcntl(w->fd, F_SETFL, flags | O_DIRECT) != 0) {
        munmap(d->memory, DIRECT_BLOCK * DIRECT_SLOTS);
        free(d);
        return;
    }
    d->fill_offset = w->written;
    d->status = TG_STORE_OK;
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->changed, NULL);
    w->direct = d;
    if (pthread_create(&d->thread, NULL, direct_main, w) != 0) {
        w->direct = NULL;
        direct_off(w->fd);
        pthread_mutex_destroy(&d->lock);
        pthread_cond_destroy(&d->changed);
        munmap(d->memory, DIRECT_BLOCK * DIRECT_SLOTS);
        free(d);
    }
}

/* Ends the thread once the ready blocks are written (cancel: without writing
 * them), frees it, and leaves w->fd on the page cache. The status of the writes. */
static tg_store_status direct_stop(local_writer *w, bool cancel, size_t *tail, uint64_t *tail_at,
                                   unsigned char **tail_block)
{
    direct_writer *d = w->direct;
    pthread_mutex_lock(&d->lock);
    if (cancel && d->status == TG_STORE_OK)
        d->status = TG_STORE_ERROR;
    d->stop = true;
    pthread_cond_broadcast(&d->changed);
    pthread_mutex_unlock(&d->lock);
    pthread_join(d->thread, NULL);
    direct_off(w->fd);
    tg_store_status status = d->status;
    errno = d->error;
    *tail = d->held;
    *tail_at = d->fill_offset;
    *tail_block = d->memory + (size_t)d->fill * DIRECT_BLOCK;
    return status;
}

static void direct_free(local_writer *w)
{
    direct_writer *d = w->direct;
    pthread_mutex_destroy(&d->lock);
    pthread_cond_destroy(&d->changed);
    munmap(d->memory, DIRECT_BLOCK * DIRECT_SLOTS);
    free(d);
    w->direct = NULL;
}

/* Hands the full block to the thread and takes the next one, waiting while it is
 * still being written. The status of the writes so far. */
static tg_store_status direct_hand_over(direct_writer *d)
{
    pthread_mutex_lock(&d->lock);
    d->slot_offset[d->fill] = d->fill_offset;
    d->ready[d->fill] = true;
    pthread_cond_broadcast(&d->changed);
    d->fill = (d->fill + 1) % DIRECT_SLOTS;
    d->fill_offset += DIRECT_BLOCK;
    d->held = 0;
    while (d->ready[d->fill] && d->status == TG_STORE_OK)
        pthread_cond_wait(&d->changed, &d->lock);
    tg_store_status status = d->status;
    int error = d->error;
    pthread_mutex_unlock(&d->lock);
    errno = error;
    return status;
}

static tg_store_status local_write(tg_blob_writer *writer, const void *buf, size_t len)
{
    local_writer *w = (local_writer *)writer;
    const unsigned char *p = buf;
    if (w->direct == NULL) {
        size_t now = len;
        if (!w->direct_tried && w->written + len > DIRECT_AFTER)
            now = (size_t)(DIRECT_AFTER - w->written); /* up to the switch */
        tg_store_status status = tg_store_write_all(w->fd, p, now);
        if (status != TG_STORE_OK)
            return status;
        w->written += now;
        p += now;
        len -= now;
        if (len == 0)
            return TG_STORE_OK;
        direct_start(w);
        if (w->direct == NULL) {
            status = tg_store_write_all(w->fd, p, len);
            w->written += status == TG_STORE_OK ? len : 0;
            return status;
        }
    }
    direct_writer *d = w->direct;
    while (len > 0) {
        size_t n = DIRECT_BLOCK - d->held;
        if (n > len)
            n = len;
        memcpy(d->memory + (size_t)d->fill * DIRECT_BLOCK + d->held, p, n);
        d->held += n;
        p += n;
        len -= n;
        if (d->held == DIRECT_BLOCK) {
            tg_store_status status = direct_hand_over(d);
            if (status != TG_STORE_OK)
                return status;
        }
    }
    return TG_STORE_OK;
}

static tg_store_status local_write_commit(tg_blob_writer *writer, const char *hex)
{
    local_writer *w = (local_writer *)writer;
    if (w->direct != NULL) {
        size_t tail;
        uint64_t tail_at;
        unsigned char *tail_block;
        tg_store_status written = direct_stop(w, false, &tail, &tail_at, &tail_block);
        if (written == TG_STORE_OK && tail > 0)
            written = tg_store_pwrite_all(w->fd, tail_block, tail, tail_at);
        direct_free(w);
        if (written != TG_STORE_OK) {
            tg_store_temp_discard(w->fd, w->temp_path);
            free(w);
            return written;
        }
    }
    tg_store_status status =
        tg_store_commit_blob(&local(writer->store)->dir, w->fd, w->temp_path, hex);
    free(w);
    return status;
}

static void local_write_abort(tg_blob_writer *writer)
{
    local_writer *w = (local_writer *)writer;
    if (w->direct != NULL) {
        size_t tail;
        uint64_t tail_at;
        unsigned char *tail_block;
        (void)direct_stop(w, true, &tail, &tail_at, &tail_block);
        direct_free(w);
    }
    tg_store_temp_discard(w->fd, w->temp_path);
    free(w);
}

static tg_blob_reader *local_open(tg_blobstore *store, const char *hex, uint64_t size,
                                  tg_blob_check *check)
{
    tg_blob_reader *r = calloc(1, sizeof *r);
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
