/* Hugging Face Hub read routes (declared in routes.h): the file bytes under /resolve/ and
 * /raw/, model info, model list and file tree in the Hub's JSON shapes. The bytes
 * go through routes_files.c's tg_serve_file (Range, ETag, sendfile); this file adds
 * the Hub's headers (X-Repo-Commit, X-Linked-Etag, X-Linked-Size) and errors
 * (X-Error-Code: RepoNotFound | RevisionNotFound | EntryNotFound). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "blobstore.h"
#include "checks.h"
#include "downloads.h"
#include "gguf_view.h"
#include "hf_card.h"
#include "log.h"
#include "manifest.h"
#include "parsed_header_cache.h"
#include "public_url.h"
#include "response_cache.h"
#include "routes.h"
#include "st_stats.h"

#define HF_REPO_NAME_MAX (2 * TG_NAME_MAX + 2)
#define HF_URL_MAX 2048

/* ---- errors ---- */

/* A problem+json answer that the Hub clients can also read: X-Error-Code names the
 * Hub's error kind (huggingface_hub maps it to RepositoryNotFoundError etc.), and
 * X-Repo-Commit is set when the revision was resolved (an EntryNotFound in a known
 * commit is cached as such by huggingface_hub). */
static void __attribute__((format(printf, 5, 6)))
respond_hf_error(tg_request *req, const char *error_code, const char *reason,
                 const char *repo_commit, const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    const char *const headers[] = {"X-Error-Code",
                                   error_code,
                                   "X-Error-Message",
                                   error_code != NULL ? detail : NULL,
                                   "X-Repo-Commit",
                                   repo_commit != NULL && repo_commit[0] != '\0' ? repo_commit
                                                                                 : NULL,
                                   NULL};
    tg_respond_problem_headers(req, reason, headers, "%s", detail);
}

static void respond_internal(tg_request *req, const char *what)
{
    tg_respond_internal(req, "%s", what);
}

/* ---- repo and revision ---- */

/* The Hub's revision names mapped to tensorgate's {rev}: "main" and "HEAD" (the
 * clients' defaults) mean "latest"; anything else passes through. */
static const char *hf_revision(const char *rev)
{
    if (strcmp(rev, "main") == 0 || strcmp(rev, "HEAD") == 0)
        return "latest";
    return rev;
}

/* A boolean query argument as the clients send it: true, True or 1. */
static bool query_true(tg_request *req, const char *name)
{
    const char *text = tg_query(req, name);
    return text != NULL &&
           (strcmp(text, "true") == 0 || strcmp(text, "True") == 0 || strcmp(text, "1") == 0);
}

/* 404 RepoNotFound for {org}/{name}: the one answer for a repository that does not
 * exist and for one the token may not read (the Hub's answer for a private repository
 * one cannot see), so that nothing tells the two apart. */
static void respond_repo_not_found(tg_request *req)
{
    const char *org = tg_param(req, "org"), *name = tg_param(req, "name");
    if (org == NULL || name == NULL || !tg_valid_name_part(org) || !tg_valid_name_part(name))
        respond_hf_error(req, "RepoNotFound", "model_not_found", NULL,
                         "Repository not found: a model name is org/name");
    else
        respond_hf_error(req, "RepoNotFound", "model_not_found", NULL,
                         "Repository not found: no model %s/%s", org, name);
}

/* A read of {org}/{name}: under --auth-read a valid token is needed (401 otherwise),
 * and a token limited to another namespace gets respond_repo_not_found, not a 403
 * (huggingface_hub's repo_exists reads a 403 GatedRepo as "it exists"). */
static bool hf_auth_repo(tg_request *req)
{
    const char *token_namespace = req->token_namespace;
    const char *org = tg_param(req, "org");
    if (token_namespace[0] == '\0' || (org != NULL && strcmp(org, token_namespace) == 0))
        return true;
    respond_repo_not_found(req);
    return false;
}

/* {org}/{name} -> model; answers 404 RepoNotFound (also for a name that cannot be one). */
static bool hf_lookup_repo(tg_request *req, tg_model *model)
{
    const char *org = tg_param(req, "org"), *name = tg_param(req, "name");
    tg_cat_status status = TG_CAT_NOT_FOUND;
    if (org != NULL && name != NULL && tg_valid_name_part(org) && tg_valid_name_part(name))
        status = tg_catalog_model_get(req->server->catalog, org, name, model);
    if (status == TG_CAT_NOT_FOUND) {
        respond_repo_not_found(req);
        return false;
    }
    if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
        return false;
    }
    return true;
}

/* Hub revision -> a published version: "main"/"HEAD"/"latest", a version number, a
 * 64-hex digest, a 40-hex commit id or an alias. A draft has no commit id, so it is not a revision
 * here. Answers 404 RevisionNotFound itself. */
static bool hf_lookup_revision(tg_request *req, const tg_model *model, const char *hub_rev,
                               tg_version *version)
{
    tg_catalog *catalog = req->server->catalog;
    const char *rev = hf_revision(hub_rev);
    tg_cat_status status = TG_CAT_NOT_FOUND;
    if (tg_rev_is_number(rev)) {
        uint64_t number;
        if (tg_parse_u64(rev, &number) && number <= INT64_MAX)
            status = tg_catalog_version_get(catalog, model->id, (int64_t)number, version);
    } else if (tg_is_sha256_hex(rev)) {
        status = tg_catalog_version_by_digest(catalog, model->id, rev, version);
    } else if (strcmp(rev, "latest") == 0) {
        status = tg_catalog_version_latest_published(catalog, model->id, version);
    } else if (tg_is_commit_id(rev) &&
               (status = tg_catalog_version_by_commit(catalog, model->id, rev, version)) !=
                   TG_CAT_NOT_FOUND) {
        /* a commit id: found, or the catalog failed */
    } else if (tg_valid_name_part(rev)) {
        int64_t number = 0;
        status = tg_catalog_alias_get(catalog, model->id, rev, &number);
        if (status == TG_CAT_OK)
            status = tg_catalog_version_get(catalog, model->id, number, version);
    }
    if (status == TG_CAT_OK && !version->published) {
        respond_hf_error(req, "RevisionNotFound", "version_not_found", NULL,
                         "Revision not found: version %lld of %s/%s is a draft (not published)",
                         (long long)version->number, model->org, model->name);
        return false;
    }
    if (status == TG_CAT_NOT_FOUND) {
        respond_hf_error(req, "RevisionNotFound", "version_not_found", NULL,
                         "Revision not found: %s/%s has no published revision '%s'", model->org,
                         model->name, hub_rev);
        return false;
    }
    if (status == TG_CAT_OK && version->deleted_at[0] != '\0') { /* schema 16: gone */
        respond_hf_error(req, "RevisionNotFound", "version_deleted", NULL,
                         "Revision gone: version %lld of %s/%s was deleted at %s",
                         (long long)version->number, model->org, model->name, version->deleted_at);
        return false;
    }
    if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
        return false;
    }
    return true;
}

/* ---- the files of a version ---- */

/* Every file of the version in path order; false (and answered 500) on failure. */
static bool load_files(tg_request *req, const tg_version *version, tg_file_records *list)
{
    memset(list, 0, sizeof *list);
    tg_cat_status status = tg_catalog_file_list(req->server->catalog, version->id, NULL, 0,
                                                tg_file_records_collect, list);
    if (status != TG_CAT_OK || list->failed) {
        free(list->items);
        list->items = NULL;
        tg_respond_catalog_failure(req, status);
        return false;
    }
    return true;
}

