/* Content-addressed blob store on local disk (see store.h for the invariants). */
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io.h"
#include "log.h"
#include "sha256.h"
#include "test_hooks.h"

int tg_is_sha256_hex(const char *text)
{
    size_t i;
    for (i = 0; text[i] != '\0'; i++) {
        char c = text[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return 0;
    }
    return i == TG_SHA256_HEX_LEN;
}

static int make_dir(const char *path)
{
    if (mkdir(path, 0755) == 0 || errno == EEXIST)
        return 0;
    return -1;
}

static int fsync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Removes everything in tmp/: uploads that were in flight when the server stopped. */
static void empty_dir(const char *path)
{
    DIR *dir = opendir(path);
    if (dir == NULL)
        return;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
            continue;
        unlinkat(dirfd(dir), entry->d_name, 0);
    }
    closedir(dir);
}

int tg_store_open(tg_store *store, const char *root, char *err, size_t err_len)
{
    memset(store, 0, sizeof *store);
    if (strlen(root) >= sizeof store->root - 64) {
        snprintf(err, err_len, "data directory path is too long");
        return -1;
    }
    snprintf(store->root, sizeof store->root, "%s", root);
    snprintf(store->tmp_dir, sizeof store->tmp_dir, "%s/tmp", root);
    snprintf(store->blob_dir, sizeof store->blob_dir, "%s/blobs/sha256", root);
    char blobs[4200];
    snprintf(blobs, sizeof blobs, "%s/blobs", root);
    if (make_dir(root) != 0 || make_dir(blobs) != 0 || make_dir(store->blob_dir) != 0 ||
        make_dir(store->tmp_dir) != 0) {
        snprintf(err, err_len, "cannot create the data directory %s: %s", root, strerror(errno));
        return -1;
    }
    return 0;
}

/* An open descriptor of DATA/<name>, created if needed; -1 on failure. */
static int open_lock_file(const tg_store *store, const char *name)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", store->root, name);
    return open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
}

int tg_store_claim(const tg_store *store, char *err, size_t err_len)
{
    int fd = open_lock_file(store, "serve.lock");
    if (fd < 0) {
        snprintf(err, err_len, "cannot open %s/serve.lock: %s", store->root, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int saved = errno;
        close(fd);
        if (saved == EWOULDBLOCK)
            snprintf(err, err_len,
                     "another tensorgate serve is using the data directory %s (it holds "
                     "%s/serve.lock); stop it or choose another --data",
                     store->root, store->root);
        else
            snprintf(err, err_len, "cannot lock %s/serve.lock: %s", store->root, strerror(saved));
        return -1;
    }
    /* Only the owner may do this: tmp/ holds the uploads in flight of a running server. */
    empty_dir(store->tmp_dir);
    return fd;
}

int tg_store_lock_blobs(const tg_store *store, bool exclusive, bool wait)
{
    int fd = open_lock_file(store, "blobs.lock");
    if (fd < 0)
        return -1;
    int how = (exclusive ? LOCK_EX : LOCK_SH) | (wait ? 0 : LOCK_NB);
    int rc;
    do
        rc = flock(fd, how);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

void tg_store_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* closing the only descriptor of the open file releases its flock */
}

int tg_store_temp_create(const tg_store *store, int *fd, char *path, size_t path_len)
{
    int n = snprintf(path, path_len, "%s/upload-XXXXXX", store->tmp_dir);
    if (n < 0 || (size_t)n >= path_len)
        return -1;
    *fd = mkostemp(path, O_CLOEXEC);
    return *fd < 0 ? -1 : 0;
}

/* ---- write fault injection (tests only; see store.h) ---- */

static pthread_once_t enospc_once = PTHREAD_ONCE_INIT;
static atomic_ulong enospc_at;    /* the write to fail, counting from 1; 0: none */
static atomic_ulong enospc_count; /* writes counted so far in this process */

/* The test hook ENOSPC_AT=N (test_hooks.h) */
static void enospc_read_environment(void)
{
    const char *spec = tg_test_hook(TG_HOOK_ENOSPC_AT);
    if (spec == NULL || *spec < '0' || *spec > '9')
        return;
    char *end = NULL;
    unsigned long nth = strtoul(spec, &end, 10);
    if (*end == '\0')
        atomic_store(&enospc_at, nth);
}

/* True (errno ENOSPC) when this write is the one a test asked to fail. */
static bool injected_enospc(void)
{
    pthread_once(&enospc_once, enospc_read_environment);
    unsigned long at = atomic_load_explicit(&enospc_at, memory_order_relaxed);
    if (at == 0)
        return false;
    if (atomic_fetch_add(&enospc_count, 1) + 1 != at)
        return false;
    errno = ENOSPC;
    return true;
}

static tg_store_status status_of_errno(void)
{
    return (errno == ENOSPC || errno == EDQUOT) ? TG_STORE_NO_SPACE : TG_STORE_ERROR;
}

/* write (offset NULL: at the file position) or pwrite at *offset, until all is written */
static tg_store_status write_loop(int fd, const void *buf, size_t len, const uint64_t *offset)
{
    const char *p = buf;
    uint64_t at = offset != NULL ? *offset : 0;
    while (len > 0) {
        ssize_t n = injected_enospc() ? -1
                    : offset != NULL  ? pwrite(fd, p, len, (off_t)at)
                                      : write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return status_of_errno();
        }
        p += n;
        len -= (size_t)n;
        at += (uint64_t)n;
    }
    return TG_STORE_OK;
}

