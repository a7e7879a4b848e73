/* Unit tests for common/test_hooks.c in its test build (the unit tests link the
 * -DTG_TEST_HOOKS object): every hook is named TENSORGATE_TEST_*, once, and reads
 * its variable; an empty one is unset. tests/cli/run.sh checks the other half: no
 * hook's name is in the production binary. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_hooks.h"

TEST(hooks_are_compiled_in_and_named)
{
    CHECK(tg_test_hooks_compiled());
    for (int i = 0; i < TG_HOOK_COUNT; i++) {
        const char *name = tg_test_hook_name((tg_test_hook_id)i);
        CHECK(name != NULL && strncmp(name, "TENSORGATE_TEST_", 16) == 0);
        for (int j = 0; name != NULL && j < i; j++)
            CHECK(strcmp(name, tg_test_hook_name((tg_test_hook_id)j)) != 0);
    }
    CHECK(tg_test_hook_name(TG_HOOK_COUNT) == NULL);
    CHECK(tg_test_hook(TG_HOOK_COUNT) == NULL);
}

TEST(hooks_read_their_variable)
{
    unsetenv("TENSORGATE_TEST_COMMIT_DELAY_MS");
    CHECK(tg_test_hook(TG_HOOK_COMMIT_DELAY_MS) == NULL);
    setenv("TENSORGATE_TEST_COMMIT_DELAY_MS", "", 1);
    CHECK(tg_test_hook(TG_HOOK_COMMIT_DELAY_MS) == NULL);
    setenv("TENSORGATE_TEST_COMMIT_DELAY_MS", "25", 1);
    const char *value = tg_test_hook(TG_HOOK_COMMIT_DELAY_MS);
    CHECK(value != NULL && strcmp(value, "25") == 0);
    CHECK_STR(tg_test_hook_name(TG_HOOK_PRELOAD_HOLD), "TENSORGATE_TEST_PRELOAD_HOLD");
    unsetenv("TENSORGATE_TEST_COMMIT_DELAY_MS");
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(hooks_are_compiled_in_and_named);
    RUN(hooks_read_their_variable);
    return test_report(argv[0]);
}
