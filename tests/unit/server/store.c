/* Unit tests for server/store.c: layout, temp files, commit, dedupe, gc walk. */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "test.h"

static const char *hex_a = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"; /* "hello" */

static int count_blob(void *ctx, const char *hex)
{
    (void)hex;
    (*(int *)ctx)++;
    return 0;
}

TEST(layout_commit_and_dedupe)
{
    char root[64];
    snprintf(root, sizeof root, "/tmp/tg-store-XXXXXX");
    CHECK(mkdtemp(root) != NULL);
    char err[256];
    tg_store store;
    /* A leftover upload in tmp/ is removed at open. */
    char tmp_dir[128], leftover[160];
    snprintf(tmp_dir, sizeof tmp_dir, "%s/tmp", root);
    mkdir(tmp_dir, 0755);
    snprintf(leftover, sizeof leftover, "%s/upload-old", tmp_dir);
    close(open(leftover, O_CREAT | O_WRONLY, 0644));
    CHECK(tg_store_open(&store, root, err, sizeof err) == 0);
    CHECK(access(leftover, F_OK) != 0);

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

int main(int argc, char **argv)
{
    (void)argc;
    RUN(layout_commit_and_dedupe);
    RUN(sha256_hex_shape);
    return test_report(argv[0]);
}
