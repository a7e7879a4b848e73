/* Unit tests for server/preload/preload_fake.c through the backend interface
 * (preload_backend.h): devices and their info, allocation against each device's
 * budget (refusals change nothing, release gives the bytes back, concurrent
 * callers keep the count), copies and waits inside the allocation and its streams,
 * the sealed memfd an export gives, and the failure sentences. The manager over
 * this backend is tests/unit/server/preload/preload.c's. */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload_backend.h"
#include "test.h"

TEST(devices_and_their_info)
{
    tg_device_backend *b = tg_preload_fake_backend(3, 1000);
    CHECK(b != NULL);
    if (b == NULL)
        return;
    CHECK_STR(b->kind, "fake");
    CHECK_EQ_U64(b->device_count(b->context), 3);
    CHECK_STR(b->why_unavailable(b->context), "");
    CHECK(b->map_for_fill == NULL); /* the manager fills a fake device through copy() */
    CHECK(b->streams > 0);
    tg_device_info info;
    CHECK(b->device_info(b->context, 2, &info) == 0);
    CHECK_STR(info.name, "fake device 2");
    CHECK_STR(info.uuid, "FAKE-00000002");
    CHECK_EQ_U64(info.total_bytes, 1000);
    CHECK(b->device_info(b->context, 3, &info) == -1);
    CHECK(b->device_info(b->context, -1, &info) == -1);
    b->destroy(b->context);

    /* no devices: says so; the count is clamped to 0..16 */
    b = tg_preload_fake_backend(0, 1000);
    CHECK(b != NULL);
    if (b == NULL)
        return;
    CHECK_EQ_U64(b->device_count(b->context), 0);
    CHECK_STR(b->why_unavailable(b->context), "the fake backend has no devices");
    tg_device_allocation a;
    char err[256] = "";
    CHECK(b->allocate(b->context, 0, 10, &a, err, sizeof err) == -1);
    CHECK_STR(err, "no fake device 0");
    b->destroy(b->context);
    b = tg_preload_fake_backend(-4, 1000);
    CHECK(b != NULL && b->device_count(b->context) == 0);
    if (b != NULL)
        b->destroy(b->context);
    b = tg_preload_fake_backend(40, 1000);
    CHECK(b != NULL && b->device_count(b->context) == 16);
    if (b != NULL) {
        CHECK(b->device_info(b->context, 15, &info) == 0);
        CHECK(b->device_info(b->context, 16, &info) == -1);
        b->destroy(b->context);
    }
}

TEST(allocations_keep_within_each_device_budget)
{
    tg_device_backend *b = tg_preload_fake_backend(2, 1000);
    CHECK(b != NULL);
    if (b == NULL)
        return;
    char err[256] = "";
    tg_device_allocation a, c, d, e;
    CHECK(b->allocate(b->context, 0, 600, &a, err, sizeof err) == 0);
    CHECK_EQ_U64(a.device, 0);
    CHECK_EQ_U64(a.bytes, 600);
    CHECK_EQ_U64(a.mapped_bytes, 600);
    CHECK(a.handle != NULL);
    /* 401 more does not fit; the refusal leaves the allocation zeroed and the count as it was */
    memset(&c, 0xab, sizeof c);
    CHECK(b->allocate(b->context, 0, 401, &c, err, sizeof err) == -1);
    CHECK_STR(err, "fake device 0 is out of memory");
    CHECK(c.handle == NULL && c.bytes == 0);
    CHECK(b->allocate(b->context, 0, 400, &c, err, sizeof err) == 0); /* exactly the rest */
    CHECK(b->allocate(b->context, 0, 1, &d, err, sizeof err) == -1);
    /* the other device has its own budget */
    CHECK(b->allocate(b->context, 1, 1000, &d, err, sizeof err) == 0);
    CHECK(b->allocate(b->context, 1, 1001, &e, err, sizeof err) == -1);
    /* more than a whole device, and a size that would wrap the count */
    CHECK(b->allocate(b->context, 0, 1001, &e, err, sizeof err) == -1);
    CHECK(b->allocate(b->context, 0, UINT64_MAX, &e, err, sizeof err) == -1);
    CHECK_STR(err, "fake device 0 is out of memory");
    CHECK(b->allocate(b->context, 2, 1, &e, err, sizeof err) == -1);
    CHECK_STR(err, "no fake device 2");
    CHECK(b->allocate(b->context, -1, 1, &e, err, sizeof err) == -1);
    CHECK_STR(err, "no fake device -1");

    /* release gives the bytes back; a second release of the same allocation is a no-op */
    b->release(b->context, &a);
    CHECK(a.handle == NULL);
    b->release(b->context, &a);
    CHECK(b->allocate(b->context, 0, 600, &a, err, sizeof err) == 0);
    CHECK(b->allocate(b->context, 0, 1, &e, err, sizeof err) == -1);
    b->release(b->context, &a);
    b->release(b->context, &c);
    b->release(b->context, &d);
    /* an empty allocation still has a handle and takes nothing */
    CHECK(b->allocate(b->context, 0, 0, &e, err, sizeof err) == 0);
    CHECK(e.handle != NULL);
    CHECK(b->allocate(b->context, 0, 1000, &a, err, sizeof err) == 0);
    b->release(b->context, &a);
    b->release(b->context, &e);
    b->destroy(b->context);
}

