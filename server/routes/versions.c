/* /v1/models/{org}/{name}/versions[/{rev}[/publish]] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "index_check.h"
#include "log.h"
#include "manifest.h"
#include "parsed_header_cache.h"
#include "response_cache.h"
#include "routes.h"

void tg_route_version_create(tg_request *req)
{
    /* no body, or {}: a body that is anything else is a client mistake, not a draft */
    json_t *body = tg_json_body(req);
    static const char *const no_fields[] = {NULL};
    bool body_ok = body != NULL && tg_json_known_fields(req, body, no_fields);
    json_decref(body);
    if (!body_ok)
        return;
    tg_model *model = tg_model_alloc(req);
    if (model == NULL)
        return;
    if (tg_lookup_model(req, model)) {
        tg_version version;
        tg_cat_status status = tg_catalog_version_create(req->server->catalog, model->id, &version);
        json_t *created = status == TG_CAT_OK
                              ? tg_version_json(req->server, model, &version, true, &status)
                              : NULL;
        if (status == TG_CAT_NOT_FOUND)
            tg_respond_problem(req, "model_not_found", "no model %s/%s", model->org, model->name);
        else if (created == NULL)
            tg_respond_catalog_failure(req, status);
        else
            tg_respond_json(req, 201, created);
    }
    free(model);
}

void tg_route_version_get(tg_request *req)
{
    tg_model *model = tg_model_alloc(req);
    if (model == NULL)
        return;
    tg_version version;
    if (tg_lookup_model(req, model) && tg_lookup_version(req, model, &version)) {
        tg_cat_status status;
        json_t *body = tg_version_json(req->server, model, &version, true, &status);
        if (body == NULL)
            tg_respond_catalog_failure(req, status);
        else
            tg_respond_json(req, 200, body);
    }
    free(model);
}

/* ---- publish ---- */

static size_t dir_length(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? (size_t)(slash - path) + 1 : 0;
}

static bool same_dir(const char *a, const char *b)
{
    size_t len = dir_length(a);
    return len == dir_length(b) && strncmp(a, b, len) == 0;
}

typedef struct loaded_shard {
    st_file file;
    const char **names;
} loaded_shard;

/* Reads an index file's bytes (a sidecar, so bounded by the sidecar limit). */
static char *read_small_blob(tg_server *server, const tg_file_record *file)
{
    if (file->size > 64ULL * 1024 * 1024)
        return NULL;
    tg_blob_check check;
    tg_blob_reader *blob =
        tg_blob_open(server->blobs, file->sha256, TG_BLOB_SIZE_UNCHECKED, &check);
    if (blob == NULL)
        return NULL;
    char *text = malloc(file->size + 1);
    if (text != NULL && tg_blob_read_at(blob, text, (size_t)file->size, 0) != 0) {
        free(text);
        text = NULL;
    }
    tg_blob_close(blob);
    if (text)
        text[file->size] = '\0';
    return text;
}

/* Without an index: the files of one shard set (PREFIX-NNNNN-of-MMMMM.safetensors)
 * must hold disjoint tensors; any other file (model.safetensors beside its variant
 * model.fp16.safetensors, a consolidated.safetensors) is a whole model of its own.
 * Returns 0 ok, 1 overlap (detail set), -1 out of memory. */
static int check_shard_sets(const tg_shard *shards, size_t count, char *detail, size_t detail_len)
{
    tg_shard *group = calloc(count, sizeof *group);
    if (group == NULL)
        return -1;
    int result = 0;
    char key[TG_PATH_MAX + 1], other[TG_PATH_MAX + 1];
    for (size_t a = 0; a < count && result == 0; a++) {
        if (!tg_shard_set_key(shards[a].path, key, sizeof key))
            continue;
        bool first = true;
        for (size_t b = 0; b < a && first; b++)
            if (tg_shard_set_key(shards[b].path, other, sizeof other) && strcmp(key, other) == 0)
                first = false;
        if (!first)
            continue;
        size_t members = 0;
        for (size_t b = a; b < count; b++)
            if (tg_shard_set_key(shards[b].path, other, sizeof other) && strcmp(key, other) == 0)
                group[members++] = shards[b];
        if (members > 1 && !tg_shards_disjoint(group, members, detail, detail_len))
            result = 1;
    }
    free(group);
    return result;
}

/* Checks every directory of the version: with an index, the index against the
 * .safetensors files of that directory it names; without, that the files of each
 * shard set there hold disjoint tensors.
 * Returns 0 ok, 1 mismatch (detail set), -1 server error. */
