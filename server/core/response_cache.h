/* Ready responses for immutable reads (docs/PERFORMANCE.md, goal 1). A published
 * version never changes, so the answer to a read of it (the header JSON of one of its
 * files, the Hub's model info and resolve HEAD) is built once and kept as a
 * libmicrohttpd response object, which every later request queues as it is: no
 * catalog round trip, no rendering, no copy. This file owns that cache, an instance
 * of the cache core (cache.h) with a byte budget split over shards (one mutex each,
 * no global lock), least recently used entries leave first, and these invalidation
 * rules:
 *  - tg_response_cache_invalidate (a model, version or file deleted on this
 *    replica) bumps a generation: every entry made before it stops being served,
 *    and an entry built from catalog reads that began before it is never kept;
 *  - an entry older than the TTL is not served (another replica's delete is seen
 *    within the TTL; 0 keeps entries until they are evicted or invalidated);
 *  - an answer kept under a moving key (a revision that names no version for good:
 *    "main", "latest", an alias, or none) also stops being served at the next
 *    tg_response_cache_invalidate_moving (a publish, an alias move or a derived
 *    version on this replica) and after TG_RESPONSE_CACHE_MOVING_SECONDS at most
 *    (another replica's publish or alias move is seen within it).
 * It knows nothing of requests: request.c's tg_respond_cached answers one from it.
 * Routes authorise before asking (a token's scope and namespace are checked per
 * request, never cached) and only put answers that hold for every reader allowed
 * to ask. */
#ifndef TG_RESPONSE_CACHE_H
#define TG_RESPONSE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

typedef struct tg_response_cache tg_response_cache;

/* The longest an answer under a moving key is served (whatever the TTL). */
#define TG_RESPONSE_CACHE_MOVING_SECONDS 1u

/* bytes 0: a cache that keeps nothing (every answer is a miss). NULL when out of memory. */
tg_response_cache *tg_response_cache_create(size_t bytes, unsigned ttl_seconds);
/* Drops the cache's reference on every response (connections still sending one keep it). */
void tg_response_cache_destroy(tg_response_cache *cache);

/* The generation to pass to tg_response_cache_put: read it BEFORE the catalog reads
 * the answer is built from. */
uint64_t tg_response_cache_generation(const tg_response_cache *cache);

/* Queues a kept response on the request ctx (called under a shard's lock, which
 * keeps the response alive until libmicrohttpd holds its own reference): false when
 * the request cannot take it. */
typedef bool (*tg_response_send)(void *ctx, unsigned status, struct MHD_Response *response,
                                 uint64_t body_len);

/* Sends the response kept under key with send(ctx, ...) and returns what send
 * returned; false (nothing sent) on a miss. cache may be NULL (a miss). */
bool tg_response_cache_answer(tg_response_cache *cache, const char *key, tg_response_send send,
                              void *ctx);

/* Keeps a copy of body (len bytes) answered with status and the NULL-terminated
 * name/value pairs of headers (plus "Cache-Control: no-store", as tg_respond adds)
 * under key, unless an invalidation happened since generation, or it is larger than
 * an eighth of a shard's budget. cache may be NULL. */
void tg_response_cache_put(tg_response_cache *cache, const char *key, uint64_t generation,
                           unsigned status, const void *body, size_t len,
                           const char *const *headers);

/* The same for a response built by the caller (a HEAD answer, whose body is never
 * sent): takes the caller's reference on response, also when it is not kept. */
void tg_response_cache_put_response(tg_response_cache *cache, const char *key, uint64_t generation,
                                    unsigned status, struct MHD_Response *response,
                                    uint64_t body_len);

/* Every response kept so far stops being served (this replica deleted something). */
void tg_response_cache_invalidate(tg_response_cache *cache);

/* Every response kept under a moving key stops being served (this replica published a
 * version, moved an alias or derived a version: "latest" or an alias may name another). */
void tg_response_cache_invalidate_moving(tg_response_cache *cache);

typedef struct tg_response_cache_stats {
    uint64_t hits, misses, entries, bytes;
} tg_response_cache_stats;
void tg_response_cache_get_stats(tg_response_cache *cache, tg_response_cache_stats *stats);

/* key = parts joined by '\n' into out (size cap): false when it does not fit or a part
 * holds a '\n' (then nothing is cached for it). */
bool tg_response_cache_key(char *out, size_t cap, const char *const *parts, size_t count);

/* The same key, marked moving: its rev part ("main", "latest", an alias, "") may come to
 * name another version, so its answers obey the moving rules above. False as above. */
bool tg_response_cache_moving_key(char *out, size_t cap, const char *const *parts, size_t count);

#endif
