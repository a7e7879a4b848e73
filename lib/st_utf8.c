/* UTF-8: the one decoder of the project (st_utf8.h). */
#include "st_utf8.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* RFC 3629 in its table form: the lead byte fixes the length, and the range of the
 * second byte rules out overlong forms (E0, F0), surrogates (ED) and code points
 * above U+10FFFF (F4); later bytes are 80..BF. */
static inline size_t decode(const unsigned char *p, size_t left, uint32_t *code_point)
{
    unsigned char c = p[0];
    if (c < 0x80) {
        *code_point = c;
        return 1;
    }
    size_t need;
    uint32_t cp;
    unsigned char lo = 0x80, hi = 0xbf; /* range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) {
        need = 2;
        cp = c & 0x1fu;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 3;
        cp = c & 0x0fu;
        if (c == 0xe0)
            lo = 0xa0; /* no overlong form */
        else if (c == 0xed)
            hi = 0x9f; /* no surrogate */
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 4;
        cp = c & 0x07u;
        if (c == 0xf0)
            lo = 0x90; /* no overlong form */
        else if (c == 0xf4)
            hi = 0x8f; /* nothing above U+10FFFF */
    } else {
        return 0; /* a continuation byte, C0/C1 (overlong), F5..FF */
    }
    for (size_t k = 1; k < need; k++) {
        if (k >= left)
            return ST_UTF8_CUT;
        unsigned char b = p[k];
        if (b < lo || b > hi)
            return 0;
        cp = (cp << 6) | (b & 0x3fu);
        lo = 0x80;
        hi = 0xbf;
    }
    /* what the byte ranges above guarantee */
    assert(cp >= (need == 2 ? 0x80u : need == 3 ? 0x800u : 0x10000u));
    assert(cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff));
    *code_point = cp;
    return need;
}

size_t st_utf8_decode(const unsigned char *p, size_t left, uint32_t *code_point)
{
    uint32_t cp = 0;
    size_t n = decode(p, left, &cp);
    if (code_point != NULL && n != 0 && n != ST_UTF8_CUT)
        *code_point = cp;
    return n;
}

size_t st_utf8_sequence_length(const unsigned char *p, size_t left)
{
    uint32_t cp;
    size_t n = decode(p, left, &cp);
    return n == ST_UTF8_CUT ? 0 : n;
}

bool st_utf8_valid(const void *s, size_t len, size_t *bad_offset)
{
    const unsigned char *p = s;
    size_t i = 0;
    while (i < len) {
        /* ASCII fast path: 8 bytes at a time while none has the top bit set */
        while (len - i >= 8) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (w & 0x8080808080808080ULL)
                break;
            i += 8;
        }
        if (i >= len)
            break;
        uint32_t cp;
        size_t n = decode(p + i, len - i, &cp);
        if (n == 0 || n == ST_UTF8_CUT) {
            if (bad_offset != NULL)
                *bad_offset = i;
            return false;
        }
        i += n;
    }
    return true;
}

json_t *st_json_string_lossy(const char *text)
{
    return st_json_stringn_lossy(text, strlen(text));
}

json_t *st_json_stringn_lossy(const char *text, size_t len)
{
    json_t *value = json_stringn(text, len);
    if (value != NULL)
        return value;
    /* not UTF-8: replace each invalid byte with U+FFFD (3 bytes) */
    if (len > (SIZE_MAX - 1) / 3)
        return NULL;
    char *clean = malloc(len * 3 + 1);
    if (clean == NULL)
        return NULL;
    const unsigned char *p = (const unsigned char *)text;
    size_t used = 0;
    for (size_t i = 0; i < len;) {
        size_t n = st_utf8_sequence_length(p + i, len - i);
        if (n == 0) {
            memcpy(clean + used, "\xef\xbf\xbd", 3);
            used += 3;
            i++;
        } else {
            memcpy(clean + used, p + i, n);
            used += n;
            i += n;
        }
    }
    value = json_stringn(clean, used);
    free(clean);
    return value;
}

json_t *st_error_tensor_json(const st_error *err)
{
    return err->tensor_len > 0 ? st_json_stringn_lossy(err->tensor, err->tensor_len) : json_null();
}
