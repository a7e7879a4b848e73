/* /v1/models and /v1/models/{org}/{name}[/aliases/{alias}], and the lookups the
 * other resources share (model, {rev}). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth.h"
#include "catalog_mirror.h"
#include "checks.h"
#include "downloads.h"
#include "preload_service.h"
#include "reclaim.h"
#include "response_cache.h"
#include "routes.h"
#include "url_redact.h"

tg_model *tg_model_alloc(tg_request *req)
{
    tg_model *model = malloc(sizeof *model);
    if (model == NULL)
        tg_respond_internal(req, "out of memory");
    return model;
}

bool tg_lookup_model(tg_request *req, tg_model *model)
{
    const char *org = tg_param(req, "org"), *name = tg_param(req, "name");
    if (org == NULL || name == NULL || !tg_valid_name_part(org) || !tg_valid_name_part(name)) {
        tg_respond_problem(req, "invalid_name",
                           "a model name is org/name, each part [A-Za-z0-9][A-Za-z0-9._-]{0,63}");
        return false;
    }
    tg_cat_status status = tg_catalog_model_get(req->server->catalog, org, name, model);
    if (status == TG_CAT_NOT_FOUND) {
        tg_respond_problem(req, "model_not_found", "no model %s/%s", org, name);
        return false;
    }
    if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
        return false;
    }
    return true;
}

bool tg_rev_is_number(const char *rev)
{
    if (rev[0] == '\0')
        return false;
    for (const char *p = rev; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    return true;
}

bool tg_rev_is_fixed(const char *rev)
{
    return rev != NULL && ((tg_rev_is_number(rev) && strlen(rev) <= 19) || tg_is_sha256_hex(rev));
}

void tg_version_commit_id(const tg_version *version, char out[41])
{
    out[0] = '\0';
    if (version->published && strlen(version->digest) == 64) {
        memcpy(out, version->digest, 40);
        out[40] = '\0';
    }
}

bool tg_is_commit_id(const char *text)
{
    size_t i = 0;
    for (; text[i] != '\0'; i++)
        if (!((text[i] >= '0' && text[i] <= '9') || (text[i] >= 'a' && text[i] <= 'f')))
            return false;
    return i == 40;
}

bool tg_lookup_version(tg_request *req, const tg_model *model, tg_version *version)
{
    const char *rev = tg_param(req, "rev");
    tg_catalog *catalog = req->server->catalog;
    tg_cat_status status;
    if (rev == NULL || rev[0] == '\0') {
        tg_respond_problem(req, "invalid_name", "the version is missing");
        return false;
    }
    if (tg_rev_is_number(rev)) {
        uint64_t number;
        if (!tg_parse_u64(rev, &number) || number > INT64_MAX) {
            tg_respond_problem(req, "version_not_found", "no version %s of %s/%s", rev, model->org,
                               model->name);
            return false;
        }
        status = tg_catalog_version_get(catalog, model->id, (int64_t)number, version);
    } else if (tg_is_sha256_hex(rev)) {
        status = tg_catalog_version_by_digest(catalog, model->id, rev, version);
    } else if (strcmp(rev, "latest") == 0) {
        status = tg_catalog_version_latest_published(catalog, model->id, version);
    } else if (tg_is_commit_id(rev) &&
               (status = tg_catalog_version_by_commit(catalog, model->id, rev, version)) !=
                   TG_CAT_NOT_FOUND) {
        /* a commit id (an alias of the same 40 hex digits is reached below otherwise) */
    } else {
        if (!tg_valid_name_part(rev)) {
            tg_respond_problem(req, "invalid_name",
                               "a version is a number, a 64-hex digest or an alias");
            return false;
        }
        int64_t number = 0;
        status = tg_catalog_alias_get(catalog, model->id, rev, &number);
        if (status == TG_CAT_NOT_FOUND) {
            tg_respond_problem(req, "alias_not_found", "%s/%s has no alias '%s'", model->org,
                               model->name, rev);
            return false;
        }
        if (status == TG_CAT_OK)
            status = tg_catalog_version_get(catalog, model->id, number, version);
    }
    if (status == TG_CAT_NOT_FOUND) {
        tg_respond_problem(req, "version_not_found", "%s/%s has no version '%s'", model->org,
                           model->name, rev);
        return false;
    }
    if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
        return false;
    }
    if (version->deleted_at[0] != '\0') { /* a tombstone (schema 16): gone, not unknown */
        tg_respond_problem(req, "version_deleted", "version %lld of %s/%s was deleted at %s",
                           (long long)version->number, model->org, model->name,
                           version->deleted_at);
        return false;
    }
    return true;
}

