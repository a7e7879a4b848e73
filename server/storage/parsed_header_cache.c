/* Parsed headers of stored blobs (see parsed_header_cache.h): an instance of the
 * cache core (cache.h) keyed by the blob's sha256, whose entry holds one st_file,
 * or the error of a failed parse (shared with the requests that waited for it,
 * then dropped: failures are not remembered). */
#include "parsed_header_cache.h"
#include "cache.h"
#include "sha256.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    tg_cache_entry core; /* first: the cache core's part */
    int failure;         /* failed: tg_header_read_parse's -1 (damaged) or -2 (otherwise) */
    int failure_errno;   /* errno after a -2 (EMFILE is not damage) */
    st_error err;
    st_file file;        /* what readers get: &file */
    tg_gguf_header gguf; /* a GGUF entry's (key "<sha256>.gguf"): &gguf */
} entry;

struct tg_parsed_header_cache {
    tg_cache *entries;
};

static void destroy_entry(tg_cache_entry *e)
{
    st_file_free(&((entry *)e)->file);
    tg_gguf_header_free(&((entry *)e)->gguf);
}

tg_parsed_header_cache *tg_parsed_header_cache_create(size_t bytes, size_t entries)
{
    tg_parsed_header_cache *cache = calloc(1, sizeof *cache);
    tg_cache_config config = {.bytes = bytes,
                              .entries = entries > 0 ? entries : 1,
                              .entry_share = 2,
                              .shards = 1,
                              .buckets = 4096,
                              .loads = TG_PARSED_HEADER_PARSES,
                              .entry_size = sizeof(entry),
                              .destroy = destroy_entry};
    if (cache == NULL || (cache->entries = tg_cache_create(&config)) == NULL) {
        free(cache);
        return NULL;
    }
    return cache;
}