typedef struct churn {
    tg_device_backend *backend;
    int device;
    int refused;
} churn;

static void *churn_thread(void *arg)
{
    churn *c = arg;
    char err[128];
    for (int i = 0; i < 2000; i++) {
        tg_device_allocation a;
        if (c->backend->allocate(c->backend->context, c->device, 100 + (uint64_t)(i % 7), &a, err,
                                 sizeof err) != 0) {
            c->refused++;
            continue;
        }
        c->backend->release(c->backend->context, &a);
    }
    return NULL;
}

/* Allocations and releases from several threads at once keep the budget's count:
 * afterwards the whole budget is free again. */
TEST(concurrent_allocations_keep_the_count)
{
    tg_device_backend *b = tg_preload_fake_backend(1, 400);
    CHECK(b != NULL);
    if (b == NULL)
        return;
    enum { THREADS = 6 };
    churn work[THREADS];
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        work[i] = (churn){b, 0, 0};
        CHECK(pthread_create(&threads[i], NULL, churn_thread, &work[i]) == 0);
    }
    int refused = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        refused += work[i].refused;
    }
    CHECK(refused < THREADS * 2000); /* most got through */
    tg_device_allocation all;
    char err[128];
    CHECK(b->allocate(b->context, 0, 400, &all, err, sizeof err) == 0);
    b->release(b->context, &all);
    b->destroy(b->context);
}

TEST(copies_stay_inside_the_allocation_and_streams)
{
    tg_device_backend *b = tg_preload_fake_backend(1, 1 << 20);
    CHECK(b != NULL);
    if (b == NULL)
        return;
    char err[256] = "";
    tg_device_allocation a;
    CHECK(b->allocate(b->context, 0, 100, &a, err, sizeof err) == 0);
    unsigned char *buffer = b->host_buffer_alloc(b->context, 64);
    CHECK(buffer != NULL);
    if (buffer == NULL)
        return;
    for (int i = 0; i < 64; i++)
        buffer[i] = (unsigned char)(i + 1);
    CHECK(b->copy(b->context, &a, 0, buffer, 64, 0, err, sizeof err) == 0);
    CHECK(b->copy(b->context, &a, 64, buffer, 36, b->streams - 1, err, sizeof err) == 0);
    CHECK(b->wait(b->context, 0, err, sizeof err) == 0);
    CHECK(b->wait(b->context, b->streams - 1, err, sizeof err) == 0);
    CHECK(memcmp(a.handle, buffer, 64) == 0);
    CHECK(memcmp((char *)a.handle + 64, buffer, 36) == 0);
    CHECK(b->copy(b->context, &a, 100, buffer, 0, 0, err, sizeof err) == 0); /* empty, at the end */

    /* one byte past the end, an offset that wraps, a stream that does not exist */
    CHECK(b->copy(b->context, &a, 64, buffer, 37, 0, err, sizeof err) == -1);
    CHECK_STR(err, "copy of 37 bytes at 64 on stream 0 is outside the allocation");
    CHECK(b->copy(b->context, &a, UINT64_MAX - 3, buffer, 8, 0, err, sizeof err) == -1);
    CHECK(b->copy(b->context, &a, 0, buffer, 1, b->streams, err, sizeof err) == -1);
    CHECK(b->copy(b->context, &a, 0, buffer, 1, -1, err, sizeof err) == -1);
    CHECK(b->wait(b->context, b->streams, err, sizeof err) == -1);
    char want[32];
    snprintf(want, sizeof want, "no stream %d", b->streams);
    CHECK_STR(err, want);
    CHECK(b->wait(b->context, -1, err, sizeof err) == -1);
    /* the refused copies wrote nothing */
    CHECK(((unsigned char *)a.handle)[99] == 36);
    CHECK(b->finish(b->context, &a, err, sizeof err) == 0);
    b->host_buffer_free(b->context, buffer, 64);
    b->release(b->context, &a);
    b->destroy(b->context);
}

