/* Integration tests of the response cache (server/core/response_cache.h) on the
 * header GET of a published version, against the real server over loopback: the
 * cached answer (GET and HEAD, by number and by digest) is byte for byte the
 * uncached one (body and every header but Date) and the one of a server run with
 * --response-cache-bytes 0; a deleted model stops being served (and a new model of
 * the same name serves its own header); a moved alias and a publish are seen at once
 * by the moving revisions ("latest", the Hub's "main", model info), also when their
 * answers were kept; a draft
 * whose file is deleted stops being served; with --auth-read a token of another
 * namespace, or none, never gets the answer an allowed token made ready. The same
 * for the Hub's resolve HEAD (by "main", number and commit; a HEAD with Range or
 * If-None-Match is never served from the cache) and model info
 * (/api/models/{repo}, .../revision/{rev}). */
#include "harness.h"

#define MODEL "acme/cached"
#define BASE "/v1/models/" MODEL

static const char *writer; /* write, namespace acme */

static void build(it_buf *out, const char *name, unsigned seed)
{
    it_tensor_spec t[] = {{name, "F32", 2, {4, 8, 0, 0}}, {"b", "F16", 1, {16, 0, 0, 0}}};
    out->len = 0;
    it_build_safetensors(out, t, 2, "{\"format\":\"pt\"}", seed);
}

/* Headers without the Date line (it moves with the clock). */
static void strip_date(const it_response *r, it_buf *out)
{
    out->len = 0;
    const char *h = r->headers.data ? (const char *)r->headers.data : "";
    while (*h) {
        const char *end = strchr(h, '\n');
        size_t len = end ? (size_t)(end - h + 1) : strlen(h);
        if (strncasecmp(h, "Date:", 5) != 0)
            it_buf_append(out, h, len);
        h += len;
    }
    it_buf_append(out, "", 1);
}

static bool same(const it_response *a, const it_response *b)
{
    it_buf ha = {0}, hb = {0};
    strip_date(a, &ha);
    strip_date(b, &hb);
    bool ok = a->status == b->status && a->body.len == b->body.len &&
              (a->body.len == 0 || memcmp(a->body.data, b->body.data, a->body.len) == 0) &&
              ha.len == hb.len && memcmp(ha.data, hb.data, ha.len) == 0;
    if (!ok)
        fprintf(stderr, "differ:\n%s%.300s\n---\n%s%.300s\n", (const char *)ha.data,
                a->body.data ? (const char *)a->body.data : "", (const char *)hb.data,
                b->body.data ? (const char *)b->body.data : "");
    it_buf_free(&ha);
    it_buf_free(&hb);
    return ok;
}

static it_response get_as(const char *method, const char *path, const char *token)
{
    it_request_opts o = {.token = token};
    return it_request(method, path, &o);
}

static char digest_v1[65];
static it_response first_get, first_head;

TEST(cached_equals_uncached)
{
    it_buf f = {0};
    build(&f, "a", 1);
    CHECK_EQ_U64(it_make_version(writer, MODEL, "model.safetensors", &f, true), 1);
    it_buf_free(&f);
    it_response v = it_get(BASE "/versions/1");
    CHECK_STATUS(v, 200);
    const char *d = it_json_str(&v, "digest");
    CHECK(d != NULL && strlen(d) == 64);
    snprintf(digest_v1, sizeof digest_v1, "%s", d ? d : "");
    it_response_free(&v);

    const char *path = BASE "/versions/1/files/model.safetensors/header";
    first_get = it_get(path); /* built, then kept */
    CHECK_STATUS(first_get, 200);
    first_head = it_request("HEAD", path, NULL);
    for (int i = 0; i < 3; i++) {
        it_response again = it_get(path);
        CHECK(same(&first_get, &again));
        it_response_free(&again);
        it_response head = it_request("HEAD", path, NULL);
        CHECK(same(&first_head, &head));
        CHECK_EQ_U64(head.body.len, 0);
        it_response_free(&head);
    }
    char by_digest[512];
    snprintf(by_digest, sizeof by_digest, BASE "/versions/%s/files/model.safetensors/header",
             digest_v1);
    for (int i = 0; i < 2; i++) {
        it_response r = it_get(by_digest);
        CHECK(same(&first_get, &r));
        it_response_free(&r);
    }
    /* the same answers from a server that keeps no ready responses */
    CHECK_EQ_U64(it_server_stop(), 0);
    const char *off[] = {"--response-cache-bytes", "0", NULL};
    CHECK(it_server_start_args(off, NULL) == 0);
    it_response uncached = it_get(path);
    CHECK(same(&first_get, &uncached));
    it_response_free(&uncached);
    it_response uncached_head = it_request("HEAD", path, NULL);
    CHECK(same(&first_head, &uncached_head));
    it_response_free(&uncached_head);
    CHECK_EQ_U64(it_server_stop(), 0);
    CHECK(it_server_start_args(NULL, NULL) == 0);
}

