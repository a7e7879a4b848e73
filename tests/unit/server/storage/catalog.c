/* Unit tests for server/storage/catalog.c on a temporary SQLite file. Run from the repo
 * root (the migration files are compared with the embedded table). */
#include <glob.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "catalog.h"
#include "catalog_backend.h"
#include "embedded.h"
#include "test.h"
#include "test_pg.h"

static char dir[64];
static char db_path[128];
/* The catalog the backend-independent tests open: db_path, then (a second round,
 * when TENSORGATE_TEST_PG names a PostgreSQL database) that database. */
static const char *catalog_url = db_path;

static tg_catalog *open_fresh(void)
{
    tg_catalog *catalog = NULL;
    char err[256] = "";
    CHECK(tg_catalog_open(catalog_url, &catalog, err, sizeof err) == TG_CAT_OK);
    if (catalog == NULL)
        fprintf(stderr, "open: %s\n", err);
    return catalog;
}

/* Reads a whole migration file into text (NUL-terminated); false if it cannot. */
static bool read_migration_file(const char *path, char *text, size_t size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return false;
    size_t len = fread(text, 1, size - 1, f);
    bool whole = feof(f) && !ferror(f);
    fclose(f);
    text[len] = '\0';
    return whole;
}

TEST(embedded_migrations_match_files_in_order)
{
    glob_t files;
    CHECK(glob("migrations/*.sql", 0, NULL, &files) == 0);
    /* glob sorts the names, and NNNN_ makes name order version order. */
    CHECK_EQ_U64(files.gl_pathc, tg_migrations_count);
    CHECK_EQ_U64((uint64_t)tg_catalog_known_schema_version(), tg_migrations_count);
    for (size_t i = 0; i < files.gl_pathc && i < tg_migrations_count; i++) {
        const tg_migration *row = &tg_migrations[i];
        CHECK_EQ_U64((uint64_t)row->version, i + 1);
        CHECK_STR(row->name, files.gl_pathv[i] + strlen("migrations/"));
        char prefix[8];
        snprintf(prefix, sizeof prefix, "%04d_", row->version);
        CHECK(strncmp(row->name, prefix, strlen(prefix)) == 0);
        static char text[1 << 16];
        CHECK(read_migration_file(files.gl_pathv[i], text, sizeof text));
        CHECK_STR(text, row->sql);
        CHECK(tg_catalog_migration_sql(row->version) == row->sql);
    }
    globfree(&files);
    CHECK(tg_catalog_migration_sql(0) == NULL);
    CHECK(tg_catalog_migration_sql(tg_catalog_known_schema_version() + 1) == NULL);
}

static void count_model(void *ctx, const tg_model *model)
{
    (void)model;
    (*(int *)ctx)++;
}

static char last_model[200];
static void remember_model(void *ctx, const tg_model *model)
{
    (*(int *)ctx)++;
    snprintf(last_model, sizeof last_model, "%s/%s", model->org, model->name);
}

TEST(models_and_listing)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    CHECK_EQ_U64(tg_catalog_schema_version(catalog), tg_catalog_known_schema_version());
    tg_model model;
    CHECK(tg_catalog_model_create(catalog, "acme", "llama", "desc", &model) == TG_CAT_OK);
    CHECK(model.id > 0);
    CHECK(tg_catalog_model_create(catalog, "acme", "llama", "", &model) == TG_CAT_EXISTS);
    CHECK(tg_catalog_model_create(catalog, "acme", "bert", "", &model) == TG_CAT_OK);
    CHECK(tg_catalog_model_create(catalog, "zeta", "llama-2", "", &model) == TG_CAT_OK);
    tg_model got;
    CHECK(tg_catalog_model_get(catalog, "acme", "llama", &got) == TG_CAT_OK);
    CHECK_STR(got.description, "desc");
    CHECK(tg_catalog_model_get(catalog, "acme", "nope", &got) == TG_CAT_NOT_FOUND);
    int count = 0;
    CHECK(tg_catalog_model_list(catalog, NULL, NULL, NULL, NULL, 10, count_model, &count) ==
          TG_CAT_OK);
    CHECK_EQ_U64(count, 3);
    count = 0;
    CHECK(tg_catalog_model_list(catalog, NULL, "llama", NULL, NULL, 10, count_model, &count) ==
          TG_CAT_OK);
    CHECK_EQ_U64(count, 2);
    count = 0; /* one org's models (a namespace-limited token's list) */
    CHECK(tg_catalog_model_list(catalog, "acme", NULL, NULL, NULL, 10, count_model, &count) ==
          TG_CAT_OK);
    CHECK_EQ_U64(count, 2);
    count = 0;
    CHECK(tg_catalog_model_list(catalog, "zeta", "llama", NULL, NULL, 10, count_model, &count) ==
          TG_CAT_OK);
    CHECK_EQ_U64(count, 1);
    /* Keyset paging: after acme/bert comes acme/llama, then zeta/llama-2. */
    count = 0;
    CHECK(tg_catalog_model_list(catalog, NULL, NULL, "acme", "bert", 1, remember_model, &count) ==
          TG_CAT_OK);
    CHECK_EQ_U64(count, 1);
    CHECK_STR(last_model, "acme/llama");
    count = 0;
    CHECK(tg_catalog_model_list(catalog, NULL, NULL, "acme", "llama", 5, remember_model, &count) ==
          TG_CAT_OK);
    CHECK_EQ_U64(count, 1);
    CHECK_STR(last_model, "zeta/llama-2");
    tg_catalog_close(catalog);
}

static void count_file(void *ctx, const tg_file_record *file)
{
    (void)file;
    (*(int *)ctx)++;
}

TEST(versions_files_publish)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    tg_model model;
    CHECK(tg_catalog_model_get(catalog, "acme", "llama", &model) == TG_CAT_OK);
    tg_version v1, v2;
    CHECK(tg_catalog_version_create(catalog, model.id, &v1) == TG_CAT_OK);
    CHECK(tg_catalog_version_create(catalog, model.id, &v2) == TG_CAT_OK);
    CHECK_EQ_U64(v1.number, 1);
    CHECK_EQ_U64(v2.number, 2);
    CHECK(!v1.published);
    CHECK_STR(v1.digest, "");
    tg_file_record file = {.path = "model.safetensors",
                           .kind = "safetensors",
                           .size = 216,
                           .sha256 =
                               "e2f04c5decbaf0c217371661bd0e14aa8b8e3d75fc884a20ea7bf128c7d7c852",
                           .tensors = 2,
                           .parameters = 16,
                           .nan = 1};
    CHECK(tg_catalog_file_put(catalog, v1.id, &file, "[[1,0],[0,0]]") == TG_CAT_OK);
    file.size = 217; /* replacing the same path in a draft */
    CHECK(tg_catalog_file_put(catalog, v1.id, &file, "[[1,0],[0,0]]") == TG_CAT_OK);
    tg_file_record got;
    CHECK(tg_catalog_file_get(catalog, v1.id, "model.safetensors", &got) == TG_CAT_OK);
    CHECK_EQ_U64(got.size, 217);
    CHECK_EQ_U64(got.nan, 1);
    char *stats = NULL;
    CHECK(tg_catalog_file_stats(catalog, v1.id, "model.safetensors", &stats) == TG_CAT_OK);
    CHECK_STR(stats, "[[1,0],[0,0]]");
    free(stats);
    tg_version latest;
    CHECK(tg_catalog_version_latest_published(catalog, model.id, &latest) == TG_CAT_NOT_FOUND);
    const char *digest = "88daf6cb738d0000000000000000000000000000000000000000000000000000";
    tg_version published;
    CHECK(tg_catalog_version_publish(catalog, v1.id, digest, &published) == TG_CAT_OK);
    CHECK(published.published);
    CHECK_STR(published.digest, digest);
    CHECK(published.published_at[0] != '\0');
    CHECK(tg_catalog_version_publish(catalog, v1.id, digest, &published) == TG_CAT_CONFLICT);
    /* A published version is frozen. */
    CHECK(tg_catalog_file_put(catalog, v1.id, &file, NULL) == TG_CAT_CONFLICT);
    CHECK(tg_catalog_file_delete(catalog, v1.id, "model.safetensors") == TG_CAT_CONFLICT);
    CHECK(tg_catalog_version_latest_published(catalog, model.id, &latest) == TG_CAT_OK);
    CHECK_EQ_U64(latest.number, 1);
    tg_version by_digest;
    CHECK(tg_catalog_version_by_digest(catalog, model.id, digest, &by_digest) == TG_CAT_OK);
    CHECK_EQ_U64(by_digest.number, 1);
    CHECK(tg_catalog_alias_set(catalog, model.id, "stable", 1) == TG_CAT_OK);
    int64_t number = 0;
    CHECK(tg_catalog_alias_get(catalog, model.id, "stable", &number) == TG_CAT_OK);
    CHECK_EQ_U64(number, 1);
    CHECK(tg_catalog_alias_get(catalog, model.id, "beta", &number) == TG_CAT_NOT_FOUND);
    /* Draft files: list paging by path, delete. */
    const char *paths[] = {"b.json", "a.json", "c/d.txt"};
    for (int i = 0; i < 3; i++) {
        tg_file_record f = {.kind = "json", .size = 2, .sha256 = "00"};
        snprintf(f.path, sizeof f.path, "%s", paths[i]);
        CHECK(tg_catalog_file_put(catalog, v2.id, &f, NULL) == TG_CAT_OK);
    }
    int count = 0;
    CHECK(tg_catalog_file_list(catalog, v2.id, "a.json", 10, count_file, &count) == TG_CAT_OK);
    CHECK_EQ_U64(count, 2);
    tg_file_records all = {0};
    CHECK(tg_catalog_file_list(catalog, v2.id, NULL, 0, tg_file_records_collect, &all) ==
          TG_CAT_OK);
    CHECK(!all.failed);
    CHECK_EQ_U64(all.count, 3);
    if (all.count == 3) {
        CHECK_STR(all.items[0].path, "a.json");
        CHECK_STR(all.items[1].path, "b.json");
        CHECK_STR(all.items[2].path, "c/d.txt");
    }
    free(all.items);
    CHECK(tg_catalog_file_delete(catalog, v2.id, "a.json") == TG_CAT_OK);
    CHECK(tg_catalog_file_delete(catalog, v2.id, "a.json") == TG_CAT_NOT_FOUND);
    /* An alias goes by name; a draft goes with its files, a published version never. */
    CHECK(tg_catalog_alias_delete(catalog, model.id, "stable") == TG_CAT_OK);
    CHECK(tg_catalog_alias_delete(catalog, model.id, "stable") == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_alias_get(catalog, model.id, "stable", &number) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_version_delete_draft(catalog, v1.id) == TG_CAT_NOT_FOUND);
    tg_version v3;
    CHECK(tg_catalog_version_create(catalog, model.id, &v3) == TG_CAT_OK);
    tg_file_record draft_file = {.path = "x.json", .kind = "json", .size = 2, .sha256 = "01"};
    CHECK(tg_catalog_file_put(catalog, v3.id, &draft_file, NULL) == TG_CAT_OK);
    CHECK(tg_catalog_version_delete_draft(catalog, v3.id) == TG_CAT_OK);
    CHECK(tg_catalog_version_get(catalog, model.id, v3.number, &latest) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_file_get(catalog, v3.id, "x.json", &draft_file) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_version_delete_draft(catalog, v3.id) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_version_get(catalog, model.id, 1, &latest) == TG_CAT_OK);
    bool referenced = false;
    CHECK(tg_catalog_blob_referenced(catalog, file.sha256, &referenced) == TG_CAT_OK && referenced);
    CHECK(tg_catalog_blob_referenced(catalog, "ff", &referenced) == TG_CAT_OK && !referenced);
    /* Deleting the model takes its versions, files and aliases. */
    CHECK(tg_catalog_model_delete(catalog, model.id) == TG_CAT_OK);
    CHECK(tg_catalog_blob_referenced(catalog, file.sha256, &referenced) == TG_CAT_OK &&
          !referenced);
    CHECK(tg_catalog_version_get(catalog, model.id, 1, &latest) == TG_CAT_NOT_FOUND);
    tg_catalog_close(catalog);
}

/* The collector keeps every record, in visit order, across its reallocations. */
TEST(file_records_collect_keeps_order)
{
    tg_file_records list = {0};
    for (uint64_t i = 0; i < 100; i++) {
        tg_file_record file = {.size = i};
        snprintf(file.path, sizeof file.path, "f%03u", (unsigned)i);
        tg_file_records_collect(&list, &file);
    }
    CHECK(!list.failed);
    CHECK_EQ_U64(list.count, 100);
    CHECK(list.cap >= list.count);
    for (size_t i = 0; i < list.count; i++) {
        char path[8];
        snprintf(path, sizeof path, "f%03u", (unsigned)i);
        CHECK_EQ_U64(list.items[i].size, i);
        CHECK_STR(list.items[i].path, path);
    }
    free(list.items);
}

static void count_rejection(void *ctx, const tg_rejection *r)
{
    int64_t *last = ctx;
    *last = r->id;
}

/* Keeps the findings text of the rejections listed, by id (1..5). */
static void keep_findings(void *ctx, const tg_rejection *r)
{
    char(*texts)[TG_REJECTION_FINDINGS_MAX] = ctx;
    if (r->id >= 1 && r->id <= 5)
        snprintf(texts[r->id], sizeof texts[r->id], "%s", r->findings);
}

static void keep_rejection(void *ctx, const tg_rejection *r)
{
    tg_rejection *seen = ctx;
    if (r->id >= 1 && r->id <= 5)
        seen[r->id] = *r;
}

static void count_one(void *ctx, const tg_rejection *r)
{
    (void)r;
    (*(uint64_t *)ctx)++;
}

static uint64_t count_matching(tg_catalog *catalog, const tg_rejection_filter *filter)
{
    uint64_t n = 0;
    CHECK(tg_catalog_rejection_list(catalog, filter, 100, count_one, &n) == TG_CAT_OK);
    return n;
}

static void count_code_file(void *ctx, int64_t number, const char *path, const char *reason)
{
    char *seen = ctx;
    size_t used = strlen(seen);
    snprintf(seen + used, 256 - used, "%lld:%s:%s;", (long long)number, path, reason);
}

static void keep_outcome(void *ctx, const tg_rejection *r)
{
    snprintf(ctx, 24, "%s", r->outcome);
}

/* schema 10: a namespace's code policy, code files that mark their version, and the
 * outcome of a rejection record */
