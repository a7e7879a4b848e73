/* Unit tests for server/preload/preload_options.c: the preload service's rows of
 * the option table, their environment variables, bounds and error sentences. */
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "preload_options.h"
#include "test.h"

static int load(int argc, char **argv, char *err, size_t err_len)
{
    tg_option_table table = tg_preload_option_table();
    return tg_options_load(&table, 1, &argc, argv, false, err, err_len);
}

TEST(flags_environment_and_defaults)
{
    char err[256] = "";
    setenv("TENSORGATE_PRELOAD_BUDGET_HOST", "2G", 1);
    setenv("TENSORGATE_PRELOAD_MAX", "100", 1);
    char *argv[] = {"serve",
                    "--preload-socket",
                    "/tmp/p.sock",
                    "--preload-allow-uid=1000,1001",
                    "--preload-max",
                    "50",
                    "--preload-fake-devices",
                    "2",
                    NULL};
    CHECK(load(8, argv, err, sizeof err) == 0);
    const tg_preload_options *o = tg_preload_options_get();
    CHECK_STR(o->socket_path, "/tmp/p.sock");
    CHECK(o->allowed_count == 2 && o->allowed_uids[0] == 1000 && o->allowed_uids[1] == 1001);
    CHECK_EQ_U64(o->budget_host, 2ULL << 30);
    CHECK_EQ_U64(o->max_preloads, 50); /* the flag wins */
    CHECK_EQ_U64(o->fake_devices, 2);
    CHECK_EQ_U64(o->copy_threads, 0); /* the manager's default */
    unsetenv("TENSORGATE_PRELOAD_BUDGET_HOST");
    unsetenv("TENSORGATE_PRELOAD_MAX");
    char *plain[] = {"serve", NULL};
    CHECK(load(1, plain, err, sizeof err) == 0);
    CHECK(o->socket_path[0] == '\0' && o->allowed_count == 0 && o->max_preloads == 0);
}

TEST(bad_values_are_refused)
{
    char err[256] = "";
    char *a[] = {"serve", "--preload-copy-threads", "0", NULL};
    CHECK(load(3, a, err, sizeof err) == -1);
    CHECK_STR(err, "--preload-copy-threads: '0' is out of range");
    char *b[] = {"serve", "--preload-max-per-namespace", "4097", NULL};
    CHECK(load(3, b, err, sizeof err) == -1);
    CHECK_STR(err, "--preload-max-per-namespace: '4097' is out of range");
    char *c[] = {"serve", "--preload-budget-cuda", "much", NULL};
    CHECK(load(3, c, err, sizeof err) == -1);
    CHECK_STR(err, "--preload-budget-cuda: 'much' is not a number");
    char *d[] = {"serve", "--preload-socket=", NULL};
    CHECK(load(2, d, err, sizeof err) == -1);
    CHECK_STR(err, "--preload-socket: the path is empty or too long");
    char *e[] = {"serve", "--preload-allow-uid", "1,,2", NULL};
    CHECK(load(3, e, err, sizeof err) == -1);
    CHECK(strstr(err, "--preload-allow-uid: '1,,2' is not a list of at most") != NULL);
    char *f[] = {"serve", "--preload-fake-devices", "17", NULL};
    CHECK(load(3, f, err, sizeof err) == -1);
}

int main(int argc, char **argv)
{
    (void)argc;
    static const char *const cleared[] = {
        "TENSORGATE_PRELOAD_SOCKET",       "TENSORGATE_PRELOAD_ALLOW_UID",
        "TENSORGATE_PRELOAD_BUDGET_HOST",  "TENSORGATE_PRELOAD_BUDGET_CUDA",
        "TENSORGATE_PRELOAD_FAKE_DEVICES", "TENSORGATE_PRELOAD_COPY_THREADS",
        "TENSORGATE_PRELOAD_MAX",          "TENSORGATE_PRELOAD_MAX_PER_NAMESPACE"};
    for (size_t i = 0; i < sizeof cleared / sizeof cleared[0]; i++)
        unsetenv(cleared[i]);
    RUN(flags_environment_and_defaults);
    RUN(bad_values_are_refused);
    return test_report(argv[0]);
}