/* An export is a sealed memfd holding a copy of the allocation's bytes: the
 * consumer reads exactly what was placed and can change none of it. */
TEST(export_is_a_sealed_copy)
{
    tg_device_backend *b = tg_preload_fake_backend(1, 1 << 20);
    CHECK(b != NULL);
    if (b == NULL)
        return;
    char err[256] = "";
    tg_device_allocation a;
    CHECK(b->allocate(b->context, 0, 5000, &a, err, sizeof err) == 0);
    unsigned char data[5000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (unsigned char)(i * 7);
    CHECK(b->copy(b->context, &a, 0, data, sizeof data, 1, err, sizeof err) == 0);
    int fd = b->export_fd(b->context, &a, err, sizeof err);
    CHECK(fd >= 0);
    if (fd >= 0) {
        struct stat st;
        CHECK(fstat(fd, &st) == 0 && st.st_size == 5000);
        CHECK(fcntl(fd, F_GET_SEALS) == (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL));
        CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
        unsigned char back[5000];
        CHECK(pread(fd, back, sizeof back, 0) == (ssize_t)sizeof back);
        CHECK(memcmp(back, data, sizeof data) == 0);
        CHECK(pwrite(fd, "x", 1, 0) == -1);
        CHECK(ftruncate(fd, 10) == -1);
        CHECK(ftruncate(fd, 10000) == -1);
        CHECK(mmap(NULL, 5000, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED);
        void *map = mmap(NULL, 5000, PROT_READ, MAP_SHARED, fd, 0);
        CHECK(map != MAP_FAILED);
        if (map != MAP_FAILED) {
            CHECK(memcmp(map, data, sizeof data) == 0);
            munmap(map, 5000);
        }
        /* a copy, not the memory: later copies into the allocation do not show in it,
         * and releasing the allocation leaves the export readable */
        CHECK(b->copy(b->context, &a, 0, "zzzz", 4, 0, err, sizeof err) == 0);
        b->release(b->context, &a);
        CHECK(pread(fd, back, 4, 0) == 4 && memcmp(back, data, 4) == 0);
        close(fd);
    } else {
        b->release(b->context, &a);
    }

    /* an empty allocation exports an empty sealed memfd */
    CHECK(b->allocate(b->context, 0, 0, &a, err, sizeof err) == 0);
    fd = b->export_fd(b->context, &a, err, sizeof err);
    CHECK(fd >= 0);
    if (fd >= 0) {
        struct stat st;
        CHECK(fstat(fd, &st) == 0 && st.st_size == 0);
        close(fd);
    }
    b->release(b->context, &a);
    b->destroy(b->context);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(devices_and_their_info);
    RUN(allocations_keep_within_each_device_budget);
    RUN(concurrent_allocations_keep_the_count);
    RUN(copies_stay_inside_the_allocation_and_streams);
    RUN(export_is_a_sealed_copy);
    return test_report(argv[0]);
}