TEST(code_policy_settings_and_marks)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    tg_namespace_settings settings;
    CHECK(tg_catalog_namespace_get(catalog, "acme", &settings) == TG_CAT_OK);
    CHECK(!settings.allow_code); /* never set: the default */
    CHECK_STR(settings.updated_at, "");
    CHECK(tg_catalog_namespace_set_code(catalog, "acme", true, &settings) == TG_CAT_OK);
    CHECK(settings.allow_code);
    CHECK(settings.updated_at[0] != '\0');
    CHECK(tg_catalog_namespace_set_code(catalog, "acme", true, NULL) == TG_CAT_OK); /* again */
    CHECK(tg_catalog_namespace_get(catalog, "other", &settings) == TG_CAT_OK);
    CHECK(!settings.allow_code);
    CHECK(tg_catalog_namespace_set_code(catalog, "acme", false, &settings) == TG_CAT_OK);
    CHECK(!settings.allow_code);

    tg_model model;
    CHECK(tg_catalog_model_create(catalog, "acme", "codepolicy", "", &model) == TG_CAT_OK);
    tg_version v1, v2;
    CHECK(tg_catalog_version_create(catalog, model.id, &v1) == TG_CAT_OK);
    CHECK(tg_catalog_version_create(catalog, model.id, &v2) == TG_CAT_OK);
    tg_file_record code = {.path = "modeling_x.py",
                           .kind = "code",
                           .size = 3,
                           .sha256 = "aa",
                           .code_reason = "code_python"};
    tg_file_record text = {.path = "README.md", .kind = "text", .size = 3, .sha256 = "bb"};
    CHECK(tg_catalog_file_put(catalog, v2.id, &code, NULL) == TG_CAT_OK);
    CHECK(tg_catalog_file_put(catalog, v2.id, &text, NULL) == TG_CAT_OK);
    CHECK(tg_catalog_file_put(catalog, v1.id, &text, NULL) == TG_CAT_OK);
    /* kind code without its reason (and a reason without the kind) is refused */
    tg_file_record bad = code;
    bad.code_reason[0] = '\0';
    CHECK(tg_catalog_file_put(catalog, v1.id, &bad, NULL) != TG_CAT_OK);
    tg_file_record got;
    CHECK(tg_catalog_file_get(catalog, v2.id, "modeling_x.py", &got) == TG_CAT_OK);
    CHECK_STR(got.kind, "code");
    CHECK_STR(got.code_reason, "code_python");
    CHECK(tg_catalog_file_get(catalog, v2.id, "README.md", &got) == TG_CAT_OK);
    CHECK_STR(got.code_reason, "");
    char seen[256] = "";
    CHECK(tg_catalog_code_files(catalog, model.id, 0, count_code_file, seen) == TG_CAT_OK);
    CHECK_STR(seen, "2:modeling_x.py:code_python;");
    seen[0] = '\0';
    CHECK(tg_catalog_code_files(catalog, model.id, 1, count_code_file, seen) == TG_CAT_OK);
    CHECK_STR(seen, "");

    tg_rejection r = {.version = 2, .size = 3};
    tg_time_now(r.time);
    snprintf(r.reason, sizeof r.reason, "code_python");
    snprintf(r.outcome, sizeof r.outcome, "admitted_by_policy");
    CHECK(tg_catalog_rejection_add(catalog, &r) == TG_CAT_OK);
    char outcome[24] = "";
    CHECK(tg_catalog_rejection_list(catalog, NULL, 1, keep_outcome, outcome) == TG_CAT_OK);
    CHECK_STR(outcome, "admitted_by_policy");
    r.outcome[0] = '\0'; /* the default */
    CHECK(tg_catalog_rejection_add(catalog, &r) == TG_CAT_OK);
    CHECK(tg_catalog_rejection_list(catalog, NULL, 1, keep_outcome, outcome) == TG_CAT_OK);
    CHECK_STR(outcome, "refused");
    tg_catalog_close(catalog);
}

TEST(rejections_and_tokens)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    static const char sha_a[] = "1111111111111111111111111111111111111111111111111111111111111111";
    for (int i = 0; i < 5; i++) {
        tg_rejection r = {.version = i == 0 ? -1 : i, .size = (uint64_t)i};
        /* times a day apart: 2026-05-01 .. 2026-05-05 */
        snprintf(r.time, sizeof r.time, "2026-05-0%dT12:00:00Z", i + 1);
        snprintf(r.reason, sizeof r.reason, "%s", i % 2 ? "pickle_refused" : "refused_format");
        snprintf(r.client, sizeof r.client, "127.0.0.1");
        /* schema 9: what, whose and how */
        snprintf(r.namespace_name, sizeof r.namespace_name, "%s", i < 3 ? "acme" : "other");
        snprintf(r.model, sizeof r.model, "%s/m", r.namespace_name);
        if (i == 1 || i == 4)
            snprintf(r.sha256, sizeof r.sha256, "%s", sha_a);
        r.token_id = i == 2 ? 0 : 40 + i;
        if (i == 0)
            r.job_id = 9;
        else
            snprintf(r.route, sizeof r.route, "PUT /v1/models/{org}/{name}");
        /* schema 7: a refused pickle's findings, kept as JSON text */
        if (i == 3)
            snprintf(r.findings, sizeof r.findings,
                     "[{\"global\":\"posix.system\",\"calls\":true,\"severity\":\"dangerous\","
                     "\"offset\":2}]");
        CHECK(tg_catalog_rejection_add(catalog, &r) == TG_CAT_OK);
    }
    static char texts[6][TG_REJECTION_FINDINGS_MAX];
    memset(texts, 0, sizeof texts);
    CHECK(tg_catalog_rejection_list(catalog, NULL, 10, keep_findings, texts) == TG_CAT_OK);
    CHECK(strstr(texts[4], "posix.system") != NULL);
    CHECK_STR(texts[3], "");
    int64_t last = 0;
    CHECK(tg_catalog_rejection_list(catalog, NULL, 2, count_rejection, &last) == TG_CAT_OK);
    CHECK_EQ_U64(last, 4); /* newest first: 5, 4 */
    tg_rejection_filter page = {.before_id = last};
    CHECK(tg_catalog_rejection_list(catalog, &page, 100, count_rejection, &last) == TG_CAT_OK);
    CHECK_EQ_U64(last, 1);
    /* every field comes back as written; NULL columns as "" / -1 / 0 */
    static tg_rejection seen[6];
    memset(seen, 0, sizeof seen);
    CHECK(tg_catalog_rejection_list(catalog, NULL, 10, keep_rejection, seen) == TG_CAT_OK);
    CHECK_STR(seen[2].sha256, sha_a);
    CHECK_STR(seen[2].namespace_name, "acme");
    CHECK_EQ_U64(seen[2].token_id, 41);
    CHECK_STR(seen[2].route, "PUT /v1/models/{org}/{name}");
    CHECK_EQ_U64(seen[2].job_id, 0);
    CHECK_STR(seen[1].sha256, "");
    CHECK(seen[1].version == -1);
    CHECK_EQ_U64(seen[1].job_id, 9);
    CHECK_STR(seen[1].route, "");
    CHECK_EQ_U64(seen[3].token_id, 0);
    CHECK_STR(seen[5].time, "2026-05-05T12:00:00Z");
    /* the filters, alone and together */
    CHECK_EQ_U64(count_matching(catalog, &(tg_rejection_filter){.reason = "pickle_refused"}), 2);
    CHECK_EQ_U64(count_matching(catalog, &(tg_rejection_filter){.namespace_name = "acme"}), 3);
    CHECK_EQ_U64(count_matching(catalog, &(tg_rejection_filter){.sha256 = sha_a}), 2);
    CHECK_EQ_U64(count_matching(catalog, &(tg_rejection_filter){.since = "2026-05-02T12:00:00Z"}),
                 4);
    CHECK_EQ_U64(count_matching(catalog, &(tg_rejection_filter){.until = "2026-05-02T12:00:00Z"}),
                 1); /* until is exclusive */
    CHECK_EQ_U64(count_matching(catalog, &(tg_rejection_filter){.namespace_name = "other",
                                                                .sha256 = sha_a,
                                                                .since = "2026-05-05T00:00:00Z",
                                                                .until = "2026-05-06T00:00:00Z"}),
                 1);
    CHECK_EQ_U64(count_matching(catalog, &(tg_rejection_filter){.namespace_name = "nobody"}), 0);
    CHECK_EQ_U64(
        count_matching(catalog, &(tg_rejection_filter){.reason = "pickle_refused", .before_id = 4}),
        1);
    const char *hash = "aaaa000000000000000000000000000000000000000000000000000000000000";
    CHECK(tg_catalog_token_add(catalog, hash, TG_SCOPE_WRITE, "acme") == TG_CAT_OK);
    CHECK(tg_catalog_token_add(catalog, hash, TG_SCOPE_READ, NULL) == TG_CAT_EXISTS);
    tg_scope scope = TG_SCOPE_NONE;
    char ns[65];
    CHECK(tg_catalog_token_lookup(catalog, hash, &scope, ns, sizeof ns) == TG_CAT_OK);
    CHECK(scope == TG_SCOPE_WRITE);
    CHECK_STR(ns, "acme");
    CHECK(tg_catalog_token_lookup(catalog, "bbbb", &scope, ns, sizeof ns) == TG_CAT_NOT_FOUND);
    tg_catalog_close(catalog);
}

static void keep_audit(void *ctx, const tg_audit_record *r)
{
    tg_audit_record *rs = ctx;
    for (int i = 0; i < 8; i++) {
        if (rs[i].seq == 0) {
            rs[i] = *r;
            return;
        }
    }
}

/* Returns how many of rs[0..8) are filled, after a list with filter f. */
static int audit_listed(tg_catalog *catalog, const tg_audit_filter *f, unsigned limit,
                        tg_audit_record *rs)
{
    memset(rs, 0, 8 * sizeof *rs);
    CHECK(tg_catalog_audit_list(catalog, f, limit, keep_audit, rs) == TG_CAT_OK);
    int n = 0;
    while (n < 8 && rs[n].seq != 0)
        n++;
    return n;
}

/* schema 11: the audit log. Appends chain (seq 1, 2, 3, prev_hash the hash before,
 * hash over the record); the token is resolved by its hash (unknown or none:
 * anonymous); each filter keeps what it says. */
TEST(audit_append_chain_and_filters)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    const char *hash = "a0d1000000000000000000000000000000000000000000000000000000000000";
    CHECK(tg_catalog_token_add(catalog, hash, TG_SCOPE_WRITE, "acme") == TG_CAT_OK);
    int64_t token_id = 0;
    CHECK(tg_catalog_token_id(catalog, hash, &token_id) == TG_CAT_OK);
    const char *hashes[] = {hash, "dddd", NULL};
    const unsigned statuses[] = {201, 401, 403};
    const char *resources[] = {"/v1/models", "/v1/models/acme/m", "/v1/jobs/3"};
    for (int i = 0; i < 3; i++) {
        tg_audit_record r;
        memset(&r, 0, sizeof r);
        snprintf(r.action, sizeof r.action, "POST /v1/models");
        snprintf(r.resource, sizeof r.resource, "%s", resources[i]);
        r.status = statuses[i];
        snprintf(r.reason, sizeof r.reason, "%s", i ? "forbidden" : "");
        snprintf(r.request_id, sizeof r.request_id, "id-%d", i);
        snprintf(r.client, sizeof r.client, "127.0.0.1");
        CHECK(tg_catalog_audit_append(catalog, hashes[i], &r) == TG_CAT_OK);
        CHECK(r.seq == i + 1);
        CHECK(r.token_id == (i == 0 ? token_id : 0));
        CHECK_STR(r.namespace_name, i == 0 ? "acme" : "");
    }
    tg_audit_record rs[8];
    tg_audit_filter f;
    memset(&f, 0, sizeof f);
    CHECK(audit_listed(catalog, &f, 100, rs) == 3);
    tg_audit_chain chain;
    tg_audit_chain_init(&chain);
    char why[256];
    for (int i = 0; i < 3; i++) {
        CHECK(tg_audit_chain_next(&chain, &rs[i], why, sizeof why));
        CHECK(rs[i].seq == i + 1);
    }
    CHECK_STR(rs[0].prev_hash, TG_AUDIT_GENESIS);
    CHECK_STR(rs[1].prev_hash, rs[0].hash);
    CHECK(rs[0].token_id == token_id && rs[1].token_id == 0);
    CHECK_STR(rs[2].request_id, "id-2");
    f.token_id = token_id;
    CHECK(audit_listed(catalog, &f, 100, rs) == 1);
    f.token_id = -1;
    CHECK(audit_listed(catalog, &f, 100, rs) == 2);
    memset(&f, 0, sizeof f);
    f.outcome = TG_AUDIT_OUTCOME_REFUSED;
    CHECK(audit_listed(catalog, &f, 100, rs) == 2);
    f.outcome = TG_AUDIT_OUTCOME_SUCCESS;
    CHECK(audit_listed(catalog, &f, 100, rs) == 1);
    memset(&f, 0, sizeof f);
    f.status = 403;
    CHECK(audit_listed(catalog, &f, 100, rs) == 1 && rs[0].seq == 3);
    memset(&f, 0, sizeof f);
    f.resource_prefix = "/v1/models";
    CHECK(audit_listed(catalog, &f, 100, rs) == 2);
    f.resource_prefix = "/v1/models/acme/";
    CHECK(audit_listed(catalog, &f, 100, rs) == 1);
    memset(&f, 0, sizeof f);
    f.namespace_name = "acme";
    CHECK(audit_listed(catalog, &f, 100, rs) == 1);
    f.namespace_name = NULL;
    f.action = "POST /v1/models";
    CHECK(audit_listed(catalog, &f, 100, rs) == 3);
    f.action = NULL;
    f.after_seq = 1;
    CHECK(audit_listed(catalog, &f, 1, rs) == 1 && rs[0].seq == 2);
    f.after_seq = 0;
    f.since = "2000-01-01T00:00:00.000000Z";
    CHECK(audit_listed(catalog, &f, 100, rs) == 3);
    f.until = "2000-01-02T00:00:00.000000Z";
    CHECK(audit_listed(catalog, &f, 100, rs) == 0);
    tg_catalog_close(catalog);
}

static void remember_file(void *ctx, const tg_file_record *file)
{
    tg_file_record *files = ctx;
    for (int i = 0; i < 4; i++) {
        if (files[i].path[0] == '\0') {
            files[i] = *file;
            return;
        }
    }
}

/* A conversion job from claim to commit: its version appears only at the commit,
 * with the source's files carried over and the job's files in place of theirs. */
typedef struct tag_text {
    char text[512];
} tag_text;

static void append_tag(void *ctx, const char *key, const char *value)
{
    tag_text *t = ctx;
    size_t used = strlen(t->text);
    snprintf(t->text + used, sizeof t->text - used, "%s=%s;", key, value);
}

static void append_hub_tag(void *ctx, const char *tag)
{
    tag_text *t = ctx;
    size_t used = strlen(t->text);
    snprintf(t->text + used, sizeof t->text - used, "%s;", tag);
}

static void append_model_name(void *ctx, const tg_model *model)
{
    tag_text *t = ctx;
    size_t used = strlen(t->text);
    snprintf(t->text + used, sizeof t->text - used, "%s/%s:%lld;", model->org, model->name,
             (long long)model->downloads);
}

