/* Route handlers, one resource per file, listed in the routing table
 * (server/routes/table.c), and the lookups they share. Every handler is declared
 * here; the table names them, the HTTP layer (server/core/) never does. */
#ifndef TG_ROUTES_H
#define TG_ROUTES_H

#include <sys/types.h>

#include "http.h"

/* admin.c: health, readiness, metrics, the OpenAPI document and the rejections list */
void tg_route_healthz(tg_request *req);
void tg_route_readyz(tg_request *req);
void tg_route_metrics(tg_request *req);
void tg_route_openapi(tg_request *req);
void tg_route_reasons(tg_request *req);
void tg_route_rejections(tg_request *req);
/* audit.c: GET /v1/audit, and one record as the JSON the route and its export give */
void tg_route_audit_list(tg_request *req);
json_t *tg_audit_record_json(const tg_audit_record *record);

/* namespaces.c: a namespace's settings (its code policy) */
void tg_route_namespace_policy_get(tg_request *req);
void tg_route_namespace_policy_set(tg_request *req);
void tg_route_namespace_get(tg_request *req);
void tg_route_namespace_quota_set(tg_request *req);
/* web.c: the web page and its assets */
void tg_route_web_index(tg_request *req);
void tg_route_web_asset(tg_request *req);

/* models.c */
void tg_route_models_list(tg_request *req);
void tg_route_model_create(tg_request *req);
void tg_route_model_get(tg_request *req);
void tg_route_model_delete(tg_request *req);
void tg_route_alias_set(tg_request *req);
/* PATCH /v1/models/{org}/{name} and (versions.c) .../versions/{rev}: description and
 * tags (docs/MANUAL.md "Tags and descriptions") */
void tg_route_model_patch(tg_request *req);
void tg_route_version_patch(tg_request *req);
/* A model's (version_id 0) or a version's tags as a JSON object; NULL with *status. */
json_t *tg_tags_json(tg_server *server, int64_t model_id, int64_t version_id,
                     tg_cat_status *status);
/* A tag key: a name part ([A-Za-z0-9][A-Za-z0-9._-]{0,63}); a value: at most
 * TG_TAG_VALUE_MAX bytes (len), no NUL, no control characters. */
bool tg_valid_tag_key(const char *key);
bool tg_valid_tag_value(const char *value, size_t len);
/* A PATCH body {description?, tags?: {key: value|null}}, parsed and validated
 * (answers 400 itself and returns false); changes point into body. */
#define TG_META_PATCH_MAX (2 * TG_TAGS_MAX) /* tags one PATCH may name */
typedef struct tg_meta_patch {
    json_t *body;
    const char *description; /* NULL: kept */
    tg_tag_change changes[TG_META_PATCH_MAX];
    size_t count;
} tg_meta_patch;
bool tg_meta_patch_parse(tg_request *req, tg_meta_patch *patch);
void tg_meta_patch_free(tg_meta_patch *patch);
/* Applies patch to model (version_id 0) or to its version version_id; answers the
 * failure itself (409 too_many_tags, 404, catalog) and returns false. */
bool tg_meta_patch_apply(tg_request *req, const tg_model *model, int64_t version_id,
                         const tg_meta_patch *patch);
/* Every value of a repeated query argument, in order, at most max kept; the count
 * of all of them (more than max: the caller refuses). */
unsigned tg_query_all(const tg_request *req, const char *name, const char **values, unsigned max);
/* Model list cursors: "org/name", or "~DOWNLOADS~org/name" by downloads. */
bool tg_models_cursor_parse(const char *key, tg_model_search *search, char *after_org,
                            char *after_name);
void tg_models_cursor_key(const tg_model_search *search, const tg_model *last, char *key,
                          size_t key_len);
/* Counts a download of file of model_id when the request is one that counts: a GET
 * (not HEAD) of config.json or of a weight file (safetensors, GGUF), whole or from
 * byte 0 (a Range continuation does not count). */
