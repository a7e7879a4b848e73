/* Hugging Face Hub write routes (declared in routes.h): what huggingface_hub's
 * create_repo / upload_folder / create_commit / create_branch / create_tag and
 * @huggingface/hub's createRepo / uploadFiles / commit / createBranch send, mapped
 * onto models, versions and aliases (docs/HF_CLIENTS.md, "Writes").
 *
 * A commit is one version, made atomically: every file of it has passed the gate
 * (inline files while the NDJSON body is read, LFS files as their bytes were PUT to
 * the signed href of the LFS batch answer), the new file list (the files of the
 * head, main's or the branch's, then the commit's deletions and additions) is
 * checked for index and shard consistency and only then written as a draft and
 * published through the one publish path (tg_publish_files_locked) under the
 * publish lock; a failure there takes the draft back; a commit to a Hub branch then
 * moves the branch (its version is marked as made on it, so it is never main).
 * Code is admitted as a PUT admits it: where the namespace's policy allows it,
 * recorded as admitted_by_policy. Nothing of a refused commit is ever published,
 * and blobs it stored that nothing references are reclaimed.
 *
 * LFS bytes wait between their PUT and the commit as pending objects of the
 * namespace (org), in the catalog (hub_lfs_pending, schema 17: any replica, and a
 * restarted server, finds them; pending_*, below): the sha256, size and
 * what the gate found (kind, tensor facts, per-tensor stats). A commit takes an LFS
 * file from the namespace's pending objects or from main's head: the batch answer
 * skips the upload only for content the token's namespace has uploaded or the model
 * holds already, never for bytes of another namespace. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "auth.h"
#include "checks.h"
#include "index_check.h"
#include "log.h"
#include "manifest.h"
#include "public_url.h"
#include "reclaim.h"
#include "response_cache.h"
#include "routes.h"
#include "sha256.h"
#include "st_code.h"
#include "upload.h"

#define HUB_REGULAR_MAX (1024 * 1024)    /* larger files go through LFS */
#define HUB_GATHER_MAX (4 * 1024 * 1024) /* JSON bodies of preupload and batch */
#define HUB_LINE_MAX (2 * 1024 * 1024)   /* one NDJSON line of a commit */
#define HUB_COMMIT_OPS_MAX 10000         /* operations of one commit */
#define HUB_HREF_SECONDS 3600            /* an upload href is good for an hour */
#define HUB_PENDING_SECONDS (24 * 3600)  /* an uploaded LFS object waits a day */
#define HUB_RESERVE_SECONDS (24 * 3600)  /* a reservation older than this is stale */

/* ---- the Hub's error dialect ---- */

/* A problem with X-Error-Code (code, or the reason) and X-Error-Message (the
 * sentence); on these routes the body is application/json with "error" (request.c). */
static void __attribute__((format(printf, 4, 5)))
hub_error(tg_request *req, const char *code, const char *reason, const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    const char *const headers[] = {"X-Error-Code", code ? code : reason, "X-Error-Message", detail,
                                   NULL};
    tg_respond_problem_headers(req, reason, headers, "%s", detail);
}

static void hub_repo_not_found(tg_request *req, const char *org, const char *name)
{
    hub_error(req, "RepoNotFound", "model_not_found", "Repository not found: no model %s/%s",
              org ? org : "", name ? name : "");
}

/* {org}/{name} of the path -> model; answers 404 RepoNotFound. */
static bool hub_lookup_repo(tg_request *req, const char *org, const char *name, tg_model *model)
{
    tg_cat_status status = TG_CAT_NOT_FOUND;
    if (org != NULL && name != NULL && tg_valid_name_part(org) && tg_valid_name_part(name))
        status = tg_catalog_model_get(req->server->catalog, org, name, model);
    if (status == TG_CAT_NOT_FOUND) {
        hub_repo_not_found(req, org, name);
        return false;
    }
    if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
        return false;
    }
    return true;
}

static bool is_main(const char *rev)
{
    return rev != NULL && (strcmp(rev, "main") == 0 || strcmp(rev, "HEAD") == 0);
}

/* A Hub revision -> a published version: main/HEAD (the newest published), a number,
 * a commit id, a digest or an alias. NOT_FOUND when none (or a draft). */
static tg_cat_status hub_resolve(tg_catalog *catalog, int64_t model_id, const char *rev,
                                 tg_version *version)
{
    tg_cat_status status = TG_CAT_NOT_FOUND;
    if (rev == NULL)
        return status;
    if (is_main(rev) || strcmp(rev, "latest") == 0) {
        status = tg_catalog_version_latest_published(catalog, model_id, version);
    } else if (tg_rev_is_number(rev)) {
        uint64_t number;
        if (tg_parse_u64(rev, &number) && number <= INT64_MAX)
            status = tg_catalog_version_get(catalog, model_id, (int64_t)number, version);
    } else if (tg_is_sha256_hex(rev)) {
        status = tg_catalog_version_by_digest(catalog, model_id, rev, version);
    } else if (tg_is_commit_id(rev) && (status = tg_catalog_version_by_commit(
                                            catalog, model_id, rev, version)) != TG_CAT_NOT_FOUND) {
        /* found, or the catalog failed */
    } else if (tg_valid_alias(rev)) {
        int64_t number = 0;
        status = tg_catalog_alias_get(catalog, model_id, rev, &number);
        if (status == TG_CAT_OK)
            status = tg_catalog_version_get(catalog, model_id, number, version);
    }
    if (status == TG_CAT_OK && (!version->published || version->deleted_at[0] != '\0'))
        status = TG_CAT_NOT_FOUND; /* a draft, or a deleted version's tombstone */
    return status;
}

/* ---- bodies gathered whole (bounded) by stream routes ---- */

typedef struct gather {
    char *data;
    size_t len, cap;
    bool too_large;
} gather;

static void gather_feed(gather *g, const uint8_t *data, size_t len)
{
    if (g->too_large)
        return;
    if (g->len + len > HUB_GATHER_MAX) {
        g->too_large = true;
        return;
    }
    if (g->len + len + 1 > g->cap) {
        size_t cap = g->cap ? g->cap : 16384;
        while (cap < g->len + len + 1)
            cap *= 2;
        char *grown = realloc(g->data, cap);
        if (grown == NULL) {
            g->too_large = true;
            return;
        }
        g->data = grown;
        g->cap = cap;
    }
    memcpy(g->data + g->len, data, len);
    g->len += len;
    g->data[g->len] = '\0';
}

/* The gathered body as a JSON object; NULL after answering. */
static json_t *gather_json(tg_request *req, gather *g)
{
    if (g->too_large) {
        hub_error(req, NULL, "payload_too_large", "the request body is larger than %d bytes",
                  HUB_GATHER_MAX);
        return NULL;
    }
    json_error_t error;
    json_t *body = g->len ? json_loadb(g->data, g->len, JSON_REJECT_DUPLICATES, &error) : NULL;
    if (!json_is_object(body)) {
        json_decref(body);
        hub_error(req, NULL, "invalid_json", "the request body is not a JSON object");
        return NULL;
    }
    return body;
}

static void gather_start(tg_request *req)
{
    req->state = calloc(1, sizeof(gather));
    if (req->state == NULL)
        tg_respond_internal(req, "out of memory");
}

void tg_route_hub_gather_feed(tg_request *req, const uint8_t *data, size_t len)
{
    if (req->state != NULL)
        gather_feed(req->state, data, len);
}

void tg_route_hub_gather_cleanup(tg_request *req)
{
    gather *g = req->state;
    if (g != NULL)
        free(g->data);
    free(g);
    req->state = NULL;
}

/* ---- base64 ---- */

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

