/* libFuzzer target for the model-signature bundle parser and verifier
 * (common/model_sig.c): a hostile model.sig as a client uploads it or a pulled
 * version holds it.
 *
 * The input is a whole bundle, copied into an allocation of exactly its size so that
 * AddressSanitizer sees any read past it. It is verified against a fixed trust (one
 * P-256 key made at start, and no CA); checked, aborting on a violation:
 *   - the verdict is one of the statuses, with a sentence unless it is ok;
 *   - an accepted bundle's manifest holds valid, distinct names in byte order and
 *     compares equal with itself;
 *   - nothing leaks (LeakSanitizer at exit).
 * A first input builds a valid bundle with the key, so mutations start from one.
 *
 * Build: make build-fuzz/fuzz_model_sig (clang, libFuzzer, OpenSSL, jansson). */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model_sig.h"

static tg_msig_trust trust;

static void setup(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    EVP_PKEY *pkey = EVP_EC_gen("P-256");
    BIO *b = BIO_new(BIO_s_mem());
    PEM_write_bio_PUBKEY(b, pkey);
    char *pem;
    long n = BIO_get_mem_data(b, &pem);
    char err[TG_MSIG_ERR_MAX];
    if (tg_msig_trust_add_key_pem(&trust, pem, (size_t)n, err, sizeof err) != 0)
        abort();
    BIO_free(b);
    EVP_PKEY_free(pkey);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    char *copy = malloc(size ? size : 1);
    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);
    tg_msig_manifest m;
    char err[TG_MSIG_ERR_MAX] = "", signer[256];
    tg_msig_status st =
        tg_msig_verify_bundle(copy, size, &trust, &m, signer, sizeof signer, err, sizeof err);
    if (st > TG_MSIG_MISMATCH)
        abort();
    if (st != TG_MSIG_OK && err[0] == '\0')
        abort();
    if (st == TG_MSIG_OK) {
        for (size_t i = 1; i < m.count; i++)
            if (strcmp(m.entries[i - 1].name, m.entries[i].name) >= 0)
                abort();
        if (tg_msig_manifest_compare(&m, &m, err, sizeof err) != TG_MSIG_OK)
            abort();
        tg_msig_manifest_free(&m);
    }
    free(copy);
    return 0;
}
