/* The conversion job runner (see convert_job.h).
 *
 * A shard is converted by lib's streaming converter (st_convert_stream, the one
 * `tensorgate convert` uses), reading the source blob and writing through the
 * ingest pipeline (tg_ingest: gate, SHA-256 and temp file in one pass, then the
 * commit under the shared blobs lock). The pipeline runs on a writer thread, so
 * converting one chunk overlaps writing and hashing the last. */
#include "convert_job.h"
#include "import_job.h"

#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "index_check.h"
#include "log.h"
#include "manifest.h"
#include "parsed_header_cache.h"
#include "pipeline.h"
#include "reclaim.h"
#include "st_convert.h"
#include "st_convert_stream.h"
#include "st_gate.h"
#include "version_sign.h"

/* The converter's chunk: each write hands this much to the pipeline at once. */
#define OUT_CHUNK_BYTES ((size_t)8 << 20)
/* With the test delay set: small steps, so a test can stop the server mid-shard. */
#define TEST_OUT_CHUNK_BYTES ((size_t)64 << 10)
/* Progress reaches the catalog at most this often (each write is an fsync). */
#define PROGRESS_INTERVAL_NS (200 * 1000 * 1000LL)
/* An index file is a sidecar: small by the gate's bound. */
#define INDEX_MAX_BYTES (64ull << 20)

bool tg_convert_target_supported(st_dtype dtype)
{
    return st_convert_supported(dtype, dtype);
}

/* Why a job failed: a stable reason and one sentence. */
typedef struct job_failure {
    char reason[48];
    char detail[TG_JOB_DETAIL_MAX];
    /* a blob committed for a job whose row was gone by the time it was recorded (its
     * model deleted): nothing references it, the worker reclaims it */
    char orphan[65];
} job_failure;

