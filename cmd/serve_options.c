/* The option tables of `tensorgate serve` (serve_options.h). */
#include "serve_options.h"

#include "blob_options.h"
#include "options.h"
#include "preload_options.h"

/* The modules serve runs, in the order --help lists their options. */
static size_t serve_tables(tg_config *config, tg_option_table tables[3])
{
    tables[0] = tg_config_option_table(config);
    tables[1] = tg_preload_option_table();
    tables[2] = tg_blob_option_table();
    return 3;
}

int tg_serve_options_load(tg_config *config, int argc, char **argv, char *err, size_t err_len)
{
    tg_option_table tables[3];
    size_t count = serve_tables(config, tables);
    return tg_options_load(tables, count, &argc, argv, false, err, err_len);
}

const char *tg_serve_usage(void)
{
    static char usage[32768];
    static tg_config scratch; /* the tables' targets; only their rows are read */
    tg_option_table tables[3];
    size_t count = serve_tables(&scratch, tables);
    if (usage[0] == '\0')
        tg_options_usage("tensorgate serve", tables, count, usage, sizeof usage);
    return usage;
}
