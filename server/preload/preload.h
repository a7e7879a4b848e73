/* The preload manager (docs/DESIGN.md §6): places chosen tensors of one model version in
 * one allocation on one device ("host" or "cuda:N"), tracks each preload's state,
 * lends it out under leases and evicts least-recently-used unleased preloads to
 * keep every device within its byte budget.
 *
 * It knows nothing of HTTP or the catalog: the caller resolves a request to the
 * on-disk files and the tensors chosen (tg_preload_request) and the manager plans
 * the layout, admits it against the budget and loads it on its own thread with
 * the copy engine (worker threads filling pinned bounce buffers with pread,
 * optional dtype conversion, backend copy() on several streams).
 *
 * States: queued -> loading -> resident; a failure at any point -> failed (no
 * memory held). DELETE or eviction of an unleased preload frees it at once; of a
 * leased (or loading) one it is "evicting" until the last lease ends.
 *
 * Identity: a preload keeps what it was asked for (model and version ids, the
 * asking token's hash) and the manager's recheck callback judges it when the load
 * ends and before each hand-out. A failed re-check, or tg_preload_revoke_model,
 * revokes it: no lease is given any more, its memory goes as soon as nobody holds
 * it, and it stays listed as failed with a reason ("model_deleted", ...) until
 * DELETE. */
#ifndef TG_PRELOAD_H
#define TG_PRELOAD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blobstore.h"
#include "preload_backend.h"
#include "st_dtype.h"

#define TG_PRELOAD_ID_LEN 16 /* hex digits of 64 random bits */

typedef struct tg_preload_manager tg_preload_manager;

/* What a preload was asked for, as its re-check sees it. */
typedef struct tg_preload_identity {
    const char *model; /* "org/name" */
    int64_t model_id;  /* catalog ids (never reused) */
    int64_t version_id;
    const char *token_hash; /* SHA-256 hex of the token that asked; "" when none */
} tg_preload_identity;

typedef enum tg_preload_recheck_result {
    TG_PRELOAD_RECHECK_OK = 0,
    TG_PRELOAD_RECHECK_REVOKED, /* reason gets a code ("model_deleted", ...), detail a sentence */
    TG_PRELOAD_RECHECK_ERROR,   /* could not tell (the catalog failed); detail says so */
} tg_preload_recheck_result;

typedef tg_preload_recheck_result (*tg_preload_recheck_fn)(void *context,
                                                           const tg_preload_identity *identity,
                                                           char *reason, size_t reason_len,
                                                           char *detail, size_t detail_len);

typedef struct tg_preload_manager_config {
    tg_device_backend *host; /* "host"; owned by the manager from create on (may be NULL) */
    tg_device_backend *cuda; /* "cuda:N" (the CUDA or the fake backend); owned; may be NULL */
    uint64_t host_budget;    /* bytes; 0: half of the physical memory */
    uint64_t cuda_budget;    /* bytes per device; 0: the device's total */
    unsigned copy_threads;   /* copy workers per load (at most the backend's streams); 0: 4 */
    size_t chunk_bytes;      /* one bounce buffer; 0: 8 MiB */
    /* Preloads that hold (or will hold) an allocation, i.e. not failed: a host
     * preload holds a descriptor (its memfd), so this is a share of the fd limit.
     * 0: 4,096. Past it a submit is TG_PRELOAD_BUDGET. */
    unsigned max_preloads;
    /* The same per owner (tg_preload_request.owner); 0: no cap. Past it a submit
     * is TG_PRELOAD_QUOTA. */
    unsigned max_per_owner;
    /* Called (without the manager's lock) when a load has copied everything, before
     * the preload becomes resident, and on each lease before the fd is exported.
     * NULL: no re-check. */
    tg_preload_recheck_fn recheck;
    void *recheck_context;
    /* Tests only: while this file exists (at most 20 s), each load waits after its
     * copy, still loading and holding its memory, so a test can act in the middle
     * and then let it go on. NULL: none. */
    const char *test_hold_path;
} tg_preload_manager_config;

typedef enum tg_preload_status {
    TG_PRELOAD_OK = 0,
    TG_PRELOAD_BAD_DEVICE,         /* 400: not "host" or "cuda:N", or no such device */
    TG_PRELOAD_DEVICE_UNAVAILABLE, /* 503: the backend has no devices (no CUDA driver) */
    TG_PRELOAD_BUDGET,             /* 507: does not fit even after evicting unleased preloads */
    TG_PRELOAD_NOT_FOUND,          /* 404: no preload with that id */
    TG_PRELOAD_NOT_RESIDENT, /* 409: a lease asked while queued, loading, failed or evicting */
    TG_PRELOAD_INVALID,      /* 400: the request is malformed (conversion not supported, ...) */
    TG_PRELOAD_QUOTA,        /* 429: the owner holds its share of preloads */
    TG_PRELOAD_ERROR,        /* 500 */
} tg_preload_status;

/* One tensor chosen from a source file, in the file's dtype. */
typedef struct tg_preload_source_tensor {
    const char *name;
    st_dtype dtype;
    size_t rank;
    const uint64_t *shape;
    size_t file;     /* index into tg_preload_request.file_paths */
    uint64_t offset; /* absolute byte offset in that file */
    uint64_t bytes;  /* bytes in the file */
} tg_preload_source_tensor;

