/* Signatures (docs/SIGNING.md): the server's signing keys at a well-known public
 * route, a namespace's signature policy (trusted keys and CAs, whether a signature
 * is required), and what publish does with signatures: it checks a client's
 * model.sig against the namespace's policy and adds the server's model.server.sig.
 * The format is common/model_sig.h; signing and checking from catalog digests is
 * server/ingest/version_sign.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blobstore.h"
#include "catalog.h"
#include "checks.h"
#include "log.h"
#include "model_sig.h"
#include "routes.h"
#include "version_sign.h"

#define POLICY_PEMS_MAX 32 /* trusted keys + trusted CAs of one namespace */

/* ---- the server's keys --------------------------------------------------------- */

void tg_route_signing_keys(tg_request *req)
{
    const tg_version_signer *signer = req->server->signer;
    json_t *keys = json_array();
    json_t *body = json_pack("{s:o, s:s}", "keys", keys, "signature_file", TG_MSIG_SERVER_NAME);
    if (body != NULL && signer != NULL) {
        json_array_append_new(keys, json_pack("{s:s, s:s, s:s}", "hint", signer->hint, "pem",
                                              signer->public_pem, "mode",
                                              signer->chain.count ? "certificate" : "key"));
        if (signer->chain_pem != NULL)
            json_object_set_new(body, "certificate_chain", json_string(signer->chain_pem));
    }
    if (body == NULL) {
        tg_respond_internal(req, "out of memory");
        return;
    }
    tg_respond_json(req, 200, body);
}

/* ---- a namespace's policy ------------------------------------------------------ */

/* The trust and the rule of a stored policy text. 0, or -1 (err: why). A namespace
 * without a policy: an empty trust, nothing required. */
static int policy_trust(const char *text, tg_msig_trust *trust, bool *require, char *err,
                        size_t err_size)
{
    memset(trust, 0, sizeof *trust);
    *require = false;
    if (text == NULL)
        return 0;
    json_t *doc = json_loads(text, 0, NULL);
    if (doc == NULL) {
        snprintf(err, err_size, "the stored policy is not JSON");
        return -1;
    }
    *require = json_is_true(json_object_get(doc, "require_signature"));
    int rc = 0;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(doc, "trusted_keys"), i, v)
    {
        const char *pem = json_string_value(v);
        if (pem == NULL || tg_msig_trust_add_key_pem(trust, pem, strlen(pem), err, err_size) != 0)
            rc = -1;
    }
    json_array_foreach(json_object_get(doc, "trusted_cas"), i, v)
    {
        const char *pem = json_string_value(v);
        if (pem == NULL || tg_msig_certs_add_pem(&trust->cas, pem, strlen(pem), err, err_size) != 0)
            rc = -1;
    }
    json_decref(doc);
    return rc;
}

static json_t *policy_json(const char *org, const char *text)
{
    json_t *doc = text ? json_loads(text, 0, NULL) : NULL;
    if (doc == NULL)
        doc = json_pack("{s:[], s:[], s:b}", "trusted_keys", "trusted_cas", "require_signature", 0);
    if (doc != NULL)
        json_object_set_new(doc, "namespace", json_string(org));
    return doc;
}

void tg_route_namespace_signing_get(tg_request *req)
{
    const char *org = tg_param(req, "org");
    if (org == NULL || !tg_valid_name_part(org)) {
        tg_respond_problem(req, "invalid_name", "a namespace is a name part");
        return;
    }
    char *text = NULL;
    tg_cat_status status = tg_catalog_signing_get(req->server->catalog, org, &text);
    if (status != TG_CAT_OK && status != TG_CAT_NOT_FOUND) {
        tg_respond_catalog_failure(req, status);
        return;
    }
    json_t *body = policy_json(org, text);
    free(text);
    if (body == NULL)
        tg_respond_internal(req, "out of memory");
    else
        tg_respond_json(req, 200, body);
}

