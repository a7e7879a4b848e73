/* The blob store's rows of the option table (blob_options.h): the store's URL, the
 * S3 endpoint, region, credentials and timeouts, the read cache and gc's grace. */
#include "blob_options.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

typedef struct grace {
    uint64_t seconds;
    bool set;
} grace;

/* What the rows fill; tg_blob_options_get points the store's options into it. */
typedef struct blob_settings {
    char url[4200];
    char endpoint[512];
    char region[64];
    char access_key[1024]; /* longer than the store keeps: it refuses what does not fit */
    char secret_key[1024];
    char session_token[8192];
    char cache_dir[4096];
    long connect_timeout, low_speed_time; /* 0: the store's defaults */
    bool download_redirect;
    uint64_t cache_size;
    grace gc_grace;
} blob_settings;

static blob_settings settings;
static tg_blobstore_options options;

static void reset(void *target)
{
    memset(target, 0, sizeof(blob_settings));
    memset(&options, 0, sizeof options);
}

/* A text that may be empty (the field keeps it; "" is unset). */
static int parse_text(const tg_option_spec *spec, void *field, const char *value,
                      const char *origin, char *err, size_t err_len)
{
    if (strlen(value) >= spec->maximum) {
        snprintf(err, err_len, "%s: the value is too long", origin);
        return -1;
    }
    snprintf(field, spec->maximum, "%s", value);
    return 0;
}

static int parse_url(const tg_option_spec *spec, void *field, const char *value, const char *origin,
                     char *err, size_t err_len)
{
    if (value[0] == '\0') {
        snprintf(err, err_len, "%s needs a URL (file:DIR or s3://BUCKET[/PREFIX])", origin);
        return -1;
    }
    return parse_text(spec, field, value, origin, err, err_len);
}

static int parse_number(const tg_option_spec *spec, void *field, const char *value,
                        const char *origin, char *err, size_t err_len)
{
    (void)spec;
    if (tg_options_parse_bytes(value, field) != 0) {
        snprintf(err, err_len, "%s: '%s' is not a number", origin, value);
        return -1;
    }
    return 0;
}

static int parse_grace(const tg_option_spec *spec, void *field, const char *value,
                       const char *origin, char *err, size_t err_len)
{
    grace *g = field;
    if (parse_number(spec, &g->seconds, value, origin, err, err_len) != 0)
        return -1;
    g->set = true;
    return 0;
}

/* Seconds in minimum..maximum; any other value leaves the default (as the store
 * always did with these two variables). */
static int parse_timeout(const tg_option_spec *spec, void *field, const char *value,
                         const char *origin, char *err, size_t err_len)
{
    (void)origin, (void)err, (void)err_len;
    char *end = NULL;
    long seconds = strtol(value, &end, 10);
    if (end != value && *end == '\0' && seconds >= (long)spec->minimum &&
        seconds <= (long)spec->maximum)
        *(long *)field = seconds;
    return 0;
}

#define FIELD(name) offsetof(blob_settings, name)
#define SIZE_OF(name) sizeof(((blob_settings *)0)->name)

/* AWS_REGION comes before --s3-region, which fills the same field: the flag wins,
 * then TENSORGATE_S3_REGION, then AWS_REGION. */
