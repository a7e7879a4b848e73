/* Unit tests for server/storage/catalog_hub.c (schema 17) on a temporary SQLite file,
 * then, when TENSORGATE_TEST_PG names a database (tests/scale/pg-suite.sh), on
 * PostgreSQL:
 *  - a pending LFS object is put, read back (facts and stats), kept per namespace, its
 *    blob counts as referenced and in the namespace's usage, refreshed by a second put,
 *    expired (visited) and deleted;
 *  - the shared secret: the first candidate wins;
 *  - branch and tag kinds: listed with their kind, create-only refuses an existing one,
 *    a branch moves only from where it is; a version made for a branch is never latest;
 *  - quota reservations: refused past the quota, counted until released, and a stale
 *    one is swept. */
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

static void object(tg_file_record *f, char fill, uint64_t size)
{
    memset(f, 0, sizeof *f);
    snprintf(f->kind, sizeof f->kind, "safetensors");
    memset(f->sha256, fill, 64);
    f->sha256[64] = '\0';
    f->size = size;
    f->tensors = 2;
    f->parameters = 12;
}

static void remember(void *ctx, const char *sha256)
{
    snprintf(ctx, 65, "%s", sha256);
}

typedef struct kinds {
    char text[256];
} kinds;

static void list_kind(void *ctx, const char *alias, int64_t number, const char *kind)
{
    kinds *k = ctx;
    size_t n = strlen(k->text);
    snprintf(k->text + n, sizeof k->text - n, "%s=%lld:%s;", alias, (long long)number, kind);
}

