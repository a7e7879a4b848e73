/* What the SQL catalog backends share (catalog_sql.h): the row decoders, the
 * enum <-> text tables, placeholder numbering and the migration driver. */
#include "catalog_sql.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tg_cat_read_model(tg_cat_row row, tg_model *out)
{
    out->id = row.integer(&row, 0);
    row.text(&row, 1, out->org, sizeof out->org);
    row.text(&row, 2, out->name, sizeof out->name);
    row.text(&row, 3, out->description, sizeof out->description);
    row.text(&row, 4, out->created_at, sizeof out->created_at);
    out->downloads = row.integer(&row, 5);
}

void tg_cat_read_version(tg_cat_row row, tg_version *out)
{
    char state[16];
    out->id = row.integer(&row, 0);
    out->model_id = row.integer(&row, 1);
    out->number = row.integer(&row, 2);
    row.text(&row, 3, state, sizeof state);
    out->published = strcmp(state, "published") == 0;
    row.text(&row, 4, out->created_at, sizeof out->created_at);
    row.text(&row, 5, out->published_at, sizeof out->published_at);
    row.text(&row, 6, out->digest, sizeof out->digest);
    out->derived_from = row.integer(&row, 7); /* NULL reads as 0 */
    row.text(&row, 8, out->derived_dtype, sizeof out->derived_dtype);
    row.text(&row, 9, out->deprecated_at, sizeof out->deprecated_at);
    row.text(&row, 10, out->deprecated_reason, sizeof out->deprecated_reason);
    row.text(&row, 11, out->deleted_at, sizeof out->deleted_at);
}

void tg_cat_read_file(tg_cat_row row, tg_file_record *out)
{
    row.text(&row, 0, out->path, sizeof out->path);
    row.text(&row, 1, out->kind, sizeof out->kind);
    out->size = (uint64_t)row.integer(&row, 2);
    row.text(&row, 3, out->sha256, sizeof out->sha256);
    out->tensors = (uint64_t)row.integer(&row, 4);
    out->parameters = (uint64_t)row.integer(&row, 5);
    out->nan = (uint64_t)row.integer(&row, 6);
    out->inf = (uint64_t)row.integer(&row, 7);
    row.text(&row, 8, out->created_at, sizeof out->created_at);
    row.text(&row, 9, out->source_url, sizeof out->source_url);    /* NULL: "" */
    row.text(&row, 10, out->code_reason, sizeof out->code_reason); /* schema 10; NULL: "" */
}

void tg_cat_read_audit(tg_cat_row row, tg_audit_record *out)
{
    out->seq = row.integer(&row, 0);
    row.text(&row, 1, out->time, sizeof out->time);
    out->token_id = row.integer(&row, 2);
    row.text(&row, 3, out->namespace_name, sizeof out->namespace_name);
    row.text(&row, 4, out->action, sizeof out->action);
    row.text(&row, 5, out->resource, sizeof out->resource);
    out->status = (unsigned)row.integer(&row, 6);
    row.text(&row, 7, out->reason, sizeof out->reason);
    row.text(&row, 8, out->request_id, sizeof out->request_id);
    row.text(&row, 9, out->client, sizeof out->client);
    row.text(&row, 10, out->user_agent, sizeof out->user_agent);
    row.text(&row, 11, out->prev_hash, sizeof out->prev_hash);
    row.text(&row, 12, out->hash, sizeof out->hash);
}

void tg_cat_read_rejection(tg_cat_row row, tg_rejection *out)
{
    out->id = row.integer(&row, 0);
    row.text(&row, 1, out->time, sizeof out->time);
    row.text(&row, 2, out->model, sizeof out->model);
    out->version = row.integer(&row, 3); /* coalesce(version, -1) */
    row.text(&row, 4, out->path, sizeof out->path);
    row.text(&row, 5, out->reason, sizeof out->reason);
    row.text(&row, 6, out->format, sizeof out->format);
    row.text(&row, 7, out->detail, sizeof out->detail);
    row.text(&row, 8, out->client, sizeof out->client);
    out->size = (uint64_t)row.integer(&row, 9);
    row.text(&row, 10, out->findings, sizeof out->findings);
    row.text(&row, 11, out->sha256, sizeof out->sha256);
    row.text(&row, 12, out->namespace_name, sizeof out->namespace_name);
    out->token_id = row.integer(&row, 13);
    row.text(&row, 14, out->route, sizeof out->route);
    out->job_id = row.integer(&row, 15);
    row.text(&row, 16, out->outcome, sizeof out->outcome); /* schema 10 */
}

