/* A full disk at every write of an upload: with TENSORGATE_TEST_ENOSPC_AT=N
 * (server/storage/store.h) the server's Nth blob-store write (each write(2) of a temp file,
 * each temp file's fsync before its rename) fails with ENOSPC, once.
 *
 * For N = 1, 2, 3, ... the server restarts with the knob and a fresh draft receives a
 * small sharded model (two shards of several writes each, then the index). The upload
 * the Nth write falls in answers 507 insufficient_storage and leaves nothing: no file
 * row, no blob, no temp file; the others are stored whole; the same upload sent again
 * is stored. The walk ends at the first N past the model's last write (every upload
 * 201), so it covers every write whatever the body's chunking was. */
#include "harness.h"

static const char *write_token;

#define BASE "/v1/models/acme/faults"
#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"
#define INDEX "model.safetensors.index.json"
#define FILES 3
/* far more than the writes of one model; the walk stops well before */
#define MAX_N 200

static const it_tensor_spec shard1_tensors[] = {{"a.weight", "F32", 2, {256, 256}}};
static const it_tensor_spec shard2_tensors[] = {{"b.weight", "F32", 2, {128, 256}}};

/* Restarts the server on the same data with TENSORGATE_TEST_ENOSPC_AT=n. */
static bool restart_with(int n)
{
    CHECK(it_server_stop() == 0);
    char spec[16];
    snprintf(spec, sizeof spec, "%d", n);
    setenv("TENSORGATE_TEST_ENOSPC_AT", spec, 1);
    int started = it_server_start_args(NULL, NULL);
    unsetenv("TENSORGATE_TEST_ENOSPC_AT");
    CHECK(started == 0);
    if (started != 0)
        it_dump_log(it_srv.log);
    return started == 0;
}

static it_response upload(int rev, const char *path, const it_buf *b)
{
    char url[512];
    snprintf(url, sizeof url, BASE "/versions/%d/files/%s", rev, path);
    return it_send("PUT", url, write_token, b->data, b->len);
}

/* True when version rev lists a file at path. */
static bool listed(int rev, const char *path)
{
    char url[256];
    snprintf(url, sizeof url, BASE "/versions/%d/files", rev);
    it_response r = it_get(url);
    CHECK_STATUS(r, 200);
    bool found = false;
    json_t *files = json_object_get(r.json, "files");
    for (size_t i = 0; i < json_array_size(files); i++) {
        const char *p = json_string_value(json_object_get(json_array_get(files, i), "path"));
        if (p != NULL && strcmp(p, path) == 0)
            found = true;
    }
    it_response_free(&r);
    return found;
}

TEST(enospc_at_every_write_of_an_upload)
{
    it_response r = it_send_json("POST", "/v1/models", write_token, "{\"name\":\"acme/faults\"}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);

    const char *paths[FILES] = {SHARD1, SHARD2, INDEX};
    it_buf files[FILES] = {{0}};
    int n = 1;
    for (; n <= MAX_N; n++) {
        if (!restart_with(n))
            return;
        r = it_send("POST", BASE "/versions", write_token, NULL, 0);
        CHECK_STATUS(r, 201);
        int rev = (int)it_json_int(r.json, "version");
        it_response_free(&r);

        /* content of this round only, so no blob exists beforehand */
        it_build_safetensors(&files[0], shard1_tensors, 1, NULL, (unsigned)(2 * n));
        it_build_safetensors(&files[1], shard2_tensors, 1, NULL, (unsigned)(2 * n + 1));
        files[2].len = 0;
        it_buf_printf(&files[2],
                      "{\"metadata\":{\"total_size\":%d,\"round\":%d},\"weight_map\":{"
                      "\"a.weight\":\"" SHARD1 "\",\"b.weight\":\"" SHARD2 "\"}}",
                      (256 * 256 + 128 * 256) * 4, n);
        char sha[FILES][65];
        for (int f = 0; f < FILES; f++)
            it_sha256_hex(files[f].data, files[f].len, sha[f]);

        int blobs_before = it_count_blobs();
        int failed = -1, refusals = 0;
        for (int f = 0; f < FILES; f++) {
            r = upload(rev, paths[f], &files[f]);
            if (r.status == 507) {
                CHECK_PROBLEM(r, 507, "insufficient_storage");
                failed = f;
                refusals++;
            } else {
                CHECK_STATUS(r, 201);
                CHECK_STR(it_json_str(&r, "sha256"), sha[f]);
            }
            it_response_free(&r);
        }
        CHECK(refusals <= 1);
        CHECK_EQ_U64(it_count_tmp_settled(), 0);
        for (int f = 0; f < FILES; f++) {
            CHECK(listed(rev, paths[f]) == (f != failed));
            CHECK(it_blob_exists(sha[f]) == (f != failed));
        }
        CHECK_EQ_U64(it_count_blobs(), blobs_before + FILES - refusals);
        if (failed < 0)
            break; /* past the last write: every upload stored */
        /* injected once: the same upload is now stored */
        r = upload(rev, paths[failed], &files[failed]);
        CHECK_STATUS(r, 201);
        it_response_free(&r);
        CHECK(listed(rev, paths[failed]));
        CHECK(it_blob_exists(sha[failed]));
        CHECK_EQ_U64(it_count_blobs(), blobs_before + FILES);
    }
    /* at least one write and one fsync per file failed before the walk ended */
    CHECK(n > 2 * FILES && n <= MAX_N);
    printf("enospc walk: %d writes of a three-file model\n", n - 1);
    r = it_send("POST", BASE "/versions/1/publish", write_token, NULL, 0);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    for (int f = 0; f < FILES; f++)
        it_buf_free(&files[f]);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    write_token = it_token("write", NULL);
    RUN(enospc_at_every_write_of_an_upload);
    return it_finish(argv[0]);
}
