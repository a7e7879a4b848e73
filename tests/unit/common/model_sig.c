/* Unit tests for common/model_sig.c: manifests (order, ignore paths, names refused,
 * the differences named), signing and verifying in key mode on the three curves,
 * the key hint, tampering (payload, signature, another key), the subject digest
 * checked against the resources, and hostile bundles (not JSON, deep nesting, past
 * the size bound, over-long base64, two signatures, another media type). The
 * certificate mode and an independent verifier are in tests/signing/ (Python). */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <string.h>

#include "model_sig.h"
#include "test.h"

/* A fresh EC key on a curve, as private and public PEM (malloc'd). */
static void make_key(const char *curve, char **private_pem, char **public_pem)
{
    EVP_PKEY *pkey = EVP_EC_gen(curve);
    BIO *a = BIO_new(BIO_s_mem()), *b = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(a, pkey, NULL, NULL, 0, NULL, NULL);
    PEM_write_bio_PUBKEY(b, pkey);
    char *data;
    long n = BIO_get_mem_data(a, &data);
    *private_pem = strndup(data, (size_t)n);
    n = BIO_get_mem_data(b, &data);
    *public_pem = strndup(data, (size_t)n);
    BIO_free(a);
    BIO_free(b);
    EVP_PKEY_free(pkey);
}

static void digest_of(const char *text, unsigned char d[TG_SHA256_SIZE])
{
    EVP_Digest(text, strlen(text), d, NULL, EVP_sha256(), NULL);
}

static void sample_manifest(tg_msig_manifest *m)
{
    unsigned char d[TG_SHA256_SIZE];
    tg_msig_manifest_init(m, "sample");
    tg_msig_manifest_ignore_defaults(m, "model.sig");
    digest_of("b", d);
    tg_msig_manifest_add(m, "z/b.safetensors", d);
    digest_of("a", d);
    tg_msig_manifest_add(m, "a.safetensors", d);
    digest_of("c", d);
    tg_msig_manifest_add(m, "config.json", d);
    tg_msig_manifest_add(m, ".git/HEAD", d);
    tg_msig_manifest_finish(m);
}

TEST(test_manifest)
{
    tg_msig_manifest m;
    sample_manifest(&m);
    CHECK_EQ_U64(m.count, 3); /* .git/HEAD left out */
    CHECK_STR(m.entries[0].name, "a.safetensors");
    CHECK_STR(m.entries[1].name, "config.json");
    CHECK_STR(m.entries[2].name, "z/b.safetensors");
    CHECK(tg_msig_manifest_ignores(&m, ".git"));
    CHECK(tg_msig_manifest_ignores(&m, ".github/x/y"));
    CHECK(!tg_msig_manifest_ignores(&m, ".gitx"));
    unsigned char d[TG_SHA256_SIZE] = {0};
    CHECK(tg_msig_manifest_add(&m, "/abs", d) != 0);
    CHECK(tg_msig_manifest_add(&m, "a/../b", d) != 0);
    CHECK(tg_msig_manifest_add(&m, "a//b", d) != 0);
    CHECK(tg_msig_manifest_add(&m, "", d) != 0);
    CHECK(tg_msig_manifest_add(&m, "a\nb", d) != 0);
    CHECK(tg_msig_manifest_add_hex(&m, "x", "zz") != 0);
    /* two entries with one name */
    CHECK(tg_msig_manifest_add(&m, "config.json", d) == 0);
    CHECK(tg_msig_manifest_finish(&m) != 0);
    tg_msig_manifest_free(&m);
}

TEST(test_compare_names_differences)
{
    tg_msig_manifest a, b;
    sample_manifest(&a);
    sample_manifest(&b);
    char err[TG_MSIG_ERR_MAX];
    CHECK(tg_msig_manifest_compare(&a, &b, err, sizeof err) == TG_MSIG_OK);
    b.entries[0].digest[0] ^= 1;           /* a.safetensors changed */
    free(b.entries[1].name);               /* config.json missing */
    b.entries[1].name = strdup("new.bin"); /* new.bin extra */
    tg_msig_manifest_finish(&b);
    CHECK(tg_msig_manifest_compare(&a, &b, err, sizeof err) == TG_MSIG_MISMATCH);
    CHECK_STR(err, "changed: a.safetensors; missing: config.json; extra: new.bin");
    tg_msig_manifest_free(&a);
    tg_msig_manifest_free(&b);
    /* many differences: 20 names and a count */
    tg_msig_manifest_init(&a, NULL);
    tg_msig_manifest_init(&b, NULL);
    unsigned char d[TG_SHA256_SIZE] = {0};
    for (int i = 0; i < 30; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%02d", i);
        tg_msig_manifest_add(&b, name, d);
    }
    tg_msig_manifest_finish(&b);
    CHECK(tg_msig_manifest_compare(&a, &b, err, sizeof err) == TG_MSIG_MISMATCH);
    CHECK(strstr(err, "and 10 more") != NULL);
    tg_msig_manifest_free(&a);
    tg_msig_manifest_free(&b);
}

