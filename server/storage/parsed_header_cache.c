/* Parsed headers of stored blobs (see parsed_header_cache.h): a chained hash table
 * by sha256 over the recency list of lru.h, one mutex and one condition variable.
 *
 * An entry holds one st_file and a reference count. Its states:
 *   loading   in the table, not on the list; its loader parses, others wait;
 *   kept      in the table and on the list, charged against the bounds;
 *   detached  in neither: a parse not kept, a failed parse, or an entry dropped
 *             by configure/clear while in use; freed when its last holder lets go.
 * Eviction removes kept entries nobody holds, oldest first. */
#include "parsed_header_cache.h"
#include "lru.h"
#include "sha_table.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct entry {
    tg_lru_node lru;   /* first: a kept entry is its node */
    tg_sha_node key;   /* in the table while findable */
    bool loading;      /* one thread is parsing the blob; others wait on `loaded` */
    bool kept;         /* in the table and on the recency list */
    bool failed;       /* the parse failed: err, failure and failure_errno say why; file is empty */
    int failure;       /* tg_header_read_parse's -1 (damaged) or -2 (otherwise) */
    int failure_errno; /* errno after a -2 (EMFILE is not damage) */
    unsigned refs;
    size_t charge; /* bytes counted against the budget while kept */
    st_error err;
    st_file file; /* what readers get: &file */
} entry;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
/* signalled when an entry stops loading, or a parse ends */
static pthread_cond_t loaded = PTHREAD_COND_INITIALIZER;
static tg_sha_table table;
static tg_lru recency;
static size_t budget_bytes = TG_PARSED_HEADER_CACHE_BYTES;
static size_t budget_entries = TG_PARSED_HEADER_CACHE_ENTRIES;
static unsigned parses_running;
/* Invariant: stats.entries and stats.bytes are the count and the sum of charges of
 * the kept entries; stats.in_use counts the entries with refs > 0. */
static tg_parsed_header_stats stats;

/* Checks the invariant above by walking the list (under the lock; O(entries)). */
static void check_stats(void)
{
    size_t entries = 0, bytes = 0;
    for (const tg_lru_node *n = recency.newest; n != NULL; n = n->older) {
        const struct entry *e = (const struct entry *)n;
        assert(e->kept && !e->loading && !e->failed);
        entries++;
        bytes += e->charge;
    }
    assert(stats.entries == entries && stats.bytes == bytes);
    (void)entries;
    (void)bytes;
}

/* ---- reading and parsing one blob ---- */

int tg_header_read_parse(tg_blobstore *store, const char *sha256, uint64_t size,
                         uint64_t max_header, st_file *out, st_error *err)
{
    memset(out, 0, sizeof *out);
    st_error_clear(err);
    tg_blob_check check;
    tg_blob_reader *blob = tg_blob_open(store, sha256, size, &check);
    if (blob == NULL) {
        int saved = errno; /* kept for the caller: EMFILE is not "missing" (resources.h) */
        st_error_set(err, ST_HEADER_TRUNCATED, ST_NO_OFFSET, NULL,
                     check == TG_BLOB_UNREADABLE ? "the blob cannot be opened now"
                     : check == TG_BLOB_MISSING  ? "the blob is missing"
                                                 : "the blob's size on disk is not the catalog's");
        errno = saved;
        return check == TG_BLOB_UNREADABLE ? -2 : -1;
    }
    st_limits limits = {.max_header_size = max_header, .max_depth = 0};
    uint8_t prefix[8];
    uint64_t header_size = 0;
    int rc = -1;
    uint8_t *buf = NULL;
    if (tg_blob_read_at(blob, prefix, sizeof prefix, 0) != 0) {
        st_error_set(err, ST_FILE_TOO_SMALL, 0, NULL, "the blob is shorter than 8 bytes");
        goto out;
    }
    /* N is re-checked against the limit and the size before it sizes an allocation. */
    if (st_header_length(prefix, sizeof prefix, size, &limits, &header_size, err) != ST_OK)
        goto out;
    size_t total = (size_t)(8 + header_size);
    buf = malloc(total);
    if (buf == NULL) {
        st_error_set(err, ST_OUT_OF_MEMORY, 0, NULL, "out of memory for the header");
        rc = -2;
        goto out;
    }
    if (tg_blob_read_at(blob, buf, total, 0) != 0) {
        st_error_set(err, ST_HEADER_TRUNCATED, 0, NULL, "the blob ended inside the header");
        goto out;
    }
    if (st_header_parse(buf, total, size, &limits, out, err) == ST_OK)
        rc = 0;
out:
    free(buf);
    tg_blob_close(blob);
    /* The gate accepted this header at upload and the size matches: a header that
     * no longer reads is damage, except one over a --max-header lowered since, or one
     * this process has no memory for. */
    if (rc == -1 && err->reason != ST_HEADER_TOO_LARGE && err->reason != ST_OUT_OF_MEMORY)
        tg_blob_mark_damaged(store, sha256, "its safetensors header no longer reads: %s",
                             err->detail);
    else if (rc == -1)
        rc = -2;
    return rc;
}

