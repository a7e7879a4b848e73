/* GET /v1/audit: the audit log (docs/SECURITY.md, "The audit log"), for a global
 * admin token (the route has no {org}: a namespace-limited admin is refused by the
 * dispatcher, as on /v1/rejections). Filters narrow it; a JSON page (limit, an opaque
 * cursor, Link rel="next") or, with ?format=jsonl or Accept: application/x-ndjson,
 * every matching record as JSON lines, read from the catalog a page at a time while
 * the answer is sent (memory bounded by one page, whatever the log's size). Each
 * record carries seq, prev_hash and hash, so a client can check the chain. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checks.h"
#include "public_url.h"
#include "routes.h"
#include "st_buffer.h"

#define AUDIT_PAGE_DEFAULT 100
#define AUDIT_PAGE_MAX 1000
/* records read from the catalog per step of a JSON-lines answer */
#define AUDIT_STREAM_PAGE 256
/* the query parameters the route knows, in the order a next link repeats them */
static const char *const filter_names[] = {"since",  "until",    "actor",  "namespace",
                                           "action", "resource", "status", "outcome",
                                           "format", "limit",    NULL};

/* The filter, its strings copied (a JSON-lines answer outlives the request's
 * callbacks). */
typedef struct audit_query {
    tg_audit_filter filter;
    char since[TG_AUDIT_TIME_LEN], until[TG_AUDIT_TIME_LEN];
    char namespace_name[TG_AUDIT_NAMESPACE_MAX + 1];
    char action[TG_AUDIT_ACTION_MAX + 1];
    char resource[TG_AUDIT_RESOURCE_MAX + 1];
    uint64_t limit; /* 0: none (JSON lines without ?limit) */
    bool jsonl;
} audit_query;

/* The n decimal digits at p as a number; -1 when one is not a digit. */
static int digits(const char *p, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

/* An RFC 3339 date-time ("2026-01-02T03:04:05Z", "...05.5+02:00"; 't', 'z' and a
 * space for 'T' accepted) in the record's form (UTC, microseconds): 0, or -1. */
static int parse_time(const char *text, char out[TG_AUDIT_TIME_LEN])
{
    if (strlen(text) < 20 || text[4] != '-' || text[7] != '-' || text[13] != ':' ||
        text[16] != ':' || (text[10] != 'T' && text[10] != 't' && text[10] != ' '))
        return -1;
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    tm.tm_year = digits(text, 4);
    tm.tm_mon = digits(text + 5, 2);
    tm.tm_mday = digits(text + 8, 2);
    tm.tm_hour = digits(text + 11, 2);
    tm.tm_min = digits(text + 14, 2);
    tm.tm_sec = digits(text + 17, 2);
    if (tm.tm_year < 1970 || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
        tm.tm_hour < 0 || tm.tm_hour > 23 || tm.tm_min < 0 || tm.tm_min > 59 || tm.tm_sec < 0 ||
        tm.tm_sec > 60)
        return -1;
    const char *p = text + 19;
    long micros = 0;
    if (*p == '.') {
        p++;
        int count = 0;
        while (*p >= '0' && *p <= '9') {
            if (count < 6)
                micros = micros * 10 + (*p - '0');
            count++;
            p++;
        }
        if (count == 0 || count > 9)
            return -1;
        for (; count < 6; count++)
            micros *= 10;
    }
    long offset = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh = digits(p + 1, 2);
        int om = oh >= 0 && p[3] == ':' ? digits(p + 4, 2) : -1; /* p[3]: after 2 digits */
        if (oh < 0 || oh > 23 || om < 0 || om > 59)
            return -1;
        offset = (oh * 3600L + om * 60L) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return -1;
    }
    if (*p != '\0')
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm) - offset;
    struct tm utc;
    if (gmtime_r(&t, &utc) == NULL)
        return -1;
    size_t n = strftime(out, TG_AUDIT_TIME_LEN, "%Y-%m-%dT%H:%M:%S", &utc);
    if (n == 0)
        return -1;
    snprintf(out + n, TG_AUDIT_TIME_LEN - n, ".%06ldZ", micros % 1000000);
    return 0;
}

