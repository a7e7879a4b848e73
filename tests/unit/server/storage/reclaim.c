/* Unit tests for server/storage/reclaim.c on a temporary data directory (catalog +
 * blob store): a blob no file row or job file row references goes, one that is
 * referenced stays, a dry run removes nothing, the gc walk (every blob of the store
 * through tg_blob_reclaim, as `tensorgate gc` does) keeps exactly the referenced
 * ones, the decision waits for a commit holding the shared blobs lock, and a failing
 * lock or catalog removes nothing. */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blobstore.h"
#include "catalog.h"
#include "reclaim.h"
#include "store.h"
#include "test.h"

typedef struct data_dir {
    char root[64];
    char db_path[128];
    tg_store store;      /* the layout, to look at and to prepare */
    tg_blobstore *blobs; /* the same directory, as tg_blob_reclaim sees it */
    tg_catalog *catalog;
} data_dir;

static bool data_open(data_dir *d)
{
    snprintf(d->root, sizeof d->root, "/tmp/tg-reclaim-XXXXXX");
    CHECK(mkdtemp(d->root) != NULL);
    snprintf(d->db_path, sizeof d->db_path, "%s/catalog.db", d->root);
    char err[256] = "";
    CHECK(tg_store_open(&d->store, d->root, err, sizeof err) == 0);
    d->blobs = NULL;
    CHECK(tg_blobstore_open(d->root, &d->blobs, err, sizeof err) == 0);
    d->catalog = NULL;
    CHECK(tg_catalog_open(d->db_path, &d->catalog, err, sizeof err) == TG_CAT_OK);
    if (d->catalog == NULL)
        fprintf(stderr, "catalog: %s\n", err);
    return d->catalog != NULL && d->blobs != NULL;
}

static void data_close(data_dir *d)
{
    if (d->catalog != NULL)
        tg_catalog_close(d->catalog);
    tg_blobstore_close(d->blobs);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", d->root);
    CHECK(system(command) == 0);
}

/* Stores text as a blob (the way an upload commits one); hex gets its name. */
static void put_blob(data_dir *d, const char *text, char hex[TG_SHA256_HEX_LEN + 1])
{
    CHECK(tg_sha256_hex(text, strlen(text), hex, "test") == 0);
    int fd = -1;
    char temp[4400];
    CHECK(tg_store_temp_create(&d->store, &fd, temp, sizeof temp) == 0);
    CHECK(tg_store_write_all(fd, text, strlen(text)) == TG_STORE_OK);
    CHECK(tg_store_commit_blob(&d->store, fd, temp, hex) == TG_STORE_OK);
}

static bool blob_exists(data_dir *d, const char *hex)
{
    char path[4400];
    return tg_store_blob_path(&d->store, hex, path, sizeof path) == 0 && access(path, F_OK) == 0;
}

static tg_file_record file_of(const char *path, const char *hex, uint64_t size)
{
    tg_file_record file;
    memset(&file, 0, sizeof file);
    snprintf(file.path, sizeof file.path, "%s", path);
    snprintf(file.kind, sizeof file.kind, "text");
    snprintf(file.sha256, sizeof file.sha256, "%s", hex);
    file.size = size;
    return file;
}

/* A model with one draft version; returns the version's id (0 on failure). */
static int64_t draft_version(data_dir *d, const char *name)
{
    tg_model model;
    tg_version version;
    CHECK(tg_catalog_model_create(d->catalog, "org", name, "", &model) == TG_CAT_OK);
    CHECK(tg_catalog_version_create(d->catalog, model.id, &version) == TG_CAT_OK);
    return version.id;
}

