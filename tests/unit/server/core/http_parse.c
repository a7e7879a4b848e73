/* Unit tests for server/core/http_parse.c: path split and pattern match, the request
 * target's counts, the framing verdict, the JSON depth bound. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "http_parse.h"
#include "test.h"

TEST(patterns)
{
    tg_segment url[TG_SEGMENTS_MAX];
    int n =
        tg_split_path("/v1/models/acme/m/versions/1/files/a/b.safetensors", url, TG_SEGMENTS_MAX);
    CHECK_EQ_U64(n, 9);
    tg_param_span p[TG_ROUTE_PARAMS_MAX];
    int count = 0;
    CHECK(tg_match_pattern("/v1/models/{org}/{name}/versions/{rev}/files/{path*}", url, n, p,
                           &count));
    CHECK_EQ_U64(count, 4);
    CHECK_STR(p[3].name, "path");
    CHECK(p[3].len == strlen("a/b.safetensors") && memcmp(p[3].text, "a/b.safetensors", 15) == 0);
    CHECK(!tg_match_pattern("/v1/models/{org}/{name}", url, n, NULL, NULL));
    n = tg_split_path("/v1/models//m", url, TG_SEGMENTS_MAX);
    CHECK(!tg_match_pattern("/v1/models/{org}/{name}", url, n, NULL, NULL)); /* empty {org} */
    CHECK_EQ_U64(tg_split_path("v1", url, TG_SEGMENTS_MAX), (uint64_t)-1);
    CHECK_EQ_U64(tg_split_path("/a/b/c", url, 2), (uint64_t)-1);
}

/* A pattern whose placeholders cannot all be given (more than TG_ROUTE_PARAMS_MAX, an
 * unknown name, more than TG_PATTERN_SEGMENTS_MAX segments)
 * matches nothing, with or without params, and tg_pattern_valid names the problem:
 * they matched, the fifth placeholder dropped and an unknown name left NULL. */
TEST(pattern_limits)
{
    tg_segment url[TG_SEGMENTS_MAX];
    tg_param_span p[TG_ROUTE_PARAMS_MAX];
    int count = -1;
    char why[128] = "";
    int n = tg_split_path("/a/b/c/d/e", url, TG_SEGMENTS_MAX);
    CHECK_EQ_U64(n, 5);
    const char *five = "/{org}/{name}/{rev}/{alias}/{id}";
    CHECK(!tg_match_pattern(five, url, n, NULL, NULL));
    CHECK(!tg_match_pattern(five, url, n, p, &count));
    CHECK(!tg_pattern_valid(five, why, sizeof why));
    CHECK(strstr(why, "placeholders") != NULL);
    const char *four = "/{org}/{name}/{rev}/{alias}/e";
    CHECK(tg_pattern_valid(four, why, sizeof why));
    CHECK(tg_match_pattern(four, url, n, p, &count));
    CHECK_EQ_U64(count, 4);
    CHECK_STR(p[3].name, "alias");

    n = tg_split_path("/v1/x", url, TG_SEGMENTS_MAX);
    CHECK(!tg_match_pattern("/v1/{bogus}", url, n, NULL, NULL));
    CHECK(!tg_match_pattern("/v1/{bogus}", url, n, p, &count));
    CHECK(!tg_pattern_valid("/v1/{bogus}", why, sizeof why));
    CHECK(strstr(why, "{bogus}") != NULL);
    CHECK(!tg_match_pattern("/v1/{orgx}", url, n, p, &count)); /* a known name's prefix */
    CHECK(!tg_match_pattern("/v1/{or}", url, n, p, &count));
    CHECK(!tg_pattern_valid("/v1/{org", why, sizeof why));
    CHECK(tg_match_pattern("/v1/{org}", url, n, p, &count));
    CHECK_STR(p[0].name, "org");

    n = tg_split_path("/a/b/c", url, TG_SEGMENTS_MAX);
    CHECK(tg_pattern_valid("/{path*}/c", why, sizeof why)); /* .../{path*}/header */
    CHECK(tg_match_pattern("/{path*}/c", url, n, p, &count));
    CHECK(p[0].len == 3 && memcmp(p[0].text, "a/b", 3) == 0);
    CHECK(tg_pattern_valid("/a/{path*}", why, sizeof why));
    CHECK(tg_match_pattern("/a/{path*}", url, n, p, &count));
    CHECK(p[0].len == 3 && memcmp(p[0].text, "b/c", 3) == 0);

    /* 17 segments: beyond the pattern bound, however the url reads */
    const char *long_pattern = "/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a";
    n = tg_split_path(long_pattern, url, TG_SEGMENTS_MAX);
    CHECK_EQ_U64(n, 17);
    CHECK(!tg_pattern_valid(long_pattern, why, sizeof why));
    CHECK(!tg_match_pattern(long_pattern, url, n, NULL, NULL));
    CHECK(tg_pattern_valid(long_pattern + 2, why, sizeof why)); /* 16 */
    CHECK(!tg_pattern_valid("v1/models", why, sizeof why));
}

