/* The test hooks (test_hooks.h): the list of them, compiled in only with
 * -DTG_TEST_HOOKS (the Makefile's test build of this one file). */
#include "test_hooks.h"

#include <stddef.h>
#include <stdlib.h>

#ifdef TG_TEST_HOOKS

/* Each hook: its variable, what it does, and the tests that set it. */
static const struct {
    const char *name;
    const char *does;
    const char *used_by;
} hooks[TG_HOOK_COUNT] = {
    [TG_HOOK_SHA256_FAIL] = {"TENSORGATE_TEST_SHA256_FAIL",
                             "the Nth SHA-256 named WHAT fails (read once, at the first hash)",
                             "tests/integration/digests.c, tests/unit/server/ingest/pipeline.c"},
    [TG_HOOK_ENOSPC_AT] = {"TENSORGATE_TEST_ENOSPC_AT",
                           "the Nth write of the local blob store fails with ENOSPC (read once)",
                           "tests/integration/storage_faults.c"},
    [TG_HOOK_S3_MAX_COPY] = {"TENSORGATE_TEST_S3_MAX_COPY",
                             "lowers the S3 CopyObject limit so UploadPartCopy runs on small "
                             "objects (read at each copy)",
                             "tests/unit/server/storage/blobstore_s3.c"},
    [TG_HOOK_S3_PART_FAIL] = {"TENSORGATE_TEST_S3_PART_FAIL",
                              "part N of every S3 multipart upload is sent to an upload id "
                              "that does not exist, which the store refuses (read at each part)",
                              "tests/unit/server/storage/blobstore_s3.c"},
    [TG_HOOK_COMMIT_DELAY_MS] = {"TENSORGATE_TEST_COMMIT_DELAY_MS",
                                 "an upload waits this long (at most 10 s) between its blob's "
                                 "commit and its catalog row",
                                 "tests/integration/models.c"},
    [TG_HOOK_CONVERT_DELAY_MS] = {"TENSORGATE_TEST_CONVERT_DELAY_MS",
                                  "a conversion sleeps this long (at most 10 s) after each "
                                  "64 KiB step (read when the job pool starts)",
                                  "tests/integration/convert.c, resources.c, tenancy.c, "
                                  "pg_replicas.c; tests/scale/dist.py"},
    [TG_HOOK_PRELOAD_HOLD] = {"TENSORGATE_TEST_PRELOAD_HOLD",
                              "while this file exists (at most 20 s) a preload's load waits "
                              "before it becomes resident",
                              "tests/integration/preload_tenancy.c"},
};

const char *tg_test_hook(tg_test_hook_id hook)
{
    if ((unsigned)hook >= TG_HOOK_COUNT)
        return NULL;
    const char *value = getenv(hooks[hook].name);
    return value != NULL && value[0] != '\0' ? value : NULL;
}

bool tg_test_hooks_compiled(void)
{
    return true;
}

const char *tg_test_hook_name(tg_test_hook_id hook)
{
    return (unsigned)hook < TG_HOOK_COUNT ? hooks[hook].name : NULL;
}

#else

const char *tg_test_hook(tg_test_hook_id hook)
{
    (void)hook;
    return NULL;
}

bool tg_test_hooks_compiled(void)
{
    return false;
}

const char *tg_test_hook_name(tg_test_hook_id hook)
{
    (void)hook;
    return NULL;
}

#endif
