/* Unit tests for server/jobs/convert_job.c, on a temporary catalog + blob store (no
 * HTTP server: the job system works on a tg_jobs_context). The source is a published
 * version of two shards, their index and a config, stored through the ingest
 * pipeline.
 *  - the survey: shards, shards and tensors converted, the bytes to write, the
 *    first glob matching nothing;
 *  - a job end to end: queued, run by the worker, committed as a new version whose
 *    shards are byte for byte what `tensorgate convert` writes for the same file,
 *    whose index has the new total_size, whose other files are the source's blobs,
 *    with the version digest over its files; nothing left in tmp/;
 *  - a source blob that is missing: the survey fails and a job fails with
 *    source_unreadable;
 *  - a failing write: with TENSORGATE_TEST_ENOSPC_AT=n (one fresh process per n) the
 *    job fails with reason insufficient_storage, leaves no temp file, no job file
 *    and no new blob, for every write of the job; past its last write it is done. */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "blobstore.h"
#include "catalog.h"
#include "commands.h"
#include "convert_job.h"
#include "index_check.h"
#include "log.h"
#include "manifest.h"
#include "pipeline.h"
#include "sha256.h"
#include "st_write.h"
#include "store.h"
#include "test.h"

#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"
#define INDEX "model.safetensors.index.json"
#define CONFIG "config.json"

static char data_root[64];
static tg_store store;           /* the layout, to look at (tmp_dir) */
static tg_blobstore *blob_store; /* the same directory, as the server uses it */
static tg_catalog *catalog;
static tg_jobs_context jobs;
static int published_calls; /* tg_jobs_context.version_published */

static void count_published(void *arg)
{
    CHECK(arg == &published_calls);
    published_calls++;
}

/* the source: model org/src, version 1 */
static tg_model source_model;
static tg_version source_version;
static uint8_t *shard_bytes[2];
static size_t shard_len[2];

static bool data_open(const char *root)
{
    char err[256] = "", db[128];
    /* opened again after a test: the previous handles go first */
    if (catalog != NULL)
        tg_catalog_close(catalog);
    catalog = NULL;
    tg_blobstore_close(blob_store);
    blob_store = NULL;
    if (tg_store_open(&store, root, err, sizeof err) != 0 ||
        tg_blobstore_open(root, &blob_store, err, sizeof err) != 0) {
        fprintf(stderr, "store: %s\n", err);
        return false;
    }
    snprintf(db, sizeof db, "%s/catalog.db", root);
    if (tg_catalog_open(db, &catalog, err, sizeof err) != TG_CAT_OK) {
        fprintf(stderr, "catalog: %s\n", err);
        return false;
    }
    jobs = (tg_jobs_context){.catalog = catalog,
                             .store = blob_store,
                             .max_header = 1 << 20,
                             .version_published = count_published,
                             .version_published_arg = &published_calls};
    return true;
}