typedef struct tg_preload_request {
    const char *model;  /* "org/name", for display and authorization */
    int64_t version;    /* the version number */
    const char *device; /* "host" | "cuda:N" */
    bool convert;       /* convert floating tensors to dtype on the host before the copy */
    st_dtype dtype;
    tg_blobstore *blobs; /* the store of the files' blobs */
    size_t file_count;
    const char *const *file_blobs; /* each file's blob name (sha256 hex), opened by the loader */
    size_t tensor_count;
    const tg_preload_source_tensor *tensors; /* in load order (file order) */
    const char *owner; /* who is charged (resources.h tg_request_owner); NULL: "" */
    /* For the re-check (tg_preload_identity); 0 / NULL when there is nothing to check. */
    int64_t model_id;
    int64_t version_id;
    const char *token_hash;
} tg_preload_request;

/* One tensor of a planned allocation. */
typedef struct tg_preload_slot {
    st_dtype dtype;  /* as placed (after conversion) */
    uint64_t offset; /* in the allocation, a multiple of TG_PRELOAD_ALIGN */
    uint64_t bytes;  /* as placed */
} tg_preload_slot;

/* Plans the layout: slots[i] for tensors[i], in order, each at the next multiple of
 * TG_PRELOAD_ALIGN; *total is the end of the last slot rounded up to the alignment
 * (at least TG_PRELOAD_ALIGN, so an empty-tensor preload still has an allocation).
 * Floating tensors convert when request->convert and st_convert_supported says so;
 * other floating dtypes (F4, F6, F8_E8M0, ...) are refused; integers stay as they
 * are. Returns TG_PRELOAD_OK, or TG_PRELOAD_INVALID / _ERROR with err filled. */
tg_preload_status tg_preload_plan(const tg_preload_request *request, tg_preload_slot *slots,
                                  uint64_t *total, char *err, size_t err_len);

/* Parses "host" (kind "host", index 0) or "cuda:N" (kind "cuda"). False if neither. */
bool tg_preload_parse_device(const char *device, const char **kind, int *index);

/* Whether device names a device that can take a preload now: TG_PRELOAD_OK,
 * TG_PRELOAD_BAD_DEVICE or TG_PRELOAD_DEVICE_UNAVAILABLE (err: the backend's reason). */
tg_preload_status tg_preload_check_device(tg_preload_manager *manager, const char *device,
                                          char *err, size_t err_len);

int tg_preload_manager_create(const tg_preload_manager_config *config, tg_preload_manager **out,
                              char *err, size_t err_len);
/* Stops the loader and releases every allocation (consumers that hold an fd keep
 * their memory: the kernel or the driver frees it when they release it). */
void tg_preload_manager_destroy(tg_preload_manager *manager);

/* Plans, admits (evicting least-recently-used unleased preloads of the device when
 * needed) and queues a preload. id gets its id. */
tg_preload_status tg_preload_submit(tg_preload_manager *manager, const tg_preload_request *request,
                                    char id[TG_PRELOAD_ID_LEN + 1], char *err, size_t err_len);

/* The preload as JSON (id, model, version, device, state, error, bytes planned and
 * copied, GB/s, leases, layout when with_layout); NULL if there is none. */
json_t *tg_preload_describe(tg_preload_manager *manager, const char *id, bool with_layout);
/* {"preloads":[...], "devices":[{"device","kind","available","reason","budget_bytes",
 * "used_bytes",...}]} */
json_t *tg_preload_list(tg_preload_manager *manager);
/* The model ("org/name") of a preload, for authorization; false if there is none. */
bool tg_preload_model(tg_preload_manager *manager, const char *id, char *model, size_t model_len);
/* The reason code a failed or revoked preload gives ("model_deleted", "token_revoked",
 * "load_failed", ...); false (reason "") when it has none or there is no such preload. */
bool tg_preload_reason(tg_preload_manager *manager, const char *id, char *reason,
                       size_t reason_len);

/* Revokes every preload of the model with this catalog id (reason, detail: why, as a
 * failed re-check would): queued ones fail now, loading ones stop and fail, resident
 * ones give their memory back now or, when leased, at their last lease's end. Each
 * stays listed as failed with the reason until DELETE. Returns how many it touched. */
unsigned tg_preload_revoke_model(tg_preload_manager *manager, int64_t model_id, const char *reason,
                                 const char *detail);

/* Evicts now, or (leased, or loading) marks it evicting so the last lease's end or
 * the load's end frees it; *deferred says which. TG_PRELOAD_NOT_FOUND if absent. */
tg_preload_status tg_preload_evict(tg_preload_manager *manager, const char *id, bool *deferred);

/* A lease on a resident preload: a new fd naming the allocation (the caller sends
 * and closes it) and the layout as JSON text (malloc'd, one line). While any lease
 * is held the allocation is not freed. Each successful call needs one unlease.
 * The preload is re-checked first: a revoked one is TG_PRELOAD_NOT_RESIDENT
 * (tg_preload_reason says why), a re-check that could not tell TG_PRELOAD_ERROR. */
tg_preload_status tg_preload_lease(tg_preload_manager *manager, const char *id, int *fd,
                                   char **layout_text, char *err, size_t err_len);
void tg_preload_unlease(tg_preload_manager *manager, const char *id);

/* Waits until the preload is resident or failed (or gone), at most timeout_ms.
 * Returns its state name then ("resident", "failed", "gone"), or NULL on timeout. */
const char *tg_preload_wait(tg_preload_manager *manager, const char *id, unsigned timeout_ms);

/* Device availability for /readyz: {"host":{"available":true,...},"cuda":{...}}. */
json_t *tg_preload_devices_status(tg_preload_manager *manager);
/* Prometheus text lines for /metrics (malloc'd). */
char *tg_preload_metrics(tg_preload_manager *manager);

#endif