void tg_count_download(tg_request *req, int64_t model_id, const tg_file_record *file);
void tg_route_alias_delete(tg_request *req);
/* Deletes a model with its versions, aliases and jobs, its preloads and the blobs
 * nothing else uses (DELETE /v1/models/{org}/{name} and the Hub's repo delete). */
tg_cat_status tg_model_remove(tg_server *server, const tg_model *model);

/* versions.c */
void tg_route_version_create(tg_request *req);
void tg_route_version_get(tg_request *req);
void tg_route_version_publish(tg_request *req);
void tg_route_version_delete(tg_request *req);
void tg_route_version_deprecate(tg_request *req);
void tg_route_version_undeprecate(tg_request *req);
/* The one publish path, shared by POST .../publish and the Hub's commit (hf_write.c);
 * the caller holds server->publish_lock. Checks files (the draft's files, exactly as
 * listed) for index and shard consistency, then the signatures (tg_signing_at_publish:
 * a client's model.sig checked, the server's model.server.sig added to the draft and
 * to files), computes the version digest and publishes the draft with exactly these
 * files (tg_catalog_version_publish_files). NULL when published (*published is the
 * version); else the reason: "answered" (the signature step answered req itself),
 * "empty_version", "index_mismatch", "version_changed", "version_published" (detail
 * says it), "internal" (a server failure; detail says which) or "catalog"
 * (*catalog_status says how the catalog failed). */
const char *tg_publish_files_locked(tg_request *req, const tg_model *model, const tg_version *draft,
                                    tg_file_records *files, tg_version *published, char *detail,
                                    size_t detail_len, tg_cat_status *catalog_status);

/* files.c */
void tg_route_files_list(tg_request *req);
void tg_route_file_get(tg_request *req);
void tg_route_file_header(tg_request *req);
void tg_route_file_delete(tg_request *req);
/* the README.md rendered (hf_card.h): at most TG_CARD_MAX bytes of it. Small because
 * libcmark 0.30.2 takes quadratic time on some inputs ("![[]()" repeated: 0.4 s of
 * CPU at 128 KiB, 2 s at 256 KiB, over 20 s at 1 MiB; fixed in cmark 0.30.3). */
#define TG_CARD_MAX (128 * 1024)
void tg_route_card(tg_request *req);
/* GET|HEAD bytes of a stored file: Range (206/416), ETag, If-None-Match (304), If-Range;
 * the bytes are read from the blob in blocks (tg_blob_response), never sent with sendfile.
 * extra_headers: NULL-terminated name/value pairs added to every answer, or NULL. */
void tg_serve_file(tg_request *req, const tg_file_record *file, const char *const *extra_headers);
/* The response tg_serve_file gives a plain HEAD (no Range, no validators) of file,
 * for the response cache: its body is never read. NULL when out of memory. */
struct MHD_Response *tg_file_head_response(const tg_file_record *file,
                                           const char *const *extra_headers);

/* upload.c */
void tg_route_upload_start(tg_request *req);
void tg_route_upload_feed(tg_request *req, const uint8_t *data, size_t len);
void tg_route_upload_finish(tg_request *req);
void tg_route_upload_cleanup(tg_request *req);

/* scan.c */
void tg_route_scan_start(tg_request *req);
void tg_route_scan_feed(tg_request *req, const uint8_t *data, size_t len);
void tg_route_scan_finish(tg_request *req);
void tg_route_scan_cleanup(tg_request *req);

/* convert.c */
void tg_route_version_convert(tg_request *req);
/* import.c */
void tg_route_file_import(tg_request *req);
/* POST /v1/models/{org}/{name}/mirror (mirror.c) */
void tg_route_model_mirror(tg_request *req);

/* tensors.c: GET .../versions/{rev}/tensors (list) and
 * GET|HEAD .../versions/{rev}/tensors/{tensor*} (bytes) */
void tg_route_tensors_list(tg_request *req);
void tg_route_tensor_get(tg_request *req);
/* bundle.c: GET|HEAD|POST .../versions/{rev}/bundle, many tensors as one safetensors
 * file (POST: the selection as a JSON body of at most 1 MiB, gathered by the stream
 * callbacks) */
