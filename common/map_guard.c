#include "map_guard.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

static _Thread_local tg_map_guard *current;
static struct sigaction previous;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_errno;

static void on_sigbus(int signo, siginfo_t *info, void *context)
{
    tg_map_guard *guard = current;
    if (guard != NULL && info != NULL) {
        uintptr_t at = (uintptr_t)info->si_addr, lo = (uintptr_t)guard->base;
        if (at >= lo && at - lo < guard->len) {
            current = NULL;
            siglongjmp(guard->env, 1);
        }
    }
    /* not ours: the handler from before, or the default action (the faulting load
     * runs again on return and dies of it) */
    if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != NULL) {
        previous.sa_sigaction(signo, info, context);
        return;
    }
    if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN &&
        previous.sa_handler != NULL) {
        previous.sa_handler(signo);
        return;
    }
    signal(SIGBUS, SIG_DFL);
}

static void install(void)
{
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGBUS, &action, &previous) != 0)
        init_errno = errno != 0 ? errno : EINVAL;
}

int tg_map_guard_init(void)
{
    pthread_once(&once, install);
    if (init_errno != 0) {
        errno = init_errno;
        return -1;
    }
    return 0;
}

void tg_map_guard_enter(tg_map_guard *guard, const void *base, size_t len)
{
    guard->base = base;
    guard->len = len;
    current = guard;
    atomic_signal_fence(memory_order_seq_cst); /* set before the region's loads */
}

void tg_map_guard_leave(void)
{
    atomic_signal_fence(memory_order_seq_cst); /* after the region's loads */
    current = NULL;
}