/* The reference for tg_pattern_match: pattern and url as segment arrays, walked
 * recursively (a {name*} tries every length it may take; at most one per pattern
 * here, so the answer is the same as taking what the rest leaves). */
static bool ref_match(const tg_segment *pat, int np, const tg_segment *url, int nu, int *params)
{
    if (np == 0)
        return nu == 0;
    bool placeholder = pat[0].len >= 2 && pat[0].text[0] == '{';
    bool tail = placeholder && pat[0].text[pat[0].len - 2] == '*';
    if (!placeholder)
        return nu > 0 && url[0].len == pat[0].len &&
               memcmp(url[0].text, pat[0].text, pat[0].len) == 0 &&
               ref_match(pat + 1, np - 1, url + 1, nu - 1, params);
    for (int take = 1; take <= (tail ? nu : 1) && take <= nu; take++) {
        if (!tail && url[0].len == 0)
            return false;
        int inner = 0;
        if (ref_match(pat + 1, np - 1, url + take, nu - take, &inner)) {
            *params = inner + 1;
            return true;
        }
    }
    return false;
}

/* Compiled once, a pattern answers as the reference for every url made of a few
 * segments (the server routes with the compiled form: http.c route_request), and as
 * tg_match_pattern, spans included. */
TEST(compiled_patterns)
{
    static const char *const patterns[] = {
        "/v1/models/{org}/{name}",
        "/v1/models/{org}/{name}/versions/{rev}/files/{path*}",
        "/v1/models/{org}/{name}/versions/{rev}/files/{path*}/header",
        "/{org}/{name}/resolve/{rev}/{path*}",
        "/api/models/{org}/{name}",
        "/{path*}",
        "/a",
        "/",
    };
    static const char *const words[] = {"",     "a",      "v1",    "models",   "resolve",
                                        "main", "header", "files", "versions", "x.safetensors"};
    unsigned seed = 7;
    char text[256];
    tg_segment url[TG_SEGMENTS_MAX];
    for (size_t p = 0; p < sizeof patterns / sizeof patterns[0]; p++) {
        tg_pattern compiled;
        tg_pattern_compile(patterns[p], &compiled);
        tg_segment pat[TG_PATTERN_SEGMENTS_MAX];
        int np = tg_split_path(patterns[p], pat, TG_PATTERN_SEGMENTS_MAX);
        CHECK(np > 0);
        int matched = 0;
        for (int trial = 0; trial < 4000; trial++) {
            /* a url of 1..9 segments; every other trial starts from the pattern itself */
            size_t used = 0;
            int segments = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 9;
            for (int k = 0; k < segments; k++) {
                unsigned r = (seed = seed * 1103515245u + 12345u) >> 16;
                const char *w = words[r % (sizeof words / sizeof words[0])];
                int wlen = (int)strlen(w);
                if (trial % 2 == 0 && k < np && pat[k].text[0] != '{' && r % 4 != 0) {
                    w = pat[k].text; /* the pattern's own literal, mostly */
                    wlen = (int)pat[k].len;
                }
                used += (size_t)snprintf(text + used, sizeof text - used, "/%.*s", wlen, w);
            }
            int nu = tg_split_path(text, url, TG_SEGMENTS_MAX);
            CHECK(nu > 0);
            int ref_params = 0, count = -1, count2 = -1;
            tg_param_span a[TG_ROUTE_PARAMS_MAX], b[TG_ROUTE_PARAMS_MAX];
            bool want = ref_match(pat, np, url, nu, &ref_params);
            bool got = tg_pattern_match(&compiled, url, nu, a, &count);
            CHECK(got == want);
            CHECK(tg_pattern_match(&compiled, url, nu, NULL, NULL) == want);
            CHECK(tg_match_pattern(patterns[p], url, nu, b, &count2) == want);
            if (got && want) {
                matched++;
                CHECK_EQ_U64(count, ref_params);
                CHECK_EQ_U64(count2, count);
                for (int i = 0; i < count; i++)
                    CHECK(a[i].name == b[i].name && a[i].text == b[i].text && a[i].len == b[i].len);
            }
        }
        CHECK(matched > 0); /* the urls reach both answers */
    }
    /* the first segment decides for a row group: a literal refuses another word */
    tg_pattern v1a, v1b, org, api;
    tg_pattern_compile("/v1/models/{org}/{name}", &v1a);
    tg_pattern_compile("/v1/jobs/{id}", &v1b);
    tg_pattern_compile("/{org}/{name}/resolve/{rev}/{path*}", &org);
    tg_pattern_compile("/api/models/{org}/{name}", &api);
    CHECK(tg_pattern_same_first(&v1a, &v1b));
    CHECK(!tg_pattern_same_first(&v1a, &org));
    CHECK(!tg_pattern_same_first(&v1a, &api));
    CHECK(tg_pattern_same_first(&org, &org));
    int nv = tg_split_path("/v1/models/a/b", url, TG_SEGMENTS_MAX);
    CHECK(tg_pattern_first_may_match(&v1b, url, nv)); /* "v1": the group may match */
    CHECK(!tg_pattern_first_may_match(&api, url, nv));
    CHECK(tg_pattern_first_may_match(&org, url, nv));
    nv = tg_split_path("/v1x/models/a/b", url, TG_SEGMENTS_MAX);
    CHECK(!tg_pattern_first_may_match(&v1a, url, nv) &&
          !tg_pattern_match(&v1a, url, nv, NULL, NULL));

    /* a pattern the server would refuse compiles to one that matches nothing */
    tg_pattern bad;
    int n = tg_split_path("/v1/x", url, TG_SEGMENTS_MAX);
    tg_pattern_compile("/v1/{bogus}", &bad);
    CHECK(!tg_pattern_match(&bad, url, n, NULL, NULL));
    n = tg_split_path("/a/b/c/d/e", url, TG_SEGMENTS_MAX);
    tg_pattern_compile("/{org}/{name}/{rev}/{alias}/{id}", &bad);
    CHECK(!tg_pattern_match(&bad, url, n, NULL, NULL));
    tg_pattern_compile("v1", &bad);
    CHECK(!tg_pattern_match(&bad, url, n, NULL, NULL));
}

