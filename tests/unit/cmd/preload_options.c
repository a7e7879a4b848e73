/* Unit tests for cmd/preload_options.c: the preload flags are taken out of argv
 * (the rest kept in order) in both "--flag VALUE" and "--flag=VALUE" forms,
 * environment variables apply first and flags override them, and bad values are
 * refused with a sentence naming the flag. */
#include <stdlib.h>
#include <string.h>

#include "preload_options.h"
#include "test.h"

TEST(flags_are_taken_and_the_rest_kept)
{
    setenv("TENSORGATE_PRELOAD_BUDGET_HOST", "1M", 1);
    setenv("TENSORGATE_PRELOAD_COPY_THREADS", "2", 1);
    char *argv[] = {"serve",
                    "--listen",
                    "127.0.0.1:0",
                    "--preload-socket",
                    "/tmp/p.sock",
                    "--preload-allow-uid=1000,1001",
                    "--preload-copy-threads",
                    "8",
                    "--preload-fake-devices=2",
                    "--preload-max",
                    "100",
                    "--threads",
                    "4",
                    NULL};
    int argc = 13;
    char err[256] = "";
    CHECK(tg_preload_options_take(&argc, argv, err, sizeof err) == 0);
    CHECK(argc == 5);
    CHECK_STR(argv[1], "--listen");
    CHECK_STR(argv[3], "--threads");
    CHECK(argv[5] == NULL);
    const tg_preload_service_options *o = tg_preload_options_get();
    CHECK_STR(o->socket_path, "/tmp/p.sock");
    CHECK_EQ_U64(o->allowed_count, 2);
    CHECK_EQ_U64(o->allowed_uids[1], 1001);
    CHECK_EQ_U64(o->budget_host, 1u << 20); /* from the environment */
    CHECK_EQ_U64(o->copy_threads, 8);       /* the flag over the environment */
    CHECK_EQ_U64(o->fake_devices, 2);
    CHECK_EQ_U64(o->max_preloads, 100);
    CHECK_EQ_U64(o->max_per_namespace, 0);
    unsetenv("TENSORGATE_PRELOAD_BUDGET_HOST");
    unsetenv("TENSORGATE_PRELOAD_COPY_THREADS");
}

TEST(bad_values_are_refused)
{
    static const char *const bad[][2] = {
        {"--preload-copy-threads", "0"},  {"--preload-copy-threads", "65"},
        {"--preload-fake-devices", "17"}, {"--preload-max", "lots"},
        {"--preload-allow-uid", "1,x"},   {"--preload-socket", ""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {"serve", (char *)bad[i][0], (char *)bad[i][1], NULL};
        int argc = 3;
        char err[256] = "";
        CHECK(tg_preload_options_take(&argc, argv, err, sizeof err) == -1);
        CHECK(strncmp(err, bad[i][0], strlen(bad[i][0])) == 0);
    }
    char *argv[] = {"serve", "--preload-max", NULL};
    int argc = 2;
    char err[256] = "";
    CHECK(tg_preload_options_take(&argc, argv, err, sizeof err) == -1);
    CHECK_STR(err, "--preload-max needs a value");
}

TEST(usage_names_every_flag)
{
    const char *usage = tg_preload_options_usage();
    CHECK(strstr(usage, "--preload-socket") != NULL);
    CHECK(strstr(usage, "--preload-max-per-namespace") != NULL);
    CHECK(strstr(usage, "TENSORGATE_PRELOAD_SOCKET") != NULL);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(flags_are_taken_and_the_rest_kept);
    RUN(bad_values_are_refused);
    RUN(usage_names_every_flag);
    return test_report(argv[0]);
}
