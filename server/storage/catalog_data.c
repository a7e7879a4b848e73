/* The catalog of a data directory (catalog.h): the commands pass what the user
 * gave (a catalog URL, or none) and the data directory; the default SQLite file's
 * name and which URLs live outside the directory are known here, not in cmd/. */
#include "catalog.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Whether url names a PostgreSQL catalog ("postgresql://", "postgres://",
 * "postgresql:" + keyword pairs). */
static bool is_postgres_url(const char *url)
{
    return url != NULL && strncmp(url, "postgres", 8) == 0;
}

tg_cat_status tg_catalog_open_data(const char *url, const char *data_dir, tg_catalog **out,
                                   char *err, size_t err_len)
{
    char path[4200];
    if (url != NULL && url[0] != '\0')
        return tg_catalog_open(url, out, err, err_len);
    if (snprintf(path, sizeof path, "sqlite:%s/%s", data_dir, TG_CATALOG_FILE) >=
        (int)sizeof path) {
        *out = NULL;
        snprintf(err, err_len, "the data directory's path is too long");
        return TG_CAT_ERROR;
    }
    return tg_catalog_open(path, out, err, err_len);
}

bool tg_catalog_data_dir_made(const char *data_dir, const char *url)
{
    char path[4200];
    struct stat st;
    if (is_postgres_url(url))
        return stat(data_dir, &st) == 0 && S_ISDIR(st.st_mode);
    if (snprintf(path, sizeof path, "%s/%s", data_dir, TG_CATALOG_FILE) >= (int)sizeof path)
        return false;
    return stat(data_dir, &st) == 0 && S_ISDIR(st.st_mode) && stat(path, &st) == 0 &&
           S_ISREG(st.st_mode);
}
