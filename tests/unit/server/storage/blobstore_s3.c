/* Unit tests for server/storage/blobstore_s3.c. The URL checks run everywhere; the
 * rest runs against a real S3-compatible store when TENSORGATE_TEST_S3_ENDPOINT
 * and TENSORGATE_TEST_S3_BUCKET are set (tests/scale/with-radosgw.sh starts a real
 * Ceph RADOS Gateway and sets them): a small and a multipart write committed and
 * read back in ranges, an abort and a failed write leave no object and no
 * multipart upload, stat / remove / each / damage records, gc's grace period, a
 * presigned URL that curl can fetch, and an unreachable endpoint failing fast
 * with EHOSTDOWN. */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blobstore.h"
#include "blobstore_backend.h"
#include "sha256.h"
#include "test.h"

static const char *endpoint, *bucket;
static char prefix[64];

/* The credentials, as serve's option table gives them to the store (the store
 * reads no environment): with-radosgw.sh's, else placeholders. */
static const char *env_or(const char *name, const char *fallback)
{
    const char *value = getenv(name);
    return value != NULL && value[0] != '\0' ? value : fallback;
}
#define CREDENTIALS                                                                                \
    .s3_access_key_id = env_or("AWS_ACCESS_KEY_ID", "k"),                                          \
    .s3_secret_access_key = env_or("AWS_SECRET_ACCESS_KEY", "s"),                                  \
    .s3_region = env_or("AWS_REGION", NULL)

TEST(urls_are_checked)
{
    tg_blobstore *store = NULL;
    char err[256] = "";
    CHECK(tg_blobstore_open("s3://ab", &store, err, sizeof err) == -1);
    CHECK(strstr(err, "s3://BUCKET[/PREFIX]") != NULL);
    CHECK(tg_blobstore_open("s3://Bad_Bucket", &store, err, sizeof err) == -1);
    CHECK(strstr(err, "bucket name") != NULL);
    CHECK(tg_blobstore_open("s3://bucket/pre fix", &store, err, sizeof err) == -1);
    CHECK(strstr(err, "prefix") != NULL);
    tg_blobstore_options options = {.s3_endpoint = "ftp://x"};
    CHECK(tg_blobstore_open_options("s3://bucket", &options, &store, err, sizeof err) == -1);
    CHECK(strstr(err, "AWS_ACCESS_KEY_ID") != NULL); /* no credentials given */
    options = (tg_blobstore_options){.s3_endpoint = "ftp://x", CREDENTIALS};
    CHECK(tg_blobstore_open_options("s3://bucket", &options, &store, err, sizeof err) == -1);
    CHECK(strstr(err, "http:// or https://") != NULL);
    CHECK(store == NULL);
    options.s3_endpoint = "http://host:9000/base";
    CHECK(tg_blobstore_open_options("s3://bucket", &options, &store, err, sizeof err) == -1);
    CHECK(strstr(err, "has a path") != NULL);
    options.s3_endpoint = "http://host:9000/";
    CHECK(tg_blobstore_open_options("s3://bucket", &options, &store, err, sizeof err) == 0);
    tg_blobstore_close(store);
    store = NULL;
}

static tg_blobstore *open_store(uint64_t grace)
{
    tg_blobstore *store = NULL;
    char url[160], err[256] = "";
    snprintf(url, sizeof url, "s3://%s/%s", bucket, prefix);
    tg_blobstore_options options = {
        .s3_endpoint = endpoint, .gc_grace_set = true, .gc_grace = grace, CREDENTIALS};
    if (tg_blobstore_open_options(url, &options, &store, err, sizeof err) != 0) {
        fprintf(stderr, "open %s: %s\n", url, err);
        return NULL;
    }
    return store;
}

/* Writes len pseudo-random bytes (seed) and commits them; hex gets the name. */
static tg_store_status write_blob(tg_blobstore *store, size_t len, unsigned seed, char *hex)
{
    tg_blob_writer *w = NULL;
    tg_store_status st = tg_blob_write_begin(store, &w);
    if (st != TG_STORE_OK)
        return st;
    tg_sha256 sha;
    if (tg_sha256_init(&sha, "test") != 0) {
        tg_blob_write_abort(w);
        return TG_STORE_ERROR;
    }
    unsigned char chunk[65536];
    size_t done = 0;
    unsigned x = seed;
    while (done < len) {
        size_t n = len - done < 50000 ? len - done : 50000; /* odd sizes across parts */
        for (size_t i = 0; i < n; i++) {
            x = x * 1103515245u + 12345u;
            chunk[i] = (unsigned char)(x >> 16);
        }
        tg_sha256_update(&sha, chunk, n);
        st = tg_blob_write(w, chunk, n);
        if (st != TG_STORE_OK) {
            tg_blob_write_abort(w);
            tg_sha256_free(&sha);
            return st;
        }
        done += n;
    }
    tg_sha256_final_hex(&sha, hex);
    return tg_blob_write_commit(w, hex);
}