/* A bounded text parameter into out: false (answered 400) when too long. */
static bool text_param(tg_request *req, const char *name, char *out, size_t cap, const char **set)
{
    const char *v = tg_query(req, name);
    *set = NULL;
    if (v == NULL || v[0] == '\0')
        return true;
    if (strlen(v) >= cap) {
        tg_respond_problem(req, "invalid_request", "%s is longer than %zu bytes", name, cap - 1);
        return false;
    }
    snprintf(out, cap, "%s", v);
    *set = out;
    return true;
}

/* The query's filters into q: false when one is bad (answered 400). */
static bool parse_query(tg_request *req, audit_query *q)
{
    memset(q, 0, sizeof *q);
    tg_audit_filter *f = &q->filter;
    const char *since = tg_query(req, "since"), *until = tg_query(req, "until");
    if (since != NULL && parse_time(since, q->since) != 0) {
        tg_respond_problem(req, "invalid_request",
                           "since must be an RFC 3339 date-time (2026-01-02T03:04:05Z)");
        return false;
    }
    if (until != NULL && parse_time(until, q->until) != 0) {
        tg_respond_problem(req, "invalid_request",
                           "until must be an RFC 3339 date-time (2026-01-02T03:04:05Z)");
        return false;
    }
    f->since = since ? q->since : NULL;
    f->until = until ? q->until : NULL;
    const char *actor = tg_query(req, "actor");
    if (actor != NULL) {
        uint64_t id;
        if (strcmp(actor, "anonymous") == 0)
            f->token_id = -1;
        else if (tg_parse_u64(actor, &id) && id > 0 && id <= INT64_MAX)
            f->token_id = (int64_t)id;
        else {
            tg_respond_problem(req, "invalid_request",
                               "actor must be a token id (tensorgate token list) or anonymous");
            return false;
        }
    }
    if (!text_param(req, "namespace", q->namespace_name, sizeof q->namespace_name,
                    &f->namespace_name) ||
        !text_param(req, "action", q->action, sizeof q->action, &f->action) ||
        !text_param(req, "resource", q->resource, sizeof q->resource, &f->resource_prefix))
        return false;
    const char *status = tg_query(req, "status");
    if (status != NULL) {
        uint64_t s;
        if (!tg_parse_u64(status, &s) || s < 100 || s > 599) {
            tg_respond_problem(req, "invalid_request", "status must be an HTTP status, 100..599");
            return false;
        }
        f->status = (unsigned)s;
    }
    const char *outcome = tg_query(req, "outcome");
    if (outcome != NULL) {
        if (strcmp(outcome, "success") == 0)
            f->outcome = TG_AUDIT_OUTCOME_SUCCESS;
        else if (strcmp(outcome, "refused") == 0)
            f->outcome = TG_AUDIT_OUTCOME_REFUSED;
        else if (strcmp(outcome, "failure") == 0)
            f->outcome = TG_AUDIT_OUTCOME_FAILURE;
        else {
            tg_respond_problem(req, "invalid_request",
                               "outcome must be success, refused or failure");
            return false;
        }
    }
    const char *format = tg_query(req, "format");
    const char *accept = tg_header(req, "Accept");
    if (format != NULL && strcmp(format, "jsonl") != 0 && strcmp(format, "json") != 0) {
        tg_respond_problem(req, "invalid_request", "format must be json or jsonl");
        return false;
    }
    q->jsonl = format ? strcmp(format, "jsonl") == 0
                      : accept != NULL && strstr(accept, "application/x-ndjson") != NULL;
    const char *limit = tg_query(req, "limit");
    if (limit != NULL && (!tg_parse_u64(limit, &q->limit) || q->limit < 1 ||
                          (!q->jsonl && q->limit > AUDIT_PAGE_MAX))) {
        tg_respond_problem(req, "invalid_request", "limit must be an integer from 1 to %d",
                           AUDIT_PAGE_MAX);
        return false;
    }
    if (limit == NULL && !q->jsonl)
        q->limit = AUDIT_PAGE_DEFAULT;
    const char *cursor = tg_query(req, "cursor");
    if (cursor != NULL && cursor[0] != '\0') {
        char key[32];
        uint64_t after;
        if (tg_cursor_decode(cursor, key, sizeof key) != 0 || !tg_parse_u64(key, &after) ||
            after > INT64_MAX) {
            tg_respond_problem(req, "invalid_request", "the cursor is not one this server issued");
            return false;
        }
        f->after_seq = (int64_t)after;
    }
    return true;
}

