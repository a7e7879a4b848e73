/* Imports from a URL (see import_job.h). */
#include "import_job.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "index_check.h"
#include "log.h"
#include "pipeline.h"
#include "reclaim.h"
#include "url_redact.h"

#define UNKNOWN UINT64_MAX
#define SNIFF_WINDOW 65536u      /* what the gate's sniffers read of a non-safetensors head */
#define PROGRESS_STEP (4u << 20) /* progress in the catalog, every 4 MiB */

typedef struct importer {
    const tg_jobs_context *ctx;
    const tg_job *job;
    const tg_job_worker *worker;
    CURL *curl;
    tg_ingest ingest;
    bool begun;      /* the ingest began (at the first response) */
    uint64_t offset; /* bytes fed to the ingest so far */
    uint64_t total;  /* the source's size, or UNKNOWN */
    bool ranges;     /* the source answers Range with 206 */
    bool first_done; /* the first response was checked */
    uint8_t head[8]; /* the first 8 bytes: a safetensors header's N */
    char etag[256];  /* the validator of the first response */
    char last_modified[128];
    uint64_t next_progress;
    /* the deadline and the rate: the start, and the current window's start and offset */
    int64_t started_ms;
    int64_t window_ms;
    uint64_t window_bytes;
    /* the response in progress */
    uint64_t req_to; /* end (exclusive) of the asked range, or UNKNOWN */
    bool checked;
    char hdr_etag[256], hdr_last_modified[128], hdr_range[128];
    /* the outcome */
    const char *forbidden; /* the policy's verdict on a refused connect */
    char forbidden_addr[INET6_ADDRSTRLEN];
    bool stopped;    /* the server stops: the job stays running */
    bool lease_lost; /* another replica holds the job: it is left to it */
    char reason[48];
    char detail[TG_JOB_DETAIL_MAX];
    /* a mirror's file (tg_import_fetch_file): its own commit and Authorization */
    tg_import_file *custom;
    struct curl_slist *headers;
    /* the bound on the body: --max-body, or the room left in the namespace's storage
     * quota when that is less (quota_bound), read when the first response comes */
    uint64_t limit;
    bool quota_bound;
} importer;

