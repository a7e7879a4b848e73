/* The HTTP layer's pure parsing (see http_parse.h). */
#include "http_parse.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

int tg_split_path(const char *path, tg_segment *out, int max)
{
    if (path[0] != '/')
        return -1;
    int count = 0;
    const char *p = path + 1;
    for (;;) {
        if (count == max)
            return -1;
        const char *slash = strchr(p, '/');
        out[count].text = p;
        out[count].len = slash ? (size_t)(slash - p) : strlen(p);
        count++;
        if (slash == NULL)
            return count;
        p = slash + 1;
    }
}

static bool is_placeholder(const tg_segment *seg)
{
    return seg->len >= 2 && seg->text[0] == '{';
}

static bool is_tail(const tg_segment *seg)
{
    return is_placeholder(seg) && seg->len >= 3 && seg->text[seg->len - 2] == '*';
}

/* The known name of a placeholder segment "{name}" or "{name*}", or NULL. */
static const char *placeholder_name(const tg_segment *seg)
{
    static const char *const names[] = {"org",  "name", "rev",    "alias",
                                        "path", "id",   "tensor", "delivery"};
    size_t inner = seg->len - 2 - (is_tail(seg) ? 1 : 0);
    if (seg->text[seg->len - 1] != '}')
        return NULL;
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++)
        if (strlen(names[n]) == inner && strncmp(seg->text + 1, names[n], inner) == 0)
            return names[n];
    return NULL;
}

bool tg_pattern_valid(const char *pattern, char *why, size_t why_len)
{
    tg_segment pat[TG_PATTERN_SEGMENTS_MAX];
    int pat_count = tg_split_path(pattern, pat, TG_PATTERN_SEGMENTS_MAX);
    if (pat_count < 0) {
        snprintf(why, why_len, "not a path of at most %d segments", TG_PATTERN_SEGMENTS_MAX);
        return false;
    }
    int placeholders = 0;
    for (int p = 0; p < pat_count; p++) {
        if (!is_placeholder(&pat[p]))
            continue;
        if (++placeholders > TG_ROUTE_PARAMS_MAX) {
            snprintf(why, why_len, "more than %d placeholders", TG_ROUTE_PARAMS_MAX);
            return false;
        }
        if (placeholder_name(&pat[p]) == NULL) {
            snprintf(why, why_len, "unknown placeholder %.*s", (int)pat[p].len, pat[p].text);
            return false;
        }
    }
    return true;
}

void tg_pattern_compile(const char *pattern, tg_pattern *out)
{
    memset(out, 0, sizeof *out);
    int count = tg_split_path(pattern, out->seg, TG_PATTERN_SEGMENTS_MAX);
    if (count < 0)
        return;
    int placeholders = 0;
    for (int p = 0; p < count; p++) {
        if (!is_placeholder(&out->seg[p]))
            continue;
        out->name[p] = placeholder_name(&out->seg[p]);
        out->is_tail[p] = is_tail(&out->seg[p]);
        out->tail = out->tail || out->is_tail[p];
        /* an unknown name or one placeholder too many: no match could give them all */
        if (out->name[p] == NULL || ++placeholders > TG_ROUTE_PARAMS_MAX)
            return;
    }
    out->count = count;
    out->usable = true;
}

bool tg_pattern_match(const tg_pattern *pattern, const tg_segment *url, int url_count,
                      tg_param_span *params, int *param_count)
{
    int pat_count = pattern->count;
    /* every segment takes one url segment, a tail one or more */
    if (!pattern->usable || (pattern->tail ? url_count < pat_count : url_count != pat_count))
        return false;
    int u = 0, found = 0;
    for (int p = 0; p < pat_count; p++) {
        const tg_segment *seg = &pattern->seg[p];
        const char *name = pattern->name[p];
        if (name == NULL) {
            if (u >= url_count || url[u].len != seg->len ||
                memcmp(url[u].text, seg->text, seg->len) != 0)
                return false;
            u++;
            continue;
        }
        int take = 1;
        if (pattern->is_tail[p])
            take = url_count - u - (pat_count - p - 1);
        if (take < 1 || u + take > url_count)
            return false;
        if (!pattern->is_tail[p] && url[u].len == 0)
            return false;
        if (params != NULL) {
            const char *begin = url[u].text;
            const char *end = url[u + take - 1].text + url[u + take - 1].len;
            params[found].name = name;
            params[found].text = begin;
            params[found].len = (size_t)(end - begin);
        }
        found++;
        u += take;
    }
    if (param_count != NULL)
        *param_count = found;
    return u == url_count;
}

bool tg_pattern_first_may_match(const tg_pattern *pattern, const tg_segment *url, int url_count)
{
    if (!pattern->usable || url_count < 1)
        return false;
    const tg_segment *first = &pattern->seg[0];
    return pattern->name[0] != NULL ||
           (url[0].len == first->len && memcmp(url[0].text, first->text, first->len) == 0);
}

