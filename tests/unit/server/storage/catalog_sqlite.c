/* Unit tests for server/storage/catalog_sqlite.c: concurrent readers beside one
 * writer (results consistent, no SQLITE_BUSY surfacing as an error), a write seen
 * by every read that starts after it, visitors that call back into the catalog
 * (no lock is held while they run), and tg_catalog_close with threads alive that
 * have read (every connection closed, none left by threads that ended). */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "catalog.h"
#include "test.h"

static char dir[64];
static char db_path[128];

static tg_catalog *open_fresh(void)
{
    char command[512];
    snprintf(command, sizeof command, "rm -f %s %s-wal %s-shm", db_path, db_path, db_path);
    if (system(command) != 0)
        fprintf(stderr, "could not clear %s\n", db_path);
    tg_catalog *catalog = NULL;
    char err[256] = "";
    CHECK(tg_catalog_open(db_path, &catalog, err, sizeof err) == TG_CAT_OK);
    if (catalog == NULL)
        fprintf(stderr, "open: %s\n", err);
    return catalog;
}

/* How many descriptors of this process are open on the catalog's files (the
 * database, its -wal and its -shm). */
static int catalog_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char link[300], target[300];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(link, target, sizeof target - 1);
        if (len <= 0)
            continue;
        target[len] = '\0';
        n += strncmp(target, db_path, strlen(db_path)) == 0;
    }
    closedir(d);
    return n;
}

/* ---- N readers while one writer writes ---- */

#define READERS 6
#define WRITES 150

typedef struct shared {
    tg_catalog *catalog;
    int64_t version_id;
    atomic_int committed; /* files whose put has returned */
    atomic_bool writer_done;
    atomic_int errors;
    atomic_int inconsistent;
    atomic_long reads;
} shared;

typedef struct listing {
    int count;
    bool prefix; /* the paths seen are f0000, f0001, ... in order, none skipped */
} listing;

static void check_prefix(void *ctx, const tg_file_record *file)
{
    listing *l = ctx;
    char want[16];
    snprintf(want, sizeof want, "f%04d", l->count);
    if (strcmp(file->path, want) != 0)
        l->prefix = false;
    l->count++;
}

static void *reader(void *arg)
{
    shared *s = arg;
    while (!atomic_load(&s->writer_done)) {
        /* every put that returned before this read began is seen by it */
        int before = atomic_load(&s->committed);
        listing l = {0, true};
        if (tg_catalog_file_list(s->catalog, s->version_id, NULL, 0, check_prefix, &l) != TG_CAT_OK)
            atomic_fetch_add(&s->errors, 1);
        else if (l.count < before || !l.prefix)
            atomic_fetch_add(&s->inconsistent, 1);
        tg_model model;
        if (tg_catalog_model_get(s->catalog, "conc", "m", &model) != TG_CAT_OK)
            atomic_fetch_add(&s->errors, 1);
        tg_file_record file;
        if (before > 0) {
            char path[16];
            snprintf(path, sizeof path, "f%04d", before - 1);
            if (tg_catalog_file_get(s->catalog, s->version_id, path, &file) != TG_CAT_OK)
                atomic_fetch_add(&s->inconsistent, 1);
        }
        atomic_fetch_add(&s->reads, 1);
    }
    return NULL;
}

static void *writer(void *arg)
{
    shared *s = arg;
    for (int i = 0; i < WRITES; i++) {
        tg_file_record file;
        memset(&file, 0, sizeof file);
        snprintf(file.path, sizeof file.path, "f%04d", i);
        snprintf(file.kind, sizeof file.kind, "json");
        snprintf(file.sha256, sizeof file.sha256, "%064d", i);
        file.size = (uint64_t)i;
        if (tg_catalog_file_put(s->catalog, s->version_id, &file, NULL) != TG_CAT_OK)
            atomic_fetch_add(&s->errors, 1);
        atomic_store(&s->committed, i + 1);
        /* other writes on the one writer connection between the puts */
        tg_rejection r;
        memset(&r, 0, sizeof r);
        tg_time_now(r.time);
        r.version = -1;
        snprintf(r.reason, sizeof r.reason, "header_too_large");
        if (tg_catalog_rejection_add(s->catalog, &r) != TG_CAT_OK)
            atomic_fetch_add(&s->errors, 1);
    }
    atomic_store(&s->writer_done, true);
    return NULL;
}

