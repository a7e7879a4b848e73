/* Unit tests for server/storage/catalog_pg.c, the PostgreSQL catalog backend.
 *
 * Without TENSORGATE_TEST_PG only what needs no server runs: the two migration
 * sets have the same numbers, and an unreachable catalog fails at once with a
 * sentence. tests/scale/with-postgres.sh starts a throwaway cluster and sets
 * TENSORGATE_TEST_PG (and TG_PG_STOP / TG_PG_START); then several catalog
 * handles, each one replica, race in threads against the real server: replicas
 * migrating at once, the version-number sequence, publishing one draft, alias
 * moves, deletes, job claims, and a PostgreSQL restart under the pool. The
 * backend-independent tests of tests/unit/server/storage/catalog.c run against
 * PostgreSQL too. Run from the repo root (the migration files are read). */
#include <glob.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "catalog.h"
#include "catalog_backend.h"
#include "embedded.h"
#include "test.h"
#include "test_pg.h"

static const char *pg_url;

#define REPLICAS 4

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool read_text(const char *path, char *text, size_t size)
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

/* migrations/postgresql/ has one file per number of migrations/, same numbers,
 * and the binary carries both sets. */
TEST(migration_sets_have_the_same_numbers)
{
    glob_t sqlite_files, pg_files;
    CHECK(glob("migrations/*.sql", 0, NULL, &sqlite_files) == 0);
    CHECK(glob("migrations/postgresql/*.sql", 0, NULL, &pg_files) == 0);
    CHECK_EQ_U64(pg_files.gl_pathc, sqlite_files.gl_pathc);
    CHECK_EQ_U64(tg_migrations_pg_count, tg_migrations_count);
    for (size_t i = 0; i < pg_files.gl_pathc && i < sqlite_files.gl_pathc; i++) {
        const char *pg_name = pg_files.gl_pathv[i] + strlen("migrations/postgresql/");
        const char *sqlite_name = sqlite_files.gl_pathv[i] + strlen("migrations/");
        CHECK(strncmp(pg_name, sqlite_name, 5) == 0); /* "NNNN_" */
        if (i < tg_migrations_pg_count) {
            CHECK_EQ_U64((uint64_t)tg_migrations_pg[i].version, i + 1);
            CHECK_STR(tg_migrations_pg[i].name, pg_name);
            static char text[1 << 16];
            CHECK(read_text(pg_files.gl_pathv[i], text, sizeof text));
            CHECK_STR(text, tg_migrations_pg[i].sql);
        }
    }
    globfree(&sqlite_files);
    globfree(&pg_files);
}

/* Nothing listens: the open fails in well under connect_timeout, with a sentence. */
TEST(unreachable_catalog_fails_at_once)
{
    tg_catalog *catalog = NULL;
    char err[512] = "";
    double start = now_seconds();
    CHECK(tg_catalog_open("postgresql://tg@127.0.0.1:1/tensorgate?connect_timeout=2", &catalog, err,
                          sizeof err) == TG_CAT_ERROR);
    CHECK(catalog == NULL);
    CHECK(now_seconds() - start < 5.0);
    CHECK(strstr(err, "cannot connect to the PostgreSQL catalog") != NULL);
}

/* ---- with a server ---- */

typedef struct opener {
    pthread_barrier_t *barrier;
    tg_catalog *catalog;
    tg_cat_status status;
    char err[512];
} opener;

static void *open_thread(void *arg)
{
    opener *o = arg;
    pthread_barrier_wait(o->barrier);
    o->status = tg_catalog_open(pg_url, &o->catalog, o->err, sizeof o->err);
    return NULL;
}

/* Replicas starting at once on an empty database: each opens, the schema is
 * made once (a second run of migration 1 would fail on its CREATE TABLE). */
