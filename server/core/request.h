/* The request each handler sees and the one way to answer it: the server object, the
 * route and request types, the request accessors (parameters, headers, query, body
 * size), the responders (JSON, problem+json with its reason table, shared cached
 * responses, files), pagination and JSON bodies. Below the dispatcher (http.c) and
 * the authorization (auth.c), which both answer through it. */
#ifndef TG_REQUEST_H
#define TG_REQUEST_H

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

/* The server's byte counters (/metrics), added atomically: bytes_in by the dispatcher
 * as a body is read (http.c), bytes_out by the responders (request.c). They live in
 * the metrics the dispatcher allocates (tg_server.traffic points there). */
typedef struct tg_traffic {
    uint64_t bytes_in, bytes_out;
} tg_traffic;

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
    tg_traffic *traffic; /* in metrics: the byte counters */
    /* the routing table given to tg_http_start (not owned) */
    const tg_route *routes;
    size_t route_count;
    struct tg_pattern *patterns; /* routes[i].pattern split once (http_parse.h); owned */
    /* The caches, instances of the cache core (cache.h) that the routes and the storage
     * calls they make are handed from here. Made by the caller or, those it left NULL,
     * by tg_http_start from the config (and then freed by tg_http_stop). */
    struct tg_response_cache *responses; /* ready responses (response_cache.h); NULL: none */
    struct tg_parsed_header_cache *parsed_headers; /* parsed_header_cache.h */
    struct tg_index_cache *indexes;                /* weight maps (index_cache.h) */
    struct tg_header_cache *headers;               /* header JSON (header_cache.h) */
    unsigned caches_owned;                         /* those made by tg_http_start, a bit each */
    /* the preload service (preload_service.h), started by serve; NULL: none */
    struct tg_preload_service *preloads;
    /* the download counter (downloads.h): started by tg_http_start, its last counts
     * written by tg_http_stop once no request runs */
    struct tg_downloads *downloads;
    /* the audit log's counters (audit.h; /metrics), added atomically */
    struct {
        uint64_t records, failures;
    } audit;
    /* the server's signing identity (version_sign.h, --signing-key); NULL: versions
     * are published unsigned by the server */
    struct tg_version_signer *signer;
} tg_server;

typedef enum tg_body_kind {
    TG_BODY_NONE,   /* answered at the headers */
    TG_BODY_JSON,   /* read whole, bounded by TG_JSON_BODY_MAX, then handled */
    TG_BODY_STREAM, /* start at the headers, feed per chunk, handle at the end */
} tg_body_kind;

/* What a route needs of the request's bearer token (docs/DESIGN.md §7; each
 * operation of openapi.yaml names it as x-tensorgate-scope). The dispatcher
 * authorizes (tg_auth_route, auth.c) before the route's first callback runs (start
 * of a stream route, else handle): a refusal is 401 (no valid token), 403 (a scope
 * too small, or a token limited to another namespace) or 500 (the token store
 * failed), and the handler never runs. "{org}" is the path's org when the pattern
 * has one; the token's namespace ("" when unlimited or when reads are open) is
 * left in req->token_namespace for the handler. */
typedef enum tg_route_auth {
    /* "public": no token asked for (health, the contract, the web page) */
    TG_AUTH_PUBLIC,
    /* "read": open unless --auth-read; then a token of read scope or more, and a
     * namespace-limited token only on its own {org} (any, on a route without {org}:
     * the handler keeps its list to req->token_namespace) */
    TG_AUTH_READ,
    /* "read-object": as "read" without {org}: the namespace is the object's (a job, a
     * preload, a Hub repository), known after a lookup; the handler checks it
     * (tg_auth_namespace), and says itself what another namespace's object looks like */
    TG_AUTH_READ_OBJECT,
    /* "scan": "read", and also without --auth-read when --scan-auth is set (any valid
     * token: a scan reads nothing stored) */
    TG_AUTH_SCAN,
    /* "write": a token of write scope or more; a namespace-limited one only on {org} */
    TG_AUTH_WRITE,
    /* "write-object": a token of write scope or more; the namespace comes from the
     * body or the object (a model to create, a preload, a job): the handler checks it
     * (tg_auth_namespace) once it knows it */
    TG_AUTH_WRITE_OBJECT,
    /* "admin": a token of admin scope; a namespace-limited one only on {org}, never on
     * a route without {org} */
    TG_AUTH_ADMIN,
    /* "admin-list": a token of admin scope, on a route without {org} that lists what
     * several namespaces own (the rejections): an unlimited token sees every
     * namespace; a namespace-limited one is let through and the handler keeps the
     * list to req->token_namespace (and refuses a filter naming another) */
    TG_AUTH_ADMIN_LIST,
    /* "token": the handler reads the token itself and answers its own 401 (whoami
     * tells who the token is); nothing is checked before it */
    TG_AUTH_TOKEN,
} tg_route_auth;