static void fail(importer *im, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(importer *im, const char *reason, const char *fmt, ...)
{
    if (im->reason[0] != '\0')
        return; /* the first failure is the one reported */
    snprintf(im->reason, sizeof im->reason, "%s", reason);
    va_list args;
    va_start(args, fmt);
    vsnprintf(im->detail, sizeof im->detail, fmt, args);
    va_end(args);
}

/* ---- the URL ---- */

const char *tg_import_url_check(const tg_addr_policy *policy, const char *url, char *detail,
                                size_t detail_len)
{
    if (url == NULL || url[0] == '\0' || strlen(url) > TG_URL_MAX) {
        snprintf(detail, detail_len, "the url must be 1 to %d bytes", TG_URL_MAX);
        return "import_url_invalid";
    }
    for (const unsigned char *c = (const unsigned char *)url; *c; c++)
        if (*c <= 0x20 || *c >= 0x7F) {
            snprintf(detail, detail_len, "the url holds a space, control or non-ASCII byte");
            return "import_url_invalid";
        }
    CURLU *parsed = curl_url();
    if (parsed == NULL) {
        snprintf(detail, detail_len, "out of memory");
        return "internal_error";
    }
    const char *reason = NULL;
    char *scheme = NULL, *host = NULL;
    if (curl_url_set(parsed, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK ||
        curl_url_get(parsed, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) {
        snprintf(detail, detail_len, "the url is not an absolute URL");
        reason = "import_url_invalid";
    } else if (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0) {
        snprintf(detail, detail_len, "the url's scheme is %.32s; only http and https are allowed",
                 scheme);
        reason = "import_scheme_forbidden";
    } else if (curl_url_get(parsed, CURLUPART_HOST, &host, 0) != CURLUE_OK || host[0] == '\0') {
        snprintf(detail, detail_len, "the url has no host");
        reason = "import_url_invalid";
    } else {
        /* a numeric host is judged now too ([v6] loses its brackets); names are
         * judged on the addresses they resolve to, at each connect */
        char literal[INET6_ADDRSTRLEN + 2];
        size_t len = strlen(host);
        if (host[0] == '[' && len >= 2 && len - 2 < sizeof literal) {
            memcpy(literal, host + 1, len - 2);
            literal[len - 2] = '\0';
        } else {
            snprintf(literal, sizeof literal, "%s", host);
        }
        const char *why = tg_addr_text_forbidden(policy, literal);
        if (why != NULL && strcmp(why, "invalid") != 0) {
            snprintf(detail, detail_len,
                     "the url's host %s is a %s address; imports may not reach it "
                     "(--import-allow)",
                     literal, why);
            reason = "import_address_forbidden";
        }
    }
    curl_free(scheme);
    curl_free(host);
    curl_url_cleanup(parsed);
    return reason;
}

/* ---- libcurl callbacks ---- */

/* Every connection (the first, each redirect's, each resume's): the peer address
 * curl is about to connect to, after its own resolution, is judged by the policy. */
static curl_socket_t open_socket(void *ctx, curlsocktype purpose, struct curl_sockaddr *address)
{
    importer *im = ctx;
    (void)purpose;
    const char *why =
        tg_addr_forbidden(&im->ctx->import_policy, &address->addr, (size_t)address->addrlen);
    if (why != NULL) {
        im->forbidden = why;
        const void *raw = NULL;
        if (address->family == AF_INET)
            raw = &((const struct sockaddr_in *)(const void *)&address->addr)->sin_addr;
        else if (address->family == AF_INET6)
            raw = &((const struct sockaddr_in6 *)(const void *)&address->addr)->sin6_addr;
        if (raw == NULL ||
            inet_ntop(address->family, raw, im->forbidden_addr, sizeof im->forbidden_addr) == NULL)
            snprintf(im->forbidden_addr, sizeof im->forbidden_addr, "?");
        return CURL_SOCKET_BAD;
    }
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

static void header_value(const char *line, size_t len, const char *name, char *out, size_t out_len)
{
    size_t name_len = strlen(name);
    if (len <= name_len || strncasecmp(line, name, name_len) != 0 || line[name_len] != ':')
        return;
    const char *value = line + name_len + 1;
    const char *end = line + len;
    while (value < end && (*value == ' ' || *value == '\t'))
        value++;
    while (end > value && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    snprintf(out, out_len, "%.*s", (int)(end - value), value);
}

static size_t on_header(char *line, size_t size, size_t count, void *ctx)
{
    importer *im = ctx;
    size_t len = size * count;
    if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) { /* a new response (a redirect's, ...) */
        im->hdr_etag[0] = im->hdr_last_modified[0] = im->hdr_range[0] = '\0';
        return len;
    }
    header_value(line, len, "ETag", im->hdr_etag, sizeof im->hdr_etag);
    header_value(line, len, "Last-Modified", im->hdr_last_modified, sizeof im->hdr_last_modified);
    header_value(line, len, "Content-Range", im->hdr_range, sizeof im->hdr_range);
    return len;
}

/* One decimal number at *text (digits only), moving *text past it. */
static bool parse_number(const char **text, uint64_t *out)
{
    const char *p = *text;
    if (*p < '0' || *p > '9')
        return false;
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull(p, &end, 10);
    if (errno != 0 || end == p)
        return false;
    *out = value;
    *text = end;
    return true;
}

/* "bytes A-B/T": A and T (UNKNOWN for "*"). */
static bool parse_content_range(const char *text, uint64_t *start, uint64_t *total)
{
    uint64_t a = 0, b = 0;
    if (strncmp(text, "bytes ", 6) != 0)
        return false;
    const char *p = text + 6;
    if (!parse_number(&p, &a) || *p++ != '-' || !parse_number(&p, &b) || *p++ != '/' || b < a)
        return false;
    *start = a;
    if (strcmp(p, "*") == 0) {
        *total = UNKNOWN;
        return true;
    }
    uint64_t value = 0;
    if (!parse_number(&p, &value) || *p != '\0' || value <= b)
        return false;
    *total = value;
    return true;
}

/* The room left in the job's namespace's storage quota (docs/MANUAL.md, "Storage
 * quotas"): UINT64_MAX when it has none; false after failing im. */
static bool quota_room(importer *im, uint64_t *room)
{
    *room = UINT64_MAX;
    tg_namespace_settings settings;
    uint64_t usage = 0;
    if (tg_catalog_namespace_get(im->ctx->catalog, im->job->org, &settings) != TG_CAT_OK) {
        fail(im, "internal_error", "the namespace's storage quota cannot be read from the catalog");
        return false;
    }
    uint64_t quota =
        settings.quota_bytes >= 0 ? (uint64_t)settings.quota_bytes : im->ctx->namespace_quota;
    if (quota == 0)
        return true;
    if (tg_catalog_namespace_usage(im->ctx->catalog, im->job->org, &usage) != TG_CAT_OK) {
        fail(im, "internal_error", "the namespace's usage cannot be read from the catalog");
        return false;
    }
    *room = usage < quota ? quota - usage : 0;
    return true;
}

static void fail_too_large(importer *im)
{
    if (im->quota_bound)
        fail(im, "storage_quota_exceeded",
             "the source is larger than the %llu bytes left in namespace %s's storage quota",
             (unsigned long long)im->limit, im->job->org);
    else
        fail(im, "import_too_large", "the source is larger than --max-body (%llu bytes)",
             (unsigned long long)im->ctx->max_body);
}

static bool begin_ingest(importer *im, uint64_t declared)
{
    const char *path = im->job->path;
    st_gate_kind kind =
        tg_is_safetensors_path(path) ? ST_GATE_SAFETENSORS : st_gate_sidecar_kind(path);
    /* the namespace's code policy, as an upload reads it: when the fetch begins */
    tg_namespace_settings settings = {0};
    if (kind != ST_GATE_SAFETENSORS &&
        tg_catalog_namespace_get(im->ctx->catalog, im->job->org, &settings) != TG_CAT_OK) {
        fail(im, "internal_error", "the namespace's code policy cannot be read from the catalog");
        return false;
    }
    tg_ingest_config config = {
        .kind = kind,
        .name = path,
        .allow_code = settings.allow_code,
        .declared = declared,
        .max_bytes = im->limit,
        .max_header = im->ctx->max_header,
        .refuse_nonfinite = im->ctx->refuse_nonfinite,
        .store = im->ctx->store,
        .digest_name = "import",
        .stop_when_certain = true,
        .check_length = true,
        .drain_limit = 0,
    };
    im->begun = true;
    if (tg_ingest_begin(&im->ingest, &config) != 0) {
        fail(im, "internal_error", "cannot start the ingest (temp file or memory): %s",
             strerror(im->ingest.os_errno));
        return false;
    }
    return true;
}

/* The first bytes of a response: is it the one asked for? */
static bool check_response(importer *im)
{
    long status = 0;
    curl_easy_getinfo(im->curl, CURLINFO_RESPONSE_CODE, &status);
    uint64_t total = UNKNOWN;
    if (status == 206) {
        uint64_t start = 0;
        if (!parse_content_range(im->hdr_range, &start, &total) || start != im->offset) {
            fail(im, "import_fetch_failed",
                 "the source answered 206 with Content-Range '%.64s' for bytes from %llu",
                 im->hdr_range, (unsigned long long)im->offset);
            return false;
        }
    } else if (status == 200 && im->offset == 0 && !im->first_done) {
        /* no ranges: the whole file in one stream, stopped at the first refusal */
        curl_off_t length = -1;
        curl_easy_getinfo(im->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
        total = length >= 0 ? (uint64_t)length : UNKNOWN;
        im->req_to = UNKNOWN;
    } else {
        fail(im, "import_fetch_failed", "the source answered HTTP %ld to a range request", status);
        return false;
    }
    if (!im->first_done) {
        im->first_done = true;
        im->ranges = status == 206;
        im->total = total;
        snprintf(im->etag, sizeof im->etag, "%s", im->hdr_etag);
        snprintf(im->last_modified, sizeof im->last_modified, "%s", im->hdr_last_modified);
        if (total != UNKNOWN && total > im->ctx->max_body) {
            fail(im, "import_too_large", "the source is %llu bytes; the limit is %llu (--max-body)",
                 (unsigned long long)total, (unsigned long long)im->ctx->max_body);
            return false;
        }
        /* accepted imports are bounded by the room left in the quota when they fetch */
        uint64_t room = UINT64_MAX;
        if (!quota_room(im, &room))
            return false;
        im->quota_bound = room < im->ctx->max_body;
        im->limit = im->quota_bound ? room : im->ctx->max_body;
        if (im->limit == 0 || (total != UNKNOWN && total > im->limit)) {
            fail(im, "storage_quota_exceeded",
                 "the source is %llu bytes; namespace %s has %llu bytes left in its storage quota",
                 (unsigned long long)total, im->job->org, (unsigned long long)im->limit);
            return false;
        }
        return begin_ingest(im, total);
    }
    /* a later range: the same file? */
    bool same = total == im->total;
    if (im->etag[0] != '\0')
        same = same && strcmp(im->etag, im->hdr_etag) == 0;
    else if (im->last_modified[0] != '\0')
        same = same && strcmp(im->last_modified, im->hdr_last_modified) == 0;
    if (!same) {
        fail(im, "import_source_changed",
             "the source changed between ranges (ETag, Last-Modified or size differ); "
             "start the import again");
        return false;
    }
    return true;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What the pool told the worker, and the deadline and the rate. False: stop the
 * transfer (stopped, lease lost, or failed with its reason). */
static bool keep_going(importer *im)
{
    switch (tg_job_worker_signal(im->worker)) {
    case TG_JOB_GO:
        break;
    case TG_JOB_STOPPING:
        im->stopped = true;
        return false;
    case TG_JOB_LEASE_LOST:
        im->lease_lost = true;
        return false;
    case TG_JOB_CANCELLED:
        fail(im, "cancelled", "cancelled while it ran");
        return false;
    }
    const tg_jobs_context *ctx = im->ctx;
    int64_t now = now_ms();
    if (ctx->import_timeout > 0 && now - im->started_ms > (int64_t)ctx->import_timeout * 1000) {
        fail(im, "import_timeout",
             "the import took longer than %u seconds (--import-timeout); %llu bytes were fetched",
             ctx->import_timeout, (unsigned long long)im->offset);
        return false;
    }
    unsigned window = ctx->import_rate_window > 0 ? ctx->import_rate_window : 1;
    int64_t elapsed = now - im->window_ms;
    if (ctx->import_min_rate > 0 && elapsed >= (int64_t)window * 1000) {
        uint64_t got = im->offset - im->window_bytes;
        uint64_t rate = got * 1000 / (uint64_t)elapsed;
        if (rate < ctx->import_min_rate) {
            fail(im, "import_too_slow",
                 "the source sent %llu bytes in the last %u seconds (%llu bytes/s); the least "
                 "is %llu bytes/s (--import-min-rate)",
                 (unsigned long long)got, window, (unsigned long long)rate,
                 (unsigned long long)ctx->import_min_rate);
            return false;
        }
        im->window_ms = now;
        im->window_bytes = im->offset;
    }
    return true;
}

/* Progress in the catalog, every PROGRESS_STEP bytes. */
static void checkpoint(importer *im)
{
    if (im->offset < im->next_progress)
        return;
    im->next_progress = im->offset + PROGRESS_STEP;
    (void)tg_catalog_job_progress(im->ctx->catalog, im->job->id, im->offset,
                                  im->total == UNKNOWN ? 0 : im->total);
}

/* libcurl calls it many times a second while data flows, and at least once a second
 * while it connects or waits: a cancel, a stopping server, a lost lease, the
 * deadline and the rate are seen within a second, whatever the source does. */
static int on_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    importer *im = ctx;
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return keep_going(im) ? 0 : 1;
}

static size_t on_body(char *data, size_t size, size_t count, void *ctx)
{
    importer *im = ctx;
    size_t len = size * count;
    if (!im->checked) {
        if (!check_response(im))
            return 0;
        im->checked = true;
    }
    size_t take = len;
    if (im->req_to != UNKNOWN && take > im->req_to - im->offset)
        take = (size_t)(im->req_to - im->offset);
    for (size_t i = 0; i < take && im->offset + i < sizeof im->head; i++)
        im->head[im->offset + i] = (uint8_t)data[i];
    if (take > 0) {
        tg_ingest_feed(&im->ingest, data, take);
        im->offset += take;
    }
    if (im->ingest.state != TG_INGEST_OPEN)
        return 0; /* refused (or too large): nothing more is read */
    if (take < len) {
        fail(im, "import_fetch_failed", "the source sent more than the range asked for");
        return 0;
    }
    checkpoint(im);
    return keep_going(im) ? len : 0;
}

/* ---- the transfer ---- */

static bool resumable(CURLcode rc)
{
    return rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR ||
           rc == CURLE_GOT_NOTHING || rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_OK;
}

/* Fetches [from, to) (to UNKNOWN: to the end) into the ingest, resuming a broken
 * transfer from where it stopped. Returns false when the import cannot go on
 * (failed, stopped); true otherwise (done, or the ingest stopped: the caller looks). */
static bool fetch(importer *im, uint64_t to)
{
    for (unsigned resumes = 0;; resumes++) {
        char range[64];
        if (to == UNKNOWN)
            snprintf(range, sizeof range, "%llu-", (unsigned long long)im->offset);
        else
            snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)im->offset,
                     (unsigned long long)(to - 1));
        im->req_to = to;
        im->checked = false;
        im->forbidden = NULL;
        curl_easy_setopt(im->curl, CURLOPT_RANGE, range);
        CURLcode rc = curl_easy_perform(im->curl);
        if (im->reason[0] != '\0' || im->stopped || im->lease_lost)
            return false;
        if (im->begun && im->ingest.state != TG_INGEST_OPEN)
            return true;
        bool complete = rc == CURLE_OK && (im->req_to == UNKNOWN || im->offset >= im->req_to);
        if (complete)
            return true;
        if (im->forbidden != NULL) {
            fail(im, "import_address_forbidden",
                 "the source's address %s is %s; imports may not reach it (--import-allow)",
                 im->forbidden_addr, im->forbidden);
            return false;
        }
        if (rc == CURLE_UNSUPPORTED_PROTOCOL) {
            fail(im, "import_scheme_forbidden",
                 "the source (or a redirect) uses a scheme other than http or https");
            return false;
        }
        if (rc == CURLE_TOO_MANY_REDIRECTS) {
            fail(im, "import_fetch_failed", "more than %d redirects", TG_IMPORT_MAX_REDIRECTS);
            return false;
        }
        if (rc == CURLE_FILESIZE_EXCEEDED) {
            fail_too_large(im);
            return false;
        }
        if (rc == CURLE_HTTP_RETURNED_ERROR) {
            long status = 0;
            curl_easy_getinfo(im->curl, CURLINFO_RESPONSE_CODE, &status);
            fail(im, "import_fetch_failed", "the source answered HTTP %ld", status);
            return false;
        }
        /* broken: resume from where it stopped, when the source does ranges */
        if (!resumable(rc) || !im->first_done || !im->ranges || resumes >= TG_IMPORT_MAX_RESUMES) {
            fail(im, "import_fetch_failed", "the transfer failed at byte %llu: %s",
                 (unsigned long long)im->offset,
                 rc == CURLE_OK ? "the source ended early" : curl_easy_strerror(rc));
            return false;
        }
        tg_log(TG_LOG_WARN, "job %lld: the transfer broke at byte %llu (%s); resuming",
               (long long)im->job->id, (unsigned long long)im->offset,
               rc == CURLE_OK ? "ended early" : curl_easy_strerror(rc));
    }
}

static bool setup_curl(importer *im)
{
    im->curl = curl_easy_init();
    if (im->curl == NULL) {
        fail(im, "internal_error", "libcurl could not start");
        return false;
    }
    CURL *c = im->curl;
    bool ok =
        curl_easy_setopt(c, CURLOPT_URL, im->job->url) == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https") == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L) == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_MAXREDIRS, (long)TG_IMPORT_MAX_REDIRECTS) == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_PROXY, "") == CURLE_OK && /* never an env proxy */
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L) == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L) == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L) == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 30L) == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)im->ctx->max_body) == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, NULL) == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_USERAGENT, "tensorgate-import") == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket) == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, im) == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header) == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_HEADERDATA, im) == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body) == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_WRITEDATA, im) == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress) == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, im) == CURLE_OK &&
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L) == CURLE_OK;
    if (ok && im->custom != NULL && im->custom->bearer != NULL && im->custom->bearer[0] != '\0') {
        /* curl sends a header set here only to the first host, never after a
         * redirect to another one (CURLOPT_UNRESTRICTED_AUTH is off) */
        size_t len = strlen(im->custom->bearer) + 32;
        char *line = malloc(len);
        if (line != NULL) {
            snprintf(line, len, "Authorization: Bearer %s", im->custom->bearer);
            im->headers = curl_slist_append(NULL, line);
            explicit_bzero(line, len);
            free(line);
        }
        ok =
            im->headers != NULL && curl_easy_setopt(c, CURLOPT_HTTPHEADER, im->headers) == CURLE_OK;
    }
    if (!ok)
        fail(im, "internal_error", "libcurl refused an option (http/https only needs 7.85)");
    return ok;
}

