/* Unit tests for cmd/tg_local.c's tg_local_gate_file: a refused file is not read to
 * its end, nor hashed, even when a hash is asked for (as tg_local.h now says; it said
 * the whole refused file was hashed); a valid file is hashed whole. */
#include <stdlib.h>
#include <unistd.h>

#include "sha256.h"
#include "test.h"
#include "tg_local.h"

/* A file of 8 + header bytes and then data_len zero bytes, in a temp path. */
static bool write_file(char *path, const char *header, size_t data_len)
{
    int fd = mkstemp(path);
    if (fd < 0)
        return false;
    size_t n = strlen(header);
    uint8_t prefix[8];
    for (int k = 0; k < 8; k++)
        prefix[k] = (uint8_t)((uint64_t)n >> (8 * k));
    bool ok = write(fd, prefix, 8) == 8 && write(fd, header, n) == (ssize_t)n;
    uint8_t *zeros = calloc(1, data_len ? data_len : 1);
    ok = ok && zeros != NULL && write(fd, zeros, data_len) == (ssize_t)data_len;
    free(zeros);
    close(fd);
    return ok;
}

TEST(refused_file_stops_unhashed)
{
    char path[] = "/tmp/tg-local-XXXXXX";
    size_t data = 3u * TG_LOCAL_READ_SIZE;
    CHECK(write_file(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},}",
                     data));
    st_gate_config config;
    memset(&config, 0, sizeof config);
    config.kind = ST_GATE_SAFETENSORS;
    tg_local_run run;
    CHECK_EQ_U64(tg_local_gate_file(path, &config, TG_LOCAL_HASH_ADMITTED, &run), 0);
    CHECK(!run.verdict.valid);
    CHECK_STR(st_reason_name(run.verdict.error.reason), "json_syntax");
    CHECK(!run.hashed);
    CHECK_EQ_U64(run.size, TG_LOCAL_READ_SIZE); /* one read, not the file's 3 MiB */
    st_gate_free(run.gate);
    unlink(path);
}

TEST(valid_file_hashed_whole)
{
    char path[] = "/tmp/tg-local-XXXXXX";
    const char *header =
        "{\"a\":{\"dtype\":\"U8\",\"shape\":[3000000],\"data_offsets\":[0,3000000]}}";
    CHECK(write_file(path, header, 3000000));
    st_gate_config config;
    memset(&config, 0, sizeof config);
    config.kind = ST_GATE_SAFETENSORS;
    tg_local_run run;
    CHECK_EQ_U64(tg_local_gate_file(path, &config, TG_LOCAL_HASH_ADMITTED, &run), 0);
    CHECK(run.verdict.valid);
    CHECK(run.hashed);
    uint64_t total = 8 + strlen(header) + 3000000;
    CHECK_EQ_U64(run.size, total);
    /* the digest is the file's */
    FILE *f = fopen(path, "rb");
    uint8_t *all = malloc(total);
    CHECK(f != NULL && all != NULL && fread(all, 1, total, f) == total);
    char want[65], got[65];
    CHECK_EQ_U64(tg_sha256_hex(all, total, want, "test"), 0);
    tg_hex_encode(run.sha256, sizeof run.sha256, got);
    CHECK_STR(got, want);
    free(all);
    if (f != NULL)
        fclose(f);
    st_gate_free(run.gate);
    unlink(path);
}

/* TG_LOCAL_HASH_WHOLE (validate --format sarif): a refused file is read on to its end
 * and hashed whole; the verdict is the same refusal. */
TEST(refused_file_hashed_whole)
{
    char path[] = "/tmp/tg-local-XXXXXX";
    size_t data = 3u * TG_LOCAL_READ_SIZE;
    const char *header = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},}";
    CHECK(write_file(path, header, data));
    st_gate_config config;
    memset(&config, 0, sizeof config);
    config.kind = ST_GATE_SAFETENSORS;
    tg_local_run run;
    CHECK_EQ_U64(tg_local_gate_file(path, &config, TG_LOCAL_HASH_WHOLE, &run), 0);
    CHECK(!run.verdict.valid);
    CHECK_STR(st_reason_name(run.verdict.error.reason), "json_syntax");
    CHECK(run.hashed);
    uint64_t total = 8 + strlen(header) + data;
    CHECK_EQ_U64(run.size, total);
    FILE *f = fopen(path, "rb");
    uint8_t *all = malloc(total);
    CHECK(f != NULL && all != NULL && fread(all, 1, total, f) == total);
    char want[65], got[65];
    CHECK_EQ_U64(tg_sha256_hex(all, total, want, "test"), 0);
    tg_hex_encode(run.sha256, sizeof run.sha256, got);
    CHECK_STR(got, want);
    free(all);
    if (f != NULL)
        fclose(f);
    st_gate_free(run.gate);
    unlink(path);
}

