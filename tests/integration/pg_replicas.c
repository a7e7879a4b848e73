/* Integration tests of replicas on one PostgreSQL catalog (serve --catalog):
 * two real servers over loopback, each its own process and data directory, the
 * blobs shared (DATA/blobs of the second is a link to the first's, as an S3
 * store or a shared volume would be), and the catalog one PostgreSQL database.
 *
 * Run under tests/scale/with-radosgw.sh as well (TENSORGATE_TEST_S3_ENDPOINT set),
 * the replicas share one S3 bucket instead of the link.
 *
 * Without TENSORGATE_TEST_PG (tests/scale/with-postgres.sh sets it) only the
 * first test runs: a server whose catalog cannot be reached refuses to start,
 * with a sentence and a non-zero exit, at once. With it:
 *  - what one replica writes the other serves (models, versions, file bytes);
 *  - the same draft published through both at once: one 200, one 409;
 *  - PostgreSQL stopped: /readyz 503 naming the catalog, reads and writes 503
 *    catalog_unavailable with Retry-After, none hangs; started again: everything
 *    serves, nothing lost;
 *  - a Hub LFS upload spans replicas (schema 17): the href one replica signed is
 *    taken by the other, and the commit on the first finds the pending object;
 *  - kill -9 of the replica running a conversion job: the other takes the job
 *    over once its lease (--job-lease-seconds 2) expires and finishes it; the
 *    derived version appears once. */
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"
#include "test_pg.h"

#define BASE "/v1/models"

static const char *pg_url;
static it_server rep[2];
static const char *const local_flags[] = {"--job-lease-seconds", "2", NULL};
/* under tests/scale/with-radosgw.sh too: the blobs in one S3 bucket */
static char store_url[300];
static const char *s3_flags[] = {
    "--job-lease-seconds", "2", "--blob-store", store_url, "--s3-endpoint", NULL, NULL};
static const char *const *flags = local_flags;
static const char *token;

static void use(int i)
{
    it_srv = rep[i];
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A server whose catalog cannot be reached exits at once with a sentence. */
TEST(unreachable_catalog_refuses_to_start)
{
    char command[1400];
    snprintf(command, sizeof command,
             "TENSORGATE_CATALOG= timeout 20 '%s' serve --listen 127.0.0.1:0 --data '%s/nodb' "
             "--catalog 'postgresql://tg@127.0.0.1:1/none?connect_timeout=2' 2>&1",
             it_binary, it_root_dir);
    double start = now_seconds();
    FILE *p = popen(command, "r");
    CHECK(p != NULL);
    if (p == NULL)
        return;
    char line[1024];
    bool said = false;
    while (fgets(line, sizeof line, p) != NULL)
        said = said || strstr(line, "cannot connect to the PostgreSQL catalog") != NULL;
    int status = pclose(p);
    CHECK(said);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 124);
    CHECK(now_seconds() - start < 10.0);
}

static it_buf shard;

/* What one replica writes, the other serves. */
TEST(replicas_share_one_catalog)
{
    static const it_tensor_spec t[] = {{"w", "F32", 2, {64, 64}}};
    it_build_safetensors(&shard, t, 1, NULL, 3);
    use(0);
    CHECK_EQ_U64(it_make_version(token, "acme/shared", "model.safetensors", &shard, true), 1);
    use(1);
    it_response r = it_get(BASE "/acme/shared");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "versions")), 1);
    it_response_free(&r);
    r = it_get(BASE "/acme/shared/versions/1/files/model.safetensors");
    CHECK_STATUS(r, 200);
    CHECK(r.body.len == shard.len && memcmp(r.body.data, shard.data, shard.len) == 0);
    it_response_free(&r);
    /* and a version made through the second is the next number on the first */
    CHECK_EQ_U64(it_make_version(token, "acme/shared", "model.safetensors", &shard, true), 2);
    use(0);
    r = it_get(BASE "/acme/shared/versions/latest");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(it_json_int(r.json, "version"), 2);
    it_response_free(&r);
}

/* The Hub write protocol across replicas: the LFS batch on the first, the PUT of the
 * bytes to the second (the href's key is the catalog's), the commit on the first. */
