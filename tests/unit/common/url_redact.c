/* Unit tests for common/url_redact.c: the userinfo removed (with a percent-encoded
 * "@" inside, with no password, empty), the query replaced by "?REDACTED" and the
 * fragment removed, an "@" in the path or the query kept where it is, IPv6 hosts and
 * ports, no scheme, a scheme without slashes, idempotence, and a small buffer. */
#include <string.h>

#include "test.h"
#include "url_redact.h"

static char out[256];

static const char *redact(const char *url)
{
    memset(out, 'x', sizeof out);
    (void)tg_url_redact(url, out, sizeof out);
    return out;
}

TEST(test_userinfo)
{
    CHECK_STR(redact("http://user:secret@host/path"), "http://host/path");
    CHECK_STR(redact("https://user@host:8443/a/b.safetensors"),
              "https://host:8443/a/b.safetensors");
    CHECK_STR(redact("http://@host/p"), "http://host/p");
    CHECK_STR(redact("http://:secret@host/p"), "http://host/p");
    /* a percent-encoded "@" in the userinfo, and a raw one: the last "@" ends it */
    CHECK_STR(redact("http://us%40er:pa%40ss@host/p"), "http://host/p");
    CHECK_STR(redact("http://user:pa@ss@host/p"), "http://host/p");
    CHECK_STR(redact("HTTP://User:Secret@Host"), "HTTP://Host");
    CHECK(tg_url_redact("http://u:p@h/x", out, sizeof out));
}

TEST(test_query_fragment)
{
    CHECK_STR(redact("http://host/path?token=abc"), "http://host/path?REDACTED");
    CHECK_STR(redact("http://host/path?a=1&X-Amz-Signature=f00d"), "http://host/path?REDACTED");
    CHECK_STR(redact("http://u:p@host/p?token=abc#frag"), "http://host/p?REDACTED");
    CHECK_STR(redact("http://host/p#secret"), "http://host/p");
    CHECK_STR(redact("http://host/p?"), "http://host/p");
    CHECK_STR(redact("http://host/p?#x"), "http://host/p");
    CHECK_STR(redact("http://host?token=abc"), "http://host?REDACTED");
    /* an "@" after the authority is not userinfo */
    CHECK_STR(redact("http://host/a@b/c"), "http://host/a@b/c");
    CHECK_STR(redact("http://host?x=a@b"), "http://host?REDACTED");
    CHECK_STR(redact("http://host#a@b"), "http://host");
}

TEST(test_hosts)
{
    CHECK_STR(redact("http://u:p@[::1]:8080/x?k=v"), "http://[::1]:8080/x?REDACTED");
    CHECK_STR(redact("http://[2001:db8::1]/x"), "http://[2001:db8::1]/x");
    CHECK_STR(redact("http://u:p@127.0.0.1:9/x"), "http://127.0.0.1:9/x");
}

TEST(test_odd_forms)
{
    /* no scheme, a scheme-relative URL, a scheme without slashes, backslashes */
    CHECK_STR(redact("secret@host/p?t=1"), "host/p?REDACTED");
    /* "user:" reads as a scheme: what follows up to the "@" goes, the secret with it */
    CHECK_STR(redact("user:secret@host/p?t=1"), "user:host/p?REDACTED");
    CHECK_STR(redact("//user:secret@host/p"), "//host/p");
    CHECK_STR(redact("http:user:secret@host/p"), "http:host/p");
    CHECK_STR(redact("http:\\\\user:secret@host\\p"), "http:\\\\host\\p");
    CHECK_STR(redact(""), "");
    CHECK_STR(redact("http://"), "http://");
    CHECK_STR(redact("http://u:p@"), "http://");
}

TEST(test_unchanged_and_idempotent)
{
    static const char *const urls[] = {"http://host/p", "https://h:1/a/b.json",
                                       "http://u:p@h/p?t=1#f", "x:y@z?q"};
    CHECK(!tg_url_redact("http://host/p", out, sizeof out));
    CHECK(!tg_url_redact("http://host/p?REDACTED", out, sizeof out));
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        char once[256], twice[256];
        (void)tg_url_redact(urls[i], once, sizeof once);
        CHECK(!tg_url_redact(once, twice, sizeof twice));
        CHECK_STR(twice, once);
    }
}

TEST(test_small_buffer)
{
    char small[20];
    /* "?REDACTED" does not fit: the query goes whole */
    (void)tg_url_redact("http://u:p@host/abcdef?t=secret", small, sizeof small);
    CHECK_STR(small, "http://host/abcdef");
    (void)tg_url_redact("http://u:p@host/abcdefghijklmnop?t=secret", small, sizeof small);
    CHECK_STR(small, "http://host/abcdefg");
    char one[1];
    (void)tg_url_redact("http://u:p@h", one, sizeof one);
    CHECK_STR(one, "");
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(test_userinfo);
    RUN(test_query_fragment);
    RUN(test_hosts);
    RUN(test_odd_forms);
    RUN(test_unchanged_and_idempotent);
    RUN(test_small_buffer);
    return test_report(argv[0]);
}
