/* Unit tests for server/storage/parsed_header_cache.c: one parse then hits, the byte and
 * entry bounds with least-recently-used eviction, an entry held by a reader that
 * survives eviction and is freed on release, a header too large to keep, failures
 * (shared with the waiters, not remembered), and 8 threads acquiring and releasing
 * while entries are evicted (run under ASan+UBSan by make test). Each test makes its
 * own cache; an entry cleared while held is the cache core's test
 * (tests/unit/common/cache.c). */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "blobstore.h"
#include "parsed_header_cache.h"
#include "store.h"
#include "test.h"

static tg_store store;
static tg_blobstore *blobs; /* the same directory, through the interface the caches use */
static char root[64];
static tg_parsed_header_cache *cache; /* each test makes its own (renew) */

/* Replaces the cache by an empty one with these bounds. */
static void renew(size_t bytes, size_t entries)
{
    tg_parsed_header_cache_destroy(cache);
    cache = tg_parsed_header_cache_create(bytes, entries);
    CHECK(cache != NULL);
}

/* A made-up blob name for file number k (the cache does not hash the content). */
static void blob_name(unsigned k, char out[TG_SHA256_HEX_LEN + 1])
{
    snprintf(out, TG_SHA256_HEX_LEN + 1, "%064u", k);
}

static void put_blob(unsigned k, const void *bytes, size_t len)
{
    char sha[TG_SHA256_HEX_LEN + 1];
    blob_name(k, sha);
    int fd = -1;
    char temp[4400];
    CHECK(tg_store_temp_create(&store, &fd, temp, sizeof temp) == 0);
    CHECK(tg_store_write_all(fd, bytes, len) == TG_STORE_OK);
    CHECK(tg_store_commit_blob(&store, fd, temp, sha) == TG_STORE_OK);
}

/* File k: `count` U8 tensors "f<k>.t<i>" of shape [2], two bytes each. Returns its size. */
static size_t put_file(unsigned k, unsigned count)
{
    size_t cap = 64 + (size_t)count * 96, len = 8;
    char *bytes = malloc(cap + 2 * (size_t)count);
    char *h = bytes + 8;
    len += (size_t)snprintf(h, cap, "{");
    for (unsigned i = 0; i < count; i++)
        len += (size_t)snprintf(bytes + len, cap - len,
                                "%s\"f%u.t%u\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":"
                                "[%u,%u]}",
                                i ? "," : "", k, i, 2 * i, 2 * i + 2);
    len += (size_t)snprintf(bytes + len, cap - len, "}");
    while (len % 8 != 0)
        bytes[len++] = ' ';
    uint64_t n = len - 8;
    for (int b = 0; b < 8; b++)
        bytes[b] = (char)(n >> (8 * b));
    memset(bytes + len, 7, 2 * (size_t)count);
    len += 2 * (size_t)count;
    put_blob(k, bytes, len);
    free(bytes);
    return len;
}

static const st_file *acquire(unsigned k, size_t size, st_error *err)
{
    char sha[TG_SHA256_HEX_LEN + 1];
    blob_name(k, sha);
    return tg_parsed_header_acquire(cache, blobs, sha, size, ST_HEADER_SIZE_MAX, err, NULL);
}

/* True when file is file k's header with `count` tensors and tensor i where it belongs. */
static bool is_file(const st_file *file, unsigned k, unsigned count, unsigned i)
{
    char name[64];
    snprintf(name, sizeof name, "f%u.t%u", k, i);
    const st_tensor *t = file ? st_file_find(file, name, strlen(name)) : NULL;
    return t != NULL && file->tensor_count == count && t->begin == 2 * (uint64_t)i &&
           t->end == 2 * (uint64_t)i + 2 && t->rank == 1 && t->shape[0] == 2;
}

/* Acquires file k, checks it, releases it. */
static bool read_once(unsigned k, size_t size, unsigned count)
{
    const st_file *f = acquire(k, size, NULL);
    bool ok = is_file(f, k, count, count / 2);
    tg_parsed_header_release(cache, f);
    return ok;
}

static tg_parsed_header_stats stats_now(void)
{
    tg_parsed_header_stats s;
    tg_parsed_header_stats_get(cache, &s);
    return s;
}

/* What one entry of a 200-tensor file is charged (all test files of one count weigh
 * within a few bytes of each other: names differ by a digit or two). */