static int check_shards(tg_server *server, const tg_file_records *files, char *detail,
                        size_t detail_len)
{
    loaded_shard *loaded = calloc(files->count ? files->count : 1, sizeof *loaded);
    tg_shard *shards = calloc(files->count ? files->count : 1, sizeof *shards);
    int result = -1;
    if (loaded == NULL || shards == NULL)
        goto out;
    /* Load every .safetensors header once. */
    for (size_t i = 0; i < files->count; i++) {
        const tg_file_record *f = &files->items[i];
        if (strcmp(f->kind, "safetensors") != 0 || !tg_is_safetensors_path(f->path))
            continue;
        st_error err;
        if (tg_header_read_parse(server->blobs, f->sha256, f->size, server->config.max_header,
                                 &loaded[i].file, &err) != 0) {
            tg_log(TG_LOG_ERROR, "publish: cannot read the header of %s (%s): %s", f->path,
                   f->sha256, err.detail);
            goto out;
        }
        loaded[i].names = calloc(loaded[i].file.tensor_count ? loaded[i].file.tensor_count : 1,
                                 sizeof *loaded[i].names);
        if (loaded[i].names == NULL)
            goto out;
        for (size_t t = 0; t < loaded[i].file.tensor_count; t++)
            loaded[i].names[t] = loaded[i].file.tensors[t].name;
    }
    result = 0;
    for (size_t i = 0; i < files->count && result == 0; i++) {
        const tg_file_record *anchor = &files->items[i];
        bool is_index = tg_is_index_path(anchor->path);
        /* Each directory is checked once: at its index, or at its first shard when it has none. */
        bool dir_has_index = false, first_shard_of_dir = true;
        for (size_t j = 0; j < files->count; j++) {
            if (!same_dir(anchor->path, files->items[j].path))
                continue;
            if (tg_is_index_path(files->items[j].path))
                dir_has_index = true;
            if (j < i && loaded[j].names != NULL)
                first_shard_of_dir = false;
        }
        bool anchor_is_shard = loaded[i].names != NULL;
        if (!is_index && !(anchor_is_shard && !dir_has_index && first_shard_of_dir))
            continue;
        size_t count = 0;
        for (size_t j = 0; j < files->count; j++) {
            if (loaded[j].names == NULL || !same_dir(anchor->path, files->items[j].path))
                continue;
            shards[count].path = files->items[j].path;
            shards[count].tensor_count = loaded[j].file.tensor_count;
            shards[count].names = loaded[j].names;
            shards[count].data_bytes = loaded[j].file.data_size;
            count++;
        }
        if (is_index) {
            char *text = read_small_blob(server, anchor);
            if (text == NULL) {
                result = -1;
                break;
            }
            if (!tg_index_check(anchor->path, text, anchor->size, shards, count, detail,
                                detail_len))
                result = 1;
            free(text);
        } else if (count > 1) {
            result = check_shard_sets(shards, count, detail, detail_len);
        }
    }
out:
    if (loaded) {
        for (size_t i = 0; i < files->count; i++) {
            free(loaded[i].names);
            st_file_free(&loaded[i].file);
        }
    }
    free(loaded);
    free(shards);
    return result;
}

/* The one publish path (routes.h). */
const char *tg_publish_files_locked(tg_request *req, const tg_model *model, const tg_version *draft,
                                    tg_file_records *files, tg_version *published, char *detail,
                                    size_t detail_len, tg_cat_status *catalog_status)
{
    tg_server *server = req->server;
    int64_t version_id = draft->id, number = draft->number;
    if (files->count == 0) {
        snprintf(detail, detail_len, "version %lld has no files to publish", (long long)number);
        return "empty_version";
    }
    int check = check_shards(server, files, detail, detail_len);
    if (check < 0) {
        snprintf(detail, detail_len, "the shard headers could not be read");
        return "internal";
    }
    if (check > 0)
        return "index_mismatch";
    /* signatures: a client's model.sig checked, the server's model.server.sig added */
    if (tg_signing_at_publish(req, model, draft, files) != 0)
        return "answered";
    char digest[65];
    if (tg_manifest_digest(files->items, files->count, digest) != 0) {
        /* nothing is frozen without its digest: the version stays a draft */
        snprintf(detail, detail_len,
                 "the version digest could not be computed; the version is still a draft");
        return "internal";
    }
    /* The files checked are the files published: a put or delete through another
     * replica after the listing makes this a 409, never a digest of other files. */
    const char *why = NULL;
    tg_cat_status status = tg_catalog_version_publish_files(
        server->catalog, version_id, digest, files->items, files->count, published, &why);
    *catalog_status = status;
    if (status == TG_CAT_CONFLICT && why != NULL && strcmp(why, "version_changed") == 0) {
        snprintf(detail, detail_len,
                 "the files of version %lld of %s/%s changed while it was being published; "
                 "nothing was published, publish again",
                 (long long)number, model->org, model->name);
        return "version_changed";
    }
    if (status == TG_CAT_CONFLICT) {
        snprintf(detail, detail_len, "version %lld of %s/%s is already published",
                 (long long)number, model->org, model->name);
        return "version_published";
    }
    if (status != TG_CAT_OK)
        return "catalog";
    /* "latest" and "main" may name this one now: their kept answers go */
    tg_response_cache_invalidate_moving(server->responses);
    tg_log(TG_LOG_INFO, "published %s/%s version %lld digest %s", model->org, model->name,
           (long long)published->number, digest);
    return NULL;
}

