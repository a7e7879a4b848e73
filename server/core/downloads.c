/* The batched download counter (downloads.h). */
#include "downloads.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

typedef struct pending {
    int64_t model_id;
    uint64_t count;
} pending;

struct tg_downloads {
    tg_catalog *catalog;
    unsigned flush_ms;
    pthread_mutex_t lock;       /* guards items, count, stop */
    pthread_mutex_t flush_lock; /* one flush at a time */
    pthread_cond_t wake;
    pending items[TG_DOWNLOADS_PENDING_MAX];
    unsigned count;
    bool stop, running;
    pthread_t thread;
};

/* Adds n to model_id's pending count; false when the table is full. Holds lock. */
static bool add_locked(tg_downloads *d, int64_t model_id, uint64_t n)
{
    for (unsigned i = 0; i < d->count; i++) {
        if (d->items[i].model_id == model_id) {
            d->items[i].count += n;
            return true;
        }
    }
    if (d->count >= TG_DOWNLOADS_PENDING_MAX)
        return false;
    d->items[d->count++] = (pending){model_id, n};
    return true;
}

bool tg_downloads_flush(tg_downloads *d)
{
    pthread_mutex_lock(&d->flush_lock);
    pending *taken = malloc(sizeof d->items);
    if (taken == NULL) {
        pthread_mutex_unlock(&d->flush_lock);
        return false;
    }
    pthread_mutex_lock(&d->lock);
    unsigned n = d->count;
    memcpy(taken, d->items, n * sizeof *taken);
    d->count = 0;
    pthread_mutex_unlock(&d->lock);
    bool all = true;
    if (n > 0) {
        int64_t *ids = malloc(n * sizeof *ids);
        uint64_t *counts = malloc(n * sizeof *counts);
        for (unsigned i = 0; ids != NULL && counts != NULL && i < n; i++) {
            ids[i] = taken[i].model_id;
            counts[i] = taken[i].count;
        }
        /* one transaction; a deleted model's counts are dropped there */
        all = ids != NULL && counts != NULL &&
              tg_catalog_downloads_add(d->catalog, ids, counts, n) == TG_CAT_OK;
        free(ids);
        free(counts);
    }
    for (unsigned i = 0; !all && i < n; i++) { /* kept for the next flush */
        pthread_mutex_lock(&d->lock);
        bool kept = add_locked(d, taken[i].model_id, taken[i].count);
        pthread_mutex_unlock(&d->lock);
        if (!kept)
            tg_log(TG_LOG_WARN, "downloads: %llu downloads of model %lld were lost",
                   (unsigned long long)taken[i].count, (long long)taken[i].model_id);
    }
    free(taken);
    pthread_mutex_unlock(&d->flush_lock);
    return all;
}

void tg_downloads_count(tg_downloads *d, int64_t model_id)
{
    if (d == NULL)
        return;
    pthread_mutex_lock(&d->lock);
    bool added = add_locked(d, model_id, 1);
    pthread_mutex_unlock(&d->lock);
    if (!added) { /* a burst over many models: write the batch now, then count */
        tg_downloads_flush(d);
        pthread_mutex_lock(&d->lock);
        added = add_locked(d, model_id, 1);
        pthread_mutex_unlock(&d->lock);
        if (!added)
            tg_log(TG_LOG_WARN, "downloads: a download of model %lld was not counted",
                   (long long)model_id);
    }
}

unsigned tg_downloads_pending(tg_downloads *d)
{
    pthread_mutex_lock(&d->lock);
    unsigned n = d->count;
    pthread_mutex_unlock(&d->lock);
    return n;
}

static void *flusher(void *arg)
{
    tg_downloads *d = arg;
    pthread_mutex_lock(&d->lock);
    while (!d->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += d->flush_ms / 1000;
        until.tv_nsec += (long)(d->flush_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        int rc = 0;
        while (!d->stop && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&d->wake, &d->lock, &until);
        if (d->stop)
            break;
        bool any = d->count > 0;
        pthread_mutex_unlock(&d->lock);
        if (any)
            tg_downloads_flush(d);
        pthread_mutex_lock(&d->lock);
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

tg_downloads *tg_downloads_start(tg_catalog *catalog, unsigned flush_ms)
{
    tg_downloads *d = calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    d->catalog = catalog;
    d->flush_ms = flush_ms;
    pthread_mutex_init(&d->lock, NULL);
    pthread_mutex_init(&d->flush_lock, NULL);
    pthread_cond_init(&d->wake, NULL);
    if (flush_ms > 0) {
        if (pthread_create(&d->thread, NULL, flusher, d) != 0) {
            tg_downloads_stop(d);
            return NULL;
        }
        d->running = true;
    }
    return d;
}

void tg_downloads_stop(tg_downloads *d)
{
    if (d == NULL)
        return;
    if (d->running) {
        pthread_mutex_lock(&d->lock);
        d->stop = true;
        pthread_cond_signal(&d->wake);
        pthread_mutex_unlock(&d->lock);
        pthread_join(d->thread, NULL);
        d->running = false;
    }
    if (d->catalog != NULL && !tg_downloads_flush(d))
        tg_log(TG_LOG_WARN, "downloads: the catalog refused the last counts; they are lost");
    pthread_cond_destroy(&d->wake);
    pthread_mutex_destroy(&d->flush_lock);
    pthread_mutex_destroy(&d->lock);
    free(d);
}
