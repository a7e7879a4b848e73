/* Unit tests for common/sha_table.h, the one hash table: keys by sha256 alone and by
 * (sha256, name) side by side, entries found back with TG_SHA_ENTRY, removal from the
 * head, middle and tail of a chain (8192 entries over 4096 buckets make chains), and
 * the hash of a sha256-only key staying plain FNV-1a of the digest. */
#include <stdlib.h>

#include "sha_table.h"
#include "test.h"

typedef struct item {
    int value;
    tg_sha_node node;
    char name[16];
} item;

static tg_sha_table table;

static void digest(unsigned k, char out[TG_SHA256_HEX_LEN + 1])
{
    snprintf(out, TG_SHA256_HEX_LEN + 1, "%064x", k);
}

TEST(plain_and_named)
{
    memset(&table, 0, sizeof table);
    char sha[TG_SHA256_HEX_LEN + 1];
    digest(7, sha);
    CHECK(tg_sha_table_find(&table, sha) == NULL);
    CHECK(TG_SHA_ENTRY(tg_sha_table_find(&table, sha), item, node) == NULL);

    item plain = {.value = 1}, a = {.value = 2}, b = {.value = 3}, empty = {.value = 4};
    snprintf(a.name, sizeof a.name, "a.safetensors");
    snprintf(b.name, sizeof b.name, "b.safetensors");
    tg_sha_table_add(&table, &plain.node, sha);
    tg_sha_table_add_named(&table, &a.node, sha, a.name);
    tg_sha_table_add_named(&table, &b.node, sha, b.name);
    tg_sha_table_add_named(&table, &empty.node, sha, empty.name); /* "" is a name */

    item *found = TG_SHA_ENTRY(tg_sha_table_find(&table, sha), item, node);
    CHECK(found == &plain);
    found = TG_SHA_ENTRY(tg_sha_table_find_named(&table, sha, "a.safetensors"), item, node);
    CHECK(found == &a);
    found = TG_SHA_ENTRY(tg_sha_table_find_named(&table, sha, "b.safetensors"), item, node);
    CHECK(found == &b);
    found = TG_SHA_ENTRY(tg_sha_table_find_named(&table, sha, ""), item, node);
    CHECK(found == &empty);
    CHECK(tg_sha_table_find_named(&table, sha, "c.safetensors") == NULL);
    CHECK(tg_sha_table_find_named(&table, sha, "a.safetensor") == NULL);

    /* another digest finds nothing; a longer string is not the digest */
    char other[TG_SHA256_HEX_LEN + 1];
    digest(8, other);
    CHECK(tg_sha_table_find(&table, other) == NULL);
    CHECK(tg_sha_table_find_named(&table, other, "a.safetensors") == NULL);
    char longer[TG_SHA256_HEX_LEN + 2];
    snprintf(longer, sizeof longer, "%s0", sha);
    CHECK(tg_sha_table_find(&table, longer) == NULL);

    /* the key's digest is a copy; the name is kept by pointer */
    CHECK_STR(plain.node.sha256, sha);
    CHECK(a.node.name == a.name);
    CHECK(plain.node.name == NULL);

    tg_sha_table_remove(&table, &a.node);
    CHECK(tg_sha_table_find_named(&table, sha, "a.safetensors") == NULL);
    CHECK(tg_sha_table_find(&table, sha) == &plain.node);
    CHECK(tg_sha_table_find_named(&table, sha, "b.safetensors") == &b.node);
    tg_sha_table_remove(&table, &plain.node);
    CHECK(tg_sha_table_find(&table, sha) == NULL);
    CHECK(tg_sha_table_find_named(&table, sha, "b.safetensors") == &b.node);
    tg_sha_table_remove(&table, &b.node);
    tg_sha_table_remove(&table, &empty.node);
    for (size_t i = 0; i < TG_SHA_TABLE_BUCKETS; i++)
        if (table.buckets[i] != NULL)
            CHECK(table.buckets[i] == NULL);
}

TEST(chains)
{
    memset(&table, 0, sizeof table);
    enum { COUNT = 2 * TG_SHA_TABLE_BUCKETS };
    item *items = calloc(COUNT, sizeof *items);
    CHECK(items != NULL);
    if (items == NULL)
        return;
    char sha[TG_SHA256_HEX_LEN + 1];
    for (unsigned k = 0; k < COUNT; k++) {
        items[k].value = (int)k;
        digest(k / 2, sha);
        if (k % 2 == 0) {
            tg_sha_table_add(&table, &items[k].node, sha);
        } else {
            snprintf(items[k].name, sizeof items[k].name, "n%u", k);
            tg_sha_table_add_named(&table, &items[k].node, sha, items[k].name);
        }
    }
    size_t longest = 0, used = 0;
    for (size_t i = 0; i < TG_SHA_TABLE_BUCKETS; i++) {
        size_t length = 0;
        for (const tg_sha_node *n = table.buckets[i]; n != NULL; n = n->next)
            length++;
        used += length > 0;
        longest = length > longest ? length : longest;
    }
    CHECK(longest >= 2);
    CHECK(used > TG_SHA_TABLE_BUCKETS / 2);

    /* remove every third entry, wherever it sits in its chain */
    for (unsigned k = 0; k < COUNT; k += 3)
        tg_sha_table_remove(&table, &items[k].node);
    unsigned mismatches = 0;
    for (unsigned k = 0; k < COUNT; k++) {
        digest(k / 2, sha);
        char name[16];
        snprintf(name, sizeof name, "n%u", k);
        tg_sha_node *n = k % 2 == 0 ? tg_sha_table_find(&table, sha)
                                    : tg_sha_table_find_named(&table, sha, name);
        item *found = TG_SHA_ENTRY(n, item, node);
        if (k % 3 == 0 ? found != NULL : found != &items[k] || found->value != (int)k)
            mismatches++;
    }
    CHECK_EQ_U64(mismatches, 0);
    free(items);
}

TEST(hash)
{
    /* FNV-1a of the digest alone: the caches keyed by sha256 hash as before */
    uint64_t h = 1469598103934665603ull;
    const char *sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    for (const char *p = sha; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    CHECK_EQ_U64(tg_sha_table_hash(sha, NULL), h);
    /* a name continues it after a newline */
    uint64_t named = (h ^ '\n') * 1099511628211ull;
    named = (named ^ 'x') * 1099511628211ull;
    CHECK_EQ_U64(tg_sha_table_hash(sha, "x"), named);
    CHECK(tg_sha_table_hash(sha, "") != tg_sha_table_hash(sha, NULL));
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(plain_and_named);
    RUN(chains);
    RUN(hash);
    return test_report(argv[0]);
}