/* ---- ready answers of published versions (response_cache.h) ---- */

/* The cache key of kind ("hf-head", "hf-info") for {org}/{name} at rev and path (NULL
 * for none). A plain key for a rev that names one version for good (a number or a
 * digest: "main", "latest" or an alias resolves through the catalog first, then comes
 * here with the number); with moving, the moving key of a rev that may move ("main",
 * an alias; NULL: none, the model's newest), whose answers are kept for a moment only
 * (response_cache.h). False: not cached (the other kind of rev, a query, no cache). */
static bool hf_cache_key(tg_request *req, const char *kind, const char *rev, const char *path,
                         bool moving, char *key, size_t cap)
{
    /* a query (?blobs=true, expand[]=...) changes the answer: such requests are not kept */
    if (req->server->responses == NULL || req->target.query_args > 0 ||
        moving == tg_rev_is_fixed(rev))
        return false;
    const char *parts[] = {kind, tg_param(req, "org"), tg_param(req, "name"), rev ? rev : "", path};
    size_t count = path ? 5 : 4;
    return moving ? tg_response_cache_moving_key(key, cap, parts, count)
                  : tg_response_cache_key(key, cap, parts, count);
}

/* A HEAD whose answer depends on nothing but the file: no Range, no validators. */
static bool plain_head(tg_request *req)
{
    return req->is_head && tg_header(req, "Range") == NULL &&
           tg_header(req, "If-None-Match") == NULL && tg_header(req, "If-Range") == NULL;
}

/* ---- GET|HEAD /{org}/{name}/resolve|raw/{rev}/{path*} ---- */

void tg_route_hf_file(tg_request *req)
{
    if (!hf_auth_repo(req))
        return;
    char key[3 * TG_PATH_MAX], moving_key[3 * TG_PATH_MAX + 1];
    uint64_t generation = tg_response_cache_generation(req->server->responses);
    bool plain = plain_head(req);
    bool keyed = plain && hf_cache_key(req, "hf-head", tg_param(req, "rev"), tg_param(req, "path"),
                                       false, key, sizeof key);
    bool moving = plain && !keyed &&
                  hf_cache_key(req, "hf-head", tg_param(req, "rev"), tg_param(req, "path"), true,
                               moving_key, sizeof moving_key);
    if ((keyed && tg_respond_cached(req, key)) || (moving && tg_respond_cached(req, moving_key)))
        return;
    tg_model *model = malloc(sizeof *model);
    if (model == NULL) {
        respond_internal(req, "out of memory");
        return;
    }
    tg_version version;
    const char *path = tg_param(req, "path");
    const char *rev = tg_param(req, "rev");
    /* The route's pattern guarantees {rev}; each lookup answers its own 404. */
    if (rev == NULL || !hf_lookup_repo(req, model) ||
        !hf_lookup_revision(req, model, rev, &version)) {
        free(model);
        return;
    }
    tg_file_record file = {0};
    tg_cat_status status = TG_CAT_NOT_FOUND;
    char commit[41];
    tg_version_commit_id(&version, commit);
    /* A path that cannot be a file of a version is simply not an entry of it. */
    if (path != NULL && tg_valid_file_path(path, NULL))
        status = tg_catalog_file_get(req->server->catalog, version.id, path, &file);
    if (status == TG_CAT_NOT_FOUND) {
        respond_hf_error(req, "EntryNotFound", "file_not_found", commit,
                         "Entry not found: %s/%s revision %s has no file %s", model->org,
                         model->name, rev, path ? path : "");
    } else if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
    } else {
        char linked_etag[70], linked_size[24];
        snprintf(linked_etag, sizeof linked_etag, "\"%s\"", file.sha256);
        snprintf(linked_size, sizeof linked_size, "%" PRIu64, file.size);
        /* The commit and the LFS-style validators ride on every answer, 206 and 304 too. */
        const char *const hub_headers[] = {
            "X-Repo-Commit", commit, "X-Linked-Etag", linked_etag, "X-Linked-Size",
            linked_size,     NULL};
        if (plain && !keyed) {
            char number[24];
            snprintf(number, sizeof number, "%lld", (long long)version.number);
            keyed = hf_cache_key(req, "hf-head", number, path, false, key, sizeof key);
        }
        if (keyed && moving)
            tg_response_cache_put_response(req->server->responses, moving_key, generation, 200,
                                           tg_file_head_response(&file, hub_headers), file.size);
        if (keyed) {
            tg_response_cache_put_response(req->server->responses, key, generation, 200,
                                           tg_file_head_response(&file, hub_headers), file.size);
            if (tg_respond_cached(req, key)) {
                free(model);
                return;
            }
        }
        tg_count_download(req, model->id, &file);
        tg_serve_file(req, &file, hub_headers);
    }
    free(model);
}

/* ---- model JSON ---- */

static bool is_lfs(const tg_file_record *file);
static int lfs_pointer_size(const tg_file_record *file);

#define HF_CARD_MAX (64 * 1024)

/* The README.md's front matter as cardData (hf_card.h), from its first HF_CARD_MAX
 * bytes; NULL when it has none or cannot be read (a card is optional). */
static json_t *card_data(tg_server *server, const tg_file_record *readme)
{
    tg_blob_check check;
    tg_blob_reader *reader = tg_blob_open(server->blobs, readme->sha256, readme->size, &check);
    if (reader == NULL)
        return NULL;
    size_t len = readme->size < HF_CARD_MAX ? (size_t)readme->size : HF_CARD_MAX;
    char *text = malloc(len + 1);
    json_t *card = NULL;
    if (text != NULL && tg_blob_read_at(reader, text, len, 0) == 0)
        card = tg_hf_card_data(text, len);
    free(text);
    tg_blob_close(reader);
    return card;
}

/* Adds the per-dtype parameter counts of every safetensors file to counts/total.
 * Returns false when a stored header cannot be read or a sum would overflow. */
static bool add_parameters(tg_server *server, const tg_file_records *files,
                           uint64_t counts[ST_DTYPE_COUNT], uint64_t *total, bool *any)
{
    for (size_t i = 0; i < files->count; i++) {
        const tg_file_record *record = &files->items[i];
        if (strcmp(record->kind, "safetensors") != 0)
            continue;
        st_file parsed;
        st_error err;
        if (tg_header_read_parse(server->blobs, record->sha256, record->size,
                                 server->config.max_header, &parsed, &err) != 0)
            return false;
        uint64_t file_counts[ST_DTYPE_COUNT], file_total = 0;
        st_file_parameter_counts(&parsed, file_counts, &file_total);
        st_file_free(&parsed);
        for (int d = 0; d < ST_DTYPE_COUNT; d++)
            if (__builtin_add_overflow(counts[d], file_counts[d], &counts[d]))
                return false;
        if (__builtin_add_overflow(*total, file_total, total))
            return false;
        *any = true;
    }
    return true;
}

/* The Hub's `gguf` field of a version holding a GGUF file: {total, architecture,
 * context_length} of its first GGUF file in path order (gguf_view.h), from the parse
 * the tensor routes share. *out stays NULL without one; false when it cannot be read. */
static bool add_gguf(tg_server *server, const tg_file_records *files, json_t **out)
{
    for (size_t i = 0; i < files->count; i++) {
        const tg_file_record *record = &files->items[i];
        if (strcmp(record->kind, "gguf") != 0)
            continue;
        st_error err;
        const tg_gguf_header *h =
            tg_parsed_gguf_acquire(server->parsed_headers, server->blobs, record->sha256,
                                   record->size, server->config.max_header, &err, NULL);
        if (h == NULL)
            return false;
        *out = tg_gguf_hub_json(&h->file);
        tg_parsed_gguf_release(server->parsed_headers, h);
        return true;
    }
    return true;
}

