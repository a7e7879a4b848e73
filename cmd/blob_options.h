/* The blob store's options of serve, gc and fsck, as rows of the option table
 * (options.h): --blob-store, --s3-endpoint, --s3-region, --download-redirect,
 * --cache-dir, --cache-size, --gc-grace, each with a TENSORGATE_* environment
 * variable, and the S3 credentials and timeouts (AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, TENSORGATE_S3_CONNECT_TIMEOUT,
 * TENSORGATE_S3_LOW_SPEED_TIME: environment only). Kept here for the one process,
 * and turned into the URL and the tg_blobstore_options that open the store
 * (blobstore.h): the store reads no environment of its own. */
#ifndef TG_BLOB_OPTIONS_H
#define TG_BLOB_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "blobstore.h"
#include "options.h"

/* The rows (serve hands them to tg_options_load with the others). */
tg_option_table tg_blob_option_table(void);

/* gc and fsck: the blob store rows alone; reads the environment, then removes the
 * flags from argv (argc updated). 0, or -1 with a sentence in err. */
int tg_blob_options_take(int *argc, char **argv, char *err, size_t err_len);
/* The largest blob a writer will get (serve: --max-body), for S3 part sizes. */
void tg_blob_options_set_max_blob(uint64_t max_blob);
/* The store's URL (--blob-store, else file:DATA_DIR) and its options. */
void tg_blob_options_url(const char *data_dir, char *url, size_t url_len);
const tg_blobstore_options *tg_blob_options_get(void);
/* The rows' section of --help (generated from the table). */
const char *tg_blob_options_usage(void);

#endif