static const tg_option_spec blob_options[] = {
    {"--blob-store", "TENSORGATE_BLOB_STORE", "file:DIR|s3://BUCKET[/PREFIX]", parse_url,
     FIELD(url), 0, SIZE_OF(url), false, NULL,
     "Where blobs are kept; default: the data directory's blobs."},
    {"--s3-endpoint", "TENSORGATE_S3_ENDPOINT", "URL", parse_text, FIELD(endpoint), 0,
     SIZE_OF(endpoint), false, NULL,
     "scheme://host[:port] of an S3-compatible store; default: AWS's endpoint of the region."},
    {NULL, "AWS_REGION", NULL, parse_text, FIELD(region), 0, SIZE_OF(region), false, NULL,
     "The region when neither --s3-region nor TENSORGATE_S3_REGION is given."},
    {"--s3-region", "TENSORGATE_S3_REGION", "REGION", parse_text, FIELD(region), 0, SIZE_OF(region),
     false, NULL, "The S3 region; default: AWS_REGION, else us-east-1."},
    {NULL, "AWS_ACCESS_KEY_ID", NULL, parse_text, FIELD(access_key), 0, SIZE_OF(access_key), false,
     NULL, "The S3 access key (an s3:// store needs it)."},
    {NULL, "AWS_SECRET_ACCESS_KEY", NULL, parse_text, FIELD(secret_key), 0, SIZE_OF(secret_key),
     false, NULL, "The S3 secret key (an s3:// store needs it)."},
    {NULL, "AWS_SESSION_TOKEN", NULL, parse_text, FIELD(session_token), 0, SIZE_OF(session_token),
     false, NULL, "An S3 session token (temporary credentials)."},
    {NULL, "TENSORGATE_S3_CONNECT_TIMEOUT", NULL, parse_timeout, FIELD(connect_timeout), 1, 3600,
     false, "5", "Seconds to connect to the S3 store (1..3600; another value is ignored)."},
    {NULL, "TENSORGATE_S3_LOW_SPEED_TIME", NULL, parse_timeout, FIELD(low_speed_time), 1, 3600,
     false, "15",
     "Seconds without a byte before an S3 request fails (1..3600; another value is ignored)."},
    {"--download-redirect", "TENSORGATE_DOWNLOAD_REDIRECT", NULL, tg_option_switch,
     FIELD(download_redirect), 0, 0, false, NULL,
     "A GET of a whole file answers 302 to a presigned URL."},
    {"--cache-dir", "TENSORGATE_CACHE_DIR", "DIR", parse_text, FIELD(cache_dir), 0,
     SIZE_OF(cache_dir), false, NULL, "A local cache of ranges read from the S3 store."},
    {"--cache-size", "TENSORGATE_CACHE_SIZE", "BYTES", parse_number, FIELD(cache_size), 0, 0, false,
     "256M", "The bound of --cache-dir (when a dir is given)."},
    {"--gc-grace", "TENSORGATE_GC_GRACE", "SECONDS", parse_grace, FIELD(gc_grace), 0, 0, false,
     "3600", "gc on an S3 store leaves objects and uploads younger than this alone."},
};

tg_option_table tg_blob_option_table(void)
{
    return (tg_option_table){.title = "blob store",
                             .specs = blob_options,
                             .count = TG_OPTION_COUNT(blob_options),
                             .target = &settings,
                             .reset = reset};
}

int tg_blob_options_take(int *argc, char **argv, char *err, size_t err_len)
{
    tg_option_table table = tg_blob_option_table();
    return tg_options_load(&table, 1, argc, argv, true, err, err_len);
}

void tg_blob_options_set_max_blob(uint64_t max_blob)
{
    options.max_blob = max_blob;
}

void tg_blob_options_url(const char *data_dir, char *url, size_t url_len)
{
    if (settings.url[0])
        snprintf(url, url_len, "%s", settings.url);
    else
        snprintf(url, url_len, "file:%s", data_dir);
}

static const char *unless_empty(const char *text)
{
    return text[0] ? text : NULL;
}

const tg_blobstore_options *tg_blob_options_get(void)
{
    options.s3_endpoint = unless_empty(settings.endpoint);
    options.s3_region = unless_empty(settings.region);
    options.s3_access_key_id = unless_empty(settings.access_key);
    options.s3_secret_access_key = unless_empty(settings.secret_key);
    options.s3_session_token = unless_empty(settings.session_token);
    options.s3_connect_timeout = settings.connect_timeout;
    options.s3_low_speed_time = settings.low_speed_time;
    options.download_redirect = settings.download_redirect;
    options.cache_dir = unless_empty(settings.cache_dir);
    options.cache_size = settings.cache_size;
    options.gc_grace = settings.gc_grace.seconds;
    options.gc_grace_set = settings.gc_grace.set;
    return &options;
}

const char *tg_blob_options_usage(void)
{
    static char usage[8192];
    tg_option_table table = tg_blob_option_table();
    if (usage[0] == '\0')
        tg_options_usage(NULL, &table, 1, usage, sizeof usage);
    return usage;
}
