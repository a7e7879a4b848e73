/* Unit tests for lib/st_utf8.c, the one UTF-8 decoder: every boundary of RFC 3629
 * (the last and first code point of each length, overlong forms, surrogates, above
 * U+10FFFF, bytes that start nothing, bad continuation bytes, sequences cut by the
 * end of the buffer), then every 1-, 2- and 3-byte input and every 4-byte input
 * whose last byte is a boundary value against a reference decoder written from the
 * code-point arithmetic, and st_utf8_valid's first bad offset through its ASCII
 * fast path. */
#include <stdlib.h>

#include "st_utf8.h"
#include "test.h"

/* ---- a reference decoder, from the definition rather than the byte table ---- */

/* The length a lead byte announces by its leading one bits (0 for 10xxxxxx and
 * 11111xxx). */
static size_t announced_length(unsigned char c)
{
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0)
        return 2;
    if ((c & 0xf0) == 0xe0)
        return 3;
    if ((c & 0xf8) == 0xf0)
        return 4;
    return 0;
}

static bool scalar_value(uint32_t cp, size_t len)
{
    static const uint32_t shortest[5] = {0, 0, 0x80, 0x800, 0x10000};
    return cp >= shortest[len] && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
}

/* What st_utf8_decode must answer. A cut sequence is a valid beginning when some
 * completion is a scalar value of that length: the completions of a prefix span
 * the code points between filling the missing bytes with 0x80 and with 0xbf. */
