/* server/routes/signing.c, black-box, against a real server started with
 * --signing-key (one server for the program): the well-known keys route; every
 * published version holding model.server.sig over exactly its files (checked here
 * with the public key the route gives); a client's model.sig under the namespace's
 * policy: accepted when a trusted key signed these files, refused with
 * signature_required, signature_untrusted, signature_mismatch (naming the files)
 * and signature_invalid; the policy route's admin scope and its checks. The
 * independent verifier (Python) is tests/signing/. */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "model_sig.h"

static const char *admin, *write_acme, *admin_other;
static char server_key_path[512];
static char client_priv[4096], client_pub[4096], other_priv[4096], other_pub[4096];

static void make_key(char *priv, char *pub, size_t size)
{
    EVP_PKEY *pkey = EVP_EC_gen("P-256");
    BIO *a = BIO_new(BIO_s_mem()), *b = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(a, pkey, NULL, NULL, 0, NULL, NULL);
    PEM_write_bio_PUBKEY(b, pkey);
    char *data;
    long n = BIO_get_mem_data(a, &data);
    snprintf(priv, size, "%.*s", (int)n, data);
    n = BIO_get_mem_data(b, &data);
    snprintf(pub, size, "%.*s", (int)n, data);
    BIO_free(a);
    BIO_free(b);
    EVP_PKEY_free(pkey);
}

/* The files of a version as a manifest (from the listing's digests). */
static void listed_manifest(const char *version_url, tg_msig_manifest *m)
{
    char url[512];
    snprintf(url, sizeof url, "%s/files", version_url);
    it_response r = it_get(url);
    CHECK_STATUS(r, 200);
    tg_msig_manifest_init(m, "m");
    tg_msig_manifest_ignore_defaults(m, "model.sig");
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(r.json, "files"), i, f)
    {
        tg_msig_manifest_add_hex(m, json_string_value(json_object_get(f, "path")),
                                 json_string_value(json_object_get(f, "sha256")));
    }
    tg_msig_manifest_finish(m);
    it_response_free(&r);
}

TEST(well_known_keys)
{
    it_response r = it_get("/.well-known/tensorgate/signing-keys");
    CHECK_STATUS(r, 200);
    json_t *key = json_array_get(json_object_get(r.json, "keys"), 0);
    CHECK(key != NULL);
    CHECK_EQ_U64(strlen(json_string_value(json_object_get(key, "hint"))), 64);
    CHECK(strncmp(json_string_value(json_object_get(key, "pem")), "-----BEGIN PUBLIC KEY-----",
                  26) == 0);
    CHECK_STR(json_string_value(json_object_get(key, "mode")), "key");
    CHECK_STR(it_json_str(&r, "signature_file"), "model.server.sig");
    it_response_free(&r);
}

TEST(published_versions_are_signed)
{
    it_buf file = {0};
    it_buf_printf(&file, "{\"a\": 1}\n");
    CHECK_EQ_U64(it_make_version(write_acme, "acme/signed", "config.json", &file, true), 1);
    it_buf_free(&file);
    /* the signature is a file of the version, over the other files */
    tg_msig_manifest listed;
    listed_manifest("/v1/models/acme/signed/versions/1", &listed);
    CHECK_EQ_U64(listed.count, 1); /* config.json; the signature left out */
    it_response r = it_get("/v1/models/acme/signed/versions/1/files/model.server.sig");
    CHECK_STATUS(r, 200);
    it_response keys = it_get("/.well-known/tensorgate/signing-keys");
    const char *pem = json_string_value(
        json_object_get(json_array_get(json_object_get(keys.json, "keys"), 0), "pem"));
    tg_msig_trust trust = {0};
    char err[TG_MSIG_ERR_MAX];
    CHECK(pem != NULL && tg_msig_trust_add_key_pem(&trust, pem, strlen(pem), err, sizeof err) == 0);
    tg_msig_manifest got;
    CHECK(tg_msig_verify_bundle((const char *)r.body.data, r.body.len, &trust, &got, NULL, 0, err,
                                sizeof err) == TG_MSIG_OK);
    CHECK(tg_msig_manifest_compare(&got, &listed, err, sizeof err) == TG_MSIG_OK);
    CHECK_STR(got.model_name, "signed");
    tg_msig_manifest_free(&got);
    tg_msig_manifest_free(&listed);
    tg_msig_trust_free(&trust);
    it_response_free(&keys);
    it_response_free(&r);
}