/* Re-reads blob hex in reads of odd sizes and compares the hash. */
static bool hash_matches(tg_blobstore *store, const char *hex, uint64_t size)
{
    tg_blob_check check;
    tg_blob_reader *r = tg_blob_open(store, hex, size, &check);
    if (r == NULL)
        return false;
    tg_sha256 sha;
    tg_sha256_init(&sha, "test");
    unsigned char buf[70001];
    uint64_t at = 0;
    bool ok = true;
    while (at < size) {
        ssize_t n = tg_blob_read(r, buf, sizeof buf, at);
        if (n <= 0) {
            ok = false;
            break;
        }
        tg_sha256_update(&sha, buf, (size_t)n);
        at += (uint64_t)n;
    }
    char got[TG_SHA256_HEX_LEN + 1];
    tg_sha256_final_hex(&sha, got);
    tg_blob_close(r);
    return ok && strcmp(got, hex) == 0;
}

typedef struct listing {
    char names[16][TG_SHA256_HEX_LEN + 1];
    int count;
} listing;

static int collect(void *ctx, const char *hex)
{
    listing *l = ctx;
    if (l->count < 16)
        snprintf(l->names[l->count++], TG_SHA256_HEX_LEN + 1, "%s", hex);
    return 0;
}

static bool listed(const listing *l, const char *hex)
{
    for (int i = 0; i < l->count; i++)
        if (strcmp(l->names[i], hex) == 0)
            return true;
    return false;
}

/* Counts objects and multipart uploads in the bucket under our prefix (with curl). */
static int count_remote(const char *query, const char *tag)
{
    char cmd[1024], enc[128];
    size_t n = 0;
    for (const char *p = prefix; *p && n + 4 < sizeof enc; p++) {
        if (*p == '/') {
            memcpy(enc + n, "%2F", 3);
            n += 3;
        } else {
            enc[n++] = *p;
        }
    }
    enc[n] = '\0';
    bool uploads = strcmp(tag, "Upload") == 0;
    snprintf(cmd, sizeof cmd,
             "curl -s --max-time 10 -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' --aws-sigv4 "
             "'aws:amz:%s:s3' --user \"$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY\" "
             "'%s/%s?%s%s%s' | grep -o '<%s>' | wc -l",
             getenv("AWS_REGION") ? getenv("AWS_REGION") : "us-east-1", endpoint, bucket, query,
             enc, uploads ? "&uploads=" : "", tag);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    int count = -1;
    if (fscanf(p, "%d", &count) != 1)
        count = -1;
    pclose(p);
    return count;
}

/* The bytes write_blob writes for (len, seed). */
static unsigned char *blob_bytes(size_t len, unsigned seed)
{
    unsigned char *out = malloc(len ? len : 1);
    unsigned x = seed;
    for (size_t i = 0; out != NULL && i < len; i++) {
        x = x * 1103515245u + 12345u;
        out[i] = (unsigned char)(x >> 16);
    }
    return out;
}

