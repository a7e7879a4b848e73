/* The S3-compatible blob store backend (blobstore_backend.h): "s3://BUCKET[/PREFIX]"
 * over libcurl with SigV4 (CURLOPT_AWS_SIGV4), path-style addressing.
 *
 * Keys: PREFIX/sha256/ab/<hex> (content), PREFIX/tmp/<random> (multipart uploads in
 * flight), PREFIX/damaged/<hex> (damage records).
 *
 * Writes: bytes are buffered up to one part; a blob that fits in one part is PUT
 * at its content key on commit; a larger one streams into a multipart upload of a
 * temporary key, which commit completes and copies to the content key (CopyObject,
 * or UploadPartCopy above 5 GiB) and then deletes; abort aborts the multipart
 * upload, so nothing is left. The object is complete before commit returns.
 * A full part is sent by a thread of its own while the writer fills the next one,
 * up to S3_PARTS_IN_FLIGHT parts at once (so that many part buffers plus the one
 * being filled per writer): receiving and sending overlap, the store works on
 * two parts at a time (a single PUT stream leaves radosgw waiting on itself), a
 * write waits only when every sender is busy, and a part that failed there fails
 * a later write that completes a part, or the commit.
 *
 * Reads: HEAD on open (size checked), then a ranged GET of the aligned 4 MiB window
 * holding the offset (the read cache keeps windows); a read that continues past
 * its window opens one GET to the end of the object and keeps it open, reading it
 * through a 1 MiB buffer (the transfer pauses when it is full): sequential reads
 * cost no request each, and no reader holds more than a window and that buffer.
 * A reader told its span (tg_blob_read_span: a file body or a Range) asks for
 * exactly it: a span longer than a window is one GET of those bytes from its first
 * read on (no window fetched whole before the first byte goes out), and a stream
 * ends at the span's end rather than the object's. Reads past the span still work.
 *
 * Every request has a connect timeout and a low-speed limit; a store that cannot
 * be reached fails with errno EHOSTDOWN (blobstore.h). The commit lock is per
 * process; across replicas gc only removes objects older than its grace period. */
#include "blobstore.h"
#include "blobstore_backend.h"
#include "log.h"
#include "test_hooks.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define S3_MIN_PART (5ULL << 20)
#define S3_MAX_PARTS 10000ULL
#define S3_MAX_PART (5ULL << 30)
#define S3_MAX_COPY (5ULL << 30) /* CopyObject's limit; above it UploadPartCopy */
#define S3_COPY_PART (512ULL << 20)
#define S3_WINDOW (4U << 20)           /* a reader's ranged GET */
#define S3_MAX_XML (4U << 20)          /* the largest XML answer read */
#define S3_MAX_COMPLETE_XML (1U << 20) /* 10,000 parts */
#define S3_PARTS_IN_FLIGHT 2           /* parts a writer sends at once */
#define S3_POOL 16                     /* idle curl handles kept (connections reused) */
#define S3_STREAM_BUFFER (1U << 20)    /* a sequential reader's buffer */
#define S3_RECV_BUFFER (256U << 10)    /* curl's receive buffer (its largest write callback) */
#define S3_SEND_BUFFER (1U << 20)      /* curl's upload buffer (a part's read callbacks) */

typedef struct s3_store {
    tg_blobstore base;
    char endpoint[512]; /* scheme://host[:port], no trailing slash */
    char bucket[64];
    char prefix[512]; /* "" or "a/b/" (ends with '/') */
    char region[64];
    char access[256];
    char secret[256];
    char token[4096];
    char sigv4[128];
    char userpwd[520];
    long connect_timeout, low_speed_time; /* seconds (tg_blobstore_options) */
    unsigned part_doubling;               /* parts per size step: part k is 5 MiB << (k / this) */
    uint64_t gc_grace;
    pthread_rwlock_t commit_lock;
    pthread_mutex_t pool_lock;
    CURL *pool[S3_POOL];
    int pool_count;
    bool redirect;
    /* the read cache: one file per window (<hex>.<window index>) */
    char cache_dir[4096];
    uint64_t cache_size, cache_bytes;
    pthread_mutex_t cache_lock;
    uint64_t hits, misses; /* __atomic */
} s3_store;

struct s3_writer;

/* A full part sent by a thread of its own while the writer fills the next one.
 * The slot owns its buffer; the thread touches nothing of the writer. */
typedef struct s3_part_send {
    pthread_t thread;
    struct s3_store *s;
    struct s3_writer *w;
    unsigned char *buf; /* the part's bytes; kept for a later part once sent */
    size_t cap, len;
    unsigned number; /* 1-based */
    bool busy;       /* a thread is sending it */
    char *etag;      /* the part's ETag, set by the thread */
    int rc, err;     /* send_part's answer and errno, read after the join */
} s3_part_send;

typedef struct s3_writer {
    tg_blob_writer base;
    char temp_key[700];
    char *upload_id;    /* NULL until the multipart upload starts */
    unsigned char *buf; /* the part being filled */
    size_t buf_len, buf_cap;
    unsigned parts; /* parts sent or being sent */
    char **etags;   /* parts' ETags (NULL for one in flight until it is joined) */
    unsigned etag_cap;
    uint64_t total;
    /* the parts in flight; a free slot's buffer becomes the one to fill next */
    s3_part_send send[S3_PARTS_IN_FLIGHT];
} s3_writer;

typedef struct s3_reader {
    tg_blob_reader base;
    unsigned char *window;
    size_t window_cap;
    uint64_t window_start;
    size_t window_len;
    /* a read that continues past its window opens one GET to the end of the object
     * and keeps it: sequential reads then cost no request each */
    CURLM *multi;
    CURL *easy;
    struct curl_slist *stream_headers;
    unsigned char *ring; /* S3_STREAM_BUFFER bytes; ring_len of them from ring_at */
    size_t ring_at, ring_len;
    uint64_t stream_pos; /* the blob offset of ring[ring_at] */
    uint64_t stream_end; /* where the stream's range ends (exclusive); 0: the object's end */
    bool stream_paused, stream_done;
    long stream_status; /* the answer's status once known */
    /* while stream_read runs curl: the caller's buffer, filled first when the ring
     * is empty (the bytes skip the ring: one copy fewer) */
    unsigned char *direct;
    size_t direct_cap, direct_len;
    CURLcode stream_result;
} s3_reader;

static s3_store *s3(tg_blobstore *store)
{
    return (s3_store *)store;
}

/* ---- one request ---- */

typedef struct s3_sink {
    unsigned char *buf; /* fixed buffer (reads) or grown (XML) */
    size_t len, cap, max;
    bool grow;
} s3_sink;

typedef struct s3_request {
    const char *method;
    const char *key;   /* NULL: the bucket */
    const char *query; /* already encoded, or NULL */
    const void *body;
    size_t body_len;
    const char *range;       /* "bytes=a-b" or NULL */
    const char *copy_source; /* x-amz-copy-source or NULL */
    const char *copy_range;
    s3_sink *sink; /* the answer's body (NULL: dropped) */
    /* out */
    long status;
    char etag[160];
    uint64_t content_length;
    char last_modified[64];
    bool unreachable; /* no HTTP answer at all */
} s3_request;

static size_t sink_write(char *data, size_t size, size_t n, void *ctx)
{
    s3_sink *sink = ctx;
    size_t len = size * n;
    if (sink == NULL)
        return len;
    if (sink->len + len > sink->cap) {
        if (!sink->grow || sink->len + len > sink->max)
            return 0; /* more than asked for: curl fails the transfer */
        size_t cap = sink->cap ? sink->cap : 16384;
        while (cap < sink->len + len)
            cap *= 2;
        if (cap > sink->max)
            cap = sink->max;
        unsigned char *grown = realloc(sink->buf, cap + 1);
        if (grown == NULL)
            return 0;
        sink->buf = grown;
        sink->cap = cap;
    }
    memcpy(sink->buf + sink->len, data, len);
    sink->len += len;
    if (sink->grow)
        sink->buf[sink->len] = '\0';
    return len;
}

typedef struct s3_source {
    const unsigned char *data;
    size_t len, at;
} s3_source;

static size_t source_read(char *buf, size_t size, size_t n, void *ctx)
{
    s3_source *src = ctx;
    size_t want = size * n, left = src->len - src->at;
    if (want > left)
        want = left;
    if (want == 0)
        return 0;
    memcpy(buf, src->data + src->at, want);
    src->at += want;
    return want;
}

static void copy_header_value(const char *line, size_t len, char *out, size_t out_len)
{
    const char *colon = memchr(line, ':', len);
    if (colon == NULL)
        return;
    const char *v = colon + 1, *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    size_t n = (size_t)(end - v);
    if (n >= out_len)
        n = out_len - 1;
    memcpy(out, v, n);
    out[n] = '\0';
}

static size_t header_line(char *line, size_t size, size_t n, void *ctx)
{
    s3_request *req = ctx;
    size_t len = size * n;
    if (len > 5 && strncasecmp(line, "ETag:", 5) == 0)
        copy_header_value(line, len, req->etag, sizeof req->etag);
    else if (len > 14 && strncasecmp(line, "Last-Modified:", 14) == 0)
        copy_header_value(line, len, req->last_modified, sizeof req->last_modified);
    return len;
}

static CURL *handle_get(s3_store *s)
{
    CURL *curl = NULL;
    pthread_mutex_lock(&s->pool_lock);
    if (s->pool_count > 0)
        curl = s->pool[--s->pool_count];
    pthread_mutex_unlock(&s->pool_lock);
    if (curl != NULL)
        curl_easy_reset(curl);
    else
        curl = curl_easy_init();
    return curl;
}

