/* The preload manager: planning, admission against per-device budgets with LRU
 * eviction, the loader thread and its copy engine, leases. See preload.h.
 *
 * Locking: one mutex guards the list and every field a reader may look at (state,
 * leases, allocation, counters except `copied`, which is atomic). A preload is
 * freed only once it is off the list and nobody can reach it: an unleased,
 * non-loading preload has no holder outside the lock; a loading one is owned by
 * the loader until it hands it back; a leased one stays listed until its last
 * unlease. */
#include "preload.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "st_buffer.h"
#include "st_convert.h"

#define DEFAULT_CHUNK_BYTES (8u << 20)
#define DEFAULT_COPY_THREADS 4u
#define DEVICES_MAX 17 /* host + 16 CUDA devices */
#define PRELOADS_MAX 4096

typedef enum preload_state {
    STATE_QUEUED,
    STATE_LOADING,
    STATE_RESIDENT,
    STATE_FAILED,
    STATE_EVICTING,
} preload_state;

static const char *const state_names[] = {"queued", "loading", "resident", "failed", "evicting"};

typedef struct device_record {
    char name[24]; /* "host", "cuda:0" (an int fits) */
    const char *kind;
    int index;
    tg_device_backend *backend;
    uint64_t budget;
    tg_device_info info;
    double last_gbps;
} device_record;

typedef struct layout_entry {
    char *name;
    st_dtype source_dtype;
    size_t rank;
    uint64_t *shape;
    size_t file;
    uint64_t source_offset, source_bytes;
    tg_preload_slot slot;
} layout_entry;

typedef struct preload {
    struct preload *next;
    char id[TG_PRELOAD_ID_LEN + 1];
    char *model;
    int64_t version;
    device_record *device;
    bool convert;
    st_dtype dtype;
    preload_state state;
    char error[300];
    size_t file_count;
    tg_blobstore *blobs;
    char **file_blobs; /* each file's blob name */
    size_t tensor_count;
    layout_entry *tensors;
    uint64_t total;
    uint64_t copied; /* atomic: the loader adds, readers load */
    double seconds, gbps;
    tg_device_allocation allocation;
    bool allocated;
    unsigned leases;
    bool evict_when_loaded; /* DELETE arrived while queued or loading */
    uint64_t last_used;     /* manager clock tick; smaller is older */
    char created_at[32];
    char owner[96]; /* who is charged for it (tg_preload_request.owner) */
    /* What it was asked for (tg_preload_identity); fixed from submit on. */
    int64_t model_id, version_id;
    char token_hash[65];
    char reason[40];       /* the failure's code; set once, with error */
    bool cancelled;        /* atomic: revoked while loading, the copy stops */
    bool delete_requested; /* DELETE arrived while it was leased or loading */
} preload;

struct tg_preload_manager {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    tg_device_backend *host, *cuda;
    char cuda_why[300];
    device_record devices[DEVICES_MAX];
    int device_count;
    unsigned copy_threads;
    size_t chunk_bytes;
    unsigned max_preloads, max_per_owner;
    preload *head, *tail; /* submission order */
    size_t preload_count;
    uint64_t clock;
    bool stopping;
    pthread_t loader;
    bool loader_started;
    uint64_t evictions, loads_done, loads_failed, bytes_loaded;
    tg_preload_recheck_fn recheck;
    void *recheck_context;
    char *test_hold_path; /* tg_preload_manager_config.test_hold_path; NULL: none */
};

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void set_error(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_error(char *err, size_t err_len, const char *fmt, ...)
{
    if (err == NULL || err_len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

/* ---- planning ---- */

static uint64_t align_up(uint64_t value)
{
    return (value + TG_PRELOAD_ALIGN - 1) / TG_PRELOAD_ALIGN * TG_PRELOAD_ALIGN;
}

/* Whole-byte dtypes that st_convert handles; the only floating dtypes a preload converts. */
static bool is_convertible(st_dtype dtype)
{
    return st_convert_supported(dtype, ST_F32);
}

tg_preload_status tg_preload_plan(const tg_preload_request *request, tg_preload_slot *slots,
                                  uint64_t *total, char *err, size_t err_len)
{
    if (request->convert && !is_convertible(request->dtype)) {
        set_error(err, err_len,
                  "dtype %s is not a conversion target (F64, F32, F16, BF16, F8_E4M3, F8_E5M2)",
                  st_dtype_name(request->dtype));
        return TG_PRELOAD_INVALID;
    }
    uint64_t end = 0;
    for (size_t i = 0; i < request->tensor_count; i++) {
        const tg_preload_source_tensor *t = &request->tensors[i];
        if (t->file >= request->file_count) {
            set_error(err, err_len, "tensor %s names file %zu of %zu", t->name, t->file,
                      request->file_count);
            return TG_PRELOAD_ERROR;
        }
        st_dtype placed = t->dtype;
        uint64_t bytes = t->bytes;
        if (request->convert && st_dtype_is_float(t->dtype) && t->dtype != request->dtype) {
            if (!is_convertible(t->dtype)) {
                set_error(err, err_len, "tensor %s is %s, which cannot be converted to %s", t->name,
                          st_dtype_name(t->dtype), st_dtype_name(request->dtype));
                return TG_PRELOAD_INVALID;
            }
            uint64_t elements = 0;
            if (!st_shape_elements(t->shape, t->rank, &elements) ||
                st_dtype_bytes(request->dtype, elements, &bytes) != ST_OK) {
                set_error(err, err_len, "tensor %s is too large", t->name);
                return TG_PRELOAD_INVALID;
            }
            placed = request->dtype;
        }
        /* Each slot starts at the next multiple of the alignment after the previous end. */
        uint64_t offset = align_up(end);
        if (offset < end || __builtin_add_overflow(offset, bytes, &end)) {
            set_error(err, err_len, "the preload is too large");
            return TG_PRELOAD_INVALID;
        }
        slots[i].dtype = placed;
        slots[i].offset = offset;
        slots[i].bytes = bytes;
    }
    uint64_t rounded = align_up(end);
    if (rounded < end) {
        set_error(err, err_len, "the preload is too large");
        return TG_PRELOAD_INVALID;
    }
    *total = rounded ? rounded : TG_PRELOAD_ALIGN;
    return TG_PRELOAD_OK;
}

bool tg_preload_parse_device(const char *device, const char **kind, int *index)
{
    if (strcmp(device, "host") == 0) {
        *kind = "host";
        *index = 0;
        return true;
    }
    if (strncmp(device, "cuda:", 5) != 0)
        return false;
    const char *digits = device + 5;
    size_t len = strlen(digits);
    if (len == 0 || len > 3 || (len > 1 && digits[0] == '0'))
        return false;
    int value = 0;
    for (const char *p = digits; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        value = value * 10 + (*p - '0');
    }
    *kind = "cuda";
    *index = value;
    return true;
}

/* ---- the manager ---- */

static void preload_free(preload *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->tensor_count; i++) {
        free(p->tensors[i].name);
        free(p->tensors[i].shape);
    }
    free(p->tensors);
    for (size_t i = 0; i < p->file_count; i++)
        free(p->file_blobs[i]);
    free(p->file_blobs);
    free(p->model);
    free(p);
}

/* Gives the allocation back to its backend, then frees the record. Called with
 * the preload off the list and unreachable. */
static void preload_release(preload *p)
{
    if (p->allocated) {
        p->device->backend->release(p->device->backend->context, &p->allocation);
        p->allocated = false;
    }
    preload_free(p);
}

/* Revokes p (a failed re-check, its model deleted): the first reason stands. It
 * gives no lease any more; what holds it decides when its memory goes: nothing (now),
 * the loader (at the load's end), leases (at the last one's end). It then stays
 * listed, failed, saying why. Caller holds the lock; p is on the list. */
static void revoke_locked(preload *p, const char *reason, const char *detail)
{
    if (p->reason[0] != '\0' || p->state == STATE_FAILED)
        return; /* already failed or revoked: holds no memory or will not */
    snprintf(p->reason, sizeof p->reason, "%s", reason);
    snprintf(p->error, sizeof p->error, "%s", detail);
    tg_log(TG_LOG_INFO, "preload %s (%s v%lld) revoked: %s", p->id, p->model, (long long)p->version,
           detail);
    if (p->state == STATE_QUEUED) {
        p->state = STATE_FAILED;
    } else if (p->state == STATE_LOADING || p->evict_when_loaded) {
        __atomic_store_n(&p->cancelled, true, __ATOMIC_RELEASE); /* the loader finishes it */
    } else if (p->leases > 0) {
        p->state = STATE_EVICTING; /* tg_preload_unlease finishes it */
    } else {
        /* Released under the lock, as in tg_preload_evict. */
        if (p->allocated) {
            p->device->backend->release(p->device->backend->context, &p->allocation);
            p->allocated = false;
        }
        p->state = STATE_FAILED;
    }
}

static tg_preload_identity identity_of(const preload *p)
{
    return (tg_preload_identity){p->model, p->model_id, p->version_id, p->token_hash};
}

static void list_remove(tg_preload_manager *m, preload *target)
{
    preload *prev = NULL;
    for (preload *p = m->head; p; prev = p, p = p->next) {
        if (p != target)
            continue;
        if (prev)
            prev->next = p->next;
        else
            m->head = p->next;
        if (m->tail == p)
            m->tail = prev;
        p->next = NULL;
        m->preload_count--;
        return;
    }
}

static preload *find(tg_preload_manager *m, const char *id)
{
    for (preload *p = m->head; p; p = p->next)
        if (strcmp(p->id, id) == 0)
            return p;
    return NULL;
}

/* Bytes a device has promised: every preload on it that holds or will hold memory. */
static uint64_t device_used(tg_preload_manager *m, const device_record *d)
{
    uint64_t used = 0;
    for (preload *p = m->head; p; p = p->next)
        if (p->device == d && p->state != STATE_FAILED)
            used += p->total;
    return used;
}

static device_record *find_device(tg_preload_manager *m, const char *kind, int index)
{
    for (int i = 0; i < m->device_count; i++)
        if (strcmp(m->devices[i].kind, kind) == 0 && m->devices[i].index == index)
            return &m->devices[i];
    return NULL;
}

static uint64_t physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return 0;
    return (uint64_t)pages * (uint64_t)page;
}

static void *loader_main(void *arg);

int tg_preload_manager_create(const tg_preload_manager_config *config, tg_preload_manager **out,
                              char *err, size_t err_len)
{
    tg_preload_manager *m = calloc(1, sizeof *m);
    if (m == NULL) {
        set_error(err, err_len, "out of memory");
        return -1;
    }
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->changed, NULL);
    m->host = config->host;
    m->cuda = config->cuda;
    m->copy_threads = config->copy_threads ? config->copy_threads : DEFAULT_COPY_THREADS;
    m->chunk_bytes = config->chunk_bytes ? config->chunk_bytes : DEFAULT_CHUNK_BYTES;
    m->max_preloads = config->max_preloads && config->max_preloads < PRELOADS_MAX
                          ? config->max_preloads
                          : PRELOADS_MAX;
    m->max_per_owner = config->max_per_owner;
    m->recheck = config->recheck;
    m->recheck_context = config->recheck_context;
    if (config->test_hold_path != NULL &&
        (m->test_hold_path = strdup(config->test_hold_path)) == NULL) {
        set_error(err, err_len, "out of memory");
        tg_preload_manager_destroy(m);
        return -1;
    }
    if (m->host && m->host->device_count(m->host->context) > 0) {
        device_record *d = &m->devices[m->device_count++];
        snprintf(d->name, sizeof d->name, "host");
        d->kind = "host";
        d->backend = m->host;
        if (m->host->device_info(m->host->context, 0, &d->info) != 0)
            snprintf(d->info.name, sizeof d->info.name, "host");
        uint64_t half = physical_memory() / 2;
        d->budget = config->host_budget ? config->host_budget : (half ? half : d->info.total_bytes);
    }
    if (m->cuda == NULL) {
        snprintf(m->cuda_why, sizeof m->cuda_why, "no CUDA backend is configured");
    } else {
        int count = m->cuda->device_count(m->cuda->context);
        if (count <= 0) {
            const char *why =
                m->cuda->why_unavailable ? m->cuda->why_unavailable(m->cuda->context) : NULL;
            snprintf(m->cuda_why, sizeof m->cuda_why, "%s", why && why[0] ? why : "no CUDA device");
        }
        for (int i = 0; i < count && m->device_count < DEVICES_MAX; i++) {
            device_record *d = &m->devices[m->device_count++];
            snprintf(d->name, sizeof d->name, "cuda:%d", i);
            d->kind = "cuda";
            d->index = i;
            d->backend = m->cuda;
            if (m->cuda->device_info(m->cuda->context, i, &d->info) != 0)
                snprintf(d->info.name, sizeof d->info.name, "cuda device %d", i);
            d->budget = config->cuda_budget ? config->cuda_budget : d->info.total_bytes;
        }
    }
    if (pthread_create(&m->loader, NULL, loader_main, m) != 0) {
        set_error(err, err_len, "cannot start the preload loader thread");
        tg_preload_manager_destroy(m);
        return -1;
    }
    m->loader_started = true;
    *out = m;
    return 0;
}