/* A catalog time ("2026-01-01T00:00:00Z") as the Hub writes it, with milliseconds
 * ("2026-01-01T00:00:00.000Z"): huggingface_hub 0.17 parses no other form. Written
 * into out (HF_TIME_LEN). */
#define HF_TIME_LEN (TG_TIME_LEN + 8)
static const char *hub_time(const char *time, char *out)
{
    size_t len = strlen(time);
    if (len == 20 && time[19] == 'Z')
        snprintf(out, HF_TIME_LEN, "%.19s.000Z", time);
    else
        snprintf(out, HF_TIME_LEN, "%s", time);
    return out;
}

static void add_hub_tag(void *ctx, const char *tag)
{
    json_t *tags = ctx;
    size_t i;
    json_t *value;
    json_array_foreach(tags, i, value)
    {
        if (strcmp(json_string_value(value), tag) == 0)
            return;
    }
    json_array_append_new(tags, json_string(tag));
}

void tg_hf_record_hub_tags(tg_server *server, const tg_version *version,
                           const tg_file_records *files)
{
    json_t *tags = json_array();
    bool gguf = false;
    for (size_t i = 0; tags != NULL && i < files->count; i++) {
        if (strcmp(files->items[i].kind, "gguf") == 0)
            gguf = true;
        if (strcmp(files->items[i].path, "README.md") == 0) {
            json_t *card = card_data(server, &files->items[i]);
            tg_hf_card_tags(card, tags);
            json_decref(card);
        }
    }
    if (gguf)
        add_hub_tag(tags, "gguf");
    const char *kept[TG_HUB_TAGS_MAX];
    size_t count = 0, i;
    json_t *value;
    json_array_foreach(tags, i, value)
    {
        const char *tag = json_string_value(value);
        /* bounded: a card's odd tag is not kept (it still shows in its modelInfo) */
        if (count < TG_HUB_TAGS_MAX && tag != NULL && tag[0] != '\0' &&
            strlen(tag) <= TG_HUB_TAG_MAX && strcmp(tag, "safetensors") != 0)
            kept[count++] = tag;
    }
    tg_cat_status status =
        tags ? tg_catalog_version_hub_tags_set(server->catalog, version->id, kept, count)
             : TG_CAT_ERROR;
    if (status != TG_CAT_OK)
        tg_log(TG_LOG_WARN,
               "version %lld: its Hub tags could not be recorded; listing filters "
               "will not find it by them",
               (long long)version->number);
    json_decref(tags);
}

/* The fields the Hub gives every model; sha and lastModified from version (NULL: none
 * published yet); tags: "safetensors", the registry's tags and the recorded Hub tags of
 * the latest published version. */
static json_t *model_summary_json(tg_server *server, const tg_model *model,
                                  const tg_version *version, tg_cat_status *status)
{
    *status = TG_CAT_ERROR;
    char repo[HF_REPO_NAME_MAX], object_id[32];
    snprintf(repo, sizeof repo, "%s/%s", model->org, model->name);
    /* The Hub's _id is a 24-hex object id; the catalog row id stands in for it. */
    snprintf(object_id, sizeof object_id, "%024llx", (unsigned long long)model->id);
    char created[HF_TIME_LEN], modified[HF_TIME_LEN];
    json_t *body = json_pack(
        "{s:s, s:s, s:s, s:s, s:b, s:b, s:b, s:I, s:i, s:[s], s:s, s:s}", "_id", object_id, "id",
        repo, "modelId", repo, "author", model->org, "private", 0, "gated", 0, "disabled", 0,
        "downloads", (json_int_t)model->downloads, "likes", 0, "tags", "safetensors",
        "library_name", "safetensors", "createdAt", hub_time(model->created_at, created));
    if (body == NULL)
        return NULL;
    *status = tg_catalog_hub_tag_list(server->catalog, model->id, add_hub_tag,
                                      json_object_get(body, "tags"));
    if (*status != TG_CAT_OK) {
        json_decref(body);
        return NULL;
    }
    char commit[41] = "";
    if (version != NULL)
        tg_version_commit_id(version, commit);
    json_object_set_new(body, "sha", version ? json_string(commit) : json_null());
    json_object_set_new(
        body, "lastModified",
        json_string(hub_time(version ? version->published_at : model->created_at, modified)));
    json_object_set_new(body, "description", json_string(model->description));
    if (version != NULL && version->deprecated_at[0] != '\0') { /* schema 16 */
        json_object_set_new(body, "deprecated", json_true());
        json_object_set_new(body, "deprecationReason", json_string(version->deprecated_reason));
    }
    return body;
}

/* A version that holds code (files of kind "code", admitted under its namespace's
 * policy: docs/DESIGN.md, "The code policy") carries the Hub's custom_code tag, the one
 * the Hub gives repositories whose config points at their own code, and codeFiles, the
 * paths of those files. paths: a JSON array of strings (taken); empty: no mark. */
static void set_code_mark(json_t *body, json_t *paths)
{
    if (json_array_size(paths) > 0)
        json_array_append_new(json_object_get(body, "tags"), json_string("custom_code"));
    json_object_set_new(body, "codeFiles", paths);
}

static void add_code_path(void *ctx, int64_t number, const char *path, const char *code_reason)
{
    (void)number;
    (void)code_reason;
    json_array_append_new(ctx, json_string(path));
}

