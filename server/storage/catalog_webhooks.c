/* Webhook subscriptions, deliveries and the outbox's public calls (catalog.h,
 * schema 12), written once for both backends over their run_steps operation
 * (catalog_backend.h). The events of catalog changes are not written here: the
 * triggers of migration 12 write them in the transaction of the change. Every
 * integer goes to the database as text and is cast there (CAST(? AS BIGINT)),
 * which both dialects read the same way. */
#include "catalog.h"
#include "catalog_backend.h"
#include "catalog_sql.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HOOK_COLUMNS                                                                               \
    "id, org, url, events, enabled, failures, disabled_reason, created_at, updated_at"
#define DELIVERY_COLUMNS                                                                           \
    "d.id, d.subscription_id, d.event_id, e.type, d.state, d.attempts, d.next_attempt,"            \
    " d.last_status, d.last_error, d.created_at, d.updated_at, d.delivered_at"
#define DELIVERY_FROM " FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id"
#define HOOK_EXISTS "SELECT id FROM webhook_subscriptions WHERE org = ? AND id = CAST(? AS BIGINT)"

typedef struct num {
    char s[24];
} num;

static num n64(int64_t v)
{
    num out;
    snprintf(out.s, sizeof out.s, "%" PRId64, v);
    return out;
}

static tg_cat_status run(tg_catalog *catalog, bool write, tg_cat_step *steps, size_t count)
{
    return catalog->ops->run_steps(catalog, write, steps, count);
}

int64_t tg_webhook_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

tg_cat_status tg_catalog_webhook_recover(tg_catalog *catalog)
{
    /* one process per SQLite catalog: a lease left in it is a dead process's */
    static const char sql[] = "UPDATE webhook_deliveries SET lease_owner = NULL,"
                              " lease_expires = NULL WHERE lease_owner IS NOT NULL";
    if (strcmp(tg_catalog_kind(catalog), "sqlite") != 0)
        return TG_CAT_OK;
    tg_cat_step step = {sql, 0, NULL, NULL, NULL, false, 0};
    return run(catalog, true, &step, 1);
}

void tg_webhook_new_id(char out[TG_WEBHOOK_ID_LEN])
{
    unsigned char bits[16];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    bool got = fd >= 0 && read(fd, bits, sizeof bits) == (ssize_t)sizeof bits;
    if (fd >= 0)
        close(fd);
    if (!got) { /* never expected; still unique enough within one process */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        static unsigned counter;
        unsigned c = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
        for (size_t i = 0; i < sizeof bits; i++)
            bits[i] = (unsigned char)(((unsigned long long)ts.tv_nsec >> (i % 8)) ^
                                      ((unsigned long long)ts.tv_sec >> i) ^ (c << (i % 4)) ^
                                      (unsigned)getpid());
    }
    static const char hex[] = "0123456789abcdef";
    memcpy(out, "evt_", 4);
    for (size_t i = 0; i < sizeof bits; i++) {
        out[4 + 2 * i] = hex[bits[i] >> 4];
        out[5 + 2 * i] = hex[bits[i] & 15];
    }
    out[4 + 2 * sizeof bits] = '\0';
}

static void read_hook(void *ctx, tg_cat_row row)
{
    tg_webhook *out = ctx;
    memset(out, 0, sizeof *out);
    out->id = row.integer(&row, 0);
    row.text(&row, 1, out->org, sizeof out->org);
    row.text(&row, 2, out->url, sizeof out->url);
    row.text(&row, 3, out->events, sizeof out->events);
    out->enabled = row.integer(&row, 4) != 0;
    out->failures = row.integer(&row, 5);
    row.text(&row, 6, out->disabled_reason, sizeof out->disabled_reason);
    row.text(&row, 7, out->created_at, sizeof out->created_at);
    row.text(&row, 8, out->updated_at, sizeof out->updated_at);
}

