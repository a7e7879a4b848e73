/* The local data directory under the local blob store backend (blobstore_local.c):
 * its layout, locks, temp files and damage records. Only server/storage/ uses it;
 * everything above goes through blobstore.h.
 *
 * Layout: DATA/catalog.db, DATA/blobs/sha256/ab/<64 hex>, DATA/tmp/ (uploads in
 * flight). A blob is written to tmp/, fsynced, renamed into place, and its
 * directory fsynced; so a blob path either does not exist or holds complete
 * content whose SHA-256 is its name. Identical content is stored once. */
#ifndef TG_STORE_H
#define TG_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blobstore.h"
#include "sha256.h"

typedef struct tg_store {
    char root[4096];
    char tmp_dir[4200];
    char blob_dir[4200]; /* DATA/blobs/sha256 */
} tg_store;

/* Creates the layout if needed. err gets one sentence on failure. */
int tg_store_open(tg_store *store, const char *root, char *err, size_t err_len);

/* Locks in the data directory (flock, so they hold across processes and end with
 * the process):
 *  - serve.lock: the one `tensorgate serve` that owns the directory. tg_store_claim
 *    takes it without waiting (a second server is refused with a sentence in err)
 *    and then empties tmp/ (uploads a stopped server left). Returns the descriptor
 *    to keep open while serving, or -1.
 *  - blobs.lock: a blob that is committed (renamed into place, or found already
 *    there) and the catalog row that references it are made under a shared lock;
 *    gc decides "unreferenced" and removes a blob under the exclusive lock. So gc
 *    never removes a blob between its commit and its row, whichever process runs
 *    it. tg_store_lock_blobs returns a descriptor for tg_store_unlock, or -1 (with
 *    errno EWOULDBLOCK when !wait and the lock is held). */
int tg_store_claim(const tg_store *store, char *err, size_t err_len);
int tg_store_lock_blobs(const tg_store *store, bool exclusive, bool wait);
void tg_store_unlock(int fd);

/* A new temp file in tmp/: fd open for writing, path filled. */
int tg_store_temp_create(const tg_store *store, int *fd, char *path, size_t path_len);

/* Writes all of buf to fd (retries short writes).
 *
 * Fault injection (test builds only): with the test hook
 * TENSORGATE_TEST_ENOSPC_AT=N (test_hooks.h; read once, at the first write) the Nth
 * write of the process fails with ENOSPC, once. Writes are counted from 1: each write(2) of
 * tg_store_write_all and the temp file's fsync in tg_store_commit_blob. */
tg_store_status tg_store_write_all(int fd, const void *buf, size_t len);
/* The same at offset (pwrite(2); fd's file offset does not move), counted by the
 * same fault injection. With O_DIRECT on fd, EINVAL (a file system that takes the
 * flag but not the write) comes back as TG_STORE_ERROR with errno EINVAL. */
tg_store_status tg_store_pwrite_all(int fd, const void *buf, size_t len, uint64_t offset);

/* fsyncs the temp file, renames it to the blob named hex, fsyncs the directory.
 * Closes fd in every case. The temp file must hash to hex (the ingest hashed it as
 * it was written). A blob named hex that is already there is replaced by it,
 * atomically (rename over it): identical content stays one copy, and a damaged copy
 * (bit flip, truncation) is healed without re-reading it; its damage record goes. */
tg_store_status tg_store_commit_blob(const tg_store *store, int fd, const char *temp_path,
                                     const char *hex);

/* Closes fd (if >= 0) and removes the temp file. */
void tg_store_temp_discard(int fd, const char *temp_path);

/* DATA/blobs/sha256/ab/<hex>. Returns -1 if hex is not 64 lowercase hex digits. */
int tg_store_blob_path(const tg_store *store, const char *hex, char *path, size_t path_len);

/* Opens a blob read-only; -1 with errno set when absent. Readers that know the
 * catalog's size use tg_store_open_blob_checked. */
int tg_store_open_blob(const tg_store *store, const char *hex);

/* Opens a blob for reading and checks its size on disk (fstat) against size, the
 * catalog's: the one way the read paths open a blob. A missing or wrong-sized blob
 * is marked damaged. Returns the fd, or -1 with *check saying why (never OK). */
int tg_store_open_blob_checked(const tg_store *store, const char *hex, uint64_t size,
                               tg_blob_check *check);

/* Reads exactly len bytes at offset (retries short reads and EINTR). 0, or -1 with
 * errno: EIO when the file ends first (it is shorter than the catalog says; the
 * caller marks the blob damaged), EOVERFLOW when offset + len passes INT64_MAX. */
int tg_store_read_at(int fd, void *buf, size_t len, uint64_t offset);

/* Damaged blobs: a read path that finds a blob missing, of the wrong size or
 * ending early records it as DATA/damaged/<hex> (one line: what was found and
 * when) and logs an error line; `tensorgate fsck` lists the records, re-hashes
 * those blobs and removes the record of one that is whole again. A commit of the
 * same content replaces a damaged blob and removes its record. Marking is best
 * effort (a full disk may refuse the record; the log line still goes out). */
void tg_store_mark_damaged(const tg_store *store, const char *hex, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The record alone (no log line): what tg_store_mark_damaged writes. */
void tg_store_record_damage(const tg_store *store, const char *hex, const char *why);
/* True when hex has a damage record; why (may be NULL) gets its line. */
bool tg_store_damage_record(const tg_store *store, const char *hex, char *why, size_t why_len);
void tg_store_clear_damaged(const tg_store *store, const char *hex);
/* Calls visit for every damage record (a blob name); stops when visit returns nonzero. */
int tg_store_each_damaged(const tg_store *store, int (*visit)(void *ctx, const char *hex),
                          void *ctx);

/* Calls visit for every blob file name (64 hex) found; stops when visit returns nonzero. */
int tg_store_each_blob(const tg_store *store, int (*visit)(void *ctx, const char *hex), void *ctx);

/* Removes one blob. */
int tg_store_remove_blob(const tg_store *store, const char *hex);

#endif
