/* Unit tests for server/ingest/manifest.c: the version digest is the SHA-256 of one
 * "path sha256 size\n" line per file in the order given (the order and every field
 * count), an empty version has the digest of no bytes, and a line that cannot be
 * formed or an injected SHA-256 failure is an error with hex "", never a digest. */
#include <stdio.h>
#include <string.h>

#include "manifest.h"
#include "sha256.h"
#include "test.h"

static const char a_hex[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
static const char b_hex[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

static tg_file_record record(const char *path, const char *sha, uint64_t size)
{
    tg_file_record f;
    memset(&f, 0, sizeof f);
    snprintf(f.path, sizeof f.path, "%s", path);
    snprintf(f.sha256, sizeof f.sha256, "%s", sha);
    f.size = size;
    return f;
}

TEST(lines_in_the_order_given)
{
    tg_file_record files[2] = {record("dir/model.safetensors", a_hex, 1234567890123ull),
                               record("z.json", b_hex, 0)};
    char hex[65], want[65], lines[512];
    int n = snprintf(lines, sizeof lines, "dir/model.safetensors %s 1234567890123\nz.json %s 0\n",
                     a_hex, b_hex);
    CHECK_EQ_U64(tg_sha256_hex(lines, (size_t)n, want, "test"), 0);
    CHECK_EQ_U64(tg_manifest_digest(files, 2, hex), 0);
    CHECK_STR(hex, want);
    /* another order, another digest; a size or a sha256 changed, another digest */
    tg_file_record swapped[2] = {files[1], files[0]};
    char other[65];
    CHECK_EQ_U64(tg_manifest_digest(swapped, 2, other), 0);
    CHECK(strcmp(other, hex) != 0);
    files[1].size = 1;
    CHECK_EQ_U64(tg_manifest_digest(files, 2, other), 0);
    CHECK(strcmp(other, hex) != 0);
    files[1].size = 0;
    snprintf(files[1].sha256, sizeof files[1].sha256, "%s", a_hex);
    CHECK_EQ_U64(tg_manifest_digest(files, 2, other), 0);
    CHECK(strcmp(other, hex) != 0);
}

TEST(no_files_is_the_digest_of_nothing)
{
    char hex[65];
    CHECK_EQ_U64(tg_manifest_digest(NULL, 0, hex), 0);
    CHECK_STR(hex, b_hex);
}

TEST(failures_are_errors_never_digests)
{
    tg_file_record files[1] = {record("a.safetensors", a_hex, 3)};
    /* the EVP calls: allocation, init, the line, final */
    for (unsigned nth = 1; nth <= 4; nth++) {
        tg_sha256_fail_nth("manifest", nth);
        char hex[65];
        memset(hex, 'x', sizeof hex);
        CHECK_EQ_U64(tg_manifest_digest(files, 1, hex), (uint64_t)-1);
        CHECK_STR(hex, "");
    }
    tg_sha256_fail_nth("manifest", 0);
    char hex[65];
    CHECK_EQ_U64(tg_manifest_digest(files, 1, hex), 0);
    CHECK_EQ_U64(strlen(hex), 64);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(lines_in_the_order_given);
    RUN(no_files_is_the_digest_of_nothing);
    RUN(failures_are_errors_never_digests);
    return test_report(argv[0]);
}
