/* GET .../versions/{rev}/tensors: every tensor of a version, across its shards.
 * GET|HEAD .../versions/{rev}/tensors/{tensor*}: one tensor's bytes, found through
 * the version's *.safetensors.index.json (weight_map) or else by reading the
 * shards' headers; ?slice= ?dtype= ?format=raw|npy and Range apply to the
 * tensor's representation, which server/ingest/tensor_stream.c plans and generates.
 * A plain tensor (or a slice that is one range of the file) goes out with
 * sendfile from the blob; anything else streams through the engine in bounded
 * chunks. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "checks.h"
#include "gguf_view.h"
#include "index_cache.h"
#include "index_check.h"
#include "log.h"
#include "parsed_header_cache.h"
#include "resources.h"
#include "routes.h"
#include "sha256.h"
#include "tensor_stream.h"

/* MHD's buffer for generated bodies. */
#define STREAM_BLOCK (128 * 1024)

/* Model, version and all the version's files; answers the error itself. */
static bool lookup_files(tg_request *req, tg_version *version, tg_file_records *list)
{
    tg_model *model = tg_model_alloc(req);
    if (model == NULL)
        return false;
    bool ok = tg_lookup_model(req, model) && tg_lookup_version(req, model, version);
    free(model);
    if (!ok)
        return false;
    tg_cat_status status = tg_catalog_file_list(req->server->catalog, version->id, NULL, 0,
                                                tg_file_records_collect, list);
    if (status != TG_CAT_OK || list->failed) {
        tg_respond_catalog_failure(req, status);
        return false;
    }
    return true;
}

static bool is_safetensors(const tg_file_record *file)
{
    return strcmp(file->kind, "safetensors") == 0;
}

static bool is_gguf(const tg_file_record *file)
{
    return strcmp(file->kind, "gguf") == 0;
}

/* Answers a stored header that could not be read (failure and errno from an acquire). */
static void respond_unreadable(tg_request *req, const tg_file_record *record, int failure,
                               const st_error *err)
{
    if (failure == -1)
        tg_respond_blob_damaged(req, record->path);
    else if (tg_errno_is_exhaustion(errno))
        tg_respond_exhausted(req, NULL);
    else if (errno == TG_BLOB_UNAVAILABLE_ERRNO)
        tg_respond_blob_store_unavailable(req);
    else
        tg_respond_internal(req, "the stored header of %s cannot be read: %s", record->path,
                            err->detail);
}

/* ---- GET .../tensors ---- */

static json_t *tensor_json(const st_file *file, const st_tensor *t, const char *path)
{
    json_t *shape = json_array();
    for (size_t d = 0; d < t->rank; d++)
        json_array_append_new(shape, json_integer((json_int_t)t->shape[d]));
    return json_pack("{s:s%, s:s, s:o, s:s, s:[I,I]}", "name", t->name, t->name_len, "dtype",
                     st_dtype_name(t->dtype), "shape", shape, "file", path, "data_offsets",
                     (json_int_t)(file->data_start + t->begin),
                     (json_int_t)(file->data_start + t->end));
}

/* The tensor list is paged by position: a cursor holds "<file path>\n<tensor
 * name>" of the last entry sent (paths and names hold no control characters).
 * Entries are small, and clients usually want a whole model, so a page holds up
 * to 1000 by default and 10000 at most. */
#define TENSOR_PAGE_DEFAULT 1000
#define TENSOR_PAGE_MAX 10000
#define TENSOR_CURSOR_MAX (TG_PATH_MAX + 1 + ST_TENSOR_NAME_MAX + 1)

typedef struct tensor_page {
    json_t *tensors;
    unsigned limit;
    uint64_t total;    /* tensors in the version */
    const char *after; /* cursor's file path, or NULL: from the start */
    const char *after_name;
    bool after_found;             /* the cursor's tensor was seen */
    char last[TENSOR_CURSOR_MAX]; /* cursor key of the last entry added */
    bool more;                    /* an entry beyond the page exists */
} tensor_page;

