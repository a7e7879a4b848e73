/* server/routes/audit.c and the audit log's writer (server/core/audit.c), black-box:
 * a real server (--auth-read) through the integration harness, real HTTP, its real
 * SQLite catalog.
 * - a write is recorded with its fields: time, the token's id and namespace, the
 *   action (method + route pattern), the path, the status, no reason, the client's
 *   X-Request-Id (echoed in the answer), the client address, the user agent (a tab
 *   written as \x09, a long one cut at 256 bytes);
 * - refused writes (no token, another namespace's token, a read token) and a refused
 *   read are recorded with 401/403 and their reason; a Hub-dialect route and a job
 *   cancel are recorded; a successful read is not;
 * - a namespace-limited admin token, and no token, are refused on /v1/audit (and
 *   those refusals are recorded);
 * - filters (since, until, actor, namespace, action, resource prefix, status,
 *   outcome) keep what they should and refuse what is malformed (400);
 * - paging with limit and the opaque cursor (and Link rel="next") walks every record
 *   once; the JSON-lines export (?format=jsonl and Accept: application/x-ndjson) has
 *   every record, seq 1..N in order, each prev_hash the previous hash. */
#include "harness.h"

static const char *admin, *admin_acme, *read_any, *write_acme, *write_other;

/* GET path as admin; the records array (borrowed from r->json) or NULL. */
static json_t *records(it_response *r, const char *path)
{
    *r = it_request("GET", path, &(it_request_opts){.token = admin});
    CHECK_STATUS(*r, 200);
    json_t *items = r->json ? json_object_get(r->json, "records") : NULL;
    CHECK(json_is_array(items));
    return items;
}

/* The record whose request_id is id, as a new reference (NULL: none). */
static json_t *record_by_id(const char *id)
{
    it_response r;
    json_t *items = records(&r, "/v1/audit?limit=1000");
    json_t *found = NULL;
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item)
    {
        const char *rid = json_string_value(json_object_get(item, "request_id"));
        if (rid != NULL && strcmp(rid, id) == 0)
            found = json_incref(item);
    }
    it_response_free(&r);
    return found;
}

static size_t count(const char *path)
{
    it_response r;
    json_t *items = records(&r, path);
    size_t n = json_array_size(items);
    it_response_free(&r);
    return n;
}

/* Sends method path with a JSON body (or none), token, X-Request-Id: id; the status. */
static long send_with_id(const char *method, const char *path, const char *token, const char *json,
                         const char *id, const char *user_agent)
{
    char id_line[128], ua_line[600], echoed[128];
    snprintf(id_line, sizeof id_line, "X-Request-Id: %s", id);
    snprintf(ua_line, sizeof ua_line, "User-Agent: %s", user_agent ? user_agent : "audit-test");
    const char *headers[] = {id_line, ua_line, "Content-Type: application/json", NULL};
    it_response r = it_request(method, path,
                               &(it_request_opts){.token = token,
                                                  .headers = headers,
                                                  .body = json,
                                                  .body_len = json ? strlen(json) : 0,
                                                  .has_body = json != NULL});
    long status = r.status;
    bool read = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    if (!read || status == 401 || status == 403) { /* recorded: the id comes back */
        it_header(&r, "X-Request-Id", echoed, sizeof echoed);
        CHECK_STR(echoed, id);
    }
    it_response_free(&r);
    return status;
}

static long long seen_token_id; /* write_acme's id, from its first record */

TEST(a_write_is_recorded_with_its_fields)
{
    CHECK(send_with_id("POST", "/v1/models", write_acme, "{\"name\":\"acme/a\"}", "w-1",
                       "agent\tone") == 201);
    json_t *rec = record_by_id("w-1");
    CHECK(rec != NULL);
    if (rec == NULL)
        return;
    CHECK_STR(json_string_value(json_object_get(rec, "action")), "POST /v1/models");
    CHECK_STR(json_string_value(json_object_get(rec, "resource")), "/v1/models");
    CHECK(it_json_int(rec, "status") == 201);
    CHECK_STR(json_string_value(json_object_get(rec, "reason")), "");
    CHECK_STR(json_string_value(json_object_get(rec, "namespace")), "acme");
    CHECK(json_is_integer(json_object_get(rec, "token_id")));
    seen_token_id = it_json_int(rec, "token_id");
    CHECK(seen_token_id > 0);
    CHECK_STR(json_string_value(json_object_get(rec, "client")), "127.0.0.1");
    CHECK_STR(json_string_value(json_object_get(rec, "user_agent")), "agent\\x09one");
    const char *time = json_string_value(json_object_get(rec, "time"));
    CHECK(time != NULL && strlen(time) == 27 && time[26] == 'Z');
    CHECK(strlen(json_string_value(json_object_get(rec, "hash"))) == 64);
    json_decref(rec);

    /* the user agent is bounded */
    char long_agent[400];
    memset(long_agent, 'u', sizeof long_agent - 1);
    long_agent[sizeof long_agent - 1] = '\0';
    CHECK(send_with_id("POST", "/v1/models/acme/a/versions", write_acme, "{}", "w-2", long_agent) ==
          201);
    rec = record_by_id("w-2");
    CHECK(rec != NULL && strlen(json_string_value(json_object_get(rec, "user_agent"))) == 256);
    CHECK(rec != NULL && strcmp(json_string_value(json_object_get(rec, "resource")),
                                "/v1/models/acme/a/versions") == 0);
    json_decref(rec);
}

