/* Unit tests for server/storage/catalog_webhooks.c (and the triggers of migration
 * 12) on a temporary SQLite file, then, when TENSORGATE_TEST_PG names a database
 * (tests/scale/pg-suite.sh), on PostgreSQL:
 *  - no subscription, no event: a change writes nothing to the outbox;
 *  - each change of a subscribed type makes one pending delivery, in the change's
 *    transaction: a model create that fails (the name taken) makes none;
 *  - another namespace's subscription, or one of other types, gets nothing;
 *  - claim: one at a time, the lease holds it from a second handle, attempts
 *    counted; a retry is not due before its time; delivered clears the failure
 *    count; failures in a row disable the subscription at max_failures;
 *  - ping and redelivery; update and delete; the secret only in what is sent. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog.h"
#include "catalog_backend.h"
#include "test.h"
#include "test_pg.h"

static char dir[64];
static char db_path[128];
static const char *catalog_url = db_path;

static tg_catalog *open_fresh(void)
{
    tg_catalog *catalog = NULL;
    char err[256] = "";
    CHECK(tg_catalog_open(catalog_url, &catalog, err, sizeof err) == TG_CAT_OK);
    if (catalog == NULL)
        fprintf(stderr, "open: %s\n", err);
    return catalog;
}

typedef struct tally {
    int count;
    tg_webhook_delivery last;
} tally;

static void count_delivery(void *ctx, const tg_webhook_delivery *d)
{
    tally *t = ctx;
    if (t->count++ == 0)
        t->last = *d; /* newest first */
}

static int deliveries(tg_catalog *catalog, const char *org, int64_t id, tg_webhook_delivery *newest)
{
    tally t = {0};
    CHECK(tg_catalog_webhook_deliveries(catalog, org, id, 0, 100, count_delivery, &t) == TG_CAT_OK);
    if (newest != NULL)
        *newest = t.last;
    return t.count;
}

static void count_hook(void *ctx, const tg_webhook *hook)
{
    (void)hook;
    (*(int *)ctx)++;
}

