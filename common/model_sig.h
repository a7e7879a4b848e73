/* Model signatures in the OpenSSF model-signing format v1 (the `model_signing` tool of
 * sigstore/model-transparency), the one implementation the CLI (`tensorgate sign`,
 * `verify`, `pull --verify`) and the server (signing at publish, checking an uploaded
 * model.sig) share. No HTTP, no SQL: bytes, files of a local directory and OpenSSL.
 *
 * The format, in layers (docs/SIGNING.md says it in full):
 *   manifest   the files of a model: relative POSIX names in byte order, each with the
 *              SHA-256 of its bytes, and the paths left out (ignore_paths);
 *   statement  an in-toto Statement v1, predicateType https://model_signing/signature/v1.0,
 *              one subject (the model's name) whose digest.sha256 is the SHA-256 of the
 *              raw file digests concatenated in the order of predicate.resources;
 *   envelope   DSSE: payloadType application/vnd.in-toto+json, the statement in base64,
 *              one ECDSA signature (DER, base64) over the PAE
 *              "DSSEv1 <len(type)> <type> <len(payload)> <payload>";
 *   bundle     a Sigstore bundle v0.3 JSON document (model.sig) holding the envelope and
 *              either a public key hint (hex SHA-256 of the key's PEM) or the signing
 *              certificate chain (DER, leaf first).
 * Keys are EC P-256, P-384 or P-521; the digest signed follows the curve (SHA-256,
 * SHA-384, SHA-512).
 *
 * A bundle is hostile input: its size, nesting, number of JSON values, base64
 * fields, resource count and names are bounded before anything is allocated for
 * them (TG_MSIG_*_MAX). */
#ifndef TG_MODEL_SIG_H
#define TG_MODEL_SIG_H

#include <stdbool.h>
#include <stddef.h>

#include "sha256.h"

#define TG_MSIG_DEFAULT_NAME "model.sig"
/* The name of the signature a tensorgate server adds to each version it publishes
 * (docs/SIGNING.md): never signed by anyone, as the signature file itself is not. */
#define TG_MSIG_SERVER_NAME "model.server.sig"
#define TG_MSIG_BUNDLE_MAX (64u << 20) /* bytes of a bundle accepted for parsing */
#define TG_MSIG_DEPTH_MAX 16           /* JSON nesting of a bundle or a statement */
#define TG_MSIG_SIG_MAX 512            /* bytes of a decoded signature */
#define TG_MSIG_CERTS_MAX 10           /* certificates in a bundle's chain */
#define TG_MSIG_CERT_MAX (64u << 10)   /* bytes of one decoded certificate */
#define TG_MSIG_NAME_MAX 4096          /* bytes of one resource name */
#define TG_MSIG_RESOURCES_MAX 100000u  /* resources in one statement */
/* JSON values ({ [ , : counted) of a bundle (its manifest is inside the payload's
 * base64, so a bundle itself is small) and of a statement (about 8 a resource) */
#define TG_MSIG_BUNDLE_TOKENS_MAX 4096u
#define TG_MSIG_STATEMENT_TOKENS_MAX (16u * TG_MSIG_RESOURCES_MAX)
#define TG_MSIG_PEM_MAX (1u << 20) /* bytes of a key or certificate file */
#define TG_MSIG_ERR_MAX 1024       /* room for an error or difference sentence */

/* The outcome of a verification, from the most to the least basic failure. */
typedef enum tg_msig_status {
    TG_MSIG_OK = 0,
    TG_MSIG_ERROR,         /* not the bundle's fault: out of memory, I/O, OpenSSL */
    TG_MSIG_MALFORMED,     /* not a bundle of this format (or past a bound) */
    TG_MSIG_UNSUPPORTED,   /* a bundle, but of a kind this code does not verify */
    TG_MSIG_BAD_SIGNATURE, /* the signature does not verify with the key it names */
    TG_MSIG_UNTRUSTED,     /* no trusted key or CA vouches for the signer */
    TG_MSIG_MISMATCH,      /* a valid signature over other files than these */
} tg_msig_status;

/* The stable lowercase name of a status ("ok", "malformed", "mismatch", ...). */
const char *tg_msig_status_name(tg_msig_status status);

/* --- manifests --------------------------------------------------------------------- */

typedef struct tg_msig_entry {
    char *name; /* relative POSIX path, no leading "/", no "." or ".." segment */
    unsigned char digest[TG_SHA256_SIZE];
} tg_msig_entry;

typedef struct tg_msig_manifest {
    char *model_name; /* the statement's subject name */
    tg_msig_entry *entries;
    size_t count, capacity;
    char **ignore; /* ignore_paths, relative to the model's directory */
    size_t ignore_count;
    bool allow_symlinks; /* as recorded; this code never follows a link */
} tg_msig_manifest;

/* An empty manifest named model_name (NULL: "model"). 0, or -1 out of memory. */
int tg_msig_manifest_init(tg_msig_manifest *m, const char *model_name);
void tg_msig_manifest_free(tg_msig_manifest *m);
/* Adds a file by name and raw digest, or by 64 hex digits. 0, or -1 (out of memory, or
 * a name that is no relative path / hex that is no digest). */
int tg_msig_manifest_add(tg_msig_manifest *m, const char *name,
                         const unsigned char digest[TG_SHA256_SIZE]);
