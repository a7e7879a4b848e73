/* Rejection records a security team can use (issue 23 §4), over real HTTP: refused
 * uploads (a pickle, Python code, a broken safetensors header, a body past
 * --max-body by its declared length, a large body refused at its head and drained)
 * are recorded with the SHA-256 and size of the refused bytes (checked against
 * sha256sum), the namespace, the sending token's id (from `tensorgate token list`),
 * the route pattern and the client's address; GET /v1/rejections filters them
 * (reason, namespace, since/until, sha256), pages them with an opaque cursor and a
 * Link header (no duplicate, no gap, newest first), exports them as JSON lines
 * (checked line by line with python3's json module too), answers each bad filter
 * with its own 400 reason, and keeps a namespace's admin to its namespace. Run on
 * SQLite by tests/integration/run.sh and on PostgreSQL by tests/scale/pg-suite.sh. */
#include "harness.h"

#define MAX_BODY (8u * 1024 * 1024)
#define VBASE "/v1/models/sec/m/versions/1"
#define UPLOAD_ROUTE "PUT /v1/models/{org}/{name}/versions/{rev}/files/{path*}"
#define BULK 130 /* refusals made for the paging tests: more than one export page */

static const char *write_token; /* write, limited to "sec" */
static long long write_token_id;
static const char *admin_token;
static const char *admin_sec;   /* admin, limited to "sec" */
static const char *admin_other; /* admin, limited to "other" */
static const char *read_token;

/* The newest token's id in `tensorgate token list` (ids grow). */
static long long newest_token_id(void)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' token list --data '%s'", it_binary, it_srv.data);
    FILE *p = popen(cmd, "r");
    long long newest = -1;
    char line[512];
    while (p != NULL && fgets(line, sizeof line, p) != NULL) {
        long long id;
        if (sscanf(line, "%lld\t", &id) == 1 && id > newest)
            newest = id;
    }
    if (p != NULL)
        pclose(p);
    return newest;
}

/* sha256sum's digest of data (written to a file of the test's directory). */
static void sha256sum_of(const void *data, size_t len, char out[65])
{
    char path[400], cmd[600];
    snprintf(path, sizeof path, "%s/body.bin", it_root_dir);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    CHECK_EQ_U64(fwrite(data, 1, len, f), len);
    fclose(f);
    snprintf(cmd, sizeof cmd, "sha256sum '%s'", path);
    FILE *p = popen(cmd, "r");
    out[0] = '\0';
    if (p != NULL) {
        if (fscanf(p, "%64s", out) != 1)
            out[0] = '\0';
        pclose(p);
    }
    CHECK_EQ_U64(strlen(out), 64);
}

/* The one record whose sha256 is hex (GET /v1/rejections?sha256=), with its
 * namespace filter too; NULL (a failed check) unless exactly one. Free with
 * json_decref. */
static json_t *record_of(const char *hex)
{
    char url[256];
    snprintf(url, sizeof url, "/v1/rejections?namespace=sec&sha256=%s", hex);
    it_response r = it_request("GET", url, &(it_request_opts){.token = admin_token});
    CHECK_STATUS(r, 200);
    json_t *list = json_object_get(r.json, "rejections");
    CHECK_EQ_U64(json_array_size(list), 1);
    json_t *one = json_array_size(list) == 1 ? json_incref(json_array_get(list, 0)) : NULL;
    it_response_free(&r);
    return one;
}

/* The newest record of path (namespace sec); NULL when none. */
static json_t *newest_of_path(const char *path)
{
    it_response r = it_request("GET", "/v1/rejections?namespace=sec&limit=50",
                               &(it_request_opts){.token = admin_token});
    json_t *list = json_object_get(r.json, "rejections"), *found = NULL;
    for (size_t i = 0; i < json_array_size(list) && found == NULL; i++) {
        json_t *e = json_array_get(list, i);
        const char *p = json_string_value(json_object_get(e, "path"));
        if (p != NULL && strcmp(p, path) == 0)
            found = json_incref(e);
    }
    it_response_free(&r);
    return found;
}

/* Uploads body to path with the write token, expects status/reason (NULL: any), and checks the
 * record: sha256 (ours and sha256sum's), size, namespace, token, route, client. */