static void read_delivery(tg_cat_row row, tg_webhook_delivery *out)
{
    memset(out, 0, sizeof *out);
    out->id = row.integer(&row, 0);
    out->subscription_id = row.integer(&row, 1);
    row.text(&row, 2, out->event_id, sizeof out->event_id);
    row.text(&row, 3, out->type, sizeof out->type);
    row.text(&row, 4, out->state, sizeof out->state);
    out->attempts = row.integer(&row, 5);
    out->next_attempt = row.integer(&row, 6);
    out->last_status = row.integer(&row, 7);
    row.text(&row, 8, out->last_error, sizeof out->last_error);
    row.text(&row, 9, out->created_at, sizeof out->created_at);
    row.text(&row, 10, out->updated_at, sizeof out->updated_at);
    row.text(&row, 11, out->delivered_at, sizeof out->delivered_at);
}

static void read_one_delivery(void *ctx, tg_cat_row row)
{
    read_delivery(row, ctx);
}

tg_cat_status tg_catalog_webhook_create(tg_catalog *catalog, const char *org, const char *url,
                                        const char *secret, const char *events, tg_webhook *out)
{
    memset(out, 0, sizeof *out); /* a failed call leaves it zeroed */
    static const char sql[] =
        "INSERT INTO webhook_subscriptions (org, url, secret, events, enabled, failures,"
        " created_at, updated_at) VALUES (?, ?, ?, ?, 1, 0, ?, ?) RETURNING " HOOK_COLUMNS;
    char now[TG_TIME_LEN];
    tg_time_now(now);
    const char *params[] = {org, url, secret, events, now, now};
    tg_cat_step step = {sql, 6, params, read_hook, out, true, 0};
    return run(catalog, true, &step, 1);
}

tg_cat_status tg_catalog_webhook_get(tg_catalog *catalog, const char *org, int64_t id,
                                     tg_webhook *out)
{
    memset(out, 0, sizeof *out); /* a failed call leaves it zeroed */
    static const char sql[] = "SELECT " HOOK_COLUMNS " FROM webhook_subscriptions"
                              " WHERE org = ? AND id = CAST(? AS BIGINT)";
    num n = n64(id);
    const char *params[] = {org, n.s};
    tg_cat_step step = {sql, 2, params, read_hook, out, true, 0};
    return run(catalog, false, &step, 1);
}

typedef struct hook_visit {
    void (*visit)(void *ctx, const tg_webhook *hook);
    void *ctx;
} hook_visit;

static void visit_hook(void *ctx, tg_cat_row row)
{
    hook_visit *v = ctx;
    tg_webhook hook;
    read_hook(&hook, row);
    v->visit(v->ctx, &hook);
}

tg_cat_status tg_catalog_webhook_list(tg_catalog *catalog, const char *org,
                                      void (*visit)(void *ctx, const tg_webhook *hook), void *ctx)
{
    static const char sql[] =
        "SELECT " HOOK_COLUMNS " FROM webhook_subscriptions WHERE org = ? ORDER BY id";
    hook_visit v = {visit, ctx};
    const char *params[] = {org};
    tg_cat_step step = {sql, 1, params, visit_hook, &v, false, 0};
    return run(catalog, false, &step, 1);
}

tg_cat_status tg_catalog_webhook_update(tg_catalog *catalog, const char *org, int64_t id,
                                        const char *url, const char *events, int enabled,
                                        tg_webhook *out)
{
    memset(out, 0, sizeof *out); /* a failed call leaves it zeroed */
    static const char sql[] =
        "UPDATE webhook_subscriptions SET url = coalesce(CAST(?3 AS TEXT), url),"
        " events = coalesce(CAST(?4 AS TEXT), events),"
        " enabled = coalesce(CAST(?5 AS INTEGER), enabled),"
        " failures = CASE WHEN CAST(?5 AS INTEGER) = 1 THEN 0 ELSE failures END,"
        " disabled_reason = CASE WHEN CAST(?5 AS INTEGER) = 1 THEN NULL"
        " WHEN CAST(?5 AS INTEGER) = 0 AND enabled = 1 THEN 'disabled by an administrator'"
        " ELSE disabled_reason END,"
        " updated_at = ?6 WHERE org = ?1 AND id = CAST(?2 AS BIGINT) RETURNING " HOOK_COLUMNS;
    char now[TG_TIME_LEN];
    tg_time_now(now);
    num n = n64(id);
    const char *state = enabled < 0 ? NULL : enabled ? "1" : "0";
    const char *params[] = {org, n.s, url, events, state, now};
    tg_cat_step step = {sql, 6, params, read_hook, out, true, 0};
    return run(catalog, true, &step, 1);
}

