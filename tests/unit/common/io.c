/* Unit tests for common/io.c: tg_pread_all and tg_pread_upto on a file (exact reads at
 * offsets, the end of the file: EIO for _all, the count for _upto, an offset past
 * INT64_MAX: EOVERFLOW), short reads from a procfs file that hands out a page per
 * pread, tg_send_all and tg_write_all over a socketpair and a pipe with small buffers
 * drained slowly by another thread while a 1 ms timer interrupts the writer (partial
 * sends and EINTR), a closed peer (EPIPE, no SIGPIPE), and a write that fails. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "io.h"
#include "test.h"

static int temp_file(const void *bytes, size_t len)
{
    char path[] = "/tmp/tg-io-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return -1;
    unlink(path);
    CHECK(tg_write_all(fd, bytes, len) == 0);
    return fd;
}

TEST(pread_file)
{
    char bytes[10000];
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes[i] = (char)(i * 7 + 3);
    int fd = temp_file(bytes, sizeof bytes);
    if (fd < 0)
        return;
    char buf[sizeof bytes];
    CHECK(tg_pread_all(fd, buf, sizeof buf, 0) == 0);
    CHECK(memcmp(buf, bytes, sizeof bytes) == 0);
    memset(buf, 0, sizeof buf);
    CHECK(tg_pread_all(fd, buf, 100, 9900) == 0);
    CHECK(memcmp(buf, bytes + 9900, 100) == 0);
    CHECK(tg_pread_all(fd, buf, 0, 123456) == 0); /* nothing to read */

    /* the file ends first */
    errno = 0;
    CHECK(tg_pread_all(fd, buf, 101, 9900) == -1);
    CHECK_EQ_U64(errno, EIO);
    errno = 0;
    CHECK(tg_pread_all(fd, buf, 1, sizeof bytes) == -1);
    CHECK_EQ_U64(errno, EIO);
    CHECK_EQ_U64(tg_pread_upto(fd, buf, 101, 9900), 100);
    CHECK(memcmp(buf, bytes + 9900, 100) == 0);
    CHECK_EQ_U64(tg_pread_upto(fd, buf, 5, sizeof bytes + 10), 0);
    CHECK_EQ_U64(tg_pread_upto(fd, buf, sizeof buf, 0), sizeof bytes);

    /* offsets off_t cannot hold */
    errno = 0;
    CHECK(tg_pread_all(fd, buf, 1, (uint64_t)INT64_MAX + 1) == -1);
    CHECK_EQ_U64(errno, EOVERFLOW);
    errno = 0;
    CHECK(tg_pread_upto(fd, buf, 1, UINT64_MAX) == -1);
    CHECK_EQ_U64(errno, EOVERFLOW);
    /* pread's own errors come through */
    close(fd);
    errno = 0;
    CHECK(tg_pread_all(fd, buf, 1, 0) == -1);
    CHECK_EQ_U64(errno, EBADF);
    int pipe_fds[2];
    CHECK(pipe(pipe_fds) == 0);
    errno = 0;
    CHECK(tg_pread_upto(pipe_fds[0], buf, 1, 0) == -1);
    CHECK_EQ_U64(errno, ESPIPE);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
}

/* /proc/self/smaps answers one page's worth of lines per pread: reading it whole
 * takes several. */
TEST(pread_short_reads)
{
    int fd = open("/proc/self/smaps", O_RDONLY);
    if (fd < 0) {
        CHECK(errno == ENOENT || errno == EACCES); /* no procfs here */
        return;
    }
    size_t cap = (size_t)8 << 20;
    char *buf = malloc(cap);
    CHECK(buf != NULL);
    if (buf == NULL) {
        close(fd);
        return;
    }
    ssize_t one = pread(fd, buf, cap, 0);
    ssize_t all = tg_pread_upto(fd, buf, cap, 0);
    CHECK(one > 0 && one <= 8192);
    CHECK(all > one);
    CHECK(all > 0 && (size_t)all < cap);
    /* what came back is whole lines, as the kernel writes them */
    if (all > 0)
        CHECK(buf[all - 1] == '\n');
    /* asking for more than there is: EIO, not a short success */
    errno = 0;
    CHECK(tg_pread_all(fd, buf, cap, 0) == -1);
    CHECK_EQ_U64(errno, EIO);
    free(buf);
    close(fd);
}

/* ---- writers interrupted while a slow reader drains ---- */

static atomic_int interrupts;

static void on_alarm(int sig)
{
    (void)sig;
    atomic_fetch_add(&interrupts, 1);
}

typedef struct drain {
    int fd;
    size_t expect;
    unsigned char *got;
    size_t len;
} drain;

