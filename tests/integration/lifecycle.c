/* The life of a version and the storage quota (docs/MANUAL.md, "The life of a
 * version", "Storage quotas"), over real HTTP against the real server (SQLite here;
 * tests/scale/pg-suite.sh runs it again on the PostgreSQL catalog):
 *  - deprecation: marked in every listing (/v1 version, model, Hub refs and info),
 *    still readable by number and digest, skipped by latest and the Hub's main;
 *    undeprecate; a version.deprecated webhook event;
 *  - deleting a published version (admin only): its number, digest and commit id
 *    answer 410 version_deleted on /v1 and the Hub routes, its aliases go, its
 *    number is never given again, gc reclaims its own blob and keeps the one another
 *    version shares; a version.deleted event;
 *  - deleting a draft (write) and an alias (latest refused);
 *  - the quota: set by an admin of the org only, shown in GET /v1/namespaces/{org},
 *    an upload past it refused before its body (known length) or mid-stream
 *    (chunked), nothing left behind, and another namespace unaffected;
 *  - a read token, another namespace's token and no token are refused. */
#include "harness.h"
#include "test.h"

#include <sys/wait.h>

static const char *admin_acme, *admin_other, *write_acme, *write_other, *read_any;

static int gc_run(const char *args, it_buf *out)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' gc %s --data '%s' 2>&1", it_binary, args, it_srv.data);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    char line[512];
    while (fgets(line, sizeof line, p) != NULL)
        if (out != NULL)
            it_buf_append(out, line, strlen(line));
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static it_response put_text(const char *model, int version, const char *path, const char *token,
                            const char *text, bool chunked)
{
    char url[256];
    snprintf(url, sizeof url, "/v1/models/%s/versions/%d/files/%s", model, version, path);
    return it_request("PUT", url,
                      &(it_request_opts){.token = token,
                                         .body = text,
                                         .body_len = strlen(text),
                                         .has_body = true,
                                         .chunked = chunked});
}

static int new_version(const char *model, const char *const *paths, const char *const *texts,
                       int count, bool publish)
{
    int v = it_make_version(write_acme, model, NULL, NULL, false);
    CHECK(v > 0);
    for (int i = 0; i < count; i++) {
        it_response r = put_text(model, v, paths[i], write_acme, texts[i], false);
        CHECK_STATUS(r, 201);
        it_response_free(&r);
    }
    if (publish) {
        char url[256];
        snprintf(url, sizeof url, "/v1/models/%s/versions/%d/publish", model, v);
        it_response r = it_send("POST", url, write_acme, NULL, 0);
        CHECK_STATUS(r, 200);
        it_response_free(&r);
    }
    return v;
}

static char *digest_of(const char *model, int v)
{
    char url[256];
    snprintf(url, sizeof url, "/v1/models/%s/versions/%d", model, v);
    it_response r = it_get(url);
    const char *d = it_json_str(&r, "digest");
    char *out = strdup(d ? d : "");
    it_response_free(&r);
    return out;
}

static long long latest_number(const char *model)
{
    char url[256];
    snprintf(url, sizeof url, "/v1/models/%s/versions/latest", model);
    it_response r = it_get(url);
    long long n = r.status == 200 ? it_json_int(r.json, "version") : -r.status;
    it_response_free(&r);
    return n;
}

static const char *shared_text = "shared between versions one and two\n";
static const char *own_text = "only version one holds this\n";
static const char *second_text = "only version two holds this\n";

static char hook_id[32];

/* a subscription of acme to the two lifecycle events (its target refuses: only the
 * deliveries' existence and types are looked at) */
TEST(subscribe)
{
    it_response r = it_send_json("POST", "/v1/namespaces/acme/webhooks", admin_acme,
                                 "{\"url\":\"http://127.0.0.1:9/hook\",\"events\":"
                                 "[\"version.deprecated\",\"version.deleted\"]}");
    CHECK_STATUS(r, 201);
    long long id = it_json_int(r.json, "id");
    snprintf(hook_id, sizeof hook_id, "%lld", id);
    it_response_free(&r);
}

