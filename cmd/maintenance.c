/* tensorgate gc | fsck: the maintenance of a data directory's blobs, safe beside a
 * running server: gc deletes the blobs no catalog row references, fsck re-hashes
 * every blob against the catalog. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "blob_options.h"
#include "blobstore.h"
#include "catalog.h"
#include "commands.h"
#include "data_dir.h"
#include "reclaim.h"
#include "sha256.h"

static void data_only_usage(FILE *out, const char *command, bool dry_run)
{
    fprintf(out, "usage: tensorgate %s [--data DIR]%s\n", command, dry_run ? " [--dry-run]" : "");
    if (dry_run)
        fprintf(out, "Deletes the blobs no catalog row references (--dry-run: lists them).\n"
                     "Exit status: 0 done, 1 a blob could not be removed, 2 a usage error,\n");
    else
        fprintf(out, "Re-hashes every blob against the catalog.\n"
                     "Exit status: 0 all whole, 1 a blob is bad, 2 the catalog or SHA-256 failed\n"
                     "or a usage error,\n");
    fprintf(out, "3 DIR is not a tensorgate data directory (nothing is created).\n"
                 "DIR defaults to $TENSORGATE_DATA, else ./data.\n");
    fputs(tg_blob_options_usage(), out);
}

/* NULL with *exit_status set: the command ends (--help: 0; a usage error: 2). */
static const char *parse_data_only(int argc, char **argv, const char *command, bool *dry_run,
                                   int *exit_status)
{
    const char *data_dir = tg_data_dir_default();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            data_only_usage(stdout, command, dry_run != NULL);
            *exit_status = 0;
            return NULL;
        }
        if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) {
            data_dir = argv[++i];
        } else if (dry_run && strcmp(argv[i], "--dry-run") == 0) {
            *dry_run = true;
        } else {
            data_only_usage(stderr, command, dry_run != NULL);
            *exit_status = 2;
            return NULL;
        }
    }
    return data_dir;
}

typedef struct gc_state {
    tg_blobstore *blobs;
    tg_catalog *catalog;
    bool dry_run;
    unsigned long removed, kept, errors;
    unsigned long long bytes;
} gc_state;

/* One blob: decided and removed under the exclusive blobs lock (reclaim.h), so gc
 * is safe beside a running server. */
static int gc_visit(void *ctx, const char *hex)
{
    gc_state *gc = ctx;
    uint64_t size = 0;
    if (tg_blob_stat(gc->blobs, hex, &size) != 0)
        size = 0;
    switch (tg_blob_reclaim(gc->blobs, gc->catalog, hex, gc->dry_run)) {
    case TG_RECLAIM_KEPT:
        gc->kept++;
        break;
    case TG_RECLAIM_REMOVED:
        printf("%s %s\n", gc->dry_run ? "would remove" : "removed", hex);
        gc->removed++;
        gc->bytes += size;
        break;
    case TG_RECLAIM_ERROR:
        fprintf(stderr, "tensorgate gc: %s: %s\n", hex, strerror(errno));
        gc->errors++;
        break;
    }
    return 0;
}

int tg_cmd_gc(int argc, char **argv)
{
    bool dry_run = false;
    int exit_status = 0;
    char err[512];
    if (tg_blob_options_take(&argc, argv, err, sizeof err) != 0) {
        fprintf(stderr, "tensorgate gc: %s\n%s", err, tg_blob_options_usage());
        return 2;
    }
    const char *data_dir = parse_data_only(argc, argv, "gc", &dry_run, &exit_status);
    if (data_dir == NULL)
        return exit_status;
    gc_state gc = {.dry_run = dry_run};
    tg_blobstore *blobs = NULL;
    tg_catalog *catalog = NULL;
    int opened = tg_data_open(data_dir, &blobs, &catalog, TG_DATA_EXISTING, "gc", NULL);
    if (opened != 0)
        return opened == TG_EXIT_NOT_DATA_DIR ? opened : 1;
    gc.blobs = blobs;
    gc.catalog = catalog;
    /* Hub LFS objects uploaded and never committed within a day (schema 17): their
     * rows go first, so their blobs are unreferenced below */
    if (!dry_run) {
        char before[TG_TIME_LEN];
        time_t at = time(NULL) - 24 * 3600;
        struct tm tm;
        gmtime_r(&at, &tm);
        strftime(before, sizeof before, "%Y-%m-%dT%H:%M:%SZ", &tm);
        if (tg_catalog_hub_pending_expire(catalog, before, NULL, NULL) != TG_CAT_OK) {
            fprintf(stderr, "tensorgate gc: the expired Hub LFS uploads could not be removed\n");
            gc.errors++;
        }
    }
    if (tg_blob_each(blobs, gc_visit, &gc) != 0) {
        fprintf(stderr, "tensorgate gc: the blob store could not be listed: %s\n", strerror(errno));
        gc.errors++;
    }
    /* uploads a stopped replica left in an S3 store (past --gc-grace) */
    long swept = dry_run ? 0 : tg_blobstore_sweep(blobs);
    if (swept < 0)
        gc.errors++;
    else if (swept > 0)
        fprintf(stderr, "tensorgate gc: %ld stale upload(s) removed\n", swept);
    tg_data_close(blobs, catalog);
    fprintf(stderr, "tensorgate gc: %lu blob(s) %s (%llu bytes), %lu kept, %lu error(s)\n",
            gc.removed, dry_run ? "unreferenced" : "removed", gc.bytes, gc.kept, gc.errors);
    return gc.errors ? 1 : 0;
}