ssize_t tg_hub_base64_decode(const char *text, size_t len, uint8_t *out)
{
    size_t n = 0;
    uint32_t acc = 0;
    unsigned bits = 0;
    size_t i = 0;
    for (; i < len && text[i] != '='; i++) {
        int v = b64_value((unsigned char)text[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    for (; i < len; i++)
        if (text[i] != '=')
            return -1;
    return (ssize_t)n;
}

/* ---- upload modes (preupload) ---- */

bool tg_hub_upload_lfs(const char *path, uint64_t size, const uint8_t *sample, size_t sample_len)
{
    static const char *const binary[] = {
        ".safetensors", ".gguf", ".bin",  ".pt",      ".pth",    ".ckpt",   ".pkl",
        ".pickle",      ".h5",   ".onnx", ".msgpack", ".npy",    ".npz",    ".tflite",
        ".model",       ".zip",  ".tar",  ".gz",      ".png",    ".jpg",    ".jpeg",
        ".gif",         ".webp", ".wasm", ".ot",      ".joblib", ".mlmodel"};
    size_t len = strlen(path);
    for (size_t i = 0; i < sizeof binary / sizeof binary[0]; i++) {
        size_t n = strlen(binary[i]);
        if (len >= n && strcasecmp(path + len - n, binary[i]) == 0)
            return true;
    }
    if (size > HUB_REGULAR_MAX)
        return true;
    for (size_t i = 0; i < sample_len; i++)
        if (sample[i] == 0)
            return true; /* a NUL byte: binary content */
    return false;
}

/* ---- signed upload hrefs ---- */

/* The key is the catalog's shared secret "lfs-href" (schema 17): made at random by the
 * first server that needs it, so every replica and a restarted server accept the hrefs
 * any of them gave. Read once per process. */
static char href_key[65];
static bool href_key_ready;
static pthread_mutex_t href_key_lock = PTHREAD_MUTEX_INITIALIZER;

static bool href_key_load(tg_catalog *catalog)
{
    pthread_mutex_lock(&href_key_lock);
    if (!href_key_ready) {
        unsigned char random[32];
        char candidate[65];
        if (getrandom(random, sizeof random, 0) == (ssize_t)sizeof random) {
            tg_hex_encode(random, sizeof random, candidate);
            href_key_ready = tg_catalog_hub_secret(catalog, "lfs-href", candidate, href_key,
                                                   sizeof href_key) == TG_CAT_OK &&
                             strlen(href_key) == 64;
        }
    }
    bool ready = href_key_ready;
    pthread_mutex_unlock(&href_key_lock);
    return ready;
}

/* The signature of an upload href: SHA-256(key || SHA-256(key || message)), hex, over
 * the org, name, oid, size, expiry and the id of the token that asked for it. */
static bool href_sign(tg_catalog *catalog, const char *org, const char *name, const char *oid,
                      uint64_t size, long long expires, int64_t token_id, char hex[65])
{
    if (!href_key_load(catalog))
        return false;
    char message[512];
    int len = snprintf(message, sizeof message, "%s\n%s\n%s\n%llu\n%lld\n%lld", org, name, oid,
                       (unsigned long long)size, expires, (long long)token_id);
    if (len < 0 || (size_t)len >= sizeof message)
        return false;
    unsigned char inner[TG_SHA256_SIZE], outer[TG_SHA256_SIZE];
    tg_sha256 s;
    if (tg_sha256_init(&s, "hub-href") != 0)
        return false;
    bool ok = tg_sha256_update(&s, href_key, 64) == 0 &&
              tg_sha256_update(&s, message, (size_t)len) == 0 && tg_sha256_final(&s, inner) == 0;
    tg_sha256_free(&s);
    if (!ok || tg_sha256_init(&s, "hub-href") != 0)
        return false;
    ok = tg_sha256_update(&s, href_key, 64) == 0 &&
         tg_sha256_update(&s, inner, sizeof inner) == 0 && tg_sha256_final(&s, outer) == 0;
    tg_sha256_free(&s);
    if (ok)
        tg_hex_encode(outer, sizeof outer, hex);
    return ok;
}

/* ---- pending LFS objects (the catalog's hub_lfs_pending, schema 17) ---- */

/* The catalog time HUB_PENDING_SECONDS ago: pending objects older than it are expired. */
static void pending_since(char out[TG_TIME_LEN])
{
    time_t at = time(NULL) - HUB_PENDING_SECONDS;
    struct tm tm;
    gmtime_r(&at, &tm);
    strftime(out, TG_TIME_LEN, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* org's pending object sha256 of size: TG_CAT_OK and (when file) its record, (when
 * stats) its stats, malloc'd. */
static tg_cat_status pending_get(tg_server *server, const char *org, const char *sha256,
                                 uint64_t size, tg_file_record *file, char **stats)
{
    char since[TG_TIME_LEN];
    pending_since(since);
    tg_file_record local = {0};
    return tg_catalog_hub_pending_get(server->catalog, org, sha256, size, since,
                                      file ? file : &local, stats);
}

static void pending_remove(tg_server *server, const char *org, const char *sha256)
{
    tg_cat_status status = tg_catalog_hub_pending_delete(server->catalog, org, sha256);
    if (tg_cat_failed(status))
        tg_log(TG_LOG_WARN, "cannot remove the pending LFS object %s of %s (it expires)", sha256,
               org);
}

/* org's pending object whose blob is still stored: a row whose blob is gone (a damaged
 * store) goes, so the batch answer asks for the bytes again. */
static bool pending_stored(tg_server *server, const char *org, const char *sha256, uint64_t size)
{
    if (pending_get(server, org, sha256, size, NULL, NULL) != TG_CAT_OK)
        return false;
    uint64_t stored = 0;
    if (tg_blob_stat(server->blobs, sha256, &stored) == 0 && stored == size)
        return true;
    pending_remove(server, org, sha256);
    return false;
}

typedef struct expired_list {
    char (*items)[65];
    size_t count, cap;
} expired_list;

static void collect_expired(void *ctx, const char *sha256)
{
    expired_list *list = ctx;
    if (list->count == list->cap) {
        size_t cap = list->cap ? list->cap * 2 : 16;
        char(*grown)[65] = realloc(list->items, cap * sizeof *grown);
        if (grown == NULL)
            return; /* its blob stays unreferenced: gc takes it */
        list->items = grown;
        list->cap = cap;
    }
    snprintf(list->items[list->count++], 65, "%s", sha256);
}

/* Removes the pending objects past their day and reclaims their blobs (those nothing
 * else references). Run at each LFS batch request; `tensorgate gc` expires them too. */
static void pending_sweep(tg_server *server)
{
    char before[TG_TIME_LEN];
    pending_since(before);
    expired_list list = {0};
    if (tg_catalog_hub_pending_expire(server->catalog, before, collect_expired, &list) != TG_CAT_OK)
        tg_log(TG_LOG_WARN, "cannot expire the pending LFS objects older than %s", before);
    for (size_t i = 0; i < list.count; i++)
        (void)tg_blob_reclaim(server->blobs, server->catalog, list.items[i], false);
    if (list.count > 0)
        tg_log(TG_LOG_INFO, "%zu pending LFS object(s) expired uncommitted", list.count);
    free(list.items);
}

/* ---- the files of a version, with their stats ---- */

typedef struct commit_file {
    tg_file_record file;
    char *stats;     /* JSON text; malloc'd */
    bool from_base;  /* kept from main's head */
    bool stored_new; /* an inline file this commit stored (reclaimed if unused) */
} commit_file;

typedef struct file_set {
    commit_file *items;
    size_t count, cap;
} file_set;

static void file_set_free(file_set *set)
{
    for (size_t i = 0; i < set->count; i++)
        free(set->items[i].stats);
    free(set->items);
    memset(set, 0, sizeof *set);
}

static commit_file *file_set_find(file_set *set, const char *path)
{
    for (size_t i = 0; i < set->count; i++)
        if (strcmp(set->items[i].file.path, path) == 0)
            return &set->items[i];
    return NULL;
}

static void file_set_remove_at(file_set *set, size_t i)
{
    free(set->items[i].stats);
    set->items[i] = set->items[set->count - 1];
    set->count--;
}

/* Puts file (stats stolen) in place of the one of its path, or adds it; false when
 * out of memory (stats freed). */
static bool file_set_put(file_set *set, const tg_file_record *file, char *stats, bool from_base)
{
    commit_file *slot = file_set_find(set, file->path);
    if (slot == NULL) {
        if (set->count == set->cap) {
            size_t cap = set->cap ? set->cap * 2 : 16;
            commit_file *grown = realloc(set->items, cap * sizeof *grown);
            if (grown == NULL) {
                free(stats);
                return false;
            }
            set->items = grown;
            set->cap = cap;
        }
        slot = &set->items[set->count++];
    } else {
        free(slot->stats);
    }
    memset(slot, 0, sizeof *slot);
    slot->file = *file;
    slot->stats = stats;
    slot->from_base = from_base;
    return true;
}

/* ---- POST /api/repos/create ---- */

static json_t *repo_json(tg_request *req, const char *org, const char *name)
{
    char origin[512], url[1024], full[2 * TG_NAME_MAX + 2];
    tg_request_origin(req, origin, sizeof origin);
    snprintf(url, sizeof url, "%s/%s/%s", origin, org, name);
    snprintf(full, sizeof full, "%s/%s", org, name);
    return json_pack("{s:s, s:s, s:s}", "url", url, "name", full, "id", full);
}

/* The repo of the body of /api/repos/create, delete: name, organization (the token's namespace when
 * absent), type (model only). False after answering. */
static bool repo_of_body(tg_request *req, json_t *body, char org[TG_NAME_MAX + 1],
                         char name[TG_NAME_MAX + 1])
{
    const char *type = json_string_value(json_object_get(body, "type"));
    if (type != NULL && strcmp(type, "model") != 0) {
        hub_error(req, "RepoNotFound", "repo_type_not_served",
                  "Repository type '%s' is not served: this server serves models only (repo_type "
                  "\"model\"), no datasets or Spaces",
                  type);
        return false;
    }
    const char *full = json_string_value(json_object_get(body, "name"));
    const char *organization = json_string_value(json_object_get(body, "organization"));
    if (full == NULL) {
        hub_error(req, NULL, "invalid_request", "\"name\" (the repository's name) is required");
        return false;
    }
    const char *slash = strchr(full, '/');
    if (organization == NULL && slash != NULL) { /* "org/name" in name */
        size_t n = (size_t)(slash - full);
        if (n > TG_NAME_MAX)
            n = TG_NAME_MAX;
        memcpy(org, full, n);
        org[n] = '\0';
        full = slash + 1;
    } else if (organization != NULL) {
        snprintf(org, TG_NAME_MAX + 1, "%s", organization);
    } else if (req->token_namespace[0] != '\0') {
        snprintf(org, TG_NAME_MAX + 1, "%s", req->token_namespace);
    } else {
        hub_error(req, NULL, "invalid_name",
                  "a repository needs an organization: this token has no namespace of its own, "
                  "so name the repository org/name");
        return false;
    }
    if (strlen(full) > TG_NAME_MAX || !tg_valid_name_part(full) || !tg_valid_name_part(org)) {
        hub_error(req, NULL, "invalid_name",
                  "a repository name is org/name, each [A-Za-z0-9][A-Za-z0-9._-]{0,63}");
        return false;
    }
    snprintf(name, TG_NAME_MAX + 1, "%s", full);
    return true;
}

void tg_route_hub_repo_create(tg_request *req)
{
    json_t *body = tg_json_body(req);
    if (body == NULL)
        return;
    char org[TG_NAME_MAX + 1], name[TG_NAME_MAX + 1];
    if (!repo_of_body(req, body, org, name) || !tg_auth_namespace(req, TG_SCOPE_WRITE, org))
        goto out;
    json_t *files = json_object_get(body, "files");
    if (json_is_array(files) && json_array_size(files) > 0) {
        hub_error(req, NULL, "invalid_request",
                  "files at creation are not taken: create the repository, then commit them");
        goto out;
    }
    tg_model model;
    tg_cat_status status = tg_catalog_model_create(req->server->catalog, org, name, "", &model);
    if (status == TG_CAT_EXISTS) {
        /* the Hub's answer: huggingface_hub's create_repo(exist_ok=True) reads "url" */
        json_t *answer = repo_json(req, org, name);
        json_object_set_new(answer, "error", json_string("You already created this model repo"));
        const char *const headers[] = {"X-Error-Code", "RepoExists", "X-Error-Message",
                                       "You already created this model repo", NULL};
        tg_respond_json_headers(req, 409, answer, headers);
    } else if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
    } else {
        tg_log(TG_LOG_INFO, "created %s/%s (Hub create_repo)", org, name);
        tg_respond_json(req, 200, repo_json(req, org, name));
    }
out:
    json_decref(body);
}

/* ---- DELETE /api/repos/delete ---- */

void tg_route_hub_repo_delete(tg_request *req)
{
    json_t *body = tg_json_body(req);
    if (body == NULL)
        return;
    char org[TG_NAME_MAX + 1], name[TG_NAME_MAX + 1];
    tg_model model;
    if (repo_of_body(req, body, org, name) && tg_auth_namespace(req, TG_SCOPE_ADMIN, org) &&
        hub_lookup_repo(req, org, name, &model)) {
        tg_cat_status status = tg_model_remove(req->server, &model);
        if (status == TG_CAT_OK || status == TG_CAT_NOT_FOUND)
            tg_respond_json(req, 200, json_object());
        else
            tg_respond_catalog_failure(req, status);
    }
    json_decref(body);
}

/* ---- POST /api/repos/move ---- */

void tg_route_hub_repo_move(tg_request *req)
{
    /* the Hub's body: {fromRepo, toRepo, type}; the token must cover the source */
    json_t *body = tg_json_body(req);
    if (body == NULL)
        return;
    const char *from = json_string_value(json_object_get(body, "fromRepo"));
    char org[TG_NAME_MAX + 1] = "";
    const char *slash = from ? strchr(from, '/') : NULL;
    if (slash != NULL && (size_t)(slash - from) <= TG_NAME_MAX)
        snprintf(org, sizeof org, "%.*s", (int)(slash - from), from);
    bool allowed = tg_auth_namespace(req, TG_SCOPE_WRITE, org[0] ? org : NULL);
    json_decref(body);
    if (!allowed)
        return;
    hub_error(req, NULL, "invalid_request",
              "moving or renaming a repository is not supported by this server: its commit ids, "
              "aliases and jobs belong to the model's name");
}

/* ---- POST /api/validate-yaml ---- */

void tg_route_hub_validate_yaml_start(tg_request *req)
{
    gather_start(req);
}

/* huggingface_hub asks before it uploads a README.md: {content, repoType}. The card is
 * a text file to the gate, and its front matter is read leniently (hf_card.c): no
 * errors and no warnings, once the body is a JSON object with "content". */
void tg_route_hub_validate_yaml(tg_request *req)
{
    if (req->state == NULL)
        return;
    json_t *body = gather_json(req, req->state);
    if (body == NULL)
        return;
    if (!json_is_string(json_object_get(body, "content")))
        hub_error(req, NULL, "invalid_request", "\"content\" (the README.md text) is required");
    else
        tg_respond_json(req, 200, json_pack("{s:[], s:[]}", "errors", "warnings"));
    json_decref(body);
}

/* ---- POST /api/models/{org}/{name}/preupload/{rev} ---- */

void tg_route_hub_preupload_start(tg_request *req)
{
    gather_start(req);
}

void tg_route_hub_preupload(tg_request *req)
{
    tg_model model;
    if (req->state == NULL ||
        !hub_lookup_repo(req, tg_param(req, "org"), tg_param(req, "name"), &model))
        return;
    json_t *body = gather_json(req, req->state);
    if (body == NULL)
        return;
    json_t *files = json_object_get(body, "files");
    json_t *answer = json_array();
    if (!json_is_array(files)) {
        hub_error(req, NULL, "invalid_request", "\"files\" (an array) is required");
        goto out;
    }
    size_t i;
    json_t *entry;
    json_array_foreach(files, i, entry)
    {
        const char *path = json_string_value(json_object_get(entry, "path"));
        json_t *size = json_object_get(entry, "size");
        const char *sample = json_string_value(json_object_get(entry, "sample"));
        if (path == NULL || !json_is_integer(size) || json_integer_value(size) < 0) {
            hub_error(req, NULL, "invalid_request",
                      "each of \"files\" needs \"path\" and \"size\"");
            goto out;
        }
        uint8_t bytes[1024];
        ssize_t sample_len = 0;
        if (sample != NULL && strlen(sample) <= 4 * 256 * 1)
            sample_len = tg_hub_base64_decode(sample, strlen(sample), bytes);
        if (sample_len < 0)
            sample_len = 0;
        bool lfs =
            tg_hub_upload_lfs(path, (uint64_t)json_integer_value(size), bytes, (size_t)sample_len);
        json_array_append_new(answer, json_pack("{s:s, s:s, s:b}", "path", path, "uploadMode",
                                                lfs ? "lfs" : "regular", "shouldIgnore", 0));
    }
    tg_respond_json(req, 200, json_pack("{s:O}", "files", answer));
out:
    json_decref(answer);
    json_decref(body);
}

/* ---- POST /{org}/{name}.git/info/lfs/objects/batch ---- */

/* "{name}.git" -> name; false when the segment is no repository. */
static bool strip_git(const char *segment, char name[TG_NAME_MAX + 1])
{
    size_t len = segment ? strlen(segment) : 0;
    if (len <= 4 || len - 4 > TG_NAME_MAX || strcmp(segment + len - 4, ".git") != 0)
        return false;
    memcpy(name, segment, len - 4);
    name[len - 4] = '\0';
    return tg_valid_name_part(name);
}

/* Whether the model's newest published version holds content sha256 of size. */
typedef struct held_search {
    const char *sha256;
    uint64_t size;
    bool found;
} held_search;

static void held_visit(void *ctx, const tg_file_record *file)
{
    held_search *search = ctx;
    if (strcmp(file->sha256, search->sha256) == 0 && file->size == search->size)
        search->found = true;
}

static bool model_holds(tg_catalog *catalog, int64_t model_id, const char *sha256, uint64_t size)
{
    tg_version head;
    if (tg_catalog_version_latest_published(catalog, model_id, &head) != TG_CAT_OK)
        return false;
    held_search search = {.sha256 = sha256, .size = size};
    if (tg_catalog_file_list(catalog, head.id, NULL, 0, held_visit, &search) != TG_CAT_OK)
        return false;
    return search.found;
}

void tg_route_hub_lfs_batch_start(tg_request *req)
{
    gather_start(req);
}

void tg_route_hub_lfs_batch(tg_request *req)
{
    char name[TG_NAME_MAX + 1];
    const char *org = tg_param(req, "org");
    tg_model model;
    if (req->state == NULL)
        return;
    if (!strip_git(tg_param(req, "name"), name)) {
        hub_repo_not_found(req, org, tg_param(req, "name"));
        return;
    }
    if (!hub_lookup_repo(req, org, name, &model))
        return;
    json_t *body = gather_json(req, req->state);
    if (body == NULL)
        return;
    const char *operation = json_string_value(json_object_get(body, "operation"));
    json_t *objects = json_object_get(body, "objects");
    json_t *answer = json_array();
    if (operation == NULL || strcmp(operation, "upload") != 0) {
        hub_error(req, NULL, "invalid_request",
                  "only the upload operation is served here; downloads go through /resolve/");
        goto out;
    }
    if (!json_is_array(objects) || json_array_size(objects) > 1000) {
        hub_error(req, NULL, "invalid_request",
                  "\"objects\" (an array of at most 1000) is required");
        goto out;
    }
    pending_sweep(req->server);
    /* the token that asks is named in each href (recorded with the pending object) */
    int64_t token_id = 0;
    char token_hash[65];
    if (tg_auth_token_hash(req, token_hash) == 1 &&
        tg_catalog_token_id(req->server->catalog, token_hash, &token_id) != TG_CAT_OK)
        token_id = 0;
    char origin[512];
    tg_request_origin(req, origin, sizeof origin);
    long long expires = (long long)time(NULL) + HUB_HREF_SECONDS;
    char expires_at[TG_TIME_LEN];
    time_t expires_t = (time_t)expires;
    struct tm tm;
    gmtime_r(&expires_t, &tm);
    strftime(expires_at, sizeof expires_at, "%Y-%m-%dT%H:%M:%SZ", &tm);
    size_t i;
    json_t *object;
    json_array_foreach(objects, i, object)
    {
        const char *oid = json_string_value(json_object_get(object, "oid"));
        json_t *size_value = json_object_get(object, "size");
        json_int_t size = json_is_integer(size_value) ? json_integer_value(size_value) : -1;
        json_t *item = json_pack("{s:s, s:I, s:b}", "oid", oid ? oid : "", "size",
                                 size < 0 ? (json_int_t)0 : size, "authenticated", 1);
        if (oid == NULL || !tg_is_sha256_hex(oid) || size < 0) {
            json_object_set_new(item, "error",
                                json_pack("{s:i, s:s}", "code", 422, "message",
                                          "an object is {oid: 64 lowercase hex digits of "
                                          "its SHA-256, size: its byte count}"));
        } else if ((uint64_t)size > req->server->config.max_body) {
            json_object_set_new(item, "error",
                                json_pack("{s:i, s:s}", "code", 413, "message",
                                          "the object is larger than the server takes "
                                          "(--max-body)"));
        } else if (pending_stored(req->server, org, oid, (uint64_t)size) ||
                   model_holds(req->server->catalog, model.id, oid, (uint64_t)size)) {
            /* held for this namespace already: no upload (no action) */
        } else {
            char sig[65];
            if (!href_sign(req->server->catalog, org, name, oid, (uint64_t)size, expires, token_id,
                           sig)) {
                json_decref(item);
                tg_respond_internal(req, "the upload link could not be signed");
                goto out;
            }
            char href[1400], verify[1024];
            snprintf(href, sizeof href,
                     "%s/api/tensorgate/lfs/%s/%s/%s?size=%lld&expires=%lld&tid=%lld&sig=%s",
                     origin, org, name, oid, (long long)size, expires, (long long)token_id, sig);
            snprintf(verify, sizeof verify, "%s/api/tensorgate/lfs-verify/%s/%s", origin, org,
                     name);
            json_object_set_new(item, "actions",
                                json_pack("{s:{s:s, s:s}, s:{s:s, s:s}}", "upload", "href", href,
                                          "expires_at", expires_at, "verify", "href", verify,
                                          "expires_at", expires_at));
        }
        json_array_append_new(answer, item);
    }
    json_t *reply =
        json_pack("{s:s, s:O, s:s}", "transfer", "basic", "objects", answer, "hash_algo", "sha256");
    char *text = reply ? json_dumps(reply, JSON_COMPACT) : NULL;
    json_decref(reply);
    if (text == NULL) {
        tg_respond_internal(req, "out of memory");
        goto out;
    }
    struct MHD_Response *response =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (response == NULL) {
        free(text);
        tg_respond_internal(req, "out of memory");
        goto out;
    }
    MHD_add_response_header(response, "Content-Type", "application/vnd.git-lfs+json");
    tg_respond(req, 200, response, true);
out:
    json_decref(answer);
    json_decref(body);
}

/* ---- PUT /api/tensorgate/lfs/{org}/{name}/{oid} (the signed upload href) ---- */

typedef struct lfs_put {
    tg_body_ingest body;
    char org[TG_NAME_MAX + 1], name[TG_NAME_MAX + 1], oid[65];
    uint64_t size;
    int64_t token_id; /* of the batch request that asked for the href; 0: none */
    char owner[TG_TALLY_KEY_MAX];
    bool counted;
    bool recorded;
    char reservation[48]; /* the quota reservation held while the body streams; "" none */
} lfs_put;

/* A gate refusal into /v1/rejections (as an upload's), version -1: a Hub write has
 * no version before its commit. */
static void record_refusal(tg_request *req, const char *org, const char *name, const char *path,
                           const st_verdict *verdict, uint64_t seen)
{
    if (verdict->error.reason == ST_OUT_OF_MEMORY)
        return; /* the server's failure, never the file's */
    tg_rejection r;
    memset(&r, 0, sizeof r);
    tg_time_now(r.time);
    snprintf(r.model, sizeof r.model, "%s/%s", org, name);
    r.version = -1;
    snprintf(r.path, sizeof r.path, "%s", path);
    snprintf(r.reason, sizeof r.reason, "%s", st_reason_name(verdict->error.reason));
    snprintf(r.format, sizeof r.format, "%s", st_format_name(verdict->format));
    snprintf(r.detail, sizeof r.detail, "%s", verdict->error.detail);
    snprintf(r.client, sizeof r.client, "%s", req->client);
    r.size = seen;
    st_verdict_findings_text(verdict, r.findings, sizeof r.findings);
    if (tg_catalog_rejection_add(req->server->catalog, &r) != TG_CAT_OK)
        tg_log(TG_LOG_ERROR, "cannot record the rejection of %s %s", r.model, r.path);
    tg_metrics_rejection(req->server, r.reason);
    tg_log(TG_LOG_INFO, "refused %s %s from %s: %s (%s)", r.model, r.path, r.client, r.reason,
           r.detail);
}

static void lfs_record_rejection(tg_request *req, lfs_put *put)
{
    if (put->recorded || put->body.ingest.gate == NULL)
        return;
    put->recorded = true;
    st_verdict verdict;
    st_gate_verdict(put->body.ingest.gate, &verdict);
    char path[TG_PATH_MAX + 1];
    snprintf(path, sizeof path, "lfs:%s", put->oid);
    record_refusal(req, put->org, put->name, path, &verdict,
                   st_gate_bytes_seen(put->body.ingest.gate));
}

void tg_route_hub_lfs_put_start(tg_request *req)
{
    lfs_put *put = calloc(1, sizeof *put);
    if (put == NULL) {
        tg_respond_internal(req, "out of memory");
        return;
    }
    req->state = put;
    const char *org = tg_param(req, "org"), *name = tg_param(req, "name");
    const char *oid = tg_param(req, "id");
    const char *size_text = tg_query(req, "size"), *expires_text = tg_query(req, "expires");
    const char *sig = tg_query(req, "sig"), *tid_text = tg_query(req, "tid");
    uint64_t size = 0, expires = 0, tid = 0;
    char want[65];
    if (org == NULL || name == NULL || oid == NULL || size_text == NULL || expires_text == NULL ||
        sig == NULL || tid_text == NULL || !tg_valid_name_part(org) || !tg_valid_name_part(name) ||
        !tg_is_sha256_hex(oid) || !tg_parse_u64(size_text, &size) ||
        !tg_parse_u64(expires_text, &expires) || expires > INT64_MAX ||
        !tg_parse_u64(tid_text, &tid) || tid > INT64_MAX ||
        !href_sign(req->server->catalog, org, name, oid, size, (long long)expires, (int64_t)tid,
                   want) ||
        strcmp(want, sig) != 0) {
        hub_error(req, NULL, "unauthorized",
                  "this upload link is not one this server signed (ask the LFS batch API again)");
        return;
    }
    if ((long long)expires < (long long)time(NULL)) {
        hub_error(req, NULL, "unauthorized",
                  "this upload link has expired (ask the LFS batch API again)");
        return;
    }
    snprintf(put->org, sizeof put->org, "%s", org);
    snprintf(put->name, sizeof put->name, "%s", name);
    snprintf(put->oid, sizeof put->oid, "%s", oid);
    put->size = size;
    put->token_id = (int64_t)tid;
    tg_model model;
    if (!hub_lookup_repo(req, org, name, &model))
        return;
    uint64_t declared = tg_request_body_size(req);
    if (declared != ST_FILE_SIZE_UNKNOWN && declared != size) {
        hub_error(req, NULL, "body_length_mismatch",
                  "the body declares %llu bytes; the LFS object %s has %llu",
                  (unsigned long long)declared, oid, (unsigned long long)size);
        return;
    }
    /* the namespace's storage quota (docs/MANUAL.md, "Storage quotas"): an LFS object's
     * size is known, so one that does not fit is refused before its body is read, and
     * its size is reserved against the quota in the catalog while the body streams (two
     * uploads at once, on any replicas, cannot both take the last room) */
    uint64_t quota = 0, usage = 0;
    tg_cat_status reserved = tg_quota_reserve(req->server, org, size, &quota, &usage,
                                              put->reservation, sizeof put->reservation);
    if (reserved == TG_CAT_CONFLICT) {
        hub_error(req, NULL, "storage_quota_exceeded",
                  "namespace %s holds %llu bytes of its quota of %llu (uploads in progress "
                  "reserve more); the LFS object's %llu bytes do not fit",
                  org, (unsigned long long)usage, (unsigned long long)quota,
                  (unsigned long long)size);
        return;
    }
    if (reserved != TG_CAT_OK) {
        tg_respond_catalog_failure(req, reserved);
        return;
    }
    tg_namespace_settings settings = {0};
    tg_cat_status settings_status = tg_catalog_namespace_get(req->server->catalog, org, &settings);
    if (settings_status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, settings_status);
        return;
    }
    tg_request_owner(req, put->owner, sizeof put->owner);
    tg_tally_result taken = tg_tally_take(tg_uploads_tally(), put->owner, 1,
                                          req->server->config.max_uploads_per_namespace,
                                          req->server->config.max_uploads);
    if (taken != TG_TALLY_OK) {
        tg_respond_quota(req, taken, 5, "%s",
                         "the limit of uploads in progress is reached (--max-uploads, "
                         "--max-uploads-per-namespace); retry when one ends");
        return;
    }
    put->counted = true;
    /* The name is not known before the commit: content decides (a sidecar's gate),
     * and the commit checks the file's name against what was found. */
    if (tg_body_ingest_begin(&put->body, req, ST_GATE_SIDECAR, NULL, size, true,
                             settings.allow_code) != 0)
        tg_respond_internal(req, "cannot start the upload (temp file or memory)");
}

void tg_route_hub_lfs_put_feed(tg_request *req, const uint8_t *data, size_t len)
{
    lfs_put *put = req->state;
    if (put == NULL || put->body.ingest.gate == NULL)
        return;
    tg_ingest_state before = put->body.ingest.state;
    tg_body_ingest_feed(&put->body, req, data, len);
    if (before == TG_INGEST_OPEN && put->body.ingest.state == TG_INGEST_REFUSED &&
        !put->body.ingest.verdict_pending)
        lfs_record_rejection(req, put);
}

typedef struct lfs_row {
    tg_catalog *catalog;
    const lfs_put *put;
    bool matched;
    tg_cat_status status;
} lfs_row;

/* Under the shared blobs lock, with the blob durable: the pending object's row. */
static void record_pending(void *ctx, const tg_file_record *file, const char *stats)
{
    lfs_row *row = ctx;
    row->matched = strcmp(file->sha256, row->put->oid) == 0;
    if (!row->matched)
        return;
    char model[2 * TG_NAME_MAX + 2];
    snprintf(model, sizeof model, "%s/%s", row->put->org, row->put->name);
    row->status = tg_catalog_hub_pending_put(row->catalog, row->put->org, model, row->put->token_id,
                                             file, stats);
}

void tg_route_hub_lfs_put(tg_request *req)
{
    lfs_put *put = req->state;
    if (put == NULL || put->body.ingest.gate == NULL) {
        tg_respond_internal(req, "the upload was not started");
        return;
    }
    tg_ingest *ingest = &put->body.ingest;
    tg_ingest_finish(ingest);
    st_verdict verdict;
    st_gate_verdict(ingest->gate, &verdict);
    switch (ingest->state) {
    case TG_INGEST_OPEN:
        break;
    case TG_INGEST_REFUSED:
        lfs_record_rejection(req, put);
        tg_respond_gate_problem(req, &verdict);
        return;
    case TG_INGEST_LENGTH_MISMATCH:
        hub_error(req, NULL, "body_length_mismatch", "received %llu bytes, the object has %llu",
                  (unsigned long long)tg_ingest_received(ingest), (unsigned long long)put->size);
        return;
    case TG_INGEST_TOO_LARGE:
        hub_error(req, NULL, "payload_too_large", "the body is larger than %llu bytes",
                  (unsigned long long)req->server->config.max_body);
        return;
    case TG_INGEST_OVER_BUDGET:
        tg_body_ingest_respond_over_budget(&put->body, req);
        return;
    case TG_INGEST_NO_SPACE:
        hub_error(req, NULL, "insufficient_storage",
                  "the server's disk is full; nothing was stored");
        return;
    default:
        tg_respond_internal(req, "the upload could not be written");
        return;
    }
    tg_file_record file;
    lfs_row row = {.catalog = req->server->catalog, .put = put, .status = TG_CAT_ERROR};
    if (tg_ingest_commit(ingest, put->oid, &file, record_pending, &row) != 0) {
        tg_respond_internal(req, "the object could not be stored");
        return;
    }
    if (!row.matched || row.status != TG_CAT_OK) {
        (void)tg_blob_reclaim(req->server->blobs, req->server->catalog, file.sha256, false);
        if (!row.matched)
            hub_error(req, NULL, "digest_mismatch",
                      "the bytes' SHA-256 is %s, not the object's %s; nothing was kept",
                      file.sha256, put->oid);
        else
            tg_respond_catalog_failure(req, row.status);
        return;
    }
    tg_log(TG_LOG_INFO, "LFS object %s (%llu bytes, %s) of %s/%s is pending", file.sha256,
           (unsigned long long)file.size, file.kind, put->org, put->name);
    tg_respond_empty(req, 200);
}

void tg_route_hub_lfs_put_cleanup(tg_request *req)
{
    lfs_put *put = req->state;
    if (put == NULL)
        return;
    if (put->body.ingest.gate != NULL && put->body.ingest.state == TG_INGEST_REFUSED)
        lfs_record_rejection(req, put);
    tg_ingest_abort(&put->body.ingest);
    if (put->counted)
        tg_tally_give(tg_uploads_tally(), put->owner, 1);
    tg_quota_release(req->server, put->reservation);
    free(put);
    req->state = NULL;
}

/* ---- POST /api/tensorgate/lfs-verify/{org}/{name} ---- */

void tg_route_hub_lfs_verify(tg_request *req)
{
    tg_model model;
    const char *org = tg_param(req, "org");
    if (!hub_lookup_repo(req, org, tg_param(req, "name"), &model))
        return;
    json_t *body = tg_json_body(req);
    if (body == NULL)
        return;
    const char *oid = json_string_value(json_object_get(body, "oid"));
    json_t *size = json_object_get(body, "size");
    if (oid == NULL || !json_is_integer(size) || json_integer_value(size) < 0) {
        hub_error(req, NULL, "invalid_request", "{oid, size} is required");
    } else if (pending_stored(req->server, org, oid, (uint64_t)json_integer_value(size)) ||
               model_holds(req->server->catalog, model.id, oid,
                           (uint64_t)json_integer_value(size))) {
        tg_respond_json(req, 200, json_pack("{s:s, s:O}", "oid", oid, "size", size));
    } else {
        hub_error(req, "EntryNotFound", "file_not_found",
                  "the LFS object %s of %lld bytes was not uploaded (or was refused)", oid,
                  (long long)json_integer_value(size));
    }
    json_decref(body);
}

/* ---- POST /api/models/{org}/{name}/commit/{rev} (NDJSON) ---- */

typedef enum op_kind { OP_LFS, OP_DELETE_FILE, OP_DELETE_FOLDER } op_kind;

typedef struct commit_op {
    op_kind kind;
    char path[TG_PATH_MAX + 1];
    char oid[65];
    uint64_t size;
} commit_op;

typedef struct hub_commit {
    tg_model model;
    char token_hash[65];
    char branch[TG_NAME_MAX + 1]; /* a Hub branch the commit goes to; "" for main */
    bool allow_code;              /* the namespace's code policy, read at the start */
    char *line;
    size_t line_len, line_cap;
    bool line_too_long;
    bool saw_header;
    char summary[512];
    char parent[65];
    /* the first refusal: answered at the end of the body */
    bool failed;
    unsigned fail_status_is_gate; /* 1: verdict holds the gate's refusal */
    st_verdict verdict;
    char fail_reason[48], fail_code[32], fail_detail[512];
    /* inline files, stored as their lines came (stats kept) */
    file_set inline_files;
    commit_op *ops;
    size_t op_count, op_cap;
    tg_body_ingest body; /* the ingest of the current inline file */
} hub_commit;

static void __attribute__((format(printf, 4, 5)))
commit_fail(hub_commit *c, const char *code, const char *reason, const char *fmt, ...)
{
    if (c->failed)
        return;
    c->failed = true;
    snprintf(c->fail_reason, sizeof c->fail_reason, "%s", reason);
    snprintf(c->fail_code, sizeof c->fail_code, "%s", code ? code : reason);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->fail_detail, sizeof c->fail_detail, fmt, ap);
    va_end(ap);
}

static bool path_ok(hub_commit *c, const char *path)
{
    const char *why = NULL;
    if (path == NULL || !tg_valid_file_path(path, &why)) {
        commit_fail(c, NULL, "invalid_path", "%s", why ? why : "a file path is required");
        return false;
    }
    const char *last = strrchr(path, '/');
    if (strcmp(last ? last + 1 : path, "header") == 0) {
        commit_fail(c, NULL, "invalid_path",
                    "a file path may not end in the segment 'header' (reserved for the header "
                    "route)");
        return false;
    }
    return true;
}

static bool add_op(hub_commit *c, const commit_op *op)
{
    if (c->op_count >= HUB_COMMIT_OPS_MAX) {
        commit_fail(c, NULL, "invalid_request", "a commit holds at most %d operations",
                    HUB_COMMIT_OPS_MAX);
        return false;
    }
    if (c->op_count == c->op_cap) {
        size_t cap = c->op_cap ? c->op_cap * 2 : 16;
        commit_op *grown = realloc(c->ops, cap * sizeof *grown);
        if (grown == NULL) {
            commit_fail(c, NULL, "internal", "out of memory");
            return false;
        }
        c->ops = grown;
        c->op_cap = cap;
    }
    c->ops[c->op_count++] = *op;
    return true;
}

typedef struct inline_row {
    hub_commit *c;
    char *stats;
} inline_row;

static void record_inline(void *ctx, const tg_file_record *file, const char *stats)
{
    (void)file;
    inline_row *row = ctx;
    row->stats = strdup(stats ? stats : "[]");
}

/* An inline file: through the gate and the pipeline exactly as a PUT of it. */
static void commit_inline_file(tg_request *req, hub_commit *c, const char *path,
                               const char *content, size_t content_len)
{
    if (!path_ok(c, path))
        return;
    uint8_t *bytes = malloc(content_len / 4 * 3 + 3);
    ssize_t len = bytes ? tg_hub_base64_decode(content, content_len, bytes) : -1;
    if (len < 0) {
        free(bytes);
        commit_fail(c, NULL, "invalid_request", "the content of %s is not base64", path);
        return;
    }
    st_gate_kind kind =
        tg_is_safetensors_path(path) ? ST_GATE_SAFETENSORS : st_gate_sidecar_kind(path);
    tg_body_ingest *body = &c->body;
    memset(body, 0, sizeof *body);
    char name[TG_PATH_MAX + 1];
    snprintf(name, sizeof name, "%s", path);
    if (tg_body_ingest_begin(body, req, kind, name, (uint64_t)len, true, c->allow_code) != 0) {
        free(bytes);
        tg_ingest_abort(&body->ingest);
        commit_fail(c, NULL, "internal", "cannot start the ingest of %s", path);
        return;
    }
    tg_ingest *ingest = &body->ingest;
    if (len > 0)
        tg_ingest_feed(ingest, bytes, (size_t)len);
    free(bytes);
    tg_ingest_finish(ingest);
    if (ingest->state == TG_INGEST_REFUSED) {
        st_gate_verdict(ingest->gate, &c->verdict);
        record_refusal(req, c->model.org, c->model.name, path, &c->verdict,
                       st_gate_bytes_seen(ingest->gate));
        c->fail_status_is_gate = 1;
        commit_fail(c, st_reason_name(c->verdict.error.reason),
                    st_reason_name(c->verdict.error.reason), "%s: %s", path,
                    c->verdict.error.detail);
    } else if (ingest->state == TG_INGEST_TOO_LARGE) {
        commit_fail(c, NULL, "payload_too_large", "%s is larger than --max-body", path);
    } else if (ingest->state != TG_INGEST_OPEN) {
        commit_fail(c, NULL, "internal", "%s could not be stored", path);
    } else {
        tg_file_record file;
        inline_row row = {.c = c};
        if (tg_ingest_commit(ingest, name, &file, record_inline, &row) != 0 || row.stats == NULL) {
            free(row.stats);
            commit_fail(c, NULL, "internal", "%s could not be stored", path);
        } else {
            /* the same path twice: the later wins; the earlier's blob is reclaimed at the end */
            commit_file *earlier = file_set_find(&c->inline_files, file.path);
            if (earlier != NULL && strcmp(earlier->file.sha256, file.sha256) != 0)
                (void)tg_blob_reclaim(req->server->blobs, req->server->catalog,
                                      earlier->file.sha256, false);
            if (!file_set_put(&c->inline_files, &file, row.stats, false)) {
                commit_fail(c, NULL, "internal", "out of memory");
            } else {
                file_set_find(&c->inline_files, file.path)->stored_new = true;
            }
        }
    }
    tg_ingest_abort(ingest);
}

static void commit_line(tg_request *req, hub_commit *c, const char *text, size_t len)
{
    if (c->failed)
        return;
    while (len > 0 && (text[len - 1] == '\r' || text[len - 1] == ' '))
        len--;
    if (len == 0)
        return;
    json_error_t error;
    json_t *line = json_loadb(text, len, JSON_REJECT_DUPLICATES, &error);
    const char *key = json_string_value(json_object_get(line, "key"));
    json_t *value = json_object_get(line, "value");
    if (key == NULL || !json_is_object(value)) {
        commit_fail(c, NULL, "invalid_json",
                    "each line of a commit is {\"key\": ..., \"value\": {...}}");
    } else if (strcmp(key, "header") == 0) {
        const char *summary = json_string_value(json_object_get(value, "summary"));
        const char *parent = json_string_value(json_object_get(value, "parentCommit"));
        snprintf(c->summary, sizeof c->summary, "%s", summary ? summary : "");
        snprintf(c->parent, sizeof c->parent, "%s", parent ? parent : "");
        c->saw_header = true;
    } else if (!c->saw_header) {
        commit_fail(c, NULL, "invalid_request", "the first line of a commit is its header");
    } else if (strcmp(key, "file") == 0) {
        const char *path = json_string_value(json_object_get(value, "path"));
        json_t *content = json_object_get(value, "content");
        const char *encoding = json_string_value(json_object_get(value, "encoding"));
        if (!json_is_string(content) || (encoding != NULL && strcmp(encoding, "base64") != 0))
            commit_fail(c, NULL, "invalid_request",
                        "a file line needs \"content\" in base64 (encoding \"base64\")");
        else
            commit_inline_file(req, c, path, json_string_value(content),
                               json_string_length(content));
    } else if (strcmp(key, "lfsFile") == 0) {
        const char *path = json_string_value(json_object_get(value, "path"));
        const char *oid = json_string_value(json_object_get(value, "oid"));
        const char *algo = json_string_value(json_object_get(value, "algo"));
        json_t *size = json_object_get(value, "size");
        commit_op op = {.kind = OP_LFS};
        if (!path_ok(c, path)) {
            /* answered */
        } else if (oid == NULL || !tg_is_sha256_hex(oid) || !json_is_integer(size) ||
                   json_integer_value(size) < 0 || (algo != NULL && strcmp(algo, "sha256") != 0)) {
            commit_fail(c, NULL, "invalid_request",
                        "an lfsFile line needs path, algo \"sha256\", oid (64 hex) and size");
        } else {
            snprintf(op.path, sizeof op.path, "%s", path);
            snprintf(op.oid, sizeof op.oid, "%s", oid);
            op.size = (uint64_t)json_integer_value(size);
            add_op(c, &op);
        }
    } else if (strcmp(key, "deletedFile") == 0 || strcmp(key, "deletedFolder") == 0) {
        const char *path = json_string_value(json_object_get(value, "path"));
        commit_op op = {.kind =
                            strcmp(key, "deletedFile") == 0 ? OP_DELETE_FILE : OP_DELETE_FOLDER};
        if (path == NULL || path[0] == '\0' || strlen(path) > TG_PATH_MAX) {
            commit_fail(c, NULL, "invalid_path", "a deletion needs the path it deletes");
        } else {
            snprintf(op.path, sizeof op.path, "%s", path);
            size_t n = strlen(op.path);
            if (n > 0 && op.path[n - 1] == '/') /* "folder/" names a folder (deletedFile too) */
                op.kind = OP_DELETE_FOLDER;
            while (n > 0 && op.path[n - 1] == '/')
                op.path[--n] = '\0';
            add_op(c, &op);
        }
    } else {
        commit_fail(c, NULL, "invalid_request",
                    "a commit line of key '%s' is not served (file, lfsFile, deletedFile and "
                    "deletedFolder are)",
                    key);
    }
    json_decref(line);
}

void tg_route_hub_commit_start(tg_request *req)
{
    hub_commit *c = calloc(1, sizeof *c);
    if (c == NULL) {
        tg_respond_internal(req, "out of memory");
        return;
    }
    req->state = c;
    const char *rev = tg_param(req, "rev");
    if (!hub_lookup_repo(req, tg_param(req, "org"), tg_param(req, "name"), &c->model))
        return;
    if (tg_query(req, "create_pr") != NULL && strcmp(tg_query(req, "create_pr"), "0") != 0 &&
        strcmp(tg_query(req, "create_pr"), "false") != 0) {
        hub_error(req, NULL, "invalid_request", "pull requests are not served by this server");
        return;
    }
    if (!is_main(rev)) {
        /* a Hub branch (schema 17) moves by a commit; a tag, a /v1 alias, a number or a
         * commit id never does */
        int64_t number = 0;
        char kind[8] = "";
        tg_cat_status status = TG_CAT_NOT_FOUND;
        if (rev != NULL && tg_valid_alias(rev))
            status = tg_catalog_alias_kind(req->server->catalog, c->model.id, rev, &number, kind);
        if (tg_cat_failed(status)) {
            tg_respond_catalog_failure(req, status);
            return;
        }
        if (status == TG_CAT_OK && strcmp(kind, "branch") == 0) {
            snprintf(c->branch, sizeof c->branch, "%s", rev);
        } else {
            tg_version version;
            status = hub_resolve(req->server->catalog, c->model.id, rev, &version);
            if (status == TG_CAT_NOT_FOUND)
                hub_error(req, "RevisionNotFound", "version_not_found",
                          "Invalid rev id: %s/%s has no branch '%s'", c->model.org, c->model.name,
                          rev ? rev : "");
            else if (tg_cat_failed(status))
                tg_respond_catalog_failure(req, status);
            else
                hub_error(req, NULL, "not_a_branch",
                          "'%s' is not a branch of %s/%s (a tag, an alias, a version number or a "
                          "commit id never moves by a commit): commit to main or to a branch",
                          rev ? rev : "", c->model.org, c->model.name);
            return;
        }
    }
    tg_namespace_settings settings = {0};
    tg_cat_status settings_status =
        tg_catalog_namespace_get(req->server->catalog, c->model.org, &settings);
    if (settings_status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, settings_status);
        return;
    }
    c->allow_code = settings.allow_code;
    if (tg_auth_token_hash(req, c->token_hash) < 0)
        tg_respond_internal(req, "the token's SHA-256 failed");
}

