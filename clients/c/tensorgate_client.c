/* libtgclient's HTTP client (tensorgate_client.h): every call is one or more
 * transfers (struct xfer) run by one engine over the curl multi interface, which
 * bounds how many run at once and applies the retry policy to each. */
#include "tensorgate_client.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io.h"
#include "sha256.h"

#define TGC_ERRBODY_MAX 16384
#define TGC_PARALLEL_MAX 64
/* A file download's receive buffer (CURLOPT_BUFFERSIZE; libcurl's default is 16 KiB):
 * fewer, larger callbacks, writes and hash updates per byte. */
#define TGC_FILE_BUFFER (512 * 1024)

struct tgc_client {
    char *base; /* without a trailing slash */
    char *auth; /* "Authorization: Bearer ..." or NULL */
    tgc_options o;
    unsigned long attempts;
    unsigned peak_parallel;
};

/* ---------- errors ---------- */

static int set_err(tgc_error *err, long status, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int set_err(tgc_error *err, long status, const char *reason, const char *fmt, ...)
{
    if (err == NULL)
        return -1;
    err->status = status;
    snprintf(err->reason, sizeof err->reason, "%s", reason);
    err->format[0] = '\0';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->detail, sizeof err->detail, fmt, ap);
    va_end(ap);
    return -1;
}

static void clear_err(tgc_error *err)
{
    if (err != NULL)
        memset(err, 0, sizeof *err);
}

/* Replaces every control character of s (C0, DEL, and C1 as UTF-8 C2 80..C2 9F) by
 * '?', in place: a server's sentence is printed, and must not steer a terminal. */