void tg_cat_read_job(tg_cat_row row, tg_job *out)
{
    char state[16];
    out->id = row.integer(&row, 0);
    row.text(&row, 1, state, sizeof state);
    out->state = tg_cat_job_state_from_name(state);
    out->model_id = row.integer(&row, 2);
    row.text(&row, 3, out->org, sizeof out->org);
    row.text(&row, 4, out->name, sizeof out->name);
    out->source_version_id = row.integer(&row, 5);
    out->source_number = row.integer(&row, 6);
    row.text(&row, 7, out->dtype, sizeof out->dtype);
    row.text(&row, 8, out->tensors, sizeof out->tensors);
    out->bytes_done = (uint64_t)row.integer(&row, 9);
    out->bytes_total = (uint64_t)row.integer(&row, 10);
    out->attempts = row.integer(&row, 11);
    out->result_version = row.integer(&row, 12);
    row.text(&row, 13, out->error_reason, sizeof out->error_reason);
    row.text(&row, 14, out->error_detail, sizeof out->error_detail);
    out->cancel_requested = strcmp(out->error_reason, "cancelled") == 0;
    row.text(&row, 15, out->created_at, sizeof out->created_at);
    row.text(&row, 16, out->started_at, sizeof out->started_at);
    row.text(&row, 17, out->finished_at, sizeof out->finished_at);
    out->token_id = row.integer(&row, 18);
    row.text(&row, 19, out->worker, sizeof out->worker);
    row.text(&row, 20, out->kind, sizeof out->kind);
    row.text(&row, 21, out->url, sizeof out->url);
    row.text(&row, 22, out->path, sizeof out->path);
}

void tg_cat_read_job_count(tg_cat_row row, uint64_t counts[TG_JOB_STATES])
{
    char state[16];
    row.text(&row, 0, state, sizeof state);
    for (int i = 0; i < TG_JOB_STATES; i++)
        if (strcmp(state, tg_job_state_name((tg_job_state)i)) == 0)
            counts[i] = (uint64_t)row.integer(&row, 1);
}

/* The stored names of the scopes, indexed by tg_scope (NONE has none). */
static const char *const scope_names[] = {NULL, "read", "write", "admin"};

const char *tg_cat_scope_name(tg_scope scope)
{
    return (unsigned)scope < sizeof scope_names / sizeof scope_names[0] ? scope_names[scope] : NULL;
}

tg_scope tg_cat_scope_from_name(const char *text)
{
    for (unsigned i = TG_SCOPE_READ; text != NULL && i <= TG_SCOPE_ADMIN; i++)
        if (strcmp(text, scope_names[i]) == 0)
            return (tg_scope)i;
    return TG_SCOPE_NONE;
}

tg_job_state tg_cat_job_state_from_name(const char *text)
{
    for (int i = TG_JOB_QUEUED; text != NULL && i < TG_JOB_STATES; i++)
        if (strcmp(text, tg_job_state_name((tg_job_state)i)) == 0)
            return (tg_job_state)i;
    return TG_JOB_FAILED;
}