void tg_route_hub_commit_feed(tg_request *req, const uint8_t *data, size_t len)
{
    hub_commit *c = req->state;
    if (c == NULL || req->responded)
        return;
    for (size_t i = 0; i < len; i++) {
        if (data[i] == '\n') {
            if (!c->line_too_long)
                commit_line(req, c, c->line ? c->line : "", c->line_len);
            c->line_len = 0;
            c->line_too_long = false;
            continue;
        }
        if (c->failed || c->line_too_long)
            continue;
        if (c->line_len + 1 >= HUB_LINE_MAX) {
            c->line_too_long = true;
            commit_fail(c, NULL, "payload_too_large",
                        "a line of the commit is longer than %d bytes: send large files through "
                        "LFS (preupload says which)",
                        HUB_LINE_MAX);
            continue;
        }
        if (c->line_len + 1 >= c->line_cap) {
            size_t cap = c->line_cap ? c->line_cap * 2 : 65536;
            char *grown = realloc(c->line, cap);
            if (grown == NULL) {
                commit_fail(c, NULL, "internal", "out of memory");
                continue;
            }
            c->line = grown;
            c->line_cap = cap;
        }
        c->line[c->line_len++] = (char)data[i];
    }
}

/* Re-runs the gate over a stored blob with the kind and name of the path it is
 * committed under (an LFS object was judged by content only), code admitted when
 * allow_code. 0 accepted (verdict set: code.reason names admitted code), 1 refused
 * (verdict set), -1 failure. */