TEST(targets)
{
    tg_target_info t;
    tg_target_inspect("/healthz", &t);
    CHECK_EQ_U64(t.query_args, 0);
    tg_target_inspect("/healthz?", &t);
    CHECK_EQ_U64(t.query_args, 0);
    tg_target_inspect("/healthz?a&b=1&&c", &t);
    CHECK_EQ_U64(t.query_args, 4);
    CHECK_EQ_U64(t.length, strlen("/healthz?a&b=1&&c"));
    CHECK(!t.has_nul);
    tg_target_inspect("/a%00b", &t);
    CHECK(t.has_nul);
}

/* The verdict on fields given as "Name", "value", ..., NULL. */
static const char *verdict(bool http_1_0, size_t bytes, unsigned *status, ...)
{
    tg_framing f = {0};
    va_list ap;
    va_start(ap, status);
    for (const char *name = va_arg(ap, const char *); name != NULL; name = va_arg(ap, const char *))
        tg_framing_add(&f, name, va_arg(ap, const char *));
    va_end(ap);
    static tg_refusal r;
    if (!tg_framing_verdict(&f, http_1_0, bytes, &r)) {
        *status = 0;
        return "";
    }
    *status = r.status;
    return r.reason;
}

TEST(framing)
{
    unsigned s;
    CHECK_STR(verdict(false, 100, &s, "Host", "x", NULL), "");
    CHECK_STR(verdict(false, 100, &s, "host", "x", "transfer-encoding", "Chunked", NULL), "");
    CHECK_STR(verdict(true, 100, &s, NULL), "");
    CHECK_STR(verdict(false, 100, &s, NULL), "missing_host");
    CHECK_EQ_U64(s, 400);
    CHECK_STR(verdict(false, 100, &s, "Host", "a", "HOST", "b", NULL), "duplicate_host");
    CHECK_STR(
        verdict(false, 100, &s, "Host", "x", "Content-Length", "3", "content-length", "3", NULL),
        "ambiguous_framing");
    CHECK_STR(verdict(false, 100, &s, "Host", "x", "Content-Length", "3", "Transfer-Encoding",
                      "chunked", NULL),
              "ambiguous_framing");
    CHECK_STR(verdict(true, 100, &s, "Transfer-Encoding", "chunked", NULL), "ambiguous_framing");
    CHECK_STR(verdict(false, 100, &s, "Host", "x", "Transfer-Encoding", "identity", NULL),
              "unsupported_transfer_encoding");
    CHECK_EQ_U64(s, 501);
    CHECK_STR(verdict(false, 100, &s, "Host", "x", "Content-Length ", "7", NULL),
              "malformed_header");
    CHECK_STR(verdict(false, 100, &s, "Host", "x", "", "7", NULL), "malformed_header");
    CHECK_STR(verdict(false, TG_HEADER_BYTES_MAX, &s, "Host", "x", NULL), "");
    CHECK_STR(verdict(false, TG_HEADER_BYTES_MAX + 1, &s, "Host", "x", NULL), "headers_too_large");
    CHECK_EQ_U64(s, 431);
}

TEST(json_depth)
{
    CHECK(tg_json_depth_within("{}", 2, 1));
    CHECK(!tg_json_depth_within("{\"a\":[]}", 8, 1));
    CHECK(tg_json_depth_within("{\"a\":\"[[[[\"}", 12, 1)); /* brackets in a string */
    CHECK(tg_json_depth_within("[\"\\\"[[\"]", 8, 1));      /* an escaped quote */
    char deep[80];
    memset(deep, '[', 33);
    memset(deep + 33, ']', 33);
    CHECK(!tg_json_depth_within(deep, 66, TG_JSON_DEPTH_MAX));
    CHECK(tg_json_depth_within(deep + 1, 64, TG_JSON_DEPTH_MAX));
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(patterns);
    RUN(pattern_limits);
    RUN(compiled_patterns);
    RUN(targets);
    RUN(framing);
    RUN(json_depth);
    return test_report(argv[0]);
}
