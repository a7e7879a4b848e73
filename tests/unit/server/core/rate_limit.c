/* Unit tests for server/core/rate_limit.c: buckets per client, burst then refusal with
 * a Retry-After, IPv6 counted per /64, and many clients never sharing a bucket
 * while their sets have room. */
#include "rate_limit.h"
#include "test.h"

TEST(keys)
{
    char key[64];
    tg_rate_limit_key("127.0.0.1", key, sizeof key);
    CHECK_STR(key, "127.0.0.1");
    tg_rate_limit_key("2001:db8:1:2:aaaa:bbbb:cccc:dddd", key, sizeof key);
    CHECK_STR(key, "2001:db8:1:2::/64");
    tg_rate_limit_key("2001:db8:1:2::7", key, sizeof key);
    CHECK_STR(key, "2001:db8:1:2::/64");
    tg_rate_limit_key("::ffff:10.0.0.1", key, sizeof key); /* a v4 client on a v6 socket */
    CHECK_STR(key, "::ffff:10.0.0.1");
    tg_rate_limit_key("not an address", key, sizeof key);
    CHECK_STR(key, "not an address");
}

TEST(burst_then_refused)
{
    /* rate 1/s, burst 3: three at once, then a wait of about a second */
    for (int i = 0; i < 3; i++)
        CHECK_EQ_U64(tg_rate_limit_take("10.1.0.1", 1, 3), 0);
    CHECK_EQ_U64(tg_rate_limit_take("10.1.0.1", 1, 3), 1);
    /* another client has its own bucket */
    CHECK_EQ_U64(tg_rate_limit_take("10.1.0.2", 1, 3), 0);
    /* rate 0: off */
    CHECK_EQ_U64(tg_rate_limit_take("10.1.0.1", 0, 0), 0);
}

TEST(ipv6_per_64)
{
    CHECK_EQ_U64(tg_rate_limit_take("2001:db8:9::1", 1, 2), 0);
    CHECK_EQ_U64(tg_rate_limit_take("2001:db8:9::2", 1, 2), 0);
    /* a third address of the same /64 shares the bucket: refused */
    CHECK(tg_rate_limit_take("2001:db8:9::3", 1, 2) >= 1);
    CHECK_EQ_U64(tg_rate_limit_take("2001:db8:a::1", 1, 2), 0);
}

/* 2,000 clients (a quarter of the table's 8,192 buckets, so almost every set has
 * room) each spend their whole burst; a client finds its bucket refilled by
 * another's arrival only where five share a set, which is rare. */
TEST(many_clients_keep_their_buckets)
{
    char client[32];
    for (int i = 0; i < 2000; i++) {
        snprintf(client, sizeof client, "10.2.%d.%d", i / 256, i % 256);
        CHECK_EQ_U64(tg_rate_limit_take(client, 1, 1), 0);
    }
    int refused = 0;
    for (int i = 0; i < 2000; i++) {
        snprintf(client, sizeof client, "10.2.%d.%d", i / 256, i % 256);
        refused += tg_rate_limit_take(client, 1, 1) != 0;
    }
    CHECK(refused >= 1900);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(keys);
    RUN(burst_then_refused);
    RUN(ipv6_per_64);
    RUN(many_clients_keep_their_buckets);
    return test_report(argv[0]);
}