static void scrub(char *s)
{
    for (unsigned char *p = (unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            *p = '?';
        else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
            p[0] = p[1] = '?';
    }
}

/* The problem+json body of a refusal into err; a body that is not one still gives
 * the status. */
static void problem_to_err(long status, const char *body, size_t len, tgc_error *err)
{
    json_t *j = len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
    const char *reason = j ? json_string_value(json_object_get(j, "reason")) : NULL;
    const char *detail = j ? json_string_value(json_object_get(j, "detail")) : NULL;
    if (reason != NULL) {
        set_err(err, status, reason, "%s", detail ? detail : reason);
        const char *format = json_string_value(json_object_get(j, "format"));
        if (format != NULL && err != NULL)
            snprintf(err->format, sizeof err->format, "%s", format);
        if (err != NULL) {
            scrub(err->reason);
            scrub(err->detail);
            scrub(err->format);
        }
    } else {
        set_err(err, status, TGC_REASON_BAD_ANSWER, "HTTP status %ld without a problem body",
                status);
    }
    json_decref(j);
}

/* ---------- strings ---------- */

typedef struct sbuf {
    char *s;
    size_t len, cap;
    bool failed;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (p == NULL) {
            b->failed = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

/* Percent-encodes everything but unreserved characters (and '/' when keep_slash). */
static void sb_escaped(sbuf *b, const char *s, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char ch = *p;
        bool plain = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                     (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' || ch == '~' ||
                     (keep_slash && ch == '/');
        if (plain) {
            sb_add(b, (const char *)p, 1);
        } else {
            char e[3] = {'%', hex[ch >> 4], hex[ch & 15]};
            sb_add(b, e, 3);
        }
    }
}

/* The code point at *p (valid UTF-8, no overlong form, no surrogate), advancing p;
 * -1 for an invalid sequence. */
static long utf8_next(const unsigned char **p)
{
    const unsigned char *s = *p;
    if (s[0] < 0x80) {
        *p = s + 1;
        return s[0];
    }
    int n = s[0] >= 0xf0 && s[0] <= 0xf4 ? 3 : s[0] >= 0xe0 ? 2 : s[0] >= 0xc2 ? 1 : -1;
    if (n < 0 || s[0] > 0xf4)
        return -1;
    long cp = s[0] & (0x3f >> n);
    for (int i = 1; i <= n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return -1;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    static const long min[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return -1;
    *p = s + n + 1;
    return cp;
}

bool tgc_path_is_safe(const char *path)
{
    if (path == NULL || path[0] == '\0' || path[0] == '/' || strlen(path) > 4096)
        return false;
    for (const unsigned char *p = (const unsigned char *)path; *p;) {
        long cp = utf8_next(&p);
        if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || cp == '\\')
            return false;
    }
    for (const char *s = path; *s;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return false;
        s += n + (e ? 1 : 0);
        if (e != NULL && *s == '\0')
            return false; /* a trailing slash: an empty last segment */
    }
    return true;
}

/* path for a sentence: control characters and non-ASCII bytes as \xHH. */
static void escaped_name(const char *path, char *out, size_t cap)
{
    size_t used = 0;
    for (const unsigned char *p = (const unsigned char *)path; *p && used + 5 < cap; p++) {
        if (*p < 0x20 || *p >= 0x7f || *p == '\\')
            used += (size_t)snprintf(out + used, cap - used, "\\x%02x", *p);
        else
            out[used++] = (char)*p;
    }
    out[used] = '\0';
}

/* Every entry of a file list (the Version's "files", a files page) has a safe path,
 * a SHA-256 and a size. */
static int check_file_list(const json_t *files, tgc_error *err)
{
    size_t i;
    const json_t *f;
    json_array_foreach(files, i, f)
    {
        const char *path = json_string_value(json_object_get(f, "path"));
        const json_t *size = json_object_get(f, "size");
        if (path == NULL || !json_is_string(json_object_get(f, "sha256")) ||
            !json_is_integer(size) || json_integer_value(size) < 0)
            return set_err(err, 200, TGC_REASON_BAD_ANSWER,
                           "the server lists a file without a path, SHA-256 or size");
        if (!tgc_path_is_safe(path)) {
            char shown[256];
            escaped_name(path, shown, sizeof shown);
            return set_err(err, 200, TGC_REASON_UNSAFE_NAME,
                           "the server lists a file named \"%s\": a control character, "
                           "an absolute path or a '..' segment is never used as a file name",
                           shown);
        }
    }
    return 0;
}

static bool name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 64 || s[0] == '.' || s[0] == '-' || s[0] == '_')
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-'))
            return false;
        if (ch == '.' && i + 1 < n && s[i + 1] == '.')
            return false;
    }
    return true;
}

static bool model_ok(const char *model)
{
    const char *slash = model ? strchr(model, '/') : NULL;
    return slash != NULL && name_ok(model, (size_t)(slash - model)) &&
           name_ok(slash + 1, strlen(slash + 1));
}

int tgc_parse_ref(const char *text, char *model, size_t model_cap, char *rev, size_t rev_cap,
                  tgc_error *err)
{
    clear_err(err);
    if (text == NULL)
        return set_err(err, 0, TGC_REASON_USAGE, "no model reference given");
    const char *at = strchr(text, '@');
    size_t mlen = at ? (size_t)(at - text) : strlen(text);
    const char *r = at ? at + 1 : "latest";
    if (mlen + 1 > model_cap || strlen(r) + 1 > rev_cap || *r == '\0')
        return set_err(err, 0, TGC_REASON_USAGE, "'%s' is not org/name[@rev]", text);
    memcpy(model, text, mlen);
    model[mlen] = '\0';
    if (!model_ok(model))
        return set_err(err, 0, TGC_REASON_USAGE,
                       "'%s' is not org/name[@rev] (names are [A-Za-z0-9][A-Za-z0-9._-]{0,63})",
                       text);
    snprintf(rev, rev_cap, "%s", r);
    return 0;
}

/* base + "/v1/models/" + model [+ "/versions/" + rev] */
static void sb_model(sbuf *b, const tgc_client *c, const char *model, const char *rev)
{
    sb_str(b, c->base);
    sb_str(b, "/v1/models/");
    sb_str(b, model);
    if (rev != NULL) {
        sb_str(b, "/versions/");
        sb_escaped(b, rev, false);
    }
}

/* ---------- the client ---------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_code;

static void curl_init_once(void)
{
    curl_init_code = curl_global_init(CURL_GLOBAL_DEFAULT);
}

tgc_client *tgc_connect(const tgc_options *options, tgc_error *err)
{
    clear_err(err);
    if (options == NULL || options->base_url == NULL ||
        (strncmp(options->base_url, "http://", 7) != 0 &&
         strncmp(options->base_url, "https://", 8) != 0)) {
        set_err(err, 0, TGC_REASON_USAGE, "the server URL must start with http:// or https://");
        return NULL;
    }
    pthread_once(&curl_once, curl_init_once);
    if (curl_init_code != CURLE_OK) {
        set_err(err, 0, TGC_REASON_MEMORY, "curl_global_init failed: %s",
                curl_easy_strerror(curl_init_code));
        return NULL;
    }
    tgc_client *c = calloc(1, sizeof *c);
    if (c == NULL) {
        set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
        return NULL;
    }
    c->o = *options;
    c->o.base_url = NULL;
    c->o.token = NULL;
    if (c->o.max_retries == 0)
        c->o.max_retries = 6;
    if (c->o.backoff_ms == 0)
        c->o.backoff_ms = 200;
    if (c->o.max_backoff_ms == 0)
        c->o.max_backoff_ms = 10000;
    if (c->o.parallel == 0)
        c->o.parallel = 4;
    if (c->o.parallel > TGC_PARALLEL_MAX)
        c->o.parallel = TGC_PARALLEL_MAX;
    if (c->o.connect_timeout_s <= 0)
        c->o.connect_timeout_s = 10;
    if (c->o.low_speed_timeout_s <= 0)
        c->o.low_speed_timeout_s = 60;
    if (c->o.max_json_bytes == 0)
        c->o.max_json_bytes = 512u << 20;
    if (c->o.stall_timeout_s <= 0)
        c->o.stall_timeout_s = 30;
    c->base = strdup(options->base_url);
    if (c->base != NULL) {
        size_t n = strlen(c->base);
        while (n > 0 && c->base[n - 1] == '/')
            c->base[--n] = '\0';
    }
    if (options->token != NULL && options->token[0] != '\0') {
        if (strpbrk(options->token, "\r\n") != NULL) {
            set_err(err, 0, TGC_REASON_USAGE, "the token holds a line break");
            tgc_close(c);
            return NULL;
        }
        sbuf a = {0};
        sb_str(&a, "Authorization: Bearer ");
        sb_str(&a, options->token);
        if (a.failed)
            free(a.s);
        else
            c->auth = a.s;
    }
    if (c->base == NULL ||
        (options->token != NULL && options->token[0] != '\0' && c->auth == NULL)) {
        set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
        tgc_close(c);
        return NULL;
    }
    return c;
}

void tgc_close(tgc_client *c)
{
    if (c == NULL)
        return;
    free(c->base);
    free(c->auth);
    free(c);
}

unsigned long tgc_attempts(const tgc_client *c)
{
    return c ? c->attempts : 0;
}

unsigned tgc_peak_parallel(const tgc_client *c)
{
    return c ? c->peak_parallel : 0;
}

/* ---------- one transfer ---------- */

enum sink { SINK_MEM, SINK_BUF, SINK_FILE, SINK_LINES };
enum xstate { X_PENDING, X_ACTIVE, X_WAITING, X_SYNCING, X_DONE };

typedef struct xfer {
    tgc_client *c;
    char *url;
    const char *method; /* GET, PUT, POST */
    const char *content_type;
    /* request body: a file (body_fd) or memory (body_mem) */
    bool has_body;
    int body_fd;
    char *body_path;
    uint64_t body_size, body_off;
    char *body_mem;
    size_t body_len;
    /* response body */
    enum sink sink;
    unsigned char *mem; /* SINK_MEM: owned, grows to mem_max; SINK_BUF: the caller's */
    size_t mem_len, mem_cap, mem_max;
    bool want_json;
    json_t *json;
    /* SINK_LINES: each whole line (mem holds the partial one, up to mem_max) */
    int (*on_line)(void *user, const char *line, size_t len);
    void *line_user;
    bool line_sent; /* a line went to on_line: the transfer is not tried again */
    /* SINK_FILE */
    char *dest, *part;
    char range[80]; /* a Range line of the request, or "" */
    bool resume;
    char expect_sha[65];
    int fd;
    uint64_t have;  /* bytes in the part file */
    uint64_t limit; /* the most bytes the part file may hold in this attempt */
    bool resumed;   /* this attempt continues a prefix (Range) */
    bool restarted; /* a resumed file was started over once after a mismatch */
    tg_sha256 sha;
    /* Hashing by the engine's hasher thread (SINK_FILE; see hash_pool): the part
     * file is read back through hfd behind the writes. Under pool->mu: written (bytes
     * the thread may read), hashed, busy (the thread is hashing a chunk: it owns sha
     * and hfd then), failed. Not hashing: the engine hashes inline. */
    struct hash_pool *pool;
    /* The engine's syncer thread (see sync_pool), which fsyncs and renames a checked
     * file while the engine goes on (NULL: the engine does it); sync_next links the
     * file into its lists; syncing: file_end handed the file to it. */
    struct sync_pool *syncer;
    struct xfer *sync_next;
    bool syncing;
    bool hashing; /* registered in pool->files */
    int hfd;
    uint64_t written, hashed;
    bool busy, hfail;
    /* the part file's bytes before this were handed to writeback (start_writeback):
     * by the hasher thread while hashing, else by the engine */
    uint64_t flushed;
    bool started; /* the first body byte of this attempt was seen */
    /* the stall rule: bytes moved at stall_t; min_progress more are due within
     * stall_timeout_s of it */
    double stall_t;
    uint64_t stall_bytes, min_progress;
    /* this attempt's answer */
    CURL *easy;
    struct curl_slist *hdrs;
    long status;
    CURLcode cc;
    char errbody[TGC_ERRBODY_MAX];
    size_t errlen;
    bool err_cut; /* a refusal's body was cut at TGC_ERRBODY_MAX: the rest is not read */
    char h_retry[32], h_dtype[16], h_shape[256], h_src_dtype[16], h_sha[80];
    char curl_err[CURL_ERROR_SIZE];
    bool local_fail;
    tgc_error lerr;
    /* the engine */
    enum xstate state;
    unsigned attempt;
    double not_before;
    uint64_t size_hint, progress;
    int rc;
    tgc_error err;
} xfer;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static xfer *xfer_new(tgc_client *c, const char *method, sbuf *url)
{
    if (url->failed)
        return NULL;
    xfer *x = calloc(1, sizeof *x);
    if (x == NULL)
        return NULL;
    x->c = c;
    x->method = method;
    x->url = url->s;
    url->s = NULL;
    x->body_fd = -1;
    x->fd = -1;
    x->hfd = -1;
    x->rc = -1;
    x->sink = SINK_MEM;
    x->mem_max = c->o.max_json_bytes;
    return x;
}

/* ---------- the hasher thread of an engine run ---------- */

/* One thread per engine run with file downloads hashes their part files, a chunk of
 * one file at a time in turn, so the SHA-256 runs beside the transfers instead of in
 * their loop; one thread, not one per file, keeps it to one core beside the engine's.
 * At a file's end the engine takes back what is left of it and hashes that itself. */
typedef struct hash_pool {
    pthread_mutex_t mu;
    pthread_cond_t work; /* the thread waits for bytes to hash or the end */
    pthread_cond_t idle; /* the engine waits for a chunk in progress to end */
    bool stop;
    pthread_t thread;
    xfer **files;
    size_t count, cap, next;
} hash_pool;

#define TGC_HASH_STEP (1u << 20)
/* the bytes of a part file handed to writeback at once */
#define TGC_WRITEBACK_STEP (8u << 20)

/* Starts the writeback of the part file's bytes [x->flushed, upto) once there are
 * TGC_WRITEBACK_STEP of them, without waiting for it: the
 * disk writes a file while the rest of the batch still arrives, so the fsync before
 * the rename waits for a tail instead of the whole file. Nothing with no_fsync. */
static void start_writeback(xfer *x, int fd, uint64_t upto)
{
    if (x->c->o.no_fsync || upto <= x->flushed || upto - x->flushed < TGC_WRITEBACK_STEP)
        return;
    /* a failure is harmless here: the fsync before the rename decides */
    (void)sync_file_range(fd, (off_t)x->flushed, (off_t)(upto - x->flushed), SYNC_FILE_RANGE_WRITE);
    x->flushed = upto;
}

static void *hash_pool_main(void *arg)
{
    hash_pool *hp = arg;
    unsigned char *buf = malloc(TGC_HASH_STEP);
    pthread_mutex_lock(&hp->mu);
    for (;;) {
        xfer *x = NULL;
        for (size_t k = 0; k < hp->count && buf != NULL; k++) {
            xfer *y = hp->files[(hp->next + k) % hp->count];
            if (y->written > y->hashed && !y->hfail) {
                x = y;
                hp->next = (hp->next + k + 1) % hp->count;
                break;
            }
        }
        if (x == NULL) {
            if (hp->stop)
                break;
            pthread_cond_wait(&hp->work, &hp->mu);
            continue;
        }
        uint64_t off = x->hashed;
        size_t len = x->written - off < TGC_HASH_STEP ? (size_t)(x->written - off) : TGC_HASH_STEP;
        x->busy = true;
        pthread_mutex_unlock(&hp->mu);
        bool ok =
            tg_pread_all(x->hfd, buf, len, off) == 0 && tg_sha256_update(&x->sha, buf, len) == 0;
        if (ok)
            start_writeback(x, x->hfd, off + len);
        pthread_mutex_lock(&hp->mu);
        x->busy = false;
        if (ok)
            x->hashed += len;
        else
            x->hfail = true;
        pthread_cond_broadcast(&hp->idle);
    }
    pthread_mutex_unlock(&hp->mu);
    free(buf);
    return NULL;
}

/* The two helper threads of a batch (the hasher, the syncer) share their life: a
 * mutex, a condition the thread waits on for work (`work`), one the engine waits on
 * (`back`), and a stop flag. worker_start: 0 with the thread running, or -1 with
 * nothing left behind. worker_stop: tells the thread to stop, joins it, frees the
 * three. */
static int worker_start(pthread_mutex_t *mu, pthread_cond_t *work, pthread_cond_t *back,
                        pthread_t *thread, void *(*main_fn)(void *), void *arg)
{
    if (pthread_mutex_init(mu, NULL) != 0)
        return -1;
    if (pthread_cond_init(work, NULL) != 0)
        goto fail_mu;
    if (pthread_cond_init(back, NULL) != 0)
        goto fail_work;
    if (pthread_create(thread, NULL, main_fn, arg) != 0)
        goto fail_back;
    return 0;
fail_back:
    pthread_cond_destroy(back);
fail_work:
    pthread_cond_destroy(work);
fail_mu:
    pthread_mutex_destroy(mu);
    return -1;
}

static void worker_stop(pthread_mutex_t *mu, pthread_cond_t *work, pthread_cond_t *back,
                        pthread_t thread, bool *stop)
{
    pthread_mutex_lock(mu);
    *stop = true;
    pthread_cond_signal(work);
    pthread_mutex_unlock(mu);
    pthread_join(thread, NULL);
    pthread_cond_destroy(back);
    pthread_cond_destroy(work);
    pthread_mutex_destroy(mu);
}

/* 0 with the thread running, or -1 (then every download hashes inline). */
static int hash_pool_start(hash_pool *hp)
{
    memset(hp, 0, sizeof *hp);
    return worker_start(&hp->mu, &hp->work, &hp->idle, &hp->thread, hash_pool_main, hp);
}

/* Every file has left it (hasher_end) before this. */
static void hash_pool_stop(hash_pool *hp)
{
    worker_stop(&hp->mu, &hp->work, &hp->idle, hp->thread, &hp->stop);
    free(hp->files);
}

/* Hands the part file's hashing to the pool, from byte 0 (its first x->have bytes
 * are there already: a resumed prefix). 0, or -1 when there is no pool or the file
 * cannot be added (the caller then hashes inline). */
static int hasher_start(xfer *x)
{
    hash_pool *hp = x->pool;
    if (hp == NULL)
        return -1;
    x->hfd = open(x->part, O_RDONLY | O_CLOEXEC);
    if (x->hfd < 0)
        return -1;
    pthread_mutex_lock(&hp->mu);
    if (hp->count == hp->cap) {
        size_t cap = hp->cap ? hp->cap * 2 : 8;
        xfer **files = realloc(hp->files, cap * sizeof(xfer *));
        if (files == NULL) {
            pthread_mutex_unlock(&hp->mu);
            close(x->hfd);
            x->hfd = -1;
            return -1;
        }
        hp->files = files;
        hp->cap = cap;
    }
    x->written = x->have;
    x->hashed = 0;
    x->busy = false;
    x->hfail = false;
    hp->files[hp->count++] = x;
    pthread_cond_signal(&hp->work);
    pthread_mutex_unlock(&hp->mu);
    x->hashing = true;
    return 0;
}

/* The part file holds x->have bytes: the pool may read them. */
static void hasher_publish(xfer *x)
{
    pthread_mutex_lock(&x->pool->mu);
    x->written = x->have;
    pthread_cond_signal(&x->pool->work);
    pthread_mutex_unlock(&x->pool->mu);
}

/* Takes the file back from the pool (after the chunk in progress). Unless abandon,
 * hashes what the pool has not, so sha then covers the whole part file. 0, or -1
 * when hashing failed. Nothing to do when the file is not in the pool. */
static int hasher_end(xfer *x, bool abandon)
{
    if (!x->hashing)
        return 0;
    hash_pool *hp = x->pool;
    pthread_mutex_lock(&hp->mu);
    for (size_t k = 0; k < hp->count; k++) {
        if (hp->files[k] == x) {
            hp->files[k] = hp->files[--hp->count];
            break;
        }
    }
    hp->next = 0;
    while (x->busy)
        pthread_cond_wait(&hp->idle, &hp->mu);
    pthread_mutex_unlock(&hp->mu);
    x->hashing = false;
    int rc = x->hfail ? -1 : 0;
    if (!abandon && rc == 0 && x->hashed < x->have) {
        unsigned char *buf = malloc(TGC_HASH_STEP);
        rc = buf == NULL ? -1 : 0;
        for (uint64_t off = x->hashed; off < x->have && rc == 0;) {
            size_t k = x->have - off < TGC_HASH_STEP ? (size_t)(x->have - off) : TGC_HASH_STEP;
            if (tg_pread_all(x->hfd, buf, k, off) != 0 || tg_sha256_update(&x->sha, buf, k) != 0)
                rc = -1;
            off += k;
        }
        free(buf);
    }
    close(x->hfd);
    x->hfd = -1;
    return rc;
}

static void xfer_free(xfer *x)
{
    if (x == NULL)
        return;
    if (x->easy != NULL)
        curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->hdrs);
    if (x->body_fd >= 0)
        close(x->body_fd);
    hasher_end(x, true);
    if (x->fd >= 0)
        close(x->fd);
    tg_sha256_free(&x->sha);
    if (x->sink == SINK_MEM || x->sink == SINK_LINES) /* SINK_BUF: the caller's */
        free(x->mem);
    json_decref(x->json);
    free(x->url);
    free(x->body_path);
    free(x->body_mem);
    free(x->dest);
    free(x->part);
    free(x);
}

static void local_fail(xfer *x, const char *reason, const char *what)
{
    if (!x->local_fail) {
        x->local_fail = true;
        set_err(&x->lerr, 0, reason, "%s", what);
    }
}

