/* Unit tests for server/jobs/addr_policy.c: every forbidden range in both families,
 * IPv4-mapped, -compatible, -translated, NAT64 (well-known
 * and local-use), 6to4 and Teredo forms, the metadata addresses, public addresses
 * allowed, CIDR parsing (good and bad), and allowed CIDRs taking precedence. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "addr_policy.h"
#include "test.h"

static const char *text(const tg_addr_policy *p, const char *a)
{
    const char *r = tg_addr_text_forbidden(p, a);
    return r ? r : "allowed";
}

TEST(test_default_v4)
{
    tg_addr_policy p = {0};
    CHECK_STR(text(&p, "127.0.0.1"), "loopback");
    CHECK_STR(text(&p, "127.255.255.254"), "loopback");
    CHECK_STR(text(&p, "0.0.0.0"), "unspecified");
    CHECK_STR(text(&p, "10.0.0.1"), "private");
    CHECK_STR(text(&p, "172.16.0.1"), "private");
    CHECK_STR(text(&p, "172.31.255.255"), "private");
    CHECK_STR(text(&p, "172.32.0.1"), "allowed");
    CHECK_STR(text(&p, "192.168.1.1"), "private");
    CHECK_STR(text(&p, "100.64.0.1"), "cgnat");
    CHECK_STR(text(&p, "100.127.255.255"), "cgnat");
    CHECK_STR(text(&p, "100.128.0.0"), "allowed");
    CHECK_STR(text(&p, "169.254.169.254"), "metadata");
    CHECK_STR(text(&p, "169.254.1.1"), "link-local");
    CHECK_STR(text(&p, "224.0.0.1"), "multicast");
    CHECK_STR(text(&p, "239.255.255.250"), "multicast");
    CHECK_STR(text(&p, "255.255.255.255"), "reserved");
    CHECK_STR(text(&p, "8.8.8.8"), "allowed");
    CHECK_STR(text(&p, "1.1.1.1"), "allowed");
    CHECK_STR(text(&p, "not an address"), "invalid");
}

TEST(test_default_v6)
{
    tg_addr_policy p = {0};
    CHECK_STR(text(&p, "::"), "unspecified");
    CHECK_STR(text(&p, "::1"), "loopback");
    CHECK_STR(text(&p, "fe80::1"), "link-local");
    CHECK_STR(text(&p, "febf::1"), "link-local");
    CHECK_STR(text(&p, "fc00::1"), "unique-local");
    CHECK_STR(text(&p, "fdff::1"), "unique-local");
    CHECK_STR(text(&p, "fd00:ec2::254"), "metadata");
    CHECK_STR(text(&p, "ff02::1"), "multicast");
    CHECK_STR(text(&p, "2001:4860:4860::8888"), "allowed");
    /* IPv4 inside IPv6 */
    CHECK_STR(text(&p, "::ffff:127.0.0.1"), "loopback");
    CHECK_STR(text(&p, "::ffff:10.1.2.3"), "private");
    CHECK_STR(text(&p, "::ffff:169.254.169.254"), "metadata");
    CHECK_STR(text(&p, "::ffff:100.64.0.1"), "cgnat");
    CHECK_STR(text(&p, "::ffff:8.8.8.8"), "allowed");
    CHECK_STR(text(&p, "::127.0.0.1"), "loopback");
    CHECK_STR(text(&p, "64:ff9b::a9fe:a9fe"), "metadata");
    CHECK_STR(text(&p, "64:ff9b::808:808"), "allowed");
}

/* IPv6 forms that embed IPv4 addresses are judged by those addresses only. */
TEST(test_embedded_v4)
{
    tg_addr_policy p = {0};
    /* IPv4-translated, ::ffff:0:a.b.c.d */
    CHECK_STR(text(&p, "::ffff:0:127.0.0.1"), "loopback");
    CHECK_STR(text(&p, "::ffff:0:a9fe:a9fe"), "metadata");
    CHECK_STR(text(&p, "::ffff:0:10.0.0.1"), "private");
    CHECK_STR(text(&p, "::ffff:0:8.8.8.8"), "allowed");
    /* 6to4, 2002:AABB:CCDD::/48 */
    CHECK_STR(text(&p, "2002:7f00:1::1"), "loopback");
    CHECK_STR(text(&p, "2002:a9fe:a9fe::"), "metadata");
    CHECK_STR(text(&p, "2002:c0a8:0101::1"), "private");
    CHECK_STR(text(&p, "2002:0a00:0001:1234::1"), "private");
    CHECK_STR(text(&p, "2002:808:808::1"), "allowed");
    /* well-known NAT64 */
    CHECK_STR(text(&p, "64:ff9b::127.0.0.1"), "loopback");
    CHECK_STR(text(&p, "64:ff9b::10.0.0.1"), "private");
    /* local-use NAT64 64:ff9b:1::/48, every layout: /96, /64, /56, /48 */
    CHECK_STR(text(&p, "64:ff9b:1::808:808"), "unspecified");             /* /48: 0.0.0.0 */
    CHECK_STR(text(&p, "64:ff9b:1:808:7f:0:108:808"), "loopback");        /* /64 */
    CHECK_STR(text(&p, "64:ff9b:1:0808:0008:0800:0a00:0001"), "private"); /* /96 */
    CHECK_STR(text(&p, "64:ff9b:1:0808:0008:0800:0808:0808"), "allowed");
    CHECK_STR(text(&p, "64:ff9b:1:7f00:0000:0100:0808:0808"), "loopback"); /* /48 */
    CHECK_STR(text(&p, "64:ff9b:1:08a9:00fe:a9fe:0808:0808"), "metadata"); /* /56 */
    /* Teredo 2001:0:SERVER:flags:port:~CLIENT */
    CHECK_STR(text(&p, "2001:0:808:808:8000:ffff:80ff:fffe"), "loopback");   /* client 127.0.0.1 */
    CHECK_STR(text(&p, "2001:0:a9fe:a9fe:8000:ffff:f7f7:f7f7"), "metadata"); /* server */
    CHECK_STR(text(&p, "2001:0:808:808:8000:ffff:f5ff:fffe"), "private");    /* client 10.0.0.1 */
    CHECK_STR(text(&p, "2001:0:808:808:8000:ffff:f7f7:f7f7"), "allowed");    /* both 8.8.8.8 */
    /* neighbours of those prefixes stay ordinary unicast */
    CHECK_STR(text(&p, "2001:1::7f00:1"), "allowed");
    CHECK_STR(text(&p, "2003::7f00:1"), "allowed");
    CHECK_STR(text(&p, "64:ff9b:2::7f00:1"), "allowed");
    /* an allowed CIDR still takes precedence */
    CHECK(tg_addr_policy_allow(&p, "2002:7f00:1::/48") == 0);
    CHECK_STR(text(&p, "2002:7f00:1::1"), "allowed");
}