json_t *tg_file_json(const tg_file_record *file)
{
    json_t *body =
        json_pack("{s:s, s:s, s:I, s:s, s:I, s:I, s:I, s:I}", "path", file->path, "kind",
                  file->kind, "size", (json_int_t)file->size, "sha256", file->sha256, "tensors",
                  (json_int_t)file->tensors, "parameters", (json_int_t)file->parameters, "nan",
                  (json_int_t)file->nan, "inf", (json_int_t)file->inf);
    if (body != NULL && file->source_url[0] != '\0') { /* imported: where from */
        char shown[TG_URL_MAX + 1]; /* stored redacted; a row of an older server too */
        (void)tg_url_redact(file->source_url, shown, sizeof shown);
        json_object_set_new(body, "source_url", json_string(shown));
    }
    if (body != NULL && file->code_reason[0] != '\0') /* code the namespace's policy let in */
        json_object_set_new(body, "code", json_string(file->code_reason));
    return body;
}

/* ---- the code mark (docs/DESIGN.md, "The code policy") ----
 * Derived from the files of kind "code", never stored as a flag: a version holds code
 * while one of its files is code, whatever the namespace's policy says now. */

static void add_code_file(void *ctx, int64_t number, const char *path, const char *code_reason)
{
    (void)number;
    json_array_append_new(ctx, json_pack("{s:s, s:s}", "path", path, "reason", code_reason));
}

json_t *tg_code_files_json(tg_server *server, int64_t model_id, int64_t number,
                           tg_cat_status *status)
{
    json_t *files = json_array();
    *status = files != NULL
                  ? tg_catalog_code_files(server->catalog, model_id, number, add_code_file, files)
                  : TG_CAT_ERROR;
    if (*status != TG_CAT_OK) {
        json_decref(files);
        return NULL;
    }
    return files;
}

static void add_code_version(void *ctx, int64_t number, const char *path, const char *code_reason)
{
    (void)path;
    (void)code_reason;
    json_t *numbers = ctx;
    size_t count = json_array_size(numbers);
    if (count == 0 || json_integer_value(json_array_get(numbers, count - 1)) != number)
        json_array_append_new(numbers, json_integer(number)); /* rows come by number */
}

/* The numbers of model_id's versions that hold code, ascending; NULL on failure. */
static json_t *code_versions_json(tg_server *server, int64_t model_id, tg_cat_status *status)
{
    json_t *numbers = json_array();
    *status = numbers != NULL
                  ? tg_catalog_code_files(server->catalog, model_id, 0, add_code_version, numbers)
                  : TG_CAT_ERROR;
    if (*status != TG_CAT_OK) {
        json_decref(numbers);
        return NULL;
    }
    return numbers;
}

static bool number_in(const json_t *numbers, int64_t number)
{
    size_t i;
    json_t *value;
    json_array_foreach(numbers, i, value)
    {
        if (json_integer_value(value) == number)
            return true;
    }
    return false;
}

static json_t *string_or_null(const char *text)
{
    return text[0] ? json_string(text) : json_null();
}

static void add_file(void *ctx, const tg_file_record *file)
{
    json_array_append_new(ctx, tg_file_json(file));
}

/* ---- registry metadata: tags and descriptions (docs/MANUAL.md) ---- */

static void add_tag(void *ctx, const char *key, const char *value)
{
    json_object_set_new(ctx, key, json_string(value));
}

json_t *tg_tags_json(tg_server *server, int64_t model_id, int64_t version_id, tg_cat_status *status)
{
    json_t *tags = json_object();
    *status = tags ? tg_catalog_tag_list(server->catalog, model_id, version_id, add_tag, tags)
                   : TG_CAT_ERROR;
    if (*status != TG_CAT_OK) {
        json_decref(tags);
        return NULL;
    }
    return tags;
}

bool tg_valid_tag_key(const char *key)
{
    return key != NULL && strlen(key) <= TG_TAG_KEY_MAX && tg_valid_name_part(key);
}