static void refused_upload_recorded(const char *path, const void *body, size_t len, long status,
                                    const char *reason)
{
    char url[256];
    snprintf(url, sizeof url, VBASE "/files/%s", path);
    it_response r = it_send("PUT", url, write_token, body, len);
    char got[48];
    snprintf(got, sizeof got, "%s", it_reason(&r) ? it_reason(&r) : "");
    if (reason != NULL)
        CHECK_PROBLEM(r, status, reason);
    CHECK_STATUS(r, status);
    reason = got; /* NULL: whichever the answer names, the record names too */
    it_response_free(&r);
    char ours[65], theirs[65];
    it_sha256_hex(body, len, ours);
    sha256sum_of(body, len, theirs);
    CHECK_STR(ours, theirs);
    json_t *e = record_of(theirs);
    if (e == NULL) {
        fprintf(stderr, "  no record of %s (%s)\n", path, theirs);
        return;
    }
    CHECK_STR(json_string_value(json_object_get(e, "sha256")), theirs);
    CHECK_EQ_U64(it_json_int(e, "size"), len);
    CHECK_STR(json_string_value(json_object_get(e, "reason")), reason);
    CHECK_STR(json_string_value(json_object_get(e, "namespace")), "sec");
    CHECK_STR(json_string_value(json_object_get(e, "model")), "sec/m");
    CHECK_STR(json_string_value(json_object_get(e, "path")), path);
    CHECK_EQ_U64(it_json_int(e, "token_id"), write_token_id);
    CHECK_STR(json_string_value(json_object_get(e, "route")), UPLOAD_ROUTE);
    CHECK_STR(json_string_value(json_object_get(e, "client")), "127.0.0.1");
    CHECK(json_is_null(json_object_get(e, "job_id")));
    json_decref(e);
}

TEST(refusals_carry_what_whose_and_how)
{
    /* a pickle with what it would call */
    refused_upload_recorded("evil.bin", it_pickle_posix_system, sizeof it_pickle_posix_system, 415,
                            "refused_format");
    /* Python code, refused by its name */
    static const char code[] = "import os\nos.system('id')\n";
    refused_upload_recorded("modeling_evil.py", code, strlen(code), 422, "code_python");
    /* a safetensors header that is not JSON */
    it_buf bad = {0};
    it_build_raw_safetensors(&bad, "{\"w\": [1, 2", 0);
    refused_upload_recorded("bad.safetensors", bad.data, bad.len, 422, NULL);
    it_buf_free(&bad);

    /* 6 MiB refused at its first bytes (no known format): the rest is drained and
     * hashed (past the pipeline's 4 MiB, on its hashing thread), so the record has
     * the whole body's digest */
    it_buf big = {0};
    static const unsigned char huge_n[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00};
    it_buf_append(&big, huge_n, sizeof huge_n);
    unsigned char block[4096];
    for (size_t i = 0; i < sizeof block; i++)
        block[i] = (unsigned char)(i * 31 + 7);
    while (big.len < 6u * 1024 * 1024)
        it_buf_append(&big, block, sizeof block);
    refused_upload_recorded("big.safetensors", big.data, big.len, 415, "refused_format");
    it_buf_free(&big);
}

/* Refused at the headers by its declared length: the declared size, no digest. */
TEST(too_large_has_declared_size_and_no_digest)
{
    size_t len = MAX_BODY + 1;
    char *body = calloc(1, len);
    CHECK(body != NULL);
    if (body == NULL)
        return;
    it_request_opts o = {.token = write_token,
                         .body = body,
                         .body_len = len,
                         .has_body = true,
                         .expect_continue = true};
    it_response r = it_request("PUT", VBASE "/files/huge.safetensors", &o);
    CHECK_PROBLEM(r, 413, "payload_too_large");
    it_response_free(&r);
    free(body);
    json_t *e = newest_of_path("huge.safetensors");
    CHECK(e != NULL);
    if (e == NULL)
        return;
    CHECK_STR(json_string_value(json_object_get(e, "reason")), "payload_too_large");
    CHECK_EQ_U64(it_json_int(e, "size"), len);
    CHECK(json_is_null(json_object_get(e, "sha256")));
    CHECK_EQ_U64(it_json_int(e, "token_id"), write_token_id);
    CHECK_STR(json_string_value(json_object_get(e, "route")), UPLOAD_ROUTE);
    json_decref(e);
}

/* ---- paging, filters, export ---- */

/* Makes BULK small refusals (distinct bodies) in sec, under reason refused_format. */
static void make_bulk(void)
{
    for (int i = 0; i < BULK; i++) {
        char body[64], url[128];
        int n = snprintf(body, sizeof body, "\x80\x02N.bulk %d", i); /* a pickle: NONE STOP */
        snprintf(url, sizeof url, VBASE "/files/bulk-%d.bin", i);
        it_response r = it_send("PUT", url, write_token, body, (size_t)n);
        if (r.status != 415)
            fprintf(stderr, "  bulk %d: %ld %s\n", i, r.status, it_reason(&r) ? it_reason(&r) : "");
        CHECK_STATUS(r, 415);
        it_response_free(&r);
    }
}

