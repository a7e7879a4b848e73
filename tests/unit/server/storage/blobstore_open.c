/* Unit tests for server/storage/blobstore_open.c: the blob store's factory picks
 * the backend from the URL:
 * - a directory path and "file:DIR" open the local-directory backend ("file");
 * - an unknown "scheme://" is refused with one sentence naming the forms it takes,
 *   nothing opened;
 * - a name that only looks like a URL (no "://") is still a path. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blobstore.h"
#include "test.h"

static char temp_dir[64];

TEST(a_path_and_a_file_url_open_the_local_backend)
{
    char url[128], err[256] = "";
    tg_blobstore *store = NULL;
    snprintf(url, sizeof url, "%s/plain", temp_dir);
    CHECK(tg_blobstore_open(url, &store, err, sizeof err) == 0);
    CHECK(store != NULL && strcmp(tg_blobstore_kind(store), "file") == 0);
    tg_blobstore_close(store);
    store = NULL;
    snprintf(url, sizeof url, "file:%s/by-url", temp_dir);
    CHECK(tg_blobstore_open_options(url, NULL, &store, err, sizeof err) == 0);
    CHECK(store != NULL && strcmp(tg_blobstore_kind(store), "file") == 0);
    tg_blobstore_close(store);
}

TEST(an_unknown_scheme_is_refused)
{
    char err[256] = "";
    tg_blobstore *store = (tg_blobstore *)err; /* set to NULL */
    CHECK(tg_blobstore_open("gs://bucket/prefix", &store, err, sizeof err) == -1);
    CHECK(store == NULL);
    CHECK(strstr(err, "unknown blob store URL scheme \"gs://\"") != NULL);
}

TEST(a_name_without_scheme_separator_is_a_path)
{
    char url[128], err[256] = "";
    tg_blobstore *store = NULL;
    snprintf(url, sizeof url, "%s/s3:looks-like-one", temp_dir);
    CHECK(tg_blobstore_open(url, &store, err, sizeof err) == 0);
    CHECK(store != NULL && strcmp(tg_blobstore_kind(store), "file") == 0);
    tg_blobstore_close(store);
}

int main(int argc, char **argv)
{
    (void)argc;
    snprintf(temp_dir, sizeof temp_dir, "/tmp/tg-bsopen-XXXXXX");
    CHECK(mkdtemp(temp_dir) != NULL);
    RUN(a_path_and_a_file_url_open_the_local_backend);
    RUN(an_unknown_scheme_is_refused);
    RUN(a_name_without_scheme_separator_is_a_path);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", temp_dir);
    CHECK(system(command) == 0);
    return test_report(argv[0]);
}
