/* Opening a catalog (catalog.h): the factory that picks the backend a URL names
 * (kept apart from catalog.c, which the backends call back into, so the folder
 * reads top-down: this file -> the backends -> catalog.c), and the catalog of a
 * data directory: the commands pass what the user gave (a catalog URL, or none)
 * and the data directory; the default SQLite file's name and which URLs live
 * outside the directory are known here, not in cmd/. */
#include "catalog.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog_backend.h"

static size_t url_scheme_length(const char *text)
{
    size_t n = 0;
    if (!isalpha((unsigned char)text[0]))
        return 0;
    while (isalnum((unsigned char)text[n]) || text[n] == '+' || text[n] == '-' || text[n] == '.')
        n++;
    return strncmp(text + n, "://", 3) == 0 ? n : 0;
}

/* Opens the backend url names. */
static tg_cat_status open_backend(const char *url, tg_catalog **out, char *err, size_t err_len)
{
    if (strncmp(url, "sqlite:", 7) == 0)
        return tg_catalog_sqlite_open(url + 7, out, err, err_len);
    size_t scheme = url_scheme_length(url);
    if (scheme > 0) {
        if ((scheme == 10 && strncmp(url, "postgresql", scheme) == 0) ||
            (scheme == 8 && strncmp(url, "postgres", scheme) == 0))
            return tg_catalog_pg_open(url, out, err, err_len);
        snprintf(err, err_len,
                 "unknown catalog URL scheme \"%.*s://\"; use sqlite:PATH, postgresql://... "
                 "or a file path",
                 (int)scheme, url);
        return TG_CAT_ERROR;
    }
    /* "postgresql:" + libpq keyword=value pairs */
    if (strncmp(url, "postgresql:", 11) == 0)
        return tg_catalog_pg_open(url + 11, out, err, err_len);
    return tg_catalog_sqlite_open(url, out, err, err_len);
}

tg_cat_status tg_catalog_open(const char *url, tg_catalog **out, char *err, size_t err_len)
{
    *out = NULL;
    tg_cat_status status = open_backend(url, out, err, err_len);
    if (status == TG_CAT_OK)
        tg_catalog_init_identity(*out);
    return status;
}

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