/* N of a safetensors head, little-endian. */
static uint64_t header_length(const uint8_t head[8])
{
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | head[i];
    return n;
}

/* The ranges: 8 bytes, the header (or the sniff window), the rest. */
static void transfer(importer *im)
{
    if (!fetch(im, 8) || im->ingest.state != TG_INGEST_OPEN || !im->ranges)
        return;
    uint64_t total = im->total;
    if (im->offset < 8 && (total == UNKNOWN || im->offset < total)) {
        fail(im, "import_fetch_failed", "the source sent %llu of the first 8 bytes",
             (unsigned long long)im->offset);
        return;
    }
    uint64_t n = header_length(im->head);
    uint64_t head_end = n <= im->ctx->max_header ? 8 + n : SNIFF_WINDOW;
    if (head_end < SNIFF_WINDOW && !tg_is_safetensors_path(im->job->path))
        head_end = SNIFF_WINDOW; /* a sidecar: its kind is decided by content */
    if (total != UNKNOWN && head_end > total)
        head_end = total;
    if (im->offset < head_end && (!fetch(im, head_end) || im->ingest.state != TG_INGEST_OPEN))
        return;
    /* a head the gate did not take as a safetensors header: the sniffers' window next,
     * so content that is not safetensors is refused before the rest is asked for */
    uint64_t sniff_end = total != UNKNOWN && total < SNIFF_WINDOW ? total : SNIFF_WINDOW;
    if (st_gate_file(im->ingest.gate) == NULL && im->offset < sniff_end &&
        (!fetch(im, sniff_end) || im->ingest.state != TG_INGEST_OPEN))
        return;
    if (total == UNKNOWN || im->offset < total)
        (void)fetch(im, total);
}

