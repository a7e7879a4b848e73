/* Unit tests for cmd/blob_options.c: the blob store flags are taken out of argv
 * (the rest kept in order), environment variables apply first and flags override
 * them, the URL defaults to file:DATA, and bad values are refused with a sentence. */
#include <stdlib.h>
#include <string.h>

#include "blob_options.h"
#include "test.h"

TEST(flags_are_taken_and_the_rest_kept)
{
    char *argv[] = {"serve",
                    "--listen",
                    "127.0.0.1:0",
                    "--blob-store",
                    "s3://b/p",
                    "--s3-endpoint=http://h:1",
                    "--download-redirect",
                    "--gc-grace",
                    "60",
                    "--cache-dir",
                    "/tmp/c",
                    "--cache-size",
                    "1M",
                    "--threads",
                    "4",
                    NULL};
    int argc = 15;
    char err[256] = "";
    CHECK(tg_blob_options_take(&argc, argv, err, sizeof err) == 0);
    CHECK(argc == 5);
    CHECK_STR(argv[1], "--listen");
    CHECK_STR(argv[2], "127.0.0.1:0");
    CHECK_STR(argv[3], "--threads");
    CHECK_STR(argv[4], "4");
    CHECK(argv[5] == NULL);
    char url[256];
    tg_blob_options_url("/data", url, sizeof url);
    CHECK_STR(url, "s3://b/p");
    const tg_blobstore_options *o = tg_blob_options_get();
    CHECK_STR(o->s3_endpoint, "http://h:1");
    CHECK(o->download_redirect);
    CHECK(o->gc_grace_set && o->gc_grace == 60);
    CHECK_STR(o->cache_dir, "/tmp/c");
    CHECK(o->cache_size == 1U << 20);
    tg_blob_options_set_max_blob(123);
    CHECK(tg_blob_options_get()->max_blob == 123);
}

TEST(environment_then_flags)
{
    setenv("TENSORGATE_BLOB_STORE", "s3://env-bucket", 1);
    setenv("TENSORGATE_S3_REGION", "eu-west-1", 1);
    char *argv[] = {"gc", "--s3-region", "us-west-2", NULL};
    int argc = 3;
    char err[256] = "", url[256];
    CHECK(tg_blob_options_take(&argc, argv, err, sizeof err) == 0);
    CHECK(argc == 1);
    tg_blob_options_url("/data", url, sizeof url);
    CHECK_STR(url, "s3://env-bucket");
    CHECK_STR(tg_blob_options_get()->s3_region, "us-west-2");
    CHECK(!tg_blob_options_get()->download_redirect);
    CHECK(!tg_blob_options_get()->gc_grace_set);
    unsetenv("TENSORGATE_BLOB_STORE");
    unsetenv("TENSORGATE_S3_REGION");
    char *plain[] = {"serve", NULL};
    argc = 1;
    CHECK(tg_blob_options_take(&argc, plain, err, sizeof err) == 0);
    tg_blob_options_url("/data", url, sizeof url);
    CHECK_STR(url, "file:/data");
}

TEST(bad_values_are_refused)
{
    char err[256] = "";
    char *a[] = {"serve", "--gc-grace", "soon", NULL};
    int argc = 3;
    CHECK(tg_blob_options_take(&argc, a, err, sizeof err) == -1);
    CHECK(strstr(err, "--gc-grace") != NULL);
    char *b[] = {"serve", "--blob-store", NULL};
    argc = 2;
    CHECK(tg_blob_options_take(&argc, b, err, sizeof err) == -1);
    CHECK(strstr(err, "needs a value") != NULL);
    char *c[] = {"serve", "--blob-store=", NULL};
    argc = 2;
    CHECK(tg_blob_options_take(&argc, c, err, sizeof err) == -1);
    CHECK(strstr(err, "needs a URL") != NULL);
    CHECK(strstr(tg_blob_options_usage(), "--blob-store") != NULL);
}

int main(int argc, char **argv)
{
    (void)argc;
    unsetenv("TENSORGATE_BLOB_STORE");
    unsetenv("TENSORGATE_S3_ENDPOINT");
    unsetenv("TENSORGATE_S3_REGION");
    unsetenv("TENSORGATE_DOWNLOAD_REDIRECT");
    unsetenv("TENSORGATE_CACHE_DIR");
    unsetenv("TENSORGATE_CACHE_SIZE");
    unsetenv("TENSORGATE_GC_GRACE");
    RUN(flags_are_taken_and_the_rest_kept);
    RUN(environment_then_flags);
    RUN(bad_values_are_refused);
    return test_report(argv[0]);
}
