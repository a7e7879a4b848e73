/* Unit tests for server/storage/blobstore_local.c, the local-directory blob store,
 * through the interface (blobstore.h): write, commit and abort (nothing left in
 * tmp/), ranged reads and the descriptor, checked opens that record damage, a
 * commit that heals, stat, remove and the listing, space, damage records, the claim
 * (one per directory, and it clears writes left in flight), the commit lock,
 * ENOSPC injected at a write (nothing half-written), and the O_DIRECT path of large
 * writes (bytes read back equal, past the switch not in the page cache on ext4/xfs,
 * abort and ENOSPC at a direct block leave nothing). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blobstore.h"
#include "sha256.h"
#include "test.h"

static char dir[64];

/* Entries in DIR/sub, or -1 when it cannot be read. */
static int count_entries(const char *sub)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    DIR *d = opendir(path);
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static tg_blobstore *open_store(void)
{
    tg_blobstore *store = NULL;
    char err[256] = "";
    CHECK(tg_blobstore_open(dir, &store, err, sizeof err) == 0);
    if (store == NULL)
        fprintf(stderr, "open: %s\n", err);
    return store;
}

/* Stores text as a blob; its name goes to hex. */
static bool put(tg_blobstore *store, const char *text, char hex[TG_SHA256_HEX_LEN + 1])
{
    size_t len = strlen(text);
    tg_blob_writer *writer = NULL;
    if (tg_sha256_hex(text, len, hex, "test") != 0 ||
        tg_blob_write_begin(store, &writer) != TG_STORE_OK)
        return false;
    if (tg_blob_write(writer, text, len) != TG_STORE_OK) {
        tg_blob_write_abort(writer);
        return false;
    }
    return tg_blob_write_commit(writer, hex) == TG_STORE_OK;
}

TEST(enospc_at_a_write_leaves_nothing)
{
    /* TENSORGATE_TEST_ENOSPC_AT=2 (set in main before any write): the second write
     * of the process fails with ENOSPC, once */
    tg_blobstore *store = open_store();
    if (store == NULL)
        return;
    tg_blob_writer *writer = NULL;
    CHECK(tg_blob_write_begin(store, &writer) == TG_STORE_OK);
    CHECK(tg_blob_write(writer, "first", 5) == TG_STORE_OK);
    CHECK(tg_blob_write(writer, "second", 6) == TG_STORE_NO_SPACE);
    tg_blob_write_abort(writer);
    CHECK_EQ_U64(count_entries("tmp"), 0);
    CHECK_EQ_U64(count_entries("blobs/sha256"), 0);
    /* once: the next writes go through */
    char hex[TG_SHA256_HEX_LEN + 1];
    CHECK(put(store, "after the fault", hex));
    CHECK(tg_blob_remove(store, hex) == 0);
    tg_blobstore_close(store);
}

TEST(write_commit_read)
{
    tg_blobstore *store = open_store();
    if (store == NULL)
        return;
    const char *text = "the bytes of a blob, read back in ranges";
    char hex[TG_SHA256_HEX_LEN + 1];
    CHECK(put(store, text, hex));
    CHECK_EQ_U64(count_entries("tmp"), 0);
    uint64_t size = 0;
    CHECK(tg_blob_stat(store, hex, &size) == 0);
    CHECK_EQ_U64(size, strlen(text));
    tg_blob_check check = TG_BLOB_MISSING;
    tg_blob_reader *blob = tg_blob_open(store, hex, strlen(text), &check);
    CHECK(blob != NULL && check == TG_BLOB_OK);
    if (blob != NULL) {
        CHECK_EQ_U64(tg_blob_size(blob), strlen(text));
        CHECK_STR(tg_blob_name(blob), hex);
        char buf[64] = "";
        CHECK(tg_blob_read_at(blob, buf, 9, 4) == 0);
        CHECK(memcmp(buf, "bytes of ", 9) == 0);
        CHECK_EQ_U64(tg_blob_read(blob, buf, sizeof buf, strlen(text) - 6), 6);
        CHECK(memcmp(buf, "ranges", 6) == 0);
        CHECK_EQ_U64(tg_blob_read(blob, buf, sizeof buf, strlen(text)), 0);
        errno = 0;
        CHECK(tg_blob_read_at(blob, buf, 10, strlen(text) - 5) == -1 && errno == EIO);
        /* the local backend's descriptor reads the same bytes */
        int fd = tg_blob_fd(blob);
        CHECK(fd >= 0);
        CHECK(pread(fd, buf, 3, 0) == 3 && memcmp(buf, "the", 3) == 0);
        tg_blob_close(blob);
    }
    /* unchecked: the size as stored */
    blob = tg_blob_open(store, hex, TG_BLOB_SIZE_UNCHECKED, &check);
    CHECK(blob != NULL && tg_blob_size(blob) == strlen(text));
    tg_blob_close(blob);
    CHECK(tg_blob_remove(store, hex) == 0);
    errno = 0;
    CHECK(tg_blob_stat(store, hex, &size) == -1 && errno == ENOENT);
    CHECK(tg_blob_remove(store, hex) == -1 && errno == ENOENT);
    tg_blobstore_close(store);
}

