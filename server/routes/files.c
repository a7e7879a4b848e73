/* .../versions/{rev}/files, .../files/{path} (GET, HEAD, DELETE), .../files/{path}/header,
 * .../versions/{rev}/card (the README.md rendered for the web page) */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "checks.h"
#include "downloads.h"
#include "gguf_view.h"
#include "header_cache.h"
#include "hf_card.h"
#include "log.h"
#include "parsed_header_cache.h"
#include "reclaim.h"
#include "resources.h"
#include "response_cache.h"
#include "routes.h"

void tg_respond_blob_damaged(tg_request *req, const char *path)
{
    tg_respond_problem(req, "blob_damaged",
                       "the stored content of %s is damaged (missing, cut short or no longer "
                       "what was uploaded); an operator must run tensorgate fsck, or upload the "
                       "file again to repair it",
                       path);
}

void tg_respond_blob_store_unavailable(tg_request *req)
{
    const char *const headers[] = {"Retry-After", "5", NULL};
    tg_respond_problem_headers(req, "blob_store_unavailable", headers,
                               "the blob store cannot be reached now; try again later");
}

tg_blob_reader *tg_open_file_blob(tg_request *req, const tg_file_record *file)
{
    tg_blob_check check;
    tg_blob_reader *blob = tg_blob_open(req->server->blobs, file->sha256, file->size, &check);
    if (blob != NULL)
        return blob;
    if (check == TG_BLOB_UNREADABLE && errno == TG_BLOB_UNAVAILABLE_ERRNO)
        tg_respond_blob_store_unavailable(req);
    else if (check == TG_BLOB_UNREADABLE && tg_errno_is_exhaustion(errno))
        tg_respond_exhausted(req, NULL);
    else if (check == TG_BLOB_UNREADABLE)
        tg_respond_internal(req, "the stored content of %s cannot be opened: %s", file->path,
                            strerror(errno));
    else
        tg_respond_blob_damaged(req, file->path);
    return NULL;
}

/* ---- file bodies: read in blocks, never sendfile ----
 * MHD's sendfile path (0.9.75) loops forever when the file ends before the
 * response's length (sendfile returns 0 and MHD tries again), so a blob cut short
 * while it is being sent would spin a worker. Bodies are read here instead, and a
 * short read ends the response with an error: MHD closes the connection. */

typedef struct blob_body {
    tg_blobstore *blobs;
    tg_blob_reader *blob;
    uint64_t offset; /* blob offset of the body's first byte */
} blob_body;

static ssize_t read_blob_body(void *cls, uint64_t pos, char *buf, size_t max)
{
    blob_body *body = cls;
    uint64_t at = body->offset + pos;
    ssize_t n = tg_blob_read(body->blob, buf, max, at);
    if (n > 0)
        return n;
    if (n == 0)
        tg_blob_mark_damaged(body->blobs, tg_blob_name(body->blob),
                             "it ended at byte %llu while being sent; the catalog says %llu",
                             (unsigned long long)at, (unsigned long long)tg_blob_size(body->blob));
    else
        tg_log(TG_LOG_ERROR, "reading blob %s at %llu failed: %s", tg_blob_name(body->blob),
               (unsigned long long)at, strerror(errno));
    return MHD_CONTENT_READER_END_WITH_ERROR;
}

static void free_blob_body(void *cls)
{
    blob_body *body = cls;
    tg_blob_close(body->blob);
    free(body);
}

struct MHD_Response *tg_blob_response(tg_server *server, tg_blob_reader *blob, uint64_t offset,
                                      uint64_t length)
{
    blob_body *body = malloc(sizeof *body);
    struct MHD_Response *response = NULL;
    if (body != NULL) {
        *body = (blob_body){server->blobs, blob, offset};
        tg_blob_read_span(blob, offset, length); /* S3: one GET of exactly these bytes */
        response = MHD_create_response_from_callback(length, TG_BLOB_BLOCK, read_blob_body, body,
                                                     free_blob_body);
    }
    if (response == NULL) {
        free(body);
        tg_blob_close(blob);
    }
    return response;
}

/* Model, version and a valid {path}: the common start of the per-file routes. */
static bool lookup_path(tg_request *req, tg_model *model, tg_version *version, const char **path)
{
    *path = tg_param(req, "path");
    const char *why = NULL;
    if (!tg_lookup_model(req, model))
        return false;
    if (*path == NULL || !tg_valid_file_path(*path, &why)) {
        tg_respond_problem(req, "invalid_path", "%s", why ? why : "the file path is invalid");
        return false;
    }
    return tg_lookup_version(req, model, version);
}