/* GET or HEAD of path on this server and on one with --response-cache-bytes 0 (the
 * server is restarted twice): every answer of the first equals the second's. */
static void compare_with_uncached(const char *const *paths, int count)
{
    it_response cached[8][2];
    for (int i = 0; i < count; i++) {
        const char *method = strncmp(paths[i], "HEAD ", 5) == 0 ? "HEAD" : "GET";
        const char *path = paths[i] + strlen(method) + 1;
        it_response warm = it_request(method, path, NULL);
        it_response_free(&warm);
        cached[i][0] = it_request(method, path, NULL);
        cached[i][1] = it_request(method, path, NULL);
        CHECK(same(&cached[i][0], &cached[i][1]));
    }
    CHECK_EQ_U64(it_server_stop(), 0);
    const char *off[] = {"--response-cache-bytes", "0", NULL};
    CHECK(it_server_start_args(off, NULL) == 0);
    for (int i = 0; i < count; i++) {
        const char *method = strncmp(paths[i], "HEAD ", 5) == 0 ? "HEAD" : "GET";
        it_response plain = it_request(method, paths[i] + strlen(method) + 1, NULL);
        if (!same(&cached[i][0], &plain))
            fprintf(stderr, "  (%s)\n", paths[i]);
        CHECK(same(&cached[i][0], &plain));
        it_response_free(&plain);
        it_response_free(&cached[i][0]);
        it_response_free(&cached[i][1]);
    }
    CHECK_EQ_U64(it_server_stop(), 0);
    CHECK(it_server_start_args(NULL, NULL) == 0);
}

TEST(hub_routes_cached_equal_uncached)
{
    char by_commit[512], info_commit[512];
    snprintf(by_commit, sizeof by_commit, "HEAD /" MODEL "/resolve/%s/model.safetensors",
             digest_v1);
    snprintf(info_commit, sizeof info_commit, "GET /api/models/" MODEL "/revision/%s", digest_v1);
    const char *paths[] = {"HEAD /" MODEL "/resolve/main/model.safetensors",
                           "HEAD /" MODEL "/resolve/1/model.safetensors",
                           by_commit,
                           "HEAD /" MODEL "/raw/1/model.safetensors",
                           "GET /api/models/" MODEL,
                           "GET /api/models/" MODEL "/revision/1",
                           info_commit,
                           "GET /api/models/" MODEL "/revision/1?blobs=true"};
    compare_with_uncached(paths, 8);
    /* a query changes model info: the answer with it is not the one without */
    it_response plain_info = it_get("/api/models/" MODEL "/revision/1");
    it_response blobs_info = it_get("/api/models/" MODEL "/revision/1?blobs=true");
    it_response plain_again = it_get("/api/models/" MODEL "/revision/1");
    CHECK_STATUS(blobs_info, 200);
    CHECK(same(&plain_info, &plain_again));
    CHECK(plain_info.body.len != blobs_info.body.len ||
          memcmp(plain_info.body.data, blobs_info.body.data, plain_info.body.len) != 0);
    it_response_free(&plain_info);
    it_response_free(&blobs_info);
    it_response_free(&plain_again);
    /* Range and validators on a HEAD still get their own answers */
    char path[128];
    snprintf(path, sizeof path, "/" MODEL "/resolve/1/model.safetensors");
    const char *range[] = {"Range: bytes=0-9", NULL};
    it_request_opts o = {.headers = range};
    it_response r = it_request("HEAD", path, &o);
    CHECK_STATUS(r, 206);
    char value[128];
    CHECK_STR(it_header(&r, "Content-Length", value, sizeof value), "10");
    it_response_free(&r);
    char inm[100];
    it_response plain = it_request("HEAD", path, NULL);
    snprintf(inm, sizeof inm, "If-None-Match: %s", it_header(&plain, "ETag", value, sizeof value));
    it_response_free(&plain);
    const char *validators[] = {inm, NULL};
    it_request_opts v = {.headers = validators};
    r = it_request("HEAD", path, &v);
    CHECK_STATUS(r, 304);
    it_response_free(&r);
}

