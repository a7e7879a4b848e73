/* POST /v1/scan: the gate over the body, nothing stored, the verdict as JSON
 * (the fields of `tensorgate validate --json` minus "file"). ?kind=sidecar lets
 * strict JSON and UTF-8 text pass too; ?kind=json judges the body as a sidecar named
 * *.json is judged (strict JSON only), as `validate --sidecar x.json` does. ?name=PATH
 * judges the body as a file of that name: a name that marks code (st_code.h) is refused
 * as code, and code refusals name it.
 * A scan stores nothing, so unlike an upload it reads a body whose refusal is already
 * certain to its end (up to --max-body; memory stays bounded): its verdict then names
 * the format exactly as `tensorgate validate` does (a ZIP behind a long prefix).
 * The header it buffers is charged to the client's and the server's header memory
 * (--header-memory-per-client, --header-memory): past either the scan is answered at
 * once (429 quota_exceeded / 503 resource_exhausted) and its connection closed.
 * --scan-auth makes scans need a token.
 * The verdict comes as SARIF 2.1.0 (st_sarif.h, application/sarif+json) with
 * ?format=sarif, or without ?format= when Accept ranks application/sarif+json above
 * application/json; ?format=json (the default) keeps the JSON verdict, any other
 * format is 400 invalid_format. The artifact's uri is ?name= (else "unnamed"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "checks.h"
#include "routes.h"
#include "st_sarif.h"
#include "st_utf8.h"
#include "upload.h"

/* A scan's state: the body's ingest (first, so that it never moves once begun) and
 * the form of its answer. */
typedef struct scan_state {
    tg_body_ingest body;
    bool sarif;
    bool early; /* answered before the end of the body (a long rest not read) */
} scan_state;

/* The answer's form from ?format= or Accept: 1 SARIF, 0 JSON, -1 answered 400. */
static int scan_wants_sarif(tg_request *req)
{
    const char *format = tg_query(req, "format");
    if (format != NULL) {
        if (strcmp(format, "sarif") == 0)
            return 1;
        if (strcmp(format, "json") == 0)
            return 0;
        tg_respond_problem(req, "invalid_format", "format is 'json' or 'sarif'");
        return -1;
    }
    const char *accept = tg_header(req, "Accept");
    unsigned sarif = tg_accept_quality(accept, ST_SARIF_MEDIA_TYPE);
    return sarif > 0 && sarif > tg_accept_quality(accept, "application/json") ? 1 : 0;
}

void tg_route_scan_start(tg_request *req)
{
    const char *kind_text = tg_query(req, "kind");
    st_gate_kind kind = ST_GATE_SAFETENSORS;
    if (kind_text != NULL && strcmp(kind_text, "sidecar") == 0) {
        kind = ST_GATE_SIDECAR;
    } else if (kind_text != NULL && strcmp(kind_text, "json") == 0) {
        kind = ST_GATE_SIDECAR_JSON;
    } else if (kind_text != NULL && strcmp(kind_text, "safetensors") != 0) {
        tg_respond_problem(req, "invalid_request", "kind is 'safetensors', 'sidecar' or 'json'");
        return;
    }
    int sarif = scan_wants_sarif(req);
    if (sarif < 0)
        return;
    uint64_t declared = tg_request_body_size(req);
    if (declared != ST_FILE_SIZE_UNKNOWN && declared > req->server->config.max_body) {
        tg_respond_problem(
            req, "payload_too_large", "the body declares %llu bytes; the limit is %llu",
            (unsigned long long)declared, (unsigned long long)req->server->config.max_body);
        return;
    }
    scan_state *scan = calloc(1, sizeof *scan);
    if (scan == NULL) {
        tg_respond_internal(req, "out of memory");
        return;
    }
    scan->sarif = sarif == 1;
    req->state = scan;
    if (tg_body_ingest_begin(&scan->body, req, kind, tg_query(req, "name"), declared, false,
                             false) != 0) {
        tg_respond_internal(req, "out of memory");
        return;
    }
}