/* Adds one file's tensors that come after the cursor to the page. */
static bool page_add_file(tensor_page *page, const st_file *file, const char *path)
{
    page->total += file->tensor_count;
    int order = page->after ? strcmp(path, page->after) : 1;
    if (order < 0)
        return true;
    size_t t = 0;
    if (order == 0) {
        const st_tensor *mark = st_file_find(file, page->after_name, strlen(page->after_name));
        if (mark == NULL)
            return true; /* answered as a stale cursor once every file is seen */
        page->after_found = true;
        t = (size_t)(mark - file->tensors) + 1;
    }
    for (; t < file->tensor_count; t++) {
        if (json_array_size(page->tensors) == page->limit) {
            page->more = true;
            return true;
        }
        const st_tensor *tensor = &file->tensors[t];
        json_t *item = tensor_json(file, tensor, path);
        if (item == NULL || json_array_append_new(page->tensors, item) != 0)
            return false;
        snprintf(page->last, sizeof page->last, "%s\n%.*s", path, (int)tensor->name_len,
                 tensor->name);
    }
    return true;
}

/* The same for a GGUF file's tensors (gguf_view.h's entries, with file and format). */
static bool page_add_gguf(tensor_page *page, const st_gguf_file *file, const char *path)
{
    page->total += file->tensor_count;
    int order = page->after ? strcmp(path, page->after) : 1;
    if (order < 0)
        return true;
    uint64_t t = 0;
    if (order == 0) {
        const st_gguf_tensor *mark =
            st_gguf_find_tensor(file, page->after_name, strlen(page->after_name));
        if (mark == NULL)
            return true;
        page->after_found = true;
        t = (uint64_t)(mark - file->tensors) + 1;
    }
    for (; t < file->tensor_count; t++) {
        if (json_array_size(page->tensors) == page->limit) {
            page->more = true;
            return true;
        }
        const st_gguf_tensor *tensor = &file->tensors[t];
        json_t *item = tg_gguf_tensor_json(file, tensor);
        if (item == NULL || json_array_append_new(page->tensors, item) != 0)
            return false;
        json_object_set_new(item, "file", json_string(path));
        json_object_set_new(item, "format", json_string("gguf"));
        snprintf(page->last, sizeof page->last, "%s\n%.*s", path, (int)tensor->name_len,
                 (const char *)tensor->name);
    }
    return true;
}

void tg_route_tensors_list(tg_request *req)
{
    tensor_page page = {0};
    char key[TENSOR_CURSOR_MAX];
    bool has_cursor;
    if (!tg_list_params_bounded(req, TENSOR_PAGE_DEFAULT, TENSOR_PAGE_MAX, &page.limit, key,
                                sizeof key, &has_cursor))
        return;
    if (has_cursor) {
        char *newline = strchr(key, '\n');
        if (newline == NULL) {
            tg_respond_problem(req, "invalid_request", "the cursor is not one this server issued");
            return;
        }
        *newline = '\0';
        page.after = key;
        page.after_name = newline + 1;
    }
    tg_version version;
    tg_file_records list = {0};
    if (!lookup_files(req, &version, &list)) {
        free(list.items);
        return;
    }
    page.tensors = json_array();
    bool ok = page.tensors != NULL;
    /* files in path order, each file's tensors in file order; every header is
     * read (parsed once and kept: parsed_header_cache.h) so the total is known */
    for (size_t i = 0; ok && i < list.count; i++) {
        if (is_gguf(&list.items[i])) {
            st_error err;
            int failure = 0;
            const tg_gguf_header *h = tg_parsed_gguf_acquire(
                req->server->parsed_headers, req->server->blobs, list.items[i].sha256,
                list.items[i].size, req->server->config.max_header, &err, &failure);
            if (h == NULL) {
                respond_unreadable(req, &list.items[i], failure, &err);
                json_decref(page.tensors);
                free(list.items);
                return;
            }
            ok = page_add_gguf(&page, &h->file, list.items[i].path);
            tg_parsed_gguf_release(req->server->parsed_headers, h);
            continue;
        }
        if (!is_safetensors(&list.items[i]))
            continue;
        st_error err;
        int failure = 0;
        const st_file *file = tg_parsed_header_acquire(
            req->server->parsed_headers, req->server->blobs, list.items[i].sha256,
            list.items[i].size, req->server->config.max_header, &err, &failure);
        if (file == NULL) {
            if (failure == -1)
                tg_respond_blob_damaged(req, list.items[i].path);
            else if (tg_errno_is_exhaustion(errno))
                tg_respond_exhausted(req, NULL);
            else
                tg_respond_internal(req, "the stored header of %s cannot be read: %s",
                                    list.items[i].path, err.detail);
            json_decref(page.tensors);
            free(list.items);
            return;
        }
        ok = page_add_file(&page, file, list.items[i].path);
        tg_parsed_header_release(req->server->parsed_headers, file);
    }
    free(list.items);
    if (!ok) {
        json_decref(page.tensors);
        tg_respond_internal(req, "out of memory");
        return;
    }
    if (has_cursor && !page.after_found) {
        json_decref(page.tensors);
        tg_respond_problem(req, "invalid_request",
                           "the cursor's position is no longer in this version (a draft's file "
                           "changed); list again from the start");
        return;
    }
    json_t *body = json_pack("{s:I, s:I, s:I, s:o}", "version", (json_int_t)version.number, "count",
                             (json_int_t)json_array_size(page.tensors), "total",
                             (json_int_t)page.total, "tensors", page.tensors);
    if (body == NULL) {
        tg_respond_internal(req, "out of memory");
        return;
    }
    tg_set_next_cursor(body, page.more ? page.last : NULL);
    tg_respond_json(req, 200, body);
}

