/* Unit tests for server/core/config.c: flags, environment, HOST:PORT and byte counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "test.h"

TEST(listen_addresses)
{
    char host[64];
    uint16_t port = 1;
    CHECK(tg_parse_listen("127.0.0.1:0", host, sizeof host, &port) == 0);
    CHECK_STR(host, "127.0.0.1");
    CHECK_EQ_U64(port, 0);
    CHECK(tg_parse_listen("[::1]:8080", host, sizeof host, &port) == 0);
    CHECK_STR(host, "::1");
    CHECK_EQ_U64(port, 8080);
    CHECK(tg_parse_listen("localhost:65535", host, sizeof host, &port) == 0);
    CHECK(tg_parse_listen("localhost:65536", host, sizeof host, &port) == -1);
    CHECK(tg_parse_listen("localhost", host, sizeof host, &port) == -1);
    CHECK(tg_parse_listen(":80", host, sizeof host, &port) == -1);
    CHECK(tg_parse_listen("h:8x", host, sizeof host, &port) == -1);
    CHECK(tg_parse_listen("[::1]8080", host, sizeof host, &port) == -1);
}

TEST(byte_counts)
{
    uint64_t v = 0;
    CHECK(tg_parse_bytes("1024", &v) == 0 && v == 1024);
    CHECK(tg_parse_bytes("16M", &v) == 0 && v == 16ULL << 20);
    CHECK(tg_parse_bytes("2GiB", &v) == 0 && v == 2ULL << 30);
    CHECK(tg_parse_bytes("1T", &v) == 0 && v == 1ULL << 40);
    CHECK(tg_parse_bytes("", &v) == -1);
    CHECK(tg_parse_bytes("12Q", &v) == -1);
    CHECK(tg_parse_bytes("-1", &v) == -1);
    CHECK(tg_parse_bytes("99999999999999999999", &v) == -1);
    CHECK(tg_parse_bytes("17179869184G", &v) == -1); /* 2^34 GiB overflows */
}

/* --import-allow: repeatable, added to the environment's comma-separated list; a bad
 * CIDR is an error naming it. */
TEST(import_allow)
{
    tg_config config;
    tg_config_defaults(&config);
    CHECK_EQ_U64(config.import_allow.allow_count, 0);
    setenv("TENSORGATE_IMPORT_ALLOW", "10.0.0.0/8, fd00::/8", 1);
    char err[256] = "";
    char *argv[] = {"serve", "--import-allow", "127.0.0.1/32", "--import-allow=::1", NULL};
    CHECK(tg_config_load(&config, 4, argv, err, sizeof err) == 0);
    CHECK_EQ_U64(config.import_allow.allow_count, 4);
    CHECK(tg_addr_text_forbidden(&config.import_allow, "10.1.2.3") == NULL);
    CHECK(tg_addr_text_forbidden(&config.import_allow, "127.0.0.1") == NULL);
    CHECK(tg_addr_text_forbidden(&config.import_allow, "::1") == NULL);
    CHECK(tg_addr_text_forbidden(&config.import_allow, "192.168.0.1") != NULL);
    unsetenv("TENSORGATE_IMPORT_ALLOW");
    tg_config_defaults(&config);
    char *bad[] = {"serve", "--import-allow", "10.0.0.1/8", NULL};
    CHECK(tg_config_load(&config, 3, bad, err, sizeof err) == -1);
    CHECK(strstr(err, "10.0.0.1/8") != NULL);
    CHECK(strstr(tg_config_usage(), "--import-allow") != NULL);
}

/* --trusted-proxy (repeatable, TENSORGATE_TRUSTED_PROXY comma-separated; none by
 * default) and --public-url (checked and normalised at start). */