/* ---- GET .../files ---- */

typedef struct file_page {
    json_t *files;
    unsigned count;
} file_page;

static void add_file(void *ctx, const tg_file_record *file)
{
    file_page *page = ctx;
    json_array_append_new(page->files, tg_file_json(file));
    page->count++;
}

void tg_route_files_list(tg_request *req)
{
    unsigned limit;
    char key[TG_PATH_MAX + 8];
    bool has_cursor;
    if (!tg_list_params(req, &limit, key, sizeof key, &has_cursor))
        return;
    tg_model *model = malloc(sizeof *model);
    tg_version version;
    if (model == NULL) {
        tg_respond_internal(req, "out of memory");
        return;
    }
    if (tg_lookup_model(req, model) && tg_lookup_version(req, model, &version)) {
        file_page page = {.files = json_array()};
        tg_cat_status status = tg_catalog_file_list(
            req->server->catalog, version.id, has_cursor ? key : NULL, limit + 1, add_file, &page);
        if (status != TG_CAT_OK) {
            json_decref(page.files);
            tg_respond_catalog_failure(req, status);
        } else {
            const char *next = NULL;
            if (page.count > limit) {
                json_array_remove(page.files, limit);
                next = json_string_value(
                    json_object_get(json_array_get(page.files, limit - 1), "path"));
            }
            json_t *body = json_object();
            json_object_set(body, "files", page.files);
            tg_set_next_cursor(body, next);
            json_decref(page.files);
            tg_respond_json(req, 200, body);
        }
    }
    free(model);
}

/* ---- GET|HEAD .../files/{path} ---- */

/* Adds NULL-terminated name/value pairs (may be NULL) to a response. */
static void add_extra_headers(struct MHD_Response *response, const char *const *extra_headers)
{
    for (size_t i = 0; response != NULL && extra_headers != NULL && extra_headers[i] != NULL;
         i += 2)
        MHD_add_response_header(response, extra_headers[i], extra_headers[i + 1]);
}

void tg_serve_file(tg_request *req, const tg_file_record *file, const char *const *extra_headers)
{
    char etag[70];
    snprintf(etag, sizeof etag, "\"%s\"", file->sha256);
    if (tg_etag_matches(tg_header(req, "If-None-Match"), file->sha256)) {
        struct MHD_Response *response =
            MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
        if (response) {
            MHD_add_response_header(response, "ETag", etag);
            MHD_add_response_header(response, "Accept-Ranges", "bytes");
        }
        add_extra_headers(response, extra_headers);
        tg_respond(req, 304, response, 0);
        return;
    }
    /* --download-redirect: a whole-file GET goes to a presigned URL of the object */
    if (!req->is_head && tg_header(req, "Range") == NULL && file->size > 0 &&
        tg_blobstore_redirects(req->server->blobs)) {
        char location[8192];
        if (tg_blobstore_presign(req->server->blobs, file->sha256, 300, location,
                                 sizeof location) == 0) {
            struct MHD_Response *response =
                MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
            if (response) {
                MHD_add_response_header(response, "Location", location);
                MHD_add_response_header(response, "ETag", etag);
                MHD_add_response_header(response, "X-Content-SHA256", file->sha256);
                MHD_add_response_header(response, "Cache-Control", "no-store");
            }
            add_extra_headers(response, extra_headers);
            tg_respond(req, 302, response, 0);
            return;
        }
    }
    tg_blob_reader *blob = tg_open_file_blob(req, file);
    if (blob == NULL)
        return;
    uint64_t total = file->size, first = 0, length = total;
    const char *range = tg_header(req, "Range");
    /* If-Range with another validator: the client's copy changed, send it all. */
    const char *if_range = tg_header(req, "If-Range");
    if (if_range != NULL && strcmp(if_range, etag) != 0)
        range = NULL;
    tg_range_result result = tg_range_parse(range, total, &first, &length);
    char content_range[96];
    if (result == TG_RANGE_UNSATISFIABLE) {
        tg_blob_close(blob);
        snprintf(content_range, sizeof content_range, "bytes */%llu", (unsigned long long)total);
        /* Content-Range and ETag, then the route's own (the Hub's X-Repo-Commit, ...) */
        const char *headers[2 * 12 + 1] = {"Content-Range", content_range, "ETag", etag};
        size_t n = 4;
        for (size_t i = 0; extra_headers != NULL && extra_headers[i] != NULL &&
                           n + 2 < sizeof headers / sizeof headers[0];
             i += 2) {
            headers[n++] = extra_headers[i];
            headers[n++] = extra_headers[i + 1];
        }
        headers[n] = NULL;
        tg_respond_problem_headers(req, "range_not_satisfiable", headers,
                                   "the range is outside the file");
        return;
    }
    unsigned status = 200;
    if (result == TG_RANGE_OK) {
        status = 206;
        snprintf(content_range, sizeof content_range, "bytes %llu-%llu/%llu",
                 (unsigned long long)first, (unsigned long long)(first + length - 1),
                 (unsigned long long)total);
    } else {
        first = 0;
        length = total;
    }
    /* read from the blob (tg_blob_response owns it from here) */
    struct MHD_Response *response = NULL;
    if (length == 0) {
        tg_blob_close(blob);
        response = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    } else {
        response = tg_blob_response(req->server, blob, first, length);
    }
    if (response) {
        MHD_add_response_header(response, "Content-Type", "application/octet-stream");
        MHD_add_response_header(response, "ETag", etag);
        MHD_add_response_header(response, "Accept-Ranges", "bytes");
        MHD_add_response_header(response, "X-Content-SHA256", file->sha256);
        if (status == 206)
            MHD_add_response_header(response, "Content-Range", content_range);
    }
    add_extra_headers(response, extra_headers);
    tg_respond(req, status, response, length);
}