int tg_msig_manifest_add_hex(tg_msig_manifest *m, const char *name, const char *hex);
/* Records a path left out (normalised: no leading "./", no trailing "/"). 0 or -1. */
int tg_msig_manifest_ignore(tg_msig_manifest *m, const char *path);
/* Records the default ignore list: signature_name (the signature file itself), the
 * reference tool's .git, .gitattributes, .github, .gitignore, and the server's
 * signature (TG_MSIG_SERVER_NAME). 0 or -1. */
int tg_msig_manifest_ignore_defaults(tg_msig_manifest *m, const char *signature_name);
/* Whether a relative name is one of the ignore paths or lies under one. */
bool tg_msig_manifest_ignores(const tg_msig_manifest *m, const char *name);
/* Sorts the entries by name, byte order (the order of predicate.resources), and drops
 * those the ignore list covers. Two entries with one name: -1. */
int tg_msig_manifest_finish(tg_msig_manifest *m);

/* The manifest of a directory: every regular file under dir (not those ignored: set
 * the ignore list of m first), hashed; finished (sorted). A symbolic link, a device
 * or a socket under dir is an error, as in the reference tool without
 * --allow-symlinks. 0, or -1 with a sentence in err. */
int tg_msig_manifest_from_dir(tg_msig_manifest *m, const char *dir, char *err, size_t err_size);

/* Compares what was signed with what is there (both finished). TG_MSIG_OK when the
 * names and digests agree, else TG_MSIG_MISMATCH with a sentence naming the files:
 * "changed: a; missing: b; extra: c" (missing = signed but absent, extra = present
 * but not signed), at most 20 names and a count of the rest. */
tg_msig_status tg_msig_manifest_compare(const tg_msig_manifest *signed_m,
                                        const tg_msig_manifest *actual, char *err, size_t err_size);

/* --- keys and certificates --------------------------------------------------------- */

typedef struct tg_msig_key tg_msig_key; /* an EC key of a supported curve */

/* A private key (PEM, unencrypted) or a public key (PEM SubjectPublicKeyInfo, or a
 * certificate's key). NULL with a sentence in err: not PEM, not EC, another curve. */
tg_msig_key *tg_msig_key_private_pem(const char *pem, size_t len, char *err, size_t err_size);
tg_msig_key *tg_msig_key_public_pem(const char *pem, size_t len, char *err, size_t err_size);
void tg_msig_key_free(tg_msig_key *key);
/* The public key as PEM (malloc'd, NUL-terminated), and its hint: the hex SHA-256 of
 * that PEM. NULL / -1 on failure. */
char *tg_msig_key_public_pem_text(const tg_msig_key *key);
int tg_msig_key_hint(const tg_msig_key *key, char hint[2 * TG_SHA256_SIZE + 1]);

/* A list of DER certificates, from PEM text holding one or more. */
typedef struct tg_msig_certs {
    unsigned char **der;
    size_t *len;
    size_t count;
} tg_msig_certs;
/* Appends the certificates of a PEM text (at least one). 0, or -1 with err. */
int tg_msig_certs_add_pem(tg_msig_certs *certs, const char *pem, size_t len, char *err,
                          size_t err_size);
void tg_msig_certs_free(tg_msig_certs *certs);

/* --- signing ----------------------------------------------------------------------- */

/* Signs a finished manifest. chain NULL: key mode (the bundle names the key by its
 * hint); else certificate mode, chain->der[0] the signing certificate (whose key must
 * be key's) and the rest the certificates up to a root, as given. Returns the bundle,
 * malloc'd JSON text with a final newline (*len its length), or NULL with err. */
char *tg_msig_sign(const tg_msig_manifest *m, const tg_msig_key *key, const tg_msig_certs *chain,
                   size_t *len, char *err, size_t err_size);

/* --- verifying --------------------------------------------------------------------- */

/* What a verifier trusts: public keys (key mode bundles) and CA certificates
 * (certificate mode bundles; roots, and any intermediates the signer trusts too). */
typedef struct tg_msig_trust {
    tg_msig_key **keys;
    size_t key_count;
    tg_msig_certs cas;
} tg_msig_trust;
/* Adds a trusted public key, from PEM. 0, or -1 with err. */
int tg_msig_trust_add_key_pem(tg_msig_trust *trust, const char *pem, size_t len, char *err,
                              size_t err_size);
void tg_msig_trust_free(tg_msig_trust *trust);

/* Parses a bundle, checks its signature against trust and its statement's
 * consistency (the subject digest over the resources), and hands back the signed
 * manifest (finished; with the recorded ignore_paths). signer, when not NULL,
 * receives a short text naming who signed ("key <hint>" or the leaf's subject).
 * TG_MSIG_OK, or another status with a sentence in err. */
tg_msig_status tg_msig_verify_bundle(const char *bundle, size_t len, const tg_msig_trust *trust,
                                     tg_msig_manifest *signed_out, char *signer, size_t signer_size,
                                     char *err, size_t err_size);

/* Reads a whole small file (at most max bytes) into a malloc'd, NUL-terminated
 * buffer. NULL with err (the file's name and errno's sentence, or too large). */
char *tg_msig_read_file(const char *path, size_t max, size_t *len, char *err, size_t err_size);

#endif