/* ---- the outcome ---- */

typedef struct commit_ctx {
    importer *im;
    tg_file_record *file;
    tg_cat_status status;
    const char *why;
} commit_ctx;

static void record_import(void *ctx, const tg_file_record *file, const char *stats)
{
    commit_ctx *commit = ctx;
    importer *im = commit->im;
    (void)file; /* it is commit->file, which gets the URL without its credentials */
    (void)tg_url_redact(im->job->url, commit->file->source_url, sizeof commit->file->source_url);
    if (im->custom != NULL) { /* a mirror's file: the mirror records it */
        commit->status = im->custom->commit(im->custom->commit_ctx, commit->file, stats)
                             ? TG_CAT_OK
                             : TG_CAT_ERROR;
        return;
    }
    tg_commit_guard guard = {.model_id = im->job->model_id,
                             .org = im->job->org,
                             .name = im->job->name,
                             .token_hash = NULL};
    if (im->ctx->publish_lock != NULL)
        pthread_mutex_lock(im->ctx->publish_lock);
    /* code admitted when the fetch began is admitted only while the policy still allows it */
    tg_namespace_settings settings = {.allow_code = true};
    commit->status = TG_CAT_OK;
    if (commit->file->code_reason[0] != '\0')
        commit->status = tg_catalog_namespace_get(im->ctx->catalog, im->job->org, &settings);
    if (commit->status == TG_CAT_OK && !settings.allow_code) {
        commit->status = TG_CAT_CONFLICT;
        commit->why = "code_refused";
    } else if (commit->status == TG_CAT_OK) {
        commit->status =
            tg_catalog_import_commit(im->ctx->catalog, im->job->id, &guard,
                                     im->job->source_version_id, commit->file, stats, &commit->why);
    }
    if (im->ctx->publish_lock != NULL)
        pthread_mutex_unlock(im->ctx->publish_lock);
}