static int __attribute__((format(printf, 3, 4)))
fail(job_failure *failure, const char *reason, const char *fmt, ...)
{
    snprintf(failure->reason, sizeof failure->reason, "%s", reason);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(failure->detail, sizeof failure->detail, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- the version's files and what happens to each ---- */

/* Per file of the source version. */
typedef struct file_plan {
    bool is_shard; /* a .safetensors file: header loaded */
    st_file header;
    st_dtype *out_dtype; /* per tensor (file order): the dtype it is written as */
    size_t converted;    /* tensors whose dtype changes */
    uint64_t out_size;   /* of the converted file (when converted > 0) */
    uint64_t out_data;   /* its data section */
} file_plan;

typedef struct version_plan {
    tg_file_records files;
    file_plan *plans; /* files.count entries */
    size_t *glob_hits;
    tg_convert_survey survey;
} version_plan;

static void version_plan_free(version_plan *vp)
{
    for (size_t i = 0; vp->plans && i < vp->files.count; i++) {
        st_file_free(&vp->plans[i].header);
        free(vp->plans[i].out_dtype);
    }
    free(vp->plans);
    free(vp->files.items);
    free(vp->glob_hits);
    memset(vp, 0, sizeof *vp);
}

/* The spec's globs as st_convert_choose's selector: no globs means every tensor;
 * counts the matches of each glob. */
typedef struct glob_selector {
    const tg_convert_spec *spec;
    size_t *hits;
} glob_selector;

static bool glob_match(void *ctx, const char *name)
{
    glob_selector *selector = ctx;
    const tg_convert_spec *spec = selector->spec;
    if (spec->glob_count == 0)
        return true;
    bool any = false;
    for (size_t g = 0; g < spec->glob_count; g++) {
        if (fnmatch(spec->globs[g], name, 0) == 0) {
            selector->hits[g]++;
            any = true;
        }
    }
    return any;
}

/* Lists version_id's files, loads every shard header and decides each tensor's
 * output dtype. Returns 0, or -1 with failure set. */
static int plan_version(const tg_jobs_context *ctx, int64_t version_id, const tg_convert_spec *spec,
                        version_plan *vp, job_failure *failure)
{
    memset(vp, 0, sizeof *vp);
    vp->survey.unmatched_glob = -1;
    if (tg_catalog_file_list(ctx->catalog, version_id, NULL, 0, tg_file_records_collect,
                             &vp->files) != TG_CAT_OK ||
        vp->files.failed)
        return fail(failure, "internal", "the catalog failed listing the source files");
    vp->plans = calloc(vp->files.count ? vp->files.count : 1, sizeof *vp->plans);
    vp->glob_hits = calloc(TG_CONVERT_GLOBS_MAX, sizeof *vp->glob_hits);
    if (vp->plans == NULL || vp->glob_hits == NULL)
        return fail(failure, "internal", "out of memory");
    glob_selector selector = {spec, vp->glob_hits};
    for (size_t i = 0; i < vp->files.count; i++) {
        const tg_file_record *f = &vp->files.items[i];
        file_plan *fp = &vp->plans[i];
        if (strcmp(f->kind, "safetensors") != 0)
            continue;
        st_error err;
        if (tg_header_read_parse(ctx->store, f->sha256, f->size, ctx->max_header, &fp->header,
                                 &err) != 0)
            return fail(failure, "source_unreadable",
                        "the header of %s (blob %s) cannot be read: %s", f->path, f->sha256,
                        err.detail);
        fp->is_shard = true;
        vp->survey.shards++;
        size_t count = fp->header.tensor_count;
        fp->out_dtype = calloc(count ? count : 1, sizeof *fp->out_dtype);
        if (fp->out_dtype == NULL)
            return fail(failure, "internal", "out of memory");
        fp->converted =
            st_convert_choose(&fp->header, spec->to, glob_match, &selector, fp->out_dtype);
        if (fp->converted == 0)
            continue;
        st_write_plan plan;
        if (st_convert_plan(&fp->header, fp->out_dtype, &plan, &err) != ST_OK) {
            st_write_plan_free(&plan);
            return fail(failure, "internal", "the converted %s cannot be laid out: %s", f->path,
                        err.detail);
        }
        fp->out_data = plan.data_size;
        fp->out_size = (uint64_t)plan.header_len + plan.data_size;
        st_write_plan_free(&plan);
        vp->survey.shards_converted++;
        vp->survey.tensors_converted += fp->converted;
        vp->survey.bytes_total += fp->out_size;
    }
    for (size_t g = 0; g < spec->glob_count; g++) {
        if (vp->glob_hits[g] == 0) {
            vp->survey.unmatched_glob = (long)g;
            break;
        }
    }
    return 0;
}

int tg_convert_survey_version(const tg_jobs_context *context, int64_t version_id,
                              const tg_convert_spec *spec, tg_convert_survey *out, char *detail,
                              size_t detail_len)
{
    version_plan vp;
    job_failure failure = {"", "", ""};
    int rc = plan_version(context, version_id, spec, &vp, &failure);
    if (rc == 0)
        *out = vp.survey;
    else
        snprintf(detail, detail_len, "%s", failure.detail);
    version_plan_free(&vp);
    return rc;
}

/* ---- what went wrong in the pipeline, as a job failure ---- */

/* After the pipeline stopped (state not OPEN) or its commit failed. */
static int ingest_failure(const tg_ingest *ingest, const char *path, job_failure *failure)
{
    if (ingest->state == TG_INGEST_NO_SPACE)
        return fail(failure, "insufficient_storage", "the disk is full writing %s", path);
    if (ingest->state == TG_INGEST_REFUSED || ingest->state == TG_INGEST_LENGTH_MISMATCH) {
        st_verdict verdict;
        st_gate_verdict(ingest->gate, &verdict);
        return fail(failure, "internal", "the written %s does not pass the gate: %s: %s", path,
                    st_reason_name(verdict.error.reason), verdict.error.detail);
    }
    switch (ingest->error) {
    case TG_INGEST_ERROR_WRITE:
        return fail(failure, "internal", "writing %s failed: %s", path, strerror(ingest->os_errno));
    case TG_INGEST_ERROR_DIGEST:
        return fail(failure, "internal", "the SHA-256 of the written %s failed", path);
    case TG_INGEST_ERROR_LOCK:
        return fail(failure, "internal", "the blob store's lock cannot be taken: %s",
                    strerror(ingest->os_errno));
    case TG_INGEST_ERROR_COMMIT:
        return fail(failure, "internal", "storing %s failed: %s", path, strerror(ingest->os_errno));
    case TG_INGEST_ERROR_MEMORY:
        return fail(failure, "internal", "out of memory writing %s", path);
    case TG_INGEST_ERROR_TEMP:
        return fail(failure, "internal", "cannot start writing %s (temp file): %s", path,
                    strerror(ingest->os_errno));
    case TG_INGEST_ERROR_NONE:
        break;
    }
    return fail(failure, "internal", "writing %s failed", path);
}

/* The commit's record step: the job_files row, under the shared blobs lock. */
typedef struct job_row {
    const tg_jobs_context *ctx;
    int64_t job_id;
    bool with_stats; /* a shard's stats; an index records "[]" */
    tg_cat_status status;
} job_row;

static void record_job_file(void *arg, const tg_file_record *file, const char *stats)
{
    job_row *row = arg;
    row->status = tg_catalog_job_file_put(row->ctx->catalog, row->job_id, file,
                                          row->with_stats ? stats : "[]");
}

/* Commits a finished ingest and records it in job_files. made gets the record. */
static int commit_job_file(const tg_jobs_context *ctx, int64_t job_id, tg_ingest *ingest,
                           const char *path, bool with_stats, tg_file_record *made,
                           job_failure *failure)
{
    if (tg_ingest_finish(ingest) != TG_INGEST_OPEN)
        return ingest_failure(ingest, path, failure);
    job_row row = {ctx, job_id, with_stats, TG_CAT_ERROR};
    if (tg_ingest_commit(ingest, path, made, record_job_file, &row) != 0)
        return ingest_failure(ingest, path, failure);
    if (row.status == TG_CAT_NOT_FOUND) {
        snprintf(failure->orphan, sizeof failure->orphan, "%s", made->sha256);
        return fail(failure, "cancelled", "the job was cancelled or its model deleted");
    }
    if (row.status != TG_CAT_OK)
        return fail(failure, "internal", "the catalog failed recording %s", path);
    return 0;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Progress of the running job. */
typedef struct progress {
    int64_t job_id;
    const tg_job_worker *worker;
    uint64_t done, total;
    int64_t last_saved_ns;
} progress;

static void progress_add(const tg_jobs_context *ctx, progress *p, uint64_t bytes, bool force)
{
    p->done += bytes;
    int64_t now = now_ns();
    if (force || now - p->last_saved_ns >= PROGRESS_INTERVAL_NS) {
        tg_catalog_job_progress(ctx->catalog, p->job_id, p->done, p->total);
        p->last_saved_ns = now;
    }
}

/* ---- one shard: the converter writes through the pipeline on a writer thread ----
 *
 * The converter's write callback (shard_write, on the job's thread) waits for the
 * writer thread to finish the last chunk, copies the new one into the writer's
 * buffer and hands it over; the writer feeds it to the pipeline (gate, SHA-256,
 * temp file) while the converter reads and converts the next chunk into its own. */

typedef struct shard_writer {
    const tg_jobs_context *ctx;
    tg_ingest ingest; /* touched by the writer thread while it has a buffer */
    const char *path;
    progress *p;
    job_failure *failure;
    uint8_t *buffer; /* the chunk the writer thread has or had */
    size_t chunk;    /* its size */
    /* shared with the writer thread, under lock: */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    pthread_t thread;
    bool thread_started;
    bool initialized;       /* lock and condition made */
    const uint8_t *pending; /* a buffer for the writer, NULL when it is idle */
    size_t pending_len;
    bool quit;
    /* the source blob */
    tg_blob_reader *in; /* NULL before it is opened */
    int read_errno;
} shard_writer;

static void *shard_writer_main(void *arg)
{
    shard_writer *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (w->pending == NULL && !w->quit)
            pthread_cond_wait(&w->changed, &w->lock);
        if (w->pending == NULL)
            break;
        const uint8_t *data = w->pending;
        size_t len = w->pending_len;
        pthread_mutex_unlock(&w->lock);
        (void)tg_ingest_feed(&w->ingest, data, len); /* a stop shows in its state */
        pthread_mutex_lock(&w->lock);
        w->pending = NULL;
        pthread_cond_broadcast(&w->changed);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* Waits until the writer is idle; false (failure filled) when the pipeline stopped. */
static bool shard_writer_idle(shard_writer *w)
{
    pthread_mutex_lock(&w->lock);
    while (w->pending != NULL)
        pthread_cond_wait(&w->changed, &w->lock);
    pthread_mutex_unlock(&w->lock);
    if (w->ingest.state == TG_INGEST_OPEN)
        return true;
    ingest_failure(&w->ingest, w->path, w->failure);
    return false;
}

static int shard_writer_open(shard_writer *w, const tg_jobs_context *ctx, uint64_t size,
                             size_t chunk)
{
    w->ctx = ctx;
    w->chunk = chunk;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->changed, NULL);
    w->initialized = true;
    tg_ingest_config config = {
        .kind = ST_GATE_SAFETENSORS,
        .declared = size,
        .max_bytes = UINT64_MAX,
        .max_header = ctx->max_header,
        .refuse_nonfinite = false, /* the values are the source's, which the gate accepted */
        .store = ctx->store,
        .digest_name = "convert",
        .drain_limit = UINT64_MAX,
    };
    if (tg_ingest_begin(&w->ingest, &config) != 0)
        return -1;
    w->buffer = malloc(chunk);
    if (w->buffer == NULL)
        return -1;
    w->thread_started = pthread_create(&w->thread, NULL, shard_writer_main, w) == 0;
    return w->thread_started ? 0 : -1;
}

static void shard_writer_close(shard_writer *w)
{
    if (w->thread_started) {
        pthread_mutex_lock(&w->lock);
        w->quit = true;
        pthread_cond_broadcast(&w->changed);
        pthread_mutex_unlock(&w->lock);
        pthread_join(w->thread, NULL);
    }
    if (w->initialized) {
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->changed);
    }
    tg_ingest_abort(&w->ingest);
    free(w->buffer);
    tg_blob_close(w->in);
    memset(w, 0, sizeof *w);
}

/* st_convert_read_fn: the source blob. */
static int shard_read(void *ctx, void *buf, size_t len, uint64_t offset)
{
    shard_writer *w = ctx;
    if (tg_blob_read_at(w->in, buf, len, offset) != 0) {
        w->read_errno = errno;
        return -1;
    }
    return 0;
}

/* st_convert_write_fn: one chunk of the converted shard, then the step's checks
 * (progress, the test delay, stop and cancel). */
static int shard_write(void *ctx, const void *data, size_t len)
{
    shard_writer *w = ctx;
    if (!shard_writer_idle(w))
        return -1;
    if (len > w->chunk) /* st_convert_stream writes at most its chunk */
        return fail(w->failure, "internal", "a write of %zu bytes exceeds the chunk", len);
    memcpy(w->buffer, data, len);
    pthread_mutex_lock(&w->lock);
    w->pending = w->buffer;
    w->pending_len = len;
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->lock);
    progress_add(w->ctx, w->p, len, false);
    if (tg_jobs_test_delay_ms() > 0)
        usleep(tg_jobs_test_delay_ms() * 1000u);
    switch (tg_job_worker_signal(w->p->worker)) {
    case TG_JOB_GO:
        return 0;
    case TG_JOB_STOPPING:
        return fail(w->failure, "stopped", "the server is stopping");
    case TG_JOB_CANCELLED:
        return fail(w->failure, "cancelled", "cancelled while it ran");
    case TG_JOB_LEASE_LOST:
        return fail(w->failure, "lease_lost", "another replica took the job over");
    }
    return 0;
}

/* Writes the converted copy of one shard and records it in job_files. */
static int convert_shard(const tg_jobs_context *ctx, int64_t job_id, const tg_file_record *source,
                         const file_plan *fp, progress *p, job_failure *failure)
{
    shard_writer w;
    memset(&w, 0, sizeof w);
    int rc = -1;
    size_t chunk = tg_jobs_test_delay_ms() > 0 ? TEST_OUT_CHUNK_BYTES : OUT_CHUNK_BYTES;
    if (shard_writer_open(&w, ctx, fp->out_size, chunk) != 0) {
        fail(failure, "internal", "cannot start writing %s (memory or temp file)", source->path);
        goto out;
    }
    w.path = source->path;
    w.p = p;
    w.failure = failure;
    tg_blob_check check;
    w.in = tg_blob_open(ctx->store, source->sha256, source->size, &check);
    if (w.in == NULL) {
        fail(failure, "source_unreadable", "the blob %s of %s is missing or damaged (run fsck)",
             source->sha256, source->path);
        goto out;
    }
    st_convert_options options = {.dtypes = fp->out_dtype, .chunk_bytes = chunk};
    st_error err;
    switch (st_convert_stream(&fp->header, shard_read, &w, shard_write, &w, &options, &err)) {
    case ST_CONVERT_OK:
        break;
    case ST_CONVERT_READ_FAILED:
        fail(failure, "source_unreadable", "reading %s (blob %s): %s", source->path, source->sha256,
             strerror(w.read_errno));
        goto out;
    case ST_CONVERT_WRITE_FAILED:
        goto out; /* shard_write said why */
    case ST_CONVERT_NO_MEMORY:
        fail(failure, "internal", "out of memory converting %s", source->path);
        goto out;
    case ST_CONVERT_BAD_INPUT:
        fail(failure, "internal", "the converted %s cannot be laid out: %s", source->path,
             err.detail);
        goto out;
    }
    /* everything handed over: the writer thread is idle from here on */
    if (!shard_writer_idle(&w))
        goto out;
    tg_file_record made;
    memset(&made, 0, sizeof made);
    if (commit_job_file(ctx, job_id, &w.ingest, source->path, true, &made, failure) != 0)
        goto out;
    tg_log(TG_LOG_INFO, "job %lld: %s converted (%zu tensors) -> %s, %llu bytes", (long long)job_id,
           source->path, fp->converted, made.sha256, (unsigned long long)made.size);
    rc = 0;
out:
    shard_writer_close(&w);
    return rc;
}

/* ---- indexes ---- */

static size_t dir_length(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? (size_t)(slash - path) + 1 : 0;
}

static bool same_dir(const char *a, const char *b)
{
    size_t len = dir_length(a);
    return len == dir_length(b) && strncmp(a, b, len) == 0;
}

static char *read_blob_text(const tg_jobs_context *ctx, const tg_file_record *file)
{
    if (file->size > INDEX_MAX_BYTES)
        return NULL;
    tg_blob_check check;
    tg_blob_reader *blob = tg_blob_open(ctx->store, file->sha256, TG_BLOB_SIZE_UNCHECKED, &check);
    if (blob == NULL)
        return NULL;
    char *text = malloc((size_t)file->size + 1);
    if (text != NULL && tg_blob_read_at(blob, text, (size_t)file->size, 0) != 0) {
        free(text);
        text = NULL;
    }
    tg_blob_close(blob);
    if (text != NULL)
        text[file->size] = '\0';
    return text;
}

/* Rewrites the index at files[index] with total_size = the new tensor bytes of its
 * directory's shards, checks it against the new shards and records it. */
static int rewrite_index(const tg_jobs_context *ctx, int64_t job_id, const version_plan *vp,
                         size_t index, job_failure *failure)
{
    const tg_file_record *source = &vp->files.items[index];
    int rc = -1;
    char *text = read_blob_text(ctx, source), *out_text = NULL;
    json_t *root = NULL;
    tg_shard *shards = calloc(vp->files.count, sizeof *shards);
    const char ***names = calloc(vp->files.count, sizeof *names);
    tg_ingest ingest;
    memset(&ingest, 0, sizeof ingest);
    if (text == NULL || shards == NULL || names == NULL) {
        fail(failure, "source_unreadable", "the index %s cannot be read", source->path);
        goto out;
    }
    json_error_t error;
    root = json_loads(text, JSON_REJECT_DUPLICATES, &error);
    char shape[300];
    if (!tg_index_shape_check(root, source->path, shape, sizeof shape)) {
        fail(failure, "index_mismatch", "%s", shape);
        goto out;
    }
    json_t *metadata = json_object_get(root, "metadata");
    uint64_t total = 0;
    size_t count = 0;
    for (size_t i = 0; i < vp->files.count; i++) {
        const file_plan *fp = &vp->plans[i];
        if (!fp->is_shard || !tg_is_safetensors_path(vp->files.items[i].path) ||
            !same_dir(source->path, vp->files.items[i].path))
            continue;
        uint64_t data = fp->converted > 0 ? fp->out_data : fp->header.data_size;
        if (__builtin_add_overflow(total, data, &total)) {
            fail(failure, "internal", "total_size of %s overflows", source->path);
            goto out;
        }
        names[i] = calloc(fp->header.tensor_count ? fp->header.tensor_count : 1, sizeof **names);
        if (names[i] == NULL) {
            fail(failure, "internal", "out of memory");
            goto out;
        }
        for (size_t t = 0; t < fp->header.tensor_count; t++)
            names[i][t] = fp->header.tensors[t].name;
        shards[count].path = vp->files.items[i].path;
        shards[count].tensor_count = fp->header.tensor_count;
        shards[count].names = names[i];
        shards[count].data_bytes = data;
        count++;
    }
    if (total > (uint64_t)INT64_MAX) {
        fail(failure, "internal", "total_size of %s is too large", source->path);
        goto out;
    }
    if (metadata == NULL) {
        metadata = json_object();
        if (metadata == NULL || json_object_set_new(root, "metadata", metadata) != 0) {
            fail(failure, "internal", "out of memory");
            goto out;
        }
    }
    json_object_set_new(metadata, "total_size", json_integer((json_int_t)total));
    /* jansson keeps the keys in their order: only total_size's value changes */
    out_text = json_dumps(root, JSON_INDENT(2));
    if (out_text == NULL) {
        fail(failure, "internal", "out of memory");
        goto out;
    }
    size_t out_len = strlen(out_text);
    char detail[512] = "";
    if (!tg_index_check(source->path, out_text, out_len, shards, count, detail, sizeof detail)) {
        fail(failure, "index_mismatch", "the rewritten %s does not match its shards: %s",
             source->path, detail);
        goto out;
    }
    /* the rewritten index ends with a newline */
    char *grown = realloc(out_text, out_len + 2);
    if (grown == NULL) {
        fail(failure, "internal", "out of memory");
        goto out;
    }
    out_text = grown;
    out_text[out_len] = '\n';
    out_text[out_len + 1] = '\0';
    tg_ingest_config config = {
        .kind = ST_GATE_SIDECAR,
        .declared = out_len + 1,
        .max_bytes = UINT64_MAX,
        .max_header = ctx->max_header,
        .store = ctx->store,
        .digest_name = "convert",
        .drain_limit = UINT64_MAX,
    };
    if (tg_ingest_begin(&ingest, &config) != 0) {
        fail(failure, "internal", "cannot start writing %s (memory or temp file)", source->path);
        goto out;
    }
    tg_file_record made;
    memset(&made, 0, sizeof made);
    if (tg_ingest_feed(&ingest, out_text, out_len + 1) != TG_INGEST_OPEN) {
        ingest_failure(&ingest, source->path, failure);
        goto out;
    }
    if (commit_job_file(ctx, job_id, &ingest, source->path, false, &made, failure) != 0)
        goto out;
    rc = 0;
out:
    for (size_t i = 0; names && i < vp->files.count; i++)
        free(names[i]);
    free(names);
    free(shards);
    free(text);
    free(out_text);
    json_decref(root);
    tg_ingest_abort(&ingest);
    return rc;
}

/* ---- one job ---- */

static const tg_file_record *find_path(const tg_file_records *list, const char *path)
{
    for (size_t i = 0; i < list->count; i++)
        if (strcmp(list->items[i].path, path) == 0)
            return &list->items[i];
    return NULL;
}

/* A shard finished by an earlier attempt counts when its blob is still whole-sized. */
static bool already_made(const tg_jobs_context *ctx, const tg_file_records *made, const char *path,
                         uint64_t size)
{
    const tg_file_record *file = find_path(made, path);
    if (file == NULL || file->size != size)
        return false;
    uint64_t stored;
    return tg_blob_stat(ctx->store, file->sha256, &stored) == 0 && stored == size;
}

/* Parses the job's stored globs into spec (pointing into *globs_json). */
static int job_spec(const tg_job *job, tg_convert_spec *spec, json_t **globs_json,
                    job_failure *failure)
{
    memset(spec, 0, sizeof *spec);
    if (!st_dtype_from_name(job->dtype, strlen(job->dtype), &spec->to) ||
        !tg_convert_target_supported(spec->to))
        return fail(failure, "internal", "the job's dtype '%s' is not a conversion target",
                    job->dtype);
    *globs_json = json_loads(job->tensors, 0, NULL);
    if (!json_is_array(*globs_json) || json_array_size(*globs_json) > TG_CONVERT_GLOBS_MAX)
        return fail(failure, "internal", "the job's tensor globs cannot be read");
    for (size_t g = 0; g < json_array_size(*globs_json); g++) {
        const char *glob = json_string_value(json_array_get(*globs_json, g));
        if (glob == NULL)
            return fail(failure, "internal", "the job's tensor globs cannot be read");
        spec->globs[spec->glob_count++] = glob;
    }
    return 0;
}

/* The version digest, as publish computes it, over the new version's files. Returns
 * 0, or -1 (hex "") when out of memory or the digest failed. */
static int path_order(const void *a, const void *b)
{
    return strcmp(((const tg_file_record *)a)->path, ((const tg_file_record *)b)->path);
}

/* The derived version's files, as tg_catalog_job_commit makes them: the source's,
 * each replaced by the job's file of the same path, and the job's other files
 * (the server's signature) added; in path order. malloc'd, *count; NULL: memory. */
static tg_file_record *derived_files(const version_plan *vp, const tg_file_records *made,
                                     size_t *count)
{
    size_t n = vp->files.count + made->count;
    tg_file_record *files = malloc((n ? n : 1) * sizeof *files);
    if (files == NULL)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < vp->files.count; i++) {
        const tg_file_record *replaced = find_path(made, vp->files.items[i].path);
        files[k++] = replaced ? *replaced : vp->files.items[i];
    }
    for (size_t i = 0; i < made->count; i++)
        if (find_path(&vp->files, made->items[i].path) == NULL)
            files[k++] = made->items[i];
    qsort(files, k, sizeof *files, path_order);
    *count = k;
    return files;
}