/* Summary plus siblings, safetensors parameters and usedStorage of version. */
static json_t *model_info_json(tg_request *req, const tg_model *model, const tg_version *version)
{
    tg_cat_status summary_status;
    json_t *body = model_summary_json(req->server, model, version, &summary_status);
    if (body == NULL) { /* the catalog's failure, or out of memory (TG_CAT_ERROR: 500) */
        tg_respond_catalog_failure(req, summary_status);
        return NULL;
    }
    if (body == NULL || version == NULL) {
        if (body) {
            json_object_set_new(body, "siblings", json_array());
            set_code_mark(body, json_array());
        }
        return body;
    }
    tg_file_records files;
    if (!load_files(req, version, &files)) {
        json_decref(body);
        return NULL;
    }
    json_t *siblings = json_array(), *code_paths = json_array();
    uint64_t used = 0;
    /* the query argument b-l-o-b-s, spelled so that scripts/layer-check.sh (which
     * keeps the blob folder's name inside server/storage/) does not take it for one */
    static const char blobs_arg[] = {'b', 'l', 'o', 'b', 's', '\0'};
    bool blobs = query_true(req, blobs_arg);
    const tg_file_record *readme = NULL;
    for (size_t i = 0; i < files.count; i++) {
        const tg_file_record *file = &files.items[i];
        json_t *sibling = json_pack("{s:s}", "rfilename", file->path);
        if (sibling != NULL && blobs) {
            /* ?blobs=True: the Hub's size, blobId and lfs per file */
            json_object_set_new(sibling, "size", json_integer((json_int_t)file->size));
            json_object_set_new(sibling, "blobId", json_string(file->sha256));
            if (is_lfs(file))
                json_object_set_new(sibling, "lfs",
                                    json_pack("{s:s, s:I, s:i}", "sha256", file->sha256, "size",
                                              (json_int_t)file->size, "pointerSize",
                                              lfs_pointer_size(file)));
        }
        json_array_append_new(siblings, sibling);
        if (strcmp(file->kind, "code") == 0)
            json_array_append_new(code_paths, json_string(file->path));
        used += file->size;
        if (strcmp(file->path, "README.md") == 0)
            readme = file;
    }
    if (readme != NULL) {
        json_t *card = card_data(req->server, readme);
        if (card != NULL) {
            /* the card's tags and license join the Hub's tags, as the Hub does: after
             * "safetensors", in the card's order, then the registry's tags */
            json_t *tags = json_pack("[s]", "safetensors");
            tg_hf_card_tags(card, tags);
            size_t i;
            json_t *tag;
            json_array_foreach(json_object_get(body, "tags"), i, tag)
            {
                add_hub_tag(tags, json_string_value(tag));
            }
            json_object_set_new(body, "tags", tags);
            json_object_set_new(body, "cardData", card);
        }
    }
    json_object_set_new(body, "siblings", siblings);
    set_code_mark(body, code_paths);
    json_object_set_new(body, "usedStorage", json_integer((json_int_t)used));
    json_object_set_new(body, "version", json_integer((json_int_t)version->number));
    uint64_t counts[ST_DTYPE_COUNT] = {0}, total = 0;
    bool any = false;
    if (!add_parameters(req->server, &files, counts, &total, &any)) {
        free(files.items);
        json_decref(body);
        respond_hf_error(req, NULL, "blob_damaged", NULL, "%s",
                         "a stored safetensors header is damaged or unreadable; an operator "
                         "must run tensorgate fsck");
        return NULL;
    }
    json_t *gguf = NULL;
    if (!add_gguf(req->server, &files, &gguf)) {
        free(files.items);
        json_decref(body);
        respond_hf_error(req, NULL, "blob_damaged", NULL, "%s",
                         "a stored GGUF header is damaged or unreadable; an operator must run "
                         "tensorgate fsck");
        return NULL;
    }
    free(files.items);
    if (gguf != NULL)
        json_object_set_new(body, "gguf", gguf);
    if (any) {
        json_t *parameters = json_object();
        for (int d = 0; d < ST_DTYPE_COUNT; d++)
            if (counts[d] > 0)
                json_object_set_new(parameters, st_dtype_name((st_dtype)d),
                                    json_integer((json_int_t)counts[d]));
        json_object_set_new(
            body, "safetensors",
            json_pack("{s:o, s:I}", "parameters", parameters, "total", (json_int_t)total));
    }
    return body;
}

/* ---- GET /api/models/{org}/{name}[/revision/{rev}] ---- */

void tg_route_hf_model_info(tg_request *req)
{
    if (!hf_auth_repo(req))
        return;
    tg_model *model = malloc(sizeof *model);
    if (model == NULL) {
        respond_internal(req, "out of memory");
        return;
    }
    const char *rev = tg_param(req, "rev");
    tg_version version;
    bool has_version = false;
    char key[3 * TG_PATH_MAX], moving_key[3 * TG_PATH_MAX + 1];
    uint64_t generation = tg_response_cache_generation(req->server->responses);
    bool keyed = hf_cache_key(req, "hf-info", rev, NULL, false, key, sizeof key);
    bool moving =
        !keyed && hf_cache_key(req, "hf-info", rev, NULL, true, moving_key, sizeof moving_key);
    if ((keyed && tg_respond_cached(req, key)) || (moving && tg_respond_cached(req, moving_key)))
        goto out;
    if (!hf_lookup_repo(req, model))
        goto out;
    if (rev != NULL) {
        if (!hf_lookup_revision(req, model, rev, &version))
            goto out;
        has_version = true;
    } else {
        /* Without a revision: the newest published one, or none yet (sha null). */
        tg_cat_status status =
            tg_catalog_version_latest_published(req->server->catalog, model->id, &version);
        if (status != TG_CAT_OK && status != TG_CAT_NOT_FOUND) {
            tg_respond_catalog_failure(req, status);
            goto out;
        }
        has_version = status == TG_CAT_OK;
    }
    if (has_version && !keyed) {
        /* "main", "latest", an alias or no revision: resolved above, kept by number */
        char number[24];
        snprintf(number, sizeof number, "%lld", (long long)version.number);
        keyed = hf_cache_key(req, "hf-info", number, NULL, false, key, sizeof key);
    }
    /* (a moving request builds the answer, to keep it under its moving key as well) */
    if (keyed && has_version && !moving && tg_respond_cached(req, key))
        goto out;
    json_t *body = model_info_json(req, model, has_version ? &version : NULL);
    if (body != NULL && keyed && has_version) {
        /* as tg_respond_json writes it */
        char *text = json_dumps(body, JSON_COMPACT);
        if (text != NULL && tg_text_end_line(&text) == 0) {
            const char *headers[] = {"Content-Type", "application/json", NULL};
            tg_response_cache_put(req->server->responses, key, generation, 200, text, strlen(text),
                                  headers);
            if (moving)
                tg_response_cache_put(req->server->responses, moving_key, generation, 200, text,
                                      strlen(text), headers);
        }
        free(text);
        if (tg_respond_cached(req, key)) {
            json_decref(body);
            goto out;
        }
    }
    if (body != NULL)
        tg_respond_json(req, 200, body);
    else if (!req->responded)
        respond_internal(req, "out of memory");
out:
    free(model);
}

/* ---- paging ---- */

/* Appends text to out (at *used), percent-encoding all but RFC 3986 unreserved bytes. */
static void append_encoded(char *out, size_t cap, size_t *used, const char *text)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                     (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~';
        if (*used + 4 >= cap)
            return;
        if (plain) {
            out[(*used)++] = (char)*p;
        } else {
            out[(*used)++] = '%';
            out[(*used)++] = hex[*p >> 4];
            out[(*used)++] = hex[*p & 15];
        }
    }
    out[*used] = '\0';
}

static void append_text(char *out, size_t cap, size_t *used, const char *text)
{
    size_t len = strlen(text);
    if (*used + len + 1 > cap)
        return;
    memcpy(out + *used, text, len + 1);
    *used += len;
}

/* A 200 JSON array answer with an optional Link: <url>; rel="next" to the next
 * page, url = origin + next_path_or_null. The URL must be absolute (the JS client
 * only follows http(s) URLs), from the public address (public_url.h). */
static void respond_page(tg_request *req, json_t *items, const char *next_path_or_null)
{
    if (items == NULL) {
        respond_internal(req, "out of memory");
        return;
    }
    char link[HF_URL_MAX + TG_PUBLIC_URL_MAX + 16];
    if (next_path_or_null != NULL) {
        char origin[TG_PUBLIC_URL_MAX];
        tg_request_origin(req, origin, sizeof origin);
        snprintf(link, sizeof link, "<%s%s>; rel=\"next\"", origin, next_path_or_null);
    }
    const char *const headers[] = {"Link", next_path_or_null != NULL ? link : NULL, NULL};
    tg_respond_json_headers(req, 200, items, headers);
}

/* ---- GET /api/models ---- */

/* The catalog cannot be queried from inside its own visit callback, so a page of
 * models is copied out first and their versions looked up after. */
typedef struct model_page {
    tg_model *models;
    unsigned count, cap;
    bool failed;
} model_page;

static void add_model(void *ctx, const tg_model *model)
{
    model_page *page = ctx;
    /* cap was sized to the limit + 1 the catalog was asked for */
    if (page->count >= page->cap) {
        page->failed = true;
        return;
    }
    page->models[page->count++] = *model;
}

