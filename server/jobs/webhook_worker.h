/* Webhook delivery: the worker threads that send the catalog's pending webhook
 * deliveries (catalog.h, schema 12) and the pure pieces they are made of (the
 * signature, the body, the backoff, Retry-After), which the unit test checks alone.
 *
 * A worker claims one due delivery at a time under a lease
 * (tg_catalog_webhook_claim: replicas sharing a PostgreSQL catalog never claim the
 * same one at once), POSTs it with libcurl and records the outcome: a 2xx answer
 * delivers it; anything else (another status, a refused or failed connection, a
 * timeout, an address the policy forbids) is retried after an exponential backoff
 * (base * 2^(attempt-1), at most the cap; a Retry-After in seconds or as an
 * HTTP-date lengthens it, up to an hour), with the same event id, until
 * max_attempts have failed: then the delivery fails for good, and a subscription
 * whose max_failures deliveries in a row failed is disabled. Each request is signed
 * the Standard Webhooks way (webhook-id, webhook-timestamp, webhook-signature) and
 * carries the secret in X-Webhook-Secret (the Hugging Face Hub's way). Targets are
 * judged by the address policy of imports at every connect (addr_policy.h). */
#ifndef TG_WEBHOOK_WORKER_H
#define TG_WEBHOOK_WORKER_H

#include "addr_policy.h"
#include "catalog.h"

#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef struct tg_webhook_config {
    tg_catalog *catalog;
    tg_addr_policy policy;   /* --import-allow */
    unsigned workers;        /* threads; 0: none start */
    unsigned max_attempts;   /* sends of one delivery before it fails */
    unsigned max_failures;   /* failed deliveries in a row that disable a subscription; 0: never */
    unsigned backoff_ms;     /* the first retry's delay */
    unsigned backoff_max_ms; /* the longest */
    unsigned timeout;        /* seconds one request may take */
    unsigned poll_ms;        /* how often an idle worker looks for due deliveries */
} tg_webhook_config;

/* Starts config->workers threads (after tg_catalog_webhook_recover). 0, or -1
 * with err. curl_global_init must have run. */
int tg_webhooks_start(const tg_webhook_config *config, char *err, size_t err_len);
/* Stops and joins them (a request in flight ends within its timeout). */
void tg_webhooks_stop(void);
/* Wakes an idle worker (a route that made a delivery due: a ping, a redelivery). */
void tg_webhooks_wake(void);

/* The body of a delivery: {"id","type","timestamp","namespace","data"}; its
 * length, or 0 when out (len bytes) is too small. */
size_t tg_webhook_body(const tg_webhook_send *send, char *out, size_t len);
/* "v1," and the base64 of HMAC-SHA256(secret, id "." timestamp "." body): the
 * webhook-signature header's value. 0, or -1 when out is too small. */
int tg_webhook_signature(const char *secret, const char *id, long long timestamp, const char *body,
                         size_t body_len, char *out, size_t len);
/* The delay after the attempt-th failed send: base * 2^(attempt-1), at most cap. */
int64_t tg_webhook_backoff_ms(unsigned attempt, unsigned base_ms, unsigned cap_ms);
/* A Retry-After value: delay-seconds or an HTTP-date (against now), in
 * milliseconds, at most an hour; -1 when absent or unreadable. */
int64_t tg_webhook_retry_after_ms(const char *value, time_t now);

#endif
