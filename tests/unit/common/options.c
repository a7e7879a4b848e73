/* Unit tests for common/options.c, the one option parser: the environment, then
 * flags (--flag VALUE, --flag=VALUE, a bare switch); take mode keeps what no table
 * knows, in order; strict mode refuses it and answers --help; a table's reset runs
 * first; --help is written from the rows and never overflows its buffer. */
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "test.h"

typedef struct settings {
    unsigned count;
    uint64_t bytes;
    bool on;
    char name[8];
} settings;

static int resets;

static void reset(void *target)
{
    memset(target, 0, sizeof(settings));
    ((settings *)target)->count = 4; /* the default */
    resets++;
}

static const tg_option_spec rows[] = {
    {"--count", "TG_OPTIONS_TEST_COUNT", "N", tg_option_count, offsetof(settings, count), 1, 9,
     false, "4", "A count from 1 to 9."},
    {"--bytes", "TG_OPTIONS_TEST_BYTES", "BYTES", tg_option_bytes, offsetof(settings, bytes), 0, 0,
     false, NULL, "A byte count."},
    {"--on", "TG_OPTIONS_TEST_ON", NULL, tg_option_switch, offsetof(settings, on), 0, 0, false,
     NULL, "A switch."},
    {"--name", "TG_OPTIONS_TEST_NAME", "NAME", tg_option_text, offsetof(settings, name), 0,
     sizeof(((settings *)0)->name), true, NULL, "A short name."},
    {NULL, "TG_OPTIONS_TEST_SECRET", NULL, tg_option_text, offsetof(settings, name), 0,
     sizeof(((settings *)0)->name), false, NULL, "Environment only."},
};

static settings target;
static const tg_option_table table = {"test", rows, TG_OPTION_COUNT(rows), &target, reset};

TEST(byte_counts_and_switches)
{
    uint64_t v = 0;
    CHECK(tg_options_parse_bytes("0", &v) == 0 && v == 0);
    CHECK(tg_options_parse_bytes("3k", &v) == 0 && v == 3072);
    CHECK(tg_options_parse_bytes("3KiB", &v) == 0 && v == 3072);
    CHECK(tg_options_parse_bytes("3KB", &v) == 0 && v == 3072);
    CHECK(tg_options_parse_bytes("5g", &v) == 0 && v == 5ULL << 30);
    CHECK(tg_options_parse_bytes("3B", &v) == -1);
    CHECK(tg_options_parse_bytes("3Ki3", &v) == -1);
    CHECK(tg_options_parse_bytes("K", &v) == -1);
    CHECK(tg_options_parse_bytes("16777216T", &v) == -1); /* 2^64 */
    CHECK(tg_options_parse_bool("yes") && tg_options_parse_bool("on") &&
          tg_options_parse_bool("1") && tg_options_parse_bool("true"));
    CHECK(!tg_options_parse_bool("0") && !tg_options_parse_bool("no") &&
          !tg_options_parse_bool(""));
}

TEST(environment_then_flags_in_take_mode)
{
    setenv("TG_OPTIONS_TEST_COUNT", "7", 1);
    setenv("TG_OPTIONS_TEST_BYTES", "", 1); /* empty: unset */
    setenv("TG_OPTIONS_TEST_SECRET", "env", 1);
    char *argv[] = {"cmd", "--keep", "--count", "2", "--bytes=1M", "--on", "x", "--help", NULL};
    int argc = 8;
    char err[200] = "";
    resets = 0;
    CHECK(tg_options_load(&table, 1, &argc, argv, true, err, sizeof err) == 0);
    CHECK(resets == 1);
    CHECK_EQ_U64(target.count, 2);
    CHECK_EQ_U64(target.bytes, 1 << 20);
    CHECK(target.on);
    CHECK_STR(target.name, "env");
    CHECK(argc == 4);
    CHECK_STR(argv[1], "--keep");
    CHECK_STR(argv[2], "x");
    CHECK_STR(argv[3], "--help");
    CHECK(argv[4] == NULL);
    unsetenv("TG_OPTIONS_TEST_COUNT");
    unsetenv("TG_OPTIONS_TEST_BYTES");
    unsetenv("TG_OPTIONS_TEST_SECRET");
    char *plain[] = {"cmd", "--on=no", NULL};
    argc = 2;
    CHECK(tg_options_load(&table, 1, &argc, plain, true, err, sizeof err) == 0);
    CHECK_EQ_U64(target.count, 4); /* the reset's default again */
    CHECK(!target.on);
    CHECK(target.name[0] == '\0');
}