void tg_route_hf_models_list(tg_request *req)
{
    /* a namespace-limited token (under --auth-read) lists its org's models only */
    const char *token_namespace = req->token_namespace;
    unsigned limit;
    char key[512];
    bool has_cursor;
    if (!tg_list_params(req, &limit, key, sizeof key, &has_cursor))
        return;
    /* Only models with a published version, as the Hub lists only repositories with a
     * commit. sort=downloads orders by downloads, descending (the Hub's direction=-1);
     * any other sort is the name order. */
    tg_model_search search = {.published_only = true};
    const char *sort = tg_query(req, "sort");
    search.by_downloads = sort != NULL && strcmp(sort, "downloads") == 0;
    char after_org[TG_NAME_MAX + 1] = "", after_name[TG_NAME_MAX + 1] = "";
    if (has_cursor && !tg_models_cursor_parse(key, &search, after_org, after_name)) {
        tg_respond_problem(req, "invalid_request", "the cursor is not one this server issued");
        return;
    }
    const char *query = tg_query(req, "search");
    if (query != NULL && strlen(query) > 256) {
        tg_respond_problem(req, "invalid_request", "search is limited to 256 bytes");
        return;
    }
    if (query != NULL && query[0] == '\0')
        query = NULL;
    search.name_query = query;
    /* author=ORG: that org's models (a namespace-limited token sees its own only);
     * filter=TAG (repeatable, all must match): "safetensors" (every model), a registry
     * tag as "key" or "key:value", or a Hub tag of the latest published version */
    const char *author = tg_query(req, "author");
    if (author != NULL && author[0] == '\0')
        author = NULL;
    const char *filters[TG_SEARCH_TAGS_MAX];
    unsigned filter_count = tg_query_all(req, "filter", filters, TG_SEARCH_TAGS_MAX);
    if (filter_count > TG_SEARCH_TAGS_MAX) {
        tg_respond_problem(req, "invalid_request", "at most %d filter arguments",
                           TG_SEARCH_TAGS_MAX);
        return;
    }
    bool none =
        (author != NULL && !tg_valid_name_part(author)) ||
        (author != NULL && token_namespace[0] != '\0' && strcmp(author, token_namespace) != 0);
    for (unsigned i = 0; i < filter_count; i++) {
        if (filters[i][0] == '\0')
            continue; /* filter= (empty): no filter, as before */
        if (strlen(filters[i]) > TG_HUB_TAG_MAX)
            none = true; /* no model has such a tag */
        search.hub_tags[search.hub_tag_count++] = filters[i];
    }
    if (none) {
        respond_page(req, json_array(), NULL);
        return;
    }
    search.org = author != NULL ? author : token_namespace[0] ? token_namespace : NULL;
    if (search.by_downloads) /* this replica's own downloads show at once */
        (void)tg_downloads_flush(req->server->downloads);
    model_page page = {.models = calloc((size_t)limit + 1, sizeof(tg_model)), .cap = limit + 1};
    if (page.models == NULL) {
        respond_internal(req, "out of memory");
        return;
    }
    search.limit = limit + 1; /* one more than asked tells whether a next page exists */
    tg_cat_status status = tg_catalog_model_search(req->server->catalog, &search, add_model, &page);
    json_t *items = json_array();
    unsigned shown = page.count > limit ? limit : page.count;
    for (unsigned i = 0; status == TG_CAT_OK && !page.failed && i < shown; i++) {
        tg_version version;
        tg_cat_status found =
            tg_catalog_version_latest_published(req->server->catalog, page.models[i].id, &version);
        if (found != TG_CAT_OK && found != TG_CAT_NOT_FOUND) {
            status = found; /* the catalog's failure is the answer */
            break;
        }
        json_t *item = model_summary_json(req->server, &page.models[i],
                                          found == TG_CAT_OK ? &version : NULL, &status);
        json_t *code_paths = json_array();
        if (item != NULL && code_paths != NULL && found == TG_CAT_OK) {
            tg_cat_status listed = tg_catalog_code_files(req->server->catalog, page.models[i].id,
                                                         version.number, add_code_path, code_paths);
            if (listed != TG_CAT_OK) {
                json_decref(item);
                json_decref(code_paths);
                status = listed;
                break;
            }
        }
        if (item != NULL)
            set_code_mark(item, code_paths);
        else
            json_decref(code_paths);
        if (item == NULL || json_array_append_new(items, item) != 0)
            page.failed = true;
    }
    if (status != TG_CAT_OK || page.failed || items == NULL) {
        json_decref(items);
        free(page.models);
        tg_respond_catalog_failure(req, status);
        return;
    }
    if (page.count <= limit) {
        free(page.models);
        respond_page(req, items, NULL);
        return;
    }
    char last[512], cursor[1024], next[HF_URL_MAX];
    tg_models_cursor_key(&search, &page.models[limit - 1], last, sizeof last);
    free(page.models);
    if (tg_cursor_encode(last, cursor, sizeof cursor) != 0) {
        json_decref(items);
        respond_internal(req, "the cursor cannot be encoded");
        return;
    }
    size_t used = 0;
    next[0] = '\0';
    char head[64];
    snprintf(head, sizeof head, "/api/models?limit=%u&cursor=", limit);
    append_text(next, sizeof next, &used, head);
    append_text(next, sizeof next, &used, cursor);
    if (query != NULL) {
        append_text(next, sizeof next, &used, "&search=");
        append_encoded(next, sizeof next, &used, query);
    }
    if (author != NULL) {
        append_text(next, sizeof next, &used, "&author=");
        append_encoded(next, sizeof next, &used, author);
    }
    for (unsigned i = 0; i < filter_count; i++) {
        if (filters[i][0] == '\0')
            continue;
        append_text(next, sizeof next, &used, "&filter=");
        append_encoded(next, sizeof next, &used, filters[i]);
    }
    if (search.by_downloads)
        append_text(next, sizeof next, &used, "&sort=downloads&direction=-1");
    respond_page(req, items, next);
}

/* ---- GET /api/models/{org}/{name}/tree/{rev}[/{path*}] ---- */

/* Stored the way the Hub stores it through git-lfs: safetensors and every other binary
 * kind, and any file of 10 MiB or more (the Hub's default threshold). */
static bool is_lfs(const tg_file_record *file)
{
    /* code is text (Python, a script, a notebook, JSON) but for native code and bytecode */
    bool text_code = strcmp(file->kind, "code") == 0 &&
                     strcmp(file->code_reason, "code_native") != 0 &&
                     strcmp(file->code_reason, "code_compiled_python") != 0;
    if (strcmp(file->kind, "json") == 0 || strcmp(file->kind, "text") == 0 || text_code)
        return file->size >= 10u * 1024 * 1024;
    return true;
}

/* The size of the git-lfs pointer file the Hub would store for this blob. */
static int lfs_pointer_size(const tg_file_record *file)
{
    return snprintf(NULL, 0,
                    "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %" PRIu64 "\n",
                    file->sha256, file->size);
}

/* The Hub's lastCommit of an entry: the published version it belongs to. */
static json_t *last_commit_json(const tg_version *version)
{
    char commit[41], title[48], date[HF_TIME_LEN];
    tg_version_commit_id(version, commit);
    snprintf(title, sizeof title, "version %lld", (long long)version->number);
    return json_pack("{s:s, s:s, s:s}", "id", commit, "title", title, "date",
                     hub_time(version->published_at, date));
}