/* The value of header line ptr[0..n) into dst when its name is `name`. */
static void keep_header(const char *ptr, size_t n, const char *name, char *dst, size_t cap)
{
    size_t k = strlen(name);
    if (n <= k + 1 || strncasecmp(ptr, name, k) != 0 || ptr[k] != ':')
        return;
    const char *v = ptr + k + 1;
    const char *end = ptr + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    size_t len = (size_t)(end - v);
    if (len >= cap)
        len = cap - 1;
    for (size_t i = 0; i < len; i++) /* these values are ASCII: nothing else is shown */
        dst[i] = (unsigned char)v[i] >= 0x20 && (unsigned char)v[i] < 0x7f ? v[i] : '?';
    dst[len] = '\0';
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *ud)
{
    xfer *x = ud;
    size_t n = size * nmemb;
    if (n >= 5 && memcmp(ptr, "HTTP/", 5) == 0) {
        x->h_retry[0] = x->h_dtype[0] = x->h_shape[0] = x->h_src_dtype[0] = x->h_sha[0] = '\0';
        return n;
    }
    keep_header(ptr, n, "Retry-After", x->h_retry, sizeof x->h_retry);
    keep_header(ptr, n, "X-Tensor-Dtype", x->h_dtype, sizeof x->h_dtype);
    keep_header(ptr, n, "X-Tensor-Shape", x->h_shape, sizeof x->h_shape);
    keep_header(ptr, n, "X-Tensor-Source-Dtype", x->h_src_dtype, sizeof x->h_src_dtype);
    keep_header(ptr, n, "X-Content-SHA256", x->h_sha, sizeof x->h_sha);
    return n;
}

/* A body longer than the request can return: the file fails, and its part file,
 * whose bytes no one can trust now, goes when the transfer ends. */
static void too_large(xfer *x, uint64_t announced)
{
    char what[256];
    if (announced > 0)
        snprintf(what, sizeof what,
                 "%s: the server announced %llu bytes from byte %llu of a file listed at %llu "
                 "(the partial file was removed)",
                 x->dest, (unsigned long long)announced, (unsigned long long)x->have,
                 (unsigned long long)x->limit);
    else
        snprintf(what, sizeof what,
                 "%s: the server sent more than the %llu bytes expected (the partial file was "
                 "removed)",
                 x->dest, (unsigned long long)x->limit);
    local_fail(x, TGC_REASON_TOO_LARGE, what);
    x->resume = false;
}

/* The bound of a file body, from its first byte: the listed size when the request
 * knows one, else the length the answer announced (an answer announcing none is
 * refused: no bound). 0, or -1 with local_fail. */
static int set_limit(xfer *x)
{
    curl_off_t announced = -1;
    curl_easy_getinfo(x->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &announced);
    if (x->size_hint > 0) {
        x->limit = x->size_hint;
        if (announced > 0 && (uint64_t)announced > x->limit - x->have) {
            too_large(x, (uint64_t)announced);
            return -1;
        }
        return 0;
    }
    if (announced < 0) {
        local_fail(x, TGC_REASON_BAD_ANSWER,
                   "the answer announces no length (Content-Length) and the size is unknown");
        return -1;
    }
    x->limit = x->have + (uint64_t)announced;
    return 0;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    xfer *x = ud;
    size_t n = size * nmemb;
    if (!x->started) {
        x->started = true;
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
        if (x->sink == SINK_FILE && x->status == 200 && x->have > 0) {
            /* the server sent the whole file: start the part over */
            bool threaded = x->hashing;
            hasher_end(x, true);
            tg_sha256_free(&x->sha);
            if (ftruncate(x->fd, 0) != 0 || lseek(x->fd, 0, SEEK_SET) != 0 ||
                tg_sha256_init(&x->sha, "client") != 0) {
                local_fail(x, TGC_REASON_IO, "cannot restart the part file");
                return 0;
            }
            x->have = 0;
            x->flushed = 0;
            x->resumed = false;
            if (threaded && hasher_start(x) != 0) {
                local_fail(x, TGC_REASON_IO, "cannot restart the hashing of the part file");
                return 0;
            }
        }
        if (x->sink == SINK_FILE && x->status >= 200 && x->status < 300 && set_limit(x) != 0)
            return 0;
        curl_off_t announced = -1;
        curl_easy_getinfo(x->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &announced);
        if (x->sink == SINK_BUF && x->status >= 200 && x->status < 300 && announced > 0 &&
            (uint64_t)announced > x->mem_cap) {
            local_fail(x, TGC_REASON_TOO_SMALL, "the answer announces more than the buffer holds");
            return 0;
        }
    }
    if (x->status < 200 || x->status >= 300) {
        size_t room = sizeof x->errbody - 1 - x->errlen;
        size_t k = n < room ? n : room;
        memcpy(x->errbody + x->errlen, ptr, k);
        x->errlen += k;
        x->errbody[x->errlen] = '\0';
        if (k < n) {
            x->err_cut = true; /* a refusal is a sentence: the rest is never read */
            return 0;
        }
        return n;
    }
    switch (x->sink) {
    case SINK_MEM:
        if (x->mem_len + n > x->mem_max) {
            local_fail(x, TGC_REASON_BAD_ANSWER, "the answer is larger than max_json_bytes");
            return 0;
        }
        if (x->mem_len + n + 1 > x->mem_cap) {
            size_t cap = x->mem_cap ? x->mem_cap : 4096;
            while (cap < x->mem_len + n + 1)
                cap *= 2;
            unsigned char *p = realloc(x->mem, cap);
            if (p == NULL) {
                local_fail(x, TGC_REASON_MEMORY, "out of memory for the answer");
                return 0;
            }
            x->mem = p;
            x->mem_cap = cap;
        }
        memcpy(x->mem + x->mem_len, ptr, n);
        x->mem_len += n;
        x->mem[x->mem_len] = '\0';
        break;
    case SINK_LINES:
        for (size_t i = 0; i < n; i++) {
            if (ptr[i] != '\n') {
                if (x->mem_len + 1 >= x->mem_max) {
                    local_fail(x, TGC_REASON_BAD_ANSWER, "a line of the answer is too long");
                    return 0;
                }
                if (x->mem_len + 2 > x->mem_cap) {
                    size_t cap = x->mem_cap ? x->mem_cap * 2 : 4096;
                    unsigned char *p = realloc(x->mem, cap);
                    if (p == NULL) {
                        local_fail(x, TGC_REASON_MEMORY, "out of memory for the answer");
                        return 0;
                    }
                    x->mem = p;
                    x->mem_cap = cap;
                }
                x->mem[x->mem_len++] = (unsigned char)ptr[i];
                continue;
            }
            if (x->mem == NULL && (x->mem = malloc(1)) != NULL)
                x->mem_cap = 1;
            if (x->mem == NULL) {
                local_fail(x, TGC_REASON_MEMORY, "out of memory for the answer");
                return 0;
            }
            x->mem[x->mem_len] = '\0';
            x->line_sent = true;
            if (x->on_line(x->line_user, (const char *)x->mem, x->mem_len) != 0) {
                local_fail(x, TGC_REASON_USAGE, "stopped by the caller");
                return 0;
            }
            x->mem_len = 0;
        }
        break;
    case SINK_BUF:
        if (n > x->mem_cap - x->mem_len) {
            local_fail(x, TGC_REASON_TOO_SMALL, "the answer is larger than the buffer");
            return 0;
        }
        memcpy(x->mem + x->mem_len, ptr, n);
        x->mem_len += n;
        break;
    case SINK_FILE:
        if (n > x->limit - x->have) {
            too_large(x, 0);
            return 0;
        }
        if (tg_write_all(x->fd, ptr, n) != 0) {
            local_fail(x, TGC_REASON_IO, strerror(errno));
            return 0;
        }
        x->have += n;
        if (x->hashing) {
            hasher_publish(x);
        } else if (tg_sha256_update(&x->sha, ptr, n) != 0) {
            local_fail(x, TGC_REASON_IO, "SHA-256 failed");
            return 0;
        } else {
            start_writeback(x, x->fd, x->have);
        }
        break;
    }
    return n;
}

static size_t on_read(char *ptr, size_t size, size_t nmemb, void *ud)
{
    xfer *x = ud;
    size_t want = size * nmemb;
    if (x->body_mem != NULL) {
        size_t left = x->body_len - (size_t)x->body_off;
        size_t k = want < left ? want : left;
        memcpy(ptr, x->body_mem + x->body_off, k);
        x->body_off += k;
        return k;
    }
    if (x->body_off >= x->body_size)
        return 0;
    if (want > x->body_size - x->body_off)
        want = (size_t)(x->body_size - x->body_off);
    ssize_t got = tg_pread_upto(x->body_fd, ptr, want, x->body_off);
    if (got <= 0) {
        local_fail(x, TGC_REASON_IO,
                   got == 0 ? "the file shrank while it was sent" : strerror(errno));
        return CURL_READFUNC_ABORT;
    }
    x->body_off += (uint64_t)got;
    return (size_t)got;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal;
    (void)ultotal;
    xfer *x = ud;
    x->progress = x->has_body ? (uint64_t)ulnow : x->sink == SINK_FILE ? x->have : (uint64_t)dlnow;
    if (x->has_body)
        return 0; /* an upload waits for the server's verdict: curl's low-speed rule */
    /* the stall rule: min_progress bytes due within stall_timeout_s of the last mark */
    double now = now_s();
    uint64_t moved = dlnow > 0 ? (uint64_t)dlnow : 0;
    if (moved >= x->stall_bytes + x->min_progress) {
        x->stall_bytes = moved;
        x->stall_t = now;
    } else if (now - x->stall_t >= (double)x->c->o.stall_timeout_s) {
        char what[160];
        snprintf(what, sizeof what, "fewer than %llu bytes arrived in %ld s (the stall timeout)",
                 (unsigned long long)x->min_progress, x->c->o.stall_timeout_s);
        local_fail(x, TGC_REASON_STALLED, what);
        return 1;
    }
    return 0;
}

/* Hashes the first `len` bytes of the part file (a resumed download's prefix). */
static int hash_prefix(xfer *x, uint64_t len)
{
    unsigned char *buf = malloc(1u << 20);
    if (buf == NULL)
        return -1;
    int rc = 0;
    for (uint64_t off = 0; off < len && rc == 0;) {
        size_t k = len - off < (1u << 20) ? (size_t)(len - off) : (1u << 20);
        if (tg_pread_all(x->fd, buf, k, off) != 0 || tg_sha256_update(&x->sha, buf, k) != 0)
            rc = -1;
        off += k;
    }
    free(buf);
    return rc;
}