TEST(strict_mode_errors_and_help)
{
    char err[200] = "";
    char *unknown[] = {"cmd", "--counts", "1", NULL};
    int argc = 3;
    CHECK(tg_options_load(&table, 1, &argc, unknown, false, err, sizeof err) == -1);
    CHECK_STR(err, "unknown argument '--counts'");
    char *range[] = {"cmd", "--count=10", NULL};
    argc = 2;
    CHECK(tg_options_load(&table, 1, &argc, range, false, err, sizeof err) == -1);
    CHECK_STR(err, "--count: '10' is not a number in 1..9");
    char *missing[] = {"cmd", "--name", NULL};
    argc = 2;
    CHECK(tg_options_load(&table, 1, &argc, missing, false, err, sizeof err) == -1);
    CHECK_STR(err, "--name needs a value");
    char *longname[] = {"cmd", "--name", "12345678", NULL};
    argc = 3;
    CHECK(tg_options_load(&table, 1, &argc, longname, false, err, sizeof err) == -1);
    CHECK_STR(err, "--name: path is empty or too long");
    setenv("TG_OPTIONS_TEST_BYTES", "lots", 1);
    char *none[] = {"cmd", NULL};
    argc = 1;
    CHECK(tg_options_load(&table, 1, &argc, none, false, err, sizeof err) == -1);
    CHECK_STR(err, "TG_OPTIONS_TEST_BYTES: 'lots' is not a byte count");
    unsetenv("TG_OPTIONS_TEST_BYTES");
    char *help[] = {"cmd", "-h", NULL};
    argc = 2;
    CHECK(tg_options_load(&table, 1, &argc, help, false, err, sizeof err) == 1);
}

TEST(usage_from_the_rows)
{
    char out[2048];
    int len = tg_options_usage("cmd", &table, 1, out, sizeof out);
    CHECK(len > 0 && (size_t)len == strlen(out));
    CHECK(strncmp(out, "usage: cmd [--count N] [--bytes BYTES] [--on] [--name NAME]...\n", 63) ==
          0);
    CHECK(strstr(out, "\ntest options:\n") != NULL);
    CHECK(strstr(out, "  --count N  (TG_OPTIONS_TEST_COUNT)  default: --count 4\n") != NULL);
    CHECK(strstr(out, "  --name NAME (repeatable)  (TG_OPTIONS_TEST_NAME)\n") != NULL);
    CHECK(strstr(out, "  TG_OPTIONS_TEST_SECRET (environment only)\n      Environment only.\n") !=
          NULL);
    len = tg_options_usage(NULL, &table, 1, out, sizeof out);
    CHECK(len > 0 && strncmp(out, "test options:\n", 14) == 0);
    for (size_t size = 1; size < 80; size += 13) {
        char small[80];
        memset(small, 'x', sizeof small);
        CHECK(tg_options_usage("cmd", &table, 1, small, size) == -1);
        CHECK(strlen(small) < size);
        CHECK(small[size] == 'x' || size == sizeof small);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(byte_counts_and_switches);
    RUN(environment_then_flags_in_take_mode);
    RUN(strict_mode_errors_and_help);
    RUN(usage_from_the_rows);
    return test_report(argv[0]);
}
