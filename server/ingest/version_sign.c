/* Signatures of versions (see version_sign.h). */
#include "version_sign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tg_version_signer_load(tg_version_signer *signer, const char *key_path, const char *chain_path,
                           char *err, size_t err_size)
{
    memset(signer, 0, sizeof *signer);
    size_t len = 0;
    char why[TG_MSIG_ERR_MAX];
    char *pem = tg_msig_read_file(key_path, TG_MSIG_PEM_MAX, &len, why, sizeof why);
    if (pem == NULL) {
        snprintf(err, err_size, "--signing-key: %s", why);
        return -1;
    }
    signer->key = tg_msig_key_private_pem(pem, len, why, sizeof why);
    free(pem);
    if (signer->key == NULL) {
        snprintf(err, err_size, "--signing-key %s: %s", key_path, why);
        return -1;
    }
    signer->public_pem = tg_msig_key_public_pem_text(signer->key);
    if (signer->public_pem == NULL || tg_msig_key_hint(signer->key, signer->hint) != 0) {
        snprintf(err, err_size, "--signing-key %s: its public key could not be written", key_path);
        tg_version_signer_free(signer);
        return -1;
    }
    if (chain_path != NULL && chain_path[0] != '\0') {
        signer->chain_pem = tg_msig_read_file(chain_path, TG_MSIG_PEM_MAX, &len, why, sizeof why);
        if (signer->chain_pem == NULL ||
            tg_msig_certs_add_pem(&signer->chain, signer->chain_pem, len, why, sizeof why) != 0) {
            snprintf(err, err_size, "--signing-certificate-chain: %s", why);
            tg_version_signer_free(signer);
            return -1;
        }
        /* a chain whose first certificate is not the key's would sign nothing valid:
         * found now, by signing an empty manifest, rather than at the first publish */
        tg_msig_manifest probe;
        size_t n = 0;
        char *bundle = NULL;
        if (tg_msig_manifest_init(&probe, "probe") == 0)
            bundle = tg_msig_sign(&probe, signer->key, &signer->chain, &n, why, sizeof why);
        tg_msig_manifest_free(&probe);
        free(bundle);
        if (bundle == NULL) {
            snprintf(err, err_size, "--signing-certificate-chain %s: %s", chain_path, why);
            tg_version_signer_free(signer);
            return -1;
        }
    }
    return 0;
}

void tg_version_signer_free(tg_version_signer *signer)
{
    if (signer == NULL)
        return;
    tg_msig_key_free(signer->key);
    tg_msig_certs_free(&signer->chain);
    free(signer->public_pem);
    free(signer->chain_pem);
    memset(signer, 0, sizeof *signer);
}

int tg_version_manifest(const tg_file_record *files, size_t count, const char *model_name,
                        tg_msig_manifest *m)
{
    if (tg_msig_manifest_init(m, model_name) != 0 ||
        tg_msig_manifest_ignore_defaults(m, TG_MSIG_DEFAULT_NAME) != 0)
        return -1;
    for (size_t i = 0; i < count; i++)
        if (tg_msig_manifest_add_hex(m, files[i].path, files[i].sha256) != 0)
            return -1;
    return tg_msig_manifest_finish(m);
}

int tg_version_sign(const tg_version_signer *signer, tg_blobstore *store, const char *model_name,
                    const tg_file_record *files, size_t count, tg_ingest_record_fn record,
                    void *ctx, tg_file_record *file, char *err, size_t err_size)
{
    tg_msig_manifest m;
    char why[TG_MSIG_ERR_MAX] = "";
    size_t len = 0;
    char *bundle = NULL;
    if (tg_version_manifest(files, count, model_name, &m) == 0)
        bundle = tg_msig_sign(&m, signer->key, signer->chain.count ? &signer->chain : NULL, &len,
                              why, sizeof why);
    else
        snprintf(why, sizeof why, "a file name the format cannot hold (or out of memory)");
    tg_msig_manifest_free(&m);
    if (bundle == NULL) {
        snprintf(err, err_size, "signing failed: %s", why);
        return -1;
    }
    tg_ingest_config config = {
        .kind = st_gate_sidecar_kind(TG_MSIG_SERVER_NAME),
        .name = TG_MSIG_SERVER_NAME,
        .declared = len,
        .max_bytes = UINT64_MAX,
        .store = store,
        .digest_name = "signature",
        .drain_limit = UINT64_MAX,
    };
    tg_ingest ingest;
    memset(&ingest, 0, sizeof ingest);
    int rc = -1;
    if (tg_ingest_begin(&ingest, &config) != 0 ||
        tg_ingest_feed(&ingest, bundle, len) != TG_INGEST_OPEN ||
        tg_ingest_finish(&ingest) != TG_INGEST_OPEN) {
        snprintf(err, err_size, "the signature could not be stored (ingest state %d)",
                 (int)ingest.state);
    } else if (tg_ingest_commit(&ingest, TG_MSIG_SERVER_NAME, file, record, ctx) != 0) {
        snprintf(err, err_size, "the signature could not be stored (commit)");
    } else {
        rc = 0;
    }
    tg_ingest_abort(&ingest);
    free(bundle);
    return rc;
}

tg_msig_status tg_version_check_signature(const char *bundle, size_t len,
                                          const tg_msig_trust *trust, const tg_file_record *files,
                                          size_t count, char *signer, size_t signer_size, char *err,
                                          size_t err_size)
{
    tg_msig_manifest signed_m, actual;
    tg_msig_status st =
        tg_msig_verify_bundle(bundle, len, trust, &signed_m, signer, signer_size, err, err_size);
    if (st != TG_MSIG_OK)
        return st;
    if (tg_version_manifest(files, count, "version", &actual) != 0) {
        snprintf(err, err_size, "out of memory");
        st = TG_MSIG_ERROR;
    } else {
        /* what the signer left out is left out here, and the server's own names too */
        for (size_t i = 0; i < signed_m.ignore_count; i++)
            tg_msig_manifest_ignore(&actual, signed_m.ignore[i]);
        for (size_t i = 0; i < actual.ignore_count; i++)
            tg_msig_manifest_ignore(&signed_m, actual.ignore[i]);
        if (tg_msig_manifest_finish(&actual) != 0 || tg_msig_manifest_finish(&signed_m) != 0) {
            snprintf(err, err_size, "out of memory");
            st = TG_MSIG_ERROR;
        } else {
            st = tg_msig_manifest_compare(&signed_m, &actual, err, err_size);
        }
    }
    tg_msig_manifest_free(&signed_m);
    tg_msig_manifest_free(&actual);
    return st;
}