static int regate_blob(tg_request *req, const tg_file_record *file, const char *path,
                       bool allow_code, st_verdict *verdict)
{
    st_gate_kind kind =
        tg_is_safetensors_path(path) ? ST_GATE_SAFETENSORS : st_gate_sidecar_kind(path);
    tg_body_ingest body;
    memset(&body, 0, sizeof body);
    if (tg_body_ingest_begin(&body, req, kind, path, file->size, false, allow_code) != 0) {
        tg_ingest_abort(&body.ingest);
        return -1;
    }
    tg_blob_check check;
    tg_blob_reader *blob = tg_blob_open(req->server->blobs, file->sha256, file->size, &check);
    int result = -1;
    uint8_t *buf = malloc(1 << 20);
    if (blob != NULL && buf != NULL) {
        uint64_t off = 0;
        result = 0;
        while (off < file->size && body.ingest.state == TG_INGEST_OPEN) {
            size_t n = file->size - off > (1 << 20) ? (1 << 20) : (size_t)(file->size - off);
            if (tg_blob_read_at(blob, buf, n, off) != 0) {
                result = -1;
                break;
            }
            tg_ingest_feed(&body.ingest, buf, n);
            off += n;
        }
        if (result == 0) {
            tg_ingest_finish(&body.ingest);
            st_gate_verdict(body.ingest.gate, verdict); /* code.reason: admitted code */
            if (body.ingest.state == TG_INGEST_REFUSED)
                result = 1;
            else if (body.ingest.state != TG_INGEST_OPEN)
                result = -1;
        }
    }
    free(buf);
    tg_blob_close(blob);
    tg_ingest_abort(&body.ingest);
    return result;
}

