/* Webhook delivery workers (webhook_worker.h). */
#include "webhook_worker.h"

#include "import_job.h"
#include "log.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define WORKERS_MAX 16
#define BODY_MAX (TG_WEBHOOK_DATA_MAX + 1024)
#define ANSWER_KEEP 160  /* bytes of an answer's body kept for the delivery log */
#define ANSWER_MAX 65536 /* bytes of an answer's body read at most, then the transfer stops */
#define RETRY_AFTER_MAX_MS 3600000LL

/* ---- pure pieces ---- */

size_t tg_webhook_body(const tg_webhook_send *send, char *out, size_t len)
{
    json_t *data = json_loads(send->data, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(data)) {
        json_decref(data);
        data = json_object();
    }
    json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:o}", "id", send->event_id, "type", send->type,
                             "timestamp", send->created_at, "namespace", send->org, "data", data);
    if (body == NULL)
        return 0;
    size_t n = json_dumpb(body, out, len, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(body);
    if (n == 0 || n >= len)
        return 0;
    out[n] = '\0';
    return n;
}

int tg_webhook_signature(const char *secret, const char *id, long long timestamp, const char *body,
                         size_t body_len, char *out, size_t len)
{
    char prefix[TG_WEBHOOK_ID_LEN + 48];
    int p = snprintf(prefix, sizeof prefix, "%s.%lld.", id, timestamp);
    if (p < 0 || (size_t)p >= sizeof prefix || len < 3 + 4 * ((32 + 2) / 3) + 1)
        return -1;
    size_t total = (size_t)p + body_len;
    unsigned char *message = malloc(total ? total : 1);
    if (message == NULL)
        return -1;
    memcpy(message, prefix, (size_t)p);
    memcpy(message + p, body, body_len);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    bool ok =
        HMAC(EVP_sha256(), secret, (int)strlen(secret), message, total, mac, &mac_len) != NULL &&
        mac_len == 32;
    free(message);
    if (!ok)
        return -1;
    memcpy(out, "v1,", 3);
    EVP_EncodeBlock((unsigned char *)out + 3, mac, (int)mac_len);
    return 0;
}

int64_t tg_webhook_backoff_ms(unsigned attempt, unsigned base_ms, unsigned cap_ms)
{
    int64_t delay = base_ms;
    for (unsigned i = 1; i < attempt && delay < cap_ms; i++)
        delay *= 2;
    return delay > cap_ms ? cap_ms : delay;
}