TEST(hub_lfs_upload_spans_replicas)
{
    const char *acme = it_token("write", "acme");
    use(0);
    it_response r = it_send_json("POST", "/api/repos/create", acme, "{\"name\":\"hub-rep\"}");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    char sha[65], body[300];
    it_sha256_hex(shard.data, shard.len, sha);
    snprintf(body, sizeof body,
             "{\"operation\":\"upload\",\"objects\":[{\"oid\":\"%s\",\"size\":%zu}]}", sha,
             shard.len);
    r = it_send_json("POST", "/acme/hub-rep.git/info/lfs/objects/batch", acme, body);
    CHECK_STATUS(r, 200);
    json_t *object = json_array_get(json_object_get(r.json, "objects"), 0);
    const char *url = json_string_value(
        json_object_get(json_object_get(json_object_get(object, "actions"), "upload"), "href"));
    char href[1200] = "";
    size_t base = strlen(rep[0].base);
    if (url != NULL && strncmp(url, rep[0].base, base) == 0)
        snprintf(href, sizeof href, "%s", url + base);
    it_response_free(&r);
    CHECK(href[0] == '/');
    use(1);
    r = it_send("PUT", href, NULL, shard.data, shard.len);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    use(0);
    char lines[600];
    snprintf(lines, sizeof lines,
             "{\"key\":\"header\",\"value\":{\"summary\":\"across\"}}\n"
             "{\"key\":\"lfsFile\",\"value\":{\"path\":\"model.safetensors\",\"algo\":"
             "\"sha256\",\"oid\":\"%s\",\"size\":%zu}}\n",
             sha, shard.len);
    r = it_send("POST", "/api/models/acme/hub-rep/commit/main", acme, lines, strlen(lines));
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    use(1);
    r = it_get("/acme/hub-rep/resolve/main/model.safetensors");
    CHECK(r.status == 200 && r.body.len == shard.len &&
          memcmp(r.body.data, shard.data, shard.len) == 0);
    it_response_free(&r);
    use(0);
}

typedef struct publisher {
    int replica;
    int version;
    pthread_barrier_t *barrier;
    long status;
} publisher;

static size_t discard(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    (void)ptr;
    (void)userdata;
    return size * nmemb;
}

static void *publish_thread(void *arg)
{
    publisher *p = arg;
    char url[256], auth[300];
    snprintf(url, sizeof url, "%s" BASE "/acme/race/versions/%d/publish", rep[p->replica].base,
             p->version);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    CURL *curl = curl_easy_init();
    struct curl_slist *headers = curl_slist_append(NULL, auth);
    if (curl == NULL || headers == NULL) {
        curl_slist_free_all(headers);
        curl_easy_cleanup(curl);
        pthread_barrier_wait(p->barrier);
        return NULL;
    }
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, 0L);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
    pthread_barrier_wait(p->barrier);
    if (curl_easy_perform(curl) == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &p->status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return NULL;
}

/* The same draft published through both replicas at once: one 200, one 409. */
TEST(one_publish_of_a_draft_wins)
{
    use(0);
    for (int round = 0; round < 6; round++) {
        int version = it_make_version(token, "acme/race", "model.safetensors", &shard, false);
        CHECK(version > 0);
        pthread_barrier_t barrier;
        pthread_barrier_init(&barrier, NULL, 2);
        publisher p[2] = {{0, version, &barrier, 0}, {1, version, &barrier, 0}};
        pthread_t threads[2];
        for (int i = 0; i < 2; i++)
            CHECK(pthread_create(&threads[i], NULL, publish_thread, &p[i]) == 0);
        for (int i = 0; i < 2; i++)
            pthread_join(threads[i], NULL);
        pthread_barrier_destroy(&barrier);
        CHECK((p[0].status == 200 && p[1].status == 409) ||
              (p[0].status == 409 && p[1].status == 200));
        if (!((p[0].status == 200 && p[1].status == 409) ||
              (p[0].status == 409 && p[1].status == 200)))
            fprintf(stderr, "round %d: %ld and %ld\n", round, p[0].status, p[1].status);
    }
    it_response r = it_get(BASE "/acme/race");
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "versions")), 6);
    it_response_free(&r);
}