TEST(alias_moves_are_seen)
{
    /* the moving revisions, asked twice so that their answers are kept (moving keys) */
    char main_v1[100] = "", sha_v1[100] = "";
    for (int i = 0; i < 2; i++) {
        it_response r = it_get(BASE "/versions/latest/files/model.safetensors/header");
        CHECK(r.body.data && strstr((const char *)r.body.data, "\"name\":\"a\"") != NULL);
        it_response_free(&r);
        r = it_request("HEAD", "/" MODEL "/resolve/main/model.safetensors", NULL);
        CHECK_STATUS(r, 200);
        it_header(&r, "X-Repo-Commit", main_v1, sizeof main_v1);
        it_response_free(&r);
        r = it_get("/api/models/" MODEL);
        CHECK(it_json_str(&r, "sha") != NULL);
        if (i == 0)
            snprintf(sha_v1, sizeof sha_v1, "%s",
                     it_json_str(&r, "sha") ? it_json_str(&r, "sha") : "");
        else
            CHECK_STR(it_json_str(&r, "sha") ? it_json_str(&r, "sha") : "", sha_v1);
        it_response_free(&r);
    }
    CHECK_STR(sha_v1, main_v1); /* the commit id, both ways */
    it_buf f = {0};
    build(&f, "second", 2);
    CHECK_EQ_U64(it_make_version(writer, MODEL, "model.safetensors", &f, true), 2);
    it_buf_free(&f);
    {
        /* the publish alone drops the kept answers of the moving revisions */
        it_response r = it_get(BASE "/versions/latest/files/model.safetensors/header");
        CHECK(r.body.data && strstr((const char *)r.body.data, "\"name\":\"second\"") != NULL);
        it_response_free(&r);
        char now[100] = "";
        r = it_request("HEAD", "/" MODEL "/resolve/main/model.safetensors", NULL);
        it_header(&r, "X-Repo-Commit", now, sizeof now);
        CHECK(now[0] != '\0' && strcmp(now, main_v1) != 0);
        it_response_free(&r);
        r = it_get("/api/models/" MODEL);
        CHECK(it_json_str(&r, "sha") != NULL && strcmp(it_json_str(&r, "sha"), sha_v1) != 0);
        it_response_free(&r);
    }
    const char *by_alias = BASE "/versions/prod/files/model.safetensors/header";
    it_response r = it_send_json("PUT", BASE "/aliases/prod", writer, "{\"version\":1}");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    for (int i = 0; i < 2; i++) {
        r = it_get(by_alias);
        CHECK_STATUS(r, 200);
        CHECK(r.body.data && strstr((const char *)r.body.data, "\"name\":\"a\"") != NULL);
        it_response_free(&r);
    }
    r = it_send_json("PUT", BASE "/aliases/prod", writer, "{\"version\":2}");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    r = it_get(by_alias);
    CHECK_STATUS(r, 200);
    CHECK(r.body.data && strstr((const char *)r.body.data, "\"name\":\"second\"") != NULL);
    it_response_free(&r);
    /* the Hub's "main" and model info follow latest, and an alias */
    char commit_v1[100] = "", commit[100] = "";
    r = it_request("HEAD", "/" MODEL "/resolve/1/model.safetensors", NULL);
    it_header(&r, "X-Repo-Commit", commit_v1, sizeof commit_v1);
    CHECK(commit_v1[0] != '\0');
    it_response_free(&r);
    r = it_request("HEAD", "/" MODEL "/resolve/prod/model.safetensors", NULL);
    CHECK_STATUS(r, 200);
    it_header(&r, "X-Repo-Commit", commit, sizeof commit);
    CHECK(commit[0] != '\0' && strcmp(commit, commit_v1) != 0);
    it_response_free(&r);
    CHECK_STR(main_v1, commit_v1);
    r = it_request("HEAD", "/" MODEL "/resolve/main/model.safetensors", NULL);
    it_header(&r, "X-Repo-Commit", commit, sizeof commit);
    CHECK(commit[0] != '\0' && strcmp(commit, commit_v1) != 0);
    it_response_free(&r);
    r = it_get("/api/models/" MODEL);
    CHECK_STATUS(r, 200);
    CHECK(it_json_str(&r, "sha") != NULL && strcmp(it_json_str(&r, "sha"), digest_v1) != 0);
    CHECK(it_json_str(&r, "sha") != NULL && strcmp(it_json_str(&r, "sha"), sha_v1) != 0);
    it_response_free(&r);
    /* latest moved to 2 when it was published */
    r = it_get(BASE "/versions/latest/files/model.safetensors/header");
    CHECK(r.body.data && strstr((const char *)r.body.data, "\"name\":\"second\"") != NULL);
    it_response_free(&r);
}