TEST(proxy_options)
{
    tg_config config;
    tg_config_defaults(&config);
    CHECK_EQ_U64(config.trusted_proxies.allow_count, 0);
    CHECK_STR(config.public_url, "");
    setenv("TENSORGATE_TRUSTED_PROXY", "10.0.0.0/8,192.168.1.1", 1);
    setenv("TENSORGATE_PUBLIC_URL", "https://env.example", 1);
    char err[512] = "";
    char *argv[] = {"serve", "--trusted-proxy", "127.0.0.1/32", "--public-url=HTTPS://h:8443/tg/",
                    NULL};
    CHECK(tg_config_load(&config, 4, argv, err, sizeof err) == 0);
    CHECK_EQ_U64(config.trusted_proxies.allow_count, 3);
    CHECK_EQ_U64(config.import_allow.allow_count, 0);
    CHECK(tg_addr_policy_lists(&config.trusted_proxies, "10.2.3.4"));
    CHECK(tg_addr_policy_lists(&config.trusted_proxies, "127.0.0.1"));
    CHECK(!tg_addr_policy_lists(&config.trusted_proxies, "127.0.0.2"));
    CHECK_STR(config.public_url, "https://h:8443/tg");
    unsetenv("TENSORGATE_TRUSTED_PROXY");
    unsetenv("TENSORGATE_PUBLIC_URL");
    tg_config_defaults(&config);
    char *bad_url[] = {"serve", "--public-url", "https://h/x?y", NULL};
    CHECK(tg_config_load(&config, 3, bad_url, err, sizeof err) == -1);
    CHECK(strstr(err, "--public-url") != NULL && strstr(err, "query") != NULL);
    char *bad_cidr[] = {"serve", "--trusted-proxy", "proxy.example", NULL};
    CHECK(tg_config_load(&config, 3, bad_cidr, err, sizeof err) == -1);
    CHECK(strstr(err, "proxy.example") != NULL);
    CHECK(strstr(tg_config_usage(), "--trusted-proxy CIDR") != NULL);
    CHECK(strstr(tg_config_usage(), "TENSORGATE_PUBLIC_URL") != NULL);
}

TEST(flags_override_environment)
{
    tg_config config;
    tg_config_defaults(&config);
    CHECK_STR(config.listen_host, "127.0.0.1");
    CHECK_EQ_U64(config.listen_port, 8080);
    CHECK_STR(config.data_dir, "./data");
    CHECK_EQ_U64(config.per_ip_limit, 64);
    setenv("TENSORGATE_LISTEN", "0.0.0.0:9000", 1);
    setenv("TENSORGATE_DATA", "/srv/tg", 1);
    setenv("TENSORGATE_MAX_BODY", "1G", 1);
    char err[256];
    char *argv1[] = {"serve", "--listen", "127.0.0.1:0", "--auth-read", "--threads=4", NULL};
    CHECK(tg_config_load(&config, 5, argv1, err, sizeof err) == 0);
    CHECK_STR(config.listen_host, "127.0.0.1");
    CHECK_EQ_U64(config.listen_port, 0);
    CHECK_STR(config.data_dir, "/srv/tg");
    CHECK_EQ_U64(config.max_body, 1ULL << 30);
    CHECK(config.auth_read);
    CHECK_EQ_U64(config.threads, 4);
    char *argv2[] = {"serve", "--bogus", NULL};
    CHECK(tg_config_load(&config, 2, argv2, err, sizeof err) == -1);
    CHECK(strstr(err, "--bogus") != NULL);
    char *argv3[] = {"serve", "--threads", "0", NULL};
    CHECK(tg_config_load(&config, 3, argv3, err, sizeof err) == -1);
    char *argv4[] = {"serve", "--data", NULL};
    CHECK(tg_config_load(&config, 2, argv4, err, sizeof err) == -1);
    char *argv5[] = {"serve", "--help", NULL};
    CHECK(tg_config_load(&config, 2, argv5, err, sizeof err) == 1);
    setenv("TENSORGATE_LISTEN", "nonsense", 1);
    CHECK(tg_config_load(&config, 1, argv1, err, sizeof err) == -1);
    unsetenv("TENSORGATE_LISTEN");
    unsetenv("TENSORGATE_DATA");
    unsetenv("TENSORGATE_MAX_BODY");
}

/* --catalog / TENSORGATE_CATALOG name the catalog; --job-lease-seconds its leases. */
TEST(catalog_and_job_lease)
{
    tg_config config;
    tg_config_defaults(&config);
    CHECK_STR(config.catalog_url, "");
    CHECK_EQ_U64(config.job_lease_seconds, 30);
    char err[256];
    setenv("TENSORGATE_CATALOG", "postgresql://tg@db/tensorgate", 1);
    char *argv1[] = {"serve", NULL};
    CHECK(tg_config_load(&config, 1, argv1, err, sizeof err) == 0);
    CHECK_STR(config.catalog_url, "postgresql://tg@db/tensorgate");
    char *argv2[] = {"serve", "--catalog", "sqlite:/srv/c.db", "--job-lease-seconds=5", NULL};
    CHECK(tg_config_load(&config, 4, argv2, err, sizeof err) == 0);
    CHECK_STR(config.catalog_url, "sqlite:/srv/c.db");
    CHECK_EQ_U64(config.job_lease_seconds, 5);
    char *argv3[] = {"serve", "--job-lease-seconds", "1", NULL};
    CHECK(tg_config_load(&config, 3, argv3, err, sizeof err) == -1);
    char *argv4[] = {"serve", "--catalog", "", NULL};
    CHECK(tg_config_load(&config, 3, argv4, err, sizeof err) == -1);
    CHECK(strstr(tg_config_usage(), "--catalog URL") != NULL);
    unsetenv("TENSORGATE_CATALOG");
}