void tg_parsed_header_cache_destroy(tg_parsed_header_cache *cache)
{
    if (cache == NULL)
        return;
    tg_cache_destroy(cache->entries);
    free(cache);
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

/* ---- a GGUF blob's header ---- */

/* The first read; then as much as the parse asks for, at least doubling. */
#define GGUF_FIRST_READ ((size_t)64 * 1024)

void tg_gguf_header_free(tg_gguf_header *header)
{
    st_gguf_file_free(&header->file);
    free(header->bytes);
    header->bytes = NULL;
    header->len = 0;
}

/* Reads the header from blob into out (empty on entry) by growing prefixes; 0, -1 (the
 * parse failed: err says why) or -2 (out of memory, or the blob could not be read).
 * out is filled on success only: the buffer lives in locals until then. */
static int gguf_read_prefixes(tg_blob_reader *blob, uint64_t size, uint64_t max_header,
                              tg_gguf_header *out, st_error *err)
{
    uint64_t bound = size < max_header ? size : max_header;
    uint64_t want = bound < GGUF_FIRST_READ ? bound : GGUF_FIRST_READ;
    uint8_t *bytes = NULL;
    size_t len = 0;
    st_gguf_file file;
    int rc;
    for (;;) {
        uint8_t *grown = realloc(bytes, want ? (size_t)want : 1);
        if (grown == NULL) {
            st_error_set(err, ST_OUT_OF_MEMORY, 0, NULL, "out of memory for the GGUF header");
            rc = -2;
            break;
        }
        bytes = grown;
        if (want > len &&
            tg_blob_read_at(blob, bytes + len, (size_t)(want - len), (uint64_t)len) != 0) {
            st_error_set(err, ST_GGUF_TRUNCATED, len, NULL,
                         "the blob ended inside the GGUF header");
            rc = -1;
            break;
        }
        len = (size_t)want;
        uint64_t need = 0;
        st_reason reason = st_gguf_parse_header(bytes, len, size, max_header, &file, &need, err);
        if (reason == ST_OK) {
            out->bytes = bytes;
            out->len = len;
            out->file = file;
            return 0;
        }
        rc = reason == ST_OUT_OF_MEMORY ? -2 : -1;
        if (reason != ST_GGUF_TRUNCATED || need <= len || len >= bound)
            break;
        uint64_t next = 2 * (uint64_t)len;
        want = need > next ? need : next;
        if (want > bound)
            want = bound;
    }
    free(bytes);
    return rc;
}

int tg_gguf_read_parse(tg_blobstore *store, const char *sha256, uint64_t size, uint64_t max_header,
                       tg_gguf_header *out, st_error *err)
{
    memset(out, 0, sizeof *out);
    st_error_clear(err);
    tg_blob_check check;
    tg_blob_reader *blob = tg_blob_open(store, sha256, size, &check);
    if (blob == NULL) {
        int saved = errno;
        st_error_set(err, ST_GGUF_TRUNCATED, ST_NO_OFFSET, NULL,
                     check == TG_BLOB_UNREADABLE ? "the blob cannot be opened now"
                     : check == TG_BLOB_MISSING  ? "the blob is missing"
                                                 : "the blob's size on disk is not the catalog's");
        errno = saved;
        return check == TG_BLOB_UNREADABLE ? -2 : -1;
    }
    int rc = gguf_read_prefixes(blob, size, max_header, out, err);
    if (rc == -1 && max_header < ST_HEADER_SIZE_MAX) {
        /* the limit bounds the parse's room, so a header cut by a --max-header lowered
         * since the upload may fail for another reason (a string "longer than the
         * file"): read under the gate's own bound to tell that from damage */
        tg_gguf_header whole;
        st_error again;
        memset(&whole, 0, sizeof whole);
        if (gguf_read_prefixes(blob, size, ST_HEADER_SIZE_MAX, &whole, &again) == 0)
            st_error_set(err, ST_GGUF_HEADER_TOO_LARGE, 0, NULL,
                         "the GGUF header (%llu bytes) is above --max-header %llu",
                         (unsigned long long)whole.file.header_end, (unsigned long long)max_header);
        tg_gguf_header_free(&whole);
    }
    int saved = errno;
    tg_blob_close(blob);
    /* admitted at upload with the same size: a header that no longer parses is damage,
     * except one over a --max-header lowered since */
    if (rc == -1 && err->reason != ST_GGUF_HEADER_TOO_LARGE)
        tg_blob_mark_damaged(store, sha256, "its GGUF header no longer reads: %s", err->detail);
    else if (rc == -1)
        rc = -2;
    if (rc != 0)
        tg_gguf_header_free(out);
    errno = saved;
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

/* ---- the cache ---- */

typedef struct load_args {
    tg_blobstore *store;
    uint64_t size, max_header;
} load_args;

/* The core's loader: reads and parses the blob into e (a failure, its error). */
static tg_cache_load load(tg_cache_entry *core, void *arg, size_t *charge)
{
    entry *e = (entry *)core;
    const load_args *a = arg;
    int rc = tg_header_read_parse(a->store, core->key, a->size, a->max_header, &e->file, &e->err);
    if (rc != 0) {
        e->failure = rc;
        e->failure_errno = errno;
        return TG_CACHE_FAILED;
    }
    *charge = sizeof *e + file_bytes(&e->file);
    return TG_CACHE_KEEP;
}

/* A GGUF entry's charge: the header bytes and the two tables. */
static size_t gguf_bytes(const tg_gguf_header *h)
{
    return h->len + (size_t)h->file.tensor_count * sizeof(st_gguf_tensor) +
           (size_t)h->file.kv_count * sizeof(st_gguf_kv);
}

/* The core's loader of a GGUF entry (its key is "<sha256>.gguf"). */
static tg_cache_load load_gguf(tg_cache_entry *core, void *arg, size_t *charge)
{
    entry *e = (entry *)core;
    const load_args *a = arg;
    char sha256[TG_SHA256_HEX_LEN + 1];
    memcpy(sha256, core->key, TG_SHA256_HEX_LEN);
    sha256[TG_SHA256_HEX_LEN] = '\0';
    int rc = tg_gguf_read_parse(a->store, sha256, a->size, a->max_header, &e->gguf, &e->err);
    if (rc != 0) {
        e->failure = rc;
        e->failure_errno = errno;
        return TG_CACHE_FAILED;
    }
    *charge = sizeof *e + gguf_bytes(&e->gguf);
    return TG_CACHE_KEEP;
}

/* Acquires the entry under key (loaded by loader); NULL with err, *failure and errno
 * set when it failed. */
static entry *acquire_entry(tg_parsed_header_cache *cache, tg_blobstore *store, const char *sha256,
                            const char *key, tg_cache_loader loader, uint64_t size,
                            uint64_t max_header, st_error *err, int *failure)
{
    st_error_clear(err);
    *failure = -2;
    if (!tg_is_sha256_hex(sha256)) {
        st_error_set(err, ST_HEADER_TRUNCATED, ST_NO_OFFSET, NULL, "the blob name is not a sha256");
        errno = EINVAL;
        return NULL;
    }
    load_args args = {store, size, max_header};
    entry *e = (entry *)tg_cache_acquire(cache->entries, key, loader, &args);
    if (e == NULL) {
        st_error_set(err, ST_OUT_OF_MEMORY, 0, NULL, "out of memory for the header");
        errno = ENOMEM;
        return NULL;
    }
    if (!e->core.failed)
        return e;
    *err = e->err;
    *failure = e->failure;
    int failure_errno = e->failure_errno;
    tg_cache_release(cache->entries, &e->core);
    errno = failure_errno;
    return NULL;
}

const tg_gguf_header *tg_parsed_gguf_acquire(tg_parsed_header_cache *cache, tg_blobstore *store,
                                             const char *sha256, uint64_t size, uint64_t max_header,
                                             st_error *err, int *failure)
{
    st_error scratch;
    int scratch_failure;
    char key[TG_SHA256_HEX_LEN + 8];
    snprintf(key, sizeof key, "%.64s.gguf", sha256);
    entry *e = acquire_entry(cache, store, sha256, key, load_gguf, size, max_header,
                             err ? err : &scratch, failure ? failure : &scratch_failure);
    return e != NULL ? &e->gguf : NULL;
}

void tg_parsed_gguf_release(tg_parsed_header_cache *cache, const tg_gguf_header *header)
{
    if (header == NULL)
        return;
    entry *e = (entry *)(void *)((char *)(uintptr_t)header - offsetof(entry, gguf));
    tg_cache_release(cache->entries, &e->core);
}

const st_file *tg_parsed_header_acquire(tg_parsed_header_cache *cache, tg_blobstore *store,
                                        const char *sha256, uint64_t size, uint64_t max_header,
                                        st_error *err, int *failure)
{
    st_error scratch;
    int scratch_failure;
    entry *e = acquire_entry(cache, store, sha256, sha256, load, size, max_header,
                             err ? err : &scratch, failure ? failure : &scratch_failure);
    return e != NULL ? &e->file : NULL;
}

void tg_parsed_header_release(tg_parsed_header_cache *cache, const st_file *file)
{
    if (file == NULL)
        return;
    entry *e = (entry *)(void *)((char *)(uintptr_t)file - offsetof(entry, file));
    tg_cache_release(cache->entries, &e->core);
}

void tg_parsed_header_stats_get(tg_parsed_header_cache *cache, tg_parsed_header_stats *out)
{
    tg_cache_stats s;
    tg_cache_stats_get(cache->entries, &s);
    *out = (tg_parsed_header_stats){.entries = s.entries,
                                    .bytes = s.bytes,
                                    .in_use = s.in_use,
                                    .hits = s.hits,
                                    .parses = s.loads,
                                    .not_kept = s.not_kept,
                                    .failures = s.failures,
                                    .evictions = s.evictions};
}

int tg_parsed_header_metrics(tg_parsed_header_cache *cache, char *buf, size_t cap)
{
    tg_parsed_header_stats s;
    tg_parsed_header_stats_get(cache, &s);
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