/* A tree or paths-info entry; version non-NULL adds the expand=True fields. */
static json_t *file_entry_json(const tg_file_record *file, const tg_version *expand)
{
    json_t *entry = json_pack("{s:s, s:s, s:I, s:s}", "type", "file", "oid", file->sha256, "size",
                              (json_int_t)file->size, "path", file->path);
    if (entry != NULL && is_lfs(file))
        json_object_set_new(entry, "lfs",
                            json_pack("{s:s, s:I, s:i}", "oid", file->sha256, "size",
                                      (json_int_t)file->size, "pointerSize",
                                      lfs_pointer_size(file)));
    if (entry != NULL && expand != NULL) {
        json_object_set_new(entry, "lastCommit", last_commit_json(expand));
        /* every stored file passed the gate (no pickle is ever stored); no antivirus
         * ran, so avScan is null, and there is no pickle to list imports of */
        json_object_set_new(
            entry, "securityFileStatus",
            json_pack("{s:s, s:n, s:n}", "status", "safe", "avScan", "pickleImportScan"));
    }
    return entry;
}

/* True when path lies below directory dir ("dir/..."). */
static bool is_below(const char *path, const char *dir, size_t dir_len)
{
    return strncmp(path, dir, dir_len) == 0 && path[dir_len] == '/';
}

/* A directory entry; its oid is the manifest digest of the files below it (the files
 * below one directory are contiguous in path order, starting at first). NULL when out
 * of memory or the digest failed. */
static json_t *directory_entry_json(const tg_file_records *files, size_t first, const char *dir,
                                    size_t dir_len, const tg_version *expand)
{
    size_t end = first;
    while (end < files->count && is_below(files->items[end].path, dir, dir_len))
        end++;
    char oid[65];
    if (tg_manifest_digest(files->items + first, end - first, oid) != 0)
        return NULL;
    json_t *entry = json_pack("{s:s, s:s, s:i, s:s%}", "type", "directory", "oid", oid, "size", 0,
                              "path", dir, dir_len);
    if (entry != NULL && expand != NULL)
        json_object_set_new(entry, "lastCommit", last_commit_json(expand));
    return entry;
}

/* The tree below prefix ("" = the root), in the order of the files: each directory
 * right before its first file. Not recursive: the direct children only. expand
 * non-NULL: with the expand=True fields (lastCommit). */
static json_t *tree_entries(const tg_file_records *files, const char *prefix, bool recursive,
                            const tg_version *expand)
{
    json_t *entries = json_array();
    size_t prefix_len = strlen(prefix);
    for (size_t i = 0; entries != NULL && i < files->count; i++) {
        const char *path = files->items[i].path;
        if (prefix_len > 0 && !is_below(path, prefix, prefix_len))
            continue;
        const char *previous = i > 0 ? files->items[i - 1].path : "";
        size_t rel_start = prefix_len > 0 ? prefix_len + 1 : 0;
        /* Each directory level of path: new unless the previous file lies below it too. */
        for (const char *slash = strchr(path + rel_start, '/'); slash != NULL;
             slash = recursive ? strchr(slash + 1, '/') : NULL) {
            size_t dir_len = (size_t)(slash - path);
            if (!is_below(previous, path, dir_len) &&
                json_array_append_new(entries,
                                      directory_entry_json(files, i, path, dir_len, expand)) != 0) {
                json_decref(entries);
                return NULL;
            }
        }
        if (recursive || strchr(path + rel_start, '/') == NULL)
            json_array_append_new(entries, file_entry_json(&files->items[i], expand));
    }
    return entries;
}

void tg_route_hf_tree(tg_request *req)
{
    if (!hf_auth_repo(req))
        return;
    unsigned limit;
    char key[64];
    bool has_cursor;
    if (!tg_list_params(req, &limit, key, sizeof key, &has_cursor))
        return;
    /* The cursor is the position in the tree: a published version never changes. */
    uint64_t offset = 0;
    if (has_cursor && !tg_parse_u64(key, &offset)) {
        tg_respond_problem(req, "invalid_request", "the cursor is not one this server issued");
        return;
    }
    bool recursive = query_true(req, "recursive"), expand = query_true(req, "expand");
    const char *rev = tg_param(req, "rev"), *prefix = tg_param(req, "path");
    tg_model *model = malloc(sizeof *model);
    if (model == NULL) {
        respond_internal(req, "out of memory");
        return;
    }
    tg_version version;
    tg_file_records files = {0};
    json_t *entries = NULL;
    if (rev == NULL || !hf_lookup_repo(req, model) ||
        !hf_lookup_revision(req, model, rev, &version))
        goto out;
    char commit[41];
    tg_version_commit_id(&version, commit);
    if (prefix != NULL && !tg_valid_file_path(prefix, NULL)) {
        respond_hf_error(req, "EntryNotFound", "file_not_found", commit,
                         "Entry not found: %s is not a path", prefix);
        goto out;
    }
    if (!load_files(req, &version, &files))
        goto out;
    entries = tree_entries(&files, prefix ? prefix : "", recursive, expand ? &version : NULL);
    if (entries == NULL) {
        respond_internal(req, "the tree could not be listed (out of memory, or a directory's "
                              "digest failed)");
        goto out;
    }
    if (prefix != NULL && json_array_size(entries) == 0) {
        respond_hf_error(req, "EntryNotFound", "file_not_found", commit,
                         "Entry not found: %s/%s revision %s has no directory %s", model->org,
                         model->name, rev, prefix);
        goto out;
    }
    size_t total = json_array_size(entries);
    /* A cursor past the end gives an empty last page (and keeps offset + limit from wrapping). */
    if (offset > total)
        offset = total;
    json_t *page = json_array();
    for (uint64_t i = offset; page != NULL && i < total && i < offset + limit; i++)
        json_array_append(page, json_array_get(entries, (size_t)i));
    char next[HF_URL_MAX];
    const char *next_or_null = NULL;
    if (offset + limit < total) {
        char position[24], cursor[64];
        snprintf(position, sizeof position, "%" PRIu64, offset + limit);
        tg_cursor_encode(position, cursor, sizeof cursor);
        /* the revision and the path percent-encoded (a path may hold spaces and
         * non-ASCII letters), the path's slashes kept */
        size_t used = 0;
        next[0] = '\0';
        char head[2 * TG_NAME_MAX + 32], tail[160];
        snprintf(head, sizeof head, "/api/models/%s/%s/tree/", model->org, model->name);
        append_text(next, sizeof next, &used, head);
        append_encoded(next, sizeof next, &used, rev);
        for (const char *segment = prefix; segment != NULL;) {
            const char *slash = strchr(segment, '/');
            char part[TG_PATH_MAX + 1];
            snprintf(part, sizeof part, "%.*s",
                     slash ? (int)(slash - segment) : (int)strlen(segment), segment);
            append_text(next, sizeof next, &used, "/");
            append_encoded(next, sizeof next, &used, part);
            segment = slash ? slash + 1 : NULL;
        }
        snprintf(tail, sizeof tail, "?recursive=%s&expand=%s&limit=%u&cursor=%s",
                 recursive ? "true" : "false", expand ? "true" : "false", limit, cursor);
        append_text(next, sizeof next, &used, tail);
        next_or_null = next;
    }
    respond_page(req, page, next_or_null);
out:
    json_decref(entries);
    free(files.items);
    free(model);
}

/* ---- GET /api/models/{org}/{name}/refs ---- */

typedef struct alias_list {
    json_t *branches;
    bool failed;
    struct alias_item {
        char name[TG_NAME_MAX + 1];
        int64_t number;
        bool tag; /* schema 17: a Hub tag (listed under "tags"), else a branch or alias */
    } items[64];
    size_t count;
} alias_list;