/* A list of PEM strings in body[field], each parsed by check. 0, or -1 (answered). */
static int check_pems(tg_request *req, json_t *body, const char *field, bool keys, size_t *total)
{
    json_t *list = json_object_get(body, field);
    if (list == NULL)
        return 0;
    if (!json_is_array(list)) {
        tg_respond_problem(req, "invalid_request", "\"%s\" is a list of PEM texts", field);
        return -1;
    }
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        const char *pem = json_string_value(v);
        char why[TG_MSIG_ERR_MAX] = "not a string";
        int ok = 0;
        if (pem != NULL && keys) {
            tg_msig_key *key = tg_msig_key_public_pem(pem, strlen(pem), why, sizeof why);
            ok = key != NULL;
            tg_msig_key_free(key);
        } else if (pem != NULL) {
            tg_msig_certs certs = {0};
            ok = tg_msig_certs_add_pem(&certs, pem, strlen(pem), why, sizeof why) == 0;
            tg_msig_certs_free(&certs);
        }
        if (!ok) {
            tg_respond_problem(req, "invalid_request", "%s[%zu]: %s", field, i, why);
            return -1;
        }
        if (++*total > POLICY_PEMS_MAX) {
            tg_respond_problem(req, "invalid_request",
                               "at most %d trusted keys and CA certificates in all",
                               POLICY_PEMS_MAX);
            return -1;
        }
    }
    return 0;
}

void tg_route_namespace_signing_put(tg_request *req)
{
    const char *org = tg_param(req, "org");
    if (org == NULL || !tg_valid_name_part(org)) {
        tg_respond_problem(req, "invalid_name", "a namespace is a name part");
        return;
    }
    json_t *body = tg_json_body(req);
    if (body == NULL)
        return;
    static const char *const fields[] = {"trusted_keys", "trusted_cas", "require_signature", NULL};
    size_t total = 0;
    json_t *require = json_object_get(body, "require_signature");
    if (!tg_json_known_fields(req, body, fields) ||
        check_pems(req, body, "trusted_keys", true, &total) != 0 ||
        check_pems(req, body, "trusted_cas", false, &total) != 0) {
        json_decref(body);
        return;
    }
    if (require != NULL && !json_is_boolean(require)) {
        tg_respond_problem(req, "invalid_request", "\"require_signature\" is true or false");
        json_decref(body);
        return;
    }
    json_t *stored = json_pack(
        "{s:O?, s:O?, s:b}", "trusted_keys", json_object_get(body, "trusted_keys"), "trusted_cas",
        json_object_get(body, "trusted_cas"), "require_signature", json_is_true(require));
    json_decref(body);
    if (stored != NULL && json_object_get(stored, "trusted_keys") == json_null())
        json_object_set_new(stored, "trusted_keys", json_array());
    if (stored != NULL && json_object_get(stored, "trusted_cas") == json_null())
        json_object_set_new(stored, "trusted_cas", json_array());
    char *text = stored ? json_dumps(stored, JSON_COMPACT) : NULL;
    json_decref(stored);
    if (text == NULL) {
        tg_respond_internal(req, "out of memory");
        return;
    }
    tg_cat_status status = tg_catalog_signing_set(req->server->catalog, org, text);
    if (status != TG_CAT_OK) {
        free(text);
        tg_respond_catalog_failure(req, status);
        return;
    }
    tg_log(TG_LOG_INFO, "signature policy of %s set", org);
    json_t *answer = policy_json(org, text);
    free(text);
    if (answer == NULL)
        tg_respond_internal(req, "out of memory");
    else
        tg_respond_json(req, 200, answer);
}

/* ---- at publish ---------------------------------------------------------------- */

/* The one place a signature refused at publish is reported: the log now; the
 * webhook event signature.invalid (and the audit log) belong here too. Answers the
 * request with reason and the sentence. */