TEST(referenced_blob_is_kept_unreferenced_one_goes)
{
    data_dir d;
    if (!data_open(&d)) {
        data_close(&d);
        return;
    }
    char used[TG_SHA256_HEX_LEN + 1], unused[TG_SHA256_HEX_LEN + 1];
    put_blob(&d, "used content", used);
    put_blob(&d, "unused content", unused);
    int64_t version = draft_version(&d, "m");
    tg_file_record file = file_of("a.txt", used, 12);
    CHECK(tg_catalog_file_put(d.catalog, version, &file, NULL) == TG_CAT_OK);

    CHECK(tg_blob_reclaim(d.blobs, d.catalog, used, false) == TG_RECLAIM_KEPT);
    CHECK(blob_exists(&d, used));
    CHECK(tg_blob_reclaim(d.blobs, d.catalog, used, true) == TG_RECLAIM_KEPT);
    CHECK(blob_exists(&d, used));

    /* a dry run says it would go and leaves it */
    CHECK(tg_blob_reclaim(d.blobs, d.catalog, unused, true) == TG_RECLAIM_REMOVED);
    CHECK(blob_exists(&d, unused));
    CHECK(tg_blob_reclaim(d.blobs, d.catalog, unused, false) == TG_RECLAIM_REMOVED);
    CHECK(!blob_exists(&d, unused));
    /* already gone (another gc, a racing reclaim): still removed, not an error */
    CHECK(tg_blob_reclaim(d.blobs, d.catalog, unused, false) == TG_RECLAIM_REMOVED);

    /* once its row goes, the blob goes too */
    CHECK(tg_catalog_file_delete(d.catalog, version, "a.txt") == TG_CAT_OK);
    CHECK(tg_blob_reclaim(d.blobs, d.catalog, used, false) == TG_RECLAIM_REMOVED);
    CHECK(!blob_exists(&d, used));
    data_close(&d);
}

/* Content two versions share stays until the last row that uses it goes. */
TEST(shared_blob_stays_until_the_last_row_goes)
{
    data_dir d;
    if (!data_open(&d)) {
        data_close(&d);
        return;
    }
    char hex[TG_SHA256_HEX_LEN + 1];
    put_blob(&d, "shared", hex);
    int64_t v1 = draft_version(&d, "one"), v2 = draft_version(&d, "two");
    tg_file_record file = file_of("w.txt", hex, 6);
    CHECK(tg_catalog_file_put(d.catalog, v1, &file, NULL) == TG_CAT_OK);
    CHECK(tg_catalog_file_put(d.catalog, v2, &file, NULL) == TG_CAT_OK);
    CHECK(tg_catalog_file_delete(d.catalog, v1, "w.txt") == TG_CAT_OK);
    CHECK(tg_blob_reclaim(d.blobs, d.catalog, hex, false) == TG_RECLAIM_KEPT);
    CHECK(blob_exists(&d, hex));
    CHECK(tg_catalog_file_delete(d.catalog, v2, "w.txt") == TG_CAT_OK);
    CHECK(tg_blob_reclaim(d.blobs, d.catalog, hex, false) == TG_RECLAIM_REMOVED);
    CHECK(!blob_exists(&d, hex));
    data_close(&d);
}

/* A running conversion job's finished file (job_files, not yet a version's file) is a
 * reference too: reclaiming it would lose the job's output before its commit. */
TEST(job_file_is_a_reference)
{
    data_dir d;
    if (!data_open(&d)) {
        data_close(&d);
        return;
    }
    char source[TG_SHA256_HEX_LEN + 1], output[TG_SHA256_HEX_LEN + 1];
    put_blob(&d, "source", source);
    put_blob(&d, "converted", output);
    tg_model model;
    tg_version version;
    CHECK(tg_catalog_model_create(d.catalog, "org", "job", "", &model) == TG_CAT_OK);
    CHECK(tg_catalog_version_create(d.catalog, model.id, &version) == TG_CAT_OK);
    tg_file_record file = file_of("m.safetensors", source, 6);
    CHECK(tg_catalog_file_put(d.catalog, version.id, &file, NULL) == TG_CAT_OK);
    char digest[TG_SHA256_HEX_LEN + 1];
    CHECK(tg_sha256_hex("digest", 6, digest, "test") == 0);
    CHECK(tg_catalog_version_publish(d.catalog, version.id, digest, &version) == TG_CAT_OK);
    tg_job job;
    bool existing = true;
    CHECK(tg_catalog_job_create(d.catalog, model.id, version.id, "F16", "[\"*\"]", 6, &job,
                                &existing) == TG_CAT_OK);
    CHECK(!existing);
    CHECK(tg_catalog_job_claim(d.catalog, &job) == TG_CAT_OK);
    tg_file_record made = file_of("m.safetensors", output, 9);
    CHECK(tg_catalog_job_file_put(d.catalog, job.id, &made, NULL) == TG_CAT_OK);
    CHECK(tg_blob_reclaim(d.blobs, d.catalog, output, false) == TG_RECLAIM_KEPT);
    CHECK(blob_exists(&d, output));
    /* a failed job's files go with it: its output is garbage then */
    CHECK(tg_catalog_job_fail(d.catalog, job.id, "interrupted", "test") == TG_CAT_OK);
    CHECK(tg_blob_reclaim(d.blobs, d.catalog, output, false) == TG_RECLAIM_REMOVED);
    CHECK(!blob_exists(&d, output));
    CHECK(tg_blob_reclaim(d.blobs, d.catalog, source, false) == TG_RECLAIM_KEPT);
    data_close(&d);
}