TEST(windows_streams_and_seeks)
{
    tg_blobstore *store = open_store(0);
    if (store == NULL) {
        CHECK(false);
        return;
    }
    size_t len = (9u << 20) + 777;
    char hex[TG_SHA256_HEX_LEN + 1];
    unsigned char *want = blob_bytes(len, 21);
    CHECK(want != NULL && write_blob(store, len, 21, hex) == TG_STORE_OK);
    tg_blob_check check;
    tg_blob_reader *r = tg_blob_open(store, hex, len, &check);
    CHECK(r != NULL);
    static unsigned char got[300000];
    /* offset, length: a window, on into a stream, a seek back, forward, the end */
    static const size_t plan[][2] = {
        {0, 100}, {100, 4194204},    {4194304, 250000}, {4444304, 250000},
        {10, 20}, {4194200, 300000}, {8388608, 300000}, {(9u << 20) + 700, 77},
        {3, 1}};
    for (size_t i = 0; r != NULL && want != NULL && i < sizeof plan / sizeof plan[0]; i++) {
        size_t at = plan[i][0], n = plan[i][1], done = 0;
        bool same = true;
        while (done < n) {
            size_t chunk = n - done < sizeof got ? n - done : sizeof got;
            if (tg_blob_read_at(r, got, chunk, at + done) != 0 ||
                memcmp(got, want + at + done, chunk) != 0) {
                same = false;
                break;
            }
            done += chunk;
        }
        CHECK(same);
        if (!same)
            fprintf(stderr, "  read %zu of %zu at %zu differs\n", i, n, at);
    }
    unsigned char c;
    CHECK(r == NULL || tg_blob_read(r, &c, 1, len) == 0);
    tg_blob_close(r);
    free(want);
    CHECK(tg_blob_remove(store, hex) == 0);
    tg_blobstore_close(store);
}

TEST(small_write_commit_ranged_reads)
{
    tg_blobstore *store = open_store(0);
    if (store == NULL) {
        CHECK(false);
        return;
    }
    CHECK_STR(tg_blobstore_kind(store), "s3");
    uint64_t free_bytes = 0;
    CHECK(tg_blobstore_space(store, &free_bytes) == 0 && free_bytes == UINT64_MAX);
    char hex[TG_SHA256_HEX_LEN + 1];
    CHECK(write_blob(store, 100000, 7, hex) == TG_STORE_OK);
    uint64_t size = 0;
    CHECK(tg_blob_stat(store, hex, &size) == 0 && size == 100000);
    CHECK(hash_matches(store, hex, 100000));
    tg_blob_check check;
    tg_blob_reader *r = tg_blob_open(store, hex, 100000, &check);
    CHECK(r != NULL && check == TG_BLOB_OK);
    if (r != NULL) {
        CHECK(tg_blob_fd(r) == -1);
        CHECK_EQ_U64(tg_blob_size(r), 100000);
        unsigned char a[10], b[10];
        CHECK(tg_blob_read_at(r, a, 10, 99990) == 0);
        CHECK(tg_blob_read_at(r, b, 10, 5) == 0);
        CHECK(tg_blob_read(r, a, 10, 100000) == 0);
        CHECK(tg_blob_read_at(r, a, 10, 99995) == -1 && errno == EIO);
        tg_blob_close(r);
    }
    /* the catalog's size differs: damaged, recorded; a commit clears the record */
    r = tg_blob_open(store, hex, 5, &check);
    CHECK(r == NULL && check == TG_BLOB_DAMAGED);
    char why[256] = "";
    CHECK(tg_blob_damage_record(store, hex, why, sizeof why));
    CHECK(strstr(why, "100000") != NULL);
    listing damaged = {0};
    CHECK(tg_blob_each_damaged(store, collect, &damaged) == 0 && listed(&damaged, hex));
    char again[TG_SHA256_HEX_LEN + 1];
    CHECK(write_blob(store, 100000, 7, again) == TG_STORE_OK && strcmp(again, hex) == 0);
    CHECK(!tg_blob_damage_record(store, hex, NULL, 0));
    /* missing */
    const char *none = "00000000000000000000000000000000000000000000000000000000000000ff";
    r = tg_blob_open(store, none, 3, &check);
    CHECK(r == NULL && check == TG_BLOB_MISSING);
    CHECK(tg_blob_stat(store, none, &size) == -1 && errno == ENOENT);
    tg_blob_clear_damaged(store, none);
    listing l = {0};
    CHECK(tg_blob_each(store, collect, &l) == 0 && listed(&l, hex) && !listed(&l, none));
    CHECK(tg_blob_remove(store, hex) == 0);
    CHECK(tg_blob_remove(store, hex) == -1 && errno == ENOENT);
    CHECK(tg_blob_stat(store, hex, &size) == -1 && errno == ENOENT);
    /* an empty blob */
    char empty[TG_SHA256_HEX_LEN + 1];
    CHECK(write_blob(store, 0, 1, empty) == TG_STORE_OK);
    CHECK(tg_blob_stat(store, empty, &size) == 0 && size == 0);
    r = tg_blob_open(store, empty, 0, &check);
    CHECK(r != NULL && check == TG_BLOB_OK);
    if (r != NULL) {
        unsigned char c;
        CHECK(tg_blob_read(r, &c, 1, 0) == 0);
        tg_blob_close(r);
    }
    CHECK(tg_blob_remove(store, empty) == 0);
    int h = tg_blobstore_lock(store, true, true);
    CHECK(h >= 0);
    CHECK(tg_blobstore_lock(store, false, false) == -1 && errno == EWOULDBLOCK);
    tg_blobstore_unlock(store, h);
    tg_blobstore_close(store);
}

