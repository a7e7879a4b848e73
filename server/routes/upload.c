/* PUT .../versions/{rev}/files/{path}: stream the body through the gate into a
 * temp file, hashing in the same pass, then commit the blob and the catalog row.
 *
 * libmicrohttpd (0.9.x) cannot queue a response while body data is being
 * delivered, only at the headers or after the whole body. So checks that need no
 * body (auth, names, draft state, declared size) answer at the headers, before a
 * byte is read; a refusal found in the body stops all work at once (temp file
 * deleted, nothing more written or parsed) and the rest of the body is dropped
 * until the end, where the problem is sent. The dropped rest is still hashed, so
 * the refusal's record (GET /v1/rejections) carries the SHA-256 of the whole body.
 * A body that goes on past --drain-limit after a refusal gets its connection
 * closed.
 *
 * "A refusal found" includes one that is only certain (st_gate_refusal_certain):
 * content that is not safetensors and that the first 64 KiB do not name waits for
 * its end, where the gate looks for a ZIP end record to name the format. The upload
 * stops storing it at once all the same; the drained rest goes on feeding the gate
 * (its head and a 64 KiB tail ring, nothing on disk), so a body that ends within the
 * drain limit is answered with the final verdict, the one `tensorgate validate` and
 * POST /v1/scan give. A longer one is answered at once, with the refusal the head
 * gives (refused_format, format from the first 64 KiB: "unknown" where validate may
 * say "zip"), and its connection closed. */
#include "upload.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "checks.h"
#include "index_check.h"
#include "log.h"
#include "reclaim.h"
#include "routes.h"
#include "test_hooks.h"

/* The test hook COMMIT_DELAY_MS (test_hooks.h; at most 10 s) widens the gap between
 * a blob's commit and its catalog row, so a test can run gc inside it. */
static void test_commit_delay(void)
{
    const char *delay = tg_test_hook(TG_HOOK_COMMIT_DELAY_MS);
    unsigned long ms = delay ? strtoul(delay, NULL, 10) : 0;
    if (ms > 0)
        usleep((useconds_t)(ms > 10000 ? 10000 : ms) * 1000);
}

int tg_body_ingest_begin(tg_body_ingest *body, tg_request *req, st_gate_kind kind, const char *name,
                         uint64_t declared, bool with_file, bool allow_code)
{
    tg_server *server = req->server;
    tg_header_budget_init(&body->budget, req);
    tg_ingest_config config = {
        .kind = kind,
        .name = name,
        .declared = declared,
        .max_bytes = server->config.max_body,
        .max_header = server->config.max_header,
        .refuse_nonfinite = server->config.refuse_nonfinite,
        .allow_code = allow_code,
        .reserve = tg_header_budget_reserve,
        .release = tg_header_budget_release,
        .budget_context = &body->budget,
        .store = with_file ? server->blobs : NULL,
        .digest_name = with_file ? "upload" : "scan",
        .stop_when_certain = with_file,
        /* the digest covers the whole body: a scan's answer, a refused upload's record */
        .hash_after_stop = true,
        .check_length = with_file,
        .drain_limit = server->config.drain_limit,
    };
    return tg_ingest_begin(&body->ingest, &config);
}

tg_ingest_state tg_body_ingest_feed(tg_body_ingest *body, tg_request *req, const uint8_t *data,
                                    size_t len)
{
    tg_ingest_state state = tg_ingest_feed(&body->ingest, data, len);
    if (body->ingest.abandon)
        req->close_now = true;
    return state;
}

void tg_body_ingest_respond_over_budget(tg_body_ingest *body, tg_request *req)
{
    if (body->budget.refused == TG_TALLY_KEY_FULL)
        tg_respond_quota(req, TG_TALLY_KEY_FULL, 1,
                         "this client's streams hold %llu bytes of header memory, its limit "
                         "(--header-memory-per-client); retry when they end",
                         (unsigned long long)tg_tally_of(body->budget.tally, body->budget.client));
    else
        tg_respond_quota(
            req,
            body->budget.refused == TG_TALLY_GLOBAL_FULL ? TG_TALLY_GLOBAL_FULL : TG_TALLY_ERROR, 1,
            "the server's header memory (--header-memory, %llu bytes) is in use; retry later",
            (unsigned long long)body->budget.global_max);
}

