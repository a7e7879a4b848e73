/* The blob store flags (blob_options.h). */
#include "blob_options.h"
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    char url[4200];
    char endpoint[512];
    char region[64];
    char cache_dir[4096];
    tg_blobstore_options options;
} state;

static const char *const flags[][2] = {
    {"--blob-store", "TENSORGATE_BLOB_STORE"},
    {"--s3-endpoint", "TENSORGATE_S3_ENDPOINT"},
    {"--s3-region", "TENSORGATE_S3_REGION"},
    {"--download-redirect", "TENSORGATE_DOWNLOAD_REDIRECT"},
    {"--cache-dir", "TENSORGATE_CACHE_DIR"},
    {"--cache-size", "TENSORGATE_CACHE_SIZE"},
    {"--gc-grace", "TENSORGATE_GC_GRACE"},
};
#define FLAG_COUNT (sizeof flags / sizeof flags[0])

static int copy(char *out, size_t out_len, const char *flag, const char *value, char *err,
                size_t err_len)
{
    if (strlen(value) >= out_len) {
        snprintf(err, err_len, "%s: the value is too long", flag);
        return -1;
    }
    snprintf(out, out_len, "%s", value);
    return 0;
}

static int apply(const char *flag, const char *value, char *err, size_t err_len)
{
    if (strcmp(flag, "--blob-store") == 0) {
        if (value[0] == '\0') {
            snprintf(err, err_len, "--blob-store needs a URL (file:DIR or s3://BUCKET[/PREFIX])");
            return -1;
        }
        return copy(state.url, sizeof state.url, flag, value, err, err_len);
    }
    if (strcmp(flag, "--s3-endpoint") == 0) {
        if (copy(state.endpoint, sizeof state.endpoint, flag, value, err, err_len) != 0)
            return -1;
        state.options.s3_endpoint = state.endpoint;
        return 0;
    }
    if (strcmp(flag, "--s3-region") == 0) {
        if (copy(state.region, sizeof state.region, flag, value, err, err_len) != 0)
            return -1;
        state.options.s3_region = state.region;
        return 0;
    }
    if (strcmp(flag, "--download-redirect") == 0) {
        state.options.download_redirect = strcmp(value, "1") == 0 || strcmp(value, "true") == 0 ||
                                          strcmp(value, "yes") == 0 || strcmp(value, "on") == 0;
        return 0;
    }
    if (strcmp(flag, "--cache-dir") == 0) {
        if (copy(state.cache_dir, sizeof state.cache_dir, flag, value, err, err_len) != 0)
            return -1;
        state.options.cache_dir = state.cache_dir[0] ? state.cache_dir : NULL;
        return 0;
    }
    uint64_t n = 0;
    if (tg_parse_bytes(value, &n) != 0) {
        snprintf(err, err_len, "%s: '%s' is not a number", flag, value);
        return -1;
    }
    if (strcmp(flag, "--cache-size") == 0) {
        state.options.cache_size = n;
    } else {
        state.options.gc_grace = n;
        state.options.gc_grace_set = true;
    }
    return 0;
}

int tg_blob_options_take(int *argc, char **argv, char *err, size_t err_len)
{
    memset(&state, 0, sizeof state);
    for (size_t i = 0; i < FLAG_COUNT; i++) {
        const char *value = getenv(flags[i][1]);
        if (value && value[0] && apply(flags[i][0], value, err, err_len) != 0)
            return -1;
    }
    int kept = 1;
    for (int a = 1; a < *argc; a++) {
        const char *flag = NULL, *value = NULL;
        for (size_t i = 0; i < FLAG_COUNT && flag == NULL; i++) {
            size_t len = strlen(flags[i][0]);
            if (strncmp(argv[a], flags[i][0], len) != 0)
                continue;
            if (argv[a][len] == '=') {
                flag = flags[i][0];
                value = argv[a] + len + 1;
            } else if (argv[a][len] == '\0') {
                flag = flags[i][0];
                if (strcmp(flag, "--download-redirect") == 0) {
                    value = "1";
                } else if (a + 1 >= *argc) {
                    snprintf(err, err_len, "%s needs a value", flag);
                    return -1;
                } else {
                    value = argv[++a];
                }
            }
        }
        if (flag == NULL) {
            argv[kept++] = argv[a];
            continue;
        }
        if (apply(flag, value, err, err_len) != 0)
            return -1;
    }
    argv[kept] = NULL;
    *argc = kept;
    return 0;
}

void tg_blob_options_set_max_blob(uint64_t max_blob)
{
    state.options.max_blob = max_blob;
}

void tg_blob_options_url(const char *data_dir, char *url, size_t url_len)
{
    if (state.url[0])
        snprintf(url, url_len, "%s", state.url);
    else
        snprintf(url, url_len, "file:%s", data_dir);
}

const tg_blobstore_options *tg_blob_options_get(void)
{
    return &state.options;
}

const char *tg_blob_options_usage(void)
{
    return "blob store: [--blob-store file:DIR|s3://BUCKET[/PREFIX]] [--s3-endpoint URL]\n"
           "            [--s3-region REGION] [--download-redirect] [--cache-dir DIR]\n"
           "            [--cache-size BYTES] [--gc-grace SECONDS]\n"
           "  (TENSORGATE_BLOB_STORE, TENSORGATE_S3_ENDPOINT, TENSORGATE_S3_REGION,\n"
           "  TENSORGATE_DOWNLOAD_REDIRECT, TENSORGATE_CACHE_DIR, TENSORGATE_CACHE_SIZE,\n"
           "  TENSORGATE_GC_GRACE). Default: the data directory's blobs. S3 credentials come\n"
           "  from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; the region\n"
           "  from --s3-region, else AWS_REGION, else us-east-1. --gc-grace (default 3600):\n"
           "  gc on an S3 store leaves objects and uploads younger than this alone.\n"
           "  --download-redirect: a GET of a whole file answers 302 to a presigned URL.\n"
           "  --cache-dir/--cache-size (default 256M when a dir is given): a local cache of\n"
           "  ranges read from the S3 store.\n";
}
