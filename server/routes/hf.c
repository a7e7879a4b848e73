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
#include "checks.h"
#include "manifest.h"
#include "parsed_header_cache.h"
#include "routes.h"
#include "st_stats.h"

#define HF_REPO_NAME_MAX (2 * TG_NAME_MAX + 2)
#define HF_URL_MAX 2048

/* ---- errors ---- */

/* A problem+json answer that the Hub clients can also read: X-Error-Code names the
 * Hub's error kind (huggingface_hub maps it to RepositoryNotFoundError etc.), and
 * X-Repo-Commit is set when the revision was resolved (an EntryNotFound in a known
 * commit is cached as such by huggingface_hub). */
static void __attribute__((format(printf, 6, 7)))
respond_hf_error(tg_request *req, unsigned status, const char *error_code, const char *reason,
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
    tg_respond_problem_headers(req, status, reason, headers, "%s", detail);
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

static bool all_digits(const char *text)
{
    if (text[0] == '\0')
        return false;
    for (const char *p = text; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    return true;
}

/* {org}/{name} -> model; answers 404 RepoNotFound (also for a name that cannot be one). */
static bool hf_lookup_repo(tg_request *req, tg_model *model)
{
    const char *org = tg_param(req, "org"), *name = tg_param(req, "name");
    if (org == NULL || name == NULL || !tg_valid_name_part(org) || !tg_valid_name_part(name)) {
        respond_hf_error(req, 404, "RepoNotFound", "model_not_found", NULL,
                         "Repository not found: a model name is org/name");
        return false;
    }
    tg_cat_status status = tg_catalog_model_get(req->server->catalog, org, name, model);
    if (status == TG_CAT_NOT_FOUND) {
        respond_hf_error(req, 404, "RepoNotFound", "model_not_found", NULL,
                         "Repository not found: no model %s/%s", org, name);
        return false;
    }
    if (status != TG_CAT_OK) {
        respond_internal(req, "the catalog failed");
        return false;
    }
    return true;
}

/* Hub revision -> a published version: "main"/"HEAD"/"latest", a version number, a
 * 64-hex digest or an alias. A draft has no commit id, so it is not a revision here.
 * Answers 404 RevisionNotFound itself. */
static bool hf_lookup_revision(tg_request *req, const tg_model *model, const char *hub_rev,
                               tg_version *version)
{
    tg_catalog *catalog = req->server->catalog;
    const char *rev = hf_revision(hub_rev);
    tg_cat_status status = TG_CAT_NOT_FOUND;
    if (all_digits(rev)) {
        uint64_t number;
        if (tg_parse_u64(rev, &number) && number <= INT64_MAX)
            status = tg_catalog_version_get(catalog, model->id, (int64_t)number, version);
    } else if (tg_is_sha256_hex(rev)) {
        status = tg_catalog_version_by_digest(catalog, model->id, rev, version);
    } else if (strcmp(rev, "latest") == 0) {
        status = tg_catalog_version_latest_published(catalog, model->id, version);
    } else if (tg_valid_name_part(rev)) {
        int64_t number = 0;
        status = tg_catalog_alias_get(catalog, model->id, rev, &number);
        if (status == TG_CAT_OK)
            status = tg_catalog_version_get(catalog, model->id, number, version);
    }
    if (status == TG_CAT_OK && !version->published) {
        respond_hf_error(req, 404, "RevisionNotFound", "version_not_found", NULL,
                         "Revision not found: version %lld of %s/%s is a draft (not published)",
                         (long long)version->number, model->org, model->name);
        return false;
    }
    if (status == TG_CAT_NOT_FOUND) {
        respond_hf_error(req, 404, "RevisionNotFound", "version_not_found", NULL,
                         "Revision not found: %s/%s has no published revision '%s'", model->org,
                         model->name, hub_rev);
        return false;
    }
    if (status != TG_CAT_OK) {
        respond_internal(req, "the catalog failed");
        return false;
    }
    return true;
}

/* ---- the files of a version ---- */

/* Every file of the version in path order; false (and answered 500) on failure. */
static bool load_files(tg_request *req, const tg_version *version, tg_file_records *list)
{
    memset(list, 0, sizeof *list);
    if (tg_catalog_file_list(req->server->catalog, version->id, NULL, 0, tg_file_records_collect,
                             list) != TG_CAT_OK ||
        list->failed) {
        free(list->items);
        list->items = NULL;
        respond_internal(req, "the catalog failed");
        return false;
    }
    return true;
}

/* ---- GET|HEAD /{org}/{name}/resolve|raw/{rev}/{path*} ---- */

void tg_route_hf_file(tg_request *req)
{
    if (!tg_auth_read(req, tg_param(req, "org")))
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
    /* A path that cannot be a file of a version is simply not an entry of it. */
    if (path != NULL && tg_valid_file_path(path, NULL))
        status = tg_catalog_file_get(req->server->catalog, version.id, path, &file);
    if (status == TG_CAT_NOT_FOUND) {
        respond_hf_error(req, 404, "EntryNotFound", "file_not_found", version.digest,
                         "Entry not found: %s/%s revision %s has no file %s", model->org,
                         model->name, rev, path ? path : "");
    } else if (status != TG_CAT_OK) {
        respond_internal(req, "the catalog failed");
    } else {
        char linked_etag[70], linked_size[24];
        snprintf(linked_etag, sizeof linked_etag, "\"%s\"", file.sha256);
        snprintf(linked_size, sizeof linked_size, "%" PRIu64, file.size);
        /* The commit and the LFS-style validators ride on every answer, 206 and 304 too. */
        const char *const hub_headers[] = {"X-Repo-Commit",
                                           version.digest,
                                           "X-Linked-Etag",
                                           linked_etag,
                                           "X-Linked-Size",
                                           linked_size,
                                           NULL};
        tg_serve_file(req, &file, hub_headers);
    }
    free(model);
}

/* ---- model JSON ---- */

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

/* The fields the Hub gives every model; sha and lastModified from version (NULL: none
 * published yet). */
static json_t *model_summary_json(const tg_model *model, const tg_version *version)
{
    char repo[HF_REPO_NAME_MAX], object_id[32];
    snprintf(repo, sizeof repo, "%s/%s", model->org, model->name);
    /* The Hub's _id is a 24-hex object id; the catalog row id stands in for it. */
    snprintf(object_id, sizeof object_id, "%024llx", (unsigned long long)model->id);
    json_t *body =
        json_pack("{s:s, s:s, s:s, s:s, s:b, s:b, s:b, s:i, s:i, s:[s], s:s, s:s}", "_id",
                  object_id, "id", repo, "modelId", repo, "author", model->org, "private", 0,
                  "gated", 0, "disabled", 0, "downloads", 0, "likes", 0, "tags", "safetensors",
                  "library_name", "safetensors", "createdAt", model->created_at);
    if (body == NULL)
        return NULL;
    json_object_set_new(body, "sha", version ? json_string(version->digest) : json_null());
    json_object_set_new(body, "lastModified",
                        json_string(version ? version->published_at : model->created_at));
    json_object_set_new(body, "description", json_string(model->description));
    return body;
}

/* Summary plus siblings, safetensors parameters and usedStorage of version. */
static json_t *model_info_json(tg_request *req, const tg_model *model, const tg_version *version)
{
    json_t *body = model_summary_json(model, version);
    if (body == NULL || version == NULL) {
        if (body)
            json_object_set_new(body, "siblings", json_array());
        return body;
    }
    tg_file_records files;
    if (!load_files(req, version, &files)) {
        json_decref(body);
        return NULL;
    }
    json_t *siblings = json_array();
    uint64_t used = 0;
    for (size_t i = 0; i < files.count; i++) {
        json_array_append_new(siblings, json_pack("{s:s}", "rfilename", files.items[i].path));
        used += files.items[i].size;
    }
    json_object_set_new(body, "siblings", siblings);
    json_object_set_new(body, "usedStorage", json_integer((json_int_t)used));
    json_object_set_new(body, "version", json_integer((json_int_t)version->number));
    uint64_t counts[ST_DTYPE_COUNT] = {0}, total = 0;
    bool any = false;
    if (!add_parameters(req->server, &files, counts, &total, &any)) {
        free(files.items);
        json_decref(body);
        respond_hf_error(req, 500, NULL, "blob_damaged", NULL, "%s",
                         "a stored safetensors header is damaged or unreadable; an operator "
                         "must run tensorgate fsck");
        return NULL;
    }
    free(files.items);
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
    if (!tg_auth_read(req, tg_param(req, "org")))
        return;
    tg_model *model = malloc(sizeof *model);
    if (model == NULL) {
        respond_internal(req, "out of memory");
        return;
    }
    const char *rev = tg_param(req, "rev");
    tg_version version;
    bool has_version = false;
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
            respond_internal(req, "the catalog failed");
            goto out;
        }
        has_version = status == TG_CAT_OK;
    }
    json_t *body = model_info_json(req, model, has_version ? &version : NULL);
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

/* "scheme://host" as the client reached us: the Link header must be absolute (the JS
 * client only follows http(s) URLs). The Host value is used only if it looks like a
 * host[:port]; else the bound address. */
static void request_origin(tg_request *req, char *out, size_t cap)
{
    const char *host = tg_header(req, "Host");
    bool usable = host != NULL && host[0] != '\0' && strlen(host) < 256;
    for (const char *p = host; usable && *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '-' || *p == ':' || *p == '[' || *p == ']'))
            usable = false;
    const char *proto = tg_header(req, "X-Forwarded-Proto");
    const char *scheme = proto != NULL && strcmp(proto, "https") == 0 ? "https" : "http";
    if (usable)
        snprintf(out, cap, "%s://%s", scheme, host);
    else
        snprintf(out, cap, "%s://127.0.0.1:%u", scheme, (unsigned)req->server->port);
}

