/* Unit tests for common/sha256.c: known vectors (FIPS 180-2 examples), a 1 MiB buffer
 * fed in odd-sized pieces against the one-shot, the hex encoder, and every EVP call of
 * a digest failing in turn: an error and "" each time, never a digest, and the next
 * digest whole again (the injection fires once). */
#include <stdlib.h>

#include "manifest.h"
#include "sha256.h"
#include "test.h"

static const char *const empty_hex =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
static const char *const abc_hex =
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
static const char *const million_a_hex =
    "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";

TEST(known_vectors)
{
    char hex[65];
    CHECK_EQ_U64(tg_sha256_hex("", 0, hex, "test"), 0);
    CHECK_STR(hex, empty_hex);
    CHECK_EQ_U64(tg_sha256_hex("abc", 3, hex, "test"), 0);
    CHECK_STR(hex, abc_hex);

    /* incremental, with no update at all */
    tg_sha256 s;
    CHECK_EQ_U64(tg_sha256_init(&s, "test"), 0);
    CHECK_EQ_U64(tg_sha256_final_hex(&s, hex), 0);
    CHECK_STR(hex, empty_hex);

    /* one million 'a' in pieces of 1, 2, 3, ... bytes */
    size_t million = 1000000;
    char *a = malloc(million);
    CHECK(a != NULL);
    if (a == NULL)
        return;
    memset(a, 'a', million);
    CHECK_EQ_U64(tg_sha256_init(&s, "test"), 0);
    for (size_t done = 0, piece = 1; done < million; done += piece, piece++) {
        size_t n = piece < million - done ? piece : million - done;
        if (tg_sha256_update(&s, a + done, n) != 0)
            break;
    }
    CHECK_EQ_U64(tg_sha256_final_hex(&s, hex), 0);
    CHECK_STR(hex, million_a_hex);
    free(a);
}

TEST(odd_pieces_equal_one_shot)
{
    size_t size = 1u << 20;
    unsigned char *buf = malloc(size);
    CHECK(buf != NULL);
    if (buf == NULL)
        return;
    uint32_t x = 2463534242u; /* xorshift: bytes that are not all alike */
    for (size_t i = 0; i < size; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        buf[i] = (unsigned char)x;
    }
    char whole[65], pieces[65];
    CHECK_EQ_U64(tg_sha256_hex(buf, size, whole, "test"), 0);
    static const size_t odd[] = {1, 3, 7, 63, 65, 4093, 65537, 0};
    tg_sha256 s;
    CHECK_EQ_U64(tg_sha256_init(&s, "test"), 0);
    size_t done = 0;
    for (unsigned k = 0; done < size; k++) {
        size_t n = odd[k % 8] < size - done ? odd[k % 8] : size - done;
        CHECK_EQ_U64(tg_sha256_update(&s, buf + done, n), 0); /* 0 bytes too */
        done += n;
    }
    CHECK_EQ_U64(tg_sha256_final_hex(&s, pieces), 0);
    CHECK_STR(pieces, whole);
    /* the raw digest is what the hex spells */
    unsigned char raw[TG_SHA256_SIZE];
    char raw_hex[65];
    CHECK_EQ_U64(tg_sha256_init(&s, "test"), 0);
    CHECK_EQ_U64(tg_sha256_update(&s, buf, size), 0);
    CHECK_EQ_U64(tg_sha256_final(&s, raw), 0);
    tg_hex_encode(raw, sizeof raw, raw_hex);
    CHECK_STR(raw_hex, whole);
    free(buf);
}

TEST(hex_encoder)
{
    static const unsigned char bytes[] = {0x00, 0x01, 0x7f, 0x80, 0xab, 0xff};
    char out[2 * sizeof bytes + 1];
    memset(out, 'x', sizeof out);
    tg_hex_encode(bytes, sizeof bytes, out);
    CHECK_STR(out, "00017f80abff");
    tg_hex_encode(bytes, 0, out);
    CHECK_STR(out, "");
}

