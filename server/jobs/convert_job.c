/* The conversion job runner (see convert_job.h).
 *
 * The streaming converter here does what cmd/convert.c does for one local file
 * (plan the output with st_write_plan_make, then read, convert and write tensor
 * by tensor in bounded chunks); it is a separate copy because the server's output
 * also goes through the gate, SHA-256 and the blob store in the same pass. */
#include "convert_job.h"

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
#include "reclaim.h"
#include "routes.h"
#include "sha256.h"
#include "st_convert.h"
#include "st_gate.h"
#include "st_stats.h"
#include "st_write.h"

/* Output is gathered in this much memory, then written, gated and hashed at once. */
#define OUT_CHUNK_BYTES (8u << 20)
#define SOURCE_CHUNK_BYTES (8u << 20)
/* With the test delay set: small steps, so a test can stop the server mid-shard. */
#define TEST_OUT_CHUNK_BYTES (64u << 10)
/* Progress reaches the catalog at most this often (each write is an fsync). */
#define PROGRESS_INTERVAL_NS (200 * 1000 * 1000LL)
/* An index file is a sidecar: small by the gate's bound. */
#define INDEX_MAX_BYTES (64ull << 20)

bool tg_convert_target_supported(st_dtype dtype)
{
    return st_convert_supported(dtype, dtype);
}

/* ---- the worker ---- */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    bool started;
    bool stopping; /* read without the lock by the converter: set once, never cleared while running
                    */
    bool pending;
    tg_server *server;
    unsigned delay_ms;
    /* the running job a DELETE asked to stop (atomic; the catalog holds the
     * durable mark, this only spares the converter a catalog read per step) */
    int64_t cancel_job;
} runner = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static bool stopping(void)
{
    return __atomic_load_n(&runner.stopping, __ATOMIC_ACQUIRE);
}