static size_t reference_decode(const unsigned char *p, size_t left, uint32_t *code_point)
{
    size_t len = announced_length(p[0]);
    if (len == 0)
        return 0;
    uint32_t cp = len == 1 ? p[0] : p[0] & (0x7fu >> len);
    size_t have = left < len ? left : len;
    for (size_t k = 1; k < have; k++) {
        if ((p[k] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[k] & 0x3fu);
    }
    if (have == len) {
        if (!scalar_value(cp, len))
            return 0;
        *code_point = cp;
        return len;
    }
    uint32_t low = cp, high = cp;
    for (size_t k = have; k < len; k++) {
        low = low << 6;
        high = (high << 6) | 0x3f;
    }
    static const uint32_t shortest[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t from = low > shortest[len] ? low : shortest[len];
    uint32_t to = high < 0x10ffff ? high : 0x10ffff;
    if (from > to)
        return 0;
    if (from >= 0xd800 && to <= 0xdfff)
        return 0; /* only surrogates complete it */
    return ST_UTF8_CUT;
}

/* ---- the boundaries, by hand ---- */

typedef struct utf8_case {
    const char *bytes;
    size_t len;
    size_t expect; /* st_utf8_decode's answer */
    uint32_t code_point;
} utf8_case;

#define CASE(b, expect, cp)                                                                        \
    {                                                                                              \
        b, sizeof b - 1, expect, cp                                                                \
    }

static const utf8_case cases[] = {
    /* ASCII, NUL included */
    CASE("\x00", 1, 0x00),
    CASE("A", 1, 0x41),
    CASE("\x7f", 1, 0x7f),
    /* first and last of each length */
    CASE("\xc2\x80", 2, 0x80),
    CASE("\xdf\xbf", 2, 0x7ff),
    CASE("\xe0\xa0\x80", 3, 0x800),
    CASE("\xef\xbf\xbf", 3, 0xffff),
    CASE("\xf0\x90\x80\x80", 4, 0x10000),
    CASE("\xf4\x8f\xbf\xbf", 4, 0x10ffff),
    /* around the surrogates */
    CASE("\xed\x9f\xbf", 3, 0xd7ff),
    CASE("\xee\x80\x80", 3, 0xe000),
    CASE("\xed\xa0\x80", 0, 0), /* U+D800 */
    CASE("\xed\xaf\xbf", 0, 0), /* U+DBFF */
    CASE("\xed\xb0\x80", 0, 0), /* U+DC00 */
    CASE("\xed\xbf\xbf", 0, 0), /* U+DFFF */
    /* overlong forms */
    CASE("\xc0\x80", 0, 0),
    CASE("\xc0\xaf", 0, 0),
    CASE("\xc1\xbf", 0, 0),
    CASE("\xe0\x80\x80", 0, 0),
    CASE("\xe0\x9f\xbf", 0, 0),
    CASE("\xf0\x80\x80\x80", 0, 0),
    CASE("\xf0\x8f\xbf\xbf", 0, 0),
    /* above U+10FFFF, and lead bytes RFC 3629 retired */
    CASE("\xf4\x90\x80\x80", 0, 0),
    CASE("\xf4\xbf\xbf\xbf", 0, 0),
    CASE("\xf5\x80\x80\x80", 0, 0),
    CASE("\xf7\xbf\xbf\xbf", 0, 0),
    CASE("\xf8\x88\x80\x80\x80", 0, 0),
    CASE("\xfc\x84\x80\x80\x80\x80", 0, 0),
    CASE("\xfe", 0, 0),
    CASE("\xff", 0, 0),
    /* continuation bytes with no lead */
    CASE("\x80", 0, 0),
    CASE("\xbf\x80", 0, 0),
    /* bad continuation bytes */
    CASE("\xc2\x41", 0, 0),
    CASE("\xc2\xc0", 0, 0),
    CASE("\xe1\x80\x41", 0, 0),
    CASE("\xe1\x41\x80", 0, 0),
    CASE("\xf1\x80\x80\xc0", 0, 0),
    CASE("\xf1\x80\x7f\x80", 0, 0),
    /* cut by the end of the buffer: a valid beginning ... */
    CASE("\xc2", ST_UTF8_CUT, 0),
    CASE("\xe0", ST_UTF8_CUT, 0),
    CASE("\xe0\xa0", ST_UTF8_CUT, 0),
    CASE("\xed\x9f", ST_UTF8_CUT, 0),
    CASE("\xf0\x90", ST_UTF8_CUT, 0),
    CASE("\xf0\x90\x80", ST_UTF8_CUT, 0),
    CASE("\xf4\x8f\xbf", ST_UTF8_CUT, 0),
    /* ... or not one: the bytes present already break a rule */
    CASE("\xe0\x80", 0, 0),
    CASE("\xed\xa0", 0, 0),
    CASE("\xf0\x8f", 0, 0),
    CASE("\xf4\x90", 0, 0),
    CASE("\xf4\x90\x80", 0, 0),
    CASE("\xe1\x41", 0, 0),
    CASE("\xc1", 0, 0),
    CASE("\xf5", 0, 0),
};

TEST(boundaries)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const utf8_case *c = &cases[i];
        const unsigned char *p = (const unsigned char *)c->bytes;
        uint32_t cp = 0xdeadbeef;
        size_t n = st_utf8_decode(p, c->len, &cp);
        if (n != c->expect)
            fprintf(stderr, "case %zu: decode says %zu\n", i, n);
        CHECK_EQ_U64(n, c->expect);
        if (c->expect != 0 && c->expect != ST_UTF8_CUT)
            CHECK_EQ_U64(cp, c->code_point);
        else
            CHECK_EQ_U64(cp, 0xdeadbeef); /* left alone */
        CHECK_EQ_U64(st_utf8_decode(p, c->len, NULL), c->expect);
        size_t length = st_utf8_sequence_length(p, c->len);
        CHECK_EQ_U64(length, c->expect == ST_UTF8_CUT ? 0 : c->expect);
        /* the reference agrees with the table */
        uint32_t ref_cp = 0;
        CHECK_EQ_U64(reference_decode(p, c->len, &ref_cp), c->expect);
        /* a whole buffer of just this sequence is valid exactly when it decodes to
         * its full length */
        size_t bad = 99;
        bool valid = st_utf8_valid(p, c->len, &bad);
        CHECK(valid == (c->expect == c->len));
        if (!valid)
            CHECK_EQ_U64(bad, 0);
    }
}

/* Every input of 1, 2 and 3 bytes, every 4-byte input led by F0..FF with a boundary
 * last byte. */
