/* Per-client request rate limit: one token bucket per client IP address. */
#ifndef TG_RATE_LIMIT_H
#define TG_RATE_LIMIT_H

#include <stddef.h>

/* Takes one request from client's bucket (rate tokens per second, at most burst
 * held; burst 0 means twice the rate). Returns 0 when the request may go on, else
 * the whole seconds until a token is back (at least 1), for Retry-After. */
unsigned tg_rate_limit_take(const char *client, unsigned rate, unsigned burst);

/* The bucket key of a client address: the address itself, or for IPv6 its /64
 * ("2001:db8:1:2::/64"). */
void tg_rate_limit_key(const char *client, char *key, size_t key_len);

#endif
