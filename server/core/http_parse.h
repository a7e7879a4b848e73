/* The HTTP layer's pure parsing, with no libmicrohttpd: path splitting and route
 * pattern matching, the request-target limits, the framing checks every request's
 * header fields pass before any handler runs, and the JSON nesting bound. Used by
 * http.c; driven in-process by tests/fuzz/fuzz_http.c. The limits are documented
 * in docs/MANUAL.md ("Limits") and openapi.yaml. */
#ifndef TG_HTTP_PARSE_H
#define TG_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>

#define TG_URI_MAX (16 * 1024)          /* request-target bytes: 414 uri_too_long */
#define TG_QUERY_ARGS_MAX 64            /* query arguments: 400 too_many_query_arguments */
#define TG_HEADER_FIELDS_MAX 64         /* header fields: 431 headers_too_large */
#define TG_HEADER_BYTES_MAX (32 * 1024) /* head bytes less the target: 431 headers_too_large */
#define TG_JSON_DEPTH_MAX 32       /* nested arrays/objects in a JSON body: 400 json_too_deep */
#define TG_SEGMENTS_MAX 300        /* path segments; more match no route (404) */
#define TG_ROUTE_PARAMS_MAX 4      /* {placeholders} in one pattern */
#define TG_PATTERN_SEGMENTS_MAX 16 /* segments of one route pattern */

typedef struct tg_segment {
    const char *text;
    size_t len;
} tg_segment;

/* Splits "/a/b/c" into segments (empty ones kept). Returns the count, or -1 if the
 * path does not start with '/' or has more than max segments. */
int tg_split_path(const char *path, tg_segment *out, int max);

typedef struct tg_param_span {
    const char *name; /* "org", "name", "rev", "alias", "path", "id", "tensor" or NULL */
    const char *text; /* inside the url */
    size_t len;
} tg_param_span;

/* Matches url segments against a pattern ("/v1/models/{org}/{name}"; "{path*}" takes
 * one or more segments, a plain {x} one non-empty segment). When params is not NULL
 * it gets the placeholders' spans and *param_count their number. A pattern that
 * tg_pattern_valid refuses matches nothing (never a dropped or unnamed parameter). */
bool tg_match_pattern(const char *pattern, const tg_segment *url, int url_count,
                      tg_param_span *params, int *param_count);

/* A pattern split once (at server start) so that routing a request does not split
 * every row's pattern again: its segments and, for each placeholder, its name (NULL
 * for a literal segment). A pattern tg_pattern_valid refuses compiles to one that
 * matches nothing, as tg_match_pattern. */
typedef struct tg_pattern {
    int count;   /* segments; 0: matches nothing */
    bool tail;   /* one segment is a {name*} */
    bool usable; /* false: the pattern matches nothing */
    tg_segment seg[TG_PATTERN_SEGMENTS_MAX];
    const char *name[TG_PATTERN_SEGMENTS_MAX]; /* placeholder's name, NULL: literal */
    bool is_tail[TG_PATTERN_SEGMENTS_MAX];
    /* Set by a router over a table of patterns (http.c): the index of the next row whose
     * first segment differs from this one's, so that a url whose first segment differs
     * from a literal first segment skips the rows that share it. */
    size_t next_group;
} tg_pattern;

/* Whether the url's first segment can match pattern's: false only when pattern
 * starts with a literal segment that the url's first segment is not. */
bool tg_pattern_first_may_match(const tg_pattern *pattern, const tg_segment *url, int url_count);

/* Whether two compiled patterns start with the same literal segment, or both with a
 * placeholder (the rows a url's first segment accepts or refuses together). */
bool tg_pattern_same_first(const tg_pattern *a, const tg_pattern *b);

/* Compiles pattern into out (which borrows pattern's text). */
void tg_pattern_compile(const char *pattern, tg_pattern *out);

/* tg_match_pattern over a compiled pattern: the same answers and spans. */
bool tg_pattern_match(const tg_pattern *pattern, const tg_segment *url, int url_count,
                      tg_param_span *params, int *param_count);

/* True when pattern can be matched: it starts with '/', has at most
 * TG_PATTERN_SEGMENTS_MAX segments and TG_ROUTE_PARAMS_MAX placeholders, each "{name}"
 * or "{name*}" with a name of tg_param_span. Otherwise false
 * with the reason in why. The server checks its route table with it at start. */
bool tg_pattern_valid(const char *pattern, char *why, size_t why_len);

/* What the raw request target (as received, before decoding) says about the limits. */
typedef struct tg_target_info {
    size_t length;     /* bytes of the target */
    size_t query_args; /* '&'-separated pieces of the query (0 without one) */
    bool has_nul;      /* holds %00 */
} tg_target_info;

void tg_target_inspect(const char *uri, tg_target_info *out);

/* The framing check: each header field is fed in, then the verdict is asked. */
typedef struct tg_framing {
    unsigned fields;
    unsigned hosts;
    unsigned content_lengths;
    unsigned transfer_encodings;
    const char *content_length;    /* the first value */
    const char *transfer_encoding; /* the first value */
    const char *bad_name;          /* the first field name that is not an RFC 9110 token */
} tg_framing;

void tg_framing_add(tg_framing *framing, const char *name, const char *value);

typedef struct tg_refusal {
    unsigned status;    /* 400, 431 or 501 */
    const char *reason; /* stable reason code (docs/MANUAL.md "Limits") */
    char detail[256];
    bool close; /* the framing is in doubt: close the connection after answering */
} tg_refusal;

/* Decides on a request's fields (http_1_0: the request line said HTTP/1.0;
 * header_bytes: the head as received, request line and fields up to the empty line,
 * less the request target, which has its own bound). Returns true and fills out
 * when the request must be refused before routing:
 *   400 malformed_header   a field name that is not a token ("Content-Length : 7")
 *   400 ambiguous_framing  Transfer-Encoding with Content-Length, two Content-Length
 *                          or two Transfer-Encoding fields, Transfer-Encoding in HTTP/1.0
 *   501 unsupported_transfer_encoding  any Transfer-Encoding other than "chunked"
 *   400 missing_host / duplicate_host  HTTP/1.1 without Host, or more than one Host
 *   431 headers_too_large  more than TG_HEADER_FIELDS_MAX fields or TG_HEADER_BYTES_MAX bytes
 * All but 431 set close. */
bool tg_framing_verdict(const tg_framing *framing, bool http_1_0, size_t header_bytes,
                        tg_refusal *out);

/* True when the JSON text nests arrays and objects at most max deep (strings are
 * skipped; the text need not be valid JSON). */
bool tg_json_depth_within(const char *text, size_t len, unsigned max);

#endif
