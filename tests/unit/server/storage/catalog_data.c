/* Unit tests for server/storage/catalog_data.c: the catalog of a data directory.
 * - no URL opens (and makes) DATA/catalog.db, a SQLite catalog, and from then on
 *   the directory counts as one serve made;
 * - a URL given is opened as it is (here another SQLite file), the directory's
 *   file is not made;
 * - an empty or missing directory is not one serve made, unless the catalog is a
 *   PostgreSQL one (it lives elsewhere: any directory will do). */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog.h"
#include "test.h"

static char temp_dir[64];

static bool exists(const char *dir, const char *name)
{
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0;
}

TEST(no_url_opens_the_data_directorys_sqlite_file)
{
    char data[128], err[256] = "";
    snprintf(data, sizeof data, "%s/data", temp_dir);
    CHECK(mkdir(data, 0700) == 0);
    CHECK(!tg_catalog_data_dir_made(data, NULL));
    tg_catalog *catalog = NULL;
    CHECK(tg_catalog_open_data(NULL, data, &catalog, err, sizeof err) == TG_CAT_OK);
    CHECK(catalog != NULL && strcmp(tg_catalog_kind(catalog), "sqlite") == 0);
    tg_catalog_close(catalog);
    CHECK(exists(data, TG_CATALOG_FILE));
    CHECK(tg_catalog_data_dir_made(data, NULL));
    CHECK(tg_catalog_data_dir_made(data, ""));
    catalog = NULL;
    CHECK(tg_catalog_open_data("", data, &catalog, err, sizeof err) == TG_CAT_OK);
    tg_catalog_close(catalog);
}

TEST(a_url_given_is_opened_as_it_is)
{
    char data[128], url[192], err[256] = "";
    snprintf(data, sizeof data, "%s/other", temp_dir);
    CHECK(mkdir(data, 0700) == 0);
    snprintf(url, sizeof url, "sqlite:%s/elsewhere.db", temp_dir);
    tg_catalog *catalog = NULL;
    CHECK(tg_catalog_open_data(url, data, &catalog, err, sizeof err) == TG_CAT_OK);
    tg_catalog_close(catalog);
    CHECK(exists(temp_dir, "elsewhere.db"));
    CHECK(!exists(data, TG_CATALOG_FILE));
    catalog = NULL;
    CHECK(tg_catalog_open_data("mysql://db/tg", data, &catalog, err, sizeof err) != TG_CAT_OK);
    CHECK(catalog == NULL && strstr(err, "unknown catalog URL scheme") != NULL);
}

TEST(a_postgres_catalog_takes_any_directory)
{
    char missing[128];
    snprintf(missing, sizeof missing, "%s/missing", temp_dir);
    CHECK(tg_catalog_data_dir_made(temp_dir, "postgresql://localhost/tg"));
    CHECK(tg_catalog_data_dir_made(temp_dir, "postgresql:dbname=tg"));
    CHECK(!tg_catalog_data_dir_made(temp_dir, NULL)); /* no catalog.db in it */
    CHECK(!tg_catalog_data_dir_made(missing, "postgresql://localhost/tg"));
    CHECK(!tg_catalog_data_dir_made(missing, NULL));
}

int main(int argc, char **argv)
{
    (void)argc;
    snprintf(temp_dir, sizeof temp_dir, "/tmp/tg-catdata-XXXXXX");
    CHECK(mkdtemp(temp_dir) != NULL);
    RUN(no_url_opens_the_data_directorys_sqlite_file);
    RUN(a_url_given_is_opened_as_it_is);
    RUN(a_postgres_catalog_takes_any_directory);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", temp_dir);
    CHECK(system(command) == 0);
    return test_report(argv[0]);
}