static int dir_entries(const char *path)
{
    DIR *dir = opendir(path);
    if (dir == NULL)
        return -1;
    int n = 0;
    const struct dirent *e;
    while ((e = readdir(dir)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(dir);
    return n;
}

static int count_blob(void *ctx, const char *hex)
{
    (void)hex;
    (*(int *)ctx)++;
    return 0;
}

static int blob_count(void)
{
    int n = 0;
    tg_store_each_blob(&store, count_blob, &n);
    return n;
}

/* ---- the source version, stored through the pipeline ---- */

typedef struct put_row {
    int64_t version_id;
    tg_cat_status status;
} put_row;

static void put_file_row(void *ctx, const tg_file_record *file, const char *stats)
{
    put_row *row = ctx;
    row->status = tg_catalog_file_put(catalog, row->version_id, file, stats);
}

static bool store_file(int64_t version_id, const char *path, const void *data, size_t len)
{
    tg_ingest ingest;
    tg_ingest_config config = {
        .kind = tg_is_safetensors_path(path) ? ST_GATE_SAFETENSORS : ST_GATE_SIDECAR,
        .declared = len,
        .max_bytes = UINT64_MAX,
        .max_header = 1 << 20,
        .store = blob_store,
        .digest_name = "test",
        .check_length = true,
        .drain_limit = UINT64_MAX,
    };
    put_row row = {version_id, TG_CAT_ERROR};
    tg_file_record file;
    bool ok = tg_ingest_begin(&ingest, &config) == 0 &&
              tg_ingest_feed(&ingest, data, len) == TG_INGEST_OPEN &&
              tg_ingest_finish(&ingest) == TG_INGEST_OPEN &&
              tg_ingest_commit(&ingest, path, &file, put_file_row, &row) == 0 &&
              row.status == TG_CAT_OK;
    tg_ingest_abort(&ingest);
    CHECK(ok);
    return ok;
}

static uint8_t *make_shard(const st_write_tensor *tensors, size_t count, size_t *len)
{
    static uint8_t values[4096];
    for (size_t i = 0; i < sizeof values; i += 4) {
        float f = (float)i * 0.013f - 7.5f;
        memcpy(values + i, &f, 4);
    }
    const void *data[4] = {values, values, values, values};
    uint8_t *out = NULL;
    st_error err;
    static const st_metadata_entry metadata[] = {{"format", "pt"}};
    if (st_write_to_buffer(tensors, data, count, metadata, 1, true, &out, len, &err) != ST_OK)
        return NULL;
    return out;
}

static const uint64_t s16x16[] = {16, 16}, s16[] = {16}, s1[] = {1}, s8x16[] = {8, 16};

static bool make_source(void)
{
    st_write_tensor one[] = {
        {"a.weight", ST_F32, 2, s16x16}, {"a.bias", ST_F32, 1, s16}, {"a.steps", ST_I64, 1, s1}};
    st_write_tensor two[] = {{"b.weight", ST_F32, 2, s8x16}};
    shard_bytes[0] = make_shard(one, 3, &shard_len[0]);
    shard_bytes[1] = make_shard(two, 1, &shard_len[1]);
    if (shard_bytes[0] == NULL || shard_bytes[1] == NULL)
        return false;
    /* the tensor bytes: 1024 + 64 + 8 and 512 */
    static const char index[] =
        "{\n  \"metadata\": {\"total_size\": 1608},\n  \"weight_map\": {\n"
        "    \"a.weight\": \"" SHARD1 "\", \"a.bias\": \"" SHARD1 "\",\n"
        "    \"a.steps\": \"" SHARD1 "\", \"b.weight\": \"" SHARD2 "\"\n  }\n}\n";
    static const char config[] = "{\"model_type\": \"unit\"}\n";
    if (tg_catalog_model_create(catalog, "org", "src", "", &source_model) != TG_CAT_OK ||
        tg_catalog_version_create(catalog, source_model.id, &source_version) != TG_CAT_OK)
        return false;
    if (!store_file(source_version.id, SHARD1, shard_bytes[0], shard_len[0]) ||
        !store_file(source_version.id, SHARD2, shard_bytes[1], shard_len[1]) ||
        !store_file(source_version.id, INDEX, index, strlen(index)) ||
        !store_file(source_version.id, CONFIG, config, strlen(config)))
        return false;
    tg_file_records files = {0};
    char digest[65];
    bool ok = tg_catalog_file_list(catalog, source_version.id, NULL, 0, tg_file_records_collect,
                                   &files) == TG_CAT_OK &&
              files.count == 4 && tg_manifest_digest(files.items, files.count, digest) == 0 &&
              tg_catalog_version_publish(catalog, source_version.id, digest, &source_version) ==
                  TG_CAT_OK;
    free(files.items);
    return ok;
}

/* ---- running a job ---- */

static void spec_of(tg_convert_spec *spec, st_dtype to, const char *glob)
{
    memset(spec, 0, sizeof *spec);
    spec->to = to;
    if (glob != NULL) {
        spec->globs[0] = glob;
        spec->glob_count = 1;
    }
}

/* Queues a job, runs the worker until the job is done or failed, stops it. */
static bool run_job(int64_t model_id, int64_t version_id, const char *dtype, const char *tensors,
                    tg_job *job)
{
    bool existing = false;
    if (tg_catalog_job_create(catalog, model_id, version_id, dtype, tensors, 0, job, &existing) !=
        TG_CAT_OK)
        return false;
    int64_t id = job->id;
    char err[256] = "";
    if (tg_jobs_start(&jobs, err, sizeof err) != 0) {
        fprintf(stderr, "start: %s\n", err);
        return false;
    }
    bool ended = false;
    for (int i = 0; i < 3000 && !ended; i++) {
        ended = tg_catalog_job_get(catalog, id, job) == TG_CAT_OK &&
                (job->state == TG_JOB_DONE || job->state == TG_JOB_FAILED);
        if (!ended)
            usleep(10 * 1000);
    }
    tg_jobs_stop();
    return ended;
}

static const tg_file_record *find(const tg_file_records *files, const char *path)
{
    for (size_t i = 0; i < files->count; i++)
        if (strcmp(files->items[i].path, path) == 0)
            return &files->items[i];
    return NULL;
}

/* The SHA-256 of what `tensorgate convert` writes for shard k. */
static bool cli_converted_sha(int k, const char *dtype, const char *globs, char hex[65])
{
    char in[128], out[128];
    snprintf(in, sizeof in, "%s/cli-in.safetensors", data_root);
    snprintf(out, sizeof out, "%s/cli-out.safetensors", data_root);
    FILE *f = fopen(in, "wb");
    if (f == NULL || fwrite(shard_bytes[k], 1, shard_len[k], f) != shard_len[k]) {
        if (f != NULL)
            fclose(f);
        return false;
    }
    fclose(f);
    char dtype_arg[32], tensors_arg[64];
    snprintf(dtype_arg, sizeof dtype_arg, "--dtype=%s", dtype);
    snprintf(tensors_arg, sizeof tensors_arg, "--tensors=%s", globs);
    char *argv[] = {"convert", in, out, dtype_arg, tensors_arg, NULL};
    if (tg_cmd_convert(5, argv) != 0)
        return false;
    f = fopen(out, "rb");
    if (f == NULL)
        return false;
    uint8_t buf[65536];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    unlink(in);
    unlink(out);
    return n > 0 && n < sizeof buf && tg_sha256_hex(buf, n, hex, "test") == 0;
}

TEST(survey_counts_what_would_change)
{
    tg_convert_spec spec;
    tg_convert_survey survey;
    char detail[256] = "";
    spec_of(&spec, ST_BF16, "*.weight");
    CHECK_EQ_U64(
        tg_convert_survey_version(&jobs, source_version.id, &spec, &survey, detail, sizeof detail),
        0);
    CHECK_EQ_U64(survey.shards, 2);
    CHECK_EQ_U64(survey.shards_converted, 2);
    CHECK_EQ_U64(survey.tensors_converted, 2);
    CHECK(survey.unmatched_glob == -1);
    CHECK(survey.bytes_total > 0 && survey.bytes_total < shard_len[0] + shard_len[1]);
    /* every floating tensor */
    spec_of(&spec, ST_F16, NULL);
    CHECK_EQ_U64(
        tg_convert_survey_version(&jobs, source_version.id, &spec, &survey, detail, sizeof detail),
        0);
    CHECK_EQ_U64(survey.tensors_converted, 3);
    /* a glob that matches nothing */
    spec_of(&spec, ST_F16, "*.weight");
    spec.globs[1] = "nothing.*";
    spec.glob_count = 2;
    CHECK_EQ_U64(
        tg_convert_survey_version(&jobs, source_version.id, &spec, &survey, detail, sizeof detail),
        0);
    CHECK(survey.unmatched_glob == 1);
    /* already the target */
    spec_of(&spec, ST_F32, NULL);
    CHECK_EQ_U64(
        tg_convert_survey_version(&jobs, source_version.id, &spec, &survey, detail, sizeof detail),
        0);
    CHECK_EQ_U64(survey.tensors_converted, 0);
    CHECK_EQ_U64(survey.bytes_total, 0);
}

TEST(job_runs_to_a_new_version)
{
    tg_job job;
    int calls = published_calls;
    CHECK(run_job(source_model.id, source_version.id, "BF16", "[\"*.weight\"]", &job));
    CHECK_EQ_U64(job.state, TG_JOB_DONE);
    CHECK_EQ_U64(job.result_version, 2);
    CHECK_EQ_U64(published_calls - calls, 1); /* the server hears of the new "latest" */
    CHECK(job.bytes_total > 0 && job.bytes_done == job.bytes_total);
    CHECK_EQ_U64(dir_entries(store.tmp_dir), 0);
    tg_version made;
    CHECK(tg_catalog_version_get(catalog, source_model.id, 2, &made) == TG_CAT_OK);
    CHECK(made.published);
    CHECK_EQ_U64(made.derived_from, 1);
    CHECK_STR(made.derived_dtype, "BF16");
    tg_file_records before = {0}, after = {0};
    CHECK(tg_catalog_file_list(catalog, source_version.id, NULL, 0, tg_file_records_collect,
                               &before) == TG_CAT_OK);
    CHECK(tg_catalog_file_list(catalog, made.id, NULL, 0, tg_file_records_collect, &after) ==
          TG_CAT_OK);
    CHECK_EQ_U64(after.count, 4);
    /* the shards: what the CLI writes for the same files */
    const char *shards[2] = {SHARD1, SHARD2};
    for (int k = 0; k < 2; k++) {
        const tg_file_record *f = find(&after, shards[k]);
        char want[65] = "";
        CHECK(cli_converted_sha(k, "BF16", "*.weight", want));
        CHECK(f != NULL && strcmp(f->sha256, want) == 0);
        CHECK(f != NULL && strcmp(f->kind, "safetensors") == 0);
        CHECK(f != NULL && strcmp(f->sha256, find(&before, shards[k])->sha256) != 0);
    }
    /* the config is carried over, blob and all */
    const tg_file_record *config_before = find(&before, CONFIG),
                         *config_after = find(&after, CONFIG);
    CHECK(config_before != NULL && config_after != NULL &&
          strcmp(config_before->sha256, config_after->sha256) == 0);
    /* the index: the new total_size (512 + 64 + 8 and 256), the same weight map */
    const tg_file_record *index = find(&after, INDEX);
    CHECK(index != NULL);
    if (index != NULL) {
        tg_blob_check check;
        tg_blob_reader *blob =
            tg_blob_open(blob_store, index->sha256, TG_BLOB_SIZE_UNCHECKED, &check);
        char text[2048] = "";
        CHECK(blob != NULL && index->size < sizeof text &&
              tg_blob_read_at(blob, text, (size_t)index->size, 0) == 0);
        tg_blob_close(blob);
        json_t *root = json_loads(text, 0, NULL);
        CHECK_EQ_U64(
            json_integer_value(json_object_get(json_object_get(root, "metadata"), "total_size")),
            840);
        CHECK_EQ_U64(json_object_size(json_object_get(root, "weight_map")), 4);
        json_decref(root);
        CHECK_STR(index->kind, "json");
    }
    /* the version digest is the manifest's over the new files */
    char digest[65];
    CHECK(tg_manifest_digest(after.items, after.count, digest) == 0);
    CHECK_STR(made.digest, digest);
    free(before.items);
    free(after.items);
}

TEST(missing_source_blob_fails_the_job)
{
    tg_model model;
    tg_version version;
    CHECK(tg_catalog_model_create(catalog, "org", "lost", "", &model) == TG_CAT_OK);
    CHECK(tg_catalog_version_create(catalog, model.id, &version) == TG_CAT_OK);
    tg_file_record file;
    memset(&file, 0, sizeof file);
    snprintf(file.path, sizeof file.path, "model.safetensors");
    snprintf(file.kind, sizeof file.kind, "safetensors");
    CHECK(tg_sha256_hex("not stored", 10, file.sha256, "test") == 0);
    file.size = 10;
    CHECK(tg_catalog_file_put(catalog, version.id, &file, "[]") == TG_CAT_OK);
    CHECK(tg_catalog_version_publish(catalog, version.id, file.sha256, &version) == TG_CAT_OK);
    tg_convert_spec spec;
    spec_of(&spec, ST_F16, NULL);
    tg_convert_survey survey;
    char detail[256] = "";
    CHECK(tg_convert_survey_version(&jobs, version.id, &spec, &survey, detail, sizeof detail) != 0);
    CHECK(strstr(detail, "model.safetensors") != NULL);
    tg_job job;
    int calls = published_calls;
    CHECK(run_job(model.id, version.id, "F16", "[]", &job));
    CHECK_EQ_U64(job.state, TG_JOB_FAILED);
    CHECK_STR(job.error_reason, "source_unreadable");
    CHECK_EQ_U64(published_calls - calls, 0); /* nothing derived, nothing said */
    CHECK_EQ_U64(dir_entries(store.tmp_dir), 0);
}

/* ---- a failing write at each write of a job, one fresh process per write ---- */

/* In the child (TENSORGATE_TEST_ENOSPC_AT set): a job converting the source to F16.
 * Exit status: 0 done, 10 failed with insufficient_storage and nothing left behind,
 * anything else a failure of the test. */
static int enospc_child(const char *root)
{
    snprintf(data_root, sizeof data_root, "%s", root);
    if (!data_open(root))
        return 2;
    int blobs = blob_count();
    tg_model model;
    tg_version version;
    if (tg_catalog_model_get(catalog, "org", "src", &model) != TG_CAT_OK ||
        tg_catalog_version_get(catalog, model.id, 1, &version) != TG_CAT_OK)
        return 3;
    tg_job job;
    if (!run_job(model.id, version.id, "F16", "[]", &job))
        return 4;
    int status = 5;
    if (job.state == TG_JOB_DONE) {
        status = 0;
    } else {
        tg_file_records made = {0};
        bool no_files = tg_catalog_job_file_list(catalog, job.id, tg_file_records_collect, &made) ==
                            TG_CAT_OK &&
                        made.count == 0;
        free(made.items);
        if (strcmp(job.error_reason, "insufficient_storage") != 0)
            fprintf(stderr, "job failed: %s: %s\n", job.error_reason, job.error_detail);
        else if (no_files && dir_entries(store.tmp_dir) == 0 && blob_count() == blobs)
            status = 10;
    }
    tg_catalog_close(catalog);
    return status;
}

TEST(failing_write_fails_the_job_and_leaves_nothing)
{
    tg_catalog_close(catalog); /* the children open the data directory themselves */
    catalog = NULL;
    int no_space = 0;
    bool done = false;
    for (int n = 1; n <= 30 && !done; n++) {
        pid_t pid = fork();
        if (pid == 0) {
            char at[16];
            snprintf(at, sizeof at, "%d", n);
            setenv("TENSORGATE_TEST_ENOSPC_AT", at, 1);
            execl("/proc/self/exe", "convert_job", "--enospc-child", data_root, (char *)NULL);
            _exit(127);
        }
        int wstatus = 0;
        CHECK(pid > 0 && waitpid(pid, &wstatus, 0) == pid && WIFEXITED(wstatus));
        int code = WEXITSTATUS(wstatus);
        CHECK(code == 0 || code == 10);
        if (code != 0 && code != 10)
            fprintf(stderr, "write %d: child exited %d\n", n, code);
        no_space += code == 10;
        done = code == 0;
    }
    CHECK(done);
    /* each shard is one write and its fsync, and so is the index */
    CHECK_EQ_U64(no_space, 6);
    CHECK(data_open(data_root));
}

/* The worker renews its job's lease while it works: with a 2 s lease and a job
 * slowed to ~3 s, a second catalog handle (another replica) never gets to claim
 * it, and the job is done in one attempt. */
TEST(worker_renews_its_lease)
{
    char db[128], err[256] = "";
    snprintf(db, sizeof db, "%s/catalog.db", data_root);
    tg_catalog *other = NULL;
    CHECK(tg_catalog_open(db, &other, err, sizeof err) == TG_CAT_OK);
    if (other == NULL)
        return;
    tg_catalog_set_job_lease(other, 2, 3);
    bool existing = false;
    tg_job job, stolen;
    CHECK(tg_catalog_job_create(catalog, source_model.id, source_version.id, "F16", "[]", 0, &job,
                                &existing) == TG_CAT_OK);
    setenv("TENSORGATE_TEST_CONVERT_DELAY_MS", "1500", 1);
    tg_jobs_context leased = jobs;
    leased.lease_seconds = 2;
    CHECK(tg_jobs_start(&leased, err, sizeof err) == 0);
    unsetenv("TENSORGATE_TEST_CONVERT_DELAY_MS");
    bool ended = false, taken = false, running = false;
    for (int i = 0; i < 500 && !running; i++) {
        running =
            tg_catalog_job_get(catalog, job.id, &job) == TG_CAT_OK && job.state != TG_JOB_QUEUED;
        if (!running)
            usleep(5 * 1000);
    }
    CHECK(running);
    for (int i = 0; i < 1500 && !ended; i++) {
        taken = taken || tg_catalog_job_claim(other, &stolen) == TG_CAT_OK;
        ended = tg_catalog_job_get(catalog, job.id, &job) == TG_CAT_OK &&
                (job.state == TG_JOB_DONE || job.state == TG_JOB_FAILED);
        if (!ended)
            usleep(20 * 1000);
    }
    tg_jobs_stop();
    CHECK(ended);
    CHECK(!taken);
    CHECK_EQ_U64(job.state, TG_JOB_DONE);
    CHECK_EQ_U64(job.attempts, 1);
    CHECK(job.started_at[0] != '\0' && job.finished_at[0] != '\0');
    tg_catalog_close(other);
}

int main(int argc, char **argv)
{
    tg_log_set_level(getenv("TG_DEBUG_LOG") ? TG_LOG_DEBUG
                                            : TG_LOG_ERROR); /* the worker's lines about each job */
    if (argc == 3 && strcmp(argv[1], "--enospc-child") == 0)
        return enospc_child(argv[2]);
    snprintf(data_root, sizeof data_root, "/tmp/tg-convert-job-XXXXXX");
    if (mkdtemp(data_root) == NULL || !data_open(data_root) || !make_source()) {
        CHECK(false);
        return test_report(argv[0]);
    }
    RUN(survey_counts_what_would_change);
    RUN(job_runs_to_a_new_version);
    RUN(missing_source_blob_fails_the_job);
    RUN(failing_write_fails_the_job_and_leaves_nothing);
    RUN(worker_renews_its_lease);
    if (catalog != NULL)
        tg_catalog_close(catalog);
    tg_blobstore_close(blob_store);
    free(shard_bytes[0]);
    free(shard_bytes[1]);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", data_root);
    CHECK(system(command) == 0);
    return test_report(argv[0]);
}
