/* Unit tests for server/jobs/shard_check.c on a temporary blob store: two
 * safetensors shards and their index agree (0); an index naming a tensor in the
 * wrong shard, or a tensor no shard holds, is a mismatch (1, with a detail); two
 * shards of one set holding the same tensor, without an index, is a mismatch; a
 * shard whose blob is missing cannot be read (-1). (The mirror's publish runs it:
 * tests/mirror/run.sh.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blobstore.h"
#include "catalog.h"
#include "sha256.h"
#include "shard_check.h"
#include "test.h"

static tg_blobstore *blobs;

/* Stores bytes as a blob; file gets path, kind, size and sha256. */
static void put(const char *path, const char *kind, const void *data, size_t len,
                tg_file_record *file)
{
    memset(file, 0, sizeof *file);
    snprintf(file->path, sizeof file->path, "%s", path);
    snprintf(file->kind, sizeof file->kind, "%s", kind);
    file->size = len;
    CHECK(tg_sha256_hex(data, len, file->sha256, "test") == 0);
    tg_blob_writer *w = NULL;
    CHECK(tg_blob_write_begin(blobs, &w) == TG_STORE_OK);
    if (w == NULL)
        return;
    CHECK(tg_blob_write(w, data, len) == TG_STORE_OK);
    CHECK(tg_blob_write_commit(w, file->sha256) == TG_STORE_OK);
}

/* A safetensors file of one F32 tensor of 4 values named name. */
static void shard(const char *path, const char *name, tg_file_record *file)
{
    char header[256];
    int n = snprintf(header, sizeof header,
                     "{\"%s\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", name);
    while (n % 8 != 0)
        header[n++] = ' ';
    unsigned char buf[8 + 256 + 16];
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(buf + 8, header, (size_t)n);
    memset(buf + 8 + n, 0, 16);
    put(path, "safetensors", buf, (size_t)(8 + n + 16), file);
}

static int check(tg_file_record *items, size_t count, char *detail, size_t len)
{
    tg_file_records files = {.items = items, .count = count, .cap = count};
    detail[0] = '\0';
    return tg_shard_check(blobs, 1 << 20, &files, detail, len);
}

TEST(test_shard_check)
{
    tg_file_record f[4];
    shard("m-00001-of-00002.safetensors", "a", &f[0]);
    shard("m-00002-of-00002.safetensors", "b", &f[1]);
    static const char good[] =
        "{\"metadata\":{},\"weight_map\":{\"a\":\"m-00001-of-00002.safetensors\","
        "\"b\":\"m-00002-of-00002.safetensors\"}}";
    put("m.safetensors.index.json", "json", good, strlen(good), &f[2]);
    char detail[512];
    CHECK(check(f, 3, detail, sizeof detail) == 0);
    static const char swapped[] =
        "{\"metadata\":{},\"weight_map\":{\"a\":\"m-00002-of-00002.safetensors\","
        "\"b\":\"m-00001-of-00002.safetensors\"}}";
    put("m.safetensors.index.json", "json", swapped, strlen(swapped), &f[2]);
    CHECK(check(f, 3, detail, sizeof detail) == 1);
    CHECK(detail[0] != '\0');
    static const char extra[] =
        "{\"metadata\":{},\"weight_map\":{\"a\":\"m-00001-of-00002.safetensors\","
        "\"b\":\"m-00002-of-00002.safetensors\",\"c\":\"m-00002-of-00002.safetensors\"}}";
    put("m.safetensors.index.json", "json", extra, strlen(extra), &f[2]);
    CHECK(check(f, 3, detail, sizeof detail) == 1);
    /* no index: one shard set holding "a" twice */
    shard("m-00002-of-00002.safetensors", "a", &f[3]);
    tg_file_record pair[2] = {f[0], f[3]};
    CHECK(check(pair, 2, detail, sizeof detail) == 1);
    /* a shard whose blob is not in the store */
    tg_file_record gone = f[0];
    memset(gone.sha256, 'e', 64);
    CHECK(check(&gone, 1, detail, sizeof detail) == -1);
}

int main(int argc, char **argv)
{
    (void)argc;
    char root[] = "/tmp/tg-shard-check-XXXXXX";
    char err[256] = "";
    if (mkdtemp(root) == NULL || tg_blobstore_open(root, &blobs, err, sizeof err) != 0) {
        fprintf(stderr, "store: %s\n", err);
        return 1;
    }
    RUN(test_shard_check);
    tg_blobstore_close(blobs);
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", root);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return test_report(argv[0]);
}
