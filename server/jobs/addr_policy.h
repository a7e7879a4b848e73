/* The address policy of imports from a URL (server-side request forgery): which
 * peer addresses an import may connect to. By default every public unicast address
 * is allowed and these are refused: unspecified (0.0.0.0/8, ::), loopback
 * (127.0.0.0/8, ::1), link-local (169.254.0.0/16, fe80::/10, which holds the cloud
 * metadata address 169.254.169.254), private (10/8, 172.16/12, 192.168/16), CGNAT
 * (100.64.0.0/10), unique local (fc00::/7, which holds fd00:ec2::254), multicast
 * (224.0.0.0/4, ff00::/8), broadcast and reserved (240.0.0.0/4), and the same IPv4
 * ranges inside an IPv6 address: IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible
 * (::a.b.c.d), IPv4-translated (::ffff:0:a.b.c.d), NAT64 (64:ff9b::/96; the
 * local-use 64:ff9b:1::/48 in each RFC 6052 layout a /48 allows), 6to4 (2002::/16,
 * the IPv4 address in bits 16..47) and Teredo (2001::/32: the server's address in
 * bits 32..63, the client's in the last 32 bits inverted). Such an address is judged
 * by the IPv4 addresses it embeds only: forbidden when any of them is. An operator allows ranges
 * back with CIDRs
 * (--import-allow, TENSORGATE_IMPORT_ALLOW): an address inside an allowed CIDR is
 * allowed whatever its range. The check is made on the address actually connected
 * (server/jobs/import_job.c calls it from libcurl's socket-open callback, for every
 * connection, so also after redirects and against DNS rebinding). Pure functions:
 * no I/O, no globals. */
#ifndef TG_ADDR_POLICY_H
#define TG_ADDR_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define TG_ADDR_ALLOW_MAX 32

/* One CIDR: an IPv6 prefix (IPv4 CIDRs are stored mapped, prefix + 96). */
typedef struct tg_cidr {
    uint8_t addr[16];
    unsigned prefix; /* 0..128 */
} tg_cidr;

typedef struct tg_addr_policy {
    size_t allow_count;
    tg_cidr allow[TG_ADDR_ALLOW_MAX];
} tg_addr_policy;

/* Parses "a.b.c.d/n" (n 0..32), "v6/n" (n 0..128), or a bare address (/32, /128).
 * The address bits past the prefix must be zero ("10.0.0.1/8" is refused: say
 * 10.0.0.0/8). Returns 0, or -1 for anything else. */
int tg_cidr_parse(const char *text, tg_cidr *out);

/* True when cidr was written as IPv4 (an IPv4-mapped prefix of 96 bits or more):
 * its address is addr + 12, its IPv4 prefix prefix - 96. */
bool tg_cidr_is_v4(const tg_cidr *cidr);

/* Adds a CIDR to the allowed ones. Returns 0, or -1 (bad text, or full). */
int tg_addr_policy_allow(tg_addr_policy *policy, const char *cidr);

/* The name of the forbidden range an address falls in ("loopback", "private", ...),
 * or NULL when it is allowed: inside an allowed CIDR, or public unicast. addr is a
 * struct sockaddr_in or sockaddr_in6 (any other family is refused: "family"). */
const char *tg_addr_forbidden(const tg_addr_policy *policy, const struct sockaddr *addr,
                              size_t addr_len);

/* The same for a numeric address text (v4 or v6); "invalid" when it is not one. */
const char *tg_addr_text_forbidden(const tg_addr_policy *policy, const char *text);

/* True when the numeric address text (v4 or v6) is inside one of the policy's CIDRs
 * (the list alone, whatever the address's range; --trusted-proxy uses it too). */
bool tg_addr_policy_lists(const tg_addr_policy *policy, const char *text);

#endif