void tg_preload_manager_destroy(tg_preload_manager *m)
{
    if (m == NULL)
        return;
    pthread_mutex_lock(&m->lock);
    m->stopping = true;
    pthread_cond_broadcast(&m->changed);
    pthread_mutex_unlock(&m->lock);
    if (m->loader_started)
        pthread_join(m->loader, NULL);
    preload *p = m->head;
    while (p) {
        preload *next = p->next;
        preload_release(p);
        p = next;
    }
    if (m->host)
        m->host->destroy(m->host->context);
    if (m->cuda)
        m->cuda->destroy(m->cuda->context);
    pthread_cond_destroy(&m->changed);
    pthread_mutex_destroy(&m->lock);
    free(m->test_hold_path);
    free(m);
}

static char *dup_text(const char *text)
{
    return strdup(text ? text : "");
}

/* Builds the record (off the list) from a request and its plan. */
static preload *preload_new(const tg_preload_request *request, const tg_preload_slot *slots,
                            uint64_t total, device_record *device)
{
    preload *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->model = dup_text(request->model);
    p->version = request->version;
    p->device = device;
    p->convert = request->convert;
    p->dtype = request->dtype;
    p->total = total;
    snprintf(p->owner, sizeof p->owner, "%s", request->owner ? request->owner : "");
    p->model_id = request->model_id;
    p->version_id = request->version_id;
    snprintf(p->token_hash, sizeof p->token_hash, "%s",
             request->token_hash ? request->token_hash : "");
    p->blobs = request->blobs;
    p->file_blobs = calloc(request->file_count ? request->file_count : 1, sizeof *p->file_blobs);
    p->tensors = calloc(request->tensor_count ? request->tensor_count : 1, sizeof *p->tensors);
    if (p->model == NULL || p->file_blobs == NULL || p->tensors == NULL)
        goto fail;
    for (size_t i = 0; i < request->file_count; i++) {
        p->file_blobs[i] = dup_text(request->file_blobs[i]);
        if (p->file_blobs[i] == NULL)
            goto fail;
        p->file_count = i + 1;
    }
    for (size_t i = 0; i < request->tensor_count; i++) {
        const tg_preload_source_tensor *t = &request->tensors[i];
        layout_entry *e = &p->tensors[i];
        p->tensor_count = i + 1;
        e->name = dup_text(t->name);
        e->shape = calloc(t->rank ? t->rank : 1, sizeof *e->shape);
        if (e->name == NULL || e->shape == NULL)
            goto fail;
        if (t->rank)
            memcpy(e->shape, t->shape, t->rank * sizeof *e->shape);
        e->rank = t->rank;
        e->source_dtype = t->dtype;
        e->file = t->file;
        e->source_offset = t->offset;
        e->source_bytes = t->bytes;
        e->slot = slots[i];
    }
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(p->created_at, sizeof p->created_at, "%s", stamp);
    return p;
fail:
    preload_free(p);
    return NULL;
}

static int new_id(tg_preload_manager *m, char id[TG_PRELOAD_ID_LEN + 1])
{
    for (int attempt = 0; attempt < 8; attempt++) {
        uint8_t random_bytes[TG_PRELOAD_ID_LEN / 2];
        if (getrandom(random_bytes, sizeof random_bytes, 0) != (ssize_t)sizeof random_bytes)
            return -1;
        for (size_t i = 0; i < sizeof random_bytes; i++)
            snprintf(id + 2 * i, 3, "%02x", random_bytes[i]);
        if (find(m, id) == NULL)
            return 0;
    }
    return -1;
}