tg_cat_status tg_catalog_webhook_delete(tg_catalog *catalog, const char *org, int64_t id)
{
    /* the deliveries go by the foreign key's cascade; the events no delivery
     * references any more go too */
    static const char sql[] =
        "DELETE FROM webhook_subscriptions WHERE org = ? AND id = CAST(? AS BIGINT)";
    static const char orphans[] = "DELETE FROM webhook_events WHERE NOT EXISTS"
                                  " (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = "
                                  "webhook_events.id)";
    num n = n64(id);
    const char *params[] = {org, n.s};
    tg_cat_step steps[] = {{sql, 2, params, NULL, NULL, true, 0},
                           {orphans, 0, NULL, NULL, NULL, false, 0}};
    return run(catalog, true, steps, 2);
}

tg_cat_status tg_catalog_webhook_ping(tg_catalog *catalog, const char *org, int64_t id,
                                      char event_id[TG_WEBHOOK_ID_LEN])
{
    static const char exists[] = HOOK_EXISTS;
    /* the fan-out trigger sends an event with a subscription_id to that one */
    static const char event[] =
        "INSERT INTO webhook_events (id, org, type, created_at, data, subscription_id)"
        " VALUES (?, ?, 'ping', ?, ?, CAST(? AS BIGINT))";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    tg_webhook_new_id(event_id);
    num n = n64(id);
    char data[128];
    snprintf(data, sizeof data,
             "{\"subscription_id\":%" PRId64 ",\"message\":\"ping from tensorgate\"}", id);
    const char *exists_params[] = {org, n.s};
    const char *event_params[] = {event_id, org, now, data, n.s};
    tg_cat_step steps[] = {{exists, 2, exists_params, NULL, NULL, true, 0},
                           {event, 5, event_params, NULL, NULL, true, 0}};
    return run(catalog, true, steps, 2);
}

tg_cat_status tg_catalog_webhook_event_add(tg_catalog *catalog, const char *org, const char *type,
                                           const char *data_json)
{
    static const char sql[] = TG_CAT_SQL_WEBHOOK_EVENT_ADD;
    char now[TG_TIME_LEN], id[TG_WEBHOOK_ID_LEN];
    tg_time_now(now);
    tg_webhook_new_id(id);
    const char *params[] = {id, org, type, now, data_json};
    tg_cat_step step = {sql, 5, params, NULL, NULL, false, 0};
    return run(catalog, true, &step, 1);
}

typedef struct delivery_visit {
    void (*visit)(void *ctx, const tg_webhook_delivery *delivery);
    void *ctx;
} delivery_visit;

static void visit_delivery(void *ctx, tg_cat_row row)
{
    delivery_visit *v = ctx;
    tg_webhook_delivery delivery;
    read_delivery(row, &delivery);
    v->visit(v->ctx, &delivery);
}

tg_cat_status tg_catalog_webhook_deliveries(
    tg_catalog *catalog, const char *org, int64_t id, int64_t before_id, unsigned limit,
    void (*visit)(void *ctx, const tg_webhook_delivery *delivery), void *ctx)
{
    static const char exists[] = HOOK_EXISTS;
    static const char sql[] =
        "SELECT " DELIVERY_COLUMNS DELIVERY_FROM " WHERE d.subscription_id = CAST(?1 AS BIGINT)"
        " AND (CAST(?2 AS BIGINT) = 0 OR d.id < CAST(?2 AS BIGINT))"
        " ORDER BY d.id DESC LIMIT CAST(?3 AS BIGINT)";
    num n = n64(id), before = n64(before_id), most = n64(limit);
    delivery_visit v = {visit, ctx};
    const char *exists_params[] = {org, n.s};
    const char *params[] = {n.s, before.s, most.s};
    tg_cat_step steps[] = {{exists, 2, exists_params, NULL, NULL, true, 0},
                           {sql, 3, params, visit_delivery, &v, false, 0}};
    return run(catalog, false, steps, 2);
}