TEST(against_reference)
{
    static const unsigned char last_bytes[] = {0x00, 0x41, 0x7f, 0x80, 0x9f,
                                               0xa0, 0xbf, 0xc0, 0xff};
    size_t mismatches = 0, compared = 0;
    unsigned char b[4];
    for (uint32_t x = 0; x < (1u << 24); x++) {
        b[0] = (unsigned char)(x >> 16);
        b[1] = (unsigned char)(x >> 8);
        b[2] = (unsigned char)x;
        /* only F0..FF lead a 4-byte input; other leads never read the fourth byte */
        for (size_t k = b[0] >= 0xf0 ? 0 : sizeof last_bytes; k <= sizeof last_bytes; k++) {
            size_t left = k < sizeof last_bytes ? 4 : 3;
            if (k < sizeof last_bytes)
                b[3] = last_bytes[k];
            uint32_t cp = 0, ref_cp = 0;
            size_t n = st_utf8_decode(b, left, &cp);
            size_t ref = reference_decode(b, left, &ref_cp);
            compared++;
            if (n != ref || (n >= 1 && n <= 4 && cp != ref_cp)) {
                if (mismatches++ < 5)
                    fprintf(stderr, "%02x %02x %02x %02x (left %zu): %zu, reference %zu\n", b[0],
                            b[1], b[2], b[3], left, n, ref);
            }
        }
        if (b[1] == 0 && b[2] == 0) { /* the 1- and 2-byte inputs, once per lead */
            for (size_t left = 1; left <= 2; left++) {
                for (uint32_t second = 0; second < (left == 2 ? 256u : 1u); second++) {
                    unsigned char s[2] = {b[0], (unsigned char)second};
                    uint32_t cp = 0, ref_cp = 0;
                    size_t n = st_utf8_decode(s, left, &cp);
                    size_t ref = reference_decode(s, left, &ref_cp);
                    compared++;
                    if (n != ref || (n >= 1 && n <= 4 && cp != ref_cp))
                        mismatches++;
                }
            }
        }
    }
    CHECK_EQ_U64(mismatches, 0);
    CHECK(compared > (size_t)16 * 1024 * 1024);
}

TEST(valid_offsets)
{
    size_t bad = 99;
    CHECK(st_utf8_valid("", 0, &bad));
    CHECK_EQ_U64(bad, 99); /* untouched when valid */
    CHECK(st_utf8_valid("plain ascii", 11, NULL));
    CHECK(st_utf8_valid("a\0b", 3, NULL)); /* NUL is UTF-8 */
    CHECK(st_utf8_valid("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14, &bad));

    /* the first bad byte, found past the 8-byte ASCII fast path */
    char text[64];
    for (size_t at = 0; at < 40; at++) {
        memset(text, 'x', sizeof text);
        text[at] = (char)0xff;
        bad = 99;
        CHECK(!st_utf8_valid(text, sizeof text, &bad));
        CHECK_EQ_U64(bad, at);
        CHECK(!st_utf8_valid(text, sizeof text, NULL));
    }
    /* a valid multi-byte character among ASCII, then a bad one */
    memcpy(text, "abcdefgh\xc3\xa9ijklmnopq\xed\xa0\x80", 22);
    CHECK(!st_utf8_valid(text, 22, &bad));
    CHECK_EQ_U64(bad, 19);
    CHECK(st_utf8_valid(text, 19, NULL));

    /* a sequence cut by the end is invalid as a whole, reported at its lead */
    CHECK(!st_utf8_valid("abc\xe2\x82", 5, &bad));
    CHECK_EQ_U64(bad, 3);
    CHECK(!st_utf8_valid("abcdefghij\xf0\x9f\x98", 13, &bad));
    CHECK_EQ_U64(bad, 10);
    /* a bad continuation reports the lead, not the continuation byte */
    CHECK(!st_utf8_valid("ab\xe2\x28\xa1", 5, &bad));
    CHECK_EQ_U64(bad, 2);
    /* a lone continuation byte after a complete sequence */
    CHECK(!st_utf8_valid("\xc3\xa9\xa9", 3, &bad));
    CHECK_EQ_U64(bad, 2);
}

TEST(lossy_strings)
{
    json_t *s = st_json_stringn_lossy("a\xff"
                                      "b\xe2\x82",
                                      5);
    CHECK(s != NULL);
    if (s != NULL) {
        CHECK_STR(json_string_value(s), "a\xef\xbf\xbd"
                                        "b\xef\xbf\xbd\xef\xbf\xbd");
        json_decref(s);
    }
    s = st_json_string_lossy("caf\xc3\xa9");
    CHECK(s != NULL);
    if (s != NULL) {
        CHECK_STR(json_string_value(s), "caf\xc3\xa9");
        json_decref(s);
    }
    s = st_json_stringn_lossy("a\0b", 3);
    CHECK(s != NULL);
    if (s != NULL) {
        CHECK_EQ_U64(json_string_length(s), 3);
        json_decref(s);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(boundaries);
    RUN(against_reference);
    RUN(valid_offsets);
    RUN(lossy_strings);
    return test_report(argv[0]);
}
