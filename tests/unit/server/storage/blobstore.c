/* Unit tests for server/storage/blobstore.c: tg_blobstore_open chooses the backend
 * by URL (file:DIR or a path; s3:// to the S3 backend; other schemes refused),
 * every public call reaches the backend's operation, names are checked before a
 * backend sees them, tg_blob_read_at's loop over short reads (EIO at an early end,
 * EOVERFLOW past INT64_MAX), and the damage record's sentence. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "blobstore.h"
#include "blobstore_backend.h"
#include "test.h"

static const char *const NAME = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/* A backend that records the operation called and serves a 10-byte blob of
 * "0123456789" in reads of at most 3 bytes. */
static struct {
    tg_blobstore base;
    const char *called;
    char why[256];
    tg_blob_writer writer;
    tg_blob_reader reader;
} fake;

static void called(const char *operation)
{
    fake.called = operation;
}

static void fake_close(tg_blobstore *store)
{
    CHECK(store == &fake.base);
    called("close");
}

static int fake_claim(tg_blobstore *store, char *err, size_t err_len)
{
    (void)store;
    snprintf(err, err_len, "claimed");
    called("claim");
    return 0;
}

static int fake_lock(tg_blobstore *store, bool exclusive, bool wait)
{
    (void)store;
    called(exclusive && wait ? "lock exclusive" : "lock");
    return 7;
}

static void fake_unlock(tg_blobstore *store, int handle)
{
    (void)store;
    CHECK_EQ_U64(handle, 7);
    called("unlock");
}

static tg_store_status fake_write_begin(tg_blobstore *store, tg_blob_writer **out)
{
    fake.writer.store = store;
    *out = &fake.writer;
    called("write_begin");
    return TG_STORE_OK;
}

static tg_store_status fake_write(tg_blob_writer *writer, const void *buf, size_t len)
{
    (void)buf;
    CHECK(writer == &fake.writer);
    called("write");
    return len == 5 ? TG_STORE_NO_SPACE : TG_STORE_OK;
}

static tg_store_status fake_write_commit(tg_blob_writer *writer, const char *hex)
{
    CHECK(writer == &fake.writer);
    CHECK_STR(hex, NAME);
    called("write_commit");
    return TG_STORE_OK;
}

static void fake_write_abort(tg_blob_writer *writer)
{
    CHECK(writer == &fake.writer);
    called("write_abort");
}

static tg_blob_reader *fake_open(tg_blobstore *store, const char *hex, uint64_t size,
                                 tg_blob_check *check)
{
    called("open");
    fake.reader.store = store;
    fake.reader.size = size == TG_BLOB_SIZE_UNCHECKED ? 10 : size;
    fake.reader.fd = -1;
    snprintf(fake.reader.hex, sizeof fake.reader.hex, "%s", hex);
    *check = TG_BLOB_OK;
    return &fake.reader;
}

static ssize_t fake_read(tg_blob_reader *reader, void *buf, size_t len, uint64_t offset)
{
    static const char content[] = "0123456789";
    (void)reader;
    called("read");
    if (offset >= 10)
        return 0;
    size_t n = len < 3 ? len : 3;
    if (offset + n > 10)
        n = (size_t)(10 - offset);
    memcpy(buf, content + offset, n);
    return (ssize_t)n;
}

static void fake_reader_close(tg_blob_reader *reader)
{
    CHECK(reader == &fake.reader);
    called("reader_close");
}

static int fake_stat(tg_blobstore *store, const char *hex, uint64_t *size)
{
    (void)store;
    (void)hex;
    *size = 10;
    called("stat");
    return 0;
}

static int fake_remove(tg_blobstore *store, const char *hex)
{
    (void)store;
    (void)hex;
    called("remove");
    return 0;
}

static int fake_each(tg_blobstore *store, int (*visit)(void *ctx, const char *hex), void *ctx)
{
    (void)store;
    called("each");
    return visit(ctx, NAME);
}

static int fake_space(tg_blobstore *store, uint64_t *free_bytes)
{
    (void)store;
    *free_bytes = UINT64_MAX;
    called("space");
    return 0;
}

static void fake_mark_damaged(tg_blobstore *store, const char *hex, const char *why)
{
    (void)store;
    (void)hex;
    snprintf(fake.why, sizeof fake.why, "%s", why);
    called("mark_damaged");
}

static bool fake_damage_record(tg_blobstore *store, const char *hex, char *why, size_t why_len)
{
    (void)store;
    (void)hex;
    snprintf(why, why_len, "%s", fake.why);
    called("damage_record");
    return true;
}

static void fake_clear_damaged(tg_blobstore *store, const char *hex)
{
    (void)store;
    (void)hex;
    called("clear_damaged");
}

static int fake_each_damaged(tg_blobstore *store, int (*visit)(void *ctx, const char *hex),
                             void *ctx)
{
    (void)store;
    called("each_damaged");
    return visit(ctx, NAME);
}