/* Prepares one attempt: fresh answer state, the part file, the curl handle. */
static int xfer_begin(xfer *x)
{
    x->status = 0;
    x->cc = CURLE_OK;
    x->errlen = 0;
    x->err_cut = false;
    x->errbody[0] = '\0';
    x->started = false;
    x->local_fail = false;
    x->curl_err[0] = '\0';
    x->mem_len = 0;
    x->body_off = 0;
    x->progress = 0;
    x->stall_t = now_s();
    x->stall_bytes = 0;
    x->min_progress = 1024;
    if (x->c->o.max_recv_speed > 0 &&
        x->c->o.max_recv_speed * (uint64_t)x->c->o.stall_timeout_s / 4 < x->min_progress)
        x->min_progress = x->c->o.max_recv_speed * (uint64_t)x->c->o.stall_timeout_s / 4 + 1;
    if (x->sink == SINK_FILE) {
        int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (x->resume ? 0 : O_TRUNC);
        x->fd = open(x->part, flags, 0644);
        struct stat st;
        if (x->fd < 0 || fstat(x->fd, &st) != 0)
            return set_err(&x->err, 0, TGC_REASON_IO, "%s: %s", x->part, strerror(errno));
        if (tg_sha256_init(&x->sha, "client") != 0)
            return set_err(&x->err, 0, TGC_REASON_IO, "SHA-256 failed");
        x->have = x->resume ? (uint64_t)st.st_size : 0;
        if (x->size_hint > 0 && x->have > x->size_hint) {
            /* longer than the file: not a prefix of it */
            if (ftruncate(x->fd, 0) != 0)
                return set_err(&x->err, 0, TGC_REASON_IO, "%s: %s", x->part, strerror(errno));
            x->have = 0;
        }
        x->flushed = 0; /* a resumed prefix is handed to writeback with the rest */
        if (hasher_start(x) == 0) {
            /* the pool reads the prefix back itself, then follows the writes */
        } else if (x->have > 0) {
            /* no thread: the prefix is read back through a read descriptor, here */
            int wfd = x->fd;
            x->fd = open(x->part, O_RDONLY | O_CLOEXEC);
            int hrc = x->fd >= 0 ? hash_prefix(x, x->have) : -1;
            if (x->fd >= 0)
                close(x->fd);
            x->fd = wfd;
            if (hrc != 0)
                return set_err(&x->err, 0, TGC_REASON_IO, "%s: cannot read the part file", x->part);
        }
        if (lseek(x->fd, (off_t)x->have, SEEK_SET) < 0)
            return set_err(&x->err, 0, TGC_REASON_IO, "%s: %s", x->part, strerror(errno));
        x->resumed = x->have > 0;
        x->limit = x->size_hint > 0 ? x->size_hint : UINT64_MAX;
        /* the blocks of the rest at once (the size stays: a resume reads the length
         * of the part as the bytes it has); a file system without it just grows */
        if (x->size_hint > x->have)
            (void)fallocate(x->fd, FALLOC_FL_KEEP_SIZE, (off_t)x->have,
                            (off_t)(x->size_hint - x->have));
    }
    if (x->easy == NULL)
        x->easy = curl_easy_init();
    else
        curl_easy_reset(x->easy);
    if (x->easy == NULL)
        return set_err(&x->err, 0, TGC_REASON_MEMORY, "curl_easy_init failed");
    curl_slist_free_all(x->hdrs);
    x->hdrs = NULL;
    const tgc_client *c = x->c;
    struct curl_slist *h = NULL;
    bool ok = true;
    char range[64];
#define ADD_HDR(s)                                                                                 \
    do {                                                                                           \
        struct curl_slist *n_ = curl_slist_append(h, (s));                                         \
        if (n_ == NULL)                                                                            \
            ok = false;                                                                            \
        else                                                                                       \
            h = n_;                                                                                \
    } while (0)
    if (c->auth != NULL)
        ADD_HDR(c->auth);
    if (x->content_type != NULL) {
        char ct[96];
        snprintf(ct, sizeof ct, "Content-Type: %s", x->content_type);
        ADD_HDR(ct);
    }
    if (x->sink == SINK_FILE && x->have > 0) {
        snprintf(range, sizeof range, "Range: bytes=%llu-", (unsigned long long)x->have);
        ADD_HDR(range);
    } else if (x->range[0] != '\0') {
        ADD_HDR(x->range);
    }
#undef ADD_HDR
    x->hdrs = h;
    if (!ok)
        return set_err(&x->err, 0, TGC_REASON_MEMORY, "out of memory for headers");
    CURL *e = x->easy;
    curl_easy_setopt(e, CURLOPT_URL, x->url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->curl_err);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, c->o.connect_timeout_s);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, c->o.low_speed_timeout_s);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    if (c->o.max_recv_speed > 0)
        curl_easy_setopt(e, CURLOPT_MAX_RECV_SPEED_LARGE, (curl_off_t)c->o.max_recv_speed);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "libtgclient/1");
    /* not under a rate limit: libcurl keeps to it per buffer, so a large one would
     * let a burst of it through at once */
    if (x->sink == SINK_FILE && c->o.max_recv_speed == 0)
        curl_easy_setopt(e, CURLOPT_BUFFERSIZE, (long)TGC_FILE_BUFFER);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    if (x->has_body) {
        curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(e, CURLOPT_READDATA, x);
        curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE,
                         (curl_off_t)(x->body_mem ? x->body_len : x->body_size));
        if (strcmp(x->method, "PUT") != 0)
            curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, x->method);
    } else if (strcmp(x->method, "GET") != 0) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, x->method);
    }
    return 0;
}

static bool retryable_curl(CURLcode cc)
{
    switch (cc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
        return true;
    default:
        return false;
    }
}

/* The wait before the next attempt: backoff * 2^attempt, capped; at least the
 * server's Retry-After (capped too). */
static double retry_delay(const xfer *x, bool use_retry_after)
{
    const tgc_options *o = &x->c->o;
    double ms = o->backoff_ms;
    for (unsigned i = 1; i < x->attempt && ms < o->max_backoff_ms; i++)
        ms *= 2;
    if (ms > o->max_backoff_ms)
        ms = o->max_backoff_ms;
    if (use_retry_after && x->h_retry[0] >= '0' && x->h_retry[0] <= '9') {
        double ra = strtod(x->h_retry, NULL) * 1000.0;
        if (ra > o->max_backoff_ms)
            ra = o->max_backoff_ms;
        if (ra > ms)
            ms = ra;
    }
    return ms / 1000.0;
}

/* Ends the part file of an attempt that did not complete. When no attempt follows
 * (final), a part that cannot be resumed (a tensor's, or an empty one) is removed. */
static void part_abandon(xfer *x, bool final)
{
    hasher_end(x, true);
    if (x->fd >= 0)
        close(x->fd);
    x->fd = -1;
    tg_sha256_free(&x->sha);
    if (final && x->part != NULL && (!x->resume || x->have == 0))
        unlink(x->part);
}

/* A complete download: the digest against the expected one. 0 (the part file is
 * right and still open: part_commit next), -1 with x->err (the part file closed),
 * or 1: a resumed file whose digest differs, to start over from byte 0 (once: the
 * prefix kept from before was what was wrong). */
static int part_check(xfer *x)
{
    char hex[65];
    int hrc = hasher_end(x, false);
    int frc = hrc != 0 ? -1 : tg_sha256_final_hex(&x->sha, hex);
    if (frc != 0) {
        close(x->fd);
        x->fd = -1;
        return set_err(&x->err, 0, TGC_REASON_IO, "SHA-256 failed");
    }
    const char *want = x->expect_sha[0] ? x->expect_sha : x->h_sha;
    bool wrong = want[0] != '\0' && strcasecmp(want, hex) != 0;
    if (wrong || (want[0] == '\0' && x->resume)) {
        close(x->fd);
        x->fd = -1;
        unlink(x->part);
    }
    if (wrong) {
        if (x->resumed && !x->restarted) {
            x->restarted = true;
            return 1;
        }
        return set_err(&x->err, 0, TGC_REASON_SHA256,
                       "%s: SHA-256 %s, expected %s (the partial file was removed)", x->dest, hex,
                       want);
    }
    if (want[0] == '\0' && x->resume)
        return set_err(&x->err, 0, TGC_REASON_BAD_ANSWER,
                       "%s: no SHA-256 to check the download against", x->dest);
    return 0;
}

/* A checked part file: its bytes on disk before its name (unless no_fsync), so a
 * file under its final name is whole after a crash too, then the rename. 0, or -1
 * with x->err. Runs on the syncer thread when there is one. */
static int part_commit(xfer *x)
{
    int syncrc = x->c->o.no_fsync ? 0 : fsync(x->fd);
    int err = errno;
    int closerc = close(x->fd);
    if (syncrc == 0)
        err = errno;
    x->fd = -1;
    if (syncrc != 0 || closerc != 0)
        return set_err(&x->err, 0, TGC_REASON_IO, "%s: %s", x->part, strerror(err));
    if (rename(x->part, x->dest) != 0)
        return set_err(&x->err, 0, TGC_REASON_IO, "rename %s: %s", x->dest, strerror(errno));
    return 0;
}

/* ---------- the syncer thread of an engine run ---------- */

/* One thread per engine run with file downloads (unless no_fsync) fsyncs, closes
 * and renames each checked file, in the order they finished, so the transfers still
 * running keep moving while a finished file's bytes reach the disk (the writeback
 * started early, start_writeback, leaves it a tail to wait for). The engine takes
 * the finished files back from `done` and reports them. */
typedef struct sync_pool {
    pthread_mutex_t mu;
    pthread_cond_t work;   /* the thread waits for a file or the end */
    pthread_cond_t synced; /* the engine, with nothing else to do, waits for a file */
    bool stop;
    pthread_t thread;
    CURLM *multi;                /* woken when a file is done */
    xfer *todo_head, *todo_tail; /* first in, first out */
    xfer *done;
} sync_pool;

static void *sync_pool_main(void *arg)
{
    sync_pool *sp = arg;
    pthread_mutex_lock(&sp->mu);
    for (;;) {
        xfer *x = sp->todo_head;
        if (x == NULL) {
            if (sp->stop)
                break;
            pthread_cond_wait(&sp->work, &sp->mu);
            continue;
        }
        sp->todo_head = x->sync_next;
        if (sp->todo_head == NULL)
            sp->todo_tail = NULL;
        pthread_mutex_unlock(&sp->mu);
        x->rc = part_commit(x);
        pthread_mutex_lock(&sp->mu);
        x->sync_next = sp->done;
        sp->done = x;
        pthread_cond_signal(&sp->synced);
        curl_multi_wakeup(sp->multi);
    }
    pthread_mutex_unlock(&sp->mu);
    return NULL;
}

/* 0 with the thread running, or -1 (then the engine commits each file itself). */
static int sync_pool_start(sync_pool *sp, CURLM *multi)
{
    memset(sp, 0, sizeof *sp);
    sp->multi = multi;
    return worker_start(&sp->mu, &sp->work, &sp->synced, &sp->thread, sync_pool_main, sp);
}

/* Every file handed over came back (sync_pool_take) before this. */
static void sync_pool_stop(sync_pool *sp)
{
    worker_stop(&sp->mu, &sp->work, &sp->synced, sp->thread, &sp->stop);
}

static void sync_pool_add(sync_pool *sp, xfer *x)
{
    pthread_mutex_lock(&sp->mu);
    x->sync_next = NULL;
    if (sp->todo_tail != NULL)
        sp->todo_tail->sync_next = x;
    else
        sp->todo_head = x;
    sp->todo_tail = x;
    pthread_cond_signal(&sp->work);
    pthread_mutex_unlock(&sp->mu);
}

/* The files done since the last call (linked through sync_next), after waiting up
 * to `wait` seconds for one when there is none yet (0: no wait). */
static xfer *sync_pool_take(sync_pool *sp, double wait)
{
    pthread_mutex_lock(&sp->mu);
    if (sp->done == NULL && wait > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double end = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 + wait;
        ts.tv_sec = (time_t)end;
        ts.tv_nsec = (long)((end - (double)ts.tv_sec) * 1e9);
        while (sp->done == NULL && pthread_cond_timedwait(&sp->synced, &sp->mu, &ts) == 0) {
        }
    }
    xfer *x = sp->done;
    sp->done = NULL;
    pthread_mutex_unlock(&sp->mu);
    return x;
}

/* A file transfer that completed: checked, then committed (false, x->rc final) or
 * handed to the syncer (false, x->syncing), or a resumed file to start over at
 * once (true), whatever the retries left. */
static bool file_end(xfer *x, double now)
{
    int rc = part_check(x);
    if (rc > 0) {
        x->not_before = now;
        return true;
    }
    if (rc == 0 && x->syncer != NULL) {
        x->syncing = true;
        sync_pool_add(x->syncer, x);
        return false;
    }
    x->rc = rc == 0 ? part_commit(x) : rc;
    return false;
}

/* After an attempt: true when another attempt is scheduled; else x->rc and x->err
 * are final. */
