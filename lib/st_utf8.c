/* UTF-8: the one decoder of the project (st_utf8.h). */
#include "st_utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t st_utf8_sequence_length(const unsigned char *p, size_t left)
{
    unsigned char c = p[0];
    if (c < 0x80)
        return 1;
    size_t need;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
        need = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 2;
        lo = c == 0xe0 ? 0xa0 : 0x80;
        hi = c == 0xed ? 0x9f : 0xbf;
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 3;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf;
    } else {
        return 0;
    }
    if (need >= left)
        return 0;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t k = 2; k <= need; k++)
        if (p[k] < 0x80 || p[k] > 0xbf)
            return 0;
    return need + 1;
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