/* TG_LOCAL_HASH_NONE (validate, convert): past an accepted header only the data
 * section's length decides, so it is not read: a NaN in it passes unseen (no stats are
 * kept), the size counts the whole file; --refuse-nonfinite reads it and finds the NaN. */
TEST(unhashed_data_section_is_not_read)
{
    char path[] = "/tmp/tg-local-XXXXXX";
    /* 1 MiB of F32 zeros but for a NaN at the end, past the first read */
    const char *header =
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[262144],\"data_offsets\":[0,1048576]}}";
    CHECK(write_file(path, header, 1048576));
    FILE *f = fopen(path, "r+b");
    const uint8_t nan_bytes[4] = {0, 0, 0xc0, 0x7f};
    CHECK(f != NULL && fseek(f, -4, SEEK_END) == 0 && fwrite(nan_bytes, 1, 4, f) == 4);
    if (f != NULL)
        fclose(f);
    st_gate_config config;
    memset(&config, 0, sizeof config);
    config.kind = ST_GATE_SAFETENSORS;
    tg_local_run run;
    CHECK_EQ_U64(tg_local_gate_file(path, &config, TG_LOCAL_HASH_NONE, &run), 0);
    CHECK(run.verdict.valid);
    CHECK(!run.hashed);
    CHECK_EQ_U64(run.size, 8 + strlen(header) + 1048576);
    CHECK(st_gate_file(run.gate) != NULL);
    CHECK(st_gate_stats(run.gate) == NULL); /* the data section was skipped */
    st_gate_free(run.gate);
    config.refuse_nonfinite = true;
    CHECK_EQ_U64(tg_local_gate_file(path, &config, TG_LOCAL_HASH_NONE, &run), 0);
    CHECK(!run.verdict.valid);
    CHECK_STR(st_reason_name(run.verdict.error.reason), "nonfinite_values");
    st_gate_free(run.gate);
    /* hashed: read whole, stats kept */
    config.refuse_nonfinite = false;
    CHECK_EQ_U64(tg_local_gate_file(path, &config, TG_LOCAL_HASH_ADMITTED, &run), 0);
    CHECK(run.verdict.valid && run.hashed);
    CHECK(st_gate_stats(run.gate) != NULL);
    st_gate_free(run.gate);
    unlink(path);
}

/* validate's path (verdict_only, nothing hashed) judges a header longer than the
 * first read in a mapping of the file: the verdict is the copying gate's, valid or not. */
TEST(long_header_judged_in_the_mapping)
{
    for (int duplicate = 0; duplicate <= 1; duplicate++) {
        char path[] = "/tmp/tg-local-XXXXXX";
        size_t cap = 3000 * 96 + 8;
        char *h = malloc(cap);
        size_t n = 0;
        h[n++] = '{';
        for (int i = 0; i < 3000; i++)
            n += (size_t)snprintf(h + n, cap - n,
                                  "%s\"t.%d\":{\"dtype\":\"U8\",\"shape\":[4],"
                                  "\"data_offsets\":[%d,%d]}",
                                  i ? "," : "", duplicate && i == 2999 ? 5 : i, 4 * i, 4 * i + 4);
        h[n++] = '}';
        h[n] = '\0';
        CHECK(n > ST_SNIFF_HEAD_MAX);
        CHECK(write_file(path, h, 4 * 3000));
        st_gate_config config;
        memset(&config, 0, sizeof config);
        config.kind = ST_GATE_SAFETENSORS;
        tg_local_run copied, mapped;
        CHECK_EQ_U64(tg_local_gate_file(path, &config, TG_LOCAL_HASH_NONE, &copied), 0);
        config.verdict_only = true;
        CHECK_EQ_U64(tg_local_gate_file(path, &config, TG_LOCAL_HASH_NONE, &mapped), 0);
        CHECK_EQ_U64(mapped.verdict.valid, !duplicate);
        CHECK_EQ_U64(mapped.verdict.valid, copied.verdict.valid);
        CHECK_STR(mapped.verdict.error.detail, copied.verdict.error.detail);
        CHECK_EQ_U64(mapped.verdict.error.offset, copied.verdict.error.offset);
        if (!duplicate) {
            CHECK_EQ_U64(st_gate_file(mapped.gate)->tensor_count, 3000);
            CHECK(st_gate_file(mapped.gate)->tensors == NULL);
        }
        st_gate_free(copied.gate);
        st_gate_free(mapped.gate);
        free(h);
        unlink(path);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(refused_file_stops_unhashed);
    RUN(valid_file_hashed_whole);
    RUN(refused_file_hashed_whole);
    RUN(unhashed_data_section_is_not_read);
    RUN(long_header_judged_in_the_mapping);
    return test_report(argv[0]);
}