/* Whether an LFS object judged by content (kind) needs its path's own gate. */
static bool needs_regate(const char *path, const char *kind)
{
    if (st_code_reason_by_name(path) != ST_OK)
        return true;
    if (tg_is_safetensors_path(path))
        return strcmp(kind, "safetensors") != 0;
    if (st_gate_sidecar_kind(path) == ST_GATE_SIDECAR_JSON)
        return strcmp(kind, "json") != 0;
    return false;
}

typedef struct base_stats_ctx {
    file_set *set;
    bool failed;
} base_stats_ctx;

static void respond_commit_failure(tg_request *req, hub_commit *c)
{
    if (c->fail_status_is_gate) {
        /* the gate's refusal, its reason and sentence for the Hub's clients */
        size_t n = strnlen(c->fail_detail, sizeof c->verdict.error.detail - 1);
        memcpy(c->verdict.error.detail, c->fail_detail, n);
        c->verdict.error.detail[n] = '\0';
        tg_respond_gate_problem(req, &c->verdict);
    } else if (strcmp(c->fail_reason, "internal") == 0) {
        tg_respond_internal(req, "%s", c->fail_detail);
    } else {
        hub_error(req, c->fail_code, c->fail_reason, "%s", c->fail_detail);
    }
}

/* Gives back the blobs inline files stored that no row uses (a refused commit). */
static void reclaim_inline(tg_request *req, hub_commit *c)
{
    for (size_t i = 0; i < c->inline_files.count; i++)
        if (c->inline_files.items[i].stored_new)
            (void)tg_blob_reclaim(req->server->blobs, req->server->catalog,
                                  c->inline_files.items[i].file.sha256, false);
}