/* The ids of one whole listing (limit 1000) of query. */
static size_t ids_at_once(const char *query, long long *ids, size_t cap)
{
    char url[512];
    snprintf(url, sizeof url, "/v1/rejections?limit=1000%s", query);
    it_response r = it_request("GET", url, &(it_request_opts){.token = admin_token});
    CHECK_STATUS(r, 200);
    json_t *list = json_object_get(r.json, "rejections");
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(list) && n < cap; i++)
        ids[n++] = it_json_int(json_array_get(list, i), "id");
    CHECK(json_is_null(json_object_get(r.json, "next_cursor")));
    it_response_free(&r);
    return n;
}

TEST(pages_follow_the_cursor_and_the_link)
{
    static long long all[1000], paged[1000];
    size_t total = ids_at_once("&namespace=sec&reason=refused_format", all, 1000);
    CHECK(total >= BULK);
    for (size_t i = 1; i < total; i++)
        CHECK(all[i] < all[i - 1]); /* newest first */
    /* limit 7: by next_cursor */
    size_t n = 0;
    char url[1024] = "/v1/rejections?namespace=sec&reason=refused_format&limit=7";
    int pages = 0;
    while (pages++ < 100) {
        it_response r = it_request("GET", url, &(it_request_opts){.token = admin_token});
        CHECK_STATUS(r, 200);
        json_t *list = json_object_get(r.json, "rejections");
        CHECK(json_array_size(list) <= 7);
        for (size_t i = 0; i < json_array_size(list) && n < 1000; i++)
            paged[n++] = it_json_int(json_array_get(list, i), "id");
        const char *next = json_string_value(json_object_get(r.json, "next_cursor"));
        char link[1024];
        const char *h = it_header(&r, "Link", link, sizeof link);
        CHECK((next == NULL) == (h == NULL));
        if (next == NULL) {
            it_response_free(&r);
            break;
        }
        CHECK_EQ_U64(json_array_size(list), 7);
        /* the Link is absolute, names the next page and keeps the filters */
        CHECK(h != NULL && strncmp(h, "<http://", 8) == 0 && strstr(h, "rel=\"next\"") != NULL);
        CHECK(h != NULL && strstr(h, next) != NULL && strstr(h, "reason=refused_format") != NULL &&
              strstr(h, "namespace=sec") != NULL);
        snprintf(url, sizeof url,
                 "/v1/rejections?namespace=sec&reason=refused_format&limit=7&cursor=%s", next);
        it_response_free(&r);
    }
    CHECK_EQ_U64(n, total);
    bool same = n == total;
    for (size_t i = 0; same && i < n; i++)
        same = paged[i] == all[i];
    CHECK(same); /* no duplicate, no gap, the same order */

    /* following the Link header itself, page by page, gives the same */
    n = 0;
    char next_url[1024] = "";
    snprintf(url, sizeof url, "%s/v1/rejections?namespace=sec&reason=refused_format&limit=50",
             it_srv.base);
    for (int i = 0; i < 100 && url[0] != '\0'; i++) {
        it_response r =
            it_request("GET", url + strlen(it_srv.base), &(it_request_opts){.token = admin_token});
        json_t *list = json_object_get(r.json, "rejections");
        for (size_t j = 0; j < json_array_size(list) && n < 1000; j++)
            paged[n++] = it_json_int(json_array_get(list, j), "id");
        char link[1024];
        const char *h = it_header(&r, "Link", link, sizeof link);
        next_url[0] = '\0';
        if (h != NULL && h[0] == '<' && strchr(h, '>') != NULL)
            snprintf(next_url, sizeof next_url, "%.*s", (int)(strchr(h, '>') - h - 1), h + 1);
        snprintf(url, sizeof url, "%s", next_url);
        CHECK(url[0] == '\0' || strncmp(url, it_srv.base, strlen(it_srv.base)) == 0);
        it_response_free(&r);
    }
    CHECK_EQ_U64(n, total);
    same = n == total;
    for (size_t i = 0; same && i < n; i++)
        same = paged[i] == all[i];
    CHECK(same);
}