TEST(readers_run_beside_the_writer)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    tg_model model;
    tg_version version;
    CHECK(tg_catalog_model_create(catalog, "conc", "m", "", &model) == TG_CAT_OK);
    CHECK(tg_catalog_version_create(catalog, model.id, &version) == TG_CAT_OK);
    static shared s;
    memset(&s, 0, sizeof s);
    s.catalog = catalog;
    s.version_id = version.id;
    pthread_t readers[READERS], w;
    for (int i = 0; i < READERS; i++)
        CHECK(pthread_create(&readers[i], NULL, reader, &s) == 0);
    CHECK(pthread_create(&w, NULL, writer, &s) == 0);
    pthread_join(w, NULL);
    for (int i = 0; i < READERS; i++)
        pthread_join(readers[i], NULL);
    CHECK_EQ_U64(atomic_load(&s.errors), 0);
    CHECK_EQ_U64(atomic_load(&s.inconsistent), 0);
    CHECK(atomic_load(&s.reads) > 0);
    listing l = {0, true};
    CHECK(tg_catalog_file_list(catalog, version.id, NULL, 0, check_prefix, &l) == TG_CAT_OK);
    CHECK_EQ_U64(l.count, WRITES);
    CHECK(l.prefix);
    tg_catalog_close(catalog);
    CHECK_EQ_U64(catalog_fds(), 0);
}

/* ---- threads that end leave no connection behind ---- */

typedef struct round_arg {
    tg_catalog *catalog;
    atomic_int errors;
} round_arg;

static void *read_a_little(void *arg)
{
    round_arg *a = arg;
    for (int i = 0; i < 50; i++) {
        tg_model model;
        if (tg_catalog_model_get(a->catalog, "conc", "m", &model) != TG_CAT_OK)
            atomic_fetch_add(&a->errors, 1);
    }
    return NULL;
}

TEST(ended_threads_leave_no_connections)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    tg_model model;
    CHECK(tg_catalog_model_create(catalog, "conc", "m", "", &model) == TG_CAT_OK);
    static round_arg a;
    memset(&a, 0, sizeof a);
    a.catalog = catalog;
    /* at open: the writer and one reader (a database and a WAL descriptor each)
     * and the shared memory index */
    int at_open = catalog_fds();
    CHECK(at_open > 0);
    /* ten rounds of eight short-lived threads: at most eight readers in all (two
     * descriptors each), reused from round to round, not eighty */
    for (int round = 0; round < 10; round++) {
        pthread_t t[8];
        for (int i = 0; i < 8; i++)
            CHECK(pthread_create(&t[i], NULL, read_a_little, &a) == 0);
        for (int i = 0; i < 8; i++)
            pthread_join(t[i], NULL);
    }
    CHECK(catalog_fds() <= at_open + 2 * 8);
    CHECK_EQ_U64(atomic_load(&a.errors), 0);
    tg_catalog_close(catalog);
    CHECK_EQ_U64(catalog_fds(), 0);
}

/* ---- close while threads that have read are still alive ---- */

typedef struct parked {
    tg_catalog *catalog;
    pthread_barrier_t have_read;
    pthread_barrier_t closed;
    atomic_int errors;
} parked;

static void *read_then_park(void *arg)
{
    parked *p = arg;
    tg_model model;
    if (tg_catalog_model_get(p->catalog, "conc", "m", &model) != TG_CAT_OK)
        atomic_fetch_add(&p->errors, 1);
    pthread_barrier_wait(&p->have_read);
    pthread_barrier_wait(&p->closed); /* alive while the catalog closes */
    return NULL;
}

