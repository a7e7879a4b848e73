/* Unit tests for server/core/response_cache.c: keys; a shared response answered by
 * an in-process daemon (127.0.0.1, port 0) is byte for byte the answer built for the
 * first request (body, status, headers; GET and HEAD; many requests at once on many
 * connections); invalidation (an entry made before it is not served, a put whose
 * reads began before it is not kept); moving keys (dropped by a publish or an alias
 * move, and after a second at most); the TTL; the byte budget (LRU eviction);
 * a disabled (NULL or 0-byte) cache answers nothing. */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http.h"
#include "response_cache.h"
#include "test.h"

static tg_server server;
static int builds; /* answers built by the route (atomic) */

/* GET /t/{id} (GET /m/{id}: under a moving key): from the cache, else built ("body of
 * {id}" + X-Id header) and kept. */
static void answer(tg_request *req, bool moving)
{
    const char *id = tg_param(req, "id");
    const char *parts[] = {"t", id};
    char key[128];
    uint64_t generation = tg_response_cache_generation(server.responses);
    if (!(moving ? tg_response_cache_moving_key(key, sizeof key, parts, 2)
                 : tg_response_cache_key(key, sizeof key, parts, 2))) {
        tg_respond_empty(req, 400);
        return;
    }
    if (tg_respond_cached(req, key))
        return;
    __atomic_fetch_add(&builds, 1, __ATOMIC_RELAXED);
    char body[256];
    int len = snprintf(body, sizeof body, "{\"body of\":\"%s\"}\n", id);
    const char *headers[] = {"Content-Type", "application/json", "X-Id", id, NULL};
    tg_response_cache_put(server.responses, key, generation, 200, body, (size_t)len, headers);
    struct MHD_Response *response =
        MHD_create_response_from_buffer((size_t)len, body, MHD_RESPMEM_MUST_COPY);
    if (response != NULL) {
        MHD_add_response_header(response, "Content-Type", "application/json");
        MHD_add_response_header(response, "X-Id", id);
    }
    tg_respond(req, 200, response, (uint64_t)len);
}

static void cached_route(tg_request *req)
{
    answer(req, false);
}

static void moving_route(tg_request *req)
{
    answer(req, true);
}

static const tg_route routes[] = {
    {"GET", "/t/{id}", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, cached_route, NULL, NULL, NULL},
    {"GET", "/m/{id}", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, moving_route, NULL, NULL, NULL},
};

typedef struct reply {
    long status;
    char body[4096];
    size_t body_len;
    char headers[4096];
    size_t headers_len;
} reply;

static size_t take(char *data, size_t size, size_t count, void *ctx, char *buf, size_t *len)
{
    (void)ctx;
    size_t n = size * count;
    size_t room = 4095 - *len;
    size_t k = n < room ? n : room;
    memcpy(buf + *len, data, k);
    *len += k;
    buf[*len] = '\0';
    return n;
}
static size_t take_body(char *d, size_t s, size_t c, void *ctx)
{
    reply *r = ctx;
    return take(d, s, c, ctx, r->body, &r->body_len);
}
/* keeps every header line but Date (it moves with the clock) */
static size_t take_header(char *d, size_t s, size_t c, void *ctx)
{
    reply *r = ctx;
    if (s * c >= 5 && strncasecmp(d, "Date:", 5) == 0)
        return s * c;
    return take(d, s, c, ctx, r->headers, &r->headers_len);
}

static void fetch(const char *method, const char *path, reply *r)
{
    memset(r, 0, sizeof *r);
    CURL *curl = curl_easy_init();
    if (curl == NULL) {
        r->status = -1;
        return;
    }
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", server.port, path);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, take_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, take_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, r);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    if (curl_easy_perform(curl) == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r->status);
    else
        r->status = -1;
    curl_easy_cleanup(curl);
}

static bool same(const reply *a, const reply *b)
{
    return a->status == b->status && a->body_len == b->body_len &&
           memcmp(a->body, b->body, a->body_len) == 0 && strcmp(a->headers, b->headers) == 0;
}