TEST(outbox_follows_the_changes)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    tg_model model;
    /* nothing subscribed yet: no event */
    CHECK(tg_catalog_model_create(catalog, "acme", "before", "", &model) == TG_CAT_OK);
    tg_webhook hook, other, wrong_type;
    CHECK(tg_catalog_webhook_create(catalog, "acme", "http://192.0.2.1/h", "secret-0123456789ab",
                                    ",model.created,version.published,alias.moved,"
                                    "upload.refused,job.finished,",
                                    &hook) == TG_CAT_OK);
    CHECK(hook.enabled);
    CHECK_STR(hook.org, "acme");
    CHECK(tg_catalog_webhook_create(catalog, "other", "http://192.0.2.2/h", "secret-0123456789ab",
                                    ",model.created,", &other) == TG_CAT_OK);
    CHECK(tg_catalog_webhook_create(catalog, "acme", "http://192.0.2.3/h", "secret-0123456789ab",
                                    ",job.finished,", &wrong_type) == TG_CAT_OK);
    CHECK_EQ_U64(deliveries(catalog, "acme", hook.id, NULL), 0);

    tg_webhook_delivery newest;
    CHECK(tg_catalog_model_create(catalog, "acme", "m", "", &model) == TG_CAT_OK);
    CHECK_EQ_U64(deliveries(catalog, "acme", hook.id, &newest), 1);
    CHECK_STR(newest.type, "model.created");
    CHECK_STR(newest.state, "pending");
    CHECK(strncmp(newest.event_id, "evt_", 4) == 0 && strlen(newest.event_id) == 36);
    /* a failed create (the name is taken) rolls its event back with it */
    CHECK(tg_catalog_model_create(catalog, "acme", "m", "", &model) == TG_CAT_EXISTS);
    CHECK_EQ_U64(deliveries(catalog, "acme", hook.id, NULL), 1);

    tg_version draft, published;
    CHECK(tg_catalog_version_create(catalog, model.id, &draft) == TG_CAT_OK);
    CHECK_EQ_U64(deliveries(catalog, "acme", hook.id, NULL), 1); /* a draft: nothing */
    CHECK(tg_catalog_version_publish(catalog, draft.id, "ab", &published) == TG_CAT_OK);
    CHECK_EQ_U64(deliveries(catalog, "acme", hook.id, &newest), 2);
    CHECK_STR(newest.type, "version.published");
    CHECK(tg_catalog_version_publish(catalog, draft.id, "ab", &published) == TG_CAT_CONFLICT);
    CHECK_EQ_U64(deliveries(catalog, "acme", hook.id, NULL), 2);
    CHECK(tg_catalog_alias_set(catalog, model.id, "prod", 1) == TG_CAT_OK);
    CHECK(tg_catalog_alias_set(catalog, model.id, "prod", 1) == TG_CAT_OK); /* no move */
    CHECK_EQ_U64(deliveries(catalog, "acme", hook.id, &newest), 3);
    CHECK_STR(newest.type, "alias.moved");
    tg_rejection rejection = {.version = 1, .size = 4};
    snprintf(rejection.model, sizeof rejection.model, "acme/m");
    snprintf(rejection.reason, sizeof rejection.reason, "not_safetensors");
    tg_time_now(rejection.time);
    CHECK(tg_catalog_rejection_add(catalog, &rejection) == TG_CAT_OK);
    CHECK_EQ_U64(deliveries(catalog, "acme", hook.id, &newest), 4);
    CHECK_STR(newest.type, "upload.refused");
    snprintf(rejection.model, sizeof rejection.model, "%s", ""); /* a scan: no namespace */
    CHECK(tg_catalog_rejection_add(catalog, &rejection) == TG_CAT_OK);
    CHECK_EQ_U64(deliveries(catalog, "acme", hook.id, NULL), 4);
    /* the other namespace's and the other type's subscriptions saw none of it */
    CHECK_EQ_U64(deliveries(catalog, "other", other.id, NULL), 0);
    CHECK_EQ_U64(deliveries(catalog, "acme", wrong_type.id, NULL), 0);
    /* another namespace cannot see or change this one's subscription */
    tg_webhook seen;
    CHECK(tg_catalog_webhook_get(catalog, "other", hook.id, &seen) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_webhook_delete(catalog, "other", hook.id) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_webhook_deliveries(catalog, "other", hook.id, 0, 10, count_delivery,
                                        &(tally){0}) == TG_CAT_NOT_FOUND);
    int hooks = 0;
    CHECK(tg_catalog_webhook_list(catalog, "acme", count_hook, &hooks) == TG_CAT_OK);
    CHECK_EQ_U64(hooks, 2);
    /* a standalone event (signature.invalid) only when asked for */
    CHECK(tg_catalog_webhook_event_add(catalog, "acme", "signature.invalid", "{\"x\":1}") ==
          TG_CAT_OK);
    CHECK_EQ_U64(deliveries(catalog, "acme", hook.id, NULL), 4);
    CHECK(tg_catalog_webhook_update(catalog, "acme", hook.id, NULL,
                                    ",model.created,version.published,alias.moved,"
                                    "upload.refused,job.finished,signature.invalid,",
                                    -1, &seen) == TG_CAT_OK);
    CHECK(tg_catalog_webhook_event_add(catalog, "acme", "signature.invalid", "{\"x\":1}") ==
          TG_CAT_OK);
    CHECK_EQ_U64(deliveries(catalog, "acme", hook.id, &newest), 5);
    CHECK_STR(newest.type, "signature.invalid");
    CHECK(tg_catalog_webhook_delete(catalog, "acme", wrong_type.id) == TG_CAT_OK);
    CHECK(tg_catalog_webhook_delete(catalog, "other", other.id) == TG_CAT_OK);
    tg_catalog_close(catalog);
}

