/* Model signatures in the OpenSSF model-signing format v1 (see model_sig.h). */
#include "model_sig.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io.h"

#define PAYLOAD_TYPE "application/vnd.in-toto+json"
#define STATEMENT_TYPE "https://in-toto.io/Statement/v1"
#define PREDICATE_TYPE "https://model_signing/signature/v1.0"
#define BUNDLE_MEDIA_TYPE "application/vnd.dev.sigstore.bundle.v0.3+json"
/* Older bundles name the same format by these media types (same JSON shape). */
#define BUNDLE_MEDIA_TYPE_02 "application/vnd.dev.sigstore.bundle+json;version=0.2"
#define BUNDLE_MEDIA_TYPE_03_OLD "application/vnd.dev.sigstore.bundle+json;version=0.3"

struct tg_msig_key {
    EVP_PKEY *pkey;
    bool has_private;
};

static void say(char *err, size_t err_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(char *err, size_t err_size, const char *fmt, ...)
{
    if (err == NULL || err_size == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
}

const char *tg_msig_status_name(tg_msig_status status)
{
    switch (status) {
    case TG_MSIG_OK:
        return "ok";
    case TG_MSIG_ERROR:
        return "error";
    case TG_MSIG_MALFORMED:
        return "malformed";
    case TG_MSIG_UNSUPPORTED:
        return "unsupported";
    case TG_MSIG_BAD_SIGNATURE:
        return "bad_signature";
    case TG_MSIG_UNTRUSTED:
        return "untrusted";
    case TG_MSIG_MISMATCH:
        return "mismatch";
    }
    return "error";
}

/* --- base64 (standard alphabet written; standard or URL-safe read, padding optional) */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *base64_encode(const unsigned char *in, size_t len)
{
    size_t out_len = (len + 2) / 3 * 4;
    char *out = malloc(out_len + 1);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len)
            v |= in[i + 2];
        out[o++] = B64[(v >> 18) & 63];
        out[o++] = B64[(v >> 12) & 63];
        out[o++] = i + 1 < len ? B64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? B64[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

/* Decodes text of len characters when its decoded size is at most max: a malloc'd
 * buffer (one spare byte, NUL) and *out_len, or NULL (bad text, too long, memory). */
static unsigned char *base64_decode(const char *text, size_t len, size_t max, size_t *out_len)
{
    while (len > 0 && text[len - 1] == '=')
        len--;
    if (len % 4 == 1 || len / 4 * 3 + (len % 4 ? len % 4 - 1 : 0) > max)
        return NULL;
    unsigned char *out = malloc(len / 4 * 3 + 4);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64_value((unsigned char)text[i]);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    out[o] = '\0';
    *out_len = o;
    return out;
}

/* --- manifests ----------------------------------------------------------------------- */

int tg_msig_manifest_init(tg_msig_manifest *m, const char *model_name)
{
    memset(m, 0, sizeof *m);
    m->model_name = strdup(model_name != NULL && model_name[0] ? model_name : "model");
    return m->model_name == NULL ? -1 : 0;
}

void tg_msig_manifest_free(tg_msig_manifest *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->count; i++)
        free(m->entries[i].name);
    for (size_t i = 0; i < m->ignore_count; i++)
        free(m->ignore[i]);
    free(m->entries);
    free(m->ignore);
    free(m->model_name);
    memset(m, 0, sizeof *m);
}

/* A relative POSIX path: not empty, no leading "/", no empty, "." or ".." segment,
 * no NUL or control byte, at most TG_MSIG_NAME_MAX bytes. */
static bool valid_name(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > TG_MSIG_NAME_MAX)
        return false;
    const char *seg = name;
    for (const char *p = name;; p++) {
        if (*p == '/' || *p == '\0') {
            size_t n = (size_t)(p - seg);
            if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
                return false;
            if (*p == '\0')
                return true;
            seg = p + 1;
        } else if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            return false;
        }
    }
}

