/* Unit tests for server/ingest/pipeline.c, on a temporary blob store:
 *  - an accepted safetensors file fed in small pieces is committed: described (kind,
 *    size, sha256, tensors, parameters, NaN/Inf and the stats text), its blob holds
 *    the bytes, the record step runs under the shared blobs lock, tmp/ is empty;
 *    sidecars are "json" or "text" with stats "[]";
 *  - every stop leaves nothing on disk at once: a gate refusal (final, or certain
 *    with the verdict pending until the end), more than max_bytes, a source that
 *    ends short of (or after) its declared size, a size-based refusal of a source
 *    that ended short, the memory budget saying no (abandon);
 *  - after a stop the bytes are counted and dropped (abandon past drain_limit), and
 *    hash_after_stop (a scan) hashes them all;
 *  - failures: the temp file that cannot be made, the digest (the SHA-256 seam), the
 *    blobs lock, the commit's rename: each nothing stored, no temp file left;
 *  - ENOSPC at each write (TENSORGATE_TEST_ENOSPC_AT, in a fresh process per write):
 *    TG_INGEST_NO_SPACE, no blob, no temp file; past the last write, committed;
 *  - abort is safe twice and on a zeroed ingest. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blobstore.h"
#include "pipeline.h"
#include "sha256.h"
#include "st_write.h"
#include "store.h"
#include "test.h"

static char data_root[64];
static tg_store store;           /* the layout, to look at (tmp_dir) */
static tg_blobstore *blob_store; /* the same directory, as the pipeline writes to it */

static bool store_open(void)
{
    snprintf(data_root, sizeof data_root, "/tmp/tg-pipeline-XXXXXX");
    if (mkdtemp(data_root) == NULL)
        return false;
    char err[256] = "";
    if (tg_store_open(&store, data_root, err, sizeof err) != 0 ||
        tg_blobstore_open(data_root, &blob_store, err, sizeof err) != 0) {
        fprintf(stderr, "store: %s\n", err);
        return false;
    }
    return true;
}