/* Records the refusal of this import: what was refused (its size: the bytes fetched
 * when the source was read to its end, else its announced size, else the bytes
 * fetched; its SHA-256 when every byte went through the digest), where it was aimed,
 * the job and the token that asked for it, and why. findings: a refused pickle's
 * findings as JSON text (st_verdict_findings_text), or NULL. */
static void record_rejection(importer *im, const char *reason, const char *format,
                             const char *detail, const char *findings)
{
    tg_rejection *r = calloc(1, sizeof *r);
    if (r == NULL) {
        tg_log(TG_LOG_ERROR, "cannot record the rejection of import job %lld: out of memory",
               (long long)im->job->id);
        return;
    }
    tg_time_now(r->time);
    snprintf(r->model, sizeof r->model, "%s/%s", im->job->org, im->job->name);
    snprintf(r->namespace_name, sizeof r->namespace_name, "%s", im->job->org);
    r->version = im->job->source_number;
    snprintf(r->path, sizeof r->path, "%s", im->job->path);
    snprintf(r->reason, sizeof r->reason, "%s", reason);
    snprintf(r->format, sizeof r->format, "%s", format ? format : "");
    snprintf(r->detail, sizeof r->detail, "%s", detail);
    snprintf(r->findings, sizeof r->findings, "%s", findings ? findings : "");
    r->job_id = im->job->id;
    r->token_id = im->job->token_id;
    tg_ingest *ingest = &im->ingest;
    bool whole = im->begun && ingest->begun && tg_ingest_whole_digest(ingest, r->sha256) == 0;
    if (!whole)
        r->sha256[0] = '\0';
    r->size = whole || im->total == UNKNOWN ? im->offset : im->total;
    if (tg_catalog_rejection_add(im->ctx->catalog, r) != TG_CAT_OK)
        tg_log(TG_LOG_ERROR, "cannot record the rejection of import job %lld",
               (long long)im->job->id);
    free(r);
}