static bool xfer_end(xfer *x, double now)
{
    /* lines already handed over would be handed over twice */
    bool can_retry = x->attempt <= x->c->o.max_retries && !x->line_sent;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
    if (x->err_cut)
        x->cc = CURLE_OK; /* the refusal as far as it was read is the answer */
    if (x->local_fail) {
        if (x->sink == SINK_FILE)
            part_abandon(x, true);
        x->err = x->lerr;
        x->rc = -1;
        return false;
    }
    /* a refusal whose problem body arrived before the connection broke (the server
     * answers a refused upload early and closes) is the server's answer */
    bool answered = x->status >= 400 && x->status != 429 && x->status != 503 && x->errlen > 0;
    if (x->cc != CURLE_OK && !answered) {
        bool retry = retryable_curl(x->cc) && can_retry;
        if (x->sink == SINK_FILE)
            part_abandon(x, !retry);
        if (retry) {
            x->not_before = now + retry_delay(x, false);
            return true;
        }
        set_err(&x->err, 0, TGC_REASON_CONNECTION, "%s: %s (after %u attempts)", x->url,
                x->curl_err[0] ? x->curl_err : curl_easy_strerror(x->cc), x->attempt);
        x->rc = -1;
        return false;
    }
    if (x->status == 429 || x->status == 503) {
        if (x->sink == SINK_FILE)
            part_abandon(x, !can_retry);
        if (can_retry) {
            x->not_before = now + retry_delay(x, true);
            return true;
        }
        problem_to_err(x->status, x->errbody, x->errlen, &x->err);
        x->rc = -1;
        return false;
    }
    if (x->sink == SINK_FILE && x->status == 416 && x->have > 0)
        return file_end(x, now); /* the part file holds the whole file (or more): check it */
    if (x->status < 200 || x->status >= 300) {
        if (x->sink == SINK_FILE)
            part_abandon(x, true);
        problem_to_err(x->status, x->errbody, x->errlen, &x->err);
        x->rc = -1;
        return false;
    }
    if (x->sink == SINK_FILE)
        return file_end(x, now);
    if (x->want_json) {
        x->json = json_loadb((const char *)x->mem, x->mem_len, 0, NULL);
        if (x->json == NULL) {
            set_err(&x->err, x->status, TGC_REASON_BAD_ANSWER, "%s: the answer is not JSON",
                    x->url);
            x->rc = -1;
            return false;
        }
    }
    x->rc = 0;
    return false;
}

/* ---------- the engine ---------- */

/* Hands a finished item to item_done (when there is one). */
static void report_item(xfer **xs, size_t n, const xfer *x, tgc_item_fn item_done, void *user)
{
    if (item_done == NULL)
        return;
    size_t idx = 0;
    while (idx < n && xs[idx] != x)
        idx++;
    item_done(user, idx, x->rc, x->rc == 0 ? NULL : &x->err, x->json);
}

/* The length of the folder part of path ("a/b" of "a/b/c"); 0 for none (".") */
static size_t folder_len(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash == NULL ? 0 : slash == path ? 1 : (size_t)(slash - path);
}

/* After a batch: each folder a file was renamed into is fsynced once, so the new
 * names are on disk too (the files' bytes were, before their renames). A failure
 * is not reported: the files are complete, and some file systems refuse the fsync
 * of a folder. */
static void sync_folders(xfer **xs, size_t n)
{
    char dir[4096];
    for (size_t i = 0; i < n; i++) {
        const xfer *x = xs[i];
        if (x->sink != SINK_FILE || x->rc != 0 || x->dest == NULL)
            continue;
        size_t len = folder_len(x->dest);
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) {
            const xfer *y = xs[j];
            seen = y->sink == SINK_FILE && y->rc == 0 && y->dest != NULL &&
                   folder_len(y->dest) == len && memcmp(y->dest, x->dest, len) == 0;
        }
        if (seen || len >= sizeof dir)
            continue;
        memcpy(dir, len == 0 ? "." : x->dest, len == 0 ? 1 : len);
        dir[len == 0 ? 1 : len] = '\0';
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
            (void)fsync(fd);
            close(fd);
        }
    }
}

static void engine_run(tgc_client *c, xfer **xs, size_t n, unsigned parallel,
                       tgc_progress_fn progress, tgc_item_fn item_done, void *user)
{
    if (parallel == 0)
        parallel = c->o.parallel;
    if (parallel > TGC_PARALLEL_MAX)
        parallel = TGC_PARALLEL_MAX;
    CURLM *m = curl_multi_init();
    uint64_t total = 0;
    bool files = false;
    for (size_t i = 0; i < n; i++) {
        xs[i]->state = X_PENDING;
        xs[i]->attempt = 0;
        total += xs[i]->size_hint;
        files = files || xs[i]->sink == SINK_FILE;
    }
    /* file downloads: their SHA-256 on a thread beside this one (inline without it) */
    hash_pool pool;
    bool pooled = files && !c->o.hash_inline && hash_pool_start(&pool) == 0;
    for (size_t i = 0; i < n; i++)
        xs[i]->pool = pooled && xs[i]->sink == SINK_FILE ? &pool : NULL;
    /* ... and their fsyncs and renames on another (by the engine without it) */
    sync_pool syncer;
    bool syncs = files && !c->o.no_fsync && m != NULL && sync_pool_start(&syncer, m) == 0;
    for (size_t i = 0; i < n; i++) {
        xs[i]->syncer = syncs && xs[i]->sink == SINK_FILE ? &syncer : NULL;
        xs[i]->syncing = false;
    }
    size_t done = 0, active = 0, syncing = 0;
    double last_progress = 0;
    while (done < n) {
        double now = now_s();
        double next_wake = now + 0.2;
        /* start what may start: retries that are due, then new items, in order */
        for (size_t i = 0; i < n && active < parallel; i++) {
            xfer *x = xs[i];
            if (x->state == X_WAITING && x->not_before > now) {
                if (x->not_before < next_wake)
                    next_wake = x->not_before;
                continue;
            }
            if (x->state != X_PENDING && x->state != X_WAITING)
                continue;
            x->attempt++;
            c->attempts++;
            bool fail_now = m == NULL;
            if (m == NULL)
                set_err(&x->err, 0, TGC_REASON_MEMORY, "curl_multi_init failed");
            else if (xfer_begin(x) != 0)
                fail_now = true;
            else if (curl_multi_add_handle(m, x->easy) != CURLM_OK)
                fail_now = set_err(&x->err, 0, TGC_REASON_MEMORY, "curl_multi_add_handle failed");
            if (fail_now) {
                if (x->sink == SINK_FILE)
                    part_abandon(x, true);
                x->rc = -1;
                x->state = X_DONE;
                done++;
                if (item_done)
                    item_done(user, i, -1, &x->err, NULL);
                continue;
            }
            x->state = X_ACTIVE;
            active++;
            if (active > c->peak_parallel)
                c->peak_parallel = (unsigned)active;
        }
        if (done == n)
            break;
        if (active == 0 && syncing > 0) {
            /* nothing moves: wait for a file to be committed (or a retry due) */
            for (xfer *x = sync_pool_take(&syncer, next_wake - now_s()); x != NULL;) {
                xfer *next = x->sync_next;
                x->syncing = false;
                x->state = X_DONE;
                syncing--;
                done++;
                report_item(xs, n, x, item_done, user);
                x = next;
            }
            continue;
        }
        if (active == 0) {
            double wait = next_wake - now_s();
            if (wait > 0) {
                struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
                nanosleep(&ts, NULL);
            }
            continue;
        }
        int running = 0;
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int queued;
        while ((msg = curl_multi_info_read(m, &queued)) != NULL) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            xfer *x = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            x->cc = msg->data.result;
            curl_multi_remove_handle(m, msg->easy_handle);
            active--;
            if (xfer_end(x, now_s())) {
                x->state = X_WAITING;
                continue;
            }
            if (x->syncing) {
                x->state = X_SYNCING;
                syncing++;
                continue;
            }
            x->state = X_DONE;
            done++;
            report_item(xs, n, x, item_done, user);
        }
        for (xfer *x = syncs ? sync_pool_take(&syncer, 0) : NULL; x != NULL;) {
            xfer *next = x->sync_next;
            x->syncing = false;
            x->state = X_DONE;
            syncing--;
            done++;
            report_item(xs, n, x, item_done, user);
            x = next;
        }
        now = now_s();
        if (progress != NULL && (now - last_progress >= 0.1 || done == n)) {
            uint64_t bytes = 0;
            for (size_t i = 0; i < n; i++)
                bytes += xs[i]->state == X_DONE && xs[i]->rc == 0 && xs[i]->size_hint
                             ? xs[i]->size_hint
                             : xs[i]->progress;
            progress(user, bytes, total, done, n);
            last_progress = now;
        }
        if (done < n && active > 0) {
            int ms = (int)((next_wake - now) * 1000);
            curl_multi_poll(m, NULL, 0, ms < 1 ? 1 : (ms > 200 ? 200 : ms), NULL);
        }
    }
    if (m != NULL)
        curl_multi_cleanup(m);
    for (size_t i = 0; i < n; i++) {
        hasher_end(xs[i], true); /* every file left the pool at its end; kept as a guard */
        xs[i]->pool = NULL;
    }
    if (pooled)
        hash_pool_stop(&pool);
    if (syncs)
        sync_pool_stop(&syncer);
    if (files && !c->o.no_fsync)
        sync_folders(xs, n);
}

/* One transfer: runs it, copies its error out. 0 or -1. */
static int run_one(xfer *x, tgc_error *err)
{
    engine_run(x->c, &x, 1, 1, NULL, NULL, NULL);
    if (x->rc != 0 && err != NULL)
        *err = x->err;
    return x->rc;
}

/* GET url as JSON into *out (taken from the transfer). */
static int get_json(tgc_client *c, sbuf *url, json_t **out, tgc_error *err)
{
    xfer *x = xfer_new(c, "GET", url);
    if (x == NULL)
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    x->want_json = true;
    int rc = run_one(x, err);
    if (rc == 0) {
        *out = x->json;
        x->json = NULL;
    }
    xfer_free(x);
    return rc;
}

/* Sends a JSON body (or none) with method; the answer JSON into *out when out. */
static int send_json(tgc_client *c, const char *method, sbuf *url, json_t *body, json_t **out,
                     tgc_error *err)
{
    xfer *x = xfer_new(c, method, url);
    if (x == NULL)
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    x->want_json = out != NULL;
    x->body_mem = body ? json_dumps(body, JSON_COMPACT) : strdup("{}");
    if (x->body_mem == NULL) {
        xfer_free(x);
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    }
    x->body_len = strlen(x->body_mem);
    x->has_body = true;
    x->content_type = "application/json";
    int rc = run_one(x, err);
    if (rc == 0 && out != NULL) {
        *out = x->json;
        x->json = NULL;
    }
    xfer_free(x);
    return rc;
}

/* Every page of a list: GET url (with ?limit=), follow next_cursor, concatenate
 * the arrays under key. */
static int get_all_pages(tgc_client *c, const char *url, const char *key, json_t **out,
                         tgc_error *err)
{
    json_t *all = json_array();
    char *cursor = NULL;
    if (all == NULL)
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    for (;;) {
        sbuf u = {0};
        sb_str(&u, url);
        if (cursor != NULL) {
            sb_str(&u, strchr(url, '?') ? "&cursor=" : "?cursor=");
            sb_escaped(&u, cursor, false);
        }
        free(cursor);
        cursor = NULL;
        json_t *page = NULL;
        int rc = get_json(c, &u, &page, err);
        free(u.s);
        if (rc != 0) {
            json_decref(all);
            return -1;
        }
        json_t *arr = json_object_get(page, key);
        if (!json_is_array(arr) || json_array_extend(all, arr) != 0) {
            json_decref(page);
            json_decref(all);
            return set_err(err, 200, TGC_REASON_BAD_ANSWER, "the answer has no '%s' list", key);
        }
        const char *next = json_string_value(json_object_get(page, "next_cursor"));
        if (next != NULL && next[0] != '\0') {
            cursor = strdup(next);
            if (cursor == NULL) {
                json_decref(page);
                json_decref(all);
                return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
            }
        }
        json_decref(page);
        if (cursor == NULL)
            break;
    }
    *out = all;
    return 0;
}

int tgc_get_lines(tgc_client *c, const char *path_and_query,
                  int (*on_line)(void *user, const char *line, size_t len), void *user,
                  tgc_error *err)
{
    clear_err(err);
    if (c == NULL || path_and_query == NULL || path_and_query[0] != '/' || on_line == NULL)
        return set_err(err, 0, TGC_REASON_USAGE, "a path beginning with / and a line callback");
    sbuf u = {0};
    sb_str(&u, c->base);
    sb_str(&u, path_and_query);
    xfer *x = xfer_new(c, "GET", &u);
    free(u.s);
    if (x == NULL)
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    x->sink = SINK_LINES;
    x->on_line = on_line;
    x->line_user = user;
    x->mem_max = 1024 * 1024;
    int rc = run_one(x, err);
    if (rc == 0 && x->mem_len > 0) { /* a last line without its newline */
        x->mem[x->mem_len] = '\0';
        if (on_line(user, (const char *)x->mem, x->mem_len) != 0)
            rc = set_err(err, 0, TGC_REASON_USAGE, "stopped by the caller");
    }
    xfer_free(x);
    return rc;
}

