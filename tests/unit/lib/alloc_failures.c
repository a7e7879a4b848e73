/* Allocation failures through lib/'s allocator seam (st_alloc.h): an allocation that
 * fails is a server error, never a verdict on the file.
 *  - st_header_parse with its Kth allocation failing answers ST_OUT_OF_MEMORY (it
 *    answered header_too_large, which the server recorded as the file's fault);
 *  - the corpus walk: every case of tests/corpus/expected.tsv through the gate (fed in
 *    997-byte pieces), failing its 1st, 2nd, ... 40th allocation of lib/ in turn: each
 *    run ends with the case's own verdict or with st_gate_out_of_memory (reason
 *    out_of_memory), never another refusal; no leak (LeakSanitizer in the ASan build),
 *    no crash. jansson's allocations (the JSON sidecar check) are not failed: jansson
 *    reports most of its allocation failures as syntax errors, so a JSON sidecar can
 *    still be refused sidecar_json_invalid when memory runs out;
 *  - `tensorgate validate` exits 2 (an error), not 1 (refused), when memory runs out. */
#include <stdlib.h>
#include <unistd.h>

#include "commands.h"
#include "st_alloc.h"
#include "st_gate.h"
#include "st_header.h"
#include "st_write.h"
#include "test.h"

#define WALK_MAX 40

typedef struct counter {
    unsigned long calls;
    unsigned long fail_at; /* 0: none */
} counter;

static counter alloc_counter;

static bool refuse_nth(void *context, size_t size)
{
    (void)size;
    counter *c = context;
    return ++c->calls == c->fail_at;
}

/* From here on, the nth allocation of lib/ fails (0: none fails). */
static void fail_nth(unsigned long nth)
{
    alloc_counter.calls = 0;
    alloc_counter.fail_at = nth;
    st_alloc_set_refuse(refuse_nth, &alloc_counter);
}

static void fail_none(void)
{
    st_alloc_set_refuse(NULL, NULL);
}

static const char header_text[] =
    "{\"__metadata__\":{\"format\":\"pt\"},\"b\":{\"dtype\":\"F32\",\"shape\":[2],"
    "\"data_offsets\":[0,8]},\"a\":{\"dtype\":\"U8\",\"shape\":[2,2],\"data_offsets\":[8,12]}}";

static size_t make_file(uint8_t *out, size_t cap)
{
    size_t n = strlen(header_text);
    if (8 + n + 12 > cap)
        return 0;
    for (int k = 0; k < 8; k++)
        out[k] = (uint8_t)((uint64_t)n >> (8 * k));
    memcpy(out + 8, header_text, n);
    memset(out + 8 + n, 0, 12);
    return 8 + n + 12;
}

TEST(header_parse_allocation_failure_is_out_of_memory)
{
    uint8_t buf[512];
    size_t len = make_file(buf, sizeof buf);
    CHECK(len > 0);
    st_file f;
    st_error err;
    unsigned long failures = 0;
    for (unsigned long k = 1; k <= WALK_MAX; k++) {
        fail_nth(k);
        st_reason r = st_header_parse(buf, len, len, NULL, &f, &err);
        bool injected = alloc_counter.calls >= k;
        fail_none();
        if (!injected) {
            CHECK_EQ_U64(r, ST_OK); /* every allocation passed: parsed */
            st_file_free(&f);
            break;
        }
        failures++;
        CHECK_STR(st_reason_name(r), "out_of_memory");
        CHECK_EQ_U64(err.reason, ST_OUT_OF_MEMORY);
        CHECK(f.tensor_count == 0 && f.internal == NULL);
        st_file_free(&f);
    }
    CHECK(failures >= 3); /* strings, frames, keys, ... were each failed once */
}

typedef struct corpus_case {
    char name[256];
    char mode[16];
} corpus_case;

static uint8_t *read_case(const char *name, size_t *len)
{
    static const char *const dirs[] = {"tests/corpus/cases", "tests/corpus/hand"};
    for (size_t d = 0; d < 2; d++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dirs[d], name);
        FILE *f = fopen(path, "rb");
        if (f == NULL)
            continue;
        uint8_t *data = NULL;
        size_t used = 0, cap = 0;
        for (;;) {
            if (used == cap) {
                cap = cap ? 2 * cap : 65536;
                uint8_t *grown = realloc(data, cap);
                if (grown == NULL)
                    break;
                data = grown;
            }
            size_t got = fread(data + used, 1, cap - used, f);
            used += got;
            if (got == 0)
                break;
        }
        fclose(f);
        *len = used;
        return data;
    }
    return NULL; /* a large case, made only by tests/corpus/run.sh */
}

