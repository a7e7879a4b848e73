/* Bounded resources shared by every tenant (issue 9): the process's descriptor
 * limit and how it is shared out, per-key tallies with a global cap (concurrent
 * uploads per namespace, header memory per client), and who a request is charged to.
 *
 * The rule: a scarce resource is budgeted globally AND per namespace (or per client
 * where no token is involved), so one tenant exhausting its share gets 429
 * quota_exceeded itself, everyone exhausting the whole gets 503
 * resource_exhausted, and nobody else ever sees a 500 or a false "blob is missing". */
#ifndef TG_RESOURCES_H
#define TG_RESOURCES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "request.h"

#define TG_TALLY_KEY_MAX 96

/* ---- descriptors ---- */

/* Raises the soft RLIMIT_NOFILE to the hard limit (logged) and returns the soft
 * limit now in force (at least 64; RLIM_INFINITY counts as 1,048,576). */
uint64_t tg_fd_limit_raise(void);
/* The soft limit in force now (same conventions). */
uint64_t tg_fd_limit(void);

/* How the descriptor limit is shared out (fd_limit L):
 *   preloads (one memfd each, host)  L/4, at most 4,096
 *   preload hand-off connections     L/8, 16..1,024
 *   HTTP connections (each may hold a socket and a temp file or blob)
 *                                    (L - L/4 - L/8 - 64) / 2, at least 16
 *   the rest (64): SQLite, listeners, MHD's own, jobs, logs. */
typedef struct tg_fd_plan {
    uint64_t fd_limit;
    unsigned preloads;
    unsigned preload_connections;
    unsigned http_connections;
} tg_fd_plan;
void tg_fd_plan_for(uint64_t fd_limit, tg_fd_plan *plan);

/* True for the errno values of a resource running out (EMFILE, ENFILE, ENOMEM,
 * ENOBUFS, EAGAIN): the answer is 503 resource_exhausted, never "missing". */
bool tg_errno_is_exhaustion(int error);

/* 503 resource_exhausted (Retry-After: 5) for an open or allocation that failed with
 * such an errno: "the server is out of descriptors or memory ...; retry later". */
void tg_respond_exhausted(tg_request *req, const char *what);

/* ---- tallies ---- */

typedef struct tg_tally tg_tally;

typedef enum tg_tally_result {
    TG_TALLY_OK = 0,
    TG_TALLY_KEY_FULL,    /* the key's own cap: 429 quota_exceeded */
    TG_TALLY_GLOBAL_FULL, /* the global cap: 503 resource_exhausted */
    TG_TALLY_ERROR,       /* out of memory */
} tg_tally_result;

tg_tally *tg_tally_new(void);
void tg_tally_free(tg_tally *tally);
/* Adds amount to key and to the total when both stay within their caps (0: no cap). */
tg_tally_result tg_tally_take(tg_tally *tally, const char *key, uint64_t amount, uint64_t key_max,
                              uint64_t global_max);
/* Gives back what take granted. */
void tg_tally_give(tg_tally *tally, const char *key, uint64_t amount);
uint64_t tg_tally_total(tg_tally *tally);
uint64_t tg_tally_of(tg_tally *tally, const char *key);

/* The server's tallies (one server per process), created by tg_resources_start. */
int tg_resources_start(void);
void tg_resources_stop(void);
tg_tally *tg_uploads_tally(void);
tg_tally *tg_header_memory_tally(void);

/* ---- who pays ---- */

/* The key a write request is charged to, once it is authorized: "ns:ORG" for a
 * namespace-limited token, "token:<16 hex of its hash>" for an unlimited one,
 * "client:ADDRESS" without a token. */
void tg_request_owner(tg_request *req, char *owner, size_t owner_len);

/* 429 quota_exceeded (Retry-After: retry_after) or 503 resource_exhausted, with the
 * sentence; for a tally refusal. */
void tg_respond_quota(tg_request *req, tg_tally_result result, unsigned retry_after,
                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A header-memory budget for one ingest: the gate's reserve/release hooks charge
 * the client (req->client) and the server's total. */
typedef struct tg_header_budget {
    tg_tally *tally;
    char client[TG_TALLY_KEY_MAX];
    uint64_t client_max, global_max;
    tg_tally_result refused; /* why the last reserve said no */
} tg_header_budget;
void tg_header_budget_init(tg_header_budget *budget, tg_request *req);
bool tg_header_budget_reserve(void *budget, size_t bytes);
void tg_header_budget_release(void *budget, size_t bytes);

/* Appends the resource gauges to a /metrics text (realloc'd; NULL stays NULL):
 * descriptor limit and open descriptors, uploads in progress, header memory. */
char *tg_resources_metrics_append(char *text);

#endif