/* The record of id has status and reason, and the actor (token_id > 0 or NULL). */
static void check_refusal(const char *id, long status, const char *reason, bool anonymous,
                          const char *namespace_, const char *action)
{
    json_t *rec = record_by_id(id);
    CHECK(rec != NULL);
    if (rec == NULL) {
        fprintf(stderr, "  no record for %s\n", id);
        return;
    }
    CHECK(it_json_int(rec, "status") == status);
    CHECK_STR(json_string_value(json_object_get(rec, "reason")), reason);
    CHECK(anonymous == json_is_null(json_object_get(rec, "token_id")));
    CHECK_STR(json_string_value(json_object_get(rec, "namespace")), namespace_);
    CHECK_STR(json_string_value(json_object_get(rec, "action")), action);
    json_decref(rec);
}

TEST(refusals_are_recorded)
{
    CHECK(send_with_id("POST", "/v1/models", NULL, "{\"name\":\"acme/b\"}", "r-none", NULL) == 401);
    check_refusal("r-none", 401, "unauthorized", true, "", "POST /v1/models");
    CHECK(send_with_id("POST", "/v1/models", "tg_0000", "{\"name\":\"acme/b\"}", "r-bad", NULL) ==
          401);
    check_refusal("r-bad", 401, "unauthorized", true, "", "POST /v1/models");
    CHECK(send_with_id("POST", "/v1/models/acme/a/versions", write_other, "{}", "r-other", NULL) ==
          403);
    check_refusal("r-other", 403, "forbidden", false, "other",
                  "POST /v1/models/{org}/{name}/versions");
    CHECK(send_with_id("POST", "/v1/models/acme/a/versions", read_any, "{}", "r-read", NULL) ==
          403);
    check_refusal("r-read", 403, "forbidden", false, "", "POST /v1/models/{org}/{name}/versions");
    /* a refused read (--auth-read) */
    CHECK(send_with_id("GET", "/v1/models/acme/a", NULL, NULL, "r-get", NULL) == 401);
    check_refusal("r-get", 401, "unauthorized", true, "", "GET /v1/models/{org}/{name}");
    /* a write that fails for another cause is recorded too: a job cancel of no job */
    CHECK(send_with_id("DELETE", "/v1/jobs/999999", write_acme, NULL, "r-job", NULL) == 404);
    json_t *rec = record_by_id("r-job");
    CHECK(rec != NULL &&
          strcmp(json_string_value(json_object_get(rec, "action")), "DELETE /v1/jobs/{id}") == 0);
    CHECK(rec != NULL &&
          strcmp(json_string_value(json_object_get(rec, "resource")), "/v1/jobs/999999") == 0);
    json_decref(rec);
    /* a Hub-compatible route answered with the Hub's dialect */
    long hub =
        send_with_id("POST", "/api/models/acme/a/paths-info/main", NULL, "{}", "r-hub", NULL);
    CHECK(hub == 401);
    check_refusal("r-hub", 401, "unauthorized", true, "",
                  "POST /api/models/{org}/{name}/paths-info/{rev}");
    /* /v1/audit itself: a namespace-limited admin, and no token */
    CHECK(send_with_id("GET", "/v1/audit", admin_acme, NULL, "r-audit-ns", NULL) == 403);
    check_refusal("r-audit-ns", 403, "forbidden", false, "acme", "GET /v1/audit");
    CHECK(send_with_id("GET", "/v1/audit", NULL, NULL, "r-audit-none", NULL) == 401);
    check_refusal("r-audit-none", 401, "unauthorized", true, "", "GET /v1/audit");
}

/* Hostile text in the path is kept as valid UTF-8 and bounded; an upload the gate
 * refuses (answered from inside its body) is recorded with the gate's reason. */