/* Code the namespace's policy admitted: recorded like a refusal, outcome
 * admitted_by_policy (docs/DESIGN.md, "The code policy"). */
static void record_code_admission(importer *im, const tg_file_record *file)
{
    st_verdict verdict;
    st_gate_verdict(im->ingest.gate, &verdict);
    tg_rejection r;
    memset(&r, 0, sizeof r);
    tg_time_now(r.time);
    snprintf(r.model, sizeof r.model, "%s/%s", im->job->org, im->job->name);
    r.version = im->job->source_number;
    snprintf(r.path, sizeof r.path, "%s", im->job->path);
    snprintf(r.reason, sizeof r.reason, "%s", file->code_reason);
    snprintf(r.format, sizeof r.format, "%s", st_format_name(verdict.format));
    snprintf(r.detail, sizeof r.detail, "%s", verdict.code.detail);
    r.size = file->size;
    snprintf(r.sha256, sizeof r.sha256, "%s", file->sha256);
    snprintf(r.namespace_name, sizeof r.namespace_name, "%s", im->job->org);
    r.job_id = im->job->id;
    r.token_id = im->job->token_id;
    snprintf(r.outcome, sizeof r.outcome, "admitted_by_policy");
    if (tg_catalog_rejection_add(im->ctx->catalog, &r) != TG_CAT_OK)
        tg_log(TG_LOG_ERROR, "cannot record the admission of code by import job %lld",
               (long long)im->job->id);
    tg_log(TG_LOG_INFO, "job %lld: admitted code %s %s under the namespace's policy: %s (%s)",
           (long long)im->job->id, r.model, r.path, r.reason, r.detail);
}