bool tg_valid_tag_value(const char *value, size_t len)
{
    if (value == NULL || len > TG_TAG_VALUE_MAX || strlen(value) != len)
        return false; /* a NUL inside */
    for (const unsigned char *p = (const unsigned char *)value; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false; /* control characters */
    return true;
}

void tg_meta_patch_free(tg_meta_patch *patch)
{
    json_decref(patch->body);
    patch->body = NULL;
}

bool tg_meta_patch_parse(tg_request *req, tg_meta_patch *patch)
{
    memset(patch, 0, sizeof *patch);
    patch->body = tg_json_body(req);
    if (patch->body == NULL)
        return false;
    static const char *const fields[] = {"description", "tags", NULL};
    if (!tg_json_known_fields(req, patch->body, fields))
        goto refused;
    json_t *description = json_object_get(patch->body, "description");
    if (json_is_null(description)) {
        patch->description = ""; /* null clears it */
    } else if (description != NULL) {
        patch->description = json_string_value(description);
        if (patch->description == NULL || json_string_length(description) > TG_DESCRIPTION_MAX ||
            strlen(patch->description) != json_string_length(description)) {
            tg_respond_problem(req, "invalid_request",
                               "\"description\" must be a string of at most %d bytes (or null)",
                               TG_DESCRIPTION_MAX);
            goto refused;
        }
    }
    json_t *tags = json_object_get(patch->body, "tags");
    if (tags != NULL && !json_is_object(tags)) {
        tg_respond_problem(req, "invalid_tag",
                           "\"tags\" must be an object of key: value (a string, or null to "
                           "delete the key)");
        goto refused;
    }
    if (json_object_size(tags) > TG_META_PATCH_MAX) {
        tg_respond_problem(req, "too_many_tags",
                           "a PATCH names at most %d tags; an object keeps at most %d",
                           TG_META_PATCH_MAX, TG_TAGS_MAX);
        goto refused;
    }
    const char *key;
    json_t *value;
    json_object_foreach(tags, key, value)
    {
        if (!tg_valid_tag_key(key)) {
            tg_respond_problem(req, "invalid_tag",
                               "a tag key is [A-Za-z0-9][A-Za-z0-9._-]{0,63} without '..'");
            goto refused;
        }
        if (!json_is_null(value) &&
            !tg_valid_tag_value(json_string_value(value), json_string_length(value))) {
            tg_respond_problem(req, "invalid_tag",
                               "the value of tag '%s' must be a string of at most %d bytes "
                               "without control characters, or null to delete it",
                               key, TG_TAG_VALUE_MAX);
            goto refused;
        }
        patch->changes[patch->count].key = key;
        patch->changes[patch->count].value = json_is_null(value) ? NULL : json_string_value(value);
        patch->count++;
    }
    return true;
refused:
    tg_meta_patch_free(patch);
    return false;
}

bool tg_meta_patch_apply(tg_request *req, const tg_model *model, int64_t version_id,
                         const tg_meta_patch *patch)
{
    const char *why = NULL;
    tg_cat_status status =
        tg_catalog_meta_update(req->server->catalog, model->id, version_id, patch->description,
                               patch->changes, patch->count, TG_TAGS_MAX, &why);
    if (status == TG_CAT_OK) {
        /* the Hub's answers show the tags and the description */
        tg_response_cache_invalidate(req->server->responses);
        return true;
    }
    if (status == TG_CAT_CONFLICT)
        tg_respond_problem(req, "too_many_tags",
                           "%s/%s would have more than %d tags; nothing was changed", model->org,
                           model->name, TG_TAGS_MAX);
    else if (status == TG_CAT_NOT_FOUND)
        tg_respond_problem(req,
                           why && strcmp(why, "version_not_found") == 0 ? "version_not_found"
                                                                        : "model_not_found",
                           "%s/%s was deleted meanwhile", model->org, model->name);
    else
        tg_respond_catalog_failure(req, status);
    return false;
}

typedef struct query_values {
    const char *name;
    const char **values;
    unsigned max, count;
} query_values;

static enum MHD_Result collect_query_value(void *cls, enum MHD_ValueKind kind, const char *key,
                                           const char *value)
{
    (void)kind;
    query_values *q = cls;
    if (key != NULL && strcmp(key, q->name) == 0) {
        if (q->count < q->max)
            q->values[q->count] = value ? value : "";
        q->count++;
    }
    return MHD_YES;
}

unsigned tg_query_all(const tg_request *req, const char *name, const char **values, unsigned max)
{
    query_values q = {.name = name, .values = values, .max = max};
    MHD_get_connection_values(req->connection, MHD_GET_ARGUMENT_KIND, collect_query_value, &q);
    return q.count;
}

void tg_version_lifecycle_json(json_t *body, const tg_version *version)
{
    bool deprecated = version->deprecated_at[0] != '\0';
    json_object_set_new(body, "deprecated", json_boolean(deprecated));
    if (deprecated) {
        json_object_set_new(body, "deprecated_at", json_string(version->deprecated_at));
        json_object_set_new(body, "deprecation_reason", json_string(version->deprecated_reason));
    }
}

json_t *tg_version_json(tg_server *server, const tg_model *model, const tg_version *version,
                        bool with_files, tg_cat_status *status)
{
    *status = TG_CAT_ERROR;
    char full_name[2 * TG_NAME_MAX + 2];
    snprintf(full_name, sizeof full_name, "%s/%s", model->org, model->name);
    json_t *body = json_pack(
        "{s:s, s:I, s:s, s:s}", "model", full_name, "version", (json_int_t)version->number, "state",
        version->published ? "published" : "draft", "created_at", version->created_at);
    if (body == NULL)
        return NULL;
    json_object_set_new(body, "published_at", string_or_null(version->published_at));
    json_object_set_new(body, "digest", string_or_null(version->digest));
    /* lineage of a version made by a conversion job; null for uploaded ones */
    json_object_set_new(body, "derived_from",
                        version->derived_from > 0 ? json_integer((json_int_t)version->derived_from)
                                                  : json_null());
    json_object_set_new(body, "dtype", string_or_null(version->derived_dtype));
    /* its description and tags (schema 15) */
    char *description = malloc(TG_DESCRIPTION_MAX + 1);
    tg_cat_status described =
        description ? tg_catalog_version_description(server->catalog, version->id, description)
                    : TG_CAT_ERROR;
    json_t *tags =
        described == TG_CAT_OK ? tg_tags_json(server, model->id, version->id, &described) : NULL;
    if (tags == NULL) {
        free(description);
        *status = described;
        json_decref(body);
        return NULL;
    }
    json_object_set_new(body, "description", json_string(description));
    json_object_set_new(body, "tags", tags);
    free(description);
    tg_version_lifecycle_json(body, version);
    json_t *code = tg_code_files_json(server, model->id, version->number, status);
    if (code == NULL) {
        json_decref(body);
        return NULL;
    }
    json_object_set_new(body, "holds_code", json_boolean(json_array_size(code) > 0));
    json_object_set_new(body, "code_files", code);
    if (with_files) {
        json_t *files = json_array();
        tg_cat_status listed =
            tg_catalog_file_list(server->catalog, version->id, NULL, 0, add_file, files);
        if (listed != TG_CAT_OK) {
            *status = listed;
            json_decref(files);
            json_decref(body);
            return NULL;
        }
        json_object_set_new(body, "files", files);
        /* a version a mirror made: its upstream repository and commit (catalog_mirror.h) */
        tg_mirror_record mirror;
        tg_cat_status found = tg_catalog_mirror_version_get(server->catalog, version->id, &mirror);
        if (found == TG_CAT_OK) {
            char summary[TG_URL_MAX + TG_MIRROR_REPO_MAX + TG_MIRROR_REVISION_MAX + 128];
            snprintf(summary, sizeof summary, "Mirror of %s at commit %s (%s) from %s", mirror.repo,
                     mirror.commit, mirror.revision, mirror.endpoint);
            json_object_set_new(body, "upstream",
                                json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "endpoint",
                                          mirror.endpoint, "repo", mirror.repo, "revision",
                                          mirror.revision, "commit", mirror.commit, "mirrored_at",
                                          mirror.created_at, "description", summary));
            free(mirror.oids);
        } else if (found == TG_CAT_NOT_FOUND) {
            json_object_set_new(body, "upstream", json_null());
        } else {
            *status = found;
            json_decref(body);
            return NULL;
        }
    }
    return body;
}