static bool has_delivery(const char *type)
{
    char url[128];
    snprintf(url, sizeof url, "/v1/namespaces/acme/webhooks/%s/deliveries", hook_id);
    it_response r = it_request("GET", url, &(it_request_opts){.token = admin_acme});
    bool found = false;
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(r.json, "deliveries"), i, d)
    {
        const char *t = json_string_value(json_object_get(d, "type"));
        if (t != NULL && strcmp(t, type) == 0)
            found = true;
    }
    it_response_free(&r);
    return found;
}

TEST(deprecate_and_undeprecate)
{
    const char *p1[] = {"shared.txt", "own.txt"}, *t1[] = {shared_text, own_text};
    const char *p2[] = {"shared.txt", "second.txt"}, *t2[] = {shared_text, second_text};
    CHECK(new_version("acme/life", p1, t1, 2, true) == 1);
    CHECK(new_version("acme/life", p2, t2, 2, true) == 2);
    CHECK(latest_number("acme/life") == 2);
    const char *path = "/v1/models/acme/life/versions/2/deprecation";
    /* who may: a write token of acme; not a read token, another org's, or none */
    it_response r = it_send_json("PUT", path, NULL, "{\"reason\":\"x\"}");
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    const char *refused[] = {read_any, write_other, admin_other};
    for (size_t i = 0; i < 3; i++) {
        r = it_send_json("PUT", path, refused[i], "{\"reason\":\"x\"}");
        CHECK_PROBLEM(r, 403, "forbidden");
        it_response_free(&r);
    }
    r = it_send_json("PUT", path, write_acme, "{\"reason\":5}");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = it_send_json("PUT", path, write_acme, "{\"reason\":\"regressed on evals\"}");
    CHECK_STATUS(r, 200);
    CHECK(json_is_true(json_object_get(r.json, "deprecated")));
    CHECK_STR(it_json_str(&r, "deprecation_reason"), "regressed on evals");
    CHECK(it_json_str(&r, "deprecated_at") != NULL);
    it_response_free(&r);
    CHECK(has_delivery("version.deprecated"));
    /* latest skips it; it stays readable by number and digest */
    CHECK(latest_number("acme/life") == 1);
    char *d2 = digest_of("acme/life", 2);
    char url[256];
    snprintf(url, sizeof url, "/v1/models/acme/life/versions/%s", d2);
    r = it_get(url);
    CHECK_STATUS(r, 200);
    CHECK(json_is_true(json_object_get(r.json, "deprecated")));
    it_response_free(&r);
    r = it_get("/v1/models/acme/life/versions/2/files/second.txt");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    /* the model's list marks it */
    r = it_get("/v1/models/acme/life");
    json_t *versions = json_object_get(r.json, "versions");
    CHECK(json_is_false(json_object_get(json_array_get(versions, 0), "deprecated")));
    CHECK(json_is_true(json_object_get(json_array_get(versions, 1), "deprecated")));
    it_response_free(&r);
    /* the Hub: main is version 1, tag 2 is marked, the info of revision 2 too */
    char *d1 = digest_of("acme/life", 1);
    r = it_get("/api/models/acme/life/refs");
    json_t *main_ref = json_array_get(json_object_get(r.json, "branches"), 0);
    CHECK_STR(json_string_value(json_object_get(main_ref, "name")), "main");
    CHECK(strncmp(json_string_value(json_object_get(main_ref, "targetCommit")), d1, 40) == 0);
    json_t *tag2 = json_array_get(json_object_get(r.json, "tags"), 1);
    CHECK(json_is_true(json_object_get(tag2, "deprecated")));
    it_response_free(&r);
    r = it_get("/api/models/acme/life");
    CHECK(strncmp(it_json_str(&r, "sha"), d1, 40) == 0);
    CHECK(json_object_get(r.json, "deprecated") == NULL);
    it_response_free(&r);
    r = it_get("/api/models/acme/life/revision/2");
    CHECK(json_is_true(json_object_get(r.json, "deprecated")));
    CHECK_STR(it_json_str(&r, "deprecationReason"), "regressed on evals");
    it_response_free(&r);
    /* a draft is not deprecated */
    int draft = it_make_version(write_acme, "acme/life", NULL, NULL, false);
    snprintf(url, sizeof url, "/v1/models/acme/life/versions/%d/deprecation", draft);
    r = it_send_json("PUT", url, write_acme, "{}");
    CHECK_PROBLEM(r, 409, "version_not_published");
    it_response_free(&r);
    /* undeprecate: latest is 2 again */
    r = it_request("DELETE", path, &(it_request_opts){.token = write_acme});
    CHECK_STATUS(r, 200);
    CHECK(json_is_false(json_object_get(r.json, "deprecated")));
    it_response_free(&r);
    CHECK(latest_number("acme/life") == 2);
    /* the draft goes with a write token; a read token may not */
    snprintf(url, sizeof url, "/v1/models/acme/life/versions/%d", draft);
    r = it_request("DELETE", url, &(it_request_opts){.token = read_any});
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_request("DELETE", url, &(it_request_opts){.token = write_acme});
    CHECK_STATUS(r, 204);
    it_response_free(&r);
    r = it_get(url);
    CHECK_PROBLEM(r, 404, "version_not_found");
    it_response_free(&r);
    free(d1);
    free(d2);
}