/* ---- GET|HEAD .../tensors/{tensor*} ---- */

/* Where a tensor was found: its file and the parsed header. `held` is the cache's
 * (parsed_header_cache.h), to release; `file` a copy of its fields, valid as long.
 * After a failure, record is the file whose header could not be read. */
typedef struct located {
    const tg_file_record *record;
    st_file file;
    const st_tensor *tensor;
    const st_file *held;
    /* A GGUF file's tensor, as the engine sees it: a plain ggml type as its safetensors
     * dtype, row-major shape; a quantized one as its bytes (U8, one dimension), served
     * raw only. ggml_type NULL: a safetensors tensor. */
    st_tensor gguf_tensor;
    uint64_t gguf_shape[ST_GGUF_DIMS_MAX];
    uint64_t logical_shape[ST_GGUF_DIMS_MAX]; /* row-major, in elements */
    size_t logical_rank;
    char gguf_name[ST_GGUF_TENSOR_NAME_MAX + 1];
    const char *ggml_type;
    bool quantized;
} located;

/* Looks for name in one stored safetensors file. 1 found, 0 not there, -1 the blob
 * is damaged, -2 its header cannot be read otherwise, -3 the server is out of
 * descriptors or memory to open it, -4 the blob store cannot be reached. */
static int find_in_file(tg_request *req, const tg_file_record *record, const char *name,
                        located *out)
{
    st_error err;
    int read = 0;
    out->held =
        tg_parsed_header_acquire(req->server->parsed_headers, req->server->blobs, record->sha256,
                                 record->size, req->server->config.max_header, &err, &read);
    if (out->held == NULL) {
        if (read == -2 && tg_errno_is_exhaustion(errno))
            return -3; /* out of descriptors or memory: 503, not the blob's fault */
        if (read == -2 && errno == TG_BLOB_UNAVAILABLE_ERRNO)
            return -4; /* the blob store cannot be reached: 503 */
        tg_log(TG_LOG_ERROR, "the stored header of %s (%s) cannot be read: %s", record->path,
               record->sha256, err.detail);
        out->record = record;
        return read;
    }
    out->file = *out->held;
    out->tensor = st_file_find(out->held, name, strlen(name));
    if (out->tensor == NULL) {
        tg_parsed_header_release(req->server->parsed_headers, out->held);
        return 0;
    }
    out->record = record;
    return 1;
}