/* Each of the 4 + pieces calls of an incremental digest failing: -1 and "" (all zero
 * bytes raw); later calls of that digest fail too; the next digest is whole. */
TEST(every_call_failing_is_an_error)
{
    const unsigned pieces = 3, calls = 3 + pieces; /* allocation, init, updates, final */
    for (unsigned nth = 1; nth <= calls; nth++) {
        tg_sha256_fail_nth("inject", nth);
        tg_sha256 s;
        int rc = tg_sha256_init(&s, "inject");
        CHECK_EQ_U64(rc != 0, nth <= 2);
        bool failed = rc != 0;
        for (unsigned p = 0; p < pieces; p++) {
            rc = tg_sha256_update(&s, "abc" + p, 1);
            CHECK_EQ_U64(rc != 0, failed || nth == 3 + p);
            failed = failed || rc != 0;
        }
        char hex[65];
        memset(hex, 'x', sizeof hex);
        CHECK_EQ_U64(tg_sha256_final_hex(&s, hex), (uint64_t)-1);
        CHECK_STR(hex, "");
        tg_sha256_free(&s); /* safe after final and after a failure */
        /* the injection fired: the same digest is whole now */
        CHECK_EQ_U64(tg_sha256_hex("abc", 3, hex, "inject"), 0);
        CHECK_STR(hex, abc_hex);
    }
    /* a raw digest after a failure is zero bytes, never stack */
    tg_sha256_fail_nth("inject", 3);
    tg_sha256 s;
    CHECK_EQ_U64(tg_sha256_init(&s, "inject"), 0);
    CHECK(tg_sha256_update(&s, "abc", 3) != 0);
    unsigned char raw[TG_SHA256_SIZE];
    memset(raw, 0xa5, sizeof raw);
    CHECK(tg_sha256_final(&s, raw) != 0);
    static const unsigned char zero[TG_SHA256_SIZE];
    CHECK(memcmp(raw, zero, sizeof raw) == 0);
    /* other names are not counted */
    tg_sha256_fail_nth("inject", 1);
    char hex[65];
    CHECK_EQ_U64(tg_sha256_hex("abc", 3, hex, "other"), 0);
    CHECK_STR(hex, abc_hex);
    tg_sha256_fail_nth("inject", 0); /* disarmed */
    CHECK_EQ_U64(tg_sha256_hex("abc", 3, hex, "inject"), 0);
}

/* The version digest (server/ingest/manifest.c): an error, never a digest of stack. */
TEST(manifest_digest_failure_propagates)
{
    tg_file_record files[2];
    memset(files, 0, sizeof files);
    snprintf(files[0].path, sizeof files[0].path, "a.safetensors");
    snprintf(files[0].sha256, sizeof files[0].sha256, "%s", abc_hex);
    files[0].size = 3;
    snprintf(files[1].path, sizeof files[1].path, "config.json");
    snprintf(files[1].sha256, sizeof files[1].sha256, "%s", empty_hex);
    files[1].size = 0;
    char whole[65], expected[65];
    CHECK_EQ_U64(tg_manifest_digest(files, 2, whole), 0);
    char lines[512];
    int n =
        snprintf(lines, sizeof lines, "a.safetensors %s 3\nconfig.json %s 0\n", abc_hex, empty_hex);
    CHECK_EQ_U64(tg_sha256_hex(lines, (size_t)n, expected, "test"), 0);
    CHECK_STR(whole, expected);
    for (unsigned nth = 1; nth <= 5; nth++) { /* allocation, init, 2 lines, final */
        tg_sha256_fail_nth("manifest", nth);
        char hex[65];
        memset(hex, 'x', sizeof hex);
        CHECK_EQ_U64(tg_manifest_digest(files, 2, hex), (uint64_t)-1);
        CHECK_STR(hex, "");
    }
    tg_sha256_fail_nth("manifest", 0);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(known_vectors);
    RUN(odd_pieces_equal_one_shot);
    RUN(hex_encoder);
    RUN(every_call_failing_is_an_error);
    RUN(manifest_digest_failure_propagates);
    return test_report(argv[0]);
}