/* ---- the upload route ---- */

typedef struct upload {
    tg_body_ingest body; /* body.ingest: the pipeline; its gate is NULL until started */
    tg_model model;
    tg_version version;
    char path[TG_PATH_MAX + 1];
    char token_hash[65]; /* re-checked at the commit: a token revoked mid-body stores nothing */
    bool recorded;       /* the refusal is in the rejections table */
    char owner[TG_TALLY_KEY_MAX]; /* charged one concurrent upload while counted */
    bool counted;
    /* the namespace's storage quota (schema 16): the bytes it may still take when that
     * is less than --max-body (the body's bound then), else quota_room is UINT64_MAX */
    uint64_t quota_room, quota, usage;
    /* schema 17: a body of known length reserves it against the quota while it streams
     * (released at the cleanup); "" when none */
    char reservation[48];
} upload;

/* The refused file's size and SHA-256, for its record: a body read to its end has
 * the bytes received and, when every byte was hashed as it streamed, their digest;
 * one refused before or while it streamed has its declared length (else the bytes
 * received so far) and no digest. */
static void refused_facts(tg_request *req, upload *up, tg_rejection *r)
{
    tg_ingest *ingest = &up->body.ingest;
    uint64_t declared = tg_request_body_size(req);
    if (!ingest->begun || ingest->gate == NULL) {
        r->size = declared != ST_FILE_SIZE_UNKNOWN ? declared : 0;
        return;
    }
    uint64_t received = tg_ingest_received(ingest);
    r->size = ingest->finished || declared == ST_FILE_SIZE_UNKNOWN ? received : declared;
    if (tg_ingest_whole_digest(ingest, r->sha256) != 0)
        r->sha256[0] = '\0';
}

/* Records the refusal of this upload, once (the first call wins): what was refused
 * (its size and SHA-256), where it was aimed (model, version, path, namespace), who
 * sent it (the token's id, the client's address), how (the route) and why.
 * findings: a refused pickle's findings as JSON text (st_verdict_findings_text), or
 * NULL. */
static void record_rejection(tg_request *req, upload *up, const char *reason, const char *format,
                             const char *detail, const char *findings)
{
    if (up->recorded)
        return;
    up->recorded = true;
    tg_rejection *r = calloc(1, sizeof *r);
    if (r == NULL) {
        tg_log(TG_LOG_ERROR, "cannot record the rejection of %s/%s %s (%s): out of memory",
               up->model.org, up->model.name, up->path, reason);
        return;
    }
    tg_time_now(r->time);
    snprintf(r->model, sizeof r->model, "%s/%s", up->model.org, up->model.name);
    snprintf(r->namespace_name, sizeof r->namespace_name, "%s", up->model.org);
    r->version = up->version.number;
    snprintf(r->path, sizeof r->path, "%s", up->path);
    snprintf(r->reason, sizeof r->reason, "%s", reason);
    snprintf(r->format, sizeof r->format, "%s", format ? format : "");
    snprintf(r->detail, sizeof r->detail, "%s", detail);
    snprintf(r->client, sizeof r->client, "%s", req->client);
    snprintf(r->route, sizeof r->route, "%s %s", req->route->method, req->route->pattern);
    snprintf(r->findings, sizeof r->findings, "%s", findings ? findings : "");
    refused_facts(req, up, r);
    /* the token's public id (a revoked token's is gone: null) */
    if (up->token_hash[0] != '\0' &&
        tg_catalog_token_id(req->server->catalog, up->token_hash, &r->token_id) != TG_CAT_OK)
        r->token_id = 0;
    if (tg_catalog_rejection_add(req->server->catalog, r) != TG_CAT_OK)
        tg_log(TG_LOG_ERROR, "cannot record the rejection of %s %s (%s)", r->model, r->path,
               reason);
    tg_metrics_rejection(req->server, reason);
    tg_log(TG_LOG_INFO, "refused %s v%lld %s from %s: %s (%s)", r->model, (long long)r->version,
           r->path, r->client, reason, detail);
    free(r);
}