/* The gate over data in 997-byte pieces; true when it stopped out of memory. */
static bool run_gate(const st_gate_config *config, const uint8_t *data, size_t len,
                     st_verdict *verdict)
{
    st_gate *gate = st_gate_new(config, len);
    if (gate == NULL) {
        memset(verdict, 0, sizeof *verdict);
        verdict->error.reason = ST_OUT_OF_MEMORY;
        return true;
    }
    st_gate_status status = ST_GATE_CONTINUE;
    for (size_t done = 0; done < len && status == ST_GATE_CONTINUE; done += 997)
        status = st_gate_feed(gate, data + done, len - done < 997 ? len - done : 997);
    st_gate_finish(gate);
    st_gate_verdict(gate, verdict);
    bool oom = st_gate_out_of_memory(gate);
    st_gate_free(gate);
    return oom;
}

static bool same_verdict(const st_verdict *a, const st_verdict *b)
{
    return a->valid == b->valid && a->error.reason == b->error.reason && a->format == b->format &&
           a->error.offset == b->error.offset;
}

TEST(corpus_walk_failing_each_allocation)
{
    FILE *tsv = fopen("tests/corpus/expected.tsv", "r");
    CHECK(tsv != NULL);
    if (tsv == NULL)
        return;
    char line[2048];
    unsigned long cases = 0, runs = 0, stopped = 0, mismatches = 0;
    while (fgets(line, sizeof line, tsv) != NULL) {
        corpus_case c;
        if (line[0] == '#' || sscanf(line, "%255[^\t]\t%15[^\t]", c.name, c.mode) != 2)
            continue;
        size_t len = 0;
        uint8_t *data = read_case(c.name, &len);
        if (data == NULL)
            continue;
        st_gate_config config;
        memset(&config, 0, sizeof config);
        config.kind =
            strcmp(c.mode, "sidecar") == 0 ? st_gate_sidecar_kind(c.name) : ST_GATE_SAFETENSORS;
        config.refuse_nonfinite = strcmp(c.mode, "nonfinite") == 0;
        st_verdict baseline;
        CHECK(!run_gate(&config, data, len, &baseline));
        cases++;
        for (unsigned long k = 1; k <= WALK_MAX; k++) {
            st_verdict verdict;
            fail_nth(k);
            bool oom = run_gate(&config, data, len, &verdict);
            bool injected = alloc_counter.calls >= k;
            fail_none();
            runs++;
            if (oom) {
                stopped++;
                /* never a verdict on the content */
                if (!(injected && !verdict.valid && verdict.error.reason == ST_OUT_OF_MEMORY)) {
                    mismatches++;
                    fprintf(stderr, "%s: allocation %lu: out of memory but reason %s\n", c.name, k,
                            st_reason_name(verdict.error.reason));
                }
            } else if (!same_verdict(&verdict, &baseline)) {
                mismatches++;
                fprintf(stderr, "%s: allocation %lu failed: %s, the case's verdict is %s\n", c.name,
                        k, st_reason_name(verdict.error.reason),
                        st_reason_name(baseline.error.reason));
            }
            if (!injected)
                break; /* every allocation of the case passed */
        }
        free(data);
    }
    fclose(tsv);
    printf("corpus walk: %lu cases, %lu runs, %lu stopped out of memory\n", cases, runs, stopped);
    CHECK(cases >= 400);
    CHECK(stopped >= cases); /* each case allocates at least once */
    CHECK_EQ_U64(mismatches, 0);
}

/* The code policy's paths (st_gate_config.allow_code): native code streamed and sniffed
 * again at its end, a script, auto_map, and an ELF hiding a ZIP; each allocation failing
 * in turn is out of memory, never another verdict. */