/* Builds the new file list: main's head, then the operations. False after failing c. */
static bool build_files(tg_request *req, hub_commit *c, const tg_version *base, bool has_base,
                        file_set *out)
{
    tg_catalog *catalog = req->server->catalog;
    if (has_base) {
        tg_file_records records = {0};
        tg_cat_status status =
            tg_catalog_file_list(catalog, base->id, NULL, 0, tg_file_records_collect, &records);
        if (status != TG_CAT_OK || records.failed) {
            free(records.items);
            commit_fail(c, NULL, "internal", "the files of main could not be listed");
            return false;
        }
        for (size_t i = 0; i < records.count; i++) {
            char *stats = NULL;
            if (tg_catalog_file_stats(catalog, base->id, records.items[i].path, &stats) !=
                    TG_CAT_OK ||
                !file_set_put(out, &records.items[i], stats, true)) {
                free(records.items);
                commit_fail(c, NULL, "internal", "the files of main could not be read");
                return false;
            }
        }
        free(records.items);
    }
    /* deletions first, then additions: the Hub applies a commit's operations so */
    for (size_t i = 0; i < c->op_count; i++) {
        commit_op *op = &c->ops[i];
        if (op->kind == OP_DELETE_FILE) {
            bool found = false;
            for (size_t j = 0; j < out->count; j++)
                if (strcmp(out->items[j].file.path, op->path) == 0) {
                    file_set_remove_at(out, j);
                    found = true;
                    break;
                }
            if (!found) {
                commit_fail(c, "EntryNotFound", "file_not_found",
                            "Entry not found: %s/%s has no file %s on main", c->model.org,
                            c->model.name, op->path);
                return false;
            }
        } else if (op->kind == OP_DELETE_FOLDER) {
            size_t n = strlen(op->path), removed = 0;
            for (size_t j = out->count; j-- > 0;) {
                const char *p = out->items[j].file.path;
                if (n == 0 || (strncmp(p, op->path, n) == 0 && p[n] == '/')) {
                    file_set_remove_at(out, j);
                    removed++;
                }
            }
            if (removed == 0) {
                commit_fail(c, "EntryNotFound", "file_not_found",
                            "Entry not found: %s/%s has no folder %s on main", c->model.org,
                            c->model.name, op->path);
                return false;
            }
        }
    }
    for (size_t i = 0; i < c->op_count; i++) {
        commit_op *op = &c->ops[i];
        if (op->kind != OP_LFS)
            continue;
        tg_file_record file;
        char *stats = NULL;
        tg_cat_status pending_status =
            pending_get(req->server, c->model.org, op->oid, op->size, &file, &stats);
        if (tg_cat_failed(pending_status)) {
            commit_fail(c, NULL, "internal", "the pending LFS objects could not be read");
            return false;
        }
        bool found = pending_status == TG_CAT_OK;
        if (!found && has_base) {
            /* content main holds already (the batch answer asked for no upload) */
            for (size_t j = 0; j < out->count && !found; j++)
                if (strcmp(out->items[j].file.sha256, op->oid) == 0 &&
                    out->items[j].file.size == op->size) {
                    file = out->items[j].file;
                    stats = strdup(out->items[j].stats ? out->items[j].stats : "[]");
                    found = stats != NULL;
                }
            if (!found) {
                tg_file_records records = {0};
                if (tg_catalog_file_list(catalog, base->id, NULL, 0, tg_file_records_collect,
                                         &records) == TG_CAT_OK) {
                    for (size_t j = 0; j < records.count && !found; j++)
                        if (strcmp(records.items[j].sha256, op->oid) == 0 &&
                            records.items[j].size == op->size &&
                            tg_catalog_file_stats(catalog, base->id, records.items[j].path,
                                                  &stats) == TG_CAT_OK) {
                            file = records.items[j];
                            found = true;
                        }
                }
                free(records.items);
            }
        }
        uint64_t stored = 0;
        if (found &&
            (tg_blob_stat(req->server->blobs, op->oid, &stored) != 0 || stored != op->size)) {
            free(stats);
            stats = NULL;
            found = false;
        }
        if (!found) {
            commit_fail(c, NULL, "invalid_request",
                        "the LFS object %s of %s (%llu bytes) was not uploaded to this server, "
                        "or was refused, or waited too long: upload it again",
                        op->oid, op->path, (unsigned long long)op->size);
            return false;
        }
        /* code admitted at the upload is admitted only while the policy still allows it:
         * gated again (and refused as code) when it was turned off since */
        if (needs_regate(op->path, file.kind) || (file.code_reason[0] != '\0' && !c->allow_code)) {
            int gated = regate_blob(req, &file, op->path, c->allow_code, &c->verdict);
            if (gated != 0) {
                free(stats);
                if (gated > 0) {
                    record_refusal(req, c->model.org, c->model.name, op->path, &c->verdict,
                                   file.size);
                    c->fail_status_is_gate = 1;
                    commit_fail(c, st_reason_name(c->verdict.error.reason),
                                st_reason_name(c->verdict.error.reason), "%s: %s", op->path,
                                c->verdict.error.detail);
                } else {
                    commit_fail(c, NULL, "internal", "the stored %s could not be read", op->path);
                }
                return false;
            }
            if (c->verdict.code.reason != ST_OK) {
                /* code the namespace's policy admits under this name (schema 10) */
                snprintf(file.kind, sizeof file.kind, "code");
                snprintf(file.code_reason, sizeof file.code_reason, "%s",
                         st_reason_name(c->verdict.code.reason));
            }
        }
        snprintf(file.path, sizeof file.path, "%s", op->path);
        tg_time_now(file.created_at);
        file.source_url[0] = '\0';
        if (!file_set_put(out, &file, stats, false)) {
            commit_fail(c, NULL, "internal", "out of memory");
            return false;
        }
    }
    for (size_t i = 0; i < c->inline_files.count; i++) {
        commit_file *f = &c->inline_files.items[i];
        char *stats = strdup(f->stats ? f->stats : "[]");
        if (stats == NULL || !file_set_put(out, &f->file, stats, false)) {
            commit_fail(c, NULL, "internal", "out of memory");
            return false;
        }
    }
    return true;
}