static void handle_put(s3_store *s, CURL *curl, bool reusable)
{
    if (curl == NULL)
        return;
    pthread_mutex_lock(&s->pool_lock);
    if (reusable && s->pool_count < S3_POOL) {
        s->pool[s->pool_count++] = curl;
        curl = NULL;
    }
    pthread_mutex_unlock(&s->pool_lock);
    if (curl != NULL)
        curl_easy_cleanup(curl);
}

/* Percent-encodes a key for a URL path (slashes kept). */
static int encode_key(const char *key, char *out, size_t out_len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                     (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.' || *p == '~' ||
                     *p == '/';
        if (n + 4 >= out_len)
            return -1;
        if (plain) {
            out[n++] = (char)*p;
        } else {
            out[n++] = '%';
            out[n++] = hex[*p >> 4];
            out[n++] = hex[*p & 15];
        }
    }
    out[n] = '\0';
    return 0;
}

/* HMAC-SHA256 of data under key; false when OpenSSL failed (out is then unusable). */
static bool hmac(const void *key, size_t key_len, const char *data, unsigned char out[32])
{
    unsigned int n = 32;
    return HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)data, strlen(data), out,
                &n) != NULL &&
           n == 32;
}

/* The SigV4 signing key's last step over to_sign: the signature in hex. 0, or -1
 * (errno EIO, logged) when an HMAC failed: the request is not sent unsigned. */
static int sigv4_signature(const s3_store *s, const char *day, const char *to_sign,
                           char sig_hex[65])
{
    char secret[300];
    unsigned char k1[32], k2[32], k3[32], k4[32], sig[32];
    snprintf(secret, sizeof secret, "AWS4%s", s->secret);
    bool signed_ok = hmac(secret, strlen(secret), day, k1) && hmac(k1, 32, s->region, k2) &&
                     hmac(k2, 32, "s3", k3) && hmac(k3, 32, "aws4_request", k4) &&
                     hmac(k4, 32, to_sign, sig);
    if (!signed_ok) {
        tg_log(TG_LOG_ERROR, "s3: HMAC-SHA256 failed; the request is not signed");
        errno = EIO;
        return -1;
    }
    tg_hex_encode(sig, 32, sig_hex);
    return 0;
}

/* An Authorization header signed here, for UploadPartCopy: curl 7.88 sorts the
 * signed headers by whole line, which puts x-amz-copy-source-range before
 * x-amz-copy-source, so radosgw's signature differs. date_line gets the
 * x-amz-date header. 0, or -1. */
static int sign_copy_part(const s3_store *s, const char *path, const char *query,
                          const char *copy_source, const char *copy_range, char *auth,
                          size_t auth_len, char *date_line, size_t date_len)
{
    char date[17], day[9], canonical[6000], scope[200], to_sign[600], hash[65], sig[65];
    const char *h = strstr(s->endpoint, "://");
    const char *host = h ? h + 3 : s->endpoint;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y%m%dT%H%M%SZ", &tm);
    strftime(day, sizeof day, "%Y%m%d", &tm);
    bool token = s->token[0] != '\0';
    int n = snprintf(canonical, sizeof canonical,
                     "PUT\n%s\n%s\nhost:%s\nx-amz-content-sha256:UNSIGNED-PAYLOAD\n"
                     "x-amz-copy-source:%s\nx-amz-copy-source-range:%s\nx-amz-date:%s\n%s%s%s\n"
                     "host;x-amz-content-sha256;x-amz-copy-source;x-amz-copy-source-range;"
                     "x-amz-date%s\nUNSIGNED-PAYLOAD",
                     path, query, host, copy_source, copy_range, date,
                     token ? "x-amz-security-token:" : "", token ? s->token : "", token ? "\n" : "",
                     token ? ";x-amz-security-token" : "");
    if (n < 0 || (size_t)n >= sizeof canonical ||
        tg_sha256_hex(canonical, (size_t)n, hash, "sigv4") != 0)
        return -1;
    snprintf(scope, sizeof scope, "%s/%s/s3/aws4_request", day, s->region);
    snprintf(to_sign, sizeof to_sign, "AWS4-HMAC-SHA256\n%s\n%s\n%s", date, scope, hash);
    if (sigv4_signature(s, day, to_sign, sig) != 0)
        return -1;
    n = snprintf(auth, auth_len,
                 "Authorization: AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=host;"
                 "x-amz-content-sha256;x-amz-copy-source;x-amz-copy-source-range;x-amz-date%s, "
                 "Signature=%s",
                 s->access, scope, token ? ";x-amz-security-token" : "", sig);
    snprintf(date_line, date_len, "x-amz-date: %s", date);
    return n < 0 || (size_t)n >= auth_len ? -1 : 0;
}

/* Runs one request; 0 when an HTTP answer came (req->status), -1 when none (errno
 * EHOSTDOWN: the store could not be reached or the transfer broke). */
static int s3_perform(s3_store *s, s3_request *req)
{
    char key_enc[2400], url[3600];
    req->status = 0;
    req->etag[0] = '\0';
    req->last_modified[0] = '\0';
    req->unreachable = false;
    if (req->key != NULL && encode_key(req->key, key_enc, sizeof key_enc) != 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int n = snprintf(url, sizeof url, "%s/%s%s%s%s%s", s->endpoint, s->bucket, req->key ? "/" : "",
                     req->key ? key_enc : "", req->query ? "?" : "", req->query ? req->query : "");
    if (n < 0 || (size_t)n >= sizeof url) {
        errno = ENAMETOOLONG;
        return -1;
    }
    CURL *curl = handle_get(s);
    if (curl == NULL) {
        errno = ENOMEM;
        return -1;
    }
    struct curl_slist *headers = NULL, *h;
    char line[4300];
    bool ok = true;
#define ADD_HEADER(...)                                                                            \
    do {                                                                                           \
        snprintf(line, sizeof line, __VA_ARGS__);                                                  \
        h = curl_slist_append(headers, line);                                                      \
        if (h == NULL)                                                                             \
            ok = false;                                                                            \
        else                                                                                       \
            headers = h;                                                                           \
    } while (0)
    ADD_HEADER("x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (s->token[0])
        ADD_HEADER("x-amz-security-token: %s", s->token);
    if (req->copy_source)
        ADD_HEADER("x-amz-copy-source: %s", req->copy_source);
    char auth[800] = "", date_line[64] = "";
    if (req->copy_range) {
        ADD_HEADER("x-amz-copy-source-range: %s", req->copy_range);
        char path[2600];
        snprintf(path, sizeof path, "/%s/%s", s->bucket, key_enc);
        if (req->key == NULL || req->copy_source == NULL ||
            sign_copy_part(s, path, req->query ? req->query : "", req->copy_source, req->copy_range,
                           auth, sizeof auth, date_line, sizeof date_line) != 0)
            ok = false;
        else {
            ADD_HEADER("%s", auth);
            ADD_HEADER("%s", date_line);
        }
    }
    if (req->range)
        ADD_HEADER("Range: %s", req->range);
#undef ADD_HEADER
    long connect_timeout = s->connect_timeout, low_speed_time = s->low_speed_time;
    s3_source source = {req->body, req->body_len, 0};
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    if (auth[0] == '\0') {
        curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, s->sigv4);
        curl_easy_setopt(curl, CURLOPT_USERPWD, s->userpwd);
    }
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, connect_timeout);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, low_speed_time);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, sink_write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, req->sink);
    curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, (long)S3_RECV_BUFFER);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, header_line);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, req);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    if (strcmp(req->method, "HEAD") == 0) {
        curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    } else if (strcmp(req->method, "PUT") == 0) {
        curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(curl, CURLOPT_READFUNCTION, source_read);
        curl_easy_setopt(curl, CURLOPT_READDATA, &source);
        curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, (curl_off_t)req->body_len);
        curl_easy_setopt(curl, CURLOPT_UPLOAD_BUFFERSIZE, (long)S3_SEND_BUFFER);
    } else if (strcmp(req->method, "POST") == 0) {
        curl_easy_setopt(curl, CURLOPT_POST, 1L);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, req->body ? (const char *)req->body : "");
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    } else if (strcmp(req->method, "GET") != 0) {
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req->method);
    }
    CURLcode rc = ok ? curl_easy_perform(curl) : CURLE_OUT_OF_MEMORY;
    curl_slist_free_all(headers);
    if (rc == CURLE_OK) {
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &req->status);
        curl_off_t length = -1;
        curl_easy_getinfo(curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
        req->content_length = length >= 0 ? (uint64_t)length : 0;
    }
    handle_put(s, curl, rc == CURLE_OK);
    if (rc != CURLE_OK) {
        tg_log(TG_LOG_WARN, "s3: %s %s: %s", req->method, url, curl_easy_strerror(rc));
        req->unreachable = true;
        errno = rc == CURLE_OUT_OF_MEMORY ? ENOMEM : EHOSTDOWN;
        return -1;
    }
    return 0;
}

/* errno for an HTTP answer that is not a success. */
static int status_errno(long status)
{
    if (status == 404)
        return ENOENT;
    if (status == 403 || status == 401)
        return EACCES;
    if (status >= 500)
        return EHOSTDOWN;
    return EIO;
}

static void full_key(const s3_store *s, const char *what, const char *name, char *out,
                     size_t out_len)
{
    if (strcmp(what, "sha256") == 0)
        snprintf(out, out_len, "%ssha256/%.2s/%s", s->prefix, name, name);
    else
        snprintf(out, out_len, "%s%s/%s", s->prefix, what, name);
}

/* The text between <tag> and </tag> at or after from, into out; the end of the
 * closing tag, or NULL. */