/* Code the namespace's policy admitted is recorded like a refusal (docs/DESIGN.md, "The
 * code policy"), with outcome admitted_by_policy and the code reason it would have had. */
static void record_code_admission(tg_request *req, upload *up, const tg_file_record *file)
{
    st_verdict verdict;
    st_gate_verdict(up->body.ingest.gate, &verdict);
    tg_rejection r;
    memset(&r, 0, sizeof r);
    tg_time_now(r.time);
    snprintf(r.model, sizeof r.model, "%s/%s", up->model.org, up->model.name);
    r.version = up->version.number;
    snprintf(r.path, sizeof r.path, "%s", up->path);
    snprintf(r.reason, sizeof r.reason, "%s", file->code_reason);
    snprintf(r.format, sizeof r.format, "%s", st_format_name(verdict.format));
    snprintf(r.detail, sizeof r.detail, "%s", verdict.code.detail);
    snprintf(r.client, sizeof r.client, "%s", req->client);
    r.size = file->size;
    snprintf(r.sha256, sizeof r.sha256, "%s", file->sha256);
    snprintf(r.namespace_name, sizeof r.namespace_name, "%s", up->model.org);
    snprintf(r.route, sizeof r.route, "%s %s", req->route->method, req->route->pattern);
    if (up->token_hash[0] != '\0' &&
        tg_catalog_token_id(req->server->catalog, up->token_hash, &r.token_id) != TG_CAT_OK)
        r.token_id = 0;
    snprintf(r.outcome, sizeof r.outcome, "admitted_by_policy");
    if (tg_catalog_rejection_add(req->server->catalog, &r) != TG_CAT_OK)
        tg_log(TG_LOG_ERROR, "cannot record the admission of code %s %s (%s)", r.model, r.path,
               r.reason);
    tg_log(TG_LOG_INFO, "admitted code %s v%lld %s from %s under the namespace's policy: %s (%s)",
           r.model, (long long)r.version, r.path, r.client, r.reason, r.detail);
}

static void record_gate_refusal(tg_request *req, upload *up)
{
    st_verdict verdict;
    st_gate_verdict(up->body.ingest.gate, &verdict);
    if (verdict.error.reason == ST_OUT_OF_MEMORY)
        return; /* the server's failure: never recorded as the file's */
    char findings[TG_REJECTION_FINDINGS_MAX];
    st_verdict_findings_text(&verdict, findings, sizeof findings);
    record_rejection(req, up, st_reason_name(verdict.error.reason), st_format_name(verdict.format),
                     verdict.error.detail, findings);
}

static void record_too_large(tg_request *req, upload *up)
{
    record_rejection(req, up, "payload_too_large", NULL, "the body is larger than --max-body",
                     NULL);
}

