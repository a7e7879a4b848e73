/* Unit tests for server/ingest/version_sign.c: the signer loads a key (and refuses a
 * missing file, a non-EC key, a chain whose certificate is another key's), a
 * version's manifest leaves the signature names out, tg_version_sign stores the
 * bundle as a blob through the ingest pipeline and records it under
 * model.server.sig, the stored bundle verifies over the catalog digests it was made
 * from, and a client's signature is checked against trust and the files (ok,
 * mismatch naming the file, untrusted). */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blobstore.h"
#include "test.h"
#include "version_sign.h"

static char root[64];

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fputs(text, f);
        fclose(f);
    }
}

/* A fresh P-256 key written as PEM to path; its public PEM in pub (malloc'd). */
static void key_file(const char *path, char **pub)
{
    EVP_PKEY *pkey = EVP_EC_gen("P-256");
    FILE *f = fopen(path, "w");
    PEM_write_PrivateKey(f, pkey, NULL, NULL, 0, NULL, NULL);
    fclose(f);
    BIO *b = BIO_new(BIO_s_mem());
    PEM_write_bio_PUBKEY(b, pkey);
    char *data;
    long n = BIO_get_mem_data(b, &data);
    *pub = strndup(data, (size_t)n);
    BIO_free(b);
    EVP_PKEY_free(pkey);
}

static tg_file_record record(const char *path, const char *text)
{
    tg_file_record f;
    memset(&f, 0, sizeof f);
    snprintf(f.path, sizeof f.path, "%s", path);
    tg_sha256_hex(text, strlen(text), f.sha256, "test");
    f.size = strlen(text);
    return f;
}

typedef struct recorded {
    int calls;
    tg_file_record file;
} recorded;

static void record_row(void *ctx, const tg_file_record *file, const char *stats)
{
    recorded *r = ctx;
    r->calls++;
    r->file = *file;
    (void)stats;
}

TEST(load_refusals)
{
    tg_version_signer s;
    char err[512], path[128], *pub;
    CHECK(tg_version_signer_load(&s, "/nonexistent/key.pem", NULL, err, sizeof err) != 0);
    CHECK(strstr(err, "--signing-key") != NULL);
    snprintf(path, sizeof path, "%s/junk.pem", root);
    write_text(path, "junk");
    CHECK(tg_version_signer_load(&s, path, NULL, err, sizeof err) != 0);
    /* a chain whose first certificate is not this key's: refused at load */
    char key[128], cert[128];
    snprintf(key, sizeof key, "%s/k.pem", root);
    key_file(key, &pub);
    free(pub);
    EVP_PKEY *other = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), 0);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, other);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                               (const unsigned char *)"other", -1, -1, 0);
    X509_set_issuer_name(x, X509_get_subject_name(x));
    X509_sign(x, other, EVP_sha256());
    snprintf(cert, sizeof cert, "%s/c.pem", root);
    FILE *f = fopen(cert, "w");
    PEM_write_X509(f, x);
    fclose(f);
    X509_free(x);
    EVP_PKEY_free(other);
    CHECK(tg_version_signer_load(&s, key, cert, err, sizeof err) != 0);
    CHECK(strstr(err, "not the private key") != NULL);
    CHECK(tg_version_signer_load(&s, key, NULL, err, sizeof err) == 0);
    CHECK_EQ_U64(strlen(s.hint), 64);
    CHECK(strncmp(s.public_pem, "-----BEGIN PUBLIC KEY-----", 26) == 0);
    tg_version_signer_free(&s);
}

TEST(sign_store_and_check)
{
    char key[128], err[TG_MSIG_ERR_MAX], *pub;
    snprintf(key, sizeof key, "%s/server.pem", root);
    key_file(key, &pub);
    tg_version_signer s;
    CHECK(tg_version_signer_load(&s, key, NULL, err, sizeof err) == 0);
    tg_blobstore *store = NULL;
    CHECK(tg_blobstore_open(root, &store, err, sizeof err) == 0);
    tg_file_record files[4] = {record("config.json", "{}"), record("model.sig", "client"),
                               record("model.server.sig", "old"),
                               record("w/model.safetensors", "bytes")};
    /* the manifest leaves both signature names out */
    tg_msig_manifest m;
    CHECK(tg_version_manifest(files, 4, "x", &m) == 0);
    CHECK_EQ_U64(m.count, 2);
    tg_msig_manifest_free(&m);
    recorded rec = {0};
    tg_file_record sig;
    CHECK(tg_version_sign(&s, store, "x", files, 4, record_row, &rec, &sig, err, sizeof err) == 0);
    CHECK_EQ_U64(rec.calls, 1);
    CHECK_STR(rec.file.path, "model.server.sig");
    CHECK_STR(sig.sha256, rec.file.sha256);
    /* the blob holds the bundle; it verifies over the digests it was made from */
    uint64_t size = 0;
    CHECK(tg_blob_stat(store, sig.sha256, &size) == 0 && size == sig.size);
    tg_blob_check check;
    tg_blob_reader *reader = tg_blob_open(store, sig.sha256, size, &check);
    CHECK(reader != NULL);
    char *bundle = calloc(1, size + 1);
    CHECK(reader != NULL && tg_blob_read_at(reader, bundle, size, 0) == 0);
    tg_blob_close(reader);
    tg_msig_trust trust = {0};
    CHECK(tg_msig_trust_add_key_pem(&trust, pub, strlen(pub), err, sizeof err) == 0);
    char signer[256];
    CHECK(tg_version_check_signature(bundle, size, &trust, files, 4, signer, sizeof signer, err,
                                     sizeof err) == TG_MSIG_OK);
    /* a file changed since: named */
    files[0] = record("config.json", "{\"changed\": 1}");
    CHECK(tg_version_check_signature(bundle, size, &trust, files, 4, signer, sizeof signer, err,
                                     sizeof err) == TG_MSIG_MISMATCH);
    CHECK_STR(err, "changed: config.json");
    /* another key trusted only */
    tg_msig_trust other = {0};
    char other_key[128], *other_pub;
    snprintf(other_key, sizeof other_key, "%s/other.pem", root);
    key_file(other_key, &other_pub);
    CHECK(tg_msig_trust_add_key_pem(&other, other_pub, strlen(other_pub), err, sizeof err) == 0);
    CHECK(tg_version_check_signature(bundle, size, &other, files, 4, signer, sizeof signer, err,
                                     sizeof err) == TG_MSIG_UNTRUSTED);
    tg_msig_trust_free(&other);
    tg_msig_trust_free(&trust);
    free(other_pub);
    free(bundle);
    free(pub);
    tg_blobstore_close(store);
    tg_version_signer_free(&s);
}

int main(int argc, char **argv)
{
    (void)argc;
    snprintf(root, sizeof root, "/tmp/tg-version-sign-XXXXXX");
    if (mkdtemp(root) == NULL)
        return 1;
    RUN(load_refusals);
    RUN(sign_store_and_check);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return test_report(argv[0]);
}
