/* Unit tests for the pure parts of server/jobs/webhook_worker.c: the signature
 * against values computed apart with Python's hmac module
 * (base64(HMAC-SHA256(secret, id "." timestamp "." body))), the body's members in
 * order, the backoff's doubling and cap, Retry-After as seconds and as an
 * HTTP-date, and the pool starting and stopping with no worker. The sending itself
 * is tested end to end by tests/webhooks/run.sh. */
#include <string.h>
#include <time.h>

#include "test.h"
#include "webhook_worker.h"

TEST(signature_matches_an_independent_hmac)
{
    char out[128];
    const char *body = "{\"id\":\"evt_0123\"}";
    CHECK(tg_webhook_signature("whsec_test-secret-0123456789", "evt_0123", 1700000000LL, body,
                               strlen(body), out, sizeof out) == 0);
    CHECK_STR(out, "v1,/tX8Bjv/jsWwD76nRvmUAozak4dfISkLNtb3BniuaeQ=");
    CHECK(tg_webhook_signature("k", "i", 0, "", 0, out, sizeof out) == 0);
    CHECK_STR(out, "v1,RtmmSAc6xJjUxwnKqewQA8U00lDPmzB2E1HK3vdHCW4=");
    CHECK(tg_webhook_signature("k", "i", 0, "", 0, out, 10) == -1);
}

TEST(body_has_the_documented_members)
{
    tg_webhook_send send = {0};
    snprintf(send.event_id, sizeof send.event_id, "evt_1");
    snprintf(send.type, sizeof send.type, "alias.moved");
    snprintf(send.org, sizeof send.org, "acme");
    snprintf(send.created_at, sizeof send.created_at, "2026-01-02T03:04:05Z");
    snprintf(send.data, sizeof send.data, "{\"alias\":\"prod\",\"version\":2}");
    char out[512];
    size_t n = tg_webhook_body(&send, out, sizeof out);
    CHECK_STR(out,
              "{\"id\":\"evt_1\",\"type\":\"alias.moved\",\"timestamp\":\"2026-01-02T03:04:05Z\","
              "\"namespace\":\"acme\",\"data\":{\"alias\":\"prod\",\"version\":2}}");
    CHECK_EQ_U64(n, strlen(out));
    /* data that is not an object becomes {} */
    snprintf(send.data, sizeof send.data, "[1");
    CHECK(tg_webhook_body(&send, out, sizeof out) > 0);
    CHECK(strstr(out, "\"data\":{}") != NULL);
    CHECK_EQ_U64(tg_webhook_body(&send, out, 8), 0);
}

TEST(backoff_doubles_up_to_the_cap)
{
    CHECK_EQ_U64(tg_webhook_backoff_ms(1, 1000, 60000), 1000);
    CHECK_EQ_U64(tg_webhook_backoff_ms(2, 1000, 60000), 2000);
    CHECK_EQ_U64(tg_webhook_backoff_ms(4, 1000, 60000), 8000);
    CHECK_EQ_U64(tg_webhook_backoff_ms(7, 1000, 60000), 60000);
    CHECK_EQ_U64(tg_webhook_backoff_ms(100, 1000, 60000), 60000);
    CHECK_EQ_U64(tg_webhook_backoff_ms(0, 200, 800), 200);
}

TEST(retry_after_seconds_and_dates)
{
    time_t now = 1700000000; /* Tue, 14 Nov 2023 22:13:20 GMT */
    CHECK_EQ_U64(tg_webhook_retry_after_ms("1", now), 1000);
    CHECK_EQ_U64(tg_webhook_retry_after_ms(" 120 ", now), 120000);
    CHECK_EQ_U64(tg_webhook_retry_after_ms("99999999", now), 3600000);
    CHECK_EQ_U64(tg_webhook_retry_after_ms("Tue, 14 Nov 2023 22:13:50 GMT", now), 30000);
    CHECK_EQ_U64(tg_webhook_retry_after_ms("Tue, 14 Nov 2023 22:00:00 GMT", now), 0);
    CHECK(tg_webhook_retry_after_ms(NULL, now) == -1);
    CHECK(tg_webhook_retry_after_ms("", now) == -1);
    CHECK(tg_webhook_retry_after_ms("soon", now) == -1);
    CHECK(tg_webhook_retry_after_ms("5x", now) == -1);
}

TEST(no_workers_start_and_stop)
{
    tg_webhook_config config = {.workers = 0};
    char err[128];
    CHECK(tg_webhooks_start(&config, err, sizeof err) == 0);
    tg_webhooks_wake();
    tg_webhooks_stop();
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(signature_matches_an_independent_hmac);
    RUN(body_has_the_documented_members);
    RUN(backoff_doubles_up_to_the_cap);
    RUN(retry_after_seconds_and_dates);
    RUN(no_workers_start_and_stop);
    return test_report(argv[0]);
}
