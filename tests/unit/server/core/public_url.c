/* Unit tests for server/core/public_url.c: host[:port] checks, --public-url
 * normalisation, and the origin a trusted proxy forwards (Forwarded, X-Forwarded-*). */
#include <stdlib.h>

#include "addr_policy.h"
#include "public_url.h"
#include "test.h"

TEST(host_port)
{
    CHECK(tg_host_port_valid("models.example.com"));
    CHECK(tg_host_port_valid("127.0.0.1:8080"));
    CHECK(tg_host_port_valid("[::1]:8080"));
    CHECK(tg_host_port_valid("[::1]"));
    CHECK(!tg_host_port_valid(""));
    CHECK(!tg_host_port_valid(NULL));
    CHECK(!tg_host_port_valid("user@host"));
    CHECK(!tg_host_port_valid("host:"));
    CHECK(!tg_host_port_valid("host:123456"));
    CHECK(!tg_host_port_valid("host:80x"));
    CHECK(!tg_host_port_valid("ho st"));
    CHECK(!tg_host_port_valid("host/path"));
    CHECK(!tg_host_port_valid("[]:80"));
    CHECK(!tg_host_port_valid("[::1"));
    CHECK(!tg_host_port_valid("evil\r\nX: y"));
    char long_host[300];
    memset(long_host, 'a', sizeof long_host - 1);
    long_host[sizeof long_host - 1] = '\0';
    CHECK(!tg_host_port_valid(long_host));
}

TEST(public_url)
{
    char out[TG_PUBLIC_URL_MAX], err[256];
    CHECK(tg_public_url_normalize("https://models.example.com", out, sizeof out, err, sizeof err) ==
          0);
    CHECK_STR(out, "https://models.example.com");
    CHECK(tg_public_url_normalize("HTTP://h:8090/tg/", out, sizeof out, err, sizeof err) == 0);
    CHECK_STR(out, "http://h:8090/tg");
    CHECK(tg_public_url_normalize("https://[2001:db8::1]:443/a/b", out, sizeof out, err,
                                  sizeof err) == 0);
    CHECK_STR(out, "https://[2001:db8::1]:443/a/b");
    CHECK(tg_public_url_normalize("ftp://h", out, sizeof out, err, sizeof err) == -1);
    CHECK(strstr(err, "http://") != NULL);
    CHECK(tg_public_url_normalize("h:8080", out, sizeof out, err, sizeof err) == -1);
    CHECK(tg_public_url_normalize("https://", out, sizeof out, err, sizeof err) == -1);
    CHECK(tg_public_url_normalize("https://u:p@h/", out, sizeof out, err, sizeof err) == -1);
    CHECK(strstr(err, "host[:port]") != NULL);
    CHECK(tg_public_url_normalize("https://h/tg?x=1", out, sizeof out, err, sizeof err) == -1);
    CHECK(strstr(err, "query") != NULL);
    CHECK(tg_public_url_normalize("https://h/t g", out, sizeof out, err, sizeof err) == -1);
    CHECK(tg_public_url_normalize("https://h:99999", out, sizeof out, err, sizeof err) == -1);
    char small[16];
    CHECK(tg_public_url_normalize("https://models.example.com/x", small, sizeof small, err,
                                  sizeof err) == -1);
}

TEST(forwarded)
{
    char proto[6] = "http", host[TG_HOST_PORT_MAX] = "";
    tg_forwarded_origin("for=10.0.0.1;proto=https;host=\"models.example.com\"", "http", "x", NULL,
                        proto, host);
    CHECK_STR(proto, "https");
    CHECK_STR(host, "models.example.com");
    /* the last element is the one the trusted proxy added */
    snprintf(proto, sizeof proto, "http");
    host[0] = '\0';
    tg_forwarded_origin("host=evil.example, proto=https;host=a.example:8443", NULL, NULL, NULL,
                        proto, host);
    CHECK_STR(proto, "https");
    CHECK_STR(host, "a.example:8443");
    /* X-Forwarded-*: the port is added unless the host has one or it is the default */
    snprintf(proto, sizeof proto, "http");
    host[0] = '\0';
    tg_forwarded_origin(NULL, "https", "a.example", "8443", proto, host);
    CHECK_STR(proto, "https");
    CHECK_STR(host, "a.example:8443");
    host[0] = '\0';
    tg_forwarded_origin(NULL, "https", "a.example", "443", proto, host);
    CHECK_STR(host, "a.example");
    host[0] = '\0';
    tg_forwarded_origin(NULL, NULL, "evil.example, a.example:9000", "80", proto, host);
    CHECK_STR(host, "a.example:9000");
    /* what is not a scheme or a host is ignored */
    snprintf(proto, sizeof proto, "http");
    snprintf(host, sizeof host, "kept:1");
    tg_forwarded_origin(NULL, "javascript", "a b", "1", proto, host);
    CHECK_STR(proto, "http");
    CHECK_STR(host, "kept:1");
    tg_forwarded_origin("proto=gopher;host=\"x/y\"", NULL, NULL, NULL, proto, host);
    CHECK_STR(proto, "http");
    CHECK_STR(host, "kept:1");
    tg_forwarded_origin(NULL, NULL, NULL, NULL, proto, host);
    CHECK_STR(host, "kept:1");
}

/* --trusted-proxy lists: an address inside one of the CIDRs, whatever its range */
TEST(trusted_lists)
{
    tg_addr_policy policy = {0};
    CHECK(!tg_addr_policy_lists(&policy, "127.0.0.1"));
    CHECK(tg_addr_policy_allow(&policy, "127.0.0.1/32") == 0);
    CHECK(tg_addr_policy_allow(&policy, "fd00::/8") == 0);
    CHECK(tg_addr_policy_lists(&policy, "127.0.0.1"));
    CHECK(!tg_addr_policy_lists(&policy, "127.0.0.2"));
    CHECK(tg_addr_policy_lists(&policy, "fd12::1"));
    CHECK(!tg_addr_policy_lists(&policy, "8.8.8.8"));
    CHECK(!tg_addr_policy_lists(&policy, "unknown"));
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(host_port);
    RUN(public_url);
    RUN(forwarded);
    RUN(trusted_lists);
    return test_report(argv[0]);
}