void tg_route_upload_start(tg_request *req)
{
    upload *up = calloc(1, sizeof *up);
    if (up == NULL) {
        tg_respond_internal(req, "out of memory");
        return;
    }
    req->state = up;
    if (tg_auth_token_hash(req, up->token_hash) < 0) {
        tg_respond_internal(req, "the token's SHA-256 failed");
        return;
    }
    /* Concurrent uploads per token or namespace and in all (each holds a connection
     * and a temp file descriptor); given back in cleanup. */
    tg_request_owner(req, up->owner, sizeof up->owner);
    tg_tally_result taken = tg_tally_take(tg_uploads_tally(), up->owner, 1,
                                          req->server->config.max_uploads_per_namespace,
                                          req->server->config.max_uploads);
    if (taken != TG_TALLY_OK) {
        tg_respond_quota(
            req, taken, 5, "%s",
            taken == TG_TALLY_KEY_FULL
                ? "this token or namespace has its limit of uploads in progress "
                  "(--max-uploads-per-namespace); retry when one ends"
                : "the server has its limit of uploads in progress (--max-uploads); retry later");
        return;
    }
    up->counted = true;
    if (!tg_lookup_model(req, &up->model))
        return;
    const char *path = tg_param(req, "path");
    const char *why = NULL;
    if (path == NULL || !tg_valid_file_path(path, &why)) {
        tg_respond_problem(req, "invalid_path", "%s", why ? why : "the file path is invalid");
        return;
    }
    /* `.../files/{path}/header` is the header route of {path}: a file whose last
     * segment is `header` could never be read back by its own URL. */
    const char *last_slash = strrchr(path, '/');
    if (strcmp(last_slash ? last_slash + 1 : path, "header") == 0) {
        tg_respond_problem(
            req, "invalid_path",
            "a file path may not end in the segment 'header' (reserved for the header route)");
        return;
    }
    snprintf(up->path, sizeof up->path, "%s", path);
    if (!tg_lookup_version(req, &up->model, &up->version))
        return;
    if (up->version.published) {
        tg_respond_problem(req, "version_published",
                           "version %lld is published; its files cannot change",
                           (long long)up->version.number);
        return;
    }
    uint64_t declared = tg_request_body_size(req);
    if (declared != ST_FILE_SIZE_UNKNOWN && declared > req->server->config.max_body) {
        char detail[128];
        snprintf(detail, sizeof detail, "the body declares %llu bytes; the limit is %llu",
                 (unsigned long long)declared, (unsigned long long)req->server->config.max_body);
        record_rejection(req, up, "payload_too_large", NULL, detail, NULL);
        tg_respond_problem(req, "payload_too_large", "%s", detail);
        return;
    }
    /* The namespace's storage quota (docs/MANUAL.md, "Storage quotas"): a body whose
     * length is known and does not fit is refused before a byte of it is read; one of
     * unknown length is bounded by the room left (too large: refused mid-stream, nothing
     * kept). */
    up->quota_room = UINT64_MAX;
    tg_cat_status quota_status =
        tg_namespace_quota(req->server, up->model.org, &up->quota, &up->usage);
    if (quota_status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, quota_status);
        return;
    }
    if (up->quota > 0) {
        uint64_t room = up->usage < up->quota ? up->quota - up->usage : 0;
        if (declared != ST_FILE_SIZE_UNKNOWN && declared > room) {
            char detail[192];
            snprintf(detail, sizeof detail,
                     "namespace %s holds %llu bytes of its quota of %llu; the body's %llu bytes "
                     "do not fit",
                     up->model.org, (unsigned long long)up->usage, (unsigned long long)up->quota,
                     (unsigned long long)declared);
            record_rejection(req, up, "storage_quota_exceeded", NULL, detail, NULL);
            tg_respond_problem(req, "storage_quota_exceeded", "%s", detail);
            return;
        }
        if (room < req->server->config.max_body)
            up->quota_room = room;
        if (declared != ST_FILE_SIZE_UNKNOWN) {
            /* reserved in the catalog: concurrent bodies (on any replica) cannot
             * together pass the quota */
            tg_cat_status reserved =
                tg_quota_reserve(req->server, up->model.org, declared, &up->quota, &up->usage,
                                 up->reservation, sizeof up->reservation);
            if (reserved == TG_CAT_CONFLICT) {
                char detail[224];
                snprintf(detail, sizeof detail,
                         "namespace %s holds %llu bytes of its quota of %llu, and uploads in "
                         "progress reserve more; the body's %llu bytes do not fit",
                         up->model.org, (unsigned long long)up->usage,
                         (unsigned long long)up->quota, (unsigned long long)declared);
                record_rejection(req, up, "storage_quota_exceeded", NULL, detail, NULL);
                tg_respond_problem(req, "storage_quota_exceeded", "%s", detail);
                return;
            }
            if (reserved != TG_CAT_OK) {
                tg_respond_catalog_failure(req, reserved);
                return;
            }
        }
    }
    /* A .safetensors name must hold safetensors, a .json name strict JSON; any other
     * name is a sidecar, which may be strict JSON, UTF-8 text or safetensors, and
     * there content decides, except that a name marking code (modeling_x.py, a .so) is
     * refused as code (st_code.h). */
    st_gate_kind kind =
        tg_is_safetensors_path(path) ? ST_GATE_SAFETENSORS : st_gate_sidecar_kind(path);
    /* The namespace's code policy, read once at the head: a sidecar refused only as code
     * is admitted where an admin allowed it (PUT /v1/namespaces/{org}/policy). */
    tg_namespace_settings settings = {0};
    if (kind != ST_GATE_SAFETENSORS) {
        tg_cat_status status =
            tg_catalog_namespace_get(req->server->catalog, up->model.org, &settings);
        if (status != TG_CAT_OK) {
            tg_respond_catalog_failure(req, status);
            return;
        }
    }
    errno = 0;
    if (tg_body_ingest_begin(&up->body, req, kind, up->path, declared, true, settings.allow_code) !=
        0) {
        if (tg_errno_is_exhaustion(errno))
            tg_respond_exhausted(req, "a temp file");
        else
            tg_respond_internal(req, "cannot start the upload (temp file or memory)");
        return;
    }
    if (up->quota_room != UINT64_MAX)
        up->body.ingest.config.max_bytes = up->quota_room;
}

