/* Unit tests for the one option table of `tensorgate serve` (cmd/serve_options.c
 * over common/options.c): every option of every module has an environment
 * variable and appears in --help with it; no flag or variable is declared twice;
 * one parser applies flag > environment > default across the server's, the
 * preload service's and the blob store's rows. */
#include <stdlib.h>
#include <string.h>

#include "blob_options.h"
#include "config.h"
#include "options.h"
#include "preload_options.h"
#include "serve_options.h"
#include "test.h"

static tg_config scratch;

static size_t tables(tg_option_table out[3])
{
    out[0] = tg_config_option_table(&scratch);
    out[1] = tg_preload_option_table();
    out[2] = tg_blob_option_table();
    return 3;
}

/* True when usage names text as a whole word (not a prefix of a longer name). */
static bool names(const char *usage, const char *text)
{
    size_t len = strlen(text);
    for (const char *p = strstr(usage, text); p != NULL; p = strstr(p + 1, text)) {
        char after = p[len];
        if (!(after == '_' || after == '-' || (after >= 'A' && after <= 'Z') ||
              (after >= 'a' && after <= 'z')))
            return true;
    }
    return false;
}

TEST(every_option_has_an_environment_name_and_is_in_help)
{
    tg_option_table t[3];
    size_t n = tables(t);
    const char *usage = tg_serve_usage();
    size_t rows = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(t[i].count > 0);
        for (size_t j = 0; j < t[i].count; j++) {
            const tg_option_spec *spec = &t[i].specs[j];
            rows++;
            CHECK(spec->env != NULL && spec->env[0] != '\0');
            CHECK(spec->parse != NULL);
            CHECK(spec->help != NULL && spec->help[0] != '\0');
            if (spec->env == NULL)
                continue;
            if (!names(usage, spec->env))
                fprintf(stderr, "not in --help: %s\n", spec->env);
            CHECK(names(usage, spec->env));
            if (spec->flag != NULL) {
                CHECK(strncmp(spec->flag, "--", 2) == 0);
                CHECK(names(usage, spec->flag));
            }
        }
    }
    CHECK(rows >= 33 + 8 + 13);
}

TEST(no_flag_or_variable_is_declared_twice)
{
    tg_option_table t[3];
    size_t n = tables(t);
    for (size_t a = 0; a < n; a++)
        for (size_t i = 0; i < t[a].count; i++)
            for (size_t b = a; b < n; b++)
                for (size_t j = (a == b ? i + 1 : 0); j < t[b].count; j++) {
                    const tg_option_spec *x = &t[a].specs[i], *y = &t[b].specs[j];
                    CHECK(strcmp(x->env, y->env) != 0);
                    CHECK(x->flag == NULL || y->flag == NULL || strcmp(x->flag, y->flag) != 0);
                }
}

TEST(one_parser_flag_over_environment_over_default)
{
    tg_config config;
    tg_config_defaults(&config);
    char err[256] = "";
    setenv("TENSORGATE_THREADS", "3", 1);
    setenv("TENSORGATE_PRELOAD_MAX", "7", 1);
    setenv("TENSORGATE_PRELOAD_COPY_THREADS", "5", 1);
    setenv("TENSORGATE_S3_REGION", "eu-west-1", 1);
    setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
    char *argv[] = {"serve", "--preload-max=9",     "--s3-region", "us-west-2", "--timeout",
                    "7",     "--download-redirect", NULL};
    CHECK(tg_serve_options_load(&config, 7, argv, err, sizeof err) == 0);
    CHECK_EQ_U64(config.threads, 3);            /* environment */
    CHECK_EQ_U64(config.connection_timeout, 7); /* flag */
    CHECK_EQ_U64(config.max_jobs, 1000);        /* default */
    const tg_preload_options *preload = tg_preload_options_get();
    CHECK_EQ_U64(preload->max_preloads, 9); /* the flag wins */
    CHECK_EQ_U64(preload->copy_threads, 5);
    const tg_blobstore_options *blob = tg_blob_options_get();
    CHECK_STR(blob->s3_region, "us-west-2");
    CHECK_STR(blob->s3_access_key_id, "AKID");
    CHECK(blob->download_redirect);
    CHECK(blob->s3_secret_access_key == NULL);
    unsetenv("TENSORGATE_THREADS");
    unsetenv("TENSORGATE_PRELOAD_MAX");
    unsetenv("TENSORGATE_PRELOAD_COPY_THREADS");
    unsetenv("TENSORGATE_S3_REGION");
    unsetenv("AWS_ACCESS_KEY_ID");
}

/* AWS_REGION is the region when neither --s3-region nor TENSORGATE_S3_REGION is set;
 * the S3 timeouts are environment only, and a bad one leaves the default. */