TEST(replicas_starting_at_once_migrate_once)
{
    CHECK(tg_test_pg_reset(pg_url));
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, REPLICAS);
    opener o[REPLICAS];
    pthread_t threads[REPLICAS];
    memset(o, 0, sizeof o);
    for (int i = 0; i < REPLICAS; i++) {
        o[i].barrier = &barrier;
        CHECK(pthread_create(&threads[i], NULL, open_thread, &o[i]) == 0);
    }
    for (int i = 0; i < REPLICAS; i++) {
        pthread_join(threads[i], NULL);
        CHECK(o[i].status == TG_CAT_OK);
        if (o[i].status != TG_CAT_OK)
            fprintf(stderr, "open %d: %s\n", i, o[i].err);
        else
            CHECK_EQ_U64((uint64_t)tg_catalog_schema_version(o[i].catalog),
                         (uint64_t)tg_catalog_known_schema_version());
        tg_catalog_close(o[i].catalog);
    }
    pthread_barrier_destroy(&barrier);
    CHECK(tg_test_pg_scalar(pg_url, "SELECT count(*) FROM schema_migrations") ==
          tg_catalog_known_schema_version());
    CHECK(tg_test_pg_scalar(pg_url, "SELECT max(version) FROM schema_migrations") ==
          tg_catalog_known_schema_version());
}

TEST(newer_schema_is_refused)
{
    char sql[160];
    snprintf(sql, sizeof sql, "INSERT INTO schema_migrations VALUES (%d, 'future')",
             tg_catalog_known_schema_version() + 1);
    CHECK(tg_test_pg_exec(pg_url, sql));
    tg_catalog *catalog = NULL;
    char err[512] = "";
    CHECK(tg_catalog_open(pg_url, &catalog, err, sizeof err) == TG_CAT_ERROR);
    CHECK(catalog == NULL);
    CHECK(strstr(err, "newer than this tensorgate knows") != NULL);
    snprintf(sql, sizeof sql, "DELETE FROM schema_migrations WHERE version = %d",
             tg_catalog_known_schema_version() + 1);
    CHECK(tg_test_pg_exec(pg_url, sql));
}

/* The replicas: REPLICAS handles, opened once. */
static tg_catalog *replica[REPLICAS];

typedef struct racer {
    int index;
    pthread_barrier_t *barrier;
    int64_t model_id, version_id;
    int rounds;
    int ok, conflict, not_found, other;
    int64_t numbers[64];
} racer;

static void count(racer *r, tg_cat_status status)
{
    if (status == TG_CAT_OK)
        r->ok++;
    else if (status == TG_CAT_CONFLICT)
        r->conflict++;
    else if (status == TG_CAT_NOT_FOUND)
        r->not_found++;
    else
        r->other++;
}

static void *create_versions(void *arg)
{
    racer *r = arg;
    pthread_barrier_wait(r->barrier);
    for (int i = 0; i < r->rounds; i++) {
        tg_version v;
        tg_cat_status status = tg_catalog_version_create(replica[r->index], r->model_id, &v);
        count(r, status);
        r->numbers[i] = status == TG_CAT_OK ? v.number : -1;
    }
    return NULL;
}

static void run_racers(racer *r, void *(*body)(void *))
{
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, REPLICAS);
    pthread_t threads[REPLICAS];
    for (int i = 0; i < REPLICAS; i++) {
        r[i].index = i;
        r[i].barrier = &barrier;
        CHECK(pthread_create(&threads[i], NULL, body, &r[i]) == 0);
    }
    for (int i = 0; i < REPLICAS; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&barrier);
}

/* Drafts made at once through every replica get the numbers 1..N, each once. */
TEST(version_numbers_are_one_sequence_across_replicas)
{
    tg_model model;
    CHECK(tg_catalog_model_create(replica[0], "race", "numbers", "", &model) == TG_CAT_OK);
    racer r[REPLICAS];
    memset(r, 0, sizeof r);
    for (int i = 0; i < REPLICAS; i++) {
        r[i].model_id = model.id;
        r[i].rounds = 16;
    }
    run_racers(r, create_versions);
    bool seen[REPLICAS * 16 + 1];
    memset(seen, 0, sizeof seen);
    int made = 0;
    for (int i = 0; i < REPLICAS; i++) {
        CHECK_EQ_U64(r[i].ok, 16);
        for (int j = 0; j < 16; j++) {
            int64_t n = r[i].numbers[j];
            CHECK(n >= 1 && n <= REPLICAS * 16);
            if (n >= 1 && n <= REPLICAS * 16) {
                CHECK(!seen[n]);
                seen[n] = true;
                made++;
            }
        }
    }
    CHECK_EQ_U64(made, REPLICAS * 16);
}

