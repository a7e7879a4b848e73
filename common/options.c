/* The one option parser (options.h): environment, then flags, over every table a
 * command hands it; and --help written from the same rows. */
#include "options.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tg_options_parse_bytes(const char *text, uint64_t *out)
{
    uint64_t value = 0;
    const char *p = text;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (__builtin_mul_overflow(value, 10, &value) ||
            __builtin_add_overflow(value, (uint64_t)(*p - '0'), &value))
            return -1;
    }
    static const char suffixes[] = "KMGT";
    unsigned shift = 0;
    const char *suffix = *p ? strchr(suffixes, *p & ~0x20) : NULL;
    if (suffix != NULL) {
        shift = 10 * (unsigned)(suffix - suffixes + 1);
        p++;
    }
    if (shift && (*p == 'i' || *p == 'B'))
        p += (*p == 'i' && p[1] == 'B') ? 2 : 1;
    if (*p != '\0')
        return -1;
    if (shift && value > (UINT64_MAX >> shift))
        return -1;
    *out = value << shift;
    return 0;
}

bool tg_options_parse_bool(const char *text)
{
    return strcmp(text, "1") == 0 || strcmp(text, "true") == 0 || strcmp(text, "yes") == 0 ||
           strcmp(text, "on") == 0;
}

int tg_option_bytes(const tg_option_spec *spec, void *field, const char *value, const char *origin,
                    char *err, size_t err_len)
{
    (void)spec;
    if (tg_options_parse_bytes(value, field) != 0) {
        snprintf(err, err_len, "%s: '%s' is not a byte count", origin, value);
        return -1;
    }
    return 0;
}

int tg_option_count(const tg_option_spec *spec, void *field, const char *value, const char *origin,
                    char *err, size_t err_len)
{
    uint64_t number;
    if (tg_options_parse_bytes(value, &number) != 0 || number < spec->minimum ||
        number > spec->maximum) {
        snprintf(err, err_len, "%s: '%s' is not a number in %llu..%llu", origin, value,
                 (unsigned long long)spec->minimum, (unsigned long long)spec->maximum);
        return -1;
    }
    *(unsigned *)field = (unsigned)number;
    return 0;
}

int tg_option_switch(const tg_option_spec *spec, void *field, const char *value, const char *origin,
                     char *err, size_t err_len)
{
    (void)spec, (void)origin, (void)err, (void)err_len;
    *(bool *)field = tg_options_parse_bool(value);
    return 0;
}

int tg_option_text(const tg_option_spec *spec, void *field, const char *value, const char *origin,
                   char *err, size_t err_len)
{
    if (value[0] == '\0' || strlen(value) >= spec->maximum) {
        snprintf(err, err_len, "%s: path is empty or too long", origin);
        return -1;
    }
    snprintf(field, spec->maximum, "%s", value);
    return 0;
}

static int apply(const tg_option_table *table, const tg_option_spec *spec, const char *value,
                 const char *origin, char *err, size_t err_len)
{
    return spec->parse(spec, (char *)table->target + spec->offset, value, origin, err, err_len);
}

/* The row whose flag arg names ("--flag" or "--flag=VALUE"); *value the text after
 * '=', else NULL. */
static const tg_option_spec *find_flag(const tg_option_table *tables, size_t table_count,
                                       const char *arg, const tg_option_table **table,
                                       const char **value)
{
    for (size_t t = 0; t < table_count; t++)
        for (size_t i = 0; i < tables[t].count; i++) {
            const tg_option_spec *spec = &tables[t].specs[i];
            size_t len = spec->flag ? strlen(spec->flag) : 0;
            if (len == 0 || strncmp(arg, spec->flag, len) != 0 ||
                (arg[len] != '\0' && arg[len] != '='))
                continue;
            *table = &tables[t];
            *value = arg[len] == '=' ? arg + len + 1 : NULL;
            return spec;
        }
    return NULL;
}

static int load_environment(const tg_option_table *tables, size_t table_count, char *err,
                            size_t err_len)
{
    for (size_t t = 0; t < table_count; t++) {
        if (tables[t].reset != NULL)
            tables[t].reset(tables[t].target);
        for (size_t i = 0; i < tables[t].count; i++) {
            const tg_option_spec *spec = &tables[t].specs[i];
            const char *value = getenv(spec->env);
            if (value != NULL && value[0] != '\0' &&
                apply(&tables[t], spec, value, spec->env, err, err_len) != 0)
                return -1;
        }
    }
    return 0;
}