/* Drains every due delivery as delivered; how many. */
static int drain(tg_catalog *catalog)
{
    tg_webhook_send send;
    int n = 0;
    while (tg_catalog_webhook_claim(catalog, 30, &send) == TG_CAT_OK && n < 100) {
        CHECK(tg_catalog_webhook_record(catalog, send.delivery_id, TG_WEBHOOK_DELIVERED, 200, "", 0,
                                        3) == TG_CAT_OK);
        n++;
    }
    return n;
}

TEST(claims_retries_and_disabling)
{
    tg_catalog *a = open_fresh(), *b = open_fresh();
    if (a == NULL || b == NULL) {
        tg_catalog_close(a);
        tg_catalog_close(b);
        return;
    }
    drain(a); /* what the first test left */
    tg_webhook hook;
    CHECK(tg_catalog_webhook_create(a, "lease", "http://192.0.2.9/h", "secret-0123456789ab",
                                    ",model.created,", &hook) == TG_CAT_OK);
    tg_model model;
    CHECK(tg_catalog_model_create(a, "lease", "one", "", &model) == TG_CAT_OK);
    tg_webhook_send send, again;
    CHECK(tg_catalog_webhook_claim(a, 30, &send) == TG_CAT_OK);
    CHECK_EQ_U64(send.attempts, 1);
    CHECK_STR(send.type, "model.created");
    CHECK_STR(send.org, "lease");
    CHECK_STR(send.secret, "secret-0123456789ab");
    CHECK_STR(send.url, "http://192.0.2.9/h");
    CHECK(strstr(send.data, "\"lease/one\"") != NULL);
    /* leased: the other handle finds nothing, and cannot record it */
    CHECK(tg_catalog_webhook_claim(b, 30, &again) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_webhook_record(b, send.delivery_id, TG_WEBHOOK_DELIVERED, 200, "", 0, 3) ==
          TG_CAT_NOT_FOUND);
    /* a retry a minute away is not due */
    CHECK(tg_catalog_webhook_record(a, send.delivery_id, TG_WEBHOOK_RETRY, 500, "HTTP 500",
                                    tg_webhook_now_ms() + 60000, 3) == TG_CAT_OK);
    CHECK(tg_catalog_webhook_claim(b, 30, &again) == TG_CAT_NOT_FOUND);
    tg_webhook_delivery d;
    CHECK(tg_catalog_webhook_delivery_get(a, "lease", hook.id, send.delivery_id, &d) == TG_CAT_OK);
    CHECK_STR(d.state, "pending");
    CHECK_EQ_U64(d.last_status, 500);
    CHECK_STR(d.last_error, "HTTP 500");
    CHECK_EQ_U64(d.attempts, 1);
    /* a redelivery makes it due now, with the same event id, attempts from zero */
    CHECK(tg_catalog_webhook_redeliver(a, "lease", hook.id, send.delivery_id, &d) == TG_CAT_OK);
    CHECK_EQ_U64(d.attempts, 0);
    CHECK(tg_catalog_webhook_claim(b, 30, &again) == TG_CAT_OK);
    CHECK_STR(again.event_id, send.event_id);
    CHECK_EQ_U64(again.attempts, 1);
    CHECK(tg_catalog_webhook_record(b, again.delivery_id, TG_WEBHOOK_DELIVERED, 204, "", 0, 3) ==
          TG_CAT_OK);
    CHECK(tg_catalog_webhook_delivery_get(a, "lease", hook.id, send.delivery_id, &d) == TG_CAT_OK);
    CHECK_STR(d.state, "delivered");
    CHECK(d.delivered_at[0] != '\0');
    CHECK(tg_catalog_webhook_delivery_get(a, "lease", hook.id, 999999, &d) == TG_CAT_NOT_FOUND);

    /* two deliveries given up in a row, with max_failures 2: disabled */
    for (int i = 0; i < 2; i++) {
        char name[16];
        snprintf(name, sizeof name, "fail%d", i);
        CHECK(tg_catalog_model_create(a, "lease", name, "", &model) == TG_CAT_OK);
        CHECK(tg_catalog_webhook_claim(a, 30, &send) == TG_CAT_OK);
        CHECK(tg_catalog_webhook_record(a, send.delivery_id, TG_WEBHOOK_GAVE_UP, 0,
                                        "Could not connect", 0, 2) == TG_CAT_OK);
        CHECK(tg_catalog_webhook_get(a, "lease", hook.id, &hook) == TG_CAT_OK);
        CHECK_EQ_U64(hook.failures, (uint64_t)i + 1);
    }
    CHECK(!hook.enabled);
    CHECK(strstr(hook.disabled_reason, "Could not connect") != NULL);
    /* disabled: no new delivery; a ping still goes */
    CHECK(tg_catalog_model_create(a, "lease", "after", "", &model) == TG_CAT_OK);
    CHECK_EQ_U64(deliveries(a, "lease", hook.id, NULL), 3);
    char ping[TG_WEBHOOK_ID_LEN];
    CHECK(tg_catalog_webhook_ping(a, "lease", hook.id, ping) == TG_CAT_OK);
    CHECK(tg_catalog_webhook_claim(a, 30, &send) == TG_CAT_OK);
    CHECK_STR(send.type, "ping");
    CHECK_STR(send.event_id, ping);
    CHECK(tg_catalog_webhook_record(a, send.delivery_id, TG_WEBHOOK_DELIVERED, 200, "", 0, 2) ==
          TG_CAT_OK);
    CHECK(tg_catalog_webhook_ping(a, "other", hook.id, ping) == TG_CAT_NOT_FOUND);
    /* enabled again: the count starts over */
    CHECK(tg_catalog_webhook_update(a, "lease", hook.id, "http://192.0.2.10/h", NULL, 1, &hook) ==
          TG_CAT_OK);
    CHECK(hook.enabled);
    CHECK_EQ_U64(hook.failures, 0);
    CHECK_STR(hook.disabled_reason, "");
    CHECK_STR(hook.url, "http://192.0.2.10/h");
    CHECK_STR(hook.events, ",model.created,");
    CHECK(tg_catalog_webhook_update(a, "lease", hook.id, NULL, NULL, 0, &hook) == TG_CAT_OK);
    CHECK_STR(hook.disabled_reason, "disabled by an administrator");
    /* a delete takes the deliveries with it */
    CHECK(tg_catalog_webhook_delete(a, "lease", hook.id) == TG_CAT_OK);
    CHECK(tg_catalog_webhook_delete(a, "lease", hook.id) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_webhook_claim(a, 30, &send) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_webhook_recover(a) == TG_CAT_OK);
    tg_catalog_close(a);
    tg_catalog_close(b);
}