/* ---------- reads ---------- */

#define CHECK_MODEL(model)                                                                         \
    do {                                                                                           \
        clear_err(err);                                                                            \
        if (c == NULL || !model_ok(model))                                                         \
            return set_err(err, 0, TGC_REASON_USAGE, "'%s' is not org/name",                       \
                           (model) ? (model) : "(null)");                                          \
    } while (0)

int tgc_resolve(tgc_client *c, const char *model, const char *rev, tgc_resolved *out,
                tgc_error *err)
{
    CHECK_MODEL(model);
    memset(out, 0, sizeof *out);
    sbuf u = {0};
    sb_model(&u, c, model, rev ? rev : "latest");
    json_t *v = NULL;
    int rc = get_json(c, &u, &v, err);
    free(u.s);
    if (rc != 0)
        return -1;
    json_t *num = json_object_get(v, "version");
    if (!json_is_integer(num)) {
        json_decref(v);
        return set_err(err, 200, TGC_REASON_BAD_ANSWER, "the version has no number");
    }
    if (check_file_list(json_object_get(v, "files"), err) != 0) {
        json_decref(v);
        return -1;
    }
    out->version = (int)json_integer_value(num);
    const char *state = json_string_value(json_object_get(v, "state"));
    const char *digest = json_string_value(json_object_get(v, "digest"));
    snprintf(out->state, sizeof out->state, "%s", state ? state : "");
    snprintf(out->digest, sizeof out->digest, "%s", digest ? digest : "");
    out->version_json = v;
    return 0;
}

int tgc_list_models(tgc_client *c, const char *query, json_t **out, tgc_error *err)
{
    clear_err(err);
    sbuf u = {0};
    sb_str(&u, c->base);
    sb_str(&u, "/v1/models?limit=1000");
    if (query != NULL && query[0] != '\0') {
        sb_str(&u, "&q=");
        sb_escaped(&u, query, false);
    }
    if (u.failed) {
        free(u.s);
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    }
    int rc = get_all_pages(c, u.s, "models", out, err);
    free(u.s);
    return rc;
}

int tgc_list_rejections(tgc_client *c, const tgc_rejection_query *query,
                        int (*visit)(void *user, const json_t *record), void *user, tgc_error *err)
{
    clear_err(err);
    static const tgc_rejection_query all = {0};
    const tgc_rejection_query *q = query ? query : &all;
    const struct {
        const char *name, *value;
    } filters[] = {{"reason", q->reason},
                   {"namespace", q->namespace_name},
                   {"since", q->since},
                   {"until", q->until},
                   {"sha256", q->sha256}};
    uint64_t left = q->limit ? q->limit : UINT64_MAX;
    char *cursor = NULL;
    while (left > 0) {
        sbuf u = {0};
        char limit[32];
        snprintf(limit, sizeof limit, "%llu",
                 (unsigned long long)(left < 1000 ? left : 1000)); /* the server's page bound */
        sb_str(&u, c->base);
        sb_str(&u, "/v1/rejections?limit=");
        sb_str(&u, limit);
        for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++) {
            if (filters[i].value == NULL)
                continue;
            sb_str(&u, "&");
            sb_str(&u, filters[i].name);
            sb_str(&u, "=");
            sb_escaped(&u, filters[i].value, false);
        }
        if (cursor != NULL) {
            sb_str(&u, "&cursor=");
            sb_escaped(&u, cursor, false);
        }
        free(cursor);
        cursor = NULL;
        if (u.failed) {
            free(u.s);
            return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
        }
        json_t *page = NULL;
        int rc = get_json(c, &u, &page, err);
        free(u.s);
        if (rc != 0)
            return -1;
        json_t *list = json_object_get(page, "rejections");
        if (!json_is_array(list)) {
            json_decref(page);
            return set_err(err, 200, TGC_REASON_BAD_ANSWER, "the answer has no 'rejections' list");
        }
        size_t i;
        json_t *record;
        bool stop = false;
        json_array_foreach(list, i, record)
        {
            if (left == 0 || visit(user, record) != 0) {
                stop = true;
                break;
            }
            left--;
        }
        const char *next = json_string_value(json_object_get(page, "next_cursor"));
        if (!stop && next != NULL && next[0] != '\0') {
            cursor = strdup(next);
            if (cursor == NULL) {
                json_decref(page);
                return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
            }
        }
        json_decref(page);
        if (cursor == NULL)
            break;
    }
    free(cursor);
    return 0;
}

int tgc_get_model(tgc_client *c, const char *model, json_t **out, tgc_error *err)
{
    CHECK_MODEL(model);
    sbuf u = {0};
    sb_model(&u, c, model, NULL);
    int rc = get_json(c, &u, out, err);
    free(u.s);
    return rc;
}

int tgc_get_signing_keys(tgc_client *c, json_t **out, tgc_error *err)
{
    sbuf u = {0};
    sb_str(&u, c->base);
    sb_str(&u, "/.well-known/tensorgate/signing-keys");
    int rc = get_json(c, &u, out, err);
    free(u.s);
    return rc;
}

static int list_under_version(tgc_client *c, const char *model, const char *rev, const char *what,
                              const char *limit, json_t **out, tgc_error *err)
{
    sbuf u = {0};
    sb_model(&u, c, model, rev ? rev : "latest");
    sb_str(&u, "/");
    sb_str(&u, what);
    sb_str(&u, limit);
    if (u.failed) {
        free(u.s);
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    }
    int rc = get_all_pages(c, u.s, what, out, err);
    free(u.s);
    return rc;
}

int tgc_list_versions(tgc_client *c, const char *model, json_t **out, tgc_error *err)
{
    json_t *m = NULL;
    if (tgc_get_model(c, model, &m, err) != 0)
        return -1;
    json_t *v = json_object_get(m, "versions");
    if (!json_is_array(v)) {
        json_decref(m);
        return set_err(err, 200, TGC_REASON_BAD_ANSWER, "the model has no version list");
    }
    *out = json_incref(v);
    json_decref(m);
    return 0;
}