int64_t tg_webhook_retry_after_ms(const char *value, time_t now)
{
    if (value == NULL)
        return -1;
    while (*value == ' ' || *value == '\t')
        value++;
    if (*value == '\0')
        return -1;
    int64_t ms = -1;
    if (*value >= '0' && *value <= '9') {
        char *end = NULL;
        errno = 0;
        unsigned long long seconds = strtoull(value, &end, 10);
        while (end && (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n'))
            end++;
        if (errno != 0 || end == NULL || *end != '\0')
            return -1;
        ms = seconds > RETRY_AFTER_MAX_MS / 1000 ? RETRY_AFTER_MAX_MS : (int64_t)seconds * 1000;
    } else {
        time_t when = curl_getdate(value, NULL);
        if (when == (time_t)-1)
            return -1;
        ms = when <= now ? 0 : ((int64_t)(when - now)) * 1000;
    }
    return ms > RETRY_AFTER_MAX_MS ? RETRY_AFTER_MAX_MS : ms;
}

/* ---- one send ---- */

typedef struct attempt {
    const tg_webhook_config *config;
    const char *forbidden; /* the policy's verdict on a refused connect */
    char retry_after[64];
    char answer[ANSWER_KEEP + 1];
    size_t answer_len; /* bytes of the answer's body seen */
} attempt;

static curl_socket_t open_socket(void *ctx, curlsocktype purpose, struct curl_sockaddr *address)
{
    attempt *a = ctx;
    (void)purpose;
    const char *why =
        tg_addr_forbidden(&a->config->policy, &address->addr, (size_t)address->addrlen);
    if (why != NULL) {
        a->forbidden = why;
        return CURL_SOCKET_BAD;
    }
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

static size_t on_header(char *data, size_t size, size_t count, void *ctx)
{
    attempt *a = ctx;
    size_t n = size * count;
    static const char name[] = "retry-after:";
    if (n > sizeof name - 1 && strncasecmp(data, name, sizeof name - 1) == 0) {
        size_t len = n - (sizeof name - 1);
        if (len >= sizeof a->retry_after)
            len = sizeof a->retry_after - 1;
        memcpy(a->retry_after, data + sizeof name - 1, len);
        a->retry_after[len] = '\0';
        char *end = a->retry_after + strlen(a->retry_after);
        while (end > a->retry_after && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
            *--end = '\0';
    }
    return n;
}

/* The answer's body: a little is kept for the log, at most ANSWER_MAX is read. */
static size_t on_body(char *data, size_t size, size_t count, void *ctx)
{
    attempt *a = ctx;
    size_t n = size * count;
    size_t keep = a->answer_len < ANSWER_KEEP ? ANSWER_KEEP - a->answer_len : 0;
    if (keep > n)
        keep = n;
    memcpy(a->answer + a->answer_len, data, keep);
    a->answer_len += n;
    a->answer[a->answer_len < ANSWER_KEEP ? a->answer_len : ANSWER_KEEP] = '\0';
    return a->answer_len > ANSWER_MAX ? 0 : n; /* 0 stops the transfer */
}

/* Sends one claimed delivery; records the outcome. */
static void deliver(const tg_webhook_config *config, const tg_webhook_send *send)
{
    char body[BODY_MAX];
    size_t body_len = tg_webhook_body(send, body, sizeof body);
    long long timestamp = (long long)time(NULL);
    char signature[128];
    char error[TG_WEBHOOK_ERROR_MAX] = "";
    long status = 0;
    attempt a = {.config = config};
    char detail[256];
    const char *bad = tg_import_url_check(&config->policy, send->url, detail, sizeof detail);
    if (body_len == 0 || tg_webhook_signature(send->secret, send->event_id, timestamp, body,
                                              body_len, signature, sizeof signature) != 0) {
        snprintf(error, sizeof error, "the request could not be built");
    } else if (bad != NULL) { /* the import check's reasons, named for webhooks */
        snprintf(error, sizeof error, "%s%s: %s", strncmp(bad, "import_", 7) == 0 ? "webhook_" : "",
                 strncmp(bad, "import_", 7) == 0 ? bad + 7 : bad, detail);
    } else {
        CURL *c = curl_easy_init();
        struct curl_slist *headers = NULL;
        char line[TG_WEBHOOK_SECRET_MAX + 64];
        headers = curl_slist_append(headers, "Content-Type: application/json");
        snprintf(line, sizeof line, "webhook-id: %s", send->event_id);
        headers = curl_slist_append(headers, line);
        snprintf(line, sizeof line, "webhook-timestamp: %lld", timestamp);
        headers = curl_slist_append(headers, line);
        snprintf(line, sizeof line, "webhook-signature: %s", signature);
        headers = curl_slist_append(headers, line);
        snprintf(line, sizeof line, "X-Webhook-Secret: %s", send->secret);
        headers = curl_slist_append(headers, line);
        headers = curl_slist_append(headers, "Expect:");
        long connect_timeout = config->timeout < 10 ? (long)config->timeout : 10L;
        bool set =
            c != NULL && headers != NULL &&
            curl_easy_setopt(c, CURLOPT_URL, send->url) == CURLE_OK &&
            curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK &&
            curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK &&
            curl_easy_setopt(c, CURLOPT_PROXY, "") == CURLE_OK &&
            curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
            curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)config->timeout) == CURLE_OK &&
            curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, connect_timeout) == CURLE_OK &&
            curl_easy_setopt(c, CURLOPT_USERAGENT, "tensorgate-webhook") == CURLE_OK &&
            curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers) == CURLE_OK &&
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, body) == CURLE_OK &&
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len) == CURLE_OK &&
            curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket) == CURLE_OK &&
            curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &a) == CURLE_OK &&
            curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header) == CURLE_OK &&
            curl_easy_setopt(c, CURLOPT_HEADERDATA, &a) == CURLE_OK &&
            curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body) == CURLE_OK &&
            curl_easy_setopt(c, CURLOPT_WRITEDATA, &a) == CURLE_OK;
        CURLcode rc = set ? curl_easy_perform(c) : CURLE_FAILED_INIT;
        if (set)
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        if (a.forbidden != NULL)
            snprintf(error, sizeof error,
                     "webhook_address_forbidden: the target resolved to a %s address "
                     "(--import-allow)",
                     a.forbidden);
        else if (rc == CURLE_WRITE_ERROR && a.answer_len > ANSWER_MAX && status > 0)
            rc = CURLE_OK; /* an answer too long to read: its status still counts */
        if (error[0] == '\0' && rc != CURLE_OK)
            snprintf(error, sizeof error, "%s", curl_easy_strerror(rc));
        else if (error[0] == '\0' && (status < 200 || status > 299))
            snprintf(error, sizeof error, "HTTP %ld%s%.*s", status, a.answer[0] ? ": " : "",
                     ANSWER_KEEP, a.answer);
        curl_slist_free_all(headers);
        curl_easy_cleanup(c);
    }
    /* a byte a log line should not carry (a control, a quote) becomes '?' */
    for (char *p = error; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7F)
            *p = '?';
    tg_webhook_outcome outcome = TG_WEBHOOK_DELIVERED;
    int64_t next = 0;
    if (error[0] != '\0') {
        outcome =
            send->attempts >= (int64_t)config->max_attempts ? TG_WEBHOOK_GAVE_UP : TG_WEBHOOK_RETRY;
        int64_t delay = tg_webhook_backoff_ms((unsigned)send->attempts, config->backoff_ms,
                                              config->backoff_max_ms);
        int64_t asked =
            tg_webhook_retry_after_ms(a.retry_after[0] ? a.retry_after : NULL, time(NULL));
        if (asked > delay)
            delay = asked;
        next = tg_webhook_now_ms() + delay;
    }
    tg_cat_status st = tg_catalog_webhook_record(config->catalog, send->delivery_id, outcome,
                                                 (int)status, error, next, config->max_failures);
    tg_log(error[0] ? TG_LOG_WARN : TG_LOG_INFO,
           "webhook: delivery %" PRId64 " of %s (%s) attempt %" PRId64 ": %s%s", send->delivery_id,
           send->event_id, send->type, send->attempts, error[0] ? error : "delivered",
           st == TG_CAT_OK ? "" : " (not recorded: the lease was lost or the catalog failed)");
}

