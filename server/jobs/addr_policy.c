/* The address policy of imports (see addr_policy.h). */
#include "addr_policy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool prefix_match(const uint8_t a[16], const uint8_t b[16], unsigned prefix)
{
    unsigned whole = prefix / 8, rest = prefix % 8;
    if (memcmp(a, b, whole) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xFFu << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

static void mapped_v4(const uint8_t v4[4], uint8_t out[16])
{
    memset(out, 0, 16);
    out[10] = out[11] = 0xFF;
    memcpy(out + 12, v4, 4);
}

int tg_cidr_parse(const char *text, tg_cidr *out)
{
    char buf[64];
    size_t len = strlen(text);
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, text, len + 1);
    char *slash = strchr(buf, '/');
    long prefix = -1;
    if (slash != NULL) {
        *slash = '\0';
        const char *digits = slash + 1;
        if (*digits < '0' || *digits > '9' || strlen(digits) > 3)
            return -1;
        char *end = NULL;
        prefix = strtol(digits, &end, 10);
        if (*end != '\0')
            return -1;
    }
    uint8_t v4[4];
    memset(out, 0, sizeof *out);
    if (inet_pton(AF_INET, buf, v4) == 1) {
        if (prefix > 32)
            return -1;
        mapped_v4(v4, out->addr);
        out->prefix = (unsigned)(prefix < 0 ? 32 : prefix) + 96;
    } else if (inet_pton(AF_INET6, buf, out->addr) == 1) {
        if (prefix > 128)
            return -1;
        out->prefix = (unsigned)(prefix < 0 ? 128 : prefix);
    } else {
        return -1;
    }
    /* no host bits past the prefix */
    for (unsigned bit = out->prefix; bit < 128; bit++)
        if (out->addr[bit / 8] & (0x80u >> (bit % 8)))
            return -1;
    return 0;
}

bool tg_cidr_is_v4(const tg_cidr *cidr)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    return cidr->prefix >= 96 && memcmp(cidr->addr, mapped, 12) == 0;
}

int tg_addr_policy_allow(tg_addr_policy *policy, const char *cidr)
{
    if (policy->allow_count >= TG_ADDR_ALLOW_MAX)
        return -1;
    tg_cidr parsed;
    if (tg_cidr_parse(cidr, &parsed) != 0)
        return -1;
    policy->allow[policy->allow_count++] = parsed;
    return 0;
}

/* The forbidden IPv4 ranges (network, prefix, name). */
typedef struct v4_range {
    uint32_t net;
    unsigned prefix;
    const char *name;
} v4_range;

static const v4_range v4_forbidden[] = {
    {0x00000000u, 8, "unspecified"}, /* 0.0.0.0/8 "this network" */
    {0x0A000000u, 8, "private"},     /* 10.0.0.0/8 */
    {0x64400000u, 10, "cgnat"},      /* 100.64.0.0/10 */
    {0x7F000000u, 8, "loopback"},    /* 127.0.0.0/8 */
    {0xA9FEA9FEu, 32, "metadata"},   /* 169.254.169.254 */
    {0xA9FE0000u, 16, "link-local"}, /* 169.254.0.0/16 */
    {0xAC100000u, 12, "private"},    /* 172.16.0.0/12 */
    {0xC0000000u, 24, "reserved"},   /* 192.0.0.0/24 IETF protocol assignments */
    {0xC0A80000u, 16, "private"},    /* 192.168.0.0/16 */
    {0xC6120000u, 15, "reserved"},   /* 198.18.0.0/15 benchmarking */
    {0xE0000000u, 4, "multicast"},   /* 224.0.0.0/4 */
    {0xF0000000u, 4, "reserved"},    /* 240.0.0.0/4 and the broadcast address */
};

static const char *v4_class(const uint8_t v4[4])
{
    uint32_t a = (uint32_t)v4[0] << 24 | (uint32_t)v4[1] << 16 | (uint32_t)v4[2] << 8 | v4[3];
    for (size_t i = 0; i < sizeof v4_forbidden / sizeof v4_forbidden[0]; i++) {
        uint32_t mask =
            v4_forbidden[i].prefix == 0 ? 0 : 0xFFFFFFFFu << (32 - v4_forbidden[i].prefix);
        if ((a & mask) == v4_forbidden[i].net)
            return v4_forbidden[i].name;
    }
    return NULL;
}

/* The IPv4 address an RFC 6052 NAT64 address with a prefix of prefix_bits (32, 40,
 * 48, 56, 64 or 96) embeds: 4 bytes from the prefix's end, skipping byte 8 (the
 * reserved "u" octet, bits 64..71). */
static void nat64_v4(const uint8_t a[16], unsigned prefix_bits, uint8_t v4[4])
{
    unsigned at = prefix_bits / 8;
    for (unsigned i = 0; i < 4; i++, at++) {
        if (at == 8)
            at++;
        v4[i] = a[at];
    }
}

