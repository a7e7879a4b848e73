/* The server's signing cost at publish (server/ingest/version_sign.h) for a version of
 * 10 GB, next to what hashing those 10 GB would cost (the anchor: SHA-256 of 64 MiB
 * in memory, measured in the same run and scaled to 10 GB; reading them back from
 * disk or S3 would only add to it).
 * Signing works from the catalog's digests, so its cost follows the number of files,
 * not their bytes: two shapes of 10 GB are measured, 5 shards of 2 GB (+ 3 JSON
 * files) and 10,000 files of 1 MB. Each figure is the best of a few runs of the whole
 * step: manifest, statement, ECDSA P-256, bundle, and its blob stored through the
 * ingest pipeline into a local blob store under /tmp.
 * Usage: sign_publish */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_result.h"
#include "blobstore.h"
#include "version_sign.h"

#define REPEATS 5
#define TEN_GB 10e9

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void no_record(void *ctx, const tg_file_record *file, const char *stats)
{
    (void)ctx, (void)file, (void)stats;
}

/* Best seconds of REPEATS signings of count files. */
static double sign_seconds(tg_version_signer *s, tg_blobstore *store, tg_file_record *files,
                           size_t count)
{
    double best = 1e9;
    for (int r = 0; r < REPEATS; r++) {
        tg_file_record sig;
        char err[256];
        double t0 = now_seconds();
        if (tg_version_sign(s, store, "bench", files, count, no_record, NULL, &sig, err,
                            sizeof err) != 0) {
            fprintf(stderr, "sign: %s\n", err);
            exit(1);
        }
        double t = now_seconds() - t0;
        if (t < best)
            best = t;
    }
    return best;
}

static void fill(tg_file_record *f, const char *path, uint64_t size, unsigned seed)
{
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    f->size = size;
    char text[32];
    snprintf(text, sizeof text, "%u", seed);
    tg_sha256_hex(text, strlen(text), f->sha256, "bench");
}

int main(void)
{
    char root[] = "/tmp/tg-bench-sign-XXXXXX";
    if (mkdtemp(root) == NULL)
        return 1;
    char key_path[512], err[512];
    snprintf(key_path, sizeof key_path, "%s/key.pem", root);
    EVP_PKEY *pkey = EVP_EC_gen("P-256");
    FILE *kf = fopen(key_path, "w");
    PEM_write_PrivateKey(kf, pkey, NULL, NULL, 0, NULL, NULL);
    fclose(kf);
    EVP_PKEY_free(pkey);
    tg_version_signer signer;
    tg_blobstore *store = NULL;
    if (tg_version_signer_load(&signer, key_path, NULL, err, sizeof err) != 0 ||
        tg_blobstore_open(root, &store, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    /* 5 shards of 2 GB and 3 small files */
    tg_file_record shards[8];
    for (unsigned i = 0; i < 5; i++) {
        char name[64];
        snprintf(name, sizeof name, "model-%05u-of-00005.safetensors", i + 1);
        fill(&shards[i], name, 2000000000ull, i);
    }
    fill(&shards[5], "config.json", 700, 5);
    fill(&shards[6], "model.safetensors.index.json", 30000, 6);
    fill(&shards[7], "tokenizer.json", 2000000, 7);
    double t_shards = sign_seconds(&signer, store, shards, 8);
    /* 10,000 files of 1 MB */
    size_t many = 10000;
    tg_file_record *files = calloc(many, sizeof *files);
    for (unsigned i = 0; i < many; i++) {
        char name[64];
        snprintf(name, sizeof name, "part/%05u.bin", i);
        fill(&files[i], name, 1000000, i + 100);
    }
    double t_many = sign_seconds(&signer, store, files, many);
    /* the anchor: SHA-256 of 64 MiB in memory, scaled to 10 GB */
    size_t n = 64u << 20;
    unsigned char *buf = malloc(n);
    memset(buf, 0x5a, n);
    char hex[65];
    double t_hash = 1e9;
    for (int r = 0; r < 3; r++) {
        double t0 = now_seconds();
        tg_sha256_hex(buf, n, hex, "bench");
        double t = now_seconds() - t0;
        if (t < t_hash)
            t_hash = t;
    }
    double hash_10gb = t_hash * TEN_GB / (double)n;
    printf("sign at publish, 10 GB as 5 shards + 3 files: %.3f ms\n", t_shards * 1e3);
    printf("sign at publish, 10 GB as 10000 files:        %.3f ms\n", t_many * 1e3);
    printf("anchor: SHA-256 of 10 GB in memory (from 64 MiB): %.2f s\n", hash_10gb);
    bench_result("sign_publish_10gb_5_shards_ms", t_shards * 1e3, "ms", "sha256_10gb_s", hash_10gb);
    bench_result("sign_publish_10gb_10000_files_ms", t_many * 1e3, "ms", "sha256_10gb_s",
                 hash_10gb);
    free(buf);
    free(files);
    tg_blobstore_close(store);
    tg_version_signer_free(&signer);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    return system(cmd) == 0 ? 0 : 1;
}