TEST(delete_published)
{
    char *d1 = digest_of("acme/life", 1);
    it_response r =
        it_send_json("PUT", "/v1/models/acme/life/aliases/old", write_acme, "{\"version\":1}");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    const char *path = "/v1/models/acme/life/versions/1";
    const char *refused[] = {write_acme, admin_other, read_any};
    for (size_t i = 0; i < 3; i++) {
        r = it_request("DELETE", path, &(it_request_opts){.token = refused[i]});
        CHECK_PROBLEM(r, 403, "forbidden");
        it_response_free(&r);
    }
    r = it_request("DELETE", path, NULL);
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    char own[65], shared[65];
    it_sha256_hex(own_text, strlen(own_text), own);
    it_sha256_hex(shared_text, strlen(shared_text), shared);
    CHECK(it_blob_exists(own));
    r = it_request("DELETE", path, &(it_request_opts){.token = admin_acme});
    CHECK_STATUS(r, 204);
    it_response_free(&r);
    CHECK(has_delivery("version.deleted"));
    /* gone, not unknown: by number, digest, commit id, on /v1 and the Hub */
    char url[256];
    const char *gone[] = {"/v1/models/acme/life/versions/1",
                          "/v1/models/acme/life/versions/1/files/own.txt", NULL, NULL, NULL};
    char by_digest[256], hub_commit[256], hub_file[256];
    snprintf(by_digest, sizeof by_digest, "/v1/models/acme/life/versions/%s", d1);
    snprintf(hub_commit, sizeof hub_commit, "/api/models/acme/life/revision/%.40s", d1);
    snprintf(hub_file, sizeof hub_file, "/acme/life/resolve/1/own.txt");
    gone[2] = by_digest;
    gone[3] = hub_commit;
    gone[4] = hub_file;
    for (size_t i = 0; i < 5; i++) {
        r = it_get(gone[i]);
        CHECK_PROBLEM(r, 410, "version_deleted");
        it_response_free(&r);
    }
    /* the alias went with it; the model lists version 2 only */
    r = it_get("/v1/models/acme/life/versions/old");
    CHECK_PROBLEM(r, 404, "alias_not_found");
    it_response_free(&r);
    r = it_get("/v1/models/acme/life");
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "versions")), 1);
    it_response_free(&r);
    /* no alias may name it again, and a second delete finds it gone */
    r = it_send_json("PUT", "/v1/models/acme/life/aliases/old", write_acme, "{\"version\":1}");
    CHECK_PROBLEM(r, 410, "version_deleted");
    it_response_free(&r);
    r = it_request("DELETE", path, &(it_request_opts){.token = admin_acme});
    CHECK_PROBLEM(r, 410, "version_deleted");
    it_response_free(&r);
    /* its number is never given again */
    int next = it_make_version(write_acme, "acme/life", NULL, NULL, false);
    CHECK(next >= 3);
    snprintf(url, sizeof url, "/v1/models/acme/life/versions/%d", next);
    r = it_request("DELETE", url, &(it_request_opts){.token = write_acme});
    CHECK_STATUS(r, 204);
    it_response_free(&r);
    /* gc: its own blob goes, the one version 2 shares stays */
    CHECK(gc_run("--gc-grace 0", NULL) == 0);
    CHECK(!it_blob_exists(own));
    CHECK(it_blob_exists(shared));
    r = it_get("/v1/models/acme/life/versions/2/files/shared.txt");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    free(d1);
}