TEST(jobs_commit_fail_recover)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    CHECK_EQ_U64(tg_catalog_schema_version(catalog), tg_catalog_known_schema_version());
    tg_model model;
    CHECK(tg_catalog_model_create(catalog, "acme", "jobs", "", &model) == TG_CAT_OK);
    tg_version v1;
    CHECK(tg_catalog_version_create(catalog, model.id, &v1) == TG_CAT_OK);
    CHECK_EQ_U64(v1.derived_from, 0);
    CHECK_STR(v1.derived_dtype, "");
    tg_file_record shard = {.path = "model.safetensors",
                            .kind = "safetensors",
                            .size = 100,
                            .sha256 =
                                "1111111111111111111111111111111111111111111111111111111111111111",
                            .tensors = 2,
                            .parameters = 20};
    tg_file_record config = {
        .path = "config.json",
        .kind = "json",
        .size = 2,
        .sha256 = "2222222222222222222222222222222222222222222222222222222222222222"};
    CHECK(tg_catalog_file_put(catalog, v1.id, &shard, "[[0,0],[0,0]]") == TG_CAT_OK);
    CHECK(tg_catalog_file_put(catalog, v1.id, &config, NULL) == TG_CAT_OK);
    tg_version published;
    CHECK(tg_catalog_version_publish(
              catalog, v1.id, "3333333333333333333333333333333333333333333333333333333333333333",
              &published) == TG_CAT_OK);
    const char *hub_tags[] = {"license:mit"}; /* recorded at its publication */
    CHECK(tg_catalog_version_hub_tags_set(catalog, v1.id, hub_tags, 1) == TG_CAT_OK);

    static tg_job job, got;
    bool existing = true;
    CHECK(tg_catalog_job_create(catalog, model.id, v1.id, "BF16", "[\"*.weight\"]", 60, &job,
                                &existing) == TG_CAT_OK);
    CHECK(!existing);
    CHECK(job.state == TG_JOB_QUEUED);
    CHECK_STR(job.org, "acme");
    CHECK_STR(job.name, "jobs");
    CHECK_EQ_U64(job.source_number, 1);
    CHECK_STR(job.tensors, "[\"*.weight\"]");
    CHECK_STR(tg_job_state_name(job.state), "queued");
    /* a job's file can only be recorded while it runs */
    tg_file_record made = shard;
    snprintf(made.sha256, sizeof made.sha256, "%s",
             "4444444444444444444444444444444444444444444444444444444444444444");
    made.size = 60;
    CHECK(tg_catalog_job_file_put(catalog, job.id, &made, "[[0,0],[0,0]]") == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_job_claim(catalog, &got) == TG_CAT_OK);
    CHECK_EQ_U64(got.id, job.id);
    CHECK(got.state == TG_JOB_RUNNING);
    CHECK_EQ_U64(got.attempts, 1);
    CHECK(tg_catalog_job_claim(catalog, &got) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_job_file_put(catalog, job.id, &made, "[[0,0],[0,0]]") == TG_CAT_OK);
    CHECK(tg_catalog_job_progress(catalog, job.id, 60, 60) == TG_CAT_OK);
    /* the job's blob is referenced (gc keeps it) and listed by fsck's walk */
    bool referenced = false;
    CHECK(tg_catalog_blob_referenced(catalog, made.sha256, &referenced) == TG_CAT_OK && referenced);
    /* nothing visible yet: no version 2, latest still 1 */
    tg_version latest;
    CHECK(tg_catalog_version_get(catalog, model.id, 2, &latest) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_version_latest_published(catalog, model.id, &latest) == TG_CAT_OK);
    CHECK_EQ_U64(latest.number, 1);

    tg_version derived;
    const char *digest = "5555555555555555555555555555555555555555555555555555555555555555";
    CHECK(tg_catalog_job_commit(catalog, job.id, digest, &derived) == TG_CAT_OK);
    CHECK_EQ_U64(derived.number, 2);
    CHECK(derived.published);
    CHECK_STR(derived.digest, digest);
    /* the derived version keeps its source's Hub tags (the same model card) */
    tg_model_search by_tag = {.limit = 5,
                              .hub_tags = {"license:mit"},
                              .hub_tag_count = 1,
                              .org = "acme",
                              .name_query = "acme/jobs"};
    tag_text found = {""};
    CHECK(tg_catalog_model_search(catalog, &by_tag, append_model_name, &found) == TG_CAT_OK);
    CHECK_STR(found.text, "acme/jobs:0;");
    CHECK_EQ_U64(derived.derived_from, 1);
    CHECK_STR(derived.derived_dtype, "BF16");
    CHECK(tg_catalog_version_latest_published(catalog, model.id, &latest) == TG_CAT_OK);
    CHECK_EQ_U64(latest.number, 2);
    tg_file_record files[4];
    memset(files, 0, sizeof files);
    CHECK(tg_catalog_file_list(catalog, derived.id, NULL, 0, remember_file, files) == TG_CAT_OK);
    CHECK_STR(files[0].path, "config.json");
    CHECK_STR(files[0].sha256, config.sha256); /* carried over: same blob */
    CHECK_STR(files[1].path, "model.safetensors");
    CHECK_STR(files[1].sha256, made.sha256);
    CHECK_EQ_U64(files[1].size, 60);
    CHECK(files[2].path[0] == '\0');
    CHECK(tg_catalog_job_get(catalog, job.id, &got) == TG_CAT_OK);
    CHECK(got.state == TG_JOB_DONE);
    CHECK_EQ_U64(got.result_version, 2);
    CHECK(got.finished_at[0] != '\0');
    CHECK(tg_catalog_job_commit(catalog, job.id, digest, &derived) == TG_CAT_CONFLICT);
    CHECK(tg_catalog_job_get(catalog, 999, &got) == TG_CAT_NOT_FOUND);

    /* a failed job leaves no version and drops its files */
    CHECK(tg_catalog_job_create(catalog, model.id, v1.id, "F16", "[]", 60, &job, &existing) ==
          TG_CAT_OK);
    CHECK(tg_catalog_job_claim(catalog, &got) == TG_CAT_OK);
    snprintf(made.sha256, sizeof made.sha256, "%s",
             "6666666666666666666666666666666666666666666666666666666666666666");
    CHECK(tg_catalog_job_file_put(catalog, job.id, &made, NULL) == TG_CAT_OK);
    CHECK(tg_catalog_job_fail(catalog, job.id, "internal", "broken") == TG_CAT_OK);
    CHECK(tg_catalog_blob_referenced(catalog, made.sha256, &referenced) == TG_CAT_OK &&
          !referenced);
    CHECK(tg_catalog_job_get(catalog, job.id, &got) == TG_CAT_OK);
    CHECK(got.state == TG_JOB_FAILED);
    CHECK_STR(got.error_reason, "internal");
    CHECK_STR(got.error_detail, "broken");
    CHECK(tg_catalog_version_get(catalog, model.id, 3, &latest) == TG_CAT_NOT_FOUND);

    /* recovery at start: a running job is requeued, and fails once tried too often */
    CHECK(tg_catalog_job_create(catalog, model.id, v1.id, "F16", "[]", 60, &job, &existing) ==
          TG_CAT_OK);
    unsigned requeued = 0, failed = 0;
    for (int attempt = 1; attempt <= 2; attempt++) {
        CHECK(tg_catalog_job_claim(catalog, &got) == TG_CAT_OK);
        CHECK_EQ_U64(got.attempts, (uint64_t)attempt);
        CHECK(tg_catalog_job_file_put(catalog, job.id, &made, NULL) == TG_CAT_OK);
        CHECK(tg_catalog_job_recover(catalog, 2, &requeued, &failed) == TG_CAT_OK);
        CHECK_EQ_U64(requeued, attempt == 1 ? 1 : 0);
        CHECK_EQ_U64(failed, attempt == 1 ? 0 : 1);
    }
    CHECK(tg_catalog_job_get(catalog, job.id, &got) == TG_CAT_OK);
    CHECK(got.state == TG_JOB_FAILED);
    CHECK_STR(got.error_reason, "interrupted");
    CHECK(tg_catalog_blob_referenced(catalog, made.sha256, &referenced) == TG_CAT_OK &&
          !referenced);
    CHECK(tg_catalog_job_claim(catalog, &got) == TG_CAT_NOT_FOUND);

    /* deleting the model takes its jobs */
    CHECK(tg_catalog_model_delete(catalog, model.id) == TG_CAT_OK);
    CHECK(tg_catalog_job_get(catalog, job.id, &got) == TG_CAT_NOT_FOUND);
    tg_catalog_close(catalog);
}

/* Collects the ids a job list visits, in order. */
typedef struct job_ids {
    int64_t ids[16];
    size_t count;
} job_ids;

static void remember_job(void *ctx, const tg_job *job)
{
    job_ids *seen = ctx;
    if (seen->count < 16)
        seen->ids[seen->count] = job->id;
    seen->count++;
}

static job_ids list_jobs(tg_catalog *catalog, const tg_job_filter *filter, int64_t before,
                         unsigned limit)
{
    job_ids seen = {{0}, 0};
    CHECK(tg_catalog_job_list(catalog, filter, before, limit, remember_job, &seen) == TG_CAT_OK);
    return seen;
}

/* A published version 1 of org/name, for jobs to convert. */
static void published_model(tg_catalog *catalog, const char *org, const char *name, tg_model *model,
                            tg_version *v1)
{
    CHECK(tg_catalog_model_create(catalog, org, name, "", model) == TG_CAT_OK);
    CHECK(tg_catalog_version_create(catalog, model->id, v1) == TG_CAT_OK);
    tg_version published;
    CHECK(tg_catalog_version_publish(
              catalog, v1->id, "7777777777777777777777777777777777777777777777777777777777777777",
              &published) == TG_CAT_OK);
}

/* An equal POST gets the job still queued or running; a different one, or one after
 * the first is cancelled or finished, queues a new job. */
TEST(jobs_create_is_idempotent)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    tg_model model;
    tg_version v1;
    published_model(catalog, "acme", "same", &model, &v1);
    static tg_job first, again, other;
    bool existing = true;
    CHECK(tg_catalog_job_create(catalog, model.id, v1.id, "BF16", "[\"a*\"]", 10, &first,
                                &existing) == TG_CAT_OK);
    CHECK(!existing);
    CHECK(tg_catalog_job_create(catalog, model.id, v1.id, "BF16", "[\"a*\"]", 10, &again,
                                &existing) == TG_CAT_OK);
    CHECK(existing);
    CHECK_EQ_U64(again.id, first.id);
    /* the globs as given: another order or dtype is another job */
    CHECK(tg_catalog_job_create(catalog, model.id, v1.id, "F16", "[\"a*\"]", 10, &other,
                                &existing) == TG_CAT_OK);
    CHECK(!existing && other.id != first.id);
    CHECK(tg_catalog_job_create(catalog, model.id, v1.id, "BF16", "[\"a*\",\"b\"]", 10, &other,
                                &existing) == TG_CAT_OK);
    CHECK(!existing && other.id != first.id);
    /* running still counts */
    static tg_job claimed;
    CHECK(tg_catalog_job_claim(catalog, &claimed) == TG_CAT_OK);
    CHECK_EQ_U64(claimed.id, first.id);
    CHECK(tg_catalog_job_create(catalog, model.id, v1.id, "BF16", "[\"a*\"]", 10, &again,
                                &existing) == TG_CAT_OK);
    CHECK(existing && again.id == first.id && again.state == TG_JOB_RUNNING);
    /* a running job being cancelled does not: it will never make the version */
    tg_job_state was;
    CHECK(tg_catalog_job_cancel(catalog, first.id, &was, &again) == TG_CAT_OK);
    CHECK(tg_catalog_job_create(catalog, model.id, v1.id, "BF16", "[\"a*\"]", 10, &again,
                                &existing) == TG_CAT_OK);
    CHECK(!existing && again.id != first.id);
    CHECK(tg_catalog_model_delete(catalog, model.id) == TG_CAT_OK);
    tg_catalog_close(catalog);
}

TEST(jobs_list_filters_and_pages)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    tg_model a, b;
    tg_version va, vb;
    published_model(catalog, "acme", "one", &a, &va);
    published_model(catalog, "other", "two", &b, &vb);
    static tg_job job;
    bool existing;
    int64_t ids[5];
    const char *dtypes[5] = {"BF16", "F16", "F32", "F64", "F8_E4M3"};
    for (int i = 0; i < 5; i++) {
        tg_model *m = i < 3 ? &a : &b;
        tg_version *v = i < 3 ? &va : &vb;
        CHECK(tg_catalog_job_create(catalog, m->id, v->id, dtypes[i], "[]", 10, &job, &existing) ==
              TG_CAT_OK);
        ids[i] = job.id;
    }
    CHECK(tg_catalog_job_claim(catalog, &job) == TG_CAT_OK); /* ids[0] runs */
    /* newest first, all of them */
    tg_job_filter all = {0};
    job_ids seen = list_jobs(catalog, &all, 0, 100);
    CHECK_EQ_U64(seen.count, 5);
    CHECK_EQ_U64(seen.ids[0], ids[4]);
    CHECK_EQ_U64(seen.ids[4], ids[0]);
    /* pages: below the last id seen, no gap and no repeat */
    seen = list_jobs(catalog, &all, 0, 2);
    CHECK(seen.count == 2 && seen.ids[1] == ids[3]);
    seen = list_jobs(catalog, &all, ids[3], 2);
    CHECK(seen.count == 2 && seen.ids[0] == ids[2] && seen.ids[1] == ids[1]);
    seen = list_jobs(catalog, &all, ids[1], 2);
    CHECK(seen.count == 1 && seen.ids[0] == ids[0]);
    /* by state, by model, by org, combined */
    tg_job_filter running = {.has_state = true, .state = TG_JOB_RUNNING};
    seen = list_jobs(catalog, &running, 0, 100);
    CHECK(seen.count == 1 && seen.ids[0] == ids[0]);
    tg_job_filter one = {.org = "acme", .name = "one"};
    CHECK_EQ_U64(list_jobs(catalog, &one, 0, 100).count, 3);
    tg_job_filter org = {.org = "other"};
    seen = list_jobs(catalog, &org, 0, 100);
    CHECK(seen.count == 2 && seen.ids[0] == ids[4]);
    tg_job_filter queued_one = {
        .has_state = true, .state = TG_JOB_QUEUED, .org = "acme", .name = "one"};
    CHECK_EQ_U64(list_jobs(catalog, &queued_one, 0, 100).count, 2);
    tg_job_filter nobody = {.org = "acme", .name = "none"};
    CHECK_EQ_U64(list_jobs(catalog, &nobody, 0, 100).count, 0);
    CHECK(tg_catalog_model_delete(catalog, a.id) == TG_CAT_OK);
    CHECK(tg_catalog_model_delete(catalog, b.id) == TG_CAT_OK);
    CHECK_EQ_U64(list_jobs(catalog, &all, 0, 100).count, 0);
    tg_catalog_close(catalog);
}

/* Cancel: a queued job fails at once; a running one is marked, refused at its next
 * file and at its commit, failed by the worker (keeping the cancel's detail) or
 * by recovery; a finished one is left alone. */