bool tg_pattern_same_first(const tg_pattern *a, const tg_pattern *b)
{
    if (!a->usable || !b->usable)
        return !a->usable && !b->usable;
    if (a->name[0] != NULL || b->name[0] != NULL)
        return a->name[0] != NULL && b->name[0] != NULL;
    return a->seg[0].len == b->seg[0].len &&
           memcmp(a->seg[0].text, b->seg[0].text, a->seg[0].len) == 0;
}

bool tg_match_pattern(const char *pattern, const tg_segment *url, int url_count,
                      tg_param_span *params, int *param_count)
{
    tg_pattern compiled;
    tg_pattern_compile(pattern, &compiled);
    return tg_pattern_match(&compiled, url, url_count, params, param_count);
}

void tg_target_inspect(const char *uri, tg_target_info *out)
{
    out->length = strlen(uri);
    out->has_nul = strstr(uri, "%00") != NULL;
    out->query_args = 0;
    const char *query = strchr(uri, '?');
    if (query == NULL || query[1] == '\0')
        return;
    out->query_args = 1;
    for (const char *p = query + 1; *p != '\0'; p++)
        if (*p == '&')
            out->query_args++;
}

/* RFC 9110 5.6.2: token = 1*tchar. */
static bool is_token(const char *text)
{
    if (text[0] == '\0')
        return false;
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++) {
        bool alnum =
            (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z');
        if (!alnum && strchr("!#$%&'*+-.^_`|~", *p) == NULL)
            return false;
    }
    return true;
}

void tg_framing_add(tg_framing *framing, const char *name, const char *value)
{
    framing->fields++;
    if (framing->bad_name == NULL && !is_token(name))
        framing->bad_name = name;
    if (strcasecmp(name, "Host") == 0) {
        framing->hosts++;
    } else if (strcasecmp(name, "Content-Length") == 0) {
        if (framing->content_lengths++ == 0)
            framing->content_length = value;
    } else if (strcasecmp(name, "Transfer-Encoding") == 0) {
        if (framing->transfer_encodings++ == 0)
            framing->transfer_encoding = value;
    }
}

static bool refuse(tg_refusal *out, unsigned status, const char *reason, bool close,
                   const char *detail)
{
    out->status = status;
    out->reason = reason;
    out->close = close;
    snprintf(out->detail, sizeof out->detail, "%s", detail);
    return true;
}

bool tg_framing_verdict(const tg_framing *framing, bool http_1_0, size_t header_bytes,
                        tg_refusal *out)
{
    if (framing->bad_name != NULL) {
        char detail[sizeof out->detail];
        snprintf(detail, sizeof detail,
                 "the header field name \"%.64s\" is not a token (no space may come before "
                 "the colon)",
                 framing->bad_name);
        return refuse(out, 400, "malformed_header", true, detail);
    }
    if (framing->content_lengths > 1)
        return refuse(out, 400, "ambiguous_framing", true,
                      "the request has more than one Content-Length field");
    if (framing->transfer_encodings > 0 && framing->content_lengths > 0)
        return refuse(out, 400, "ambiguous_framing", true,
                      "the request has both Transfer-Encoding and Content-Length");
    if (framing->transfer_encodings > 1)
        return refuse(out, 400, "ambiguous_framing", true,
                      "the request has more than one Transfer-Encoding field");
    if (framing->transfer_encodings > 0 && http_1_0)
        return refuse(out, 400, "ambiguous_framing", true,
                      "an HTTP/1.0 request cannot use Transfer-Encoding");
    if (framing->transfer_encodings > 0 && strcasecmp(framing->transfer_encoding, "chunked") != 0) {
        char detail[sizeof out->detail];
        snprintf(detail, sizeof detail,
                 "Transfer-Encoding \"%.64s\" is not supported; only \"chunked\" is",
                 framing->transfer_encoding);
        return refuse(out, 501, "unsupported_transfer_encoding", true, detail);
    }
    if (framing->hosts == 0 && !http_1_0)
        return refuse(out, 400, "missing_host", true, "an HTTP/1.1 request needs a Host field");
    if (framing->hosts > 1)
        return refuse(out, 400, "duplicate_host", true, "the request has more than one Host field");
    if (framing->fields > TG_HEADER_FIELDS_MAX || header_bytes > TG_HEADER_BYTES_MAX) {
        char detail[sizeof out->detail];
        snprintf(detail, sizeof detail,
                 "the request has %u header fields in %zu bytes; at most %d fields in %d bytes "
                 "are accepted",
                 framing->fields, header_bytes, TG_HEADER_FIELDS_MAX, TG_HEADER_BYTES_MAX);
        return refuse(out, 431, "headers_too_large", false, detail);
    }
    return false;
}

bool tg_json_depth_within(const char *text, size_t len, unsigned max)
{
    unsigned depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (in_string) {
            if (c == '\\')
                i++; /* the escaped character cannot end the string */
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max)
                return false;
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
    }
    return true;
}
