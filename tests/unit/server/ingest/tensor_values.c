/* Value check of server/ingest/tensor_stream.c against NumPy slicing and torch .to().
 *
 * Run without arguments (as `make test` does, from the repository root) it runs
 * `/usr/bin/python3 tests/tensors/check_values.py --cli <this program>`, which
 * writes safetensors files with torch, asks this same program for the engine's
 * outputs, and compares them with numpy indexing, torch conversions and
 * numpy.load. Exit 77 from the script (no numpy/torch) is a skip.
 *
 * `tensor_values batch REQUESTS.json RESULTS.json` is the engine CLI the script
 * drives: each request {"file","tensor","slice","dtype","format","out"} (any of
 * slice/dtype/format may be null) gets a result: the plan ({"ok":true,"length",
 * "dtype","shape","contiguous","header_length","source_begin","source_end"}) with
 * the body written to "out", or the refusal ({"ok":false,"status","reason","dim",
 * "detail"}). Bodies are read in random chunk sizes, in order for even requests
 * and in a shuffled order of pieces for odd ones; a contiguous plan is served the
 * way the HTTP layer does (the file's bytes at contiguous_offset) and must equal
 * the generator's bytes ("generator_matches"). */
#include "store.h"
#include "tensor_stream.h"

#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

/* tg_tensor_read_fn over a file descriptor (ctx: the descriptor, as (void *)(intptr_t)fd). */
static int fd_read(void *ctx, void *buf, size_t len, uint64_t offset)
{
    return tg_store_read_at((int)(intptr_t)ctx, buf, len, offset);
}

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;

static uint64_t rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

static int read_header(int fd, st_file *file, st_error *err)
{
    struct stat st;
    uint8_t prefix[8];
    uint64_t n;
    if (fstat(fd, &st) != 0 || pread(fd, prefix, 8, 0) != 8 ||
        st_header_length(prefix, 8, (uint64_t)st.st_size, NULL, &n, err) != ST_OK)
        return -1;
    uint8_t *buf = malloc((size_t)(8 + n));
    int rc = -1;
    if (buf && pread(fd, buf, (size_t)(8 + n), 0) == (ssize_t)(8 + n) &&
        st_header_parse(buf, (size_t)(8 + n), (uint64_t)st.st_size, NULL, file, err) == ST_OK)
        rc = 0;
    free(buf);
    return rc;
}

static size_t random_chunk(void)
{
    switch (rng() % 4) {
    case 0:
        return 1 + rng() % 7;
    case 1:
        return 1 + rng() % 4096;
    case 2:
        return 1 + rng() % (256 * 1024);
    default:
        return 1 + rng() % (3 * TG_TENSOR_CHUNK);
    }
}

/* The body through the generator, in random pieces, in order or shuffled. */
typedef struct piece {
    uint64_t begin, end;
} piece;

static uint8_t *generate_body(tg_tensor_stream *s, uint64_t length, bool shuffled)
{
    uint8_t *body = malloc(length + 1);
    size_t cap = 64, count = 0;
    piece *pieces = malloc(cap * sizeof *pieces);
    if (body == NULL || pieces == NULL) {
        free(body);
        free(pieces);
        return NULL;
    }
    for (uint64_t pos = 0; pos < length;) {
        if (count == cap) {
            cap *= 2;
            piece *grown = realloc(pieces, cap * sizeof *pieces);
            if (grown == NULL)
                abort();
            pieces = grown;
        }
        uint64_t size = random_chunk();
        pieces[count].begin = pos;
        pos += size < length - pos ? size : length - pos;
        pieces[count++].end = pos;
    }
    for (size_t i = 0; shuffled && count > 1 && i < count; i++) {
        size_t j = (size_t)(rng() % count);
        piece t = pieces[i];
        pieces[i] = pieces[j];
        pieces[j] = t;
    }
    bool ok = true;
    for (size_t i = 0; ok && i < count; i++) {
        for (uint64_t pos = pieces[i].begin; ok && pos < pieces[i].end;) {
            ssize_t n = tg_tensor_stream_read(s, pos, body + pos, (size_t)(pieces[i].end - pos));
            ok = n > 0;
            pos += ok ? (uint64_t)n : 0;
        }
    }
    free(pieces);
    if (!ok) {
        free(body);
        return NULL;
    }
    return body;
}