/* Code the namespace's policy admitted into the published version is recorded as a PUT
 * of it is (docs/DESIGN.md, "The code policy"): a rejections row with outcome
 * admitted_by_policy and the code reason it would have been refused with. */
static void record_code_admissions(tg_request *req, const hub_commit *c, const file_set *files,
                                   const tg_version *published)
{
    int64_t token_id = 0;
    bool token_read = false;
    for (size_t i = 0; i < files->count; i++) {
        const tg_file_record *file = &files->items[i].file;
        if (files->items[i].from_base || file->code_reason[0] == '\0')
            continue;
        if (!token_read && c->token_hash[0] != '\0' &&
            tg_catalog_token_id(req->server->catalog, c->token_hash, &token_id) != TG_CAT_OK)
            token_id = 0;
        token_read = true;
        tg_rejection r;
        memset(&r, 0, sizeof r);
        tg_time_now(r.time);
        snprintf(r.model, sizeof r.model, "%s/%s", c->model.org, c->model.name);
        r.version = published->number;
        snprintf(r.path, sizeof r.path, "%s", file->path);
        snprintf(r.reason, sizeof r.reason, "%s", file->code_reason);
        snprintf(r.format, sizeof r.format, "code");
        snprintf(r.detail, sizeof r.detail,
                 "admitted under the namespace's code policy by a Hub commit");
        snprintf(r.client, sizeof r.client, "%s", req->client);
        r.size = file->size;
        snprintf(r.sha256, sizeof r.sha256, "%s", file->sha256);
        snprintf(r.namespace_name, sizeof r.namespace_name, "%s", c->model.org);
        snprintf(r.route, sizeof r.route, "%s %s", req->route->method, req->route->pattern);
        r.token_id = token_id;
        snprintf(r.outcome, sizeof r.outcome, "admitted_by_policy");
        if (tg_catalog_rejection_add(req->server->catalog, &r) != TG_CAT_OK)
            tg_log(TG_LOG_ERROR, "cannot record the admission of code %s %s (%s)", r.model, r.path,
                   r.reason);
        tg_log(TG_LOG_INFO,
               "admitted code %s v%lld %s by a Hub commit under the namespace's "
               "policy: %s",
               r.model, (long long)r.version, r.path, r.reason);
    }
}

/* The inline files' bytes against the namespace's quota (LFS objects were reserved and
 * counted at their upload): false after failing c. */
static bool inline_quota_ok(tg_request *req, hub_commit *c, const file_set *files)
{
    uint64_t incoming = 0;
    for (size_t i = 0; i < c->inline_files.count; i++) {
        const tg_file_record *file = &c->inline_files.items[i].file;
        bool held = false; /* the same bytes kept from the head count already */
        for (size_t j = 0; j < files->count && !held; j++)
            held =
                files->items[j].from_base && strcmp(files->items[j].file.sha256, file->sha256) == 0;
        if (!held)
            incoming += file->size;
    }
    if (incoming == 0)
        return true;
    uint64_t quota = 0, usage = 0;
    tg_cat_status status = tg_namespace_quota(req->server, c->model.org, &quota, &usage);
    if (status != TG_CAT_OK) {
        commit_fail(c, NULL, "internal", "the namespace's quota could not be read");
        return false;
    }
    if (quota > 0 && (incoming > quota || usage > quota - incoming)) {
        commit_fail(c, NULL, "storage_quota_exceeded",
                    "namespace %s holds %llu bytes of its quota of %llu; the commit's inline "
                    "files' %llu bytes do not fit",
                    c->model.org, (unsigned long long)usage, (unsigned long long)quota,
                    (unsigned long long)incoming);
        return false;
    }
    return true;
}

static void respond_commit(tg_request *req, const hub_commit *c, const char *commit_id)
{
    char origin[512], url[1024];
    tg_request_origin(req, origin, sizeof origin);
    snprintf(url, sizeof url, "%s/%s/%s/commit/%s", origin, c->model.org, c->model.name, commit_id);
    tg_respond_json(req, 200,
                    json_pack("{s:s, s:s, s:s, s:s, s:b, s:n}", "commitUrl", url, "commitOid",
                              commit_id, "commitMessage", c->summary, "hookOutput", "", "success",
                              1, "pullRequestUrl"));
}

/* The head the commit builds on: main's (the newest published version of main's line),
 * or its branch's (the version the branch alias names). */
static tg_cat_status commit_head(tg_catalog *catalog, const hub_commit *c, tg_version *head)
{
    if (c->branch[0] == '\0')
        return tg_catalog_version_latest_published(catalog, c->model.id, head);
    int64_t number = 0;
    char kind[8] = "";
    tg_cat_status status = tg_catalog_alias_kind(catalog, c->model.id, c->branch, &number, kind);
    if (status == TG_CAT_OK && strcmp(kind, "branch") != 0)
        status = TG_CAT_NOT_FOUND;
    if (status == TG_CAT_OK)
        status = tg_catalog_version_get(catalog, c->model.id, number, head);
    if (status == TG_CAT_OK && (!head->published || head->deleted_at[0] != '\0'))
        status = TG_CAT_NOT_FOUND;
    return status;
}

/* Makes and publishes the version of files under the publish lock, when the head (main
 * or the branch) is still base; a branch then moves to it. False after answering. */
static bool publish_commit(tg_request *req, hub_commit *c, const tg_version *base, bool has_base,
                           file_set *files, tg_version *published)
{
    tg_server *server = req->server;
    tg_catalog *catalog = server->catalog;
    pthread_mutex_lock(&server->publish_lock);
    tg_version head;
    tg_cat_status status = commit_head(catalog, c, &head);
    if ((status == TG_CAT_OK) != has_base || (has_base && head.id != base->id)) {
        pthread_mutex_unlock(&server->publish_lock);
        if (!tg_cat_failed(status))
            hub_error(req, NULL, "parent_commit_mismatch",
                      "%s moved while this commit was being made; nothing was committed, "
                      "commit again",
                      c->branch[0] ? c->branch : "main");
        else
            tg_respond_catalog_failure(req, status);
        return false;
    }
    tg_version draft;
    status = tg_catalog_version_create(catalog, c->model.id, &draft);
    if (status != TG_CAT_OK) {
        pthread_mutex_unlock(&server->publish_lock);
        if (status == TG_CAT_NOT_FOUND)
            hub_repo_not_found(req, c->model.org, c->model.name);
        else
            tg_respond_catalog_failure(req, status);
        return false;
    }
    tg_commit_guard guard = {.model_id = c->model.id,
                             .org = c->model.org,
                             .name = c->model.name,
                             .token_hash = c->token_hash[0] != '\0' ? c->token_hash : NULL};
    const char *why = NULL;
    if (c->branch[0] != '\0') /* never main's, before it is published */
        status = tg_catalog_version_set_branch(catalog, draft.id, c->branch);
    for (size_t i = 0; i < files->count && status == TG_CAT_OK; i++)
        status = tg_catalog_file_put_guarded(catalog, &guard, draft.id, &files->items[i].file,
                                             files->items[i].stats, &why);
    tg_file_records listed = {0};
    const char *reason = NULL;
    char detail[512] = "";
    if (status == TG_CAT_OK) {
        status = tg_catalog_file_list(catalog, draft.id, NULL, 0, tg_file_records_collect, &listed);
        if (listed.failed && status == TG_CAT_OK)
            status = TG_CAT_ERROR;
    }
    if (status == TG_CAT_OK)
        reason = tg_publish_files_locked(req, &c->model, &draft, &listed, published, detail,
                                         sizeof detail, &status);
    bool ok = status == TG_CAT_OK && reason == NULL;
    if (!ok && tg_catalog_version_delete_draft(catalog, draft.id) != TG_CAT_OK)
        tg_log(TG_LOG_ERROR, "cannot remove the draft %lld of %s/%s of a failed Hub commit",
               (long long)draft.number, c->model.org, c->model.name);
    if (ok && has_base && c->branch[0] != '\0') { /* a branch always has its head */
        tg_cat_status moved = tg_catalog_branch_move(catalog, c->model.id, c->branch, base->number,
                                                     published->number);
        tg_response_cache_invalidate_moving(server->responses);
        if (moved != TG_CAT_OK) {
            /* another replica moved or removed the branch meanwhile: the version stays,
             * readable by its number and commit id, and the commit is answered as stale */
            pthread_mutex_unlock(&server->publish_lock);
            free(listed.items);
            tg_log(TG_LOG_WARN,
                   "branch %s of %s/%s moved during a Hub commit: version %lld "
                   "stays off the branch",
                   c->branch, c->model.org, c->model.name, (long long)published->number);
            if (tg_cat_failed(moved))
                tg_respond_catalog_failure(req, moved);
            else
                hub_error(req, NULL, "parent_commit_mismatch",
                          "%s moved while this commit was being made; commit again", c->branch);
            return false;
        }
    }
    pthread_mutex_unlock(&server->publish_lock);
    free(listed.items);
    if (ok)
        return true;
    if (reason != NULL && strcmp(reason, "answered") == 0)
        return false; /* the signature step answered (in the Hub's dialect: hub_errors) */
    if (reason != NULL && strcmp(reason, "index_mismatch") == 0)
        hub_error(req, NULL, "index_mismatch", "index_mismatch: %s", detail);
    else if (reason != NULL && strcmp(reason, "internal") == 0)
        tg_respond_internal(req, "%s", detail);
    else if (reason != NULL && strcmp(reason, "catalog") != 0)
        hub_error(req, NULL, reason, "%s", detail);
    else if (why != NULL && strcmp(why, "token_revoked") == 0)
        hub_error(req, NULL, "token_revoked", "the token was revoked during the commit");
    else if (why != NULL && strcmp(why, "forbidden") == 0)
        hub_error(req, NULL, "forbidden", "the token no longer covers '%s'", c->model.org);
    else if (status == TG_CAT_NOT_FOUND)
        hub_repo_not_found(req, c->model.org, c->model.name);
    else
        tg_respond_catalog_failure(req, status);
    return false;
}