TEST(multipart_write_commit_copy_and_abort)
{
    tg_blobstore *store = open_store(0);
    if (store == NULL) {
        CHECK(false);
        return;
    }
    size_t len = (5u << 20) * 2 + 12345; /* three parts */
    char hex[TG_SHA256_HEX_LEN + 1];
    CHECK(write_blob(store, len, 11, hex) == TG_STORE_OK);
    uint64_t size = 0;
    CHECK(tg_blob_stat(store, hex, &size) == 0 && size == len);
    CHECK(hash_matches(store, hex, len));
    /* the same content again: the content key is there, the temp is dropped */
    char again[TG_SHA256_HEX_LEN + 1];
    CHECK(write_blob(store, len, 11, again) == TG_STORE_OK && strcmp(again, hex) == 0);
    CHECK(count_remote("list-type=2&prefix=", "Key") == 1);
    CHECK(count_remote("prefix=", "Upload") == 0);
    /* an abort after two parts: no object, no multipart upload */
    tg_blob_writer *w = NULL;
    CHECK(tg_blob_write_begin(store, &w) == TG_STORE_OK);
    static unsigned char chunk[1 << 20];
    memset(chunk, 'x', sizeof chunk);
    for (int i = 0; i < 11 && w != NULL; i++)
        CHECK(tg_blob_write(w, chunk, sizeof chunk) == TG_STORE_OK);
    CHECK(count_remote("prefix=", "Upload") == 1);
    tg_blob_write_abort(w);
    CHECK(count_remote("prefix=", "Upload") == 0);
    CHECK(count_remote("list-type=2&prefix=", "Key") == 1);
    CHECK(tg_blob_remove(store, hex) == 0);
    CHECK(count_remote("list-type=2&prefix=", "Key") == 0);
    /* above the CopyObject limit (lowered here): UploadPartCopy in 5 MiB parts */
    setenv("TENSORGATE_TEST_S3_MAX_COPY", "1000", 1);
    CHECK(write_blob(store, len, 13, hex) == TG_STORE_OK);
    unsetenv("TENSORGATE_TEST_S3_MAX_COPY");
    CHECK(tg_blob_stat(store, hex, &size) == 0 && size == len);
    CHECK(hash_matches(store, hex, len));
    CHECK(count_remote("list-type=2&prefix=", "Key") == 1);
    CHECK(count_remote("prefix=", "Upload") == 0);
    CHECK(tg_blob_remove(store, hex) == 0);
    tg_blobstore_close(store);
}

/* Parts go on a thread of their own while the next one fills: a part that fails
 * there (the store refuses it) fails a later write or the commit, and nothing is
 * left, no object and no multipart upload; the next upload is whole. */
TEST(failed_part_in_flight_leaves_nothing)
{
    tg_blobstore *store = open_store(0);
    if (store == NULL) {
        CHECK(false);
        return;
    }
    size_t len = (5u << 20) * 3 + 777; /* four parts */
    char hex[TG_SHA256_HEX_LEN + 1];
    for (unsigned failing = 1; failing <= 4; failing++) {
        char value[16];
        snprintf(value, sizeof value, "%u", failing);
        setenv("TENSORGATE_TEST_S3_PART_FAIL", value, 1);
        CHECK(write_blob(store, len, 20 + failing, hex) != TG_STORE_OK);
        unsetenv("TENSORGATE_TEST_S3_PART_FAIL");
        CHECK(count_remote("list-type=2&prefix=", "Key") == 0);
        CHECK(count_remote("prefix=", "Upload") == 0);
    }
    /* a write that fails mid-way is aborted with the part after it filling */
    setenv("TENSORGATE_TEST_S3_PART_FAIL", "1", 1);
    tg_blob_writer *w = NULL;
    CHECK(tg_blob_write_begin(store, &w) == TG_STORE_OK);
    static unsigned char chunk[1 << 20];
    memset(chunk, 'y', sizeof chunk);
    tg_store_status st = TG_STORE_OK;
    for (int i = 0; i < 16 && st == TG_STORE_OK; i++)
        st = tg_blob_write(w, chunk, sizeof chunk);
    CHECK(st !=
          TG_STORE_OK); /* part 1 failed: the write that sends part 3 (two go at once) says so */
    unsetenv("TENSORGATE_TEST_S3_PART_FAIL");
    tg_blob_write_abort(w);
    CHECK(count_remote("prefix=", "Upload") == 0);
    CHECK(count_remote("list-type=2&prefix=", "Key") == 0);
    CHECK(write_blob(store, len, 30, hex) == TG_STORE_OK);
    CHECK(hash_matches(store, hex, len));
    CHECK(tg_blob_remove(store, hex) == 0);
    tg_blobstore_close(store);
}