/* PUT of a policy (JSON built here) with a token; the response. */
static it_response put_policy(const char *org, const char *token, json_t *policy)
{
    char *text = json_dumps(policy, JSON_COMPACT);
    char url[128];
    snprintf(url, sizeof url, "/v1/namespaces/%s/signing", org);
    it_response r = it_send_json("PUT", url, token, text);
    free(text);
    json_decref(policy);
    return r;
}

TEST(policy_route)
{
    it_response r =
        it_request("GET", "/v1/namespaces/acme/signing", &(it_request_opts){.token = admin});
    CHECK_STATUS(r, 200);
    CHECK(json_is_false(json_object_get(r.json, "require_signature")));
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "trusted_keys")), 0);
    it_response_free(&r);
    /* admin of the namespace only */
    r = put_policy("acme", write_acme, json_pack("{s:b}", "require_signature", 1));
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = put_policy("acme", admin_other, json_pack("{s:b}", "require_signature", 1));
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_request("GET", "/v1/namespaces/acme/signing", NULL);
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    /* every PEM is checked */
    r = put_policy("acme", admin, json_pack("{s:[s]}", "trusted_keys", "not a key"));
    CHECK_PROBLEM(r, 400, "invalid_request");
    CHECK(strstr(it_json_str(&r, "detail"), "trusted_keys[0]") != NULL);
    it_response_free(&r);
    r = put_policy("acme", admin, json_pack("{s:[s]}", "trusted_cas", client_pub));
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = put_policy("acme", admin, json_pack("{s:s}", "require_signature", "yes"));
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = put_policy("acme", admin, json_pack("{s:b, s:b}", "require_signature", 1, "other", 1));
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
}

/* A draft of acme/cs with config.json and a model.sig signed by priv over
 * config.json's bytes as `signed_text` (the file holds `text`). Returns the
 * version number. */
static int draft_with_signature(const char *priv, const char *text, const char *signed_text)
{
    it_buf file = {0};
    it_buf_printf(&file, "%s", text);
    int number = it_make_version(write_acme, "acme/cs", "config.json", &file, false);
    it_buf_free(&file);
    if (priv == NULL)
        return number;
    tg_msig_manifest m;
    tg_msig_manifest_init(&m, "cs");
    tg_msig_manifest_ignore_defaults(&m, "model.sig");
    unsigned char digest[TG_SHA256_SIZE];
    EVP_Digest(signed_text, strlen(signed_text), digest, NULL, EVP_sha256(), NULL);
    tg_msig_manifest_add(&m, "config.json", digest);
    tg_msig_manifest_finish(&m);
    char err[TG_MSIG_ERR_MAX];
    tg_msig_key *key = tg_msig_key_private_pem(priv, strlen(priv), err, sizeof err);
    size_t len = 0;
    char *bundle = tg_msig_sign(&m, key, NULL, &len, err, sizeof err);
    char url[256];
    snprintf(url, sizeof url, "/v1/models/acme/cs/versions/%d/files/model.sig", number);
    it_response r = it_send("PUT", url, write_acme, bundle, len);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    free(bundle);
    tg_msig_key_free(key);
    tg_msig_manifest_free(&m);
    return number;
}

static it_response publish(int number)
{
    char url[256];
    snprintf(url, sizeof url, "/v1/models/acme/cs/versions/%d/publish", number);
    return it_send_json("POST", url, write_acme, "{}");
}