TEST(event_ids_are_fresh)
{
    char x[TG_WEBHOOK_ID_LEN], y[TG_WEBHOOK_ID_LEN];
    tg_webhook_new_id(x);
    tg_webhook_new_id(y);
    CHECK(strcmp(x, y) != 0);
    CHECK_EQ_U64(strlen(x), 36);
    CHECK(strspn(x + 4, "0123456789abcdef") == 32);
}

int main(int argc, char **argv)
{
    (void)argc;
    snprintf(dir, sizeof dir, "/tmp/tg-catwh-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(db_path, sizeof db_path, "%s/catalog.db", dir);
    RUN(outbox_follows_the_changes);
    RUN(claims_retries_and_disabling);
    RUN(event_ids_are_fresh);
    const char *pg_url = getenv("TENSORGATE_TEST_PG");
    if (pg_url != NULL && pg_url[0] != '\0') {
        CHECK(tg_test_pg_reset(pg_url));
        catalog_url = pg_url;
        RUN(outbox_follows_the_changes);
        RUN(claims_retries_and_disabling);
    } else {
        fprintf(stderr, "TENSORGATE_TEST_PG unset: PostgreSQL round skipped "
                        "(tests/scale/with-postgres.sh runs it)\n");
    }
    char command[160];
    snprintf(command, sizeof command, "rm -rf %s", dir);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return test_report(argv[0]);
}
