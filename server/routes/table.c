/* The routing table (route_table.h): every route of the server, in one place.
 * How to add a route: add the operation to openapi.yaml with its x-tensorgate-scope;
 * add its row here (method, pattern with {placeholders}, body kind, the scope it
 * needs (TG_AUTH_*, http.h: the dispatcher authorizes before the handler runs),
 * flags (TG_ROUTE_*), handler; a stream route also gives start, feed and cleanup);
 * write the handler in its resource's file (server/routes/<resource>.c, declared in
 * routes.h); tests/unit/server/routes/table.c checks the table and openapi.yaml
 * agree, operations and scopes; and add its fixture to the authorization matrix
 * (tests/integration/authz_matrix.c, which takes the scope from the contract). */
#include "route_table.h"

#include "routes.h"

/* The first pattern that matches with the right method wins; a pattern that
 * matches with another method gives 405 (with Allow). A GET route also answers HEAD. */
static const tg_route routes[] = {
    {"GET", "/healthz", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, tg_route_healthz, NULL, NULL, NULL},
    {"GET", "/readyz", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, tg_route_readyz, NULL, NULL, NULL},
    {"GET", "/metrics", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, tg_route_metrics, NULL, NULL, NULL},
    {"GET", "/openapi.yaml", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, tg_route_openapi, NULL, NULL, NULL},
    {"GET", "/v1/reasons", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, tg_route_reasons, NULL, NULL, NULL},
    {"GET", "/", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, tg_route_web_index, NULL, NULL, NULL},
    {"GET", "/ui/{path}", TG_BODY_NONE, TG_AUTH_PUBLIC, 0, tg_route_web_asset, NULL, NULL, NULL},
    {"POST", "/v1/scan", TG_BODY_STREAM, TG_AUTH_SCAN, 0, tg_route_scan_finish, tg_route_scan_start,
     tg_route_scan_feed, tg_route_scan_cleanup},
    {"GET", "/v1/rejections", TG_BODY_NONE, TG_AUTH_ADMIN, 0, tg_route_rejections, NULL, NULL,
     NULL},
    {"GET", "/v1/models", TG_BODY_NONE, TG_AUTH_READ, 0, tg_route_models_list, NULL, NULL, NULL},
    {"POST", "/v1/models", TG_BODY_JSON, TG_AUTH_WRITE_OBJECT, 0, tg_route_model_create, NULL, NULL,
     NULL},
    {"GET", "/v1/models/{org}/{name}", TG_BODY_NONE, TG_AUTH_READ, 0, tg_route_model_get, NULL,
     NULL, NULL},
    {"DELETE", "/v1/models/{org}/{name}", TG_BODY_NONE, TG_AUTH_ADMIN, 0, tg_route_model_delete,
     NULL, NULL, NULL},
    {"PATCH", "/v1/models/{org}/{name}", TG_BODY_JSON, TG_AUTH_WRITE, 0, tg_route_model_patch, NULL,
     NULL, NULL},
    {"PUT", "/v1/models/{org}/{name}/aliases/{alias}", TG_BODY_JSON, TG_AUTH_WRITE, 0,
     tg_route_alias_set, NULL, NULL, NULL},
    {"POST", "/v1/models/{org}/{name}/versions", TG_BODY_JSON, TG_AUTH_WRITE, 0,
     tg_route_version_create, NULL, NULL, NULL},
    {"GET", "/v1/models/{org}/{name}/versions/{rev}", TG_BODY_NONE, TG_AUTH_READ, 0,
     tg_route_version_get, NULL, NULL, NULL},
    {"PATCH", "/v1/models/{org}/{name}/versions/{rev}", TG_BODY_JSON, TG_AUTH_WRITE, 0,
     tg_route_version_patch, NULL, NULL, NULL},
    {"POST", "/v1/models/{org}/{name}/versions/{rev}/publish", TG_BODY_JSON, TG_AUTH_WRITE, 0,
     tg_route_version_publish, NULL, NULL, NULL},
    {"POST", "/v1/models/{org}/{name}/versions/{rev}/convert", TG_BODY_JSON, TG_AUTH_WRITE, 0,
     tg_route_version_convert, NULL, NULL, NULL},
    {"GET", "/v1/jobs", TG_BODY_NONE, TG_AUTH_READ_OBJECT, 0, tg_route_jobs_list, NULL, NULL, NULL},
    {"GET", "/v1/jobs/{id}", TG_BODY_NONE, TG_AUTH_READ_OBJECT, 0, tg_route_job_get, NULL, NULL,
     NULL},
    {"DELETE", "/v1/jobs/{id}", TG_BODY_NONE, TG_AUTH_WRITE_OBJECT, 0, tg_route_job_delete, NULL,
     NULL, NULL},
    {"GET", "/v1/models/{org}/{name}/versions/{rev}/files", TG_BODY_NONE, TG_AUTH_READ, 0,
     tg_route_files_list, NULL, NULL, NULL},
    {"POST", "/v1/models/{org}/{name}/versions/{rev}/files/{path*}/import", TG_BODY_JSON,
     TG_AUTH_WRITE, 0, tg_route_file_import, NULL, NULL, NULL},
    {"GET", "/v1/models/{org}/{name}/versions/{rev}/files/{path*}/header", TG_BODY_NONE,
     TG_AUTH_READ, 0, tg_route_file_header, NULL, NULL, NULL},
    {"GET", "/v1/models/{org}/{name}/versions/{rev}/files/{path*}", TG_BODY_NONE, TG_AUTH_READ, 0,
     tg_route_file_get, NULL, NULL, NULL},
    {"PUT", "/v1/models/{org}/{name}/versions/{rev}/files/{path*}", TG_BODY_STREAM, TG_AUTH_WRITE,
     0, tg_route_upload_finish, tg_route_upload_start, tg_route_upload_feed,
     tg_route_upload_cleanup},
    {"DELETE", "/v1/models/{org}/{name}/versions/{rev}/files/{path*}", TG_BODY_NONE, TG_AUTH_WRITE,
     0, tg_route_file_delete, NULL, NULL, NULL},
    {"GET", "/v1/models/{org}/{name}/versions/{rev}/tensors", TG_BODY_NONE, TG_AUTH_READ, 0,
     tg_route_tensors_list, NULL, NULL, NULL},
    {"GET", "/v1/models/{org}/{name}/versions/{rev}/tensors/{tensor*}", TG_BODY_NONE, TG_AUTH_READ,
     0, tg_route_tensor_get, NULL, NULL, NULL},
    {"POST", "/v1/preloads", TG_BODY_JSON, TG_AUTH_WRITE_OBJECT, 0, tg_route_preload_create, NULL,
     NULL, NULL},
    {"GET", "/v1/preloads", TG_BODY_NONE, TG_AUTH_READ, 0, tg_route_preloads_list, NULL, NULL,
     NULL},
    {"GET", "/v1/preloads/{id}", TG_BODY_NONE, TG_AUTH_READ_OBJECT, 0, tg_route_preload_get, NULL,
     NULL, NULL},
    {"DELETE", "/v1/preloads/{id}", TG_BODY_NONE, TG_AUTH_WRITE_OBJECT, 0, tg_route_preload_delete,
     NULL, NULL, NULL},
    /* Hugging Face Hub read routes. Last, so every fixed route above wins: the
     * "/{org}/{name}/..." patterns match only what nothing else did. */
    {"GET", "/api/whoami-v2", TG_BODY_NONE, TG_AUTH_TOKEN, 0, tg_route_hf_whoami, NULL, NULL, NULL},
    {"GET", "/api/models", TG_BODY_NONE, TG_AUTH_READ, TG_ROUTE_HUB_ERRORS, tg_route_hf_models_list,
     NULL, NULL, NULL},
    {"POST", "/api/models/{org}/{name}/paths-info/{rev}", TG_BODY_JSON, TG_AUTH_READ_OBJECT,
     TG_ROUTE_HUB_ERRORS, tg_route_hf_paths_info, NULL, NULL, NULL},
    {"GET", "/api/models/{org}/{name}/refs", TG_BODY_NONE, TG_AUTH_READ_OBJECT, TG_ROUTE_HUB_ERRORS,
     tg_route_hf_refs, NULL, NULL, NULL},
    {"GET", "/api/models/{org}/{name}/commits/{rev}", TG_BODY_NONE, TG_AUTH_READ_OBJECT,
     TG_ROUTE_HUB_ERRORS, tg_route_hf_commits, NULL, NULL, NULL},
    {"GET", "/api/models/{org}/{name}", TG_BODY_NONE, TG_AUTH_READ_OBJECT, TG_ROUTE_HUB_ERRORS,
     tg_route_hf_model_info, NULL, NULL, NULL},
    {"GET", "/api/models/{org}/{name}/revision/{rev}", TG_BODY_NONE, TG_AUTH_READ_OBJECT,
     TG_ROUTE_HUB_ERRORS, tg_route_hf_model_info, NULL, NULL, NULL},
    {"GET", "/api/models/{org}/{name}/tree/{rev}", TG_BODY_NONE, TG_AUTH_READ_OBJECT,
     TG_ROUTE_HUB_ERRORS, tg_route_hf_tree, NULL, NULL, NULL},
    {"GET", "/api/models/{org}/{name}/tree/{rev}/{path*}", TG_BODY_NONE, TG_AUTH_READ_OBJECT,
     TG_ROUTE_HUB_ERRORS, tg_route_hf_tree, NULL, NULL, NULL},
    /* datasets and Spaces (repo_type "dataset", "space"): before "/{org}/{name}/..." */
    {"GET", "/api/datasets", TG_BODY_NONE, TG_AUTH_PUBLIC, TG_ROUTE_HUB_ERRORS,
     tg_route_hf_not_model, NULL, NULL, NULL},
    {"GET", "/api/datasets/{path*}", TG_BODY_NONE, TG_AUTH_PUBLIC, TG_ROUTE_HUB_ERRORS,
     tg_route_hf_not_model, NULL, NULL, NULL},
    {"POST", "/api/datasets/{path*}", TG_BODY_NONE, TG_AUTH_PUBLIC, TG_ROUTE_HUB_ERRORS,
     tg_route_hf_not_model, NULL, NULL, NULL},
    {"GET", "/api/spaces", TG_BODY_NONE, TG_AUTH_PUBLIC, TG_ROUTE_HUB_ERRORS, tg_route_hf_not_model,
     NULL, NULL, NULL},
    {"GET", "/api/spaces/{path*}", TG_BODY_NONE, TG_AUTH_PUBLIC, TG_ROUTE_HUB_ERRORS,
     tg_route_hf_not_model, NULL, NULL, NULL},
    {"POST", "/api/spaces/{path*}", TG_BODY_NONE, TG_AUTH_PUBLIC, TG_ROUTE_HUB_ERRORS,
     tg_route_hf_not_model, NULL, NULL, NULL},
    {"GET", "/datasets/{path*}", TG_BODY_NONE, TG_AUTH_PUBLIC, TG_ROUTE_HUB_ERRORS,
     tg_route_hf_not_model, NULL, NULL, NULL},
    {"GET", "/spaces/{path*}", TG_BODY_NONE, TG_AUTH_PUBLIC, TG_ROUTE_HUB_ERRORS,
     tg_route_hf_not_model, NULL, NULL, NULL},
    {"GET", "/{org}/{name}/resolve/{rev}/{path*}", TG_BODY_NONE, TG_AUTH_READ_OBJECT,
     TG_ROUTE_HUB_ERRORS, tg_route_hf_file, NULL, NULL, NULL},
    {"GET", "/{org}/{name}/raw/{rev}/{path*}", TG_BODY_NONE, TG_AUTH_READ_OBJECT,
     TG_ROUTE_HUB_ERRORS, tg_route_hf_file, NULL, NULL, NULL},
};

const tg_route *tg_routes(size_t *count)
{
    *count = sizeof routes / sizeof routes[0];
    return routes;
}
