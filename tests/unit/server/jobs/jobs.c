/* Unit tests for server/jobs/jobs.c (the job pool) on a temporary catalog + blob
 * store, with import jobs from a real HTTP peer in this process: a source that
 * answers 200 with a valid safetensors head announcing 1 MiB, then trickles 16
 * bytes every 200 ms for as long as it is read (it counts its requests).
 *  - the namespace limit: workers - 1, at least 1;
 *  - fairness: with 2 workers and two slow imports of namespace acme queued
 *    before a job of namespace beta, beta's job runs (and ends) while acme's
 *    first import runs and acme's second waits;
 *  - cancel: a DELETE's mark and tg_jobs_cancel fail the running slow import
 *    with reason "cancelled" within 2 s: no temp file, no file row; acme's
 *    queued import runs next; tg_jobs_stop stops it within 2 s, leaving it
 *    running (released) for the next start;
 *  - bounds: --import-min-rate 1K over a 1 s window fails the slow import with
 *    import_too_slow, --import-timeout 2 with import_timeout, each in time;
 *  - leases: with a 2 s lease, a second catalog handle (another replica) never
 *    claims the running slow import (the pool renews it), and a cancel marked
 *    through that handle alone stops it within 2 s (the renewer reads it). */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "blobstore.h"
#include "catalog.h"
#include "jobs.h"
#include "test.h"

static char root[64];
static tg_blobstore *blobs;
static tg_catalog *catalog;

/* ---- the trickling source ---- */

static int source_fd = -1;
static int source_port;
static int source_requests; /* atomic */
static int source_stop;     /* atomic */

static void *trickle(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char request[4096];
    size_t got = 0;
    while (got < sizeof request - 1) {
        ssize_t n = recv(fd, request + got, sizeof request - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        request[got] = '\0';
        if (strstr(request, "\r\n\r\n") != NULL)
            break;
    }
    __atomic_add_fetch(&source_requests, 1, __ATOMIC_SEQ_CST);
    const uint64_t count = 256 << 10; /* F32 values: 1 MiB */
    char header[128];
    int hlen = snprintf(header, sizeof header,
                        "{\"w\":{\"dtype\":\"F32\",\"shape\":[%llu],\"data_offsets\":[0,%llu]}}",
                        (unsigned long long)count, (unsigned long long)count * 4);
    while (hlen % 8 != 0)
        header[hlen++] = ' ';
    char head[256];
    int len = snprintf(head, sizeof head,
                       "HTTP/1.1 200 OK\r\nContent-Length: %llu\r\nConnection: close\r\n\r\n",
                       (unsigned long long)(8 + (uint64_t)hlen + count * 4));
    uint8_t n8[8];
    for (int i = 0; i < 8; i++)
        n8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    bool ok = send(fd, head, (size_t)len, MSG_NOSIGNAL) == len &&
              send(fd, n8, 8, MSG_NOSIGNAL) == 8 &&
              send(fd, header, (size_t)hlen, MSG_NOSIGNAL) == hlen;
    static const uint8_t zeros[16];
    while (ok && !__atomic_load_n(&source_stop, __ATOMIC_SEQ_CST)) {
        usleep(200 * 1000);
        ok = send(fd, zeros, sizeof zeros, MSG_NOSIGNAL) == (ssize_t)sizeof zeros;
    }
    close(fd);
    return NULL;
}

static void *source_main(void *arg)
{
    (void)arg;
    for (;;) {
        int fd = accept(source_fd, NULL, NULL);
        if (fd < 0)
            return NULL;
        pthread_t thread;
        if (pthread_create(&thread, NULL, trickle, (void *)(intptr_t)fd) == 0)
            pthread_detach(thread);
        else
            close(fd);
    }
}

static bool source_start(void)
{
    source_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t addr_len = sizeof addr;
    if (source_fd < 0 || bind(source_fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(source_fd, 16) != 0 ||
        getsockname(source_fd, (struct sockaddr *)&addr, &addr_len) != 0)
        return false;
    source_port = ntohs(addr.sin_port);
    pthread_t thread;
    if (pthread_create(&thread, NULL, source_main, NULL) != 0)
        return false;
    pthread_detach(thread);
    return true;
}

/* ---- helpers ---- */

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static tg_jobs_context context_of(unsigned workers)
{
    tg_jobs_context context = {.catalog = catalog,
                               .store = blobs,
                               .max_header = 1 << 20,
                               .max_body = 1 << 30,
                               .workers = workers};
    CHECK(tg_addr_policy_allow(&context.import_policy, "127.0.0.0/8") == 0);
    return context;
}

/* A draft version 1 of org/name. */
static int64_t draft(const char *org, const char *name, int64_t *model_id)
{
    tg_model model;
    tg_version version;
    CHECK(tg_catalog_model_create(catalog, org, name, "", &model) == TG_CAT_OK);
    CHECK(tg_catalog_version_create(catalog, model.id, &version) == TG_CAT_OK);
    *model_id = model.id;
    return version.id;
}

static int64_t queue_import(int64_t model_id, int64_t version_id, const char *path, bool slow)
{
    char url[128];
    if (slow)
        snprintf(url, sizeof url, "http://127.0.0.1:%d/%s", source_port, path);
    else
        snprintf(url, sizeof url, "http://127.0.0.1:1/%s", path); /* nothing listens */
    tg_job job;
    bool existing = true;
    CHECK(tg_catalog_import_job_create(catalog, 0, model_id, version_id, path, url, &job,
                                       &existing) == TG_CAT_OK);
    CHECK(!existing);
    return job.id;
}

static tg_job_state state_of(int64_t job_id, tg_job *job)
{
    CHECK(tg_catalog_job_get(catalog, job_id, job) == TG_CAT_OK);
    return job->state;
}

/* Waits up to seconds for job_id to reach state; returns how long it took, or -1. */
static double wait_state(int64_t job_id, tg_job_state state, double seconds, tg_job *job)
{
    double start = now_seconds();
    while (now_seconds() - start < seconds) {
        if (state_of(job_id, job) == state)
            return now_seconds() - start;
        usleep(20 * 1000);
    }
    return -1;
}

static size_t temp_files(void)
{
    char dir[128];
    snprintf(dir, sizeof dir, "%s/tmp", root);
    DIR *d = opendir(dir);
    size_t count = 0;
    if (d == NULL)
        return 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d))
        if (e->d_name[0] != '.')
            count++;
    closedir(d);
    return count;
}