bool tg_cat_sql_numbered(const char *sql, char *out, size_t out_len)
{
    size_t o = 0;
    unsigned next = 1;
    bool quoted = false;
    for (const char *p = sql; *p != '\0'; p++) {
        char number[16] = "";
        if (*p == '\'')
            quoted = !quoted; /* '' inside a literal toggles twice: still inside */
        if (*p == '?' && !quoted) {
            if (p[1] >= '0' && p[1] <= '9') {
                size_t n = 0;
                while (p[1] >= '0' && p[1] <= '9' && n + 1 < sizeof number)
                    number[n++] = *++p;
                number[n] = '\0';
            } else {
                snprintf(number, sizeof number, "%u", next++);
            }
        }
        size_t need = number[0] ? 1 + strlen(number) : 1;
        if (o + need >= out_len)
            return false;
        if (number[0]) {
            out[o++] = '$';
            memcpy(out + o, number, strlen(number));
            o += strlen(number);
        } else {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
    return true;
}

tg_cat_status tg_cat_migrate(const tg_cat_migrator *migrator, int known, char *err, size_t err_len)
{
    int current = 0;
    if (migrator->version(migrator->ctx, &current, err, err_len) != 0)
        return TG_CAT_ERROR;
    if (current > known) {
        snprintf(err, err_len,
                 "the catalog is at schema version %d, newer than this tensorgate knows (%d); "
                 "run a newer tensorgate",
                 current, known);
        return TG_CAT_ERROR;
    }
    /* one transaction per migration: a crash leaves the catalog at a whole version */
    for (int number = current + 1; number <= known; number++) {
        if (migrator->apply(migrator->ctx, number, err, err_len) != 0)
            return TG_CAT_ERROR;
    }
    return TG_CAT_OK;
}

/* ---- model search ---- */

typedef struct sql_text {
    char *out;
    size_t len, used;
    bool overflow;
} sql_text;

static void __attribute__((format(printf, 2, 3))) put(sql_text *t, const char *format, ...)
{
    if (t->overflow)
        return;
    va_list args;
    va_start(args, format);
    int n = vsnprintf(t->out + t->used, t->len - t->used, format, args);
    va_end(args);
    if (n < 0 || (size_t)n >= t->len - t->used)
        t->overflow = true;
    else
        t->used += (size_t)n;
}

/* The next bind's number for value. */
static int bind(const char *binds[TG_CAT_SEARCH_BINDS], int *count, const char *value)
{
    binds[*count] = value;
    return ++*count;
}

bool tg_cat_sql_model_search(const tg_model_search *search, bool pg, char *out, size_t out_len,
                             const char *binds[TG_CAT_SEARCH_BINDS], int *bind_count)
{
    sql_text t = {.out = out, .len = out_len};
    const char *contains = pg ? "strpos" : "instr";
    *bind_count = 0;
    out[0] = '\0';
    put(&t, "SELECT m.id, m.org, m.name, m.description, m.created_at, m.downloads"
            " FROM models m WHERE 1 = 1");
    if (search->org != NULL)
        put(&t, " AND m.org = ?%d", bind(binds, bind_count, search->org));
    if (search->name_query != NULL && search->name_query[0] != '\0')
        put(&t, " AND %s(m.org || '/' || m.name, ?%d) > 0", contains,
            bind(binds, bind_count, search->name_query));
    if (search->text != NULL && search->text[0] != '\0') {
        int n = bind(binds, bind_count, search->text);
        put(&t,
            " AND (%s(lower(m.org || '/' || m.name), lower(?%d)) > 0"
            " OR %s(lower(m.description), lower(?%d)) > 0"
            " OR EXISTS (SELECT 1 FROM model_tags t WHERE t.model_id = m.id"
            " AND %s(lower(t.value), lower(?%d)) > 0))",
            contains, n, contains, n, contains, n);
    }
    for (unsigned i = 0; i < search->tag_count && i < TG_SEARCH_TAGS_MAX; i++) {
        int key = bind(binds, bind_count, search->tag_keys[i]);
        put(&t, " AND EXISTS (SELECT 1 FROM model_tags t WHERE t.model_id = m.id AND t.key = ?%d",
            key);
        if (search->tag_values[i] != NULL)
            put(&t, " AND t.value = ?%d", bind(binds, bind_count, search->tag_values[i]));
        put(&t, ")");
    }
    for (unsigned i = 0; i < search->hub_tag_count && i < TG_SEARCH_TAGS_MAX; i++) {
        if (strcmp(search->hub_tags[i], "safetensors") == 0)
            continue; /* every model's */
        int n = bind(binds, bind_count, search->hub_tags[i]);
        put(&t,
            " AND (EXISTS (SELECT 1 FROM model_tags t WHERE t.model_id = m.id"
            " AND CASE WHEN t.value = '' THEN t.key ELSE t.key || ':' || t.value END = ?%d)"
            " OR EXISTS (SELECT 1 FROM version_hub_tags h WHERE h.tag = ?%d AND h.version_id ="
            " (SELECT v.id FROM versions v WHERE v.model_id = m.id AND v.state = 'published'"
            " AND v.branch IS NULL ORDER BY v.number DESC LIMIT 1)))",
            n, n);
    }
    if (search->published_only)
        put(&t, " AND EXISTS (SELECT 1 FROM versions v WHERE v.model_id = m.id"
                " AND v.state = 'published')");
    if (search->has_after) {
        int org = bind(binds, bind_count, search->after_org ? search->after_org : "");
        int name = bind(binds, bind_count, search->after_name ? search->after_name : "");
        if (search->by_downloads)
            put(&t,
                " AND (m.downloads < %" PRId64 " OR (m.downloads = %" PRId64
                " AND (m.org, m.name) > (?%d, ?%d)))",
                search->after_downloads, search->after_downloads, org, name);
        else
            put(&t, " AND (m.org, m.name) > (?%d, ?%d)", org, name);
    }
    put(&t, search->by_downloads ? " ORDER BY m.downloads DESC, m.org, m.name"
                                 : " ORDER BY m.org, m.name");
    put(&t, " LIMIT %u", search->limit);
    if (pg && !t.overflow) {
        /* PostgreSQL takes $N, typed here (lower() has more than one form); the text
         * has no literal with a '?' in it */
        char *copy = strdup(out);
        if (copy == NULL)
            return false;
        t.used = 0;
        for (const char *p = copy; *p && !t.overflow; p++) {
            if (*p != '?') {
                put(&t, "%c", *p);
                continue;
            }
            int digits = (int)strspn(p + 1, "0123456789");
            put(&t, "$%.*s::text", digits, p + 1);
            p += digits;
        }
        free(copy);
    }
    return !t.overflow;
}
