/* The preload manager through the fake backend (planning, alignment, file order,
 * budgets, LRU eviction, leases, deferred DELETE, 507, failures) and the host
 * backend's sealed memfd. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blobstore.h"
#include "log.h"
#include "preload.h"
#include "sha256.h"
#include "st_convert.h"
#include "test.h"

static char temp_dir[64];
/* The files the tests preload are blobs of this store (in temp_dir/store). */
static tg_blobstore *blobs;

/* Puts the file at path into the blob store and returns its blob name (a static
 * slot). A file that does not exist gets the name of content never stored (the
 * SHA-256 of its path), so a preload of it finds no blob. */
static const char *blob_of(const char *path)
{
    static char names[16][TG_SHA256_HEX_LEN + 1];
    static int next;
    char *hex = names[next++ % 16];
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        CHECK(tg_sha256_hex(path, strlen(path), hex, "test") == 0);
        return hex;
    }
    off_t size = lseek(fd, 0, SEEK_END);
    unsigned char *data = malloc(size > 0 ? (size_t)size : 1);
    CHECK(data != NULL && pread(fd, data, (size_t)size, 0) == size);
    close(fd);
    CHECK(tg_sha256_hex(data, (size_t)size, hex, "test") == 0);
    tg_blob_writer *writer = NULL;
    CHECK(tg_blob_write_begin(blobs, &writer) == TG_STORE_OK);
    CHECK(tg_blob_write(writer, data, (size_t)size) == TG_STORE_OK);
    CHECK(tg_blob_write_commit(writer, hex) == TG_STORE_OK);
    free(data);
    return hex;
}

/* A file of `len` deterministic bytes; returns its path (static slot). */
static const char *write_file(const char *name, size_t len, unsigned seed)
{
    static char paths[8][128];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, 128, "%s/%s", temp_dir, name);
    unsigned char *data = malloc(len ? len : 1);
    uint32_t state = seed * 2654435761u + 7;
    for (size_t i = 0; i < len; i++) {
        state = state * 1103515245u + 12345u;
        data[i] = (unsigned char)(state >> 16);
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && write(fd, data, len) == (ssize_t)len);
    close(fd);
    free(data);
    return path;
}

static unsigned char *read_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY);
    off_t size = lseek(fd, 0, SEEK_END);
    unsigned char *data = malloc((size_t)size + 1);
    CHECK(pread(fd, data, (size_t)size, 0) == size);
    close(fd);
    *len = (size_t)size;
    return data;
}

static tg_preload_manager *fake_manager(int devices, uint64_t budget, unsigned threads,
                                        size_t chunk)
{
    tg_preload_manager_config config = {.host = tg_preload_host_backend(),
                                        .cuda = tg_preload_fake_backend(devices, budget),
                                        .host_budget = 1u << 30,
                                        .copy_threads = threads,
                                        .chunk_bytes = chunk};
    tg_preload_manager *m = NULL;
    char err[256];
    CHECK(tg_preload_manager_create(&config, &m, err, sizeof err) == 0);
    return m;
}

/* One U8 tensor of `bytes` from the start of `path`, as a one-tensor request. */
static tg_preload_status submit_bytes(tg_preload_manager *m, const char *device, const char *path,
                                      uint64_t bytes, char id[TG_PRELOAD_ID_LEN + 1])
{
    static uint64_t shapes[64][1];
    static int next;
    uint64_t *shape = shapes[next++ % 64];
    shape[0] = bytes;
    tg_preload_source_tensor t = {"t", ST_U8, 1, shape, 0, 0, bytes};
    const char *files[] = {blob_of(path)};
    tg_preload_request r = {"org/m", 1, device, false, ST_U8, blobs, 1,
                            files,   1, &t,     NULL,  0,     0,     NULL};
    char err[300];
    return tg_preload_submit(m, &r, id, err, sizeof err);
}

static const char *state_of(tg_preload_manager *m, const char *id)
{
    static char state[32];
    json_t *d = tg_preload_describe(m, id, false);
    if (d == NULL)
        return "gone";
    snprintf(state, sizeof state, "%s", json_string_value(json_object_get(d, "state")));
    json_decref(d);
    return state;
}

TEST(plan_aligns_every_tensor_and_converts_sizes)
{
    uint64_t s3[1] = {3}, s100[1] = {100}, s2x5[2] = {2, 5}, empty[1] = {0};
    tg_preload_source_tensor t[] = {
        {"a", ST_U8, 1, s3, 0, 8, 3},        {"b", ST_F32, 1, s100, 0, 11, 400},
        {"c", ST_I64, 2, s2x5, 0, 411, 80},  {"d", ST_F32, 1, empty, 0, 491, 0},
        {"e", ST_F16, 1, s100, 0, 491, 200},
    };
    const char *files[] = {"x"};
    tg_preload_request r = {"o/n", 1, "host", false, ST_F32, blobs, 1,
                            files, 5, t,      NULL,  0,      0,     NULL};
    tg_preload_slot slots[5];
    uint64_t total = 0;
    char err[256];
    CHECK(tg_preload_plan(&r, slots, &total, err, sizeof err) == TG_PRELOAD_OK);
    CHECK_EQ_U64(slots[0].offset, 0);
    CHECK_EQ_U64(slots[1].offset, 256);
    CHECK_EQ_U64(slots[2].offset, 768);
    CHECK_EQ_U64(slots[3].offset, 1024);
    CHECK_EQ_U64(slots[4].offset, 1024); /* an empty tensor takes no room */
    CHECK_EQ_U64(total, 1280);
    for (int i = 0; i < 5; i++)
        CHECK_EQ_U64(slots[i].offset % TG_PRELOAD_ALIGN, 0);

    r.convert = true;
    r.dtype = ST_BF16;
    CHECK(tg_preload_plan(&r, slots, &total, err, sizeof err) == TG_PRELOAD_OK);
    CHECK(slots[1].dtype == ST_BF16);
    CHECK_EQ_U64(slots[1].bytes, 200);
    CHECK(slots[2].dtype == ST_I64); /* integers keep their dtype */
    CHECK_EQ_U64(slots[2].bytes, 80);
    CHECK(slots[4].dtype == ST_BF16);
    CHECK_EQ_U64(slots[4].bytes, 200);
    CHECK_EQ_U64(slots[2].offset, 512);

    r.dtype = ST_I32; /* not a conversion target */
    CHECK(tg_preload_plan(&r, slots, &total, err, sizeof err) == TG_PRELOAD_INVALID);
    r.dtype = ST_F16;
    t[0].dtype = ST_F8_E8M0; /* a float st_convert does not handle */
    CHECK(tg_preload_plan(&r, slots, &total, err, sizeof err) == TG_PRELOAD_INVALID);
    CHECK(strstr(err, "F8_E8M0") != NULL);

    tg_preload_request none = {"o/n", 1, "host", false, ST_F32, blobs, 1,
                               files, 0, t,      NULL,  0,      0,     NULL};
    CHECK(tg_preload_plan(&none, slots, &total, err, sizeof err) == TG_PRELOAD_OK);
    CHECK_EQ_U64(total, TG_PRELOAD_ALIGN);
}