static size_t charge_of_200(void)
{
    renew(TG_PARSED_HEADER_CACHE_BYTES, TG_PARSED_HEADER_CACHE_ENTRIES);
    size_t size = put_file(900, 200);
    CHECK(read_once(900, size, 200));
    return stats_now().bytes;
}

TEST(hits_after_one_parse)
{
    renew(TG_PARSED_HEADER_CACHE_BYTES, TG_PARSED_HEADER_CACHE_ENTRIES);
    size_t size = put_file(1, 1000);
    const st_file *first = acquire(1, size, NULL);
    CHECK(is_file(first, 1, 1000, 0));
    for (unsigned i = 0; i < 1000; i++) {
        const st_file *f = acquire(1, size, NULL);
        CHECK(f == first); /* the same parsed header, shared */
        CHECK(is_file(f, 1, 1000, i));
        tg_parsed_header_release(cache, f);
    }
    tg_parsed_header_release(cache, first);
    tg_parsed_header_stats s = stats_now();
    CHECK_EQ_U64(s.parses, 1);
    CHECK_EQ_U64(s.hits, 1000);
    CHECK_EQ_U64(s.entries, 1);
    CHECK_EQ_U64(s.in_use, 0);
    /* charged what the parse holds: more than a tensor table of 1000 entries */
    CHECK(s.bytes > 1000 * sizeof(st_tensor));
    CHECK(s.bytes < 1000 * (sizeof(st_tensor) + 64) + 4096);
    /* the counters in the Prometheus text format */
    char text[2048];
    CHECK(tg_parsed_header_metrics(cache, text, sizeof text) < (int)sizeof text);
    CHECK(strstr(text, "tensorgate_header_cache_parses_total 1\n") != NULL);
    CHECK(strstr(text, "tensorgate_header_cache_hits_total 1000\n") != NULL);
    CHECK(strstr(text, "tensorgate_header_cache_entries 1\n") != NULL);
}

TEST(evicts_under_the_byte_bound)
{
    size_t charge = charge_of_200();
    /* room for three entries (and an entry may take half) */
    renew(3 * charge + charge / 2, TG_PARSED_HEADER_CACHE_ENTRIES);
    size_t sizes[5];
    for (unsigned k = 1; k <= 4; k++)
        sizes[k] = put_file(10 + k, 200);
    for (unsigned k = 1; k <= 3; k++)
        CHECK(read_once(10 + k, sizes[k], 200));
    CHECK(read_once(11, sizes[1], 200)); /* 11 is now the newest: 12 is the oldest */
    CHECK(read_once(14, sizes[4], 200));
    tg_parsed_header_stats s = stats_now();
    CHECK_EQ_U64(s.entries, 3);
    CHECK_EQ_U64(s.evictions, 1);
    CHECK(s.bytes <= 3 * charge + charge / 2);
    CHECK_EQ_U64(s.parses, 4);
    /* 11, 13, 14 are hits; 12 was evicted and parses again */
    CHECK(read_once(11, sizes[1], 200));
    CHECK(read_once(13, sizes[3], 200));
    CHECK(read_once(14, sizes[4], 200));
    CHECK_EQ_U64(stats_now().parses, 4);
    CHECK(read_once(12, sizes[2], 200));
    CHECK_EQ_U64(stats_now().parses, 5);
    CHECK_EQ_U64(stats_now().evictions, 2);
}

TEST(evicts_under_the_entry_bound)
{
    renew(TG_PARSED_HEADER_CACHE_BYTES, 2);
    size_t sizes[4];
    for (unsigned k = 1; k <= 3; k++) {
        sizes[k] = put_file(20 + k, 10);
        CHECK(read_once(20 + k, sizes[k], 10));
    }
    tg_parsed_header_stats s = stats_now();
    CHECK_EQ_U64(s.entries, 2);
    CHECK_EQ_U64(s.evictions, 1);
    CHECK(read_once(21, sizes[1], 10)); /* the oldest went */
    CHECK_EQ_U64(stats_now().parses, 4);
}