static void *publish_once(void *arg)
{
    racer *r = arg;
    pthread_barrier_wait(r->barrier);
    tg_version out;
    char digest[65];
    snprintf(digest, sizeof digest, "%064d", r->index);
    count(r, tg_catalog_version_publish(replica[r->index], r->version_id, digest, &out));
    return NULL;
}

/* The same draft published through every replica at once: exactly one succeeds,
 * the others get TG_CAT_CONFLICT (the routes' 409). */
TEST(publishing_one_draft_at_once_one_wins)
{
    tg_model model;
    CHECK(tg_catalog_model_create(replica[0], "race", "publish", "", &model) == TG_CAT_OK);
    for (int round = 0; round < 10; round++) {
        tg_version draft;
        CHECK(tg_catalog_version_create(replica[round % REPLICAS], model.id, &draft) == TG_CAT_OK);
        racer r[REPLICAS];
        memset(r, 0, sizeof r);
        for (int i = 0; i < REPLICAS; i++)
            r[i].version_id = draft.id;
        run_racers(r, publish_once);
        int ok = 0, conflict = 0, other = 0;
        for (int i = 0; i < REPLICAS; i++) {
            ok += r[i].ok;
            conflict += r[i].conflict;
            other += r[i].other + r[i].not_found;
        }
        CHECK_EQ_U64(ok, 1);
        CHECK_EQ_U64(conflict, REPLICAS - 1);
        CHECK_EQ_U64(other, 0);
    }
}

static void *move_alias(void *arg)
{
    racer *r = arg;
    pthread_barrier_wait(r->barrier);
    for (int i = 0; i < r->rounds; i++)
        count(r, tg_catalog_alias_set(replica[r->index], r->model_id, "stable", r->index + 1));
    return NULL;
}

static void *delete_model(void *arg)
{
    racer *r = arg;
    pthread_barrier_wait(r->barrier);
    count(r, tg_catalog_model_delete(replica[r->index], r->model_id));
    return NULL;
}

/* Alias moves from every replica at once all succeed and leave one of the
 * values; a model deleted through every replica at once is deleted once. */
TEST(alias_moves_and_deletes_across_replicas)
{
    tg_model model;
    CHECK(tg_catalog_model_create(replica[0], "race", "alias", "", &model) == TG_CAT_OK);
    racer r[REPLICAS];
    memset(r, 0, sizeof r);
    for (int i = 0; i < REPLICAS; i++) {
        r[i].model_id = model.id;
        r[i].rounds = 20;
    }
    run_racers(r, move_alias);
    for (int i = 0; i < REPLICAS; i++)
        CHECK_EQ_U64(r[i].ok, 20);
    int64_t number = 0;
    CHECK(tg_catalog_alias_get(replica[1], model.id, "stable", &number) == TG_CAT_OK);
    CHECK(number >= 1 && number <= REPLICAS);
    memset(r, 0, sizeof r);
    for (int i = 0; i < REPLICAS; i++)
        r[i].model_id = model.id;
    run_racers(r, delete_model);
    int ok = 0, not_found = 0;
    for (int i = 0; i < REPLICAS; i++) {
        ok += r[i].ok;
        not_found += r[i].not_found;
    }
    CHECK_EQ_U64(ok, 1);
    CHECK_EQ_U64(not_found, REPLICAS - 1);
    CHECK(tg_catalog_alias_get(replica[2], model.id, "stable", &number) == TG_CAT_NOT_FOUND);
}