static const char *xml_value(const char *from, const char *tag, char *out, size_t out_len)
{
    char open[64], close[64];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *a = strstr(from, open);
    if (a == NULL)
        return NULL;
    a += strlen(open);
    const char *b = strstr(a, close);
    if (b == NULL)
        return NULL;
    size_t n = (size_t)(b - a);
    if (n >= out_len)
        n = out_len - 1;
    memcpy(out, a, n);
    out[n] = '\0';
    return b + strlen(close);
}

/* ---- store ---- */

static void s3_close(tg_blobstore *store)
{
    s3_store *s = s3(store);
    for (int i = 0; i < s->pool_count; i++)
        curl_easy_cleanup(s->pool[i]);
    pthread_rwlock_destroy(&s->commit_lock);
    pthread_mutex_destroy(&s->pool_lock);
    pthread_mutex_destroy(&s->cache_lock);
    free(s);
}

static int s3_claim(tg_blobstore *store, char *err, size_t err_len)
{
    (void)store;
    (void)err;
    (void)err_len;
    return 0; /* any number of replicas share the bucket */
}

static int s3_lock(tg_blobstore *store, bool exclusive, bool wait)
{
    s3_store *s = s3(store);
    int rc;
    if (exclusive)
        rc = wait ? pthread_rwlock_wrlock(&s->commit_lock)
                  : pthread_rwlock_trywrlock(&s->commit_lock);
    else
        rc = wait ? pthread_rwlock_rdlock(&s->commit_lock)
                  : pthread_rwlock_tryrdlock(&s->commit_lock);
    if (rc != 0) {
        errno = rc == EBUSY ? EWOULDBLOCK : rc;
        return -1;
    }
    return 1;
}

static void s3_unlock(tg_blobstore *store, int handle)
{
    (void)handle;
    pthread_rwlock_unlock(&s3(store)->commit_lock);
}

/* ---- writes ---- */

static tg_store_status status_of(int err)
{
    return err == ENOSPC ? TG_STORE_NO_SPACE : TG_STORE_ERROR;
}

static tg_store_status s3_write_begin(tg_blobstore *store, tg_blob_writer **out)
{
    s3_store *s = s3(store);
    s3_writer *w = calloc(1, sizeof *w);
    unsigned char random[16];
    char hex[33];
    if (w == NULL)
        return TG_STORE_ERROR;
    if (RAND_bytes(random, sizeof random) != 1) {
        free(w);
        return TG_STORE_ERROR;
    }
    tg_hex_encode(random, sizeof random, hex);
    full_key(s, "tmp", hex, w->temp_key, sizeof w->temp_key);
    w->base.store = store;
    *out = &w->base;
    return TG_STORE_OK;
}

static void writer_free(s3_writer *w)
{
    for (unsigned i = 0; i < w->parts; i++)
        free(w->etags[i]);
    free(w->etags);
    free(w->upload_id);
    free(w->buf);
    for (unsigned i = 0; i < S3_PARTS_IN_FLIGHT; i++) {
        free(w->send[i].buf);
        free(w->send[i].etag);
    }
    free(w);
}

/* The upload id, URL-encoded, for a query. */
static int upload_query(const s3_writer *w, const char *before, char *out, size_t out_len)
{
    char *id = curl_easy_escape(NULL, w->upload_id, 0);
    if (id == NULL)
        return -1;
    int n = snprintf(out, out_len, "%suploadId=%s", before, id);
    curl_free(id);
    return n < 0 || (size_t)n >= out_len ? -1 : 0;
}

static int start_multipart(s3_store *s, s3_writer *w)
{
    s3_sink sink = {.grow = true, .max = 65536};
    s3_request req = {.method = "POST", .key = w->temp_key, .query = "uploads=", .sink = &sink};
    int rc = s3_perform(s, &req);
    char id[1024] = "";
    if (rc == 0 && req.status == 200 && sink.buf &&
        xml_value((char *)sink.buf, "UploadId", id, sizeof id) && id[0]) {
        w->upload_id = strdup(id);
        free(sink.buf);
        return w->upload_id ? 0 : -1;
    }
    if (rc == 0) {
        tg_log(TG_LOG_WARN, "s3: starting a multipart upload answered %ld", req.status);
        errno = status_errno(req.status);
    }
    free(sink.buf);
    return -1;
}

/* Before part w->parts + 1 goes: the multipart upload started, the part count
 * checked, room for its ETag. 0, or -1 with errno. */
static int prepare_part(s3_store *s, s3_writer *w)
{
    if (w->upload_id == NULL && start_multipart(s, w) != 0)
        return -1;
    if (w->parts >= S3_MAX_PARTS) {
        errno = EFBIG;
        return -1;
    }
    if (w->parts == w->etag_cap) {
        unsigned cap = w->etag_cap ? w->etag_cap * 2 : 16;
        char **grown = realloc(w->etags, cap * sizeof *grown);
        if (grown == NULL)
            return -1;
        w->etags = grown;
        w->etag_cap = cap;
    }
    w->etags[w->parts] = NULL;
    return 0;
}

/* Sends len bytes as part number; its ETag goes to *etag (w is only read, so it
 * may run on a thread of its own while the writer fills the next part). 0, or -1
 * with errno. */
static int send_part(s3_store *s, const s3_writer *w, const unsigned char *buf, size_t len,
                     unsigned number, char **etag)
{
    char query[1200], part[32];
    snprintf(part, sizeof part, "partNumber=%u&", number);
    if (upload_query(w, part, query, sizeof query) != 0)
        return -1;
    const char *fail = tg_test_hook(TG_HOOK_S3_PART_FAIL);
    if (fail != NULL && strtoul(fail, NULL, 10) == number)
        snprintf(query, sizeof query, "%suploadId=no-such-upload", part); /* refused: 404 */
    s3_request req = {
        .method = "PUT", .key = w->temp_key, .query = query, .body = buf, .body_len = len};
    if (s3_perform(s, &req) != 0)
        return -1;
    if (req.status != 200 || req.etag[0] == '\0') {
        tg_log(TG_LOG_WARN, "s3: uploading part %u answered %ld", number, req.status);
        errno = status_errno(req.status);
        return -1;
    }
    *etag = strdup(req.etag);
    return *etag != NULL ? 0 : -1;
}

/* Uploads the buffer as the next part, here and now (the last part, at commit). */
static int upload_part(s3_store *s, s3_writer *w)
{
    if (prepare_part(s, w) != 0)
        return -1;
    w->parts++;
    if (send_part(s, w, w->buf, w->buf_len, w->parts, &w->etags[w->parts - 1]) != 0)
        return -1;
    w->buf_len = 0;
    return 0;
}

static void *part_main(void *arg)
{
    s3_part_send *send = arg;
    send->rc = send_part(send->s, send->w, send->buf, send->len, send->number, &send->etag);
    send->err = send->rc != 0 ? errno : 0;
    return NULL;
}

/* Joins one part's sender; its ETag moves to w->etags. 0, or -1 with errno. */
static int part_join(s3_writer *w, s3_part_send *send)
{
    pthread_join(send->thread, NULL);
    send->busy = false;
    w->etags[send->number - 1] = send->etag;
    send->etag = NULL;
    if (send->rc != 0) {
        errno = send->err != 0 ? send->err : EIO;
        return -1;
    }
    return 0;
}

/* Waits for every part in flight: 0 when all were sent (or none was in flight),
 * else -1 with the errno of one that failed. */
static int part_wait(s3_writer *w)
{
    int rc = 0, err = 0;
    for (unsigned i = 0; i < S3_PARTS_IN_FLIGHT; i++)
        if (w->send[i].busy && part_join(w, &w->send[i]) != 0) {
            rc = -1;
            err = errno;
        }
    if (rc != 0)
        errno = err;
    return rc;
}

/* The buffer holds a full part: it goes on a thread of its own (a free slot, or
 * the oldest one's once it is sent), and the writer fills that slot's old buffer
 * meanwhile. Without a thread, it is sent here. 0, or -1 with errno (this part's
 * failure, or an earlier one's). */
static int part_dispatch(s3_store *s, s3_writer *w)
{
    s3_part_send *send = NULL, *oldest = NULL;
    for (unsigned i = 0; i < S3_PARTS_IN_FLIGHT && send == NULL; i++) {
        if (!w->send[i].busy)
            send = &w->send[i];
        else if (oldest == NULL || w->send[i].number < oldest->number)
            oldest = &w->send[i];
    }
    if (send == NULL) {
        if (part_join(w, oldest) != 0)
            return -1;
        send = oldest;
    }
    if (prepare_part(s, w) != 0)
        return -1;
    unsigned char *free_buf = send->buf;
    size_t free_cap = send->cap;
    send->s = s;
    send->w = w;
    send->buf = w->buf;
    send->cap = w->buf_cap;
    send->len = w->buf_len;
    send->number = w->parts + 1;
    send->etag = NULL;
    send->rc = send->err = 0;
    w->parts++;
    if (pthread_create(&send->thread, NULL, part_main, send) != 0) {
        send->buf = free_buf;
        send->cap = free_cap;
        if (send_part(s, w, w->buf, w->buf_len, w->parts, &w->etags[w->parts - 1]) != 0)
            return -1;
        w->buf_len = 0;
        return 0;
    }
    send->busy = true;
    w->buf = free_buf;
    w->buf_cap = free_cap;
    w->buf_len = 0;
    return 0;
}

/* The size of part k (0-based): 5 MiB, doubling every part_doubling parts so the
 * largest upload (--max-body) fits in 10,000 parts while a small one buffers 5 MiB
 * at most. */
