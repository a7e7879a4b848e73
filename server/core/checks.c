/* Pure validation and encodings (see checks.h). */
#include "checks.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "st_utf8.h"

static bool is_alnum(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_name_char(char c)
{
    return is_alnum(c) || c == '.' || c == '_' || c == '-';
}

bool tg_valid_name_part(const char *text)
{
    size_t len = strlen(text);
    if (len == 0 || len > 64 || !is_alnum(text[0]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!is_name_char(text[i]))
            return false;
    return strstr(text, "..") == NULL;
}

bool tg_valid_alias(const char *text)
{
    if (!tg_valid_name_part(text))
        return false;
    size_t len = strlen(text), digits = 0, hex = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c >= '0' && c <= '9')
            digits++;
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))
            hex++;
    }
    if (digits == len)
        return false;
    /* a digest (64 hex) or a commit id (40 hex) would shadow a version */
    return !((len == 64 && hex == 64) || (len == 40 && hex == 40));
}

bool tg_valid_file_path(const char *text, const char **why)
{
    const char *dummy;
    if (why == NULL)
        why = &dummy;
    size_t len = strlen(text);
    if (len == 0) {
        *why = "the path is empty";
        return false;
    }
    if (len > 255) {
        *why = "the path is longer than 255 bytes";
        return false;
    }
    if (text[0] == '/') {
        *why = "the path is absolute";
        return false;
    }
    const char *segment = text;
    for (;;) {
        const char *end = strchr(segment, '/');
        size_t seg_len = end ? (size_t)(end - segment) : strlen(segment);
        if (seg_len == 0) {
            *why = "the path has an empty segment";
            return false;
        }
        if ((seg_len == 1 && segment[0] == '.') ||
            (seg_len == 2 && segment[0] == '.' && segment[1] == '.')) {
            *why = "the path has a '.' or '..' segment";
            return false;
        }
        if (segment[0] == ' ' || segment[seg_len - 1] == ' ') {
            *why = "a path segment begins or ends with a space";
            return false;
        }
        for (size_t i = 0; i < seg_len;) {
            unsigned char c = (unsigned char)segment[i];
            if (c < 0x80) {
                if (!is_name_char((char)c) && c != ' ' && c != '+') {
                    *why = "the path has a character outside [A-Za-z0-9._+ -] and non-ASCII "
                           "letters";
                    return false;
                }
                i++;
                continue;
            }
            /* non-ASCII: valid UTF-8 of a printable character (not a C1 control, a
             * line or paragraph separator, a bidirectional control or a BOM) */
            uint32_t cp = 0;
            size_t n = st_utf8_decode((const unsigned char *)segment + i, seg_len - i, &cp);
            if (n == 0 || n == ST_UTF8_CUT) {
                *why = "the path is not valid UTF-8";
                return false;
            }
            if (cp < 0xA0 || cp == 0xAD || (cp >= 0x200B && cp <= 0x200F) ||
                (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2060 && cp <= 0x206F) || cp == 0xFEFF ||
                (cp >= 0xFFF0 && cp <= 0xFFFF)) {
                *why = "the path has an invisible or control character";
                return false;
            }
            i += n;
        }
        if (end == NULL)
            break;
        segment = end + 1;
    }
    *why = NULL;
    return true;
}

static const char base64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int tg_cursor_encode(const char *key, char *out, size_t out_len)
{
    size_t len = strlen(key);
    size_t needed = (len / 3) * 4 + 4 + 1;
    if (out_len < needed)
        return -1;
    const unsigned char *in = (const unsigned char *)key;
    size_t o = 0, i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = base64url[v >> 18];
        out[o++] = base64url[(v >> 12) & 63];
        out[o++] = base64url[(v >> 6) & 63];
        out[o++] = base64url[v & 63];
    }
    if (len - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[o++] = base64url[v >> 18];
        out[o++] = base64url[(v >> 12) & 63];
    } else if (len - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        out[o++] = base64url[v >> 18];
        out[o++] = base64url[(v >> 12) & 63];
        out[o++] = base64url[(v >> 6) & 63];
    }
    out[o] = '\0';
    return 0;
}

static int base64url_value(char c)
{
    const char *p = c ? strchr(base64url, c) : NULL;
    return p ? (int)(p - base64url) : -1;
}