static void signature_refused(tg_request *req, const tg_model *model, const tg_version *version,
                              const char *reason, const char *detail)
{
    tg_log(TG_LOG_WARN, "publish of %s/%s version %lld refused: %s: %s", model->org, model->name,
           (long long)version->number, reason, detail);
    /* the namespace's webhooks hear of it (signature.invalid); nothing was changed, so
     * the event has a transaction of its own, and a failure to write it is logged */
    char repo[2 * TG_NAME_MAX + 2];
    snprintf(repo, sizeof repo, "%s/%s", model->org, model->name);
    json_t *data = json_pack("{s:s, s:I, s:s, s:s}", "model", repo, "version",
                             (json_int_t)version->number, "reason", reason, "detail", detail);
    char *text = data != NULL ? json_dumps(data, JSON_COMPACT) : NULL;
    json_decref(data);
    if (text == NULL || tg_catalog_webhook_event_add(req->server->catalog, model->org,
                                                     "signature.invalid", text) != TG_CAT_OK)
        tg_log(TG_LOG_ERROR, "the signature.invalid event of %s version %lld was not recorded",
               repo, (long long)version->number);
    free(text);
    tg_respond_problem(req, reason, "version %lld of %s/%s: %s", (long long)version->number,
                       model->org, model->name, detail);
}

static const tg_file_record *find_file(const tg_file_records *files, const char *path)
{
    for (size_t i = 0; i < files->count; i++)
        if (strcmp(files->items[i].path, path) == 0)
            return &files->items[i];
    return NULL;
}

/* A stored file's bytes, whole (a signature: bounded by TG_MSIG_BUNDLE_MAX). */
static char *read_blob(tg_server *server, const tg_file_record *file)
{
    if (file->size > TG_MSIG_BUNDLE_MAX)
        return NULL;
    tg_blob_check check;
    tg_blob_reader *blob = tg_blob_open(server->blobs, file->sha256, file->size, &check);
    if (blob == NULL)
        return NULL;
    char *text = malloc(file->size + 1);
    if (text != NULL && tg_blob_read_at(blob, text, (size_t)file->size, 0) != 0) {
        free(text);
        text = NULL;
    }
    tg_blob_close(blob);
    if (text != NULL)
        text[file->size] = '\0';
    return text;
}

/* The client's model.sig against the namespace's policy. 0 go on, -1 answered. */
static int check_client_signature(tg_request *req, const tg_model *model, const tg_version *version,
                                  const tg_file_records *files)
{
    tg_server *server = req->server;
    char *policy = NULL;
    tg_cat_status status = tg_catalog_signing_get(server->catalog, model->org, &policy);
    if (status != TG_CAT_OK && status != TG_CAT_NOT_FOUND) {
        tg_respond_catalog_failure(req, status);
        return -1;
    }
    tg_msig_trust trust;
    bool require = false;
    char why[TG_MSIG_ERR_MAX] = "";
    int rc = -1;
    if (policy_trust(policy, &trust, &require, why, sizeof why) != 0) {
        tg_respond_internal(req, "the signature policy of %s could not be read: %s", model->org,
                            why);
        goto out;
    }
    const tg_file_record *sig = find_file(files, TG_MSIG_DEFAULT_NAME);
    bool trusts = trust.key_count > 0 || trust.cas.count > 0;
    if (sig == NULL) {
        if (require)
            signature_refused(req, model, version, "signature_required",
                              "the namespace requires a signature: upload a model.sig "
                              "(OpenSSF model signing v1) made by a trusted key");
        else
            rc = 0;
        goto out;
    }
    if (!trusts) {
        /* nobody to check it against: kept as an ordinary file, unless required */
        if (require)
            signature_refused(req, model, version, "signature_untrusted",
                              "the namespace requires a signature and trusts no key or CA yet");
        else
            rc = 0;
        goto out;
    }
    if (sig->size > TG_MSIG_BUNDLE_MAX) {
        char detail[128];
        snprintf(detail, sizeof detail, "model.sig is larger than %u bytes: not a signature",
                 TG_MSIG_BUNDLE_MAX);
        signature_refused(req, model, version, "signature_invalid", detail);
        goto out;
    }
    char *bundle = read_blob(server, sig);
    if (bundle == NULL) {
        tg_respond_internal(req, "model.sig could not be read");
        goto out;
    }
    char signer[256] = "";
    tg_msig_status st =
        tg_version_check_signature(bundle, (size_t)sig->size, &trust, files->items, files->count,
                                   signer, sizeof signer, why, sizeof why);
    free(bundle);
    switch (st) {
    case TG_MSIG_OK:
        tg_log(TG_LOG_INFO, "%s/%s version %lld: model.sig verified, signed by %s", model->org,
               model->name, (long long)version->number, signer);
        rc = 0;
        break;
    case TG_MSIG_ERROR:
        tg_respond_internal(req, "model.sig could not be checked: %s", why);
        break;
    case TG_MSIG_UNTRUSTED:
        signature_refused(req, model, version, "signature_untrusted", why);
        break;
    case TG_MSIG_MISMATCH: {
        char detail[TG_MSIG_ERR_MAX + 64];
        snprintf(detail, sizeof detail, "model.sig does not match the files: %s", why);
        signature_refused(req, model, version, "signature_mismatch", detail);
        break;
    }
    default: {
        char detail[TG_MSIG_ERR_MAX + 64];
        snprintf(detail, sizeof detail, "model.sig is not a valid signature (%s): %s",
                 tg_msig_status_name(st), why);
        signature_refused(req, model, version, "signature_invalid", detail);
        break;
    }
    }
out:
    tg_msig_trust_free(&trust);
    free(policy);
    return rc;
}

