/* Unit tests for server/preload/preload_host.c through the backend interface
 * (preload_backend.h): one allocation is one page-rounded memfd, filled by copy()
 * or through map_for_fill, sealed by finish() against writes and growth but not
 * shrinking, exported as a read-only open file description, and revoked by
 * release(): the memfd is truncated to nothing, so a descriptor the consumer kept
 * names no memory and a kept mapping faults (SIGBUS). Failure paths: no such
 * device, sizes that wrap, copies outside the memfd or after sealing, maps of
 * nothing or after sealing. The manager over this backend is
 * tests/unit/server/preload/preload.c's. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "preload_backend.h"
#include "test.h"

static uint64_t page_size(void)
{
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? (uint64_t)page : 4096;
}

TEST(one_host_device)
{
    tg_device_backend *b = tg_preload_host_backend();
    CHECK(b != NULL);
    if (b == NULL)
        return;
    CHECK_STR(b->kind, "host");
    CHECK_EQ_U64(b->device_count(b->context), 1);
    CHECK_STR(b->why_unavailable(b->context), "");
    CHECK(b->map_for_fill != NULL);
    CHECK(b->streams > 0);
    tg_device_info info;
    memset(&info, 0xab, sizeof info);
    CHECK(b->device_info(b->context, 0, &info) == 0);
    CHECK_STR(info.name, "host");
    CHECK_STR(info.uuid, "");
    CHECK(info.total_bytes > 0);
    CHECK(info.total_bytes % page_size() == 0);
    CHECK(b->device_info(b->context, 1, &info) == -1);
    CHECK(b->device_info(b->context, -1, &info) == -1);
    CHECK(b->wait(b->context, 0, NULL, 0) == 0); /* copies are synchronous */

    /* bounce buffers are page-aligned and writable */
    unsigned char *buffer = b->host_buffer_alloc(b->context, 3 * 4096);
    CHECK(buffer != NULL);
    if (buffer != NULL) {
        CHECK((uintptr_t)buffer % page_size() == 0);
        memset(buffer, 0x5a, 3 * 4096);
        CHECK(buffer[3 * 4096 - 1] == 0x5a);
        b->host_buffer_free(b->context, buffer, 3 * 4096);
    }
    b->destroy(b->context);
}

TEST(allocation_sizes_and_refusals)
{
    tg_device_backend *b = tg_preload_host_backend();
    CHECK(b != NULL);
    if (b == NULL)
        return;
    uint64_t page = page_size();
    char err[256] = "";
    tg_device_allocation a;
    CHECK(b->allocate(b->context, 0, 1, &a, err, sizeof err) == 0);
    CHECK_EQ_U64(a.device, 0);
    CHECK_EQ_U64(a.bytes, 1);
    CHECK_EQ_U64(a.mapped_bytes, page); /* rounded up to whole pages */
    CHECK(a.handle != NULL);
    b->release(b->context, &a);
    CHECK(a.handle == NULL);
    b->release(b->context, &a); /* twice: a no-op */

    CHECK(b->allocate(b->context, 0, 2 * page, &a, err, sizeof err) == 0);
    CHECK_EQ_U64(a.mapped_bytes, 2 * page);
    b->release(b->context, &a);
    CHECK(b->allocate(b->context, 0, 0, &a, err, sizeof err) == 0);
    CHECK_EQ_U64(a.mapped_bytes, 0);
    b->release(b->context, &a);

    memset(&a, 0xab, sizeof a);
    CHECK(b->allocate(b->context, 1, 10, &a, err, sizeof err) == -1);
    CHECK_STR(err, "no host device 1 or size 10 too large");
    CHECK(a.handle == NULL);
    /* rounding up would wrap; past what a file offset holds */
    CHECK(b->allocate(b->context, 0, UINT64_MAX, &a, err, sizeof err) == -1);
    CHECK(strstr(err, "too large") != NULL);
    CHECK(b->allocate(b->context, 0, (uint64_t)INT64_MAX + 1, &a, err, sizeof err) == -1);
    CHECK(a.handle == NULL);
    b->destroy(b->context);
}