TEST(region_fallback_and_timeouts)
{
    tg_config config;
    tg_config_defaults(&config);
    char err[256] = "";
    setenv("AWS_REGION", "ap-south-1", 1);
    setenv("TENSORGATE_S3_CONNECT_TIMEOUT", "9", 1);
    setenv("TENSORGATE_S3_LOW_SPEED_TIME", "soon", 1);
    char *argv[] = {"serve", NULL};
    CHECK(tg_serve_options_load(&config, 1, argv, err, sizeof err) == 0);
    CHECK_STR(tg_blob_options_get()->s3_region, "ap-south-1");
    CHECK(tg_blob_options_get()->s3_connect_timeout == 9);
    CHECK(tg_blob_options_get()->s3_low_speed_time == 0);
    setenv("TENSORGATE_S3_REGION", "eu-west-1", 1);
    CHECK(tg_serve_options_load(&config, 1, argv, err, sizeof err) == 0);
    CHECK_STR(tg_blob_options_get()->s3_region, "eu-west-1");
    unsetenv("AWS_REGION");
    unsetenv("TENSORGATE_S3_REGION");
    unsetenv("TENSORGATE_S3_CONNECT_TIMEOUT");
    unsetenv("TENSORGATE_S3_LOW_SPEED_TIME");
}

TEST(errors_and_help)
{
    tg_config config;
    tg_config_defaults(&config);
    char err[256] = "";
    char *unknown[] = {"serve", "--preload-sockets", "x", NULL};
    CHECK(tg_serve_options_load(&config, 3, unknown, err, sizeof err) == -1);
    CHECK(strstr(err, "unknown argument '--preload-sockets'") != NULL);
    char *range[] = {"serve", "--preload-copy-threads", "65", NULL};
    CHECK(tg_serve_options_load(&config, 3, range, err, sizeof err) == -1);
    CHECK(strstr(err, "--preload-copy-threads: '65' is out of range") != NULL);
    char *missing[] = {"serve", "--gc-grace", NULL};
    CHECK(tg_serve_options_load(&config, 2, missing, err, sizeof err) == -1);
    CHECK(strstr(err, "--gc-grace needs a value") != NULL);
    setenv("TENSORGATE_PRELOAD_ALLOW_UID", "1,x", 1);
    char *plain[] = {"serve", NULL};
    CHECK(tg_serve_options_load(&config, 1, plain, err, sizeof err) == -1);
    CHECK(strstr(err, "TENSORGATE_PRELOAD_ALLOW_UID: '1,x' is not a list") != NULL);
    unsetenv("TENSORGATE_PRELOAD_ALLOW_UID");
    char *help[] = {"serve", "--threads", "2", "--help", NULL};
    CHECK(tg_serve_options_load(&config, 4, help, err, sizeof err) == 1);
    const char *usage = tg_serve_usage();
    CHECK(strncmp(usage, "usage: tensorgate serve [--listen HOST:PORT]", 44) == 0);
    CHECK(strstr(usage, "[--preload-allow-uid UID,...]") != NULL);
    CHECK(strstr(usage, "[--download-redirect]") != NULL);
    CHECK(strstr(usage, "AWS_SECRET_ACCESS_KEY (environment only)") != NULL);
    CHECK(strstr(usage, "default: --gc-grace 3600") != NULL);
    char small[64];
    tg_option_table t[3];
    CHECK(tg_options_usage("x", t, tables(t), small, sizeof small) == -1);
    CHECK(strlen(small) < sizeof small);
}

int main(int argc, char **argv)
{
    (void)argc;
    static const char *const cleared[] = {"TENSORGATE_THREADS",
                                          "TENSORGATE_TIMEOUT",
                                          "TENSORGATE_MAX_JOBS",
                                          "TENSORGATE_PRELOAD_MAX",
                                          "TENSORGATE_PRELOAD_COPY_THREADS",
                                          "TENSORGATE_S3_REGION",
                                          "AWS_REGION",
                                          "AWS_ACCESS_KEY_ID",
                                          "AWS_SECRET_ACCESS_KEY",
                                          "TENSORGATE_DOWNLOAD_REDIRECT"};
    for (size_t i = 0; i < sizeof cleared / sizeof cleared[0]; i++)
        unsetenv(cleared[i]);
    RUN(every_option_has_an_environment_name_and_is_in_help);
    RUN(no_flag_or_variable_is_declared_twice);
    RUN(one_parser_flag_over_environment_over_default);
    RUN(region_fallback_and_timeouts);
    RUN(errors_and_help);
    return test_report(argv[0]);
}