int tg_options_load(const tg_option_table *tables, size_t table_count, int *argc, char **argv,
                    bool take, char *err, size_t err_len)
{
    if (load_environment(tables, table_count, err, err_len) != 0)
        return -1;
    int kept = 1;
    for (int a = 1; a < *argc; a++) {
        const char *arg = argv[a];
        const tg_option_table *table = NULL;
        const char *value = NULL;
        const tg_option_spec *spec = find_flag(tables, table_count, arg, &table, &value);
        if (spec == NULL && take) {
            argv[kept++] = argv[a];
            continue;
        }
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
            return 1;
        if (spec == NULL) {
            snprintf(err, err_len, "unknown argument '%s'", arg);
            return -1;
        }
        if (value == NULL && spec->metavar == NULL) {
            value = "1";
        } else if (value == NULL) {
            if (a + 1 >= *argc) {
                snprintf(err, err_len, "%s needs a value", spec->flag);
                return -1;
            }
            value = argv[++a];
        }
        if (apply(table, spec, value, spec->flag, err, err_len) != 0)
            return -1;
    }
    if (take) {
        argv[kept] = NULL;
        *argc = kept;
    }
    return 0;
}

/* ---- --help ---- */

typedef struct text {
    char *out;
    size_t len, cap;
    size_t column; /* of the current line */
    bool cut;
} text;

static void put(text *t, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    size_t room = t->len < t->cap ? t->cap - t->len : 0;
    int n = vsnprintf(t->out + (room ? t->len : t->cap - 1), room ? room : 1, format, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= room) {
        t->cut = true;
        t->len = t->cap;
        return;
    }
    t->len += (size_t)n;
    const char *newline = strrchr(t->out + t->len - (size_t)n, '\n');
    t->column = newline ? (size_t)(t->out + t->len - newline - 1) : t->column + (size_t)n;
}

#define USAGE_WIDTH 80

/* "[--flag VALUE]" (or "[--switch]", "[--flag VALUE]..."), wrapped under indent. */
static void synopsis_item(text *t, const tg_option_spec *spec, size_t indent)
{
    size_t width = strlen(spec->flag) + 2 + (spec->metavar ? strlen(spec->metavar) + 1 : 0) +
                   (spec->repeatable ? 3 : 0);
    if (t->column + 1 + width > USAGE_WIDTH)
        put(t, "\n%*s", (int)indent, "");
    else
        put(t, " ");
    put(t, "[%s%s%s]%s", spec->flag, spec->metavar ? " " : "", spec->metavar ? spec->metavar : "",
        spec->repeatable ? "..." : "");
}

/* The help sentences, wrapped at word boundaries under a six-space indent. */
static void help_text(text *t, const char *help)
{
    put(t, "      ");
    for (const char *p = help; *p;) {
        size_t word = strcspn(p, " ");
        if (t->column > 6 && t->column + 1 + word > USAGE_WIDTH)
            put(t, "\n      ");
        else if (t->column > 6)
            put(t, " ");
        put(t, "%.*s", (int)word, p);
        p += word;
        p += strspn(p, " ");
    }
    put(t, "\n");
}

static void option_entry(text *t, const tg_option_spec *spec)
{
    if (spec->flag != NULL)
        put(t, "  %s%s%s%s  (%s)", spec->flag, spec->metavar ? " " : "",
            spec->metavar ? spec->metavar : "", spec->repeatable ? " (repeatable)" : "", spec->env);
    else
        put(t, "  %s (environment only)", spec->env);
    if (spec->fallback != NULL)
        put(t, "  default: %s %s", spec->flag ? spec->flag : spec->env, spec->fallback);
    put(t, "\n");
    if (spec->help != NULL)
        help_text(t, spec->help);
}

int tg_options_usage(const char *program, const tg_option_table *tables, size_t table_count,
                     char *out, size_t out_len)
{
    text t = {.out = out, .cap = out_len};
    if (out_len == 0)
        return -1;
    out[0] = '\0';
    if (program != NULL) {
        put(&t, "usage: %s", program);
        size_t indent = strlen("usage: ") + strlen(program) + 1;
        for (size_t i = 0; i < table_count; i++)
            for (size_t j = 0; j < tables[i].count; j++)
                if (tables[i].specs[j].flag != NULL)
                    synopsis_item(&t, &tables[i].specs[j], indent);
        put(&t, "\nEach option is also an environment variable (named after it below); a flag\n"
                "wins over the environment, the environment over the default.\n");
    }
    for (size_t i = 0; i < table_count; i++) {
        put(&t, "%s%s options:\n", program != NULL || i > 0 ? "\n" : "", tables[i].title);
        for (size_t j = 0; j < tables[i].count; j++)
            option_entry(&t, &tables[i].specs[j]);
    }
    return t.cut ? -1 : (int)t.len;
}