static int final_digest(const version_plan *vp, const tg_file_records *made, char hex[65])
{
    size_t count = 0;
    tg_file_record *files = derived_files(vp, made, &count);
    if (files == NULL) {
        hex[0] = '\0';
        return -1;
    }
    int rc = tg_manifest_digest(files, count, hex);
    free(files);
    return rc;
}

/* With a server signing key: the derived version's model.server.sig, from the
 * digests of its files (the job's new ones and the source's kept ones), recorded
 * as a file of the job like a converted shard. 0, or -1 (failure set). */
static int sign_derived(const tg_jobs_context *ctx, const tg_job *job, const version_plan *vp,
                        job_failure *failure)
{
    tg_file_records made = {0};
    if (tg_catalog_job_file_list(ctx->catalog, job->id, tg_file_records_collect, &made) !=
            TG_CAT_OK ||
        made.failed) {
        free(made.items);
        return fail(failure, "internal", "the catalog failed listing the job's files");
    }
    size_t count = 0;
    tg_file_record *files = derived_files(vp, &made, &count);
    free(made.items);
    if (files == NULL)
        return fail(failure, "internal", "out of memory");
    job_row row = {ctx, job->id, false, TG_CAT_ERROR};
    tg_file_record sig;
    char why[TG_MSIG_ERR_MAX] = "";
    int rc = tg_version_sign(ctx->signer, ctx->store, job->name, files, count, record_job_file,
                             &row, &sig, why, sizeof why);
    free(files);
    if (rc != 0)
        return fail(failure, "internal", "%s", why);
    if (row.status == TG_CAT_NOT_FOUND)
        return fail(failure, "cancelled", "the job was cancelled or its model deleted");
    if (row.status != TG_CAT_OK)
        return fail(failure, "internal", "the catalog failed recording the signature");
    return 0;
}

