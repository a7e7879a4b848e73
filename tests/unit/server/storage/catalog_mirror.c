/* Unit tests for server/storage/catalog_mirror.c on a temporary SQLite catalog (the
 * PostgreSQL backend runs the same statements: tests/scale/pg-suite.sh): a mirror
 * job's row (kind, url, "REPO@REVISION", "partial"); a result set, replaced and
 * read; a version's mirror record, the newest of a repository and the one of a
 * commit; a job made done only while it runs; the idle draft a mirror reuses; the
 * asking token's check (write scope covering the org, revoked). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "catalog_mirror.h"
#include "test.h"

static tg_catalog *catalog;

TEST(test_mirror_rows)
{
    tg_model model;
    CHECK(tg_catalog_model_create(catalog, "org", "m", "", &model) == TG_CAT_OK);
    tg_version v1, v2;
    CHECK(tg_catalog_version_create(catalog, model.id, &v1) == TG_CAT_OK);
    CHECK(tg_catalog_version_create(catalog, model.id, &v2) == TG_CAT_OK);
    tg_job job;
    CHECK(tg_catalog_mirror_job_create(catalog, 0, model.id, v1.id, "http://up.example", "a/b@main",
                                       true, &job) == TG_CAT_OK);
    CHECK_STR(job.kind, "mirror");
    CHECK_STR(job.path, "a/b@main");
    CHECK_STR(job.dtype, "partial");
    CHECK(job.state == TG_JOB_QUEUED);
    /* not running: not made done */
    CHECK(tg_catalog_mirror_job_done(catalog, job.id, 1) == TG_CAT_CONFLICT);
    tg_job claimed;
    CHECK(tg_catalog_job_claim(catalog, &claimed) == TG_CAT_OK);
    CHECK(tg_catalog_mirror_job_done(catalog, job.id, 1) == TG_CAT_OK);
    CHECK(tg_catalog_job_get(catalog, job.id, &job) == TG_CAT_OK);
    CHECK(job.state == TG_JOB_DONE);
    CHECK_EQ_U64(job.result_version, 1);
    CHECK(tg_catalog_mirror_job_done(catalog, job.id, 1) == TG_CAT_CONFLICT);

    char *text = (char *)"x";
    CHECK(tg_catalog_mirror_result_get(catalog, job.id, &text) == TG_CAT_OK);
    CHECK(text == NULL);
    CHECK(tg_catalog_mirror_result_set(catalog, job.id, "{\"a\":1}") == TG_CAT_OK);
    CHECK(tg_catalog_mirror_result_set(catalog, job.id, "{\"a\":2}") == TG_CAT_OK);
    CHECK(tg_catalog_mirror_result_get(catalog, job.id, &text) == TG_CAT_OK);
    CHECK_STR(text ? text : "", "{\"a\":2}");
    free(text);

    tg_mirror_record rec = {.version_id = v1.id, .oids = (char *)"{\"x\":\"1\"}"};
    snprintf(rec.endpoint, sizeof rec.endpoint, "http://up.example");
    snprintf(rec.repo, sizeof rec.repo, "a/b");
    snprintf(rec.revision, sizeof rec.revision, "main");
    snprintf(rec.commit, sizeof rec.commit, "%040d", 1);
    CHECK(tg_catalog_mirror_version_add(catalog, model.id, &rec) == TG_CAT_OK);
    rec.version_id = v2.id;
    snprintf(rec.commit, sizeof rec.commit, "%040d", 2);
    CHECK(tg_catalog_mirror_version_add(catalog, model.id, &rec) == TG_CAT_OK);

    tg_mirror_record out;
    CHECK(tg_catalog_mirror_version_get(catalog, v1.id, &out) == TG_CAT_OK);
    CHECK_STR(out.repo, "a/b");
    CHECK_EQ_U64(out.number, 1);
    CHECK_STR(out.oids ? out.oids : "", "{\"x\":\"1\"}");
    free(out.oids);
    CHECK(tg_catalog_mirror_latest(catalog, model.id, "http://up.example", "a/b", NULL, &out) ==
          TG_CAT_OK);
    CHECK_EQ_U64(out.number, 2);
    free(out.oids);
    char one[41];
    snprintf(one, sizeof one, "%040d", 1);
    CHECK(tg_catalog_mirror_latest(catalog, model.id, "http://up.example", "a/b", one, &out) ==
          TG_CAT_OK);
    CHECK_EQ_U64(out.number, 1);
    free(out.oids);
    CHECK(tg_catalog_mirror_latest(catalog, model.id, "http://up.example", "a/c", NULL, &out) ==
          TG_CAT_NOT_FOUND);
    CHECK(tg_catalog_mirror_latest(catalog, model.id, "http://other", "a/b", NULL, &out) ==
          TG_CAT_NOT_FOUND);
    tg_version v3;
    CHECK(tg_catalog_version_create(catalog, model.id, &v3) == TG_CAT_OK);
    CHECK(tg_catalog_mirror_version_get(catalog, v3.id, &out) == TG_CAT_NOT_FOUND);
    /* the draft an ended mirror left empty is the one to fill again; not while a
     * job is queued on it, not once it holds a file */
    tg_version idle;
    CHECK(tg_catalog_mirror_idle_draft(catalog, model.id, &idle) == TG_CAT_OK);
    CHECK_EQ_U64(idle.id, v1.id);
    tg_job queued;
    CHECK(tg_catalog_mirror_job_create(catalog, 0, model.id, v1.id, "http://up.example", "a/b@main",
                                       false, &queued) == TG_CAT_OK);
    CHECK(tg_catalog_mirror_idle_draft(catalog, model.id, &idle) == TG_CAT_NOT_FOUND);
}