/* What a parsed header holds: lib/st_header.c puts it in one allocation (a small
 * head, the tensor table, the name index, the metadata entries, the shapes, the
 * strings); this adds the same parts up from the public fields. */
static size_t file_bytes(const st_file *f)
{
    size_t bytes = 2 * sizeof(void *) + f->tensor_count * (sizeof(st_tensor) + sizeof(void *)) +
                   f->metadata_count * sizeof(st_metadata_entry);
    for (size_t i = 0; i < f->tensor_count; i++)
        bytes += f->tensors[i].rank * sizeof(uint64_t) + f->tensors[i].name_len + 1;
    for (size_t i = 0; i < f->metadata_count; i++)
        bytes += strlen(f->metadata[i].key) + 1 + strlen(f->metadata[i].value) + 1;
    return bytes;
}

/* ---- the table (everything below runs under cache_lock) ---- */

static entry *find(const char *sha256)
{
    return TG_SHA_ENTRY(tg_sha_table_find(&table, sha256), entry, key);
}

static void unlink_bucket(entry *e)
{
    tg_sha_table_remove(&table, &e->key);
}

static void destroy(entry *e)
{
    st_file_free(&e->file);
    free(e);
}

/* Takes a kept entry out of the table and the list; frees it unless someone holds it. */
static void drop_kept(entry *e)
{
    assert(e->kept && stats.entries > 0 && stats.bytes >= e->charge);
    unlink_bucket(e);
    tg_lru_unlink(&recency, &e->lru);
    e->kept = false;
    stats.entries--;
    stats.bytes -= e->charge;
    if (e->refs == 0)
        destroy(e);
}

/* Evicts kept entries nobody holds, oldest first, until both bounds hold (or only
 * entries in use are left over them). */
static void trim(void)
{
    tg_lru_node *n = recency.oldest;
    while (n != NULL && (stats.entries > budget_entries || stats.bytes > budget_bytes)) {
        entry *e = (entry *)n;
        n = n->newer;
        if (e->refs > 0)
            continue;
        drop_kept(e);
        stats.evictions++;
    }
}

static void hold(entry *e)
{
    if (e->refs++ == 0)
        stats.in_use++;
}

static void unhold(entry *e)
{
    assert(e->refs > 0 && stats.in_use > 0);
    if (--e->refs > 0)
        return;
    stats.in_use--;
    if (e->kept)
        trim(); /* it may have been left over the bounds while in use */
    else if (!e->loading)
        destroy(e);
}

/* Drops every kept entry (those in use are freed when released). */
static void drop_all(void)
{
    while (recency.oldest != NULL)
        drop_kept((entry *)recency.oldest);
}

/* Parses the blob for the loading entry e, which the caller holds (called with the
 * lock held, returns with it held). Keeps the result when it fits; else e leaves
 * the table and lives as long as its holders. */
static void load(entry *e, tg_blobstore *store, uint64_t size, uint64_t max_header)
{
    while (parses_running >= TG_PARSED_HEADER_PARSES)
        pthread_cond_wait(&loaded, &cache_lock);
    parses_running++;
    pthread_mutex_unlock(&cache_lock);
    st_file file;
    st_error err;
    int rc = tg_header_read_parse(store, e->key.sha256, size, max_header, &file, &err);
    int saved_errno = errno;
    size_t charge = rc == 0 ? sizeof *e + file_bytes(&file) : 0;
    pthread_mutex_lock(&cache_lock);
    assert(parses_running > 0 && e->loading && !e->kept && e->refs > 0);
    parses_running--;
    stats.parses++;
    e->loading = false;
    if (rc != 0) {
        e->failed = true;
        e->err = err;
        e->failure = rc;
        e->failure_errno = saved_errno;
        stats.failures++;
        unlink_bucket(e);
    } else if (charge > budget_bytes / 2) {
        e->file = file;
        stats.not_kept++;
        unlink_bucket(e);
    } else {
        e->file = file;
        e->charge = charge;
        e->kept = true;
        tg_lru_push_newest(&recency, &e->lru);
        stats.entries++;
        stats.bytes += charge;
        trim();
    }
    pthread_cond_broadcast(&loaded);
}

