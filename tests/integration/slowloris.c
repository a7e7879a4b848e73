/* The header deadline (--header-timeout): libmicrohttpd's own timeout is an idle
 * timeout, so a client trickling one header line every half second would otherwise
 * hold its connection for ever. With --header-timeout 2 such a client gets 408
 * request_timeout and its connection closed, a connection that sends nothing is
 * closed, a kept-alive connection that stays idle past the deadline is closed, and
 * a well-behaved client on the side is served throughout. The checks wait for the
 * closure with a generous bound (20 s for a 2 s deadline): nothing here decides on
 * how fast it happens. */
#include "harness.h"

/* Reads until the server closes, for at most bound_ms; true when it closed. */
static bool read_until_closed(int fd, it_buf *got, int bound_ms)
{
    for (int waited = 0; waited < bound_ms; waited += 100) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0)
            continue;
        char chunk[4096];
        ssize_t n = recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0)
            return n == 0 || errno == ECONNRESET;
        it_buf_append(got, chunk, (size_t)n);
    }
    return false;
}

static long long header_timeouts(void)
{
    it_response r = it_get("/metrics");
    long long n = -1;
    const char *line =
        r.body.data ? strstr((const char *)r.body.data, "\ntensorgate_header_timeouts_total ")
                    : NULL;
    if (line != NULL)
        n = atoll(line + strlen("\ntensorgate_header_timeouts_total "));
    it_response_free(&r);
    return n;
}

TEST(trickled_head_gets_408_and_close)
{
    long long before = header_timeouts();
    int fd = it_connect();
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    const char *start = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
    CHECK(it_write_all(fd, start, strlen(start)));
    /* one header line every 500 ms: never idle, never complete */
    bool closed = false;
    it_buf got = {0};
    for (int i = 0; i < 40 && !closed; i++) {
        char line[32];
        snprintf(line, sizeof line, "X-Slow-%d: a\r\n", i);
        if (send(fd, line, strlen(line), MSG_NOSIGNAL) < 0) {
            closed = true;
            break;
        }
        closed = read_until_closed(fd, &got, 500);
    }
    if (!closed)
        closed = read_until_closed(fd, &got, 2000);
    CHECK(closed);
    CHECK(got.data != NULL && strncmp((const char *)got.data, "HTTP/1.1 408", 12) == 0);
    CHECK(got.data != NULL && strstr((const char *)got.data, "\"reason\":\"request_timeout\""));
    it_buf_free(&got);
    close(fd);
    CHECK(header_timeouts() >= before + 1);
}

TEST(silent_connection_closed)
{
    int fd = it_connect();
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    it_buf got = {0};
    CHECK(read_until_closed(fd, &got, 20000));
    CHECK_EQ_U64(got.len, 0); /* nothing was asked, nothing is answered */
    it_buf_free(&got);
    close(fd);
}

TEST(kept_alive_connection_served_then_closed_when_idle)
{
    int fd = it_connect();
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    const char *request = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    it_buf got = {0};
    for (int i = 0; i < 3; i++) { /* well within the deadline each time */
        CHECK(it_write_all(fd, request, strlen(request)));
        char reply[4096];
        size_t n = it_read_some(fd, reply, sizeof reply, 5000);
        CHECK(n > 12 && strncmp(reply, "HTTP/1.1 200", 12) == 0);
    }
    CHECK(read_until_closed(fd, &got, 20000));
    CHECK_EQ_U64(got.len, 0); /* an idle wait between requests is closed without an answer */
    it_buf_free(&got);
    close(fd);
}

TEST(others_served_beside_slow_heads)
{
    int slow[8];
    for (int i = 0; i < 8; i++) {
        slow[i] = it_connect();
        const char *start = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-a: ";
        if (slow[i] >= 0)
            (void)it_write_all(slow[i], start, strlen(start));
    }
    for (int i = 0; i < 20; i++) {
        it_response r = it_get("/healthz");
        CHECK_STATUS(r, 200);
        it_response_free(&r);
    }
    for (int i = 0; i < 8; i++) {
        if (slow[i] < 0)
            continue;
        it_buf got = {0};
        CHECK(read_until_closed(slow[i], &got, 20000));
        it_buf_free(&got);
        close(slow[i]);
    }
}

int main(int argc, char **argv)
{
    static const char *const flags[] = {"--header-timeout", "2", NULL};
    it_init(argc, argv, flags);
    RUN(trickled_head_gets_408_and_close);
    RUN(silent_connection_closed);
    RUN(kept_alive_connection_served_then_closed_when_idle);
    RUN(others_served_beside_slow_heads);
    return it_finish(argv[0]);
}