TEST(device_strings)
{
    const char *kind;
    int index;
    CHECK(tg_preload_parse_device("host", &kind, &index) && strcmp(kind, "host") == 0 &&
          index == 0);
    CHECK(tg_preload_parse_device("cuda:0", &kind, &index) && strcmp(kind, "cuda") == 0 &&
          index == 0);
    CHECK(tg_preload_parse_device("cuda:12", &kind, &index) && index == 12);
    CHECK(!tg_preload_parse_device("cuda:", &kind, &index));
    CHECK(!tg_preload_parse_device("cuda:01", &kind, &index));
    CHECK(!tg_preload_parse_device("cuda:-1", &kind, &index));
    CHECK(!tg_preload_parse_device("cuda", &kind, &index));
    CHECK(!tg_preload_parse_device("gpu:0", &kind, &index));
    CHECK(!tg_preload_parse_device("Host", &kind, &index));

    tg_preload_manager *m = fake_manager(2, 1 << 20, 2, 4096);
    const char *path = write_file("dev.bin", 1000, 1);
    char id[TG_PRELOAD_ID_LEN + 1];
    CHECK(submit_bytes(m, "cuda:2", path, 10, id) == TG_PRELOAD_BAD_DEVICE);
    CHECK(submit_bytes(m, "tpu:0", path, 10, id) == TG_PRELOAD_BAD_DEVICE);
    CHECK(submit_bytes(m, "cuda:1", path, 10, id) == TG_PRELOAD_OK);
    CHECK_STR(tg_preload_wait(m, id, 5000), "resident");
    tg_preload_manager_destroy(m);

    /* No CUDA devices: 503 with the backend's sentence. */
    tg_preload_manager_config config = {.host = tg_preload_host_backend(),
                                        .cuda = tg_preload_fake_backend(0, 0)};
    CHECK(tg_preload_manager_create(&config, &m, NULL, 0) == 0);
    uint64_t shape[1] = {10};
    tg_preload_source_tensor t = {"t", ST_U8, 1, shape, 0, 0, 10};
    const char *files[] = {blob_of(path)};
    tg_preload_request r = {"org/m", 1, "cuda:0", false, ST_U8, blobs, 1,
                            files,   1, &t,       NULL,  0,     0,     NULL};
    char err[300] = "";
    CHECK(tg_preload_submit(m, &r, id, err, sizeof err) == TG_PRELOAD_DEVICE_UNAVAILABLE);
    CHECK_STR(err, "the fake backend has no devices");
    json_t *status = tg_preload_devices_status(m);
    CHECK(json_is_false(json_object_get(json_object_get(status, "cuda"), "available")));
    CHECK(json_is_true(json_object_get(json_object_get(status, "host"), "available")));
    CHECK_STR(json_string_value(json_object_get(json_object_get(status, "cuda"), "reason")),
              "the fake backend has no devices");
    json_decref(status);
    char *metrics = tg_preload_metrics(m);
    CHECK(metrics &&
          strstr(metrics,
                 "tensorgate_preload_device_available{kind=\"cuda\",reason=\"the fake backend "
                 "has no devices\"} 0") != NULL);
    free(metrics);
    tg_preload_manager_destroy(m);
}

/* Maps a lease's fd and compares every slot with the file's bytes. */
static void check_lease_bytes(tg_preload_manager *m, const char *id, const unsigned char *file,
                              size_t tensors, const tg_preload_source_tensor *t)
{
    int fd = -1;
    char *layout = NULL;
    char err[256];
    CHECK(tg_preload_lease(m, id, &fd, &layout, err, sizeof err) == TG_PRELOAD_OK);
    if (fd < 0)
        return;
    json_t *reply = json_loads(layout, 0, NULL);
    json_t *entries = json_object_get(reply, "layout");
    uint64_t bytes = (uint64_t)json_integer_value(json_object_get(reply, "bytes"));
    CHECK(json_array_size(entries) == tensors);
    unsigned char *map = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(map != MAP_FAILED);
    for (size_t i = 0; i < tensors && map != MAP_FAILED; i++) {
        json_t *e = json_array_get(entries, i);
        uint64_t offset = (uint64_t)json_integer_value(json_object_get(e, "offset"));
        CHECK_STR(json_string_value(json_object_get(e, "name")), t[i].name);
        CHECK_EQ_U64(offset % TG_PRELOAD_ALIGN, 0);
        CHECK(memcmp(map + offset, file + t[i].offset, t[i].bytes) == 0);
    }
    if (map != MAP_FAILED)
        munmap(map, bytes);
    json_decref(reply);
    free(layout);
    close(fd);
    tg_preload_unlease(m, id);
}