/* copy() writes the memfd; the export reads it back. */
TEST(copy_fills_and_stays_inside)
{
    tg_device_backend *b = tg_preload_host_backend();
    CHECK(b != NULL);
    if (b == NULL)
        return;
    uint64_t page = page_size();
    char err[256] = "";
    tg_device_allocation a;
    CHECK(b->allocate(b->context, 0, 1000, &a, err, sizeof err) == 0);
    unsigned char data[1000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (unsigned char)(i * 13 + 1);
    CHECK(b->copy(b->context, &a, 0, data, 600, 0, err, sizeof err) == 0);
    CHECK(b->copy(b->context, &a, 600, data + 600, 400, 3, err, sizeof err) == 0);
    /* the page's padding past bytes is still the memfd's: allowed, up to mapped_bytes */
    CHECK(b->copy(b->context, &a, page - 4, "tail", 4, 0, err, sizeof err) == 0);
    CHECK(b->copy(b->context, &a, page - 3, "tail", 4, 0, err, sizeof err) == -1);
    char want[96];
    snprintf(want, sizeof want, "copy of 4 bytes at %llu is outside the allocation",
             (unsigned long long)(page - 3));
    CHECK_STR(err, want);
    CHECK(b->copy(b->context, &a, UINT64_MAX - 1, "tail", 4, 0, err, sizeof err) == -1);
    int fd = b->export_fd(b->context, &a, err, sizeof err);
    CHECK(fd >= 0);
    if (fd >= 0) {
        unsigned char back[1000];
        CHECK(pread(fd, back, sizeof back, 0) == (ssize_t)sizeof back);
        CHECK(memcmp(back, data, sizeof data) == 0);
        char tail[4];
        CHECK(pread(fd, tail, 4, (off_t)(page - 4)) == 4 && memcmp(tail, "tail", 4) == 0);
        close(fd);
    }
    b->release(b->context, &a);
    b->destroy(b->context);
}

/* map_for_fill: one writable mapping per allocation (asked twice, the same one);
 * finish() unmaps it before sealing (F_SEAL_WRITE is refused while it exists), and
 * after finish nothing can map the memfd writable or write it. */
TEST(fill_map_then_finish_seals)
{
    tg_device_backend *b = tg_preload_host_backend();
    CHECK(b != NULL);
    if (b == NULL)
        return;
    uint64_t page = page_size();
    char err[256] = "";
    tg_device_allocation a;
    CHECK(b->allocate(b->context, 0, 3 * page - 100, &a, err, sizeof err) == 0);
    unsigned char *map = b->map_for_fill(b->context, &a, err, sizeof err);
    CHECK(map != NULL);
    if (map == NULL) {
        b->release(b->context, &a);
        b->destroy(b->context);
        return;
    }
    CHECK(b->map_for_fill(b->context, &a, err, sizeof err) == (void *)map);
    for (uint64_t i = 0; i < a.mapped_bytes; i++)
        map[i] = (unsigned char)(i % 251);
    /* copy() and the mapping write the same memory */
    CHECK(b->copy(b->context, &a, page, "copy", 4, 0, err, sizeof err) == 0);
    CHECK(memcmp(map + page, "copy", 4) == 0);

    CHECK(b->finish(b->context, &a, err, sizeof err) == 0);
    int fd = b->export_fd(b->context, &a, err, sizeof err);
    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK(fcntl(fd, F_GET_SEALS) == (F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL));
        unsigned char back[16];
        CHECK(pread(fd, back, sizeof back, (off_t)(2 * page)) == (ssize_t)sizeof back);
        for (size_t i = 0; i < sizeof back; i++)
            CHECK(back[i] == (unsigned char)((2 * page + i) % 251));
        CHECK(pread(fd, back, 4, (off_t)page) == 4 && memcmp(back, "copy", 4) == 0);
        close(fd);
    }
    /* sealed: no more writes through either path */
    CHECK(b->copy(b->context, &a, 0, "late", 4, 0, err, sizeof err) == -1);
    CHECK(strncmp(err, "writing the memfd: ", 19) == 0);
    CHECK(b->map_for_fill(b->context, &a, err, sizeof err) == NULL);
    CHECK(strncmp(err, "mapping the memfd: ", 19) == 0);
    b->release(b->context, &a);

    /* an empty allocation has nothing to map, and finishes */
    CHECK(b->allocate(b->context, 0, 0, &a, err, sizeof err) == 0);
    CHECK(b->map_for_fill(b->context, &a, err, sizeof err) == NULL);
    CHECK_STR(err, "nothing to map");
    CHECK(b->finish(b->context, &a, err, sizeof err) == 0);
    b->release(b->context, &a);

    /* release without finish (a failed load) drops the fill mapping with the memfd */
    CHECK(b->allocate(b->context, 0, page, &a, err, sizeof err) == 0);
    CHECK(b->map_for_fill(b->context, &a, err, sizeof err) != NULL);
    b->release(b->context, &a);
    CHECK(a.handle == NULL);
    b->destroy(b->context);
}

