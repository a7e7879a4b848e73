/* Unit tests for server/core/downloads.c: counts batch per model, a flush adds them
 * to the catalog (never overwrites), a deleted model's counts are dropped, and a
 * burst over more models than the table holds flushes instead of losing counts. */
#include <stdlib.h>
#include <unistd.h>

#include "downloads.h"
#include "test.h"

static char dir[64];

static tg_catalog *open_catalog(void)
{
    char path[128], err[256] = "";
    snprintf(path, sizeof path, "%s/catalog.db", dir);
    tg_catalog *catalog = NULL;
    CHECK(tg_catalog_open(path, &catalog, err, sizeof err) == TG_CAT_OK);
    return catalog;
}

static int64_t downloads_of(tg_catalog *catalog, const char *name)
{
    tg_model model;
    if (tg_catalog_model_get(catalog, "dl", name, &model) != TG_CAT_OK)
        return -1;
    return model.downloads;
}

TEST(batched_counts_add_up)
{
    tg_catalog *catalog = open_catalog();
    if (catalog == NULL)
        return;
    tg_model a, b;
    CHECK(tg_catalog_model_create(catalog, "dl", "a", "", &a) == TG_CAT_OK);
    CHECK(tg_catalog_model_create(catalog, "dl", "b", "", &b) == TG_CAT_OK);
    tg_downloads *d = tg_downloads_start(catalog, 0); /* no thread: flushes are explicit */
    CHECK(d != NULL);
    for (int i = 0; i < 5; i++)
        tg_downloads_count(d, a.id);
    tg_downloads_count(d, b.id);
    CHECK_EQ_U64(tg_downloads_pending(d), 2);
    CHECK_EQ_U64((uint64_t)downloads_of(catalog, "a"), 0); /* nothing written yet */
    CHECK(tg_downloads_flush(d));
    CHECK_EQ_U64(tg_downloads_pending(d), 0);
    CHECK_EQ_U64((uint64_t)downloads_of(catalog, "a"), 5);
    CHECK_EQ_U64((uint64_t)downloads_of(catalog, "b"), 1);
    /* another counter (a replica) adds to the same rows */
    tg_downloads *other = tg_downloads_start(catalog, 0);
    tg_downloads_count(other, a.id);
    tg_downloads_count(d, a.id);
    CHECK(tg_downloads_flush(other));
    tg_downloads_stop(d); /* the last flush */
    tg_downloads_stop(other);
    CHECK_EQ_U64((uint64_t)downloads_of(catalog, "a"), 7);
    /* a deleted model's pending counts are dropped, not kept for ever */
    d = tg_downloads_start(catalog, 0);
    tg_downloads_count(d, b.id);
    CHECK(tg_catalog_model_delete(catalog, b.id) == TG_CAT_OK);
    CHECK(tg_downloads_flush(d));
    CHECK_EQ_U64(tg_downloads_pending(d), 0);
    tg_downloads_stop(d);
    tg_catalog_close(catalog);
}

TEST(burst_over_the_table_flushes)
{
    tg_catalog *catalog = open_catalog();
    if (catalog == NULL)
        return;
    tg_model m;
    CHECK(tg_catalog_model_create(catalog, "dl", "burst", "", &m) == TG_CAT_OK);
    tg_downloads *d = tg_downloads_start(catalog, 0);
    /* ids of no model fill the table; the next count flushes them (dropped: not found) */
    for (int64_t id = 1000000; id < 1000000 + TG_DOWNLOADS_PENDING_MAX; id++)
        tg_downloads_count(d, id);
    CHECK_EQ_U64(tg_downloads_pending(d), TG_DOWNLOADS_PENDING_MAX);
    tg_downloads_count(d, m.id);
    CHECK_EQ_U64(tg_downloads_pending(d), 1);
    tg_downloads_stop(d);
    CHECK_EQ_U64((uint64_t)downloads_of(catalog, "burst"), 1);
    tg_catalog_close(catalog);
}

TEST(thread_starts_and_stops)
{
    tg_catalog *catalog = open_catalog();
    if (catalog == NULL)
        return;
    tg_model m;
    CHECK(tg_catalog_model_create(catalog, "dl", "thread", "", &m) == TG_CAT_OK);
    tg_downloads *d = tg_downloads_start(catalog, 60000);
    CHECK(d != NULL);
    tg_downloads_count(d, m.id);
    tg_downloads_stop(d); /* wakes the thread at once and writes the count */
    CHECK_EQ_U64((uint64_t)downloads_of(catalog, "thread"), 1);
    tg_downloads_count(NULL, m.id); /* no counter: nothing */
    tg_downloads_stop(NULL);
    tg_catalog_close(catalog);
}

int main(int argc, char **argv)
{
    (void)argc;
    snprintf(dir, sizeof dir, "/tmp/tg-downloads-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    RUN(batched_counts_add_up);
    RUN(burst_over_the_table_flushes);
    RUN(thread_starts_and_stops);
    char command[160];
    snprintf(command, sizeof command, "rm -rf %s", dir);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return test_report(argv[0]);
}