int tg_msig_manifest_add(tg_msig_manifest *m, const char *name,
                         const unsigned char digest[TG_SHA256_SIZE])
{
    if (!valid_name(name))
        return -1;
    if (m->count == m->capacity) {
        size_t cap = m->capacity ? m->capacity * 2 : 16;
        tg_msig_entry *grown = realloc(m->entries, cap * sizeof *grown);
        if (grown == NULL)
            return -1;
        m->entries = grown;
        m->capacity = cap;
    }
    char *copy = strdup(name);
    if (copy == NULL)
        return -1;
    m->entries[m->count].name = copy;
    memcpy(m->entries[m->count].digest, digest, TG_SHA256_SIZE);
    m->count++;
    return 0;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* 64 hex digits into 32 bytes. 0, or -1. */
static int hex_digest(const char *hex, unsigned char out[TG_SHA256_SIZE])
{
    if (hex == NULL || strlen(hex) != 2 * TG_SHA256_SIZE)
        return -1;
    for (size_t i = 0; i < TG_SHA256_SIZE; i++) {
        int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

int tg_msig_manifest_add_hex(tg_msig_manifest *m, const char *name, const char *hex)
{
    unsigned char digest[TG_SHA256_SIZE];
    if (hex_digest(hex, digest) != 0)
        return -1;
    return tg_msig_manifest_add(m, name, digest);
}

int tg_msig_manifest_ignore(tg_msig_manifest *m, const char *path)
{
    while (path[0] == '.' && path[1] == '/')
        path += 2;
    size_t len = strlen(path);
    while (len > 0 && path[len - 1] == '/')
        len--;
    if (len == 0 || len > TG_MSIG_NAME_MAX)
        return -1;
    for (size_t i = 0; i < m->ignore_count; i++)
        if (strlen(m->ignore[i]) == len && memcmp(m->ignore[i], path, len) == 0)
            return 0;
    char **grown = realloc(m->ignore, (m->ignore_count + 1) * sizeof *grown);
    if (grown == NULL)
        return -1;
    m->ignore = grown;
    char *copy = strndup(path, len);
    if (copy == NULL)
        return -1;
    m->ignore[m->ignore_count++] = copy;
    return 0;
}

int tg_msig_manifest_ignore_defaults(tg_msig_manifest *m, const char *signature_name)
{
    static const char *const git[] = {".git", ".gitattributes", ".github", ".gitignore",
                                      TG_MSIG_SERVER_NAME};
    if (signature_name != NULL && tg_msig_manifest_ignore(m, signature_name) != 0)
        return -1;
    for (size_t i = 0; i < sizeof git / sizeof git[0]; i++)
        if (tg_msig_manifest_ignore(m, git[i]) != 0)
            return -1;
    return 0;
}

bool tg_msig_manifest_ignores(const tg_msig_manifest *m, const char *name)
{
    for (size_t i = 0; i < m->ignore_count; i++) {
        size_t n = strlen(m->ignore[i]);
        if (strncmp(name, m->ignore[i], n) == 0 && (name[n] == '\0' || name[n] == '/'))
            return true;
    }
    return false;
}

static int entry_order(const void *a, const void *b)
{
    return strcmp(((const tg_msig_entry *)a)->name, ((const tg_msig_entry *)b)->name);
}

int tg_msig_manifest_finish(tg_msig_manifest *m)
{
    size_t kept = 0;
    for (size_t i = 0; i < m->count; i++) {
        if (tg_msig_manifest_ignores(m, m->entries[i].name))
            free(m->entries[i].name);
        else
            m->entries[kept++] = m->entries[i];
    }
    m->count = kept;
    if (m->count > 1)
        qsort(m->entries, m->count, sizeof m->entries[0], entry_order);
    for (size_t i = 1; i < m->count; i++)
        if (strcmp(m->entries[i - 1].name, m->entries[i].name) == 0)
            return -1;
    return 0;
}

/* The SHA-256 of an open file's bytes. 0, or -1 with errno. */
static int hash_fd(int fd, unsigned char digest[TG_SHA256_SIZE])
{
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    tg_sha256 s;
    if (buf == NULL || tg_sha256_init(&s, "signature") != 0) {
        free(buf);
        errno = ENOMEM;
        return -1;
    }
    uint64_t at = 0;
    for (;;) {
        ssize_t n = tg_pread_upto(fd, buf, CHUNK, at);
        if (n < 0) {
            int saved = errno;
            tg_sha256_free(&s);
            free(buf);
            errno = saved;
            return -1;
        }
        if (n == 0)
            break;
        if (tg_sha256_update(&s, buf, (size_t)n) != 0)
            break;
        at += (uint64_t)n;
    }
    free(buf);
    if (tg_sha256_final(&s, digest) != 0) {
        errno = EIO;
        return -1;
    }
    return 0;
}

/* One directory of the walk (prefix: its name relative to the top, "" for the top):
 * its files hashed into m, its subdirectories' names appended to *pending. */
static int walk_one(tg_msig_manifest *m, int top, const char *prefix, char ***pending,
                    size_t *pending_count, char *err, size_t err_size)
{
    int dirfd =
        openat(top, prefix[0] ? prefix : ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = dirfd >= 0 ? fdopendir(dirfd) : NULL;
    if (d == NULL) {
        say(err, err_size, "%s: %s", prefix[0] ? prefix : ".", strerror(errno));
        if (dirfd >= 0)
            close(dirfd);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (errno = 0, e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *name = NULL;
        if (asprintf(&name, "%s%s%s", prefix, prefix[0] ? "/" : "", e->d_name) < 0) {
            say(err, err_size, "out of memory");
            rc = -1;
            break;
        }
        if (tg_msig_manifest_ignores(m, name)) {
            free(name);
            continue;
        }
        struct stat st;
        if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            say(err, err_size, "%s: %s", name, strerror(errno));
            rc = -1;
        } else if (S_ISDIR(st.st_mode)) {
            char **grown = realloc(*pending, (*pending_count + 1) * sizeof *grown);
            if (grown == NULL) {
                say(err, err_size, "out of memory");
                rc = -1;
            } else {
                *pending = grown;
                grown[(*pending_count)++] = name;
                name = NULL; /* the list owns it */
            }
        } else if (S_ISREG(st.st_mode)) {
            int fd = openat(dirfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            unsigned char digest[TG_SHA256_SIZE];
            if (fd < 0 || hash_fd(fd, digest) != 0) {
                say(err, err_size, "%s: %s", name, strerror(errno));
                rc = -1;
            } else if (tg_msig_manifest_add(m, name, digest) != 0) {
                say(err, err_size, "%s: a name the format cannot hold (or out of memory)", name);
                rc = -1;
            }
            if (fd >= 0)
                close(fd);
        } else if (S_ISLNK(st.st_mode)) {
            say(err, err_size, "%s: a symbolic link (not signed: copy the file instead)", name);
            rc = -1;
        } else {
            say(err, err_size, "%s: not a regular file or a directory", name);
            rc = -1;
        }
        free(name);
    }
    if (rc == 0 && errno != 0) {
        say(err, err_size, "%s: %s", prefix[0] ? prefix : ".", strerror(errno));
        rc = -1;
    }
    closedir(d);
    return rc;
}

int tg_msig_manifest_from_dir(tg_msig_manifest *m, const char *dir, char *err, size_t err_size)
{
    int top = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (top < 0) {
        say(err, err_size, "%s: %s", dir, strerror(errno));
        return -1;
    }
    /* the directories still to read, as names relative to the top; no recursion */
    char **pending = NULL;
    size_t pending_count = 0, done = 0;
    int rc = walk_one(m, top, "", &pending, &pending_count, err, err_size);
    while (rc == 0 && done < pending_count) {
        const char *next = pending[done++];
        size_t depth = 1;
        for (const char *p = next; *p; p++)
            depth += *p == '/';
        if (depth > 64) {
            say(err, err_size, "%s: directories nested deeper than 64", next);
            rc = -1;
            break;
        }
        rc = walk_one(m, top, next, &pending, &pending_count, err, err_size);
    }
    for (size_t i = 0; i < pending_count; i++)
        free(pending[i]);
    free(pending);
    close(top);
    if (rc != 0)
        return -1;
    if (tg_msig_manifest_finish(m) != 0) {
        say(err, err_size, "%s: a file name seen twice", dir);
        return -1;
    }
    return 0;
}

/* Appends "; label: name" (or "label: name" at the start) to a difference sentence,
 * counting the names past the first 20. */
static void note_difference(char *err, size_t err_size, size_t *shown, size_t *more,
                            const char **last_label, const char *label, const char *name)
{
    if (*shown >= 20) {
        (*more)++;
        return;
    }
    size_t at = strlen(err);
    if (at + 1 >= err_size)
        return;
    if (*last_label == label)
        snprintf(err + at, err_size - at, ", %s", name);
    else
        snprintf(err + at, err_size - at, "%s%s: %s", at ? "; " : "", label, name);
    *last_label = label;
    (*shown)++;
}

tg_msig_status tg_msig_manifest_compare(const tg_msig_manifest *signed_m,
                                        const tg_msig_manifest *actual, char *err, size_t err_size)
{
    char scratch[1];
    if (err == NULL || err_size == 0) {
        err = scratch;
        err_size = sizeof scratch;
    }
    err[0] = '\0';
    size_t shown = 0, more = 0;
    const char *last = NULL;
    /* three passes so that each kind of difference is listed together */
    static const char changed[] = "changed", missing[] = "missing", extra[] = "extra";
    const char *labels[] = {changed, missing, extra};
    for (int pass = 0; pass < 3; pass++) {
        size_t i = 0, j = 0;
        while (i < signed_m->count || j < actual->count) {
            int c = i == signed_m->count ? 1
                    : j == actual->count
                        ? -1
                        : strcmp(signed_m->entries[i].name, actual->entries[j].name);
            if (c == 0) {
                if (pass == 0 && memcmp(signed_m->entries[i].digest, actual->entries[j].digest,
                                        TG_SHA256_SIZE) != 0)
                    note_difference(err, err_size, &shown, &more, &last, labels[0],
                                    signed_m->entries[i].name);
                i++;
                j++;
            } else if (c < 0) {
                if (pass == 1)
                    note_difference(err, err_size, &shown, &more, &last, labels[1],
                                    signed_m->entries[i].name);
                i++;
            } else {
                if (pass == 2)
                    note_difference(err, err_size, &shown, &more, &last, labels[2],
                                    actual->entries[j].name);
                j++;
            }
        }
    }
    if (shown == 0)
        return TG_MSIG_OK;
    if (more > 0) {
        size_t at = strlen(err);
        if (at + 1 < err_size)
            snprintf(err + at, err_size - at, "; and %zu more", more);
    }
    return TG_MSIG_MISMATCH;
}

/* --- keys ---------------------------------------------------------------------------- */

/* The digest a curve signs with, or NULL for a key this format does not take. */
static const EVP_MD *curve_digest(EVP_PKEY *pkey)
{
    if (pkey == NULL || EVP_PKEY_get_base_id(pkey) != EVP_PKEY_EC)
        return NULL;
    char group[64];
    size_t glen = 0;
    if (EVP_PKEY_get_group_name(pkey, group, sizeof group, &glen) != 1)
        return NULL;
    if (strcmp(group, "prime256v1") == 0 || strcmp(group, "P-256") == 0)
        return EVP_sha256();
    if (strcmp(group, "secp384r1") == 0 || strcmp(group, "P-384") == 0)
        return EVP_sha384();
    if (strcmp(group, "secp521r1") == 0 || strcmp(group, "P-521") == 0)
        return EVP_sha512();
    return NULL;
}

static tg_msig_key *wrap_key(EVP_PKEY *pkey, bool has_private, char *err, size_t err_size)
{
    if (pkey == NULL) {
        say(err, err_size, "not a PEM %s key", has_private ? "private" : "public");
        return NULL;
    }
    if (curve_digest(pkey) == NULL) {
        say(err, err_size, "not an elliptic curve key on P-256, P-384 or P-521");
        EVP_PKEY_free(pkey);
        return NULL;
    }
    tg_msig_key *key = calloc(1, sizeof *key);
    if (key == NULL) {
        say(err, err_size, "out of memory");
        EVP_PKEY_free(pkey);
        return NULL;
    }
    key->pkey = pkey;
    key->has_private = has_private;
    return key;
}

/* A refusing passphrase callback: an encrypted key is an error, never a prompt. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf, (void)size, (void)rwflag, (void)u;
    return -1;
}

tg_msig_key *tg_msig_key_private_pem(const char *pem, size_t len, char *err, size_t err_size)
{
    if (len > TG_MSIG_PEM_MAX || len > INT32_MAX) {
        say(err, err_size, "key file too large");
        return NULL;
    }
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    EVP_PKEY *pkey = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
    BIO_free(bio);
    return wrap_key(pkey, true, err, err_size);
}

tg_msig_key *tg_msig_key_public_pem(const char *pem, size_t len, char *err, size_t err_size)
{
    if (len > TG_MSIG_PEM_MAX || len > INT32_MAX) {
        say(err, err_size, "key file too large");
        return NULL;
    }
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    EVP_PKEY *pkey = bio ? PEM_read_bio_PUBKEY(bio, NULL, no_passphrase, NULL) : NULL;
    if (pkey == NULL && bio != NULL && BIO_reset(bio) == 1) {
        /* a certificate's key serves too */
        X509 *cert = PEM_read_bio_X509(bio, NULL, no_passphrase, NULL);
        if (cert != NULL)
            pkey = X509_get_pubkey(cert);
        X509_free(cert);
    }
    BIO_free(bio);
    return wrap_key(pkey, false, err, err_size);
}

void tg_msig_key_free(tg_msig_key *key)
{
    if (key == NULL)
        return;
    EVP_PKEY_free(key->pkey);
    free(key);
}

char *tg_msig_key_public_pem_text(const tg_msig_key *key)
{
    BIO *bio = BIO_new(BIO_s_mem());
    if (bio == NULL || PEM_write_bio_PUBKEY(bio, key->pkey) != 1) {
        BIO_free(bio);
        return NULL;
    }
    char *data = NULL;
    long n = BIO_get_mem_data(bio, &data);
    char *out = n > 0 ? strndup(data, (size_t)n) : NULL;
    BIO_free(bio);
    return out;
}

int tg_msig_key_hint(const tg_msig_key *key, char hint[2 * TG_SHA256_SIZE + 1])
{
    hint[0] = '\0';
    char *pem = tg_msig_key_public_pem_text(key);
    if (pem == NULL)
        return -1;
    int rc = tg_sha256_hex(pem, strlen(pem), hint, "signature");
    free(pem);
    return rc;
}

/* --- certificates -------------------------------------------------------------------- */

static int certs_push(tg_msig_certs *certs, unsigned char *der, size_t len)
{
    unsigned char **d = realloc(certs->der, (certs->count + 1) * sizeof *d);
    if (d == NULL)
        return -1;
    certs->der = d;
    size_t *l = realloc(certs->len, (certs->count + 1) * sizeof *l);
    if (l == NULL)
        return -1;
    certs->len = l;
    certs->der[certs->count] = der;
    certs->len[certs->count] = len;
    certs->count++;
    return 0;
}

int tg_msig_certs_add_pem(tg_msig_certs *certs, const char *pem, size_t len, char *err,
                          size_t err_size)
{
    if (len > TG_MSIG_PEM_MAX || len > INT32_MAX) {
        say(err, err_size, "certificate file too large");
        return -1;
    }
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    if (bio == NULL) {
        say(err, err_size, "out of memory");
        return -1;
    }
    size_t added = 0;
    X509 *cert;
    int rc = 0;
    while ((cert = PEM_read_bio_X509(bio, NULL, no_passphrase, NULL)) != NULL) {
        unsigned char *der = NULL;
        int n = i2d_X509(cert, &der);
        X509_free(cert);
        if (n <= 0 || certs->count >= 64 || certs_push(certs, der, (size_t)n) != 0) {
            OPENSSL_free(der);
            say(err, err_size, "too many certificates (or out of memory)");
            rc = -1;
            break;
        }
        added++;
    }
    BIO_free(bio);
    if (rc == 0 && added == 0) {
        say(err, err_size, "no PEM certificate found");
        rc = -1;
    }
    return rc;
}

void tg_msig_certs_free(tg_msig_certs *certs)
{
    if (certs == NULL)
        return;
    for (size_t i = 0; i < certs->count; i++)
        OPENSSL_free(certs->der[i]);
    free(certs->der);
    free(certs->len);
    memset(certs, 0, sizeof *certs);
}

static X509 *cert_from_der(const unsigned char *der, size_t len)
{
    if (len > TG_MSIG_CERT_MAX)
        return NULL;
    const unsigned char *p = der;
    X509 *cert = d2i_X509(NULL, &p, (long)len);
    if (cert != NULL && p != der + len) {
        X509_free(cert);
        return NULL;
    }
    return cert;
}

int tg_msig_trust_add_key_pem(tg_msig_trust *trust, const char *pem, size_t len, char *err,
                              size_t err_size)
{
    tg_msig_key *key = tg_msig_key_public_pem(pem, len, err, err_size);
    if (key == NULL)
        return -1;
    tg_msig_key **grown = realloc(trust->keys, (trust->key_count + 1) * sizeof(tg_msig_key *));
    if (grown == NULL) {
        tg_msig_key_free(key);
        say(err, err_size, "out of memory");
        return -1;
    }
    trust->keys = grown;
    trust->keys[trust->key_count++] = key;
    return 0;
}

void tg_msig_trust_free(tg_msig_trust *trust)
{
    if (trust == NULL)
        return;
    for (size_t i = 0; i < trust->key_count; i++)
        tg_msig_key_free(trust->keys[i]);
    free(trust->keys);
    tg_msig_certs_free(&trust->cas);
    memset(trust, 0, sizeof *trust);
}

/* --- the statement, the PAE, the signature ------------------------------------------ */

/* The statement's JSON text (malloc'd) for a finished manifest. */
static char *statement_text(const tg_msig_manifest *m)
{
    json_t *resources = json_array();
    json_t *ignore = json_array();
    tg_sha256 root;
    if (resources == NULL || ignore == NULL || tg_sha256_init(&root, "signature") != 0) {
        json_decref(resources);
        json_decref(ignore);
        return NULL;
    }
    int bad = 0;
    for (size_t i = 0; i < m->count; i++) {
        char hex[2 * TG_SHA256_SIZE + 1];
        tg_hex_encode(m->entries[i].digest, TG_SHA256_SIZE, hex);
        bad |= tg_sha256_update(&root, m->entries[i].digest, TG_SHA256_SIZE);
        bad |= json_array_append_new(resources,
                                     json_pack("{s:s, s:s, s:s}", "name", m->entries[i].name,
                                               "algorithm", "sha256", "digest", hex));
    }
    for (size_t i = 0; i < m->ignore_count; i++)
        bad |= json_array_append_new(ignore, json_string(m->ignore[i]));
    char root_hex[2 * TG_SHA256_SIZE + 1];
    bad |= tg_sha256_final_hex(&root, root_hex);
    json_t *st = json_pack(
        "{s:s, s:[{s:s, s:{s:s}}], s:s, s:{s:{s:s, s:s, s:b, s:o}, s:o}}", "_type", STATEMENT_TYPE,
        "subject", "name", m->model_name, "digest", "sha256", root_hex, "predicateType",
        PREDICATE_TYPE, "predicate", "serialization", "method", "files", "hash_type", "sha256",
        "allow_symlinks", m->allow_symlinks, "ignore_paths", ignore, "resources", resources);
    char *text = NULL;
    if (st != NULL && bad == 0)
        text = json_dumps(st, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(st);
    return text;
}

/* The DSSE pre-authentication encoding of a payload (malloc'd, *len). */
static unsigned char *pae(const char *type, const unsigned char *payload, size_t payload_len,
                          size_t *len)
{
    char head[128];
    int n = snprintf(head, sizeof head, "DSSEv1 %zu %s %zu ", strlen(type), type, payload_len);
    if (n < 0 || (size_t)n >= sizeof head || payload_len > SIZE_MAX - (size_t)n)
        return NULL;
    unsigned char *out = malloc((size_t)n + payload_len + 1);
    if (out == NULL)
        return NULL;
    memcpy(out, head, (size_t)n);
    memcpy(out + n, payload, payload_len);
    *len = (size_t)n + payload_len;
    return out;
}

static int ecdsa_sign(EVP_PKEY *pkey, const unsigned char *msg, size_t msg_len, unsigned char **sig,
                      size_t *sig_len)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx != NULL && EVP_DigestSignInit(ctx, NULL, curve_digest(pkey), NULL, pkey) == 1 &&
             EVP_DigestSign(ctx, NULL, sig_len, msg, msg_len) == 1;
    *sig = ok ? OPENSSL_malloc(*sig_len) : NULL;
    ok = ok && *sig != NULL && EVP_DigestSign(ctx, *sig, sig_len, msg, msg_len) == 1;
    EVP_MD_CTX_free(ctx);
    if (!ok) {
        OPENSSL_free(*sig);
        *sig = NULL;
    }
    return ok ? 0 : -1;
}

/* 1 verified, 0 not, -1 error. */
static int ecdsa_verify(EVP_PKEY *pkey, const unsigned char *msg, size_t msg_len,
                        const unsigned char *sig, size_t sig_len)
{
    const EVP_MD *md = curve_digest(pkey);
    if (md == NULL)
        return 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL)
        return -1;
    int rc = EVP_DigestVerifyInit(ctx, NULL, md, NULL, pkey) == 1
                 ? EVP_DigestVerify(ctx, sig, sig_len, msg, msg_len)
                 : -1;
    EVP_MD_CTX_free(ctx);
    ERR_clear_error(); /* a refused signature leaves OpenSSL's error queue filled */
    return rc == 1 ? 1 : 0;
}

char *tg_msig_sign(const tg_msig_manifest *m, const tg_msig_key *key, const tg_msig_certs *chain,
                   size_t *len, char *err, size_t err_size)
{
    if (!key->has_private) {
        say(err, err_size, "signing needs a private key");
        return NULL;
    }
    if (chain != NULL) {
        X509 *leaf = chain->count ? cert_from_der(chain->der[0], chain->len[0]) : NULL;
        EVP_PKEY *leaf_key = leaf ? X509_get0_pubkey(leaf) : NULL;
        int same = leaf_key != NULL && EVP_PKEY_eq(leaf_key, key->pkey) == 1;
        X509_free(leaf);
        if (!same) {
            say(err, err_size, "the signing certificate's public key is not the private key's");
            return NULL;
        }
    }
    char *statement = statement_text(m);
    size_t statement_len = statement ? strlen(statement) : 0;
    size_t msg_len = 0;
    unsigned char *msg =
        statement ? pae(PAYLOAD_TYPE, (const unsigned char *)statement, statement_len, &msg_len)
                  : NULL;
    unsigned char *sig = NULL;
    size_t sig_len = 0;
    char *out = NULL;
    json_t *material = NULL;
    if (msg == NULL || ecdsa_sign(key->pkey, msg, msg_len, &sig, &sig_len) != 0) {
        say(err, err_size, "signing failed (OpenSSL or out of memory)");
        goto done;
    }
    if (chain == NULL) {
        char hint[2 * TG_SHA256_SIZE + 1];
        if (tg_msig_key_hint(key, hint) != 0)
            goto fail;
        material = json_pack("{s:{s:s}, s:[]}", "publicKey", "hint", hint, "tlogEntries");
    } else {
        json_t *certs = json_array();
        for (size_t i = 0; certs != NULL && i < chain->count; i++) {
            char *b = base64_encode(chain->der[i], chain->len[i]);
            if (b == NULL || json_array_append_new(certs, json_pack("{s:s}", "rawBytes", b)) != 0) {
                free(b);
                json_decref(certs);
                certs = NULL;
                break;
            }
            free(b);
        }
        if (certs == NULL)
            goto fail;
        material = json_pack("{s:{s:o}, s:[]}", "x509CertificateChain", "certificates", certs,
                             "tlogEntries");
    }
    char *payload_b64 = base64_encode((const unsigned char *)statement, statement_len);
    char *sig_b64 = base64_encode(sig, sig_len);
    json_t *bundle = NULL;
    if (material != NULL && payload_b64 != NULL && sig_b64 != NULL) {
        bundle =
            json_pack("{s:s, s:O, s:{s:s, s:s, s:[{s:s, s:s}]}}", "mediaType", BUNDLE_MEDIA_TYPE,
                      "verificationMaterial", material, "dsseEnvelope", "payload", payload_b64,
                      "payloadType", PAYLOAD_TYPE, "signatures", "sig", sig_b64, "keyid", "");
    }
    free(payload_b64);
    free(sig_b64);
    char *text = bundle ? json_dumps(bundle, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(bundle);
    if (text != NULL) {
        size_t n = strlen(text);
        out = realloc(text, n + 2);
        if (out == NULL) {
            free(text);
            goto fail;
        }
        out[n] = '\n';
        out[n + 1] = '\0';
        *len = n + 1;
        goto done;
    }
fail:
    say(err, err_size, "out of memory while writing the bundle");
done:
    json_decref(material);
    OPENSSL_free(sig);
    free(msg);
    free(statement);
    return out;
}

/* --- verifying ----------------------------------------------------------------------- */

/* The shape of a JSON text before the parser sees it (strings skipped): its
 * deepest nesting of objects and arrays, and its count of structural tokens ({ [ , :),
 * which bounds the number of values jansson would allocate. Stops counting past
 * the bounds given. */
static void json_shape(const char *text, size_t len, int max_depth, size_t max_tokens, int *deepest,
                       size_t *tokens)
{
    int depth = 0;
    bool in_string = false;
    *deepest = 0;
    *tokens = 0;
    for (size_t i = 0; i < len && *deepest <= max_depth && *tokens <= max_tokens; i++) {
        char c = text[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            (*tokens)++;
            if (++depth > *deepest)
                *deepest = depth;
        } else if (c == '}' || c == ']') {
            depth--;
        } else if (c == ',' || c == ':') {
            (*tokens)++;
        }
    }
}

static json_t *parse_bounded(const char *text, size_t len, const char *what, size_t max_tokens,
                             char *err, size_t err_size)
{
    int depth;
    size_t tokens;
    json_shape(text, len, TG_MSIG_DEPTH_MAX, max_tokens, &depth, &tokens);
    if (depth > TG_MSIG_DEPTH_MAX) {
        say(err, err_size, "the %s nests deeper than %d levels", what, TG_MSIG_DEPTH_MAX);
        return NULL;
    }
    if (tokens > max_tokens) {
        say(err, err_size, "the %s holds more than %zu JSON values", what, max_tokens);
        return NULL;
    }
    json_error_t jerr;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (doc == NULL)
        say(err, err_size, "the %s is not JSON: %s (line %d)", what, jerr.text, jerr.line);
    else if (!json_is_object(doc)) {
        say(err, err_size, "the %s is not a JSON object", what);
        json_decref(doc);
        doc = NULL;
    }
    return doc;
}

static const char *get_string(json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

/* Reads the statement of a verified payload into out. */
static tg_msig_status read_statement(const unsigned char *payload, size_t len,
                                     tg_msig_manifest *out, char *err, size_t err_size)
{
    json_t *st = parse_bounded((const char *)payload, len, "statement",
                               TG_MSIG_STATEMENT_TOKENS_MAX, err, err_size);
    if (st == NULL)
        return TG_MSIG_MALFORMED;
    tg_msig_status status = TG_MSIG_MALFORMED;
    json_t *subjects = json_object_get(st, "subject");
    json_t *predicate = json_object_get(st, "predicate");
    json_t *serialization = json_object_get(predicate, "serialization");
    json_t *resources = json_object_get(predicate, "resources");
    const char *type = get_string(st, "_type");
    const char *ptype = get_string(st, "predicateType");
    if (type == NULL || strcmp(type, STATEMENT_TYPE) != 0) {
        say(err, err_size, "the payload is not an in-toto Statement v1");
        goto done;
    }
    if (ptype == NULL || strcmp(ptype, PREDICATE_TYPE) != 0) {
        say(err, err_size, "predicateType %s is not %s", ptype ? ptype : "(none)", PREDICATE_TYPE);
        status = TG_MSIG_UNSUPPORTED;
        goto done;
    }
    if (!json_is_array(subjects) || json_array_size(subjects) != 1) {
        say(err, err_size, "the statement needs exactly one subject");
        goto done;
    }
    json_t *subject = json_array_get(subjects, 0);
    const char *model_name = get_string(subject, "name");
    const char *root_hex = get_string(json_object_get(subject, "digest"), "sha256");
    unsigned char root_expected[TG_SHA256_SIZE];
    if (root_hex == NULL || hex_digest(root_hex, root_expected) != 0) {
        say(err, err_size, "the subject has no SHA-256 digest");
        goto done;
    }
    const char *method = get_string(serialization, "method");
    const char *hash_type = get_string(serialization, "hash_type");
    if (method == NULL || strcmp(method, "files") != 0 || hash_type == NULL ||
        strcmp(hash_type, "sha256") != 0) {
        say(err, err_size, "serialization %s/%s is not supported (only files/sha256)",
            method ? method : "(none)", hash_type ? hash_type : "(none)");
        status = TG_MSIG_UNSUPPORTED;
        goto done;
    }
    if (!json_is_array(resources) || json_array_size(resources) > TG_MSIG_RESOURCES_MAX) {
        say(err, err_size, "predicate.resources is not a list of at most %u files",
            TG_MSIG_RESOURCES_MAX);
        goto done;
    }
    if (tg_msig_manifest_init(out, model_name) != 0) {
        status = TG_MSIG_ERROR;
        say(err, err_size, "out of memory");
        goto done;
    }
    out->allow_symlinks = json_is_true(json_object_get(serialization, "allow_symlinks"));
    json_t *ignore = json_object_get(serialization, "ignore_paths");
    size_t k;
    json_t *v;
    if (ignore != NULL && !json_is_array(ignore)) {
        say(err, err_size, "ignore_paths is not a list");
        goto done;
    }
    json_array_foreach(ignore, k, v)
    {
        if (!json_is_string(v) || tg_msig_manifest_ignore(out, json_string_value(v)) != 0) {
            say(err, err_size, "ignore_paths[%zu] is not a path", k);
            goto done;
        }
    }
    tg_sha256 root;
    if (tg_sha256_init(&root, "signature") != 0) {
        status = TG_MSIG_ERROR;
        goto done;
    }
    json_array_foreach(resources, k, v)
    {
        const char *name = get_string(v, "name");
        const char *algorithm = get_string(v, "algorithm");
        unsigned char digest[TG_SHA256_SIZE];
        if (name == NULL || algorithm == NULL || strcmp(algorithm, "sha256") != 0 ||
            hex_digest(get_string(v, "digest"), digest) != 0 ||
            tg_msig_manifest_add(out, name, digest) != 0) {
            say(err, err_size, "resources[%zu] is not a file name with a SHA-256 digest", k);
            tg_sha256_free(&root);
            goto done;
        }
        tg_sha256_update(&root, digest, TG_SHA256_SIZE);
    }
    unsigned char root_actual[TG_SHA256_SIZE];
    if (tg_sha256_final(&root, root_actual) != 0) {
        status = TG_MSIG_ERROR;
        goto done;
    }
    if (memcmp(root_actual, root_expected, TG_SHA256_SIZE) != 0) {
        say(err, err_size, "the subject digest is not the digest of the resources");
        goto done;
    }
    /* resources name each file once; entries the recorded ignore list covers are
     * dropped from the comparison, as the reference verifier does */
    if (tg_msig_manifest_finish(out) != 0) {
        say(err, err_size, "a file is named twice in the resources");
        goto done;
    }
    status = TG_MSIG_OK;
done:
    json_decref(st);
    return status;
}

/* Certificate mode: the leaf chains to a trusted CA (at the leaf's notBefore, as the
 * reference does: a signature outlives its certificate), and may sign. *leaf_out gets
 * the leaf (the caller frees it). */
static tg_msig_status check_chain(json_t *certs, const tg_msig_trust *trust, X509 **leaf_out,
                                  char *err, size_t err_size)
{
    if (!json_is_array(certs) || json_array_size(certs) == 0 ||
        json_array_size(certs) > TG_MSIG_CERTS_MAX) {
        say(err, err_size, "the certificate chain holds 1 to %d certificates", TG_MSIG_CERTS_MAX);
        return TG_MSIG_MALFORMED;
    }
    if (trust->cas.count == 0) {
        say(err, err_size, "a certificate signature, and no CA certificate is trusted");
        return TG_MSIG_UNTRUSTED;
    }
    tg_msig_status status = TG_MSIG_ERROR;
    X509 *leaf = NULL;
    STACK_OF(X509) *untrusted = sk_X509_new_null();
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    if (untrusted == NULL || store == NULL || ctx == NULL)
        goto done;
    size_t i;
    json_t *v;
    json_array_foreach(certs, i, v)
    {
        const char *b64 = get_string(v, "rawBytes");
        size_t der_len = 0;
        unsigned char *der =
            b64 ? base64_decode(b64, strlen(b64), TG_MSIG_CERT_MAX, &der_len) : NULL;
        X509 *cert = der ? cert_from_der(der, der_len) : NULL;
        free(der);
        if (cert == NULL) {
            say(err, err_size, "certificate %zu of the chain is not a DER certificate", i);
            status = TG_MSIG_MALFORMED;
            goto done;
        }
        if (i == 0)
            leaf = cert;
        else if (sk_X509_push(untrusted, cert) == 0) {
            X509_free(cert);
            goto done;
        }
    }
    for (i = 0; i < trust->cas.count; i++) {
        X509 *ca = cert_from_der(trust->cas.der[i], trust->cas.len[i]);
        int added = ca != NULL && X509_STORE_add_cert(store, ca) == 1;
        X509_free(ca);
        if (!added)
            goto done;
    }
    if (X509_STORE_CTX_init(ctx, store, leaf, untrusted) != 1)
        goto done;
    struct tm tm;
    if (ASN1_TIME_to_tm(X509_get0_notBefore(leaf), &tm) != 1)
        goto done;
    X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(ctx), timegm(&tm));
    if (X509_verify_cert(ctx) != 1) {
        say(err, err_size, "the signing certificate does not chain to a trusted CA: %s",
            X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
        status = TG_MSIG_UNTRUSTED;
        goto done;
    }
    uint32_t flags = X509_get_extension_flags(leaf);
    bool can_sign =
        ((flags & EXFLAG_KUSAGE) && (X509_get_key_usage(leaf) & KU_DIGITAL_SIGNATURE)) ||
        ((flags & EXFLAG_XKUSAGE) && (X509_get_extended_key_usage(leaf) & XKU_CODE_SIGN));
    if (!can_sign) {
        say(err, err_size,
            "the signing certificate has neither the digitalSignature key usage nor the "
            "codeSigning extended key usage");
        status = TG_MSIG_UNTRUSTED;
        goto done;
    }
    *leaf_out = leaf;
    leaf = NULL;
    status = TG_MSIG_OK;
done:
    if (status == TG_MSIG_ERROR)
        say(err, err_size, "certificate verification failed (OpenSSL or out of memory)");
    ERR_clear_error();
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    sk_X509_pop_free(untrusted, X509_free);
    X509_free(leaf);
    return status;
}

tg_msig_status tg_msig_verify_bundle(const char *bundle, size_t len, const tg_msig_trust *trust,
                                     tg_msig_manifest *signed_out, char *signer, size_t signer_size,
                                     char *err, size_t err_size)
{
    memset(signed_out, 0, sizeof *signed_out);
    if (signer != NULL && signer_size > 0)
        signer[0] = '\0';
    if (len > TG_MSIG_BUNDLE_MAX) {
        say(err, err_size, "the signature file is larger than %u bytes", TG_MSIG_BUNDLE_MAX);
        return TG_MSIG_MALFORMED;
    }
    json_t *doc =
        parse_bounded(bundle, len, "signature file", TG_MSIG_BUNDLE_TOKENS_MAX, err, err_size);
    if (doc == NULL)
        return TG_MSIG_MALFORMED;
    tg_msig_status status = TG_MSIG_MALFORMED;
    unsigned char *payload = NULL, *sig = NULL, *msg = NULL;
    X509 *leaf = NULL;
    const char *media = get_string(doc, "mediaType");
    json_t *material = json_object_get(doc, "verificationMaterial");
    json_t *env = json_object_get(doc, "dsseEnvelope");
    json_t *sigs = json_object_get(env, "signatures");
    const char *payload_b64 = get_string(env, "payload");
    const char *payload_type = get_string(env, "payloadType");
    if (media == NULL ||
        (strcmp(media, BUNDLE_MEDIA_TYPE) != 0 && strcmp(media, BUNDLE_MEDIA_TYPE_02) != 0 &&
         strcmp(media, BUNDLE_MEDIA_TYPE_03_OLD) != 0)) {
        say(err, err_size, "mediaType %s is not a Sigstore bundle v0.3", media ? media : "(none)");
        goto done;
    }
    if (!json_is_object(material) || env == NULL || payload_b64 == NULL || payload_type == NULL ||
        !json_is_array(sigs)) {
        say(err, err_size, "the bundle lacks its verification material or its DSSE envelope");
        goto done;
    }
    if (strcmp(payload_type, PAYLOAD_TYPE) != 0) {
        say(err, err_size, "payloadType %s is not %s", payload_type, PAYLOAD_TYPE);
        status = TG_MSIG_UNSUPPORTED;
        goto done;
    }
    if (json_array_size(sigs) != 1) {
        say(err, err_size, "the envelope holds %zu signatures, not 1", json_array_size(sigs));
        goto done;
    }
    const char *sig_b64 = get_string(json_array_get(sigs, 0), "sig");
    size_t payload_len = 0, sig_len = 0, msg_len = 0;
    payload = base64_decode(payload_b64, strlen(payload_b64), len, &payload_len);
    sig = sig_b64 ? base64_decode(sig_b64, strlen(sig_b64), TG_MSIG_SIG_MAX, &sig_len) : NULL;
    if (payload == NULL || sig == NULL) {
        say(err, err_size, "the envelope's payload or signature is not base64 (or too long)");
        goto done;
    }
    msg = pae(PAYLOAD_TYPE, payload, payload_len, &msg_len);
    if (msg == NULL) {
        status = TG_MSIG_ERROR;
        say(err, err_size, "out of memory");
        goto done;
    }
    json_t *chain =
        json_object_get(json_object_get(material, "x509CertificateChain"), "certificates");
    json_t *public_key = json_object_get(material, "publicKey");
    if (chain != NULL) {
        status = check_chain(chain, trust, &leaf, err, err_size);
        if (status != TG_MSIG_OK)
            goto done;
        EVP_PKEY *leaf_key = X509_get0_pubkey(leaf);
        if (curve_digest(leaf_key) == NULL) {
            say(err, err_size, "the signing certificate's key is not EC P-256/P-384/P-521");
            status = TG_MSIG_UNSUPPORTED;
            goto done;
        }
        if (ecdsa_verify(leaf_key, msg, msg_len, sig, sig_len) != 1) {
            say(err, err_size, "the signature does not verify with the signing certificate's key");
            status = TG_MSIG_BAD_SIGNATURE;
            goto done;
        }
        if (signer != NULL)
            X509_NAME_oneline(X509_get_subject_name(leaf), signer, (int)signer_size);
    } else if (json_is_object(public_key)) {
        const char *hint = get_string(public_key, "hint");
        if (trust->key_count == 0) {
            say(err, err_size, "a key signature, and no public key is trusted");
            status = TG_MSIG_UNTRUSTED;
            goto done;
        }
        bool hint_matched = false, verified = false;
        char key_hint[2 * TG_SHA256_SIZE + 1] = "";
        for (size_t i = 0; i < trust->key_count && !verified; i++) {
            if (tg_msig_key_hint(trust->keys[i], key_hint) != 0)
                continue;
            bool hinted = hint != NULL && hint[0] != '\0';
            if (hinted && strcmp(hint, key_hint) != 0)
                continue;
            hint_matched = hinted; /* without a hint, a failure cannot tell key from tampering */
            verified = ecdsa_verify(trust->keys[i]->pkey, msg, msg_len, sig, sig_len) == 1;
        }
        if (!verified) {
            if (hint_matched) {
                say(err, err_size, "the signature does not verify with the key it names");
                status = TG_MSIG_BAD_SIGNATURE;
            } else {
                if (hint != NULL && hint[0] != '\0')
                    say(err, err_size, "signed by key %s, which is not a trusted key", hint);
                else
                    say(err, err_size, "the signature verifies with no trusted key");
                status = TG_MSIG_UNTRUSTED;
            }
            goto done;
        }
        if (signer != NULL)
            snprintf(signer, signer_size, "key %s", key_hint);
    } else {
        say(err, err_size,
            "the verification material is neither a public key nor a "
            "certificate chain");
        status = TG_MSIG_UNSUPPORTED;
        goto done;
    }
    status = read_statement(payload, payload_len, signed_out, err, err_size);
done:
    if (status != TG_MSIG_OK)
        tg_msig_manifest_free(signed_out);
    X509_free(leaf);
    free(msg);
    free(sig);
    free(payload);
    json_decref(doc);
    return status;
}

char *tg_msig_read_file(const char *path, size_t max, size_t *len, char *err, size_t err_size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        say(err, err_size, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
        say(err, err_size, "%s: not a regular file of at most %zu bytes", path, max);
        close(fd);
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    ssize_t n = buf ? tg_pread_upto(fd, buf, (size_t)st.st_size, 0) : -1;
    close(fd);
    if (n < 0) {
        say(err, err_size, "%s: %s", path, buf ? strerror(errno) : "out of memory");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}