TEST(jobs_cancel)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    tg_model model;
    tg_version v1;
    published_model(catalog, "acme", "cancel", &model, &v1);
    static tg_job job, got;
    bool existing;
    tg_job_state was = TG_JOB_DONE;
    CHECK(tg_catalog_job_cancel(catalog, 999, &was, &got) == TG_CAT_NOT_FOUND);

    /* queued: failed now, and files left by an interrupted attempt go */
    tg_file_record made = {.path = "model.safetensors",
                           .kind = "safetensors",
                           .size = 60,
                           .sha256 =
                               "8888888888888888888888888888888888888888888888888888888888888888"};
    CHECK(tg_catalog_job_create(catalog, model.id, v1.id, "BF16", "[]", 60, &job, &existing) ==
          TG_CAT_OK);
    CHECK(!job.cancel_requested);
    CHECK(tg_catalog_job_claim(catalog, &got) == TG_CAT_OK);
    CHECK(tg_catalog_job_file_put(catalog, job.id, &made, NULL) == TG_CAT_OK);
    unsigned requeued, failed;
    CHECK(tg_catalog_job_recover(catalog, 3, &requeued, &failed) == TG_CAT_OK);
    CHECK_EQ_U64(requeued, 1);
    CHECK(tg_catalog_job_cancel(catalog, job.id, &was, &got) == TG_CAT_OK);
    CHECK(was == TG_JOB_QUEUED);
    CHECK(got.state == TG_JOB_FAILED && got.cancel_requested);
    CHECK_STR(got.error_reason, "cancelled");
    CHECK(got.finished_at[0] != '\0');
    bool referenced = true;
    CHECK(tg_catalog_blob_referenced(catalog, made.sha256, &referenced) == TG_CAT_OK &&
          !referenced);
    CHECK(tg_catalog_job_claim(catalog, &got) == TG_CAT_NOT_FOUND);
    /* failed: left alone */
    CHECK(tg_catalog_job_cancel(catalog, job.id, &was, &got) == TG_CAT_OK);
    CHECK(was == TG_JOB_FAILED && got.state == TG_JOB_FAILED);

    /* running: marked, still running; its next file and its commit are refused */
    CHECK(tg_catalog_job_create(catalog, model.id, v1.id, "BF16", "[]", 60, &job, &existing) ==
          TG_CAT_OK);
    CHECK(tg_catalog_job_claim(catalog, &got) == TG_CAT_OK);
    CHECK(tg_catalog_job_file_put(catalog, job.id, &made, NULL) == TG_CAT_OK);
    CHECK(tg_catalog_job_cancel(catalog, job.id, &was, &got) == TG_CAT_OK);
    CHECK(was == TG_JOB_RUNNING);
    CHECK(got.state == TG_JOB_RUNNING && got.cancel_requested);
    CHECK(tg_catalog_job_cancel(catalog, job.id, &was, &got) == TG_CAT_OK); /* again: the same */
    CHECK(was == TG_JOB_RUNNING && got.state == TG_JOB_RUNNING);
    CHECK(tg_catalog_job_file_put(catalog, job.id, &made, NULL) == TG_CAT_NOT_FOUND);
    tg_version derived;
    const char *digest = "9999999999999999999999999999999999999999999999999999999999999999";
    CHECK(tg_catalog_job_commit(catalog, job.id, digest, &derived) == TG_CAT_CONFLICT);
    /* the worker fails it; NULL keeps the cancel's detail */
    CHECK(tg_catalog_job_fail(catalog, job.id, "cancelled", NULL) == TG_CAT_OK);
    CHECK(tg_catalog_job_get(catalog, job.id, &got) == TG_CAT_OK);
    CHECK(got.state == TG_JOB_FAILED);
    CHECK_STR(got.error_reason, "cancelled");
    CHECK(strstr(got.error_detail, "cancelled while it ran") != NULL);
    CHECK(tg_catalog_blob_referenced(catalog, made.sha256, &referenced) == TG_CAT_OK &&
          !referenced);
    tg_version none;
    CHECK(tg_catalog_version_get(catalog, model.id, 2, &none) == TG_CAT_NOT_FOUND);

    /* marked, then the server stopped: recovery fails it instead of resuming it */
    CHECK(tg_catalog_job_create(catalog, model.id, v1.id, "BF16", "[]", 60, &job, &existing) ==
          TG_CAT_OK);
    CHECK(tg_catalog_job_claim(catalog, &got) == TG_CAT_OK);
    CHECK(tg_catalog_job_cancel(catalog, job.id, &was, &got) == TG_CAT_OK);
    CHECK(tg_catalog_job_recover(catalog, 3, &requeued, &failed) == TG_CAT_OK);
    CHECK(requeued == 0 && failed == 1);
    CHECK(tg_catalog_job_get(catalog, job.id, &got) == TG_CAT_OK);
    CHECK(got.state == TG_JOB_FAILED);
    CHECK_STR(got.error_reason, "cancelled");
    CHECK(tg_catalog_job_claim(catalog, &got) == TG_CAT_NOT_FOUND);

    /* done: left alone */
    CHECK(tg_catalog_job_create(catalog, model.id, v1.id, "F16", "[]", 60, &job, &existing) ==
          TG_CAT_OK);
    CHECK(tg_catalog_job_claim(catalog, &got) == TG_CAT_OK);
    CHECK(tg_catalog_job_commit(catalog, job.id, digest, &derived) == TG_CAT_OK);
    CHECK(tg_catalog_job_cancel(catalog, job.id, &was, &got) == TG_CAT_OK);
    CHECK(was == TG_JOB_DONE && got.state == TG_JOB_DONE && !got.cancel_requested);
    CHECK_EQ_U64(got.result_version, 2);
    CHECK(tg_catalog_model_delete(catalog, model.id) == TG_CAT_OK);
    tg_catalog_close(catalog);
}

/* A catalog made at schema 1 opens at schema 2: its versions gain NULL lineage. */
TEST(schema_1_catalog_is_migrated)
{
    char old_path[160];
    snprintf(old_path, sizeof old_path, "%s/v1.db", dir);
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(old_path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db,
                       "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY,"
                       " applied_at TEXT NOT NULL)",
                       NULL, NULL, NULL) == SQLITE_OK);
    CHECK(sqlite3_exec(db, tg_catalog_migration_sql(1), NULL, NULL, NULL) == SQLITE_OK);
    CHECK(sqlite3_exec(db,
                       "INSERT INTO schema_migrations VALUES (1, 'then');"
                       "INSERT INTO models(org, name, created_at) VALUES ('acme', 'old', 'then');"
                       "INSERT INTO versions(model_id, number, state, created_at)"
                       " VALUES (1, 1, 'draft', 'then')",
                       NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    tg_catalog *catalog = NULL;
    char err[256] = "";
    CHECK(tg_catalog_open(old_path, &catalog, err, sizeof err) == TG_CAT_OK);
    if (catalog == NULL)
        return;
    CHECK_EQ_U64(tg_catalog_schema_version(catalog), tg_catalog_known_schema_version());
    tg_version version;
    CHECK(tg_catalog_version_get(catalog, 1, 1, &version) == TG_CAT_OK);
    CHECK_EQ_U64(version.derived_from, 0);
    CHECK_STR(version.derived_dtype, "");
    tg_catalog_close(catalog);
}

static int64_t scalar(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    int64_t value = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        value = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return value;
}

/* A catalog at schema 2 with rows in every table opens at schema 3: every row, id,
 * index and foreign key (with its cascade) is kept, and from then on an id is never
 * handed out twice, even the highest one after its row is deleted. */
TEST(schema_2_catalog_is_migrated_to_stable_ids)
{
    char old_path[160];
    snprintf(old_path, sizeof old_path, "%s/v2.db", dir);
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(old_path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db,
                       "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY,"
                       " applied_at TEXT NOT NULL)",
                       NULL, NULL, NULL) == SQLITE_OK);
    CHECK(sqlite3_exec(db, tg_catalog_migration_sql(1), NULL, NULL, NULL) == SQLITE_OK);
    CHECK(sqlite3_exec(db, tg_catalog_migration_sql(2), NULL, NULL, NULL) == SQLITE_OK);
    CHECK(sqlite3_exec(
              db,
              "INSERT INTO schema_migrations VALUES (1, 'then'), (2, 'then');"
              "INSERT INTO models(id, org, name, created_at) VALUES (1, 'acme', 'a', 't'),"
              " (2, 'other', 'b', 't');"
              "INSERT INTO versions(id, model_id, number, state, created_at, digest) VALUES"
              " (1, 1, 1, 'published', 't', 'd1'), (2, 1, 2, 'draft', 't', NULL),"
              " (3, 2, 1, 'published', 't', 'd3');"
              "INSERT INTO versions(id, model_id, number, state, created_at, derived_from,"
              " derived_dtype) VALUES (4, 1, 3, 'published', 't', 1, 'F16');"
              "INSERT INTO files(version_id, path, kind, size, sha256, created_at) VALUES"
              " (1, 'm.safetensors', 'safetensors', 8, 'aa', 't'),"
              " (3, 'm.safetensors', 'safetensors', 8, 'bb', 't');"
              "INSERT INTO aliases VALUES (1, 'prod', 1), (2, 'prod', 1);"
              "INSERT INTO jobs(id, kind, state, model_id, source_version_id, dtype, created_at)"
              " VALUES (1, 'convert', 'done', 1, 1, 'F16', 't'),"
              " (2, 'convert', 'running', 2, 3, 'BF16', 't');"
              "INSERT INTO job_files(job_id, path, kind, size, sha256) VALUES"
              " (2, 'm.safetensors', 'safetensors', 8, 'cc');"
              "INSERT INTO tokens(id, hash, scope, namespace, created_at) VALUES"
              " (1, 'h1', 'admin', NULL, 't'), (2, 'h2', 'write', 'other', 't');"
              "INSERT INTO rejections(time, reason) VALUES ('t', 'refused_format');",
              NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);

    tg_catalog *catalog = NULL;
    char err[256] = "";
    CHECK(tg_catalog_open(old_path, &catalog, err, sizeof err) == TG_CAT_OK);
    if (catalog == NULL) {
        fprintf(stderr, "open: %s\n", err);
        return;
    }
    /* migrated through version 3 and every later one */
    CHECK_EQ_U64(tg_catalog_schema_version(catalog), tg_catalog_known_schema_version());
    tg_model model;
    CHECK(tg_catalog_model_get(catalog, "other", "b", &model) == TG_CAT_OK);
    CHECK_EQ_U64(model.id, 2);
    tg_version version;
    CHECK(tg_catalog_version_get(catalog, 1, 3, &version) == TG_CAT_OK);
    CHECK_EQ_U64(version.id, 4);
    CHECK_EQ_U64(version.derived_from, 1);
    CHECK_STR(version.derived_dtype, "F16");
    tg_job job;
    CHECK(tg_catalog_job_get(catalog, 2, &job) == TG_CAT_OK);
    CHECK(job.state == TG_JOB_RUNNING);
    CHECK_STR(job.org, "other");
    CHECK_EQ_U64(job.token_id, 0);
    int64_t token_id = 0;
    CHECK(tg_catalog_token_id(catalog, "h2", &token_id) == TG_CAT_OK);
    CHECK_EQ_U64(token_id, 2);
    /* the highest model goes (its version, file, alias, job and job file cascade) and
     * a new model does not get its id back; neither do a version, a job or a token */
    CHECK(tg_catalog_model_delete(catalog, 2) == TG_CAT_OK);
    CHECK(tg_catalog_job_get(catalog, 2, &job) == TG_CAT_NOT_FOUND);
    tg_model again;
    CHECK(tg_catalog_model_create(catalog, "acme", "new", "", &again) == TG_CAT_OK);
    CHECK_EQ_U64(again.id, 3);
    tg_version draft;
    CHECK(tg_catalog_version_create(catalog, again.id, &draft) == TG_CAT_OK);
    CHECK_EQ_U64(draft.id, 5);
    /* schema 4: the inert kinds are files like the others */
    const char *const inert_kinds[] = {"png", "jpeg", "gif", "webp", "sentencepiece"};
    for (size_t k = 0; k < sizeof inert_kinds / sizeof inert_kinds[0]; k++) {
        tg_file_record inert = {.size = 8};
        snprintf(inert.path, sizeof inert.path, "card/%s", inert_kinds[k]);
        snprintf(inert.kind, sizeof inert.kind, "%s", inert_kinds[k]);
        snprintf(inert.sha256, sizeof inert.sha256, "%064d", (int)k);
        CHECK(tg_catalog_file_put(catalog, draft.id, &inert, "[]") == TG_CAT_OK);
    }
    CHECK(tg_catalog_token_revoke(catalog, 2) == TG_CAT_OK);
    CHECK(tg_catalog_token_add(catalog, "h3", TG_SCOPE_READ, NULL) == TG_CAT_OK);
    CHECK(tg_catalog_token_id(catalog, "h3", &token_id) == TG_CAT_OK);
    CHECK_EQ_U64(token_id, 3);
    tg_catalog_close(catalog);

    CHECK(sqlite3_open(old_path, &db) == SQLITE_OK);
    CHECK_EQ_U64(scalar(db, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
    CHECK_EQ_U64(scalar(db, "SELECT count(*) FROM versions WHERE model_id = 2"), 0);
    CHECK_EQ_U64(scalar(db, "SELECT count(*) FROM files"), 1 + 5); /* + the inert files */
    CHECK_EQ_U64(scalar(db, "SELECT count(*) FROM files WHERE kind = 'sentencepiece'"), 1);
    CHECK_EQ_U64(scalar(db, "SELECT count(*) FROM aliases"), 1);
    CHECK_EQ_U64(scalar(db, "SELECT count(*) FROM job_files"), 0);
    CHECK_EQ_U64(scalar(db, "SELECT count(*) FROM jobs"), 1);
    CHECK_EQ_U64(scalar(db, "SELECT count(*) FROM rejections"), 1);
    CHECK_EQ_U64(scalar(db, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN"
                            " ('versions_by_digest', 'jobs_by_state', 'files_by_sha256',"
                            " 'job_files_by_sha256')"),
                 4);
    CHECK_EQ_U64(scalar(db, "SELECT count(*) FROM sqlite_master WHERE name LIKE '%_new'"), 0);
    /* "_new" literally (a trigger's "new." is not a leftover table) */
    CHECK_EQ_U64(
        scalar(db, "SELECT count(*) FROM sqlite_master WHERE sql LIKE '%\\_new%' ESCAPE '\\'"), 0);
    sqlite3_close(db);
}

/* The guard of a long upload: a deleted and re-made model, a published version or a
 * revoked or narrowed token makes the commit write nothing. */
TEST(guarded_file_put)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    tg_model model;
    CHECK(tg_catalog_model_create(catalog, "evil", "guard", "", &model) == TG_CAT_OK);
    tg_version v1;
    CHECK(tg_catalog_version_create(catalog, model.id, &v1) == TG_CAT_OK);
    const char *hash = "cccc000000000000000000000000000000000000000000000000000000000000";
    CHECK(tg_catalog_token_add(catalog, hash, TG_SCOPE_WRITE, "evil") == TG_CAT_OK);
    tg_file_record file;
    memset(&file, 0, sizeof file);
    snprintf(file.path, sizeof file.path, "a.json");
    snprintf(file.kind, sizeof file.kind, "json");
    snprintf(file.sha256, sizeof file.sha256, "dd");
    tg_commit_guard guard = {model.id, "evil", "guard", hash};
    const char *why = NULL;
    CHECK(tg_catalog_file_put_guarded(catalog, &guard, v1.id, &file, NULL, &why) == TG_CAT_OK);
    tg_commit_guard other_org = {model.id, "acme", "guard", hash};
    CHECK(tg_catalog_file_put_guarded(catalog, &other_org, v1.id, &file, NULL, &why) ==
          TG_CAT_NOT_FOUND);
    CHECK_STR(why, "version_not_found");
    /* the model goes and another comes: the old ids name nothing */
    CHECK(tg_catalog_model_delete(catalog, model.id) == TG_CAT_OK);
    tg_model victim;
    CHECK(tg_catalog_model_create(catalog, "acme", "victim", "", &victim) == TG_CAT_OK);
    tg_version vv;
    CHECK(tg_catalog_version_create(catalog, victim.id, &vv) == TG_CAT_OK);
    CHECK(victim.id != model.id && vv.id != v1.id);
    CHECK(tg_catalog_file_put_guarded(catalog, &guard, v1.id, &file, NULL, &why) ==
          TG_CAT_NOT_FOUND);
    /* a revoked token */
    CHECK(tg_catalog_model_create(catalog, "evil", "guard", "", &model) == TG_CAT_OK);
    CHECK(tg_catalog_version_create(catalog, model.id, &v1) == TG_CAT_OK);
    guard.model_id = model.id;
    int64_t token_id = 0;
    CHECK(tg_catalog_token_id(catalog, hash, &token_id) == TG_CAT_OK);
    CHECK(tg_catalog_token_revoke(catalog, token_id) == TG_CAT_OK);
    CHECK(tg_catalog_file_put_guarded(catalog, &guard, v1.id, &file, NULL, &why) ==
          TG_CAT_NOT_FOUND);
    CHECK_STR(why, "token_revoked");
    tg_file_record got;
    CHECK(tg_catalog_file_get(catalog, v1.id, "a.json", &got) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_file_get(catalog, vv.id, "a.json", &got) == TG_CAT_NOT_FOUND);
    /* a token of another namespace */
    const char *other = "eeee000000000000000000000000000000000000000000000000000000000000";
    CHECK(tg_catalog_token_add(catalog, other, TG_SCOPE_WRITE, "acme") == TG_CAT_OK);
    guard.token_hash = other;
    CHECK(tg_catalog_file_put_guarded(catalog, &guard, v1.id, &file, NULL, &why) ==
          TG_CAT_NOT_FOUND);
    CHECK_STR(why, "forbidden");
    CHECK(tg_catalog_model_delete(catalog, model.id) == TG_CAT_OK);
    CHECK(tg_catalog_model_delete(catalog, victim.id) == TG_CAT_OK);
    tg_catalog_close(catalog);
}

/* Imports (schema 6): an import job is idempotent by draft, path and url, never equal
 * to a conversion; its commit puts the file with source_url and marks the job done
 * in one transaction; a cancelled job or a published draft commits nothing; an
 * upload over the path clears source_url. */
TEST(import_jobs_commit_with_source_url)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    tg_model model;
    tg_version draft;
    CHECK(tg_catalog_model_create(catalog, "imp", "m", "", &model) == TG_CAT_OK);
    CHECK(tg_catalog_version_create(catalog, model.id, &draft) == TG_CAT_OK);
    tg_job job, again, claimed;
    bool existing = true;
    CHECK(tg_catalog_import_job_create(catalog, 0, model.id, draft.id, "a.json", "http://h/a", &job,
                                       &existing) == TG_CAT_OK);
    CHECK(!existing);
    CHECK_STR(job.kind, "import");
    CHECK_STR(job.path, "a.json");
    CHECK_STR(job.url, "http://h/a");
    CHECK(tg_catalog_import_job_create(catalog, 0, model.id, draft.id, "a.json", "http://h/a",
                                       &again, &existing) == TG_CAT_OK);
    CHECK(existing && again.id == job.id);
    CHECK(tg_catalog_import_job_create(catalog, 0, model.id, draft.id, "a.json", "http://h/b",
                                       &again, &existing) == TG_CAT_OK);
    CHECK(!existing && again.id != job.id);
    CHECK(tg_catalog_job_claim(catalog, &claimed) == TG_CAT_OK && claimed.id == job.id);
    tg_file_record file;
    memset(&file, 0, sizeof file);
    snprintf(file.path, sizeof file.path, "a.json");
    snprintf(file.kind, sizeof file.kind, "json");
    snprintf(file.sha256, sizeof file.sha256, "ee");
    snprintf(file.source_url, sizeof file.source_url, "http://h/a");
    file.size = 5;
    tg_commit_guard guard = {model.id, "imp", "m", NULL};
    const char *why = NULL;
    CHECK(tg_catalog_import_commit(catalog, job.id, &guard, draft.id, &file, NULL, &why) ==
          TG_CAT_OK);
    tg_file_record got;
    CHECK(tg_catalog_file_get(catalog, draft.id, "a.json", &got) == TG_CAT_OK);
    CHECK_STR(got.source_url, "http://h/a");
    CHECK(tg_catalog_job_get(catalog, job.id, &again) == TG_CAT_OK);
    CHECK(again.state == TG_JOB_DONE);
    CHECK_EQ_U64(again.result_version, draft.number);
    CHECK(tg_catalog_import_job_create(catalog, 0, model.id, draft.id, "a.json", "http://h/b",
                                       &again, &existing) == TG_CAT_OK);
    CHECK(existing);
    /* not running any more: a second commit is refused */
    CHECK(tg_catalog_import_commit(catalog, job.id, &guard, draft.id, &file, NULL, &why) ==
          TG_CAT_CONFLICT);
    /* the second job, cancelled while it runs: nothing is put */
    CHECK(tg_catalog_job_claim(catalog, &claimed) == TG_CAT_OK && claimed.id == again.id);
    tg_job_state was;
    CHECK(tg_catalog_job_cancel(catalog, again.id, &was, &claimed) == TG_CAT_OK);
    snprintf(file.path, sizeof file.path, "b.json");
    CHECK(tg_catalog_import_commit(catalog, again.id, &guard, draft.id, &file, NULL, &why) ==
          TG_CAT_CONFLICT);
    CHECK_STR(why, "cancelled");
    CHECK(tg_catalog_file_get(catalog, draft.id, "b.json", &got) == TG_CAT_NOT_FOUND);
    /* an upload over the path: no source_url any more */
    snprintf(file.path, sizeof file.path, "a.json");
    file.source_url[0] = '\0';
    CHECK(tg_catalog_file_put_guarded(catalog, &guard, draft.id, &file, NULL, &why) == TG_CAT_OK);
    CHECK(tg_catalog_file_get(catalog, draft.id, "a.json", &got) == TG_CAT_OK);
    CHECK_STR(got.source_url, "");
    tg_catalog_close(catalog);
}

/* An import job's url keeps its credentials only while the job is queued or running:
 * done, failed, cancelled while queued, each ends with the redacted url
 * (common/url_redact.h); a running one's stays whole; a sweep (job id 0) redacts what
 * an older server left. */
TEST(import_job_urls_redacted_when_ended)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    tg_model model;
    tg_version draft;
    CHECK(tg_catalog_model_create(catalog, "imp", "red", "", &model) == TG_CAT_OK);
    CHECK(tg_catalog_version_create(catalog, model.id, &draft) == TG_CAT_OK);
    static const char *const urls[] = {"http://u:pw@h/a?t=1", "http://u:pw@h/b?t=2#f",
                                       "http://u:pw@h/c?t=3"};
    tg_job jobs[3], got;
    bool existing = false;
    for (int i = 0; i < 3; i++)
        CHECK(tg_catalog_import_job_create(catalog, 0, model.id, draft.id, "a.json", urls[i],
                                           &jobs[i], &existing) == TG_CAT_OK);
    /* the first runs, then is done; the second runs, then fails; the third is cancelled */
    CHECK(tg_catalog_job_claim(catalog, &got) == TG_CAT_OK && got.id == jobs[0].id);
    CHECK_STR(got.url, urls[0]); /* what the job fetches */
    CHECK(tg_catalog_job_get(catalog, jobs[0].id, &got) == TG_CAT_OK);
    CHECK_STR(got.url, urls[0]);
    tg_file_record file;
    memset(&file, 0, sizeof file);
    snprintf(file.path, sizeof file.path, "a.json");
    snprintf(file.kind, sizeof file.kind, "json");
    snprintf(file.sha256, sizeof file.sha256, "ee");
    snprintf(file.source_url, sizeof file.source_url, "http://h/a?REDACTED");
    tg_commit_guard guard = {model.id, "imp", "red", NULL};
    const char *why = NULL;
    CHECK(tg_catalog_import_commit(catalog, jobs[0].id, &guard, draft.id, &file, NULL, &why) ==
          TG_CAT_OK);
    CHECK(tg_catalog_job_get(catalog, jobs[0].id, &got) == TG_CAT_OK);
    CHECK(got.state == TG_JOB_DONE);
    CHECK_STR(got.url, "http://h/a?REDACTED");
    CHECK(tg_catalog_job_claim(catalog, &got) == TG_CAT_OK && got.id == jobs[1].id);
    CHECK(tg_catalog_job_fail(catalog, jobs[1].id, "import_fetch_failed", "x") == TG_CAT_OK);
    CHECK(tg_catalog_job_get(catalog, jobs[1].id, &got) == TG_CAT_OK);
    CHECK_STR(got.url, "http://h/b?REDACTED");
    tg_job_state was;
    CHECK(tg_catalog_job_cancel(catalog, jobs[2].id, &was, &got) == TG_CAT_OK);
    CHECK(was == TG_JOB_QUEUED);
    CHECK(tg_catalog_job_get(catalog, jobs[2].id, &got) == TG_CAT_OK);
    CHECK(got.state == TG_JOB_FAILED);
    CHECK_STR(got.url, "http://h/c?REDACTED");
    tg_catalog_job_scrub_urls(catalog, 0); /* nothing left to do: no change */
    CHECK(tg_catalog_job_get(catalog, jobs[1].id, &got) == TG_CAT_OK);
    CHECK_STR(got.url, "http://h/b?REDACTED");
    tg_catalog_close(catalog);
}

