/* What the SQL catalog backends share (catalog_sql.h): the row decoders, the
 * enum <-> text tables, placeholder numbering and the migration driver. */
#include "catalog_sql.h"

#include <stdio.h>
#include <string.h>

void tg_cat_read_model(tg_cat_row row, tg_model *out)
{
    out->id = row.integer(&row, 0);
    row.text(&row, 1, out->org, sizeof out->org);
    row.text(&row, 2, out->name, sizeof out->name);
    row.text(&row, 3, out->description, sizeof out->description);
    row.text(&row, 4, out->created_at, sizeof out->created_at);
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