int tg_cursor_decode(const char *cursor, char *key, size_t key_len)
{
    size_t len = strlen(cursor);
    /* A remainder of 1 character cannot encode a whole byte. */
    if (len % 4 == 1)
        return -1;
    size_t needed = len / 4 * 3 + (len % 4 ? len % 4 - 1 : 0) + 1;
    if (needed > key_len)
        return -1;
    size_t o = 0;
    uint32_t acc = 0;
    unsigned bits = 0;
    for (size_t i = 0; i < len; i++) {
        int v = base64url_value(cursor[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            unsigned char byte = (unsigned char)(acc >> bits);
            if (byte == 0)
                return -1;
            key[o++] = (char)byte;
            acc &= (1u << bits) - 1;
        }
    }
    /* Leftover bits must be zero so each key has exactly one cursor. */
    if (acc != 0)
        return -1;
    key[o] = '\0';
    return 0;
}

bool tg_parse_u64(const char *text, uint64_t *out)
{
    if (text == NULL || text[0] == '\0' || (text[0] == '0' && text[1] != '\0'))
        return false;
    uint64_t value = 0;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        if (__builtin_mul_overflow(value, 10, &value) ||
            __builtin_add_overflow(value, (uint64_t)(*p - '0'), &value))
            return false;
    }
    *out = value;
    return true;
}

/* Parses digits at *p (at least one), advancing *p. Leading zeros are allowed
 * (RFC 9110). A value above UINT64_MAX saturates to UINT64_MAX: it is still a
 * syntactically valid position, larger than any body, so a first-byte-pos that
 * overflows is unsatisfiable and a last-byte-pos that overflows means "to the end". */
static bool parse_digits(const char **p, uint64_t *out)
{
    const char *s = *p;
    uint64_t value = 0;
    bool saturated = false;
    if (*s < '0' || *s > '9')
        return false;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (!saturated && (__builtin_mul_overflow(value, 10, &value) ||
                           __builtin_add_overflow(value, (uint64_t)(*s - '0'), &value)))
            saturated = true;
    }
    *p = s;
    *out = saturated ? UINT64_MAX : value;
    return true;
}

static const char *skip_spaces(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

tg_range_result tg_range_parse(const char *header, uint64_t total, uint64_t *first,
                               uint64_t *length)
{
    if (header == NULL)
        return TG_RANGE_NONE;
    const char *p = skip_spaces(header);
    if (strncasecmp(p, "bytes", 5) != 0)
        return TG_RANGE_NONE;
    p = skip_spaces(p + 5);
    if (*p != '=')
        return TG_RANGE_NONE;
    p = skip_spaces(p + 1);
    /* More than one range: answered with the whole body (documented in the contract). */
    if (strchr(p, ',') != NULL)
        return TG_RANGE_NONE;
    uint64_t a = 0, b = 0;
    bool has_first = false, has_last = false;
    if (*p != '-') {
        if (!parse_digits(&p, &a))
            return TG_RANGE_NONE;
        has_first = true;
    }
    if (*p != '-')
        return TG_RANGE_NONE;
    p++;
    if (*p >= '0' && *p <= '9') {
        if (!parse_digits(&p, &b))
            return TG_RANGE_NONE;
        has_last = true;
    }
    p = skip_spaces(p);
    if (*p != '\0' || (!has_first && !has_last))
        return TG_RANGE_NONE;
    if (!has_first) {
        /* Suffix range "-n": the last n bytes. */
        if (b == 0 || total == 0)
            return TG_RANGE_UNSATISFIABLE;
        uint64_t n = b < total ? b : total;
        *first = total - n;
        *length = n;
        return TG_RANGE_OK;
    }
    if (has_last && b < a)
        return TG_RANGE_NONE;
    if (a >= total)
        return TG_RANGE_UNSATISFIABLE;
    uint64_t last = (has_last && b < total - 1) ? b : total - 1;
    *first = a;
    *length = last - a + 1;
    return TG_RANGE_OK;
}

/* The q of one element's parameters (after the media type): 1000 when none, 0 when
 * malformed. p points after the type, end at the element's end. */
static unsigned accept_q(const char *p, const char *end)
{
    unsigned q = 1000;
    while (p < end) {
        while (p < end && (*p == ';' || *p == ' ' || *p == '\t'))
            p++;
        const char *param = p;
        while (p < end && *p != ';')
            p++;
        const char *param_end = p;
        while (param_end > param && (param_end[-1] == ' ' || param_end[-1] == '\t'))
            param_end--;
        if (param_end - param < 2 || (param[0] != 'q' && param[0] != 'Q') || param[1] != '=')
            continue;
        const char *v = param + 2;
        /* qvalue: "0" ["." 0*3DIGIT] / "1" ["." 0*3("0")] */
        if (v >= param_end || (*v != '0' && *v != '1'))
            return 0;
        unsigned value = (unsigned)(*v - '0') * 1000;
        v++;
        if (v < param_end) {
            if (*v != '.')
                return 0;
            v++;
            unsigned scale = 100;
            for (int digits = 0; v < param_end; v++, digits++) {
                if (digits == 3 || *v < '0' || *v > '9')
                    return 0;
                value += (unsigned)(*v - '0') * scale;
                scale /= 10;
            }
        }
        if (value > 1000)
            return 0;
        q = value;
    }
    return q;
}

unsigned tg_accept_quality(const char *accept, const char *media_type)
{
    if (accept == NULL)
        return 0;
    size_t type_len = strlen(media_type);
    unsigned best = 0;
    const char *p = accept;
    while (*p != '\0') {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p == '\0')
            break;
        const char *element = p;
        while (*p != '\0' && *p != ',')
            p++;
        const char *type_end = element;
        while (type_end < p && *type_end != ';' && *type_end != ' ' && *type_end != '\t')
            type_end++;
        if ((size_t)(type_end - element) == type_len &&
            strncasecmp(element, media_type, type_len) == 0) {
            unsigned q = accept_q(type_end, p);
            if (q > best)
                best = q;
        }
    }
    return best;
}