static uint64_t part_size_for(const s3_store *s, unsigned k)
{
    unsigned shift = k / s->part_doubling;
    if (shift > 10)
        shift = 10;
    uint64_t size = S3_MIN_PART << shift;
    return size > S3_MAX_PART ? S3_MAX_PART : size;
}

/* The largest blob the schedule part_size_for(doubling) can carry. */
static uint64_t schedule_capacity(unsigned doubling)
{
    uint64_t total = 0;
    for (unsigned k = 0; k < S3_MAX_PARTS; k++) {
        unsigned shift = k / doubling > 10 ? 10 : k / doubling;
        uint64_t size = S3_MIN_PART << shift;
        total += size > S3_MAX_PART ? S3_MAX_PART : size;
    }
    return total;
}

static tg_store_status s3_write(tg_blob_writer *writer, const void *buf, size_t len)
{
    s3_writer *w = (s3_writer *)writer;
    s3_store *s = s3(writer->store);
    const unsigned char *p = buf;
    while (len > 0) {
        uint64_t part = part_size_for(s, w->parts);
        if (w->buf_cap < part && w->buf_len + len > w->buf_cap) {
            /* the buffer grows with what is written, up to one part */
            uint64_t cap = w->buf_cap ? w->buf_cap * 2 : 65536;
            while (cap < w->buf_len + len && cap < part)
                cap *= 2;
            if (cap > part)
                cap = part;
            unsigned char *grown = realloc(w->buf, (size_t)cap);
            if (grown == NULL)
                return TG_STORE_ERROR;
            w->buf = grown;
            w->buf_cap = (size_t)cap;
        }
        size_t room = w->buf_cap - w->buf_len, n = len < room ? len : room;
        memcpy(w->buf + w->buf_len, p, n);
        w->buf_len += n;
        w->total += n;
        p += n;
        len -= n;
        if (w->buf_len == part && part_dispatch(s, w) != 0)
            return status_of(errno);
    }
    return TG_STORE_OK;
}

static void abort_multipart(s3_store *s, const char *key, const char *upload_id)
{
    char *id = curl_easy_escape(NULL, upload_id, 0);
    char query[1200];
    if (id == NULL)
        return;
    snprintf(query, sizeof query, "uploadId=%s", id);
    curl_free(id);
    s3_request req = {.method = "DELETE", .key = key, .query = query};
    if (s3_perform(s, &req) == 0 && req.status != 204 && req.status != 200 && req.status != 404)
        tg_log(TG_LOG_WARN, "s3: aborting the multipart upload of %s answered %ld", key,
               req.status);
}

static int delete_key(s3_store *s, const char *key)
{
    s3_request req = {.method = "DELETE", .key = key};
    if (s3_perform(s, &req) != 0)
        return -1;
    if (req.status == 204 || req.status == 200)
        return 0;
    errno = status_errno(req.status);
    return -1;
}

static int head_key(s3_store *s, const char *key, uint64_t *size, char *last_modified,
                    size_t lm_len)
{
    s3_request req = {.method = "HEAD", .key = key};
    if (s3_perform(s, &req) != 0)
        return -1;
    if (req.status != 200) {
        errno = status_errno(req.status);
        return -1;
    }
    *size = req.content_length;
    if (last_modified)
        snprintf(last_modified, lm_len, "%s", req.last_modified);
    return 0;
}

static int complete_multipart(s3_store *s, s3_writer *w)
{
    size_t cap = 128; /* each part: its tags (about 60 bytes) and its ETag */
    for (unsigned i = 0; i < w->parts; i++)
        cap += 80 + strlen(w->etags[i]);
    char *xml = malloc(cap), query[1200];
    if (xml == NULL)
        return -1;
    size_t n = (size_t)snprintf(xml, cap, "<CompleteMultipartUpload>");
    for (unsigned i = 0; i < w->parts; i++)
        n += (size_t)snprintf(xml + n, cap - n,
                              "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>", i + 1,
                              w->etags[i]);
    n += (size_t)snprintf(xml + n, cap - n, "</CompleteMultipartUpload>");
    if (upload_query(w, "", query, sizeof query) != 0) {
        free(xml);
        return -1;
    }
    s3_sink sink = {.grow = true, .max = S3_MAX_COMPLETE_XML};
    s3_request req = {.method = "POST",
                      .key = w->temp_key,
                      .query = query,
                      .body = xml,
                      .body_len = n,
                      .sink = &sink};
    int rc = s3_perform(s, &req);
    free(xml);
    /* A 200 may still carry an <Error> (S3 documents it); radosgw 16.2 leaves the
     * ETag empty, so the result is checked with HEAD below. */
    bool failed = rc != 0 || req.status != 200 || (sink.buf && strstr((char *)sink.buf, "<Error>"));
    if (rc == 0 && failed)
        tg_log(TG_LOG_WARN, "s3: completing the multipart upload answered %ld", req.status);
    free(sink.buf);
    if (failed) {
        if (rc == 0)
            errno = status_errno(req.status);
        return -1;
    }
    uint64_t size = 0;
    if (head_key(s, w->temp_key, &size, NULL, 0) != 0)
        return -1;
    if (size != w->total) {
        tg_log(TG_LOG_ERROR, "s3: the completed upload %s holds %llu bytes, not %llu", w->temp_key,
               (unsigned long long)size, (unsigned long long)w->total);
        errno = EIO;
        return -1;
    }
    return 0;
}

/* Copies the temporary object to key (server side). */
static int copy_object(s3_store *s, const char *from, const char *to, uint64_t size)
{
    char source[1500], enc[1400];
    if (encode_key(from, enc, sizeof enc) != 0)
        return -1;
    snprintf(source, sizeof source, "/%s/%s", s->bucket, enc);
    uint64_t max_copy = S3_MAX_COPY, copy_part = S3_COPY_PART;
    /* the test hook S3_MAX_COPY=BYTES (test_hooks.h) lowers the CopyObject limit (and
     * the copy part size to 5 MiB) so the UploadPartCopy path runs on small objects */
    const char *knob = tg_test_hook(TG_HOOK_S3_MAX_COPY);
    if (knob != NULL) {
        max_copy = strtoull(knob, NULL, 10);
        copy_part = S3_MIN_PART;
    }
    if (size <= max_copy) {
        s3_sink sink = {.grow = true, .max = 65536};
        s3_request req = {.method = "PUT", .key = to, .copy_source = source, .sink = &sink};
        int rc = s3_perform(s, &req);
        bool failed =
            rc != 0 || req.status != 200 || (sink.buf && strstr((char *)sink.buf, "<Error>"));
        free(sink.buf);
        if (rc == 0 && failed) {
            tg_log(TG_LOG_WARN, "s3: copying %s to %s answered %ld", from, to, req.status);
            errno = status_errno(req.status);
        }
        return failed ? -1 : 0;
    }
    /* Above 5 GiB: a multipart upload of the content key from ranges of the source. */
    s3_writer copy = {0};
    snprintf(copy.temp_key, sizeof copy.temp_key, "%s", to);
    if (start_multipart(s, &copy) != 0)
        return -1;
    int result = 0;
    for (uint64_t at = 0; at < size && result == 0; at += copy_part) {
        uint64_t end = at + copy_part < size ? at + copy_part : size;
        char range[80], query[1200], number[32];
        snprintf(range, sizeof range, "bytes=%llu-%llu", (unsigned long long)at,
                 (unsigned long long)(end - 1));
        snprintf(number, sizeof number, "partNumber=%u&", copy.parts + 1);
        if (copy.parts == copy.etag_cap) {
            unsigned cap = copy.etag_cap ? copy.etag_cap * 2 : 16;
            char **grown = realloc(copy.etags, cap * sizeof *grown);
            if (grown == NULL) {
                result = -1;
                break;
            }
            copy.etags = grown;
            copy.etag_cap = cap;
        }
        s3_sink sink = {.grow = true, .max = 65536};
        s3_request req = {
            .method = "PUT", .key = to, .copy_source = source, .copy_range = range, .sink = &sink};
        char etag[160] = "";
        if (upload_query(&copy, number, query, sizeof query) != 0) {
            free(sink.buf);
            result = -1;
            break;
        }
        req.query = query;
        if (s3_perform(s, &req) != 0 || req.status != 200 || sink.buf == NULL ||
            !xml_value((char *)sink.buf, "ETag", etag, sizeof etag)) {
            result = -1;
        } else {
            /* the ETag comes as &quot;...&quot; or "..." */
            copy.etags[copy.parts] = strdup(etag);
            if (copy.etags[copy.parts] == NULL)
                result = -1;
            else
                copy.parts++;
        }
        free(sink.buf);
    }
    copy.total = size;
    if (result == 0)
        result = complete_multipart(s, &copy);
    if (result != 0)
        abort_multipart(s, to, copy.upload_id);
    for (unsigned i = 0; i < copy.parts; i++)
        free(copy.etags[i]);
    free(copy.etags);
    free(copy.upload_id);
    return result;
}