static bool has_file(int64_t version_id, const char *path)
{
    tg_file_record file;
    return tg_catalog_file_get(catalog, version_id, path, &file) == TG_CAT_OK;
}

/* ---- tests ---- */

TEST(namespace_limit)
{
    CHECK_EQ_U64(tg_jobs_namespace_limit(1), 1);
    CHECK_EQ_U64(tg_jobs_namespace_limit(2), 1);
    CHECK_EQ_U64(tg_jobs_namespace_limit(4), 3);
}

TEST(pool_is_fair_and_cancel_is_prompt)
{
    int64_t acme, beta;
    int64_t va = draft("acme", "fair", &acme), vb = draft("beta", "fair", &beta);
    int64_t slow1 = queue_import(acme, va, "slow1.safetensors", true);
    int64_t slow2 = queue_import(acme, va, "slow2.safetensors", true);
    int64_t other = queue_import(beta, vb, "other.safetensors", false);
    tg_jobs_context context = context_of(2);
    char err[256] = "";
    CHECK(tg_jobs_start(&context, err, sizeof err) == 0);
    static tg_job job;
    /* beta's job ends while acme's first import runs and its second waits */
    CHECK(wait_state(other, TG_JOB_FAILED, 5, &job) >= 0);
    CHECK_STR(job.error_reason, "import_fetch_failed");
    CHECK(state_of(slow1, &job) == TG_JOB_RUNNING);
    usleep(500 * 1000);
    CHECK(state_of(slow2, &job) == TG_JOB_QUEUED);
    CHECK(state_of(slow1, &job) == TG_JOB_RUNNING);
    CHECK(temp_files() == 1);
    /* DELETE: the catalog's mark, then the pool */
    tg_job_state was;
    CHECK(tg_catalog_job_cancel(catalog, slow1, &was, &job) == TG_CAT_OK);
    CHECK(was == TG_JOB_RUNNING);
    tg_jobs_cancel(slow1);
    double took = wait_state(slow1, TG_JOB_FAILED, 5, &job);
    CHECK(took >= 0 && took < 2);
    CHECK_STR(job.error_reason, "cancelled");
    CHECK(!has_file(va, "slow1.safetensors"));
    /* acme's queued import runs next */
    CHECK(wait_state(slow2, TG_JOB_RUNNING, 5, &job) >= 0);
    usleep(300 * 1000);
    CHECK(temp_files() == 1); /* slow2's only: slow1's went */
    double start = now_seconds();
    tg_jobs_stop();
    CHECK(now_seconds() - start < 2);
    CHECK(state_of(slow2, &job) == TG_JOB_RUNNING); /* resumed at the next start */
    CHECK(temp_files() == 0);
    CHECK(!has_file(va, "slow2.safetensors"));
    CHECK(tg_catalog_model_delete(catalog, acme) == TG_CAT_OK);
    CHECK(tg_catalog_model_delete(catalog, beta) == TG_CAT_OK);
}