void tg_route_scan_feed(tg_request *req, const uint8_t *data, size_t len)
{
    scan_state *scan = req->state;
    if (scan == NULL)
        return;
    tg_body_ingest *body = &scan->body;
    tg_ingest *ingest = &body->ingest;
    if (tg_body_ingest_feed(body, req, data, len) == TG_INGEST_OPEN)
        return;
    /* Refused: a long rest of the body is not read; the verdict goes out now (its
     * size and sha256 then cover the bytes read so far) and the connection closes. */
    uint64_t received = tg_ingest_received(ingest);
    uint64_t declared = ingest->config.declared;
    bool long_rest = req->close_now || (declared != ST_FILE_SIZE_UNKNOWN &&
                                        declared - (received < declared ? received : declared) >
                                            ingest->config.drain_limit);
    if (long_rest) {
        scan->early = true;
        req->close_now = false;
        tg_route_scan_finish(req);
        req->close_now = true;
    }
}

static json_t *string_or_null(const char *text)
{
    return (text && text[0]) ? json_string(text) : json_null();
}

/* The SARIF answer: one run, the body as its artifact (its length and SHA-256 when
 * the whole body was read; the declared length when the answer came before its end). */
static void respond_sarif(tg_request *req, const scan_state *scan, const st_verdict *verdict,
                          uint64_t size, const char *sha)
{
    uint64_t declared = scan->body.ingest.config.declared;
    st_sarif_file file = {
        .path = tg_query(req, "name"),
        .length = !scan->early ? size : declared,
        .sha256 = !scan->early ? sha : NULL,
    };
    json_t *log = st_sarif_log_new();
    if (log == NULL || st_sarif_log_add(log, &file, verdict) != 0) {
        json_decref(log);
        tg_respond_internal(req, "out of memory building the SARIF report");
        return;
    }
    static const char *const vary[] = {"Vary", "Accept", NULL};
    tg_respond_json_typed(req, 200, log, ST_SARIF_MEDIA_TYPE, vary);
}

void tg_route_scan_finish(tg_request *req)
{
    scan_state *scan = req->state;
    tg_body_ingest *state = scan != NULL ? &scan->body : NULL;
    if (state == NULL || state->ingest.gate == NULL) {
        tg_respond_internal(req, "the scan was not started");
        return;
    }
    tg_ingest *ingest = &state->ingest;
    tg_ingest_finish(ingest);
    if (ingest->state == TG_INGEST_OVER_BUDGET) {
        tg_body_ingest_respond_over_budget(state, req);
        return;
    }
    if (ingest->state == TG_INGEST_TOO_LARGE) {
        tg_respond_problem(req, "payload_too_large", "the body is larger than %llu bytes",
                           (unsigned long long)req->server->config.max_body);
        return;
    }
    if (ingest->state == TG_INGEST_FAILED) {
        tg_respond_internal(req, "the scan ran out of memory");
        return;
    }
    st_verdict verdict;
    st_gate_verdict(ingest->gate, &verdict);
    char sha[65];
    if (tg_ingest_digest(ingest, sha) != 0) {
        tg_respond_internal(req, "the scan's SHA-256 failed");
        return;
    }
    bool valid = ingest->state == TG_INGEST_OPEN && verdict.valid;
    uint64_t size = tg_ingest_received(ingest);
    if (scan->sarif) {
        verdict.valid = valid;
        respond_sarif(req, scan, &verdict, size, sha);
        return;
    }
    json_t *body = json_object();
    json_object_set_new(body, "valid", json_boolean(valid));
    json_object_set_new(body, "reason",
                        valid ? json_null() : json_string(st_reason_name(verdict.error.reason)));
    json_object_set_new(body, "detail", valid ? json_null() : string_or_null(verdict.error.detail));
    json_object_set_new(body, "offset",
                        (valid || verdict.error.offset == ST_NO_OFFSET)
                            ? json_null()
                            : json_integer((json_int_t)verdict.error.offset));
    json_object_set_new(body, "tensor", valid ? json_null() : st_error_tensor_json(&verdict.error));
    json_object_set_new(body, "format", json_string(st_format_name(verdict.format)));
    json_object_set_new(body, "findings", st_verdict_findings_json(&verdict));
    json_object_set_new(body, "size", json_integer((json_int_t)size));
    json_object_set_new(body, "sha256", json_string(sha));
    static const char *const vary[] = {"Vary", "Accept", NULL};
    tg_respond_json_headers(req, 200, body, vary);
}

void tg_route_scan_cleanup(tg_request *req)
{
    scan_state *scan = req->state;
    if (scan == NULL)
        return;
    tg_ingest_abort(&scan->body.ingest);
    free(scan);
    req->state = NULL;
}