TEST(a_held_entry_survives_eviction)
{
    renew(TG_PARSED_HEADER_CACHE_BYTES, 1);
    size_t a = put_file(31, 500), b = put_file(32, 500), c = put_file(33, 500);
    const st_file *held = acquire(31, a, NULL);
    CHECK(is_file(held, 31, 500, 7));
    /* two more files through a one-entry cache: 31 is the oldest but in use, so each
     * newcomer goes when its reader lets go */
    CHECK(read_once(32, b, 500));
    CHECK(read_once(33, c, 500));
    tg_parsed_header_stats s = stats_now();
    CHECK_EQ_U64(s.evictions, 2);
    CHECK_EQ_U64(s.entries, 1);
    CHECK_EQ_U64(s.in_use, 1);
    CHECK(is_file(held, 31, 500, 499)); /* still whole (ASan would see a freed read) */
    const st_file *again = acquire(31, a, NULL);
    CHECK(again == held); /* still found: no second copy */
    tg_parsed_header_release(cache, again);
    /* two held: over the bound by what readers hold */
    const st_file *other = acquire(32, b, NULL);
    CHECK(is_file(other, 32, 500, 1));
    CHECK_EQ_U64(stats_now().entries, 2);
    /* the last release of 31, now the oldest and over the bound, frees it */
    tg_parsed_header_release(cache, held);
    s = stats_now();
    CHECK_EQ_U64(s.entries, 1);
    CHECK_EQ_U64(s.evictions, 3);
    CHECK_EQ_U64(s.in_use, 1);
    CHECK(is_file(other, 32, 500, 2));
    tg_parsed_header_release(cache, other);
    CHECK_EQ_U64(stats_now().in_use, 0);
    CHECK_EQ_U64(stats_now().parses, 4);
    CHECK(read_once(32, b, 500)); /* 32 stayed */
    CHECK_EQ_U64(stats_now().parses, 4);
    CHECK(read_once(31, a, 500));
    CHECK_EQ_U64(stats_now().parses, 5);
}

TEST(too_big_to_keep)
{
    size_t charge = charge_of_200();
    /* an entry may take half the budget: this one takes more */
    renew(charge + charge / 2, TG_PARSED_HEADER_CACHE_ENTRIES);
    size_t size = put_file(41, 200);
    const st_file *held = acquire(41, size, NULL);
    CHECK(is_file(held, 41, 200, 3));
    tg_parsed_header_stats s = stats_now();
    CHECK_EQ_U64(s.entries, 0);
    CHECK_EQ_U64(s.bytes, 0);
    CHECK_EQ_U64(s.not_kept, 1);
    CHECK_EQ_U64(s.in_use, 1);
    tg_parsed_header_release(cache, held); /* freed now */
    CHECK(read_once(41, size, 200));
    s = stats_now();
    CHECK_EQ_U64(s.parses, 2);
    CHECK_EQ_U64(s.not_kept, 2);
    CHECK_EQ_U64(s.in_use, 0);
    /* a budget of 0 keeps nothing */
    renew(0, TG_PARSED_HEADER_CACHE_ENTRIES);
    size_t small = put_file(42, 1);
    CHECK(read_once(42, small, 1));
    CHECK(read_once(42, small, 1));
    CHECK_EQ_U64(stats_now().parses, 2);
    CHECK_EQ_U64(stats_now().entries, 0);
}

TEST(failures_are_reported_and_not_remembered)
{
    renew(TG_PARSED_HEADER_CACHE_BYTES, TG_PARSED_HEADER_CACHE_ENTRIES);
    st_error err;
    CHECK(acquire(51, 100, &err) == NULL); /* no such blob */
    CHECK(strstr(err.detail, "missing") != NULL);
    static const char garbage[] = "\x10\0\0\0\0\0\0\0{\"a\":1}         "; /* N = 16 */
    put_blob(52, garbage, sizeof garbage - 1);
    CHECK(acquire(52, sizeof garbage - 1, &err) == NULL);
    CHECK(err.reason != ST_OK);
    CHECK(acquire(52, sizeof garbage - 1, &err) == NULL);
    /* a header larger than max_header */
    size_t size = put_file(53, 100);
    char sha[TG_SHA256_HEX_LEN + 1];
    blob_name(53, sha);
    CHECK(tg_parsed_header_acquire(cache, blobs, sha, size, 64, &err, NULL) == NULL);
    CHECK_EQ_U64(err.reason, ST_HEADER_TOO_LARGE);
    /* not a blob name at all */
    CHECK(tg_parsed_header_acquire(cache, blobs, "../etc/passwd", 10, 0, &err, NULL) == NULL);
    tg_parsed_header_stats s = stats_now();
    CHECK_EQ_U64(s.parses, 4);
    CHECK_EQ_U64(s.failures, 4);
    CHECK_EQ_U64(s.entries, 0);
    CHECK_EQ_U64(s.in_use, 0);
    CHECK_EQ_U64(s.hits, 0);
    tg_parsed_header_release(cache, NULL);
}