TEST(abort_leaves_nothing)
{
    tg_blobstore *store = open_store();
    if (store == NULL)
        return;
    tg_blob_writer *writer = NULL;
    CHECK(tg_blob_write_begin(store, &writer) == TG_STORE_OK);
    CHECK(tg_blob_write(writer, "half", 4) == TG_STORE_OK);
    CHECK_EQ_U64(count_entries("tmp"), 1);
    tg_blob_write_abort(writer);
    CHECK_EQ_U64(count_entries("tmp"), 0);
    tg_blobstore_close(store);
}

/* ---- large writes: past 4 MiB the local store writes O_DIRECT from its own thread ---- */

#define BIG_LEN ((size_t)(13u << 20) + 12345u)

static unsigned char *big_pattern(size_t len)
{
    unsigned char *data = malloc(len);
    uint32_t x = 2463534242u;
    for (size_t i = 0; data != NULL && i < len; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        data[i] = (unsigned char)x;
    }
    return data;
}

/* Writes data in pieces of the given sizes, cycling; the first status that is not OK. */
static tg_store_status write_pieces(tg_blob_writer *writer, const unsigned char *data, size_t len,
                                    const size_t *sizes, size_t n_sizes)
{
    size_t done = 0;
    for (size_t i = 0; done < len; i++) {
        size_t n = sizes[i % n_sizes];
        if (n > len - done)
            n = len - done;
        tg_store_status status = tg_blob_write(writer, data + done, n);
        if (status != TG_STORE_OK)
            return status;
        done += n;
    }
    return TG_STORE_OK;
}

TEST(large_write_goes_around_the_page_cache_and_reads_back)
{
    tg_blobstore *store = open_store();
    unsigned char *data = big_pattern(BIG_LEN);
    CHECK(data != NULL);
    if (store == NULL || data == NULL) {
        free(data);
        return;
    }
    char hex[TG_SHA256_HEX_LEN + 1];
    CHECK(tg_sha256_hex(data, BIG_LEN, hex, "test") == 0);
    static const size_t sizes[] = {1, 4093, 65536, 300000, (1u << 20) + 7, 32768};
    tg_blob_writer *writer = NULL;
    CHECK(tg_blob_write_begin(store, &writer) == TG_STORE_OK);
    CHECK(write_pieces(writer, data, BIG_LEN, sizes, 6) == TG_STORE_OK);
    CHECK(tg_blob_write_commit(writer, hex) == TG_STORE_OK);
    CHECK_EQ_U64(count_entries("tmp"), 0);

    /* On a file system that honours O_DIRECT, what came after the first 4 MiB and
     * before the tail never entered the page cache (looked at before any read). */
    char path[256];
    snprintf(path, sizeof path, "%s/blobs/sha256/%.2s/%s", dir, hex, hex);
    struct statfs fs;
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    if (fd >= 0 && fstatfs(fd, &fs) == 0 &&
        (fs.f_type == 0xEF53 /* ext2/3/4 */ || fs.f_type == 0x58465342 /* xfs */)) {
        size_t from = (size_t)5 << 20, span = (size_t)8 << 20, pages = span / 4096;
        unsigned char *map = mmap(NULL, BIG_LEN, PROT_READ, MAP_SHARED, fd, 0);
        unsigned char *resident = malloc(pages);
        CHECK(map != MAP_FAILED && resident != NULL);
        if (map != MAP_FAILED && resident != NULL && mincore(map + from, span, resident) == 0) {
            size_t in_cache = 0;
            for (size_t i = 0; i < pages; i++)
                in_cache += resident[i] & 1;
            CHECK(in_cache < pages / 4);
        }
        if (map != MAP_FAILED)
            munmap(map, BIG_LEN);
        free(resident);
    }
    if (fd >= 0)
        close(fd);

    tg_blob_check check;
    tg_blob_reader *reader = tg_blob_open(store, hex, BIG_LEN, &check);
    CHECK(reader != NULL && check == TG_BLOB_OK);
    unsigned char *back = malloc(BIG_LEN);
    CHECK(back != NULL);
    if (reader != NULL && back != NULL) {
        CHECK(tg_blob_read_at(reader, back, BIG_LEN, 0) == 0);
        CHECK(memcmp(back, data, BIG_LEN) == 0);
    }
    free(back);
    tg_blob_close(reader);
    CHECK(tg_blob_remove(store, hex) == 0);

    /* Aborted with blocks in flight: nothing left. */
    char half[TG_SHA256_HEX_LEN + 1];
    CHECK(tg_sha256_hex(data, (size_t)7 << 20, half, "test") == 0);
    CHECK(tg_blob_write_begin(store, &writer) == TG_STORE_OK);
    CHECK(write_pieces(writer, data, (size_t)7 << 20, sizes, 6) == TG_STORE_OK);
    tg_blob_write_abort(writer);
    CHECK_EQ_U64(count_entries("tmp"), 0);
    uint64_t size = 0;
    CHECK(tg_blob_stat(store, half, &size) == -1 && errno == ENOENT);
    free(data);
    tg_blobstore_close(store);
}