/* The device record a device string names, or the reason there is none. */
static tg_preload_status resolve_device(tg_preload_manager *m, const char *name,
                                        device_record **out, char *err, size_t err_len)
{
    const char *kind;
    int index;
    if (name == NULL || !tg_preload_parse_device(name, &kind, &index)) {
        set_error(err, err_len, "device must be \"host\" or \"cuda:N\"");
        return TG_PRELOAD_BAD_DEVICE;
    }
    bool is_cuda = strcmp(kind, "cuda") == 0;
    if (is_cuda && find_device(m, "cuda", 0) == NULL) {
        set_error(err, err_len, "%s", m->cuda_why);
        return TG_PRELOAD_DEVICE_UNAVAILABLE;
    }
    if (!is_cuda && find_device(m, "host", 0) == NULL) {
        set_error(err, err_len, "host preloads are not available");
        return TG_PRELOAD_DEVICE_UNAVAILABLE;
    }
    *out = find_device(m, kind, index);
    if (*out == NULL) {
        int count = 0;
        for (int i = 0; i < m->device_count; i++)
            count += strcmp(m->devices[i].kind, "cuda") == 0;
        set_error(err, err_len, "no device %s: this server has %d CUDA device(s)", name, count);
        return TG_PRELOAD_BAD_DEVICE;
    }
    return TG_PRELOAD_OK;
}

tg_preload_status tg_preload_check_device(tg_preload_manager *m, const char *device, char *err,
                                          size_t err_len)
{
    device_record *record;
    return resolve_device(m, device, &record, err, err_len);
}

tg_preload_status tg_preload_submit(tg_preload_manager *m, const tg_preload_request *request,
                                    char id[TG_PRELOAD_ID_LEN + 1], char *err, size_t err_len)
{
    device_record *device = NULL;
    tg_preload_status device_status = resolve_device(m, request->device, &device, err, err_len);
    if (device_status != TG_PRELOAD_OK)
        return device_status;
    tg_preload_slot *slots =
        calloc(request->tensor_count ? request->tensor_count : 1, sizeof *slots);
    if (slots == NULL) {
        set_error(err, err_len, "out of memory");
        return TG_PRELOAD_ERROR;
    }
    uint64_t total = 0;
    tg_preload_status status = tg_preload_plan(request, slots, &total, err, err_len);
    preload *p = status == TG_PRELOAD_OK ? preload_new(request, slots, total, device) : NULL;
    free(slots);
    if (status != TG_PRELOAD_OK)
        return status;
    if (p == NULL) {
        set_error(err, err_len, "out of memory");
        return TG_PRELOAD_ERROR;
    }

    preload *evicted = NULL;
    pthread_mutex_lock(&m->lock);
    /* Counts before bytes: each preload that is not failed holds (or will hold) a
     * descriptor, a share of a limit every other request needs too. The owner's
     * own share first, so a tenant over it is told so (429), not the others. */
    unsigned holding = 0, owned = 0;
    for (preload *q = m->head; q; q = q->next) {
        if (q->state == STATE_FAILED)
            continue;
        holding++;
        owned += strcmp(q->owner, p->owner) == 0;
    }
    if (m->max_per_owner != 0 && owned >= m->max_per_owner) {
        pthread_mutex_unlock(&m->lock);
        set_error(err, err_len,
                  "%u preloads are held for this token or namespace, its quota; delete some",
                  owned);
        preload_free(p);
        return TG_PRELOAD_QUOTA;
    }
    if (holding >= m->max_preloads) {
        pthread_mutex_unlock(&m->lock);
        set_error(err, err_len, "the server holds %u preloads, its limit; delete some", holding);
        preload_free(p);
        return TG_PRELOAD_BUDGET;
    }
    uint64_t used = device_used(m, device);
    /* What eviction could free: resident preloads nobody leases. */
    uint64_t freeable = 0;
    for (preload *q = m->head; q; q = q->next)
        if (q->device == device && q->state == STATE_RESIDENT && q->leases == 0)
            freeable += q->total;
    if (total > device->budget || used - freeable + total > device->budget) {
        pthread_mutex_unlock(&m->lock);
        set_error(
            err, err_len,
            "%s needs %llu bytes; its budget is %llu bytes, of which %llu are held by leased, "
            "loading or queued preloads",
            device->name, (unsigned long long)total, (unsigned long long)device->budget,
            (unsigned long long)(used - freeable));
        preload_free(p);
        return TG_PRELOAD_BUDGET;
    }
    if (m->preload_count >= PRELOADS_MAX) {
        /* Failed preloads hold no memory; the oldest goes first. */
        for (preload *q = m->head; q; q = q->next) {
            if (q->state == STATE_FAILED) {
                list_remove(m, q);
                q->next = evicted;
                evicted = q;
                break;
            }
        }
        if (m->preload_count >= PRELOADS_MAX) {
            pthread_mutex_unlock(&m->lock);
            preload_free(p);
            set_error(err, err_len, "too many preloads (%d); delete some", PRELOADS_MAX);
            return TG_PRELOAD_BUDGET;
        }
    }
    /* Evict least recently used unleased resident preloads until it fits. */
    while (used + total > device->budget) {
        preload *oldest = NULL;
        for (preload *q = m->head; q; q = q->next)
            if (q->device == device && q->state == STATE_RESIDENT && q->leases == 0 &&
                (oldest == NULL || q->last_used < oldest->last_used))
                oldest = q;
        if (oldest == NULL)
            break; /* cannot happen: freeable covered the gap */
        list_remove(m, oldest);
        used -= oldest->total;
        m->evictions++;
        tg_log(TG_LOG_INFO, "preload %s (%s v%lld on %s, %llu bytes) evicted to make room",
               oldest->id, oldest->model, (long long)oldest->version, device->name,
               (unsigned long long)oldest->total);
        /* Released before the new preload is queued, under the lock: the loader must
         * not allocate the new one while the device still holds the old. */
        preload_release(oldest);
    }
    if (new_id(m, p->id) != 0) {
        pthread_mutex_unlock(&m->lock);
        preload_free(p);
        set_error(err, err_len, "the random number generator failed");
        status = TG_PRELOAD_ERROR;
    } else {
        p->state = STATE_QUEUED;
        p->last_used = ++m->clock;
        if (m->tail)
            m->tail->next = p;
        else
            m->head = p;
        m->tail = p;
        m->preload_count++;
        snprintf(id, TG_PRELOAD_ID_LEN + 1, "%s", p->id);
        pthread_cond_broadcast(&m->changed);
        pthread_mutex_unlock(&m->lock);
    }
    /* Failed preloads hold no memory: freed outside the lock. */
    while (evicted) {
        preload *next = evicted->next;
        preload_release(evicted);
        evicted = next;
    }
    return status;
}

/* ---- the copy engine ---- */

/* One pread of a contiguous file range into a bounce buffer, and the copies out of
 * it: segments [first_segment, first_segment + segment_count). A converting chunk
 * has one segment and reads into the worker's staging buffer first. */
typedef struct copy_chunk {
    size_t file;
    uint64_t source_offset, source_len;
    size_t first_segment, segment_count;
    bool convert;
    st_dtype from, to;
    uint64_t elements;
} copy_chunk;

typedef struct copy_segment {
    uint64_t buffer_offset; /* in the bounce buffer */
    uint64_t target_offset; /* in the allocation */
    uint64_t len;
} copy_segment;

typedef struct copy_plan {
    copy_chunk *chunks;
    size_t chunk_count, chunk_cap;
    copy_segment *segments;
    size_t segment_count, segment_cap;
} copy_plan;

static int grow(void **items, size_t *cap, size_t count, size_t item_size)
{
    if (count < *cap)
        return 0;
    size_t new_cap = *cap ? *cap * 2 : 64;
    void *grown = realloc(*items, new_cap * item_size);
    if (grown == NULL)
        return -1;
    *items = grown;
    *cap = new_cap;
    return 0;
}

static copy_chunk *plan_chunk(copy_plan *plan)
{
    if (grow((void **)&plan->chunks, &plan->chunk_cap, plan->chunk_count, sizeof *plan->chunks) !=
        0)
        return NULL;
    copy_chunk *c = &plan->chunks[plan->chunk_count++];
    memset(c, 0, sizeof *c);
    c->first_segment = plan->segment_count;
    return c;
}