/* A 200 JSON array answer with an optional Link: <url>; rel="next" to the next
 * page, url = origin + next_path_or_null. */
static void respond_page(tg_request *req, json_t *items, const char *next_path_or_null)
{
    if (items == NULL) {
        respond_internal(req, "out of memory");
        return;
    }
    char link[HF_URL_MAX + 400];
    if (next_path_or_null != NULL) {
        char origin[300];
        request_origin(req, origin, sizeof origin);
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
    char token_namespace[TG_NAME_MAX + 1];
    if (!tg_auth_read_namespace(req, NULL, token_namespace, sizeof token_namespace))
        return;
    unsigned limit;
    char key[512];
    bool has_cursor;
    if (!tg_list_params(req, &limit, key, sizeof key, &has_cursor))
        return;
    char after_org[TG_NAME_MAX + 1] = "", after_name[TG_NAME_MAX + 1] = "";
    if (has_cursor) {
        const char *slash = strchr(key, '/');
        if (slash == NULL || (size_t)(slash - key) > TG_NAME_MAX ||
            strlen(slash + 1) > TG_NAME_MAX) {
            tg_respond_problem(req, 400, "invalid_request",
                               "the cursor is not one this server issued");
            return;
        }
        memcpy(after_org, key, (size_t)(slash - key));
        after_org[slash - key] = '\0';
        snprintf(after_name, sizeof after_name, "%s", slash + 1);
    }
    const char *search = tg_query(req, "search");
    if (search != NULL && strlen(search) > 256) {
        tg_respond_problem(req, 400, "invalid_request", "search is limited to 256 bytes");
        return;
    }
    if (search != NULL && search[0] == '\0')
        search = NULL;
    model_page page = {.models = calloc((size_t)limit + 1, sizeof(tg_model)), .cap = limit + 1};
    if (page.models == NULL) {
        respond_internal(req, "out of memory");
        return;
    }
    /* One more than asked tells whether a next page exists. */
    tg_cat_status status = tg_catalog_model_list(
        req->server->catalog, token_namespace[0] ? token_namespace : NULL, search,
        has_cursor ? after_org : NULL, has_cursor ? after_name : NULL, limit + 1, add_model, &page);
    json_t *items = json_array();
    unsigned shown = page.count > limit ? limit : page.count;
    for (unsigned i = 0; status == TG_CAT_OK && !page.failed && i < shown; i++) {
        tg_version version;
        tg_cat_status found =
            tg_catalog_version_latest_published(req->server->catalog, page.models[i].id, &version);
        json_t *item =
            found == TG_CAT_OK || found == TG_CAT_NOT_FOUND
                ? model_summary_json(&page.models[i], found == TG_CAT_OK ? &version : NULL)
                : NULL;
        if (item == NULL || json_array_append_new(items, item) != 0)
            page.failed = true;
    }
    if (status != TG_CAT_OK || page.failed || items == NULL) {
        json_decref(items);
        free(page.models);
        respond_internal(req, "the catalog failed");
        return;
    }
    if (page.count <= limit) {
        free(page.models);
        respond_page(req, items, NULL);
        return;
    }
    char last[HF_REPO_NAME_MAX], cursor[1024], next[HF_URL_MAX];
    snprintf(last, sizeof last, "%s/%s", page.models[limit - 1].org, page.models[limit - 1].name);
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
    if (search != NULL) {
        append_text(next, sizeof next, &used, "&search=");
        append_encoded(next, sizeof next, &used, search);
    }
    respond_page(req, items, next);
}

/* ---- GET /api/models/{org}/{name}/tree/{rev}[/{path*}] ---- */

static json_t *file_entry_json(const tg_file_record *file)
{
    json_t *entry = json_pack("{s:s, s:s, s:I, s:s}", "type", "file", "oid", file->sha256, "size",
                              (json_int_t)file->size, "path", file->path);
    if (entry != NULL && strcmp(file->kind, "safetensors") == 0) {
        /* The size of the git-lfs pointer file the Hub would store for this blob. */
        int pointer_size = snprintf(
            NULL, 0,
            "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %" PRIu64 "\n",
            file->sha256, file->size);
        json_object_set_new(entry, "lfs",
                            json_pack("{s:s, s:I, s:i}", "oid", file->sha256, "size",
                                      (json_int_t)file->size, "pointerSize", pointer_size));
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
                                    size_t dir_len)
{
    size_t end = first;
    while (end < files->count && is_below(files->items[end].path, dir, dir_len))
        end++;
    char oid[65];
    if (tg_manifest_digest(files->items + first, end - first, oid) != 0)
        return NULL;
    return json_pack("{s:s, s:s, s:i, s:s%}", "type", "directory", "oid", oid, "size", 0, "path",
                     dir, dir_len);
}

/* The tree below prefix ("" = the root), in the order of the files: each directory
 * right before its first file. Not recursive: the direct children only. */
static json_t *tree_entries(const tg_file_records *files, const char *prefix, bool recursive)
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
                json_array_append_new(entries, directory_entry_json(files, i, path, dir_len)) !=
                    0) {
                json_decref(entries);
                return NULL;
            }
        }
        if (recursive || strchr(path + rel_start, '/') == NULL)
            json_array_append_new(entries, file_entry_json(&files->items[i]));
    }
    return entries;
}