/* ---- GGUF entries ---- */

/* A GGUF v3 file: general.architecture, a string of pad_bytes (so the header outgrows
 * the first read), one F32 tensor "w" of ne [4]. Returns its size. */
static size_t put_gguf(unsigned k, size_t pad_bytes)
{
    size_t cap = 256 + pad_bytes, len = 0;
    unsigned char *b = calloc(1, cap);
#define LE(v, n)                                                                                   \
    do {                                                                                           \
        for (int i_ = 0; i_ < (n); i_++)                                                           \
            b[len++] = (unsigned char)((uint64_t)(v) >> (8 * i_));                                 \
    } while (0)
#define STR(s, n)                                                                                  \
    do {                                                                                           \
        LE((n), 8);                                                                                \
        memcpy(b + len, (s), (n));                                                                 \
        len += (n);                                                                                \
    } while (0)
    memcpy(b, "GGUF", 4);
    len = 4;
    LE(3, 4);
    LE(1, 8);
    LE(2, 8);
    STR("general.architecture", 20);
    LE(8, 4);
    STR("llama", 5);
    STR("general.pad", 11);
    LE(8, 4);
    LE(pad_bytes, 8);
    memset(b + len, 'p', pad_bytes);
    len += pad_bytes;
    STR("w", 1);
    LE(1, 4);
    LE(4, 8);
    LE(0, 4);
    LE(0, 8);
#undef LE
#undef STR
    len = (len + 31) / 32 * 32 + 16; /* zero padding, then 16 bytes of data */
    put_blob(k, b, len);
    free(b);
    return len;
}

TEST(gguf_entries)
{
    renew(TG_PARSED_HEADER_CACHE_BYTES, TG_PARSED_HEADER_CACHE_ENTRIES);
    size_t size = put_gguf(60, 200000); /* header past the first 64 KiB read */
    char sha[TG_SHA256_HEX_LEN + 1];
    blob_name(60, sha);
    st_error err;
    int failure = 0;
    const tg_gguf_header *h =
        tg_parsed_gguf_acquire(cache, blobs, sha, size, ST_HEADER_SIZE_MAX, &err, &failure);
    CHECK(h != NULL);
    if (h == NULL)
        return;
    CHECK_EQ_U64(h->file.tensor_count, 1);
    CHECK_EQ_U64(h->file.kv_count, 2);
    CHECK_EQ_U64(h->file.data_start + 16, size);
    CHECK_EQ_U64(h->file.kvs[1].type, ST_GGUF_V_STRING);
    CHECK(h->file.architecture_len == 5 && memcmp(h->file.architecture, "llama", 5) == 0);
    const tg_gguf_header *again =
        tg_parsed_gguf_acquire(cache, blobs, sha, size, ST_HEADER_SIZE_MAX, &err, &failure);
    CHECK(again == h);
    tg_parsed_gguf_release(cache, again);
    tg_parsed_gguf_release(cache, h);
    tg_parsed_header_stats s = stats_now();
    CHECK_EQ_U64(s.parses, 1);
    CHECK_EQ_U64(s.hits, 1);
    CHECK_EQ_U64(s.entries, 1);
    CHECK(s.bytes > 200000); /* charged its header bytes */
    /* a header above a lowered max_header: not damage (-2) */
    size = put_gguf(61, 1000);
    blob_name(61, sha);
    CHECK(tg_parsed_gguf_acquire(cache, blobs, sha, size, 100, &err, &failure) == NULL);
    CHECK_EQ_U64(err.reason, ST_GGUF_HEADER_TOO_LARGE);
    CHECK(failure == -2);
    /* a blob that is no longer GGUF: damage (-1) */
    static const char garbage[] = "GGUF\x07\0\0\0 not a header any more";
    put_blob(62, garbage, sizeof garbage - 1);
    blob_name(62, sha);
    CHECK(tg_parsed_gguf_acquire(cache, blobs, sha, sizeof garbage - 1, ST_HEADER_SIZE_MAX, &err,
                                 &failure) == NULL);
    CHECK(failure == -1);
    CHECK(tg_parsed_gguf_acquire(cache, blobs, "../x", 10, 0, &err, &failure) == NULL);
    tg_parsed_gguf_release(cache, NULL);
}