/* Reads in small pieces with pauses, so the writer keeps finding a full buffer. */
static void *drain_slowly(void *arg)
{
    drain *d = arg;
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &block, NULL); /* the timer interrupts the writer only */
    while (d->len < d->expect) {
        size_t want = d->expect - d->len < 3000 ? d->expect - d->len : 3000;
        ssize_t n = read(d->fd, d->got + d->len, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        d->len += (size_t)n;
        /* slower than the writer: it blocks on a full buffer most of the time */
        nanosleep(&(struct timespec){0, 500 * 1000}, NULL);
    }
    return NULL;
}

static void start_timer(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a blocked write or send ends early */
    CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
    struct itimerval every_ms = {{0, 1000}, {0, 1000}};
    CHECK(setitimer(ITIMER_REAL, &every_ms, NULL) == 0);
}

static void stop_timer(void)
{
    struct itimerval off = {{0, 0}, {0, 0}};
    CHECK(setitimer(ITIMER_REAL, &off, NULL) == 0);
    signal(SIGALRM, SIG_IGN);
}

static unsigned char *pattern(size_t len)
{
    unsigned char *p = malloc(len);
    CHECK(p != NULL);
    for (size_t i = 0; p != NULL && i < len; i++)
        p[i] = (unsigned char)(i * 131 + i / 977);
    return p;
}

/* Writes len bytes through write_fd (send or write), then closes it, while another
 * thread drains read_fd slowly; the reader must get every byte in order. */
static void write_through(int write_fd, int read_fd, bool use_send)
{
    size_t len = (size_t)512 << 10;
    unsigned char *bytes = pattern(len);
    drain d = {read_fd, len, malloc(len), 0};
    CHECK(d.got != NULL);
    if (bytes == NULL || d.got == NULL) {
        free(bytes);
        free(d.got);
        close(write_fd);
        return;
    }
    pthread_t reader;
    CHECK(pthread_create(&reader, NULL, drain_slowly, &d) == 0);
    atomic_store(&interrupts, 0);
    start_timer();
    /* several calls, each larger than the buffers, so each blocks part way */
    int rc = 0;
    for (size_t done = 0; done < len && rc == 0;) {
        size_t piece = len - done < 100000 ? len - done : 100000;
        rc = use_send ? tg_send_all(write_fd, bytes + done, piece)
                      : tg_write_all(write_fd, bytes + done, piece);
        done += piece;
    }
    stop_timer();
    CHECK_EQ_U64(rc, 0);
    close(write_fd); /* the reader sees the end even when a write failed */
    pthread_join(reader, NULL);
    CHECK_EQ_U64(d.len, len);
    CHECK(memcmp(d.got, bytes, len) == 0);
    /* the timer did fire while the writer ran (a blocked send or write it
     * interrupted came back early or with EINTR, and was carried on) */
    CHECK(atomic_load(&interrupts) > 0);
    free(bytes);
    free(d.got);
}

TEST(send_partial)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    int small = 4096;
    CHECK(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small) == 0);
    CHECK(setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small) == 0);
    write_through(sv[0], sv[1], true);
    close(sv[1]);
}

TEST(write_partial)
{
    int p[2];
    CHECK(pipe(p) == 0);
    (void)fcntl(p[1], F_SETPIPE_SZ, 4096); /* the smallest pipe there is */
    write_through(p[1], p[0], false);
    close(p[0]);
    /* tg_write_all writes to a socket too */
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    int small = 4096;
    CHECK(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small) == 0);
    write_through(sv[0], sv[1], false);
    close(sv[1]);
}

TEST(closed_peer)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    close(sv[1]);
    /* MSG_NOSIGNAL: an error, and this process is still here to see it */
    errno = 0;
    CHECK(tg_send_all(sv[0], "hello", 5) == -1);
    CHECK_EQ_U64(errno, EPIPE);
    close(sv[0]);
    CHECK(tg_send_all(sv[0], "x", 1) == -1); /* closed descriptor */
    CHECK_EQ_U64(errno, EBADF);
    CHECK(tg_send_all(sv[0], "", 0) == 0); /* nothing to send */

    /* write to a descriptor open for reading */
    int fd = open("/dev/null", O_RDONLY);
    CHECK(fd >= 0);
    errno = 0;
    CHECK(tg_write_all(fd, "x", 1) == -1);
    CHECK_EQ_U64(errno, EBADF);
    close(fd);
    /* a full disk */
    fd = open("/dev/full", O_WRONLY);
    if (fd >= 0) {
        errno = 0;
        CHECK(tg_write_all(fd, "x", 1) == -1);
        CHECK_EQ_U64(errno, ENOSPC);
        close(fd);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(pread_file);
    RUN(pread_short_reads);
    RUN(send_partial);
    RUN(write_partial);
    RUN(closed_peer);
    return test_report(argv[0]);
}
