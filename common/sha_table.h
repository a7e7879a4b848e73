/* The one hash table of the server: intrusive, keyed by a blob's SHA-256 hex and,
 * where one blob has several entries, a name beside it (header_cache.c keys by
 * sha256 and path; index_cache.c and parsed_header_cache.c by sha256 alone). Each
 * entry embeds a tg_sha_node, the cache keeps one tg_sha_table (static storage,
 * zeroed), and finds its entry back from the node with TG_SHA_ENTRY. The caller
 * holds its lock. */
#ifndef TG_SHA_TABLE_H
#define TG_SHA_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sha256.h"

#define TG_SHA_TABLE_BUCKETS 4096

typedef struct tg_sha_node {
    struct tg_sha_node *next;
    uint64_t hash;
    /* The second part of the key, or NULL for none: the entry's own storage, which
     * must outlive the node's time in the table. */
    const char *name;
    char sha256[TG_SHA256_HEX_LEN + 1];
} tg_sha_node;

typedef struct tg_sha_table {
    tg_sha_node *buckets[TG_SHA_TABLE_BUCKETS];
} tg_sha_table;

/* The entry of type `type` whose member `member` is the node n (n may be NULL). */
#define TG_SHA_ENTRY(n, type, member)                                                              \
    ((n) != NULL ? (type *)(void *)((char *)(n)-offsetof(type, member)) : (type *)NULL)

/* FNV-1a over the sha256 hex and, when there is a name, a newline and the name. */
static inline uint64_t tg_sha_table_hash(const char *sha256, const char *name)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = sha256; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    if (name != NULL) {
        h = (h ^ '\n') * 1099511628211ull;
        for (const char *p = name; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ull;
    }
    return h;
}

static inline bool tg_sha_node_is(const tg_sha_node *n, uint64_t hash, const char *sha256,
                                  const char *name)
{
    if (n->hash != hash || strcmp(n->sha256, sha256) != 0)
        return false;
    if (n->name == NULL || name == NULL)
        return n->name == name;
    return strcmp(n->name, name) == 0;
}

/* The node keyed (sha256, name), or NULL; name NULL finds the node added without one. */
static inline tg_sha_node *tg_sha_table_find_named(tg_sha_table *t, const char *sha256,
                                                   const char *name)
{
    uint64_t h = tg_sha_table_hash(sha256, name);
    for (tg_sha_node *n = t->buckets[h % TG_SHA_TABLE_BUCKETS]; n; n = n->next)
        if (tg_sha_node_is(n, h, sha256, name))
            return n;
    return NULL;
}

/* The node keyed sha256 alone, or NULL. */
static inline tg_sha_node *tg_sha_table_find(tg_sha_table *t, const char *sha256)
{
    return tg_sha_table_find_named(t, sha256, NULL);
}

/* Keys n by sha256 (TG_SHA256_HEX_LEN hex digits) and name (NULL for none; kept by
 * pointer) and puts it in the table. The key must not be in the table already. */
static inline void tg_sha_table_add_named(tg_sha_table *t, tg_sha_node *n, const char *sha256,
                                          const char *name)
{
    memcpy(n->sha256, sha256, TG_SHA256_HEX_LEN);
    n->sha256[TG_SHA256_HEX_LEN] = '\0';
    n->name = name;
    n->hash = tg_sha_table_hash(n->sha256, name);
    n->next = t->buckets[n->hash % TG_SHA_TABLE_BUCKETS];
    t->buckets[n->hash % TG_SHA_TABLE_BUCKETS] = n;
}

/* Keys n by sha256 alone and puts it in the table. */
static inline void tg_sha_table_add(tg_sha_table *t, tg_sha_node *n, const char *sha256)
{
    tg_sha_table_add_named(t, n, sha256, NULL);
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
