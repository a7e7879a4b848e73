/* Unit tests for server/core/checks.c: names, paths, cursors, Range, If-None-Match. */
#include <stdlib.h>

#include "checks.h"
#include "test.h"

TEST(name_parts)
{
    CHECK(tg_valid_name_part("acme"));
    CHECK(tg_valid_name_part("Llama-3.1_8B"));
    CHECK(tg_valid_name_part("a"));
    CHECK(!tg_valid_name_part(""));
    CHECK(!tg_valid_name_part("-lead"));
    CHECK(!tg_valid_name_part(".hidden"));
    CHECK(!tg_valid_name_part("a..b"));
    CHECK(!tg_valid_name_part("a/b"));
    CHECK(!tg_valid_name_part("a b"));
    CHECK(!tg_valid_name_part("caf\xc3\xa9"));
    char long_name[66];
    memset(long_name, 'a', 65);
    long_name[65] = '\0';
    CHECK(!tg_valid_name_part(long_name));
    long_name[64] = '\0';
    CHECK(tg_valid_name_part(long_name));
}

TEST(aliases)
{
    CHECK(tg_valid_alias("stable"));
    CHECK(tg_valid_alias("v1"));
    CHECK(tg_valid_alias("latest")); /* reserved by the route, not by the grammar */
    CHECK(!tg_valid_alias("0123456789abcdef0123456789abcdef01234567")); /* a commit id */
    CHECK(tg_valid_alias("0123456789abcdef0123456789abcdef0123456"));   /* 39 hex */
    CHECK(!tg_valid_alias("12"));
    CHECK(!tg_valid_alias("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
    CHECK(tg_valid_alias("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeF"));
}

TEST(file_paths)
{
    const char *why = NULL;
    CHECK(tg_valid_file_path("model.safetensors", &why));
    CHECK(why == NULL);
    CHECK(tg_valid_file_path("text_encoder/model-00001-of-00002.safetensors", NULL));
    CHECK(tg_valid_file_path(".gitattributes", NULL));
    CHECK(!tg_valid_file_path("", &why));
    CHECK(!tg_valid_file_path("/etc/passwd", &why));
    CHECK_STR(why, "the path is absolute");
    CHECK(!tg_valid_file_path("a/../b", &why));
    CHECK_STR(why, "the path has a '.' or '..' segment");
    CHECK(!tg_valid_file_path("./a", NULL));
    CHECK(!tg_valid_file_path("..", NULL));
    CHECK(!tg_valid_file_path("a//b", &why));
    CHECK_STR(why, "the path has an empty segment");
    CHECK(!tg_valid_file_path("a/", NULL));
    CHECK(!tg_valid_file_path("a\\b", NULL));
    CHECK(!tg_valid_file_path("a\x01", NULL));
    /* the Hub's path characters: a space, '+', non-ASCII letters (UTF-8, NFC or not) */
    CHECK(tg_valid_file_path("sp ace", NULL));
    CHECK(tg_valid_file_path("images/a+b.png", NULL));
    CHECK(tg_valid_file_path("caf\xc3\xa9/mod\xc3\xa8le.safetensors", NULL));
    CHECK(tg_valid_file_path("cafe\xcc\x81.md", NULL)); /* e + combining acute: NFD */
    CHECK(tg_valid_file_path("\xe6\xa8\xa1\xe5\x9e\x8b.json", NULL));
    CHECK(!tg_valid_file_path(" lead", &why));
    CHECK(!tg_valid_file_path("trail /x", NULL));
    CHECK(!tg_valid_file_path("a\xff", &why));
    CHECK_STR(why, "the path is not valid UTF-8");
    CHECK(!tg_valid_file_path("a\xc3", NULL));             /* cut sequence */
    CHECK(!tg_valid_file_path("a\xc0\xae", NULL));         /* overlong '.' */
    CHECK(!tg_valid_file_path("a\xc2\x85", NULL));         /* C1 NEL */
    CHECK(!tg_valid_file_path("a\xe2\x80\xae.txt", &why)); /* RIGHT-TO-LEFT OVERRIDE */
    CHECK_STR(why, "the path has an invisible or control character");
    CHECK(!tg_valid_file_path("a\x7f", NULL));
    CHECK(!tg_valid_file_path("a\tb", NULL));
    CHECK(!tg_valid_file_path("a:b", NULL));
    CHECK(!tg_valid_file_path("a%2e", NULL));
    CHECK(!tg_valid_file_path("a*b", NULL));
    char path[300];
    memset(path, 'a', 256);
    path[256] = '\0';
    CHECK(!tg_valid_file_path(path, &why));
    path[255] = '\0';
    CHECK(tg_valid_file_path(path, NULL));
}

TEST(cursor_round_trip)
{
    const char *keys[] = {"a",        "ab",         "abc",
                          "abcd",     "acme/llama", "sub/model-00001-of-00002.safetensors",
                          "\xff\xfe", "12345"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char cursor[128], back[128];
        CHECK(tg_cursor_encode(keys[i], cursor, sizeof cursor) == 0);
        CHECK(strchr(cursor, '=') == NULL);
        CHECK(strchr(cursor, '/') == NULL && strchr(cursor, '+') == NULL);
        CHECK(tg_cursor_decode(cursor, back, sizeof back) == 0);
        CHECK_STR(back, keys[i]);
    }
    char out[8];
    CHECK(tg_cursor_encode("acme/llama", out, sizeof out) == -1);
}

TEST(cursor_rejects_garbage)
{
    char key[64];
    CHECK(tg_cursor_decode("a", key, sizeof key) == -1);    /* 6 bits: no whole byte */
    CHECK(tg_cursor_decode("YQ==", key, sizeof key) == -1); /* padding is not issued */
    CHECK(tg_cursor_decode("Y+", key, sizeof key) == -1);   /* not base64url */
    CHECK(tg_cursor_decode("YR", key, sizeof key) == -1);   /* nonzero leftover bits */
    CHECK(tg_cursor_decode("AA", key, sizeof key) == -1);   /* a NUL byte */
    CHECK(tg_cursor_decode("YWJjZGVmZ2g", key, 4) == -1);   /* does not fit */
    CHECK(tg_cursor_decode("YQ", key, sizeof key) == 0);
    CHECK_STR(key, "a");
    CHECK(tg_cursor_decode("", key, sizeof key) == 0);
    CHECK_STR(key, "");
}

TEST(range_single)
{
    uint64_t first = 99, length = 99;
    CHECK(tg_range_parse("bytes=0-7", 216, &first, &length) == TG_RANGE_OK);
    CHECK_EQ_U64(first, 0);
    CHECK_EQ_U64(length, 8);
    CHECK(tg_range_parse("bytes=8-", 216, &first, &length) == TG_RANGE_OK);
    CHECK_EQ_U64(first, 8);
    CHECK_EQ_U64(length, 208);
    CHECK(tg_range_parse("bytes=-16", 216, &first, &length) == TG_RANGE_OK);
    CHECK_EQ_U64(first, 200);
    CHECK_EQ_U64(length, 16);
    CHECK(tg_range_parse("bytes=-1000", 216, &first, &length) == TG_RANGE_OK);
    CHECK_EQ_U64(first, 0);
    CHECK_EQ_U64(length, 216);
    CHECK(tg_range_parse("bytes=100-100000", 216, &first, &length) == TG_RANGE_OK);
    CHECK_EQ_U64(first, 100);
    CHECK_EQ_U64(length, 116);
    CHECK(tg_range_parse("bytes=215-215", 216, &first, &length) == TG_RANGE_OK);
    CHECK_EQ_U64(length, 1);
    CHECK(tg_range_parse(" Bytes = 1-2 ", 216, &first, &length) == TG_RANGE_OK);
    CHECK_EQ_U64(first, 1);
    CHECK_EQ_U64(length, 2);
}

TEST(range_unsatisfiable_and_ignored)
{
    uint64_t first, length;
    CHECK(tg_range_parse("bytes=216-", 216, &first, &length) == TG_RANGE_UNSATISFIABLE);
    CHECK(tg_range_parse("bytes=1000-2000", 216, &first, &length) == TG_RANGE_UNSATISFIABLE);
    CHECK(tg_range_parse("bytes=-0", 216, &first, &length) == TG_RANGE_UNSATISFIABLE);
    CHECK(tg_range_parse("bytes=0-0", 0, &first, &length) == TG_RANGE_UNSATISFIABLE);
    CHECK(tg_range_parse("bytes=-5", 0, &first, &length) == TG_RANGE_UNSATISFIABLE);
    CHECK(tg_range_parse(NULL, 216, &first, &length) == TG_RANGE_NONE);
    CHECK(tg_range_parse("bytes=5-2", 216, &first, &length) == TG_RANGE_NONE);
    CHECK(tg_range_parse("bytes=0-1,4-5", 216, &first, &length) == TG_RANGE_NONE);
    CHECK(tg_range_parse("items=0-1", 216, &first, &length) == TG_RANGE_NONE);
    CHECK(tg_range_parse("bytes=-", 216, &first, &length) == TG_RANGE_NONE);
    CHECK(tg_range_parse("bytes=a-b", 216, &first, &length) == TG_RANGE_NONE);
    CHECK(tg_range_parse("bytes=1-2x", 216, &first, &length) == TG_RANGE_NONE);
    /* A first-byte-pos beyond u64 is still past the end: unsatisfiable, like
     * 18446744073709551615 (RFC 9110 14.1.2), never ignored. */
    CHECK(tg_range_parse("bytes=99999999999999999999-", 216, &first, &length) ==
          TG_RANGE_UNSATISFIABLE);
    CHECK(tg_range_parse("bytes=18446744073709551615-", 216, &first, &length) ==
          TG_RANGE_UNSATISFIABLE);
    CHECK(tg_range_parse("bytes=00000000000000000000000099999999999999999999-", 216, &first,
                         &length) == TG_RANGE_UNSATISFIABLE);
    CHECK(tg_range_parse("bytes=99999999999999999999-99999999999999999999", UINT64_MAX, &first,
                         &length) == TG_RANGE_UNSATISFIABLE);
    /* An overflowing last-byte-pos means "to the end"; an overflowing suffix, the whole body. */
    CHECK(tg_range_parse("bytes=10-99999999999999999999", 216, &first, &length) == TG_RANGE_OK);
    CHECK_EQ_U64(first, 10);
    CHECK_EQ_U64(length, 206);
    CHECK(tg_range_parse("bytes=-99999999999999999999", 216, &first, &length) == TG_RANGE_OK);
    CHECK_EQ_U64(first, 0);
    CHECK_EQ_U64(length, 216);
    /* an overflowing first-byte-pos above a smaller last-byte-pos is invalid: ignored */
    CHECK(tg_range_parse("bytes=99999999999999999999-5", 216, &first, &length) == TG_RANGE_NONE);
    /* The largest values do not wrap. */
    CHECK(tg_range_parse("bytes=0-18446744073709551615", UINT64_MAX, &first, &length) ==
          TG_RANGE_OK);
    CHECK_EQ_U64(length, UINT64_MAX);
}

TEST(etags)
{
    const char *tag = "e2f04c5d";
    CHECK(tg_etag_matches("\"e2f04c5d\"", tag));
    CHECK(tg_etag_matches("W/\"e2f04c5d\"", tag));
    CHECK(tg_etag_matches("\"x\", \"e2f04c5d\"", tag));
    CHECK(tg_etag_matches("*", tag));
    CHECK(!tg_etag_matches("\"e2f04c5\"", tag));
    CHECK(!tg_etag_matches("e2f04c5d", tag));
    CHECK(!tg_etag_matches("\"unterminated", tag));
    CHECK(!tg_etag_matches(NULL, tag));
}

TEST(parse_u64)
{
    uint64_t v = 7;
    CHECK(tg_parse_u64("0", &v) && v == 0);
    CHECK(tg_parse_u64("18446744073709551615", &v) && v == UINT64_MAX);
    CHECK(!tg_parse_u64("18446744073709551616", &v));
    CHECK(!tg_parse_u64("01", &v));
    CHECK(!tg_parse_u64("-1", &v));
    CHECK(!tg_parse_u64("", &v));
    CHECK(!tg_parse_u64("1 ", &v));
}

TEST(accept_quality)
{
    const char *sarif = "application/sarif+json";
    CHECK(tg_accept_quality(NULL, sarif) == 0);
    CHECK(tg_accept_quality("", sarif) == 0);
    CHECK(tg_accept_quality("*/*", sarif) == 0);
    CHECK(tg_accept_quality("application/sarif+json", sarif) == 1000);
    CHECK(tg_accept_quality("Application/SARIF+JSON", sarif) == 1000);
    CHECK(tg_accept_quality("application/json, application/sarif+json;q=0.5", sarif) == 500);
    CHECK(tg_accept_quality("application/json, application/sarif+json;q=0.5", "application/json") ==
          1000);
    CHECK(tg_accept_quality("application/sarif+json ; q=0.25 ; x=y", sarif) == 250);
    CHECK(tg_accept_quality("application/sarif+json;q=0", sarif) == 0);
    CHECK(tg_accept_quality("application/sarif+json;q=1.000", sarif) == 1000);
    CHECK(tg_accept_quality("application/sarif+json;q=1.5", sarif) == 0);
    CHECK(tg_accept_quality("application/sarif+json;q=0.1234", sarif) == 0);
    CHECK(tg_accept_quality("application/sarif+json;q=abc", sarif) == 0);
    CHECK(tg_accept_quality("application/sarif+jsonx", sarif) == 0);
    CHECK(tg_accept_quality("application/sarif+json;q=0.2, application/sarif+json;q=0.7", sarif) ==
          700);
    CHECK(tg_accept_quality(",,, ;;, application/sarif+json", sarif) == 1000);
}

TEST(rfc3339_times)
{
    char out[TG_UTC_TEXT_LEN];
    CHECK(tg_rfc3339_utc("2026-05-01T12:00:00Z", out, sizeof out));
    CHECK_STR(out, "2026-05-01T12:00:00Z");
    CHECK(tg_rfc3339_utc("2026-05-01t14:30:05.999+02:00", out, sizeof out));
    CHECK_STR(out, "2026-05-01T12:30:05Z");
    CHECK(tg_rfc3339_utc("2026-12-31 23:00:00-01:30", out, sizeof out));
    CHECK_STR(out, "2027-01-01T00:30:00Z");
    CHECK(tg_rfc3339_utc("2024-02-29T00:00:00z", out, sizeof out));
    CHECK_STR(out, "2024-02-29T00:00:00Z");
    CHECK(tg_rfc3339_utc("2016-12-31T23:59:60Z", out, sizeof out)); /* a leap second */
    CHECK_STR(out, "2016-12-31T23:59:59Z");
    static const char *const bad[] = {
        "",
        "2026-05-01",
        "2026-05-01T12:00:00",       /* no offset */
        "2026-05-01T12:00Z",         /* no seconds */
        "2025-02-29T00:00:00Z",      /* not a leap year */
        "2026-13-01T00:00:00Z",      /* month */
        "2026-04-31T00:00:00Z",      /* day */
        "2026-05-01T24:00:00Z",      /* hour */
        "2026-05-01T12:00:00.Z",     /* empty fraction */
        "2026-05-01T12:00:00+0200",  /* offset without colon */
        "2026-05-01T12:00:00+24:00", /* offset hour */
        "2026-05-01T12:00:00Zjunk",
        "0001-01-01T00:00:00+01:00", /* year 0 in UTC */
        "1714564800",
        "2026-05-01T12:00:00 Z",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bool ok = tg_rfc3339_utc(bad[i], out, sizeof out);
        CHECK(!ok);
        if (ok)
            fprintf(stderr, "  accepted '%s'\n", bad[i]);
    }
    CHECK(!tg_rfc3339_utc("2026-05-01T12:00:00Z", out, 10)); /* too small */
}

TEST(sha256_texts)
{
    char out[65];
    char upper[65];
    memset(upper, 'A', 64);
    upper[64] = '\0';
    CHECK(tg_sha256_text_lower(upper, out, sizeof out));
    CHECK(out[0] == 'a' && out[63] == 'a' && strlen(out) == 64);
    upper[10] = 'g';
    CHECK(!tg_sha256_text_lower(upper, out, sizeof out));
    CHECK(!tg_sha256_text_lower("abc", out, sizeof out));
    CHECK(!tg_sha256_text_lower(NULL, out, sizeof out));
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(name_parts);
    RUN(aliases);
    RUN(file_paths);
    RUN(cursor_round_trip);
    RUN(cursor_rejects_garbage);
    RUN(range_single);
    RUN(range_unsatisfiable_and_ignored);
    RUN(etags);
    RUN(parse_u64);
    RUN(accept_quality);
    RUN(rfc3339_times);
    RUN(sha256_texts);
    return test_report(argv[0]);
}