static json_t *model_json(tg_server *server, const tg_model *model, tg_cat_status *status);

/* ---- GET /v1/models ---- */

/* The catalog's page of models, copied out; their tags are read after. */
typedef struct model_page {
    tg_model *models;
    unsigned count, cap;
    bool failed;
} model_page;

static void add_model_row(void *ctx, const tg_model *model)
{
    model_page *page = ctx;
    if (page->count >= page->cap) { /* cap was sized to the limit + 1 asked for */
        page->failed = true;
        return;
    }
    page->models[page->count++] = *model;
}

bool tg_models_cursor_parse(const char *key, tg_model_search *search, char *after_org,
                            char *after_name)
{
    const char *rest = key;
    if (search->by_downloads) {
        /* "~DOWNLOADS~org/name" ('~' is in no name) */
        char *end = NULL;
        if (key[0] != '~')
            return false;
        long long downloads = strtoll(key + 1, &end, 10);
        if (end == key + 1 || *end != '~' || downloads < 0)
            return false;
        search->after_downloads = downloads;
        rest = end + 1;
    } else if (key[0] == '~') {
        return false;
    }
    const char *slash = strchr(rest, '/');
    if (slash == NULL || slash == rest || (size_t)(slash - rest) > TG_NAME_MAX ||
        strlen(slash + 1) > TG_NAME_MAX || slash[1] == '\0')
        return false;
    memcpy(after_org, rest, (size_t)(slash - rest));
    after_org[slash - rest] = '\0';
    snprintf(after_name, TG_NAME_MAX + 1, "%s", slash + 1);
    search->has_after = true;
    search->after_org = after_org;
    search->after_name = after_name;
    return true;
}

void tg_models_cursor_key(const tg_model_search *search, const tg_model *last, char *key,
                          size_t key_len)
{
    if (search->by_downloads)
        snprintf(key, key_len, "~%lld~%s/%s", (long long)last->downloads, last->org, last->name);
    else
        snprintf(key, key_len, "%s/%s", last->org, last->name);
}