/* The class of an IPv6 address that embeds IPv4 addresses, by those addresses (the
 * first forbidden one's class), or NULL when it embeds none or only allowed ones;
 * *embeds tells whether it is such an address at all. */
static const char *embedded_v4_class(const uint8_t a[16], bool *embeds)
{
    static const uint8_t zero[12] = {0};
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    static const uint8_t translated[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0, 0};
    static const uint8_t nat64[12] = {0, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0};
    static const uint8_t nat64_local[6] = {0, 0x64, 0xFF, 0x9B, 0, 0x01};
    static const uint8_t teredo[4] = {0x20, 0x01, 0, 0};
    *embeds = true;
    /* mapped, compatible (deprecated, ::a.b.c.d), translated (::ffff:0:a.b.c.d),
     * well-known NAT64 (64:ff9b::/96): the last 32 bits */
    if (memcmp(a, mapped, 12) == 0 || memcmp(a, zero, 12) == 0 || memcmp(a, translated, 12) == 0 ||
        memcmp(a, nat64, 12) == 0)
        return v4_class(a + 12);
    if (a[0] == 0x20 && a[1] == 0x02) /* 6to4 (2002::/16): bits 16..47 */
        return v4_class(a + 2);
    if (memcmp(a, teredo, 4) == 0) { /* Teredo (2001::/32): the server, the client */
        uint8_t client[4];
        for (int i = 0; i < 4; i++)
            client[i] = (uint8_t)(a[12 + i] ^ 0xFF);
        const char *server = v4_class(a + 4);
        return server != NULL ? server : v4_class(client);
    }
    if (memcmp(a, nat64_local, 6) == 0) {
        /* local-use NAT64 (64:ff9b:1::/48): the network's prefix length is not in the
         * address, so every RFC 6052 layout a /48 allows is judged */
        static const unsigned layouts[] = {48, 56, 64, 96};
        for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
            uint8_t v4[4];
            nat64_v4(a, layouts[i], v4);
            const char *why = v4_class(v4);
            if (why != NULL)
                return why;
        }
        return NULL;
    }
    *embeds = false;
    return NULL;
}

static const char *v6_class(const uint8_t a[16])
{
    static const uint8_t zero[16] = {0};
    static const uint8_t metadata[16] = {0xFD, 0, 0x0E, 0xC2, 0, 0, 0,    0,
                                         0,    0, 0,    0,    0, 0, 0x02, 0x54};
    if (memcmp(a, zero, 16) == 0)
        return "unspecified";
    if (memcmp(a, zero, 15) == 0 && a[15] == 1)
        return "loopback";
    bool embeds = false;
    const char *why = embedded_v4_class(a, &embeds);
    if (embeds)
        return why;
    if (memcmp(a, metadata, 16) == 0)
        return "metadata";
    if (a[0] == 0xFF)
        return "multicast";
    if (a[0] == 0xFE && (a[1] & 0xC0) == 0x80)
        return "link-local";
    if (a[0] == 0xFE && (a[1] & 0xC0) == 0xC0)
        return "site-local"; /* fec0::/10, deprecated */
    if ((a[0] & 0xFE) == 0xFC)
        return "unique-local";
    return NULL;
}

static const char *judge(const tg_addr_policy *policy, const uint8_t a[16])
{
    for (size_t i = 0; policy != NULL && i < policy->allow_count; i++)
        if (prefix_match(a, policy->allow[i].addr, policy->allow[i].prefix))
            return NULL;
    return v6_class(a);
}

const char *tg_addr_forbidden(const tg_addr_policy *policy, const struct sockaddr *addr,
                              size_t addr_len)
{
    uint8_t a[16];
    if (addr == NULL)
        return "family";
    if (addr->sa_family == AF_INET && addr_len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in in;
        memcpy(&in, addr, sizeof in);
        uint8_t v4[4];
        memcpy(v4, &in.sin_addr, 4);
        mapped_v4(v4, a);
    } else if (addr->sa_family == AF_INET6 && addr_len >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 in6;
        memcpy(&in6, addr, sizeof in6);
        memcpy(a, &in6.sin6_addr, 16);
    } else {
        return "family";
    }
    return judge(policy, a);
}

const char *tg_addr_text_forbidden(const tg_addr_policy *policy, const char *text)
{
    uint8_t a[16], v4[4];
    if (inet_pton(AF_INET, text, v4) == 1)
        mapped_v4(v4, a);
    else if (inet_pton(AF_INET6, text, a) != 1)
        return "invalid";
    return judge(policy, a);
}

bool tg_addr_policy_lists(const tg_addr_policy *policy, const char *text)
{
    uint8_t a[16], v4[4];
    if (inet_pton(AF_INET, text, v4) == 1)
        mapped_v4(v4, a);
    else if (inet_pton(AF_INET6, text, a) != 1)
        return false;
    for (size_t i = 0; i < policy->allow_count; i++)
        if (prefix_match(a, policy->allow[i].addr, policy->allow[i].prefix))
            return true;
    return false;
}
