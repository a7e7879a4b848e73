/* The data directory the server commands share (data_dir.h). */
#include "data_dir.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "blob_options.h"
#include "commands.h"

/* A directory token create may make a data directory of: a missing one (its
 * parent must exist, as for serve) or an empty one (a fresh container volume). */
static bool is_fresh_dir(const char *data_dir)
{
    DIR *dir = opendir(data_dir);
    if (dir == NULL)
        return errno == ENOENT;
    bool empty = true;
    const struct dirent *entry;
    while (empty && (entry = readdir(dir)) != NULL)
        empty = strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0;
    closedir(dir);
    return empty;
}

/* Opens the data directory: the blob store (layout created), the server's claim
 * on it (TG_DATA_SERVE only; the maintenance commands run beside a server), then
 * the catalog (migrations applied). Both are opened by URL with the data
 * directory's own scheme ("file:", "sqlite:"): a directory whose name looks like a
 * URL is still a path. TG_DATA_EXISTING refuses a directory that tg_catalog_data_dir_made does not
 * accept, TG_DATA_CREATE one that is neither that nor fresh (is_fresh_dir):
 * TG_EXIT_NOT_DATA_DIR, nothing created. On failure nothing stays open; the
 * result is -1 or TG_EXIT_NOT_DATA_DIR. */
int tg_data_open(const char *data_dir, tg_blobstore **blobs, tg_catalog **catalog,
                 tg_data_mode mode, const char *command, const char *catalog_url)
{
    char err[512];
    char url[4200];
    *blobs = NULL;
    *catalog = NULL;
    /* --catalog / TENSORGATE_CATALOG (serve), TENSORGATE_CATALOG (the others), or
     * the data directory's SQLite file */
    if (catalog_url == NULL)
        catalog_url = getenv("TENSORGATE_CATALOG");
    bool known = mode == TG_DATA_SERVE || tg_catalog_data_dir_made(data_dir, catalog_url);
    if (!known && (mode == TG_DATA_EXISTING || !is_fresh_dir(data_dir))) {
        fprintf(stderr,
                "tensorgate %s: %s is not a tensorgate data directory (no " TG_CATALOG_FILE
                ")%s; give "
                "--data the directory `tensorgate serve --data` uses\n",
                command, data_dir, mode == TG_DATA_CREATE ? " and not empty" : "");
        return TG_EXIT_NOT_DATA_DIR;
    }
    /* with a remote blob store the data directory still holds the SQLite catalog */
    if (!known && mode == TG_DATA_CREATE)
        fprintf(stderr, "tensorgate %s: making a new data directory in %s\n", command, data_dir);
    if (mode != TG_DATA_EXISTING && mkdir(data_dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "tensorgate %s: cannot make %s: %s\n", command, data_dir, strerror(errno));
        return -1;
    }
    tg_blob_options_url(data_dir, url, sizeof url); /* --blob-store, else file:DATA */
    if (tg_blobstore_open_options(url, tg_blob_options_get(), blobs, err, sizeof err) != 0 ||
        (mode == TG_DATA_SERVE && tg_blobstore_claim(*blobs, err, sizeof err) != 0)) {
        fprintf(stderr, "tensorgate %s: %s\n", command, err);
        tg_blobstore_close(*blobs);
        *blobs = NULL;
        return -1;
    }
    if (tg_catalog_open_data(catalog_url, data_dir, catalog, err, sizeof err) != TG_CAT_OK) {
        fprintf(stderr, "tensorgate %s: %s\n", command, err);
        tg_blobstore_close(*blobs);
        *blobs = NULL;
        return -1;
    }
    return 0;
}

/* Closes what tg_data_open opened (the claim goes with the blob store). */
void tg_data_close(tg_blobstore *blobs, tg_catalog *catalog)
{
    tg_catalog_close(catalog);
    tg_blobstore_close(blobs);
}

/* --data DIR (or TENSORGATE_DATA, or ./data) from a maintenance command's arguments. */
const char *tg_data_dir_default(void)
{
    const char *env = getenv("TENSORGATE_DATA");
    return (env && env[0]) ? env : "./data";
}