void tg_route_models_list(tg_request *req)
{
    /* a namespace-limited token (under --auth-read) lists its org's models only */
    const char *token_namespace = req->token_namespace;
    unsigned limit;
    char key[512];
    bool has_cursor;
    if (!tg_list_params(req, &limit, key, sizeof key, &has_cursor))
        return;
    tg_model_search search = {.org = token_namespace[0] ? token_namespace : NULL};
    const char *sort = tg_query(req, "sort"), *direction = tg_query(req, "direction");
    if (sort != NULL && strcmp(sort, "downloads") == 0)
        search.by_downloads = true;
    else if (sort != NULL && strcmp(sort, "name") != 0) {
        tg_respond_problem(req, "invalid_request", "sort is name (the default) or downloads");
        return;
    }
    if (direction != NULL && strcmp(direction, search.by_downloads ? "-1" : "1") != 0) {
        tg_respond_problem(req, "invalid_request",
                           "direction is 1 for sort=name and -1 for sort=downloads (the only "
                           "orders served)");
        return;
    }
    char after_org[TG_NAME_MAX + 1] = "", after_name[TG_NAME_MAX + 1] = "";
    if (has_cursor && !tg_models_cursor_parse(key, &search, after_org, after_name)) {
        tg_respond_problem(req, "invalid_request", "the cursor is not one this server issued");
        return;
    }
    search.text = tg_query(req, "q");
    if (search.text && strlen(search.text) > 256) {
        tg_respond_problem(req, "invalid_request", "q is limited to 256 bytes");
        return;
    }
    const char *tags[TG_SEARCH_TAGS_MAX];
    unsigned tag_count = tg_query_all(req, "tag", tags, TG_SEARCH_TAGS_MAX);
    if (tag_count > TG_SEARCH_TAGS_MAX) {
        tg_respond_problem(req, "invalid_request", "at most %d tag filters", TG_SEARCH_TAGS_MAX);
        return;
    }
    /* tag=KEY or tag=KEY=VALUE; the value part is copied out of the query text */
    char values[TG_SEARCH_TAGS_MAX][TG_TAG_VALUE_MAX + 1];
    char keys[TG_SEARCH_TAGS_MAX][TG_TAG_KEY_MAX + 1];
    for (unsigned i = 0; i < tag_count; i++) {
        const char *equals = strchr(tags[i], '=');
        size_t key_len = equals ? (size_t)(equals - tags[i]) : strlen(tags[i]);
        if (key_len > TG_TAG_KEY_MAX ||
            (equals != NULL && !tg_valid_tag_value(equals + 1, strlen(equals + 1)))) {
            tg_respond_problem(req, "invalid_tag", "a tag filter is KEY or KEY=VALUE");
            return;
        }
        memcpy(keys[i], tags[i], key_len);
        keys[i][key_len] = '\0';
        if (!tg_valid_tag_key(keys[i])) {
            tg_respond_problem(req, "invalid_tag", "a tag filter is KEY or KEY=VALUE");
            return;
        }
        search.tag_keys[i] = keys[i];
        search.tag_values[i] = NULL;
        if (equals != NULL) {
            snprintf(values[i], sizeof values[i], "%s", equals + 1);
            search.tag_values[i] = values[i];
        }
    }
    search.tag_count = tag_count;
    /* this replica's own downloads show at once (one batched write, if any pending) */
    if (search.by_downloads)
        (void)tg_downloads_flush(req->server->downloads);
    search.limit = limit + 1; /* one more than asked tells whether a next page exists */
    model_page page = {.models = calloc((size_t)limit + 1, sizeof(tg_model)), .cap = limit + 1};
    if (page.models == NULL) {
        tg_respond_internal(req, "out of memory");
        return;
    }
    tg_cat_status status =
        tg_catalog_model_search(req->server->catalog, &search, add_model_row, &page);
    json_t *models = json_array();
    unsigned shown = page.count > limit ? limit : page.count;
    for (unsigned i = 0; status == TG_CAT_OK && !page.failed && i < shown; i++) {
        const tg_model *model = &page.models[i];
        json_t *model_tags = tg_tags_json(req->server, model->id, 0, &status);
        if (model_tags == NULL)
            break;
        char full_name[2 * TG_NAME_MAX + 2];
        snprintf(full_name, sizeof full_name, "%s/%s", model->org, model->name);
        /* which of the model's versions hold code (the code policy) */
        json_t *numbers = code_versions_json(req->server, model->id, &status);
        if (numbers == NULL) {
            json_decref(model_tags);
            break;
        }
        json_t *item =
            json_pack("{s:s, s:s, s:s, s:o, s:I, s:b, s:o}", "name", full_name, "description",
                      model->description, "created_at", model->created_at, "tags", model_tags,
                      "downloads", (json_int_t)model->downloads, "holds_code",
                      json_array_size(numbers) > 0, "code_versions", numbers);
        if (item == NULL || json_array_append_new(models, item) != 0)
            page.failed = true;
    }
    if (status != TG_CAT_OK || page.failed || models == NULL) {
        json_decref(models);
        free(page.models);
        if (status == TG_CAT_OK)
            tg_respond_internal(req, "out of memory");
        else
            tg_respond_catalog_failure(req, status);
        return;
    }
    char next[512];
    if (page.count > limit)
        tg_models_cursor_key(&search, &page.models[limit - 1], next, sizeof next);
    free(page.models);
    json_t *body = json_object();
    json_object_set_new(body, "models", models);
    tg_set_next_cursor(body, page.count > limit ? next : NULL);
    tg_respond_json(req, 200, body);
}

