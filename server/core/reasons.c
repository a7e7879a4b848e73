/* The reason table (reasons.h): every reason code of the service's own problem
 * answers and the one HTTP status it implies, in openapi.yaml's ServiceReason order.
 * A call site names the reason (tg_respond_problem), never the status; the title is
 * the status's phrase. tests/unit/server/core/reasons.c checks this table against
 * that enum, both ways. The gate's reasons (lib/st_error.c) are answered apart
 * (tg_respond_gate_problem: 415 or 422). */
#include "reasons.h"

#include <string.h>

static const tg_reason reasons[] = {
    {"not_found", 404},
    {"model_not_found", 404},
    {"repo_type_not_served", 404},
    {"version_not_found", 404},
    {"version_deleted", 410},
    {"storage_quota_exceeded", 413},
    {"file_not_found", 404},
    {"alias_not_found", 404},
    {"asset_not_found", 404},
    {"not_safetensors", 404},
    {"invalid_name", 400},
    {"invalid_path", 400},
    {"invalid_json", 400},
    {"invalid_request", 400},
    {"unknown_parameter", 400},
    {"invalid_time", 400},
    {"invalid_sha256", 400},
    {"invalid_limit", 400},
    {"invalid_cursor", 400},
    {"invalid_filter", 400},
    {"reserved_alias", 400},
    {"invalid_tag", 400},
    {"too_many_tags", 409},
    {"model_exists", 409},
    {"version_published", 409},
    {"version_changed", 409},
    {"version_not_draft", 409},
    {"version_not_published", 409},
    {"index_mismatch", 422},
    {"signature_invalid", 422},
    {"signature_mismatch", 422},
    {"signature_required", 422},
    {"signature_untrusted", 422},
    {"empty_version", 422},
    {"unauthorized", 401},
    {"forbidden", 403},
    {"payload_too_large", 413},
    {"body_length_mismatch", 400},
    {"range_not_satisfiable", 416},
    {"insufficient_storage", 507},
    {"catalog_unavailable", 503},
    {"blob_damaged", 500},
    {"method_not_allowed", 405},
    {"rate_limited", 429},
    {"uri_too_long", 414},
    {"request_timeout", 408},
    {"too_many_query_arguments", 400},
    {"headers_too_large", 431},
    {"json_too_deep", 400},
    {"ambiguous_framing", 400},
    {"bad_content_length", 400},
    {"malformed_header", 400},
    {"missing_host", 400},
    {"duplicate_host", 400},
    {"unsupported_transfer_encoding", 501},
    {"not_ready", 503},
    {"internal", 500},
    {"internal_error", 500},
    {"tensor_not_found", 404},
    {"invalid_slice", 400},
    {"slice_out_of_range", 400},
    {"invalid_dtype", 400},
    {"invalid_format", 400},
    {"unsupported_conversion", 422},
    {"gguf_quantized", 422},
    {"unsupported_tensor", 422},
    {"ambiguous_tensor", 409},
    {"invalid_selector", 400},
    {"bundle_too_large", 413},
    {"npy_unsupported_dtype", 406},
    {"unsupported_dtype", 422},
    {"tensors_not_found", 422},
    {"nothing_to_convert", 422},
    {"import_url_invalid", 400},
    {"mirror_invalid", 400},
    {"mirror_refused", 422},
    {"mirror_upstream_failed", 502},
    {"mirror_upstream_invalid", 502},
    {"import_scheme_forbidden", 422},
    {"import_address_forbidden", 422},
    {"job_not_found", 404},
    {"job_finished", 409},
    /* source_unreadable, interrupted and cancelled end a failed job (its error), never an
     * HTTP answer; the status is the one that job error carries (routes/jobs.c) */
    {"source_unreadable", 500},
    {"interrupted", 500},
    {"cancelled", 409},
    {"token_revoked", 401},
    {"preload_not_found", 404},
    {"no_tensors", 422},
    {"invalid_device", 400},
    {"not_resident", 409},
    {"device_unavailable", 503},
    {"preload_budget", 507},
    {"quota_exceeded", 429},
    {"resource_exhausted", 503},
    {"blob_store_unavailable", 503},
    {"parent_commit_mismatch", 412},
    {"ref_exists", 409},
    {"not_a_branch", 400},
    {"digest_mismatch", 400},
    {"webhook_not_found", 404},
    {"webhook_delivery_not_found", 404},
    {"webhook_url_invalid", 400},
    {"webhook_address_forbidden", 422},
    {"webhook_events_invalid", 400},
    {"webhook_secret_invalid", 400},
};

const tg_reason *tg_reasons(size_t *count)
{
    *count = sizeof reasons / sizeof reasons[0];
    return reasons;
}

unsigned tg_reason_status(const char *reason)
{
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (strcmp(reasons[i].name, reason) == 0)
            return reasons[i].status;
    return 0;
}

unsigned tg_gate_reason_status(st_reason reason)
{
    return reason == ST_REFUSED_FORMAT ? 415 : 422;
}
