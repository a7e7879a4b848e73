/* libFuzzer target for server/core/checks.c's Range parser, tg_range_parse.
 *
 * Input: byte 0 picks the body size (0: 0 bytes, 1: 1 byte, 2: UINT64_MAX, 3: the next
 * 8 bytes little-endian, else byte 0 itself), the rest is the header value (cut at a
 * NUL). Each value is also parsed against the sizes 0, 1, 10 and UINT64_MAX.
 * It checks, for every size:
 *  - TG_RANGE_OK: length >= 1, first < size and first + length <= size (no overflow);
 *    first and length are written; a "bytes=a-b" range starts at a and ends at
 *    min(b, size - 1), a suffix "bytes=-n" is the last min(n, size) bytes;
 *  - TG_RANGE_NONE and TG_RANGE_UNSATISFIABLE leave first and length untouched;
 *  - TG_RANGE_UNSATISFIABLE only for size 0, a suffix of 0 bytes or a first byte at
 *    or past the end; a range that is not of the unit "bytes", or lists more than
 *    one range (a comma), is TG_RANGE_NONE;
 *  - the same value and size give the same answer twice. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "checks.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond))                                                                               \
            __builtin_trap();                                                                      \
    } while (0)

#define UNTOUCHED 0xA5A5A5A5A5A5A5A5ULL

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The value's shape, read independently of the parser: "bytes" "=" [a] "-" [b], with
 * spaces and tabs allowed around "=" and at the end; a and b decimal, saturating. */
typedef struct shape {
    bool ok, has_a, has_b;
    uint64_t a, b;
} shape;

static const char *spaces(const char *p)
{
    return p + strspn(p, " \t");
}

static bool number(const char **p, uint64_t *out)
{
    size_t digits = strspn(*p, "0123456789");
    if (digits == 0)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < digits; i++) {
        uint64_t d = (uint64_t)((*p)[i] - '0');
        v = (v > (UINT64_MAX - d) / 10) ? UINT64_MAX : v * 10 + d;
    }
    *p += digits;
    *out = v;
    return true;
}

static shape read_shape(const char *text)
{
    shape s = {0};
    const char *p = spaces(text);
    if (strncasecmp(p, "bytes", 5) != 0)
        return s;
    p = spaces(p + 5);
    if (*p != '=')
        return s;
    p = spaces(p + 1);
    if (strchr(p, ',') != NULL)
        return s;
    s.has_a = number(&p, &s.a);
    if (*p != '-')
        return s;
    p++;
    s.has_b = number(&p, &s.b);
    p = spaces(p);
    s.ok = *p == '\0' && (s.has_a || s.has_b) && !(s.has_a && s.has_b && s.b < s.a);
    return s;
}

static void check(const char *text, uint64_t total)
{
    uint64_t first = UNTOUCHED, length = UNTOUCHED;
    tg_range_result r = tg_range_parse(text, total, &first, &length);
    uint64_t first2 = UNTOUCHED, length2 = UNTOUCHED;
    REQUIRE(tg_range_parse(text, total, &first2, &length2) == r);
    shape s = read_shape(text);
    switch (r) {
    case TG_RANGE_OK:
        REQUIRE(first2 == first && length2 == length);
        REQUIRE(s.ok);
        REQUIRE(length >= 1 && first < total && length <= total - first);
        if (s.has_a) {
            uint64_t last = s.has_b && s.b < total - 1 ? s.b : total - 1;
            REQUIRE(first == s.a && first + length - 1 == last);
        } else {
            uint64_t n = s.b < total ? s.b : total;
            REQUIRE(length == n && first == total - n);
        }
        break;
    case TG_RANGE_UNSATISFIABLE:
        REQUIRE(s.ok);
        REQUIRE(total == 0 || (!s.has_a && s.b == 0) || (s.has_a && s.a >= total));
        REQUIRE(first == UNTOUCHED && length == UNTOUCHED);
        break;
    case TG_RANGE_NONE:
        REQUIRE(!s.ok);
        REQUIRE(first == UNTOUCHED && length == UNTOUCHED);
        break;
    default:
        REQUIRE(false);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint64_t total;
    size_t pos = 1;
    switch (data[0]) {
    case 0:
        total = 0;
        break;
    case 1:
        total = 1;
        break;
    case 2:
        total = UINT64_MAX;
        break;
    case 3:
        total = 0;
        for (size_t i = 0; i < 8 && pos < size; i++, pos++)
            total |= (uint64_t)data[pos] << (8 * i);
        break;
    default:
        total = data[0];
        break;
    }
    char *text = malloc(size - pos + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data + pos, size - pos);
    text[size - pos] = '\0';
    check(text, total);
    static const uint64_t sizes[] = {0, 1, 10, UINT64_MAX};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        check(text, sizes[i]);
    REQUIRE(tg_range_parse(NULL, total, &(uint64_t){0}, &(uint64_t){0}) == TG_RANGE_NONE);
    free(text);
    return 0;
}