/* ---- PATCH /v1/models/{org}/{name} ---- */

void tg_route_model_patch(tg_request *req)
{
    tg_model *model = tg_model_alloc(req);
    if (model == NULL)
        return;
    tg_meta_patch patch;
    if (tg_lookup_model(req, model) && tg_meta_patch_parse(req, &patch)) {
        if (tg_meta_patch_apply(req, model, 0, &patch)) {
            tg_cat_status status =
                tg_catalog_model_get(req->server->catalog, model->org, model->name, model);
            json_t *body = status == TG_CAT_OK ? model_json(req->server, model, &status) : NULL;
            if (body == NULL)
                tg_respond_catalog_failure(req, status);
            else
                tg_respond_json(req, 200, body);
        }
        tg_meta_patch_free(&patch);
    }
    free(model);
}

/* ---- POST /v1/models ---- */

void tg_route_model_create(tg_request *req)
{
    json_t *body = tg_json_body(req);
    if (body == NULL)
        return;
    static const char *const fields[] = {"name", "description", NULL};
    if (!tg_json_known_fields(req, body, fields)) {
        json_decref(body);
        return;
    }
    const char *full_name = json_string_value(json_object_get(body, "name"));
    json_t *description_value = json_object_get(body, "description");
    const char *description = "";
    if (full_name == NULL) {
        json_decref(body);
        tg_respond_problem(req, "invalid_request", "\"name\" (a string \"org/name\") is required");
        return;
    }
    if (description_value != NULL && !json_is_null(description_value)) {
        description = json_string_value(description_value);
        if (description == NULL || strlen(description) > TG_DESCRIPTION_MAX) {
            json_decref(body);
            tg_respond_problem(req, "invalid_request",
                               "\"description\" must be a string of at most %d bytes",
                               TG_DESCRIPTION_MAX);
            return;
        }
    }
    char org[TG_NAME_MAX + 2], name[TG_NAME_MAX + 2];
    const char *slash = strchr(full_name, '/');
    if (slash == NULL || (size_t)(slash - full_name) > TG_NAME_MAX ||
        strlen(slash + 1) > TG_NAME_MAX) {
        json_decref(body);
        tg_respond_problem(req, "invalid_name", "a model name is org/name");
        return;
    }
    memcpy(org, full_name, (size_t)(slash - full_name));
    org[slash - full_name] = '\0';
    snprintf(name, sizeof name, "%s", slash + 1);
    if (!tg_valid_name_part(org) || !tg_valid_name_part(name)) {
        json_decref(body);
        tg_respond_problem(req, "invalid_name",
                           "each part of org/name is [A-Za-z0-9][A-Za-z0-9._-]{0,63} without '..'");
        return;
    }
    if (!tg_auth_namespace(req, TG_SCOPE_WRITE, org)) {
        json_decref(body);
        return;
    }
    tg_model *model = malloc(sizeof *model);
    tg_cat_status status =
        model ? tg_catalog_model_create(req->server->catalog, org, name, description, model)
              : TG_CAT_ERROR;
    json_decref(body);
    json_t *created = status == TG_CAT_OK ? model_json(req->server, model, &status) : NULL;
    if (status == TG_CAT_EXISTS)
        tg_respond_problem(req, "model_exists", "the model %s/%s already exists", org, name);
    else if (created == NULL)
        tg_respond_catalog_failure(req, status);
    else
        tg_respond_json(req, 201, created);
    free(model);
}

/* ---- GET /v1/models/{org}/{name} ---- */

static void add_alias(void *ctx, const char *alias, int64_t number)
{
    json_object_set_new(ctx, alias, json_integer(number));
}

typedef struct version_items {
    tg_server *server;
    int64_t model_id;
    json_t *items;
    tg_cat_status status; /* the first failure of a nested read */
} version_items;

static void add_version(void *ctx, const tg_version *version)
{
    version_items *list = ctx;
    json_t *item =
        json_pack("{s:I, s:s, s:s}", "version", (json_int_t)version->number, "state",
                  version->published ? "published" : "draft", "created_at", version->created_at);
    if (item == NULL)
        return;
    json_object_set_new(item, "published_at", string_or_null(version->published_at));
    json_object_set_new(item, "digest", string_or_null(version->digest));
    /* its description and tags (a nested read: allowed in a visitor, catalog.h) */
    char *description = malloc(TG_DESCRIPTION_MAX + 1);
    tg_cat_status status = description ? tg_catalog_version_description(list->server->catalog,
                                                                        version->id, description)
                                       : TG_CAT_ERROR;
    json_t *tags = status == TG_CAT_OK
                       ? tg_tags_json(list->server, list->model_id, version->id, &status)
                       : NULL;
    if (tags == NULL) {
        if (list->status == TG_CAT_OK)
            list->status = status;
        free(description);
        json_decref(item);
        return;
    }
    json_object_set_new(item, "description", json_string(description));
    json_object_set_new(item, "tags", tags);
    free(description);
    tg_version_lifecycle_json(item, version);
    json_array_append_new(list->items, item);
}