TEST(hostile_paths_and_refused_uploads)
{
    CHECK(send_with_id("POST", "/v1/models/acme/a%ff%0a/versions", write_acme, "{}", "h-1", NULL) >=
          400);
    json_t *rec = record_by_id("h-1");
    CHECK(rec != NULL);
    const char *res = rec ? json_string_value(json_object_get(rec, "resource")) : NULL;
    CHECK(res != NULL && strcmp(res, "/v1/models/acme/a\\xff\\x0a/versions") == 0);
    json_decref(rec);

    /* 8 segments of 100 e-acutes: 1600 bytes decoded, in few segments */
    char path[8000];
    int n = snprintf(path, sizeof path, "/v1/models/acme/a/versions/1/files/");
    for (int seg = 0; seg < 8; seg++) {
        n += snprintf(path + n, sizeof path - (size_t)n, "d");
        for (int k = 0; k < 100; k++)
            n += snprintf(path + n, sizeof path - (size_t)n, "%%C3%%A9");
        n += snprintf(path + n, sizeof path - (size_t)n, "/");
    }
    snprintf(path + n, sizeof path - (size_t)n, "x.json");
    CHECK(send_with_id("DELETE", path, write_acme, NULL, "h-2", NULL) >= 400);
    rec = record_by_id("h-2");
    CHECK(rec != NULL);
    res = rec ? json_string_value(json_object_get(rec, "resource")) : NULL;
    /* cut at 1024 bytes, never inside the two bytes of an e-acute */
    CHECK(res != NULL && strlen(res) <= 1024 && strlen(res) >= 1020);
    CHECK(res != NULL && ((unsigned char)res[strlen(res) - 1] != 0xc3));
    json_decref(rec);

    const char *garbage = "this is not a safetensors file at all, not even close";
    char id_line[] = "X-Request-Id: h-3";
    const char *headers[] = {id_line, NULL};
    it_response r = it_request("PUT", "/v1/models/acme/a/versions/1/files/w.safetensors",
                               &(it_request_opts){.token = write_acme,
                                                  .headers = headers,
                                                  .body = garbage,
                                                  .body_len = strlen(garbage),
                                                  .has_body = true});
    CHECK(r.status == 415 || r.status == 422);
    long refused = r.status;
    char reason[64];
    snprintf(reason, sizeof reason, "%s", it_reason(&r) ? it_reason(&r) : "");
    it_response_free(&r);
    rec = record_by_id("h-3");
    CHECK(rec != NULL && it_json_int(rec, "status") == refused);
    CHECK(rec != NULL && reason[0] != '\0' &&
          strcmp(json_string_value(json_object_get(rec, "reason")), reason) == 0);
    CHECK(rec != NULL && strcmp(json_string_value(json_object_get(rec, "action")),
                                "PUT /v1/models/{org}/{name}/versions/{rev}/files/{path*}") == 0);
    json_decref(rec);
}

TEST(a_successful_read_is_not_recorded)
{
    size_t before = count("/v1/audit?limit=1000");
    CHECK(send_with_id("GET", "/v1/models/acme/a", read_any, NULL, "ok-read", NULL) == 200);
    CHECK(send_with_id("HEAD", "/v1/models/acme/a", read_any, NULL, "ok-head", NULL) == 200);
    CHECK_EQ_U64(count("/v1/audit?limit=1000"), before);
    json_t *rec = record_by_id("ok-read");
    CHECK(rec == NULL);
    json_decref(rec);
}

TEST(filters)
{
    size_t all = count("/v1/audit?limit=1000");
    CHECK(all >= 10);
    char path[256];
    snprintf(path, sizeof path, "/v1/audit?limit=1000&actor=%lld", seen_token_id);
    size_t mine = count(path);
    CHECK(mine >= 3 && mine < all); /* w-1, w-2, r-job */
    size_t anonymous = count("/v1/audit?limit=1000&actor=anonymous");
    CHECK(anonymous >= 5);
    CHECK_EQ_U64(count("/v1/audit?limit=1000&namespace=other"), 1);
    CHECK(count("/v1/audit?limit=1000&action=POST%20%2Fv1%2Fmodels") >= 3);
    CHECK(count("/v1/audit?limit=1000&resource=%2Fv1%2Fmodels%2Facme%2F") >= 4);
    CHECK_EQ_U64(count("/v1/audit?limit=1000&resource=%2Fv1%2Fjobs%2F"), 1);
    size_t refused = count("/v1/audit?limit=1000&outcome=refused");
    CHECK_EQ_U64(count("/v1/audit?limit=1000&status=401") +
                     count("/v1/audit?limit=1000&status=403"),
                 refused);
    CHECK_EQ_U64(count("/v1/audit?limit=1000&outcome=success") +
                     count("/v1/audit?limit=1000&outcome=failure"),
                 all);
    CHECK_EQ_U64(count("/v1/audit?limit=1000&since=2000-01-01T00:00:00Z"), all);
    CHECK_EQ_U64(count("/v1/audit?limit=1000&until=2000-01-01T01:00:00%2B01:00"), 0);
    CHECK_EQ_U64(count("/v1/audit?limit=1000&since=2999-01-01T00:00:00.5Z"), 0);
    static const char *const bad[] = {
        "/v1/audit?since=yesterday", "/v1/audit?until=2026-13-01T00:00:00Z",
        "/v1/audit?actor=0",         "/v1/audit?actor=-1",
        "/v1/audit?status=42",       "/v1/audit?outcome=maybe",
        "/v1/audit?limit=0",         "/v1/audit?limit=1001",
        "/v1/audit?cursor=%21%21",   "/v1/audit?format=xml",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        it_response r = it_request("GET", bad[i], &(it_request_opts){.token = admin});
        CHECK_PROBLEM(r, 400, "invalid_request");
        it_response_free(&r);
    }
}