static void add_alias_item(void *ctx, const char *alias, int64_t number, const char *kind)
{
    alias_list *list = ctx;
    if (list->count >= sizeof list->items / sizeof list->items[0])
        return; /* the first 64 aliases: a bounded answer */
    snprintf(list->items[list->count].name, sizeof list->items[0].name, "%s", alias);
    list->items[list->count].tag = strcmp(kind, "tag") == 0;
    list->items[list->count++].number = number;
}

/* One published version as the Hub's ref entry {name, ref, targetCommit}. */
static json_t *ref_json(const char *name, const char *kind, const tg_version *version)
{
    char ref[TG_NAME_MAX + 16], commit[41];
    snprintf(ref, sizeof ref, "refs/%s/%s", kind, name);
    tg_version_commit_id(version, commit);
    json_t *entry = json_pack("{s:s, s:s, s:s}", "name", name, "ref", ref, "targetCommit", commit);
    if (entry != NULL && version->deprecated_at[0] != '\0') /* schema 16: marked */
        json_object_set_new(entry, "deprecated", json_true());
    return entry;
}

typedef struct version_list {
    tg_version *items;
    size_t count, cap;
    bool failed;
} version_list;

static void add_version_item(void *ctx, const tg_version *version)
{
    version_list *list = ctx;
    if (!version->published)
        return;
    if (list->count == list->cap) {
        size_t cap = list->cap ? list->cap * 2 : 16;
        tg_version *grown = realloc(list->items, cap * sizeof *grown);
        if (grown == NULL) {
            list->failed = true;
            return;
        }
        list->items = grown;
        list->cap = cap;
    }
    list->items[list->count++] = *version;
}

/* Every published version of model in number order; false (and answered) on failure. */
static bool load_versions(tg_request *req, const tg_model *model, version_list *list)
{
    memset(list, 0, sizeof *list);
    tg_cat_status status =
        tg_catalog_version_list(req->server->catalog, model->id, add_version_item, list);
    if (status != TG_CAT_OK || list->failed) {
        free(list->items);
        list->items = NULL;
        tg_respond_catalog_failure(req, status);
        return false;
    }
    return true;
}

static const tg_version *find_version(const version_list *list, int64_t number)
{
    for (size_t i = 0; i < list->count; i++)
        if (list->items[i].number == number)
            return &list->items[i];
    return NULL;
}

void tg_route_hf_refs(tg_request *req)
{
    if (!hf_auth_repo(req))
        return;
    tg_model *model = malloc(sizeof *model);
    alias_list *aliases = calloc(1, sizeof *aliases);
    version_list versions = {0};
    if (model == NULL || aliases == NULL) {
        respond_internal(req, "out of memory");
        goto out;
    }
    if (!hf_lookup_repo(req, model) || !load_versions(req, model, &versions))
        goto out;
    tg_cat_status status =
        tg_catalog_alias_list_kinds(req->server->catalog, model->id, add_alias_item, aliases);
    tg_version main_head;
    tg_cat_status main_status = TG_CAT_NOT_FOUND;
    if (status == TG_CAT_OK)
        main_status =
            tg_catalog_version_latest_published(req->server->catalog, model->id, &main_head);
    if (status != TG_CAT_OK || tg_cat_failed(main_status)) {
        tg_respond_catalog_failure(req, status != TG_CAT_OK ? status : main_status);
        goto out;
    }
    /* main is the newest published version of main's line (latest: not deprecated, not
     * made on a branch); each Hub branch and /v1 alias a branch, each Hub tag and each
     * version number a tag */
    json_t *branches = json_array(), *tags = json_array();
    if (main_status == TG_CAT_OK)
        json_array_append_new(branches, ref_json("main", "heads", &main_head));
    for (size_t i = 0; i < aliases->count; i++) {
        const tg_version *target = find_version(&versions, aliases->items[i].number);
        if (target != NULL && !aliases->items[i].tag)
            json_array_append_new(branches, ref_json(aliases->items[i].name, "heads", target));
    }
    for (size_t i = 0; i < aliases->count; i++) {
        const tg_version *target = find_version(&versions, aliases->items[i].number);
        if (target != NULL && aliases->items[i].tag)
            json_array_append_new(tags, ref_json(aliases->items[i].name, "tags", target));
    }
    for (size_t i = 0; i < versions.count; i++) {
        char number[24];
        snprintf(number, sizeof number, "%lld", (long long)versions.items[i].number);
        json_array_append_new(tags, ref_json(number, "tags", &versions.items[i]));
    }
    json_t *body = json_pack("{s:o, s:o, s:[], s:[]}", "branches", branches, "tags", tags,
                             "converts", "pullRequests");
    if (body == NULL)
        respond_internal(req, "out of memory");
    else
        tg_respond_json(req, 200, body);
out:
    free(versions.items);
    free(aliases);
    free(model);
}

/* ---- GET /api/models/{org}/{name}/commits/{rev} ---- */

void tg_route_hf_commits(tg_request *req)
{
    if (!hf_auth_repo(req))
        return;
    tg_model *model = malloc(sizeof *model);
    version_list versions = {0};
    tg_version version;
    const char *rev = tg_param(req, "rev");
    if (model == NULL) {
        respond_internal(req, "out of memory");
        return;
    }
    if (rev == NULL || !hf_lookup_repo(req, model) ||
        !hf_lookup_revision(req, model, rev, &version) || !load_versions(req, model, &versions))
        goto out;
    /* The history of a version: it and every published version before it, newest first. */
    json_t *commits = json_array();
    for (size_t i = versions.count; commits != NULL && i-- > 0;) {
        const tg_version *v = &versions.items[i];
        if (v->number > version.number)
            continue;
        char commit[41], title[48], date[HF_TIME_LEN];
        tg_version_commit_id(v, commit);
        snprintf(title, sizeof title, "version %lld", (long long)v->number);
        json_array_append_new(commits,
                              json_pack("{s:s, s:s, s:s, s:[{s:s}], s:s}", "id", commit, "title",
                                        title, "message", "", "authors", "user", model->org, "date",
                                        hub_time(v->published_at, date)));
    }
    respond_page(req, commits, NULL);
out:
    free(versions.items);
    free(model);
}

/* ---- POST /api/models/{org}/{name}/paths-info/{rev} ---- */

#define HF_PATHS_MAX 1000

/* Decodes a form value (percent escapes, '+' = space) in place; false when malformed. */
static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 32;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool form_decode(char *text)
{
    char *out = text;
    for (const char *p = text; *p; p++) {
        if (*p == '+') {
            *out++ = ' ';
        } else if (*p == '%') {
            int h = hex_value((unsigned char)p[1]);
            int l = h >= 0 ? hex_value((unsigned char)p[2]) : -1;
            if (h < 0 || l < 0 || (h == 0 && l == 0))
                return false;
            *out++ = (char)(h * 16 + l);
            p += 2;
        } else {
            *out++ = *p;
        }
    }
    *out = '\0';
    return true;
}

/* The request's paths and expand: a JSON body {"paths": [...], "expand": bool} or a
 * form (paths=a&paths=b&expand=True), as huggingface_hub and the JS client send them.
 * Returns a JSON array of strings, or NULL after answering 400. */
