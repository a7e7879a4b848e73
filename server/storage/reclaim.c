#include "reclaim.h"

#include <errno.h>
#include <stdio.h>

tg_reclaim_result tg_blob_reclaim(tg_blobstore *store, tg_catalog *catalog, const char *hex,
                                  bool dry_run)
{
    /* A name that is not a digest names no blob; refused before the store, whose
     * -1 for it must not be read as "already gone". */
    if (!tg_is_sha256_hex(hex)) {
        errno = EINVAL;
        return TG_RECLAIM_ERROR;
    }
    int lock = tg_blobstore_lock(store, true, true);
    if (lock < 0)
        return TG_RECLAIM_ERROR;
    bool referenced = true;
    tg_reclaim_result result = TG_RECLAIM_ERROR;
    if (tg_catalog_blob_referenced(catalog, hex, &referenced) == TG_CAT_OK) {
        if (referenced)
            result = TG_RECLAIM_KEPT;
        else if (dry_run || tg_blob_remove(store, hex) == 0 || errno == ENOENT)
            result = TG_RECLAIM_REMOVED;
    }
    tg_blobstore_unlock(store, lock);
    return result;
}

void tg_file_blob(tg_catalog *catalog, int64_t version_id, const char *path,
                  char hex[TG_SHA256_HEX_LEN + 1])
{
    tg_file_record file;
    hex[0] = '\0';
    if (tg_catalog_file_get(catalog, version_id, path, &file) == TG_CAT_OK)
        snprintf(hex, TG_SHA256_HEX_LEN + 1, "%s", file.sha256);
}