static void upload_answer(tg_request *req, bool body_ended);

void tg_route_upload_feed(tg_request *req, const uint8_t *data, size_t len)
{
    upload *up = req->state;
    if (up == NULL)
        return;
    tg_ingest *ingest = &up->body.ingest;
    tg_body_ingest_feed(&up->body, req, data, len);
    /* A refusal is recorded when it is answered, or at the cleanup when its answer never
     * went out: a body read to its end is recorded with its SHA-256, and a pending
     * verdict with the format the end names. */
    if (ingest->state == TG_INGEST_OPEN)
        return;
    /* Stopped. A short rest of the body is read and dropped, and the answer goes out
     * normally at the end; a long one (more than --drain-limit left, by Content-Length
     * or by what was dropped so far) gets the answer now and the connection closed. */
    uint64_t received = tg_ingest_received(ingest);
    uint64_t declared = ingest->config.declared;
    uint64_t drain_limit = ingest->config.drain_limit;
    bool long_rest = ingest->drained > drain_limit ||
                     (declared != ST_FILE_SIZE_UNKNOWN &&
                      declared - (received < declared ? received : declared) > drain_limit);
    if (long_rest || req->close_now) {
        req->close_now = false;
        upload_answer(req, false);
        req->close_now = true;
    }
}

/* The upload's catalog row, written by the pipeline's commit with the blob durable
 * and the shared blobs lock held. */
typedef struct upload_row {
    tg_server *server;
    upload *up;
    char replaced[TG_SHA256_HEX_LEN + 1]; /* the blob the path held before, or "" */
    tg_cat_status status;
    const char *why;
} upload_row;

static void record_upload_row(void *ctx, const tg_file_record *file, const char *stats)
{
    upload_row *row = ctx;
    tg_server *server = row->server;
    upload *up = row->up;
    test_commit_delay();
    pthread_mutex_lock(&server->publish_lock);
    tg_file_blob(server->catalog, up->version.id, file->path, row->replaced);
    /* The body took a while: the commit re-checks, in its transaction, that the model
     * is still the one the upload began for (same id, org and name), the version is
     * still its draft, and the token still exists and covers the org. */
    tg_commit_guard guard = {.model_id = up->model.id,
                             .org = up->model.org,
                             .name = up->model.name,
                             .token_hash = up->token_hash[0] != '\0' ? up->token_hash : NULL};
    /* Code admitted at the head is admitted only while the policy still allows it: one
     * turned off during the body refuses it here (no row). */
    tg_namespace_settings settings = {.allow_code = true};
    if (file->code_reason[0] != '\0')
        row->status = tg_catalog_namespace_get(server->catalog, up->model.org, &settings);
    if (file->code_reason[0] != '\0' && row->status == TG_CAT_OK && !settings.allow_code) {
        row->status = TG_CAT_CONFLICT;
        row->why = "code_refused";
    } else if (file->code_reason[0] == '\0' || row->status == TG_CAT_OK) {
        row->status = tg_catalog_file_put_guarded(server->catalog, &guard, up->version.id, file,
                                                  stats, &row->why);
    }
    pthread_mutex_unlock(&server->publish_lock);
}

