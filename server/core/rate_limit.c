/* Token buckets in a fixed table, so memory stays bounded whatever the number of
 * clients. The table is 4-way set-associative under a hash keyed with a random
 * seed drawn at start, so a client cannot pick addresses that share its set. A
 * newcomer takes the way whose bucket would have refilled anyway (idle long
 * enough), else the least recently used one: losing a bucket only makes the
 * limit looser for a while, never refuses a client within its rate. IPv6 clients
 * are counted per /64, the block one host usually holds. */
#include "rate_limit.h"

#include <arpa/inet.h>
#include <assert.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define SETS 2048
#define WAYS 4

typedef struct bucket {
    char client[64];
    double tokens;
    double updated; /* seconds, CLOCK_MONOTONIC; 0: unused */
} bucket;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static bucket table[SETS][WAYS];
static uint64_t seed;
static bool seeded;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void tg_rate_limit_key(const char *client, char *key, size_t key_len)
{
    struct in6_addr address;
    if (strchr(client, ':') != NULL && inet_pton(AF_INET6, client, &address) == 1 &&
        !IN6_IS_ADDR_V4MAPPED(&address)) {
        memset(address.s6_addr + 8, 0, 8);
        char text[INET6_ADDRSTRLEN];
        if (inet_ntop(AF_INET6, &address, text, sizeof text) != NULL) {
            snprintf(key, key_len, "%s/64", text);
            return;
        }
    }
    snprintf(key, key_len, "%s", client);
}

/* FNV-1a of key, started from the seed. Called with table_lock held. */
static uint64_t keyed_hash(const char *key)
{
    if (!seeded) {
        if (RAND_bytes((unsigned char *)&seed, sizeof seed) != 1)
            seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull;
        seeded = true;
    }
    uint64_t h = 1469598103934665603ull ^ seed;
    for (const char *p = key; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h ^ (h >> 29);
}

/* The client's bucket in its set, or a way taken over for it (full bucket). */
static bucket *find_bucket(const char *key, double now, double capacity, unsigned rate)
{
    bucket *set = table[keyed_hash(key) % SETS];
    bucket *victim = &set[0];
    for (int w = 0; w < WAYS; w++) {
        if (set[w].updated != 0 && strcmp(set[w].client, key) == 0)
            return &set[w];
        bool refilled = set[w].updated == 0 || (now - set[w].updated) * rate >= capacity;
        if (refilled)
            /* Two rules (a refilled bucket; else the longest idle) pick the same way. */
            /* NOLINTNEXTLINE(bugprone-branch-clone) */
            victim = &set[w];
        else if (victim->updated != 0 && (now - victim->updated) * rate < capacity &&
                 set[w].updated < victim->updated)
            victim = &set[w];
    }
    snprintf(victim->client, sizeof victim->client, "%s", key);
    victim->tokens = capacity;
    victim->updated = now;
    return victim;
}

unsigned tg_rate_limit_take(const char *client, unsigned rate, unsigned burst)
{
    if (rate == 0)
        return 0;
    double capacity = burst ? (double)burst : 2.0 * rate;
    char key[64];
    tg_rate_limit_key(client, key, sizeof key);
    unsigned wait = 0;
    pthread_mutex_lock(&table_lock);
    /* read under the lock, so a bucket's time only goes forward (a time read before
     * another thread's later update would take tokens back) */
    double now = now_seconds();
    bucket *b = find_bucket(key, now, capacity, rate);
    assert(now >= b->updated && b->tokens >= 0.0);
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
    /* a bucket holds between nothing and its capacity */
    assert(b->tokens >= 0.0 && b->tokens <= capacity);
    pthread_mutex_unlock(&table_lock);
    return wait;
}
