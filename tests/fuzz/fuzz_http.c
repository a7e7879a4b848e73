/* libFuzzer target for the HTTP layer's pure parsing, in-process (no daemon):
 * server/core/http_parse.c (path split, route pattern match, request-target limits,
 * framing verdict, JSON depth), server/core/checks.c's Range parser and lib/st_slice.c
 * on the ?slice= value.
 *
 * Input: a raw HTTP/1.x request head and body ("GET /p?q HTTP/1.1\r\nName: v\r\n\r\nbody").
 * Header lines are split as libmicrohttpd does (name up to the first ':', value
 * after leading spaces and tabs; a line without ':' is skipped here).
 * It checks: a framing refusal has a known status, a reason and a terminated detail,
 * and only 431 keeps the connection; the target's counts are consistent; each route
 * pattern that matches gives placeholders that lie inside the path, a plain {x}
 * being one non-empty segment; a satisfiable Range lies inside the body; the JSON
 * depth check agrees with the depth jansson parses. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "http_parse.h"
#include "st_slice.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond))                                                                               \
            __builtin_trap();                                                                      \
    } while (0)

/* the patterns of server/core/http.c's routing table */
static const char *const patterns[] = {
    "/healthz",
    "/v1/scan",
    "/v1/models",
    "/v1/models/{org}/{name}",
    "/v1/models/{org}/{name}/aliases/{alias}",
    "/v1/models/{org}/{name}/versions",
    "/v1/models/{org}/{name}/versions/{rev}",
    "/v1/models/{org}/{name}/versions/{rev}/publish",
    "/v1/jobs/{id}",
    "/v1/models/{org}/{name}/versions/{rev}/files",
    "/v1/models/{org}/{name}/versions/{rev}/files/{path*}/header",
    "/v1/models/{org}/{name}/versions/{rev}/files/{path*}",
    "/v1/models/{org}/{name}/versions/{rev}/tensors/{tensor*}",
    "/v1/preloads/{id}",
    "/api/models/{org}/{name}/tree/{rev}/{path*}",
    "/{org}/{name}/resolve/{rev}/{path*}",
};

static size_t json_depth(const json_t *value)
{
    size_t deepest = 0;
    if (json_is_object(value)) {
        const char *key;
        json_t *member;
        json_object_foreach((json_t *)value, key, member)
        {
            size_t d = json_depth(member);
            deepest = d > deepest ? d : deepest;
        }
        return deepest + 1;
    }
    if (json_is_array(value)) {
        for (size_t i = 0; i < json_array_size(value); i++) {
            size_t d = json_depth(json_array_get(value, i));
            deepest = d > deepest ? d : deepest;
        }
        return deepest + 1;
    }
    return 0;
}

static void check_route(const char *path)
{
    tg_segment segments[TG_SEGMENTS_MAX];
    int count = tg_split_path(path, segments, TG_SEGMENTS_MAX);
    if (count < 0)
        return;
    size_t path_len = strlen(path);
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) {
        tg_param_span params[TG_ROUTE_PARAMS_MAX];
        int found = -1;
        bool matched = tg_match_pattern(patterns[i], segments, count, params, &found);
        REQUIRE(matched == tg_match_pattern(patterns[i], segments, count, NULL, NULL));
        if (!matched)
            continue;
        REQUIRE(found >= 0 && found <= TG_ROUTE_PARAMS_MAX);
        for (int p = 0; p < found; p++) {
            REQUIRE(params[p].name != NULL);
            REQUIRE(params[p].text >= path && params[p].text + params[p].len <= path + path_len);
            bool tail =
                strcmp(params[p].name, "path") == 0 || strcmp(params[p].name, "tensor") == 0;
            if (!tail)
                REQUIRE(params[p].len > 0 && memchr(params[p].text, '/', params[p].len) == NULL);
        }
    }
}