/* NULL when the catalog (*status says how) or memory failed. */
static json_t *model_json(tg_server *server, const tg_model *model, tg_cat_status *status)
{
    *status = TG_CAT_ERROR;
    char full_name[2 * TG_NAME_MAX + 2];
    snprintf(full_name, sizeof full_name, "%s/%s", model->org, model->name);
    json_t *aliases = json_object(), *versions = json_array();
    tg_version latest;
    tg_cat_status latest_status =
        tg_catalog_version_latest_published(server->catalog, model->id, &latest);
    if (latest_status == TG_CAT_OK)
        json_object_set_new(aliases, "latest", json_integer(latest.number));
    tg_cat_status listed = latest_status == TG_CAT_NOT_FOUND ? TG_CAT_OK : latest_status;
    if (listed == TG_CAT_OK)
        listed = tg_catalog_alias_list(server->catalog, model->id, add_alias, aliases);
    version_items list = {server, model->id, versions, TG_CAT_OK};
    if (listed == TG_CAT_OK)
        listed = tg_catalog_version_list(server->catalog, model->id, add_version, &list);
    if (listed == TG_CAT_OK)
        listed = list.status;
    json_t *tags = listed == TG_CAT_OK ? tg_tags_json(server, model->id, 0, &listed) : NULL;
    json_t *code = listed == TG_CAT_OK ? code_versions_json(server, model->id, &listed) : NULL;
    if (listed != TG_CAT_OK) {
        *status = listed;
        json_decref(tags);
        json_decref(code);
        json_decref(aliases);
        json_decref(versions);
        return NULL;
    }
    size_t i;
    json_t *item;
    json_array_foreach(versions, i, item)
    {
        int64_t number = json_integer_value(json_object_get(item, "version"));
        json_object_set_new(item, "holds_code", json_boolean(number_in(code, number)));
    }
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:b, s:o, s:o, s:I}", "name", full_name,
                     "description", model->description, "created_at", model->created_at, "aliases",
                     aliases, "versions", versions, "holds_code", json_array_size(code) > 0,
                     "code_versions", code, "tags", tags, "downloads",
                     (json_int_t)model->downloads);
}

void tg_route_model_get(tg_request *req)
{
    tg_model *model = tg_model_alloc(req);
    if (model == NULL)
        return;
    if (tg_lookup_model(req, model)) {
        tg_cat_status status;
        json_t *body = model_json(req->server, model, &status);
        if (body == NULL)
            tg_respond_catalog_failure(req, status);
        else
            tg_respond_json(req, 200, body);
    }
    free(model);
}

typedef struct model_blobs {
    char (*items)[TG_SHA256_HEX_LEN + 1];
    size_t count, cap;
} model_blobs;

static void collect_blob(void *ctx, const char *sha256)
{
    model_blobs *blobs = ctx;
    if (blobs->count == blobs->cap) {
        size_t cap = blobs->cap ? blobs->cap * 2 : 16;
        void *grown = realloc(blobs->items, cap * sizeof *blobs->items);
        if (grown == NULL)
            return; /* the rest stay for gc */
        blobs->items = grown;
        blobs->cap = cap;
    }
    snprintf(blobs->items[blobs->count++], TG_SHA256_HEX_LEN + 1, "%s", sha256);
}

tg_cat_status tg_model_remove(tg_server *server, const tg_model *model)
{
    /* Its blobs go with it when nothing else uses them (another model's version
     * may share one: tg_blob_reclaim keeps those). Its jobs' rows go too; their
     * ids are never reused, so a worker still running one only finds it gone.
     * Uploads in flight to it find it gone at their commit (404). */
    model_blobs blobs = {0};
    (void)tg_catalog_model_blobs(server->catalog, model->id, collect_blob, &blobs);
    pthread_mutex_lock(&server->publish_lock);
    tg_cat_status status = tg_catalog_model_delete(server->catalog, model->id);
    pthread_mutex_unlock(&server->publish_lock);
    /* after the delete: no ready answer made before it is served again */
    tg_response_cache_invalidate(server->responses);
    if (status == TG_CAT_OK) /* its preloads: memory released, never handed out again */
        tg_preload_service_model_deleted(server->preloads, model->id, model->org, model->name);
    for (size_t i = 0; status == TG_CAT_OK && i < blobs.count; i++)
        (void)tg_blob_reclaim(server->blobs, server->catalog, blobs.items[i], false);
    free(blobs.items);
    return status;
}

