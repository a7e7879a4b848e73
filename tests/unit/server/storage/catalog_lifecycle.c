/* Unit tests for server/storage/catalog_lifecycle.c (schema 16) on a temporary
 * SQLite file, then, when TENSORGATE_TEST_PG names a database (tests/scale/pg-suite.sh),
 * on PostgreSQL:
 *  - deprecation marks a published version, latest skips it, undeprecate clears it, a
 *    draft cannot be deprecated; each deprecation writes one version.deprecated event
 *    for a subscribed namespace;
 *  - deleting a published version leaves a tombstone (deleted_at set, no files, out of
 *    the list, its aliases gone), a second delete finds nothing, and its number is never
 *    given again; one version.deleted event;
 *  - usage counts a blob once per namespace and not another namespace's; the quota is
 *    set, read back and unset. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "test.h"
#include "test_pg.h"

static char dir[64];
static char db_path[128];
static const char *catalog_url = db_path;

static void put(tg_catalog *catalog, int64_t version_id, const char *path, char fill, uint64_t size)
{
    tg_file_record f;
    memset(&f, 0, sizeof f);
    snprintf(f.path, sizeof f.path, "%s", path);
    snprintf(f.kind, sizeof f.kind, "text");
    memset(f.sha256, fill, 64);
    f.sha256[64] = '\0';
    f.size = size;
    tg_time_now(f.created_at);
    CHECK(tg_catalog_file_put(catalog, version_id, &f, "[]") == TG_CAT_OK);
}

static void count_version(void *ctx, const tg_version *v)
{
    (void)v;
    (*(int *)ctx)++;
}

static void count_delivery(void *ctx, const tg_webhook_delivery *d)
{
    if (strcmp(d->type, "version.deprecated") == 0)
        ((int *)ctx)[0]++;
    if (strcmp(d->type, "version.deleted") == 0)
        ((int *)ctx)[1]++;
}

TEST(lifecycle)
{
    tg_catalog *catalog = NULL;
    char err[256] = "";
    CHECK(tg_catalog_open(catalog_url, &catalog, err, sizeof err) == TG_CAT_OK);
    if (catalog == NULL) {
        fprintf(stderr, "open: %s\n", err);
        return;
    }
    tg_webhook hook;
    CHECK(tg_catalog_webhook_create(catalog, "acme", "http://192.0.2.1/h", "secret-0123456789ab",
                                    ",version.deprecated,version.deleted,", &hook) == TG_CAT_OK);
    tg_model model, other;
    CHECK(tg_catalog_model_create(catalog, "acme", "life", "", &model) == TG_CAT_OK);
    CHECK(tg_catalog_model_create(catalog, "other", "life", "", &other) == TG_CAT_OK);
    tg_version v1, v2, v3, got, draft;
    CHECK(tg_catalog_version_create(catalog, model.id, &v1) == TG_CAT_OK);
    put(catalog, v1.id, "a.txt", 'a', 100);
    put(catalog, v1.id, "b.txt", 'b', 10);
    CHECK(tg_catalog_version_publish(
              catalog, v1.id, "1111111111111111111111111111111111111111111111111111111111111111",
              &v1) == TG_CAT_OK);
    CHECK(tg_catalog_version_create(catalog, model.id, &v2) == TG_CAT_OK);
    put(catalog, v2.id, "a.txt", 'a', 100);
    put(catalog, v2.id, "copy.txt", 'a', 100); /* the same blob again */
    CHECK(tg_catalog_version_publish(
              catalog, v2.id, "2222222222222222222222222222222222222222222222222222222222222222",
              &v2) == TG_CAT_OK);
    CHECK(tg_catalog_version_create(catalog, other.id, &v3) == TG_CAT_OK);
    put(catalog, v3.id, "a.txt", 'a', 100); /* another namespace's row of the blob */
    uint64_t usage = 0;
    CHECK(tg_catalog_namespace_usage(catalog, "acme", &usage) == TG_CAT_OK);
    CHECK_EQ_U64(usage, 110);
    CHECK(tg_catalog_namespace_usage(catalog, "nobody", &usage) == TG_CAT_OK);
    CHECK_EQ_U64(usage, 0);

    /* deprecation */
    CHECK(tg_catalog_version_deprecate(catalog, &model, &v2, "broken") == TG_CAT_OK);
    CHECK(tg_catalog_version_get(catalog, model.id, 2, &got) == TG_CAT_OK);
    CHECK_STR(got.deprecated_reason, "broken");
    CHECK(got.deprecated_at[0] != '\0');
    CHECK(tg_catalog_version_latest_published(catalog, model.id, &got) == TG_CAT_OK);
    CHECK(got.number == 1);
    CHECK(tg_catalog_version_deprecate(catalog, &model, &v2, NULL) == TG_CAT_OK);
    CHECK(tg_catalog_version_latest_published(catalog, model.id, &got) == TG_CAT_OK);
    CHECK(got.number == 2);
    CHECK(got.deprecated_at[0] == '\0');
    CHECK(tg_catalog_version_create(catalog, model.id, &draft) == TG_CAT_OK);
    CHECK(tg_catalog_version_deprecate(catalog, &model, &draft, "x") == TG_CAT_NOT_FOUND);

    /* deleting version 1 */
    CHECK(tg_catalog_alias_set(catalog, model.id, "old", 1) == TG_CAT_OK);
    CHECK(tg_catalog_version_delete_published(catalog, &model, &draft) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_version_delete_published(catalog, &model, &v1) == TG_CAT_OK);
    CHECK(tg_catalog_version_delete_published(catalog, &model, &v1) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_version_get(catalog, model.id, 1, &got) == TG_CAT_OK);
    CHECK(got.deleted_at[0] != '\0');
    tg_file_record f;
    CHECK(tg_catalog_file_get(catalog, v1.id, "a.txt", &f) == TG_CAT_NOT_FOUND);
    int64_t number = 0;
    CHECK(tg_catalog_alias_get(catalog, model.id, "old", &number) == TG_CAT_NOT_FOUND);
    int listed = 0;
    CHECK(tg_catalog_version_list(catalog, model.id, count_version, &listed) == TG_CAT_OK);
    CHECK(listed == 2); /* 2 and the draft */
    CHECK(tg_catalog_version_deprecate(catalog, &model, &v1, "x") == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_namespace_usage(catalog, "acme", &usage) == TG_CAT_OK);
    CHECK_EQ_U64(usage, 100);
    /* deleting the newest published: its number stays taken */
    CHECK(tg_catalog_version_delete_draft(catalog, draft.id) == TG_CAT_OK);
    CHECK(tg_catalog_version_delete_published(catalog, &model, &v2) == TG_CAT_OK);
    CHECK(tg_catalog_version_create(catalog, model.id, &got) == TG_CAT_OK);
    CHECK(got.number == 3 || got.number == 4);
    CHECK(tg_catalog_version_latest_published(catalog, model.id, &got) == TG_CAT_NOT_FOUND);

    int events[2] = {0, 0};
    CHECK(tg_catalog_webhook_deliveries(catalog, "acme", hook.id, 0, 100, count_delivery, events) ==
          TG_CAT_OK);
    CHECK(events[0] == 1);
    CHECK(events[1] == 2);

    /* the quota */
    tg_namespace_settings s;
    CHECK(tg_catalog_namespace_get(catalog, "acme", &s) == TG_CAT_OK);
    CHECK(s.quota_bytes == -1);
    CHECK(tg_catalog_namespace_set_quota(catalog, "acme", 1000, &s) == TG_CAT_OK);
    CHECK(s.quota_bytes == 1000);
    CHECK(!s.allow_code);
    CHECK(tg_catalog_namespace_set_code(catalog, "acme", true, &s) == TG_CAT_OK);
    CHECK(s.quota_bytes == 1000); /* one setting leaves the other */
    CHECK(tg_catalog_namespace_set_quota(catalog, "acme", -1, &s) == TG_CAT_OK);
    CHECK(s.quota_bytes == -1);
    CHECK(s.allow_code);
    tg_catalog_close(catalog);
}

int main(int argc, char **argv)
{
    (void)argc;
    snprintf(dir, sizeof dir, "/tmp/tg-catlc-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(db_path, sizeof db_path, "%s/catalog.db", dir);
    RUN(lifecycle);
    const char *pg_url = getenv("TENSORGATE_TEST_PG");
    if (pg_url != NULL && pg_url[0] != '\0') {
        CHECK(tg_test_pg_reset(pg_url));
        catalog_url = pg_url;
        RUN(lifecycle);
    } else {
        fprintf(stderr, "TENSORGATE_TEST_PG unset: PostgreSQL round skipped "
                        "(tests/scale/with-postgres.sh runs it)\n");
    }
    char command[160];
    snprintf(command, sizeof command, "rm -rf %s", dir);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return test_report(argv[0]);
}