/* A job remembers its token: revoked before the commit, the job fails token_revoked. */
TEST(job_of_revoked_token_fails_at_commit)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    tg_model model;
    CHECK(tg_catalog_model_create(catalog, "acme", "tokjob", "", &model) == TG_CAT_OK);
    tg_version v1;
    CHECK(tg_catalog_version_create(catalog, model.id, &v1) == TG_CAT_OK);
    const char *digest = "0000000000000000000000000000000000000000000000000000000000000000";
    CHECK(tg_catalog_version_publish(catalog, v1.id, digest, &v1) == TG_CAT_OK);
    const char *hash = "ffff000000000000000000000000000000000000000000000000000000000000";
    CHECK(tg_catalog_token_add(catalog, hash, TG_SCOPE_WRITE, "acme") == TG_CAT_OK);
    int64_t token_id = 0;
    CHECK(tg_catalog_token_id(catalog, hash, &token_id) == TG_CAT_OK);
    tg_job job, got;
    bool existing = false;
    CHECK(tg_catalog_job_create_by(catalog, token_id, model.id, v1.id, "F16", "[]", 10, &job,
                                   &existing) == TG_CAT_OK);
    CHECK_EQ_U64(job.token_id, token_id);
    CHECK(tg_catalog_job_claim(catalog, &got) == TG_CAT_OK);
    CHECK(tg_catalog_token_revoke(catalog, token_id) == TG_CAT_OK);
    tg_version made;
    const char *other = "1111111111111111111111111111111111111111111111111111111111111111";
    CHECK(tg_catalog_job_commit(catalog, job.id, other, &made) == TG_CAT_CONFLICT);
    CHECK(tg_catalog_job_get(catalog, job.id, &got) == TG_CAT_OK);
    CHECK(got.state == TG_JOB_FAILED);
    CHECK_STR(got.error_reason, "token_revoked");
    CHECK(tg_catalog_version_get(catalog, model.id, 2, &made) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_model_delete(catalog, model.id) == TG_CAT_OK);
    tg_catalog_close(catalog);
}

TEST(newer_schema_is_refused)
{
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(db_path, &db) == SQLITE_OK);
    char sql[128];
    snprintf(sql, sizeof sql, "INSERT INTO schema_migrations VALUES (%d, 'future')",
             tg_catalog_known_schema_version() + 1);
    CHECK(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    tg_catalog *catalog = NULL;
    char err[256] = "";
    CHECK(tg_catalog_open(db_path, &catalog, err, sizeof err) == TG_CAT_ERROR);
    CHECK(catalog == NULL);
    CHECK(strstr(err, "newer than this tensorgate knows") != NULL);
}

/* ---- the dispatch (catalog.c): every public call reaches the backend's operation ---- */

/* A backend that records which operation was called. */
static struct {
    tg_catalog base;
    const char *called;
} fake;

static void fake_called(tg_catalog *catalog, const char *operation)
{
    CHECK(catalog == &fake.base);
    fake.called = operation;
}

static void fake_close(tg_catalog *catalog)
{

    fake_called(catalog, "close");
}

static tg_cat_status fake_ping(tg_catalog *catalog)
{

    fake_called(catalog, "ping");
    return TG_CAT_CONFLICT;
}

static int fake_schema_version(tg_catalog *catalog)
{

    fake_called(catalog, "schema_version");
    return 42;
}