static ssize_t no_body(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)cls;
    (void)pos;
    (void)buf;
    (void)max;
    return MHD_CONTENT_READER_END_WITH_ERROR; /* a HEAD answer: never asked */
}

struct MHD_Response *tg_file_head_response(const tg_file_record *file,
                                           const char *const *extra_headers)
{
    char etag[70];
    snprintf(etag, sizeof etag, "\"%s\"", file->sha256);
    struct MHD_Response *response =
        file->size == 0
            ? MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT)
            : MHD_create_response_from_callback(file->size, TG_BLOB_BLOCK, no_body, NULL, NULL);
    if (response) {
        /* as tg_serve_file's 200 */
        MHD_add_response_header(response, "Content-Type", "application/octet-stream");
        MHD_add_response_header(response, "ETag", etag);
        MHD_add_response_header(response, "Accept-Ranges", "bytes");
        MHD_add_response_header(response, "X-Content-SHA256", file->sha256);
    }
    add_extra_headers(response, extra_headers);
    return response;
}

void tg_count_download(tg_request *req, int64_t model_id, const tg_file_record *file)
{
    if (req->is_head)
        return;
    bool counted = strcmp(file->path, "config.json") == 0 ||
                   strcmp(file->kind, "safetensors") == 0 || strcmp(file->kind, "gguf") == 0;
    if (!counted)
        return;
    /* a Range that starts past byte 0 continues a download already counted */
    const char *range = tg_header(req, "Range");
    if (range != NULL && strncmp(range, "bytes=0-", 8) != 0)
        return;
    tg_downloads_count(req->server->downloads, model_id);
}

void tg_route_file_get(tg_request *req)
{
    tg_model *model = tg_model_alloc(req);
    if (model == NULL)
        return;
    tg_version version;
    const char *path;
    if (lookup_path(req, model, &version, &path)) {
        tg_file_record file;
        tg_cat_status status = tg_catalog_file_get(req->server->catalog, version.id, path, &file);
        if (status == TG_CAT_OK) {
            tg_count_download(req, model->id, &file);
            tg_serve_file(req, &file, NULL);
        } else if (status == TG_CAT_NOT_FOUND)
            tg_respond_problem(req, "file_not_found", "version %lld has no file %s",
                               (long long)version.number, path);
        else
            tg_respond_catalog_failure(req, status);
    }
    free(model);
}

/* ---- GET .../files/{path}/header ---- */