/* Looks for name in one stored GGUF file; as find_in_file. The parse is held only
 * while the tensor is copied into out (the engine needs no more of it). */
static int find_in_gguf(tg_request *req, const tg_file_record *record, const char *name,
                        located *out)
{
    st_error err;
    int read = 0;
    const tg_gguf_header *h =
        tg_parsed_gguf_acquire(req->server->parsed_headers, req->server->blobs, record->sha256,
                               record->size, req->server->config.max_header, &err, &read);
    if (h == NULL) {
        if (read == -2 && tg_errno_is_exhaustion(errno))
            return -3;
        if (read == -2 && errno == TG_BLOB_UNAVAILABLE_ERRNO)
            return -4;
        tg_log(TG_LOG_ERROR, "the stored GGUF header of %s (%s) cannot be read: %s", record->path,
               record->sha256, err.detail);
        out->record = record;
        return read;
    }
    const st_gguf_tensor *t = st_gguf_find_tensor(&h->file, name, strlen(name));
    if (t == NULL) {
        tg_parsed_gguf_release(req->server->parsed_headers, h);
        return 0;
    }
    memset(&out->file, 0, sizeof out->file);
    out->file.data_start = h->file.data_start;
    out->file.file_size = record->size;
    out->held = NULL;
    memcpy(out->gguf_name, t->name, t->name_len);
    out->gguf_name[t->name_len] = '\0';
    out->logical_rank = t->n_dims;
    st_gguf_row_major_shape(t, out->logical_shape);
    (void)st_gguf_ggml_type(t->type, &out->ggml_type, NULL, NULL);
    st_dtype dtype;
    out->quantized = !st_gguf_plain_dtype(t->type, &dtype);
    st_tensor *e = &out->gguf_tensor;
    *e = (st_tensor){.name = out->gguf_name,
                     .name_len = t->name_len,
                     .shape = out->gguf_shape,
                     .begin = t->offset,
                     .end = t->offset + t->size};
    if (out->quantized) {
        e->dtype = ST_U8;
        e->rank = 1;
        out->gguf_shape[0] = t->size;
        e->elements = t->size;
    } else {
        e->dtype = dtype;
        e->rank = t->n_dims;
        memcpy(out->gguf_shape, out->logical_shape, sizeof out->gguf_shape);
        e->elements = t->elements;
    }
    out->tensor = e;
    out->record = record;
    tg_parsed_gguf_release(req->server->parsed_headers, h);
    return 1;
}

/* Looks in one stored file of either kind; 0 for any other kind. */
static int find_in_any(tg_request *req, const tg_file_record *record, const char *name,
                       located *out)
{
    if (is_safetensors(record))
        return find_in_file(req, record, name, out);
    if (is_gguf(record))
        return find_in_gguf(req, record, name, out);
    return 0;
}

/* The weight_map entry for name in one index file, as a path in the version
 * (the index's directory + the entry), or false. The parsed weight_map is cached
 * by the blob's sha256 (index_cache.h): a lookup is a binary search. */
static bool index_lookup(tg_request *req, const tg_file_record *index, const char *name,
                         char *shard, size_t shard_len)
{
    char file[TG_PATH_MAX + 1];
    if (tg_index_cache_lookup(req->server->indexes, req->server->blobs, index->sha256, index->size,
                              name, file, sizeof file) != TG_INDEX_FOUND)
        return false;
    const char *slash = strrchr(index->path, '/');
    int dir_len = slash ? (int)(slash - index->path + 1) : 0;
    int n = snprintf(shard, shard_len, "%.*s%s", dir_len, index->path, file);
    return n > 0 && (size_t)n < shard_len;
}

/* Finds the tensor: through an index first (one header read), else every shard.
 * 1 found, 0 absent, -1 / -2 / -3 a stored header could not be read (find_in_file). */