/* Signs the sample with a fresh key on curve and verifies it with that key. */
static void sign_verify(const char *curve)
{
    char *priv, *pub, err[TG_MSIG_ERR_MAX], signer[256];
    make_key(curve, &priv, &pub);
    tg_msig_key *key = tg_msig_key_private_pem(priv, strlen(priv), err, sizeof err);
    CHECK(key != NULL);
    tg_msig_manifest m, got;
    sample_manifest(&m);
    size_t len = 0;
    char *bundle = tg_msig_sign(&m, key, NULL, &len, err, sizeof err);
    CHECK(bundle != NULL && len == strlen(bundle));
    tg_msig_trust trust = {0};
    CHECK(tg_msig_trust_add_key_pem(&trust, pub, strlen(pub), err, sizeof err) == 0);
    CHECK(tg_msig_verify_bundle(bundle, len, &trust, &got, signer, sizeof signer, err,
                                sizeof err) == TG_MSIG_OK);
    CHECK_STR(got.model_name, "sample");
    CHECK(tg_msig_manifest_compare(&got, &m, err, sizeof err) == TG_MSIG_OK);
    CHECK(strncmp(signer, "key ", 4) == 0);
    char hint[65];
    CHECK(tg_msig_key_hint(key, hint) == 0);
    CHECK(strstr(bundle, hint) != NULL);
    CHECK(got.ignore_count == 6);
    tg_msig_manifest_free(&got);
    tg_msig_manifest_free(&m);
    tg_msig_trust_free(&trust);
    tg_msig_key_free(key);
    free(bundle);
    free(priv);
    free(pub);
}

TEST(test_curves)
{
    sign_verify("P-256");
    sign_verify("P-384");
    sign_verify("P-521");
    /* another key type is refused with a sentence */
    EVP_PKEY *rsa = EVP_RSA_gen(1024);
    BIO *b = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(b, rsa, NULL, NULL, 0, NULL, NULL);
    char *data, err[TG_MSIG_ERR_MAX] = "";
    long n = BIO_get_mem_data(b, &data);
    CHECK(tg_msig_key_private_pem(data, (size_t)n, err, sizeof err) == NULL);
    CHECK(strstr(err, "P-256") != NULL);
    CHECK(tg_msig_key_private_pem("junk", 4, err, sizeof err) == NULL);
    BIO_free(b);
    EVP_PKEY_free(rsa);
}

/* A bundle and its trust, for the tampering tests. */
static char *signed_bundle(tg_msig_trust *trust, char **other_pub)
{
    char *priv, *pub, *priv2, err[TG_MSIG_ERR_MAX];
    make_key("P-256", &priv, &pub);
    make_key("P-256", &priv2, other_pub);
    tg_msig_key *key = tg_msig_key_private_pem(priv, strlen(priv), err, sizeof err);
    tg_msig_manifest m;
    sample_manifest(&m);
    size_t len;
    char *bundle = tg_msig_sign(&m, key, NULL, &len, err, sizeof err);
    memset(trust, 0, sizeof *trust);
    tg_msig_trust_add_key_pem(trust, pub, strlen(pub), err, sizeof err);
    tg_msig_manifest_free(&m);
    tg_msig_key_free(key);
    free(priv);
    free(pub);
    free(priv2);
    return bundle;
}

static tg_msig_status verify_text(const char *text, const tg_msig_trust *trust, char *err)
{
    tg_msig_manifest got;
    tg_msig_status st =
        tg_msig_verify_bundle(text, strlen(text), trust, &got, NULL, 0, err, TG_MSIG_ERR_MAX);
    tg_msig_manifest_free(&got);
    return st;
}

/* Replaces the value of "field": "..." in a bundle's text by value. */
static char *with_field(const char *bundle, const char *field, const char *value)
{
    char key[64];
    snprintf(key, sizeof key, "\"%s\": \"", field);
    const char *at = strstr(bundle, key);
    if (at == NULL)
        return strdup(bundle);
    at += strlen(key);
    const char *end = strchr(at, '"');
    size_t n = (size_t)(at - bundle);
    char *out = malloc(strlen(bundle) + strlen(value) + 1);
    memcpy(out, bundle, n);
    strcpy(out + n, value);
    strcat(out, end);
    return out;
}