/* Runs a claimed job to its commit. Returns 0 done, 1 stopped (stays running), -1 failed. */
static int run_job(const tg_jobs_context *ctx, const tg_job *job, const tg_job_worker *worker,
                   job_failure *failure)
{
    tg_convert_spec spec;
    json_t *globs_json = NULL;
    version_plan vp;
    memset(&vp, 0, sizeof vp);
    tg_file_records made = {0};
    int rc = -1;
    if (job_spec(job, &spec, &globs_json, failure) != 0)
        goto out;
    if (plan_version(ctx, job->source_version_id, &spec, &vp, failure) != 0)
        goto out;
    if (vp.survey.shards_converted == 0) {
        fail(failure, "nothing_to_convert", "no tensor of version %lld changes dtype",
             (long long)job->source_number);
        goto out;
    }
    if (tg_catalog_job_file_list(ctx->catalog, job->id, tg_file_records_collect, &made) !=
            TG_CAT_OK ||
        made.failed) {
        fail(failure, "internal", "the catalog failed listing the job's files");
        goto out;
    }
    progress p = {.job_id = job->id, .worker = worker, .total = vp.survey.bytes_total};
    for (size_t i = 0; i < vp.files.count; i++) {
        const file_plan *fp = &vp.plans[i];
        if (fp->converted > 0 && already_made(ctx, &made, vp.files.items[i].path, fp->out_size))
            p.done += fp->out_size;
    }
    progress_add(ctx, &p, 0, true);
    if (p.done > 0)
        tg_log(TG_LOG_INFO, "job %lld: resuming at %llu of %llu bytes", (long long)job->id,
               (unsigned long long)p.done, (unsigned long long)p.total);
    for (size_t i = 0; i < vp.files.count; i++) {
        const file_plan *fp = &vp.plans[i];
        if (fp->converted == 0 || already_made(ctx, &made, vp.files.items[i].path, fp->out_size))
            continue;
        if (convert_shard(ctx, job->id, &vp.files.items[i], fp, &p, failure) != 0)
            goto out;
    }
    progress_add(ctx, &p, 0, true);
    /* every index of a directory with a converted shard gets the new total_size */
    for (size_t i = 0; i < vp.files.count; i++) {
        if (!tg_is_index_path(vp.files.items[i].path))
            continue;
        bool changed = false;
        for (size_t j = 0; j < vp.files.count; j++)
            if (vp.plans[j].converted > 0 &&
                same_dir(vp.files.items[i].path, vp.files.items[j].path))
                changed = true;
        if (changed && rewrite_index(ctx, job->id, &vp, i, failure) != 0)
            goto out;
    }
    if (ctx->signer != NULL && sign_derived(ctx, job, &vp, failure) != 0)
        goto out;
    made.count = 0;
    if (tg_catalog_job_file_list(ctx->catalog, job->id, tg_file_records_collect, &made) !=
            TG_CAT_OK ||
        made.failed) {
        fail(failure, "internal", "the catalog failed listing the job's files");
        goto out;
    }
    char digest[65];
    if (final_digest(&vp, &made, digest) != 0) {
        fail(failure, "internal", "the new version's digest could not be computed");
        goto out;
    }
    tg_version version;
    tg_cat_status status = tg_catalog_job_commit(ctx->catalog, job->id, digest, &version);
    if (status == TG_CAT_CONFLICT &&
        tg_catalog_job_renew(ctx->catalog, job->id) == TG_CAT_NOT_FOUND) {
        /* not ours any more: if it still runs, another replica holds it (its
         * lease expired here) and finishes it with these files */
        tg_job *now = malloc(sizeof *now);
        bool elsewhere = now != NULL &&
                         tg_catalog_job_get(ctx->catalog, job->id, now) == TG_CAT_OK &&
                         now->state == TG_JOB_RUNNING;
        free(now);
        if (elsewhere) {
            fail(failure, "lease_lost", "another replica took the job over");
            goto out;
        }
    }
    if (status == TG_CAT_NOT_FOUND || status == TG_CAT_CONFLICT) {
        /* cancelled, its model deleted, or its token revoked (the commit failed it
         * then): its rows are gone, and its blobs go unless something else uses them */
        fail(failure, "cancelled", "the job was cancelled or its model deleted");
        for (size_t i = 0; i < made.count; i++)
            (void)tg_blob_reclaim(ctx->store, ctx->catalog, made.items[i].sha256, false);
        goto out;
    }
    if (status != TG_CAT_OK) {
        fail(failure, "internal", "the catalog failed committing the version");
        goto out;
    }
    if (ctx->version_published != NULL)
        ctx->version_published(ctx->version_published_arg);
    tg_log(TG_LOG_INFO, "job %lld: %s/%s version %lld derived from %lld (%s), digest %s",
           (long long)job->id, job->org, job->name, (long long)version.number,
           (long long)job->source_number, job->dtype, digest);
    rc = 0;
out:
    if (rc != 0 && strcmp(failure->reason, "stopped") == 0)
        rc = 1;
    free(made.items);
    version_plan_free(&vp);
    json_decref(globs_json);
    return rc;
}

