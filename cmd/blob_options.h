/* The blob store flags of serve, gc and fsck (--blob-store, --s3-endpoint,
 * --s3-region, --download-redirect, --cache-dir, --cache-size, --gc-grace, each with
 * a TENSORGATE_* environment variable): taken out of argv before the command's own
 * parser sees it, kept here for the one process, and turned into the URL and the
 * tg_blobstore_options that open the store (blobstore.h). */
#ifndef TG_BLOB_OPTIONS_H
#define TG_BLOB_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "blobstore.h"

/* Reads the environment, then removes the flags from argv (argc updated). 0, or -1
 * with a sentence in err. */
int tg_blob_options_take(int *argc, char **argv, char *err, size_t err_len);
/* The largest blob a writer will get (serve: --max-body), for S3 part sizes. */
void tg_blob_options_set_max_blob(uint64_t max_blob);
/* The store's URL (--blob-store, else file:DATA_DIR) and its options. */
void tg_blob_options_url(const char *data_dir, char *url, size_t url_len);
const tg_blobstore_options *tg_blob_options_get(void);
/* The flags' lines for --help. */
const char *tg_blob_options_usage(void);

#endif