static tg_cat_status fake_model_create(tg_catalog *catalog, const char *org, const char *name,
                                       const char *description, tg_model *out)
{
    (void)org;
    (void)name;
    (void)description;
    (void)out;
    fake_called(catalog, "model_create");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_model_get(tg_catalog *catalog, const char *org, const char *name,
                                    tg_model *out)
{
    (void)org;
    (void)name;
    (void)out;
    fake_called(catalog, "model_get");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_model_list(tg_catalog *catalog, const char *org, const char *query,
                                     const char *after_org, const char *after_name, unsigned limit,
                                     void (*visit)(void *ctx, const tg_model *model), void *ctx)
{
    (void)org;
    (void)query;
    (void)after_org;
    (void)after_name;
    (void)limit;
    (void)visit;
    (void)ctx;
    fake_called(catalog, "model_list");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_tag_list(tg_catalog *catalog, int64_t model_id, int64_t version_id,
                                   void (*visit)(void *ctx, const char *key, const char *value),
                                   void *ctx)
{
    (void)model_id;
    (void)version_id;
    (void)visit;
    (void)ctx;
    fake_called(catalog, "tag_list");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_version_description(tg_catalog *catalog, int64_t version_id,
                                              char out[TG_DESCRIPTION_MAX + 1])
{
    (void)version_id;
    (void)out;
    fake_called(catalog, "version_description");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_meta_update(tg_catalog *catalog, int64_t model_id, int64_t version_id,
                                      const char *description, const tg_tag_change *changes,
                                      size_t count, unsigned max_tags, const char **why)
{
    (void)model_id;
    (void)version_id;
    (void)description;
    (void)changes;
    (void)count;
    (void)max_tags;
    (void)why;
    fake_called(catalog, "meta_update");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_version_hub_tags_set(tg_catalog *catalog, int64_t version_id,
                                               const char *const *tags, size_t count)
{
    (void)version_id;
    (void)tags;
    (void)count;
    fake_called(catalog, "version_hub_tags_set");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_hub_tag_list(tg_catalog *catalog, int64_t model_id,
                                       void (*visit)(void *ctx, const char *tag), void *ctx)
{
    (void)model_id;
    (void)visit;
    (void)ctx;
    fake_called(catalog, "hub_tag_list");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_downloads_add(tg_catalog *catalog, const int64_t *model_ids,
                                        const uint64_t *counts, size_t n)
{
    (void)model_ids;
    (void)counts;
    (void)n;
    fake_called(catalog, "downloads_add");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_model_search(tg_catalog *catalog, const tg_model_search *search,
                                       void (*visit)(void *ctx, const tg_model *model), void *ctx)
{
    (void)search;
    (void)visit;
    (void)ctx;
    fake_called(catalog, "model_search");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_model_delete(tg_catalog *catalog, int64_t model_id)
{
    (void)model_id;
    fake_called(catalog, "model_delete");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_version_create(tg_catalog *catalog, int64_t model_id, tg_version *out)
{
    (void)model_id;
    (void)out;
    fake_called(catalog, "version_create");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_version_get(tg_catalog *catalog, int64_t model_id, int64_t number,
                                      tg_version *out)
{
    (void)model_id;
    (void)number;
    (void)out;
    fake_called(catalog, "version_get");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_version_by_digest(tg_catalog *catalog, int64_t model_id,
                                            const char *digest, tg_version *out)
{
    (void)model_id;
    (void)digest;
    (void)out;
    fake_called(catalog, "version_by_digest");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_version_latest_published(tg_catalog *catalog, int64_t model_id,
                                                   tg_version *out)
{
    (void)model_id;
    (void)out;
    fake_called(catalog, "version_latest_published");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_version_list(tg_catalog *catalog, int64_t model_id,
                                       void (*visit)(void *ctx, const tg_version *version),
                                       void *ctx)
{
    (void)model_id;
    (void)visit;
    (void)ctx;
    fake_called(catalog, "version_list");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_version_publish(tg_catalog *catalog, int64_t version_id,
                                          const char *digest, tg_version *out)
{
    (void)version_id;
    (void)digest;
    (void)out;
    fake_called(catalog, "version_publish");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_alias_delete(tg_catalog *catalog, int64_t model_id, const char *alias)
{
    (void)model_id;
    (void)alias;
    fake_called(catalog, "alias_delete");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_version_delete_draft(tg_catalog *catalog, int64_t version_id)
{
    (void)version_id;
    fake_called(catalog, "version_delete_draft");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_alias_set(tg_catalog *catalog, int64_t model_id, const char *alias,
                                    int64_t number)
{
    (void)model_id;
    (void)alias;
    (void)number;
    fake_called(catalog, "alias_set");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_signing_set(tg_catalog *catalog, const char *org, const char *policy)
{
    (void)org;
    (void)policy;
    fake_called(catalog, "signing_set");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_signing_get(tg_catalog *catalog, const char *org, char **policy)
{
    (void)org;
    (void)policy;
    fake_called(catalog, "signing_get");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_alias_get(tg_catalog *catalog, int64_t model_id, const char *alias,
                                    int64_t *number)
{
    (void)model_id;
    (void)alias;
    (void)number;
    fake_called(catalog, "alias_get");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_alias_list(tg_catalog *catalog, int64_t model_id,
                                     void (*visit)(void *ctx, const char *alias, int64_t number),
                                     void *ctx)
{
    (void)model_id;
    (void)visit;
    (void)ctx;
    fake_called(catalog, "alias_list");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_file_put_guarded(tg_catalog *catalog, const tg_commit_guard *guard,
                                           int64_t version_id, const tg_file_record *file,
                                           const char *tensor_stats, const char **why)
{
    (void)guard;
    (void)version_id;
    (void)file;
    (void)tensor_stats;
    (void)why;
    fake_called(catalog, "file_put_guarded");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_guard_check(tg_catalog *catalog, const tg_commit_guard *guard,
                                      int64_t version_id, const char **why)
{
    (void)guard;
    (void)version_id;
    (void)why;
    fake_called(catalog, "guard_check");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_file_get(tg_catalog *catalog, int64_t version_id, const char *path,
                                   tg_file_record *out)
{
    (void)version_id;
    (void)path;
    (void)out;
    fake_called(catalog, "file_get");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_file_stats(tg_catalog *catalog, int64_t version_id, const char *path,
                                     char **tensor_stats)
{
    (void)version_id;
    (void)path;
    (void)tensor_stats;
    fake_called(catalog, "file_stats");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_file_delete(tg_catalog *catalog, int64_t version_id, const char *path)
{
    (void)version_id;
    (void)path;
    fake_called(catalog, "file_delete");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_file_list(tg_catalog *catalog, int64_t version_id, const char *after_path,
                                    unsigned limit,
                                    void (*visit)(void *ctx, const tg_file_record *file), void *ctx)
{
    (void)version_id;
    (void)after_path;
    (void)limit;
    (void)visit;
    (void)ctx;
    fake_called(catalog, "file_list");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_rejection_add(tg_catalog *catalog, const tg_rejection *rejection)
{
    (void)rejection;
    fake_called(catalog, "rejection_add");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_rejection_list(tg_catalog *catalog, const tg_rejection_filter *filter,
                                         unsigned limit,
                                         void (*visit)(void *ctx, const tg_rejection *rejection),
                                         void *ctx)
{
    (void)filter;
    (void)limit;
    (void)visit;
    (void)ctx;
    fake_called(catalog, "rejection_list");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_token_add(tg_catalog *catalog, const char *hash, tg_scope scope,
                                    const char *namespace_or_null)
{
    (void)hash;
    (void)scope;
    (void)namespace_or_null;
    fake_called(catalog, "token_add");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_token_lookup(tg_catalog *catalog, const char *hash, tg_scope *scope,
                                       char *namespace_out, size_t namespace_len)
{
    (void)hash;
    (void)scope;
    (void)namespace_out;
    (void)namespace_len;
    fake_called(catalog, "token_lookup");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_token_each(tg_catalog *catalog,
                                     void (*visit)(void *ctx, const tg_token_info *token),
                                     void *ctx)
{
    (void)visit;
    (void)ctx;
    fake_called(catalog, "token_each");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_token_id(tg_catalog *catalog, const char *hash, int64_t *id)
{
    (void)hash;
    (void)id;
    fake_called(catalog, "token_id");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_token_revoke(tg_catalog *catalog, int64_t id)
{
    (void)id;
    fake_called(catalog, "token_revoke");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_blob_each(tg_catalog *catalog,
                                    int (*visit)(void *ctx, const char *sha256, uint64_t size),
                                    void *ctx)
{
    (void)visit;
    (void)ctx;
    fake_called(catalog, "blob_each");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_model_blobs(tg_catalog *catalog, int64_t model_id,
                                      void (*visit)(void *ctx, const char *sha256), void *ctx)
{
    (void)model_id;
    (void)visit;
    (void)ctx;
    fake_called(catalog, "model_blobs");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_blob_referenced(tg_catalog *catalog, const char *sha256, bool *referenced)
{
    (void)sha256;
    (void)referenced;
    fake_called(catalog, "blob_referenced");
    return TG_CAT_CONFLICT;
}

/* The operations that once were optional: every backend has them now. */
static tg_cat_status fake_job_counts(tg_catalog *catalog, uint64_t counts[TG_JOB_STATES])
{
    (void)counts;
    fake_called(catalog, "job_counts");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_job_renew(tg_catalog *catalog, int64_t job_id)
{
    (void)job_id;
    fake_called(catalog, "job_renew");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_job_release(tg_catalog *catalog, int64_t job_id)
{
    (void)job_id;
    fake_called(catalog, "job_release");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_version_publish_files(tg_catalog *catalog, int64_t version_id,
                                                const char *digest, const tg_file_record *files,
                                                size_t count, tg_version *out, const char **why)
{
    (void)version_id;
    (void)digest;
    (void)files;
    (void)count;
    (void)out;
    (void)why;
    fake_called(catalog, "version_publish_files");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_import_job_create(tg_catalog *catalog, int64_t token_id, int64_t model_id,
                                            int64_t version_id, const char *path, const char *url,
                                            tg_job *out, bool *existing)
{
    (void)token_id;
    (void)model_id;
    (void)version_id;
    (void)path;
    (void)url;
    (void)out;
    (void)existing;
    fake_called(catalog, "import_job_create");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_import_commit(tg_catalog *catalog, int64_t job_id,
                                        const tg_commit_guard *guard, int64_t version_id,
                                        const tg_file_record *file, const char *tensor_stats,
                                        const char **why)
{
    (void)job_id;
    (void)guard;
    (void)version_id;
    (void)file;
    (void)tensor_stats;
    (void)why;
    fake_called(catalog, "import_commit");
    return TG_CAT_CONFLICT;
}

/* The URL scrub that follows a claim, a failure or an import: nothing to scrub
 * (not recorded: the call that ran it is). */
static tg_cat_status fake_job_ended_urls(tg_catalog *catalog, int64_t job_id, int64_t after_id,
                                         unsigned limit,
                                         void (*visit)(void *ctx, int64_t id, const char *url),
                                         void *ctx)
{
    CHECK(catalog == &fake.base);
    (void)job_id;
    (void)after_id;
    (void)limit;
    (void)visit;
    (void)ctx;
    return TG_CAT_OK;
}

static tg_cat_status fake_job_set_ended_url(tg_catalog *catalog, int64_t job_id, const char *url)
{
    (void)job_id;
    (void)url;
    fake_called(catalog, "job_set_ended_url");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_job_create_by(tg_catalog *catalog, int64_t token_id, int64_t model_id,
                                        int64_t source_version_id, const char *dtype,
                                        const char *tensors_json, uint64_t bytes_total, tg_job *out,
                                        bool *existing)
{
    (void)token_id;
    (void)model_id;
    (void)source_version_id;
    (void)dtype;
    (void)tensors_json;
    (void)bytes_total;
    (void)out;
    (void)existing;
    fake_called(catalog, "job_create_by");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_job_get(tg_catalog *catalog, int64_t job_id, tg_job *out)
{
    (void)job_id;
    (void)out;
    fake_called(catalog, "job_get");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_job_list(tg_catalog *catalog, const tg_job_filter *filter,
                                   int64_t before_id, unsigned limit,
                                   void (*visit)(void *ctx, const tg_job *job), void *ctx)
{
    (void)filter;
    (void)before_id;
    (void)limit;
    (void)visit;
    (void)ctx;
    fake_called(catalog, "job_list");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_job_cancel(tg_catalog *catalog, int64_t job_id, tg_job_state *was,
                                     tg_job *out)
{
    (void)job_id;
    (void)was;
    (void)out;
    fake_called(catalog, "job_cancel");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_job_claim(tg_catalog *catalog, unsigned namespace_limit, tg_job *out)
{
    (void)namespace_limit;
    (void)out;
    fake_called(catalog, "job_claim");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_job_recover(tg_catalog *catalog, int64_t max_attempts, unsigned *requeued,
                                      unsigned *failed)
{
    (void)max_attempts;
    (void)requeued;
    (void)failed;
    fake_called(catalog, "job_recover");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_job_progress(tg_catalog *catalog, int64_t job_id, uint64_t bytes_done,
                                       uint64_t bytes_total)
{
    (void)job_id;
    (void)bytes_done;
    (void)bytes_total;
    fake_called(catalog, "job_progress");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_job_fail(tg_catalog *catalog, int64_t job_id, const char *reason,
                                   const char *detail)
{
    (void)job_id;
    (void)reason;
    (void)detail;
    fake_called(catalog, "job_fail");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_job_file_put(tg_catalog *catalog, int64_t job_id,
                                       const tg_file_record *file, const char *tensor_stats)
{
    (void)job_id;
    (void)file;
    (void)tensor_stats;
    fake_called(catalog, "job_file_put");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_job_file_list(tg_catalog *catalog, int64_t job_id,
                                        void (*visit)(void *ctx, const tg_file_record *file),
                                        void *ctx)
{
    (void)job_id;
    (void)visit;
    (void)ctx;
    fake_called(catalog, "job_file_list");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_job_commit(tg_catalog *catalog, int64_t job_id, const char *digest,
                                     tg_version *out)
{
    (void)job_id;
    (void)digest;
    (void)out;
    fake_called(catalog, "job_commit");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_code_files(tg_catalog *catalog, int64_t model_id, int64_t number,
                                     void (*visit)(void *ctx, int64_t number, const char *path,
                                                   const char *code_reason),
                                     void *ctx)
{
    (void)model_id;
    (void)number;
    (void)visit;
    (void)ctx;
    fake_called(catalog, "code_files");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_namespace_get(tg_catalog *catalog, const char *org,
                                        tg_namespace_settings *out)
{
    (void)org;
    (void)out;
    fake_called(catalog, "namespace_get");
    return TG_CAT_CONFLICT;
}

static tg_cat_status fake_namespace_set_code(tg_catalog *catalog, const char *org, bool allow_code,
                                             const char *now)
{
    (void)org;
    (void)allow_code;
    (void)now;
    fake_called(catalog, "namespace_set_code");
    return TG_CAT_CONFLICT;
}

static const tg_catalog_ops fake_ops = {
    .name = "fake",
    .close = fake_close,
    .ping = fake_ping,
    .schema_version = fake_schema_version,
    .model_create = fake_model_create,
    .model_get = fake_model_get,
    .model_list = fake_model_list,
    .model_delete = fake_model_delete,
    .tag_list = fake_tag_list,
    .version_description = fake_version_description,
    .meta_update = fake_meta_update,
    .version_hub_tags_set = fake_version_hub_tags_set,
    .hub_tag_list = fake_hub_tag_list,
    .downloads_add = fake_downloads_add,
    .model_search = fake_model_search,
    .version_create = fake_version_create,
    .version_get = fake_version_get,
    .version_by_digest = fake_version_by_digest,
    .version_latest_published = fake_version_latest_published,
    .version_list = fake_version_list,
    .version_publish = fake_version_publish,
    .code_files = fake_code_files,
    .namespace_get = fake_namespace_get,
    .namespace_set_code = fake_namespace_set_code,
    .alias_set = fake_alias_set,
    .alias_delete = fake_alias_delete,
    .version_delete_draft = fake_version_delete_draft,
    .alias_get = fake_alias_get,
    .signing_set = fake_signing_set,
    .signing_get = fake_signing_get,
    .alias_list = fake_alias_list,
    .file_put_guarded = fake_file_put_guarded,
    .guard_check = fake_guard_check,
    .file_get = fake_file_get,
    .file_stats = fake_file_stats,
    .file_delete = fake_file_delete,
    .file_list = fake_file_list,
    .rejection_add = fake_rejection_add,
    .rejection_list = fake_rejection_list,
    .token_add = fake_token_add,
    .token_lookup = fake_token_lookup,
    .token_each = fake_token_each,
    .token_id = fake_token_id,
    .token_revoke = fake_token_revoke,
    .blob_each = fake_blob_each,
    .model_blobs = fake_model_blobs,
    .blob_referenced = fake_blob_referenced,
    .job_counts = fake_job_counts,
    .job_renew = fake_job_renew,
    .job_release = fake_job_release,
    .version_publish_files = fake_version_publish_files,
    .import_job_create = fake_import_job_create,
    .import_commit = fake_import_commit,
    .job_ended_urls = fake_job_ended_urls,
    .job_set_ended_url = fake_job_set_ended_url,
    .job_create_by = fake_job_create_by,
    .job_get = fake_job_get,
    .job_list = fake_job_list,
    .job_cancel = fake_job_cancel,
    .job_claim = fake_job_claim,
    .job_recover = fake_job_recover,
    .job_progress = fake_job_progress,
    .job_fail = fake_job_fail,
    .job_file_put = fake_job_file_put,
    .job_file_list = fake_job_file_list,
    .job_commit = fake_job_commit,
};

TEST(dispatch_reaches_the_backend)
{
    fake.base.ops = &fake_ops;
    tg_catalog_close(&fake.base);
    CHECK_STR(fake.called, "close");
    CHECK(tg_catalog_ping(&fake.base) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "ping");
    CHECK_EQ_U64(tg_catalog_schema_version(&fake.base), 42);
    CHECK_STR(fake.called, "schema_version");
    CHECK(tg_catalog_model_create(&fake.base, NULL, NULL, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "model_create");
    CHECK(tg_catalog_model_get(&fake.base, NULL, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "model_get");
    CHECK(tg_catalog_model_list(&fake.base, NULL, NULL, NULL, NULL, 0, NULL, NULL) ==
          TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "model_list");
    CHECK(tg_catalog_model_delete(&fake.base, 0) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "model_delete");
    CHECK(tg_catalog_tag_list(&fake.base, 0, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "tag_list");
    CHECK(tg_catalog_version_description(&fake.base, 0, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "version_description");
    CHECK(tg_catalog_meta_update(&fake.base, 0, 0, NULL, NULL, 0, 0, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "meta_update");
    CHECK(tg_catalog_version_hub_tags_set(&fake.base, 0, NULL, 0) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "version_hub_tags_set");
    CHECK(tg_catalog_hub_tag_list(&fake.base, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "hub_tag_list");
    CHECK(tg_catalog_downloads_add(&fake.base, NULL, NULL, 0) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "downloads_add");
    CHECK(tg_catalog_model_search(&fake.base, NULL, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "model_search");
    CHECK(tg_catalog_version_create(&fake.base, 0, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "version_create");
    CHECK(tg_catalog_version_get(&fake.base, 0, 0, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "version_get");
    CHECK(tg_catalog_version_by_digest(&fake.base, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "version_by_digest");
    CHECK(tg_catalog_version_latest_published(&fake.base, 0, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "version_latest_published");
    CHECK(tg_catalog_version_list(&fake.base, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "version_list");
    CHECK(tg_catalog_version_publish(&fake.base, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "version_publish");
    CHECK(tg_catalog_code_files(&fake.base, 0, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "code_files");
    tg_namespace_settings settings;
    CHECK(tg_catalog_namespace_get(&fake.base, "acme", &settings) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "namespace_get");
    CHECK(tg_catalog_namespace_set_code(&fake.base, "acme", true, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "namespace_set_code");
    CHECK(tg_catalog_alias_set(&fake.base, 0, NULL, 0) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "alias_set");
    CHECK(tg_catalog_alias_get(&fake.base, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "alias_get");
    CHECK(tg_catalog_alias_delete(&fake.base, 0, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "alias_delete");
    CHECK(tg_catalog_version_delete_draft(&fake.base, 0) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "version_delete_draft");
    CHECK(tg_catalog_signing_set(&fake.base, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "signing_set");
    char *policy_text = NULL;
    CHECK(tg_catalog_signing_get(&fake.base, NULL, &policy_text) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "signing_get");
    CHECK(tg_catalog_alias_list(&fake.base, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "alias_list");
    CHECK(tg_catalog_file_put_guarded(&fake.base, NULL, 0, NULL, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "file_put_guarded");
    CHECK(tg_catalog_guard_check(&fake.base, NULL, 0, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "guard_check");
    CHECK(tg_catalog_file_get(&fake.base, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "file_get");
    CHECK(tg_catalog_file_stats(&fake.base, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "file_stats");
    CHECK(tg_catalog_file_delete(&fake.base, 0, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "file_delete");
    CHECK(tg_catalog_file_list(&fake.base, 0, NULL, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "file_list");
    CHECK(tg_catalog_rejection_add(&fake.base, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "rejection_add");
    CHECK(tg_catalog_rejection_list(&fake.base, NULL, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "rejection_list");
    CHECK(tg_catalog_token_add(&fake.base, NULL, 0, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "token_add");
    CHECK(tg_catalog_token_lookup(&fake.base, NULL, NULL, NULL, 0) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "token_lookup");
    CHECK(tg_catalog_token_each(&fake.base, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "token_each");
    CHECK(tg_catalog_token_id(&fake.base, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "token_id");
    CHECK(tg_catalog_token_revoke(&fake.base, 0) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "token_revoke");
    CHECK(tg_catalog_blob_each(&fake.base, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "blob_each");
    CHECK(tg_catalog_model_blobs(&fake.base, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "model_blobs");
    CHECK(tg_catalog_blob_referenced(&fake.base, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "blob_referenced");
    CHECK(tg_catalog_job_create_by(&fake.base, 0, 0, 0, NULL, NULL, 0, NULL, NULL) ==
          TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "job_create_by");
    CHECK(tg_catalog_job_get(&fake.base, 0, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "job_get");
    CHECK(tg_catalog_job_list(&fake.base, NULL, 0, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "job_list");
    CHECK(tg_catalog_job_cancel(&fake.base, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "job_cancel");
    CHECK(tg_catalog_job_claim(&fake.base, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "job_claim");
    CHECK(tg_catalog_job_recover(&fake.base, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "job_recover");
    CHECK(tg_catalog_job_progress(&fake.base, 0, 0, 0) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "job_progress");
    CHECK(tg_catalog_job_fail(&fake.base, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "job_fail");
    CHECK(tg_catalog_job_file_put(&fake.base, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "job_file_put");
    CHECK(tg_catalog_job_file_list(&fake.base, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "job_file_list");
    CHECK(tg_catalog_job_commit(&fake.base, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "job_commit");
    uint64_t counts[TG_JOB_STATES];
    CHECK(tg_catalog_job_counts(&fake.base, counts) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "job_counts");
    CHECK(tg_catalog_job_renew(&fake.base, 0) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "job_renew");
    CHECK(tg_catalog_job_release(&fake.base, 0) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "job_release");
    const char *why = NULL;
    CHECK(tg_catalog_version_publish_files(&fake.base, 0, NULL, NULL, 0, NULL, &why) ==
          TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "version_publish_files");
    bool existing = true;
    CHECK(tg_catalog_import_job_create(&fake.base, 0, 0, 0, NULL, NULL, NULL, &existing) ==
          TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "import_job_create");
    CHECK(tg_catalog_import_commit(&fake.base, 0, NULL, 0, NULL, NULL, &why) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "import_commit");
    /* the two calls with defaults: no guard, no token */
    fake.called = NULL;
    CHECK(tg_catalog_file_put(&fake.base, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "file_put_guarded");
    fake.called = NULL;
    CHECK(tg_catalog_job_create(&fake.base, 0, 0, NULL, NULL, 0, NULL, NULL) == TG_CAT_CONFLICT);
    CHECK_STR(fake.called, "job_create_by");
    tg_catalog_close(NULL); /* nothing to close, nothing called */
}

TEST(open_chooses_the_backend_by_url)
{
    tg_catalog *catalog = NULL;
    char err[256] = "";
    /* the PostgreSQL backend: nothing listens on port 1, so each form fails to connect */
    CHECK(tg_catalog_open("postgresql://user@127.0.0.1:1/db", &catalog, err, sizeof err) ==
          TG_CAT_ERROR);
    CHECK(catalog == NULL);
    CHECK(strstr(err, "cannot connect to the PostgreSQL catalog") != NULL);
    CHECK(tg_catalog_open("postgres://127.0.0.1:1/db", &catalog, err, sizeof err) == TG_CAT_ERROR);
    CHECK(strstr(err, "cannot connect to the PostgreSQL catalog") != NULL);
    CHECK(tg_catalog_open("postgresql:host=127.0.0.1 port=1 dbname=db", &catalog, err,
                          sizeof err) == TG_CAT_ERROR);
    CHECK(strstr(err, "cannot connect to the PostgreSQL catalog") != NULL);
    CHECK(catalog == NULL);
    CHECK(tg_catalog_open("mysql://host/db", &catalog, err, sizeof err) == TG_CAT_ERROR);
    CHECK(strstr(err, "unknown catalog URL scheme \"mysql://\"") != NULL);
    CHECK(catalog == NULL);
    /* "sqlite:PATH" and a plain path are the SQLite backend, on the same file */
    char path[160], url[200];
    snprintf(path, sizeof path, "%s/url.db", dir);
    snprintf(url, sizeof url, "sqlite:%s", path);
    CHECK(tg_catalog_open(url, &catalog, err, sizeof err) == TG_CAT_OK);
    if (catalog != NULL) {
        CHECK_STR(catalog->ops->name, "sqlite");
        tg_model model;
        CHECK(tg_catalog_model_create(catalog, "url", "m", "", &model) == TG_CAT_OK);
        tg_catalog_close(catalog);
    }
    catalog = NULL;
    CHECK(tg_catalog_open(path, &catalog, err, sizeof err) == TG_CAT_OK);
    if (catalog != NULL) {
        CHECK_STR(catalog->ops->name, "sqlite");
        tg_model model;
        CHECK(tg_catalog_model_get(catalog, "url", "m", &model) == TG_CAT_OK);
        CHECK(tg_catalog_model_delete(catalog, model.id) == TG_CAT_OK);
        tg_catalog_close(catalog);
    }
}

/* A publish checks, in its own transaction, that the draft's files are still the
 * ones its digest was made from. */
TEST(publish_checks_the_files)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    tg_model model;
    CHECK(tg_catalog_model_create(catalog, "acme", "exact", "", &model) == TG_CAT_OK);
    tg_version draft, out;
    CHECK(tg_catalog_version_create(catalog, model.id, &draft) == TG_CAT_OK);
    tg_file_record files[2] = {
        {.path = "b.safetensors", .kind = "safetensors", .size = 10},
        {.path = "a.json", .kind = "json", .size = 2},
    };
    snprintf(files[0].sha256, sizeof files[0].sha256, "%064d", 1);
    snprintf(files[1].sha256, sizeof files[1].sha256, "%064d", 2);
    CHECK(tg_catalog_file_put(catalog, draft.id, &files[0], NULL) == TG_CAT_OK);
    CHECK(tg_catalog_file_put(catalog, draft.id, &files[1], NULL) == TG_CAT_OK);
    const char *why = NULL;
    const char *digest = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee";
    /* a file missing from the list, one of another content, one too many */
    CHECK(tg_catalog_version_publish_files(catalog, draft.id, digest, files, 1, &out, &why) ==
          TG_CAT_CONFLICT);
    CHECK_STR(why, "version_changed");
    tg_file_record changed[3] = {files[0], files[1], files[1]};
    changed[1].size = 3;
    CHECK(tg_catalog_version_publish_files(catalog, draft.id, digest, changed, 2, &out, &why) ==
          TG_CAT_CONFLICT);
    CHECK_STR(why, "version_changed");
    snprintf(changed[2].path, sizeof changed[2].path, "c.json");
    changed[1] = files[1];
    CHECK(tg_catalog_version_publish_files(catalog, draft.id, digest, changed, 3, &out, &why) ==
          TG_CAT_CONFLICT);
    tg_version still;
    CHECK(tg_catalog_version_get(catalog, model.id, draft.number, &still) == TG_CAT_OK);
    CHECK(!still.published);
    /* the same files in another order: published */
    tg_file_record reordered[2] = {files[1], files[0]};
    CHECK(tg_catalog_version_publish_files(catalog, draft.id, digest, reordered, 2, &out, &why) ==
          TG_CAT_OK);
    CHECK(out.published);
    CHECK_STR(out.digest, digest);
    CHECK(tg_catalog_version_publish_files(catalog, draft.id, digest, files, 2, &out, &why) ==
          TG_CAT_CONFLICT);
    CHECK_STR(why, "version_published");
    CHECK(tg_catalog_model_delete(catalog, model.id) == TG_CAT_OK);
    tg_catalog_close(catalog);
}

/* Two handles on one catalog are two replicas: a claim is one handle's lease; the
 * other cannot claim, record, progress, fail or commit the job until the lease
 * expires, then takes it over, and the derived version is made once. */
TEST(job_leases_between_handles)
{
    tg_catalog *a = open_fresh(), *b = open_fresh();
    if (a == NULL || b == NULL) {
        tg_catalog_close(a);
        tg_catalog_close(b);
        return;
    }
    CHECK(strcmp(a->lease_owner, b->lease_owner) != 0);
    tg_catalog_set_job_lease(a, 1, 3);
    tg_catalog_set_job_lease(b, 1, 3);
    tg_model model;
    tg_version v1;
    published_model(a, "acme", "leases", &model, &v1);
    static tg_job job, got_a, got_b;
    bool existing;
    CHECK(tg_catalog_job_create(a, model.id, v1.id, "BF16", "[]", 60, &job, &existing) ==
          TG_CAT_OK);
    CHECK(tg_catalog_job_claim(a, &got_a) == TG_CAT_OK);
    CHECK_EQ_U64(got_a.id, job.id);
    CHECK(tg_catalog_job_claim(b, &got_b) == TG_CAT_NOT_FOUND); /* a holds it */
    CHECK(tg_catalog_job_renew(a, job.id) == TG_CAT_OK);
    CHECK(tg_catalog_job_renew(b, job.id) == TG_CAT_NOT_FOUND);
    tg_file_record made = {.path = "model.safetensors",
                           .kind = "safetensors",
                           .size = 60,
                           .sha256 =
                               "abababababababababababababababababababababababababababababababab"};
    CHECK(tg_catalog_job_file_put(b, job.id, &made, NULL) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_job_progress(b, job.id, 1, 60) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_job_fail(b, job.id, "internal", "not mine") == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_job_file_put(a, job.id, &made, NULL) == TG_CAT_OK);
    /* a stops renewing (its process died): after the lease, b takes the job over */
    usleep(1300 * 1000);
    CHECK(tg_catalog_job_claim(b, &got_b) == TG_CAT_OK);
    CHECK_EQ_U64(got_b.id, job.id);
    CHECK_EQ_U64(got_b.attempts, 2);
    CHECK(tg_catalog_job_renew(a, job.id) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_job_progress(a, job.id, 2, 60) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_job_file_put(a, job.id, &made, NULL) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_job_fail(a, job.id, "internal", "not mine any more") == TG_CAT_NOT_FOUND);
    tg_version derived;
    const char *digest = "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd";
    CHECK(tg_catalog_job_commit(a, job.id, digest, &derived) == TG_CAT_CONFLICT);
    /* b resumes with the shard a recorded, and commits once */
    tg_file_records files = {0};
    CHECK(tg_catalog_job_file_list(b, job.id, tg_file_records_collect, &files) == TG_CAT_OK);
    CHECK_EQ_U64(files.count, 1);
    free(files.items);
    CHECK(tg_catalog_job_progress(b, job.id, 60, 60) == TG_CAT_OK);
    CHECK(tg_catalog_job_commit(b, job.id, digest, &derived) == TG_CAT_OK);
    CHECK_EQ_U64(derived.number, 2);
    CHECK(tg_catalog_job_commit(a, job.id, digest, &derived) == TG_CAT_CONFLICT);
    CHECK(tg_catalog_job_commit(b, job.id, digest, &derived) == TG_CAT_CONFLICT);
    tg_version none;
    CHECK(tg_catalog_version_get(a, model.id, 3, &none) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_job_get(a, job.id, &got_a) == TG_CAT_OK);
    CHECK(got_a.state == TG_JOB_DONE && got_a.result_version == 2);
    /* a stopping holder releases its lease: the job is claimable at once */
    CHECK(tg_catalog_job_create(a, model.id, v1.id, "F32", "[]", 60, &job, &existing) == TG_CAT_OK);
    CHECK(tg_catalog_job_claim(a, &got_a) == TG_CAT_OK);
    CHECK(tg_catalog_job_release(b, job.id) == TG_CAT_NOT_FOUND); /* not b's */
    CHECK(tg_catalog_job_claim(b, &got_b) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_job_release(a, job.id) == TG_CAT_OK);
    CHECK(tg_catalog_job_claim(b, &got_b) == TG_CAT_OK);
    CHECK_EQ_U64(got_b.id, job.id);
    CHECK(tg_catalog_job_fail(b, job.id, "internal", "test") == TG_CAT_OK);
    /* a cancel asked of a running job shows in its holder's renewal */
    CHECK(tg_catalog_job_create(a, model.id, v1.id, "F16", "[]", 60, &job, &existing) == TG_CAT_OK);
    CHECK(tg_catalog_job_claim(a, &got_a) == TG_CAT_OK);
    tg_job_state was;
    CHECK(tg_catalog_job_cancel(b, job.id, &was, &got_b) == TG_CAT_OK);
    CHECK(tg_catalog_job_renew(a, job.id) == TG_CAT_CONFLICT);
    /* its lease expired with the cancel asked: the next claim fails it */
    usleep(1300 * 1000);
    CHECK(tg_catalog_job_claim(b, &got_b) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_job_get(b, job.id, &got_b) == TG_CAT_OK);
    CHECK(got_b.state == TG_JOB_FAILED);
    CHECK_STR(got_b.error_reason, "cancelled");
    CHECK(tg_catalog_model_delete(a, model.id) == TG_CAT_OK);
    tg_catalog_close(a);
    tg_catalog_close(b);
}

/* The fair claim (tg_catalog_job_claim_fair): the oldest job of the namespace that
 * runs the fewest under this handle's leases, never one of a namespace at the
 * limit; another handle (replica) counts its own. */
TEST(job_claim_is_fair_across_namespaces)
{
    tg_catalog *c = open_fresh(), *d = open_fresh();
    if (c == NULL || d == NULL) {
        tg_catalog_close(c);
        tg_catalog_close(d);
        return;
    }
    tg_model ma, mb;
    tg_version va, vb;
    published_model(c, "acme", "fair", &ma, &va);
    published_model(c, "beta", "fair", &mb, &vb);
    static tg_job a[3], b[2], got;
    bool existing;
    const char *dtypes[] = {"F16", "BF16", "F32"};
    for (int i = 0; i < 3; i++)
        CHECK(tg_catalog_job_create(c, ma.id, va.id, dtypes[i], "[]", 1, &a[i], &existing) ==
              TG_CAT_OK);
    for (int i = 0; i < 2; i++)
        CHECK(tg_catalog_job_create(c, mb.id, vb.id, dtypes[i], "[]", 1, &b[i], &existing) ==
              TG_CAT_OK);
    /* a tie goes to the oldest; then beta, which runs none, before acme's older jobs */
    CHECK(tg_catalog_job_claim_fair(c, 0, &got) == TG_CAT_OK && got.id == a[0].id);
    CHECK(tg_catalog_job_claim_fair(c, 0, &got) == TG_CAT_OK && got.id == b[0].id);
    CHECK(tg_catalog_job_claim_fair(c, 0, &got) == TG_CAT_OK && got.id == a[1].id);
    /* acme runs 2, the limit: beta's job, though younger than acme's last */
    CHECK(tg_catalog_job_claim_fair(c, 2, &got) == TG_CAT_OK && got.id == b[1].id);
    /* both at the limit: nothing, while acme's job waits */
    CHECK(tg_catalog_job_claim_fair(c, 2, &got) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_job_get(c, a[2].id, &got) == TG_CAT_OK && got.state == TG_JOB_QUEUED);
    /* another handle counts only its own leases */
    CHECK(tg_catalog_job_claim_fair(d, 1, &got) == TG_CAT_OK && got.id == a[2].id);
    /* a job that ends frees its namespace's place */
    CHECK(tg_catalog_job_fail(d, a[2].id, "internal", "test") == TG_CAT_OK);
    CHECK(tg_catalog_job_create(c, ma.id, va.id, "F64", "[]", 1, &a[2], &existing) == TG_CAT_OK);
    CHECK(tg_catalog_job_claim_fair(c, 2, &got) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_job_fail(c, a[0].id, "internal", "test") == TG_CAT_OK);
    CHECK(tg_catalog_job_claim_fair(c, 2, &got) == TG_CAT_OK && got.id == a[2].id);
    CHECK(tg_catalog_model_delete(c, ma.id) == TG_CAT_OK);
    CHECK(tg_catalog_model_delete(c, mb.id) == TG_CAT_OK);
    tg_catalog_close(c);
    tg_catalog_close(d);
}

/* A version by its commit id (the first 40 hex digits of its digest) is one query:
 * published versions only, the lower number on a 40-digit prefix collision, and
 * nothing for a draft, another model, or text that is not 40 lowercase hex digits. */
/* A namespace's signature policy: none, set, replaced, another namespace apart. */
TEST(namespace_signing_policy)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    char *text = NULL;
    CHECK(tg_catalog_signing_get(catalog, "acme", &text) == TG_CAT_NOT_FOUND);
    CHECK(text == NULL);
    CHECK(tg_catalog_signing_set(catalog, "acme", "{\"require_signature\":true}") == TG_CAT_OK);
    CHECK(tg_catalog_signing_set(catalog, "acme", "{\"require_signature\":false}") == TG_CAT_OK);
    CHECK(tg_catalog_signing_get(catalog, "acme", &text) == TG_CAT_OK);
    CHECK_STR(text, "{\"require_signature\":false}");
    free(text);
    text = NULL;
    CHECK(tg_catalog_signing_get(catalog, "other", &text) == TG_CAT_NOT_FOUND);
    tg_catalog_close(catalog);
}

TEST(versions_by_commit_id)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    tg_model model, other;
    CHECK(tg_catalog_model_create(catalog, "acme", "commits", "", &model) == TG_CAT_OK);
    CHECK(tg_catalog_model_create(catalog, "acme", "commits-other", "", &other) == TG_CAT_OK);
    tg_version v1, v2, v3, got;
    CHECK(tg_catalog_version_create(catalog, model.id, &v1) == TG_CAT_OK);
    CHECK(tg_catalog_version_create(catalog, model.id, &v2) == TG_CAT_OK);
    CHECK(tg_catalog_version_create(catalog, model.id, &v3) == TG_CAT_OK);
    const char *commit = "c0ffee0000000000000000000000000000000001";
    const char *d1 = "c0ffee0000000000000000000000000000000001aaaaaaaaaaaaaaaaaaaaaaaa";
    const char *d2 = "c0ffee0000000000000000000000000000000001bbbbbbbbbbbbbbbbbbbbbbbb";
    const char *d3 = "d00d000000000000000000000000000000000000cccccccccccccccccccccccc";
    /* v2 first: the lower number wins, not the first published */
    CHECK(tg_catalog_version_publish(catalog, v2.id, d2, &got) == TG_CAT_OK);
    CHECK(tg_catalog_version_by_commit(catalog, model.id, commit, &got) == TG_CAT_OK);
    CHECK_EQ_U64(got.number, 2);
    CHECK(tg_catalog_version_publish(catalog, v1.id, d1, &got) == TG_CAT_OK);
    CHECK(tg_catalog_version_by_commit(catalog, model.id, commit, &got) == TG_CAT_OK);
    CHECK_EQ_U64(got.number, 1);
    CHECK_STR(got.digest, d1);
    CHECK(got.published);
    /* v3 is a draft: its commit id finds nothing until it is published */
    CHECK(tg_catalog_version_by_commit(catalog, model.id,
                                       "d00d000000000000000000000000000000000000",
                                       &got) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_version_publish(catalog, v3.id, d3, &got) == TG_CAT_OK);
    CHECK(tg_catalog_version_by_commit(
              catalog, model.id, "d00d000000000000000000000000000000000000", &got) == TG_CAT_OK);
    CHECK_EQ_U64(got.number, 3);
    CHECK(tg_catalog_version_by_commit(catalog, other.id, commit, &got) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_version_by_commit(catalog, model.id,
                                       "C0FFEE0000000000000000000000000000000001",
                                       &got) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_version_by_commit(catalog, model.id, "c0ffee", &got) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_version_by_commit(catalog, model.id, d1, &got) == TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_version_by_commit(catalog, model.id,
                                       "c0ffee000000000000000000000000000000000%",
                                       &got) == TG_CAT_NOT_FOUND);
    tg_catalog_close(catalog);
}

static const char *search_names(tg_catalog *catalog, const tg_model_search *search, tag_text *out)
{
    out->text[0] = '\0';
    CHECK(tg_catalog_model_search(catalog, search, append_model_name, out) == TG_CAT_OK);
    return out->text;
}

/* Tags and descriptions (set, replace, delete, bounded), Hub tags, search and the
 * download counter, on whichever backend catalog_url names. */
TEST(registry_metadata_and_search)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    tg_model a, b, c;
    CHECK(tg_catalog_model_create(catalog, "meta", "alpha", "First Model", &a) == TG_CAT_OK);
    CHECK(tg_catalog_model_create(catalog, "meta", "beta", "", &b) == TG_CAT_OK);
    CHECK(tg_catalog_model_create(catalog, "meta2", "gamma", "", &c) == TG_CAT_OK);
    CHECK_EQ_U64((uint64_t)a.downloads, 0);
    const char *why = NULL;
    tg_tag_change set[] = {{"stage", "prod"}, {"team", "Vision"}, {"bare", ""}};
    CHECK(tg_catalog_meta_update(catalog, a.id, 0, "new text", set, 3, 4, &why) == TG_CAT_OK);
    tag_text t = {""};
    CHECK(tg_catalog_tag_list(catalog, a.id, 0, append_tag, &t) == TG_CAT_OK);
    CHECK_STR(t.text, "bare=;stage=prod;team=Vision;");
    tg_model got;
    CHECK(tg_catalog_model_get(catalog, "meta", "alpha", &got) == TG_CAT_OK);
    CHECK_STR(got.description, "new text");
    /* replace one, delete one, keep the rest; the description untouched (NULL) */
    tg_tag_change merge[] = {{"stage", "dev"}, {"bare", NULL}, {"absent", NULL}};
    CHECK(tg_catalog_meta_update(catalog, a.id, 0, NULL, merge, 3, 4, &why) == TG_CAT_OK);
    t.text[0] = '\0';
    CHECK(tg_catalog_tag_list(catalog, a.id, 0, append_tag, &t) == TG_CAT_OK);
    CHECK_STR(t.text, "stage=dev;team=Vision;");
    CHECK(tg_catalog_model_get(catalog, "meta", "alpha", &got) == TG_CAT_OK);
    CHECK_STR(got.description, "new text");
    /* over the bound: refused whole */
    tg_tag_change many[] = {{"k1", "1"}, {"k2", "2"}, {"k3", "3"}};
    CHECK(tg_catalog_meta_update(catalog, a.id, 0, "lost", many, 3, 4, &why) == TG_CAT_CONFLICT);
    CHECK_STR(why, "too_many_tags");
    t.text[0] = '\0';
    CHECK(tg_catalog_tag_list(catalog, a.id, 0, append_tag, &t) == TG_CAT_OK);
    CHECK_STR(t.text, "stage=dev;team=Vision;");
    CHECK(tg_catalog_model_get(catalog, "meta", "alpha", &got) == TG_CAT_OK);
    CHECK_STR(got.description, "new text");
    CHECK(tg_catalog_meta_update(catalog, 999999, 0, "x", NULL, 0, 4, &why) == TG_CAT_NOT_FOUND);
    CHECK_STR(why, "model_not_found");

    /* a version's own tags and description; another model's version is not found */
    tg_version v1, v2, published;
    CHECK(tg_catalog_version_create(catalog, a.id, &v1) == TG_CAT_OK);
    tg_tag_change vset[] = {{"run", "42"}};
    CHECK(tg_catalog_meta_update(catalog, a.id, v1.id, "v1 notes", vset, 1, 4, &why) == TG_CAT_OK);
    CHECK(tg_catalog_meta_update(catalog, b.id, v1.id, "x", NULL, 0, 4, &why) == TG_CAT_NOT_FOUND);
    CHECK_STR(why, "version_not_found");
    char description[TG_DESCRIPTION_MAX + 1];
    CHECK(tg_catalog_version_description(catalog, v1.id, description) == TG_CAT_OK);
    CHECK_STR(description, "v1 notes");
    t.text[0] = '\0';
    CHECK(tg_catalog_tag_list(catalog, a.id, v1.id, append_tag, &t) == TG_CAT_OK);
    CHECK_STR(t.text, "run=42;");

    /* Hub tags: the registry's, then the latest published version's */
    const char *hub1[] = {"license:mit", "tiny"};
    CHECK(tg_catalog_version_hub_tags_set(catalog, v1.id, hub1, 2) == TG_CAT_OK);
    t.text[0] = '\0';
    CHECK(tg_catalog_hub_tag_list(catalog, a.id, append_hub_tag, &t) == TG_CAT_OK);
    CHECK_STR(t.text, "stage:dev;team:Vision;"); /* v1 is a draft yet */
    CHECK(tg_catalog_version_publish(
              catalog, v1.id, "1111111111111111111111111111111111111111111111111111111111111111",
              &published) == TG_CAT_OK);
    t.text[0] = '\0';
    CHECK(tg_catalog_hub_tag_list(catalog, a.id, append_hub_tag, &t) == TG_CAT_OK);
    CHECK_STR(t.text, "stage:dev;team:Vision;license:mit;tiny;");

    /* name_query keeps the searches to this test's models (the catalog is shared) */
    tg_model_search search = {.limit = 10, .name_query = "meta"};
    tag_text names;
    CHECK_STR(search_names(catalog, &search, &names), "meta/alpha:0;meta/beta:0;meta2/gamma:0;");
    search.published_only = true;
    CHECK_STR(search_names(catalog, &search, &names), "meta/alpha:0;");
    search = (tg_model_search){
        .limit = 10, .name_query = "meta", .hub_tags = {"tiny"}, .hub_tag_count = 1};
    CHECK_STR(search_names(catalog, &search, &names), "meta/alpha:0;");
    search.hub_tags[0] = "team:Vision";
    CHECK_STR(search_names(catalog, &search, &names), "meta/alpha:0;");
    search.hub_tags[0] = "safetensors";
    CHECK_STR(search_names(catalog, &search, &names), "meta/alpha:0;meta/beta:0;meta2/gamma:0;");
    search.hub_tags[0] = "license:apache-2.0";
    CHECK_STR(search_names(catalog, &search, &names), "");
    /* a newer published version without the card's tags takes them away */
    CHECK(tg_catalog_version_create(catalog, a.id, &v2) == TG_CAT_OK);
    CHECK(tg_catalog_version_publish(
              catalog, v2.id, "2222222222222222222222222222222222222222222222222222222222222222",
              &published) == TG_CAT_OK);
    search.hub_tags[0] = "tiny";
    CHECK_STR(search_names(catalog, &search, &names), "");
    search = (tg_model_search){
        .limit = 10, .tag_keys = {"stage", "team"}, .tag_values = {NULL, "Vision"}, .tag_count = 2};
    CHECK_STR(search_names(catalog, &search, &names), "meta/alpha:0;");
    search.tag_values[1] = "vision"; /* values compare exactly */
    CHECK_STR(search_names(catalog, &search, &names), "");
    search = (tg_model_search){.limit = 10, .text = "VISION"}; /* a tag value, any case */
    CHECK_STR(search_names(catalog, &search, &names), "meta/alpha:0;");
    search.text = "new TEXT"; /* the description */
    CHECK_STR(search_names(catalog, &search, &names), "meta/alpha:0;");
    search.text = "gam"; /* the name */
    CHECK_STR(search_names(catalog, &search, &names), "meta2/gamma:0;");
    search.text = "%"; /* no pattern characters */
    CHECK_STR(search_names(catalog, &search, &names), "");

    /* downloads add up, and order a search */
    const int64_t ids[] = {b.id, 999999, c.id}; /* a model that is not there is skipped */
    const uint64_t counts[] = {5, 1, 3};
    CHECK(tg_catalog_downloads_add(catalog, ids, counts, 3) == TG_CAT_OK);
    CHECK(tg_catalog_downloads_add(catalog, ids, (const uint64_t[]){2, 0, 0}, 1) == TG_CAT_OK);
    search = (tg_model_search){.limit = 10, .by_downloads = true, .name_query = "meta"};
    CHECK_STR(search_names(catalog, &search, &names), "meta/beta:7;meta2/gamma:3;meta/alpha:0;");
    search = (tg_model_search){.limit = 1,
                               .by_downloads = true,
                               .has_after = true,
                               .after_downloads = 7,
                               .after_org = "meta",
                               .after_name = "beta"};
    CHECK_STR(search_names(catalog, &search, &names), "meta2/gamma:3;");
    search = (tg_model_search){
        .limit = 10, .org = "meta", .has_after = true, .after_org = "meta", .after_name = "alpha"};
    CHECK_STR(search_names(catalog, &search, &names), "meta/beta:7;");
    /* a deleted model's tags go with it */
    CHECK(tg_catalog_model_delete(catalog, a.id) == TG_CAT_OK);
    search = (tg_model_search){.limit = 10, .tag_keys = {"stage"}, .tag_count = 1};
    CHECK_STR(search_names(catalog, &search, &names), "");
    tg_catalog_close(catalog);
}

int main(int argc, char **argv)
{
    (void)argc;
    snprintf(dir, sizeof dir, "/tmp/tg-catalog-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(db_path, sizeof db_path, "%s/catalog.db", dir);
    RUN(embedded_migrations_match_files_in_order);
    RUN(models_and_listing);
    RUN(versions_files_publish);
    RUN(file_records_collect_keeps_order);
    RUN(rejections_and_tokens);
    RUN(audit_append_chain_and_filters);
    RUN(code_policy_settings_and_marks);
    RUN(jobs_commit_fail_recover);
    RUN(jobs_create_is_idempotent);
    RUN(jobs_list_filters_and_pages);
    RUN(jobs_cancel);
    RUN(job_leases_between_handles);
    RUN(job_claim_is_fair_across_namespaces);
    RUN(publish_checks_the_files);
    RUN(versions_by_commit_id);
    RUN(registry_metadata_and_search);
    RUN(namespace_signing_policy);
    RUN(schema_1_catalog_is_migrated);
    RUN(schema_2_catalog_is_migrated_to_stable_ids);
    RUN(guarded_file_put);
    RUN(import_jobs_commit_with_source_url);
    RUN(import_job_urls_redacted_when_ended);
    RUN(job_of_revoked_token_fails_at_commit);
    RUN(newer_schema_is_refused);
    RUN(dispatch_reaches_the_backend);
    RUN(open_chooses_the_backend_by_url);
    /* The same backend-independent tests against PostgreSQL, from an empty schema. */
    const char *pg_url = getenv("TENSORGATE_TEST_PG");
    if (pg_url != NULL && pg_url[0] != '\0') {
        CHECK(tg_test_pg_reset(pg_url));
        catalog_url = pg_url;
        RUN(models_and_listing);
        RUN(versions_files_publish);
        RUN(rejections_and_tokens);
        RUN(audit_append_chain_and_filters);
        RUN(code_policy_settings_and_marks);
        RUN(jobs_commit_fail_recover);
        RUN(jobs_create_is_idempotent);
        RUN(jobs_list_filters_and_pages);
        RUN(jobs_cancel);
        RUN(guarded_file_put);
        RUN(job_of_revoked_token_fails_at_commit);
        RUN(import_job_urls_redacted_when_ended);
        RUN(job_leases_between_handles);
        RUN(job_claim_is_fair_across_namespaces);
        RUN(publish_checks_the_files);
        RUN(versions_by_commit_id);
        RUN(registry_metadata_and_search);
        RUN(namespace_signing_policy);
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