/* Reads the blob's bytes [from, to) in reads of odd sizes; true when they equal
 * want's (the blob's own bytes, from 0). */
static bool reads_equal(tg_blob_reader *r, const unsigned char *want, uint64_t from, uint64_t to)
{
    static unsigned char buf[300007];
    uint64_t at = from;
    size_t step = 65537;
    while (at < to) {
        size_t n = to - at < step ? (size_t)(to - at) : step;
        ssize_t got = tg_blob_read(r, buf, n, at);
        if (got <= 0 || memcmp(buf, want + at, (size_t)got) != 0)
            return false;
        at += (uint64_t)got;
        step = step == 65537 ? 300007 : 65537;
    }
    return true;
}

/* A reader told its span (tg_blob_read_span, as a file body or Range answer does)
 * reads exactly the span's bytes through one GET, across window boundaries, and
 * reads past the span, before it and a second time still give the blob's bytes. */
TEST(read_span_exact_bytes)
{
    tg_blobstore *store = open_store(0);
    if (store == NULL) {
        CHECK(false);
        return;
    }
    size_t len = (4u << 20) * 3 + 4321; /* four windows, the last short */
    char hex[TG_SHA256_HEX_LEN + 1];
    unsigned char *want = blob_bytes(len, 41);
    CHECK(want != NULL && write_blob(store, len, 41, hex) == TG_STORE_OK);
    /* spans: unaligned across three windows; a whole file; one shorter than a
     * window; one that runs past the end (clamped); one ending at the last byte */
    const uint64_t spans[][2] = {{1234567, 9u << 20},
                                 {0, len},
                                 {(4u << 20) - 10, 1000},
                                 {(8u << 20) + 99, 1u << 30},
                                 {len - (5u << 20), 5u << 20}};
    for (size_t i = 0; i < sizeof spans / sizeof spans[0] && want != NULL; i++) {
        tg_blob_check check;
        tg_blob_reader *r = tg_blob_open(store, hex, len, &check);
        CHECK(r != NULL);
        if (r == NULL)
            continue;
        uint64_t from = spans[i][0], to = from + spans[i][1] > len ? len : from + spans[i][1];
        tg_blob_read_span(r, from, spans[i][1]);
        CHECK(reads_equal(r, want, from, to));
        /* past the span's end, then before its start, then the span again */
        if (to < len)
            CHECK(reads_equal(r, want, to, to + (len - to < 70000 ? len - to : 70000)));
        if (from > 0)
            CHECK(reads_equal(r, want, from - 1, from + 10));
        CHECK(reads_equal(r, want, from, to));
        unsigned char byte;
        CHECK(tg_blob_read(r, &byte, 1, len) == 0);
        tg_blob_close(r);
    }
    free(want);
    CHECK(tg_blob_remove(store, hex) == 0);
    tg_blobstore_close(store);
}