TEST(alias_delete)
{
    it_response r =
        it_send_json("PUT", "/v1/models/acme/life/aliases/stable", write_acme, "{\"version\":2}");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    const char *path = "/v1/models/acme/life/aliases/stable";
    r = it_request("DELETE", path, &(it_request_opts){.token = write_other});
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_request("DELETE", path, &(it_request_opts){.token = write_acme});
    CHECK_STATUS(r, 204);
    it_response_free(&r);
    r = it_request("DELETE", path, &(it_request_opts){.token = write_acme});
    CHECK_PROBLEM(r, 404, "alias_not_found");
    it_response_free(&r);
    r = it_request("DELETE", "/v1/models/acme/life/aliases/latest",
                   &(it_request_opts){.token = write_acme});
    CHECK_PROBLEM(r, 400, "reserved_alias");
    it_response_free(&r);
}

static long long usage_of(const char *org, const char *token, long long *quota)
{
    char url[128];
    snprintf(url, sizeof url, "/v1/namespaces/%s", org);
    it_response r = it_request("GET", url, &(it_request_opts){.token = token});
    CHECK_STATUS(r, 200);
    long long usage = it_json_int(r.json, "usage_bytes");
    json_t *q = json_object_get(r.json, "quota_bytes");
    *quota = json_is_integer(q) ? (long long)json_integer_value(q) : -1;
    it_response_free(&r);
    return usage;
}

/* org's reserved_bytes, polled until it is want (at most ~10 s: the server's start
 * callback of a request sent on another connection); the last value read. */
static long long reserved_until(const char *org, long long want)
{
    char url[128];
    snprintf(url, sizeof url, "/v1/namespaces/%s", org);
    long long reserved = -1;
    for (int i = 0; i < 1000 && reserved != want; i++) {
        if (i > 0)
            usleep(10 * 1000);
        it_response r = it_request("GET", url, &(it_request_opts){.token = admin_acme});
        reserved = it_json_int(r.json, "reserved_bytes");
        it_response_free(&r);
    }
    return reserved;
}