static void check_range(const char *value, uint64_t total)
{
    uint64_t first = 0, length = 0;
    tg_range_result r = tg_range_parse(value, total, &first, &length);
    if (r == TG_RANGE_OK) {
        REQUIRE(length >= 1 && first < total && length <= total - first);
    }
}

static void check_slice(const char *query)
{
    const char *at = strstr(query, "slice=");
    if (at == NULL)
        return;
    at += 6;
    size_t len = strcspn(at, "&");
    static const uint64_t shape[3] = {4, 3, 5};
    st_slice slice;
    st_slice_error err;
    st_slice_status status = st_slice_parse(at, len, shape, 3, ST_F32, &slice, &err);
    if (status != ST_SLICE_OK)
        REQUIRE(err.detail[0] != '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    size_t text_len = strlen(text); /* the head stops at a NUL, as on the wire */

    char *head_end = strstr(text, "\r\n\r\n");
    const char *body = head_end ? head_end + 4 : text + text_len;
    size_t body_len = (size_t)(text + size - body);
    if (head_end != NULL)
        head_end[2] = '\0'; /* keep the last field line's CRLF */

    /* request line: METHOD SP target SP version */
    char *line_end = strstr(text, "\r\n");
    char *fields = line_end ? line_end + 2 : text + strlen(text);
    if (line_end != NULL)
        *line_end = '\0';
    char *target = strchr(text, ' ');
    char *version = NULL;
    if (target != NULL) {
        *target++ = '\0';
        version = strrchr(target, ' ');
        if (version != NULL)
            *version++ = '\0';
    }
    bool http_1_0 = version != NULL && strcmp(version, "HTTP/1.0") == 0;

    if (target != NULL) {
        tg_target_info info;
        tg_target_inspect(target, &info);
        REQUIRE(info.length == strlen(target));
        REQUIRE(info.query_args <= info.length);
        char *query = strchr(target, '?');
        if (query != NULL) {
            *query++ = '\0';
            check_slice(query);
        }
        check_route(target);
    }

    tg_framing framing = {0};
    const char *range = NULL;
    for (char *line = fields; line != NULL && *line != '\0';) {
        char *next = strstr(line, "\r\n");
        if (next != NULL) {
            *next = '\0';
            next += 2;
        }
        char *colon = strchr(line, ':');
        if (colon != NULL) {
            *colon = '\0';
            char *value = colon + 1;
            while (*value == ' ' || *value == '\t')
                value++;
            tg_framing_add(&framing, line, value);
            if (strcmp(line, "Range") == 0)
                range = value;
        }
        line = next;
    }
    tg_refusal refusal;
    if (tg_framing_verdict(&framing, http_1_0, size, &refusal)) {
        REQUIRE(refusal.status == 400 || refusal.status == 431 || refusal.status == 501);
        REQUIRE(refusal.reason != NULL && refusal.reason[0] != '\0');
        REQUIRE(strnlen(refusal.detail, sizeof refusal.detail) < sizeof refusal.detail);
        REQUIRE(refusal.close == (refusal.status != 431));
    } else {
        REQUIRE(framing.content_lengths <= 1 && framing.transfer_encodings <= 1);
        REQUIRE(framing.content_lengths == 0 || framing.transfer_encodings == 0);
        REQUIRE(framing.hosts == 1 || (http_1_0 && framing.hosts == 0));
        REQUIRE(framing.fields <= TG_HEADER_FIELDS_MAX);
    }

    check_range(range, body_len);
    check_range(range, UINT64_MAX);

    bool within = tg_json_depth_within(body, body_len, TG_JSON_DEPTH_MAX);
    json_error_t error;
    json_t *json = json_loadb(body, body_len, JSON_DECODE_ANY, &error);
    if (json != NULL) {
        REQUIRE(within == (json_depth(json) <= TG_JSON_DEPTH_MAX));
        json_decref(json);
    }
    free(text);
    return 0;
}