static bool cancel_asked(int64_t job_id)
{
    return __atomic_load_n(&runner.cancel_job, __ATOMIC_ACQUIRE) == job_id;
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

static bool glob_match(const tg_convert_spec *spec, const char *name, size_t *hits)
{
    if (spec->glob_count == 0)
        return true;
    bool any = false;
    for (size_t g = 0; g < spec->glob_count; g++) {
        if (fnmatch(spec->globs[g], name, 0) == 0) {
            hits[g]++;
            any = true;
        }
    }
    return any;
}

/* The output layout of one shard: the tensors with their new dtypes. */
static st_reason shard_write_plan(const file_plan *fp, st_write_plan *plan, st_error *err)
{
    const st_file *in = &fp->header;
    st_write_tensor *wanted = calloc(in->tensor_count ? in->tensor_count : 1, sizeof *wanted);
    if (wanted == NULL)
        return st_error_set(err, ST_SIZE_OVERFLOW, ST_NO_OFFSET, NULL, "out of memory");
    for (size_t t = 0; t < in->tensor_count; t++) {
        wanted[t].name = in->tensors[t].name;
        wanted[t].dtype = fp->out_dtype[t];
        wanted[t].rank = in->tensors[t].rank;
        wanted[t].shape = in->tensors[t].shape;
    }
    st_reason reason = st_write_plan_make(wanted, in->tensor_count, in->metadata,
                                          in->metadata_count, in->has_metadata, plan, err);
    free(wanted);
    return reason;
}

/* Lists version_id's files, loads every shard header and decides each tensor's
 * output dtype. Returns 0, or -1 with failure set. */
static int plan_version(tg_server *server, int64_t version_id, const tg_convert_spec *spec,
                        version_plan *vp, job_failure *failure)
{
    memset(vp, 0, sizeof *vp);
    vp->survey.unmatched_glob = -1;
    if (tg_catalog_file_list(server->catalog, version_id, NULL, 0, tg_file_records_collect,
                             &vp->files) != TG_CAT_OK ||
        vp->files.failed)
        return fail(failure, "internal", "the catalog failed listing the source files");
    vp->plans = calloc(vp->files.count ? vp->files.count : 1, sizeof *vp->plans);
    vp->glob_hits = calloc(TG_CONVERT_GLOBS_MAX, sizeof *vp->glob_hits);
    if (vp->plans == NULL || vp->glob_hits == NULL)
        return fail(failure, "internal", "out of memory");
    for (size_t i = 0; i < vp->files.count; i++) {
        const tg_file_record *f = &vp->files.items[i];
        file_plan *fp = &vp->plans[i];
        if (strcmp(f->kind, "safetensors") != 0)
            continue;
        st_error err;
        if (tg_blob_read_header(server, f->sha256, f->size, &fp->header, &err) != 0)
            return fail(failure, "source_unreadable",
                        "the header of %s (blob %s) cannot be read: %s", f->path, f->sha256,
                        err.detail);
        fp->is_shard = true;
        vp->survey.shards++;
        size_t count = fp->header.tensor_count;
        fp->out_dtype = calloc(count ? count : 1, sizeof *fp->out_dtype);
        if (fp->out_dtype == NULL)
            return fail(failure, "internal", "out of memory");
        for (size_t t = 0; t < count; t++) {
            const st_tensor *tensor = &fp->header.tensors[t];
            fp->out_dtype[t] = tensor->dtype;
            if (glob_match(spec, tensor->name, vp->glob_hits) && tensor->dtype != spec->to &&
                st_convert_supported(tensor->dtype, spec->to)) {
                fp->out_dtype[t] = spec->to;
                fp->converted++;
            }
        }
        if (fp->converted == 0)
            continue;
        st_write_plan plan;
        memset(&plan, 0, sizeof plan);
        if (shard_write_plan(fp, &plan, &err) != ST_OK) {
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

int tg_convert_survey_version(tg_server *server, int64_t version_id, const tg_convert_spec *spec,
                              tg_convert_survey *out, char *detail, size_t detail_len)
{
    version_plan vp;
    job_failure failure = {"", "", ""};
    int rc = plan_version(server, version_id, spec, &vp, &failure);
    if (rc == 0)
        *out = vp.survey;
    else
        snprintf(detail, detail_len, "%s", failure.detail);
    version_plan_free(&vp);
    return rc;
}

/* ---- writing one output file: gate, SHA-256 and temp file in one pass ----
 *
 * Double-buffered: the job's thread fills one buffer (reading and converting)
 * while the sink's writer thread writes the other to the temp file, feeds it to
 * the gate and hashes it, so conversion overlaps writing and hashing. */

typedef struct sink {
    tg_server *server;
    tg_blob_writer *out; /* NULL before sink_open, after the commit or when dropped */
    st_gate *gate;
    tg_sha256 sha;
    uint8_t *buffers[2];
    uint8_t *buf; /* the buffer being filled: buffers[filling] */
    int filling;
    size_t used, cap;
    uint64_t handed; /* bytes given to the writer */
    /* shared with the writer thread, under lock: */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    pthread_t writer;
    bool writer_started;
    const uint8_t *pending; /* a buffer for the writer, NULL when it is idle */
    size_t pending_len;
    bool quit;
    bool failed; /* a write failed or the gate refused: no more writes */
    bool no_space;
    int write_errno;
    uint64_t written;
    bool initialized; /* lock and condition made */
    /* blobs.lock (shared), taken by sink_commit and held until sink_free, so the
     * blob and its job_files row are made where gc cannot come between them */
    bool blobs_locked;
    int blobs_lock;
} sink;

/* Writes one buffer through: blob, gate, hash. Runs on the writer thread. */
static void sink_write(sink *s, const uint8_t *data, size_t len, bool *failed, bool *no_space,
                       int *write_errno)
{
    tg_store_status status = tg_blob_write(s->out, data, len);
    if (status != TG_STORE_OK) {
        *failed = true;
        *no_space = status == TG_STORE_NO_SPACE;
        *write_errno = errno;
        return;
    }
    if (st_gate_feed(s->gate, data, len) == ST_GATE_REFUSED) {
        *failed = true;
        return;
    }
    if (tg_sha256_update(&s->sha, data, len) != 0)
        *failed = true; /* sink_fail names it: s->sha.failed */
}

static void *sink_writer(void *arg)
{
    sink *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (s->pending == NULL && !s->quit)
            pthread_cond_wait(&s->changed, &s->lock);
        if (s->pending == NULL)
            break;
        const uint8_t *data = s->pending;
        size_t len = s->pending_len;
        bool failed = s->failed, no_space = false;
        int write_errno = 0;
        pthread_mutex_unlock(&s->lock);
        if (!failed)
            sink_write(s, data, len, &failed, &no_space, &write_errno);
        pthread_mutex_lock(&s->lock);
        if (failed && !s->failed) {
            s->failed = true;
            s->no_space = no_space;
            s->write_errno = write_errno;
        }
        if (!s->failed)
            s->written += len;
        s->pending = NULL;
        pthread_cond_broadcast(&s->changed);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static int sink_open(sink *s, tg_server *server, st_gate_kind kind, uint64_t size, size_t cap)
{
    memset(s, 0, sizeof *s);
    s->server = server;
    s->cap = cap;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->changed, NULL);
    s->initialized = true;
    st_gate_config config = {
        .limits = {.max_header_size = server->config.max_header, .max_depth = 0},
        .kind = kind,
        .refuse_nonfinite = false, /* the values are the source's, which the gate accepted */
        .sidecar_max_size = 0,
    };
    s->gate = st_gate_new(&config, size);
    s->buffers[0] = malloc(cap);
    s->buffers[1] = malloc(cap);
    s->buf = s->buffers[0];
    if (tg_sha256_init(&s->sha, "convert") != 0 || s->gate == NULL || s->buffers[0] == NULL ||
        s->buffers[1] == NULL)
        return -1;
    if (tg_blob_write_begin(server->blobs, &s->out) != TG_STORE_OK)
        return -1;
    s->writer_started = pthread_create(&s->writer, NULL, sink_writer, s) == 0;
    return s->writer_started ? 0 : -1;
}

/* Waits until the writer is idle; false when a write failed. */
static bool sink_wait_idle(sink *s)
{
    pthread_mutex_lock(&s->lock);
    while (s->pending != NULL)
        pthread_cond_wait(&s->changed, &s->lock);
    bool ok = !s->failed;
    if (!ok)
        errno = s->write_errno;
    pthread_mutex_unlock(&s->lock);
    return ok;
}

/* Hands the filled buffer to the writer (after it finished the previous one) and
 * continues in the other buffer. */
static int sink_flush(sink *s)
{
    if (s->used == 0)
        return 0;
    if (!sink_wait_idle(s))
        return -1;
    pthread_mutex_lock(&s->lock);
    s->pending = s->buf;
    s->pending_len = s->used;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
    s->handed += s->used;
    s->filling ^= 1;
    s->buf = s->buffers[s->filling];
    s->used = 0;
    return 0;
}

static void sink_free(sink *s)
{
    if (s->writer_started) {
        pthread_mutex_lock(&s->lock);
        s->quit = true;
        pthread_cond_broadcast(&s->changed);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->writer, NULL);
    }
    if (s->initialized) {
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->changed);
    }
    tg_blob_write_abort(s->out);
    if (s->blobs_locked)
        tg_blobstore_unlock(s->server->blobs, s->blobs_lock);
    st_gate_free(s->gate);
    tg_sha256_free(&s->sha);
    free(s->buffers[0]);
    free(s->buffers[1]);
    memset(s, 0, sizeof *s);
}

/* Fills failure after the writer stopped on an error (writer idle). */
static int sink_fail(sink *s, const char *path, job_failure *failure)
{
    st_verdict verdict;
    st_gate_verdict(s->gate, &verdict);
    if (s->no_space)
        return fail(failure, "insufficient_storage", "the disk is full writing %s", path);
    if (s->write_errno != 0)
        return fail(failure, "internal", "writing %s failed: %s", path, strerror(s->write_errno));
    if (s->sha.failed)
        return fail(failure, "internal", "the SHA-256 of the written %s failed", path);
    if (verdict.error.reason != ST_OK)
        return fail(failure, "internal", "the written %s does not pass the gate: %s: %s", path,
                    st_reason_name(verdict.error.reason), verdict.error.detail);
    return fail(failure, "internal", "writing %s failed", path);
}

/* Finishes the gate (which must accept what we wrote), commits the blob and fills
 * file's kind/size/sha256 (and for safetensors its tensor facts and stats text). */
static int sink_commit(sink *s, const char *path, tg_file_record *file, char **stats_text,
                       job_failure *failure)
{
    /* everything written: the writer thread is idle from here on */
    if (sink_flush(s) != 0 || !sink_wait_idle(s))
        return sink_fail(s, path, failure);
    if (st_gate_finish(s->gate) != ST_GATE_ACCEPTED) {
        st_verdict verdict;
        st_gate_verdict(s->gate, &verdict);
        return fail(failure, "internal", "the written %s does not pass the gate: %s: %s", path,
                    st_reason_name(verdict.error.reason), verdict.error.detail);
    }
    memset(file, 0, sizeof *file);
    snprintf(file->path, sizeof file->path, "%s", path);
    file->size = s->written;
    if (tg_sha256_final_hex(&s->sha, file->sha256) != 0)
        return fail(failure, "internal", "the SHA-256 of the written %s failed", path);
    const st_file *parsed = st_gate_file(s->gate);
    *stats_text = NULL;
    json_t *stats = json_array();
    if (stats == NULL)
        return fail(failure, "internal", "out of memory");
    if (parsed != NULL) {
        snprintf(file->kind, sizeof file->kind, "safetensors");
        const st_tensor_stats *tensor_stats = st_gate_stats(s->gate);
        for (size_t t = 0; tensor_stats != NULL && t < parsed->tensor_count; t++) {
            json_array_append_new(stats, json_pack("[I,I]", (json_int_t)tensor_stats[t].nan,
                                                   (json_int_t)tensor_stats[t].inf));
            file->nan += tensor_stats[t].nan;
            file->inf += tensor_stats[t].inf;
        }
        uint64_t counts[ST_DTYPE_COUNT];
        file->tensors = parsed->tensor_count;
        st_file_parameter_counts(parsed, counts, &file->parameters);
    } else {
        snprintf(file->kind, sizeof file->kind, "json");
    }
    *stats_text = json_dumps(stats, JSON_COMPACT);
    json_decref(stats);
    if (*stats_text == NULL)
        return fail(failure, "internal", "out of memory");
    /* Durable blob first, job_files row second: a crash between leaves an
     * unreferenced blob for gc, never a row without its blob. The caller records
     * the row before sink_free releases the lock. */
    s->blobs_lock = tg_blobstore_lock(s->server->blobs, false, true);
    if (s->blobs_lock < 0) {
        free(*stats_text);
        *stats_text = NULL;
        return fail(failure, "internal", "the blob store's lock cannot be taken: %s",
                    strerror(errno));
    }
    s->blobs_locked = true;
    tg_store_status committed = tg_blob_write_commit(s->out, file->sha256);
    s->out = NULL;
    if (committed == TG_STORE_OK)
        return 0;
    free(*stats_text);
    *stats_text = NULL;
    if (committed == TG_STORE_NO_SPACE)
        return fail(failure, "insufficient_storage", "the disk is full writing %s", path);
    return fail(failure, "internal", "storing %s failed: %s", path, strerror(errno));
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
    uint64_t done, total;
    int64_t last_saved_ns;
} progress;

static void progress_add(tg_server *server, progress *p, uint64_t bytes, bool force)
{
    p->done += bytes;
    int64_t now = now_ns();
    if (force || now - p->last_saved_ns >= PROGRESS_INTERVAL_NS) {
        tg_catalog_job_progress(server->catalog, p->job_id, p->done, p->total);
        p->last_saved_ns = now;
    }
}

/* After each step written: the test delay, and the stop check. */
static int step_done(sink *s, progress *p, const char *path, job_failure *failure)
{
    uint64_t before = s->handed;
    if (sink_flush(s) != 0)
        return sink_fail(s, path, failure);
    progress_add(s->server, p, s->handed - before, false);
    if (runner.delay_ms > 0)
        usleep(runner.delay_ms * 1000u);
    if (stopping())
        return fail(failure, "stopped", "the server is stopping");
    if (cancel_asked(p->job_id))
        return fail(failure, "cancelled", "cancelled while it ran");
    return 0;
}

/* Writes the converted copy of one shard and records it in job_files. */
static int convert_shard(tg_server *server, int64_t job_id, const tg_file_record *source,
                         const file_plan *fp, progress *p, uint8_t *source_buf,
                         job_failure *failure)
{
    const st_file *in = &fp->header;
    st_write_plan plan;
    memset(&plan, 0, sizeof plan);
    st_error err;
    sink s;
    memset(&s, 0, sizeof s);
    tg_blob_reader *source_blob = NULL;
    int rc = -1;
    char *stats = NULL;
    if (shard_write_plan(fp, &plan, &err) != ST_OK) {
        fail(failure, "internal", "the converted %s cannot be laid out: %s", source->path,
             err.detail);
        goto out;
    }
    size_t chunk = runner.delay_ms > 0 ? TEST_OUT_CHUNK_BYTES : OUT_CHUNK_BYTES;
    if (sink_open(&s, server, ST_GATE_SAFETENSORS, (uint64_t)plan.header_len + plan.data_size,
                  chunk) != 0) {
        fail(failure, "internal", "cannot start writing %s (memory or temp file)", source->path);
        goto out;
    }
    tg_blob_check check;
    source_blob = tg_blob_open(server->blobs, source->sha256, source->size, &check);
    if (source_blob == NULL) {
        fail(failure, "source_unreadable", "the blob %s of %s is missing or damaged (run fsck)",
             source->sha256, source->path);
        goto out;
    }
    /* The plan's header is at most max_header + 8 bytes: written in pieces of the buffer. */
    for (size_t off = 0; off < plan.header_len;) {
        size_t n = plan.header_len - off < s.cap - s.used ? plan.header_len - off : s.cap - s.used;
        memcpy(s.buf + s.used, plan.header + off, n);
        s.used += n;
        off += n;
        if (s.used == s.cap && step_done(&s, p, source->path, failure) != 0)
            goto out;
    }
    uint64_t data_written = 0;
    for (size_t k = 0; k < plan.count; k++) {
        size_t t = plan.order[k];
        const st_tensor *tensor = &in->tensors[t];
        /* the plan lays tensors back to back in this order */
        if (plan.begin[t] != data_written) {
            fail(failure, "internal", "the plan of %s is not contiguous", source->path);
            goto out;
        }
        uint64_t at = in->data_start + tensor->begin;
        st_dtype to = fp->out_dtype[t];
        if (to == tensor->dtype) {
            uint64_t left = tensor->end - tensor->begin;
            while (left > 0) {
                size_t room = s.cap - s.used;
                size_t n = left < room ? (size_t)left : room;
                if (tg_blob_read_at(source_blob, s.buf + s.used, n, at) != 0)
                    goto read_failed;
                s.used += n;
                at += n;
                left -= n;
                if (s.used == s.cap && step_done(&s, p, source->path, failure) != 0)
                    goto out;
            }
        } else {
            /* both dtypes are among the whole-byte convertible ones */
            size_t from_size = st_dtype_bits(tensor->dtype) / 8, to_size = st_dtype_bits(to) / 8;
            uint64_t left = tensor->elements;
            while (left > 0) {
                size_t room = (s.cap - s.used) / to_size;
                if (room == 0) {
                    if (step_done(&s, p, source->path, failure) != 0)
                        goto out;
                    continue;
                }
                size_t n = SOURCE_CHUNK_BYTES / from_size;
                if (n > room)
                    n = room;
                if (n > left)
                    n = (size_t)left;
                if (tg_blob_read_at(source_blob, source_buf, n * from_size, at) != 0)
                    goto read_failed;
                st_convert(tensor->dtype, to, source_buf, s.buf + s.used, n);
                s.used += n * to_size;
                at += (uint64_t)n * from_size;
                left -= n;
                if (s.used == s.cap && step_done(&s, p, source->path, failure) != 0)
                    goto out;
            }
        }
        data_written += plan.bytes[t];
    }
    if (data_written != plan.data_size) {
        fail(failure, "internal", "%s: %" PRIu64 " data bytes written, the plan says %" PRIu64,
             source->path, data_written, plan.data_size);
        goto out;
    }
    uint64_t before = s.handed;
    tg_file_record made;
    if (sink_commit(&s, source->path, &made, &stats, failure) != 0)
        goto out;
    progress_add(server, p, s.handed - before, false);
    tg_cat_status status = tg_catalog_job_file_put(server->catalog, job_id, &made, stats);
    if (status == TG_CAT_NOT_FOUND) {
        fail(failure, "cancelled", "the job was cancelled or its model deleted");
        snprintf(failure->orphan, sizeof failure->orphan, "%s", made.sha256);
        goto out;
    }
    if (status != TG_CAT_OK) {
        fail(failure, "internal", "the catalog failed recording %s", source->path);
        goto out;
    }
    tg_log(TG_LOG_INFO, "job %lld: %s converted (%zu tensors) -> %s, %llu bytes", (long long)job_id,
           source->path, fp->converted, made.sha256, (unsigned long long)made.size);
    rc = 0;
    goto out;
read_failed:
    fail(failure, "source_unreadable", "reading %s (blob %s): %s", source->path, source->sha256,
         strerror(errno));
out:
    tg_blob_close(source_blob);
    free(stats);
    sink_free(&s);
    st_write_plan_free(&plan);
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

static char *read_blob_text(tg_server *server, const tg_file_record *file)
{
    if (file->size > INDEX_MAX_BYTES)
        return NULL;
    tg_blob_check check;
    tg_blob_reader *blob =
        tg_blob_open(server->blobs, file->sha256, TG_BLOB_SIZE_UNCHECKED, &check);
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
static int rewrite_index(tg_server *server, int64_t job_id, const version_plan *vp, size_t index,
                         job_failure *failure)
{
    const tg_file_record *source = &vp->files.items[index];
    int rc = -1;
    char *text = read_blob_text(server, source), *out_text = NULL, *stats = NULL;
    json_t *root = NULL;
    tg_shard *shards = calloc(vp->files.count, sizeof *shards);
    const char ***names = calloc(vp->files.count, sizeof *names);
    sink s;
    memset(&s, 0, sizeof s);
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
    if (sink_open(&s, server, ST_GATE_SIDECAR, out_len + 1, out_len + 1) != 0) {
        fail(failure, "internal", "cannot start writing %s (memory or temp file)", source->path);
        goto out;
    }
    memcpy(s.buf, out_text, out_len);
    s.buf[out_len] = '\n';
    s.used = out_len + 1;
    tg_file_record made;
    if (sink_commit(&s, source->path, &made, &stats, failure) != 0)
        goto out;
    tg_cat_status status = tg_catalog_job_file_put(server->catalog, job_id, &made, "[]");
    if (status == TG_CAT_NOT_FOUND) {
        fail(failure, "cancelled", "the job was cancelled or its model deleted");
        snprintf(failure->orphan, sizeof failure->orphan, "%s", made.sha256);
    } else if (status != TG_CAT_OK)
        fail(failure, "internal", "the catalog failed recording %s", source->path);
    else
        rc = 0;
out:
    for (size_t i = 0; names && i < vp->files.count; i++)
        free(names[i]);
    free(names);
    free(shards);
    free(text);
    free(out_text);
    free(stats);
    json_decref(root);
    sink_free(&s);
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
static bool already_made(tg_server *server, const tg_file_records *made, const char *path,
                         uint64_t size)
{
    const tg_file_record *file = find_path(made, path);
    if (file == NULL || file->size != size)
        return false;
    uint64_t stored = 0;
    return tg_blob_stat(server->blobs, file->sha256, &stored) == 0 && stored == size;
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
static int final_digest(const version_plan *vp, const tg_file_records *made, char hex[65])
{
    tg_file_record *files = malloc((vp->files.count ? vp->files.count : 1) * sizeof *files);
    if (files == NULL) {
        hex[0] = '\0';
        return -1;
    }
    /* same paths as the source, in the catalog's path order */
    for (size_t i = 0; i < vp->files.count; i++) {
        const tg_file_record *replaced = find_path(made, vp->files.items[i].path);
        files[i] = replaced ? *replaced : vp->files.items[i];
    }
    int rc = tg_manifest_digest(files, vp->files.count, hex);
    free(files);
    return rc;
}

/* Runs a claimed job to its commit. Returns 0 done, 1 stopped (stays running), -1 failed. */
static int run_job(tg_server *server, const tg_job *job, job_failure *failure)
{
    tg_convert_spec spec;
    json_t *globs_json = NULL;
    version_plan vp;
    memset(&vp, 0, sizeof vp);
    tg_file_records made = {0};
    uint8_t *source_buf = NULL;
    int rc = -1;
    if (job_spec(job, &spec, &globs_json, failure) != 0)
        goto out;
    if (plan_version(server, job->source_version_id, &spec, &vp, failure) != 0)
        goto out;
    if (vp.survey.shards_converted == 0) {
        fail(failure, "nothing_to_convert", "no tensor of version %lld changes dtype",
             (long long)job->source_number);
        goto out;
    }
    if (tg_catalog_job_file_list(server->catalog, job->id, tg_file_records_collect, &made) !=
            TG_CAT_OK ||
        made.failed) {
        fail(failure, "internal", "the catalog failed listing the job's files");
        goto out;
    }
    source_buf = malloc(SOURCE_CHUNK_BYTES);
    if (source_buf == NULL) {
        fail(failure, "internal", "out of memory");
        goto out;
    }
    progress p = {.job_id = job->id, .total = vp.survey.bytes_total};
    for (size_t i = 0; i < vp.files.count; i++) {
        const file_plan *fp = &vp.plans[i];
        if (fp->converted > 0 && already_made(server, &made, vp.files.items[i].path, fp->out_size))
            p.done += fp->out_size;
    }
    progress_add(server, &p, 0, true);
    if (p.done > 0)
        tg_log(TG_LOG_INFO, "job %lld: resuming at %llu of %llu bytes", (long long)job->id,
               (unsigned long long)p.done, (unsigned long long)p.total);
    for (size_t i = 0; i < vp.files.count; i++) {
        const file_plan *fp = &vp.plans[i];
        if (fp->converted == 0 || already_made(server, &made, vp.files.items[i].path, fp->out_size))
            continue;
        if (convert_shard(server, job->id, &vp.files.items[i], fp, &p, source_buf, failure) != 0)
            goto out;
    }
    progress_add(server, &p, 0, true);
    /* every index of a directory with a converted shard gets the new total_size */
    for (size_t i = 0; i < vp.files.count; i++) {
        if (!tg_is_index_path(vp.files.items[i].path))
            continue;
        bool changed = false;
        for (size_t j = 0; j < vp.files.count; j++)
            if (vp.plans[j].converted > 0 &&
                same_dir(vp.files.items[i].path, vp.files.items[j].path))
                changed = true;
        if (changed && rewrite_index(server, job->id, &vp, i, failure) != 0)
            goto out;
    }
    made.count = 0;
    if (tg_catalog_job_file_list(server->catalog, job->id, tg_file_records_collect, &made) !=
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
    tg_cat_status status = tg_catalog_job_commit(server->catalog, job->id, digest, &version);
    if (status == TG_CAT_NOT_FOUND || status == TG_CAT_CONFLICT) {
        /* cancelled, its model deleted, or its token revoked (the commit failed it
         * then): its rows are gone, and its blobs go unless something else uses them */
        fail(failure, "cancelled", "the job was cancelled or its model deleted");
        for (size_t i = 0; i < made.count; i++)
            (void)tg_blob_reclaim(server->blobs, server->catalog, made.items[i].sha256, false);
        goto out;
    }
    if (status != TG_CAT_OK) {
        fail(failure, "internal", "the catalog failed committing the version");
        goto out;
    }
    tg_log(TG_LOG_INFO, "job %lld: %s/%s version %lld derived from %lld (%s), digest %s",
           (long long)job->id, job->org, job->name, (long long)version.number,
           (long long)job->source_number, job->dtype, digest);
    rc = 0;
out:
    if (rc != 0 && strcmp(failure->reason, "stopped") == 0)
        rc = 1;
    free(source_buf);
    free(made.items);
    version_plan_free(&vp);
    json_decref(globs_json);
    return rc;
}

static void *worker_main(void *arg)
{
    tg_server *server = arg;
    tg_job *job = malloc(sizeof *job);
    if (job == NULL) {
        tg_log(TG_LOG_ERROR, "conversion worker: out of memory; no job will run");
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&runner.lock);
        while (!runner.stopping && !runner.pending)
            pthread_cond_wait(&runner.wake, &runner.lock);
        runner.pending = false;
        bool stop = runner.stopping;
        pthread_mutex_unlock(&runner.lock);
        if (stop)
            break;
        while (!stopping() && tg_catalog_job_claim(server->catalog, job) == TG_CAT_OK) {
            tg_log(TG_LOG_INFO, "job %lld: converting %s/%s version %lld to %s (attempt %lld)",
                   (long long)job->id, job->org, job->name, (long long)job->source_number,
                   job->dtype, (long long)job->attempts);
            job_failure failure = {"", "", ""};
            int rc = run_job(server, job, &failure);
            if (rc < 0) {
                tg_log(TG_LOG_WARN, "job %lld failed: %s: %s", (long long)job->id, failure.reason,
                       failure.detail);
                /* A cancelled job keeps the detail the cancel stored (NULL); one whose
                 * model was deleted is gone (ids are never reused, so no other job is
                 * touched), and failing it changes nothing. Its job_files rows go, and
                 * their blobs with them when nothing else uses them. */
                tg_file_records made = {0};
                (void)tg_catalog_job_file_list(server->catalog, job->id, tg_file_records_collect,
                                               &made);
                bool cancelled = strcmp(failure.reason, "cancelled") == 0;
                tg_catalog_job_fail(server->catalog, job->id, failure.reason,
                                    cancelled ? NULL : failure.detail);
                for (size_t i = 0; i < made.count; i++)
                    (void)tg_blob_reclaim(server->blobs, server->catalog, made.items[i].sha256,
                                          false);
                free(made.items);
                if (failure.orphan[0] != '\0')
                    (void)tg_blob_reclaim(server->blobs, server->catalog, failure.orphan, false);
            } else if (rc > 0) {
                tg_log(TG_LOG_INFO, "job %lld: stopped; it resumes at the next start",
                       (long long)job->id);
            }
        }
    }
    free(job);
    return NULL;
}

int tg_convert_jobs_start(tg_server *server, char *err, size_t err_len)
{
    unsigned requeued = 0, failed = 0;
    if (tg_catalog_job_recover(server->catalog, TG_CONVERT_MAX_ATTEMPTS, &requeued, &failed) !=
        TG_CAT_OK) {
        snprintf(err, err_len, "cannot recover the jobs of a previous run");
        return -1;
    }
    if (requeued > 0 || failed > 0)
        tg_log(TG_LOG_INFO, "jobs interrupted by the last stop: %u resumed, %u given up", requeued,
               failed);
    const char *delay = getenv("TENSORGATE_TEST_CONVERT_DELAY_MS");
    runner.delay_ms = delay ? (unsigned)strtoul(delay, NULL, 10) : 0;
    if (runner.delay_ms > 10000)
        runner.delay_ms = 10000;
    pthread_mutex_lock(&runner.lock);
    runner.server = server;
    runner.stopping = false;
    runner.pending = true; /* look for queued jobs at once */
    int rc = pthread_create(&runner.thread, NULL, worker_main, server);
    runner.started = rc == 0;
    pthread_mutex_unlock(&runner.lock);
    if (rc != 0) {
        snprintf(err, err_len, "cannot start the conversion worker: %s", strerror(rc));
        return -1;
    }
    return 0;
}

void tg_convert_jobs_wake(void)
{
    pthread_mutex_lock(&runner.lock);
    runner.pending = true;
    pthread_cond_signal(&runner.wake);
    pthread_mutex_unlock(&runner.lock);
}

void tg_convert_jobs_cancel(int64_t job_id)
{
    __atomic_store_n(&runner.cancel_job, job_id, __ATOMIC_RELEASE);
}

void tg_convert_jobs_stop(void)
{
    pthread_mutex_lock(&runner.lock);
    bool started = runner.started;
    __atomic_store_n(&runner.stopping, true, __ATOMIC_RELEASE);
    pthread_cond_signal(&runner.wake);
    pthread_mutex_unlock(&runner.lock);
    if (started)
        pthread_join(runner.thread, NULL);
    pthread_mutex_lock(&runner.lock);
    runner.started = false;
    pthread_mutex_unlock(&runner.lock);
}
