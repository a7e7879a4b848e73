/* Unit tests for server/storage/catalog_sql.c: placeholders numbered the
 * PostgreSQL way ("?" in order, "?N" kept, none inside a quoted literal, a small
 * buffer refused), the enum <-> text tables both ways, the row decoders over a
 * row of text columns, and the migration driver (a newer catalog refused, the
 * missing migrations applied in order, a failure stops it). The backends
 * themselves are tested by tests/unit/server/storage/catalog.c against SQLite and
 * PostgreSQL. */
#include <stdlib.h>
#include <string.h>

#include "catalog_sql.h"
#include "test.h"

static const char *numbered(const char *sql)
{
    static char out[256];
    memset(out, 'x', sizeof out);
    return tg_cat_sql_numbered(sql, out, sizeof out) ? out : "(too small)";
}

TEST(placeholders_are_numbered)
{
    CHECK_STR(numbered("SELECT 1"), "SELECT 1");
    CHECK_STR(numbered("SELECT a FROM t WHERE b = ? AND c = ?"),
              "SELECT a FROM t WHERE b = $1 AND c = $2");
    CHECK_STR(numbered("WHERE (?1 IS NULL OR x > ?1) AND y = ?12"),
              "WHERE ($1 IS NULL OR x > $1) AND y = $12");
    /* a "?" inside a literal is text, a doubled quote stays inside it */
    CHECK_STR(numbered("WHERE u <> '?REDACTED' AND v = ?"), "WHERE u <> '?REDACTED' AND v = $1");
    CHECK_STR(numbered("WHERE u = 'it''s ?' AND v = ?"), "WHERE u = 'it''s ?' AND v = $1");
    char small[8];
    CHECK(!tg_cat_sql_numbered("SELECT ?", small, sizeof small));
    CHECK(tg_cat_sql_numbered("SELECT", small, sizeof small));
    CHECK_STR(small, "SELECT");
}

TEST(names_both_ways)
{
    for (tg_scope s = TG_SCOPE_READ; s <= TG_SCOPE_ADMIN; s++)
        CHECK(tg_cat_scope_from_name(tg_cat_scope_name(s)) == s);
    CHECK_STR(tg_cat_scope_name(TG_SCOPE_WRITE), "write");
    CHECK(tg_cat_scope_name(TG_SCOPE_NONE) == NULL);
    CHECK(tg_cat_scope_from_name(NULL) == TG_SCOPE_NONE);
    CHECK(tg_cat_scope_from_name("root") == TG_SCOPE_NONE);
    for (int s = TG_JOB_QUEUED; s < TG_JOB_STATES; s++)
        CHECK(tg_cat_job_state_from_name(tg_job_state_name((tg_job_state)s)) == (tg_job_state)s);
    CHECK(tg_cat_job_state_from_name("paused") == TG_JOB_FAILED);
    CHECK(tg_cat_job_state_from_name(NULL) == TG_JOB_FAILED);
}

/* A row of text columns (NULL: SQL NULL). */
static int64_t text_integer(const tg_cat_row *row, int column)
{
    const char *const *values = row->result;
    return values[column] ? strtoll(values[column], NULL, 10) : 0;
}

static void text_text(const tg_cat_row *row, int column, char *dst, size_t len)
{
    const char *const *values = row->result;
    snprintf(dst, len, "%s", values[column] ? values[column] : "");
}

static tg_cat_row text_row(const char *const *values)
{
    return (tg_cat_row){.integer = text_integer, .text = text_text, .result = values};
}

TEST(rows_are_decoded)
{
    const char *model[] = {"7", "acme", "bert", NULL, "2024-01-02T03:04:05Z", "12"};
    tg_model m;
    tg_cat_read_model(text_row(model), &m);
    CHECK(m.id == 7);
    CHECK(m.downloads == 12);
    CHECK_STR(m.org, "acme");
    CHECK_STR(m.description, "");
    const char *version[] = {"3",   "7",  "2",  "published", "t0", "t1",
                             "abc", NULL, NULL, NULL,        NULL, NULL};
    tg_version v;
    tg_cat_read_version(text_row(version), &v);
    CHECK(v.published && v.number == 2 && v.derived_from == 0);
    CHECK_STR(v.derived_dtype, "");
    CHECK_STR(v.deprecated_at, ""); /* schema 16: NULL, not deprecated */
    CHECK_STR(v.deleted_at, "");
    version[9] = "t2";
    version[10] = "superseded";
    tg_cat_read_version(text_row(version), &v);
    CHECK_STR(v.deprecated_at, "t2");
    CHECK_STR(v.deprecated_reason, "superseded");
    version[9] = version[10] = NULL;
    version[3] = "draft";
    tg_cat_read_version(text_row(version), &v);
    CHECK(!v.published);
    const char *file[] = {
        "a.safetensors", "safetensors", "1024", "ff", "2", "10", "0", "1", "t", NULL, NULL};
    tg_file_record f;
    tg_cat_read_file(text_row(file), &f);
    CHECK(f.size == 1024 && f.parameters == 10 && f.inf == 1);
    CHECK_STR(f.source_url, "");
    CHECK_STR(f.code_reason, "");
    /* schema 10: a file the code policy admitted names its code reason */
    const char *code[] = {"m.py", "code", "3", "ee", "0", "0", "0", "0", "t", NULL, "code_python"};
    tg_cat_read_file(text_row(code), &f);
    CHECK_STR(f.kind, "code");
    CHECK_STR(f.code_reason, "code_python");
    const char *job[] = {"5",  "running", "7",   "acme",   "bert",    "3",         "1", "F16",
                         "[]", "10",      "100", "1",      NULL,      "cancelled", "",  "t0",
                         "t1", NULL,      "9",   "host:1", "convert", NULL,        NULL};
    tg_job j;
    tg_cat_read_job(text_row(job), &j);
    CHECK(j.id == 5 && j.state == TG_JOB_RUNNING && j.source_number == 1);
    CHECK(j.cancel_requested && j.result_version == 0 && j.token_id == 9);
    CHECK_STR(j.worker, "host:1");
    CHECK_STR(j.finished_at, "");
    uint64_t counts[TG_JOB_STATES] = {0};
    const char *done[] = {"done", "4"}, *odd[] = {"paused", "9"}, *none[] = {NULL, "2"};
    tg_cat_read_job_count(text_row(done), counts);
    tg_cat_read_job_count(text_row(odd), counts);
    tg_cat_read_job_count(text_row(none), counts);
    CHECK(counts[TG_JOB_DONE] == 4 && counts[TG_JOB_QUEUED] == 0 && counts[TG_JOB_FAILED] == 0);
}