/* The child of direct_enospc_leaves_nothing (TENSORGATE_TEST_ENOSPC_AT set): 8 MiB in
 * 1 MiB pieces (writes 1-4 through the page cache, 5-8 the direct blocks, 9 the
 * fsync). Exit 0: stored; 3: refused with NO_SPACE and nothing left; 1: otherwise. */
static int direct_enospc_child(const char *root)
{
    snprintf(dir, sizeof dir, "%s", root);
    tg_blobstore *store = open_store();
    size_t len = (size_t)8 << 20;
    unsigned char *data = big_pattern(len);
    char hex[TG_SHA256_HEX_LEN + 1];
    tg_blob_writer *writer = NULL;
    if (store == NULL || data == NULL || tg_sha256_hex(data, len, hex, "test") != 0 ||
        tg_blob_write_begin(store, &writer) != TG_STORE_OK)
        return 1;
    static const size_t mib[] = {(size_t)1 << 20};
    tg_store_status status = write_pieces(writer, data, len, mib, 1);
    if (status == TG_STORE_OK) {
        status = tg_blob_write_commit(writer, hex);
    } else {
        tg_blob_write_abort(writer);
    }
    free(data);
    int rc = status == TG_STORE_OK ? 0 : status == TG_STORE_NO_SPACE ? 3 : 1;
    uint64_t size = 0;
    if (rc == 3 && (count_entries("tmp") != 0 || tg_blob_stat(store, hex, &size) == 0))
        rc = 1;
    if (rc == 0)
        (void)tg_blob_remove(store, hex);
    tg_blobstore_close(store);
    return rc;
}

TEST(direct_enospc_leaves_nothing)
{
    static const char *const at[] = {"5", "6", "8", "9", "40"};
    static const int expected[] = {3, 3, 3, 3, 0};
    for (size_t i = 0; i < 5; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            setenv("TENSORGATE_TEST_ENOSPC_AT", at[i], 1);
            execl("/proc/self/exe", "blobstore_local", "--direct-enospc-child", dir, (char *)NULL);
            _exit(1);
        }
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status));
        CHECK_EQ_U64(WEXITSTATUS(status), expected[i]);
    }
}

static int collect(void *ctx, const char *hex)
{
    int *n = ctx;
    (*n)++;
    return hex[0] == '\0'; /* never stops */
}

static int stop_at_first(void *ctx, const char *hex)
{
    (void)hex;
    (*(int *)ctx)++;
    return 1;
}

TEST(listing_and_space)
{
    tg_blobstore *store = open_store();
    if (store == NULL)
        return;
    char a[TG_SHA256_HEX_LEN + 1], b[TG_SHA256_HEX_LEN + 1];
    CHECK(put(store, "listed a", a));
    CHECK(put(store, "listed b", b));
    int n = 0;
    CHECK(tg_blob_each(store, collect, &n) == 0);
    CHECK_EQ_U64(n, 2);
    n = 0;
    CHECK(tg_blob_each(store, stop_at_first, &n) == 0);
    CHECK_EQ_U64(n, 1);
    uint64_t free_bytes = 0;
    CHECK(tg_blobstore_space(store, &free_bytes) == 0);
    CHECK(free_bytes > 0 && free_bytes != UINT64_MAX);
    CHECK(tg_blob_remove(store, a) == 0 && tg_blob_remove(store, b) == 0);
    tg_blobstore_close(store);
}

