/* Unit tests for server/jobs/mirror_job.c on a temporary catalog + blob store (the
 * end-to-end mirrors, over real HTTP from a second tensorgate, are in
 * tests/mirror/run.sh and tests/unit/server/routes/mirror.c):
 *  - a mirror job of a loopback endpoint with the default policy: failed with
 *    import_address_forbidden, its draft without files, its url scrubbed of the
 *    upstream token, a result recorded;
 *  - the same with 127.0.0.1/32 allowed and nothing listening:
 *    mirror_upstream_failed;
 *  - a job row whose path has no "@REVISION": internal_error. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blobstore.h"
#include "catalog.h"
#include "catalog_mirror.h"
#include "mirror_job.h"
#include "test.h"

static tg_catalog *catalog;
static tg_blobstore *blobs;

static tg_job run_mirror(const tg_jobs_context *context, const char *url, const char *spec)
{
    tg_model model;
    if (tg_catalog_model_get(catalog, "org", "m", &model) != TG_CAT_OK)
        CHECK(tg_catalog_model_create(catalog, "org", "m", "", &model) == TG_CAT_OK);
    tg_version draft;
    CHECK(tg_catalog_version_create(catalog, model.id, &draft) == TG_CAT_OK);
    tg_job job;
    memset(&job, 0, sizeof job);
    CHECK(tg_catalog_mirror_job_create(catalog, 0, model.id, draft.id, url, spec, false, &job) ==
          TG_CAT_OK);
    CHECK_STR(job.kind, "mirror");
    tg_job claimed;
    CHECK(tg_catalog_job_claim(catalog, &claimed) == TG_CAT_OK);
    CHECK_EQ_U64(claimed.id, job.id);
    CHECK(tg_mirror_job_run(context, &claimed, NULL) == TG_JOB_OUTCOME_FAILED);
    CHECK(tg_catalog_job_get(catalog, job.id, &job) == TG_CAT_OK);
    tg_file_records files = {0};
    CHECK(tg_catalog_file_list(catalog, draft.id, NULL, 0, tg_file_records_collect, &files) ==
          TG_CAT_OK);
    CHECK_EQ_U64(files.count, 0);
    free(files.items);
    return job;
}

TEST(test_run_refused)
{
    tg_jobs_context context = {
        .catalog = catalog, .store = blobs, .max_header = 1 << 20, .max_body = 1 << 20};
    tg_job job = run_mirror(&context, "http://token:s3cret@127.0.0.1:1", "up/m@main");
    CHECK(job.state == TG_JOB_FAILED);
    CHECK_STR(job.error_reason, "import_address_forbidden");
    CHECK(strstr(job.url, "s3cret") == NULL); /* scrubbed when it ended */
    char *result = NULL;
    CHECK(tg_catalog_mirror_result_get(catalog, job.id, &result) == TG_CAT_OK);
    CHECK(result != NULL && strstr(result, "\"repo\":\"up/m\"") != NULL);
    CHECK(result == NULL || strstr(result, "s3cret") == NULL);
    free(result);
    CHECK(tg_addr_policy_allow(&context.import_policy, "127.0.0.0/8") == 0);
    job = run_mirror(&context, "http://127.0.0.1:1", "up/m@main");
    CHECK(job.state == TG_JOB_FAILED);
    CHECK_STR(job.error_reason, "mirror_upstream_failed");
    job = run_mirror(&context, "http://127.0.0.1:1", "no-revision");
    CHECK_STR(job.error_reason, "internal_error");
}

int main(int argc, char **argv)
{
    (void)argc;
    char root[] = "/tmp/tg-mirror-job-XXXXXX";
    char err[256] = "", db[128];
    if (mkdtemp(root) == NULL || tg_blobstore_open(root, &blobs, err, sizeof err) != 0) {
        fprintf(stderr, "store: %s\n", err);
        return 1;
    }
    snprintf(db, sizeof db, "%s/catalog.db", root);
    if (tg_catalog_open(db, &catalog, err, sizeof err) != TG_CAT_OK) {
        fprintf(stderr, "catalog: %s\n", err);
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    RUN(test_run_refused);
    tg_catalog_close(catalog);
    tg_blobstore_close(blobs);
    curl_global_cleanup();
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", root);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return test_report(argv[0]);
}