static tg_store_status s3_write_commit(tg_blob_writer *writer, const char *hex)
{
    s3_writer *w = (s3_writer *)writer;
    s3_store *s = s3(writer->store);
    char key[700];
    full_key(s, "sha256", hex, key, sizeof key);
    int rc = 0;
    if (w->upload_id == NULL) {
        /* one part at most: PUT at the content key (the same bytes as any copy there) */
        s3_request req = {.method = "PUT", .key = key, .body = w->buf, .body_len = w->buf_len};
        rc = s3_perform(s, &req);
        if (rc == 0 && req.status != 200) {
            tg_log(TG_LOG_WARN, "s3: PUT %s answered %ld", key, req.status);
            errno = status_errno(req.status);
            rc = -1;
        }
    } else {
        rc = part_wait(w);
        if (rc == 0 && (w->buf_len > 0 || w->parts == 0))
            rc = upload_part(s, w);
        if (rc == 0)
            rc = complete_multipart(s, w);
        if (rc != 0) {
            abort_multipart(s, w->temp_key, w->upload_id);
        } else {
            uint64_t size = 0;
            bool present = head_key(s, key, &size, NULL, 0) == 0 && size == w->total;
            if (!present)
                rc = copy_object(s, w->temp_key, key, w->total);
            int saved = errno;
            if (delete_key(s, w->temp_key) != 0)
                tg_log(TG_LOG_WARN, "s3: could not delete %s (gc removes it later)", w->temp_key);
            errno = saved;
        }
    }
    int saved = errno;
    writer_free(w);
    if (rc != 0) {
        errno = saved;
        return status_of(saved);
    }
    tg_blob_clear_damaged(&s->base, hex);
    return TG_STORE_OK;
}

static void s3_write_abort(tg_blob_writer *writer)
{
    s3_writer *w = (s3_writer *)writer;
    (void)part_wait(w); /* its part goes with the upload */
    if (w->upload_id != NULL)
        abort_multipart(s3(writer->store), w->temp_key, w->upload_id);
    writer_free(w);
}

/* ---- reads ---- */

static tg_blob_reader *s3_open(tg_blobstore *store, const char *hex, uint64_t size,
                               tg_blob_check *check)
{
    s3_store *s = s3(store);
    char key[700];
    uint64_t stored = 0;
    full_key(s, "sha256", hex, key, sizeof key);
    if (head_key(s, key, &stored, NULL, 0) != 0) {
        int saved = errno;
        *check = saved == ENOENT ? TG_BLOB_MISSING : TG_BLOB_UNREADABLE;
        if (saved == ENOENT && size != TG_BLOB_SIZE_UNCHECKED)
            tg_blob_mark_damaged(store, hex, "it is missing from the bucket");
        errno = saved;
        return NULL;
    }
    if (size != TG_BLOB_SIZE_UNCHECKED && stored != size) {
        tg_blob_mark_damaged(store, hex, "it holds %llu bytes; the catalog says %llu",
                             (unsigned long long)stored, (unsigned long long)size);
        *check = TG_BLOB_DAMAGED;
        errno = EIO;
        return NULL;
    }
    s3_reader *r = calloc(1, sizeof *r);
    if (r == NULL) {
        *check = TG_BLOB_UNREADABLE;
        errno = ENOMEM;
        return NULL;
    }
    *check = TG_BLOB_OK;
    r->base.store = store;
    r->base.size = stored;
    r->base.fd = -1;
    snprintf(r->base.hex, sizeof r->base.hex, "%s", hex);
    return &r->base;
}

/* ---- the read cache ---- */

static void cache_path(const s3_store *s, const char *hex, uint64_t index, char *out, size_t len)
{
    snprintf(out, len, "%s/%s.%llu", s->cache_dir, hex, (unsigned long long)index);
}

/* Fills buf with the cached window (exactly want bytes): true on a hit. */
static bool cache_get(s3_store *s, const char *hex, uint64_t index, unsigned char *buf, size_t want)
{
    char path[4200];
    cache_path(s, hex, index, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st;
    bool hit = fstat(fd, &st) == 0 && (uint64_t)st.st_size == want;
    size_t done = 0;
    while (hit && done < want) {
        ssize_t n = pread(fd, buf + done, want - done, (off_t)done);
        if (n <= 0)
            hit = false;
        else
            done += (size_t)n;
    }
    if (hit)
        (void)futimens(fd, NULL); /* recently used: evicted last */
    close(fd);
    return hit;
}

typedef struct cache_entry {
    char name[256];
    time_t mtime;
    uint64_t size;
} cache_entry;

static int by_mtime(const void *a, const void *b)
{
    const cache_entry *x = a, *y = b;
    return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

/* Removes the least recently used windows until the cache holds 3/4 of its bound;
 * cache_lock held. Recounts cache_bytes from the directory. */
static void cache_evict(s3_store *s)
{
    DIR *dir = opendir(s->cache_dir);
    if (dir == NULL)
        return;
    size_t count = 0, cap = 0;
    cache_entry *entries = NULL;
    uint64_t total = 0;
    struct dirent *d;
    while ((d = readdir(dir)) != NULL) {
        struct stat st;
        if (d->d_name[0] == '.' || strlen(d->d_name) >= sizeof entries->name ||
            fstatat(dirfd(dir), d->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (count == cap) {
            size_t grown_cap = cap ? cap * 2 : 256;
            cache_entry *grown = realloc(entries, grown_cap * sizeof *grown);
            if (grown == NULL)
                break;
            entries = grown;
            cap = grown_cap;
        }
        snprintf(entries[count].name, sizeof entries[count].name, "%s", d->d_name);
        entries[count].mtime = st.st_mtime;
        entries[count].size = (uint64_t)st.st_size;
        total += (uint64_t)st.st_size;
        count++;
    }
    if (entries != NULL)
        qsort(entries, count, sizeof *entries, by_mtime);
    for (size_t i = 0; i < count && total > s->cache_size / 4 * 3; i++)
        if (unlinkat(dirfd(dir), entries[i].name, 0) == 0)
            total -= entries[i].size;
    closedir(dir);
    free(entries);
    s->cache_bytes = total;
}

static void cache_put(s3_store *s, const char *hex, uint64_t index, const unsigned char *buf,
                      size_t len)
{
    if (len > s->cache_size)
        return;
    char path[4200], temp[4300];
    cache_path(s, hex, index, path, sizeof path);
    snprintf(temp, sizeof temp, "%s/.tmp.%s.%llu.%ld.%lx", s->cache_dir, hex,
             (unsigned long long)index, (long)getpid(), (unsigned long)pthread_self());
    int fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, buf + done, len - done);
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    if (close(fd) != 0 || done < len || rename(temp, path) != 0) {
        unlink(temp);
        return;
    }
    pthread_mutex_lock(&s->cache_lock);
    s->cache_bytes += len;
    if (s->cache_bytes > s->cache_size)
        cache_evict(s);
    pthread_mutex_unlock(&s->cache_lock);
}

/* ---- sequential reads: one open transfer ---- */

static void stream_close(s3_reader *r)
{
    if (r->easy != NULL) {
        if (r->multi != NULL)
            curl_multi_remove_handle(r->multi, r->easy);
        curl_easy_cleanup(r->easy);
    }
    if (r->multi != NULL)
        curl_multi_cleanup(r->multi);
    curl_slist_free_all(r->stream_headers);
    r->easy = NULL;
    r->multi = NULL;
    r->stream_headers = NULL;
    r->ring_at = r->ring_len = 0;
}

static size_t stream_write(char *data, size_t size, size_t n, void *ctx)
{
    s3_reader *r = ctx;
    size_t len = size * n;
    if (r->stream_status == 0)
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->stream_status);
    if (r->stream_status != 206 && r->stream_status != 200)
        return len; /* an error document: dropped, the status says it */
    if (r->direct != NULL && r->ring_len == 0) {
        size_t room = r->direct_cap - r->direct_len, take = len < room ? len : room;
        if (len - take <= S3_STREAM_BUFFER) {
            /* all of it is taken: what the caller has no room for starts the ring */
            memcpy(r->direct + r->direct_len, data, take);
            r->direct_len += take;
            memcpy(r->ring, data + take, len - take);
            r->ring_at = 0;
            r->ring_len = len - take;
            return len;
        }
    }
    if (r->ring_at > 0 && r->ring_at + r->ring_len + len > S3_STREAM_BUFFER) {
        memmove(r->ring, r->ring + r->ring_at, r->ring_len);
        r->ring_at = 0;
    }
    if (r->ring_len + len > S3_STREAM_BUFFER) {
        r->stream_paused = true;
        return CURL_WRITEFUNC_PAUSE; /* curl hands the same bytes again after unpause */
    }
    memcpy(r->ring + r->ring_at + r->ring_len, data, len);
    r->ring_len += len;
    return len;
}

/* Opens a GET of bytes offset..end: 0, or -1 with errno. */
static int stream_open(s3_store *s, s3_reader *r, uint64_t offset)
{
    char key[700], key_enc[2400], url[3600], line[4300];
    stream_close(r);
    if (r->ring == NULL && (r->ring = malloc(S3_STREAM_BUFFER)) == NULL)
        return -1;
    full_key(s, "sha256", r->base.hex, key, sizeof key);
    if (encode_key(key, key_enc, sizeof key_enc) != 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    snprintf(url, sizeof url, "%s/%s/%s", s->endpoint, s->bucket, key_enc);
    r->multi = curl_multi_init();
    r->easy = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    r->stream_headers = h;
    /* to the end of the span the reader was told of (tg_blob_read_span), else of
     * the object: the store sends no byte that will not be read */
    uint64_t end = r->base.span_end > offset ? r->base.span_end : 0;
    if (end != 0)
        snprintf(line, sizeof line, "Range: bytes=%llu-%llu", (unsigned long long)offset,
                 (unsigned long long)(end - 1));
    else
        snprintf(line, sizeof line, "Range: bytes=%llu-", (unsigned long long)offset);
    if (h != NULL && (h = curl_slist_append(r->stream_headers, line)) != NULL)
        r->stream_headers = h;
    if (h != NULL && s->token[0]) {
        snprintf(line, sizeof line, "x-amz-security-token: %s", s->token);
        if ((h = curl_slist_append(r->stream_headers, line)) != NULL)
            r->stream_headers = h;
    }
    if (r->multi == NULL || r->easy == NULL || h == NULL) {
        stream_close(r);
        errno = ENOMEM;
        return -1;
    }
    long connect_timeout = s->connect_timeout, low_speed_time = s->low_speed_time;
    curl_easy_setopt(r->easy, CURLOPT_URL, url);
    curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(r->easy, CURLOPT_AWS_SIGV4, s->sigv4);
    curl_easy_setopt(r->easy, CURLOPT_USERPWD, s->userpwd);
    curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->stream_headers);
    curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT, connect_timeout);
    curl_easy_setopt(r->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(r->easy, CURLOPT_LOW_SPEED_TIME, low_speed_time);
    curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, stream_write);
    curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(r->easy, CURLOPT_BUFFERSIZE, (long)S3_RECV_BUFFER);
    curl_easy_setopt(r->easy, CURLOPT_PROTOCOLS_STR, "http,https");
    if (curl_multi_add_handle(r->multi, r->easy) != CURLM_OK) {
        stream_close(r);
        errno = ENOMEM;
        return -1;
    }
    r->stream_pos = offset;
    r->stream_end = end;
    r->stream_paused = r->stream_done = false;
    r->stream_status = 0;
    r->stream_result = CURLE_OK;
    return 0;
}

/* Up to len bytes at the stream's position: the count, 0 at the end, -1 (errno).
 * It waits only for the first byte, then takes whatever else curl has at hand
 * (up to len), so the response goes out in blocks as large as the caller's. */
static ssize_t stream_read(s3_reader *r, void *buf, size_t len)
{
    unsigned char *out = buf;
    size_t got = 0;
    for (;;) {
        if (r->ring_len > 0) {
            size_t n = len - got < r->ring_len ? len - got : r->ring_len;
            memcpy(out + got, r->ring + r->ring_at, n);
            got += n;
            r->ring_at += n;
            r->ring_len -= n;
            r->stream_pos += n;
            if (r->ring_len == 0)
                r->ring_at = 0;
            if (r->stream_paused) {
                r->stream_paused = false;
                curl_easy_pause(r->easy, CURLPAUSE_CONT);
            }
        }
        if (got == len)
            return (ssize_t)got;
        if (r->stream_done) {
            if (got > 0)
                return (ssize_t)got;
            if (r->stream_status == 416)
                return 0;
            if (r->stream_result != CURLE_OK) {
                tg_log(TG_LOG_WARN, "s3: reading %s at %llu: %s", r->base.hex,
                       (unsigned long long)r->stream_pos, curl_easy_strerror(r->stream_result));
                errno = EHOSTDOWN;
                return -1;
            }
            if (r->stream_status != 206 && r->stream_status != 200) {
                errno = status_errno(r->stream_status);
                return -1;
            }
            return 0; /* the object ended */
        }
        int running = 0;
        r->direct = out + got;
        r->direct_cap = len - got;
        r->direct_len = 0;
        CURLMcode mc = curl_multi_perform(r->multi, &running);
        size_t fresh = r->direct_len;
        r->direct = NULL;
        got += fresh;
        r->stream_pos += fresh;
        if (mc != CURLM_OK) {
            errno = EIO;
            return -1;
        }
        CURLMsg *msg;
        int left = 0;
        while ((msg = curl_multi_info_read(r->multi, &left)) != NULL)
            if (msg->msg == CURLMSG_DONE) {
                r->stream_done = true;
                r->stream_result = msg->data.result;
                if (r->stream_status == 0)
                    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->stream_status);
            }
        if (r->ring_len > 0 || r->stream_done)
            continue;
        if (got > 0 && fresh == 0)
            return (ssize_t)got; /* nothing more at hand: send what there is */
        if (got == 0 && curl_multi_poll(r->multi, NULL, 0, 1000, NULL) != CURLM_OK) {
            errno = EIO;
            return -1;
        }
    }
}