tg_store_status tg_store_write_all(int fd, const void *buf, size_t len)
{
    return write_loop(fd, buf, len, NULL);
}

tg_store_status tg_store_pwrite_all(int fd, const void *buf, size_t len, uint64_t offset)
{
    return write_loop(fd, buf, len, &offset);
}

void tg_store_temp_discard(int fd, const char *temp_path)
{
    if (fd >= 0)
        close(fd);
    if (temp_path != NULL && temp_path[0] != '\0')
        unlink(temp_path);
}

int tg_store_blob_path(const tg_store *store, const char *hex, char *path, size_t path_len)
{
    if (!tg_is_sha256_hex(hex))
        return -1;
    int n = snprintf(path, path_len, "%s/%.2s/%s", store->blob_dir, hex, hex);
    return (n < 0 || (size_t)n >= path_len) ? -1 : 0;
}

tg_store_status tg_store_commit_blob(const tg_store *store, int fd, const char *temp_path,
                                     const char *hex)
{
    char dir[4300], final_path[4400];
    if (tg_store_blob_path(store, hex, final_path, sizeof final_path) != 0) {
        tg_store_temp_discard(fd, temp_path);
        return TG_STORE_ERROR;
    }
    snprintf(dir, sizeof dir, "%s/%.2s", store->blob_dir, hex);
    /* The bytes are durable before the name appears, so a crash never leaves a
     * blob name over partial content. */
    struct stat temp_st;
    if (injected_enospc() || fsync(fd) != 0 || fstat(fd, &temp_st) != 0) {
        tg_store_status status = status_of_errno();
        tg_store_temp_discard(fd, temp_path);
        return status;
    }
    close(fd);
    if (make_dir(dir) != 0) {
        tg_store_status status = status_of_errno();
        unlink(temp_path);
        return status;
    }
    /* Content-addressed: the temp file was hashed to hex while it was written, so it
     * is a whole copy of the blob. It goes in by rename even when a blob of that name
     * is already there: one copy of identical content stays (the old inode lives on
     * for readers that have it open), and a damaged one (bit flip, truncation) is
     * healed, without re-reading what is on disk. */
    struct stat st;
    if (lstat(final_path, &st) == 0 && (uint64_t)st.st_size != (uint64_t)temp_st.st_size)
        tg_log(TG_LOG_WARN,
               "blob %s on disk has %llu bytes, not %llu: replacing it with the new copy", hex,
               (unsigned long long)st.st_size, (unsigned long long)temp_st.st_size);
    if (rename(temp_path, final_path) != 0) {
        tg_store_status status = status_of_errno();
        unlink(temp_path);
        return status;
    }
    if (fsync_dir(dir) != 0)
        return status_of_errno();
    tg_store_clear_damaged(store, hex);
    return TG_STORE_OK;
}

int tg_store_open_blob(const tg_store *store, const char *hex)
{
    char path[4400];
    if (tg_store_blob_path(store, hex, path, sizeof path) != 0) {
        errno = EINVAL;
        return -1;
    }
    return open(path, O_RDONLY | O_CLOEXEC);
}

