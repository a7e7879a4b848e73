/* The test hooks: every environment variable through which a test reaches inside
 * the server (a fault injected, a gap widened), in one list. They exist only in
 * test builds: common/test_hooks.c compiled with -DTG_TEST_HOOKS, which the
 * Makefile links into build/tensorgate-test and the unit tests; the production
 * binary (build/tensorgate, `make`, `make install`, the Dockerfile) links the same
 * file compiled without it, where every hook reads as unset and no hook's name is
 * in the binary. docs/ARCHITECTURE.md ("Test hooks") says which test uses which. */
#ifndef TG_TEST_HOOKS_H
#define TG_TEST_HOOKS_H

#include <stdbool.h>

typedef enum tg_test_hook_id {
    TG_HOOK_SHA256_FAIL,      /* TENSORGATE_TEST_SHA256_FAIL=WHAT:N (common/sha256.h) */
    TG_HOOK_ENOSPC_AT,        /* TENSORGATE_TEST_ENOSPC_AT=N (server/storage/store.h) */
    TG_HOOK_S3_MAX_COPY,      /* TENSORGATE_TEST_S3_MAX_COPY=BYTES (blobstore_s3.c) */
    TG_HOOK_S3_PART_FAIL,     /* TENSORGATE_TEST_S3_PART_FAIL=N (blobstore_s3.c) */
    TG_HOOK_COMMIT_DELAY_MS,  /* TENSORGATE_TEST_COMMIT_DELAY_MS=MS (routes/upload.c) */
    TG_HOOK_CONVERT_DELAY_MS, /* TENSORGATE_TEST_CONVERT_DELAY_MS=MS (jobs/jobs.h) */
    TG_HOOK_PRELOAD_HOLD,     /* TENSORGATE_TEST_PRELOAD_HOLD=PATH (preload/preload_service.c) */
    TG_HOOK_COUNT
} tg_test_hook_id;

/* The hook's value: its environment variable when set and not empty, read at each
 * call (the caller decides whether once or each time). NULL when unset, and always
 * in a production build. */
const char *tg_test_hook(tg_test_hook_id hook);

/* True in a test build (the hooks are compiled in). */
bool tg_test_hooks_compiled(void);

/* The hook's environment variable; NULL in a production build. */
const char *tg_test_hook_name(tg_test_hook_id hook);

#endif