/* A catalog in memory: its version, and the migrations applied in order. */
typedef struct fake_schema {
    int version;
    int fail_at;
    int applied[8];
    int count;
} fake_schema;

static int fake_version(void *ctx, int *version, char *err, size_t err_len)
{
    (void)err;
    (void)err_len;
    *version = ((fake_schema *)ctx)->version;
    return 0;
}

static int fake_apply(void *ctx, int number, char *err, size_t err_len)
{
    fake_schema *schema = ctx;
    if (number == schema->fail_at) {
        snprintf(err, err_len, "migration %d failed: no", number);
        return -1;
    }
    schema->applied[schema->count++] = number;
    schema->version = number;
    return 0;
}

TEST(migrations_run_in_order)
{
    char err[256] = "";
    fake_schema schema = {.version = 2};
    tg_cat_migrator migrator = {&schema, fake_version, fake_apply};
    CHECK(tg_cat_migrate(&migrator, 5, err, sizeof err) == TG_CAT_OK);
    CHECK(schema.count == 3 && schema.applied[0] == 3 && schema.applied[2] == 5);
    CHECK(tg_cat_migrate(&migrator, 5, err, sizeof err) == TG_CAT_OK);
    CHECK(schema.count == 3); /* nothing left to do */
    CHECK(tg_cat_migrate(&migrator, 4, err, sizeof err) == TG_CAT_ERROR);
    CHECK(strstr(err, "schema version 5, newer than this tensorgate knows (4)") != NULL);
    fake_schema failing = {.version = 0, .fail_at = 2};
    migrator.ctx = &failing;
    CHECK(tg_cat_migrate(&migrator, 3, err, sizeof err) == TG_CAT_ERROR);
    CHECK(failing.version == 1 && failing.count == 1);
    CHECK_STR(err, "migration 2 failed: no");
}

/* The model search's SQL: each value a bind (never in the text), the dialects'
 * substring function and placeholders, the downloads order and its cursor. */
TEST(model_search_sql)
{
    char sql[8192];
    const char *binds[TG_CAT_SEARCH_BINDS];
    int count = 0;
    tg_model_search search = {.org = "acme",
                              .text = "it's",
                              .tag_keys = {"stage"},
                              .tag_values = {"prod"},
                              .tag_count = 1,
                              .hub_tags = {"safetensors", "license:mit"},
                              .hub_tag_count = 2,
                              .published_only = true,
                              .by_downloads = true,
                              .has_after = true,
                              .after_downloads = 9,
                              .after_org = "acme",
                              .after_name = "b",
                              .limit = 11};
    CHECK(tg_cat_sql_model_search(&search, false, sql, sizeof sql, binds, &count));
    CHECK_EQ_U64(count, 7); /* org, text, key, value, one hub tag, after org, after name */
    CHECK_STR(binds[1], "it's");
    CHECK_STR(binds[4], "license:mit");
    CHECK(strstr(sql, "it's") == NULL);
    CHECK(strstr(sql, "instr(") != NULL && strstr(sql, "strpos(") == NULL);
    CHECK(strstr(sql, "m.downloads < 9") != NULL);
    CHECK(strstr(sql, "ORDER BY m.downloads DESC, m.org, m.name LIMIT 11") != NULL);
    CHECK(strstr(sql, "state = 'published'") != NULL);
    CHECK(tg_cat_sql_model_search(&search, true, sql, sizeof sql, binds, &count));
    CHECK(strstr(sql, "?") == NULL && strstr(sql, "$7::text") != NULL);
    CHECK(strstr(sql, "strpos(") != NULL && strstr(sql, "instr(") == NULL);
    /* "safetensors" is every model's: no condition for it */
    search = (tg_model_search){.hub_tags = {"safetensors"}, .hub_tag_count = 1, .limit = 1};
    CHECK(tg_cat_sql_model_search(&search, false, sql, sizeof sql, binds, &count));
    CHECK_EQ_U64(count, 0);
    CHECK(strstr(sql, "ORDER BY m.org, m.name LIMIT 1") != NULL);
    /* a buffer too small is refused */
    CHECK(!tg_cat_sql_model_search(&search, false, sql, 40, binds, &count));
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(placeholders_are_numbered);
    RUN(names_both_ways);
    RUN(rows_are_decoded);
    RUN(migrations_run_in_order);
    RUN(model_search_sql);
    return test_report(argv[0]);
}