static void gate_refusal(importer *im)
{
    st_verdict verdict;
    st_gate_verdict(im->ingest.gate, &verdict);
    fail(im, st_reason_name(verdict.error.reason), "%s (at byte %llu of the source)",
         verdict.error.detail, (unsigned long long)im->offset);
    char findings[TG_REJECTION_FINDINGS_MAX];
    st_verdict_findings_text(&verdict, findings, sizeof findings);
    record_rejection(im, im->reason, st_format_name(verdict.format), verdict.error.detail,
                     findings);
}

/* The ingest's end: a stopped ingest is judged as it stopped (never finished: the
 * rest was not fetched on purpose); a whole one is finished and committed. */
static void conclude(importer *im)
{
    tg_ingest *ingest = &im->ingest;
    if (ingest->state == TG_INGEST_OPEN)
        tg_ingest_finish(ingest);
    switch (ingest->state) {
    case TG_INGEST_OPEN:
        break;
    case TG_INGEST_REFUSED:
        gate_refusal(im);
        return;
    case TG_INGEST_TOO_LARGE:
        fail_too_large(im);
        record_rejection(im, im->quota_bound ? "storage_quota_exceeded" : "payload_too_large", NULL,
                         im->detail, NULL);
        return;
    case TG_INGEST_LENGTH_MISMATCH:
        fail(im, "import_fetch_failed", "the source sent %llu bytes; it announced %llu",
             (unsigned long long)tg_ingest_received(ingest),
             (unsigned long long)ingest->config.declared);
        return;
    case TG_INGEST_NO_SPACE:
        fail(im, "insufficient_storage", "the server's disk is full; nothing was stored");
        return;
    default:
        fail(im, "internal_error", "the import could not be written");
        return;
    }
    tg_file_record *file = calloc(1, sizeof *file);
    if (file == NULL) {
        fail(im, "internal_error", "out of memory");
        return;
    }
    commit_ctx commit = {.im = im, .file = file, .status = TG_CAT_ERROR, .why = NULL};
    if (tg_ingest_commit(ingest, im->job->path, file, record_import, &commit) != 0) {
        fail(im, ingest->state == TG_INGEST_NO_SPACE ? "insufficient_storage" : "internal_error",
             "the file could not be stored");
    } else if (commit.status != TG_CAT_OK && commit.why != NULL &&
               strcmp(commit.why, "lease_lost") == 0) {
        /* another replica holds the job now: its fetch is the one that counts */
        im->lease_lost = true;
        (void)tg_blob_reclaim(im->ctx->store, im->ctx->catalog, file->sha256, false);
    } else if (commit.status != TG_CAT_OK && commit.why != NULL &&
               strcmp(commit.why, "code_refused") == 0) {
        /* the namespace's code policy was turned off during the fetch: refused as code */
        st_verdict verdict;
        st_gate_verdict(ingest->gate, &verdict);
        fail(im, st_reason_name(verdict.code.reason),
             "%.180s; the namespace's code policy was turned off during the import",
             verdict.code.detail);
        record_rejection(im, im->reason, st_format_name(verdict.format), im->detail, NULL);
        (void)tg_blob_reclaim(im->ctx->store, im->ctx->catalog, file->sha256, false);
    } else if (commit.status != TG_CAT_OK) {
        const char *why = commit.why != NULL ? commit.why : "internal_error";
        fail(im, why, "the file was fetched, but %s",
             strcmp(why, "cancelled") == 0           ? "the import was cancelled"
             : strcmp(why, "version_published") == 0 ? "the version was published meanwhile"
             : strcmp(why, "token_revoked") == 0     ? "the token that asked was revoked"
             : strcmp(why, "forbidden") == 0 ? "the token that asked no longer covers the model"
                                             : "the catalog could not record it");
        (void)tg_blob_reclaim(im->ctx->store, im->ctx->catalog, file->sha256, false);
    } else if (file->code_reason[0] != '\0') {
        record_code_admission(im, file);
    }
    free(file);
}