/* PostgreSQL stopped: 503 with a reason, never a hang; started: all is back. */
TEST(catalog_down_answers_503_and_heals)
{
    const char *stop = getenv("TG_PG_STOP");
    const char *start = getenv("TG_PG_START");
    CHECK(stop != NULL && start != NULL);
    if (stop == NULL || start == NULL)
        return;
    use(0);
    CHECK(system(stop) == 0);
    double t0 = now_seconds();
    it_response r = it_get("/readyz");
    CHECK_STATUS(r, 503);
    CHECK_STR(it_json_str(&r, "status"), "not_ready");
    CHECK_STR(it_json_str(&r, "catalog"), "error");
    CHECK_STR(it_json_str(&r, "reason"), "catalog_unavailable");
    CHECK_STR(it_json_str(&r, "catalog_backend"), "postgresql");
    it_response_free(&r);
    r = it_get(BASE "/acme/shared");
    CHECK_PROBLEM(r, 503, "catalog_unavailable");
    char retry[32] = "";
    it_header(&r, "Retry-After", retry, sizeof retry);
    CHECK_STR(retry, "1");
    it_response_free(&r);
    r = it_get(BASE "/acme/shared/versions/1/files/model.safetensors");
    CHECK_PROBLEM(r, 503, "catalog_unavailable");
    it_response_free(&r);
    r = it_send_json("POST", BASE, token, "{\"name\":\"acme/while-down\"}");
    CHECK_PROBLEM(r, 503, "catalog_unavailable");
    it_response_free(&r);
    use(1);
    r = it_get(BASE "/acme/race/versions/1");
    CHECK_PROBLEM(r, 503, "catalog_unavailable");
    it_response_free(&r);
    CHECK(now_seconds() - t0 < 20.0);
    CHECK(system(start) == 0);
    for (int i = 0; i < 2; i++) {
        use(i);
        r = it_get("/readyz");
        CHECK_STATUS(r, 200);
        it_response_free(&r);
        r = it_get(BASE "/acme/shared/versions/1/files/model.safetensors");
        CHECK_STATUS(r, 200);
        CHECK(r.body.len == shard.len && memcmp(r.body.data, shard.data, shard.len) == 0);
        it_response_free(&r);
    }
    r = it_send_json("POST", BASE, token, "{\"name\":\"acme/after\"}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
}

/* ---- PostgreSQL restarted under load ---- */

typedef struct loader {
    int replica;
    volatile int *stop;
    int requests, ok, unavailable, other, transport;
    long other_status;
} loader;

/* One client: reads (model, file) and writes (new drafts) in a loop, each with a
 * 15 s timeout: a hang shows as a transport error. */
static void *load_thread(void *arg)
{
    loader *l = arg;
    char auth[300];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    CURL *curl = curl_easy_init();
    struct curl_slist *headers = curl_slist_append(NULL, auth);
    if (curl == NULL || headers == NULL) {
        curl_slist_free_all(headers);
        curl_easy_cleanup(curl);
        return NULL;
    }
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 15L);
    for (int i = 0; !*l->stop; i++) {
        char url[300];
        int kind = i % 3;
        if (kind == 0)
            snprintf(url, sizeof url, "%s" BASE "/acme/shared", rep[l->replica].base);
        else if (kind == 1)
            snprintf(url, sizeof url, "%s" BASE "/acme/shared/versions/1/files/model.safetensors",
                     rep[l->replica].base);
        else
            snprintf(url, sizeof url, "%s" BASE "/acme/load/versions", rep[l->replica].base);
        curl_easy_setopt(curl, CURLOPT_URL, url);
        if (kind == 2) {
            curl_easy_setopt(curl, CURLOPT_POST, 1L);
            curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, 0L);
        } else {
            curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
        }
        long status = 0;
        l->requests++;
        if (curl_easy_perform(curl) != CURLE_OK) {
            l->transport++;
            continue;
        }
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        if (status == 200 || status == 201)
            l->ok++;
        else if (status == 503) {
            l->unavailable++;
            usleep(2 * 1000); /* a client told to retry waits a little */
        } else {
            l->other++;
            l->other_status = status;
        }
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return NULL;
}

/* Clients on both replicas while PostgreSQL stops and starts: every request is
 * answered 200/201 or 503 (never a 500, never a hang), and afterwards every
 * replica serves again. */