/* ---- threads ---- */

#define THREADS 8
#define FILES 12
#define TENSORS 300
#define ROUNDS 1500

static size_t thread_sizes[FILES];
static pthread_barrier_t start_line;

typedef struct worker {
    unsigned seed;
    unsigned wrong;
} worker;

static void *read_many(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(&start_line);
    const st_file *held = NULL; /* one file held across rounds now and then */
    unsigned held_k = 0;
    for (unsigned r = 0; r < ROUNDS; r++) {
        w->seed = w->seed * 1103515245u + 12345u;
        unsigned k = (w->seed >> 8) % FILES, i = (w->seed >> 16) % TENSORS;
        const st_file *f = acquire(100 + k, thread_sizes[k], NULL);
        if (!is_file(f, 100 + k, TENSORS, i))
            w->wrong++;
        if (held == NULL && (w->seed >> 24) % 16 == 0) {
            held = f; /* kept for a while: eviction must pass over it */
            held_k = k;
            continue;
        }
        tg_parsed_header_release(cache, f);
        if (held != NULL && (w->seed >> 24) % 16 == 1) {
            if (!is_file(held, 100 + held_k, TENSORS, i))
                w->wrong++;
            tg_parsed_header_release(cache, held);
            held = NULL;
        }
    }
    tg_parsed_header_release(cache, held);
    return NULL;
}

static void run_threads(void)
{
    pthread_t threads[THREADS];
    worker workers[THREADS];
    pthread_barrier_init(&start_line, NULL, THREADS);
    for (unsigned t = 0; t < THREADS; t++) {
        workers[t] = (worker){t * 7919u + 1, 0};
        CHECK(pthread_create(&threads[t], NULL, read_many, &workers[t]) == 0);
    }
    unsigned wrong = 0;
    for (unsigned t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
        wrong += workers[t].wrong;
    }
    pthread_barrier_destroy(&start_line);
    CHECK_EQ_U64(wrong, 0);
}

TEST(threads_with_eviction)
{
    for (unsigned k = 0; k < FILES; k++)
        thread_sizes[k] = put_file(100 + k, TENSORS);
    /* room for 3 of the 12 files: acquires race with parses and evictions */
    renew(TG_PARSED_HEADER_CACHE_BYTES, 3);
    run_threads();
    tg_parsed_header_stats s = stats_now();
    CHECK(s.entries <= 3);
    CHECK(s.evictions > 0);
    CHECK_EQ_U64(s.in_use, 0);
    CHECK_EQ_U64(s.hits + s.parses, THREADS * ROUNDS);
    /* everything fits: each file is parsed once, however many threads miss at once */
    renew(TG_PARSED_HEADER_CACHE_BYTES, TG_PARSED_HEADER_CACHE_ENTRIES);
    run_threads();
    s = stats_now();
    CHECK_EQ_U64(s.parses, FILES);
    CHECK_EQ_U64(s.entries, FILES);
    CHECK_EQ_U64(s.evictions, 0);
    CHECK_EQ_U64(s.in_use, 0);
}

int main(int argc, char **argv)
{
    (void)argc;
    snprintf(root, sizeof root, "/tmp/tg-parsed-header-XXXXXX");
    char err[256];
    if (mkdtemp(root) == NULL || tg_store_open(&store, root, err, sizeof err) != 0 ||
        tg_blobstore_open(root, &blobs, err, sizeof err) != 0) {
        fprintf(stderr, "cannot make a store in %s\n", root);
        return 1;
    }
    RUN(hits_after_one_parse);
    RUN(evicts_under_the_byte_bound);
    RUN(evicts_under_the_entry_bound);
    RUN(a_held_entry_survives_eviction);
    RUN(too_big_to_keep);
    RUN(failures_are_reported_and_not_remembered);
    RUN(gguf_entries);
    RUN(threads_with_eviction);
    tg_parsed_header_cache_destroy(cache);
    tg_blobstore_close(blobs);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", root);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return test_report(argv[0]);
}
