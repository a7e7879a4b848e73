/* Unit tests for server/storage/store.c: layout, temp files, commit, dedupe, gc walk. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "test.h"

static const char *hex_a =
    "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"; /* "hello" */

static int count_blob(void *ctx, const char *hex)
{
    (void)hex;
    (*(int *)ctx)++;
    return 0;
}

/* True when the file at path holds exactly the len bytes of want. */
static bool file_is(const char *path, const char *want, size_t len)
{
    char buf[64];
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return false;
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return n == len && memcmp(buf, want, len) == 0;
}

TEST(layout_commit_and_dedupe)
{
    char root[64];
    snprintf(root, sizeof root, "/tmp/tg-store-XXXXXX");
    CHECK(mkdtemp(root) != NULL);
    char err[256];
    tg_store store;
    /* A leftover upload in tmp/ stays at open (a maintenance command runs beside a
     * server) and is removed when the server claims the directory; a second claim
     * is refused while the first is held, and allowed once it is released. */
    char tmp_dir[128], leftover[160];
    snprintf(tmp_dir, sizeof tmp_dir, "%s/tmp", root);
    mkdir(tmp_dir, 0755);
    snprintf(leftover, sizeof leftover, "%s/upload-old", tmp_dir);
    close(open(leftover, O_CREAT | O_WRONLY, 0644));
    CHECK(tg_store_open(&store, root, err, sizeof err) == 0);
    CHECK(access(leftover, F_OK) == 0);
    int claim = tg_store_claim(&store, err, sizeof err);
    CHECK(claim >= 0);
    CHECK(access(leftover, F_OK) != 0);
    close(open(leftover, O_CREAT | O_WRONLY, 0644));
    err[0] = '\0';
    CHECK(tg_store_claim(&store, err, sizeof err) == -1);
    CHECK(strstr(err, "another tensorgate serve is using the data directory") != NULL);
    CHECK(access(leftover, F_OK) == 0); /* the refused claim touched nothing */
    tg_store_unlock(claim);
    claim = tg_store_claim(&store, err, sizeof err);
    CHECK(claim >= 0);
    tg_store_unlock(claim);

    for (int round = 0; round < 2; round++) {
        int fd = -1;
        char temp[4400];
        CHECK(tg_store_temp_create(&store, &fd, temp, sizeof temp) == 0);
        CHECK(tg_store_write_all(fd, "hello", 5) == TG_STORE_OK);
        CHECK(tg_store_commit_blob(&store, fd, temp, hex_a) == TG_STORE_OK);
        CHECK(access(temp, F_OK) != 0); /* renamed or dropped: never left behind */
    }
    char path[4400];
    CHECK(tg_store_blob_path(&store, hex_a, path, sizeof path) == 0);
    CHECK(strstr(path, "/blobs/sha256/2c/2cf24dba") != NULL);
    int fd = tg_store_open_blob(&store, hex_a);
    CHECK(fd >= 0);
    char buf[8] = "";
    CHECK(read(fd, buf, sizeof buf) == 5);
    CHECK(memcmp(buf, "hello", 5) == 0);
    close(fd);
    int count = 0;
    tg_store_each_blob(&store, count_blob, &count);
    CHECK_EQ_U64(count, 1);
    CHECK(tg_store_remove_blob(&store, hex_a) == 0);
    count = 0;
    tg_store_each_blob(&store, count_blob, &count);
    CHECK_EQ_U64(count, 0);
    CHECK(tg_store_open_blob(&store, "../../etc/passwd") < 0);
    CHECK(tg_store_blob_path(&store, "ABCD", path, sizeof path) == -1);

    int discard_fd = -1;
    char discard_path[4400];
    CHECK(tg_store_temp_create(&store, &discard_fd, discard_path, sizeof discard_path) == 0);
    tg_store_temp_discard(discard_fd, discard_path);
    CHECK(access(discard_path, F_OK) != 0);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", root);
    CHECK(system(command) == 0);
}

TEST(sha256_hex_shape)
{
    CHECK(tg_is_sha256_hex(hex_a));
    CHECK(!tg_is_sha256_hex("2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824"));
    CHECK(!tg_is_sha256_hex("2cf2"));
    CHECK(!tg_is_sha256_hex(""));
}

/* blobs.lock: commits share it, gc excludes them (each lock is its own open
 * file, so this holds between threads of one process as between processes). */
