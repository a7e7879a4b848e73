/* The one option parser of the process. Each module declares its options once, as
 * a table of tg_option_spec rows (flag, environment variable, value name, parser,
 * the field in the module's own settings struct, bounds, help text); a command
 * hands the tables of the modules it runs to tg_options_load, which applies every
 * environment variable, then every flag (a flag wins over the environment, the
 * environment over the module's default), and tg_options_usage writes --help from
 * the same rows. Nothing else reads an option's environment variable. */
#ifndef TG_OPTIONS_H
#define TG_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tg_option_spec tg_option_spec;

/* Parses value into field (the module's settings + spec->offset). origin names
 * where the value came from (the flag, or the environment variable) for the error
 * sentence. Returns 0, or -1 with one sentence in err. */
typedef int (*tg_option_parse)(const tg_option_spec *spec, void *field, const char *value,
                               const char *origin, char *err, size_t err_len);

struct tg_option_spec {
    const char *flag;    /* "--listen"; NULL: an environment variable only (a secret) */
    const char *env;     /* "TENSORGATE_LISTEN": every option has one */
    const char *metavar; /* "HOST:PORT"; NULL: a switch (--flag, or --flag=yes|no) */
    tg_option_parse parse;
    size_t offset;             /* of the field in the module's settings struct */
    uint64_t minimum, maximum; /* a count's bounds; a text's capacity in maximum */
    bool repeatable;           /* each use adds to the value (a list) */
    const char *fallback;      /* the default, as --help shows it; NULL: none shown */
    const char *help;          /* one or more sentences for --help */
};

/* One module's rows and the settings struct they fill. reset (optional) puts the
 * defaults into target before anything is applied. */
typedef struct tg_option_table {
    const char *title; /* "server", "preload", "blob store": a --help section */
    const tg_option_spec *specs;
    size_t count;
    void *target;
    void (*reset)(void *target);
} tg_option_table;

#define TG_OPTION_COUNT(specs) (sizeof(specs) / sizeof((specs)[0]))

/* Resets each table, applies each environment variable that is set and not empty
 * (table order, then row order), then argv[1..]: "--flag VALUE", "--flag=VALUE",
 * or a switch's bare "--flag". With take, argv keeps what no table knows (in order,
 * argv[*argc] = NULL) for the command's own parser, --help included; without it, an
 * unknown argument is an error and --help (or -h) returns 1. Returns 0, 1 or -1
 * with one sentence in err. */
int tg_options_load(const tg_option_table *tables, size_t table_count, int *argc, char **argv,
                    bool take, char *err, size_t err_len);

/* Writes --help for the tables: "usage: PROGRAM [--flag VALUE]..." (none when
 * program is NULL: a section of another command's help), then per table each
 * option with its environment variable, its default and its help. Returns the
 * length, or -1 if out_len was too small (out then holds a cut text). */
int tg_options_usage(const char *program, const tg_option_table *tables, size_t table_count,
                     char *out, size_t out_len);

/* Standard parsers. bytes: a uint64_t byte count (tg_options_parse_bytes);
 * count: an unsigned in minimum..maximum; switch: a bool (1, true, yes, on);
 * text: a char[maximum] that may not be empty. */
int tg_option_bytes(const tg_option_spec *spec, void *field, const char *value, const char *origin,
                    char *err, size_t err_len);
int tg_option_count(const tg_option_spec *spec, void *field, const char *value, const char *origin,
                    char *err, size_t err_len);
int tg_option_switch(const tg_option_spec *spec, void *field, const char *value, const char *origin,
                     char *err, size_t err_len);
int tg_option_text(const tg_option_spec *spec, void *field, const char *value, const char *origin,
                   char *err, size_t err_len);

/* A byte count: digits with an optional K/M/G/T suffix (powers of 1024, "KiB" and
 * "KB" alike). 0, or -1 when malformed or above 2^64 - 1. */
int tg_options_parse_bytes(const char *text, uint64_t *out);
/* A switch's value: true for 1, true, yes, on. */
bool tg_options_parse_bool(const char *text);

#endif