static json_t *header_json(const tg_file_record *record, const st_file *file,
                           const char *stats_text)
{
    json_error_t error;
    json_t *stats = json_loads(stats_text ? stats_text : "[]", 0, &error);
    if (!json_is_array(stats) || json_array_size(stats) != file->tensor_count) {
        json_decref(stats);
        stats = NULL;
    }
    json_t *metadata = json_object();
    for (size_t i = 0; i < file->metadata_count; i++)
        json_object_set_new(metadata, file->metadata[i].key, json_string(file->metadata[i].value));
    json_t *tensors = json_array();
    for (size_t i = 0; i < file->tensor_count; i++) {
        const st_tensor *t = &file->tensors[i];
        json_t *shape = json_array();
        for (size_t d = 0; d < t->rank; d++)
            json_array_append_new(shape, json_integer((json_int_t)t->shape[d]));
        json_t *pair = stats ? json_array_get(stats, i) : NULL;
        json_t *tensor = json_pack("{s:s%, s:s, s:o, s:[I,I]}", "name", t->name, t->name_len,
                                   "dtype", st_dtype_name(t->dtype), "shape", shape, "data_offsets",
                                   (json_int_t)(file->data_start + t->begin),
                                   (json_int_t)(file->data_start + t->end));
        if (tensor == NULL)
            continue;
        json_object_set_new(tensor, "nan",
                            json_integer(json_integer_value(json_array_get(pair, 0))));
        json_object_set_new(tensor, "inf",
                            json_integer(json_integer_value(json_array_get(pair, 1))));
        json_array_append_new(tensors, tensor);
    }
    uint64_t counts[ST_DTYPE_COUNT], total = 0;
    st_file_parameter_counts(file, counts, &total);
    json_t *parameters = json_object();
    for (int d = 0; d < ST_DTYPE_COUNT; d++)
        if (counts[d] > 0)
            json_object_set_new(parameters, st_dtype_name((st_dtype)d),
                                json_integer((json_int_t)counts[d]));
    json_decref(stats);
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:o, s:o, s:o, s:I, s:I, s:I}", "path",
                     record->path, "sha256", record->sha256, "size", (json_int_t)record->size,
                     "header_size", (json_int_t)file->header_size, "data_start",
                     (json_int_t)file->data_start, "metadata", metadata, "tensors", tensors,
                     "parameters", parameters, "parameters_total", (json_int_t)total, "nan_total",
                     (json_int_t)record->nan, "inf_total", (json_int_t)record->inf);
}

/* The response cache's key of a header GET ("header", org, name, rev, path): false
 * when it cannot have one. */
static bool header_key(tg_request *req, const char *rev, bool moving, char *key, size_t cap)
{
    /* a query is not part of the key: such requests take the full path; a fixed rev
     * has a plain key, one that may move a moving key (response_cache.h) */
    if (req->server->responses == NULL || req->target.query_args > 0 || rev == NULL ||
        moving == tg_rev_is_fixed(rev))
        return false;
    const char *parts[] = {"header", tg_param(req, "org"), tg_param(req, "name"), rev,
                           tg_param(req, "path")};
    size_t count = sizeof parts / sizeof parts[0];
    return moving ? tg_response_cache_moving_key(key, cap, parts, count)
                  : tg_response_cache_key(key, cap, parts, count);
}

/* 200 with the rendered header JSON; takes text (malloc'd). A published version's
 * answer is also kept, ready, under key and under moving_key (the alias or "latest"
 * asked for), each when not NULL (generation: read before the lookups). */
static void respond_header_text(tg_request *req, char *text, size_t len, const tg_version *version,
                                const char *key, const char *moving_key, uint64_t generation)
{
    const char *headers[] = {"Content-Type", "application/json", NULL};
    if (version->published && key != NULL)
        tg_response_cache_put(req->server->responses, key, generation, 200, text, len, headers);
    if (version->published && moving_key != NULL)
        tg_response_cache_put(req->server->responses, moving_key, generation, 200, text, len,
                              headers);
    struct MHD_Response *response =
        MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (response == NULL)
        free(text);
    else
        MHD_add_response_header(response, "Content-Type", "application/json");
    tg_respond(req, 200, response, len);
}

/* The header answer of a GGUF file: rendered from the parse the tensor routes share
 * (parsed_header_cache.h), then kept like a safetensors file's (header_cache.h). */