json_t *tg_audit_record_json(const tg_audit_record *r)
{
    return json_pack("{s:I, s:s, s:o, s:s, s:s, s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:s}", "seq",
                     (json_int_t)r->seq, "time", r->time, "token_id",
                     r->token_id > 0 ? json_integer((json_int_t)r->token_id) : json_null(),
                     "namespace", r->namespace_name, "action", r->action, "resource", r->resource,
                     "status", (int)r->status, "reason", r->reason, "request_id", r->request_id,
                     "client", r->client, "user_agent", r->user_agent, "prev_hash", r->prev_hash,
                     "hash", r->hash);
}

/* ---- a JSON page ---- */

typedef struct audit_page {
    json_t *items;
    unsigned count;
    int64_t last_seq; /* of the limit-th record */
    unsigned limit;
    bool failed;
} audit_page;

static void add_record(void *ctx, const tg_audit_record *r)
{
    audit_page *page = ctx;
    page->count++;
    if (page->count > page->limit)
        return; /* the one past the page: there is a next page */
    json_t *item = tg_audit_record_json(r);
    if (item == NULL || json_array_append_new(page->items, item) != 0)
        page->failed = true;
    page->last_seq = r->seq;
}

/* Appends "name=value" (value percent-encoded) to b, after "?" or "&". */
static void add_query(st_buffer *b, const char *name, const char *value, bool *first)
{
    (void)st_buffer_printf(b, "%s%s=", *first ? "?" : "&", name);
    *first = false;
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~", *p) != NULL)
            (void)st_buffer_printf(b, "%c", *p);
        else
            (void)st_buffer_printf(b, "%%%02X", *p);
    }
}

static void respond_page(tg_request *req, const audit_query *q)
{
    audit_page page = {.items = json_array(), .limit = (unsigned)q->limit};
    tg_cat_status status =
        tg_catalog_audit_list(req->server->catalog, &q->filter, page.limit + 1, add_record, &page);
    if (status != TG_CAT_OK || page.items == NULL || page.failed) {
        json_decref(page.items);
        if (status != TG_CAT_OK)
            tg_respond_catalog_failure(req, status);
        else
            tg_respond_internal(req, "out of memory listing the audit log");
        return;
    }
    bool has_next = page.count > page.limit;
    char next[32], cursor[128] = "";
    snprintf(next, sizeof next, "%" PRId64, page.last_seq);
    if (has_next && tg_cursor_encode(next, cursor, sizeof cursor) != 0)
        has_next = false;
    char *link = NULL;
    if (has_next) {
        st_buffer b;
        st_buffer_init(&b, 8192);
        char origin[TG_PUBLIC_URL_MAX];
        tg_request_origin(req, origin, sizeof origin);
        (void)st_buffer_printf(&b, "<%s/v1/audit", origin);
        bool first = true;
        for (size_t i = 0; filter_names[i] != NULL; i++) {
            const char *v = tg_query(req, filter_names[i]);
            if (v != NULL)
                add_query(&b, filter_names[i], v, &first);
        }
        add_query(&b, "cursor", cursor, &first);
        (void)st_buffer_printf(&b, ">; rel=\"next\"");
        link = st_buffer_take(&b, NULL);
    }
    json_t *body = json_object();
    json_object_set(body, "records", page.items);
    tg_set_next_cursor(body, has_next ? next : NULL);
    json_decref(page.items);
    const char *const headers[] = {"Link", link, NULL};
    tg_respond_json_headers(req, 200, body, headers);
    free(link);
}