TEST(import_bounds)
{
    int64_t model;
    int64_t version = draft("acme", "bounds", &model);
    int64_t slow = queue_import(model, version, "slow.safetensors", true);
    tg_jobs_context context = context_of(1);
    context.import_min_rate = 1024;
    context.import_rate_window = 1;
    char err[256] = "";
    CHECK(tg_jobs_start(&context, err, sizeof err) == 0);
    static tg_job job;
    double took = wait_state(slow, TG_JOB_FAILED, 10, &job);
    CHECK(took >= 0.5 && took < 4);
    CHECK_STR(job.error_reason, "import_too_slow");
    CHECK(strstr(job.error_detail, "--import-min-rate") != NULL);
    tg_jobs_stop();
    slow = queue_import(model, version, "slow.safetensors", true);
    context.import_min_rate = 0;
    context.import_timeout = 2;
    CHECK(tg_jobs_start(&context, err, sizeof err) == 0);
    took = wait_state(slow, TG_JOB_FAILED, 10, &job);
    CHECK(took >= 1.5 && took < 5);
    CHECK_STR(job.error_reason, "import_timeout");
    tg_jobs_stop();
    CHECK(temp_files() == 0);
    CHECK(!has_file(version, "slow.safetensors"));
    CHECK(tg_catalog_model_delete(catalog, model) == TG_CAT_OK);
}

TEST(imports_are_lease_renewed)
{
    char db[128], err[256] = "";
    snprintf(db, sizeof db, "%s/catalog.db", root);
    tg_catalog *replica = NULL;
    CHECK(tg_catalog_open(db, &replica, err, sizeof err) == TG_CAT_OK);
    if (replica == NULL)
        return;
    tg_catalog_set_job_lease(replica, 2, 3);
    int64_t model;
    int64_t version = draft("acme", "leased", &model);
    int64_t slow = queue_import(model, version, "slow.safetensors", true);
    int requests = __atomic_load_n(&source_requests, __ATOMIC_SEQ_CST);
    tg_jobs_context context = context_of(2);
    context.lease_seconds = 2;
    CHECK(tg_jobs_start(&context, err, sizeof err) == 0);
    static tg_job job, stolen;
    CHECK(wait_state(slow, TG_JOB_RUNNING, 5, &job) >= 0);
    bool taken = false;
    double start = now_seconds();
    while (now_seconds() - start < 5) {
        taken = taken || tg_catalog_job_claim(replica, &stolen) == TG_CAT_OK;
        usleep(100 * 1000);
    }
    CHECK(!taken);
    CHECK(state_of(slow, &job) == TG_JOB_RUNNING);
    CHECK_EQ_U64(job.attempts, 1);
    CHECK_EQ_U64(__atomic_load_n(&source_requests, __ATOMIC_SEQ_CST) - requests, 1);
    /* a cancel asked through the other replica: the renewer reads it */
    tg_job_state was;
    CHECK(tg_catalog_job_cancel(replica, slow, &was, &stolen) == TG_CAT_OK);
    double took = wait_state(slow, TG_JOB_FAILED, 5, &job);
    CHECK(took >= 0 && took < 2.5);
    CHECK_STR(job.error_reason, "cancelled");
    tg_jobs_stop();
    CHECK(temp_files() == 0);
    CHECK(tg_catalog_model_delete(catalog, model) == TG_CAT_OK);
    tg_catalog_close(replica);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(namespace_limit);
    snprintf(root, sizeof root, "/tmp/tg-jobs-XXXXXX");
    char err[256] = "", db[128];
    if (mkdtemp(root) == NULL || tg_blobstore_open(root, &blobs, err, sizeof err) != 0) {
        fprintf(stderr, "store: %s\n", err);
        return 1;
    }
    snprintf(db, sizeof db, "%s/catalog.db", root);
    if (tg_catalog_open(db, &catalog, err, sizeof err) != TG_CAT_OK || !source_start()) {
        fprintf(stderr, "catalog or source: %s\n", err);
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    RUN(pool_is_fair_and_cancel_is_prompt);
    RUN(import_bounds);
    RUN(imports_are_lease_renewed);
    __atomic_store_n(&source_stop, 1, __ATOMIC_SEQ_CST);
    tg_catalog_close(catalog);
    tg_blobstore_close(blobs);
    curl_global_cleanup();
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", root);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return test_report(argv[0]);
}