tg_job_outcome tg_import_job_run(const tg_jobs_context *context, const tg_job *job,
                                 const tg_job_worker *worker)
{
    importer *im = calloc(1, sizeof *im);
    if (im == NULL) {
        tg_catalog_job_fail(context->catalog, job->id, "internal_error", "out of memory");
        return TG_JOB_OUTCOME_FAILED;
    }
    im->ctx = context;
    im->job = job;
    im->worker = worker;
    im->total = UNKNOWN;
    im->next_progress = PROGRESS_STEP;
    char shown[TG_URL_MAX + 1]; /* never a credential in the log */
    (void)tg_url_redact(job->url, shown, sizeof shown);
    im->started_ms = im->window_ms = now_ms();
    tg_log(TG_LOG_INFO, "job %lld: importing %s into %s/%s version %lld %s (attempt %lld)",
           (long long)job->id, shown, job->org, job->name, (long long)job->source_number, job->path,
           (long long)job->attempts);
    char detail[TG_JOB_DETAIL_MAX];
    const char *bad = tg_import_url_check(&context->import_policy, job->url, detail, sizeof detail);
    if (bad != NULL)
        fail(im, bad, "%s", detail);
    else if (setup_curl(im))
        transfer(im);
    bool ended = im->stopped || im->lease_lost;
    if (im->reason[0] == '\0' && !ended && im->begun)
        conclude(im);
    else if (im->reason[0] == '\0' && !ended)
        fail(im, "import_fetch_failed", "the source sent nothing");
    if (im->begun)
        tg_ingest_abort(&im->ingest); /* the temp file of anything not committed goes */
    if (im->curl != NULL)
        curl_easy_cleanup(im->curl);
    tg_job_outcome outcome = TG_JOB_OUTCOME_DONE;
    if (im->stopped) {
        outcome = TG_JOB_OUTCOME_STOPPED;
    } else if (im->lease_lost) {
        outcome = TG_JOB_OUTCOME_LEASE_LOST;
        tg_log(TG_LOG_WARN, "job %lld: another replica took the import over; this fetch stops",
               (long long)job->id);
    } else if (im->reason[0] != '\0') {
        outcome = TG_JOB_OUTCOME_FAILED;
        tg_log(TG_LOG_WARN, "job %lld failed: %s: %s", (long long)job->id, im->reason, im->detail);
        bool cancelled = strcmp(im->reason, "cancelled") == 0;
        tg_catalog_job_fail(context->catalog, job->id, im->reason, cancelled ? NULL : im->detail);
    } else {
        tg_log(TG_LOG_INFO, "job %lld: imported %s (%llu bytes)", (long long)job->id, job->path,
               (unsigned long long)im->offset);
    }
    free(im);
    return outcome;
}

int64_t tg_import_now_ms(void)
{
    return now_ms();
}

bool tg_import_fetch_file(const tg_jobs_context *context, const tg_job *job,
                          const tg_job_worker *worker, tg_import_file *file)
{
    importer *im = calloc(1, sizeof *im);
    tg_job *one = malloc(sizeof *one);
    if (im == NULL || one == NULL) {
        free(im);
        free(one);
        snprintf(file->reason, sizeof file->reason, "internal_error");
        snprintf(file->detail, sizeof file->detail, "out of memory");
        return false;
    }
    *one = *job;
    snprintf(one->url, sizeof one->url, "%s", file->url);
    snprintf(one->path, sizeof one->path, "%s", file->path);
    im->ctx = context;
    im->job = one;
    im->worker = worker;
    im->custom = file;
    im->total = UNKNOWN;
    im->next_progress = UINT64_MAX; /* the mirror records its own progress */
    im->started_ms = file->started_ms > 0 ? file->started_ms : now_ms();
    im->window_ms = now_ms();
    char detail[TG_JOB_DETAIL_MAX];
    const char *bad = tg_import_url_check(&context->import_policy, one->url, detail, sizeof detail);
    if (bad != NULL)
        fail(im, bad, "%s", detail);
    else if (setup_curl(im))
        transfer(im);
    bool ended = im->stopped || im->lease_lost;
    if (im->reason[0] == '\0' && !ended && im->begun) {
        tg_ingest *ingest = &im->ingest;
        if (ingest->state == TG_INGEST_OPEN)
            tg_ingest_finish(ingest);
        /* the content's fault: the gate's refusal, or a size over --max-body */
        file->refused = ingest->state == TG_INGEST_REFUSED || ingest->state == TG_INGEST_TOO_LARGE;
        conclude(im);
    } else if (im->reason[0] == '\0' && !ended) {
        fail(im, "import_fetch_failed", "the source sent nothing");
    }
    if (im->begun)
        tg_ingest_abort(&im->ingest);
    if (im->curl != NULL)
        curl_easy_cleanup(im->curl);
    curl_slist_free_all(im->headers);
    file->stopped = im->stopped;
    file->lease_lost = im->lease_lost;
    file->fetched = im->offset;
    snprintf(file->reason, sizeof file->reason, "%s", im->reason);
    snprintf(file->detail, sizeof file->detail, "%s", im->detail);
    bool ok = im->reason[0] == '\0' && !ended;
    free(one);
    free(im);
    return ok;
}
