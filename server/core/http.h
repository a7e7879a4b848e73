/* libmicrohttpd glue: the server object, the request each handler sees, the
 * router (a routing table given at start, matched in order: 404/405, parameters),
 * and the one way to build responses (JSON, problem+json, files). The table itself
 * lives above, in server/routes/ (route_table.h): nothing here names a handler. */
#ifndef TG_HTTP_H
#define TG_HTTP_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "blobstore.h"
#include "catalog.h"
#include "config.h"
#include "http_parse.h"
#include "st_gate.h"

#define TG_JSON_BODY_MAX (64 * 1024) /* request bodies of JSON routes */
#define TG_PARAMS_MAX 4

typedef struct tg_metrics tg_metrics;
typedef struct tg_route tg_route;

typedef struct tg_server {
    tg_config config;
    tg_catalog *catalog;
    tg_blobstore *blobs; /* the blob store (blobstore.h) */
    struct MHD_Daemon *daemon;
    uint16_t port; /* the bound port (the real one when 0 was asked) */
    /* Serializes publish against the catalog writes of uploads and deletes, so the
     * files a publish checked are the files it freezes. */
    pthread_mutex_t publish_lock;
    tg_metrics *metrics;
    /* the routing table given to tg_http_start (not owned) */
    const tg_route *routes;
    size_t route_count;
    /* ready responses of immutable reads (response_cache.h); NULL: none kept */
    struct tg_response_cache *responses;
    bool responses_owned; /* made by tg_http_start (freed by tg_http_stop), not the caller */
} tg_server;

typedef enum tg_body_kind {
    TG_BODY_NONE,   /* answered at the headers */
    TG_BODY_JSON,   /* read whole, bounded by TG_JSON_BODY_MAX, then handled */
    TG_BODY_STREAM, /* start at the headers, feed per chunk, handle at the end */
} tg_body_kind;

typedef struct tg_request tg_request;

struct tg_route {
    const char *method;  /* a GET route also answers HEAD */
    const char *pattern; /* "/v1/models/{org}/{name}"; "{path*}" takes one or more segments */
    tg_body_kind body;
    void (*handle)(tg_request *req);
    /* stream routes only: */
    void (*start)(tg_request *req); /* may respond, then no body is read */
    void (*feed)(tg_request *req, const uint8_t *data, size_t len);
    void (*cleanup)(tg_request *req); /* always called when the request ends */
};

struct tg_request {
    tg_server *server;
    struct MHD_Connection *connection;
    const tg_route *route;
    const char *method;
    bool is_head;
    const char *param_names[TG_PARAMS_MAX];
    char *params[TG_PARAMS_MAX];
    char client[64];
    char *body; /* JSON routes: the body, NUL-terminated */
    size_t body_len;
    bool body_too_large;
    bool url_has_nul;      /* the raw URI holds %00 (refused before routing) */
    tg_target_info target; /* the raw request target's length and query arguments */
    bool started;          /* on_request has been called for this request */
    double started_at;     /* CLOCK_MONOTONIC seconds at that first call (latency) */
    bool live;             /* begun (URI seen) and not yet ended: its cleanup is due */
    bool close_after;      /* answer with "Connection: close" (framing refusals) */
    /* requests between their URI and their first on_request (http.c's header phase) */
    tg_request *phase_prev, *phase_next;
    bool in_header_phase;
    bool header_deadline_hit; /* the sweeper closed it: the head took too long */
    double phase_since;       /* monotonic seconds: when this head began (accept or last end) */
    pthread_t owner;
    void *state;         /* stream routes: their own state */
    bool close_now;      /* stream routes: stop reading and close the connection */
    bool in_upload_data; /* inside the feed callback: MHD cannot queue a response now */
    bool responded;
    /* a Hugging Face Hub route: a problem answer without X-Error-Code gets the Hub's
     * X-Error-Code (401 RepoNotFound, 403 GatedRepo) and X-Error-Message (the detail) */
    bool hub_errors;
    unsigned status;
    uint64_t bytes_in;
};

/* Starts the daemon on config->listen_host:listen_port with the routing table
 * routes[0..route_count) (kept, not copied: it must outlive the server; the first
 * pattern that matches with the right method wins, one that matches with another
 * method gives 405); fills server->port. Every pattern must pass tg_pattern_valid. */
int tg_http_start(tg_server *server, const tg_route *routes, size_t route_count, char *err,
                  size_t err_len);
