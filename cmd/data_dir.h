/* The data directory of serve and of the maintenance commands (token, gc, fsck):
 * one function opens its blob store and catalog for all of them, each with its
 * rule on what --data may name. */
#ifndef TG_DATA_DIR_H
#define TG_DATA_DIR_H

#include "blobstore.h"
#include "catalog.h"

/* How tg_data_open treats the data directory: a maintenance command's (one serve
 * made: refused otherwise), token create's (also a missing or empty directory,
 * made as serve makes it: the first admin token exists before the first start),
 * or serve's (made if missing, then claimed). */
typedef enum { TG_DATA_EXISTING, TG_DATA_CREATE, TG_DATA_SERVE } tg_data_mode;

/* Opens the data directory (see data_dir.c); 0, -1 or TG_EXIT_NOT_DATA_DIR, with
 * the reason on stderr prefixed "tensorgate COMMAND: ". catalog_url: serve's
 * --catalog; NULL reads TENSORGATE_CATALOG. */
int tg_data_open(const char *data_dir, tg_blobstore **blobs, tg_catalog **catalog,
                 tg_data_mode mode, const char *command, const char *catalog_url);
/* Closes what tg_data_open opened (the claim goes with the blob store). */
void tg_data_close(tg_blobstore *blobs, tg_catalog *catalog);
/* --data's default: $TENSORGATE_DATA, else ./data. */
const char *tg_data_dir_default(void);

#endif