static void respond_gguf_header(tg_request *req, const tg_file_record *record,
                                const tg_version *version, const char *key, const char *moving_key,
                                uint64_t generation)
{
    st_error err;
    int failure = 0;
    const tg_gguf_header *h =
        tg_parsed_gguf_acquire(req->server->parsed_headers, req->server->blobs, record->sha256,
                               record->size, req->server->config.max_header, &err, &failure);
    if (h == NULL) {
        if (failure == -1)
            tg_respond_blob_damaged(req, record->path);
        else if (tg_errno_is_exhaustion(errno))
            tg_respond_exhausted(req, NULL);
        else
            tg_respond_internal(req, "the stored GGUF header of %s cannot be read: %s",
                                record->path, err.detail);
        return;
    }
    json_t *body = tg_gguf_header_json(record->path, record->sha256, record->size, &h->file);
    tg_parsed_gguf_release(req->server->parsed_headers, h);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (text == NULL || tg_text_end_line(&text) != 0) {
        free(text);
        tg_respond_internal(req, "out of memory");
        return;
    }
    size_t len = strlen(text);
    tg_header_cache_put(req->server->headers, record->sha256, record->path, text, len);
    respond_header_text(req, text, len, version, key, moving_key, generation);
}

void tg_route_file_header(tg_request *req)
{
    /* a published version's answer, ready: no catalog, no rendering (response_cache.h) */
    char key[3 * TG_PATH_MAX], moving_key[3 * TG_PATH_MAX + 1];
    const char *rev = tg_param(req, "rev");
    uint64_t generation = tg_response_cache_generation(req->server->responses);
    bool keyed = header_key(req, rev, false, key, sizeof key);
    /* an alias or "latest": its answer kept for a moment (response_cache.h, moving keys) */
    bool moving = header_key(req, rev, true, moving_key, sizeof moving_key);
    if ((keyed && tg_respond_cached(req, key)) || (moving && tg_respond_cached(req, moving_key)))
        return;
    tg_model *model = tg_model_alloc(req);
    if (model == NULL)
        return;
    tg_version version;
    const char *path;
    if (!lookup_path(req, model, &version, &path)) {
        free(model);
        return;
    }
    tg_catalog *catalog = req->server->catalog;
    tg_file_record record;
    tg_cat_status status = tg_catalog_file_get(catalog, version.id, path, &record);
    if (status == TG_CAT_NOT_FOUND) {
        /* ".../files/a/header" may also be the file "a/header" itself. */
        char full[TG_PATH_MAX + 16];
        snprintf(full, sizeof full, "%s/header", path);
        if (strlen(full) <= TG_PATH_MAX &&
            tg_catalog_file_get(catalog, version.id, full, &record) == TG_CAT_OK) {
            tg_serve_file(req, &record, NULL);
        } else {
            tg_respond_problem(req, "file_not_found", "version %lld has no file %s",
                               (long long)version.number, path);
        }
        free(model);
        return;
    }
    if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
        free(model);
        return;
    }
    bool gguf = strcmp(record.kind, "gguf") == 0;
    if (!gguf && strcmp(record.kind, "safetensors") != 0) {
        tg_respond_problem(req, "not_safetensors",
                           "%s is a %s sidecar, neither safetensors nor GGUF", path, record.kind);
        free(model);
        return;
    }
    if (!keyed && req->server->responses != NULL && version.published) {
        /* an alias or "latest" resolved to this version: keep its answer by number */
        char number[24];
        snprintf(number, sizeof number, "%lld", (long long)version.number);
        keyed = header_key(req, number, false, key, sizeof key);
    }
    const char *cache_key = keyed ? key : NULL;
    const char *cache_moving_key = moving ? moving_key : NULL;
    /* Same blob and path, same answer: served from the cache without touching the blob. */
    size_t cached_len = 0;
    char *cached =
        tg_header_cache_get(req->server->headers, record.sha256, record.path, &cached_len);
    if (cached != NULL) {
        respond_header_text(req, cached, cached_len, &version, cache_key, cache_moving_key,
                            generation);
        free(model);
        return;
    }
    if (gguf) {
        respond_gguf_header(req, &record, &version, cache_key, cache_moving_key, generation);
        free(model);
        return;
    }
    st_file file;
    st_error err;
    char *stats = NULL;
    int read = tg_header_read_parse(req->server->blobs, record.sha256, record.size,
                                    req->server->config.max_header, &file, &err);
    if (read == -1) {
        tg_respond_blob_damaged(req, path);
    } else if (read == -2 && tg_errno_is_exhaustion(errno)) {
        tg_respond_exhausted(req, NULL);
    } else if (read != 0) {
        tg_respond_internal(req, "the stored header of %s cannot be read: %s", path, err.detail);
    } else {
        tg_catalog_file_stats(catalog, version.id, path, &stats);
        json_t *body = header_json(&record, &file, stats);
        char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        json_decref(body);
        if (text == NULL || tg_text_end_line(&text) != 0) {
            tg_respond_internal(req, "out of memory");
        } else {
            size_t len = strlen(text);
            tg_header_cache_put(req->server->headers, record.sha256, record.path, text, len);
            respond_header_text(req, text, len, &version, cache_key, cache_moving_key, generation);
        }
        st_file_free(&file);
    }
    free(stats);
    free(model);
}

