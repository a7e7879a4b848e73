/* Unit tests for server/core/resources.c: tallies (per-key cap before the global one,
 * give-back, no overflow at the caps), the descriptor plan, exhaustion errnos, and
 * the gate's budget hook (a refusal is st_gate_over_budget, every granted byte is
 * released when the gate is freed). */
#include <errno.h>
#include <string.h>

#include "resources.h"
#include "st_gate.h"
#include "test.h"

TEST(tally_caps)
{
    tg_tally *t = tg_tally_new();
    CHECK(tg_tally_take(t, "ns:a", 2, 2, 3) == TG_TALLY_OK);
    CHECK(tg_tally_take(t, "ns:a", 1, 2, 3) == TG_TALLY_KEY_FULL); /* its own share first */
    CHECK(tg_tally_take(t, "ns:b", 1, 2, 3) == TG_TALLY_OK);
    CHECK(tg_tally_take(t, "ns:c", 1, 2, 3) == TG_TALLY_GLOBAL_FULL);
    CHECK_EQ_U64(tg_tally_total(t), 3);
    tg_tally_give(t, "ns:a", 2);
    CHECK_EQ_U64(tg_tally_of(t, "ns:a"), 0);
    CHECK(tg_tally_take(t, "ns:c", 1, 2, 3) == TG_TALLY_OK);
    tg_tally_give(t, "ns:unknown", 5); /* nothing held: nothing changes */
    CHECK_EQ_U64(tg_tally_total(t), 2);
    /* caps near UINT64_MAX do not wrap; 0 is no cap */
    CHECK(tg_tally_take(t, "ns:d", UINT64_MAX, 10, 0) == TG_TALLY_KEY_FULL);
    CHECK(tg_tally_take(t, "ns:d", UINT64_MAX - 2, 0, UINT64_MAX) == TG_TALLY_OK);
    CHECK(tg_tally_take(t, "ns:e", 3, 0, UINT64_MAX) == TG_TALLY_GLOBAL_FULL);
    tg_tally_free(t);
}

TEST(many_keys)
{
    tg_tally *t = tg_tally_new();
    char key[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "client:%d", i);
        CHECK(tg_tally_take(t, key, 10, 10, 0) == TG_TALLY_OK);
    }
    CHECK_EQ_U64(tg_tally_total(t), 10000);
    for (int i = 0; i < 1000; i += 2) {
        snprintf(key, sizeof key, "client:%d", i);
        tg_tally_give(t, key, 10);
    }
    CHECK_EQ_U64(tg_tally_total(t), 5000);
    CHECK_EQ_U64(tg_tally_of(t, "client:1"), 10);
    CHECK_EQ_U64(tg_tally_of(t, "client:2"), 0);
    tg_tally_free(t);
}

TEST(fd_plan)
{
    tg_fd_plan plan;
    tg_fd_plan_for(1024, &plan);
    CHECK_EQ_U64(plan.preloads, 256);
    CHECK_EQ_U64(plan.preload_connections, 128);
    CHECK_EQ_U64(plan.http_connections, (1024 - 256 - 128 - 64) / 2);
    tg_fd_plan_for(1048576, &plan);
    CHECK_EQ_U64(plan.preloads, 4096);
    CHECK_EQ_U64(plan.preload_connections, 1024);
    tg_fd_plan_for(10, &plan); /* below the floor: still usable */
    CHECK(plan.fd_limit == 64 && plan.preloads >= 1 && plan.http_connections >= 16);
    CHECK(tg_errno_is_exhaustion(EMFILE) && tg_errno_is_exhaustion(ENFILE) &&
          tg_errno_is_exhaustion(ENOMEM));
    CHECK(!tg_errno_is_exhaustion(ENOENT) && !tg_errno_is_exhaustion(EACCES));
}

typedef struct budget {
    size_t held, limit, released;
} budget;

static bool reserve(void *context, size_t bytes)
{
    budget *b = context;
    if (b->held + bytes > b->limit)
        return false;
    b->held += bytes;
    return true;
}

static void release(void *context, size_t bytes)
{
    budget *b = context;
    b->released += bytes;
    b->held -= bytes;
}

TEST(gate_budget_hook)
{
    /* a header of N = 100000 bytes, fed whole: the buffer reaches 8 + N */
    size_t n = 100000;
    unsigned char *file = malloc(8 + n);
    for (int i = 0; i < 8; i++)
        file[i] = (unsigned char)(n >> (8 * i));
    memset(file + 8, ' ', n);
    memcpy(file + 8, "{\"__metadata__\":{\"a\":\"", 22);
    budget b = {0, 50000, 0};
    st_gate_config config = {.reserve = reserve, .release = release, .budget_context = &b};
    st_gate *gate = st_gate_new(&config, 8 + n);
    CHECK(st_gate_feed(gate, file, 8 + n) == ST_GATE_REFUSED);
    CHECK(st_gate_over_budget(gate) && st_gate_out_of_memory(gate));
    CHECK(b.held <= 50000);
    st_gate_free(gate);
    CHECK_EQ_U64(b.held, 0);
    /* enough budget: no refusal for the budget's sake, all given back at free */
    budget big = {0, 1 << 20, 0};
    config.budget_context = &big;
    gate = st_gate_new(&config, 8 + n);
    st_gate_feed(gate, file, 8 + n);
    CHECK(!st_gate_over_budget(gate));
    CHECK_EQ_U64(big.held, 8 + n);
    st_gate_free(gate);
    CHECK_EQ_U64(big.held, 0);
    CHECK_EQ_U64(big.released, 8 + n);
    free(file);
}

int main(void)
{
    RUN(tally_caps);
    RUN(many_keys);
    RUN(fd_plan);
    RUN(gate_budget_hook);
    return test_report("resources");
}
