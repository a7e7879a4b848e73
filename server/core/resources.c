/* Bounded resources: the descriptor limit and its plan, tallies, who pays. See resources.h. */
#include "resources.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

#include "auth.h"
#include "log.h"
#include "sha256.h"

/* ---- descriptors ---- */

#define FD_LIMIT_INFINITE 1048576u
#define FD_RESERVED 64u

static uint64_t limit_value(rlim_t value)
{
    if (value == RLIM_INFINITY || value > FD_LIMIT_INFINITE)
        return FD_LIMIT_INFINITE;
    return value < 64 ? 64 : (uint64_t)value;
}

uint64_t tg_fd_limit(void)
{
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0)
        return 1024;
    return limit_value(limit.rlim_cur);
}

uint64_t tg_fd_limit_raise(void)
{
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
        tg_log(TG_LOG_WARN, "descriptors: getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
        return 1024;
    }
    rlim_t before = limit.rlim_cur;
    if (limit.rlim_cur != limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
            tg_log(TG_LOG_WARN,
                   "descriptors: cannot raise the soft limit %llu to the hard limit %llu: %s",
                   (unsigned long long)before, (unsigned long long)limit.rlim_max, strerror(errno));
            limit.rlim_cur = before;
        } else {
            tg_log(TG_LOG_INFO, "descriptors: soft limit raised from %llu to the hard limit %llu",
                   (unsigned long long)before, (unsigned long long)limit.rlim_cur);
        }
    } else {
        tg_log(TG_LOG_INFO, "descriptors: limit %llu (soft = hard)",
               (unsigned long long)limit.rlim_cur);
    }
    return limit_value(limit.rlim_cur);
}

void tg_fd_plan_for(uint64_t fd_limit, tg_fd_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    if (fd_limit < 64)
        fd_limit = 64;
    plan->fd_limit = fd_limit;
    uint64_t preloads = fd_limit / 4, connections = fd_limit / 8;
    plan->preloads = (unsigned)(preloads > 4096 ? 4096 : preloads < 1 ? 1 : preloads);
    plan->preload_connections = (unsigned)(connections > 1024 ? 1024
                                           : connections < 16 ? 16
                                                              : connections);
    uint64_t used = (uint64_t)plan->preloads + plan->preload_connections + FD_RESERVED;
    uint64_t http = used < fd_limit ? (fd_limit - used) / 2 : 0;
    plan->http_connections = (unsigned)(http > 1000000 ? 1000000 : http < 16 ? 16 : http);
}

bool tg_errno_is_exhaustion(int error)
{
    return error == EMFILE || error == ENFILE || error == ENOMEM || error == ENOBUFS ||
           error == EAGAIN;
}

void tg_respond_exhausted(tg_request *req, const char *what)
{
    tg_respond_quota(req, TG_TALLY_GLOBAL_FULL, 5,
                     "the server is out of descriptors or memory%s%s; retry later",
                     what ? " for " : "", what ? what : "");
}

/* ---- tallies ---- */

typedef struct tally_entry {
    char key[TG_TALLY_KEY_MAX];
    uint64_t amount;
} tally_entry;

struct tg_tally {
    pthread_mutex_t lock;
    tally_entry *entries; /* only keys holding something; unordered */
    size_t count, cap;
    uint64_t total;
};

tg_tally *tg_tally_new(void)
{
    tg_tally *tally = calloc(1, sizeof *tally);
    if (tally != NULL)
        pthread_mutex_init(&tally->lock, NULL);
    return tally;
}

void tg_tally_free(tg_tally *tally)
{
    if (tally == NULL)
        return;
    pthread_mutex_destroy(&tally->lock);
    free(tally->entries);
    free(tally);
}

/* The invariant of a tally (under its lock; O(keys)): total is the sum of the
 * entries' amounts, and an entry holds something. */
static void tally_check(const tg_tally *tally)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < tally->count; i++) {
        assert(tally->entries[i].amount > 0);
        sum += tally->entries[i].amount;
    }
    assert(sum == tally->total && tally->count <= tally->cap);
    (void)sum;
}