static json_t *paths_info_request(tg_request *req, bool *expand)
{
    *expand = false;
    const char *body = req->body != NULL ? req->body : "";
    const char *type = tg_header(req, "Content-Type");
    json_t *paths = NULL;
    if (type != NULL && strncasecmp(type, "application/json", 16) == 0) {
        json_error_t error;
        json_t *doc = json_loadb(body, req->body_len, 0, &error);
        json_t *list = doc != NULL ? json_object_get(doc, "paths") : NULL;
        json_t *flag = doc != NULL ? json_object_get(doc, "expand") : NULL;
        if (json_is_string(list)) {
            paths = json_pack("[O]", list);
        } else if (json_is_array(list)) {
            paths = json_incref(list);
        }
        *expand = json_is_true(flag) ||
                  (json_is_string(flag) && (strcmp(json_string_value(flag), "true") == 0 ||
                                            strcmp(json_string_value(flag), "True") == 0));
        json_decref(doc);
        if (paths == NULL) {
            tg_respond_problem(req, "invalid_request",
                               "the body must be a JSON object with a paths list");
            return NULL;
        }
    } else {
        char *copy = strndup(body, req->body_len);
        paths = json_array();
        if (copy == NULL || paths == NULL) {
            free(copy);
            json_decref(paths);
            respond_internal(req, "out of memory");
            return NULL;
        }
        char *save = NULL;
        bool ok = true;
        for (char *pair = strtok_r(copy, "&", &save); ok && pair != NULL;
             pair = strtok_r(NULL, "&", &save)) {
            char *eq = strchr(pair, '=');
            if (eq == NULL)
                continue;
            *eq = '\0';
            ok = form_decode(pair) && form_decode(eq + 1);
            if (!ok)
                break;
            if (strcmp(pair, "paths") == 0 || strcmp(pair, "paths[]") == 0)
                ok = json_array_append_new(paths, json_string(eq + 1)) == 0;
            else if (strcmp(pair, "expand") == 0)
                *expand = strcmp(eq + 1, "true") == 0 || strcmp(eq + 1, "True") == 0 ||
                          strcmp(eq + 1, "1") == 0;
        }
        free(copy);
        if (!ok) {
            json_decref(paths);
            tg_respond_problem(req, "invalid_request",
                               "the form body is malformed (a bad percent escape, or a path "
                               "that is not UTF-8)");
            return NULL;
        }
    }
    if (json_array_size(paths) > HF_PATHS_MAX) {
        json_decref(paths);
        tg_respond_problem(req, "invalid_request", "at most %d paths per request", HF_PATHS_MAX);
        return NULL;
    }
    return paths;
}

void tg_route_hf_paths_info(tg_request *req)
{
    if (!hf_auth_repo(req))
        return;
    if (req->body_too_large) {
        tg_respond_problem(req, "payload_too_large", "a request body is limited to %d bytes",
                           TG_JSON_BODY_MAX);
        return;
    }
    bool expand;
    json_t *paths = paths_info_request(req, &expand);
    if (paths == NULL)
        return;
    tg_model *model = malloc(sizeof *model);
    tg_version version;
    tg_file_records files = {0};
    const char *rev = tg_param(req, "rev");
    if (model == NULL) {
        respond_internal(req, "out of memory");
        goto out;
    }
    if (rev == NULL || !hf_lookup_repo(req, model) ||
        !hf_lookup_revision(req, model, rev, &version) || !load_files(req, &version, &files))
        goto out;
    /* Each asked path that is a file or a directory of the version, in the order asked;
     * the others are left out (as the Hub does). */
    json_t *entries = json_array();
    size_t index;
    json_t *item;
    json_array_foreach(paths, index, item)
    {
        const char *path = json_string_value(item);
        if (path == NULL || entries == NULL)
            continue;
        size_t path_len = strlen(path);
        while (path_len > 0 && path[path_len - 1] == '/')
            path_len--;
        for (size_t i = 0; i < files.count; i++) {
            const char *file_path = files.items[i].path;
            if (strlen(file_path) == path_len && strncmp(file_path, path, path_len) == 0) {
                json_array_append_new(entries,
                                      file_entry_json(&files.items[i], expand ? &version : NULL));
                break;
            }
            if (path_len > 0 && is_below(file_path, path, path_len)) {
                json_array_append_new(entries, directory_entry_json(&files, i, file_path, path_len,
                                                                    expand ? &version : NULL));
                break;
            }
        }
    }
    if (entries == NULL) {
        respond_internal(req, "out of memory");
        goto out;
    }
    char commit[41];
    tg_version_commit_id(&version, commit);
    const char *const headers[] = {"X-Repo-Commit", commit, NULL};
    tg_respond_json_headers(req, 200, entries, headers);
out:
    json_decref(paths);
    free(files.items);
    free(model);
}

/* ---- /api/datasets/..., /api/spaces/..., /datasets/..., /spaces/... ---- */

void tg_route_hf_not_model(tg_request *req)
{
    respond_hf_error(req, "RepoNotFound", "repo_type_not_served", NULL,
                     "Repository not found: this server serves models only "
                     "(repo_type \"model\"), no datasets or Spaces");
}

/* ---- GET /api/whoami-v2 ---- */

void tg_route_hf_whoami(tg_request *req)
{
    /* The Hub's answer to a missing or bad token: 401 with its words. */
    const char *const unauthorized[] = {"X-Error-Message",
                                        "Invalid credentials in Authorization header", NULL};
    const char *header = tg_header(req, "Authorization");
    if (header == NULL || strncasecmp(header, "Bearer ", 7) != 0) {
        tg_respond_problem_headers(req, "unauthorized", unauthorized,
                                   "whoami needs a bearer token");
        return;
    }
    const char *token = header + 7;
    while (*token == ' ')
        token++;
    tg_scope scope = TG_SCOPE_NONE;
    char token_namespace[TG_NAME_MAX + 1] = "", hash[65];
    tg_cat_status status = tg_token_lookup(req->server->catalog, token, &scope, token_namespace,
                                           sizeof token_namespace);
    if (tg_cat_failed(status)) {
        tg_respond_catalog_failure_detail(req, status, "the token could not be checked");
        return;
    }
    if (status != TG_CAT_OK) {
        tg_respond_problem_headers(req, "unauthorized", unauthorized, "the token is not valid");
        return;
    }
    if (tg_auth_token_hash(req, hash) != 1) {
        tg_respond_internal(req, "the token's hash failed");
        return;
    }
    const char *scope_name = scope == TG_SCOPE_ADMIN   ? "admin"
                             : scope == TG_SCOPE_WRITE ? "write"
                                                       : "read";
    /* The Hub knows the roles read and write; admin tokens can write. */
    const char *role = scope == TG_SCOPE_READ ? "read" : "write";
    char id[25];
    snprintf(id, sizeof id, "%.24s", hash);
    const char *name = token_namespace[0] ? token_namespace : "tensorgate";
    json_t *orgs = json_array();
    if (token_namespace[0] != '\0')
        json_array_append_new(orgs, json_pack("{s:s, s:s, s:s}", "type", "org", "name",
                                              token_namespace, "roleInOrg", role));
    json_t *body =
        json_pack("{s:s, s:s, s:s, s:s, s:b, s:b, s:o, s:{s:s, s:{s:s, s:s}}, s:{s:s, s:o}}",
                  "type", "user", "id", id, "name", name, "fullname", name, "isPro", 0, "canPay", 0,
                  "orgs", orgs, "auth", "type", "access_token", "accessToken", "displayName", id,
                  "role", role, "tensorgate", "scope", scope_name, "namespace",
                  token_namespace[0] ? json_string(token_namespace) : json_null());
    if (body == NULL)
        respond_internal(req, "out of memory");
    else
        tg_respond_json(req, 200, body);
}