TEST(restart_under_load)
{
    const char *stop = getenv("TG_PG_STOP");
    const char *start = getenv("TG_PG_START");
    if (stop == NULL || start == NULL)
        return;
    use(0);
    it_response r = it_send_json("POST", BASE, token, "{\"name\":\"acme/load\"}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    enum { CLIENTS = 4 };
    volatile int halt = 0;
    loader l[CLIENTS];
    pthread_t threads[CLIENTS];
    memset(l, 0, sizeof l);
    for (int i = 0; i < CLIENTS; i++) {
        l[i].replica = i % 2;
        l[i].stop = &halt;
        CHECK(pthread_create(&threads[i], NULL, load_thread, &l[i]) == 0);
    }
    usleep(300 * 1000);
    CHECK(system(stop) == 0);
    usleep(500 * 1000);
    CHECK(system(start) == 0);
    usleep(500 * 1000);
    halt = 1;
    int requests = 0, ok = 0, unavailable = 0, other = 0, transport = 0;
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(threads[i], NULL);
        requests += l[i].requests;
        ok += l[i].ok;
        unavailable += l[i].unavailable;
        other += l[i].other;
        transport += l[i].transport;
        if (l[i].other > 0)
            fprintf(stderr, "client %d: status %ld\n", i, l[i].other_status);
    }
    fprintf(stderr, "restart under load: %d requests, %d ok, %d 503, %d other, %d transport\n",
            requests, ok, unavailable, other, transport);
    CHECK(requests > 20);
    CHECK(ok > 0);
    CHECK_EQ_U64(other, 0);
    CHECK_EQ_U64(transport, 0);
    for (int i = 0; i < 2; i++) {
        use(i);
        r = it_get("/readyz");
        CHECK_STATUS(r, 200);
        it_response_free(&r);
        r = it_send("POST", BASE "/acme/load/versions", token, NULL, 0);
        CHECK_STATUS(r, 201);
        it_response_free(&r);
    }
    /* nothing lost: the drafts answered 201 are all there, numbered 1..N */
    use(0);
    r = it_get(BASE "/acme/load");
    size_t versions = json_array_size(json_object_get(r.json, "versions"));
    it_response_free(&r);
    CHECK(versions >= 2);
    char url[128];
    snprintf(url, sizeof url, BASE "/acme/load/versions/%zu", versions);
    r = it_get(url);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
}

static bool log_contains(const char *log, const char *needle)
{
    FILE *f = fopen(log, "r");
    if (f == NULL)
        return false;
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof line, f) != NULL)
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

static it_response get_job(long long id)
{
    char url[64];
    snprintf(url, sizeof url, "/v1/jobs/%lld", id);
    return it_get(url);
}

/* kill -9 of the replica running a job: the other finishes it, one version. */
TEST(job_of_a_dead_replica_is_taken_over)
{
    static const it_tensor_spec a[] = {{"x.weight", "F32", 2, {512, 1024}}};
    static const it_tensor_spec b[] = {{"y.weight", "F32", 2, {512, 1024}}};
    static it_buf files[2];
    it_build_safetensors(&files[0], a, 1, NULL, 11);
    it_build_safetensors(&files[1], b, 1, NULL, 12);
    use(0);
    CHECK_EQ_U64(it_make_version(token, "acme/big", "a.safetensors", &files[0], false), 1);
    it_response r = it_send("PUT", BASE "/acme/big/versions/1/files/b.safetensors", token,
                            files[1].data, files[1].len);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send("POST", BASE "/acme/big/versions/1/publish", token, NULL, 0);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    r = it_send_json("POST", BASE "/acme/big/versions/1/convert", token, "{\"dtype\":\"BF16\"}");
    CHECK_STATUS(r, 202);
    long long id = r.json ? it_json_int(r.json, "id") : 0;
    it_response_free(&r);
    CHECK(id > 0);
    /* which replica claimed it: its log says so; wait for some progress */
    char needle[64];
    snprintf(needle, sizeof needle, "job %lld: converting", id);
    int runner = -1;
    for (int i = 0; i < 1000 && runner < 0; i++) {
        for (int k = 0; k < 2 && runner < 0; k++)
            if (log_contains(rep[k].log, needle))
                runner = k;
        if (runner < 0)
            usleep(10 * 1000);
    }
    CHECK(runner >= 0);
    if (runner < 0)
        return;
    for (int i = 0; i < 500; i++) {
        r = get_job(id);
        json_t *progress = json_object_get(r.json, "progress");
        long long done = progress ? it_json_int(progress, "bytes_done") : 0;
        const char *state = it_json_str(&r, "state");
        bool going = state != NULL && strcmp(state, "running") == 0 && done > 0;
        it_response_free(&r);
        if (going)
            break;
        usleep(10 * 1000);
    }
    use(runner);
    it_kill_server(); /* kill -9 */
    int other = 1 - runner;
    use(other);
    double t0 = now_seconds();
    const char *state = NULL;
    for (int i = 0; i < 600; i++) {
        r = get_job(id);
        state = it_json_str(&r, "state");
        bool finished =
            state != NULL && (strcmp(state, "done") == 0 || strcmp(state, "failed") == 0);
        if (finished) {
            CHECK_STR(state, "done");
            CHECK_EQ_U64(it_json_int(r.json, "attempts"), 2);
            CHECK_EQ_U64(it_json_int(r.json, "version"), 2);
            it_response_free(&r);
            break;
        }
        it_response_free(&r);
        usleep(50 * 1000);
    }
    CHECK(now_seconds() - t0 < 30.0);
    CHECK(log_contains(rep[other].log, needle));
    /* the derived version appears once */
    r = it_get(BASE "/acme/big");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "versions")), 2);
    it_response_free(&r);
    r = it_get(BASE "/acme/big/versions/3");
    CHECK_PROBLEM(r, 404, "version_not_found");
    it_response_free(&r);
    r = it_get(BASE "/acme/big/versions/2/files/a.safetensors");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
}