static const tg_blobstore_ops fake_ops = {
    .kind = "fake",
    .close = fake_close,
    .claim = fake_claim,
    .lock = fake_lock,
    .unlock = fake_unlock,
    .write_begin = fake_write_begin,
    .write = fake_write,
    .write_commit = fake_write_commit,
    .write_abort = fake_write_abort,
    .open = fake_open,
    .read = fake_read,
    .reader_close = fake_reader_close,
    .stat = fake_stat,
    .remove = fake_remove,
    .each = fake_each,
    .space = fake_space,
    .mark_damaged = fake_mark_damaged,
    .damage_record = fake_damage_record,
    .clear_damaged = fake_clear_damaged,
    .each_damaged = fake_each_damaged,
};

static int count_name(void *ctx, const char *hex)
{
    if (strcmp(hex, NAME) == 0)
        (*(int *)ctx)++;
    return 0;
}

TEST(dispatch_reaches_the_backend)
{
    fake.base.ops = &fake_ops;
    tg_blobstore *store = &fake.base;
    CHECK_STR(tg_blobstore_kind(store), "fake");
    char err[64] = "";
    CHECK(tg_blobstore_claim(store, err, sizeof err) == 0);
    CHECK_STR(fake.called, "claim");
    CHECK_STR(err, "claimed");
    CHECK_EQ_U64(tg_blobstore_lock(store, true, true), 7);
    CHECK_STR(fake.called, "lock exclusive");
    tg_blobstore_unlock(store, 7);
    CHECK_STR(fake.called, "unlock");
    fake.called = NULL;
    tg_blobstore_unlock(store, -1); /* no lock taken: nothing called */
    CHECK(fake.called == NULL);

    tg_blob_writer *writer = NULL;
    CHECK(tg_blob_write_begin(store, &writer) == TG_STORE_OK);
    CHECK_STR(fake.called, "write_begin");
    CHECK(writer == &fake.writer);
    CHECK(tg_blob_write(writer, "abc", 3) == TG_STORE_OK);
    CHECK_STR(fake.called, "write");
    CHECK(tg_blob_write(writer, "abcde", 5) == TG_STORE_NO_SPACE);
    CHECK(tg_blob_write_commit(writer, NAME) == TG_STORE_OK);
    CHECK_STR(fake.called, "write_commit");
    tg_blob_write_abort(&fake.writer);
    CHECK_STR(fake.called, "write_abort");
    fake.called = NULL;
    tg_blob_write_abort(NULL);
    CHECK(fake.called == NULL);

    tg_blob_check check = TG_BLOB_MISSING;
    tg_blob_reader *reader = tg_blob_open(store, NAME, 10, &check);
    CHECK_STR(fake.called, "open");
    CHECK(reader == &fake.reader && check == TG_BLOB_OK);
    CHECK_EQ_U64(tg_blob_size(reader), 10);
    CHECK_STR(tg_blob_name(reader), NAME);
    CHECK_EQ_U64((uint64_t)(int64_t)tg_blob_fd(reader), (uint64_t)(int64_t)-1);
    char buf[16] = "";
    CHECK_EQ_U64(tg_blob_read(reader, buf, sizeof buf, 4), 3);
    CHECK_STR(fake.called, "read");
    /* tg_blob_read_span: kept on the reader, clamped to its size; an empty span or
     * one starting at the end changes nothing */
    tg_blob_read_span(reader, 2, 5);
    CHECK_EQ_U64(reader->span_start, 2);
    CHECK_EQ_U64(reader->span_end, 7);
    tg_blob_read_span(reader, 4, UINT64_MAX);
    CHECK_EQ_U64(reader->span_start, 4);
    CHECK_EQ_U64(reader->span_end, 10);
    tg_blob_read_span(reader, 10, 3);
    tg_blob_read_span(reader, 1, 0);
    CHECK_EQ_U64(reader->span_start, 4);
    CHECK_EQ_U64(reader->span_end, 10);
    tg_blob_close(reader);
    CHECK_STR(fake.called, "reader_close");
    fake.called = NULL;
    tg_blob_close(NULL);
    CHECK(fake.called == NULL);

    uint64_t size = 0;
    CHECK(tg_blob_stat(store, NAME, &size) == 0 && size == 10);
    CHECK_STR(fake.called, "stat");
    CHECK(tg_blob_remove(store, NAME) == 0);
    CHECK_STR(fake.called, "remove");
    int seen = 0;
    CHECK(tg_blob_each(store, count_name, &seen) == 0);
    CHECK_STR(fake.called, "each");
    CHECK_EQ_U64(seen, 1);
    uint64_t free_bytes = 0;
    CHECK(tg_blobstore_space(store, &free_bytes) == 0 && free_bytes == UINT64_MAX);
    CHECK_STR(fake.called, "space");

    tg_blob_mark_damaged(store, NAME, "%d bytes on disk, the catalog says %d", 3, 5);
    CHECK_STR(fake.called, "mark_damaged");
    CHECK_STR(fake.why, "3 bytes on disk, the catalog says 5");
    char why[64] = "";
    CHECK(tg_blob_damage_record(store, NAME, why, sizeof why));
    CHECK_STR(fake.called, "damage_record");
    CHECK_STR(why, "3 bytes on disk, the catalog says 5");
    tg_blob_clear_damaged(store, NAME);
    CHECK_STR(fake.called, "clear_damaged");
    seen = 0;
    CHECK(tg_blob_each_damaged(store, count_name, &seen) == 0);
    CHECK_STR(fake.called, "each_damaged");
    CHECK_EQ_U64(seen, 1);
    tg_blobstore_close(store);
    CHECK_STR(fake.called, "close");
    tg_blobstore_close(NULL);
}