TEST(client_signatures)
{
    /* no policy: a model.sig is an ordinary file, unchecked */
    int n = draft_with_signature(other_priv, "{\"b\": 1}\n", "something else");
    it_response r = publish(n);
    CHECK_STATUS(r, 200);
    it_response_free(&r);

    r = put_policy("acme", admin,
                   json_pack("{s:[s], s:b}", "trusted_keys", client_pub, "require_signature", 1));
    CHECK_STATUS(r, 200);
    CHECK(json_is_true(json_object_get(r.json, "require_signature")));
    it_response_free(&r);

    /* required, absent */
    n = draft_with_signature(NULL, "{\"c\": 1}\n", NULL);
    r = publish(n);
    CHECK_PROBLEM(r, 422, "signature_required");
    it_response_free(&r);
    /* a trusted key over these files */
    n = draft_with_signature(client_priv, "{\"d\": 1}\n", "{\"d\": 1}\n");
    r = publish(n);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    /* the client's kept, the server's added beside it */
    char url[256];
    snprintf(url, sizeof url, "/v1/models/acme/cs/versions/%d/files/model.sig", n);
    r = it_get(url);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    snprintf(url, sizeof url, "/v1/models/acme/cs/versions/%d/files/model.server.sig", n);
    r = it_get(url);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    /* a trusted key over other bytes: mismatch naming the file; the draft stays a draft */
    n = draft_with_signature(client_priv, "{\"e\": 1}\n", "{\"e\": 2}\n");
    r = publish(n);
    CHECK_PROBLEM(r, 422, "signature_mismatch");
    CHECK(strstr(it_json_str(&r, "detail"), "changed: config.json") != NULL);
    it_response_free(&r);
    snprintf(url, sizeof url, "/v1/models/acme/cs/versions/%d", n);
    r = it_get(url);
    CHECK_STR(it_json_str(&r, "state"), "draft");
    it_response_free(&r);
    /* an extra file after signing */
    n = draft_with_signature(client_priv, "{\"f\": 1}\n", "{\"f\": 1}\n");
    snprintf(url, sizeof url, "/v1/models/acme/cs/versions/%d/files/extra.json", n);
    r = it_send("PUT", url, write_acme, "{}", 2);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = publish(n);
    CHECK_PROBLEM(r, 422, "signature_mismatch");
    CHECK(strstr(it_json_str(&r, "detail"), "extra: extra.json") != NULL);
    it_response_free(&r);
    /* a key the namespace does not trust */
    n = draft_with_signature(other_priv, "{\"g\": 1}\n", "{\"g\": 1}\n");
    r = publish(n);
    CHECK_PROBLEM(r, 422, "signature_untrusted");
    it_response_free(&r);
    /* not a signature at all */
    n = draft_with_signature(NULL, "{\"h\": 1}\n", NULL);
    snprintf(url, sizeof url, "/v1/models/acme/cs/versions/%d/files/model.sig", n);
    r = it_send("PUT", url, write_acme, "{\"mediaType\": \"x\"}", 18);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = publish(n);
    CHECK_PROBLEM(r, 422, "signature_invalid");
    it_response_free(&r);
    /* another namespace is untouched by acme's policy */
    it_buf file = {0};
    it_buf_printf(&file, "{}");
    const char *write_other = it_token("write", "other");
    CHECK_EQ_U64(it_make_version(write_other, "other/free", "config.json", &file, true), 1);
    it_buf_free(&file);
    /* back to no requirement for the other tests */
    r = put_policy("acme", admin, json_pack("{s:b}", "require_signature", 0));
    CHECK_STATUS(r, 200);
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    /* the server's key, written before the server starts */
    char priv[4096], pub[4096];
    make_key(priv, pub, sizeof priv);
    make_key(client_priv, client_pub, sizeof client_priv);
    make_key(other_priv, other_pub, sizeof other_priv);
    snprintf(server_key_path, sizeof server_key_path, "/tmp/tg-signing-key-%d.pem", (int)getpid());
    FILE *f = fopen(server_key_path, "w");
    if (f == NULL)
        return 1;
    fputs(priv, f);
    fclose(f);
    const char *flags[] = {"--signing-key", server_key_path, NULL};
    it_init(argc, argv, flags);
    unlink(server_key_path); /* read at the start */
    admin = it_token("admin", NULL);
    write_acme = it_token("write", "acme");
    admin_other = it_token("admin", "other");
    RUN(well_known_keys);
    RUN(published_versions_are_signed);
    RUN(policy_route);
    RUN(client_signatures);
    return it_finish(argv[0]);
}