void tg_http_stop(tg_server *server);

/* Request accessors. */
const char *tg_param(const tg_request *req, const char *name); /* a {placeholder}; NULL if absent */
const char *tg_header(const tg_request *req, const char *name);
const char *tg_query(const tg_request *req, const char *name);
/* The declared body size: Content-Length, or ST_FILE_SIZE_UNKNOWN (chunked, absent). */
uint64_t tg_request_body_size(const tg_request *req);

/* Responses: each request gets exactly one. From inside a stream route's feed,
 * where libmicrohttpd 0.9 cannot queue a response, the response is written to the
 * socket directly with "Connection: close" and the connection is then closed:
 * the client gets its answer without sending the rest of the body. */
void tg_respond(tg_request *req, unsigned status, struct MHD_Response *response,
                uint64_t body_bytes);
/* tg_respond for a response shared by many requests (response_cache.h): queues it
 * without adding headers or dropping the caller's reference. False, with nothing
 * answered, when this request cannot take it (already answered, inside a body's
 * feed, or it must close its connection): the caller answers another way. */
bool tg_respond_shared(tg_request *req, unsigned status, struct MHD_Response *response,
                       uint64_t body_bytes);
/* Every JSON and problem+json body ends with "\n". tg_text_end_line appends it to a
 * malloc'd text that lacks it: 0, or -1 with the text freed and *text NULL. */
int tg_text_end_line(char **text);
void tg_respond_json(tg_request *req, unsigned status, json_t *body); /* steals body */
/* The same with extra response headers: name/value pairs, NULL-terminated (a pair
 * whose value is NULL is left out), e.g. Location or Link. */
void tg_respond_json_headers(tg_request *req, unsigned status, json_t *body,
                             const char *const *headers);
void tg_respond_empty(tg_request *req, unsigned status);
void tg_respond_problem(tg_request *req, unsigned status, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same with extra response headers: name/value pairs, NULL-terminated (a pair
 * whose value is NULL is left out). Every problem answer goes through these (and
 * tg_respond_internal, tg_respond_gate_problem). */
void tg_respond_problem_headers(tg_request *req, unsigned status, const char *reason,
                                const char *const *headers, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* 500 internal: the server's own failure (out of memory, an I/O error), the detail
 * saying what failed. The one place a 500 is answered. */
void tg_respond_internal(tg_request *req, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A catalog call failed with status (tg_cat_failed): the one place that answers
 * it. TG_CAT_UNAVAILABLE is 503 catalog_unavailable with Retry-After: 1,
 * TG_CAT_FULL 507 insufficient_storage (nothing was changed), anything else 500
 * internal "the catalog failed". */
void tg_respond_catalog_failure(tg_request *req, tg_cat_status status);
/* The same with the 500's detail saying what failed. */
void tg_respond_catalog_failure_detail(tg_request *req, tg_cat_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A gate refusal: 415 for ST_REFUSED_FORMAT, else 422; reason, offset, tensor, format. */
void tg_respond_gate_problem(tg_request *req, const st_verdict *verdict);
/* The problem+json body alone (for tests and for the scan verdict). */
json_t *tg_problem_json(unsigned status, const char *reason, const char *detail);

/* Pagination: ?limit= (default 50, 1..1000) and ?cursor= decoded into key.
 * On a bad value answers 400 invalid_request and returns false. */
bool tg_list_params(tg_request *req, unsigned *limit, char *key, size_t key_len, bool *has_cursor);
/* The same with the list's own default and largest limit. */
bool tg_list_params_bounded(tg_request *req, unsigned default_limit, unsigned max_limit,
                            unsigned *limit, char *key, size_t key_len, bool *has_cursor);
/* Sets "next_cursor" on body from key, or null when key is NULL. */
void tg_set_next_cursor(json_t *body, const char *key_or_null);

/* Parses the JSON body (JSON_REJECT_DUPLICATES) as an object; answers 400 invalid_json
 * (or 413) and returns NULL on failure. An empty body gives an empty object. */
json_t *tg_json_body(tg_request *req);
/* True when every member of body is one of fields (NULL-terminated); otherwise
 * answers 400 invalid_request naming the unknown field and returns false. */
bool tg_json_known_fields(tg_request *req, json_t *body, const char *const *fields);

/* Metrics (Prometheus text, /metrics). */
void tg_metrics_rejection(tg_server *server, const char *reason);
char *tg_metrics_render(tg_server *server); /* malloc'd */

#endif