TEST(test_sockaddr)
{
    tg_addr_policy p = {0};
    struct sockaddr_in in = {.sin_family = AF_INET};
    CHECK(inet_pton(AF_INET, "127.0.0.1", &in.sin_addr) == 1);
    CHECK_STR(tg_addr_forbidden(&p, (struct sockaddr *)&in, sizeof in), "loopback");
    CHECK(inet_pton(AF_INET, "93.184.216.34", &in.sin_addr) == 1);
    CHECK(tg_addr_forbidden(&p, (struct sockaddr *)&in, sizeof in) == NULL);
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
    CHECK(inet_pton(AF_INET6, "::ffff:192.168.0.1", &in6.sin6_addr) == 1);
    CHECK_STR(tg_addr_forbidden(&p, (struct sockaddr *)&in6, sizeof in6), "private");
    CHECK_STR(tg_addr_forbidden(&p, (struct sockaddr *)&in6, sizeof in), "family"); /* short */
    struct sockaddr other = {.sa_family = AF_UNIX};
    CHECK_STR(tg_addr_forbidden(&p, &other, sizeof other), "family");
    CHECK_STR(tg_addr_forbidden(&p, NULL, 0), "family");
}

TEST(test_cidr_parse)
{
    tg_cidr c;
    CHECK(tg_cidr_parse("127.0.0.1/32", &c) == 0 && c.prefix == 128 && tg_cidr_is_v4(&c));
    CHECK(tg_cidr_parse("10.0.0.0/8", &c) == 0 && c.prefix == 104);
    CHECK(tg_cidr_parse("0.0.0.0/0", &c) == 0 && c.prefix == 96);
    CHECK(tg_cidr_parse("127.0.0.1", &c) == 0 && c.prefix == 128);
    CHECK(tg_cidr_parse("::1/128", &c) == 0 && c.prefix == 128);
    CHECK(tg_cidr_parse("::1", &c) == 0 && c.prefix == 128);
    CHECK(tg_cidr_parse("fc00::/7", &c) == 0 && c.prefix == 7 && !tg_cidr_is_v4(&c));
    CHECK(tg_cidr_parse("::/0", &c) == 0 && c.prefix == 0);
    CHECK(tg_cidr_parse("10.0.0.1/8", &c) == -1); /* host bits */
    CHECK(tg_cidr_parse("10.0.0.0/33", &c) == -1);
    CHECK(tg_cidr_parse("::/129", &c) == -1);
    CHECK(tg_cidr_parse("10.0.0.0/", &c) == -1);
    CHECK(tg_cidr_parse("10.0.0.0/-1", &c) == -1);
    CHECK(tg_cidr_parse("10.0.0.0/8x", &c) == -1);
    CHECK(tg_cidr_parse("10.0.0/8", &c) == -1);
    CHECK(tg_cidr_parse("", &c) == -1);
    CHECK(tg_cidr_parse("localhost", &c) == -1);
    CHECK(tg_cidr_parse("1.2.3.4/0008", &c) == -1);
}

TEST(test_allow)
{
    tg_addr_policy p = {0};
    CHECK(tg_addr_policy_allow(&p, "127.0.0.1/32") == 0);
    CHECK(tg_addr_policy_allow(&p, "fd00::/8") == 0);
    CHECK(tg_addr_policy_allow(&p, "bad") == -1);
    CHECK_STR(text(&p, "127.0.0.1"), "allowed");
    CHECK_STR(text(&p, "::ffff:127.0.0.1"), "allowed"); /* the same address, mapped */
    CHECK_STR(text(&p, "127.0.0.2"), "loopback");
    CHECK_STR(text(&p, "::1"), "loopback");
    CHECK_STR(text(&p, "fd12::1"), "allowed");
    CHECK_STR(text(&p, "fc00::1"), "unique-local");
    CHECK_STR(text(&p, "169.254.169.254"), "metadata");
    tg_addr_policy full = {0};
    for (int i = 0; i < TG_ADDR_ALLOW_MAX; i++)
        CHECK(tg_addr_policy_allow(&full, "10.0.0.0/8") == 0);
    CHECK(tg_addr_policy_allow(&full, "10.0.0.0/8") == -1);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(test_default_v4);
    RUN(test_default_v6);
    RUN(test_embedded_v4);
    RUN(test_sockaddr);
    RUN(test_cidr_parse);
    RUN(test_allow);
    return test_report(argv[0]);
}
