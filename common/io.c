/* Whole reads and writes (see io.h). */
#include "io.h"

#include <errno.h>
#include <limits.h>
#include <sys/socket.h>
#include <unistd.h>

ssize_t tg_pread_upto(int fd, void *buf, size_t len, uint64_t offset)
{
    if (len > (size_t)SSIZE_MAX) {
        errno = EINVAL;
        return -1;
    }
    size_t done = 0;
    while (done < len) {
        if (offset + done > (uint64_t)INT64_MAX) {
            errno = EOVERFLOW;
            return -1;
        }
        ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(offset + done));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            break; /* the end of the file */
        done += (size_t)n;
    }
    return (ssize_t)done;
}

int tg_pread_all(int fd, void *buf, size_t len, uint64_t offset)
{
    ssize_t n = tg_pread_upto(fd, buf, len, offset);
    if (n < 0)
        return -1;
    if ((size_t)n < len) {
        errno = EIO; /* the file ends before its caller said it does */
        return -1;
    }
    return 0;
}

int tg_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0) {
            errno = EIO;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int tg_send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0) {
            errno = EPIPE;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}