void tg_route_version_publish(tg_request *req)
{
    tg_server *server = req->server;
    tg_model *model = malloc(sizeof *model);
    tg_file_records files = {0};
    if (model == NULL) {
        tg_respond_internal(req, "out of memory");
        return;
    }
    tg_version version;
    if (!tg_lookup_model(req, model) || !tg_lookup_version(req, model, &version))
        goto out_free;
    if (version.published) {
        tg_respond_problem(req, "version_published", "version %lld of %s/%s is already published",
                           (long long)version.number, model->org, model->name);
        goto out_free;
    }
    /* Uploads and deletes commit under the same lock: what is checked is what is frozen. */
    pthread_mutex_lock(&server->publish_lock);
    /* A model DELETE commits under the same lock, and the look-ups above ran before
     * it: a delete that came first leaves no version here (a model's ids are never
     * reused), and publish answers 404 as a request sent after the delete would.
     * An error falls through to the listing, which answers it. */
    tg_version current;
    if (tg_catalog_version_get(server->catalog, model->id, version.number, &current) ==
        TG_CAT_NOT_FOUND) {
        tg_respond_problem(req, "model_not_found", "no model %s/%s", model->org, model->name);
        goto out_unlock;
    }
    tg_cat_status listed =
        tg_catalog_file_list(server->catalog, version.id, NULL, 0, tg_file_records_collect, &files);
    if (listed != TG_CAT_OK || files.failed) {
        tg_respond_catalog_failure(req, listed);
        goto out_unlock;
    }
    char detail[512] = "";
    tg_version published;
    tg_cat_status status = TG_CAT_OK;
    const char *reason = tg_publish_files_locked(req, model, &version, &files, &published, detail,
                                                 sizeof detail, &status);
    if (reason != NULL && strcmp(reason, "answered") == 0) {
        /* the signature step answered */
    } else if (reason == NULL) {
        json_t *body = tg_version_json(server, model, &published, true, &status);
        if (body == NULL)
            tg_respond_catalog_failure(req, status);
        else
            tg_respond_json(req, 200, body);
    } else if (strcmp(reason, "catalog") == 0) {
        tg_respond_catalog_failure(req, status);
    } else if (strcmp(reason, "internal") == 0) {
        tg_respond_internal(req, "%s", detail);
    } else {
        tg_respond_problem(req, reason, "%s", detail);
    }
out_unlock:
    pthread_mutex_unlock(&server->publish_lock);
out_free:
    free(files.items);
    free(model);
}

/* ---- the life of a version (docs/MANUAL.md, "The life of a version") ---- */

/* DELETE /v1/models/{org}/{name}/versions/{rev}: a draft (write scope, its files go
 * with it) or a published version (admin scope: it becomes a tombstone whose number,
 * digest and commit id answer 410 version_deleted; the aliases naming it go). Either
 * way the blobs no other file references are left for gc to reclaim. */
