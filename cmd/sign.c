/* tensorgate sign | verify: model signatures in the OpenSSF model-signing format v1,
 * on a local directory, with the reference tool's (`model_signing`) command lines:
 *
 *   tensorgate sign key DIR --private-key PEM [--signature PATH] [--ignore-paths P...]
 *   tensorgate sign certificate DIR --private-key PEM --signing-certificate PEM
 *                               --certificate-chain PEM... [--signature PATH] [...]
 *   tensorgate verify key DIR --signature PATH --public-key PEM [--ignore-paths P...]
 *   tensorgate verify certificate DIR --signature PATH --certificate-chain PEM...
 *
 * Every flag is also accepted with underscores (--private_key, ...), as the reference
 * spells some of them. A list flag takes the words after it up to the next flag, or
 * is repeated. Exit status: 0 signed / verified, 1 the signature was refused
 * (invalid, untrusted, or over other files: the message names them), 2 a usage or
 * I/O error. The format is common/model_sig.h; docs/SIGNING.md the manual. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "model_sig.h"

enum { EXIT_OK = 0, EXIT_REFUSED = 1, EXIT_ERROR = 2 };

typedef struct sign_args {
    const char *mode; /* "key" or "certificate" */
    const char *dir;
    const char *signature;
    const char *private_key;
    const char *public_key;
    const char *signing_certificate;
    const char **chain;
    size_t chain_count;
    const char **ignore;
    size_t ignore_count;
} sign_args;

static void usage(FILE *out, const char *command)
{
    if (strcmp(command, "sign") == 0)
        fprintf(out, "usage: tensorgate sign key DIR --private-key PEM [--signature PATH]\n"
                     "                       [--ignore-paths PATH...]\n"
                     "       tensorgate sign certificate DIR --private-key PEM\n"
                     "                       --signing-certificate PEM --certificate-chain PEM...\n"
                     "                       [--signature PATH] [--ignore-paths PATH...]\n\n"
                     "Signs every file under DIR (not .git, .gitattributes, .github, .gitignore,\n"
                     "the signature itself, nor the ignored paths) in the OpenSSF model-signing\n"
                     "format v1 and writes the Sigstore bundle to PATH (default DIR/model.sig).\n"
                     "Keys: EC P-256, P-384 or P-521, PEM, unencrypted.\n");
    else
        fprintf(out,
                "usage: tensorgate verify key DIR --public-key PEM [--signature PATH]\n"
                "                         [--ignore-paths PATH...]\n"
                "       tensorgate verify certificate DIR --certificate-chain PEM...\n"
                "                         [--signature PATH] [--ignore-paths PATH...]\n\n"
                "Verifies the signature (default DIR/model.sig) against the public key or the\n"
                "trusted CA certificates, then the files under DIR against what was signed.\n"
                "Exit status: 0 verified, 1 refused (the message says why and names the\n"
                "files that differ), 2 a usage or I/O error.\n");
}

/* "--private_key" and "--private-key" are one flag. */
static bool flag_is(const char *arg, const char *name)
{
    if (arg[0] != '-' || arg[1] != '-')
        return false;
    arg += 2;
    for (; *arg && *name; arg++, name++)
        if (*arg != *name && !(*arg == '_' && *name == '-'))
            return false;
    return *arg == '\0' && *name == '\0';
}

static int push(const char ***list, size_t *count, const char *value)
{
    const char **grown = realloc(*list, (*count + 1) * sizeof *grown);
    if (grown == NULL)
        return -1;
    *list = grown;
    grown[(*count)++] = value;
    return 0;
}