/* --job-workers, --import-timeout, --import-min-rate, --import-rate-window: the
 * job pool and the bounds of imports, with their defaults and ranges. */
TEST(job_pool_and_import_bounds)
{
    tg_config config;
    tg_config_defaults(&config);
    CHECK_EQ_U64(config.job_workers, 2);
    CHECK_EQ_U64(config.import_timeout, 3600);
    CHECK_EQ_U64(config.import_min_rate, 65536);
    CHECK_EQ_U64(config.import_rate_window, 30);
    char err[256];
    setenv("TENSORGATE_JOB_WORKERS", "6", 1);
    char *argv1[] = {"serve", "--import-timeout",     "5", "--import-min-rate",
                     "1M",    "--import-rate-window", "3", NULL};
    CHECK(tg_config_load(&config, 7, argv1, err, sizeof err) == 0);
    CHECK_EQ_U64(config.job_workers, 6);
    CHECK_EQ_U64(config.import_timeout, 5);
    CHECK_EQ_U64(config.import_min_rate, 1 << 20);
    CHECK_EQ_U64(config.import_rate_window, 3);
    char *argv2[] = {"serve", "--job-workers",     "4", "--import-timeout",
                     "0",     "--import-min-rate", "0", NULL};
    CHECK(tg_config_load(&config, 7, argv2, err, sizeof err) == 0);
    CHECK_EQ_U64(config.job_workers, 4); /* the flag wins over the environment */
    CHECK_EQ_U64(config.import_timeout, 0);
    CHECK_EQ_U64(config.import_min_rate, 0);
    unsetenv("TENSORGATE_JOB_WORKERS");
    char *bad[][3] = {{"serve", "--job-workers", "0"},
                      {"serve", "--job-workers", "65"},
                      {"serve", "--import-rate-window", "0"},
                      {"serve", "--import-timeout", "x"},
                      {"serve", "--import-min-rate", "-1"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tg_config_defaults(&config);
        CHECK(tg_config_load(&config, 3, bad[i], err, sizeof err) == -1);
        CHECK(strstr(err, bad[i][1]) != NULL);
    }
    const char *usage = tg_config_usage();
    CHECK(strstr(usage, "[--job-workers N]") != NULL);
    CHECK(strstr(usage, "--job-workers 2") != NULL);
    CHECK(strstr(usage, "--import-timeout 3600") != NULL);
    CHECK(strstr(usage, "--import-min-rate 64K") != NULL);
    CHECK(strstr(usage, "--import-rate-window 30") != NULL);
    CHECK(strstr(usage, "TENSORGATE_JOB_WORKERS") != NULL);
}

/* The server's rows of the option table: each has an environment variable, a
 * help sentence and a line in --help that names both the flag and the variable. */
TEST(every_row_has_an_environment_name_and_is_in_help)
{
    tg_config config;
    tg_config_defaults(&config);
    tg_option_table table = tg_config_option_table(&config);
    const char *usage = tg_config_usage();
    CHECK(table.count >= 33);
    for (size_t i = 0; i < table.count; i++) {
        const tg_option_spec *spec = &table.specs[i];
        CHECK(spec->flag != NULL && spec->env != NULL && spec->help != NULL);
        if (spec->flag == NULL || spec->env == NULL)
            continue;
        CHECK(strncmp(spec->env, "TENSORGATE_", 11) == 0);
        char line[200];
        snprintf(line, sizeof line, "  %s%s%s", spec->flag, spec->metavar ? " " : "",
                 spec->metavar ? spec->metavar : "");
        const char *entry = strstr(usage, line);
        CHECK(entry != NULL);
        const char *end = entry ? strchr(entry, '\n') : NULL;
        const char *env = entry ? strstr(entry, spec->env) : NULL;
        CHECK(env != NULL && end != NULL && env < end);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(listen_addresses);
    RUN(byte_counts);
    RUN(flags_override_environment);
    RUN(catalog_and_job_lease);
    RUN(import_allow);
    RUN(proxy_options);
    RUN(job_pool_and_import_bounds);
    RUN(every_row_has_an_environment_name_and_is_in_help);
    return test_report(argv[0]);
}