int tgc_list_files(tgc_client *c, const char *model, const char *rev, json_t **out, tgc_error *err)
{
    CHECK_MODEL(model);
    if (list_under_version(c, model, rev, "files", "?limit=1000", out, err) != 0)
        return -1;
    if (check_file_list(*out, err) != 0) {
        json_decref(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

int tgc_list_tensors(tgc_client *c, const char *model, const char *rev, json_t **out,
                     tgc_error *err)
{
    CHECK_MODEL(model);
    return list_under_version(c, model, rev, "tensors", "?limit=10000", out, err);
}

static void sb_file(sbuf *u, const tgc_client *c, const char *model, const char *rev,
                    const char *path)
{
    sb_model(u, c, model, rev ? rev : "latest");
    sb_str(u, "/files/");
    sb_escaped(u, path, true);
}

int tgc_get_header(tgc_client *c, const char *model, const char *rev, const char *path,
                   json_t **out, tgc_error *err)
{
    CHECK_MODEL(model);
    if (path == NULL || path[0] == '\0')
        return set_err(err, 0, TGC_REASON_USAGE, "no file path given");
    sbuf u = {0};
    sb_file(&u, c, model, rev, path);
    sb_str(&u, "/header");
    int rc = get_json(c, &u, out, err);
    free(u.s);
    return rc;
}

/* ---------- bytes ---------- */

static xfer *tensor_xfer(tgc_client *c, const char *model, const char *rev, const char *tensor,
                         const tgc_tensor_request *req)
{
    sbuf u = {0};
    sb_model(&u, c, model, rev ? rev : "latest");
    sb_str(&u, "/tensors/");
    sb_escaped(&u, tensor, false);
    char sep = '?';
    if (req != NULL && req->slice != NULL) {
        sb_str(&u, "?slice=");
        sb_escaped(&u, req->slice, false);
        sep = '&';
    }
    if (req != NULL && req->dtype != NULL) {
        sb_add(&u, &sep, 1);
        sb_str(&u, "dtype=");
        sb_escaped(&u, req->dtype, false);
        sep = '&';
    }
    if (req != NULL && req->npy) {
        sb_add(&u, &sep, 1);
        sb_str(&u, "format=npy");
    }
    xfer *x = xfer_new(c, "GET", &u);
    free(u.s);
    return x;
}

static void tensor_info(const xfer *x, uint64_t bytes, tgc_tensor_info *info)
{
    if (info == NULL)
        return;
    snprintf(info->dtype, sizeof info->dtype, "%s", x->h_dtype);
    snprintf(info->shape, sizeof info->shape, "%s", x->h_shape);
    snprintf(info->source_dtype, sizeof info->source_dtype, "%s", x->h_src_dtype);
    info->bytes = bytes;
}

int tgc_tensor_to_buffer(tgc_client *c, const char *model, const char *rev, const char *tensor,
                         const tgc_tensor_request *req, void *buf, size_t cap,
                         tgc_tensor_info *info, tgc_error *err)
{
    CHECK_MODEL(model);
    if (tensor == NULL || tensor[0] == '\0' || (buf == NULL && cap > 0))
        return set_err(err, 0, TGC_REASON_USAGE, "no tensor name or buffer given");
    xfer *x = tensor_xfer(c, model, rev, tensor, req);
    if (x == NULL)
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    x->sink = SINK_BUF;
    x->mem = buf;
    x->mem_cap = cap;
    int rc = run_one(x, err);
    if (rc == 0)
        tensor_info(x, x->mem_len, info);
    x->mem = NULL;
    xfer_free(x);
    return rc;
}

static int set_dest(xfer *x, const char *dest)
{
    size_t n = strlen(dest);
    x->dest = strdup(dest);
    x->part = malloc(n + 6);
    if (x->dest == NULL || x->part == NULL)
        return -1;
    memcpy(x->part, dest, n);
    memcpy(x->part + n, ".part", 6);
    x->sink = SINK_FILE;
    return 0;
}

int tgc_tensor_to_file(tgc_client *c, const char *model, const char *rev, const char *tensor,
                       const tgc_tensor_request *req, const char *path, tgc_tensor_info *info,
                       tgc_error *err)
{
    CHECK_MODEL(model);
    if (tensor == NULL || tensor[0] == '\0' || path == NULL || path[0] == '\0')
        return set_err(err, 0, TGC_REASON_USAGE, "no tensor name or output file given");
    xfer *x = tensor_xfer(c, model, rev, tensor, req);
    if (x == NULL || set_dest(x, path) != 0) {
        xfer_free(x);
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    }
    int rc = run_one(x, err);
    if (rc == 0)
        tensor_info(x, x->have, info);
    xfer_free(x);
    return rc;
}

/* POST .../versions/{rev}/bundle with the selection as its JSON body. */
static xfer *bundle_xfer(tgc_client *c, const char *model, const char *rev,
                         const tgc_bundle_request *req)
{
    json_t *body = json_object();
    bool ok = body != NULL;
    if (ok && req != NULL && req->tensors != NULL) {
        json_t *list = json_array();
        ok = list != NULL && json_object_set_new(body, "tensors", list) == 0;
        for (size_t i = 0; ok && req->tensors[i] != NULL; i++)
            ok = json_array_append_new(list, json_string(req->tensors[i])) == 0;
    }
    if (ok && req != NULL && req->dtype != NULL)
        ok = json_object_set_new(body, "dtype", json_string(req->dtype)) == 0;
    if (ok && req != NULL && req->file != NULL)
        ok = json_object_set_new(body, "file", json_string(req->file)) == 0;
    char *text = ok ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (text == NULL)
        return NULL;
    sbuf u = {0};
    sb_model(&u, c, model, rev ? rev : "latest");
    sb_str(&u, "/bundle");
    xfer *x = xfer_new(c, "POST", &u);
    free(u.s);
    if (x == NULL) {
        free(text);
        return NULL;
    }
    x->body_mem = text;
    x->body_len = strlen(text);
    x->has_body = true;
    x->content_type = "application/json";
    return x;
}

/* A selector list of one NULL (or a string that is not UTF-8) would be refused by
 * the server anyway; an empty string is left to the server's invalid_selector. */
static bool bundle_usable(const tgc_bundle_request *req)
{
    if (req == NULL || req->tensors == NULL)
        return true;
    return req->tensors[0] != NULL;
}

int tgc_bundle_to_file(tgc_client *c, const char *model, const char *rev,
                       const tgc_bundle_request *req, const char *path, uint64_t *bytes,
                       tgc_error *err)
{
    CHECK_MODEL(model);
    if (path == NULL || path[0] == '\0' || !bundle_usable(req))
        return set_err(err, 0, TGC_REASON_USAGE, "no output file or an empty selector list");
    xfer *x = bundle_xfer(c, model, rev, req);
    if (x == NULL || set_dest(x, path) != 0) {
        xfer_free(x);
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory (or a selector not UTF-8)");
    }
    int rc = run_one(x, err);
    if (rc == 0 && bytes != NULL)
        *bytes = x->have;
    xfer_free(x);
    return rc;
}

int tgc_bundle_to_buffer(tgc_client *c, const char *model, const char *rev,
                         const tgc_bundle_request *req, void *buf, size_t cap, uint64_t *bytes,
                         tgc_error *err)
{
    CHECK_MODEL(model);
    if ((buf == NULL && cap > 0) || !bundle_usable(req))
        return set_err(err, 0, TGC_REASON_USAGE, "no buffer or an empty selector list");
    xfer *x = bundle_xfer(c, model, rev, req);
    if (x == NULL)
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory (or a selector not UTF-8)");
    x->sink = SINK_BUF;
    x->mem = buf;
    x->mem_cap = cap;
    int rc = run_one(x, err);
    if (rc == 0 && bytes != NULL)
        *bytes = x->mem_len;
    x->mem = NULL;
    xfer_free(x);
    return rc;
}

int tgc_fetch_range(tgc_client *c, const char *model, const char *rev, const char *path,
                    uint64_t offset, uint64_t len, void *buf, size_t cap, size_t *got,
                    tgc_error *err)
{
    CHECK_MODEL(model);
    *got = 0;
    if (path == NULL || len == 0 || len > cap || offset + len < offset)
        return set_err(err, 0, TGC_REASON_USAGE, "a range needs a path, 0 < len <= cap");
    sbuf u = {0};
    sb_file(&u, c, model, rev, path);
    xfer *x = xfer_new(c, "GET", &u);
    free(u.s);
    if (x == NULL)
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    snprintf(x->range, sizeof x->range, "Range: bytes=%llu-%llu", (unsigned long long)offset,
             (unsigned long long)(offset + len - 1));
    x->sink = SINK_BUF;
    x->mem = buf;
    x->mem_cap = (size_t)len;
    int rc = run_one(x, err);
    if (rc == 0)
        *got = x->mem_len;
    x->mem = NULL;
    xfer_free(x);
    return rc;
}

static xfer *download_xfer(tgc_client *c, const char *model, const char *rev, const char *path,
                           const char *dest, const char *sha256_hex)
{
    sbuf u = {0};
    sb_file(&u, c, model, rev, path);
    xfer *x = xfer_new(c, "GET", &u);
    free(u.s);
    if (x == NULL || set_dest(x, dest) != 0) {
        xfer_free(x);
        return NULL;
    }
    x->resume = true;
    if (sha256_hex != NULL)
        snprintf(x->expect_sha, sizeof x->expect_sha, "%s", sha256_hex);
    return x;
}

int tgc_download(tgc_client *c, const char *model, const char *rev, const char *path,
                 const char *dest, const char *sha256_hex, tgc_error *err)
{
    CHECK_MODEL(model);
    if (path == NULL || path[0] == '\0' || dest == NULL || dest[0] == '\0')
        return set_err(err, 0, TGC_REASON_USAGE, "a download needs a path and a destination");
    if (!tgc_path_is_safe(path))
        return set_err(err, 0, TGC_REASON_UNSAFE_NAME,
                       "the file path holds a control character, '..' or a leading '/'");
    xfer *x = download_xfer(c, model, rev, path, dest, sha256_hex);
    if (x == NULL)
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    int rc = run_one(x, err);
    xfer_free(x);
    return rc;
}

/* ---------- writes ---------- */

int tgc_create_model(tgc_client *c, const char *model, const char *description, bool *existed,
                     tgc_error *err)
{
    CHECK_MODEL(model);
    if (existed != NULL)
        *existed = false;
    json_t *body = json_pack("{s:s}", "name", model);
    if (body != NULL && description != NULL)
        json_object_set_new(body, "description", json_string(description));
    if (body == NULL)
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    sbuf u = {0};
    sb_str(&u, c->base);
    sb_str(&u, "/v1/models");
    tgc_error e;
    int rc = send_json(c, "POST", &u, body, NULL, &e);
    free(u.s);
    json_decref(body);
    if (rc != 0 && e.status == 409 && strcmp(e.reason, "model_exists") == 0) {
        if (existed != NULL)
            *existed = true;
        return 0;
    }
    if (rc != 0 && err != NULL)
        *err = e;
    return rc;
}

int tgc_create_version(tgc_client *c, const char *model, int *version, tgc_error *err)
{
    CHECK_MODEL(model);
    sbuf u = {0};
    sb_model(&u, c, model, NULL);
    sb_str(&u, "/versions");
    json_t *v = NULL;
    int rc = send_json(c, "POST", &u, NULL, &v, err);
    free(u.s);
    if (rc != 0)
        return -1;
    json_t *num = json_object_get(v, "version");
    int ok = json_is_integer(num);
    if (ok)
        *version = (int)json_integer_value(num);
    json_decref(v);
    return ok ? 0 : set_err(err, 201, TGC_REASON_BAD_ANSWER, "the draft has no number");
}

static xfer *upload_xfer(tgc_client *c, const char *model, int version, const char *path,
                         const char *local_file, tgc_error *err)
{
    sbuf u = {0};
    char rev[24];
    snprintf(rev, sizeof rev, "%d", version);
    sb_file(&u, c, model, rev, path);
    xfer *x = xfer_new(c, "PUT", &u);
    free(u.s);
    if (x == NULL) {
        set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
        return NULL;
    }
    x->body_fd = open(local_file, O_RDONLY | O_CLOEXEC);
    struct stat st;
    bool opened = x->body_fd >= 0 && fstat(x->body_fd, &st) == 0;
    if (!opened || !S_ISREG(st.st_mode)) {
        set_err(err, 0, TGC_REASON_IO, "%s: %s", local_file,
                !opened ? strerror(errno) : "not a regular file");
        xfer_free(x);
        return NULL;
    }
    x->body_size = (uint64_t)st.st_size;
    x->size_hint = x->body_size;
    x->has_body = true;
    x->content_type = "application/octet-stream";
    x->want_json = true;
    return x;
}

int tgc_upload(tgc_client *c, const char *model, int version, const char *path,
               const char *local_file, json_t **file_json, tgc_error *err)
{
    CHECK_MODEL(model);
    if (path == NULL || path[0] == '\0' || local_file == NULL)
        return set_err(err, 0, TGC_REASON_USAGE, "an upload needs a path and a local file");
    xfer *x = upload_xfer(c, model, version, path, local_file, err);
    if (x == NULL)
        return -1;
    int rc = run_one(x, err);
    if (rc == 0 && file_json != NULL) {
        *file_json = x->json;
        x->json = NULL;
    }
    xfer_free(x);
    return rc;
}

int tgc_publish(tgc_client *c, const char *model, int version, json_t **version_json,
                tgc_error *err)
{
    CHECK_MODEL(model);
    char rev[24];
    snprintf(rev, sizeof rev, "%d", version);
    sbuf u = {0};
    sb_model(&u, c, model, rev);
    sb_str(&u, "/publish");
    json_t *v = NULL;
    int rc = send_json(c, "POST", &u, NULL, &v, err);
    free(u.s);
    if (rc == 0 && version_json != NULL)
        *version_json = v;
    else
        json_decref(v);
    return rc;
}

int tgc_mirror(tgc_client *c, const char *model, json_t *body, json_t **job, tgc_error *err)
{
    CHECK_MODEL(model);
    sbuf u = {0};
    sb_model(&u, c, model, NULL);
    sb_str(&u, "/mirror");
    json_t *v = NULL;
    int rc = send_json(c, "POST", &u, body, &v, err);
    free(u.s);
    if (rc == 0 && job != NULL)
        *job = v;
    else
        json_decref(v);
    return rc;
}

int tgc_get_job(tgc_client *c, long long id, json_t **job, tgc_error *err)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/jobs/%lld", id);
    sbuf u = {0};
    sb_str(&u, c->base);
    sb_str(&u, path);
    int rc = get_json(c, &u, job, err);
    free(u.s);
    return rc;
}

int tgc_set_alias(tgc_client *c, const char *model, const char *alias, int version, tgc_error *err)
{
    CHECK_MODEL(model);
    if (alias == NULL || alias[0] == '\0')
        return set_err(err, 0, TGC_REASON_USAGE, "no alias given");
    sbuf u = {0};
    sb_model(&u, c, model, NULL);
    sb_str(&u, "/aliases/");
    sb_escaped(&u, alias, false);
    json_t *body = json_pack("{s:i}", "version", version);
    if (body == NULL) {
        free(u.s);
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    }
    int rc = send_json(c, "PUT", &u, body, NULL, err);
    json_decref(body);
    free(u.s);
    return rc;
}

int tgc_namespace_policy(tgc_client *c, const char *org, const bool *set, json_t **out,
                         tgc_error *err)
{
    clear_err(err);
    if (out == NULL)
        return set_err(err, 0, TGC_REASON_USAGE, "no place for the answer");
    *out = NULL;
    if (c == NULL || org == NULL || org[0] == '\0' || strlen(org) > 64 || strchr(org, '/'))
        return set_err(err, 0, TGC_REASON_USAGE, "'%s' is not a namespace", org ? org : "(null)");
    sbuf u = {0};
    sb_str(&u, c->base);
    sb_str(&u, "/v1/namespaces/");
    sb_escaped(&u, org, false);
    sb_str(&u, "/policy");
    if (u.failed) {
        free(u.s);
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    }
    int rc;
    if (set != NULL) {
        json_t *body = json_pack("{s:b}", "allow_code", *set);
        if (body == NULL) {
            free(u.s);
            return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
        }
        rc = send_json(c, "PUT", &u, body, out, err);
        json_decref(body);
    } else {
        rc = get_json(c, &u, out, err);
    }
    free(u.s);
    return rc;
}

/* ---------- the registry's metadata and life cycle ---------- */

/* Sends method to url without a body; the answer JSON into *out when out (else any
 * answer body is dropped). */
static int send_nobody(tgc_client *c, const char *method, sbuf *url, json_t **out, tgc_error *err)
{
    if (url->failed)
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    xfer *x = xfer_new(c, method, url);
    if (x == NULL)
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    x->want_json = out != NULL;
    int rc = run_one(x, err);
    if (rc == 0 && out != NULL) {
        *out = x->json;
        x->json = NULL;
    }
    xfer_free(x);
    return rc;
}

/* A send_json whose answer goes to *out only when out is not NULL. */
static int send_json_maybe(tgc_client *c, const char *method, sbuf *url, json_t *body, json_t **out,
                           tgc_error *err)
{
    if (url->failed)
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    json_t *answer = NULL;
    int rc = send_json(c, method, url, body, &answer, err);
    if (rc == 0 && out != NULL)
        *out = answer;
    else
        json_decref(answer);
    return rc;
}

int tgc_search_models(tgc_client *c, const tgc_model_query *query, json_t **out, tgc_error *err)
{
    clear_err(err);
    if (c == NULL || out == NULL)
        return set_err(err, 0, TGC_REASON_USAGE, "no client or no place for the answer");
    *out = NULL;
    tgc_model_query q = {0};
    if (query != NULL)
        q = *query;
    if (q.tag_count > 8 || (q.tag_count > 0 && q.tags == NULL))
        return set_err(err, 0, TGC_REASON_USAGE, "at most 8 tag filters");
    if (q.sort != NULL && strcmp(q.sort, "name") != 0 && strcmp(q.sort, "downloads") != 0)
        return set_err(err, 0, TGC_REASON_USAGE, "sort is 'name' or 'downloads', not '%s'", q.sort);
    uint64_t page = q.limit > 0 && q.limit < 1000 ? q.limit : 1000;
    char head[64];
    snprintf(head, sizeof head, "/v1/models?limit=%llu", (unsigned long long)page);
    sbuf u = {0};
    sb_str(&u, c->base);
    sb_str(&u, head);
    if (q.text != NULL && q.text[0] != '\0') {
        sb_str(&u, "&q=");
        sb_escaped(&u, q.text, false);
    }
    for (size_t i = 0; i < q.tag_count; i++) {
        if (q.tags[i] == NULL || q.tags[i][0] == '\0') {
            free(u.s);
            return set_err(err, 0, TGC_REASON_USAGE, "an empty tag filter");
        }
        sb_str(&u, "&tag=");
        sb_escaped(&u, q.tags[i], false);
    }
    if (q.sort != NULL)
        sb_str(&u, strcmp(q.sort, "downloads") == 0 ? "&sort=downloads" : "&sort=name");
    if (u.failed) {
        free(u.s);
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    }
    int rc;
    if (q.limit > 0 && q.limit <= 1000) {
        /* one page is enough */
        json_t *answer = NULL;
        rc = get_json(c, &u, &answer, err);
        json_t *models = rc == 0 ? json_object_get(answer, "models") : NULL;
        if (rc == 0 && !json_is_array(models))
            rc = set_err(err, 200, TGC_REASON_BAD_ANSWER, "the answer has no 'models' list");
        if (rc == 0)
            *out = json_incref(models);
        json_decref(answer);
    } else {
        rc = get_all_pages(c, u.s, "models", out, err);
        while (rc == 0 && q.limit > 0 && json_array_size(*out) > q.limit)
            json_array_remove(*out, json_array_size(*out) - 1);
    }
    free(u.s);
    return rc;
}

int tgc_patch_metadata(tgc_client *c, const char *model, const char *rev, json_t *patch,
                       json_t **out, tgc_error *err)
{
    CHECK_MODEL(model);
    if (!json_is_object(patch))
        return set_err(err, 0, TGC_REASON_USAGE, "the patch is not a JSON object");
    if (rev != NULL && rev[0] == '\0')
        return set_err(err, 0, TGC_REASON_USAGE, "an empty revision");
    sbuf u = {0};
    sb_model(&u, c, model, rev);
    int rc = send_json_maybe(c, "PATCH", &u, patch, out, err);
    free(u.s);
    return rc;
}

/* PUT (with reason) or DELETE (reason NULL) .../versions/{rev}/deprecation */
static int deprecation(tgc_client *c, const char *model, const char *rev, bool mark,
                       const char *reason, json_t **out, tgc_error *err)
{
    CHECK_MODEL(model);
    if (rev == NULL || rev[0] == '\0')
        return set_err(err, 0, TGC_REASON_USAGE, "no revision given");
    sbuf u = {0};
    sb_model(&u, c, model, rev);
    sb_str(&u, "/deprecation");
    int rc;
    if (mark) {
        json_t *body = json_pack("{s:s}", "reason", reason ? reason : "");
        if (body == NULL) {
            free(u.s);
            return set_err(err, 0, TGC_REASON_USAGE, "the reason is not UTF-8 text");
        }
        rc = send_json_maybe(c, "PUT", &u, body, out, err);
        json_decref(body);
    } else {
        json_t *answer = NULL;
        rc = send_nobody(c, "DELETE", &u, &answer, err);
        if (rc == 0 && out != NULL)
            *out = answer;
        else
            json_decref(answer);
    }
    free(u.s);
    return rc;
}

int tgc_deprecate(tgc_client *c, const char *model, const char *rev, const char *reason,
                  json_t **out, tgc_error *err)
{
    return deprecation(c, model, rev, true, reason, out, err);
}

int tgc_undeprecate(tgc_client *c, const char *model, const char *rev, json_t **out, tgc_error *err)
{
    return deprecation(c, model, rev, false, NULL, out, err);
}

int tgc_delete_version(tgc_client *c, const char *model, const char *rev, tgc_error *err)
{
    CHECK_MODEL(model);
    if (rev == NULL || rev[0] == '\0')
        return set_err(err, 0, TGC_REASON_USAGE, "no revision given");
    sbuf u = {0};
    sb_model(&u, c, model, rev);
    int rc = send_nobody(c, "DELETE", &u, NULL, err);
    free(u.s);
    return rc;
}

int tgc_delete_alias(tgc_client *c, const char *model, const char *alias, tgc_error *err)
{
    CHECK_MODEL(model);
    if (alias == NULL || alias[0] == '\0')
        return set_err(err, 0, TGC_REASON_USAGE, "no alias given");
    sbuf u = {0};
    sb_model(&u, c, model, NULL);
    sb_str(&u, "/aliases/");
    sb_escaped(&u, alias, false);
    int rc = send_nobody(c, "DELETE", &u, NULL, err);
    free(u.s);
    return rc;
}

/* base + "/v1/namespaces/" + org, org checked as a name */
static int sb_namespace(sbuf *u, const tgc_client *c, const char *org, tgc_error *err)
{
    if (c == NULL || org == NULL || !name_ok(org, strlen(org)))
        return set_err(err, 0, TGC_REASON_USAGE,
                       "'%s' is not a namespace (names are [A-Za-z0-9][A-Za-z0-9._-]{0,63})",
                       org ? org : "(null)");
    sb_str(u, c->base);
    sb_str(u, "/v1/namespaces/");
    sb_escaped(u, org, false);
    return 0;
}

int tgc_get_namespace(tgc_client *c, const char *org, json_t **out, tgc_error *err)
{
    clear_err(err);
    if (out == NULL)
        return set_err(err, 0, TGC_REASON_USAGE, "no place for the answer");
    *out = NULL;
    sbuf u = {0};
    if (sb_namespace(&u, c, org, err) != 0)
        return -1;
    int rc =
        u.failed ? set_err(err, 0, TGC_REASON_MEMORY, "out of memory") : get_json(c, &u, out, err);
    free(u.s);
    return rc;
}

int tgc_set_namespace_quota(tgc_client *c, const char *org, uint64_t quota_bytes, bool use_default,
                            json_t **out, tgc_error *err)
{
    clear_err(err);
    if (!use_default && quota_bytes > (uint64_t)INT64_MAX)
        return set_err(err, 0, TGC_REASON_USAGE, "a quota of more than 2^63-1 bytes");
    sbuf u = {0};
    if (sb_namespace(&u, c, org, err) != 0)
        return -1;
    sb_str(&u, "/quota");
    json_t *body = use_default ? json_pack("{s:n}", "quota_bytes")
                               : json_pack("{s:I}", "quota_bytes", (json_int_t)quota_bytes);
    if (body == NULL) {
        free(u.s);
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    }
    int rc = send_json_maybe(c, "PUT", &u, body, out, err);
    json_decref(body);
    free(u.s);
    return rc;
}

int tgc_scan(tgc_client *c, const char *local_file, const char *kind, json_t **verdict,
             tgc_error *err)
{
    tgc_scan_options options = {.kind = kind};
    return tgc_scan_with(c, local_file, &options, verdict, err);
}

int tgc_scan_with(tgc_client *c, const char *local_file, const tgc_scan_options *options,
                  json_t **verdict, tgc_error *err)
{
    clear_err(err);
    if (c == NULL || local_file == NULL)
        return set_err(err, 0, TGC_REASON_USAGE, "no file to scan");
    static const tgc_scan_options none = {0};
    if (options == NULL)
        options = &none;
    sbuf u = {0};
    sb_str(&u, c->base);
    sb_str(&u, "/v1/scan");
    const char *sep = "?";
    const struct {
        const char *key, *value;
    } query[] = {{"kind", options->kind}, {"name", options->name}, {"format", options->format}};
    for (size_t i = 0; i < sizeof query / sizeof query[0]; i++) {
        if (query[i].value == NULL)
            continue;
        sb_str(&u, sep);
        sb_str(&u, query[i].key);
        sb_str(&u, "=");
        sb_escaped(&u, query[i].value, false);
        sep = "&";
    }
    xfer *x = xfer_new(c, "POST", &u);
    free(u.s);
    if (x == NULL)
        return set_err(err, 0, TGC_REASON_MEMORY, "out of memory");
    x->body_fd = open(local_file, O_RDONLY | O_CLOEXEC);
    struct stat st;
    bool opened = x->body_fd >= 0 && fstat(x->body_fd, &st) == 0;
    if (!opened || !S_ISREG(st.st_mode)) {
        int e = errno;
        xfer_free(x);
        return set_err(err, 0, TGC_REASON_IO, "%s: %s", local_file,
                       !opened ? strerror(e) : "not a regular file");
    }
    x->body_size = (uint64_t)st.st_size;
    x->has_body = true;
    x->content_type = "application/octet-stream";
    x->want_json = true;
    int rc = run_one(x, err);
    if (rc == 0) {
        *verdict = x->json;
        x->json = NULL;
    }
    xfer_free(x);
    return rc;
}

/* ---------- batches ---------- */

struct tgc_batch {
    tgc_client *c;
    xfer **items;
    size_t count, cap;
};

tgc_batch *tgc_batch_new(tgc_client *c)
{
    if (c == NULL)
        return NULL;
    tgc_batch *b = calloc(1, sizeof *b);
    if (b != NULL)
        b->c = c;
    return b;
}

void tgc_batch_free(tgc_batch *b)
{
    if (b == NULL)
        return;
    for (size_t i = 0; i < b->count; i++)
        xfer_free(b->items[i]);
    free(b->items);
    free(b);
}

static long batch_push(tgc_batch *b, xfer *x)
{
    if (x == NULL)
        return -1;
    if (b->count == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16;
        /* an array of pointers: the element is a pointer on purpose */
        // NOLINTNEXTLINE(bugprone-sizeof-expression)
        xfer **p = realloc(b->items, cap * sizeof *p);
        if (p == NULL) {
            xfer_free(x);
            return -1;
        }
        b->items = p;
        b->cap = cap;
    }
    b->items[b->count] = x;
    return (long)b->count++;
}

long tgc_batch_add_download(tgc_batch *b, const char *model, const char *rev, const char *path,
                            const char *dest, const char *sha256_hex, uint64_t size)
{
    if (b == NULL || !model_ok(model) || !tgc_path_is_safe(path) || dest == NULL)
        return -1;
    xfer *x = download_xfer(b->c, model, rev, path, dest, sha256_hex);
    if (x != NULL)
        x->size_hint = size;
    return batch_push(b, x);
}

long tgc_batch_add_upload(tgc_batch *b, const char *model, int version, const char *path,
                          const char *local_file)
{
    if (b == NULL || !model_ok(model) || path == NULL || local_file == NULL)
        return -1;
    xfer *x = upload_xfer(b->c, model, version, path, local_file, NULL);
    return batch_push(b, x);
}

size_t tgc_batch_run(tgc_batch *b, unsigned parallel, tgc_progress_fn progress,
                     tgc_item_fn item_done, void *user)
{
    if (b == NULL || b->count == 0)
        return 0;
    engine_run(b->c, b->items, b->count, parallel, progress, item_done, user);
    size_t failed = 0;
    for (size_t i = 0; i < b->count; i++)
        failed += b->items[i]->rc != 0;
    return failed;
}

size_t tgc_batch_count(const tgc_batch *b)
{
    return b ? b->count : 0;
}

int tgc_batch_result(const tgc_batch *b, size_t index, const tgc_error **err)
{
    if (b == NULL || index >= b->count)
        return -1;
    const xfer *x = b->items[index];
    if (x->rc != 0 && err != NULL)
        *err = &x->err;
    return x->rc;
}