TEST(draft_file_deleted)
{
    it_buf f = {0};
    build(&f, "draft", 3);
    CHECK_EQ_U64(it_make_version(writer, MODEL, "model.safetensors", &f, false), 3);
    it_buf_free(&f);
    const char *path = BASE "/versions/3/files/model.safetensors/header";
    for (int i = 0; i < 2; i++) {
        it_response r = it_get(path);
        CHECK_STATUS(r, 200);
        it_response_free(&r);
    }
    it_response del =
        it_send("DELETE", BASE "/versions/3/files/model.safetensors", writer, NULL, 0);
    CHECK_STATUS(del, 204);
    it_response_free(&del);
    it_response r = it_get(path);
    CHECK_PROBLEM(r, 404, "file_not_found");
    it_response_free(&r);
}

TEST(deleted_model_stops_being_served)
{
    const char *path = BASE "/versions/1/files/model.safetensors/header";
    it_response r = it_get(path);
    CHECK(same(&first_get, &r)); /* still ready */
    it_response_free(&r);
    const char *admin = it_token("admin", NULL);
    it_response del = it_send("DELETE", BASE, admin, NULL, 0);
    CHECK_STATUS(del, 204);
    it_response_free(&del);
    r = it_get(path);
    CHECK_PROBLEM(r, 404, "model_not_found");
    it_response_free(&r);
    r = it_request("HEAD", path, NULL);
    CHECK_STATUS(r, 404);
    it_response_free(&r);
    r = it_request("HEAD", "/" MODEL "/resolve/1/model.safetensors", NULL);
    CHECK_STATUS(r, 404);
    it_response_free(&r);
    r = it_get("/api/models/" MODEL "/revision/1");
    CHECK_STATUS(r, 404);
    it_response_free(&r);
    char by_digest[512];
    snprintf(by_digest, sizeof by_digest, BASE "/versions/%s/files/model.safetensors/header",
             digest_v1);
    r = it_get(by_digest);
    CHECK_PROBLEM(r, 404, "model_not_found");
    it_response_free(&r);
    /* a new model of the same name: its version 1 is not the old one */
    it_buf f = {0};
    build(&f, "reborn", 4);
    CHECK_EQ_U64(it_make_version(writer, MODEL, "model.safetensors", &f, true), 1);
    it_buf_free(&f);
    r = it_get(path);
    CHECK_STATUS(r, 200);
    CHECK(r.body.data && strstr((const char *)r.body.data, "\"name\":\"reborn\"") != NULL);
    it_response_free(&r);
}

