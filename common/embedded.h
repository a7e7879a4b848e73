/* Files compiled into the binary (see scripts/embed.sh and the Makefile). */
#ifndef TG_EMBEDDED_H
#define TG_EMBEDDED_H

#include <stddef.h>

extern const unsigned char tg_openapi_yaml[]; /* openapi.yaml, NUL-terminated */
extern const size_t tg_openapi_yaml_len;

/* The web page (web/, served by server/routes/web.c), NUL-terminated. */
extern const unsigned char tg_web_index_html[];
extern const size_t tg_web_index_html_len;
extern const unsigned char tg_web_app_js[];
extern const size_t tg_web_app_js_len;
extern const unsigned char tg_web_style_css[];
extern const size_t tg_web_style_css_len;

/* One file of migrations/ (scripts/embed-migrations.sh). */
typedef struct {
    int version;      /* the NNNN of the file name; row i holds version i + 1 */
    const char *name; /* the file name, e.g. "0001_init.sql" */
    const char *sql;  /* the file's bytes, NUL-terminated */
} tg_migration;

/* migrations/NNNN_*.sql in version order, with no gap. */
extern const tg_migration tg_migrations[];
extern const size_t tg_migrations_count;
/* The PostgreSQL dialect of the same migrations (migrations/postgresql/NNNN_*.sql):
 * the same numbers, one file per number. */
extern const tg_migration tg_migrations_pg[];
extern const size_t tg_migrations_pg_count;

#endif