void tg_route_bundle_get(tg_request *req);
void tg_route_bundle_post_start(tg_request *req);
void tg_route_bundle_post_feed(tg_request *req, const uint8_t *data, size_t len);
void tg_route_bundle_post(tg_request *req);
void tg_route_bundle_post_cleanup(tg_request *req);

/* preloads.c: POST|GET /v1/preloads, GET|DELETE /v1/preloads/{id} (the preload
 * service itself: preload_service.h) */
void tg_route_preload_create(tg_request *req);
void tg_route_preloads_list(tg_request *req);
void tg_route_preload_get(tg_request *req);
void tg_route_preload_delete(tg_request *req);

/* hf.c: the read routes the Hugging Face Hub clients use (docs/DESIGN.md §4), so
 * HF_ENDPOINT (huggingface_hub) and hubUrl (@huggingface/hub) can point at
 * tensorgate. Only published versions are visible there: a Hub revision needs a
 * commit id (the version digest). */
/* Records the Hub tags of version (published, with files) in the catalog: its
 * README.md card's tags (tg_hf_card_tags) and "gguf" when it holds a GGUF file. Called
 * when a version is published; a failure is logged (the version stays published,
 * without those tags in listing filters). */
void tg_hf_record_hub_tags(tg_server *server, const tg_version *version,
                           const tg_file_records *files);
/* GET|HEAD /{org}/{name}/resolve/{rev}/{path*} and /{org}/{name}/raw/{rev}/{path*} */
void tg_route_hf_file(tg_request *req);
/* GET /api/models: ?search= ?limit= ?cursor=, Link: <absolute>; rel="next" */
void tg_route_hf_models_list(tg_request *req);
/* GET /api/models/{org}/{name} and /api/models/{org}/{name}/revision/{rev} */
void tg_route_hf_model_info(tg_request *req);
/* GET /api/models/{org}/{name}/tree/{rev}[/{path*}]: ?recursive= ?limit= ?cursor= */
void tg_route_hf_tree(tg_request *req);
/* POST /api/models/{org}/{name}/paths-info/{rev}: tree entries of the asked paths */
void tg_route_hf_paths_info(tg_request *req);
/* GET /api/models/{org}/{name}/refs: main and aliases as branches, versions as tags */
void tg_route_hf_refs(tg_request *req);
/* GET /api/models/{org}/{name}/commits/{rev}: a version and those before it */
void tg_route_hf_commits(tg_request *req);
/* GET /api/whoami-v2: the token's identity, scope and namespace */
void tg_route_hf_whoami(tg_request *req);
/* any request for a dataset or a Space: 404 RepoNotFound, repo_type_not_served */
void tg_route_hf_not_model(tg_request *req);

/* Hugging Face Hub write routes (hf_write.c): repositories, preupload, the LFS batch
 * API and its signed upload and verify links, NDJSON commits, branches and tags. */
void tg_route_hub_repo_create(tg_request *req);
void tg_route_hub_repo_delete(tg_request *req);
void tg_route_hub_repo_move(tg_request *req);
void tg_route_hub_gather_feed(tg_request *req, const uint8_t *data, size_t len);
void tg_route_hub_gather_cleanup(tg_request *req);
void tg_route_hub_validate_yaml_start(tg_request *req);
void tg_route_hub_validate_yaml(tg_request *req);
void tg_route_hub_preupload_start(tg_request *req);
void tg_route_hub_preupload(tg_request *req);
void tg_route_hub_lfs_batch_start(tg_request *req);
void tg_route_hub_lfs_batch(tg_request *req);
void tg_route_hub_lfs_put_start(tg_request *req);
void tg_route_hub_lfs_put_feed(tg_request *req, const uint8_t *data, size_t len);
void tg_route_hub_lfs_put(tg_request *req);
void tg_route_hub_lfs_put_cleanup(tg_request *req);
void tg_route_hub_lfs_verify(tg_request *req);
void tg_route_hub_commit_start(tg_request *req);
void tg_route_hub_commit_feed(tg_request *req, const uint8_t *data, size_t len);
void tg_route_hub_commit(tg_request *req);
void tg_route_hub_commit_cleanup(tg_request *req);
void tg_route_hub_branch_create(tg_request *req);
void tg_route_hub_branch_delete(tg_request *req);
void tg_route_hub_tag_create(tg_request *req);
void tg_route_hub_tag_delete(tg_request *req);
/* Pure helpers of hf_write.c (unit-tested): standard or URL-safe base64, padding
 * optional, into out (room for len / 4 * 3 + 3 bytes): the byte count, or -1 for a
 * character outside the alphabet. */