/* A replica older than the catalog's schema refuses to start: a sentence, exit 1. */
TEST(newer_schema_stops_a_replica)
{
    char sql[160];
    snprintf(sql, sizeof sql, "INSERT INTO schema_migrations VALUES (%d, 'future')", 999);
    CHECK(tg_test_pg_exec(pg_url, sql));
    char command[1400];
    snprintf(command, sizeof command,
             "timeout 20 '%s' serve --listen 127.0.0.1:0 --data '%s/newer' 2>&1", it_binary,
             it_root_dir);
    FILE *p = popen(command, "r");
    CHECK(p != NULL);
    if (p != NULL) {
        char line[1024];
        bool said = false;
        while (fgets(line, sizeof line, p) != NULL)
            said = said || strstr(line, "newer than this tensorgate knows") != NULL;
        int status = pclose(p);
        CHECK(said);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    }
    CHECK(tg_test_pg_exec(pg_url, "DELETE FROM schema_migrations WHERE version = 999"));
}

int main(int argc, char **argv)
{
    pg_url = getenv("TENSORGATE_TEST_PG");
    if (pg_url != NULL && pg_url[0] != '\0') {
        setenv("TENSORGATE_CATALOG", pg_url, 1);
        /* conversions write in 64 KiB steps, 20 ms each: a job runs ~1 s */
        setenv("TENSORGATE_TEST_CONVERT_DELAY_MS", "20", 1);
    } else {
        unsetenv("TENSORGATE_CATALOG");
    }
    const char *endpoint = getenv("TENSORGATE_TEST_S3_ENDPOINT");
    const char *bucket = getenv("TENSORGATE_TEST_S3_BUCKET");
    if (pg_url != NULL && endpoint != NULL && bucket != NULL) {
        snprintf(store_url, sizeof store_url, "s3://%s/pg-replicas-%ld-%d", bucket,
                 (long)time(NULL), (int)getpid());
        s3_flags[5] = endpoint;
        flags = s3_flags;
    }
    it_init(argc, argv, flags);
    RUN(unreachable_catalog_refuses_to_start);
    if (pg_url == NULL || pg_url[0] == '\0') {
        fprintf(stderr, "TENSORGATE_TEST_PG unset: the replica tests are skipped "
                        "(tests/scale/with-postgres.sh runs them)\n");
        return test_report(argv[0]);
    }
    rep[0] = it_srv;
    /* the second replica: its own data directory, the first's blobs (the bucket,
     * or a link to the first's blob directory) */
    char blobs[700], link_path[700];
    snprintf(it_srv.data, sizeof it_srv.data, "%s/data-b", it_root_dir);
    CHECK(mkdir(it_srv.data, 0700) == 0);
    snprintf(blobs, sizeof blobs, "%s/blobs", rep[0].data);
    snprintf(link_path, sizeof link_path, "%s/blobs", it_srv.data);
    if (flags == local_flags)
        CHECK(symlink(blobs, link_path) == 0);
    if (it_server_start_args(flags, NULL) != 0) {
        it_dump_log(it_srv.log);
        fprintf(stderr, "the second replica did not start\n");
        return 2;
    }
    rep[1] = it_srv;
    use(0);
    token = it_token("write", NULL);
    RUN(replicas_share_one_catalog);
    RUN(hub_lfs_upload_spans_replicas);
    RUN(one_publish_of_a_draft_wins);
    RUN(catalog_down_answers_503_and_heals);
    RUN(restart_under_load);
    RUN(job_of_a_dead_replica_is_taken_over);
    RUN(newer_schema_stops_a_replica);
    for (int i = 0; i < 2; i++) {
        use(i);
        it_kill_server();
    }
    return test_report(argv[0]);
}