static ssize_t s3_read(tg_blob_reader *reader, void *buf, size_t len, uint64_t offset)
{
    s3_reader *r = (s3_reader *)reader;
    s3_store *s = s3(reader->store);
    if (offset >= reader->size || len == 0)
        return 0;
    if (r->easy != NULL && offset == r->stream_pos &&
        (r->stream_end == 0 || offset < r->stream_end))
        return stream_read(r, buf, len);
    if (r->easy == NULL && offset == reader->span_start && reader->span_end > offset &&
        reader->span_end - offset > S3_WINDOW) {
        /* the start of a span longer than a window: one GET of exactly the span, its
         * bytes sent on as they come (no window fetched whole first) */
        if (stream_open(s, r, offset) != 0)
            return -1;
        return stream_read(r, buf, len);
    }
    if (r->window_len > 0 && offset == r->window_start + r->window_len) {
        /* reading on past a whole window: one transfer for the rest */
        if (stream_open(s, r, offset) != 0)
            return -1;
        r->window_len = 0;
        return stream_read(r, buf, len);
    }
    if (r->window_len == 0 || offset < r->window_start ||
        offset >= r->window_start + r->window_len) {
        /* windows are aligned, so the cache names them by index */
        uint64_t index = offset / S3_WINDOW, start = index * S3_WINDOW;
        uint64_t want = reader->size - start;
        if (want > S3_WINDOW)
            want = S3_WINDOW;
        if (r->window == NULL) {
            size_t cap = reader->size < S3_WINDOW ? (size_t)reader->size : S3_WINDOW;
            r->window = malloc(cap);
            if (r->window == NULL)
                return -1;
            r->window_cap = cap;
        }
        r->window_len = 0;
        if (s->cache_dir[0] && cache_get(s, reader->hex, index, r->window, (size_t)want)) {
            __atomic_add_fetch(&s->hits, 1, __ATOMIC_RELAXED);
            r->window_start = start;
            r->window_len = (size_t)want;
        } else {
            if (s->cache_dir[0])
                __atomic_add_fetch(&s->misses, 1, __ATOMIC_RELAXED);
            char key[700], range[80];
            full_key(s, "sha256", reader->hex, key, sizeof key);
            snprintf(range, sizeof range, "bytes=%llu-%llu", (unsigned long long)start,
                     (unsigned long long)(start + want - 1));
            s3_sink sink = {.buf = r->window, .cap = (size_t)want};
            s3_request req = {.method = "GET", .key = key, .range = range, .sink = &sink};
            if (s3_perform(s, &req) != 0)
                return -1;
            if (req.status == 416)
                return 0; /* the object ends before offset */
            if (req.status != 206 && req.status != 200) {
                errno = status_errno(req.status);
                return -1;
            }
            if (req.status == 200 && start != 0) {
                errno = EIO;
                return -1;
            }
            r->window_start = start;
            r->window_len = sink.len;
            if (s->cache_dir[0] && sink.len == want)
                cache_put(s, reader->hex, index, r->window, sink.len);
        }
        if (offset >= r->window_start + r->window_len)
            return 0; /* the object is shorter than it said */
    }
    uint64_t at = offset - r->window_start;
    size_t avail = r->window_len - (size_t)at, n = len < avail ? len : avail;
    memcpy(buf, r->window + at, n);
    return (ssize_t)n;
}

static void s3_reader_close(tg_blob_reader *reader)
{
    s3_reader *r = (s3_reader *)reader;
    stream_close(r);
    free(r->ring);
    free(r->window);
    free(r);
}

/* ---- stat, remove, list ---- */

static int s3_stat(tg_blobstore *store, const char *hex, uint64_t *size)
{
    char key[700];
    full_key(s3(store), "sha256", hex, key, sizeof key);
    return head_key(s3(store), key, size, NULL, 0);
}