/* Parses argv (argv[0] the command, argv[1] the mode). 0, 1 (--help), -1 (usage). */
static int parse(int argc, char **argv, sign_args *a, bool signing)
{
    memset(a, 0, sizeof *a);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
        return 1;
    if (argc < 2 || (strcmp(argv[1], "key") != 0 && strcmp(argv[1], "certificate") != 0)) {
        fprintf(stderr, "tensorgate %s: the first word is the mode: key or certificate\n", argv[0]);
        return -1;
    }
    a->mode = argv[1];
    /* the list a bare word after a list flag joins */
    const char ***list = NULL;
    size_t *list_count = NULL;
    for (int i = 2; i < argc; i++) {
        const char *arg = argv[i];
        const char **single = NULL;
        if (flag_is(arg, "help")) {
            return 1;
        } else if (flag_is(arg, "signature")) {
            single = &a->signature;
        } else if (signing && flag_is(arg, "private-key")) {
            single = &a->private_key;
        } else if (!signing && flag_is(arg, "public-key")) {
            single = &a->public_key;
        } else if (signing && flag_is(arg, "signing-certificate")) {
            single = &a->signing_certificate;
        } else if (flag_is(arg, "certificate-chain")) {
            list = &a->chain;
            list_count = &a->chain_count;
            continue;
        } else if (flag_is(arg, "ignore-paths")) {
            list = &a->ignore;
            list_count = &a->ignore_count;
            continue;
        } else if (arg[0] == '-' && arg[1] != '\0') {
            fprintf(stderr, "tensorgate %s: unknown option %s\n", argv[0], arg);
            return -1;
        } else if (list != NULL) {
            if (push(list, list_count, arg) != 0)
                return -1;
            continue;
        } else if (a->dir == NULL) {
            a->dir = arg;
            continue;
        } else {
            fprintf(stderr, "tensorgate %s: one directory only (%s, then %s)\n", argv[0], a->dir,
                    arg);
            return -1;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "tensorgate %s: %s needs a value\n", argv[0], arg);
            return -1;
        }
        *single = argv[++i];
        list = NULL;
    }
    /* "--ignore-paths a b DIR": the directory was taken for a list's last word */
    if (a->dir == NULL && list != NULL && *list_count > 0)
        a->dir = (*list)[--*list_count];
    if (a->dir == NULL) {
        fprintf(stderr, "tensorgate %s: which directory? (the model's DIR)\n", argv[0]);
        return -1;
    }
    bool cert = strcmp(a->mode, "certificate") == 0;
    const char *missing = NULL;
    if (signing && a->private_key == NULL)
        missing = "--private-key";
    else if (signing && cert && a->signing_certificate == NULL)
        missing = "--signing-certificate";
    else if (!signing && !cert && a->public_key == NULL)
        missing = "--public-key";
    else if (!signing && cert && a->chain_count == 0)
        missing = "--certificate-chain";
    if (missing != NULL) {
        fprintf(stderr, "tensorgate %s %s: %s is required\n", argv[0], a->mode, missing);
        return -1;
    }
    return 0;
}

/* The signature's name relative to dir when it lies inside dir (the manifest leaves
 * it out), else NULL. */
static const char *relative_to(const char *dir_real, const char *path, char *buf, size_t size)
{
    char parent[PATH_MAX], copy[PATH_MAX];
    if (snprintf(copy, sizeof copy, "%s", path) >= (int)sizeof copy)
        return NULL;
    char *base = basename(copy);
    char pcopy[PATH_MAX];
    snprintf(pcopy, sizeof pcopy, "%s", path);
    if (realpath(dirname(pcopy), parent) == NULL)
        return NULL;
    size_t n = strlen(dir_real);
    if (strcmp(parent, dir_real) == 0) {
        snprintf(buf, size, "%s", base);
        return buf;
    }
    if (strncmp(parent, dir_real, n) == 0 && parent[n] == '/') {
        snprintf(buf, size, "%s/%s", parent + n + 1, base);
        return buf;
    }
    return NULL;
}

/* An --ignore-paths value as a path relative to the model: an absolute path or one
 * through the model's directory is made relative; any other is relative already. */
static int add_ignore(tg_msig_manifest *m, const char *dir_real, const char *dir_arg,
                      const char *path)
{
    char real[PATH_MAX];
    size_t n = strlen(dir_real), d = strlen(dir_arg);
    if (path[0] == '/' && realpath(path, real) != NULL && strncmp(real, dir_real, n) == 0 &&
        real[n] == '/')
        return tg_msig_manifest_ignore(m, real + n + 1);
    if (strncmp(path, dir_arg, d) == 0 && path[d] == '/')
        return tg_msig_manifest_ignore(m, path + d + 1);
    return tg_msig_manifest_ignore(m, path);
}