TEST(keys)
{
    char key[16];
    const char *two[] = {"ab", "cd"};
    CHECK(tg_response_cache_key(key, sizeof key, two, 2));
    CHECK_STR(key, "ab\ncd");
    const char *newline[] = {"a\nb", "c"};
    CHECK(!tg_response_cache_key(key, sizeof key, newline, 2));
    const char *long_part[] = {"0123456789abcdef"};
    CHECK(!tg_response_cache_key(key, sizeof key, long_part, 1));
    const char *with_null[] = {"x", NULL};
    CHECK(tg_response_cache_key(key, sizeof key, with_null, 2));
    CHECK_STR(key, "x\n");
    /* a moving key: the same, behind a separator no plain key starts with */
    CHECK(tg_response_cache_moving_key(key, sizeof key, two, 2));
    CHECK_STR(key, "\nab\ncd");
    CHECK(!tg_response_cache_moving_key(key, sizeof key, newline, 2));
    const char *fourteen[] = {"0123456789abcd"}; /* fits as a plain key, not with the mark */
    CHECK(tg_response_cache_key(key, sizeof key, fourteen, 1));
    CHECK(!tg_response_cache_moving_key(key, sizeof key, fourteen, 1));
    CHECK(!tg_response_cache_moving_key(key, 1, two, 2));
}

/* Answers under moving keys: dropped by a publish or alias move (invalidate_moving),
 * which leaves the plain ones; dropped by a delete like every entry; never kept when
 * built across a move; served for TG_RESPONSE_CACHE_MOVING_SECONDS at most, whatever
 * the TTL (5 s here). */
TEST(moving_entries)
{
    reply plain, moving;
    fetch("GET", "/t/p", &plain);
    fetch("GET", "/m/p", &moving);
    CHECK(same(&plain, &moving)); /* same answer, kept under two keys */
    int before = builds;
    fetch("GET", "/t/p", &plain);
    fetch("GET", "/m/p", &moving);
    CHECK_EQ_U64(builds - before, 0);
    tg_response_cache_invalidate_moving(server.responses);
    fetch("GET", "/t/p", &plain);
    CHECK_EQ_U64(builds - before, 0); /* a plain key holds */
    fetch("GET", "/m/p", &moving);
    CHECK_EQ_U64(builds - before, 1); /* the moving one was built again */
    fetch("GET", "/m/p", &moving);
    CHECK_EQ_U64(builds - before, 1);
    tg_response_cache_invalidate(server.responses);
    fetch("GET", "/t/p", &plain);
    fetch("GET", "/m/p", &moving);
    CHECK_EQ_U64(builds - before, 3); /* a delete: both */
    /* reads begun before a move: kept under a plain key, not under a moving one */
    uint64_t generation = tg_response_cache_generation(server.responses);
    tg_response_cache_invalidate_moving(server.responses);
    char key[64];
    const char *parts[] = {"t", "q"};
    CHECK(tg_response_cache_moving_key(key, sizeof key, parts, 2));
    tg_response_cache_put(server.responses, key, generation, 200, "x", 1, NULL);
    tg_response_cache_put(server.responses, "t\nq", generation, 200, "x", 1, NULL);
    before = builds;
    fetch("GET", "/m/q", &moving);
    CHECK_EQ_U64(builds - before, 1);
    fetch("GET", "/t/q", &plain);
    CHECK_EQ_U64(builds - before, 1);
    CHECK_STR(plain.body, "x");
    /* the moving bound: after it the moving answer is built again, the plain one holds */
    CHECK(server.config.response_cache_ttl > TG_RESPONSE_CACHE_MOVING_SECONDS + 1);
    fetch("GET", "/m/r", &moving);
    fetch("GET", "/t/r", &plain);
    before = builds;
    sleep(TG_RESPONSE_CACHE_MOVING_SECONDS + 1);
    fetch("GET", "/t/r", &plain);
    CHECK_EQ_U64(builds - before, 0);
    fetch("GET", "/m/r", &moving);
    CHECK_EQ_U64(builds - before, 1);
}

TEST(shared_answer_is_the_built_one)
{
    int before = builds;
    reply first, second, head_first, head_second;
    fetch("GET", "/t/a", &first);
    fetch("GET", "/t/a", &second);
    CHECK_EQ_U64(builds - before, 1); /* the second came from the cache */
    CHECK_EQ_U64(first.status, 200);
    CHECK_STR(first.body, "{\"body of\":\"a\"}\n");
    CHECK(strstr(first.headers, "X-Id: a") != NULL);
    CHECK(strstr(first.headers, "Cache-Control: no-store") != NULL);
    CHECK(same(&first, &second));
    fetch("HEAD", "/t/b", &head_first);
    fetch("HEAD", "/t/b", &head_second);
    CHECK(same(&head_first, &head_second));
    CHECK_EQ_U64(head_second.body_len, 0);
    CHECK(strstr(head_second.headers, "Content-Length: 16") != NULL);
    tg_response_cache_stats stats;
    tg_response_cache_get_stats(server.responses, &stats);
    CHECK(stats.hits >= 2);
    CHECK_EQ_U64(stats.entries, 2);
}