static int dir_entries(const char *path)
{
    DIR *dir = opendir(path);
    if (dir == NULL)
        return -1;
    int n = 0;
    const struct dirent *e;
    while ((e = readdir(dir)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(dir);
    return n;
}

/* Entries of the temp folder of the store under data_root/NAME. */
static int tmp_entries(const char *name)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s/tmp", data_root, name);
    return dir_entries(path);
}

/* A blob store of its own under data_root/NAME, broken on disk after it opened by
 * running COMMAND there (sh -c, in that directory). NULL on failure. */
static tg_blobstore *broken_store(const char *name, const char *command)
{
    char root[128], err[256] = "", shell[512];
    snprintf(root, sizeof root, "%s/%s", data_root, name);
    tg_blobstore *broken = NULL;
    if (tg_blobstore_open(root, &broken, err, sizeof err) != 0) {
        fprintf(stderr, "broken store: %s\n", err);
        return NULL;
    }
    snprintf(shell, sizeof shell, "cd %s && %s", root, command);
    if (system(shell) != 0) {
        tg_blobstore_close(broken);
        return NULL;
    }
    return broken;
}

static void store_remove(void)
{
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", data_root);
    CHECK(system(command) == 0);
}

/* Entries of a directory (not . and ..); -1 when it cannot be read. */

static int count_blob(void *ctx, const char *hex)
{
    (void)hex;
    (*(int *)ctx)++;
    return 0;
}

static int blob_count(void)
{
    int n = 0;
    tg_store_each_blob(&store, count_blob, &n);
    return n;
}

/* A safetensors file: w (F32 [2,3]) holding one NaN and one Inf, i (I32 [2]). */
static uint8_t *safetensors_file(size_t *len)
{
    static const uint32_t w[6] = {0x3f800000u, 0x7fc00000u, 0x7f800000u, 0, 0x40000000u, 0};
    static const int32_t i[2] = {1, 2};
    static const uint64_t w_shape[2] = {2, 3}, i_shape[1] = {2};
    st_write_tensor tensors[2] = {{"w", ST_F32, 2, w_shape}, {"i", ST_I32, 1, i_shape}};
    const void *data[2] = {w, i};
    uint8_t *file = NULL;
    st_error err;
    if (st_write_to_buffer(tensors, data, 2, NULL, 0, false, &file, len, &err) != ST_OK)
        return NULL;
    return file;
}

static tg_ingest_config storing(st_gate_kind kind, uint64_t declared)
{
    tg_ingest_config config = {
        .kind = kind,
        .declared = declared,
        .max_bytes = UINT64_MAX,
        .max_header = 1 << 20,
        .store = blob_store,
        .digest_name = "pipeline-test",
        .stop_when_certain = true,
        .check_length = true,
        .drain_limit = UINT64_MAX,
    };
    return config;
}

/* Feeds data in pieces of piece bytes; returns the state after the last. */
static tg_ingest_state feed_pieces(tg_ingest *ingest, const uint8_t *data, size_t len, size_t piece)
{
    tg_ingest_state state = ingest->state;
    for (size_t off = 0; off < len; off += piece)
        state = tg_ingest_feed(ingest, data + off, len - off < piece ? len - off : piece);
    return state;
}

/* The record step: what it was given, and whether gc's exclusive lock was free. */
typedef struct recorded {
    int calls;
    tg_file_record file;
    char stats[256];
    bool exclusive_lock_refused;
} recorded;

static void record(void *ctx, const tg_file_record *file, const char *stats)
{
    recorded *r = ctx;
    r->calls++;
    r->file = *file;
    snprintf(r->stats, sizeof r->stats, "%s", stats);
    int handle = tg_blobstore_lock(blob_store, true, false);
    r->exclusive_lock_refused = handle < 0 && errno == EWOULDBLOCK;
    if (handle >= 0)
        tg_blobstore_unlock(blob_store, handle);
}

static bool blob_holds(const char *hex, const uint8_t *data, size_t len)
{
    tg_blob_check check;
    tg_blob_reader *blob = tg_blob_open(blob_store, hex, TG_BLOB_SIZE_UNCHECKED, &check);
    if (blob == NULL)
        return false;
    uint8_t *back = malloc(len + 1);
    bool same = back != NULL && tg_blob_size(blob) == len &&
                tg_blob_read_at(blob, back, len, 0) == 0 && memcmp(back, data, len) == 0;
    free(back);
    tg_blob_close(blob);
    return same;
}

TEST(accepted_file_is_described_and_committed)
{
    size_t len = 0;
    uint8_t *file = safetensors_file(&len);
    CHECK(file != NULL);
    if (file == NULL)
        return;
    char want_sha[65];
    CHECK_EQ_U64(tg_sha256_hex(file, len, want_sha, "test"), 0);
    tg_ingest ingest;
    tg_ingest_config config = storing(ST_GATE_SAFETENSORS, len);
    CHECK_EQ_U64(tg_ingest_begin(&ingest, &config), 0);
    CHECK(ingest.writer != NULL);
    CHECK_EQ_U64(dir_entries(store.tmp_dir), 1);
    CHECK_EQ_U64(feed_pieces(&ingest, file, len, 7), TG_INGEST_OPEN);
    CHECK_EQ_U64(ingest.seen, len);
    CHECK_EQ_U64(tg_ingest_finish(&ingest), TG_INGEST_OPEN);
    CHECK_EQ_U64(tg_ingest_finish(&ingest), TG_INGEST_OPEN); /* a second call changes nothing */
    recorded r = {0};
    tg_file_record made;
    CHECK_EQ_U64(tg_ingest_commit(&ingest, "dir/model.safetensors", &made, record, &r), 0);
    CHECK_EQ_U64(ingest.state, TG_INGEST_COMMITTED);
    CHECK_EQ_U64(r.calls, 1);
    CHECK(r.exclusive_lock_refused); /* the record step holds the shared blobs lock */
    CHECK_STR(made.path, "dir/model.safetensors");
    CHECK_STR(made.kind, "safetensors");
    CHECK_STR(made.sha256, want_sha);
    CHECK_EQ_U64(made.size, len);
    CHECK_EQ_U64(made.tensors, 2);
    CHECK_EQ_U64(made.parameters, 8);
    CHECK_EQ_U64(made.nan, 1);
    CHECK_EQ_U64(made.inf, 1);
    CHECK_STR(r.file.sha256, want_sha);
    /* per tensor in file order: w's NaN and Inf, i has none */
    CHECK_STR(r.stats, "[[1,1],[0,0]]");
    CHECK(blob_holds(want_sha, file, len));
    CHECK_EQ_U64(dir_entries(store.tmp_dir), 0);
    tg_ingest_abort(&ingest);
    tg_ingest_abort(&ingest);
    free(file);
}

static void commit_sidecar(st_gate_kind kind, const char *text, const char *want_kind)
{
    tg_ingest ingest;
    tg_ingest_config config = storing(kind, ST_FILE_SIZE_UNKNOWN);
    CHECK_EQ_U64(tg_ingest_begin(&ingest, &config), 0);
    CHECK_EQ_U64(tg_ingest_feed(&ingest, text, strlen(text)), TG_INGEST_OPEN);
    CHECK_EQ_U64(tg_ingest_finish(&ingest), TG_INGEST_OPEN);
    recorded r = {0};
    tg_file_record made;
    CHECK_EQ_U64(tg_ingest_commit(&ingest, "side", &made, record, &r), 0);
    CHECK_STR(made.kind, want_kind);
    CHECK_STR(r.stats, "[]");
    CHECK_EQ_U64(made.tensors, 0);
    CHECK(blob_holds(made.sha256, (const uint8_t *)text, strlen(text)));
    tg_ingest_abort(&ingest);
}

TEST(sidecars_are_json_or_text)
{
    commit_sidecar(ST_GATE_SIDECAR, "{\"a\": [1, 2]}\n", "json");
    commit_sidecar(ST_GATE_SIDECAR, "plain UTF-8 text, caf\xc3\xa9\n", "text");
    commit_sidecar(ST_GATE_SIDECAR_JSON, "{\"b\": null}", "json");
    CHECK_EQ_U64(dir_entries(store.tmp_dir), 0);
}

static const uint8_t pickle_p2[] = {0x80, 0x02, '}', 'q',  0x00, 'X',  0x01, 0x00, 0x00,
                                    0x00, 'w',  'q', 0x01, 'K',  0x01, 's',  '.'};

/* A header the gate refuses as soon as it has it: a space before its { */
static const uint8_t bad_header[] = {8,   0,   0,   0,   0,   0,   0,   0,
                                     ' ', '{', '}', ' ', ' ', ' ', ' ', ' '};

TEST(refusals_stop_at_once_and_keep_nothing)
{
    int blobs = blob_count();
    /* refused at the header: nothing more is stored, what follows is counted and dropped */
    tg_ingest ingest;
    tg_ingest_config config = storing(ST_GATE_SAFETENSORS, ST_FILE_SIZE_UNKNOWN);
    CHECK_EQ_U64(tg_ingest_begin(&ingest, &config), 0);
    CHECK_EQ_U64(tg_ingest_feed(&ingest, bad_header, sizeof bad_header), TG_INGEST_REFUSED);
    CHECK_EQ_U64(dir_entries(store.tmp_dir), 0);
    CHECK(ingest.writer == NULL);
    CHECK_EQ_U64(ingest.seen, 0);
    CHECK_EQ_U64(ingest.drained, sizeof bad_header);
    CHECK_EQ_U64(tg_ingest_feed(&ingest, bad_header, 5), TG_INGEST_REFUSED);
    CHECK_EQ_U64(tg_ingest_received(&ingest), sizeof bad_header + 5);
    CHECK(!ingest.abandon);
    CHECK_EQ_U64(tg_ingest_finish(&ingest), TG_INGEST_REFUSED);
    st_verdict verdict;
    st_gate_verdict(ingest.gate, &verdict);
    CHECK_STR(st_reason_name(verdict.error.reason), "header_start");
    tg_ingest_abort(&ingest);

    /* a pickle: its format is named at the end, and the temp file goes then */
    config = storing(ST_GATE_SAFETENSORS, sizeof pickle_p2);
    CHECK_EQ_U64(tg_ingest_begin(&ingest, &config), 0);
    tg_ingest_feed(&ingest, pickle_p2, sizeof pickle_p2);
    CHECK_EQ_U64(tg_ingest_finish(&ingest), TG_INGEST_REFUSED);
    CHECK_EQ_U64(dir_entries(store.tmp_dir), 0);
    st_gate_verdict(ingest.gate, &verdict);
    CHECK_STR(st_format_name(verdict.format), "pickle");
    tg_ingest_abort(&ingest);

    /* bytes no format names: the refusal is certain early, storing stops there, and
     * the verdict waits for the end (the tail could name the format) */
    uint8_t *junk = malloc(200000);
    if (junk != NULL) {
        memset(junk, 0xAB, 200000);
        config = storing(ST_GATE_SAFETENSORS, 200000);
        CHECK_EQ_U64(tg_ingest_begin(&ingest, &config), 0);
        CHECK_EQ_U64(feed_pieces(&ingest, junk, 200000, 4096), TG_INGEST_REFUSED);
        CHECK(ingest.verdict_pending);
        CHECK_EQ_U64(dir_entries(store.tmp_dir), 0);
        CHECK(ingest.seen < 200000);
        CHECK_EQ_U64(tg_ingest_received(&ingest), 200000);
        CHECK_EQ_U64(tg_ingest_finish(&ingest), TG_INGEST_REFUSED);
        CHECK(!ingest.verdict_pending);
        st_gate_verdict(ingest.gate, &verdict);
        CHECK_STR(st_reason_name(verdict.error.reason), "refused_format");
        tg_ingest_abort(&ingest);
        free(junk);
    }
    CHECK_EQ_U64(blob_count(), blobs);
}

TEST(too_large_and_length_mismatch)
{
    size_t len = 0;
    uint8_t *file = safetensors_file(&len);
    if (file == NULL) {
        CHECK(false);
        return;
    }
    int blobs = blob_count();
    /* past max_bytes */
    tg_ingest ingest;
    tg_ingest_config config = storing(ST_GATE_SAFETENSORS, ST_FILE_SIZE_UNKNOWN);
    config.max_bytes = len - 1;
    CHECK_EQ_U64(tg_ingest_begin(&ingest, &config), 0);
    CHECK_EQ_U64(feed_pieces(&ingest, file, len, 16), TG_INGEST_TOO_LARGE);
    CHECK_EQ_U64(dir_entries(store.tmp_dir), 0);
    CHECK_EQ_U64(tg_ingest_received(&ingest), len);
    CHECK_EQ_U64(tg_ingest_finish(&ingest), TG_INGEST_TOO_LARGE);
    tg_ingest_abort(&ingest);

    /* a source that ends short of its declared size */
    config = storing(ST_GATE_SAFETENSORS, len);
    CHECK_EQ_U64(tg_ingest_begin(&ingest, &config), 0);
    CHECK_EQ_U64(tg_ingest_feed(&ingest, file, len - 4), TG_INGEST_OPEN);
    CHECK_EQ_U64(tg_ingest_finish(&ingest), TG_INGEST_LENGTH_MISMATCH);
    CHECK_EQ_U64(tg_ingest_received(&ingest), len - 4);
    CHECK_EQ_U64(dir_entries(store.tmp_dir), 0);
    tg_ingest_abort(&ingest);

    /* the gate judged the file at a declared size it never reached: the length is
     * what is wrong, not the size-based refusal */
    config = storing(ST_GATE_SAFETENSORS, len + 8);
    CHECK_EQ_U64(tg_ingest_begin(&ingest, &config), 0);
    tg_ingest_feed(&ingest, file, len);
    CHECK_EQ_U64(tg_ingest_finish(&ingest), TG_INGEST_LENGTH_MISMATCH);
    CHECK_EQ_U64(dir_entries(store.tmp_dir), 0);
    tg_ingest_abort(&ingest);

    /* without check_length (a scan) the gate's own verdict stands */
    config = storing(ST_GATE_SAFETENSORS, len);
    config.check_length = false;
    config.store = NULL;
    CHECK_EQ_U64(tg_ingest_begin(&ingest, &config), 0);
    tg_ingest_feed(&ingest, file, len - 4);
    CHECK_EQ_U64(tg_ingest_finish(&ingest), TG_INGEST_REFUSED);
    st_verdict verdict;
    st_gate_verdict(ingest.gate, &verdict);
    CHECK_STR(st_reason_name(verdict.error.reason), "data_truncated");
    tg_ingest_abort(&ingest);
    CHECK_EQ_U64(blob_count(), blobs);
    free(file);
}

TEST(drain_limit_abandon_and_hash_after_stop)
{
    tg_ingest ingest;
    tg_ingest_config config = storing(ST_GATE_SAFETENSORS, ST_FILE_SIZE_UNKNOWN);
    config.store = NULL;
    config.stop_when_certain = false;
    config.check_length = false;
    config.hash_after_stop = true;
    config.digest_name = "scan";
    config.drain_limit = 30;
    CHECK_EQ_U64(tg_ingest_begin(&ingest, &config), 0);
    CHECK_EQ_U64(tg_ingest_feed(&ingest, bad_header, sizeof bad_header), TG_INGEST_REFUSED);
    CHECK(!ingest.abandon);
    tg_ingest_feed(&ingest, bad_header, sizeof bad_header); /* 32 dropped: past 30 */
    CHECK(ingest.abandon);
    uint8_t both[2 * sizeof bad_header];
    memcpy(both, bad_header, sizeof bad_header);
    memcpy(both + sizeof bad_header, bad_header, sizeof bad_header);
    char want[65], got[65];
    CHECK_EQ_U64(tg_sha256_hex(both, sizeof both, want, "test"), 0);
    CHECK_EQ_U64(tg_ingest_digest(&ingest, got), 0);
    CHECK_STR(got, want);
    tg_ingest_abort(&ingest);
}

/* The whole source's digest, for a refusal's record: only when the source ended at
 * its declared size and every byte went through the digest. */
TEST(whole_digest_only_of_a_whole_source)
{
    uint8_t both[2 * sizeof bad_header];
    memcpy(both, bad_header, sizeof bad_header);
    memcpy(both + sizeof bad_header, bad_header, sizeof bad_header);
    char want[65], got[65];
    CHECK_EQ_U64(tg_sha256_hex(both, sizeof both, want, "test"), 0);
    /* refused at its head, the rest drained and hashed, then ended: the digest */
    tg_ingest ingest;
    tg_ingest_config config = storing(ST_GATE_SAFETENSORS, sizeof both);
    config.hash_after_stop = true;
    CHECK_EQ_U64(tg_ingest_begin(&ingest, &config), 0);
    CHECK_EQ_U64(tg_ingest_feed(&ingest, bad_header, sizeof bad_header), TG_INGEST_REFUSED);
    tg_ingest_feed(&ingest, bad_header, sizeof bad_header);
    CHECK_EQ_U64(tg_ingest_finish(&ingest), TG_INGEST_REFUSED);
    CHECK_EQ_U64(tg_ingest_whole_digest(&ingest, got), 0);
    CHECK_STR(got, want);
    tg_ingest_abort(&ingest);
    /* not ended (answered mid-body): none */
    CHECK_EQ_U64(tg_ingest_begin(&ingest, &config), 0);
    tg_ingest_feed(&ingest, bad_header, sizeof bad_header);
    CHECK(tg_ingest_whole_digest(&ingest, got) == -1);
    CHECK_STR(got, "");
    tg_ingest_abort(&ingest);
    /* ended short of its declared size: none */
    CHECK_EQ_U64(tg_ingest_begin(&ingest, &config), 0);
    tg_ingest_feed(&ingest, bad_header, sizeof bad_header);
    tg_ingest_finish(&ingest);
    CHECK(tg_ingest_whole_digest(&ingest, got) == -1);
    tg_ingest_abort(&ingest);
    /* without hash_after_stop the drained rest is not hashed: none */
    config.hash_after_stop = false;
    CHECK_EQ_U64(tg_ingest_begin(&ingest, &config), 0);
    tg_ingest_feed(&ingest, bad_header, sizeof bad_header);
    tg_ingest_feed(&ingest, bad_header, sizeof bad_header);
    tg_ingest_finish(&ingest);
    CHECK(tg_ingest_whole_digest(&ingest, got) == -1);
    tg_ingest_abort(&ingest);
    /* past max_bytes (the chunk that crossed it is not hashed): none */
    config = storing(ST_GATE_SAFETENSORS, ST_FILE_SIZE_UNKNOWN);
    config.hash_after_stop = true;
    config.max_bytes = sizeof bad_header;
    CHECK_EQ_U64(tg_ingest_begin(&ingest, &config), 0);
    tg_ingest_feed(&ingest, both, sizeof both);
    CHECK_EQ_U64(tg_ingest_finish(&ingest), TG_INGEST_TOO_LARGE);
    CHECK(tg_ingest_whole_digest(&ingest, got) == -1);
    tg_ingest_abort(&ingest);
}

/* Past TG_INGEST_HASH_THREAD_AFTER the digest runs on its own thread through the
 * ring: a 13 MiB safetensors file fed in odd pieces is stored and named by the SHA-256
 * of its bytes; one aborted halfway (the thread cancelled) leaves nothing; a
 * refused one with hash_after_stop still covers every byte. */
TEST(hash_thread_digest_equals_one_shot)
{
    const size_t n = 13u << 20;
    uint64_t shape[1] = {n};
    st_write_tensor tensor = {"u", ST_U8, 1, shape};
    uint8_t *payload = malloc(n);
    CHECK(payload != NULL);
    if (payload == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        payload[i] = (uint8_t)(i * 2654435761u >> 11);
    const void *data[1] = {payload};
    uint8_t *file = NULL;
    size_t len = 0;
    st_error err;
    CHECK(st_write_to_buffer(&tensor, data, 1, NULL, 0, false, &file, &len, &err) == ST_OK);
    free(payload);
    if (file == NULL)
        return;
    char want[65];
    CHECK_EQ_U64(tg_sha256_hex(file, len, want, "test"), 0);
    const size_t pieces[] = {4093, 65536, 300000, 1};
    for (size_t k = 0; k < 3; k++) {
        tg_ingest ingest;
        tg_ingest_config config = storing(ST_GATE_SAFETENSORS, len);
        CHECK_EQ_U64(tg_ingest_begin(&ingest, &config), 0);
        CHECK_EQ_U64(feed_pieces(&ingest, file, len, pieces[k]), TG_INGEST_OPEN);
        CHECK(ingest.hasher != NULL); /* the thread took over */
        CHECK_EQ_U64(tg_ingest_finish(&ingest), TG_INGEST_OPEN);
        recorded r = {0};
        tg_file_record made;
        CHECK_EQ_U64(tg_ingest_commit(&ingest, "big.safetensors", &made, record, &r), 0);
        CHECK(ingest.hasher == NULL);
        CHECK_STR(made.sha256, want);
        CHECK(blob_holds(made.sha256, file, len));
        tg_ingest_abort(&ingest);
    }
    /* aborted halfway, the thread running */
    int blobs_before = blob_count();
    tg_ingest ingest;
    tg_ingest_config config = storing(ST_GATE_SAFETENSORS, len);
    CHECK_EQ_U64(tg_ingest_begin(&ingest, &config), 0);
    feed_pieces(&ingest, file, len / 2, 65536);
    CHECK(ingest.hasher != NULL);
    tg_ingest_abort(&ingest);
    CHECK(ingest.hasher == NULL);
    CHECK_EQ_U64(blob_count(), blobs_before);
    /* a scan (no store) that hashes past a refusal: the last byte breaks the length */
    config = storing(ST_GATE_SAFETENSORS, len - 1);
    config.store = NULL;
    config.hash_after_stop = true;
    config.digest_name = "scan";
    CHECK_EQ_U64(tg_ingest_begin(&ingest, &config), 0);
    feed_pieces(&ingest, file, len, 100000);
    char got[65];
    CHECK_EQ_U64(tg_ingest_digest(&ingest, got), 0);
    CHECK_STR(got, want);
    tg_ingest_abort(&ingest);
    free(file);
}

static bool refuse_budget(void *ctx, size_t bytes)
{
    (void)bytes;
    (*(int *)ctx)++;
    return false;
}

static void release_budget(void *ctx, size_t bytes)
{
    (void)ctx;
    (void)bytes;
}

TEST(over_budget_stops_and_abandons)
{
    size_t len = 0;
    uint8_t *file = safetensors_file(&len);
    if (file == NULL) {
        CHECK(false);
        return;
    }
    int asked = 0;
    tg_ingest ingest;
    tg_ingest_config config = storing(ST_GATE_SAFETENSORS, len);
    config.reserve = refuse_budget;
    config.release = release_budget;
    config.budget_context = &asked;
    CHECK_EQ_U64(tg_ingest_begin(&ingest, &config), 0);
    CHECK_EQ_U64(tg_ingest_feed(&ingest, file, len), TG_INGEST_OVER_BUDGET);
    CHECK(asked > 0);
    CHECK(ingest.abandon);
    CHECK_EQ_U64(dir_entries(store.tmp_dir), 0);
    tg_ingest_abort(&ingest);
    free(file);
}

/* Runs one accepted file through begin/feed/finish/commit with config; returns the
 * commit's result (the state and error are left in *ingest, aborted). */
static int run_to_commit(tg_ingest *ingest, const tg_ingest_config *config, const uint8_t *data,
                         size_t len)
{
    recorded r = {0};
    tg_file_record made;
    int rc = -1;
    if (tg_ingest_begin(ingest, config) == 0 &&
        feed_pieces(ingest, data, len, len) == TG_INGEST_OPEN &&
        tg_ingest_finish(ingest) == TG_INGEST_OPEN)
        rc = tg_ingest_commit(ingest, "f.safetensors", &made, record, &r);
    CHECK_EQ_U64(r.calls, rc == 0 ? 1 : 0);
    return rc;
}

TEST(failures_store_nothing)
{
    size_t len = 0;
    uint8_t *file = safetensors_file(&len);
    if (file == NULL) {
        CHECK(false);
        return;
    }
    int blobs = blob_count();
    tg_ingest ingest;
    /* the temp file cannot be made */
    tg_blobstore *broken = broken_store("no-tmp", "rm -rf tmp");
    CHECK(broken != NULL);
    tg_ingest_config config = storing(ST_GATE_SAFETENSORS, len);
    config.store = broken;
    errno = 0;
    CHECK(tg_ingest_begin(&ingest, &config) != 0);
    CHECK_EQ_U64(errno, ENOENT);
    CHECK_EQ_U64(ingest.state, TG_INGEST_FAILED);
    CHECK_EQ_U64(ingest.error, TG_INGEST_ERROR_TEMP);
    tg_ingest_abort(&ingest);
    tg_blobstore_close(broken);

    /* the digest: its first update fails (1 allocation, 2 init, 3 the update) */
    config = storing(ST_GATE_SAFETENSORS, len);
    tg_sha256_fail_nth("pipeline-test", 3);
    CHECK(run_to_commit(&ingest, &config, file, len) != 0);
    tg_sha256_fail_nth("pipeline-test", 0);
    CHECK_EQ_U64(ingest.state, TG_INGEST_FAILED);
    CHECK_EQ_U64(ingest.error, TG_INGEST_ERROR_DIGEST);
    CHECK_EQ_U64(dir_entries(store.tmp_dir), 0);
    tg_ingest_abort(&ingest);
    /* ... or its start */
    tg_sha256_fail_nth("pipeline-test", 2);
    CHECK(tg_ingest_begin(&ingest, &config) != 0);
    tg_sha256_fail_nth("pipeline-test", 0);
    CHECK_EQ_U64(ingest.error, TG_INGEST_ERROR_DIGEST);
    tg_ingest_abort(&ingest);

    /* the blobs lock (its file cannot be opened: a directory has its name) */
    broken = broken_store("no-lock", "rm -f blobs.lock && mkdir blobs.lock");
    CHECK(broken != NULL);
    config.store = broken;
    CHECK(run_to_commit(&ingest, &config, file, len) != 0);
    CHECK_EQ_U64(ingest.state, TG_INGEST_FAILED);
    CHECK_EQ_U64(ingest.error, TG_INGEST_ERROR_LOCK);
    CHECK_EQ_U64(tmp_entries("no-lock"), 0);
    tg_ingest_abort(&ingest);
    tg_blobstore_close(broken);

    /* the commit (the blob's directory cannot be made: a file has the store's name) */
    broken = broken_store("no-blob-dir", "rm -rf blobs/sha256 && touch blobs/sha256");
    CHECK(broken != NULL);
    config.store = broken;
    CHECK(run_to_commit(&ingest, &config, file, len) != 0);
    CHECK_EQ_U64(ingest.state, TG_INGEST_FAILED);
    CHECK_EQ_U64(ingest.error, TG_INGEST_ERROR_COMMIT);
    CHECK_EQ_U64(tmp_entries("no-blob-dir"), 0);
    tg_ingest_abort(&ingest);
    tg_blobstore_close(broken);

    CHECK_EQ_U64(blob_count(), blobs);
    /* a zeroed ingest aborts safely */
    tg_ingest zeroed;
    memset(&zeroed, 0, sizeof zeroed);
    tg_ingest_abort(&zeroed);
    free(file);
}

/* ---- ENOSPC at each write, one fresh process per write ---- */

#define ENOSPC_PIECES 4

/* In the child (TENSORGATE_TEST_ENOSPC_AT set): one file in ENOSPC_PIECES writes and
 * the commit's fsync. Exit status: 0 committed, 10 NO_SPACE with nothing left,
 * anything else a failure of the test. */
static int enospc_child(const char *root)
{
    char err[256] = "";
    if (tg_store_open(&store, root, err, sizeof err) != 0 ||
        tg_blobstore_open(root, &blob_store, err, sizeof err) != 0)
        return 2;
    size_t len = 0;
    uint8_t *file = safetensors_file(&len);
    if (file == NULL)
        return 3;
    int blobs = blob_count();
    tg_ingest ingest;
    tg_ingest_config config = storing(ST_GATE_SAFETENSORS, len);
    recorded r = {0};
    tg_file_record made;
    int status = 4;
    if (tg_ingest_begin(&ingest, &config) == 0 &&
        feed_pieces(&ingest, file, len, (len + ENOSPC_PIECES - 1) / ENOSPC_PIECES) ==
            TG_INGEST_OPEN &&
        tg_ingest_finish(&ingest) == TG_INGEST_OPEN &&
        tg_ingest_commit(&ingest, "f.safetensors", &made, record, &r) == 0)
        status = r.calls == 1 && blob_holds(made.sha256, file, len) ? 0 : 5;
    else if (ingest.state == TG_INGEST_NO_SPACE && r.calls == 0 &&
             dir_entries(store.tmp_dir) == 0 && blob_count() == blobs &&
             (ingest.error == TG_INGEST_ERROR_WRITE || ingest.error == TG_INGEST_ERROR_COMMIT))
        status = 10;
    tg_ingest_abort(&ingest);
    free(file);
    return status;
}

TEST(enospc_at_each_write_stores_nothing)
{
    int no_space = 0;
    bool committed = false;
    for (int n = 1; n <= 20 && !committed; n++) {
        pid_t pid = fork();
        if (pid == 0) {
            char at[16];
            snprintf(at, sizeof at, "%d", n);
            setenv("TENSORGATE_TEST_ENOSPC_AT", at, 1);
            execl("/proc/self/exe", "pipeline", "--enospc-child", data_root, (char *)NULL);
            _exit(127);
        }
        int wstatus = 0;
        CHECK(pid > 0 && waitpid(pid, &wstatus, 0) == pid && WIFEXITED(wstatus));
        int code = WEXITSTATUS(wstatus);
        CHECK(code == 0 || code == 10);
        if (code == 10)
            no_space++;
        committed = code == 0;
    }
    CHECK(committed);
    CHECK_EQ_U64(no_space, ENOSPC_PIECES + 1); /* each write of the temp file, the fsync */
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--enospc-child") == 0)
        return enospc_child(argv[2]);
    if (!store_open()) {
        CHECK(false);
        return test_report(argv[0]);
    }
    RUN(accepted_file_is_described_and_committed);
    RUN(sidecars_are_json_or_text);
    RUN(refusals_stop_at_once_and_keep_nothing);
    RUN(too_large_and_length_mismatch);
    RUN(drain_limit_abandon_and_hash_after_stop);
    RUN(over_budget_stops_and_abandons);
    RUN(failures_store_nothing);
    RUN(enospc_at_each_write_stores_nothing);
    RUN(hash_thread_digest_equals_one_shot);
    RUN(whole_digest_only_of_a_whole_source);
    store_remove();
    return test_report(argv[0]);
}