void tg_route_model_delete(tg_request *req)
{
    tg_model *model = tg_model_alloc(req);
    if (model == NULL)
        return;
    if (tg_lookup_model(req, model)) {
        tg_cat_status status = tg_model_remove(req->server, model);
        if (status == TG_CAT_OK || status == TG_CAT_NOT_FOUND)
            tg_respond_empty(req, 204);
        else
            tg_respond_catalog_failure(req, status);
    }
    free(model);
}

/* ---- PUT /v1/models/{org}/{name}/aliases/{alias} ---- */

void tg_route_alias_set(tg_request *req)
{
    const char *alias = tg_param(req, "alias");
    /* latest is automatic; main and HEAD are what Hugging Face clients ask for and
     * mean latest there (hf.c): an alias under any of these names, in any
     * case, would make the two APIs disagree about a version */
    static const char *const reserved[] = {"latest", "main", "head"};
    for (size_t i = 0; alias != NULL && i < sizeof reserved / sizeof reserved[0]; i++) {
        if (strcasecmp(alias, reserved[i]) == 0) {
            tg_respond_problem(req, "reserved_alias",
                               "'%s' is reserved: latest, main and HEAD (in any case) always "
                               "name the newest published version",
                               alias);
            return;
        }
    }
    if (alias == NULL || !tg_valid_alias(alias)) {
        tg_respond_problem(
            req, "invalid_name",
            "an alias is [A-Za-z0-9][A-Za-z0-9._-]{0,63}, not all digits, not a digest");
        return;
    }
    tg_model *model = tg_model_alloc(req);
    if (model == NULL)
        return;
    json_t *body = NULL;
    if (!tg_lookup_model(req, model))
        goto out;
    body = tg_json_body(req);
    if (body == NULL)
        goto out;
    static const char *const fields[] = {"version", NULL};
    if (!tg_json_known_fields(req, body, fields))
        goto out;
    json_t *number_value = json_object_get(body, "version");
    if (!json_is_integer(number_value) || json_integer_value(number_value) < 1) {
        tg_respond_problem(req, "invalid_request", "\"version\" (a version number) is required");
        goto out;
    }
    int64_t number = json_integer_value(number_value);
    tg_version version;
    tg_cat_status status =
        tg_catalog_version_get(req->server->catalog, model->id, number, &version);
    if (status == TG_CAT_NOT_FOUND) {
        tg_respond_problem(req, "version_not_found", "%s/%s has no version %lld", model->org,
                           model->name, (long long)number);
        goto out;
    }
    if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
        goto out;
    }
    if (version.deleted_at[0] != '\0') {
        tg_respond_problem(req, "version_deleted", "version %lld of %s/%s was deleted",
                           (long long)number, model->org, model->name);
        goto out;
    }
    if (!version.published) {
        tg_respond_problem(req, "version_not_published",
                           "an alias can only name a published version; %lld is a draft",
                           (long long)number);
        goto out;
    }
    tg_cat_status set = tg_catalog_alias_set(req->server->catalog, model->id, alias, number);
    /* the alias may name another version now: the answers kept under it go (also after a
     * failure, which may have moved it all the same) */
    tg_response_cache_invalidate_moving(req->server->responses);
    if (set != TG_CAT_OK) {
        tg_respond_catalog_failure(req, set);
        goto out;
    }
    tg_respond_json(req, 200,
                    json_pack("{s:s, s:I}", "alias", alias, "version", (json_int_t)number));
out:
    json_decref(body);
    free(model);
}

/* DELETE /v1/models/{org}/{name}/aliases/{alias}: "latest" (computed, never stored)
 * and the other reserved names have nothing to delete. */
void tg_route_alias_delete(tg_request *req)
{
    const char *alias = tg_param(req, "alias");
    if (alias == NULL || !tg_valid_alias(alias)) {
        tg_respond_problem(
            req, "invalid_name",
            "an alias is [A-Za-z0-9][A-Za-z0-9._-]{0,63}, not all digits, not a digest");
        return;
    }
    static const char *const reserved[] = {"latest", "main", "head"};
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
        if (strcasecmp(alias, reserved[i]) == 0) {
            tg_respond_problem(req, "reserved_alias",
                               "'%s' is reserved and computed (the newest published version, "
                               "deprecated ones skipped): there is nothing to delete",
                               alias);
            return;
        }
    }
    tg_model *model = tg_model_alloc(req);
    if (model == NULL)
        return;
    if (tg_lookup_model(req, model)) {
        tg_cat_status status = tg_catalog_alias_delete(req->server->catalog, model->id, alias);
        tg_response_cache_invalidate_moving(req->server->responses);
        if (status == TG_CAT_NOT_FOUND)
            tg_respond_problem(req, "alias_not_found", "%s/%s has no alias '%s'", model->org,
                               model->name, alias);
        else if (status != TG_CAT_OK)
            tg_respond_catalog_failure(req, status);
        else
            tg_respond_empty(req, 204);
    }
    free(model);
}
