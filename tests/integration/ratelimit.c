/* Per-client rate limit (--rate-limit N requests/s, --rate-burst B): a full bucket
 * lets B requests through at once; past it the answer is 429 rate_limited with
 * Retry-After. Counts, not timings, decide: 20 requests sent back to back cannot
 * all find a token at 1 per second. */
#include "harness.h"

TEST(burst_then_429)
{
    for (int i = 0; i < 3; i++) {
        it_response r = it_get("/healthz");
        CHECK_STATUS(r, 200);
        it_response_free(&r);
    }
    int limited = 0;
    for (int i = 0; i < 20; i++) {
        it_response r = it_get("/healthz");
        if (r.status == 429) {
            if (limited++ == 0) {
                CHECK_PROBLEM(r, 429, "rate_limited");
                char retry[32];
                it_header(&r, "Retry-After", retry, sizeof retry);
                CHECK(atoi(retry) >= 1);
            }
        } else {
            CHECK_STATUS(r, 200);
        }
        it_response_free(&r);
    }
    CHECK(limited >= 15);
}

int main(int argc, char **argv)
{
    static const char *const flags[] = {"--rate-limit", "1", "--rate-burst", "3", NULL};
    it_init(argc, argv, flags);
    RUN(burst_then_429);
    return it_finish(argv[0]);
}
