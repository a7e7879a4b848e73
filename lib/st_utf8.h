/* UTF-8 for the whole project: the one decoder (what a valid sequence is, by RFC 3629:
 * no overlong forms, no surrogates, nothing above U+10FFFF) and JSON strings built
 * from bytes that may not be UTF-8. The gate, the sniffer, the writer, the server's
 * problem bodies and the CLI all decide "is this UTF-8" here. */
#ifndef ST_UTF8_H
#define ST_UTF8_H

#include <stddef.h>

#include <jansson.h>

#include "st_error.h"

/* Length of the valid UTF-8 sequence at p (1..4; no overlong forms, surrogates or
 * code points above U+10FFFF), or 0 if none starts there; left (>= 1) bytes are
 * readable. */
size_t st_utf8_sequence_length(const unsigned char *p, size_t left);

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
