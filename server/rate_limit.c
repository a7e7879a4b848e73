/* Token buckets in a fixed table of slots hashed by client address. Memory stays
 * bounded whatever the number of clients: a client whose slot is taken by another
 * address starts over with a full bucket (a collision can only make the limit
 * looser for that client, never refuse a client that is within its rate). */
#include "rate_limit.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define SLOTS 8192

typedef struct bucket {
    char client[64];
    double tokens;
    double updated; /* seconds, CLOCK_MONOTONIC */
} bucket;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static bucket table[SLOTS];

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

unsigned tg_rate_limit_take(const char *client, unsigned rate, unsigned burst)
{
    if (rate == 0)
        return 0;
    double capacity = burst ? (double)burst : 2.0 * rate;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = client; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    double now = now_seconds();
    unsigned wait = 0;
    pthread_mutex_lock(&table_lock);
    bucket *b = &table[h % SLOTS];
    if (strncmp(b->client, client, sizeof b->client) != 0) {
        snprintf(b->client, sizeof b->client, "%s", client);
        b->tokens = capacity;
        b->updated = now;
    }
    /* Refill for the time since the last request, capped at the bucket's size. */
    b->tokens += (now - b->updated) * rate;
    if (b->tokens > capacity)
        b->tokens = capacity;
    b->updated = now;
    if (b->tokens >= 1.0) {
        b->tokens -= 1.0;
    } else {
        double seconds = (1.0 - b->tokens) / rate;
        wait = (unsigned)seconds + 1;
    }
    pthread_mutex_unlock(&table_lock);
    return wait;
}
