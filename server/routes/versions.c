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
#include "shard_check.h"

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

/* ---- PATCH .../versions/{rev} ---- */

void tg_route_version_patch(tg_request *req)
{
    tg_model *model = tg_model_alloc(req);
    if (model == NULL)
        return;
    tg_version version;
    tg_meta_patch patch;
    if (tg_lookup_model(req, model) && tg_lookup_version(req, model, &version) &&
        tg_meta_patch_parse(req, &patch)) {
        /* metadata only: a published version's files and digest stay as they are */
        if (tg_meta_patch_apply(req, model, version.id, &patch)) {
            tg_cat_status status;
            json_t *body = tg_version_json(req->server, model, &version, false, &status);
            if (body == NULL)
                tg_respond_catalog_failure(req, status);
            else
                tg_respond_json(req, 200, body);
        }
        tg_meta_patch_free(&patch);
    }
    free(model);
}

/* ---- publish ---- */

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
    int check = tg_shard_check(server->blobs, server->config.max_header, files, detail, detail_len);
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
    /* its card's Hub tags, for the Hub's listing filters (best effort: logged) */
    tg_hf_record_hub_tags(server, published, files);
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

/* Sets (reason: the mark's reason, may be "") or takes away (reason NULL) the
 * deprecation of the request's published version, and answers with the version. */
static void set_deprecation(tg_request *req, const char *reason)
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
    set_deprecation(req, reason);
    json_decref(body);
}

/* DELETE /v1/models/{org}/{name}/versions/{rev}/deprecation: takes the mark away. */
void tg_route_version_undeprecate(tg_request *req)
{
    set_deprecation(req, NULL);
}