TEST(close_with_live_reader_threads)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    tg_model model;
    CHECK(tg_catalog_model_create(catalog, "conc", "m", "", &model) == TG_CAT_OK);
    static parked p;
    memset(&p, 0, sizeof p);
    p.catalog = catalog;
    CHECK(pthread_barrier_init(&p.have_read, NULL, 5) == 0);
    CHECK(pthread_barrier_init(&p.closed, NULL, 5) == 0);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&t[i], NULL, read_then_park, &p) == 0);
    pthread_barrier_wait(&p.have_read);
    CHECK(catalog_fds() > 0);
    tg_catalog_close(catalog);
    CHECK_EQ_U64(catalog_fds(), 0);
    pthread_barrier_wait(&p.closed);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ_U64(atomic_load(&p.errors), 0);
    pthread_barrier_destroy(&p.have_read);
    pthread_barrier_destroy(&p.closed);
    /* the file holds everything: a new catalog on it reads the model */
    tg_catalog *again = NULL;
    char err[256] = "";
    CHECK(tg_catalog_open(db_path, &again, err, sizeof err) == TG_CAT_OK);
    if (again != NULL) {
        CHECK(tg_catalog_model_get(again, "conc", "m", &model) == TG_CAT_OK);
        tg_catalog_close(again);
    }
}

/* ---- visitors may call back into the catalog ---- */

typedef struct nested {
    tg_catalog *catalog;
    int visited;
    int inner_ok;
} nested;

static void count_models(void *ctx, const tg_model *model)
{
    (void)model;
    (*(int *)ctx)++;
}

static void visit_and_call_back(void *ctx, const tg_model *model)
{
    nested *n = ctx;
    n->visited++;
    tg_model again;
    /* a read: another connection, sees the row */
    if (tg_catalog_model_get(n->catalog, model->org, model->name, &again) == TG_CAT_OK &&
        again.id == model->id)
        n->inner_ok++;
    /* a nested listing, of the same statement as the outer one */
    int inner_count = 0;
    if (tg_catalog_model_list(n->catalog, "visit", NULL, NULL, NULL, 100, count_models,
                              &inner_count) == TG_CAT_OK &&
        inner_count == 3)
        n->inner_ok++;
    /* a write, then a read that sees it (the outer listing keeps its snapshot) */
    char name[TG_NAME_MAX + 1];
    snprintf(name, sizeof name, "added-%.50s", model->name);
    tg_model added;
    if (tg_catalog_model_create(n->catalog, "other", name, "", &added) == TG_CAT_OK &&
        tg_catalog_model_get(n->catalog, "other", name, &again) == TG_CAT_OK)
        n->inner_ok++;
}

TEST(visitors_may_call_the_catalog)
{
    tg_catalog *catalog = open_fresh();
    if (catalog == NULL)
        return;
    tg_model model;
    const char *names[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++)
        CHECK(tg_catalog_model_create(catalog, "visit", names[i], "", &model) == TG_CAT_OK);
    /* Before the read pool this deadlocked: the visitor ran under the catalog's one
     * non-recursive mutex (main's alarm turns a hang into a failure). */
    nested n = {catalog, 0, 0};
    CHECK(tg_catalog_model_list(catalog, "visit", NULL, NULL, NULL, 100, visit_and_call_back, &n) ==
          TG_CAT_OK);
    CHECK_EQ_U64(n.visited, 3);
    CHECK_EQ_U64(n.inner_ok, 9);
    int others = 0;
    CHECK(tg_catalog_model_list(catalog, "other", NULL, NULL, NULL, 100, count_models, &others) ==
          TG_CAT_OK);
    CHECK_EQ_U64(others, 3);
    tg_catalog_close(catalog);
}

/* ---- what the SQLite backend refuses ---- */

TEST(memory_catalog_is_refused)
{
    tg_catalog *catalog = NULL;
    char err[256] = "";
    CHECK(tg_catalog_open(":memory:", &catalog, err, sizeof err) == TG_CAT_ERROR);
    CHECK(catalog == NULL);
    CHECK(strstr(err, "needs a file path") != NULL);
    CHECK(tg_catalog_open("sqlite:", &catalog, err, sizeof err) == TG_CAT_ERROR);
    CHECK(catalog == NULL);
}

int main(int argc, char **argv)
{
    (void)argc;
    alarm(120); /* a deadlock fails the program instead of hanging the suite */
    snprintf(dir, sizeof dir, "/tmp/tg-catalog-sqlite-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(db_path, sizeof db_path, "%s/catalog.db", dir);
    RUN(readers_run_beside_the_writer);
    RUN(ended_threads_leave_no_connections);
    RUN(close_with_live_reader_threads);
    RUN(visitors_may_call_the_catalog);
    RUN(memory_catalog_is_refused);
    char command[160];
    snprintf(command, sizeof command, "rm -rf %s", dir);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return test_report(argv[0]);
}