TEST(hub)
{
    tg_catalog *catalog = NULL;
    char err[256] = "";
    CHECK(tg_catalog_open(catalog_url, &catalog, err, sizeof err) == TG_CAT_OK);
    if (catalog == NULL) {
        fprintf(stderr, "open: %s\n", err);
        return;
    }
    /* pending objects */
    tg_file_record f, got;
    object(&f, 'a', 1000);
    CHECK(tg_catalog_hub_pending_put(catalog, "acme", "acme/m", 0, &f, "[{\"name\":\"w\"}]") ==
          TG_CAT_OK);
    char *stats = NULL;
    CHECK(tg_catalog_hub_pending_get(catalog, "acme", f.sha256, 1000, "2000-01-01T00:00:00Z", &got,
                                     &stats) == TG_CAT_OK);
    CHECK_STR(got.kind, "safetensors");
    CHECK_EQ_U64(got.tensors, 2);
    CHECK_EQ_U64(got.parameters, 12);
    CHECK(stats != NULL && strcmp(stats, "[{\"name\":\"w\"}]") == 0);
    free(stats);
    /* another namespace, another size, too old: none */
    CHECK(tg_catalog_hub_pending_get(catalog, "other", f.sha256, 1000, "2000-01-01T00:00:00Z", &got,
                                     NULL) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_hub_pending_get(catalog, "acme", f.sha256, 999, "2000-01-01T00:00:00Z", &got,
                                     NULL) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_hub_pending_get(catalog, "acme", f.sha256, 1000, "9999-01-01T00:00:00Z", &got,
                                     NULL) == TG_CAT_NOT_FOUND);
    bool referenced = false;
    CHECK(tg_catalog_blob_referenced(catalog, f.sha256, &referenced) == TG_CAT_OK && referenced);
    uint64_t usage = 0;
    CHECK(tg_catalog_namespace_usage(catalog, "acme", &usage) == TG_CAT_OK);
    CHECK_EQ_U64(usage, 1000);
    CHECK(tg_catalog_namespace_usage(catalog, "other", &usage) == TG_CAT_OK);
    CHECK_EQ_U64(usage, 0);
    /* quota reservations against that usage */
    CHECK(tg_catalog_quota_reserve(catalog, "acme", "r1", 500, 2000, "2000-01-01T00:00:00Z") ==
          TG_CAT_OK);
    CHECK(tg_catalog_quota_reserve(catalog, "acme", "r2", 501, 2000, "2000-01-01T00:00:00Z") ==
          TG_CAT_CONFLICT);
    CHECK(tg_catalog_quota_reserve(catalog, "acme", "r2", 500, 2000, "2000-01-01T00:00:00Z") ==
          TG_CAT_OK);
    CHECK(tg_catalog_quota_reserve(catalog, "other", "r3", 2000, 2000, "2000-01-01T00:00:00Z") ==
          TG_CAT_OK);
    uint64_t reserved = 0;
    CHECK(tg_catalog_quota_reserved(catalog, "acme", "2000-01-01T00:00:00Z", &reserved) ==
          TG_CAT_OK);
    CHECK_EQ_U64(reserved, 1000);
    CHECK(tg_catalog_quota_reserved(catalog, "acme", "9999-01-01T00:00:00Z", &reserved) ==
          TG_CAT_OK);
    CHECK_EQ_U64(reserved, 0);
    CHECK(tg_catalog_quota_release(catalog, "r1") == TG_CAT_OK);
    CHECK(tg_catalog_quota_release(catalog, "r1") == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_quota_reserve(catalog, "acme", "r4", 500, 2000, "2000-01-01T00:00:00Z") ==
          TG_CAT_OK);
    /* every reservation is older than "since": swept, so the room is back */
    CHECK(tg_catalog_quota_reserve(catalog, "acme", "r5", 1000, 2000, "9999-01-01T00:00:00Z") ==
          TG_CAT_OK);
    CHECK(tg_catalog_quota_release(catalog, "r2") == TG_CAT_NOT_FOUND);
    /* refresh, then expiry */
    object(&f, 'a', 1000);
    f.tensors = 3;
    CHECK(tg_catalog_hub_pending_put(catalog, "acme", "acme/m", 0, &f, "[]") == TG_CAT_OK);
    CHECK(tg_catalog_hub_pending_get(catalog, "acme", f.sha256, 1000, "2000-01-01T00:00:00Z", &got,
                                     NULL) == TG_CAT_OK);
    CHECK_EQ_U64(got.tensors, 3);
    char expired[65] = "";
    CHECK(tg_catalog_hub_pending_expire(catalog, "2000-01-01T00:00:00Z", remember, expired) ==
          TG_CAT_OK);
    CHECK_STR(expired, "");
    CHECK(tg_catalog_hub_pending_expire(catalog, "9999-01-01T00:00:00Z", remember, expired) ==
          TG_CAT_OK);
    CHECK_STR(expired, f.sha256);
    CHECK(tg_catalog_blob_referenced(catalog, f.sha256, &referenced) == TG_CAT_OK && !referenced);
    object(&f, 'b', 10);
    CHECK(tg_catalog_hub_pending_put(catalog, "acme", "acme/m", 0, &f, "[]") == TG_CAT_OK);
    CHECK(tg_catalog_hub_pending_delete(catalog, "acme", f.sha256) == TG_CAT_OK);
    CHECK(tg_catalog_hub_pending_delete(catalog, "acme", f.sha256) == TG_CAT_NOT_FOUND);

    /* the shared secret */
    char secret[65] = "";
    CHECK(tg_catalog_hub_secret(catalog, "href", "first", secret, sizeof secret) == TG_CAT_OK);
    CHECK_STR(secret, "first");
    CHECK(tg_catalog_hub_secret(catalog, "href", "second", secret, sizeof secret) == TG_CAT_OK);
    CHECK_STR(secret, "first");

    /* branches and tags */
    tg_model model;
    tg_version v1, v2, latest;
    CHECK(tg_catalog_model_create(catalog, "acme", "hub", "", &model) == TG_CAT_OK);
    CHECK(tg_catalog_version_create(catalog, model.id, &v1) == TG_CAT_OK);
    CHECK(tg_catalog_version_publish(
              catalog, v1.id, "1111111111111111111111111111111111111111111111111111111111111111",
              &v1) == TG_CAT_OK);
    CHECK(tg_catalog_alias_set(catalog, model.id, "stable", 1) == TG_CAT_OK);
    CHECK(tg_catalog_alias_set_kind(catalog, model.id, "dev", 1, "branch", false) == TG_CAT_OK);
    CHECK(tg_catalog_alias_set_kind(catalog, model.id, "dev", 1, "branch", false) == TG_CAT_EXISTS);
    CHECK(tg_catalog_alias_set_kind(catalog, model.id, "v1.0", 1, "tag", false) == TG_CAT_OK);
    kinds k = {""};
    CHECK(tg_catalog_alias_list_kinds(catalog, model.id, list_kind, &k) == TG_CAT_OK);
    CHECK_STR(k.text, "dev=1:branch;stable=1:alias;v1.0=1:tag;");
    /* a version committed on dev: published, not latest */
    CHECK(tg_catalog_version_create(catalog, model.id, &v2) == TG_CAT_OK);
    CHECK(tg_catalog_version_set_branch(catalog, v2.id, "dev") == TG_CAT_OK);
    CHECK(tg_catalog_version_publish(
              catalog, v2.id, "2222222222222222222222222222222222222222222222222222222222222222",
              &v2) == TG_CAT_OK);
    CHECK(tg_catalog_version_set_branch(catalog, v2.id, "dev") == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_version_latest_published(catalog, model.id, &latest) == TG_CAT_OK);
    CHECK_EQ_U64(latest.number, 1);
    CHECK(tg_catalog_branch_move(catalog, model.id, "dev", 2, 2) == TG_CAT_CONFLICT);
    CHECK(tg_catalog_branch_move(catalog, model.id, "dev", 1, 2) == TG_CAT_OK);
    int64_t number = 0;
    char kind[8] = "";
    CHECK(tg_catalog_alias_kind(catalog, model.id, "dev", &number, kind) == TG_CAT_OK);
    CHECK_EQ_U64(number, 2);
    CHECK_STR(kind, "branch");
    CHECK(tg_catalog_alias_kind(catalog, model.id, "none", &number, kind) == TG_CAT_NOT_FOUND);
    /* a /v1 alias set moves the number and keeps the kind */
    CHECK(tg_catalog_alias_set(catalog, model.id, "v1.0", 2) == TG_CAT_OK);
    CHECK(tg_catalog_alias_kind(catalog, model.id, "v1.0", &number, kind) == TG_CAT_OK);
    CHECK_STR(kind, "tag");
    tg_catalog_close(catalog);
}

int main(int argc, char **argv)
{
    (void)argc;
    snprintf(dir, sizeof dir, "/tmp/tg-cathub-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(db_path, sizeof db_path, "%s/catalog.db", dir);
    RUN(hub);
    const char *pg_url = getenv("TENSORGATE_TEST_PG");
    if (pg_url != NULL && pg_url[0] != '\0') {
        CHECK(tg_test_pg_reset(pg_url));
        catalog_url = pg_url;
        RUN(hub);
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
