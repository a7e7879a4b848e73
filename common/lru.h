/* An intrusive recency list for the in-memory caches (header_cache.c, parsed_header_cache.c,
 * index_cache.c): each cached entry embeds a tg_lru_node as its first member, the
 * cache keeps one tg_lru, and evicts from `oldest`. The caller holds its lock. */
#ifndef TG_LRU_H
#define TG_LRU_H

#include <assert.h>
#include <stddef.h>

typedef struct tg_lru_node {
    struct tg_lru_node *newer, *older;
} tg_lru_node;

typedef struct tg_lru {
    tg_lru_node *newest, *oldest;
} tg_lru;

/* Takes n off the list (n must be on it). */
static inline void tg_lru_unlink(tg_lru *lru, tg_lru_node *n)
{
    /* on the list: linked both ways, or an end of it */
    assert(n->newer != NULL ? n->newer->older == n : lru->newest == n);
    assert(n->older != NULL ? n->older->newer == n : lru->oldest == n);
    if (n->newer)
        n->newer->older = n->older;
    else
        lru->newest = n->older;
    if (n->older)
        n->older->newer = n->newer;
    else
        lru->oldest = n->newer;
    n->newer = n->older = NULL;
    assert((lru->newest == NULL) == (lru->oldest == NULL));
}

/* Puts n (not on the list) at the newest end. */
static inline void tg_lru_push_newest(tg_lru *lru, tg_lru_node *n)
{
    assert(n->newer == NULL && n->older == NULL && lru->newest != n);
    n->older = lru->newest;
    n->newer = NULL;
    if (lru->newest)
        lru->newest->newer = n;
    lru->newest = n;
    if (lru->oldest == NULL)
        lru->oldest = n;
}

#endif