TEST(file_blob_names_what_a_path_holds)
{
    data_dir d;
    if (!data_open(&d)) {
        data_close(&d);
        return;
    }
    char first[TG_SHA256_HEX_LEN + 1], second[TG_SHA256_HEX_LEN + 1];
    put_blob(&d, "first", first);
    put_blob(&d, "second", second);
    int64_t version = draft_version(&d, "fb");
    char hex[TG_SHA256_HEX_LEN + 1] = "x";
    tg_file_blob(d.catalog, version, "p.txt", hex);
    CHECK_STR(hex, ""); /* no such file */
    tg_file_record file = file_of("p.txt", first, 5);
    CHECK(tg_catalog_file_put(d.catalog, version, &file, NULL) == TG_CAT_OK);
    tg_file_blob(d.catalog, version, "p.txt", hex);
    CHECK_STR(hex, first);
    strcpy(hex, "x");
    tg_file_blob(d.catalog, version + 100, "p.txt", hex);
    CHECK_STR(hex, ""); /* no such version */

    /* the replace that upload.c does: read what the path held, put, reclaim the old */
    char replaced[TG_SHA256_HEX_LEN + 1];
    tg_file_blob(d.catalog, version, "p.txt", replaced);
    file = file_of("p.txt", second, 6);
    CHECK(tg_catalog_file_put(d.catalog, version, &file, NULL) == TG_CAT_OK);
    CHECK(tg_blob_reclaim(d.blobs, d.catalog, replaced, false) == TG_RECLAIM_REMOVED);
    CHECK(!blob_exists(&d, first));
    CHECK(blob_exists(&d, second));
    data_close(&d);
}

typedef struct gc_counts {
    data_dir *d;
    bool dry_run;
    int kept, removed, errors;
} gc_counts;

static int gc_visit(void *ctx, const char *hex)
{
    gc_counts *gc = ctx;
    switch (tg_blob_reclaim(gc->d->blobs, gc->d->catalog, hex, gc->dry_run)) {
    case TG_RECLAIM_KEPT:
        gc->kept++;
        break;
    case TG_RECLAIM_REMOVED:
        gc->removed++;
        break;
    case TG_RECLAIM_ERROR:
        gc->errors++;
        break;
    }
    return 0;
}

/* The gc walk: every blob the store lists, each decided by tg_blob_reclaim. */
TEST(gc_walk_removes_exactly_the_unreferenced_blobs)
{
    data_dir d;
    if (!data_open(&d)) {
        data_close(&d);
        return;
    }
    enum { BLOBS = 6 };
    char hex[BLOBS][TG_SHA256_HEX_LEN + 1];
    int64_t version = draft_version(&d, "gc");
    for (int i = 0; i < BLOBS; i++) {
        char text[32];
        snprintf(text, sizeof text, "blob number %d", i);
        put_blob(&d, text, hex[i]);
        if (i % 2 == 0) {
            char path[32];
            snprintf(path, sizeof path, "f%d.txt", i);
            tg_file_record file = file_of(path, hex[i], strlen(text));
            CHECK(tg_catalog_file_put(d.catalog, version, &file, NULL) == TG_CAT_OK);
        }
    }
    gc_counts dry = {&d, true, 0, 0, 0};
    CHECK(tg_store_each_blob(&d.store, gc_visit, &dry) == 0);
    CHECK_EQ_U64(dry.kept, 3);
    CHECK_EQ_U64(dry.removed, 3);
    CHECK_EQ_U64(dry.errors, 0);
    for (int i = 0; i < BLOBS; i++)
        CHECK(blob_exists(&d, hex[i])); /* the dry run removed nothing */

    gc_counts real = {&d, false, 0, 0, 0};
    CHECK(tg_store_each_blob(&d.store, gc_visit, &real) == 0);
    CHECK_EQ_U64(real.kept, 3);
    CHECK_EQ_U64(real.removed, 3);
    CHECK_EQ_U64(real.errors, 0);
    for (int i = 0; i < BLOBS; i++)
        CHECK(blob_exists(&d, hex[i]) == (i % 2 == 0));

    /* a second walk finds nothing more to do */
    gc_counts again = {&d, false, 0, 0, 0};
    CHECK(tg_store_each_blob(&d.store, gc_visit, &again) == 0);
    CHECK_EQ_U64(again.kept, 3);
    CHECK_EQ_U64(again.removed, 0);
    data_close(&d);
}

