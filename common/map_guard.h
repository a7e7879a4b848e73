/* Reads through a read-only file mapping that survive the file shrinking underneath.
 *
 * A load from a page of a shared file mapping that lies past the file's end raises
 * SIGBUS. Blobs are immutable and never truncated by the server, but a file changed on
 * disk behind its back (an operator, a damaged file system) must cost one request an
 * error, never the process. A guarded region is entered on one thread with the mapping's
 * bounds; a SIGBUS whose fault address lies in those bounds, on that thread, jumps back
 * to the sigsetjmp of the region instead of killing the process. Any other SIGBUS (other
 * address, other thread, no region) goes to the handler that was installed before, or
 * to the default action. Use:
 *
 *     tg_map_guard guard;
 *     if (sigsetjmp(guard.env, 0) != 0) {   // a load in [base, base + len) faulted
 *         tg_map_guard_leave();
 *         ... return an error (EIO) ...
 *     }
 *     tg_map_guard_enter(&guard, base, len);
 *     ... loads from the mapping, no locks taken, no memory allocated ...
 *     tg_map_guard_leave();
 *
 * The handler runs with SA_NODEFER, so the jump needs no signal-mask restore (savemask
 * 0: no system call per region). Code in the region must be async-signal-safe to
 * abandon: plain copies, nothing that holds a lock or owns memory when it faults. */
#ifndef TG_MAP_GUARD_H
#define TG_MAP_GUARD_H

#include <setjmp.h>
#include <stddef.h>

typedef struct tg_map_guard {
    sigjmp_buf env;
    const unsigned char *base; /* the guarded bytes: [base, base + len) */
    size_t len;
} tg_map_guard;

/* Installs the SIGBUS handler once per process (later calls do nothing). 0, or -1 with
 * errno (sigaction's). Callers map only after it succeeded. */
int tg_map_guard_init(void);

/* Enters (leave) the calling thread's guarded region over [base, base + len). */
void tg_map_guard_enter(tg_map_guard *guard, const void *base, size_t len);
void tg_map_guard_leave(void);

#endif