static int plan_segment(copy_plan *plan, copy_chunk *chunk, uint64_t buffer_offset,
                        uint64_t target_offset, uint64_t len)
{
    if (grow((void **)&plan->segments, &plan->segment_cap, plan->segment_count,
             sizeof *plan->segments) != 0)
        return -1;
    plan->segments[plan->segment_count++] = (copy_segment){buffer_offset, target_offset, len};
    chunk->segment_count++;
    return 0;
}

/* Cuts the preload's tensors into chunks of at most chunk_bytes: tensors that follow
 * each other in a file share one pread; a large tensor spans several chunks; a
 * converting tensor gets chunks of whole elements. Chunks keep file order. */
static int build_copy_plan(const preload *p, size_t chunk_bytes, copy_plan *plan)
{
    copy_chunk *open_chunk = NULL; /* a plain chunk that the next adjacent tensor may join */
    for (size_t i = 0; i < p->tensor_count; i++) {
        const layout_entry *e = &p->tensors[i];
        if (e->source_bytes == 0)
            continue;
        if (e->slot.dtype != e->source_dtype) {
            open_chunk = NULL;
            uint64_t in_size = st_dtype_bits(e->source_dtype) / 8,
                     out_size = st_dtype_bits(e->slot.dtype) / 8;
            uint64_t per_chunk = chunk_bytes / (in_size > out_size ? in_size : out_size);
            uint64_t elements = e->source_bytes / in_size;
            for (uint64_t done = 0; done < elements; done += per_chunk) {
                uint64_t n = elements - done < per_chunk ? elements - done : per_chunk;
                copy_chunk *c = plan_chunk(plan);
                if (c == NULL)
                    return -1;
                c->file = e->file;
                c->source_offset = e->source_offset + done * in_size;
                c->source_len = n * in_size;
                c->convert = true;
                c->from = e->source_dtype;
                c->to = e->slot.dtype;
                c->elements = n;
                if (plan_segment(plan, c, 0, e->slot.offset + done * out_size, n * out_size) != 0)
                    return -1;
            }
            continue;
        }
        uint64_t done = 0;
        while (done < e->source_bytes) {
            uint64_t source = e->source_offset + done;
            bool joins = open_chunk && open_chunk->file == e->file &&
                         open_chunk->source_offset + open_chunk->source_len == source &&
                         open_chunk->source_len < chunk_bytes;
            if (!joins) {
                open_chunk = plan_chunk(plan);
                if (open_chunk == NULL)
                    return -1;
                open_chunk->file = e->file;
                open_chunk->source_offset = source;
            }
            uint64_t room = chunk_bytes - open_chunk->source_len;
            uint64_t n = e->source_bytes - done < room ? e->source_bytes - done : room;
            if (plan_segment(plan, open_chunk, open_chunk->source_len, e->slot.offset + done, n) !=
                0)
                return -1;
            open_chunk->source_len += n;
            done += n;
        }
    }
    return 0;
}

/* One file of a preload being loaded: its blob, open for reading, and where the
 * backend fills through fill_fd, a read-only mapping of the whole blob (NULL: none). */
typedef struct open_source {
    tg_blob_reader *blob;
    const unsigned char *map;
    size_t map_len;
} open_source;

typedef struct copy_job {
    tg_preload_manager *manager;
    preload *target;
    tg_device_backend *backend;
    const copy_plan *plan;
    const open_source *sources; /* the files, in file order */
    size_t chunk_bytes;
    unsigned char
        *fill_map;     /* the backend's writable mapping of the allocation, or NULL: use copy() */
    bool use_fill_fd;  /* with fill_map: workers pwrite into the backend's fill_fd */
    size_t next_chunk; /* atomic: the next chunk a worker claims */
    bool failed;       /* atomic */
    pthread_mutex_t error_lock;
    char error[300];
} copy_job;

typedef struct copy_worker {
    copy_job *job;
    int stream;
} copy_worker;

