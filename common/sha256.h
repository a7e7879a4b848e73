/* SHA-256, the one way the server and the CLI hash: OpenSSL's EVP interface with every
 * call's result checked. A failed call is an error the caller sees (-1), never a digest
 * of whatever the output buffer held: a failed context stays failed, and the final
 * functions then leave "" in hex (all zero bytes in a raw digest).
 *
 * Each digest is named (what: "manifest", "upload", ...) so that a failure can be
 * injected where a test wants it: tg_sha256_fail_nth, or in a test build's server the
 * test hook TENSORGATE_TEST_SHA256_FAIL=WHAT:N (test_hooks.h; read once, at the first
 * digest), make the Nth EVP call (counting from 1: the context's allocation, init,
 * each update, final) of the digests named WHAT fail, once. */
#ifndef TG_SHA256_H
#define TG_SHA256_H

#include <stdbool.h>
#include <stddef.h>

#define TG_SHA256_SIZE 32
#define TG_SHA256_HEX_LEN 64 /* lowercase hex digits of a digest */

struct evp_md_ctx_st; /* OpenSSL's EVP_MD_CTX */

typedef struct tg_sha256 {
    struct evp_md_ctx_st *ctx; /* NULL before init, after final and after a failure */
    const char *what;          /* a static name of the digest (failure injection) */
    bool failed;
} tg_sha256;

/* Starts a digest. Returns 0, or -1 when OpenSSL fails (s then holds nothing to free,
 * and later updates and the final fail too). */
int tg_sha256_init(tg_sha256 *s, const char *what);
/* Adds len bytes. Returns 0, or -1 when this or an earlier call failed. */
int tg_sha256_update(tg_sha256 *s, const void *data, size_t len);
/* Ends the digest and releases the context. Returns 0, or -1 when this or an earlier
 * call failed (digest is then all zero, hex ""). */
int tg_sha256_final(tg_sha256 *s, unsigned char digest[TG_SHA256_SIZE]);
int tg_sha256_final_hex(tg_sha256 *s, char hex[2 * TG_SHA256_SIZE + 1]);
/* Releases a context that will not reach its final (safe after final, and twice). */
void tg_sha256_free(tg_sha256 *s);

/* One-shot: the SHA-256 of len bytes as 64 lowercase hex digits. 0, or -1 (hex ""). */
int tg_sha256_hex(const void *data, size_t len, char hex[2 * TG_SHA256_SIZE + 1], const char *what);

/* len bytes as 2 * len lowercase hex digits and a NUL (out holds 2 * len + 1). */
void tg_hex_encode(const void *bytes, size_t len, char *out);

/* Failure injection for tests: the nth EVP call (1 = the next) made for digests named
 * what fails, once; nth 0 disarms. */
void tg_sha256_fail_nth(const char *what, unsigned long nth);

#endif