/* ---- JSON lines, streamed ---- */

typedef struct audit_stream {
    tg_catalog *catalog;
    audit_query q;
    uint64_t sent;   /* records written so far */
    char *text;      /* the current page's lines */
    size_t len, off; /* its length and what of it was sent */
    bool last_page;  /* the catalog had no more */
    bool failed;
    tg_cat_status status; /* the last page's */
    st_buffer lines;
    unsigned in_page;
} audit_stream;

static void add_line(void *ctx, const tg_audit_record *r)
{
    audit_stream *s = ctx;
    s->in_page++;
    s->q.filter.after_seq = r->seq;
    if (s->q.limit > 0 && s->sent + s->in_page > s->q.limit)
        return;
    json_t *item = tg_audit_record_json(r);
    char *line = item ? json_dumps(item, JSON_COMPACT) : NULL;
    json_decref(item);
    if (line == NULL || !st_buffer_printf(&s->lines, "%s\n", line))
        s->failed = true;
    free(line);
}

/* The next page of lines into s->text: false when the catalog failed. */
static bool next_page(audit_stream *s)
{
    free(s->text);
    s->text = NULL;
    s->len = s->off = 0;
    s->in_page = 0;
    st_buffer_init(&s->lines, (size_t)AUDIT_STREAM_PAGE * 4096);
    tg_cat_status status =
        tg_catalog_audit_list(s->catalog, &s->q.filter, AUDIT_STREAM_PAGE, add_line, s);
    s->text = st_buffer_take(&s->lines, &s->len);
    s->status = status;
    if (status != TG_CAT_OK || s->failed || s->text == NULL)
        return false;
    unsigned written = s->in_page;
    if (s->q.limit > 0 && s->sent + written > s->q.limit)
        written = (unsigned)(s->q.limit - s->sent);
    s->sent += written;
    s->last_page = s->in_page < AUDIT_STREAM_PAGE || (s->q.limit > 0 && s->sent >= s->q.limit);
    return true;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    audit_stream *s = cls;
    while (s->off == s->len) {
        if (s->last_page)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (!next_page(s))
            return MHD_CONTENT_READER_END_WITH_ERROR; /* the client sees a cut answer */
    }
    size_t n = s->len - s->off < max ? s->len - s->off : max;
    memcpy(buf, s->text + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    audit_stream *s = cls;
    free(s->text);
    free(s);
}

static void respond_stream(tg_request *req, const audit_query *q)
{
    audit_stream *s = calloc(1, sizeof *s);
    if (s == NULL) {
        tg_respond_internal(req, "out of memory");
        return;
    }
    s->catalog = req->server->catalog;
    s->q = *q;
    /* the strings moved with the struct: point the filter at the copies */
    tg_audit_filter *f = &s->q.filter;
    f->since = q->filter.since ? s->q.since : NULL;
    f->until = q->filter.until ? s->q.until : NULL;
    f->namespace_name = q->filter.namespace_name ? s->q.namespace_name : NULL;
    f->action = q->filter.action ? s->q.action : NULL;
    f->resource_prefix = q->filter.resource_prefix ? s->q.resource : NULL;
    /* the first page now: a catalog down is a 503, not a cut 200 */
    if (!next_page(s)) {
        tg_cat_status status = s->status;
        stream_free(s);
        if (status != TG_CAT_OK)
            tg_respond_catalog_failure(req, status);
        else
            tg_respond_internal(req, "out of memory listing the audit log");
        return;
    }
    struct MHD_Response *response =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, stream_read, s, stream_free);
    if (response == NULL) {
        stream_free(s);
        tg_respond_internal(req, "out of memory");
        return;
    }
    MHD_add_response_header(response, "Content-Type", "application/x-ndjson");
    tg_respond(req, 200, response, 0);
}

void tg_route_audit_list(tg_request *req)
{
    audit_query q;
    if (!parse_query(req, &q))
        return;
    if (q.jsonl)
        respond_stream(req, &q);
    else
        respond_page(req, &q);
}