static void job_fail(copy_job *job, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void job_fail(copy_job *job, const char *fmt, ...)
{
    pthread_mutex_lock(&job->error_lock);
    if (!job->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(job->error, sizeof job->error, fmt, ap);
        va_end(ap);
        __atomic_store_n(&job->failed, true, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&job->error_lock);
}

static bool job_stopped(copy_job *job)
{
    return __atomic_load_n(&job->failed, __ATOMIC_ACQUIRE) ||
           __atomic_load_n(&job->manager->stopping, __ATOMIC_ACQUIRE) ||
           __atomic_load_n(&job->target->cancelled, __ATOMIC_ACQUIRE);
}

/* pread until len bytes are in, or fails (a short file is an error). */
static int read_fully(tg_blob_reader *blob, void *buffer, uint64_t len, uint64_t offset, char *err,
                      size_t err_len)
{
    uint64_t done = 0;
    while (done < len) {
        ssize_t n = tg_blob_read(blob, (char *)buffer + done, (size_t)(len - done), offset + done);
        if (n < 0) {
            set_error(err, err_len, "reading at offset %llu: %s",
                      (unsigned long long)(offset + done), strerror(errno));
            return -1;
        }
        if (n == 0) {
            set_error(err, err_len, "the file ended at offset %llu, before the tensor did",
                      (unsigned long long)(offset + done));
            return -1;
        }
        done += (uint64_t)n;
    }
    return 0;
}

/* A plain chunk written into out (a writable descriptor of the allocation) with
 * pwrite() from the read-only mapping of its blob (src, src_len bytes): the kernel
 * allocates the allocation's fresh pages inside the write, with no page fault per
 * page of the destination (the source's page-cache pages are mapped 16 at a time by
 * fault-around). A blob shorter than its tensors (damaged on disk) makes the write
 * fail with EFAULT, never a SIGBUS. 0, or -1 with err. */
static int write_chunk_from_map(int out, const unsigned char *src, size_t src_len,
                                const copy_chunk *c, const copy_segment *first, char *err,
                                size_t err_len)
{
    /* Map the chunk's source pages in one call first: a source page the write finds
     * unmapped costs it a failed copy, a fault and a retry (about half the wall rate
     * on a blob whose page cache is in 4 KiB pages, as after an O_DIRECT upload).
     * Failing (an old kernel, a range past the end) only loses that. */
    if (c->source_offset < src_len) {
        uint64_t from = c->source_offset & ~(uint64_t)4095;
        uint64_t to = c->source_offset + c->source_len;
        if (to > src_len)
            to = src_len;
        (void)madvise((void *)(src + from), (size_t)(to - from), MADV_POPULATE_READ);
    }
    for (size_t s = 0; s < c->segment_count; s++) {
        const copy_segment *seg = &first[s];
        uint64_t done = 0;
        while (done < seg->len) {
            uint64_t at = c->source_offset + seg->buffer_offset + done;
            ssize_t n = -1;
            errno = EFAULT;
            /* never past the blob's size: the rest of its last page reads as zeros */
            uint64_t want = seg->len - done;
            if (at < src_len && want > src_len - at)
                want = src_len - at;
            if (at < src_len)
                n = pwrite(out, src + at, (size_t)want, (off_t)(seg->target_offset + done));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                if (n == 0 || errno == EFAULT)
                    set_error(err, err_len, "the file ended at offset %llu, before the tensor did",
                              (unsigned long long)at);
                else
                    set_error(err, err_len, "writing the allocation from offset %llu: %s",
                              (unsigned long long)at, strerror(errno));
                return -1;
            }
            done += (uint64_t)n;
        }
    }
    return 0;
}

/* The one-copy paths of a backend with map_for_fill. A plain chunk of a blob with a
 * descriptor is written into the worker's own writable descriptor of the allocation
 * where the backend gives one (fill_fd, write_chunk_from_map: no page fault per
 * destination page); otherwise it is pread straight into the allocation's mapping at
 * each segment's offset. A converting chunk reads into the staging buffer and
 * converts into the mapping. No bounce buffers, no copy(). */
static void *fill_worker_main(void *arg)
{
    copy_worker *worker = arg;
    copy_job *job = worker->job;
    void *staging = NULL;
    char err[256];
    int out = -1;
    if (job->use_fill_fd) {
        char why[256] = "";
        out =
            job->backend->fill_fd(job->backend->context, &job->target->allocation, why, sizeof why);
        if (out < 0)
            tg_log(TG_LOG_WARN, "preload %s: filling through the mapping (%s)", job->target->id,
                   why);
    }
    for (;;) {
        size_t index = __atomic_fetch_add(&job->next_chunk, 1, __ATOMIC_RELAXED);
        if (index >= job->plan->chunk_count || job_stopped(job))
            break;
        const copy_chunk *c = &job->plan->chunks[index];
        const copy_segment *first = &job->plan->segments[c->first_segment];
        uint64_t bytes = 0;
        if (c->convert) {
            if (staging == NULL && (staging = malloc(job->chunk_bytes)) == NULL) {
                job_fail(job, "out of memory for a conversion buffer");
                break;
            }
            if (read_fully(job->sources[c->file].blob, staging, c->source_len, c->source_offset,
                           err, sizeof err) != 0) {
                job_fail(job, "blob %s: %s", job->target->file_blobs[c->file], err);
                break;
            }
            /* The plan put one segment of elements * output size here, inside the allocation. */
            st_convert(c->from, c->to, staging, job->fill_map + first->target_offset,
                       (size_t)c->elements);
            bytes = first->len;
        } else {
            tg_blob_reader *blob = job->sources[c->file].blob;
            const open_source *source = &job->sources[c->file];
            bool written = false;
            if (out >= 0 && source->map != NULL) {
                if (write_chunk_from_map(out, source->map, source->map_len, c, first, err,
                                         sizeof err) != 0) {
                    job_fail(job, "blob %s: %s", job->target->file_blobs[c->file], err);
                    break;
                }
                written = true;
            }
            for (size_t s = 0; !written && s < c->segment_count; s++) {
                const copy_segment *seg = &first[s];
                if (read_fully(blob, job->fill_map + seg->target_offset, seg->len,
                               c->source_offset + seg->buffer_offset, err, sizeof err) != 0) {
                    job_fail(job, "blob %s: %s", job->target->file_blobs[c->file], err);
                    break;
                }
            }
            for (size_t s = 0; s < c->segment_count; s++)
                bytes += first[s].len;
            if (job_stopped(job))
                break;
        }
        __atomic_fetch_add(&job->target->copied, bytes, __ATOMIC_RELAXED);
    }
    if (out >= 0)
        close(out);
    free(staging);
    return NULL;
}

/* A worker owns one stream and two bounce buffers: it fills one while the other's
 * copy is in flight, and waits on its stream before the next copy is queued, so a
 * buffer is never refilled while a copy may still read it. */
static void *copy_worker_main(void *arg)
{
    copy_worker *worker = arg;
    copy_job *job = worker->job;
    tg_device_backend *b = job->backend;
    void *buffers[2] = {b->host_buffer_alloc(b->context, job->chunk_bytes),
                        b->host_buffer_alloc(b->context, job->chunk_bytes)};
    void *staging = NULL;
    uint64_t in_flight_bytes = 0; /* bytes of the copy queued last, counted once it is done */
    bool in_flight = false;
    int current = 0;
    char err[256];
    if (buffers[0] == NULL || buffers[1] == NULL) {
        job_fail(job, "cannot allocate %zu-byte pinned bounce buffers", job->chunk_bytes);
        goto out;
    }
    for (;;) {
        size_t index = __atomic_fetch_add(&job->next_chunk, 1, __ATOMIC_RELAXED);
        if (index >= job->plan->chunk_count || job_stopped(job))
            break;
        const copy_chunk *c = &job->plan->chunks[index];
        void *buffer = buffers[current];
        if (c->convert) {
            if (staging == NULL && (staging = malloc(job->chunk_bytes)) == NULL) {
                job_fail(job, "out of memory for a conversion buffer");
                break;
            }
            if (read_fully(job->sources[c->file].blob, staging, c->source_len, c->source_offset,
                           err, sizeof err) != 0) {
                job_fail(job, "blob %s: %s", job->target->file_blobs[c->file], err);
                break;
            }
            st_convert(c->from, c->to, staging, buffer, (size_t)c->elements);
        } else if (read_fully(job->sources[c->file].blob, buffer, c->source_len, c->source_offset,
                              err, sizeof err) != 0) {
            job_fail(job, "blob %s: %s", job->target->file_blobs[c->file], err);
            break;
        }
        if (in_flight) {
            if (b->wait(b->context, worker->stream, err, sizeof err) != 0) {
                in_flight = false;
                job_fail(job, "device copy failed: %s", err);
                break;
            }
            __atomic_fetch_add(&job->target->copied, in_flight_bytes, __ATOMIC_RELAXED);
        }
        in_flight_bytes = 0;
        for (size_t s = 0; s < c->segment_count; s++) {
            const copy_segment *seg = &job->plan->segments[c->first_segment + s];
            if (b->copy(b->context, &job->target->allocation, seg->target_offset,
                        (const char *)buffer + seg->buffer_offset, (size_t)seg->len, worker->stream,
                        err, sizeof err) != 0) {
                job_fail(job, "device copy failed: %s", err);
                break;
            }
            in_flight_bytes += seg->len;
        }
        in_flight = true;
        current ^= 1;
    }
out:
    if (in_flight) {
        if (b->wait(b->context, worker->stream, err, sizeof err) != 0)
            job_fail(job, "device copy failed: %s", err);
        else
            __atomic_fetch_add(&job->target->copied, in_flight_bytes, __ATOMIC_RELAXED);
    }
    free(staging);
    for (int i = 0; i < 2; i++)
        if (buffers[i])
            b->host_buffer_free(b->context, buffers[i], job->chunk_bytes);
    return NULL;
}

/* Loads one preload: open the files, allocate, copy, finish. Runs on the loader
 * thread with the lock not held; the preload is LOADING and owned by the loader. */
static int load(tg_preload_manager *m, preload *p, char *err, size_t err_len)
{
    tg_device_backend *b = p->device->backend;
    open_source *sources = calloc(p->file_count ? p->file_count : 1, sizeof *sources);
    copy_plan plan = {0};
    int rc = -1;
    if (sources == NULL) {
        set_error(err, err_len, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < p->file_count; i++) {
        tg_blob_check check;
        tg_blob_reader *blob =
            tg_blob_open(p->blobs, p->file_blobs[i], TG_BLOB_SIZE_UNCHECKED, &check);
        sources[i].blob = blob;
        if (blob == NULL) {
            set_error(err, err_len, "cannot open blob %s: %s", p->file_blobs[i], strerror(errno));
            goto out;
        }
        if (tg_blob_fd(blob) >= 0)
            posix_fadvise(tg_blob_fd(blob), 0, 0, POSIX_FADV_SEQUENTIAL);
    }
    if (build_copy_plan(p, m->chunk_bytes, &plan) != 0) {
        set_error(err, err_len, "out of memory planning the copy");
        goto out;
    }
    tg_device_allocation allocation = {0};
    char backend_err[256] = "";
    if (b->allocate(b->context, p->device->index, p->total, &allocation, backend_err,
                    sizeof backend_err) != 0) {
        set_error(err, err_len, "cannot allocate %llu bytes on %s: %s",
                  (unsigned long long)p->total, p->device->name, backend_err);
        goto out;
    }
    pthread_mutex_lock(&m->lock);
    p->allocation = allocation;
    p->allocated = true;
    pthread_mutex_unlock(&m->lock);

    copy_job job = {.manager = m,
                    .target = p,
                    .backend = b,
                    .plan = &plan,
                    .sources = sources,
                    .chunk_bytes = m->chunk_bytes};
    pthread_mutex_init(&job.error_lock, NULL);
    if (b->map_for_fill != NULL) {
        /* No mapping (err says why) is not a failure: the bounce-buffer path still works. */
        job.fill_map = b->map_for_fill(b->context, &p->allocation, backend_err, sizeof backend_err);
        job.use_fill_fd = job.fill_map != NULL && b->fill_fd != NULL;
    }
    for (size_t i = 0; job.use_fill_fd && i < p->file_count; i++) {
        /* Read-only, shared, not populated: the page-cache pages are mapped as the
         * writes read them. Failing to map is not a failure: that file is pread. */
        uint64_t size = tg_blob_size(sources[i].blob);
        int fd = tg_blob_fd(sources[i].blob);
        if (fd < 0 || size == 0 || size > SIZE_MAX)
            continue;
        void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
        if (map != MAP_FAILED) {
            madvise(map, (size_t)size, MADV_SEQUENTIAL);
            sources[i].map = map;
            sources[i].map_len = (size_t)size;
        }
    }
    unsigned workers = m->copy_threads;
    if (b->streams > 0 && workers > (unsigned)b->streams)
        workers = (unsigned)b->streams;
    if (workers == 0)
        workers = 1;
    if (job.use_fill_fd) {
        /* Writes into one memfd take its inode lock one at a time: more writers only
         * contend for it (bench/preload_host: 1 writer 0.45 CPU s/GiB at the best fill's
         * rate; 2 or 4, twice the CPU and slower on 2 cores). Conversions still get
         * every worker (they convert in user space and fill through the mapping). */
        bool converts = false;
        for (size_t i = 0; i < plan.chunk_count && !converts; i++)
            converts = plan.chunks[i].convert;
        if (!converts)
            workers = 1;
    }
    if (workers > plan.chunk_count && plan.chunk_count > 0)
        workers = (unsigned)plan.chunk_count;
    pthread_t threads[64];
    copy_worker worker_args[64];
    if (workers > 64)
        workers = 64;
    double started = now_seconds();
    unsigned running = 0;
    for (unsigned i = 0; i < workers; i++) {
        worker_args[i] = (copy_worker){&job, (int)i};
        if (pthread_create(&threads[i], NULL, job.fill_map ? fill_worker_main : copy_worker_main,
                           &worker_args[i]) != 0) {
            job_fail(&job, "cannot start copy threads");
            break;
        }
        running++;
    }
    for (unsigned i = 0; i < running; i++)
        pthread_join(threads[i], NULL);
    double seconds = now_seconds() - started;
    pthread_mutex_destroy(&job.error_lock);
    if (job.failed) {
        set_error(err, err_len, "%s", job.error);
        goto out;
    }
    /* Tests only (TENSORGATE_TEST_PRELOAD_HOLD): wait here, loading, memory held,
     * while the file exists (at most 20 s), unless revoked or stopping. */
    for (unsigned waited = 0;
         m->test_hold_path != NULL && waited < 20000 && access(m->test_hold_path, F_OK) == 0 &&
         !__atomic_load_n(&p->cancelled, __ATOMIC_ACQUIRE) &&
         !__atomic_load_n(&m->stopping, __ATOMIC_ACQUIRE);
         waited += 10)
        usleep(10 * 1000);
    if (__atomic_load_n(&m->stopping, __ATOMIC_ACQUIRE)) {
        set_error(err, err_len, "the server is stopping");
        goto out;
    }
    if (__atomic_load_n(&p->cancelled, __ATOMIC_ACQUIRE)) {
        set_error(err, err_len, "the load was cancelled");
        goto out;
    }
    if (b->finish(b->context, &p->allocation, backend_err, sizeof backend_err) != 0) {
        set_error(err, err_len, "cannot seal the allocation: %s", backend_err);
        goto out;
    }
    pthread_mutex_lock(&m->lock);
    p->seconds = seconds;
    p->gbps =
        seconds > 0 ? (double)__atomic_load_n(&p->copied, __ATOMIC_RELAXED) / seconds / 1e9 : 0;
    p->device->last_gbps = p->gbps;
    pthread_mutex_unlock(&m->lock);
    rc = 0;
out:
    if (rc != 0 && p->allocated) {
        /* A failed preload holds no memory. Only the loader touches a loading
         * preload's allocation, so releasing it outside the lock is safe. */
        b->release(b->context, &p->allocation);
        pthread_mutex_lock(&m->lock);
        p->allocated = false;
        pthread_mutex_unlock(&m->lock);
    }
    for (size_t i = 0; i < p->file_count; i++) {
        if (sources[i].map != NULL)
            munmap((void *)sources[i].map, sources[i].map_len);
        tg_blob_close(sources[i].blob);
    }
    free(sources);
    free(plan.chunks);
    free(plan.segments);
    return rc;
}

static void *loader_main(void *arg)
{
    tg_preload_manager *m = arg;
    pthread_mutex_lock(&m->lock);
    for (;;) {
        preload *next = NULL;
        while (!m->stopping) {
            for (preload *p = m->head; p && next == NULL; p = p->next)
                if (p->state == STATE_QUEUED)
                    next = p;
            if (next)
                break;
            pthread_cond_wait(&m->changed, &m->lock);
        }
        if (m->stopping)
            break;
        next->state = STATE_LOADING;
        pthread_cond_broadcast(&m->changed);
        pthread_mutex_unlock(&m->lock);

        char err[300] = "";
        int rc = load(m, next, err, sizeof err);
        /* Before it becomes resident: is it still what it was asked for, by a token
         * that still covers it? (Without the lock: the catalog is slow; a revoke
         * meanwhile sets cancelled, seen below.) Its identity is fixed, the loader
         * owns it. */
        char reason[40] = "", detail[300] = "";
        tg_preload_recheck_result checked = TG_PRELOAD_RECHECK_OK;
        if (rc == 0 && m->recheck != NULL && !__atomic_load_n(&next->cancelled, __ATOMIC_ACQUIRE)) {
            tg_preload_identity identity = identity_of(next);
            checked = m->recheck(m->recheck_context, &identity, reason, sizeof reason, detail,
                                 sizeof detail);
        }

        pthread_mutex_lock(&m->lock);
        preload *to_release = NULL;
        if (checked == TG_PRELOAD_RECHECK_REVOKED)
            revoke_locked(next, reason, detail);
        else if (checked == TG_PRELOAD_RECHECK_ERROR)
            revoke_locked(next, "internal",
                          detail[0] ? detail : "the preload could not be re-checked");
        if (next->reason[0] != '\0') {
            /* Revoked while loading or at the re-check: its memory goes now. */
            if (next->allocated) {
                next->device->backend->release(next->device->backend->context, &next->allocation);
                next->allocated = false;
            }
            next->state = STATE_FAILED;
            m->loads_failed++;
        } else if (rc != 0) {
            next->state = STATE_FAILED;
            snprintf(next->reason, sizeof next->reason, "load_failed");
            snprintf(next->error, sizeof next->error, "%s", err);
            m->loads_failed++;
            tg_log(TG_LOG_WARN, "preload %s (%s v%lld on %s) failed: %s", next->id, next->model,
                   (long long)next->version, next->device->name, err);
        } else {
            next->state = STATE_RESIDENT;
            next->last_used = ++m->clock;
            m->loads_done++;
            m->bytes_loaded += next->total;
            tg_log(TG_LOG_INFO,
                   "preload %s (%s v%lld, %zu tensors, %llu bytes) resident on %s at %.2f GB/s",
                   next->id, next->model, (long long)next->version, next->tensor_count,
                   (unsigned long long)next->total, next->device->name, next->gbps);
        }
        if (next->evict_when_loaded) {
            list_remove(m, next);
            to_release = next;
        }
        if (to_release)
            preload_release(to_release); /* under the lock, as in tg_preload_evict */
        pthread_cond_broadcast(&m->changed);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

/* ---- reading, leases, eviction ---- */

static json_t *layout_json(const preload *p)
{
    json_t *layout = json_array();
    for (size_t i = 0; i < p->tensor_count; i++) {
        const layout_entry *e = &p->tensors[i];
        json_t *shape = json_array();
        for (size_t d = 0; d < e->rank; d++)
            json_array_append_new(shape, json_integer((json_int_t)e->shape[d]));
        json_array_append_new(layout, json_pack("{s:s, s:s, s:o, s:I, s:I, s:s}", "name", e->name,
                                                "dtype", st_dtype_name(e->slot.dtype), "shape",
                                                shape, "offset", (json_int_t)e->slot.offset,
                                                "bytes", (json_int_t)e->slot.bytes, "source_dtype",
                                                st_dtype_name(e->source_dtype)));
    }
    return layout;
}

/* The preload as JSON; the caller holds the lock. */
static json_t *describe_locked(const preload *p, bool with_layout)
{
    uint64_t copied = __atomic_load_n(&p->copied, __ATOMIC_RELAXED);
    json_t *body = json_pack(
        "{s:s, s:s, s:I, s:s, s:s, s:s, s:I, s:I, s:I, s:f, s:f, s:I, s:I, s:s}", "id", p->id,
        "model", p->model, "version", (json_int_t)p->version, "device", p->device->name, "backend",
        p->device->backend->kind, "state", state_names[p->state], "bytes_planned",
        (json_int_t)p->total, "bytes_copied", (json_int_t)copied, "mapped_bytes",
        (json_int_t)(p->allocated ? p->allocation.mapped_bytes : 0), "gbps", p->gbps, "seconds",
        p->seconds, "leases", (json_int_t)p->leases, "tensor_count", (json_int_t)p->tensor_count,
        "created_at", p->created_at);
    if (body == NULL)
        return NULL;
    json_object_set_new(body, "dtype",
                        p->convert ? json_string(st_dtype_name(p->dtype)) : json_null());
    json_object_set_new(body, "error", p->error[0] ? json_string(p->error) : json_null());
    json_object_set_new(body, "reason", p->reason[0] ? json_string(p->reason) : json_null());
    /* a preload is memory on one host: with several replicas, the one that holds
     * it (the clients that map it must run there) */
    char host[256];
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    json_object_set_new(body, "host", json_string(host));
    json_object_set_new(body, "pid", json_integer((json_int_t)getpid()));
    if (with_layout)
        json_object_set_new(body, "layout", layout_json(p));
    return body;
}

json_t *tg_preload_describe(tg_preload_manager *m, const char *id, bool with_layout)
{
    pthread_mutex_lock(&m->lock);
    preload *p = find(m, id);
    json_t *body = p ? describe_locked(p, with_layout) : NULL;
    pthread_mutex_unlock(&m->lock);
    return body;
}

static json_t *devices_locked(tg_preload_manager *m)
{
    json_t *devices = json_array();
    for (int i = 0; i < m->device_count; i++) {
        device_record *d = &m->devices[i];
        json_array_append_new(
            devices,
            json_pack("{s:s, s:s, s:s, s:s, s:b, s:I, s:I, s:I}", "device", d->name, "backend",
                      d->backend->kind, "name", d->info.name, "uuid", d->info.uuid, "available", 1,
                      "total_bytes", (json_int_t)d->info.total_bytes, "budget_bytes",
                      (json_int_t)d->budget, "used_bytes", (json_int_t)device_used(m, d)));
    }
    if (find_device(m, "cuda", 0) == NULL)
        json_array_append_new(devices, json_pack("{s:s, s:b, s:s}", "device", "cuda", "available",
                                                 0, "reason", m->cuda_why));
    return devices;
}

json_t *tg_preload_list(tg_preload_manager *m)
{
    json_t *list = json_array();
    pthread_mutex_lock(&m->lock);
    for (preload *p = m->head; p; p = p->next)
        json_array_append_new(list, describe_locked(p, false));
    json_t *devices = devices_locked(m);
    pthread_mutex_unlock(&m->lock);
    return json_pack("{s:o, s:o}", "preloads", list, "devices", devices);
}

bool tg_preload_model(tg_preload_manager *m, const char *id, char *model, size_t model_len)
{
    pthread_mutex_lock(&m->lock);
    preload *p = find(m, id);
    if (p)
        snprintf(model, model_len, "%s", p->model);
    pthread_mutex_unlock(&m->lock);
    return p != NULL;
}

bool tg_preload_reason(tg_preload_manager *m, const char *id, char *reason, size_t reason_len)
{
    pthread_mutex_lock(&m->lock);
    preload *p = find(m, id);
    snprintf(reason, reason_len, "%s", p ? p->reason : "");
    pthread_mutex_unlock(&m->lock);
    return reason[0] != '\0';
}

unsigned tg_preload_revoke_model(tg_preload_manager *m, int64_t model_id, const char *reason,
                                 const char *detail)
{
    unsigned touched = 0;
    pthread_mutex_lock(&m->lock);
    for (preload *p = m->head; p; p = p->next) {
        if (p->model_id != model_id || p->reason[0] != '\0' || p->state == STATE_FAILED)
            continue;
        revoke_locked(p, reason, detail);
        touched++;
    }
    pthread_cond_broadcast(&m->changed);
    pthread_mutex_unlock(&m->lock);
    return touched;
}

tg_preload_status tg_preload_evict(tg_preload_manager *m, const char *id, bool *deferred)
{
    *deferred = false;
    pthread_mutex_lock(&m->lock);
    preload *p = find(m, id);
    if (p == NULL) {
        pthread_mutex_unlock(&m->lock);
        return TG_PRELOAD_NOT_FOUND;
    }
    preload *to_release = NULL;
    /* Two branches free the entry the same way; they stay apart for their reasons. */
    /* NOLINTNEXTLINE(bugprone-branch-clone) */
    if (p->state == STATE_QUEUED) {
        /* Not started: nothing allocated, nobody holds it. */
        list_remove(m, p);
        to_release = p;
    } else if (p->state == STATE_LOADING || p->evict_when_loaded) {
        /* The loader owns it until the load ends; it then frees it. */
        p->evict_when_loaded = true;
        p->delete_requested = true;
        p->state = STATE_EVICTING;
        *deferred = true;
    } else if (p->leases > 0) {
        p->state = STATE_EVICTING;
        p->delete_requested = true;
        *deferred = true;
        tg_log(TG_LOG_INFO, "preload %s: eviction deferred, %u lease(s) held", p->id, p->leases);
    } else {
        list_remove(m, p);
        to_release = p;
    }
    /* Released under the lock: once it is off the list its bytes no longer count,
     * so the device must have them back before anyone else is admitted. */
    if (to_release)
        preload_release(to_release);
    pthread_cond_broadcast(&m->changed);
    pthread_mutex_unlock(&m->lock);
    return TG_PRELOAD_OK;
}

tg_preload_status tg_preload_lease(tg_preload_manager *m, const char *id, int *fd,
                                   char **layout_text, char *err, size_t err_len)
{
    *fd = -1;
    *layout_text = NULL;
    pthread_mutex_lock(&m->lock);
    preload *p = find(m, id);
    if (p == NULL) {
        pthread_mutex_unlock(&m->lock);
        set_error(err, err_len, "no preload %s", id);
        return TG_PRELOAD_NOT_FOUND;
    }
    if (p->reason[0] != '\0') {
        set_error(err, err_len, "preload %s is %s: %s", id, state_names[p->state], p->error);
        pthread_mutex_unlock(&m->lock);
        return TG_PRELOAD_NOT_RESIDENT;
    }
    if (p->state != STATE_RESIDENT || p->evict_when_loaded) {
        set_error(err, err_len, "preload %s is %s, not resident", id, state_names[p->state]);
        pthread_mutex_unlock(&m->lock);
        return TG_PRELOAD_NOT_RESIDENT;
    }
    /* The lease is taken before the lock is dropped so no eviction can free the
     * allocation while the fd is exported. */
    p->leases++;
    p->last_used = ++m->clock;
    json_t *reply = json_pack(
        "{s:s, s:s, s:I, s:s, s:s, s:b, s:I, s:I, s:I, s:o}", "preload", p->id, "model", p->model,
        "version", (json_int_t)p->version, "device", p->device->name, "backend",
        p->device->backend->kind, "mappable", strcmp(p->device->backend->kind, "cuda") != 0,
        "bytes", (json_int_t)p->total, "mapped_bytes", (json_int_t)p->allocation.mapped_bytes,
        "alignment", (json_int_t)TG_PRELOAD_ALIGN, "layout", layout_json(p));
    tg_device_backend *b = p->device->backend;
    tg_device_allocation *allocation = &p->allocation;
    pthread_mutex_unlock(&m->lock);

    /* Before the hand-out: still what it was asked for? The lease taken above keeps
     * p (and its identity) alive while the catalog answers without the lock. */
    if (m->recheck != NULL) {
        char reason[40] = "", detail[300] = "";
        tg_preload_identity identity = identity_of(p);
        tg_preload_recheck_result checked =
            m->recheck(m->recheck_context, &identity, reason, sizeof reason, detail, sizeof detail);
        if (checked != TG_PRELOAD_RECHECK_OK) {
            json_decref(reply);
            if (checked == TG_PRELOAD_RECHECK_REVOKED) {
                pthread_mutex_lock(&m->lock);
                revoke_locked(p, reason, detail);
                pthread_mutex_unlock(&m->lock);
                set_error(err, err_len, "preload %s: %s", id, detail);
            } else {
                set_error(err, err_len, "preload %s cannot be re-checked: %s", id,
                          detail[0] ? detail : "the catalog failed");
            }
            /* a revoked one's memory goes here when this was the last lease */
            tg_preload_unlease(m, id);
            return checked == TG_PRELOAD_RECHECK_REVOKED ? TG_PRELOAD_NOT_RESIDENT
                                                         : TG_PRELOAD_ERROR;
        }
    }

    char backend_err[256] = "";
    *fd = b->export_fd(b->context, allocation, backend_err, sizeof backend_err);
    *layout_text = reply ? json_dumps(reply, JSON_COMPACT) : NULL;
    json_decref(reply);
    if (*fd < 0 || *layout_text == NULL) {
        set_error(err, err_len, "cannot export preload %s: %s", id,
                  backend_err[0] ? backend_err : "out of memory");
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
        free(*layout_text);
        *layout_text = NULL;
        tg_preload_unlease(m, id);
        return TG_PRELOAD_ERROR;
    }
    return TG_PRELOAD_OK;
}

void tg_preload_unlease(tg_preload_manager *m, const char *id)
{
    pthread_mutex_lock(&m->lock);
    preload *p = find(m, id);
    preload *to_release = NULL;
    if (p && p->leases > 0) {
        p->leases--;
        p->last_used = ++m->clock;
        if (p->leases == 0 && p->state == STATE_EVICTING && !p->delete_requested &&
            p->reason[0] != '\0') {
            /* Revoked while leased: its memory goes, its record stays to say why. */
            if (p->allocated) {
                p->device->backend->release(p->device->backend->context, &p->allocation);
                p->allocated = false;
            }
            p->state = STATE_FAILED;
            tg_log(TG_LOG_INFO, "preload %s: last lease ended, revoked (%s), memory released",
                   p->id, p->reason);
        } else if (p->leases == 0 && p->state == STATE_EVICTING) {
            list_remove(m, p);
            to_release = p;
            tg_log(TG_LOG_INFO, "preload %s: last lease ended, deferred eviction done", p->id);
        }
    }
    if (to_release)
        preload_release(to_release); /* under the lock, as in tg_preload_evict */
    pthread_cond_broadcast(&m->changed);
    pthread_mutex_unlock(&m->lock);
}

const char *tg_preload_wait(tg_preload_manager *m, const char *id, unsigned timeout_ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    const char *result = NULL;
    pthread_mutex_lock(&m->lock);
    for (;;) {
        preload *p = find(m, id);
        if (p == NULL) {
            result = "gone";
            break;
        }
        if (p->state == STATE_RESIDENT || p->state == STATE_FAILED) {
            result = state_names[p->state];
            break;
        }
        if (pthread_cond_timedwait(&m->changed, &m->lock, &deadline) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&m->lock);
    return result;
}

json_t *tg_preload_devices_status(tg_preload_manager *m)
{
    pthread_mutex_lock(&m->lock);
    bool host = find_device(m, "host", 0) != NULL;
    int cuda_count = 0;
    for (int i = 0; i < m->device_count; i++)
        if (strcmp(m->devices[i].kind, "cuda") == 0)
            cuda_count++;
    json_t *body = json_pack("{s:{s:b}, s:{s:b, s:i, s:s}}", "host", "available", host, "cuda",
                             "available", cuda_count > 0, "devices", cuda_count, "backend",
                             m->cuda ? m->cuda->kind : "none");
    if (body && cuda_count == 0)
        json_object_set_new(json_object_get(body, "cuda"), "reason", json_string(m->cuda_why));
    pthread_mutex_unlock(&m->lock);
    return body;
}

/* The preload part of /metrics is a few kilobytes; this bounds it. */
#define METRICS_TEXT_MAX ((size_t)4 * 1024 * 1024)

/* A Prometheus label value: backslash, quote and newline escaped. */
static void label_escape(const char *in, char *out, size_t out_len)
{
    size_t o = 0;
    for (const char *p = in; *p && o + 3 < out_len; p++) {
        if (*p == '\\' || *p == '"') {
            out[o++] = '\\';
            out[o++] = *p;
        } else if (*p == '\n') {
            out[o++] = '\\';
            out[o++] = 'n';
        } else {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
}

char *tg_preload_metrics(tg_preload_manager *m)
{
    st_buffer t;
    st_buffer_init(&t, METRICS_TEXT_MAX);
    pthread_mutex_lock(&m->lock);
    int cuda_count = 0;
    for (int i = 0; i < m->device_count; i++)
        if (strcmp(m->devices[i].kind, "cuda") == 0)
            cuda_count++;
    char reason[400];
    label_escape(cuda_count ? "" : m->cuda_why, reason, sizeof reason);
    st_buffer_printf(
        &t,
        "# HELP tensorgate_preload_device_available 1 when preloads can go to this kind of "
        "device.\n"
        "# TYPE tensorgate_preload_device_available gauge\n"
        "tensorgate_preload_device_available{kind=\"host\",reason=\"\"} %d\n"
        "tensorgate_preload_device_available{kind=\"cuda\",reason=\"%s\"} %d\n",
        find_device(m, "host", 0) != NULL, reason, cuda_count > 0);
    st_buffer_printf(&t,
                     "# HELP tensorgate_preload_budget_bytes Byte budget of each preload device.\n"
                     "# TYPE tensorgate_preload_budget_bytes gauge\n");
    for (int i = 0; i < m->device_count; i++)
        st_buffer_printf(&t, "tensorgate_preload_budget_bytes{device=\"%s\"} %llu\n",
                         m->devices[i].name, (unsigned long long)m->devices[i].budget);
    st_buffer_printf(
        &t,
        "# HELP tensorgate_preload_used_bytes Bytes held or promised by preloads on each device.\n"
        "# TYPE tensorgate_preload_used_bytes gauge\n");
    for (int i = 0; i < m->device_count; i++)
        st_buffer_printf(&t, "tensorgate_preload_used_bytes{device=\"%s\"} %llu\n",
                         m->devices[i].name, (unsigned long long)device_used(m, &m->devices[i]));
    st_buffer_printf(
        &t,
        "# HELP tensorgate_preload_last_gbps Copy rate of the last preload loaded on each device.\n"
        "# TYPE tensorgate_preload_last_gbps gauge\n");
    for (int i = 0; i < m->device_count; i++)
        st_buffer_printf(&t, "tensorgate_preload_last_gbps{device=\"%s\"} %.3f\n",
                         m->devices[i].name, m->devices[i].last_gbps);
    st_buffer_printf(&t,
                     "# HELP tensorgate_preload_resident_bytes Bytes of resident preloads on each "
                     "device.\n"
                     "# TYPE tensorgate_preload_resident_bytes gauge\n");
    for (int i = 0; i < m->device_count; i++) {
        uint64_t resident = 0;
        for (preload *p = m->head; p; p = p->next)
            if (p->device == &m->devices[i] && p->state == STATE_RESIDENT)
                resident += p->total;
        st_buffer_printf(&t, "tensorgate_preload_resident_bytes{device=\"%s\"} %llu\n",
                         m->devices[i].name, (unsigned long long)resident);
    }
    unsigned counts[5] = {0};
    for (preload *p = m->head; p; p = p->next)
        counts[p->state]++;
    st_buffer_printf(
        &t, "# HELP tensorgate_preloads Preloads by state.\n# TYPE tensorgate_preloads gauge\n");
    for (int s = 0; s < 5; s++)
        st_buffer_printf(&t, "tensorgate_preloads{state=\"%s\"} %u\n", state_names[s], counts[s]);
    st_buffer_printf(
        &t,
        "# HELP tensorgate_preload_loads_total Preload loads finished, by result.\n"
        "# TYPE tensorgate_preload_loads_total counter\n"
        "tensorgate_preload_loads_total{result=\"resident\"} %llu\n"
        "tensorgate_preload_loads_total{result=\"failed\"} %llu\n"
        "# HELP tensorgate_preload_loaded_bytes_total Bytes of preloads that became resident.\n"
        "# TYPE tensorgate_preload_loaded_bytes_total counter\n"
        "tensorgate_preload_loaded_bytes_total %llu\n"
        "# HELP tensorgate_preload_evictions_total Preloads evicted to make room.\n"
        "# TYPE tensorgate_preload_evictions_total counter\n"
        "tensorgate_preload_evictions_total %llu\n",
        (unsigned long long)m->loads_done, (unsigned long long)m->loads_failed,
        (unsigned long long)m->bytes_loaded, (unsigned long long)m->evictions);
    pthread_mutex_unlock(&m->lock);
    return st_buffer_take(&t, NULL); /* NULL when out of memory */
}