tg_cat_status tg_catalog_webhook_delivery_get(tg_catalog *catalog, const char *org, int64_t id,
                                              int64_t delivery_id, tg_webhook_delivery *out)
{
    memset(out, 0, sizeof *out); /* a failed call leaves it zeroed */
    static const char exists[] = HOOK_EXISTS;
    static const char sql[] = "SELECT " DELIVERY_COLUMNS DELIVERY_FROM
                              " WHERE d.id = CAST(? AS BIGINT) AND d.subscription_id = CAST(? AS "
                              "BIGINT)";
    num n = n64(id), d = n64(delivery_id);
    const char *exists_params[] = {org, n.s};
    const char *params[] = {d.s, n.s};
    tg_cat_step steps[] = {{exists, 2, exists_params, NULL, NULL, true, 0},
                           {sql, 2, params, read_one_delivery, out, true, 0}};
    return run(catalog, false, steps, 2);
}

tg_cat_status tg_catalog_webhook_redeliver(tg_catalog *catalog, const char *org, int64_t id,
                                           int64_t delivery_id, tg_webhook_delivery *out)
{
    memset(out, 0, sizeof *out); /* a failed call leaves it zeroed */
    static const char exists[] = HOOK_EXISTS;
    static const char update[] =
        "UPDATE webhook_deliveries SET state = 'pending', attempts = 0,"
        " next_attempt = CAST(? AS BIGINT), lease_owner = NULL, lease_expires = NULL,"
        " delivered_at = NULL, updated_at = ? WHERE id = CAST(? AS BIGINT)"
        " AND subscription_id = CAST(? AS BIGINT)";
    static const char sql[] =
        "SELECT " DELIVERY_COLUMNS DELIVERY_FROM " WHERE d.id = CAST(? AS BIGINT)";
    char now[TG_TIME_LEN];
    tg_time_now(now);
    num n = n64(id), d = n64(delivery_id), due = n64(tg_webhook_now_ms());
    const char *exists_params[] = {org, n.s};
    const char *update_params[] = {due.s, now, d.s, n.s};
    const char *params[] = {d.s};
    tg_cat_step steps[] = {{exists, 2, exists_params, NULL, NULL, true, 0},
                           {update, 4, update_params, NULL, NULL, true, 0},
                           {sql, 1, params, read_one_delivery, out, true, 0}};
    return run(catalog, true, steps, 3);
}

/* the claimed delivery's id, as text for the next step */
static void read_claimed(void *ctx, tg_cat_row row)
{
    row.text(&row, 0, ctx, 24);
}

static void read_send(void *ctx, tg_cat_row row)
{
    tg_webhook_send *out = ctx;
    memset(out, 0, sizeof *out);
    out->delivery_id = row.integer(&row, 0);
    out->subscription_id = row.integer(&row, 1);
    out->attempts = row.integer(&row, 2);
    row.text(&row, 3, out->event_id, sizeof out->event_id);
    row.text(&row, 4, out->type, sizeof out->type);
    row.text(&row, 5, out->org, sizeof out->org);
    row.text(&row, 6, out->created_at, sizeof out->created_at);
    row.text(&row, 7, out->url, sizeof out->url);
    row.text(&row, 8, out->secret, sizeof out->secret);
    row.text(&row, 9, out->data, sizeof out->data);
}

#define CLAIM_SQL(lock)                                                                            \
    "UPDATE webhook_deliveries SET attempts = attempts + 1, lease_owner = ?1,"                     \
    " lease_expires = CAST(?2 AS BIGINT), updated_at = ?3 WHERE id = (SELECT d.id"                 \
    " FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id"          \
    " JOIN webhook_events e ON e.id = d.event_id WHERE d.state = 'pending'"                        \
    " AND d.next_attempt <= CAST(?4 AS BIGINT)"                                                    \
    " AND coalesce(d.lease_expires, 0) <= CAST(?4 AS BIGINT)"                                      \
    " AND (s.enabled = 1 OR e.subscription_id = s.id)"                                             \
    " ORDER BY d.next_attempt, d.id LIMIT 1" lock ") RETURNING id"

