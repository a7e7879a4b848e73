/* Pure checks and encodings used by the routes: names, file paths, list cursors,
 * HTTP Range and If-None-Match. No I/O; unit-tested in tests/unit/server/core/checks.c. */
#ifndef TG_CHECKS_H
#define TG_CHECKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One part of "org/name" or an alias: [A-Za-z0-9][A-Za-z0-9._-]{0,63}, no "..". */
bool tg_valid_name_part(const char *text);

/* A user-set alias: a name part that is not all digits (a version number) and
 * not 64 hex digits (a digest), so {rev} stays unambiguous. "latest" passes here;
 * the route refuses it as reserved. */
bool tg_valid_alias(const char *text);

/* A file path in a version: relative, '/'-separated segments of [A-Za-z0-9._+-],
 * spaces (not first or last in a segment) and printable non-ASCII characters in
 * valid UTF-8 (as the Hub allows; NFC not required); no control character,
 * backslash or other punctuation, no empty, "." or ".." segment, at most 255 bytes.
 * why (if not NULL) gets a reason. */
bool tg_valid_file_path(const char *text, const char **why);

/* Opaque list cursors: base64url (no padding) of the key. out_len must hold
 * 4/3 of key plus 4 bytes. Returns 0, or -1 if out is too small. */
int tg_cursor_encode(const char *key, char *out, size_t out_len);
/* Decodes a cursor into key (NUL-terminated); -1 if it is not valid base64url, the
 * result would not fit, or it holds a NUL byte. */
int tg_cursor_decode(const char *cursor, char *key, size_t key_len);

typedef enum tg_range_result {
    TG_RANGE_NONE, /* no usable Range: serve the whole body (absent, malformed, multi-range, other
                      unit) */
    TG_RANGE_OK,   /* serve [first, first + length) with 206 */
    TG_RANGE_UNSATISFIABLE, /* 416 with Content-Range: bytes STAR/total */
} tg_range_result;

/* Parses a Range header value (may be NULL) against a body of total bytes. */
tg_range_result tg_range_parse(const char *header, uint64_t total, uint64_t *first,
                               uint64_t *length);

/* True when an If-None-Match value matches the strong entity tag "etag" (given
 * without quotes): "*", or a list holding "etag" or W/"etag". */
bool tg_etag_matches(const char *if_none_match, const char *etag);

/* The quality an Accept header value gives media_type, named exactly (any case; a
 * wildcard such as "*" "/" "*" does not count), in thousandths: 1000 for "type" or
 * "type;q=1", 500 for "type;q=0.5", 0 when it is absent, refused (q=0) or its q is
 * malformed. The highest when it is listed twice. NULL accept is 0. */
unsigned tg_accept_quality(const char *accept, const char *media_type);

/* Parses a decimal u64 with no sign, spaces or leading zeros (except "0"). */
bool tg_parse_u64(const char *text, uint64_t *out);

/* An RFC 3339 date-time ("2026-05-01T12:00:00Z", "2026-05-01t14:00:00.250+02:00";
 * "T" or a space between date and time, "Z" or a numeric offset, any fraction) as
 * the catalog's UTC text "YYYY-MM-DDTHH:MM:SSZ" (cap >= TG_UTC_TEXT_LEN): the
 * fraction is dropped, a leap second 60 reads as 59. False for anything else (a
 * missing offset, a day the month lacks, a year outside 0001..9999 once in UTC). */
#define TG_UTC_TEXT_LEN 21
bool tg_rfc3339_utc(const char *text, char *out, size_t cap);

/* A SHA-256 written as 64 hex digits, either case, as 64 lowercase digits into out
 * (cap >= 65). False for anything else. */
bool tg_sha256_text_lower(const char *text, char *out, size_t cap);

#endif