TEST(paging_walks_every_record_once)
{
    size_t all = count("/v1/audit?limit=1000");
    long long expect = 1;
    char path[512] = "/v1/audit?limit=3";
    int pages = 0;
    for (;;) {
        it_response r;
        json_t *items = records(&r, path);
        size_t i;
        json_t *item;
        json_array_foreach(items, i, item)
        {
            CHECK(it_json_int(item, "seq") == expect);
            expect++;
        }
        pages++;
        const char *next = json_string_value(json_object_get(r.json, "next_cursor"));
        char link[600];
        it_header(&r, "Link", link, sizeof link);
        if (next == NULL) {
            CHECK_STR(link, "");
            it_response_free(&r);
            break;
        }
        CHECK(strstr(link, "rel=\"next\"") != NULL && strstr(link, "limit=3") != NULL &&
              strstr(link, next) != NULL);
        snprintf(path, sizeof path, "/v1/audit?limit=3&cursor=%s", next);
        it_response_free(&r);
        if (pages > 1000)
            break;
    }
    CHECK_EQ_U64((uint64_t)(expect - 1), all);
    CHECK(pages >= 3);
}

/* The JSON-lines body: every line a record, seq 1..N, chained by prev_hash. */
static void check_jsonl(const it_response *r, size_t all)
{
    char type[128];
    it_header(r, "Content-Type", type, sizeof type);
    CHECK_STR(type, "application/x-ndjson");
    const char *p = r->body.data ? (const char *)r->body.data : "";
    size_t lines = 0;
    char prev[65] = "0000000000000000000000000000000000000000000000000000000000000000";
    while (*p != '\0') {
        const char *eol = strchr(p, '\n');
        CHECK(eol != NULL);
        if (eol == NULL)
            break;
        json_t *rec = json_loadb(p, (size_t)(eol - p), 0, NULL);
        CHECK(rec != NULL);
        lines++;
        CHECK(it_json_int(rec, "seq") == (long long)lines);
        CHECK_STR(json_string_value(json_object_get(rec, "prev_hash")), prev);
        snprintf(prev, sizeof prev, "%s", json_string_value(json_object_get(rec, "hash")));
        json_decref(rec);
        p = eol + 1;
    }
    CHECK_EQ_U64(lines, all);
}

TEST(jsonl_export)
{
    size_t all = count("/v1/audit?limit=1000");
    it_response r = it_request("GET", "/v1/audit?format=jsonl", &(it_request_opts){.token = admin});
    CHECK_STATUS(r, 200);
    check_jsonl(&r, all);
    it_response_free(&r);
    const char *accept[] = {"Accept: application/x-ndjson", NULL};
    r = it_request("GET", "/v1/audit", &(it_request_opts){.token = admin, .headers = accept});
    CHECK_STATUS(r, 200);
    check_jsonl(&r, all);
    it_response_free(&r);
    /* a limit bounds the export */
    r = it_request("GET", "/v1/audit?format=jsonl&limit=2", &(it_request_opts){.token = admin});
    CHECK_STATUS(r, 200);
    check_jsonl(&r, 2);
    it_response_free(&r);
}

TEST(metrics_count_records)
{
    it_response r = it_get("/metrics");
    CHECK_STATUS(r, 200);
    const char *text = r.body.data ? (const char *)r.body.data : "";
    CHECK(strstr(text, "tensorgate_audit_records_total ") != NULL);
    CHECK(strstr(text, "tensorgate_audit_failures_total 0\n") != NULL);
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    static const char *const flags[] = {"--auth-read", NULL};
    it_init(argc, argv, flags);
    admin = it_token("admin", NULL);
    admin_acme = it_token("admin", "acme");
    read_any = it_token("read", NULL);
    write_acme = it_token("write", "acme");
    write_other = it_token("write", "other");
    RUN(a_write_is_recorded_with_its_fields);
    RUN(refusals_are_recorded);
    RUN(hostile_paths_and_refused_uploads);
    RUN(a_successful_read_is_not_recorded);
    RUN(filters);
    RUN(paging_walks_every_record_once);
    RUN(jsonl_export);
    RUN(metrics_count_records);
    return it_finish(argv[0]);
}