static int locate(tg_request *req, const tg_file_records *list, const char *name, located *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < list->count; i++) {
        char shard[TG_PATH_MAX + 1];
        if (!tg_is_index_path(list->items[i].path) ||
            !index_lookup(req, &list->items[i], name, shard, sizeof shard))
            continue;
        for (size_t k = 0; k < list->count; k++) {
            if (strcmp(list->items[k].path, shard) == 0 && is_safetensors(&list->items[k])) {
                int rc = find_in_file(req, &list->items[k], name, out);
                if (rc != 0)
                    return rc;
            }
        }
    }
    /* no index, or an index that disagrees (a draft is not checked yet): read them all */
    for (size_t i = 0; i < list->count; i++) {
        if (!is_safetensors(&list->items[i]))
            continue;
        int rc = find_in_file(req, &list->items[i], name, out);
        if (rc != 0)
            return rc;
    }
    /* then the GGUF files, in path order */
    for (size_t i = 0; i < list->count; i++) {
        if (!is_gguf(&list->items[i]))
            continue;
        int rc = find_in_gguf(req, &list->items[i], name, out);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* What the generated body's reader needs; freed with the response. */
typedef struct body_source {
    tg_tensor_stream *stream;
    tg_blob_reader *blob; /* the stream reads its descriptor */
    uint64_t first;       /* the Range's first byte of the representation */
    tg_blobstore *blobs;
} body_source;

static ssize_t read_body(void *cls, uint64_t pos, char *buf, size_t max)
{
    body_source *source = cls;
    ssize_t n = tg_tensor_stream_read(source->stream, source->first + pos, (uint8_t *)buf, max);
    if (n < 0) {
        /* a short read (EIO) means the blob is shorter than its catalog size */
        if (errno == EIO)
            tg_blob_mark_damaged(source->blobs, tg_blob_name(source->blob),
                                 "it ended early while a tensor was read; the catalog says %llu "
                                 "bytes",
                                 (unsigned long long)tg_blob_size(source->blob));
        else
            tg_log(TG_LOG_ERROR, "reading a tensor body failed at %llu: %m",
                   (unsigned long long)(source->first + pos));
        /* never 0: MHD would ask again forever; an error closes the connection */
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : n;
}

static void free_body(void *cls)
{
    body_source *source = cls;
    tg_tensor_stream_free(source->stream);
    tg_blob_close(source->blob);
    free(source);
}

/* Strong validator of the representation: the blob, the tensor and the options.
 * False (no validator) only if the digest fails. */
static bool representation_etag(const char *sha256, const char *name, const tg_tensor_options *o,
                                char out[35])
{
    unsigned char digest[TG_SHA256_SIZE];
    const char *parts[] = {sha256, name, o->slice ? o->slice : "", o->dtype ? o->dtype : "",
                           o->format ? o->format : "raw"};
    tg_sha256 sha;
    bool ok = tg_sha256_init(&sha, "etag") == 0;
    for (size_t i = 0; ok && i < sizeof parts / sizeof parts[0]; i++)
        ok = tg_sha256_update(&sha, parts[i], strlen(parts[i]) + 1) == 0; /* NUL separates parts */
    ok = tg_sha256_final(&sha, digest) == 0 && ok;
    if (!ok)
        return false;
    tg_hex_encode(digest, 16, out);
    return true;
}

static void add_tensor_headers(struct MHD_Response *response, const tg_tensor_plan *plan,
                               const located *at, const char *etag)
{
    const char *path = at->record->path;
    char shape[TG_TENSOR_SHAPE_TEXT_MAX], offsets[48];
    if (at->quantized) /* the bytes of blocks: the header says the tensor's own shape */
        tg_tensor_shape_text(at->logical_shape, at->logical_rank, shape, sizeof shape);
    else
        tg_tensor_shape_text(plan->out_shape, plan->out_rank, shape, sizeof shape);
    snprintf(offsets, sizeof offsets, "[%llu,%llu]", (unsigned long long)plan->source_begin,
             (unsigned long long)plan->source_end);
    MHD_add_response_header(response, "Content-Type",
                            plan->format == TG_TENSOR_NPY ? "application/x-npy"
                                                          : "application/octet-stream");
    MHD_add_response_header(response, "X-Tensor-Dtype",
                            at->quantized ? at->ggml_type : st_dtype_name(plan->out_dtype));
    MHD_add_response_header(response, "X-Tensor-Shape", shape);
    MHD_add_response_header(response, "X-Tensor-Source-Dtype",
                            at->ggml_type ? at->ggml_type : st_dtype_name(plan->source_dtype));
    if (at->ggml_type != NULL)
        MHD_add_response_header(response, "X-Tensor-Format", "gguf");
    MHD_add_response_header(response, "X-Tensor-File", path);
    MHD_add_response_header(response, "X-Tensor-Data-Offsets", offsets);
    MHD_add_response_header(response, "Accept-Ranges", "bytes");
    if (etag[0] != '\0')
        MHD_add_response_header(response, "ETag", etag);
}

static void respond_unsatisfiable(tg_request *req, uint64_t total, const char *etag)
{
    char content_range[64];
    snprintf(content_range, sizeof content_range, "bytes */%llu", (unsigned long long)total);
    const char *const headers[] = {"Content-Range", content_range, "ETag",
                                   etag[0] != '\0' ? etag : NULL, NULL};
    tg_respond_problem_headers(req, "range_not_satisfiable", headers,
                               "the range is outside the tensor's bytes");
}

/* tg_tensor_read_fn over a blob reader. */
static int blob_read(void *ctx, void *buf, size_t len, uint64_t offset)
{
    return tg_blob_read_at(ctx, buf, len, offset);
}

/* Plans and sends the tensor; owns blob from here. The stream reads through the
 * blob reader (any backend). */
static void serve_tensor(tg_request *req, tg_blob_reader *blob, const located *at, const char *name)
{
    tg_tensor_options options = {tg_query(req, "slice"), tg_query(req, "dtype"),
                                 tg_query(req, "format")};
    if (at->quantized && (options.slice != NULL || options.dtype != NULL ||
                          (options.format != NULL && strcmp(options.format, "raw") != 0))) {
        tg_blob_close(blob);
        tg_respond_problem(req, "gguf_quantized",
                           "tensor %s is %s, a quantized GGUF type: its blocks are served as raw "
                           "bytes only (no ?slice=, ?dtype= or ?format=npy)",
                           at->gguf_name, at->ggml_type);
        return;
    }
    tg_tensor_stream *stream;
    tg_tensor_error err;
    /* locate fills at->tensor whenever it returns a positive rc (the only
     * caller's path here). */
    /* NOLINTNEXTLINE(clang-analyzer-core.CallAndMessage) */
    if (tg_tensor_stream_open(blob_read, blob, &at->file, at->tensor, &options, &stream, &err) !=
        0) {
        tg_blob_close(blob);
        tg_respond_problem(req, err.reason, "%s", err.detail);
        return;
    }
    const tg_tensor_plan *plan = tg_tensor_stream_plan(stream);
    char tag[35] = "", etag[40] = "";
    bool has_etag = representation_etag(at->record->sha256, name, &options, tag);
    if (has_etag)
        snprintf(etag, sizeof etag, "\"%s\"", tag);
    if (has_etag && tg_etag_matches(tg_header(req, "If-None-Match"), tag)) {
        tg_tensor_stream_free(stream);
        tg_blob_close(blob);
        struct MHD_Response *response =
            MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
        if (response) {
            MHD_add_response_header(response, "ETag", etag);
            MHD_add_response_header(response, "Accept-Ranges", "bytes");
        }
        tg_respond(req, 304, response, 0);
        return;
    }
    /* Range applies to the representation's bytes (after slice, conversion, npy header). */
    uint64_t total = plan->length, first = 0, length = total;
    const char *range = tg_header(req, "Range");
    const char *if_range = tg_header(req, "If-Range");
    if (if_range != NULL && (!has_etag || strcmp(if_range, etag) != 0))
        range = NULL;
    tg_range_result result = tg_range_parse(range, total, &first, &length);
    if (result == TG_RANGE_UNSATISFIABLE) {
        tg_tensor_stream_free(stream);
        tg_blob_close(blob);
        respond_unsatisfiable(req, total, etag);
        return;
    }
    if (result != TG_RANGE_OK) {
        first = 0;
        length = total;
    }
    struct MHD_Response *response = NULL;
    if (length == 0) {
        response = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    } else if (plan->contiguous) {
        /* the file's own bytes, read from the blob (tg_blob_response owns it) */
        response = tg_blob_response(req->server, blob, plan->contiguous_offset + first, length);
        blob = NULL;
    } else {
        /* a local blob read through a mapping where that pays (conversions, runs of a
         * page or more): the page cache read in place instead of pread copying every
         * window first */
        int fd = tg_blob_fd(blob);
        if (fd >= 0 && tg_tensor_stream_map_pays(stream))
            (void)tg_tensor_stream_map(stream, fd); /* on failure, reads stay on pread */
        body_source *source = malloc(sizeof *source);
        if (source != NULL) {
            *source = (body_source){stream, blob, first, req->server->blobs};
            response = MHD_create_response_from_callback(length, STREAM_BLOCK, read_body, source,
                                                         free_body);
            if (response != NULL) {
                stream = NULL; /* owned by the response now */
                blob = NULL;
            } else {
                free(source);
            }
        }
    }
    if (response != NULL) {
        add_tensor_headers(response, plan, at, etag);
        if (result == TG_RANGE_OK) {
            char content_range[96];
            snprintf(content_range, sizeof content_range, "bytes %llu-%llu/%llu",
                     (unsigned long long)first, (unsigned long long)(first + length - 1),
                     (unsigned long long)total);
            MHD_add_response_header(response, "Content-Range", content_range);
        }
    }
    /* the plan lives in the stream: headers are added before it may be freed */
    if (stream != NULL)
        tg_tensor_stream_free(stream);
    tg_blob_close(blob);
    tg_respond(req, result == TG_RANGE_OK ? 206 : 200, response, length);
}

void tg_route_tensor_get(tg_request *req)
{
    const char *name = tg_param(req, "tensor");
    size_t name_len = name ? strlen(name) : 0;
    if (name_len == 0 || name_len > ST_TENSOR_NAME_MAX) {
        tg_respond_problem(req, "invalid_request", "a tensor name has 1 to %d bytes",
                           ST_TENSOR_NAME_MAX);
        return;
    }
    tg_version version;
    tg_file_records list = {0};
    if (!lookup_files(req, &version, &list)) {
        free(list.items);
        return;
    }
    located at;
    int rc;
    const char *only = tg_query(req, "file");
    if (only != NULL) {
        /* ?file=PATH: that file's tensor (a GGUF repository's quantizations share names) */
        const tg_file_record *record = NULL;
        for (size_t i = 0; i < list.count && record == NULL; i++)
            if (strcmp(list.items[i].path, only) == 0)
                record = &list.items[i];
        if (record == NULL) {
            tg_respond_problem(req, "file_not_found", "version %lld has no file %.200s",
                               (long long)version.number, only);
            free(list.items);
            return;
        }
        memset(&at, 0, sizeof at);
        rc = find_in_any(req, record, name, &at);
    } else {
        rc = locate(req, &list, name, &at);
    }
    if (rc == 0 && only != NULL) {
        tg_respond_problem(req, "tensor_not_found", "%.200s has no tensor %.200s", only, name);
    } else if (rc == 0) {
        tg_respond_problem(req, "tensor_not_found", "version %lld has no tensor %.200s",
                           (long long)version.number, name);
    } else if (rc == -1) {
        tg_respond_blob_damaged(req, at.record->path);
    } else if (rc == -3) {
        tg_respond_exhausted(req, NULL);
    } else if (rc == -4) {
        tg_respond_blob_store_unavailable(req);
    } else if (rc < 0) {
        tg_respond_internal(req, "the stored header of %s cannot be read", at.record->path);
    } else {
        tg_blob_reader *blob = tg_open_file_blob(req, at.record);
        if (blob != NULL)
            serve_tensor(req, blob, &at, name);
        /* the response does not use the header: the stream copied what it needs */
        tg_parsed_header_release(req->server->parsed_headers, at.held);
    }
    free(list.items);
}