/* The manifest of a.dir with its ignore list. 0, or -1 (printed). */
static int local_manifest(const char *command, const sign_args *a, const char *signature,
                          const tg_msig_manifest *recorded, tg_msig_manifest *m)
{
    char dir_real[PATH_MAX], sig_rel[PATH_MAX], err[TG_MSIG_ERR_MAX] = "";
    if (realpath(a->dir, dir_real) == NULL) {
        fprintf(stderr, "tensorgate %s: %s: %s\n", command, a->dir, strerror(errno));
        return -1;
    }
    char name_buf[PATH_MAX];
    snprintf(name_buf, sizeof name_buf, "%s", dir_real);
    if (tg_msig_manifest_init(m, basename(name_buf)) != 0)
        return -1;
    const char *rel = relative_to(dir_real, signature, sig_rel, sizeof sig_rel);
    int rc = tg_msig_manifest_ignore_defaults(m, rel);
    for (size_t i = 0; rc == 0 && i < a->ignore_count; i++)
        rc = add_ignore(m, dir_real, a->dir, a->ignore[i]);
    for (size_t i = 0; rc == 0 && recorded != NULL && i < recorded->ignore_count; i++)
        rc = tg_msig_manifest_ignore(m, recorded->ignore[i]);
    if (rc != 0) {
        fprintf(stderr, "tensorgate %s: a bad --ignore-paths value\n", command);
        return -1;
    }
    if (tg_msig_manifest_from_dir(m, a->dir, err, sizeof err) != 0) {
        fprintf(stderr, "tensorgate %s: %s\n", command, err);
        return -1;
    }
    return 0;
}

static char *read_or_say(const char *command, const char *path, size_t max, size_t *len)
{
    char err[TG_MSIG_ERR_MAX];
    char *text = tg_msig_read_file(path, max, len, err, sizeof err);
    if (text == NULL)
        fprintf(stderr, "tensorgate %s: %s\n", command, err);
    return text;
}

/* Adds the certificates of each PEM file. 0, or -1 (printed). */
static int load_certs(const char *command, const char *const *paths, size_t count,
                      tg_msig_certs *certs)
{
    for (size_t i = 0; i < count; i++) {
        size_t len;
        char err[TG_MSIG_ERR_MAX];
        char *pem = read_or_say(command, paths[i], TG_MSIG_PEM_MAX, &len);
        if (pem == NULL)
            return -1;
        int rc = tg_msig_certs_add_pem(certs, pem, len, err, sizeof err);
        free(pem);
        if (rc != 0) {
            fprintf(stderr, "tensorgate %s: %s: %s\n", command, paths[i], err);
            return -1;
        }
    }
    return 0;
}

static const char *signature_path(const sign_args *a, char *buf, size_t size)
{
    if (a->signature != NULL)
        return a->signature;
    snprintf(buf, size, "%s/%s", a->dir, TG_MSIG_DEFAULT_NAME);
    return buf;
}

/* Writes the bundle beside its final name, then renames it: never half a file. */
static int write_signature(const char *path, const char *text, size_t len)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return -1;
    FILE *f = fopen(tmp, "wb");
    if (f == NULL)
        return -1;
    int ok = fwrite(text, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
        return -1;
    }
    return 0;
}