static json_t *run_request(json_t *request, size_t index)
{
    const char *path = json_string_value(json_object_get(request, "file"));
    const char *name = json_string_value(json_object_get(request, "tensor"));
    const char *out = json_string_value(json_object_get(request, "out"));
    tg_tensor_options options = {json_string_value(json_object_get(request, "slice")),
                                 json_string_value(json_object_get(request, "dtype")),
                                 json_string_value(json_object_get(request, "format"))};
    if (path == NULL || name == NULL || out == NULL)
        return json_pack("{s:b, s:s}", "ok", 0, "error", "bad request line");
    int fd = open(path, O_RDONLY);
    st_file file;
    st_error err;
    if (fd < 0 || read_header(fd, &file, &err) != 0) {
        if (fd >= 0)
            close(fd);
        return json_pack("{s:b, s:s}", "ok", 0, "error", "cannot read the file");
    }
    const st_tensor *tensor = st_file_find(&file, name, strlen(name));
    json_t *result = NULL;
    tg_tensor_stream *s = NULL;
    tg_tensor_error terr;
    if (tensor == NULL) {
        result = json_pack("{s:b, s:s}", "ok", 0, "error", "no such tensor");
    } else if (tg_tensor_stream_open(fd_read, (void *)(intptr_t)fd, &file, tensor, &options, &s,
                                     &terr) != 0) {
        result = json_pack("{s:b, s:i, s:s, s:I, s:s}", "ok", 0, "status", (int)terr.status,
                           "reason", terr.reason, "dim",
                           terr.dim == SIZE_MAX ? (json_int_t)-1 : (json_int_t)terr.dim, "detail",
                           terr.detail);
    } else {
        const tg_tensor_plan *plan = tg_tensor_stream_plan(s);
        uint8_t *body = generate_body(s, plan->length, index % 2 == 1);
        bool matches = body != NULL;
        uint8_t *served = body;
        if (body != NULL && plan->contiguous) {
            /* what sendfile would send */
            served = malloc(plan->length + 1);
            matches = served &&
                      pread(fd, served, (size_t)plan->length, (off_t)plan->contiguous_offset) ==
                          (ssize_t)plan->length &&
                      memcmp(served, body, (size_t)plan->length) == 0;
        }
        FILE *f = fopen(out, "wb");
        bool written = f && served && fwrite(served, 1, (size_t)plan->length, f) == plan->length;
        if (f)
            fclose(f);
        json_t *shape = json_array();
        for (size_t d = 0; d < plan->out_rank; d++)
            json_array_append_new(shape, json_integer((json_int_t)plan->out_shape[d]));
        result = json_pack("{s:b, s:I, s:s, s:o, s:b, s:I, s:I, s:I, s:b}", "ok", written, "length",
                           (json_int_t)plan->length, "dtype", st_dtype_name(plan->out_dtype),
                           "shape", shape, "contiguous", plan->contiguous, "header_length",
                           (json_int_t)plan->header_length, "source_begin",
                           (json_int_t)plan->source_begin, "source_end",
                           (json_int_t)plan->source_end, "generator_matches", matches);
        if (served != body)
            free(served);
        free(body);
        tg_tensor_stream_free(s);
    }
    st_file_free(&file);
    close(fd);
    return result;
}

static int batch(const char *requests_path, const char *results_path)
{
    json_error_t error;
    json_t *requests = json_load_file(requests_path, 0, &error);
    if (!json_is_array(requests)) {
        fprintf(stderr, "%s: %s\n", requests_path, error.text);
        return 2;
    }
    json_t *results = json_array();
    for (size_t i = 0; i < json_array_size(requests); i++)
        json_array_append_new(results, run_request(json_array_get(requests, i), i));
    int rc = json_dump_file(results, results_path, JSON_COMPACT) == 0 ? 0 : 2;
    json_decref(results);
    json_decref(requests);
    return rc;
}

TEST(values_match_numpy_and_torch)
{
    if (access("/usr/bin/python3", X_OK) != 0) {
        printf("skipped: no /usr/bin/python3\n");
        return;
    }
    const char *script = "tests/tensors/check_values.py";
    CHECK(access(script, R_OK) == 0);
    char self[PATH_MAX], dir[] = "/tmp/tg_tensor_values_XXXXXX";
    CHECK(realpath("/proc/self/exe", self) != NULL);
    CHECK(mkdtemp(dir) != NULL);
    char command[PATH_MAX * 2 + 128];
    snprintf(command, sizeof command, "/usr/bin/python3 %s --cli '%s' --dir '%s' 2>&1", script,
             self, dir);
    FILE *p = popen(command, "r");
    CHECK(p != NULL);
    if (p == NULL)
        return;
    char line[1024];
    unsigned long checks = 0, failures = ULONG_MAX;
    while (fgets(line, sizeof line, p)) {
        fputs(line, stdout);
        sscanf(line, "check_values: %lu checks, %lu failures", &checks, &failures);
    }
    int status = pclose(p);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    if (code == 77) {
        printf("skipped: /usr/bin/python3 lacks numpy or torch\n");
        return;
    }
    CHECK_EQ_U64(code, 0);
    CHECK_EQ_U64(failures, 0);
    /* the script really compared things */
    CHECK(checks >= 1000);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "batch") == 0)
        return batch(argv[2], argv[3]);
    RUN(values_match_numpy_and_torch);
    return test_report(argv[0]);
}
