/* Whole reads and writes on descriptors, the one way the server, the commands and
 * the preload client do them: every call retries EINTR and short transfers, and a
 * failure is -1 with errno set. */
#ifndef TG_IO_H
#define TG_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Reads exactly len bytes at offset into buf. 0, or -1 with errno: EIO when the file
 * ends first (it is shorter than its caller was told), EOVERFLOW when the offset to
 * read next passes what off_t holds, EINVAL for len above SSIZE_MAX, or pread's own. */
int tg_pread_all(int fd, void *buf, size_t len, uint64_t offset);

/* Reads len bytes at offset, or fewer when the file ends first: the count read, or
 * -1 with errno (EOVERFLOW, EINVAL for len above SSIZE_MAX, or pread's own). */
ssize_t tg_pread_upto(int fd, void *buf, size_t len, uint64_t offset);

/* Writes all len bytes to fd at its file position. 0, or -1 with errno (write's own;
 * EIO should write ever take nothing). */
int tg_write_all(int fd, const void *buf, size_t len);

/* Sends all len bytes on a socket with MSG_NOSIGNAL, so a closed peer is -1 with
 * EPIPE rather than a SIGPIPE. 0, or -1 with errno (send's own; EPIPE should send
 * ever take nothing). */
int tg_send_all(int fd, const void *buf, size_t len);

#endif