static void *claim_all(void *arg)
{
    racer *r = arg;
    pthread_barrier_wait(r->barrier);
    tg_job *job = malloc(sizeof *job);
    if (job == NULL)
        return NULL;
    while (r->ok < 64) {
        tg_cat_status status = tg_catalog_job_claim(replica[r->index], job);
        if (status != TG_CAT_OK) {
            count(r, status);
            break;
        }
        r->numbers[r->ok++] = job->id;
    }
    free(job);
    return NULL;
}

/* Queued jobs claimed through every replica at once: each job once. */
TEST(job_claims_across_replicas_take_each_job_once)
{
    tg_model model;
    CHECK(tg_catalog_model_create(replica[0], "race", "jobs", "", &model) == TG_CAT_OK);
    tg_version v1, out;
    CHECK(tg_catalog_version_create(replica[0], model.id, &v1) == TG_CAT_OK);
    CHECK(tg_catalog_version_publish(replica[0], v1.id, "1111", &out) == TG_CAT_OK);
    enum { JOBS = 24 };
    int64_t ids[JOBS];
    for (int i = 0; i < JOBS; i++) {
        static tg_job job;
        bool existing = true;
        char tensors[32];
        snprintf(tensors, sizeof tensors, "[\"t%d\"]", i);
        CHECK(tg_catalog_job_create(replica[i % REPLICAS], model.id, v1.id, "BF16", tensors, 1,
                                    &job, &existing) == TG_CAT_OK);
        CHECK(!existing);
        ids[i] = job.id;
    }
    racer r[REPLICAS];
    memset(r, 0, sizeof r);
    run_racers(r, claim_all);
    int claimed = 0;
    for (int i = 0; i < JOBS; i++) {
        int times = 0;
        for (int k = 0; k < REPLICAS; k++)
            for (int j = 0; j < r[k].ok; j++)
                times += r[k].numbers[j] == ids[i];
        CHECK_EQ_U64(times, 1);
        claimed += times;
    }
    CHECK_EQ_U64(claimed, JOBS);
    for (int k = 0; k < REPLICAS; k++) {
        CHECK_EQ_U64(r[k].not_found, 1);
        CHECK_EQ_U64(r[k].other, 0);
    }
    CHECK(tg_catalog_model_delete(replica[0], model.id) == TG_CAT_OK);
}

static void *write_or_delete(void *arg)
{
    racer *r = arg;
    pthread_barrier_wait(r->barrier);
    if (r->index == 0) {
        usleep(2000);
        count(r, tg_catalog_model_delete(replica[0], r->model_id));
        return NULL;
    }
    tg_file_record file = {.path = "f.safetensors", .kind = "safetensors", .size = 1};
    snprintf(file.sha256, sizeof file.sha256, "%064d", r->index);
    static _Thread_local tg_job job;
    for (int i = 0; i < r->rounds; i++) {
        tg_version v;
        bool existing;
        char tensors[32];
        snprintf(tensors, sizeof tensors, "[\"r%d-%d\"]", r->index, i);
        count(r, tg_catalog_version_create(replica[r->index], r->model_id, &v));
        count(r, tg_catalog_file_put(replica[r->index], r->version_id, &file, NULL));
        count(r, tg_catalog_job_create(replica[r->index], r->model_id, r->version_id - 1, "BF16",
                                       tensors, 1, &job, &existing));
    }
    return NULL;
}

/* A model deleted through one replica while the others write under it: every
 * call answers OK, NOT_FOUND or CONFLICT (the locks are taken in one order, so no
 * deadlock turns into an error), and nothing of the model is left. */