/* ---- the pool ---- */

static struct {
    tg_webhook_config config;
    pthread_t threads[WORKERS_MAX];
    unsigned started;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping;
    unsigned wakes; /* wake-ups asked and not yet taken */
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static void *worker_main(void *arg)
{
    (void)arg;
    tg_webhook_send *send = malloc(sizeof *send);
    if (send == NULL)
        return NULL;
    unsigned lease = pool.config.timeout * 2 + 10;
    for (;;) {
        pthread_mutex_lock(&pool.lock);
        bool stop = pool.stopping;
        pthread_mutex_unlock(&pool.lock);
        if (stop)
            break;
        tg_cat_status st = tg_catalog_webhook_claim(pool.config.catalog, lease, send);
        if (st == TG_CAT_OK) {
            deliver(&pool.config, send);
            continue;
        }
        /* nothing due (or the catalog failed): wait for a wake-up or the next poll */
        pthread_mutex_lock(&pool.lock);
        if (!pool.stopping && pool.wakes == 0) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            long long ns = until.tv_nsec + (long long)pool.config.poll_ms * 1000000LL;
            until.tv_sec += (time_t)(ns / 1000000000LL);
            until.tv_nsec = (long)(ns % 1000000000LL);
            pthread_cond_timedwait(&pool.wake, &pool.lock, &until);
        }
        if (pool.wakes > 0)
            pool.wakes--;
        pthread_mutex_unlock(&pool.lock);
    }
    free(send);
    return NULL;
}

int tg_webhooks_start(const tg_webhook_config *config, char *err, size_t err_len)
{
    pool.config = *config;
    if (pool.config.workers > WORKERS_MAX)
        pool.config.workers = WORKERS_MAX;
    if (pool.config.max_attempts == 0)
        pool.config.max_attempts = 1;
    if (pool.config.timeout == 0)
        pool.config.timeout = 10;
    if (pool.config.poll_ms == 0)
        pool.config.poll_ms = 500;
    if (pool.config.backoff_max_ms < pool.config.backoff_ms)
        pool.config.backoff_max_ms = pool.config.backoff_ms;
    pool.stopping = false;
    pool.started = 0;
    if (pool.config.workers == 0)
        return 0;
    if (tg_catalog_webhook_recover(config->catalog) != TG_CAT_OK)
        tg_log(TG_LOG_WARN, "webhook: the leases of a previous run could not be cleared");
    tg_log(TG_LOG_INFO,
           "webhook: %u delivery workers, %u attempts, backoff %u..%u ms, %u s timeout, "
           "disabled after %u failed deliveries",
           pool.config.workers, pool.config.max_attempts, pool.config.backoff_ms,
           pool.config.backoff_max_ms, pool.config.timeout, pool.config.max_failures);
    for (unsigned i = 0; i < pool.config.workers; i++) {
        if (pthread_create(&pool.threads[i], NULL, worker_main, NULL) != 0) {
            snprintf(err, err_len, "cannot start a webhook worker thread");
            tg_webhooks_stop();
            return -1;
        }
        pool.started++;
    }
    return 0;
}

void tg_webhooks_stop(void)
{
    pthread_mutex_lock(&pool.lock);
    pool.stopping = true;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    for (unsigned i = 0; i < pool.started; i++)
        pthread_join(pool.threads[i], NULL);
    pool.started = 0;
}

void tg_webhooks_wake(void)
{
    pthread_mutex_lock(&pool.lock);
    if (pool.wakes < pool.started)
        pool.wakes++;
    pthread_cond_signal(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
}