/* Route flags (tg_route.flags). */
enum {
    /* Hugging Face Hub dialect: a problem answer without X-Error-Code gets the Hub's
     * X-Error-Code (401 RepoNotFound, 403 GatedRepo) and X-Error-Message (the detail),
     * from the authorization on (req->hub_errors) */
    TG_ROUTE_HUB_ERRORS = 1u << 0,
    /* with TG_ROUTE_HUB_ERRORS, the Hub's write routes: a problem goes out as
     * application/json (the only type @huggingface/hub reads an error body of), its
     * sentence also under "error" */
    TG_ROUTE_HUB_JSON = 1u << 1,
};

typedef struct tg_request tg_request;

struct tg_route {
    const char *method;  /* a GET route also answers HEAD */
    const char *pattern; /* "/v1/models/{org}/{name}"; "{path*}" takes one or more segments */
    tg_body_kind body;
    tg_route_auth auth; /* what the token must allow, checked before the handler runs */
    unsigned flags;     /* TG_ROUTE_* */
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
    bool authorized; /* the route's scope was checked and allowed (tg_auth_route) */
    /* the namespace the token is limited to, "" when unlimited or reads are open (set
     * by tg_auth_route; read-object and write-object routes check their object's) */
    char token_namespace[TG_NAME_MAX + 1];
    /* a Hugging Face Hub route: a problem answer without X-Error-Code gets the Hub's
     * X-Error-Code (401 RepoNotFound, 403 GatedRepo) and X-Error-Message (the detail);
     * set from TG_ROUTE_HUB_ERRORS when the dispatcher authorizes */
    bool hub_errors;
    unsigned status;
    uint64_t bytes_in;
    /* the decoded path (libmicrohttpd's, valid until the request ends), set at the
     * first on_request; the reason code of a problem answer ("" otherwise): both for
     * the audit log (audit.h) */
    const char *url;
    char reason[48];
};

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
/* Answers req with the response kept under key in the server's response cache
 * (response_cache.h) and returns true; false (nothing answered) on a miss, or when
 * the request cannot take a shared response (it must close its connection). */
bool tg_respond_cached(tg_request *req, const char *key);
/* Every JSON and problem+json body ends with "\n". tg_text_end_line appends it to a
 * malloc'd text that lacks it: 0, or -1 with the text freed and *text NULL. */
int tg_text_end_line(char **text);
void tg_respond_json(tg_request *req, unsigned status, json_t *body); /* steals body */
/* The same with extra response headers: name/value pairs, NULL-terminated (a pair
 * whose value is NULL is left out), e.g. Location or Link. */
void tg_respond_json_headers(tg_request *req, unsigned status, json_t *body,
                             const char *const *headers);
/* The same with another JSON media type (application/sarif+json, ...). */
void tg_respond_json_typed(tg_request *req, unsigned status, json_t *body, const char *content_type,
                           const char *const *headers);
void tg_respond_empty(tg_request *req, unsigned status);
/* A problem+json answer: reason is a code of the reason table (reasons.c), which
 * gives the status (an unknown reason is logged and answered 500); the detail is
 * one sentence. */
void tg_respond_problem(tg_request *req, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with extra response headers: name/value pairs, NULL-terminated (a pair
 * whose value is NULL is left out). Every problem answer goes through these (and
 * tg_respond_internal, tg_respond_gate_problem). */
void tg_respond_problem_headers(tg_request *req, const char *reason, const char *const *headers,
                                const char *fmt, ...) __attribute__((format(printf, 4, 5)));
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

/* True when every query parameter of the request is one of names (NULL-terminated,
 * at most 32), each at most once; otherwise answers 400 unknown_parameter (or, for a
 * name given twice, invalid_request) naming it and returns false. */
bool tg_query_known(tg_request *req, const char *const *names);

/* Parses the JSON body (JSON_REJECT_DUPLICATES) as an object; answers 400 invalid_json
 * (or 413) and returns NULL on failure. An empty body gives an empty object. */
json_t *tg_json_body(tg_request *req);
/* True when every member of body is one of fields (NULL-terminated); otherwise
 * answers 400 invalid_request naming the unknown field and returns false. */
bool tg_json_known_fields(tg_request *req, json_t *body, const char *const *fields);

#endif
