/* UTF-8 for the whole project: the one decoder (what a valid sequence is, by RFC 3629:
 * no overlong forms, no surrogates, nothing above U+10FFFF) and JSON strings built
 * from bytes that may not be UTF-8. The gate, the sniffer, the writer, the server's
 * problem bodies and the CLI all decide "is this UTF-8" here. */
#ifndef ST_UTF8_H
#define ST_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "st_error.h"

/* What st_utf8_decode answers for bytes that begin a valid sequence which the end
 * of the buffer cuts (a lead byte, or a lead byte and valid continuation bytes). */
#define ST_UTF8_CUT SIZE_MAX

/* Decodes the sequence at p, of which left (>= 1) bytes are readable: its length
 * (1..4) with its code point in *code_point (may be NULL); 0 when the bytes are not
 * UTF-8 (a byte that starts no sequence, a bad continuation byte, an overlong form,
 * a surrogate, a code point above U+10FFFF); ST_UTF8_CUT when the left bytes are a
 * valid beginning of a longer sequence. */
size_t st_utf8_decode(const unsigned char *p, size_t left, uint32_t *code_point);

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if none starts there (a cut
 * sequence included); left (>= 1) bytes are readable. */
size_t st_utf8_sequence_length(const unsigned char *p, size_t left);

/* True when the len bytes at s are UTF-8 as a whole (a sequence cut by the end is
 * not). Otherwise false, with the offset of the first byte that starts no valid
 * sequence in *bad_offset (may be NULL). NUL is valid UTF-8. */
bool st_utf8_valid(const void *s, size_t len, size_t *bad_offset);

/* A JSON string from text that may not be UTF-8: each invalid byte becomes U+FFFD.
 * NULL when out of memory. */
json_t *st_json_string_lossy(const char *text);
/* The same for len bytes that may hold NUL (JSON writes it as \u0000). */
json_t *st_json_stringn_lossy(const char *text, size_t len);

/* The tensor a refusal names, whole (err->tensor_len bytes, U+0000 included), or
 * JSON null when it names none: the "tensor" of validate --json, /v1/scan and the
 * upload problems. */
json_t *st_error_tensor_json(const st_error *err);

#endif