/* Seconds since the epoch of an HTTP date ("Wed, 25 Nov 2026 02:11:49 GMT"), or -1. */
static time_t parse_http_time(const char *text)
{
    struct tm tm = {0};
    const char *end = strptime(text, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    return end == NULL ? -1 : timegm(&tm);
}

/* Removes one blob. An object written within the grace period is left alone
 * (-1, EBUSY): another replica may have committed this content a moment ago and
 * not yet written its catalog row (an upload's reclaim of replaced content is then
 * gc's, later). */
static int s3_remove(tg_blobstore *store, const char *hex)
{
    s3_store *s = s3(store);
    char key[700], modified[64] = "";
    uint64_t size;
    full_key(s, "sha256", hex, key, sizeof key);
    if (head_key(s, key, &size, modified, sizeof modified) != 0)
        return -1; /* ENOENT when there is none */
    if (s->gc_grace > 0) {
        time_t at = parse_http_time(modified);
        if (at < 0 || time(NULL) - at < (time_t)s->gc_grace) {
            errno = EBUSY;
            return -1;
        }
    }
    return delete_key(s, key);
}

/* Seconds since the epoch of an ISO 8601 UTC time ("2026-11-25T02:11:49.185Z"), or
 * -1 when text is not one (callers then treat the object as too young to touch). */
static time_t parse_iso_time(const char *text)
{
    static const char seps[6] = {'-', '-', 'T', ':', ':', '\0'};
    long parts[6];
    const char *p = text;
    for (int i = 0; i < 6; i++) {
        char *end = NULL;
        parts[i] = strtol(p, &end, 10);
        if (end == p || (i < 5 && *end != seps[i]))
            return -1;
        p = i < 5 ? end + 1 : end;
    }
    struct tm tm = {.tm_year = (int)parts[0] - 1900,
                    .tm_mon = (int)parts[1] - 1,
                    .tm_mday = (int)parts[2],
                    .tm_hour = (int)parts[3],
                    .tm_min = (int)parts[4],
                    .tm_sec = (int)parts[5]};
    return timegm(&tm);
}

typedef int (*list_visit)(void *ctx, const char *key, const char *last_modified);

/* Lists every key under prefix (ListObjectsV2, pages of 1000). */
static int list_keys(s3_store *s, const char *prefix, list_visit visit, void *ctx)
{
    char token[2048] = "";
    for (;;) {
        char *p = curl_easy_escape(NULL, prefix, 0);
        char *t = token[0] ? curl_easy_escape(NULL, token, 0) : NULL;
        char query[4600];
        if (p == NULL || (token[0] && t == NULL)) {
            curl_free(p);
            curl_free(t);
            errno = ENOMEM;
            return -1;
        }
        /* the parameters in the canonical (sorted) order SigV4 wants */
        snprintf(query, sizeof query, "%s%s%slist-type=2&max-keys=1000&prefix=%s",
                 t ? "continuation-token=" : "", t ? t : "", t ? "&" : "", p);
        curl_free(p);
        curl_free(t);
        s3_sink sink = {.grow = true, .max = S3_MAX_XML};
        s3_request req = {.method = "GET", .query = query, .sink = &sink};
        if (s3_perform(s, &req) != 0) {
            free(sink.buf);
            return -1;
        }
        if (req.status != 200 || sink.buf == NULL) {
            tg_log(TG_LOG_WARN, "s3: listing %s answered %ld", prefix, req.status);
            free(sink.buf);
            errno = status_errno(req.status);
            return -1;
        }
        const char *at = (char *)sink.buf, *next;
        char contents[4096];
        int stop = 0;
        while (!stop && (next = xml_value(at, "Contents", contents, sizeof contents)) != NULL) {
            char key[1100], modified[64] = "";
            if (xml_value(contents, "Key", key, sizeof key) != NULL) {
                xml_value(contents, "LastModified", modified, sizeof modified);
                stop = visit(ctx, key, modified);
            }
            at = next;
        }
        char truncated[16] = "";
        xml_value((char *)sink.buf, "IsTruncated", truncated, sizeof truncated);
        token[0] = '\0';
        if (!stop && strcmp(truncated, "true") == 0)
            xml_value((char *)sink.buf, "NextContinuationToken", token, sizeof token);
        free(sink.buf);
        if (stop || token[0] == '\0')
            return 0;
    }
}

typedef struct each_ctx {
    s3_store *store;
    size_t skip;   /* the length of the listed prefix */
    bool blobs;    /* sha256/ab/<hex>: skip the "ab/" */
    time_t newest; /* objects modified after this are left out (gc grace) */
    long swept;    /* sweep_key: objects removed */
    int (*visit)(void *ctx, const char *hex);
    void *ctx;
} each_ctx;

static int each_key(void *ctx, const char *key, const char *last_modified)
{
    each_ctx *e = ctx;
    if (strlen(key) < e->skip)
        return 0;
    const char *name = key + e->skip;
    if (e->blobs) {
        if (strlen(name) != 3 + TG_SHA256_HEX_LEN || name[2] != '/' ||
            strncmp(name, name + 3, 2) != 0)
            return 0;
        name += 3;
    }
    if (!tg_is_sha256_hex(name))
        return 0;
    if (e->newest != 0) {
        time_t modified = parse_iso_time(last_modified);
        if (modified < 0 || modified > e->newest)
            return 0; /* within the grace period (or of unknown age): left alone */
    }
    return e->visit(e->ctx, name);
}

/* Removes temporary objects and aborts multipart uploads under tmp/ older than
 * the grace period (what a replica that died mid-upload left). */
static int sweep_key(void *ctx, const char *key, const char *last_modified)
{
    each_ctx *e = ctx;
    time_t modified = parse_iso_time(last_modified);
    if (modified >= 0 && modified <= e->newest && delete_key(e->store, key) == 0) {
        tg_log(TG_LOG_INFO, "s3: removed the stale temporary object %s", key);
        e->swept++;
    }
    return 0;
}

/* Aborts the multipart uploads and removes the objects under tmp/ older than the
 * grace period: the number swept, or -1 when the listings failed. */
static long sweep_uploads(s3_store *s, time_t newest)
{
    char prefix[600], query[800];
    long swept = 0;
    int rc = 0;
    snprintf(prefix, sizeof prefix, "%stmp/", s->prefix);
    char *p = curl_easy_escape(NULL, prefix, 0);
    if (p == NULL)
        return -1;
    snprintf(query, sizeof query, "prefix=%s&uploads=", p);
    curl_free(p);
    s3_sink sink = {.grow = true, .max = S3_MAX_XML};
    s3_request req = {.method = "GET", .query = query, .sink = &sink};
    if (s3_perform(s, &req) == 0 && req.status == 200 && sink.buf) {
        const char *at = (char *)sink.buf, *next;
        char upload[4096];
        while ((next = xml_value(at, "Upload", upload, sizeof upload)) != NULL) {
            char key[1100] = "", id[1024] = "", initiated[64] = "";
            xml_value(upload, "Key", key, sizeof key);
            xml_value(upload, "UploadId", id, sizeof id);
            xml_value(upload, "Initiated", initiated, sizeof initiated);
            time_t started = parse_iso_time(initiated);
            if (key[0] && id[0] && started >= 0 && started <= newest) {
                abort_multipart(s, key, id);
                tg_log(TG_LOG_INFO, "s3: aborted the stale multipart upload of %s", key);
                swept++;
            }
            at = next;
        }
    } else {
        if (req.status != 0)
            tg_log(TG_LOG_WARN, "s3: listing multipart uploads answered %ld", req.status);
        rc = -1;
    }
    free(sink.buf);
    each_ctx sweep = {.store = s, .newest = newest};
    if (list_keys(s, prefix, sweep_key, &sweep) != 0)
        rc = -1;
    return rc != 0 ? -1 : swept + sweep.swept;
}

long tg_blobstore_sweep(tg_blobstore *store)
{
    if (strcmp(store->ops->kind, "s3") != 0)
        return 0; /* the local store's claim clears its tmp/ */
    s3_store *s = s3(store);
    return sweep_uploads(s, time(NULL) - (time_t)s->gc_grace);
}

static int s3_each(tg_blobstore *store, int (*visit)(void *ctx, const char *hex), void *ctx)
{
    s3_store *s = s3(store);
    char prefix[600];
    time_t newest = time(NULL) - (time_t)s->gc_grace;
    snprintf(prefix, sizeof prefix, "%ssha256/", s->prefix);
    each_ctx e = {.store = s,
                  .skip = strlen(prefix),
                  .blobs = true,
                  .newest = newest,
                  .visit = visit,
                  .ctx = ctx};
    return list_keys(s, prefix, each_key, &e);
}

static int s3_space(tg_blobstore *store, uint64_t *free_bytes)
{
    s3_store *s = s3(store);
    s3_request req = {.method = "HEAD"};
    if (s3_perform(s, &req) != 0)
        return -1;
    if (req.status != 200) {
        errno = status_errno(req.status);
        return -1;
    }
    *free_bytes = UINT64_MAX;
    return 0;
}

/* ---- damage records: small objects under damaged/ ---- */

static void s3_mark_damaged(tg_blobstore *store, const char *hex, const char *why)
{
    s3_store *s = s3(store);
    char key[700], line[400];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02dZ %s\n", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, why);
    if (n < 0)
        return;
    full_key(s, "damaged", hex, key, sizeof key);
    s3_request req = {.method = "PUT",
                      .key = key,
                      .body = line,
                      .body_len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1};
    s3_perform(s, &req);
}

static bool s3_damage_record(tg_blobstore *store, const char *hex, char *why, size_t why_len)
{
    s3_store *s = s3(store);
    char key[700];
    full_key(s, "damaged", hex, key, sizeof key);
    s3_sink sink = {.grow = true, .max = 4096};
    s3_request req = {.method = "GET", .key = key, .sink = &sink};
    bool found = s3_perform(s, &req) == 0 && req.status == 200;
    if (found && why != NULL && why_len > 0) {
        snprintf(why, why_len, "%s", sink.buf ? (char *)sink.buf : "");
        why[strcspn(why, "\n")] = '\0';
    }
    free(sink.buf);
    return found;
}

static void s3_clear_damaged(tg_blobstore *store, const char *hex)
{
    s3_store *s = s3(store);
    char key[700];
    full_key(s, "damaged", hex, key, sizeof key);
    s3_request req = {.method = "DELETE", .key = key};
    s3_perform(s, &req);
}

static int s3_each_damaged(tg_blobstore *store, int (*visit)(void *ctx, const char *hex), void *ctx)
{
    s3_store *s = s3(store);
    char prefix[600];
    snprintf(prefix, sizeof prefix, "%sdamaged/", s->prefix);
    each_ctx e = {.store = s, .skip = strlen(prefix), .visit = visit, .ctx = ctx};
    return list_keys(s, prefix, each_key, &e);
}

static const tg_blobstore_ops s3_ops = {
    .kind = "s3",
    .close = s3_close,
    .claim = s3_claim,
    .lock = s3_lock,
    .unlock = s3_unlock,
    .write_begin = s3_write_begin,
    .write = s3_write,
    .write_commit = s3_write_commit,
    .write_abort = s3_write_abort,
    .open = s3_open,
    .read = s3_read,
    .reader_close = s3_reader_close,
    .stat = s3_stat,
    .remove = s3_remove,
    .each = s3_each,
    .space = s3_space,
    .mark_damaged = s3_mark_damaged,
    .damage_record = s3_damage_record,
    .clear_damaged = s3_clear_damaged,
    .each_damaged = s3_each_damaged,
};

/* ---- presigned URLs (SigV4 query-string authentication) ---- */

int tg_blobstore_presign(tg_blobstore *store, const char *hex, unsigned expires, char *url,
                         size_t url_len)
{
    if (strcmp(store->ops->kind, "s3") != 0 || !tg_is_sha256_hex(hex)) {
        errno = ENOTSUP;
        return -1;
    }
    s3_store *s = s3(store);
    char key[700], key_enc[2400], date[17], day[9], host[512], cred[600], canonical[12288],
        scope[200], to_sign[600], query[6000], hash[TG_SHA256_HEX_LEN + 1];
    full_key(s, "sha256", hex, key, sizeof key);
    if (encode_key(key, key_enc, sizeof key_enc) != 0)
        return -1;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y%m%dT%H%M%SZ", &tm);
    strftime(day, sizeof day, "%Y%m%d", &tm);
    const char *h = strstr(s->endpoint, "://");
    snprintf(host, sizeof host, "%s", h ? h + 3 : s->endpoint);
    snprintf(scope, sizeof scope, "%s/%s/s3/aws4_request", day, s->region);
    snprintf(cred, sizeof cred, "%s/%s", s->access, scope);
    char *cred_enc = curl_easy_escape(NULL, cred, 0);
    char *token_enc = s->token[0] ? curl_easy_escape(NULL, s->token, 0) : NULL;
    if (cred_enc == NULL || (s->token[0] && token_enc == NULL)) {
        curl_free(cred_enc);
        curl_free(token_enc);
        errno = ENOMEM;
        return -1;
    }
    snprintf(query, sizeof query,
             "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=%s&X-Amz-Date=%s&X-Amz-Expires=%u"
             "%s%s&X-Amz-SignedHeaders=host",
             cred_enc, date, expires, token_enc ? "&X-Amz-Security-Token=" : "",
             token_enc ? token_enc : "");
    curl_free(cred_enc);
    curl_free(token_enc);
    snprintf(canonical, sizeof canonical, "GET\n/%s/%s\n%s\nhost:%s\n\nhost\nUNSIGNED-PAYLOAD",
             s->bucket, key_enc, query, host);
    if (tg_sha256_hex(canonical, strlen(canonical), hash, "presign") != 0)
        return -1;
    snprintf(to_sign, sizeof to_sign, "AWS4-HMAC-SHA256\n%s\n%s\n%s", date, scope, hash);
    char sig_hex[65];
    if (sigv4_signature(s, day, to_sign, sig_hex) != 0)
        return -1;
    int n = snprintf(url, url_len, "%s/%s/%s?%s&X-Amz-Signature=%s", s->endpoint, s->bucket,
                     key_enc, query, sig_hex);
    if (n < 0 || (size_t)n >= url_len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

bool tg_blobstore_redirects(const tg_blobstore *store)
{
    return strcmp(store->ops->kind, "s3") == 0 && ((const s3_store *)store)->redirect;
}

void tg_blobstore_cache_counts(const tg_blobstore *store, uint64_t *hits, uint64_t *misses)
{
    *hits = *misses = 0;
    if (strcmp(store->ops->kind, "s3") != 0)
        return;
    const s3_store *s = (const s3_store *)store;
    *hits = __atomic_load_n(&s->hits, __ATOMIC_RELAXED);
    *misses = __atomic_load_n(&s->misses, __ATOMIC_RELAXED);
}

/* ---- open ---- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* a, unless NULL or empty */
static const char *given(const char *a)
{
    return a != NULL && a[0] != '\0' ? a : NULL;
}

int tg_blobstore_s3_open(const char *url, const tg_blobstore_options *options, tg_blobstore **out,
                         char *err, size_t err_len)
{
    *out = NULL;
    const char *rest = url + 5; /* "s3://" */
    size_t bucket_len = strcspn(rest, "/");
    if (bucket_len < 3 || bucket_len > 63) {
        snprintf(err, err_len,
                 "the S3 blob store URL must be s3://BUCKET[/PREFIX] (a bucket name "
                 "of 3 to 63 characters)");
        return -1;
    }
    for (size_t i = 0; i < bucket_len; i++) {
        char c = rest[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) {
            snprintf(err, err_len, "the bucket name in %s may hold only a-z, 0-9, '-' and '.'",
                     url);
            return -1;
        }
    }
    const char *prefix = rest[bucket_len] == '/' ? rest + bucket_len + 1 : "";
    for (const char *p = prefix; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == '_' || c == '/')) {
            snprintf(err, err_len,
                     "the prefix in %s may hold only A-Z, a-z, 0-9, '-', '_', '.' and '/'", url);
            return -1;
        }
    }
    static const tg_blobstore_options none;
    if (options == NULL)
        options = &none;
    const char *endpoint = given(options->s3_endpoint);
    const char *region = given(options->s3_region);
    const char *access = given(options->s3_access_key_id);
    const char *secret = given(options->s3_secret_access_key);
    const char *token = given(options->s3_session_token);
    if (region == NULL)
        region = "us-east-1";
    if (access == NULL || secret == NULL) {
        snprintf(err, err_len,
                 "the S3 blob store needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                 "in the environment");
        return -1;
    }
    s3_store *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    char default_endpoint[200];
    if (endpoint == NULL) {
        snprintf(default_endpoint, sizeof default_endpoint, "https://s3.%s.amazonaws.com", region);
        endpoint = default_endpoint;
    }
    const char *authority = strstr(endpoint, "://");
    const char *path = authority ? strchr(authority + 3, '/') : NULL;
    if (path != NULL && path[strspn(path, "/")] != '\0') {
        snprintf(err, err_len, "the S3 endpoint %s has a path; give scheme://host[:port] only",
                 endpoint);
        free(s);
        return -1;
    }
    if ((strncmp(endpoint, "http://", 7) != 0 && strncmp(endpoint, "https://", 8) != 0) ||
        strlen(endpoint) >= sizeof s->endpoint || strlen(region) >= sizeof s->region ||
        strlen(access) >= sizeof s->access || strlen(secret) >= sizeof s->secret ||
        (token && strlen(token) >= sizeof s->token) || strlen(prefix) + 2 >= sizeof s->prefix ||
        strpbrk(region, ":/ ") != NULL) {
        snprintf(err, err_len,
                 "the S3 endpoint must be an http:// or https:// URL (and the "
                 "region, keys and prefix of sane lengths)");
        free(s);
        return -1;
    }
    s->base.ops = &s3_ops;
    snprintf(s->endpoint, sizeof s->endpoint, "%s", endpoint);
    size_t el = strlen(s->endpoint);
    while (el > 0 && s->endpoint[el - 1] == '/')
        s->endpoint[--el] = '\0';
    snprintf(s->bucket, sizeof s->bucket, "%.*s", (int)bucket_len, rest);
    size_t pl = strlen(prefix);
    while (pl > 0 && prefix[pl - 1] == '/')
        pl--;
    snprintf(s->prefix, sizeof s->prefix, "%.*s%s", (int)pl, prefix, pl ? "/" : "");
    snprintf(s->region, sizeof s->region, "%s", region);
    snprintf(s->access, sizeof s->access, "%s", access);
    snprintf(s->secret, sizeof s->secret, "%s", secret);
    snprintf(s->token, sizeof s->token, "%s", token ? token : "");
    snprintf(s->sigv4, sizeof s->sigv4, "aws:amz:%s:s3", s->region);
    snprintf(s->userpwd, sizeof s->userpwd, "%s:%s", s->access, s->secret);
    /* parts: 5 MiB first, growing fast enough that the largest blob fits in 10,000 */
    uint64_t max_blob = options->max_blob;
    static const unsigned steps[] = {10000, 5000, 2000, 1000, 500, 200, 100};
    s->part_doubling = steps[sizeof steps / sizeof steps[0] - 1];
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (schedule_capacity(steps[i]) >= max_blob) {
            s->part_doubling = steps[i];
            break;
        }
    s->gc_grace = options->gc_grace_set ? options->gc_grace : 3600;
    s->connect_timeout = options->s3_connect_timeout > 0 ? options->s3_connect_timeout : 5;
    s->low_speed_time = options->s3_low_speed_time > 0 ? options->s3_low_speed_time : 15;
    pthread_once(&curl_once, curl_init_once);
    if (pthread_rwlock_init(&s->commit_lock, NULL) != 0) {
        free(s);
        snprintf(err, err_len, "cannot make a lock");
        return -1;
    }
    s->redirect = options->download_redirect;
    if (options->cache_dir && options->cache_dir[0]) {
        if (strlen(options->cache_dir) >= sizeof s->cache_dir - 200 ||
            (mkdir(options->cache_dir, 0700) != 0 && errno != EEXIST)) {
            snprintf(err, err_len, "the cache directory %s cannot be made", options->cache_dir);
            free(s);
            return -1;
        }
        snprintf(s->cache_dir, sizeof s->cache_dir, "%s", options->cache_dir);
        s->cache_size = options->cache_size ? options->cache_size : (256ULL << 20);
    }
    if (pthread_mutex_init(&s->pool_lock, NULL) != 0) {
        pthread_rwlock_destroy(&s->commit_lock);
        free(s);
        snprintf(err, err_len, "cannot make a lock");
        return -1;
    }
    if (pthread_mutex_init(&s->cache_lock, NULL) != 0) {
        pthread_mutex_destroy(&s->pool_lock);
        pthread_rwlock_destroy(&s->commit_lock);
        free(s);
        snprintf(err, err_len, "cannot make a lock");
        return -1;
    }
    if (s->cache_dir[0]) {
        pthread_mutex_lock(&s->cache_lock);
        cache_evict(s); /* counts what an earlier run left (and trims it) */
        pthread_mutex_unlock(&s->cache_lock);
    }
    *out = &s->base;
    return 0;
}