static void respond_length_mismatch(tg_request *req, upload *up)
{
    tg_ingest *ingest = &up->body.ingest;
    uint64_t received = tg_ingest_received(ingest);
    record_rejection(req, up, "body_length_mismatch", NULL,
                     "the body length differs from Content-Length", NULL);
    tg_respond_problem(req, "body_length_mismatch", "received %llu bytes, Content-Length said %llu",
                       (unsigned long long)received, (unsigned long long)ingest->config.declared);
}

/* body_ended: the whole body was read (else the answer goes out mid-body, after a
 * stop, and a pending verdict stays the head's refusal). */
static void upload_answer(tg_request *req, bool body_ended)
{
    upload *up = req->state;
    tg_server *server = req->server;
    if (up == NULL || up->body.ingest.gate == NULL) {
        tg_respond_internal(req, "the upload was not started");
        return;
    }
    tg_ingest *ingest = &up->body.ingest;
    /* The end: the gate's final verdict, or, for a body that ended short of its
     * Content-Length (the client half-closed), body_length_mismatch, before the gate
     * would call the cut file truncated. */
    if (body_ended)
        tg_ingest_finish(ingest);
    st_verdict verdict;
    st_gate_verdict(ingest->gate, &verdict);
    switch (ingest->state) {
    case TG_INGEST_OPEN:
        break;
    case TG_INGEST_LENGTH_MISMATCH:
        respond_length_mismatch(req, up);
        return;
    case TG_INGEST_REFUSED:
        record_gate_refusal(req, up);
        tg_respond_gate_problem(req, &verdict);
        return;
    case TG_INGEST_TOO_LARGE:
        if (up->quota_room != UINT64_MAX) { /* the quota's room bounded it */
            char detail[192];
            snprintf(detail, sizeof detail,
                     "namespace %s holds %llu bytes of its quota of %llu; the body passed the "
                     "%llu bytes left",
                     up->model.org, (unsigned long long)up->usage, (unsigned long long)up->quota,
                     (unsigned long long)up->quota_room);
            record_rejection(req, up, "storage_quota_exceeded", NULL, detail, NULL);
            tg_respond_problem(req, "storage_quota_exceeded", "%s", detail);
            return;
        }
        record_too_large(req, up);
        tg_respond_problem(req, "payload_too_large", "the body is larger than %llu bytes",
                           (unsigned long long)server->config.max_body);
        return;
    case TG_INGEST_NO_SPACE:
        tg_respond_problem(req, "insufficient_storage",
                           "the server's disk is full; nothing was stored");
        return;
    case TG_INGEST_FAILED:
    case TG_INGEST_COMMITTED:
        if (ingest->state == TG_INGEST_FAILED && ingest->os_errno == TG_BLOB_UNAVAILABLE_ERRNO)
            tg_respond_blob_store_unavailable(req);
        else
            tg_respond_internal(req, "the upload could not be written");
        return;
    case TG_INGEST_OVER_BUDGET:
        tg_body_ingest_respond_over_budget(&up->body, req);
        return;
    }
    /* Durable blob first, catalog row second (record_upload_row), both under the
     * shared blobs lock, so a concurrent gc cannot take the blob from under its row. */
    tg_file_record file;
    upload_row row = {.server = server, .up = up, .replaced = "", .status = TG_CAT_ERROR};
    if (tg_ingest_commit(ingest, up->path, &file, record_upload_row, &row) != 0) {
        if (ingest->error == TG_INGEST_ERROR_DIGEST)
            tg_respond_internal(req, "the upload's SHA-256 failed; nothing was stored");
        else if (ingest->error == TG_INGEST_ERROR_LOCK)
            tg_respond_internal(req, "the blob store's lock cannot be taken; nothing was stored");
        else if (ingest->state == TG_INGEST_NO_SPACE)
            tg_respond_problem(req, "insufficient_storage",
                               "the server's disk is full; nothing was stored");
        else if (ingest->error == TG_INGEST_ERROR_MEMORY)
            tg_respond_internal(req, "out of memory");
        else if (ingest->os_errno == TG_BLOB_UNAVAILABLE_ERRNO)
            tg_respond_blob_store_unavailable(req);
        else
            tg_respond_internal(req, "the blob could not be stored");
        return;
    }
    tg_cat_status status = row.status;
    /* the content this upload replaced goes now if nothing else uses it (never while
     * holding the shared lock: reclaiming takes the exclusive one) */
    if (status == TG_CAT_OK && row.replaced[0] != '\0' && strcmp(row.replaced, file.sha256) != 0)
        (void)tg_blob_reclaim(server->blobs, server->catalog, row.replaced, false);
    /* a lost upload gives its blob back at once when no row uses it */
    if (status != TG_CAT_OK)
        (void)tg_blob_reclaim(server->blobs, server->catalog, file.sha256, false);
    if (status == TG_CAT_CONFLICT && row.why != NULL && strcmp(row.why, "code_refused") == 0) {
        /* the namespace's code policy was turned off during the body: refused as code,
         * as it would be now */
        st_verdict refused;
        st_gate_verdict(ingest->gate, &refused);
        refused.valid = false;
        refused.error = refused.code;
        snprintf(refused.error.detail, sizeof refused.error.detail,
                 "%.180s; the namespace's code policy was turned off during the upload",
                 refused.code.detail);
        record_rejection(req, up, st_reason_name(refused.error.reason),
                         st_format_name(refused.format), refused.error.detail, NULL);
        tg_respond_gate_problem(req, &refused);
    } else if (status == TG_CAT_CONFLICT) {
        tg_respond_problem(req, "version_published", "version %lld was published during the upload",
                           (long long)up->version.number);
    } else if (status == TG_CAT_NOT_FOUND && row.why != NULL &&
               strcmp(row.why, "token_revoked") == 0) {
        tg_respond_problem(req, "token_revoked",
                           "the token was revoked during the upload; nothing was stored");
    } else if (status == TG_CAT_NOT_FOUND && row.why != NULL && strcmp(row.why, "forbidden") == 0) {
        tg_respond_problem(req, "forbidden", "the token no longer covers '%s'; nothing was stored",
                           up->model.org);
    } else if (status == TG_CAT_NOT_FOUND) {
        tg_respond_problem(
            req, "version_not_found",
            "the model or the version was deleted during the upload; nothing was stored");
    } else if (status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, status);
    } else {
        tg_log(TG_LOG_INFO, "stored %s/%s v%lld %s (%llu bytes, sha256 %s)", up->model.org,
               up->model.name, (long long)up->version.number, file.path,
               (unsigned long long)file.size, file.sha256);
        if (file.code_reason[0] != '\0')
            record_code_admission(req, up, &file);
        tg_respond_json(req, 201, tg_file_json(&file));
    }
}