static tally_entry *find_entry(tg_tally *tally, const char *key)
{
    for (size_t i = 0; i < tally->count; i++)
        if (strcmp(tally->entries[i].key, key) == 0)
            return &tally->entries[i];
    return NULL;
}

tg_tally_result tg_tally_take(tg_tally *tally, const char *key, uint64_t amount, uint64_t key_max,
                              uint64_t global_max)
{
    pthread_mutex_lock(&tally->lock);
    tally_entry *entry = find_entry(tally, key);
    uint64_t held = entry ? entry->amount : 0;
    tg_tally_result result = TG_TALLY_OK;
    /* the key's own cap first: a tenant over its share is told so even when the whole is full too
     */
    if (key_max != 0 && (amount > key_max || held > key_max - amount))
        result = TG_TALLY_KEY_FULL;
    else if (global_max != 0 && (amount > global_max || tally->total > global_max - amount))
        result = TG_TALLY_GLOBAL_FULL;
    /* nothing taken: no entry either ("only keys holding something") */
    if (result == TG_TALLY_OK && entry == NULL && amount > 0) {
        if (tally->count == tally->cap) {
            size_t cap = tally->cap ? tally->cap * 2 : 16;
            tally_entry *grown = realloc(tally->entries, cap * sizeof *grown);
            if (grown == NULL) {
                result = TG_TALLY_ERROR;
            } else {
                tally->entries = grown;
                tally->cap = cap;
            }
        }
        if (result == TG_TALLY_OK) {
            entry = &tally->entries[tally->count++];
            snprintf(entry->key, sizeof entry->key, "%s", key);
            entry->amount = 0;
        }
    }
    if (result == TG_TALLY_OK && amount > 0) {
        entry->amount += amount;
        tally->total += amount;
    }
    tally_check(tally);
    pthread_mutex_unlock(&tally->lock);
    return result;
}

void tg_tally_give(tg_tally *tally, const char *key, uint64_t amount)
{
    pthread_mutex_lock(&tally->lock);
    tally_entry *entry = find_entry(tally, key);
    if (entry != NULL) {
        uint64_t given = amount < entry->amount ? amount : entry->amount;
        entry->amount -= given;
        tally->total -= given;
        if (entry->amount == 0)
            *entry = tally->entries[--tally->count]; /* unordered: the last takes its place */
    }
    tally_check(tally);
    pthread_mutex_unlock(&tally->lock);
}

uint64_t tg_tally_total(tg_tally *tally)
{
    pthread_mutex_lock(&tally->lock);
    uint64_t total = tally->total;
    pthread_mutex_unlock(&tally->lock);
    return total;
}

uint64_t tg_tally_of(tg_tally *tally, const char *key)
{
    pthread_mutex_lock(&tally->lock);
    tally_entry *entry = find_entry(tally, key);
    uint64_t amount = entry ? entry->amount : 0;
    pthread_mutex_unlock(&tally->lock);
    return amount;
}

static tg_tally *uploads, *header_memory;

int tg_resources_start(void)
{
    uploads = tg_tally_new();
    header_memory = tg_tally_new();
    if (uploads == NULL || header_memory == NULL) {
        tg_resources_stop();
        return -1;
    }
    return 0;
}

void tg_resources_stop(void)
{
    tg_tally_free(uploads);
    tg_tally_free(header_memory);
    uploads = header_memory = NULL;
}

tg_tally *tg_uploads_tally(void)
{
    return uploads;
}

tg_tally *tg_header_memory_tally(void)
{
    return header_memory;
}

/* ---- who pays ---- */