int tg_cmd_sign(int argc, char **argv)
{
    sign_args a;
    int p = parse(argc, argv, &a, true);
    if (p != 0) {
        usage(p > 0 ? stdout : stderr, "sign");
        free(a.chain);
        free(a.ignore);
        return p > 0 ? EXIT_OK : EXIT_ERROR;
    }
    int status = EXIT_ERROR;
    char sig_buf[PATH_MAX], err[TG_MSIG_ERR_MAX] = "";
    const char *signature = signature_path(&a, sig_buf, sizeof sig_buf);
    tg_msig_manifest m = {0};
    tg_msig_certs chain = {0};
    tg_msig_key *key = NULL;
    char *bundle = NULL;
    size_t len = 0;
    char *pem = read_or_say("sign", a.private_key, TG_MSIG_PEM_MAX, &len);
    if (pem == NULL)
        goto done;
    key = tg_msig_key_private_pem(pem, len, err, sizeof err);
    free(pem);
    if (key == NULL) {
        fprintf(stderr, "tensorgate sign: %s: %s\n", a.private_key, err);
        goto done;
    }
    if (a.signing_certificate != NULL &&
        (load_certs("sign", &a.signing_certificate, 1, &chain) != 0 ||
         load_certs("sign", a.chain, a.chain_count, &chain) != 0))
        goto done;
    if (local_manifest("sign", &a, signature, NULL, &m) != 0)
        goto done;
    bundle = tg_msig_sign(&m, key, a.signing_certificate ? &chain : NULL, &len, err, sizeof err);
    if (bundle == NULL) {
        fprintf(stderr, "tensorgate sign: %s\n", err);
        goto done;
    }
    if (write_signature(signature, bundle, len) != 0) {
        fprintf(stderr, "tensorgate sign: %s: %s\n", signature, strerror(errno));
        goto done;
    }
    printf("signed %zu files of %s into %s\n", m.count, a.dir, signature);
    status = EXIT_OK;
done:
    free(bundle);
    tg_msig_manifest_free(&m);
    tg_msig_certs_free(&chain);
    tg_msig_key_free(key);
    free(a.chain);
    free(a.ignore);
    return status;
}

int tg_cmd_verify(int argc, char **argv)
{
    sign_args a;
    int p = parse(argc, argv, &a, false);
    if (p != 0) {
        usage(p > 0 ? stdout : stderr, "verify");
        free(a.chain);
        free(a.ignore);
        return p > 0 ? EXIT_OK : EXIT_ERROR;
    }
    int status = EXIT_ERROR;
    char sig_buf[PATH_MAX], err[TG_MSIG_ERR_MAX] = "", signer[256] = "";
    const char *signature = signature_path(&a, sig_buf, sizeof sig_buf);
    tg_msig_trust trust = {0};
    tg_msig_manifest signed_m = {0}, actual = {0};
    size_t len = 0;
    char *bundle = NULL;
    if (a.public_key != NULL) {
        char *pem = read_or_say("verify", a.public_key, TG_MSIG_PEM_MAX, &len);
        if (pem == NULL)
            goto done;
        int rc = tg_msig_trust_add_key_pem(&trust, pem, len, err, sizeof err);
        free(pem);
        if (rc != 0) {
            fprintf(stderr, "tensorgate verify: %s: %s\n", a.public_key, err);
            goto done;
        }
    }
    if (load_certs("verify", a.chain, a.chain_count, &trust.cas) != 0)
        goto done;
    bundle = read_or_say("verify", signature, TG_MSIG_BUNDLE_MAX, &len);
    if (bundle == NULL)
        goto done;
    tg_msig_status st = tg_msig_verify_bundle(bundle, len, &trust, &signed_m, signer, sizeof signer,
                                              err, sizeof err);
    if (st == TG_MSIG_ERROR) {
        fprintf(stderr, "tensorgate verify: %s\n", err);
        goto done;
    }
    if (st != TG_MSIG_OK) {
        fprintf(stderr, "tensorgate verify: signature refused (%s): %s\n", tg_msig_status_name(st),
                err);
        status = EXIT_REFUSED;
        goto done;
    }
    if (local_manifest("verify", &a, signature, &signed_m, &actual) != 0)
        goto done;
    /* what the command line ignores now is left out of the signed side too */
    for (size_t i = 0; i < actual.ignore_count; i++)
        tg_msig_manifest_ignore(&signed_m, actual.ignore[i]);
    tg_msig_manifest_finish(&signed_m);
    st = tg_msig_manifest_compare(&signed_m, &actual, err, sizeof err);
    if (st != TG_MSIG_OK) {
        fprintf(stderr,
                "tensorgate verify: signature refused (mismatch): the files differ "
                "from what was signed: %s\n",
                err);
        status = EXIT_REFUSED;
        goto done;
    }
    printf("verified %zu files of %s, signed by %s\n", actual.count, a.dir, signer);
    status = EXIT_OK;
done:
    free(bundle);
    tg_msig_manifest_free(&signed_m);
    tg_msig_manifest_free(&actual);
    tg_msig_trust_free(&trust);
    free(a.chain);
    free(a.ignore);
    return status;
}