TEST(blobs_lock_shared_and_exclusive)
{
    char root[64];
    snprintf(root, sizeof root, "/tmp/tg-store-XXXXXX");
    CHECK(mkdtemp(root) != NULL);
    char err[256];
    tg_store store;
    CHECK(tg_store_open(&store, root, err, sizeof err) == 0);
    int shared1 = tg_store_lock_blobs(&store, false, false);
    int shared2 = tg_store_lock_blobs(&store, false, false);
    CHECK(shared1 >= 0 && shared2 >= 0);
    CHECK(tg_store_lock_blobs(&store, true, false) == -1);
    CHECK(errno == EWOULDBLOCK);
    tg_store_unlock(shared1);
    CHECK(tg_store_lock_blobs(&store, true, false) == -1); /* one commit still holds it */
    tg_store_unlock(shared2);
    int exclusive = tg_store_lock_blobs(&store, true, false);
    CHECK(exclusive >= 0);
    CHECK(tg_store_lock_blobs(&store, false, false) == -1);
    tg_store_unlock(exclusive);
    int again = tg_store_lock_blobs(&store, false, false);
    CHECK(again >= 0);
    tg_store_unlock(again);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(system(cmd) == 0);
}

/* The read paths' checked open, exact reads, damage records, and a commit that
 * heals a damaged blob (cut short, or a flipped bit) with the new copy. */
TEST(checked_open_damage_records_and_healing)
{
    char root[64];
    snprintf(root, sizeof root, "/tmp/tg-store-XXXXXX");
    CHECK(mkdtemp(root) != NULL);
    char err[256], path[4400], why[256];
    tg_store store;
    CHECK(tg_store_open(&store, root, err, sizeof err) == 0);
    CHECK(tg_store_blob_path(&store, hex_a, path, sizeof path) == 0);
    tg_blob_check check = TG_BLOB_OK;
    CHECK(tg_store_open_blob_checked(&store, hex_a, 5, &check) == -1);
    CHECK(check == TG_BLOB_MISSING);
    CHECK(tg_store_damage_record(&store, hex_a, why, sizeof why));
    CHECK(strstr(why, "missing") != NULL);

    for (int round = 0; round < 3; round++) {
        int fd = -1;
        char temp[4400];
        CHECK(tg_store_temp_create(&store, &fd, temp, sizeof temp) == 0);
        CHECK(tg_store_write_all(fd, "hello", 5) == TG_STORE_OK);
        CHECK(tg_store_commit_blob(&store, fd, temp, hex_a) == TG_STORE_OK);
        CHECK(access(temp, F_OK) != 0);
        /* every commit leaves the whole content and no record */
        CHECK(file_is(path, "hello", 5));
        CHECK(!tg_store_damage_record(&store, hex_a, NULL, 0));
        if (round == 0) {
            CHECK(truncate(path, 3) == 0); /* cut short: healed by the next commit */
            CHECK(tg_store_open_blob_checked(&store, hex_a, 5, &check) == -1);
            CHECK(check == TG_BLOB_DAMAGED);
            CHECK(tg_store_damage_record(&store, hex_a, why, sizeof why));
            CHECK(strstr(why, "3 bytes on disk, the catalog says 5") != NULL);
        } else if (round == 1) {
            int w = open(path, O_WRONLY);
            CHECK(w >= 0 && pwrite(w, "j", 1, 0) == 1); /* same size, another hash */
            close(w);
            CHECK(!file_is(path, "hello", 5));
        }
    }
    int fd = tg_store_open_blob_checked(&store, hex_a, 5, &check);
    CHECK(fd >= 0 && check == TG_BLOB_OK);
    char buf[8] = "";
    CHECK(tg_store_read_at(fd, buf, 4, 1) == 0 && memcmp(buf, "ello", 4) == 0);
    errno = 0;
    CHECK(tg_store_read_at(fd, buf, 8, 0) == -1 && errno == EIO); /* never a loop on EOF */
    close(fd);
    int records = 0;
    tg_store_mark_damaged(&store, hex_a, "test %d", 1);
    tg_store_each_damaged(&store, count_blob, &records);
    CHECK_EQ_U64(records, 1);
    tg_store_clear_damaged(&store, hex_a);
    records = 0;
    tg_store_each_damaged(&store, count_blob, &records);
    CHECK_EQ_U64(records, 0);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", root);
    CHECK(system(command) == 0);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(layout_commit_and_dedupe);
    RUN(sha256_hex_shape);
    RUN(blobs_lock_shared_and_exclusive);
    RUN(checked_open_damage_records_and_healing);
    return test_report(argv[0]);
}