/* A failed job: failed in the catalog (a cancelled one keeps the detail the cancel
 * stored; one whose model was deleted is gone, ids are never reused, and failing it
 * changes nothing), its job_files rows gone, and their blobs with them when nothing
 * else uses them. */
static void fail_job(const tg_jobs_context *ctx, const tg_job *job, const job_failure *failure)
{
    tg_log(TG_LOG_WARN, "job %lld failed: %s: %s", (long long)job->id, failure->reason,
           failure->detail);
    tg_file_records made = {0};
    (void)tg_catalog_job_file_list(ctx->catalog, job->id, tg_file_records_collect, &made);
    bool cancelled = strcmp(failure->reason, "cancelled") == 0;
    tg_catalog_job_fail(ctx->catalog, job->id, failure->reason, cancelled ? NULL : failure->detail);
    for (size_t i = 0; i < made.count; i++)
        (void)tg_blob_reclaim(ctx->store, ctx->catalog, made.items[i].sha256, false);
    free(made.items);
    if (failure->orphan[0] != '\0')
        (void)tg_blob_reclaim(ctx->store, ctx->catalog, failure->orphan, false);
}

tg_job_outcome tg_convert_job_run(const tg_jobs_context *context, const tg_job *job,
                                  const tg_job_worker *worker)
{
    tg_log(TG_LOG_INFO, "job %lld: converting %s/%s version %lld to %s (attempt %lld)",
           (long long)job->id, job->org, job->name, (long long)job->source_number, job->dtype,
           (long long)job->attempts);
    job_failure failure = {"", "", ""};
    int rc = run_job(context, job, worker, &failure);
    if (rc == 0)
        return TG_JOB_OUTCOME_DONE;
    if (rc > 0)
        return TG_JOB_OUTCOME_STOPPED;
    if (strcmp(failure.reason, "lease_lost") == 0) {
        /* another replica holds it now and finishes it with the files recorded so
         * far: nothing here is failed or reclaimed */
        tg_log(TG_LOG_WARN, "job %lld: %s", (long long)job->id, failure.detail);
        return TG_JOB_OUTCOME_LEASE_LOST;
    }
    fail_job(context, job, &failure);
    return TG_JOB_OUTCOME_FAILED;
}