TEST(checked_open_records_damage_and_a_commit_heals)
{
    tg_blobstore *store = open_store();
    if (store == NULL)
        return;
    char hex[TG_SHA256_HEX_LEN + 1];
    CHECK(put(store, "five!", hex));
    tg_blob_check check = TG_BLOB_OK;
    /* the catalog says 7 bytes: damaged, and recorded */
    errno = 0;
    CHECK(tg_blob_open(store, hex, 7, &check) == NULL);
    CHECK(check == TG_BLOB_DAMAGED && errno == EIO);
    char why[320] = "";
    CHECK(tg_blob_damage_record(store, hex, why, sizeof why));
    CHECK(strstr(why, "5 bytes on disk, the catalog says 7") != NULL);
    int records = 0;
    CHECK(tg_blob_each_damaged(store, collect, &records) == 0);
    CHECK_EQ_U64(records, 1);
    /* a commit of the same content removes the record */
    CHECK(put(store, "five!", hex));
    CHECK(!tg_blob_damage_record(store, hex, why, sizeof why));
    CHECK(tg_blob_remove(store, hex) == 0);
    /* missing: recorded when checked against a size, not when unchecked */
    errno = 0;
    CHECK(tg_blob_open(store, hex, TG_BLOB_SIZE_UNCHECKED, &check) == NULL);
    CHECK(check == TG_BLOB_MISSING && errno == ENOENT);
    CHECK(!tg_blob_damage_record(store, hex, NULL, 0));
    CHECK(tg_blob_open(store, hex, 5, &check) == NULL);
    CHECK(check == TG_BLOB_MISSING);
    CHECK(tg_blob_damage_record(store, hex, why, sizeof why));
    CHECK(strstr(why, "missing") != NULL);
    tg_blob_clear_damaged(store, hex);
    CHECK(!tg_blob_damage_record(store, hex, NULL, 0));
    /* marking through the interface */
    tg_blob_mark_damaged(store, hex, "test %d", 1);
    CHECK(tg_blob_damage_record(store, hex, why, sizeof why));
    CHECK(strstr(why, "test 1") != NULL);
    tg_blob_clear_damaged(store, hex);
    tg_blobstore_close(store);
}

TEST(one_claim_per_directory_and_it_clears_tmp)
{
    tg_blobstore *first = open_store(), *second = open_store();
    if (first == NULL || second == NULL) {
        tg_blobstore_close(first);
        tg_blobstore_close(second);
        return;
    }
    /* a write in flight, as a stopped server leaves it */
    tg_blob_writer *left = NULL;
    CHECK(tg_blob_write_begin(second, &left) == TG_STORE_OK);
    CHECK(tg_blob_write(left, "left over", 9) == TG_STORE_OK);
    CHECK_EQ_U64(count_entries("tmp"), 1);
    char err[512] = "";
    CHECK(tg_blobstore_claim(first, err, sizeof err) == 0);
    CHECK_EQ_U64(count_entries("tmp"), 0);
    tg_blob_write_abort(left);
    CHECK(tg_blobstore_claim(second, err, sizeof err) == -1);
    CHECK(strstr(err, "another tensorgate serve is using the data directory") != NULL);
    CHECK(tg_blobstore_claim(first, err, sizeof err) == -1);
    /* the claim ends with the store that holds it */
    tg_blobstore_close(first);
    CHECK(tg_blobstore_claim(second, err, sizeof err) == 0);
    tg_blobstore_close(second);
}

TEST(commit_lock_shared_and_exclusive)
{
    tg_blobstore *store = open_store();
    if (store == NULL)
        return;
    int shared = tg_blobstore_lock(store, false, true);
    CHECK(shared >= 0);
    int shared2 = tg_blobstore_lock(store, false, false);
    CHECK(shared2 >= 0); /* shared locks share */
    errno = 0;
    CHECK(tg_blobstore_lock(store, true, false) == -1 && errno == EWOULDBLOCK);
    tg_blobstore_unlock(store, shared);
    tg_blobstore_unlock(store, shared2);
    int exclusive = tg_blobstore_lock(store, true, false);
    CHECK(exclusive >= 0);
    errno = 0;
    CHECK(tg_blobstore_lock(store, false, false) == -1 && errno == EWOULDBLOCK);
    tg_blobstore_unlock(store, exclusive);
    tg_blobstore_close(store);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--direct-enospc-child") == 0)
        return direct_enospc_child(argv[2]);
    if (setenv("TENSORGATE_TEST_ENOSPC_AT", "2", 1) != 0)
        return 1;
    snprintf(dir, sizeof dir, "/tmp/tg-blobstore-local-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    RUN(enospc_at_a_write_leaves_nothing);
    RUN(write_commit_read);
    RUN(abort_leaves_nothing);
    RUN(large_write_goes_around_the_page_cache_and_reads_back);
    RUN(direct_enospc_leaves_nothing);
    RUN(listing_and_space);
    RUN(checked_open_records_damage_and_a_commit_heals);
    RUN(one_claim_per_directory_and_it_clears_tmp);
    RUN(commit_lock_shared_and_exclusive);
    char command[96];
    snprintf(command, sizeof command, "rm -rf %s", dir);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return test_report(argv[0]);
}