TEST(code_policy_failing_each_allocation)
{
    static uint8_t elf[100000];
    memset(elf, 0x5a, sizeof elf);
    memcpy(elf,
           "\x7f"
           "ELF\x02\x01\x01\x00",
           8);
    static uint8_t hidden[300];
    memset(hidden, 0x11, sizeof hidden);
    memcpy(hidden,
           "\x7f"
           "ELF\x02\x01\x01\x00",
           8);
    memcpy(hidden + sizeof hidden - 22, "PK\5\6", 4); /* an empty ZIP's end record */
    memset(hidden + sizeof hidden - 18, 0, 18);
    static const char script[] = "#!/bin/sh\necho hi\n";
    static const char config[] = "{\"auto_map\": {\"AutoModel\": \"m.M\"}}";
    static const char python[] = "import os\n";
    const struct {
        const char *name;
        const uint8_t *data;
        size_t len;
    } cases[] = {{"lib.so", elf, sizeof elf},
                 {"lib.so", hidden, sizeof hidden},
                 {"run.sh", (const uint8_t *)script, sizeof script - 1},
                 {"config.json", (const uint8_t *)config, sizeof config - 1},
                 {"modeling_x.py", (const uint8_t *)python, sizeof python - 1}};
    unsigned long mismatches = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        st_gate_config config_of_case;
        memset(&config_of_case, 0, sizeof config_of_case);
        config_of_case.kind = st_gate_sidecar_kind(cases[i].name);
        config_of_case.name = cases[i].name;
        config_of_case.allow_code = true;
        st_verdict baseline;
        CHECK(!run_gate(&config_of_case, cases[i].data, cases[i].len, &baseline));
        /* the ELF hiding a ZIP is refused; every other case is code the policy admits */
        CHECK(baseline.valid == (i != 1));
        CHECK((baseline.code.reason != ST_OK) == (i != 1));
        for (unsigned long k = 1; k <= WALK_MAX; k++) {
            st_verdict verdict;
            fail_nth(k);
            bool oom = run_gate(&config_of_case, cases[i].data, cases[i].len, &verdict);
            bool injected = alloc_counter.calls >= k;
            fail_none();
            if (oom ? verdict.valid || verdict.error.reason != ST_OUT_OF_MEMORY
                    : !same_verdict(&verdict, &baseline))
                mismatches++;
            if (!injected)
                break;
        }
    }
    CHECK_EQ_U64(mismatches, 0);
}

TEST(validate_out_of_memory_is_an_error)
{
    uint8_t buf[512];
    size_t len = make_file(buf, sizeof buf);
    char path[] = "/tmp/tg-alloc-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK(write(fd, buf, len) == (ssize_t)len);
    close(fd);
    unsigned long errors = 0;
    for (unsigned long k = 1; k <= WALK_MAX; k++) {
        char *argv[] = {"validate", path, NULL};
        fail_nth(k);
        int rc = tg_cmd_validate(2, argv);
        bool injected = alloc_counter.calls >= k;
        fail_none();
        CHECK_EQ_U64(rc, injected ? 2 : 0); /* never 1: the file is valid */
        errors += rc == 2;
        if (!injected)
            break;
    }
    CHECK(errors >= 3);
    unlink(path);
}

/* Writing a file: every allocation st_write makes (metadata sort, plan arrays, the
 * header text, the file) failed in turn is out_of_memory, never a fault of the
 * input (it was ST_HEADER_TOO_LARGE or ST_SIZE_OVERFLOW), and nothing is returned. */
TEST(write_allocation_failure_is_out_of_memory)
{
    static const uint64_t shape_a[] = {2, 2}, shape_b[] = {3};
    const st_write_tensor tensors[] = {{"b", ST_F32, 1, shape_b}, {"a", ST_U8, 2, shape_a}};
    static const uint8_t bytes_a[4] = {1, 2, 3, 4}, bytes_b[12] = {0};
    const void *const data[] = {bytes_b, bytes_a};
    const st_metadata_entry metadata[] = {{"format", "pt"}, {"author", "x"}};
    unsigned long failures = 0;
    for (unsigned long k = 1; k <= WALK_MAX; k++) {
        uint8_t *out = NULL;
        size_t out_len = 0;
        st_error err;
        fail_nth(k);
        st_reason r = st_write_to_buffer(tensors, data, 2, metadata, 2, true, &out, &out_len, &err);
        bool injected = alloc_counter.calls >= k;
        fail_none();
        if (!injected) {
            CHECK_EQ_U64(r, ST_OK);
            CHECK(out != NULL && out_len > 8);
            free(out);
            break;
        }
        failures++;
        CHECK_STR(st_reason_name(r), "out_of_memory");
        CHECK_EQ_U64(err.reason, ST_OUT_OF_MEMORY);
        CHECK(out == NULL);
        free(out);
    }
    CHECK(failures >= 4); /* sort, plan arrays, header, file */
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(header_parse_allocation_failure_is_out_of_memory);
    RUN(corpus_walk_failing_each_allocation);
    RUN(code_policy_failing_each_allocation);
    RUN(validate_out_of_memory_is_an_error);
    RUN(write_allocation_failure_is_out_of_memory);
    return test_report(argv[0]);
}