void tg_route_upload_finish(tg_request *req)
{
    upload_answer(req, true);
}

void tg_route_upload_cleanup(tg_request *req)
{
    upload *up = req->state;
    if (up == NULL)
        return;
    tg_ingest *ingest = &up->body.ingest;
    /* The connection ended before an answer (the client closed mid-body): the body is
     * short of its length, a refusal like any other. The temp file goes just below. */
    if (!req->responded && ingest->gate != NULL && ingest->state == TG_INGEST_OPEN) {
        char detail[160];
        if (ingest->config.declared != ST_FILE_SIZE_UNKNOWN)
            snprintf(detail, sizeof detail,
                     "the client closed the connection after %llu of %llu body bytes",
                     (unsigned long long)ingest->seen, (unsigned long long)ingest->config.declared);
        else
            snprintf(
                detail, sizeof detail,
                "the client closed the connection after %llu body bytes, before the last chunk",
                (unsigned long long)ingest->seen);
        record_rejection(req, up, "body_length_mismatch", NULL, detail, NULL);
    }
    /* a refusal whose answer never went out (the client left while the rest drained) */
    if (ingest->gate != NULL && ingest->state == TG_INGEST_REFUSED)
        record_gate_refusal(req, up);
    if (ingest->gate != NULL && ingest->state == TG_INGEST_TOO_LARGE)
        record_too_large(req, up);
    tg_ingest_abort(ingest);
    if (up->counted)
        tg_tally_give(tg_uploads_tally(), up->owner, 1);
    tg_quota_release(req->server, up->reservation);
    free(up);
    req->state = NULL;
}