static void *many(void *arg)
{
    reply *want = arg;
    bool ok = true;
    for (int i = 0; i < 50; i++) {
        reply r;
        fetch("GET", "/t/a", &r);
        ok = ok && same(&r, want);
    }
    return ok ? want : NULL;
}

TEST(concurrent_hits)
{
    reply want;
    fetch("GET", "/t/a", &want);
    pthread_t threads[4];
    for (int t = 0; t < 4; t++)
        CHECK(pthread_create(&threads[t], NULL, many, &want) == 0);
    for (int t = 0; t < 4; t++) {
        void *ok = NULL;
        pthread_join(threads[t], &ok);
        CHECK(ok != NULL);
    }
}

TEST(invalidation)
{
    reply r;
    fetch("GET", "/t/c", &r);
    int before = builds;
    fetch("GET", "/t/c", &r);
    CHECK_EQ_U64(builds - before, 0);
    tg_response_cache_invalidate(server.responses);
    fetch("GET", "/t/c", &r); /* built again, kept again */
    CHECK_EQ_U64(builds - before, 1);
    fetch("GET", "/t/c", &r);
    CHECK_EQ_U64(builds - before, 1);
    /* a put whose reads began before an invalidation is not kept */
    uint64_t generation = tg_response_cache_generation(server.responses);
    tg_response_cache_invalidate(server.responses);
    tg_response_cache_put(server.responses, "t\nd", generation, 200, "x", 1, NULL);
    before = builds;
    fetch("GET", "/t/d", &r);
    CHECK_EQ_U64(builds - before, 1);
}

TEST(budget_and_ttl)
{
    /* 16 shards of 16 KiB: an entry of a 10-byte body charges ~620 bytes, one above
     * an eighth of a shard (2 KiB) is refused */
    tg_response_cache *small = tg_response_cache_create(256 * 1024, 0);
    CHECK(small != NULL);
    char body[2100];
    memset(body, 'x', sizeof body);
    tg_response_cache_put(small, "big", 0, 200, body, sizeof body, NULL);
    tg_response_cache_stats stats;
    tg_response_cache_get_stats(small, &stats);
    CHECK_EQ_U64(stats.entries, 0);
    for (int i = 0; i < 1000; i++) {
        char key[32];
        snprintf(key, sizeof key, "k%d", i);
        tg_response_cache_put(small, key, 0, 200, body, 10, NULL);
    }
    tg_response_cache_get_stats(small, &stats);
    CHECK(stats.entries > 16 && stats.entries < 1000);
    CHECK(stats.bytes <= 256 * 1024);
    tg_response_cache_destroy(small);

    tg_response_cache *none = tg_response_cache_create(0, 0);
    CHECK(none != NULL);
    tg_response_cache_put(none, "k", 0, 200, "x", 1, NULL);
    tg_response_cache_get_stats(none, &stats);
    CHECK_EQ_U64(stats.entries, 0);
    tg_response_cache_destroy(none);
    tg_response_cache_get_stats(NULL, &stats);
    CHECK_EQ_U64(stats.entries, 0);
    CHECK_EQ_U64(tg_response_cache_generation(NULL), 0);
}

TEST(ttl_expiry)
{
    /* a 1-second TTL on the server's own cache: after it the answer is built again */
    tg_response_cache *old = server.responses;
    server.responses = tg_response_cache_create(1 << 20, 1);
    CHECK(server.responses != NULL);
    reply r;
    fetch("GET", "/t/e", &r);
    int before = builds;
    fetch("GET", "/t/e", &r);
    CHECK_EQ_U64(builds - before, 0);
    sleep(2);
    fetch("GET", "/t/e", &r);
    CHECK_EQ_U64(builds - before, 1);
    tg_response_cache *mine = server.responses;
    server.responses = old;
    tg_response_cache_destroy(mine);
}

int main(int argc, char **argv)
{
    (void)argc;
    signal(SIGPIPE, SIG_IGN);
    alarm(120);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
        return 1;
    RUN(keys);
    RUN(budget_and_ttl);
    tg_config_defaults(&server.config);
    server.config.listen_port = 0;
    server.config.threads = 2;
    char err[256];
    if (tg_http_start(&server, routes, sizeof routes / sizeof routes[0], err, sizeof err) != 0) {
        fprintf(stderr, "tg_http_start: %s\n", err);
        return 1;
    }
    CHECK(server.responses != NULL); /* on by default */
    RUN(shared_answer_is_the_built_one);
    RUN(concurrent_hits);
    RUN(invalidation);
    RUN(moving_entries);
    RUN(ttl_expiry);
    tg_http_stop(&server);
    CHECK(server.responses == NULL);
    curl_global_cleanup();
    return test_report(argv[0]);
}