TEST(gc_grace_and_stale_uploads)
{
    tg_blobstore *store = open_store(0);
    tg_blobstore *patient = open_store(3600);
    if (store == NULL || patient == NULL) {
        CHECK(false);
        tg_blobstore_close(store);
        tg_blobstore_close(patient);
        return;
    }
    char hex[TG_SHA256_HEX_LEN + 1];
    CHECK(write_blob(store, 1000, 3, hex) == TG_STORE_OK);
    /* an upload left in flight (a replica died): a multipart upload under tmp/ */
    tg_blob_writer *w = NULL;
    CHECK(tg_blob_write_begin(store, &w) == TG_STORE_OK);
    static unsigned char chunk[1 << 20];
    for (int i = 0; i < 6 && w != NULL; i++)
        CHECK(tg_blob_write(w, chunk, sizeof chunk) == TG_STORE_OK);
    listing l = {0};
    CHECK(tg_blob_each(patient, collect, &l) == 0 && l.count == 0); /* too young */
    CHECK(tg_blobstore_sweep(patient) == 0);
    CHECK(count_remote("prefix=", "Upload") == 1);
    sleep(1);
    l.count = 0;
    CHECK(tg_blob_each(store, collect, &l) == 0 && listed(&l, hex)); /* grace 0 */
    CHECK(count_remote("prefix=", "Upload") == 1);                   /* each lists, never sweeps */
    CHECK(tg_blobstore_sweep(store) == 1);
    CHECK(count_remote("prefix=", "Upload") == 0); /* swept */
    tg_blob_write_abort(w);                        /* already gone: harmless */
    CHECK(tg_blob_remove(store, hex) == 0);
    tg_blobstore_close(patient);
    tg_blobstore_close(store);
}

static size_t count_bytes(char *data, size_t size, size_t n, void *ctx)
{
    (void)data;
    *(size_t *)ctx += size * n;
    return size * n;
}

TEST(presigned_url_fetches_the_object)
{
    tg_blobstore *store = open_store(0);
    if (store == NULL) {
        CHECK(false);
        return;
    }
    char hex[TG_SHA256_HEX_LEN + 1], url[4096];
    CHECK(write_blob(store, 3000, 5, hex) == TG_STORE_OK);
    CHECK(tg_blobstore_presign(store, hex, 60, url, sizeof url) == 0);
    CURL *curl = curl_easy_init();
    size_t got = 0;
    long status = 0;
    if (curl != NULL) {
        curl_easy_setopt(curl, CURLOPT_URL, url);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, count_bytes);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &got);
        curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
        CHECK(curl_easy_perform(curl) == CURLE_OK);
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(curl);
    }
    CHECK(status == 200 && got == 3000);
    CHECK(tg_blob_remove(store, hex) == 0);
    tg_blobstore_close(store);
}

TEST(unreachable_store_fails_fast)
{
    tg_blobstore *store = NULL;
    char err[256];
    tg_blobstore_options options = {.s3_endpoint = "http://127.0.0.1:1", CREDENTIALS};
    CHECK(tg_blobstore_open_options("s3://bucket", &options, &store, err, sizeof err) == 0);
    if (store == NULL)
        return;
    time_t start = time(NULL);
    uint64_t free_bytes, size;
    errno = 0;
    CHECK(tg_blobstore_space(store, &free_bytes) == -1 && errno == TG_BLOB_UNAVAILABLE_ERRNO);
    tg_blob_check check;
    const char *name = "00000000000000000000000000000000000000000000000000000000000000ff";
    CHECK(tg_blob_open(store, name, 3, &check) == NULL && check == TG_BLOB_UNREADABLE &&
          errno == TG_BLOB_UNAVAILABLE_ERRNO);
    CHECK(tg_blob_stat(store, name, &size) == -1 && errno == TG_BLOB_UNAVAILABLE_ERRNO);
    char hex[TG_SHA256_HEX_LEN + 1];
    CHECK(write_blob(store, 10, 1, hex) != TG_STORE_OK);
    CHECK(time(NULL) - start < 10);
    tg_blobstore_close(store);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(urls_are_checked);
    RUN(unreachable_store_fails_fast);
    endpoint = getenv("TENSORGATE_TEST_S3_ENDPOINT");
    bucket = getenv("TENSORGATE_TEST_S3_BUCKET");
    if (endpoint != NULL && bucket != NULL) {
        snprintf(prefix, sizeof prefix, "unit-%ld-%d/", (long)time(NULL), (int)getpid());
        RUN(small_write_commit_ranged_reads);
        RUN(windows_streams_and_seeks);
        RUN(multipart_write_commit_copy_and_abort);
        RUN(failed_part_in_flight_leaves_nothing);
        RUN(read_span_exact_bytes);
        RUN(gc_grace_and_stale_uploads);
        RUN(presigned_url_fetches_the_object);
    } else {
        fprintf(stderr,
                "%s: no TENSORGATE_TEST_S3_ENDPOINT: the radosgw tests are skipped "
                "(tests/scale/with-radosgw.sh runs them)\n",
                argv[0]);
    }
    return test_report(argv[0]);
}
