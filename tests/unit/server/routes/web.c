/* server/routes/web.c, black-box: GET / and /ui/{path} against the real server
 * through the integration harness: the embedded bytes, content types, the
 * security headers, ETag + 304, HEAD, an unknown asset. */
#include "harness.h"

static void check_asset(const char *url, const char *repo_file, const char *type_prefix)
{
    it_buf repo = {0};
    CHECK(it_read_file(repo_file, &repo));
    it_response r = it_get(url);
    CHECK_STATUS(r, 200);
    CHECK(r.body.len == repo.len && repo.len > 0 && memcmp(r.body.data, repo.data, repo.len) == 0);
    char value[512];
    it_header(&r, "Content-Type", value, sizeof value);
    CHECK(strncmp(value, type_prefix, strlen(type_prefix)) == 0);
    it_header(&r, "X-Content-Type-Options", value, sizeof value);
    CHECK_STR(value, "nosniff");
    it_header(&r, "Content-Security-Policy", value, sizeof value);
    CHECK(strstr(value, "default-src 'none'") != NULL &&
          strstr(value, "script-src 'self'") != NULL);
    CHECK(strstr(value, "unsafe-inline") == NULL &&
          strstr(value, "frame-ancestors 'none'") != NULL);
    it_header(&r, "Cache-Control", value, sizeof value);
    CHECK_STR(value, "no-cache");
    char etag[64];
    it_header(&r, "ETag", etag, sizeof etag);
    CHECK(etag[0] == '"' && strlen(etag) == 18);
    it_response_free(&r);

    /* If-None-Match: 304 with the tag (also weak, also in a list), 200 with another */
    char inm[128];
    snprintf(inm, sizeof inm, "If-None-Match: \"other\", W/%s", etag);
    const char *const h304[] = {inm, NULL};
    r = it_request("GET", url, &(it_request_opts){.headers = h304});
    CHECK_STATUS(r, 304);
    CHECK_EQ_U64(r.body.len, 0);
    it_response_free(&r);
    const char *const h200[] = {"If-None-Match: \"nope\"", NULL};
    r = it_request("GET", url, &(it_request_opts){.headers = h200});
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    r = it_request("HEAD", url, NULL);
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(r.body.len, 0);
    it_response_free(&r);
    it_buf_free(&repo);
}

TEST(page_and_assets)
{
    check_asset("/", "web/index.html", "text/html");
    check_asset("/ui/app.js", "web/app.js", "text/javascript");
    check_asset("/ui/style.css", "web/style.css", "text/css");
}

TEST(unknown_asset_and_methods)
{
    it_response r = it_get("/ui/nope.js");
    CHECK_PROBLEM(r, 404, "asset_not_found");
    it_response_free(&r);
    r = it_get("/ui/../openapi.yaml");
    CHECK(r.status == 404 || r.status == 400);
    it_response_free(&r);
    r = it_request("POST", "/", NULL);
    CHECK_PROBLEM(r, 405, "method_not_allowed");
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    RUN(page_and_assets);
    RUN(unknown_asset_and_methods);
    return it_finish(argv[0]);
}