TEST(test_token_check)
{
    static const char write_hash[] =
        "1111111111111111111111111111111111111111111111111111111111111111";
    static const char read_hash[] =
        "2222222222222222222222222222222222222222222222222222222222222222";
    static const char all_hash[] =
        "3333333333333333333333333333333333333333333333333333333333333333";
    CHECK(tg_catalog_token_add(catalog, write_hash, TG_SCOPE_WRITE, "org") == TG_CAT_OK);
    CHECK(tg_catalog_token_add(catalog, read_hash, TG_SCOPE_READ, "org") == TG_CAT_OK);
    CHECK(tg_catalog_token_add(catalog, all_hash, TG_SCOPE_ADMIN, NULL) == TG_CAT_OK);
    int64_t w = 0, r = 0, a = 0;
    CHECK(tg_catalog_token_id(catalog, write_hash, &w) == TG_CAT_OK);
    CHECK(tg_catalog_token_id(catalog, read_hash, &r) == TG_CAT_OK);
    CHECK(tg_catalog_token_id(catalog, all_hash, &a) == TG_CAT_OK);
    const char *why = NULL;
    CHECK(tg_catalog_mirror_token_check(catalog, w, "org", &why) == TG_CAT_OK);
    CHECK(tg_catalog_mirror_token_check(catalog, a, "org", &why) == TG_CAT_OK);
    CHECK(tg_catalog_mirror_token_check(catalog, w, "other", &why) == TG_CAT_NOT_FOUND);
    CHECK_STR(why ? why : "", "forbidden");
    why = NULL;
    CHECK(tg_catalog_mirror_token_check(catalog, r, "org", &why) == TG_CAT_NOT_FOUND);
    CHECK_STR(why ? why : "", "forbidden");
    CHECK(tg_catalog_token_revoke(catalog, w) == TG_CAT_OK);
    why = NULL;
    CHECK(tg_catalog_mirror_token_check(catalog, w, "org", &why) == TG_CAT_NOT_FOUND);
    CHECK_STR(why ? why : "", "token_revoked");
}

int main(int argc, char **argv)
{
    (void)argc;
    char root[] = "/tmp/tg-catalog-mirror-XXXXXX";
    char err[256] = "", db[128];
    if (mkdtemp(root) == NULL)
        return 1;
    snprintf(db, sizeof db, "%s/catalog.db", root);
    if (tg_catalog_open(db, &catalog, err, sizeof err) != TG_CAT_OK) {
        fprintf(stderr, "catalog: %s\n", err);
        return 1;
    }
    RUN(test_mirror_rows);
    RUN(test_token_check);
    tg_catalog_close(catalog);
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", root);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return test_report(argv[0]);
}