TEST(authorisation_per_request)
{
    CHECK_EQ_U64(it_server_stop(), 0);
    const char *auth[] = {"--auth-read", NULL};
    CHECK(it_server_start_args(auth, NULL) == 0);
    const char *reader = it_token("read", "acme");
    const char *other = it_token("read", "other");
    const char *path = BASE "/versions/1/files/model.safetensors/header";
    for (int i = 0; i < 3; i++) {
        it_response ok = get_as("GET", path, reader); /* made ready by the first */
        CHECK_STATUS(ok, 200);
        it_response_free(&ok);
        it_response no_token = get_as("GET", path, NULL);
        CHECK_PROBLEM(no_token, 401, "unauthorized");
        it_response_free(&no_token);
        it_response wrong_ns = get_as("GET", path, other);
        CHECK_STATUS(wrong_ns, 403);
        CHECK(wrong_ns.body.data == NULL ||
              strstr((const char *)wrong_ns.body.data, "reborn") == NULL);
        it_response_free(&wrong_ns);
        it_response head = get_as("HEAD", path, other);
        CHECK_STATUS(head, 403);
        it_response_free(&head);
        it_response hub = get_as("HEAD", "/" MODEL "/resolve/1/model.safetensors", reader);
        CHECK_STATUS(hub, 200);
        it_response_free(&hub);
        /* the Hub routes answer another namespace's model as one that does not exist */
        hub = get_as("HEAD", "/" MODEL "/resolve/1/model.safetensors", other);
        CHECK_STATUS(hub, 404);
        it_response_free(&hub);
        hub = get_as("GET", "/api/models/" MODEL "/revision/1", reader);
        CHECK_STATUS(hub, 200);
        it_response_free(&hub);
        hub = get_as("GET", "/api/models/" MODEL "/revision/1", NULL);
        CHECK_STATUS(hub, 401);
        it_response_free(&hub);
        hub = get_as("GET", "/api/models/" MODEL, other);
        CHECK_PROBLEM(hub, 404, "model_not_found");
        it_response_free(&hub);
        it_response bad = get_as(
            "GET", path, "tg_0000000000000000000000000000000000000000000000000000000000000000");
        CHECK_STATUS(bad, 401);
        it_response_free(&bad);
        /* the moving revisions: made ready by the reader, refused to the others */
        static const char *const moving[][2] = {
            {"GET", BASE "/versions/latest/files/model.safetensors/header"},
            {"HEAD", "/" MODEL "/resolve/main/model.safetensors"},
            {"GET", "/api/models/" MODEL},
        };
        for (size_t m = 0; m < sizeof moving / sizeof moving[0]; m++) {
            it_response mine = get_as(moving[m][0], moving[m][1], reader);
            CHECK_STATUS(mine, 200);
            it_response_free(&mine);
            it_response none = get_as(moving[m][0], moving[m][1], NULL);
            CHECK_STATUS(none, 401);
            it_response_free(&none);
            it_response theirs = get_as(moving[m][0], moving[m][1], other);
            CHECK_STATUS(theirs, moving[m][1][1] == 'v' ? 403 : 404); /* /v1, else a Hub route */
            it_response_free(&theirs);
        }
    }
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    writer = it_token("write", "acme");
    RUN(cached_equals_uncached);
    RUN(hub_routes_cached_equal_uncached);
    RUN(alias_moves_are_seen);
    RUN(draft_file_deleted);
    RUN(deleted_model_stops_being_served);
    RUN(authorisation_per_request);
    it_response_free(&first_get);
    it_response_free(&first_head);
    return it_finish(argv[0]);
}