TEST(delete_racing_writes_never_errs)
{
    for (int round = 0; round < 8; round++) {
        tg_model model;
        char name[32];
        snprintf(name, sizeof name, "delete-%d", round);
        CHECK(tg_catalog_model_create(replica[0], "race", name, "", &model) == TG_CAT_OK);
        tg_version v1, draft, out;
        CHECK(tg_catalog_version_create(replica[0], model.id, &v1) == TG_CAT_OK);
        CHECK(tg_catalog_version_publish(replica[0], v1.id, "1111", &out) == TG_CAT_OK);
        CHECK(tg_catalog_version_create(replica[0], model.id, &draft) == TG_CAT_OK);
        CHECK_EQ_U64(draft.id, v1.id + 1);
        racer r[REPLICAS];
        memset(r, 0, sizeof r);
        for (int i = 0; i < REPLICAS; i++) {
            r[i].model_id = model.id;
            r[i].version_id = draft.id;
            r[i].rounds = 10;
        }
        run_racers(r, write_or_delete);
        CHECK_EQ_U64(r[0].ok, 1);
        for (int i = 0; i < REPLICAS; i++)
            CHECK_EQ_U64(r[i].other, 0);
        CHECK(tg_catalog_model_get(replica[1], "race", name, &model) == TG_CAT_NOT_FOUND);
    }
}

/* PostgreSQL stopped under a pool of open connections: calls fail at once (no
 * hang) and say the catalog is unavailable; started again, the pool heals. */
TEST(restart_heals_the_pool)
{
    const char *stop = getenv("TG_PG_STOP");
    const char *start = getenv("TG_PG_START");
    if (stop == NULL || start == NULL) {
        fprintf(stderr, "TG_PG_STOP / TG_PG_START unset: restart test skipped\n");
        return;
    }
    tg_model model;
    CHECK(tg_catalog_model_create(replica[0], "race", "restart", "", &model) == TG_CAT_OK);
    for (int i = 0; i < REPLICAS; i++)
        CHECK(tg_catalog_ping(replica[i]) == TG_CAT_OK);
    CHECK(system(stop) == 0);
    double t0 = now_seconds();
    tg_model got;
    CHECK(tg_catalog_model_get(replica[0], "race", "restart", &got) == TG_CAT_UNAVAILABLE);
    tg_version v;
    CHECK(tg_catalog_version_create(replica[1], model.id, &v) == TG_CAT_UNAVAILABLE);
    CHECK(tg_cat_failed(tg_catalog_ping(replica[2])));
    CHECK(now_seconds() - t0 < 10.0);
    CHECK(system(start) == 0);
    /* every pooled connection was closed by the restart: each call still works */
    for (int i = 0; i < REPLICAS; i++) {
        CHECK(tg_catalog_model_get(replica[i], "race", "restart", &got) == TG_CAT_OK);
        CHECK(tg_catalog_ping(replica[i]) == TG_CAT_OK);
    }
    CHECK(tg_catalog_version_create(replica[1], model.id, &v) == TG_CAT_OK);
    CHECK(tg_catalog_model_delete(replica[3], model.id) == TG_CAT_OK);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(migration_sets_have_the_same_numbers);
    RUN(unreachable_catalog_fails_at_once);
    pg_url = getenv("TENSORGATE_TEST_PG");
    if (pg_url == NULL || pg_url[0] == '\0') {
        fprintf(stderr, "TENSORGATE_TEST_PG unset: the PostgreSQL tests are skipped "
                        "(tests/scale/with-postgres.sh runs them)\n");
        return test_report(argv[0]);
    }
    RUN(replicas_starting_at_once_migrate_once);
    RUN(newer_schema_is_refused);
    char err[512];
    bool opened = true;
    for (int i = 0; i < REPLICAS; i++) {
        if (tg_catalog_open(pg_url, &replica[i], err, sizeof err) != TG_CAT_OK) {
            fprintf(stderr, "open: %s\n", err);
            opened = false;
        }
    }
    CHECK(opened);
    if (opened) {
        RUN(version_numbers_are_one_sequence_across_replicas);
        RUN(publishing_one_draft_at_once_one_wins);
        RUN(alias_moves_and_deletes_across_replicas);
        RUN(job_claims_across_replicas_take_each_job_once);
        RUN(delete_racing_writes_never_errs);
        RUN(restart_heals_the_pool);
    }
    for (int i = 0; i < REPLICAS; i++)
        tg_catalog_close(replica[i]);
    return test_report(argv[0]);
}