TEST(filters_keep_what_they_name)
{
    static long long ids[1000];
    /* reason */
    size_t code = ids_at_once("&reason=code_python", ids, 1000);
    CHECK_EQ_U64(code, 1);
    CHECK_EQ_U64(ids_at_once("&reason=no_such_reason", ids, 1000), 0);
    /* namespace: nothing of sec under other */
    CHECK_EQ_U64(ids_at_once("&namespace=other", ids, 1000), 0);
    /* times: all of them since 2000, none since tomorrow, none until 2000 */
    size_t sec = ids_at_once("&namespace=sec", ids, 1000);
    CHECK_EQ_U64(ids_at_once("&namespace=sec&since=2000-01-01T00:00:00Z", ids, 1000), sec);
    CHECK_EQ_U64(ids_at_once("&namespace=sec&since=2000-01-01T01:00:00%2B01:00", ids, 1000), sec);
    CHECK_EQ_U64(ids_at_once("&namespace=sec&until=2000-01-01T00:00:00Z", ids, 1000), 0);
    time_t tomorrow = time(NULL) + 86400;
    struct tm tm;
    gmtime_r(&tomorrow, &tm);
    char q[128], when[32];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(q, sizeof q, "&namespace=sec&since=%s", when);
    CHECK_EQ_U64(ids_at_once(q, ids, 1000), 0);
    snprintf(q, sizeof q, "&namespace=sec&until=%s", when);
    CHECK_EQ_U64(ids_at_once(q, ids, 1000), sec);
    /* sha256, either case */
    char hex[65];
    it_sha256_hex(it_pickle_posix_system, sizeof it_pickle_posix_system, hex);
    for (char *c = hex; *c; c++)
        if (*c >= 'a' && *c <= 'f')
            *c = (char)(*c - 'a' + 'A');
    snprintf(q, sizeof q, "&sha256=%s", hex);
    CHECK_EQ_U64(ids_at_once(q, ids, 1000), 1);
}

/* Reads a JSON-lines body: the ids in order; every line one object ending in \n. */
static size_t jsonl_ids(const it_response *r, long long *ids, size_t cap)
{
    size_t n = 0;
    const char *p = r->body.data ? (const char *)r->body.data : "";
    const char *end = p + r->body.len;
    CHECK(r->body.len == 0 || end[-1] == '\n');
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL)
            break;
        json_error_t err;
        json_t *o = json_loadb(p, (size_t)(nl - p), 0, &err);
        CHECK(json_is_object(o));
        if (o != NULL && n < cap)
            ids[n++] = it_json_int(o, "id");
        json_decref(o);
        p = nl + 1;
    }
    return n;
}

TEST(jsonl_export_streams_every_record)
{
    static long long all[1000], lines[1000];
    size_t total = ids_at_once("&namespace=sec", all, 1000);
    CHECK(total > BULK);
    /* ?format=jsonl: every record, past the export's page of the catalog */
    it_response r = it_request("GET", "/v1/rejections?namespace=sec&format=jsonl",
                               &(it_request_opts){.token = admin_token});
    CHECK_STATUS(r, 200);
    char type[128];
    CHECK_STR(it_header(&r, "Content-Type", type, sizeof type), "application/x-ndjson");
    size_t n = jsonl_ids(&r, lines, 1000);
    CHECK_EQ_U64(n, total);
    bool same = n == total;
    for (size_t i = 0; same && i < n; i++)
        same = lines[i] == all[i];
    CHECK(same);
    /* python3's json module reads the same lines */
    char path[400], cmd[700];
    snprintf(path, sizeof path, "%s/export.jsonl", it_root_dir);
    FILE *f = fopen(path, "wb");
    if (f != NULL) {
        fwrite(r.body.data, 1, r.body.len, f);
        fclose(f);
    }
    snprintf(
        cmd, sizeof cmd,
        "/usr/bin/python3 -c 'import json,sys; rs=[json.loads(l) for l in open(sys.argv[1])];"
        " assert all(r[\"namespace\"]==\"sec\" and len(r[\"sha256\"] or \"x\"*64)==64 for r in rs);"
        " print(len(rs))' '%s'",
        path);
    FILE *p = popen(cmd, "r");
    unsigned long counted = 0;
    if (p != NULL) {
        if (fscanf(p, "%lu", &counted) != 1)
            counted = 0;
        pclose(p);
    }
    CHECK_EQ_U64(counted, total);
    it_response_free(&r);

    /* Accept: application/x-ndjson, a limit and a cursor */
    static const char *const accept[] = {"Accept: application/x-ndjson", NULL};
    r = it_request("GET", "/v1/rejections?namespace=sec&limit=3",
                   &(it_request_opts){.token = admin_token, .headers = accept});
    CHECK_STATUS(r, 200);
    n = jsonl_ids(&r, lines, 1000);
    CHECK_EQ_U64(n, 3);
    CHECK(n == 3 && lines[0] == all[0] && lines[2] == all[2]);
    it_response_free(&r);
    /* ?format=json wins over Accept */
    r = it_request("GET", "/v1/rejections?namespace=sec&limit=3&format=json",
                   &(it_request_opts){.token = admin_token, .headers = accept});
    CHECK_STATUS(r, 200);
    CHECK(json_is_array(json_object_get(r.json, "rejections")));
    it_response_free(&r);
}