bool tg_etag_matches(const char *if_none_match, const char *etag)
{
    if (if_none_match == NULL)
        return false;
    size_t etag_len = strlen(etag);
    const char *p = if_none_match;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p == '\0')
            return false;
        if (*p == '*')
            return true;
        if (p[0] == 'W' && p[1] == '/')
            p += 2;
        if (*p != '"') {
            /* Not an entity tag: skip to the next list element. */
            while (*p && *p != ',')
                p++;
            continue;
        }
        const char *close = strchr(p + 1, '"');
        if (close == NULL)
            return false;
        if ((size_t)(close - p - 1) == etag_len && memcmp(p + 1, etag, etag_len) == 0)
            return true;
        p = close + 1;
    }
}

/* n decimal digits at text into *out. */
static bool digits(const char *text, int n, int *out)
{
    int value = 0;
    for (int i = 0; i < n; i++) {
        if (text[i] < '0' || text[i] > '9')
            return false;
        value = value * 10 + (text[i] - '0');
    }
    *out = value;
    return true;
}

static int days_in_month(int year, int month)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    return month == 2 && leap ? 29 : days[month - 1];
}

bool tg_rfc3339_utc(const char *text, char *out, size_t cap)
{
    int year, month, day, hour, minute, second;
    if (text == NULL || cap < TG_UTC_TEXT_LEN || strlen(text) < 20)
        return false;
    if (!digits(text, 4, &year) || text[4] != '-' || !digits(text + 5, 2, &month) ||
        text[7] != '-' || !digits(text + 8, 2, &day) ||
        (text[10] != 'T' && text[10] != 't' && text[10] != ' ') || !digits(text + 11, 2, &hour) ||
        text[13] != ':' || !digits(text + 14, 2, &minute) || text[16] != ':' ||
        !digits(text + 17, 2, &second))
        return false;
    if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month) || hour > 23 ||
        minute > 59 || second > 60)
        return false;
    const char *p = text + 19;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    int offset = 0; /* seconds east of UTC */
    if ((*p == 'Z' || *p == 'z') && p[1] == '\0') {
        offset = 0;
    } else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
        int oh, om;
        if (!digits(p + 1, 2, &oh) || !digits(p + 4, 2, &om) || oh > 23 || om > 59)
            return false;
        offset = (oh * 60 + om) * 60 * (*p == '-' ? -1 : 1);
    } else {
        return false;
    }
    struct tm tm = {.tm_year = year - 1900,
                    .tm_mon = month - 1,
                    .tm_mday = day,
                    .tm_hour = hour,
                    .tm_min = minute,
                    .tm_sec = second == 60 ? 59 : second};
    time_t at = timegm(&tm) - offset;
    struct tm utc;
    if (gmtime_r(&at, &utc) == NULL || utc.tm_year + 1900 < 1 || utc.tm_year + 1900 > 9999)
        return false;
    return snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                    utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec) == TG_UTC_TEXT_LEN - 1;
}

bool tg_sha256_text_lower(const char *text, char *out, size_t cap)
{
    if (text == NULL || cap < 65 || strlen(text) != 64)
        return false;
    for (size_t i = 0; i < 64; i++) {
        char c = text[i];
        if (c >= 'A' && c <= 'F')
            c = (char)(c - 'A' + 'a');
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
        out[i] = c;
    }
    out[64] = '\0';
    return true;
}