int tg_store_open_blob_checked(const tg_store *store, const char *hex, uint64_t size,
                               tg_blob_check *check)
{
    int fd = tg_store_open_blob(store, hex);
    if (fd < 0) {
        int saved = errno;
        *check = saved == ENOENT ? TG_BLOB_MISSING : TG_BLOB_UNREADABLE;
        if (saved == ENOENT)
            tg_store_mark_damaged(store, hex, "missing (the catalog says %llu bytes)",
                                  (unsigned long long)size);
        errno = saved;
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int saved = errno;
        close(fd);
        *check = TG_BLOB_UNREADABLE;
        errno = saved;
        return -1;
    }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != size) {
        close(fd);
        *check = TG_BLOB_DAMAGED;
        tg_store_mark_damaged(store, hex, "%llu bytes on disk, the catalog says %llu",
                              (unsigned long long)st.st_size, (unsigned long long)size);
        errno = EIO;
        return -1;
    }
    *check = TG_BLOB_OK;
    return fd;
}

int tg_store_read_at(int fd, void *buf, size_t len, uint64_t offset)
{
    return tg_pread_all(fd, buf, len, offset);
}

/* DATA/damaged/<hex>; -1 when hex is not a blob name. */
static int damage_path(const tg_store *store, const char *hex, char *path, size_t path_len)
{
    if (!tg_is_sha256_hex(hex))
        return -1;
    int n = snprintf(path, path_len, "%s/damaged/%s", store->root, hex);
    return (n < 0 || (size_t)n >= path_len) ? -1 : 0;
}

void tg_store_mark_damaged(const tg_store *store, const char *hex, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    tg_log(TG_LOG_ERROR, "blob %s is damaged: %s; run tensorgate fsck (or upload the file again)",
           hex, why);
    tg_store_record_damage(store, hex, why);
}

void tg_store_record_damage(const tg_store *store, const char *hex, const char *why)
{
    char dir[4300], path[4400];
    if (damage_path(store, hex, path, sizeof path) != 0)
        return;
    snprintf(dir, sizeof dir, "%s/damaged", store->root);
    if (make_dir(dir) != 0)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    char line[320];
    time_t now = time(NULL);
    struct tm tm;
    char stamp[32] = "";
    if (gmtime_r(&now, &tm) != NULL)
        strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int n = snprintf(line, sizeof line, "%s %s\n", stamp, why);
    if (n > 0)
        (void)tg_store_write_all(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    close(fd);
}

bool tg_store_damage_record(const tg_store *store, const char *hex, char *why, size_t why_len)
{
    char path[4400];
    if (damage_path(store, hex, path, sizeof path) != 0)
        return false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    if (why != NULL && why_len > 0) {
        ssize_t n = read(fd, why, why_len - 1);
        why[n > 0 ? (size_t)n : 0] = '\0';
        why[strcspn(why, "\n")] = '\0';
    }
    close(fd);
    return true;
}

void tg_store_clear_damaged(const tg_store *store, const char *hex)
{
    char path[4400];
    if (damage_path(store, hex, path, sizeof path) == 0 && unlink(path) == 0)
        tg_log(TG_LOG_INFO, "blob %s is whole again; its damage record is removed", hex);
}

int tg_store_each_damaged(const tg_store *store, int (*visit)(void *ctx, const char *hex),
                          void *ctx)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/damaged", store->root);
    DIR *dir = opendir(path);
    if (dir == NULL)
        return errno == ENOENT ? 0 : -1;
    struct dirent *entry;
    int stop = 0;
    while (!stop && (entry = readdir(dir)) != NULL)
        if (tg_is_sha256_hex(entry->d_name))
            stop = visit(ctx, entry->d_name);
    closedir(dir);
    return 0;
}

int tg_store_each_blob(const tg_store *store, int (*visit)(void *ctx, const char *hex), void *ctx)
{
    DIR *top = opendir(store->blob_dir);
    if (top == NULL)
        return -1;
    struct dirent *prefix;
    int stop = 0;
    while (!stop && (prefix = readdir(top)) != NULL) {
        if (strlen(prefix->d_name) != 2 || prefix->d_name[0] == '.')
            continue;
        char sub[4300];
        snprintf(sub, sizeof sub, "%s/%.2s", store->blob_dir, prefix->d_name);
        DIR *dir = opendir(sub);
        if (dir == NULL)
            continue;
        struct dirent *entry;
        while (!stop && (entry = readdir(dir)) != NULL) {
            if (tg_is_sha256_hex(entry->d_name) && strncmp(entry->d_name, prefix->d_name, 2) == 0)
                stop = visit(ctx, entry->d_name);
        }
        closedir(dir);
    }
    closedir(top);
    return 0;
}

int tg_store_remove_blob(const tg_store *store, const char *hex)
{
    char path[4400];
    if (tg_store_blob_path(store, hex, path, sizeof path) != 0)
        return -1;
    return unlink(path);
}