TEST(bad_filters_are_400_with_their_reason)
{
    static const struct {
        const char *query, *reason;
    } cases[] = {
        {"since=yesterday", "invalid_time"},
        {"until=2026-13-01T00:00:00Z", "invalid_time"},
        {"since=2026-05-01T00:00:00", "invalid_time"},
        {"since=2026-05-02T00:00:00Z&until=2026-05-01T00:00:00Z", "invalid_time"},
        {"sha256=abc", "invalid_sha256"},
        {"sha256=zz00000000000000000000000000000000000000000000000000000000000000",
         "invalid_sha256"},
        {"limit=0", "invalid_limit"},
        {"limit=1001", "invalid_limit"},
        {"limit=ten", "invalid_limit"},
        {"limit=-1", "invalid_limit"},
        {"cursor=!!!", "invalid_cursor"},
        {"cursor=YWJj", "invalid_cursor"}, /* base64url of "abc" */
        {"bogus=1", "unknown_parameter"},
        {"model=sec/m", "unknown_parameter"},
        {"reason=Bad-Reason", "invalid_filter"},
        {"namespace=..", "invalid_filter"},
        {"format=xml", "invalid_format"},
        {"reason=a&reason=b", "invalid_request"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char url[256];
        snprintf(url, sizeof url, "/v1/rejections?%s", cases[i].query);
        it_response r = it_request("GET", url, &(it_request_opts){.token = admin_token});
        CHECK_PROBLEM(r, 400, cases[i].reason);
        if (r.status != 400 || it_reason(&r) == NULL || strcmp(it_reason(&r), cases[i].reason))
            fprintf(stderr, "  %s -> %ld %s\n", url, r.status, it_reason(&r) ? it_reason(&r) : "");
        it_response_free(&r);
    }
}

TEST(who_may_read)
{
    it_response r = it_get("/v1/rejections");
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    r = it_request("GET", "/v1/rejections", &(it_request_opts){.token = read_token});
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_request("GET", "/v1/rejections", &(it_request_opts){.token = write_token});
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    /* other's admin: nothing of sec, whatever the filter; naming sec is 403 */
    r = it_request("GET", "/v1/rejections?limit=1000", &(it_request_opts){.token = admin_other});
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "rejections")), 0);
    CHECK(strstr(r.body.data ? (const char *)r.body.data : "", "sec/") == NULL);
    it_response_free(&r);
    r = it_request("GET", "/v1/rejections?format=jsonl", &(it_request_opts){.token = admin_other});
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(r.body.len, 0);
    it_response_free(&r);
    r = it_request("GET", "/v1/rejections?namespace=sec", &(it_request_opts){.token = admin_other});
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    /* sec's admin: sec's records, all of them */
    static long long all[1000];
    size_t sec = ids_at_once("&namespace=sec", all, 1000);
    r = it_request("GET", "/v1/rejections?limit=1000", &(it_request_opts){.token = admin_sec});
    CHECK_STATUS(r, 200);
    json_t *list = json_object_get(r.json, "rejections");
    CHECK_EQ_U64(json_array_size(list), sec);
    for (size_t i = 0; i < json_array_size(list); i++)
        CHECK_STR(json_string_value(json_object_get(json_array_get(list, i), "namespace")), "sec");
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    static const char *const flags[] = {"--max-body", "8388608", NULL};
    it_init(argc, argv, flags);
    admin_token = it_token("admin", NULL);
    read_token = it_token("read", NULL);
    admin_sec = it_token("admin", "sec");
    admin_other = it_token("admin", "other");
    write_token = it_token("write", "sec");
    write_token_id = newest_token_id();
    CHECK(write_token_id > 0);
    it_response r = it_send_json("POST", "/v1/models", admin_token, "{\"name\":\"sec/m\"}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send("POST", "/v1/models/sec/m/versions", admin_token, NULL, 0);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    RUN(refusals_carry_what_whose_and_how);
    RUN(too_large_has_declared_size_and_no_digest);
    make_bulk();
    RUN(pages_follow_the_cursor_and_the_link);
    RUN(filters_keep_what_they_name);
    RUN(jsonl_export_streams_every_record);
    RUN(bad_filters_are_400_with_their_reason);
    RUN(who_may_read);
    return it_finish(argv[0]);
}