tg_cat_status tg_catalog_webhook_claim(tg_catalog *catalog, unsigned lease_seconds,
                                       tg_webhook_send *out)
{
    memset(out, 0, sizeof *out); /* a failed call leaves it zeroed */
    static const char sqlite_claim[] = CLAIM_SQL("");
    /* a replica skips the row another is claiming rather than wait for it */
    static const char pg_claim[] = CLAIM_SQL(" FOR UPDATE OF d SKIP LOCKED");
    static const char sql[] =
        "SELECT d.id, d.subscription_id, d.attempts, e.id, e.type, e.org, e.created_at, s.url,"
        " s.secret, e.data FROM webhook_deliveries d"
        " JOIN webhook_events e ON e.id = d.event_id"
        " JOIN webhook_subscriptions s ON s.id = d.subscription_id"
        " WHERE d.id = CAST(? AS BIGINT)";
    bool pg = strcmp(tg_catalog_kind(catalog), "postgresql") == 0;
    char now[TG_TIME_LEN];
    tg_time_now(now);
    int64_t t = tg_webhook_now_ms();
    num expires = n64(t + 1000 * (int64_t)(lease_seconds ? lease_seconds : 30)), at = n64(t);
    char claimed[24] = "";
    const char *claim_params[] = {catalog->lease_owner, expires.s, now, at.s};
    const char *params[] = {claimed};
    tg_cat_step steps[] = {
        {pg ? pg_claim : sqlite_claim, 4, claim_params, read_claimed, claimed, true, 0},
        {sql, 1, params, read_send, out, true, 0}};
    return run(catalog, true, steps, 2);
}

tg_cat_status tg_catalog_webhook_record(tg_catalog *catalog, int64_t delivery_id,
                                        tg_webhook_outcome outcome, int http_status,
                                        const char *error, int64_t next_attempt,
                                        unsigned max_failures)
{
    static const char update[] =
        "UPDATE webhook_deliveries SET state = ?1, next_attempt = CAST(?2 AS BIGINT),"
        " last_status = CAST(?3 AS BIGINT), last_error = CAST(?4 AS TEXT), updated_at = ?5,"
        " delivered_at = CASE WHEN ?1 = 'delivered' THEN ?5 ELSE delivered_at END,"
        " lease_owner = NULL, lease_expires = NULL"
        " WHERE id = CAST(?6 AS BIGINT) AND lease_owner = ?7";
    static const char cleared[] =
        "UPDATE webhook_subscriptions SET failures = 0 WHERE id ="
        " (SELECT subscription_id FROM webhook_deliveries WHERE id = CAST(? AS BIGINT))";
    static const char counted[] =
        "UPDATE webhook_subscriptions SET failures = failures + 1 WHERE id ="
        " (SELECT subscription_id FROM webhook_deliveries WHERE id = CAST(? AS BIGINT))";
    static const char disable[] =
        "UPDATE webhook_subscriptions SET enabled = 0, disabled_reason = ?1, updated_at = ?2"
        " WHERE id = (SELECT subscription_id FROM webhook_deliveries WHERE id = CAST(?3 AS BIGINT))"
        " AND enabled = 1 AND failures >= CAST(?4 AS BIGINT)";
    static const char *const states[] = {"delivered", "pending", "failed"};
    char now[TG_TIME_LEN];
    tg_time_now(now);
    num d = n64(delivery_id), next = n64(next_attempt), status = n64(http_status),
        most = n64(max_failures);
    char reason[TG_WEBHOOK_ERROR_MAX];
    snprintf(reason, sizeof reason,
             "disabled after %u deliveries in a row failed; the last: %.200s", max_failures,
             error && error[0] ? error : "no detail");
    const char *update_params[] = {states[outcome],
                                   next.s,
                                   http_status > 0 ? status.s : NULL,
                                   error && error[0] ? error : NULL,
                                   now,
                                   d.s,
                                   catalog->lease_owner};
    const char *id_params[] = {d.s};
    const char *disable_params[] = {reason, now, d.s, most.s};
    tg_cat_step steps[3] = {{update, 7, update_params, NULL, NULL, true, 0}};
    size_t count = 1;
    if (outcome == TG_WEBHOOK_DELIVERED) {
        steps[count++] = (tg_cat_step){cleared, 1, id_params, NULL, NULL, false, 0};
    } else if (outcome == TG_WEBHOOK_GAVE_UP) {
        steps[count++] = (tg_cat_step){counted, 1, id_params, NULL, NULL, false, 0};
        if (max_failures > 0)
            steps[count++] = (tg_cat_step){disable, 4, disable_params, NULL, NULL, false, 0};
    }
    return run(catalog, true, steps, count);
}