const st_file *tg_parsed_header_acquire(tg_blobstore *store, const char *sha256, uint64_t size,
                                        uint64_t max_header, st_error *err, int *failure)
{
    st_error scratch;
    int scratch_failure;
    if (err == NULL)
        err = &scratch;
    if (failure == NULL)
        failure = &scratch_failure;
    st_error_clear(err);
    *failure = -2;
    if (!tg_is_sha256_hex(sha256)) {
        st_error_set(err, ST_HEADER_TRUNCATED, ST_NO_OFFSET, NULL, "the blob name is not a sha256");
        errno = EINVAL;
        return NULL;
    }
    pthread_mutex_lock(&cache_lock);
    entry *e = find(sha256);
    if (e != NULL) {
        hold(e); /* so it outlives its load, whatever the load decides */
        while (e->loading)
            pthread_cond_wait(&loaded, &cache_lock);
        if (!e->failed)
            stats.hits++;
        if (e->kept) {
            tg_lru_unlink(&recency, &e->lru);
            tg_lru_push_newest(&recency, &e->lru);
        }
    } else {
        e = calloc(1, sizeof *e);
        if (e == NULL) {
            pthread_mutex_unlock(&cache_lock);
            st_error_set(err, ST_OUT_OF_MEMORY, 0, NULL, "out of memory for the header");
            errno = ENOMEM;
            return NULL;
        }
        e->loading = true;
        tg_sha_table_add(&table, &e->key, sha256);
        hold(e);
        load(e, store, size, max_header);
    }
    const st_file *file = &e->file;
    int failure_errno = 0;
    if (e->failed) {
        *err = e->err;
        *failure = e->failure;
        failure_errno = e->failure_errno;
        file = NULL;
        unhold(e);
    }
    pthread_mutex_unlock(&cache_lock);
    if (file == NULL)
        errno = failure_errno;
    return file;
}

void tg_parsed_header_release(const st_file *file)
{
    if (file == NULL)
        return;
    entry *e = (entry *)(void *)((char *)(uintptr_t)file - offsetof(entry, file));
    pthread_mutex_lock(&cache_lock);
    unhold(e);
    pthread_mutex_unlock(&cache_lock);
}

void tg_parsed_header_stats_get(tg_parsed_header_stats *out)
{
    pthread_mutex_lock(&cache_lock);
    check_stats();
    *out = stats;
    pthread_mutex_unlock(&cache_lock);
}

int tg_parsed_header_metrics(char *buf, size_t cap)
{
    tg_parsed_header_stats s;
    tg_parsed_header_stats_get(&s);
    return snprintf(
        buf, cap,
        "# HELP tensorgate_header_cache_parses_total Stored safetensors headers read and parsed "
        "for tensor reads (a miss of the parsed-header cache).\n"
        "# TYPE tensorgate_header_cache_parses_total counter\n"
        "tensorgate_header_cache_parses_total %llu\n"
        "# HELP tensorgate_header_cache_hits_total Tensor reads answered by a parsed header "
        "already kept or being parsed.\n"
        "# TYPE tensorgate_header_cache_hits_total counter\n"
        "tensorgate_header_cache_hits_total %llu\n"
        "# HELP tensorgate_header_cache_evictions_total Parsed headers dropped for the cache's "
        "bounds.\n"
        "# TYPE tensorgate_header_cache_evictions_total counter\n"
        "tensorgate_header_cache_evictions_total %llu\n"
        "# HELP tensorgate_header_cache_not_kept_total Parsed headers too large to keep (more "
        "than half of --header-cache-bytes), freed after their requests.\n"
        "# TYPE tensorgate_header_cache_not_kept_total counter\n"
        "tensorgate_header_cache_not_kept_total %llu\n"
        "# HELP tensorgate_header_cache_bytes Bytes held by the kept parsed headers.\n"
        "# TYPE tensorgate_header_cache_bytes gauge\n"
        "tensorgate_header_cache_bytes %llu\n"
        "# HELP tensorgate_header_cache_entries Parsed headers kept.\n"
        "# TYPE tensorgate_header_cache_entries gauge\n"
        "tensorgate_header_cache_entries %llu\n",
        (unsigned long long)s.parses, (unsigned long long)s.hits, (unsigned long long)s.evictions,
        (unsigned long long)s.not_kept, (unsigned long long)s.bytes, (unsigned long long)s.entries);
}

void tg_parsed_header_cache_configure(size_t bytes, size_t entries)
{
    pthread_mutex_lock(&cache_lock);
    drop_all();
    budget_bytes = bytes;
    budget_entries = entries > 0 ? entries : 1;
    pthread_mutex_unlock(&cache_lock);
}

void tg_parsed_header_cache_clear(void)
{
    pthread_mutex_lock(&cache_lock);
    drop_all();
    assert(stats.entries == 0 && stats.bytes == 0);
    size_t in_use = stats.in_use;
    stats = (tg_parsed_header_stats){0};
    stats.in_use = in_use;
    pthread_mutex_unlock(&cache_lock);
}
