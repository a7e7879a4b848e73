/* The server's public address: the "scheme://host[:port][/prefix]" clients reach it
 * by, for the absolute URLs it builds (the Hub routes' paging Link headers) and the
 * paths of its Location headers. In order: --public-url when set; else, for a request
 * whose peer is inside a --trusted-proxy CIDR, what that proxy says (Forwarded, RFC
 * 7239, else X-Forwarded-Proto, X-Forwarded-Host and X-Forwarded-Port); else the
 * request's Host with scheme http; else the bound address. A peer outside every
 * trusted CIDR (by default: every peer) cannot change the scheme or the host with
 * those headers. The parsers are pure functions; only tg_request_origin and
 * tg_request_public_path read a request. */
#ifndef TG_PUBLIC_URL_H
#define TG_PUBLIC_URL_H

#include <stdbool.h>
#include <stddef.h>

#define TG_PUBLIC_URL_MAX 512
#define TG_HOST_PORT_MAX 256 /* a host[:port], NUL included */

typedef struct tg_request tg_request;

/* True when text is a host[:port] a URL may carry: a DNS name or IPv4 address
 * (letters, digits, '.', '-'), or a bracketed IPv6 address, then an optional port of
 * 1..65535; shorter than TG_HOST_PORT_MAX. */
bool tg_host_port_valid(const char *text);

/* Checks a --public-url: "http://" or "https://", a host[:port] (tg_host_port_valid:
 * no user, no query, no fragment) and an optional path prefix of URL path characters.
 * Writes it to out with the scheme in lower case and without a trailing '/'; returns
 * 0, or -1 with one sentence in err. */
int tg_public_url_normalize(const char *text, char *out, size_t cap, char *err, size_t err_len);

/* The origin a proxy forwarded: from forwarded (the Forwarded header's last element:
 * proto=, host=), else x_proto, x_host and x_port (each its last comma-separated
 * value); any may be NULL. A proto other than http or https and a host that is not
 * tg_host_port_valid are ignored; x_port is added to a host that has none unless it
 * is the scheme's default. Writes "scheme" to proto (cap >= 6) and host[:port] to host
 * (cap TG_HOST_PORT_MAX), each left as it was when not given. */
void tg_forwarded_origin(const char *forwarded, const char *x_proto, const char *x_host,
                         const char *x_port, char *proto, char *host);

/* "scheme://host[:port][/prefix]" of this request (see above), at most cap - 1 bytes. */
void tg_request_origin(const tg_request *req, char *out, size_t cap);

/* path ("/v1/jobs/7") below the --public-url's prefix ("/tg/v1/jobs/7"; as it is
 * without one), for a Location header. */
void tg_request_public_path(const tg_request *req, const char *path, char *out, size_t cap);

#endif