void tg_route_hub_commit(tg_request *req)
{
    hub_commit *c = req->state;
    if (c == NULL)
        return;
    if (c->line_len > 0 && !c->line_too_long) /* a last line without its newline */
        commit_line(req, c, c->line, c->line_len);
    c->line_len = 0;
    if (!c->failed && !c->saw_header)
        commit_fail(c, NULL, "invalid_request", "a commit starts with its header line");
    tg_catalog *catalog = req->server->catalog;
    tg_version base;
    bool has_base = false;
    file_set files = {0};
    if (!c->failed) {
        tg_cat_status status = commit_head(catalog, c, &base);
        if (status == TG_CAT_NOT_FOUND && c->branch[0] != '\0') {
            reclaim_inline(req, c);
            hub_error(req, "RevisionNotFound", "version_not_found",
                      "Invalid rev id: %s/%s has no branch '%s' (it was deleted)", c->model.org,
                      c->model.name, c->branch);
            return;
        }
        if (tg_cat_failed(status)) {
            reclaim_inline(req, c);
            tg_respond_catalog_failure(req, status);
            return;
        }
        has_base = status == TG_CAT_OK;
        char base_commit[41] = "";
        if (has_base)
            tg_version_commit_id(&base, base_commit);
        if (c->parent[0] != '\0' && strcmp(c->parent, base_commit) != 0)
            commit_fail(c, NULL, "parent_commit_mismatch",
                        "A commit has happened since. Please refresh and try again. (%s of "
                        "%s/%s is %s, not the parentCommit %s)",
                        c->branch[0] ? c->branch : "main", c->model.org, c->model.name,
                        has_base ? base_commit : "empty", c->parent);
    }
    if (!c->failed)
        (void)build_files(req, c, &base, has_base, &files);
    if (!c->failed)
        (void)inline_quota_ok(req, c, &files);
    if (!c->failed && files.count == 0)
        commit_fail(c, NULL, "empty_version", "the commit would leave %s/%s with no files",
                    c->model.org, c->model.name);
    if (c->failed) {
        file_set_free(&files);
        reclaim_inline(req, c);
        respond_commit_failure(req, c);
        return;
    }
    /* nothing changed: the Hub answers with the commit main is at */
    if (has_base) {
        tg_file_record *records = calloc(files.count ? files.count : 1, sizeof *records);
        char digest[65];
        for (size_t i = 0; records != NULL && i < files.count; i++)
            records[i] = files.items[i].file;
        if (records != NULL && tg_manifest_digest(records, files.count, digest) == 0 &&
            strcmp(digest, base.digest) == 0) {
            free(records);
            file_set_free(&files);
            char commit_id[41];
            tg_version_commit_id(&base, commit_id);
            respond_commit(req, c, commit_id);
            return;
        }
        free(records);
    }
    tg_version published;
    bool ok = publish_commit(req, c, &base, has_base, &files, &published);
    if (!ok) {
        file_set_free(&files);
        reclaim_inline(req, c);
        return;
    }
    for (size_t i = 0; i < c->op_count; i++)
        if (c->ops[i].kind == OP_LFS)
            pending_remove(req->server, c->model.org, c->ops[i].oid);
    record_code_admissions(req, c, &files, &published);
    /* the replaced content of main stays: main's head before is a version of its own */
    file_set_free(&files);
    char commit_id[41];
    tg_version_commit_id(&published, commit_id);
    tg_log(TG_LOG_INFO, "Hub commit %s on %s/%s: version %lld (%s)", commit_id, c->model.org,
           c->model.name, (long long)published.number, c->summary);
    respond_commit(req, c, commit_id);
}

void tg_route_hub_commit_cleanup(tg_request *req)
{
    hub_commit *c = req->state;
    if (c == NULL)
        return;
    if (!req->responded)
        reclaim_inline(req, c);
    tg_ingest_abort(&c->body.ingest);
    file_set_free(&c->inline_files);
    free(c->ops);
    free(c->line);
    free(c);
    req->state = NULL;
}

/* ---- branches and tags: POST|DELETE /api/models/{org}/{name}/branch/{branch},
 * POST /api/models/{org}/{name}/tag/{rev}, DELETE .../tag/{tag} ---- */

static bool ref_name_ok(tg_request *req, const char *ref)
{
    static const char *const reserved[] = {"latest", "main", "head"};
    for (size_t i = 0; ref != NULL && i < sizeof reserved / sizeof reserved[0]; i++)
        if (strcasecmp(ref, reserved[i]) == 0) {
            hub_error(req, NULL, "reserved_alias",
                      "'%s' is reserved: main, HEAD and latest always name the newest published "
                      "version",
                      ref);
            return false;
        }
    if (ref == NULL || !tg_valid_alias(ref)) {
        hub_error(req, NULL, "invalid_name",
                  "a branch or tag name is [A-Za-z0-9][A-Za-z0-9._-]{0,63}, not all digits, not "
                  "a digest");
        return false;
    }
    return true;
}

/* Points ref at the version rev names; exists: the ref is there already (409 unless
 * overwrite). */
static void set_ref(tg_request *req, const tg_model *model, const char *ref, const char *rev,
                    bool overwrite, const char *what)
{
    tg_catalog *catalog = req->server->catalog;
    tg_version target;
    tg_cat_status status = hub_resolve(catalog, model->id, rev ? rev : "main", &target);
    if (status == TG_CAT_NOT_FOUND) {
        hub_error(req, "RevisionNotFound", "version_not_found",
                  "Invalid rev id: %s/%s has no published revision '%s'", model->org, model->name,
                  rev ? rev : "main");
        return;
    }
    if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
        return;
    }
    /* schema 17: the alias is marked a branch or a tag (what /refs lists it as) */
    status = tg_catalog_alias_set_kind(catalog, model->id, ref, target.number, what, overwrite);
    tg_response_cache_invalidate_moving(req->server->responses);
    if (status == TG_CAT_EXISTS) {
        hub_error(req, NULL, "ref_exists", "%s '%s' already exists on %s/%s", what, ref, model->org,
                  model->name);
        return;
    }
    if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
        return;
    }
    tg_respond_json(req, 200, json_object());
}

static void delete_ref(tg_request *req, const tg_model *model, const char *ref, const char *what)
{
    tg_cat_status status = tg_catalog_alias_delete(req->server->catalog, model->id, ref);
    tg_response_cache_invalidate_moving(req->server->responses);
    if (status == TG_CAT_NOT_FOUND)
        hub_error(req, "RevisionNotFound", "version_not_found", "%s/%s has no %s '%s'", model->org,
                  model->name, what, ref);
    else if (status != TG_CAT_OK)
        tg_respond_catalog_failure(req, status);
    else
        tg_respond_json(req, 200, json_object());
}

void tg_route_hub_branch_create(tg_request *req)
{
    tg_model model;
    const char *branch = tg_param(req, "alias");
    if (!hub_lookup_repo(req, tg_param(req, "org"), tg_param(req, "name"), &model) ||
        !ref_name_ok(req, branch))
        return;
    json_t *body = tg_json_body(req);
    if (body == NULL)
        return;
    if (json_is_true(json_object_get(body, "emptyBranch"))) {
        hub_error(req, NULL, "invalid_request",
                  "an empty branch is not served: a branch names a published version");
    } else {
        const char *start = json_string_value(json_object_get(body, "startingPoint"));
        set_ref(req, &model, branch, start, json_is_true(json_object_get(body, "overwrite")),
                "branch");
    }
    json_decref(body);
}

void tg_route_hub_branch_delete(tg_request *req)
{
    tg_model model;
    const char *branch = tg_param(req, "alias");
    if (hub_lookup_repo(req, tg_param(req, "org"), tg_param(req, "name"), &model) &&
        ref_name_ok(req, branch))
        delete_ref(req, &model, branch, "branch");
}

void tg_route_hub_tag_create(tg_request *req)
{
    tg_model model;
    if (!hub_lookup_repo(req, tg_param(req, "org"), tg_param(req, "name"), &model))
        return;
    json_t *body = tg_json_body(req);
    if (body == NULL)
        return;
    const char *tag = json_string_value(json_object_get(body, "tag"));
    if (ref_name_ok(req, tag))
        set_ref(req, &model, tag, tg_param(req, "rev"), false, "tag");
    json_decref(body);
}

void tg_route_hub_tag_delete(tg_request *req)
{
    tg_model model;
    const char *tag = tg_param(req, "rev");
    if (hub_lookup_repo(req, tg_param(req, "org"), tg_param(req, "name"), &model) &&
        ref_name_ok(req, tag))
        delete_ref(req, &model, tag, "tag");
}