TEST(load_places_bytes_across_chunks_and_files)
{
    /* Small bounce buffers so tensors split across chunks and neighbours share one. */
    tg_preload_manager *m = fake_manager(1, 64 << 20, 3, 4096);
    const char *a = write_file("a.bin", 70000, 2);
    const char *b = write_file("b.bin", 9000, 3);
    size_t a_len, b_len;
    unsigned char *a_data = read_file(a, &a_len), *b_data = read_file(b, &b_len);
    uint64_t s[6][1] = {{10}, {5000}, {1}, {60000}, {3000}, {7}};
    tg_preload_source_tensor t[] = {
        {"a0", ST_U8, 1, s[0], 0, 0, 10},     {"a1", ST_U8, 1, s[1], 0, 10, 5000},
        {"a2", ST_U8, 1, s[2], 0, 5010, 1},   {"a3", ST_U8, 1, s[3], 0, 9000, 60000},
        {"b0", ST_U8, 1, s[4], 1, 100, 3000}, {"b1", ST_U8, 1, s[5], 1, 3100, 7},
    };
    const char *files[] = {blob_of(a), blob_of(b)};
    tg_preload_request r = {"org/m", 3, "cuda:0", false, ST_U8, blobs, 2,
                            files,   6, t,        NULL,  0,     0,     NULL};
    char id[TG_PRELOAD_ID_LEN + 1], err[300];
    CHECK(tg_preload_submit(m, &r, id, err, sizeof err) == TG_PRELOAD_OK);
    CHECK_STR(tg_preload_wait(m, id, 10000), "resident");
    json_t *d = tg_preload_describe(m, id, true);
    CHECK_EQ_U64(json_integer_value(json_object_get(d, "bytes_copied")),
                 10 + 5000 + 1 + 60000 + 3000 + 7);
    CHECK_STR(json_string_value(json_object_get(d, "model")), "org/m");
    CHECK_EQ_U64(json_integer_value(json_object_get(d, "version")), 3);
    CHECK(json_array_size(json_object_get(d, "layout")) == 6);
    json_decref(d);

    /* The lease maps each tensor's bytes; file b's tensors come from file b. */
    unsigned char *joined = malloc(a_len + b_len);
    memcpy(joined, a_data, a_len);
    memcpy(joined + a_len, b_data, b_len);
    tg_preload_source_tensor shifted[6];
    memcpy(shifted, t, sizeof t);
    shifted[4].offset += a_len;
    shifted[5].offset += a_len;
    check_lease_bytes(m, id, joined, 6, shifted);
    free(joined);
    free(a_data);
    free(b_data);
    tg_preload_manager_destroy(m);
}

