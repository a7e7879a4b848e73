/* Signatures of versions (docs/SIGNING.md): the server's own signature, made when a
 * version is frozen (the publish route, a conversion job's commit), and the check of
 * a signature a client uploaded as a file of the draft.
 *
 * Both work from the catalog's SHA-256 digests of the files, never from their bytes:
 * the digests are what the ingest pipeline computed while the bytes went in, so a
 * version of any size is signed in the time its file list takes to hash (a SHA-256
 * of 32 bytes per file), and a client's signature is compared with what is stored.
 * The format is common/model_sig.h. */
#ifndef TG_VERSION_SIGN_H
#define TG_VERSION_SIGN_H

#include <stdbool.h>
#include <stddef.h>

#include "blobstore.h"
#include "catalog.h"
#include "model_sig.h"
#include "pipeline.h"

/* The server's signing identity (serve --signing-key, --signing-certificate-chain). */
typedef struct tg_version_signer {
    tg_msig_key *key;
    tg_msig_certs chain; /* empty: key mode; else the signing certificate first */
    char *public_pem;    /* the public key, PEM */
    char *chain_pem;     /* the chain file's text as given, or NULL */
    char hint[2 * TG_SHA256_SIZE + 1];
} tg_version_signer;

/* Loads the private key (and the chain: the signing certificate first, then the
 * certificates up to a root, PEM). 0, or -1 with a sentence in err. */
int tg_version_signer_load(tg_version_signer *signer, const char *key_path, const char *chain_path,
                           char *err, size_t err_size);
void tg_version_signer_free(tg_version_signer *signer);

/* The manifest of a version's files (catalog records) named model_name, with the
 * default ignore list (model.sig, model.server.sig, .git...): finished. 0 or -1. */
int tg_version_manifest(const tg_file_record *files, size_t count, const char *model_name,
                        tg_msig_manifest *m);

/* Signs a version's files and stores the bundle as a blob (through the ingest
 * pipeline, a sidecar) whose record step is record(ctx, file, "[]"): the caller
 * writes the file row named TG_MSIG_SERVER_NAME. file gets the record. 0, or -1 with
 * a sentence in err (nothing recorded). */
int tg_version_sign(const tg_version_signer *signer, tg_blobstore *store, const char *model_name,
                    const tg_file_record *files, size_t count, tg_ingest_record_fn record,
                    void *ctx, tg_file_record *file, char *err, size_t err_size);

/* Checks a client's signature (the bytes of its model.sig) against trust and the
 * version's files: TG_MSIG_OK, or the status with a sentence in err (a mismatch
 * names the files). signer receives who signed. */
tg_msig_status tg_version_check_signature(const char *bundle, size_t len,
                                          const tg_msig_trust *trust, const tg_file_record *files,
                                          size_t count, char *signer, size_t signer_size, char *err,
                                          size_t err_size);

#endif
