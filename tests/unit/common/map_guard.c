/* Unit tests for common/map_guard.c: a shared mapping of a file cut short under it.
 * A guarded load past the end jumps back with the process alive, on the main thread and
 * on others at once, again and again; the guard lets every other SIGBUS through (an
 * address outside the region, a load after leaving it, another thread's load), which
 * a forked child shows by dying of it. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io.h"
#include "map_guard.h"
#include "test.h"

#define PAGES 8

static size_t page;

/* A file of PAGES pages, mapped whole, then cut to its first page: *map_out. */
static int cut_mapping(unsigned char **map_out)
{
    char path[] = "/tmp/tg-map-guard-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return -1;
    unlink(path);
    unsigned char *bytes = malloc(PAGES * page);
    for (size_t i = 0; i < PAGES * page; i++)
        bytes[i] = (unsigned char)(i * 13 + 1);
    CHECK(tg_write_all(fd, bytes, PAGES * page) == 0);
    free(bytes);
    void *map = mmap(NULL, PAGES * page, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(map != MAP_FAILED);
    CHECK(ftruncate(fd, (off_t)page) == 0);
    *map_out = map;
    return fd;
}

/* Sums len bytes at at inside a guarded region over [map, map + PAGES * page): the
 * sum, or -1 when a load faulted. */
static long guarded_sum(const unsigned char *map, size_t at, size_t len)
{
    tg_map_guard guard;
    if (sigsetjmp(guard.env, 0) != 0) {
        tg_map_guard_leave();
        return -1;
    }
    tg_map_guard_enter(&guard, map, PAGES * page);
    long sum = 0;
    for (size_t i = 0; i < len; i++)
        sum += ((const volatile unsigned char *)map)[at + i];
    tg_map_guard_leave();
    return sum;
}

TEST(fault_in_region_is_an_error)
{
    CHECK(tg_map_guard_init() == 0);
    CHECK(tg_map_guard_init() == 0); /* once */
    unsigned char *map;
    int fd = cut_mapping(&map);
    if (fd < 0)
        return;
    long first = 0;
    for (size_t i = 0; i < page; i++)
        first += (unsigned char)(i * 13 + 1);
    CHECK(guarded_sum(map, 0, page) == first);
    /* past the end, many times over: each one an error, the process alive */
    for (int i = 0; i < 1000; i++)
        CHECK(guarded_sum(map, page + (size_t)(i % (PAGES - 1)) * page, 16) == -1);
    /* a read that starts in the file and runs past it */
    CHECK(guarded_sum(map, page - 8, 64) == -1);
    /* and the file's bytes still read */
    CHECK(guarded_sum(map, 0, page) == first);
    munmap(map, PAGES * page);
    close(fd);
}

typedef struct worker {
    unsigned char *map;
    int faults, fine;
} worker;

static void *fault_loop(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < 2000; i++) {
        if (guarded_sum(w->map, (i % 2) ? page * 3 : 0, 64) == -1)
            w->faults++;
        else
            w->fine++;
    }
    return NULL;
}

TEST(threads_each_have_their_region)
{
    unsigned char *map;
    int fd = cut_mapping(&map);
    if (fd < 0)
        return;
    worker w[4];
    pthread_t threads[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){map, 0, 0};
        CHECK(pthread_create(&threads[i], NULL, fault_loop, &w[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
        CHECK_EQ_U64(w[i].faults, 1000);
        CHECK_EQ_U64(w[i].fine, 1000);
    }
    munmap(map, PAGES * page);
    close(fd);
}

/* In a child: a SIGBUS the guard must not take. The child exits 0 only if it survived. */
static bool child_dies(int how)
{
    pid_t pid = fork();
    if (pid == 0) {
        unsigned char *map;
        if (cut_mapping(&map) < 0)
            _exit(3);
        int null = open("/dev/null", O_WRONLY); /* the report of the fault is expected */
        if (null >= 0)
            dup2(null, 2);
        tg_map_guard_init();
        tg_map_guard guard;
        if (sigsetjmp(guard.env, 0) != 0)
            _exit(0); /* taken: wrong */
        volatile unsigned char sink = 0;
        if (how == 0) {
            /* a region over the first page only; the fault is beyond it */
            tg_map_guard_enter(&guard, map, page);
            sink = map[3 * page];
        } else {
            /* the region was left before the load */
            tg_map_guard_enter(&guard, map, PAGES * page);
            tg_map_guard_leave();
            sink = map[3 * page];
        }
        (void)sink;
        _exit(0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    /* killed by SIGBUS, or (under ASan, whose handler comes before) a failing exit */
    return (WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS) ||
           (WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 3);
}

TEST(other_faults_pass_through)
{
    CHECK(child_dies(0));
    CHECK(child_dies(1));
}

int main(int argc, char **argv)
{
    (void)argc;
    long size = sysconf(_SC_PAGESIZE);
    page = size > 0 ? (size_t)size : 4096;
    RUN(fault_in_region_is_an_error);
    RUN(threads_each_have_their_region);
    RUN(other_faults_pass_through);
    return test_report(argv[0]);
}