TEST(test_tampering)
{
    tg_msig_trust trust, other = {0};
    char *other_pub, err[TG_MSIG_ERR_MAX];
    char *bundle = signed_bundle(&trust, &other_pub);
    CHECK(verify_text(bundle, &trust, err) == TG_MSIG_OK);
    /* another trusted key: the hint names a key nobody trusts */
    tg_msig_trust_add_key_pem(&other, other_pub, strlen(other_pub), err, sizeof err);
    CHECK(verify_text(bundle, &other, err) == TG_MSIG_UNTRUSTED);
    /* no hint: tried with the key, the signature does not verify */
    char *t = with_field(bundle, "hint", "");
    CHECK(verify_text(t, &other, err) == TG_MSIG_UNTRUSTED);
    CHECK(verify_text(t, &trust, err) == TG_MSIG_OK);
    free(t);
    /* a payload byte */
    char *p = strstr(bundle, "\"payload\": \"");
    CHECK(p != NULL);
    char *copy = strdup(bundle);
    size_t off = (size_t)(p - bundle) + strlen("\"payload\": \"") + 40;
    copy[off] = copy[off] == 'A' ? 'B' : 'A';
    CHECK(verify_text(copy, &trust, err) == TG_MSIG_BAD_SIGNATURE);
    free(copy);
    /* a signature byte */
    p = strstr(bundle, "\"sig\": \"");
    copy = strdup(bundle);
    off = (size_t)(p - bundle) + strlen("\"sig\": \"") + 20;
    copy[off] = copy[off] == 'A' ? 'B' : 'A';
    CHECK(verify_text(copy, &trust, err) == TG_MSIG_BAD_SIGNATURE);
    free(copy);
    /* no trust at all */
    tg_msig_trust none = {0};
    CHECK(verify_text(bundle, &none, err) == TG_MSIG_UNTRUSTED);
    free(bundle);
    free(other_pub);
    tg_msig_trust_free(&trust);
    tg_msig_trust_free(&other);
}

TEST(test_hostile_bundles)
{
    tg_msig_trust trust;
    char *other_pub, err[TG_MSIG_ERR_MAX];
    char *bundle = signed_bundle(&trust, &other_pub);
    CHECK(verify_text("not json", &trust, err) == TG_MSIG_MALFORMED);
    CHECK(verify_text("[1]", &trust, err) == TG_MSIG_MALFORMED);
    CHECK(verify_text("{}", &trust, err) == TG_MSIG_MALFORMED);
    /* nesting deeper than the bound, refused before the parser recurses */
    char deep[4096];
    size_t n = 0;
    for (int i = 0; i < 1000; i++)
        deep[n++] = '[';
    deep[n] = '\0';
    CHECK(verify_text(deep, &trust, err) == TG_MSIG_MALFORMED);
    CHECK(strstr(err, "nests deeper") != NULL);
    /* many values, each small: refused before jansson allocates them */
    size_t wide_len = 3 * 10000 + 64;
    char *wide = malloc(wide_len);
    size_t w = (size_t)snprintf(wide, wide_len, "{\"tlogEntries\": [");
    for (int i = 0; i < 10000; i++)
        w += (size_t)snprintf(wide + w, wide_len - w, "%s1", i ? "," : "");
    snprintf(wide + w, wide_len - w, "]}");
    CHECK(verify_text(wide, &trust, err) == TG_MSIG_MALFORMED);
    CHECK(strstr(err, "JSON values") != NULL);
    free(wide);
    /* a signature far past any ECDSA signature's length */
    char *big = malloc(5000);
    memset(big, 'A', 4999);
    big[4999] = '\0';
    char *t = with_field(bundle, "sig", big);
    CHECK(verify_text(t, &trust, err) == TG_MSIG_MALFORMED);
    free(t);
    t = with_field(bundle, "sig", "!!notbase64");
    CHECK(verify_text(t, &trust, err) == TG_MSIG_MALFORMED);
    free(t);
    t = with_field(bundle, "mediaType", "application/json");
    CHECK(verify_text(t, &trust, err) == TG_MSIG_MALFORMED);
    free(t);
    t = with_field(bundle, "payloadType", "text/plain");
    CHECK(verify_text(t, &trust, err) == TG_MSIG_UNSUPPORTED);
    free(t);
    /* past the size bound: refused before parsing */
    tg_msig_manifest got;
    CHECK(tg_msig_verify_bundle(bundle, (size_t)TG_MSIG_BUNDLE_MAX + 1, &trust, &got, NULL, 0, err,
                                sizeof err) == TG_MSIG_MALFORMED);
    /* two signatures */
    char *two = strdup(bundle);
    char *s = strstr(two, "\"signatures\": [");
    CHECK(s != NULL);
    char *doubled = malloc(strlen(two) + 64);
    size_t head = (size_t)(s - two) + strlen("\"signatures\": [");
    memcpy(doubled, two, head);
    strcpy(doubled + head, "{\"sig\": \"AAAA\", \"keyid\": \"\"}, ");
    strcat(doubled, two + head);
    CHECK(verify_text(doubled, &trust, err) == TG_MSIG_MALFORMED);
    free(doubled);
    free(two);
    free(big);
    free(bundle);
    free(other_pub);
    tg_msig_trust_free(&trust);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(test_manifest);
    RUN(test_compare_names_differences);
    RUN(test_curves);
    RUN(test_tampering);
    RUN(test_hostile_bundles);
    return test_report(argv[0]);
}