void tg_request_owner(tg_request *req, char *owner, size_t owner_len)
{
    const char *header = tg_header(req, "Authorization");
    if (header != NULL && strncasecmp(header, "Bearer ", 7) == 0) {
        const char *token = header + 7;
        while (*token == ' ')
            token++;
        tg_scope granted = TG_SCOPE_NONE;
        char token_namespace[TG_NAME_MAX + 1] = "";
        if (tg_token_lookup(req->server->catalog, token, &granted, token_namespace,
                            sizeof token_namespace) == TG_CAT_OK) {
            if (token_namespace[0] != '\0') {
                snprintf(owner, owner_len, "ns:%s", token_namespace);
            } else {
                char hash[65];
                if (tg_sha256_hex(token, strlen(token), hash, "token") == 0)
                    snprintf(owner, owner_len, "token:%.16s", hash);
                else /* the hash failed: the client's address is the owner */
                    snprintf(owner, owner_len, "client:%s", req->client);
            }
            return;
        }
    }
    snprintf(owner, owner_len, "client:%s", req->client);
}

void tg_respond_quota(tg_request *req, tg_tally_result result, unsigned retry_after,
                      const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (result != TG_TALLY_KEY_FULL && result != TG_TALLY_GLOBAL_FULL) {
        tg_respond_internal(req, "%s", detail);
        return;
    }
    /* 429 for the requester's own share, 503 for the server's */
    const char *reason = result == TG_TALLY_KEY_FULL ? "quota_exceeded" : "resource_exhausted";
    char seconds[16];
    snprintf(seconds, sizeof seconds, "%u", retry_after);
    const char *const headers[] = {"Retry-After", retry_after ? seconds : NULL, NULL};
    tg_respond_problem_headers(req, reason, headers, "%s", detail);
}

void tg_header_budget_init(tg_header_budget *budget, tg_request *req)
{
    memset(budget, 0, sizeof *budget);
    budget->tally = header_memory;
    snprintf(budget->client, sizeof budget->client, "%s", req->client);
    budget->client_max = req->server->config.header_memory_per_client;
    budget->global_max = req->server->config.header_memory;
}

bool tg_header_budget_reserve(void *context, size_t bytes)
{
    tg_header_budget *budget = context;
    if (budget->tally == NULL)
        return true;
    budget->refused =
        tg_tally_take(budget->tally, budget->client, bytes, budget->client_max, budget->global_max);
    return budget->refused == TG_TALLY_OK;
}

void tg_header_budget_release(void *context, size_t bytes)
{
    tg_header_budget *budget = context;
    if (budget->tally != NULL)
        tg_tally_give(budget->tally, budget->client, bytes);
}

static int open_descriptors(void)
{
    DIR *dir = opendir("/proc/self/fd");
    if (dir == NULL)
        return -1;
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL)
        count += entry->d_name[0] != '.';
    closedir(dir);
    return count - 1; /* the directory's own descriptor */
}

char *tg_resources_metrics_append(char *text)
{
    if (text == NULL)
        return NULL;
    char extra[1400];
    int n = snprintf(
        extra, sizeof extra,
        "# HELP tensorgate_fd_limit The process's descriptor limit (soft, raised to the hard one "
        "at start).\n"
        "# TYPE tensorgate_fd_limit gauge\n"
        "tensorgate_fd_limit %llu\n"
        "# HELP tensorgate_fd_open Descriptors open now.\n"
        "# TYPE tensorgate_fd_open gauge\n"
        "tensorgate_fd_open %d\n"
        "# HELP tensorgate_uploads_in_progress Uploads between their headers and their answer.\n"
        "# TYPE tensorgate_uploads_in_progress gauge\n"
        "tensorgate_uploads_in_progress %llu\n"
        "# HELP tensorgate_header_memory_bytes Bytes of header (and sidecar) buffers held by "
        "uploads and "
        "scans.\n"
        "# TYPE tensorgate_header_memory_bytes gauge\n"
        "tensorgate_header_memory_bytes %llu\n",
        (unsigned long long)tg_fd_limit(), open_descriptors(),
        (unsigned long long)(uploads ? tg_tally_total(uploads) : 0),
        (unsigned long long)(header_memory ? tg_tally_total(header_memory) : 0));
    if (n < 0 || (size_t)n >= sizeof extra)
        return text;
    size_t len = strlen(text);
    char *joined = realloc(text, len + (size_t)n + 1);
    if (joined == NULL)
        return text;
    memcpy(joined + len, extra, (size_t)n + 1);
    return joined;
}