typedef struct draft_row {
    tg_catalog *catalog;
    int64_t version_id;
    tg_cat_status status;
} draft_row;

static void record_draft_file(void *arg, const tg_file_record *file, const char *stats)
{
    draft_row *row = arg;
    row->status = tg_catalog_file_put(row->catalog, row->version_id, file, stats);
}

int tg_signing_at_publish(tg_request *req, const tg_model *model, const tg_version *version,
                          tg_file_records *files)
{
    tg_server *server = req->server;
    if (server->signer == NULL && find_file(files, TG_MSIG_SERVER_NAME) != NULL) {
        signature_refused(req, model, version, "signature_invalid",
                          TG_MSIG_SERVER_NAME " is the name of the server's own signature; this "
                                              "server signs nothing, rename the file");
        return -1;
    }
    if (check_client_signature(req, model, version, files) != 0)
        return -1;
    if (server->signer == NULL)
        return 0;
    draft_row row = {server->catalog, version->id, TG_CAT_ERROR};
    tg_file_record sig;
    char why[TG_MSIG_ERR_MAX] = "";
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int signed_rc = tg_version_sign(server->signer, server->blobs, model->name, files->items,
                                    files->count, record_draft_file, &row, &sig, why, sizeof why);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (signed_rc == 0) {
        uint64_t bytes = 0;
        for (size_t i = 0; i < files->count; i++)
            bytes += files->items[i].size;
        tg_log(TG_LOG_INFO,
               "%s/%s version %lld: model.server.sig over %zu files (%llu bytes) in %.1f ms",
               model->org, model->name, (long long)version->number, files->count,
               (unsigned long long)bytes,
               (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    }
    if (signed_rc != 0) {
        tg_respond_internal(req, "%s; the version is still a draft", why);
        return -1;
    }
    if (row.status != TG_CAT_OK) {
        tg_respond_catalog_failure(req, row.status);
        return -1;
    }
    /* the list now holds the signature (replacing any earlier one of the draft) */
    free(files->items);
    memset(files, 0, sizeof *files);
    tg_cat_status listed =
        tg_catalog_file_list(server->catalog, version->id, NULL, 0, tg_file_records_collect, files);
    if (listed != TG_CAT_OK || files->failed) {
        tg_respond_catalog_failure(req, listed == TG_CAT_OK ? TG_CAT_ERROR : listed);
        return -1;
    }
    return 0;
}