TEST(conversion_matches_st_convert)
{
    tg_preload_manager *m = fake_manager(1, 64 << 20, 2, 4096);
    /* 3000 F32 values: integers and fractions, so BF16 rounding matters. */
    size_t n = 3000;
    float *values = malloc(n * sizeof *values);
    for (size_t i = 0; i < n; i++)
        values[i] = (float)i * 0.37f - 500.25f;
    char path[128];
    snprintf(path, sizeof path, "%s/f32.bin", temp_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(write(fd, "12345678", 8) == 8);
    CHECK(write(fd, values, n * 4) == (ssize_t)(n * 4));
    close(fd);
    uint64_t shape[1] = {n}, ishape[1] = {2};
    tg_preload_source_tensor t[] = {{"w", ST_F32, 1, shape, 0, 8, n * 4},
                                    {"i", ST_U8, 1, ishape, 0, 0, 2}};
    const char *files[] = {blob_of(path)};
    tg_preload_request r = {"org/m", 1, "cuda:0", true, ST_BF16, blobs, 1,
                            files,   2, t,        NULL, 0,       0,     NULL};
    char id[TG_PRELOAD_ID_LEN + 1], err[300];
    CHECK(tg_preload_submit(m, &r, id, err, sizeof err) == TG_PRELOAD_OK);
    CHECK_STR(tg_preload_wait(m, id, 10000), "resident");
    uint16_t *expected = malloc(n * 2);
    st_convert(ST_F32, ST_BF16, values, expected, n);
    int lease_fd = -1;
    char *layout = NULL;
    CHECK(tg_preload_lease(m, id, &lease_fd, &layout, err, sizeof err) == TG_PRELOAD_OK);
    json_t *reply = json_loads(layout, 0, NULL);
    json_t *w = json_array_get(json_object_get(reply, "layout"), 0);
    CHECK_STR(json_string_value(json_object_get(w, "dtype")), "BF16");
    CHECK_STR(json_string_value(json_object_get(w, "source_dtype")), "F32");
    CHECK_EQ_U64(json_integer_value(json_object_get(w, "bytes")), n * 2);
    json_t *i8 = json_array_get(json_object_get(reply, "layout"), 1);
    CHECK_STR(json_string_value(json_object_get(i8, "dtype")), "U8");
    uint64_t bytes = (uint64_t)json_integer_value(json_object_get(reply, "bytes"));
    unsigned char *map = mmap(NULL, bytes, PROT_READ, MAP_SHARED, lease_fd, 0);
    CHECK(map != MAP_FAILED);
    if (map != MAP_FAILED) {
        CHECK(memcmp(map + json_integer_value(json_object_get(w, "offset")), expected, n * 2) == 0);
        CHECK(memcmp(map + json_integer_value(json_object_get(i8, "offset")), "12", 2) == 0);
        munmap(map, bytes);
    }
    close(lease_fd);
    json_decref(reply);
    free(layout);
    tg_preload_unlease(m, id);
    free(values);
    free(expected);
    tg_preload_manager_destroy(m);
}

/* A fake backend whose copies are recorded, to see the order the engine uses. */
static tg_device_backend *recorded;
static int (*fake_copy)(void *, tg_device_allocation *, uint64_t, const void *, size_t, int, char *,
                        size_t);
static uint64_t copy_offsets[4096];
static size_t copy_count;

static int recording_copy(void *context, tg_device_allocation *allocation, uint64_t offset,
                          const void *src, size_t len, int stream, char *err, size_t err_len)
{
    if (copy_count < 4096)
        copy_offsets[copy_count++] = offset;
    return fake_copy(context, allocation, offset, src, len, stream, err, err_len);
}

TEST(one_worker_copies_in_file_order)
{
    recorded = tg_preload_fake_backend(1, 64 << 20);
    fake_copy = recorded->copy;
    recorded->copy = recording_copy;
    tg_preload_manager_config config = {.cuda = recorded, .copy_threads = 1, .chunk_bytes = 4096};
    tg_preload_manager *m = NULL;
    CHECK(tg_preload_manager_create(&config, &m, NULL, 0) == 0);
    const char *path = write_file("order.bin", 50000, 4);
    uint64_t s[5][1] = {{9000}, {100}, {20000}, {4096}, {3}};
    tg_preload_source_tensor t[5];
    uint64_t offset = 0;
    for (int i = 0; i < 5; i++) {
        t[i] = (tg_preload_source_tensor){"x", ST_U8, 1, s[i], 0, offset, s[i][0]};
        offset += s[i][0];
    }
    const char *files[] = {blob_of(path)};
    tg_preload_request r = {"org/m", 1, "cuda:0", false, ST_U8, blobs, 1,
                            files,   5, t,        NULL,  0,     0,     NULL};
    char id[TG_PRELOAD_ID_LEN + 1], err[300];
    copy_count = 0;
    CHECK(tg_preload_submit(m, &r, id, err, sizeof err) == TG_PRELOAD_OK);
    CHECK_STR(tg_preload_wait(m, id, 10000), "resident");
    CHECK(copy_count > 5); /* the big tensors took several chunks */
    bool ordered = true;
    for (size_t i = 1; i < copy_count; i++)
        ordered = ordered && copy_offsets[i] > copy_offsets[i - 1];
    CHECK(ordered);
    tg_preload_manager_destroy(m);
}

TEST(budget_evicts_least_recently_used_and_spares_leases)
{
    /* 1024 bytes per device; each 200-byte preload takes 256. */
    tg_preload_manager *m = fake_manager(1, 1024, 2, 4096);
    const char *path = write_file("lru.bin", 4096, 5);
    char ids[8][TG_PRELOAD_ID_LEN + 1];
    for (int i = 0; i < 4; i++) {
        CHECK(submit_bytes(m, "cuda:0", path, 200, ids[i]) == TG_PRELOAD_OK);
        CHECK_STR(tg_preload_wait(m, ids[i], 5000), "resident");
    }
    /* B leased (kept open); A leased and released (now recent). */
    int fd_b = -1, fd_a = -1;
    char *layout = NULL, err[300];
    CHECK(tg_preload_lease(m, ids[1], &fd_b, &layout, err, sizeof err) == TG_PRELOAD_OK);
    free(layout);
    CHECK(tg_preload_lease(m, ids[0], &fd_a, &layout, err, sizeof err) == TG_PRELOAD_OK);
    free(layout);
    close(fd_a);
    tg_preload_unlease(m, ids[0]);

    /* E: the oldest unleased is C. */
    CHECK(submit_bytes(m, "cuda:0", path, 200, ids[4]) == TG_PRELOAD_OK);
    CHECK_STR(tg_preload_wait(m, ids[4], 5000), "resident");
    CHECK_STR(state_of(m, ids[2]), "gone");
    CHECK_STR(state_of(m, ids[0]), "resident");
    CHECK_STR(state_of(m, ids[1]), "resident");
    CHECK_STR(state_of(m, ids[3]), "resident");

    /* F (512): D then A go; B is leased, E is the newest. */
    CHECK(submit_bytes(m, "cuda:0", path, 300, ids[5]) == TG_PRELOAD_OK);
    CHECK_STR(tg_preload_wait(m, ids[5], 5000), "resident");
    CHECK_STR(state_of(m, ids[3]), "gone");
    CHECK_STR(state_of(m, ids[0]), "gone");
    CHECK_STR(state_of(m, ids[1]), "resident");
    CHECK_STR(state_of(m, ids[4]), "resident");

    /* The list reports the budget and the use. */
    json_t *list = tg_preload_list(m);
    json_t *devices = json_object_get(list, "devices");
    bool found = false;
    for (size_t i = 0; i < json_array_size(devices); i++) {
        json_t *d = json_array_get(devices, i);
        if (strcmp(json_string_value(json_object_get(d, "device")), "cuda:0") != 0)
            continue;
        found = true;
        CHECK_EQ_U64(json_integer_value(json_object_get(d, "budget_bytes")), 1024);
        CHECK_EQ_U64(json_integer_value(json_object_get(d, "used_bytes")), 1024);
    }
    CHECK(found);
    CHECK(json_array_size(json_object_get(list, "preloads")) == 3);
    json_decref(list);

    /* 507: everything but B could go, and still 1024 does not fit. */
    CHECK(submit_bytes(m, "cuda:0", path, 1000, ids[6]) == TG_PRELOAD_BUDGET);
    CHECK_STR(state_of(m, ids[4]), "resident"); /* nothing was evicted for a refusal */
    CHECK_STR(state_of(m, ids[5]), "resident");
    /* Larger than the whole budget. */
    CHECK(submit_bytes(m, "cuda:0", path, 2000, ids[6]) == TG_PRELOAD_BUDGET);
    /* 768 fits by evicting E and F. */
    CHECK(submit_bytes(m, "cuda:0", path, 700, ids[6]) == TG_PRELOAD_OK);
    CHECK_STR(tg_preload_wait(m, ids[6], 5000), "resident");
    CHECK_STR(state_of(m, ids[4]), "gone");
    CHECK_STR(state_of(m, ids[5]), "gone");
    CHECK_STR(state_of(m, ids[1]), "resident");
    close(fd_b);
    tg_preload_unlease(m, ids[1]);
    tg_preload_manager_destroy(m);
}

TEST(delete_of_a_leased_preload_waits_for_the_last_lease)
{
    tg_preload_manager *m = fake_manager(1, 1 << 20, 2, 4096);
    const char *path = write_file("lease.bin", 4096, 6);
    char id[TG_PRELOAD_ID_LEN + 1], err[300];
    CHECK(submit_bytes(m, "cuda:0", path, 1000, id) == TG_PRELOAD_OK);
    CHECK_STR(tg_preload_wait(m, id, 5000), "resident");
    int fd1 = -1, fd2 = -1;
    char *layout = NULL;
    CHECK(tg_preload_lease(m, id, &fd1, &layout, err, sizeof err) == TG_PRELOAD_OK);
    free(layout);
    CHECK(tg_preload_lease(m, id, &fd2, &layout, err, sizeof err) == TG_PRELOAD_OK);
    free(layout);
    json_t *d = tg_preload_describe(m, id, false);
    CHECK_EQ_U64(json_integer_value(json_object_get(d, "leases")), 2);
    json_decref(d);

    bool deferred = false;
    CHECK(tg_preload_evict(m, id, &deferred) == TG_PRELOAD_OK);
    CHECK(deferred);
    CHECK_STR(state_of(m, id), "evicting");
    /* No new lease on an evicting preload. */
    int fd3 = -1;
    CHECK(tg_preload_lease(m, id, &fd3, &layout, err, sizeof err) == TG_PRELOAD_NOT_RESIDENT);
    CHECK(fd3 == -1);
    /* The memory still counts against the budget while leased. */
    json_t *list = tg_preload_list(m);
    json_t *devices = json_object_get(list, "devices");
    for (size_t i = 0; i < json_array_size(devices); i++) {
        json_t *dev = json_array_get(devices, i);
        if (strcmp(json_string_value(json_object_get(dev, "device")), "cuda:0") == 0)
            CHECK_EQ_U64(json_integer_value(json_object_get(dev, "used_bytes")), 1024);
    }
    json_decref(list);
    tg_preload_unlease(m, id);
    CHECK_STR(state_of(m, id), "evicting");
    tg_preload_unlease(m, id);
    CHECK_STR(state_of(m, id), "gone");
    close(fd1);
    close(fd2);

    /* An unleased preload goes at once; an unknown id is not found. */
    CHECK(submit_bytes(m, "cuda:0", path, 10, id) == TG_PRELOAD_OK);
    CHECK_STR(tg_preload_wait(m, id, 5000), "resident");
    CHECK(tg_preload_evict(m, id, &deferred) == TG_PRELOAD_OK);
    CHECK(!deferred);
    CHECK_STR(state_of(m, id), "gone");
    CHECK(tg_preload_evict(m, id, &deferred) == TG_PRELOAD_NOT_FOUND);
    CHECK(tg_preload_lease(m, "0000000000000000", &fd3, &layout, err, sizeof err) ==
          TG_PRELOAD_NOT_FOUND);
    tg_preload_manager_destroy(m);
}

TEST(a_failed_load_holds_no_memory)
{
    tg_preload_manager *m = fake_manager(1, 1024, 2, 4096);
    char missing[128];
    snprintf(missing, sizeof missing, "%s/missing.bin", temp_dir);
    char id[TG_PRELOAD_ID_LEN + 1];
    CHECK(submit_bytes(m, "cuda:0", missing, 500, id) == TG_PRELOAD_OK);
    CHECK_STR(tg_preload_wait(m, id, 5000), "failed");
    json_t *d = tg_preload_describe(m, id, false);
    CHECK(strstr(json_string_value(json_object_get(d, "error")), blob_of(missing)) != NULL);
    json_decref(d);
    /* A file shorter than the tensor fails too. */
    const char *short_file = write_file("short.bin", 100, 7);
    char id2[TG_PRELOAD_ID_LEN + 1];
    CHECK(submit_bytes(m, "cuda:0", short_file, 500, id2) == TG_PRELOAD_OK);
    CHECK_STR(tg_preload_wait(m, id2, 5000), "failed");
    /* Failed preloads take no budget: a full-size one fits. */
    char id3[TG_PRELOAD_ID_LEN + 1];
    const char *full = write_file("full.bin", 1024, 8);
    CHECK(submit_bytes(m, "cuda:0", full, 1024, id3) == TG_PRELOAD_OK);
    CHECK_STR(tg_preload_wait(m, id3, 5000), "resident");
    CHECK_STR(state_of(m, id), "failed");
    bool deferred;
    CHECK(tg_preload_evict(m, id, &deferred) == TG_PRELOAD_OK && !deferred);
    tg_preload_manager_destroy(m);
}

/* The host backend's three fill paths place the same bytes: pwrite from a mapping
 * of the blob into a writable descriptor of the memfd (fill_fd, the default), pread
 * straight into a writable mapping of the memfd (no fill_fd), and bounce buffers +
 * pwrite (neither): neighbours sharing a chunk, tensors split across chunks, a
 * converted tensor, two files; and the memfd is sealed afterwards (no writable
 * mapping left). */
enum { FILL_FD, FILL_MAP, FILL_BOUNCE };
static void check_host_fill_path(int path)
{
    tg_device_backend *host = tg_preload_host_backend();
    CHECK(host != NULL && host->map_for_fill != NULL && host->fill_fd != NULL);
    if (path != FILL_FD)
        host->fill_fd = NULL;
    if (path == FILL_BOUNCE)
        host->map_for_fill = NULL;
    tg_preload_manager_config config = {
        .host = host, .host_budget = 64u << 20, .copy_threads = 3, .chunk_bytes = 4096};
    tg_preload_manager *m = NULL;
    char err[300];
    CHECK(tg_preload_manager_create(&config, &m, err, sizeof err) == 0);
    const char *a = write_file("fill_a.bin", 70000, 11);
    size_t a_len;
    unsigned char *a_data = read_file(a, &a_len);
    CHECK(a_len == 70000);
    size_t n = 3001;
    float *values = malloc(n * sizeof *values);
    for (size_t i = 0; i < n; i++)
        values[i] = (float)i * 0.37f - 500.25f;
    char b[128];
    snprintf(b, sizeof b, "%s/fill_b.bin", temp_dir);
    int fd = open(b, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(write(fd, "1234", 4) == 4);
    CHECK(write(fd, values, n * 4) == (ssize_t)(n * 4));
    close(fd);
    uint64_t s[5][1] = {{10}, {5000}, {1}, {60000}, {n}};
    tg_preload_source_tensor t[] = {
        {"a0", ST_U8, 1, s[0], 0, 0, 10},    {"a1", ST_U8, 1, s[1], 0, 10, 5000},
        {"a2", ST_U8, 1, s[2], 0, 5010, 1},  {"a3", ST_U8, 1, s[3], 0, 9000, 60000},
        {"w", ST_F32, 1, s[4], 1, 4, n * 4},
    };
    const char *files[] = {blob_of(a), blob_of(b)};
    tg_preload_request r = {"org/m", 1, "host", true, ST_F16, blobs, 2,
                            files,   5, t,      NULL, 0,      0,     NULL};
    char id[TG_PRELOAD_ID_LEN + 1];
    CHECK(tg_preload_submit(m, &r, id, err, sizeof err) == TG_PRELOAD_OK);
    CHECK_STR(tg_preload_wait(m, id, 10000), "resident");
    json_t *d = tg_preload_describe(m, id, false);
    CHECK_EQ_U64(json_integer_value(json_object_get(d, "bytes_copied")),
                 10 + 5000 + 1 + 60000 + n * 2);
    json_decref(d);

    uint16_t *expected = malloc(n * 2);
    st_convert(ST_F32, ST_F16, values, expected, n);
    int lease_fd = -1;
    char *layout = NULL;
    CHECK(tg_preload_lease(m, id, &lease_fd, &layout, err, sizeof err) == TG_PRELOAD_OK);
    CHECK(fcntl(lease_fd, F_GET_SEALS) == (F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL));
    json_t *reply = json_loads(layout, 0, NULL);
    json_t *w = json_array_get(json_object_get(reply, "layout"), 4);
    CHECK_STR(json_string_value(json_object_get(w, "dtype")), "F16");
    uint64_t bytes = (uint64_t)json_integer_value(json_object_get(reply, "bytes"));
    unsigned char *map = mmap(NULL, bytes, PROT_READ, MAP_SHARED, lease_fd, 0);
    CHECK(map != MAP_FAILED);
    if (map != MAP_FAILED) {
        for (size_t i = 0; i < 4; i++) {
            json_t *e = json_array_get(json_object_get(reply, "layout"), i);
            CHECK_STR(json_string_value(json_object_get(e, "name")), t[i].name);
            CHECK(memcmp(map + json_integer_value(json_object_get(e, "offset")),
                         a_data + t[i].offset, t[i].bytes) == 0);
        }
        CHECK(memcmp(map + json_integer_value(json_object_get(w, "offset")), expected, n * 2) == 0);
        munmap(map, bytes);
    }
    close(lease_fd);
    json_decref(reply);
    free(layout);
    tg_preload_unlease(m, id);

    /* A file shorter than its tensor fails the load and releases the memfd and its
     * mapping, whichever chunk finds it first: past the end of the file (80000 >
     * 70000 bytes), and inside the last
     * page of the file (70500: the page's tail past the end reads as zeros, which
     * must not pass for the tensor's bytes). */
    static const uint64_t too_long[] = {80000, 70500};
    for (size_t i = 0; i < 2; i++) {
        char id2[TG_PRELOAD_ID_LEN + 1];
        CHECK(submit_bytes(m, "host", a, too_long[i], id2) == TG_PRELOAD_OK);
        CHECK_STR(tg_preload_wait(m, id2, 5000), "failed");
        json_t *failed = tg_preload_describe(m, id2, false);
        const char *why = json_string_value(json_object_get(failed, "error"));
        CHECK(why != NULL && strstr(why, "before the tensor did") != NULL);
        json_decref(failed);
    }
    free(expected);
    free(values);
    free(a_data);
    tg_preload_manager_destroy(m);
}

TEST(host_fill_paths_place_the_same_bytes)
{
    check_host_fill_path(FILL_FD);
    check_host_fill_path(FILL_MAP);
    check_host_fill_path(FILL_BOUNCE);
}

TEST(host_preload_is_a_sealed_read_only_memfd)
{
    tg_preload_manager *m = fake_manager(0, 0, 4, 1 << 16);
    const char *path = write_file("host.bin", 300000, 9);
    size_t len;
    unsigned char *data = read_file(path, &len);
    uint64_t s[2][1] = {{123457}, {100000}};
    tg_preload_source_tensor t[] = {{"p", ST_U8, 1, s[0], 0, 17, 123457},
                                    {"q", ST_U8, 1, s[1], 0, 200000, 100000}};
    const char *files[] = {blob_of(path)};
    tg_preload_request r = {"org/m", 1, "host", false, ST_U8, blobs, 1,
                            files,   2, t,      NULL,  0,     0,     NULL};
    char id[TG_PRELOAD_ID_LEN + 1], err[300];
    CHECK(tg_preload_submit(m, &r, id, err, sizeof err) == TG_PRELOAD_OK);
    CHECK_STR(tg_preload_wait(m, id, 10000), "resident");
    check_lease_bytes(m, id, data, 2, t);

    int fd = -1;
    char *layout = NULL;
    CHECK(tg_preload_lease(m, id, &fd, &layout, err, sizeof err) == TG_PRELOAD_OK);
    int seals = fcntl(fd, F_GET_SEALS);
    /* not against shrinking: the server truncates it when it frees it */
    CHECK(seals == (F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL));
    CHECK((fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY);
    CHECK(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED);
    CHECK(ftruncate(fd, 0) != 0);
    CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0);
    CHECK(strstr(layout, "\"mappable\":true") != NULL);
    free(layout);
    tg_preload_unlease(m, id);
    /* the fd kept past the lease names nothing once the preload is freed */
    bool deferred = true;
    CHECK(tg_preload_evict(m, id, &deferred) == TG_PRELOAD_OK && !deferred);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && st.st_size == 0 && st.st_blocks == 0);
    close(fd);
    free(data);
    tg_preload_manager_destroy(m);
}

TEST(preload_counts_per_owner_and_in_all)
{
    tg_preload_manager_config config = {.host = tg_preload_host_backend(),
                                        .cuda = tg_preload_fake_backend(0, 0),
                                        .max_preloads = 3,
                                        .max_per_owner = 2};
    tg_preload_manager *m = NULL;
    CHECK(tg_preload_manager_create(&config, &m, NULL, 0) == 0);
    const char *path = write_file("owners.bin", 1000, 4);
    uint64_t shape[1] = {10};
    tg_preload_source_tensor t = {"t", ST_U8, 1, shape, 0, 0, 10};
    const char *files[] = {blob_of(path)};
    tg_preload_request a = {"org/m", 1, "host", false,  ST_U8, blobs, 1,
                            files,   1, &t,     "ns:a", 0,     0,     NULL};
    tg_preload_request b = {"org/m", 1, "host", false,  ST_U8, blobs, 1,
                            files,   1, &t,     "ns:b", 0,     0,     NULL};
    char id[TG_PRELOAD_ID_LEN + 1], first[TG_PRELOAD_ID_LEN + 1], err[300];
    CHECK(tg_preload_submit(m, &a, first, err, sizeof err) == TG_PRELOAD_OK);
    CHECK(tg_preload_submit(m, &a, id, err, sizeof err) == TG_PRELOAD_OK);
    CHECK(tg_preload_submit(m, &a, id, err, sizeof err) == TG_PRELOAD_QUOTA);
    CHECK(tg_preload_submit(m, &b, id, err, sizeof err) == TG_PRELOAD_OK);
    CHECK(tg_preload_submit(m, &b, id, err, sizeof err) == TG_PRELOAD_BUDGET); /* 3 in all */
    bool deferred = false;
    CHECK(tg_preload_evict(m, first, &deferred) == TG_PRELOAD_OK);
    CHECK_STR(tg_preload_wait(m, first, 5000), "gone");
    CHECK(tg_preload_submit(m, &b, id, err, sizeof err) == TG_PRELOAD_OK);
    tg_preload_manager_destroy(m);
}

TEST(delete_while_queued_or_loading)
{
    /* A big host load with tiny chunks keeps the loader busy; the second waits. */
    tg_preload_manager *m = fake_manager(0, 0, 1, 4096);
    const char *path = write_file("busy.bin", 8 << 20, 10);
    char first[TG_PRELOAD_ID_LEN + 1], second[TG_PRELOAD_ID_LEN + 1];
    CHECK(submit_bytes(m, "host", path, 8 << 20, first) == TG_PRELOAD_OK);
    CHECK(submit_bytes(m, "host", path, 1000, second) == TG_PRELOAD_OK);
    bool deferred = true;
    const char *second_state = state_of(m, second);
    CHECK(strcmp(second_state, "queued") == 0 || strcmp(second_state, "loading") == 0 ||
          strcmp(second_state, "resident") == 0);
    CHECK(tg_preload_evict(m, first, &deferred) == TG_PRELOAD_OK);
    /* Either still loading (deferred until the load ends) or already done. */
    const char *result = tg_preload_wait(m, first, 10000);
    CHECK(result != NULL && strcmp(result, "gone") == 0);
    CHECK_STR(tg_preload_wait(m, second, 10000), "resident");
    tg_preload_manager_destroy(m);
}

/* The re-check the manager asks for (tg_preload_manager_config.recheck), answered
 * from here: the verdict for each model id. */
static tg_preload_recheck_result verdicts[16];
static const char *verdict_reasons[16];
static unsigned rechecks;

static tg_preload_recheck_result recheck_from_table(void *context,
                                                    const tg_preload_identity *identity,
                                                    char *reason, size_t reason_len, char *detail,
                                                    size_t detail_len)
{
    (void)context;
    __atomic_fetch_add(&rechecks, 1, __ATOMIC_RELAXED);
    tg_preload_recheck_result verdict = verdicts[identity->model_id & 15];
    if (verdict == TG_PRELOAD_RECHECK_REVOKED) {
        snprintf(reason, reason_len, "%s", verdict_reasons[identity->model_id & 15]);
        snprintf(detail, detail_len, "revoked by the test");
    } else if (verdict == TG_PRELOAD_RECHECK_ERROR) {
        snprintf(detail, detail_len, "the test's catalog failed");
    }
    return verdict;
}

static const char *reason_in(tg_preload_manager *m, const char *id)
{
    static char text[40];
    json_t *d = tg_preload_describe(m, id, false);
    snprintf(text, sizeof text, "%s",
             d && json_string_value(json_object_get(d, "reason"))
                 ? json_string_value(json_object_get(d, "reason"))
                 : "");
    json_decref(d);
    return text;
}

TEST(revoked_preloads_are_never_handed_out_and_give_memory_back)
{
    memset(verdicts, 0, sizeof verdicts);
    tg_preload_manager_config config = {.host = tg_preload_host_backend(),
                                        .cuda = tg_preload_fake_backend(0, 0),
                                        .recheck = recheck_from_table};
    tg_preload_manager *m = NULL;
    CHECK(tg_preload_manager_create(&config, &m, NULL, 0) == 0);
    const char *path = write_file("revoke.bin", 4096, 5);
    uint64_t shape[1] = {4096};
    tg_preload_source_tensor t = {"t", ST_U8, 1, shape, 0, 0, 4096};
    const char *files[] = {blob_of(path)};
    tg_preload_request r = {"org/m", 1, "host", false, ST_U8, blobs, 1,
                            files,   1, &t,     NULL,  1,     10,    "hash"};
    char id[TG_PRELOAD_ID_LEN + 1], other[TG_PRELOAD_ID_LEN + 1], err[300], reason[40];

    /* model 1 revoked while leased: the lessee keeps it, nobody else gets it, the
     * last lease's end frees it and the record says why */
    CHECK(tg_preload_submit(m, &r, id, err, sizeof err) == TG_PRELOAD_OK);
    tg_preload_request r2 = r;
    r2.model_id = 2;
    CHECK(tg_preload_submit(m, &r2, other, err, sizeof err) == TG_PRELOAD_OK);
    CHECK_STR(tg_preload_wait(m, id, 10000), "resident");
    CHECK_STR(tg_preload_wait(m, other, 10000), "resident");
    int fd = -1;
    char *layout = NULL;
    CHECK(tg_preload_lease(m, id, &fd, &layout, err, sizeof err) == TG_PRELOAD_OK);
    free(layout);
    CHECK(tg_preload_revoke_model(m, 1, "model_deleted", "model org/m was deleted") == 1);
    CHECK_STR(state_of(m, id), "evicting");
    CHECK_STR(reason_in(m, id), "model_deleted");
    int fd2 = -1;
    CHECK(tg_preload_lease(m, id, &fd2, &layout, err, sizeof err) == TG_PRELOAD_NOT_RESIDENT);
    CHECK(tg_preload_reason(m, id, reason, sizeof reason) && strcmp(reason, "model_deleted") == 0);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && st.st_size > 0);
    tg_preload_unlease(m, id);
    CHECK_STR(state_of(m, id), "failed");
    CHECK(fstat(fd, &st) == 0 && st.st_size == 0); /* the memory is gone */
    close(fd);
    CHECK_STR(state_of(m, other), "resident"); /* another model's preload is untouched */
    bool deferred = true;
    CHECK(tg_preload_evict(m, id, &deferred) == TG_PRELOAD_OK && !deferred);
    CHECK_STR(tg_preload_wait(m, id, 1000), "gone");

    /* revoked at the load's end: never resident */
    verdicts[3] = TG_PRELOAD_RECHECK_REVOKED;
    verdict_reasons[3] = "token_revoked";
    r2.model_id = 3;
    CHECK(tg_preload_submit(m, &r2, id, err, sizeof err) == TG_PRELOAD_OK);
    CHECK_STR(tg_preload_wait(m, id, 10000), "failed");
    CHECK_STR(reason_in(m, id), "token_revoked");

    /* revoked at a hand-out: refused, freed at once (no other lease) */
    verdicts[2] = TG_PRELOAD_RECHECK_ERROR;
    CHECK(tg_preload_lease(m, other, &fd, &layout, err, sizeof err) == TG_PRELOAD_ERROR);
    CHECK_STR(state_of(m, other), "resident"); /* could not tell: kept, not handed out */
    verdicts[2] = TG_PRELOAD_RECHECK_REVOKED;
    verdict_reasons[2] = "model_deleted";
    unsigned before = rechecks;
    CHECK(tg_preload_lease(m, other, &fd, &layout, err, sizeof err) == TG_PRELOAD_NOT_RESIDENT);
    CHECK(rechecks == before + 1);
    CHECK_STR(state_of(m, other), "failed");
    CHECK_STR(reason_in(m, other), "model_deleted");
    CHECK(strstr(err, "revoked by the test") != NULL);
    tg_preload_manager_destroy(m);
}