typedef struct fsck_state {
    tg_blobstore *blobs;
    tg_catalog *catalog;
    unsigned long checked, bad, healed;
    bool failed; /* a blob could not be hashed in this process: exit 2 */
} fsck_state;

/* One blob's verdict; a damaged one is recorded (blobstore.h), a whole one's record goes. */
static void fsck_bad(fsck_state *fsck, const char *sha256, bool recorded, const char *why)
{
    fsck->bad++;
    if (!recorded)
        tg_blob_mark_damaged(fsck->blobs, sha256, "fsck: %s", why);
}

static int fsck_visit(void *ctx, const char *sha256, uint64_t size)
{
    fsck_state *fsck = ctx;
    fsck->checked++;
    char record[320];
    bool recorded = tg_blob_damage_record(fsck->blobs, sha256, record, sizeof record);
    if (recorded)
        printf("recorded-damaged %s (%s)\n", sha256, record);
    tg_blob_check check;
    tg_blob_reader *blob = tg_blob_open(fsck->blobs, sha256, TG_BLOB_SIZE_UNCHECKED, &check);
    if (blob == NULL) {
        printf("missing %s\n", sha256);
        fsck_bad(fsck, sha256, recorded, "missing");
        return 0;
    }
    tg_sha256 sha;
    (void)tg_sha256_init(&sha, "fsck");
    static unsigned char buf[1 << 20];
    uint64_t total = 0;
    ssize_t n;
    while ((n = tg_blob_read(blob, buf, sizeof buf, total)) > 0) {
        (void)tg_sha256_update(&sha, buf, (size_t)n); /* a failure shows at the final */
        total += (uint64_t)n;
    }
    tg_blob_close(blob);
    char hex[65];
    bool hashed = tg_sha256_final_hex(&sha, hex) == 0;
    if (!hashed) {
        /* the hash failed, not the blob: nothing is marked, fsck fails */
        printf("hash-failed %s (SHA-256 failed in this process)\n", sha256);
        fsck->failed = true;
    } else if (n < 0) {
        printf("unreadable %s\n", sha256);
        fsck_bad(fsck, sha256, recorded, "unreadable");
    } else if (total != size) {
        printf("size-mismatch %s (catalog %llu, blob %llu)\n", sha256, (unsigned long long)size,
               (unsigned long long)total);
        fsck_bad(fsck, sha256, recorded, "size differs from the catalog's");
    } else if (strcmp(hex, sha256) != 0) {
        printf("hash-mismatch %s (content hashes to %s)\n", sha256, hex);
        fsck_bad(fsck, sha256, recorded, "content hashes to another digest");
    } else if (recorded) {
        /* repaired since (or a false alarm): whole now, the record goes */
        printf("whole-again %s (its damage record is removed)\n", sha256);
        tg_blob_clear_damaged(fsck->blobs, sha256);
        fsck->healed++;
    }
    return 0;
}

/* A damage record of a blob no file references any more (gc removed it): dropped. */
static int fsck_record_visit(void *ctx, const char *sha256)
{
    fsck_state *fsck = ctx;
    bool referenced = true;
    if (tg_catalog_blob_referenced(fsck->catalog, sha256, &referenced) == TG_CAT_OK &&
        !referenced) {
        printf("stale-record %s (no file uses this blob; the record is removed)\n", sha256);
        tg_blob_clear_damaged(fsck->blobs, sha256);
    }
    return 0;
}

int tg_cmd_fsck(int argc, char **argv)
{
    int exit_status = 0;
    char err[512];
    if (tg_blob_options_take(&argc, argv, err, sizeof err) != 0) {
        fprintf(stderr, "tensorgate fsck: %s\n%s", err, tg_blob_options_usage());
        return 2;
    }
    const char *data_dir = parse_data_only(argc, argv, "fsck", NULL, &exit_status);
    if (data_dir == NULL)
        return exit_status;
    tg_blobstore *blobs = NULL;
    tg_catalog *catalog = NULL;
    int opened = tg_data_open(data_dir, &blobs, &catalog, TG_DATA_EXISTING, "fsck", NULL);
    if (opened != 0)
        return opened == TG_EXIT_NOT_DATA_DIR ? opened : 2;
    fsck_state fsck = {.blobs = blobs, .catalog = catalog};
    tg_cat_status status = tg_catalog_blob_each(catalog, fsck_visit, &fsck);
    if (status == TG_CAT_OK)
        tg_blob_each_damaged(blobs, fsck_record_visit, &fsck);
    tg_data_close(blobs, catalog);
    if (status != TG_CAT_OK) {
        fprintf(stderr, "tensorgate fsck: the catalog could not be read\n");
        return 2;
    }
    fprintf(stderr, "tensorgate fsck: %lu blob(s) checked, %lu bad, %lu whole again\n",
            fsck.checked, fsck.bad, fsck.healed);
    if (fsck.failed) {
        fprintf(stderr, "tensorgate fsck: SHA-256 failed; some blobs were not checked\n");
        return 2;
    }
    return fsck.bad ? 1 : 0;
}
