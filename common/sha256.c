/* SHA-256 with every OpenSSL call checked (see sha256.h). */
#include "sha256.h"
#include "test_hooks.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- failure injection ---- */

static pthread_once_t inject_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t inject_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool inject_armed;
static char inject_what[64];
static unsigned long inject_left; /* calls of inject_what until the failing one */

static void arm(const char *what, unsigned long nth)
{
    pthread_mutex_lock(&inject_lock);
    snprintf(inject_what, sizeof inject_what, "%s", what != NULL ? what : "");
    inject_left = nth;
    atomic_store(&inject_armed, nth != 0);
    pthread_mutex_unlock(&inject_lock);
}

/* The test hook SHA256_FAIL=WHAT:N (test_hooks.h) */
static void read_environment(void)
{
    const char *spec = tg_test_hook(TG_HOOK_SHA256_FAIL);
    const char *colon = spec != NULL ? strrchr(spec, ':') : NULL;
    if (colon == NULL || colon == spec || (size_t)(colon - spec) >= sizeof inject_what)
        return;
    char *end = NULL;
    unsigned long nth = strtoul(colon + 1, &end, 10);
    if (end == colon + 1 || *end != '\0')
        return;
    char what[sizeof inject_what];
    memcpy(what, spec, (size_t)(colon - spec));
    what[colon - spec] = '\0';
    arm(what, nth);
}

void tg_sha256_fail_nth(const char *what, unsigned long nth)
{
    pthread_once(&inject_once, read_environment);
    arm(what, nth);
}

/* True when this EVP call of the digest named what is the one to fail. */
static bool injected_failure(const char *what)
{
    pthread_once(&inject_once, read_environment);
    if (!atomic_load_explicit(&inject_armed, memory_order_relaxed))
        return false;
    bool fail = false;
    pthread_mutex_lock(&inject_lock);
    if (inject_left > 0 && strcmp(inject_what, what != NULL ? what : "") == 0 &&
        --inject_left == 0) {
        fail = true;
        atomic_store(&inject_armed, false);
    }
    pthread_mutex_unlock(&inject_lock);
    return fail;
}

/* ---- digests ---- */

static int fail(tg_sha256 *s)
{
    EVP_MD_CTX_free(s->ctx);
    s->ctx = NULL;
    s->failed = true;
    return -1;
}

int tg_sha256_init(tg_sha256 *s, const char *what)
{
    s->what = what;
    s->failed = false;
    s->ctx = injected_failure(what) ? NULL : EVP_MD_CTX_new();
    if (s->ctx == NULL)
        return fail(s);
    if (injected_failure(what) || EVP_DigestInit_ex(s->ctx, EVP_sha256(), NULL) != 1)
        return fail(s);
    return 0;
}

int tg_sha256_update(tg_sha256 *s, const void *data, size_t len)
{
    if (s->failed || s->ctx == NULL)
        return -1;
    if (injected_failure(s->what) || EVP_DigestUpdate(s->ctx, data, len) != 1)
        return fail(s);
    return 0;
}

int tg_sha256_final(tg_sha256 *s, unsigned char digest[TG_SHA256_SIZE])
{
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    memset(digest, 0, TG_SHA256_SIZE);
    if (s->failed || s->ctx == NULL)
        return -1;
    if (injected_failure(s->what) || EVP_DigestFinal_ex(s->ctx, out, &len) != 1 ||
        len != TG_SHA256_SIZE)
        return fail(s);
    memcpy(digest, out, TG_SHA256_SIZE);
    tg_sha256_free(s);
    return 0;
}

int tg_sha256_final_hex(tg_sha256 *s, char hex[2 * TG_SHA256_SIZE + 1])
{
    unsigned char digest[TG_SHA256_SIZE];
    hex[0] = '\0';
    if (tg_sha256_final(s, digest) != 0)
        return -1;
    tg_hex_encode(digest, sizeof digest, hex);
    return 0;
}

void tg_sha256_free(tg_sha256 *s)
{
    EVP_MD_CTX_free(s->ctx);
    s->ctx = NULL;
}

int tg_sha256_hex(const void *data, size_t len, char hex[2 * TG_SHA256_SIZE + 1], const char *what)
{
    tg_sha256 s;
    hex[0] = '\0';
    if (tg_sha256_init(&s, what) != 0 || tg_sha256_update(&s, data, len) != 0) {
        tg_sha256_free(&s);
        return -1;
    }
    return tg_sha256_final_hex(&s, hex);
}

void tg_hex_encode(const void *bytes, size_t len, char *out)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *b = bytes;
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * len] = '\0';
}