int main(int argc, char **argv)
{
    (void)argc;
    snprintf(temp_dir, sizeof temp_dir, "/tmp/tg-preload-unit-XXXXXX");
    if (mkdtemp(temp_dir) == NULL)
        return 2;
    char store_dir[128], err[256];
    snprintf(store_dir, sizeof store_dir, "%s/store", temp_dir);
    if (tg_blobstore_open(store_dir, &blobs, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    tg_log_set_level(TG_LOG_WARN);
    RUN(plan_aligns_every_tensor_and_converts_sizes);
    RUN(device_strings);
    RUN(load_places_bytes_across_chunks_and_files);
    RUN(conversion_matches_st_convert);
    RUN(one_worker_copies_in_file_order);
    RUN(budget_evicts_least_recently_used_and_spares_leases);
    RUN(delete_of_a_leased_preload_waits_for_the_last_lease);
    RUN(a_failed_load_holds_no_memory);
    RUN(host_fill_paths_place_the_same_bytes);
    RUN(host_preload_is_a_sealed_read_only_memfd);
    RUN(delete_while_queued_or_loading);
    RUN(preload_counts_per_owner_and_in_all);
    RUN(revoked_preloads_are_never_handed_out_and_give_memory_back);
    tg_blobstore_close(blobs);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", temp_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", temp_dir);
    return test_report(argv[0]);
}