TEST(quota)
{
    long long quota = 0;
    /* the shared blob counts once although two rows name it (one row is left now) */
    long long usage = usage_of("acme", read_any, &quota);
    CHECK(usage == (long long)(strlen(shared_text) + strlen(second_text)));
    CHECK(quota == -1); /* no --namespace-quota: unbounded */
    const char *path = "/v1/namespaces/acme/quota";
    char body[64];
    snprintf(body, sizeof body, "{\"quota_bytes\":%lld}", usage + 40);
    const char *refused[] = {write_acme, admin_other, read_any};
    for (size_t i = 0; i < 3; i++) {
        it_response r = it_send_json("PUT", path, refused[i], body);
        CHECK_PROBLEM(r, 403, "forbidden");
        it_response_free(&r);
    }
    it_response r = it_send_json("PUT", path, admin_acme, "{\"quota_bytes\":-1}");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = it_send_json("PUT", path, admin_acme, body);
    CHECK_STATUS(r, 200);
    CHECK(it_json_int(r.json, "quota_bytes") == usage + 40);
    it_response_free(&r);
    int draft = it_make_version(write_acme, "acme/life", NULL, NULL, false);
    int blobs = it_count_blobs();
    static const char big[] = "0123456789012345678901234567890123456789012345678901234567890";
    /* known length: refused before the body, with the numbers */
    r = put_text("acme/life", draft, "big.txt", write_acme, big, false);
    CHECK_PROBLEM(r, 413, "storage_quota_exceeded");
    CHECK(strstr(json_string_value(json_object_get(r.json, "detail")), "quota of") != NULL);
    it_response_free(&r);
    /* unknown length: refused mid-stream */
    r = put_text("acme/life", draft, "big.txt", write_acme, big, true);
    CHECK_PROBLEM(r, 413, "storage_quota_exceeded");
    it_response_free(&r);
    CHECK_EQ_U64(it_count_blobs(), blobs);
    CHECK_EQ_U64(it_count_tmp_settled(), 0);
    /* what fits is stored; another namespace is not bound by acme's quota */
    r = put_text("acme/life", draft, "small.txt", write_acme, "fits\n", true);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    CHECK(usage_of("acme", admin_acme, &quota) == usage + 5);
    /* uploads at once (schema 17): a body of known length reserves its length while it
     * streams, so a second that fits the usage but not usage + reservation is refused */
    CHECK(reserved_until("acme", 0) == 0);
    int fd = it_connect();
    CHECK(fd >= 0);
    char head[1024];
    int n = snprintf(head, sizeof head,
                     "PUT /v1/models/acme/life/versions/%d/files/slow.txt HTTP/1.1\r\n"
                     "Host: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Length: 30\r\n\r\n"
                     "12345",
                     draft, write_acme);
    CHECK(fd >= 0 && it_write_all(fd, head, (size_t)n));
    CHECK(reserved_until("acme", 30) == 30); /* room was 35: 30 reserved, 5 left */
    r = put_text("acme/life", draft, "ten.txt", write_acme, "0123456789", false);
    CHECK_PROBLEM(r, 413, "storage_quota_exceeded");
    CHECK(strstr(json_string_value(json_object_get(r.json, "detail")), "reserve") != NULL);
    it_response_free(&r);
    if (fd >= 0)
        close(fd); /* the slow upload ends short: its reservation goes */
    CHECK(reserved_until("acme", 0) == 0);
    CHECK(usage_of("acme", admin_acme, &quota) == usage + 5);
    CHECK(it_make_version(it_token("write", "other"), "other/free", NULL, NULL, false) == 1);
    r = put_text("other/free", 1, "big.txt", write_other, big, false);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    /* a namespace at its quota takes no import */
    snprintf(body, sizeof body, "{\"quota_bytes\":%lld}", usage + 5);
    r = it_send_json("PUT", path, admin_acme, body);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    char url[256];
    snprintf(url, sizeof url, "/v1/models/acme/life/versions/%d/files/x.safetensors/import", draft);
    r = it_send_json("POST", url, write_acme, "{\"url\":\"http://127.0.0.1:9/x.safetensors\"}");
    CHECK_PROBLEM(r, 413, "storage_quota_exceeded");
    it_response_free(&r);
    /* null: back to the server's default (none here) */
    r = it_send_json("PUT", path, admin_acme, "{\"quota_bytes\":null}");
    CHECK_STATUS(r, 200);
    CHECK(json_is_null(json_object_get(r.json, "quota_bytes")));
    it_response_free(&r);
    r = put_text("acme/life", draft, "big.txt", write_acme, big, false);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    /* no token: the namespace route is open as every read is by default */
    r = it_get("/v1/namespaces/bad..name");
    CHECK(r.status == 400 || r.status == 404);
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    static const char *const flags[] = {"--import-allow", "127.0.0.1/32", NULL};
    it_init(argc, argv, flags);
    admin_acme = it_token("admin", "acme");
    admin_other = it_token("admin", "other");
    write_acme = it_token("write", "acme");
    write_other = it_token("write", "other");
    read_any = it_token("read", NULL);
    RUN(subscribe);
    RUN(deprecate_and_undeprecate);
    RUN(delete_published);
    RUN(alias_delete);
    RUN(quota);
    return it_finish(argv[0]);
}
