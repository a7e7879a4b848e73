/* The ingest pipeline (see pipeline.h). */
#include "pipeline.h"

#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "st_stats.h"

int tg_ingest_begin(tg_ingest *ingest, const tg_ingest_config *config)
{
    memset(ingest, 0, sizeof *ingest);
    ingest->config = *config;
    ingest->writer = NULL;
    ingest->begun = true;
    st_gate_config gate_config = {
        .limits = {.max_header_size = config->max_header, .max_depth = 0},
        .kind = config->kind,
        .name = config->name,
        .refuse_nonfinite = config->refuse_nonfinite,
        .allow_code = config->allow_code,
        .sidecar_max_size = 0,
        .reserve = config->reserve,
        .release = config->release,
        .budget_context = config->budget_context,
    };
    ingest->gate = st_gate_new(&gate_config, config->declared);
    if (ingest->gate == NULL) {
        ingest->state = TG_INGEST_FAILED;
        ingest->error = TG_INGEST_ERROR_MEMORY;
        ingest->os_errno = errno;
        return -1;
    }
    if (tg_sha256_init(&ingest->sha, config->digest_name) != 0) {
        ingest->state = TG_INGEST_FAILED;
        ingest->error = TG_INGEST_ERROR_DIGEST;
        return -1;
    }
    if (config->store != NULL &&
        tg_blob_write_begin(config->store, &ingest->writer) != TG_STORE_OK) {
        int saved = errno;
        ingest->writer = NULL;
        ingest->state = TG_INGEST_FAILED;
        ingest->error = TG_INGEST_ERROR_TEMP;
        ingest->os_errno = saved;
        errno = saved;
        return -1;
    }
    return 0;
}

/* ---- hashing on its own thread ----
 * SHA-256 is the one CPU-bound step of an ingest (97% of its instructions under
 * callgrind); receiving, the gate and the temp file's writes are mostly the kernel's.
 * Past TG_INGEST_HASH_THREAD_AFTER bytes the digest moves to a thread fed through
 * HASH_SLOTS buffers of HASH_SLOT_BYTES: feed copies the bytes in (a memcpy, ~5x
 * faster than the hash) and goes on; it waits only when every buffer is full.
 * Bytes are hashed in the order fed. The digest's state moves into the ring while
 * the thread runs and back when it is joined (at the digest, or at abort).
 * A side that has to wait sleeps until half the ring is ready for it (HASH_WAKE
 * slots full for the thread, free for the feeder), not one slot: each sleep then
 * covers 1 MiB. With 256 KiB slots woken one by one, a 1 GiB upload cost the server
 * 8-12k context switches and 1.08-1.10 CPU s; with these, 5-6.5k and 1.00-1.03
 * (perf stat, 2 cores, docs/PERFORMANCE.md goal 5). */

#define HASH_SLOTS 4
#define HASH_SLOT_BYTES ((size_t)512 * 1024)
#define HASH_WAKE (HASH_SLOTS / 2)

typedef struct tg_hash_ring {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    tg_sha256 sha; /* owned by the thread while it runs */
    uint8_t *slot[HASH_SLOTS];
    size_t len[HASH_SLOTS];
    unsigned head;  /* the next full slot to hash */
    unsigned count; /* full slots */
    size_t fill;    /* bytes in the slot being filled: (head + count) % HASH_SLOTS */
    bool closing;   /* no more bytes: hash what is full, then end */
    bool cancel;    /* abort: drop what is left */
    bool hasher_waiting, feeder_waiting; /* asleep until HASH_WAKE slots are full / free */
} tg_hash_ring;