/* Runs in a child: touches one byte of map, which must fault. Returns how the child
 * ended: the signal that killed it, or 0 when it read the byte and exited. */
static int touch_in_child(const volatile unsigned char *map)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* the default action, whatever a sanitizer installed */
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = SIG_DFL;
        sigaction(SIGBUS, &action, NULL);
        unsigned char byte = map[0];
        (void)byte;
        _exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

/* The export is read-only and release() revokes the memory from a consumer that
 * kept its descriptor and mapping past its lease (docs/preload-handoff.md). */
TEST(release_revokes_a_kept_descriptor_and_mapping)
{
    tg_device_backend *b = tg_preload_host_backend();
    CHECK(b != NULL);
    if (b == NULL)
        return;
    uint64_t page = page_size();
    char err[256] = "";
    tg_device_allocation a;
    CHECK(b->allocate(b->context, 0, 4 * page, &a, err, sizeof err) == 0);
    unsigned char block[4096];
    memset(block, 0x77, sizeof block);
    for (uint64_t at = 0; at < 4 * page; at += sizeof block)
        CHECK(b->copy(b->context, &a, at, block, sizeof block, 0, err, sizeof err) == 0);
    CHECK(b->finish(b->context, &a, err, sizeof err) == 0);
    int fd = b->export_fd(b->context, &a, err, sizeof err);
    CHECK(fd >= 0);
    if (fd < 0) {
        b->release(b->context, &a);
        b->destroy(b->context);
        return;
    }
    /* what the consumer may and may not do with its descriptor */
    CHECK((fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY);
    CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    CHECK(pwrite(fd, "x", 1, 0) == -1);
    CHECK(ftruncate(fd, 0) == -1); /* the server alone may shrink it */
    CHECK(ftruncate(fd, (off_t)(8 * page)) == -1);
    CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == -1); /* nor pin it by sealing */
    CHECK(mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED);
    volatile unsigned char *map = mmap(NULL, 4 * page, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(map != MAP_FAILED);
    if (map == MAP_FAILED) {
        close(fd);
        b->release(b->context, &a);
        b->destroy(b->context);
        return;
    }
    CHECK(map[0] == 0x77 && map[4 * page - 1] == 0x77);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && (uint64_t)st.st_size == 4 * page && st.st_blocks > 0);
    CHECK(touch_in_child(map) == 0); /* while held, the mapping reads */

    b->release(b->context, &a);
    /* the kept descriptor names nothing now, and its pages are gone */
    CHECK(fstat(fd, &st) == 0 && st.st_size == 0 && st.st_blocks == 0);
    char byte;
    CHECK(pread(fd, &byte, 1, 0) == 0);
    CHECK(touch_in_child(map) == SIGBUS);
    munmap((void *)map, 4 * page);
    close(fd);
    b->destroy(b->context);
}

/* Each allocation is its own memfd: releasing one leaves another's bytes. */
TEST(allocations_are_independent)
{
    tg_device_backend *b = tg_preload_host_backend();
    CHECK(b != NULL);
    if (b == NULL)
        return;
    char err[256] = "";
    tg_device_allocation one, two;
    CHECK(b->allocate(b->context, 0, 10, &one, err, sizeof err) == 0);
    CHECK(b->allocate(b->context, 0, 10, &two, err, sizeof err) == 0);
    CHECK(b->copy(b->context, &one, 0, "first", 5, 0, err, sizeof err) == 0);
    CHECK(b->copy(b->context, &two, 0, "other", 5, 0, err, sizeof err) == 0);
    b->release(b->context, &one);
    int fd = b->export_fd(b->context, &two, err, sizeof err);
    CHECK(fd >= 0);
    if (fd >= 0) {
        char back[5];
        CHECK(pread(fd, back, 5, 0) == 5 && memcmp(back, "other", 5) == 0);
        close(fd);
    }
    b->release(b->context, &two);
    b->destroy(b->context);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(one_host_device);
    RUN(allocation_sizes_and_refusals);
    RUN(copy_fills_and_stays_inside);
    RUN(fill_map_then_finish_seals);
    RUN(release_revokes_a_kept_descriptor_and_mapping);
    RUN(allocations_are_independent);
    return test_report(argv[0]);
}