TEST(names_are_checked_before_the_backend)
{
    fake.base.ops = &fake_ops;
    tg_blobstore *store = &fake.base;
    const char *bad[] = {"", "../../etc/passwd",
                         "0123456789ABCDEF0123456789abcdef0123456789abcdef"
                         "0123456789abcdef"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fake.called = NULL;
        tg_blob_check check = TG_BLOB_OK;
        errno = 0;
        CHECK(tg_blob_open(store, bad[i], 10, &check) == NULL);
        CHECK(check == TG_BLOB_UNREADABLE && errno == EINVAL);
        uint64_t size;
        CHECK(tg_blob_stat(store, bad[i], &size) == -1 && errno == EINVAL);
        CHECK(tg_blob_remove(store, bad[i]) == -1 && errno == EINVAL);
        tg_blob_mark_damaged(store, bad[i], "x");
        tg_blob_clear_damaged(store, bad[i]);
        char why[8];
        CHECK(!tg_blob_damage_record(store, bad[i], why, sizeof why));
        CHECK(fake.called == NULL);
    }
}

TEST(read_at_loops_over_short_reads)
{
    fake.base.ops = &fake_ops;
    tg_blob_check check;
    tg_blob_reader *reader = tg_blob_open(&fake.base, NAME, TG_BLOB_SIZE_UNCHECKED, &check);
    CHECK(reader != NULL);
    if (reader == NULL)
        return;
    char buf[16] = "";
    /* ten bytes come in reads of three */
    CHECK(tg_blob_read_at(reader, buf, 10, 0) == 0);
    CHECK(memcmp(buf, "0123456789", 10) == 0);
    CHECK(tg_blob_read_at(reader, buf, 4, 5) == 0);
    CHECK(memcmp(buf, "5678", 4) == 0);
    CHECK(tg_blob_read_at(reader, buf, 0, 100) == 0);
    /* the blob ends first: EIO (the caller marks it damaged) */
    errno = 0;
    CHECK(tg_blob_read_at(reader, buf, 4, 8) == -1 && errno == EIO);
    /* past what an off_t can name */
    errno = 0;
    CHECK(tg_blob_read_at(reader, buf, 4, (uint64_t)INT64_MAX) == -1 && errno == EOVERFLOW);
    errno = 0;
    CHECK(tg_blob_read(reader, buf, 4, (uint64_t)INT64_MAX + 1) == -1 && errno == EOVERFLOW);
    tg_blob_close(reader);
}

TEST(open_chooses_the_backend_by_url)
{
    tg_blobstore *store = NULL;
    char err[256] = "";
    /* s3:// goes to the S3 backend (blobstore_s3.c), which checks the URL */
    CHECK(tg_blobstore_open("s3://b/prefix", &store, err, sizeof err) == -1);
    CHECK(store == NULL);
    CHECK(strstr(err, "s3://BUCKET[/PREFIX]") != NULL);
    CHECK(tg_blobstore_open("gs://bucket", &store, err, sizeof err) == -1);
    CHECK(strstr(err, "unknown blob store URL scheme \"gs://\"") != NULL);
    CHECK(tg_blobstore_open("file:", &store, err, sizeof err) == -1);
    CHECK(store == NULL);
    char dir[] = "/tmp/tg-blobstore-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        CHECK(false);
        return;
    }
    char url[64];
    snprintf(url, sizeof url, "file:%s", dir);
    CHECK(tg_blobstore_open(url, &store, err, sizeof err) == 0);
    if (store != NULL) {
        CHECK_STR(tg_blobstore_kind(store), "file");
        tg_blobstore_close(store);
    }
    store = NULL;
    CHECK(tg_blobstore_open(dir, &store, err, sizeof err) == 0);
    if (store != NULL) {
        CHECK_STR(tg_blobstore_kind(store), "file");
        tg_blobstore_close(store);
    }
    char command[96];
    snprintf(command, sizeof command, "rm -rf %s", dir);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(dispatch_reaches_the_backend);
    RUN(names_are_checked_before_the_backend);
    RUN(read_at_loops_over_short_reads);
    RUN(open_chooses_the_backend_by_url);
    return test_report(argv[0]);
}