static void *hash_ring_main(void *arg)
{
    tg_hash_ring *r = arg;
    pthread_mutex_lock(&r->lock);
    for (;;) {
        if (r->count == 0 && !r->closing && !r->cancel) {
            r->hasher_waiting = true;
            while (r->count < HASH_WAKE && !r->closing && !r->cancel)
                pthread_cond_wait(&r->changed, &r->lock);
            r->hasher_waiting = false;
        }
        if (r->cancel || r->count == 0)
            break;
        unsigned index = r->head;
        pthread_mutex_unlock(&r->lock);
        (void)tg_sha256_update(&r->sha, r->slot[index], r->len[index]); /* shows at the digest */
        pthread_mutex_lock(&r->lock);
        r->head = (r->head + 1) % HASH_SLOTS;
        r->count--;
        if (r->feeder_waiting && HASH_SLOTS - r->count >= HASH_WAKE)
            pthread_cond_broadcast(&r->changed);
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

static void hash_ring_free(tg_hash_ring *r)
{
    for (int i = 0; i < HASH_SLOTS; i++)
        free(r->slot[i]);
    free(r);
}

/* Moves the digest to a new thread; false (hashing stays inline) when it cannot. */
static bool hash_ring_start(tg_ingest *ingest)
{
    tg_hash_ring *r = calloc(1, sizeof *r);
    if (r == NULL)
        return false;
    for (int i = 0; i < HASH_SLOTS; i++)
        if ((r->slot[i] = malloc(HASH_SLOT_BYTES)) == NULL) {
            hash_ring_free(r);
            return false;
        }
    if (pthread_mutex_init(&r->lock, NULL) != 0) {
        hash_ring_free(r);
        return false;
    }
    if (pthread_cond_init(&r->changed, NULL) != 0) {
        pthread_mutex_destroy(&r->lock);
        hash_ring_free(r);
        return false;
    }
    r->sha = ingest->sha;
    if (pthread_create(&r->thread, NULL, hash_ring_main, r) != 0) {
        pthread_cond_destroy(&r->changed);
        pthread_mutex_destroy(&r->lock);
        hash_ring_free(r);
        return false;
    }
    memset(&ingest->sha, 0, sizeof ingest->sha); /* the ring's now */
    ingest->hasher = r;
    return true;
}

static void hash_ring_put(tg_hash_ring *r, const uint8_t *data, size_t len)
{
    while (len > 0) {
        pthread_mutex_lock(&r->lock);
        if (r->count == HASH_SLOTS) {
            r->feeder_waiting = true;
            while (HASH_SLOTS - r->count < HASH_WAKE)
                pthread_cond_wait(&r->changed, &r->lock);
            r->feeder_waiting = false;
        }
        unsigned index = (r->head + r->count) % HASH_SLOTS;
        size_t at = r->fill;
        pthread_mutex_unlock(&r->lock);
        /* the slot being filled is this thread's alone */
        size_t n = len < HASH_SLOT_BYTES - at ? len : HASH_SLOT_BYTES - at;
        memcpy(r->slot[index] + at, data, n);
        data += n;
        len -= n;
        pthread_mutex_lock(&r->lock);
        r->fill = at + n;
        if (r->fill == HASH_SLOT_BYTES) {
            r->len[index] = HASH_SLOT_BYTES;
            r->count++;
            r->fill = 0;
            if (r->hasher_waiting && r->count >= HASH_WAKE)
                pthread_cond_broadcast(&r->changed);
        }
        pthread_mutex_unlock(&r->lock);
    }
}

/* Ends the thread (hashing what is left unless cancel) and takes the digest back. */
static void hash_ring_stop(tg_ingest *ingest, bool cancel)
{
    tg_hash_ring *r = ingest->hasher;
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->lock);
    if (r->fill > 0) {
        /* count < HASH_SLOTS: the slot being filled is free */
        r->len[(r->head + r->count) % HASH_SLOTS] = r->fill;
        r->count++;
        r->fill = 0;
    }
    r->closing = true;
    r->cancel = cancel;
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
    ingest->sha = r->sha;
    pthread_cond_destroy(&r->changed);
    pthread_mutex_destroy(&r->lock);
    hash_ring_free(r);
    ingest->hasher = NULL;
}

/* Every byte the digest covers goes through here, in order. */
static void hash_bytes(tg_ingest *ingest, const uint8_t *data, size_t len)
{
    ingest->hashed += len;
    if (ingest->hasher == NULL && ingest->hashed_inline < TG_INGEST_HASH_THREAD_AFTER) {
        ingest->hashed_inline += len;
        (void)tg_sha256_update(&ingest->sha, data, len); /* a failure shows at the digest */
        return;
    }
    if (ingest->hasher == NULL && !hash_ring_start(ingest)) {
        (void)tg_sha256_update(&ingest->sha, data, len);
        return;
    }
    hash_ring_put(ingest->hasher, data, len);
}

static void drop_writer(tg_ingest *ingest)
{
    tg_blob_write_abort(ingest->writer);
    ingest->writer = NULL;
}

/* Nothing of a refused or failed ingest stays on disk. */
static void stop(tg_ingest *ingest, tg_ingest_state state, tg_ingest_error error, int os_errno)
{
    ingest->state = state;
    ingest->error = error;
    ingest->os_errno = os_errno;
    drop_writer(ingest);
}

/* After a stop: the bytes are counted and dropped; a pending verdict's gate still
 * reads them (bounded: it keeps a tail ring), hash_after_stop still hashes them. */
static void drain(tg_ingest *ingest, const uint8_t *data, size_t len)
{
    ingest->drained += len;
    if (ingest->config.hash_after_stop)
        hash_bytes(ingest, data, len);
    if (ingest->verdict_pending)
        (void)st_gate_feed(ingest->gate, data, len);
    if (ingest->drained > ingest->config.drain_limit)
        ingest->abandon = true;
}

/* True when the chunk just fed ends the ingest as a refusal: final, or (with
 * stop_when_certain) certain, with the format's name pending until the end. */
static bool refusal_reached(tg_ingest *ingest, st_gate_status status)
{
    if (status == ST_GATE_REFUSED)
        return true;
    if (!ingest->config.stop_when_certain || !st_gate_refusal_certain(ingest->gate))
        return false;
    ingest->verdict_pending = true;
    return true;
}

tg_ingest_state tg_ingest_feed(tg_ingest *ingest, const void *bytes, size_t len)
{
    const uint8_t *data = bytes;
    assert(ingest->begun && ingest->gate != NULL);
    if (ingest->state != TG_INGEST_OPEN || ingest->finished) {
        drain(ingest, data, len);
        return ingest->state;
    }
    uint64_t after;
    if (__builtin_add_overflow(ingest->seen, (uint64_t)len, &after) ||
        after > ingest->config.max_bytes) {
        stop(ingest, TG_INGEST_TOO_LARGE, TG_INGEST_ERROR_NONE, 0);
        ingest->drained += len;
        return ingest->state;
    }
    st_gate_status status = st_gate_feed(ingest->gate, data, len);
    if (st_gate_over_budget(ingest->gate)) {
        /* refused at once, the rest unread: holding the source is what pins memory */
        stop(ingest, TG_INGEST_OVER_BUDGET, TG_INGEST_ERROR_NONE, 0);
        ingest->drained += len;
        ingest->abandon = true;
        return ingest->state;
    }
    if (st_gate_out_of_memory(ingest->gate)) {
        stop(ingest, TG_INGEST_FAILED, TG_INGEST_ERROR_MEMORY, ENOMEM);
        return ingest->state;
    }
    if (refusal_reached(ingest, status)) {
        stop(ingest, TG_INGEST_REFUSED, TG_INGEST_ERROR_NONE, 0);
        ingest->drained += len;
        if (ingest->config.hash_after_stop)
            hash_bytes(ingest, data, len);
        return ingest->state;
    }
    if (ingest->writer != NULL) {
        tg_store_status written = tg_blob_write(ingest->writer, data, len);
        if (written != TG_STORE_OK) {
            stop(ingest, written == TG_STORE_NO_SPACE ? TG_INGEST_NO_SPACE : TG_INGEST_FAILED,
                 TG_INGEST_ERROR_WRITE, errno);
            return ingest->state;
        }
    }
    hash_bytes(ingest, data, len);
    ingest->seen = after;
    return ingest->state;
}

uint64_t tg_ingest_received(const tg_ingest *ingest)
{
    return ingest->seen + ingest->drained;
}

/* Refusals that depend on the file's size (the declared one, while it streams). */
static bool judged_declared_size(st_reason reason)
{
    return reason == ST_FILE_TOO_SMALL || reason == ST_HEADER_TRUNCATED ||
           reason == ST_DATA_TRAILING || reason == ST_DATA_TRUNCATED;
}

tg_ingest_state tg_ingest_finish(tg_ingest *ingest)
{
    assert(ingest->begun && ingest->gate != NULL);
    if (ingest->finished)
        return ingest->state;
    ingest->finished = true;
    uint64_t declared = ingest->config.declared;
    uint64_t received = tg_ingest_received(ingest);
    if (ingest->config.check_length && declared != ST_FILE_SIZE_UNKNOWN && received != declared) {
        /* The gate judged the file at its declared size: a source that ended at
         * another makes the length what is wrong, also when the gate refused for a
         * reason that depends on the size. A pending verdict stays the head's. */
        if (ingest->state == TG_INGEST_OPEN) {
            stop(ingest, TG_INGEST_LENGTH_MISMATCH, TG_INGEST_ERROR_NONE, 0);
        } else if (ingest->state == TG_INGEST_REFUSED && received < declared) {
            st_verdict verdict;
            st_gate_verdict(ingest->gate, &verdict);
            if (judged_declared_size(verdict.error.reason))
                ingest->state = TG_INGEST_LENGTH_MISMATCH;
        }
        return ingest->state;
    }
    if (ingest->verdict_pending) {
        /* the whole source went through the gate: its final verdict (the tail may
         * name the format); still a refusal */
        ingest->verdict_pending = false;
        (void)st_gate_finish(ingest->gate);
        if (st_gate_out_of_memory(ingest->gate))
            stop(ingest, TG_INGEST_FAILED, TG_INGEST_ERROR_MEMORY, ENOMEM);
        return ingest->state;
    }
    if (ingest->state != TG_INGEST_OPEN)
        return ingest->state;
    st_gate_status status = st_gate_finish(ingest->gate);
    if (st_gate_out_of_memory(ingest->gate)) {
        if (st_gate_over_budget(ingest->gate))
            stop(ingest, TG_INGEST_OVER_BUDGET, TG_INGEST_ERROR_NONE, 0);
        else
            stop(ingest, TG_INGEST_FAILED, TG_INGEST_ERROR_MEMORY, ENOMEM);
    } else if (status != ST_GATE_ACCEPTED) {
        stop(ingest, TG_INGEST_REFUSED, TG_INGEST_ERROR_NONE, 0);
    }
    return ingest->state;
}

int tg_ingest_digest(tg_ingest *ingest, char hex[65])
{
    hash_ring_stop(ingest, false);
    return tg_sha256_final_hex(&ingest->sha, hex);
}

int tg_ingest_whole_digest(tg_ingest *ingest, char hex[65])
{
    hex[0] = '\0';
    uint64_t received = tg_ingest_received(ingest);
    uint64_t declared = ingest->config.declared;
    if (!ingest->begun || !ingest->finished || ingest->hashed != received ||
        (declared != ST_FILE_SIZE_UNKNOWN && declared != received))
        return -1;
    return tg_ingest_digest(ingest, hex);
}

/* The stats column: [[nan, inf], ...] per tensor of a safetensors file, [] otherwise;
 * file's nan/inf get the totals. NULL when out of memory. */
static char *stats_text(const st_file *parsed, const st_tensor_stats *stats, tg_file_record *file)
{
    json_t *array = json_array();
    if (array == NULL)
        return NULL;
    file->nan = file->inf = 0;
    for (size_t i = 0; parsed != NULL && stats != NULL && i < parsed->tensor_count; i++) {
        if (json_array_append_new(array, json_pack("[I,I]", (json_int_t)stats[i].nan,
                                                   (json_int_t)stats[i].inf)) != 0) {
            json_decref(array);
            return NULL;
        }
        file->nan += stats[i].nan;
        file->inf += stats[i].inf;
    }
    char *text = json_dumps(array, JSON_COMPACT);
    json_decref(array);
    return text;
}

static int commit_failed(tg_ingest *ingest, tg_ingest_state state, tg_ingest_error error,
                         int os_errno)
{
    stop(ingest, state, error, os_errno);
    errno = os_errno;
    return -1;
}

int tg_ingest_commit(tg_ingest *ingest, const char *path, tg_file_record *file,
                     tg_ingest_record_fn record, void *ctx)
{
    assert(ingest->finished && ingest->state == TG_INGEST_OPEN && ingest->config.store != NULL &&
           ingest->writer != NULL);
    memset(file, 0, sizeof *file);
    snprintf(file->path, sizeof file->path, "%s", path);
    file->size = ingest->seen;
    if (tg_ingest_digest(ingest, file->sha256) != 0)
        return commit_failed(ingest, TG_INGEST_FAILED, TG_INGEST_ERROR_DIGEST, 0);
    const st_file *parsed = st_gate_file(ingest->gate);
    st_verdict judged;
    st_gate_verdict(ingest->gate, &judged);
    if (judged.code.reason != ST_OK) {
        /* code the namespace's policy admitted: its kind says so whatever it holds */
        snprintf(file->kind, sizeof file->kind, "code");
        snprintf(file->code_reason, sizeof file->code_reason, "%s",
                 st_reason_name(judged.code.reason));
    }
    if (parsed != NULL) {
        if (file->kind[0] == '\0')
            snprintf(file->kind, sizeof file->kind, "safetensors");
        uint64_t counts[ST_DTYPE_COUNT];
        file->tensors = parsed->tensor_count;
        st_file_parameter_counts(parsed, counts, &file->parameters);
    } else {
        st_verdict verdict;
        st_gate_verdict(ingest->gate, &verdict);
        /* json, text, or the inert format's name (png, jpeg, gif, webp, sentencepiece) */
        const char *kind = verdict.format == ST_FORMAT_JSON   ? "json"
                           : verdict.format == ST_FORMAT_TEXT ? "text"
                                                              : st_format_name(verdict.format);
        if (file->kind[0] == '\0')
            snprintf(file->kind, sizeof file->kind, "%s", kind != NULL ? kind : "text");
    }
    char *stats = stats_text(parsed, st_gate_stats(ingest->gate), file);
    if (stats == NULL)
        return commit_failed(ingest, TG_INGEST_FAILED, TG_INGEST_ERROR_MEMORY, ENOMEM);
    /* Durable blob first, catalog row second, both under the shared blobs lock: a
     * crash in between leaves only an unreferenced blob, and a concurrent gc cannot
     * take the blob from under its row. */
    tg_blobstore *store = ingest->config.store;
    int blobs_lock = tg_blobstore_lock(store, false, true);
    if (blobs_lock < 0) {
        int saved = errno;
        free(stats);
        return commit_failed(ingest, TG_INGEST_FAILED, TG_INGEST_ERROR_LOCK, saved);
    }
    tg_store_status committed = tg_blob_write_commit(ingest->writer, file->sha256);
    int saved = errno;
    ingest->writer = NULL; /* freed, and what it wrote committed or dropped, in every case */
    if (committed != TG_STORE_OK) {
        tg_blobstore_unlock(store, blobs_lock);
        free(stats);
        return commit_failed(ingest,
                             committed == TG_STORE_NO_SPACE ? TG_INGEST_NO_SPACE : TG_INGEST_FAILED,
                             TG_INGEST_ERROR_COMMIT, saved);
    }
    ingest->state = TG_INGEST_COMMITTED;
    record(ctx, file, stats);
    tg_blobstore_unlock(store, blobs_lock);
    free(stats);
    return 0;
}

void tg_ingest_abort(tg_ingest *ingest)
{
    if (!ingest->begun)
        return;
    drop_writer(ingest);
    st_gate_free(ingest->gate);
    ingest->gate = NULL;
    hash_ring_stop(ingest, true);
    tg_sha256_free(&ingest->sha);
    ingest->begun = false;
}
