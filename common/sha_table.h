/* An intrusive hash table keyed by a blob's SHA-256 hex, for the in-memory caches
 * (index_cache.c, parsed_header_cache.c): each entry embeds a tg_sha_node, the
 * cache keeps one tg_sha_table (static storage, zeroed), and finds its entry back
 * from the node with TG_SHA_ENTRY. The caller holds its lock. */
#ifndef TG_SHA_TABLE_H
#define TG_SHA_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sha256.h"

#define TG_SHA_TABLE_BUCKETS 1024

typedef struct tg_sha_node {
    struct tg_sha_node *next;
    uint64_t hash;
    char sha256[TG_SHA256_HEX_LEN + 1];
} tg_sha_node;

typedef struct tg_sha_table {
    tg_sha_node *buckets[TG_SHA_TABLE_BUCKETS];
} tg_sha_table;

/* The entry of type `type` whose member `member` is the node n (n may be NULL). */
#define TG_SHA_ENTRY(n, type, member)                                                              \
    ((n) != NULL ? (type *)(void *)((char *)(n)-offsetof(type, member)) : (type *)NULL)

static inline uint64_t tg_sha_table_hash(const char *sha256)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = sha256; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

/* The node keyed sha256, or NULL. */
static inline tg_sha_node *tg_sha_table_find(tg_sha_table *t, const char *sha256)
{
    uint64_t h = tg_sha_table_hash(sha256);
    for (tg_sha_node *n = t->buckets[h % TG_SHA_TABLE_BUCKETS]; n; n = n->next)
        if (n->hash == h && strcmp(n->sha256, sha256) == 0)
            return n;
    return NULL;
}

/* Keys n by sha256 (TG_SHA256_HEX_LEN hex digits) and puts it in the table. */
static inline void tg_sha_table_add(tg_sha_table *t, tg_sha_node *n, const char *sha256)
{
    memcpy(n->sha256, sha256, TG_SHA256_HEX_LEN);
    n->sha256[TG_SHA256_HEX_LEN] = '\0';
    n->hash = tg_sha_table_hash(n->sha256);
    n->next = t->buckets[n->hash % TG_SHA_TABLE_BUCKETS];
    t->buckets[n->hash % TG_SHA_TABLE_BUCKETS] = n;
}

/* Takes n out of the table (n must be in it). */
static inline void tg_sha_table_remove(tg_sha_table *t, tg_sha_node *n)
{
    tg_sha_node **link = &t->buckets[n->hash % TG_SHA_TABLE_BUCKETS];
    while (*link != n)
        link = &(*link)->next;
    *link = n->next;
    n->next = NULL;
}

#endif