/* ---- DELETE .../files/{path} ---- */

void tg_route_file_delete(tg_request *req)
{
    tg_model *model = tg_model_alloc(req);
    if (model == NULL)
        return;
    tg_version version;
    const char *path;
    if (lookup_path(req, model, &version, &path)) {
        pthread_mutex_lock(&req->server->publish_lock);
        char gone[TG_SHA256_HEX_LEN + 1];
        tg_file_blob(req->server->catalog, version.id, path, gone);
        tg_cat_status status = tg_catalog_file_delete(req->server->catalog, version.id, path);
        pthread_mutex_unlock(&req->server->publish_lock);
        tg_response_cache_invalidate(req->server->responses);
        /* its content goes now if nothing else uses it */
        if (status == TG_CAT_OK && gone[0] != '\0')
            (void)tg_blob_reclaim(req->server->blobs, req->server->catalog, gone, false);
        if (status == TG_CAT_OK)
            tg_respond_empty(req, 204);
        else if (status == TG_CAT_CONFLICT)
            tg_respond_problem(req, "version_published",
                               "version %lld is published; its files cannot change",
                               (long long)version.number);
        else if (status == TG_CAT_NOT_FOUND)
            tg_respond_problem(req, "file_not_found", "version %lld has no file %s",
                               (long long)version.number, path);
        else
            tg_respond_catalog_failure(req, status);
    }
    free(model);
}

/* ---- GET .../versions/{rev}/card ---- */

/* The README.md of a version as the web page shows it: its front matter as JSON
 * (hf_card.h) and its Markdown body as safe HTML (libcmark, no raw HTML, no
 * javascript: links), from its first TG_CARD_MAX bytes (routes.h) ("truncated" says when the
 * file is longer). */
void tg_route_card(tg_request *req)
{
    tg_model *model = tg_model_alloc(req);
    if (model == NULL)
        return;
    tg_version version;
    if (!tg_lookup_model(req, model) || !tg_lookup_version(req, model, &version)) {
        free(model);
        return;
    }
    tg_file_record record;
    tg_cat_status status =
        tg_catalog_file_get(req->server->catalog, version.id, "README.md", &record);
    free(model);
    if (status == TG_CAT_NOT_FOUND) {
        tg_respond_problem(req, "file_not_found", "version %lld has no README.md (model card)",
                           (long long)version.number);
        return;
    }
    if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
        return;
    }
    tg_blob_reader *blob = tg_open_file_blob(req, &record);
    if (blob == NULL)
        return;
    size_t len = record.size < TG_CARD_MAX ? (size_t)record.size : TG_CARD_MAX;
    char *text = malloc(len + 1);
    if (text == NULL) {
        tg_blob_close(blob);
        tg_respond_exhausted(req, NULL);
        return;
    }
    int rc = tg_blob_read_at(blob, text, len, 0);
    tg_blob_close(blob);
    if (rc != 0) {
        free(text);
        tg_respond_blob_damaged(req, record.path);
        return;
    }
    text[len] = '\0';
    char *html = tg_hf_card_html(text, len);
    json_t *card = tg_hf_card_data(text, len);
    free(text);
    json_t *body = json_object();
    if (html == NULL || body == NULL) {
        free(html);
        json_decref(card);
        json_decref(body);
        tg_respond_exhausted(req, NULL);
        return;
    }
    json_object_set_new(body, "version", json_integer(version.number));
    json_object_set_new(body, "path", json_string(record.path));
    json_object_set_new(body, "size", json_integer((json_int_t)record.size));
    json_object_set_new(body, "sha256", json_string(record.sha256));
    json_object_set_new(body, "truncated", json_boolean(record.size > len));
    json_object_set_new(body, "card_data", card != NULL ? card : json_null());
    json_object_set_new(body, "html", json_string(html));
    free(html);
    tg_respond_json(req, 200, body);
}