void tg_route_hf_tree(tg_request *req)
{
    if (!tg_auth_read(req, tg_param(req, "org")))
        return;
    unsigned limit;
    char key[64];
    bool has_cursor;
    if (!tg_list_params(req, &limit, key, sizeof key, &has_cursor))
        return;
    /* The cursor is the position in the tree: a published version never changes. */
    uint64_t offset = 0;
    if (has_cursor && !tg_parse_u64(key, &offset)) {
        tg_respond_problem(req, 400, "invalid_request", "the cursor is not one this server issued");
        return;
    }
    const char *recursive_text = tg_query(req, "recursive");
    bool recursive = recursive_text != NULL &&
                     (strcmp(recursive_text, "true") == 0 || strcmp(recursive_text, "True") == 0 ||
                      strcmp(recursive_text, "1") == 0);
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
    if (prefix != NULL && !tg_valid_file_path(prefix, NULL)) {
        respond_hf_error(req, 404, "EntryNotFound", "file_not_found", version.digest,
                         "Entry not found: %s is not a path", prefix);
        goto out;
    }
    if (!load_files(req, &version, &files))
        goto out;
    entries = tree_entries(&files, prefix ? prefix : "", recursive);
    if (entries == NULL) {
        respond_internal(req, "the tree could not be listed (out of memory, or a directory's "
                              "digest failed)");
        goto out;
    }
    if (prefix != NULL && json_array_size(entries) == 0) {
        respond_hf_error(req, 404, "EntryNotFound", "file_not_found", version.digest,
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
        snprintf(next, sizeof next, "/api/models/%s/%s/tree/%s%s%s?recursive=%s&limit=%u&cursor=%s",
                 model->org, model->name, rev, prefix ? "/" : "", prefix ? prefix : "",
                 recursive ? "true" : "false", limit, cursor);
        next_or_null = next;
    }
    respond_page(req, page, next_or_null);
out:
    json_decref(entries);
    free(files.items);
    free(model);
}