void tg_route_version_delete(tg_request *req)
{
    tg_model *model = tg_model_alloc(req);
    if (model == NULL)
        return;
    tg_version version;
    if (!tg_lookup_model(req, model) || !tg_lookup_version(req, model, &version))
        goto out;
    tg_server *server = req->server;
    tg_cat_status status;
    if (!version.published) {
        status = tg_catalog_version_delete_draft(server->catalog, version.id);
    } else {
        /* the row lets write tokens in; a published version asks for admin */
        if (!tg_auth_require(req, TG_SCOPE_ADMIN, model->org))
            goto out;
        status = tg_catalog_version_delete_published(server->catalog, model, &version);
    }
    tg_response_cache_invalidate(server->responses);
    if (status == TG_CAT_NOT_FOUND) { /* deleted or published by another request meanwhile */
        tg_respond_problem(req, "version_changed",
                           "version %lld of %s/%s changed while it was being deleted; try again",
                           (long long)version.number, model->org, model->name);
        goto out;
    }
    if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
        goto out;
    }
    tg_log(TG_LOG_WARN, "%s/%s: %s version %lld deleted by %s", model->org, model->name,
           version.published ? "published" : "draft", (long long)version.number, req->client);
    tg_respond_empty(req, 204);
out:
    free(model);
}

/* PUT /v1/models/{org}/{name}/versions/{rev}/deprecation {"reason": "..."}: marks a
 * published version deprecated (write scope); "latest" (and the Hub's main) skip it. */
void tg_route_version_deprecate(tg_request *req)
{
    json_t *body = tg_json_body(req);
    if (body == NULL)
        return;
    static const char *const fields[] = {"reason", NULL};
    if (!tg_json_known_fields(req, body, fields)) {
        json_decref(body);
        return;
    }
    json_t *reason_value = json_object_get(body, "reason");
    if (reason_value != NULL && !json_is_string(reason_value)) {
        tg_respond_problem(req, "invalid_request", "\"reason\" is a string");
        json_decref(body);
        return;
    }
    const char *reason = reason_value ? json_string_value(reason_value) : "";
    if (strlen(reason) > TG_DEPRECATION_REASON_MAX) {
        tg_respond_problem(req, "invalid_request", "\"reason\" is at most %d bytes",
                           TG_DEPRECATION_REASON_MAX);
        json_decref(body);
        return;
    }
    tg_model *model = tg_model_alloc(req);
    tg_version version;
    if (model == NULL || !tg_lookup_model(req, model) || !tg_lookup_version(req, model, &version))
        goto out;
    if (!version.published) {
        tg_respond_problem(req, "version_not_published",
                           "only a published version is deprecated; %lld is a draft",
                           (long long)version.number);
        goto out;
    }
    tg_cat_status status =
        tg_catalog_version_deprecate(req->server->catalog, model, &version, reason);
    tg_response_cache_invalidate(req->server->responses);
    if (status == TG_CAT_OK)
        status = tg_catalog_version_get(req->server->catalog, model->id, version.number, &version);
    json_t *answer =
        status == TG_CAT_OK ? tg_version_json(req->server, model, &version, false, &status) : NULL;
    if (status == TG_CAT_NOT_FOUND)
        tg_respond_problem(req, "version_changed", "version %lld of %s/%s was deleted meanwhile",
                           (long long)version.number, model->org, model->name);
    else if (answer == NULL)
        tg_respond_catalog_failure(req, status);
    else
        tg_respond_json(req, 200, answer);
out:
    json_decref(body);
    free(model);
}

/* DELETE /v1/models/{org}/{name}/versions/{rev}/deprecation: takes the mark away. */
void tg_route_version_undeprecate(tg_request *req)
{
    tg_model *model = tg_model_alloc(req);
    tg_version version;
    if (model == NULL || !tg_lookup_model(req, model) || !tg_lookup_version(req, model, &version))
        goto out;
    if (!version.published) {
        tg_respond_problem(req, "version_not_published",
                           "only a published version is deprecated; %lld is a draft",
                           (long long)version.number);
        goto out;
    }
    tg_cat_status status =
        tg_catalog_version_deprecate(req->server->catalog, model, &version, NULL);
    tg_response_cache_invalidate(req->server->responses);
    if (status == TG_CAT_OK)
        status = tg_catalog_version_get(req->server->catalog, model->id, version.number, &version);
    json_t *answer =
        status == TG_CAT_OK ? tg_version_json(req->server, model, &version, false, &status) : NULL;
    if (status == TG_CAT_NOT_FOUND)
        tg_respond_problem(req, "version_changed", "version %lld of %s/%s was deleted meanwhile",
                           (long long)version.number, model->org, model->name);
    else if (answer == NULL)
        tg_respond_catalog_failure(req, status);
    else
        tg_respond_json(req, 200, answer);
out:
    free(model);
}