ssize_t tg_hub_base64_decode(const char *text, size_t len, uint8_t *out);
/* The preupload answer for a file: true for "lfs" (weights and other binary names,
 * more than 1 MiB, or a NUL byte in the sample), false for "regular" (inline). */
bool tg_hub_upload_lfs(const char *path, uint64_t size, const uint8_t *sample, size_t sample_len);

/* jobs.c */
void tg_route_jobs_list(tg_request *req);
void tg_route_job_get(tg_request *req);
void tg_route_job_delete(tg_request *req);
/* A job as GET /v1/jobs/{id} shows it (NULL when out of memory). */
json_t *tg_job_json(const tg_job *job);
/* 202 with the job, Location: /v1/jobs/{id} to poll and Retry-After: 1. */
void tg_respond_job_accepted(tg_request *req, const tg_job *job);

/* Admission of a new job (conversions and imports share the limits and the lock).
 * Between tg_jobs_admission_begin and _end (one count-and-create at a time, so two
 * POSTs of any kind cannot both take the last place), tg_jobs_admit counts the jobs
 * queued and running, in all and of org (a job is its model's org's, whoever asked):
 * true when a job equal to the one asked for is among them (equal, when given, says
 * which; that job is answered, never refused) or a new one fits --max-jobs and
 * --max-jobs-per-namespace; otherwise false, having answered 429/503 (the detail
 * names them as `what`, "conversion jobs" say) or 500. */
void tg_jobs_admission_begin(void);
void tg_jobs_admission_end(void);
bool tg_jobs_admit(tg_request *req, const char *org, const char *what,
                   bool (*equal)(void *context, const tg_job *job), void *context);

/* signing.c: the server's signing keys, a namespace's signature policy, and the
 * signatures of a version at publish (docs/SIGNING.md) */
void tg_route_signing_keys(tg_request *req);
void tg_route_namespace_signing_get(tg_request *req);
void tg_route_namespace_signing_put(tg_request *req);
/* Called by publish with the draft's files, under the publish lock: checks a
 * client's model.sig against the namespace's policy (422 signature_* when refused)
 * and, when the server signs, adds model.server.sig to the draft and lists files
 * again. 0 go on, -1 answered. */
int tg_signing_at_publish(tg_request *req, const tg_model *model, const tg_version *version,
                          tg_file_records *files);

/* The storage quota of org (namespaces.c): *quota 0 when unbounded, *usage the bytes
 * its blobs hold (each counted once). */
tg_cat_status tg_namespace_quota(tg_server *server, const char *org, uint64_t *quota,
                                 uint64_t *usage);
/* True when incoming more bytes fit org's quota; else answers 413
 * storage_quota_exceeded (or the catalog's failure) and returns false. */
bool tg_quota_admits(tg_request *req, const char *org, uint64_t incoming);
/* A reservation older than this is stale (its server stopped mid-upload): not counted. */
#define TG_RESERVATION_SECONDS (24 * 3600)
/* Reserves bytes against org's quota in the catalog (schema 17) for an upload about to
 * stream: TG_CAT_OK with id (cap >= 37) the reservation ("" when org is unbounded),
 * TG_CAT_CONFLICT when org's usage, its live reservations and bytes exceed the quota
 * (*quota and *usage say the figures), else the catalog's failure. Not answered. */
