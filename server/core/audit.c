/* The audit log's writer (audit.h). */
#include "audit.h"

#include <inttypes.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "sha256.h"
#include "st_utf8.h"

bool tg_audit_due(const tg_request *req, unsigned status)
{
    if (req->route == NULL || req->server == NULL || req->server->catalog == NULL)
        return false;
    if (status == 401 || status == 403)
        return true;
    return !req->is_head && strcmp(req->method, "GET") != 0;
}

/* in as UTF-8 text into out (out_len > 0): a byte that does not begin a valid
 * sequence, and a control character, become the text \xNN; cut on a character. */
static void clean_text(const char *in, char *out, size_t out_len)
{
    const unsigned char *p = (const unsigned char *)(in ? in : "");
    size_t n = strlen((const char *)p), o = 0;
    while (n > 0 && o + 1 < out_len) {
        size_t len = st_utf8_sequence_length(p, n);
        if (len == 0 || (len == 1 && (p[0] < 0x20 || p[0] == 0x7f))) {
            if (o + 5 > out_len)
                break;
            snprintf(out + o, 5, "\\x%02x", p[0]);
            o += 4;
            len = 1;
        } else {
            if (o + len + 1 > out_len)
                break;
            memcpy(out + o, p, len);
            o += len;
        }
        p += len;
        n -= len;
    }
    out[o] = '\0';
}

/* The client's X-Request-Id when it is 1..64 characters of [A-Za-z0-9._:-], else one
 * made here: "tg-" and 24 random hex digits. */
static void request_id(const tg_request *req, char out[TG_AUDIT_REQUEST_ID_MAX + 1])
{
    const char *given =
        MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, "X-Request-Id");
    size_t len = given ? strlen(given) : 0;
    if (len > 0 && len <= TG_AUDIT_REQUEST_ID_MAX &&
        strspn(given, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") ==
            len) {
        memcpy(out, given, len + 1);
        return;
    }
    unsigned char bytes[12] = {0};
    if (RAND_bytes(bytes, sizeof bytes) != 1)
        tg_log(TG_LOG_WARN, "audit: RAND_bytes failed; the request id is zeros");
    int o = snprintf(out, TG_AUDIT_REQUEST_ID_MAX + 1, "tg-");
    for (size_t i = 0; i < sizeof bytes; i++)
        o += snprintf(out + o, (size_t)(TG_AUDIT_REQUEST_ID_MAX + 1 - o), "%02x", bytes[i]);
}

/* The SHA-256 hex of the request's bearer token (an "hf_tg_..." token as "tg_..."),
 * as the catalog keeps it: false when there is none. */
static bool token_hash(const tg_request *req, char hash[65])
{
    const char *header =
        MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, "Authorization");
    if (header == NULL || strncasecmp(header, "Bearer ", 7) != 0)
        return false;
    const char *token = header + 7;
    while (*token == ' ')
        token++;
    if (strncmp(token, "hf_tg_", 6) == 0)
        token += 3;
    size_t len = strlen(token);
    return len > 0 && len <= 256 && tg_sha256_hex(token, len, hash, "token") == 0;
}

void tg_audit_answer(tg_request *req, unsigned status, struct MHD_Response *response)
{
    tg_audit_record r;
    memset(&r, 0, sizeof r);
    snprintf(r.action, sizeof r.action, "%s %s", req->method ? req->method : "?",
             req->route->pattern);
    clean_text(req->url, r.resource, sizeof r.resource);
    r.status = status;
    clean_text(req->reason, r.reason, sizeof r.reason);
    request_id(req, r.request_id);
    clean_text(req->client, r.client, sizeof r.client);
    clean_text(MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, "User-Agent"),
               r.user_agent, sizeof r.user_agent);
    if (response != NULL)
        MHD_add_response_header(response, "X-Request-Id", r.request_id);
    char hash[65];
    bool has_token = token_hash(req, hash);
    tg_cat_status cat = tg_catalog_audit_append(req->server->catalog, has_token ? hash : NULL, &r);
    if (cat == TG_CAT_OK) {
        __atomic_fetch_add(&req->server->audit.records, 1, __ATOMIC_RELAXED);
        return;
    }
    __atomic_fetch_add(&req->server->audit.failures, 1, __ATOMIC_RELAXED);
    tg_log(TG_LOG_ERROR,
           "audit: record not written (the catalog failed): action=\"%s\" resource=\"%s\" "
           "status=%u reason=\"%s\" token=%s request_id=%s client=%s user_agent=\"%s\"",
           r.action, r.resource, r.status, r.reason, has_token ? "given" : "none", r.request_id,
           r.client, r.user_agent);
}