typedef struct reclaim_call {
    data_dir *d;
    const char *hex;
    tg_reclaim_result result;
    int done; /* atomic */
} reclaim_call;

static void *reclaim_thread(void *arg)
{
    reclaim_call *call = arg;
    call->result = tg_blob_reclaim(call->d->blobs, call->d->catalog, call->hex, false);
    __atomic_store_n(&call->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* An upload commits its blob and then its row under the shared blobs lock: a reclaim
 * started in between waits for the lock and then sees the row, so it keeps the blob. */
TEST(reclaim_waits_for_a_commit_in_flight)
{
    data_dir d;
    if (!data_open(&d)) {
        data_close(&d);
        return;
    }
    int64_t version = draft_version(&d, "race");
    int shared = tg_store_lock_blobs(&d.store, false, true);
    CHECK(shared >= 0);
    char hex[TG_SHA256_HEX_LEN + 1];
    put_blob(&d, "in flight", hex); /* committed, its row not yet written */
    reclaim_call call = {&d, hex, TG_RECLAIM_ERROR, 0};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, reclaim_thread, &call) == 0);
    struct timespec pause = {0, 200 * 1000 * 1000};
    nanosleep(&pause, NULL);
    CHECK(__atomic_load_n(&call.done, __ATOMIC_ACQUIRE) == 0); /* still waiting */
    CHECK(blob_exists(&d, hex));
    tg_file_record file = file_of("flight.txt", hex, 9);
    CHECK(tg_catalog_file_put(d.catalog, version, &file, NULL) == TG_CAT_OK);
    tg_store_unlock(shared);
    pthread_join(thread, NULL);
    CHECK(call.result == TG_RECLAIM_KEPT);
    CHECK(blob_exists(&d, hex));
    data_close(&d);
}

/* What fails leaves the blob: a lock that cannot be taken, a catalog that cannot
 * answer, a name that is not a digest. */
TEST(failures_remove_nothing)
{
    data_dir d;
    if (!data_open(&d)) {
        data_close(&d);
        return;
    }
    char hex[TG_SHA256_HEX_LEN + 1];
    put_blob(&d, "orphan", hex);

    /* blobs.lock cannot be opened (a directory in its place) */
    char lock_path[128];
    snprintf(lock_path, sizeof lock_path, "%s/blobs.lock", d.root);
    unlink(lock_path);
    CHECK(mkdir(lock_path, 0700) == 0);
    CHECK(tg_blob_reclaim(d.blobs, d.catalog, hex, false) == TG_RECLAIM_ERROR);
    CHECK(blob_exists(&d, hex));
    CHECK(rmdir(lock_path) == 0);

    /* not a digest: never a removal, whatever errno held before */
    errno = ENOENT;
    CHECK(tg_blob_reclaim(d.blobs, d.catalog, "not-a-digest", false) == TG_RECLAIM_ERROR);
    errno = ENOENT;
    CHECK(tg_blob_reclaim(d.blobs, d.catalog, "", false) == TG_RECLAIM_ERROR);
    errno = ENOENT;
    CHECK(tg_blob_reclaim(d.blobs, d.catalog, "../../catalog.db", false) == TG_RECLAIM_ERROR);
    CHECK(access(d.db_path, F_OK) == 0);

    /* the catalog cannot tell (its table is gone from under it): kept, as an error */
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(d.db_path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "ALTER TABLE job_files RENAME TO job_files_gone", NULL, NULL, NULL) ==
          SQLITE_OK);
    CHECK(tg_blob_reclaim(d.blobs, d.catalog, hex, false) == TG_RECLAIM_ERROR);
    CHECK(blob_exists(&d, hex));
    CHECK(sqlite3_exec(db, "ALTER TABLE job_files_gone RENAME TO job_files", NULL, NULL, NULL) ==
          SQLITE_OK);
    sqlite3_close(db);
    CHECK(tg_blob_reclaim(d.blobs, d.catalog, hex, false) == TG_RECLAIM_REMOVED);
    CHECK(!blob_exists(&d, hex));
    data_close(&d);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(referenced_blob_is_kept_unreferenced_one_goes);
    RUN(shared_blob_stays_until_the_last_row_goes);
    RUN(job_file_is_a_reference);
    RUN(file_blob_names_what_a_path_holds);
    RUN(gc_walk_removes_exactly_the_unreferenced_blobs);
    RUN(reclaim_waits_for_a_commit_in_flight);
    RUN(failures_remove_nothing);
    return test_report(argv[0]);
}
