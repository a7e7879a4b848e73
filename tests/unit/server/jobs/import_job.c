/* Unit tests for server/jobs/import_job.c on a temporary catalog + blob store (the
 * end-to-end imports, over real HTTP from nginx and a second tensorgate, are in
 * tests/import/run.sh and tests/unit/server/routes/import.c):
 *  - tg_import_url_check: good URLs; empty, too long, spaces, no host, not a URL
 *    (import_url_invalid); file, ftp, gopher (import_scheme_forbidden); numeric hosts
 *    the policy forbids, both families and mapped (import_address_forbidden), and
 *    the same allowed by a CIDR;
 *  - a queued job run to a loopback port with the default policy: failed with
 *    import_address_forbidden at the connect, no file row, the job's error detail
 *    names the address;
 *  - the same with 127.0.0.1/32 allowed and nothing listening: import_fetch_failed. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blobstore.h"
#include "catalog.h"
#include "import_job.h"
#include "test.h"

static const char *url_reason(const tg_addr_policy *policy, const char *url)
{
    char detail[300];
    const char *r = tg_import_url_check(policy, url, detail, sizeof detail);
    return r ? r : "ok";
}

TEST(test_url_check)
{
    tg_addr_policy none = {0};
    CHECK_STR(url_reason(&none, "https://example.com/a/model.safetensors"), "ok");
    CHECK_STR(url_reason(&none, "http://93.184.216.34:8080/x"), "ok");
    CHECK_STR(url_reason(&none, "HTTP://example.com/x"), "ok");
    CHECK_STR(url_reason(&none, ""), "import_url_invalid");
    CHECK_STR(url_reason(&none, "not a url"), "import_url_invalid");
    CHECK_STR(url_reason(&none, "example.com/x"), "import_url_invalid");
    CHECK_STR(url_reason(&none, "http://"), "import_url_invalid");
    CHECK_STR(url_reason(&none, "http://exa mple.com/"), "import_url_invalid");
    char *long_url = malloc(TG_URL_MAX + 16);
    CHECK(long_url != NULL);
    if (long_url != NULL) {
        memset(long_url, 'a', TG_URL_MAX + 15);
        memcpy(long_url, "http://e.com/", 13);
        long_url[TG_URL_MAX + 15] = '\0';
        CHECK_STR(url_reason(&none, long_url), "import_url_invalid");
        free(long_url);
    }
    CHECK_STR(url_reason(&none, "file:///etc/passwd"), "import_scheme_forbidden");
    CHECK_STR(url_reason(&none, "ftp://example.com/x"), "import_scheme_forbidden");
    CHECK_STR(url_reason(&none, "gopher://example.com/x"), "import_scheme_forbidden");
    CHECK_STR(url_reason(&none, "http://127.0.0.1/x"), "import_address_forbidden");
    CHECK_STR(url_reason(&none, "http://[::1]:80/x"), "import_address_forbidden");
    CHECK_STR(url_reason(&none, "http://[::ffff:127.0.0.1]/x"), "import_address_forbidden");
    CHECK_STR(url_reason(&none, "http://10.0.0.1/x"), "import_address_forbidden");
    CHECK_STR(url_reason(&none, "http://169.254.169.254/latest/"), "import_address_forbidden");
    CHECK_STR(url_reason(&none, "http://[fd00:ec2::254]/"), "import_address_forbidden");
    /* names are judged at the connect, on what they resolve to */
    CHECK_STR(url_reason(&none, "http://localhost/x"), "ok");
    tg_addr_policy loopback = {0};
    CHECK(tg_addr_policy_allow(&loopback, "127.0.0.1/32") == 0);
    CHECK_STR(url_reason(&loopback, "http://127.0.0.1/x"), "ok");
    CHECK_STR(url_reason(&loopback, "http://127.0.0.2/x"), "import_address_forbidden");
}

static tg_catalog *catalog;
static tg_blobstore *blobs;

/* Queues an import of url into org/m's draft, runs it, returns the job after. */
static tg_job run_import(const tg_jobs_context *context, const char *url)
{
    tg_job job;
    memset(&job, 0, sizeof job);
    tg_model model;
    tg_version version;
    if (tg_catalog_model_get(catalog, "org", "m", &model) != TG_CAT_OK) {
        CHECK(tg_catalog_model_create(catalog, "org", "m", "", &model) == TG_CAT_OK);
        CHECK(tg_catalog_version_create(catalog, model.id, &version) == TG_CAT_OK);
    } else {
        CHECK(tg_catalog_version_get(catalog, model.id, 1, &version) == TG_CAT_OK);
    }
    bool existing = true;
    CHECK(tg_catalog_import_job_create(catalog, 0, model.id, version.id, "w.safetensors", url, &job,
                                       &existing) == TG_CAT_OK);
    CHECK(!existing);
    CHECK_STR(job.kind, "import");
    CHECK_STR(job.url, url);
    tg_job claimed;
    CHECK(tg_catalog_job_claim(catalog, &claimed) == TG_CAT_OK);
    CHECK_EQ_U64(claimed.id, job.id);
    CHECK(tg_import_job_run(context, &claimed, NULL) == TG_JOB_OUTCOME_FAILED);
    CHECK(tg_catalog_job_get(catalog, job.id, &job) == TG_CAT_OK);
    tg_file_record file;
    CHECK(tg_catalog_file_get(catalog, version.id, "w.safetensors", &file) == TG_CAT_NOT_FOUND);
    return job;
}

TEST(test_run_refused)
{
    tg_jobs_context context = {
        .catalog = catalog, .store = blobs, .max_header = 1 << 20, .max_body = 1 << 20};
    tg_job job = run_import(&context, "http://localhost:1/w.safetensors");
    CHECK(job.state == TG_JOB_FAILED);
    CHECK_STR(job.error_reason, "import_address_forbidden");
    CHECK(strstr(job.error_detail, "loopback") != NULL);
    CHECK(tg_addr_policy_allow(&context.import_policy, "127.0.0.0/8") == 0);
    CHECK(tg_addr_policy_allow(&context.import_policy, "::1/128") == 0);
    job = run_import(&context, "http://127.0.0.1:1/w.safetensors");
    CHECK(job.state == TG_JOB_FAILED);
    CHECK_STR(job.error_reason, "import_fetch_failed");
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(test_url_check);
    char root[] = "/tmp/tg-import-job-XXXXXX";
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