tg_cat_status tg_quota_reserve(tg_server *server, const char *org, uint64_t bytes, uint64_t *quota,
                               uint64_t *usage, char *id, size_t cap);
/* Releases the reservation id (nothing when ""), and empties id. */
void tg_quota_release(tg_server *server, char *id);

/* Shared lookups (models.c). Each answers the error itself and returns false. */
/* A model to look up into (malloc'd, the caller frees it); NULL after answering 500. */
tg_model *tg_model_alloc(tg_request *req);
bool tg_lookup_model(tg_request *req, tg_model *model);
/* Resolves {rev}: a version number, a 64-hex digest, a 40-hex commit id (the first 40
 * hex digits of a published version's digest), "latest" or an alias. */
bool tg_lookup_version(tg_request *req, const tg_model *model, tg_version *version);
/* True for a non-empty run of decimal digits (a {rev} meant as a version number). */
bool tg_rev_is_number(const char *rev);
/* True for a {rev} that names one version for good: a number (19 digits at most) or a
 * 64-hex digest. "latest", "main", an alias or none may move (response_cache.h). */
bool tg_rev_is_fixed(const char *rev);
/* The commit id of a published version (the Hub clients take only 40 hex digits for
 * a commit): the first 40 hex digits of its digest; "" for a draft. */
void tg_version_commit_id(const tg_version *version, char out[41]);
/* True for 40 lowercase hex digits. */
bool tg_is_commit_id(const char *text);
json_t *tg_file_json(const tg_file_record *file);
/* [{"path", "reason"}] of the code files of model_id's version number (0: every
 * version): what marks a version as holding code. NULL when the catalog failed. */
json_t *tg_code_files_json(tg_server *server, int64_t model_id, int64_t number,
                           tg_cat_status *status);
/* Sets "deprecated" (and, when it is, "deprecated_at" and "deprecation_reason") of a
 * version's JSON (schema 16). */
void tg_version_lifecycle_json(json_t *body, const tg_version *version);
/* NULL when the catalog (*status says how) or memory (*status TG_CAT_ERROR) failed. */
json_t *tg_version_json(tg_server *server, const tg_model *model, const tg_version *version,
                        bool with_files, tg_cat_status *status);

/* 500 blob_damaged naming path: its stored content is missing or not what the
 * catalog recorded; an operator runs fsck or uploads the file again. */
void tg_respond_blob_damaged(tg_request *req, const char *path);
/* 503 blob_store_unavailable (Retry-After: 5): the blob store cannot be reached
 * now (errno TG_BLOB_UNAVAILABLE_ERRNO from the store); nothing was changed. */
void tg_respond_blob_store_unavailable(tg_request *req);
/* Opens file's blob for reading, checked against the catalog's size; NULL after
 * answering (500 blob_damaged, 503 when out of descriptors or the blob store cannot
 * be reached, or 500 internal when the open fails otherwise). */
tg_blob_reader *tg_open_file_blob(tg_request *req, const tg_file_record *file);

/* MHD's buffer for bodies read from blobs. */
#define TG_BLOB_BLOCK (256 * 1024)
/* A response of length bytes of the blob from offset, read in TG_BLOB_BLOCK
 * pieces (never sendfile): a read that ends early marks the blob damaged and ends
 * the response with an error (MHD closes the connection). Owns blob, also on
 * failure (NULL). */
struct MHD_Response *tg_blob_response(tg_server *server, tg_blob_reader *blob, uint64_t offset,
                                      uint64_t length);

/* webhooks.c: /v1/namespaces/{org}/webhooks... */
void tg_route_webhook_create(tg_request *req);
void tg_route_webhooks_list(tg_request *req);
void tg_route_webhook_get(tg_request *req);
void tg_route_webhook_update(tg_request *req);
void tg_route_webhook_delete(tg_request *req);
void tg_route_webhook_ping(tg_request *req);
void tg_route_webhook_deliveries(tg_request *req);
void tg_route_webhook_delivery_get(tg_request *req);
void tg_route_webhook_redeliver(tg_request *req);

#endif
