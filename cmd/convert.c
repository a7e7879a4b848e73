/* tensorgate convert: IN is validated, its floating tensors matching the globs are
 * converted to one dtype (bit-exact with PyTorch's .to()), everything else is copied
 * as it is, and the result is written as a new safetensors file with the same
 * metadata. Streaming, tensor by tensor in bounded chunks: memory stays at a few
 * MiB whatever the file size. OUT appears whole or not at all (OUT.tmp, fsync,
 * rename, fsync of the directory). */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "io.h"
#include "st_convert.h"
#include "st_convert_stream.h"
#include "tg_local.h"

/* The converter's chunk (st_convert_stream): memory is two of these. */
#define CONVERT_CHUNK_BYTES ((size_t)1 << 20)
#define GLOBS_MAX 256

static void convert_usage(FILE *out)
{
    fprintf(out, "usage: tensorgate convert IN OUT --dtype DTYPE [--tensors GLOB[,GLOB...]]\n"
                 "\n"
                 "Converts the floating tensors of IN (F64, F32, F16, BF16, F8_E4M3, F8_E5M2)\n"
                 "whose names match a GLOB (default: all of them) to DTYPE, one of those six,\n"
                 "rounding as PyTorch's .to() does; other tensors are copied unchanged. OUT keeps\n"
                 "IN's metadata and is written atomically.\n"
                 "--tensors matching no tensor at all is refused (tensors_not_found, as the\n"
                 "server's convert route answers) and nothing is written.\n"
                 "Exit status: 0 written, 1 IN refused by the gate or --tensors matching no\n"
                 "tensor, 2 an I/O, out-of-memory or usage error.\n");
}

/* The converter's two sides: IN read at offsets, OUT.tmp written in order. */
typedef struct file_io {
    int in_fd, out_fd;
    int error; /* errno of the failed read or write */
    uint64_t written;
} file_io;

static int read_input(void *ctx, void *buf, size_t len, uint64_t offset)
{
    file_io *io = ctx;
    if (tg_pread_all(io->in_fd, buf, len, offset) != 0) {
        io->error = errno;
        return -1;
    }
    return 0;
}

static int write_output(void *ctx, const void *data, size_t len)
{
    file_io *io = ctx;
    if (tg_write_all(io->out_fd, data, len) != 0) {
        io->error = errno;
        return -1;
    }
    io->written += len;
    return 0;
}

typedef struct globs {
    char *storage;
    const char *pattern[GLOBS_MAX];
    size_t matched[GLOBS_MAX];
    size_t count;
} globs;

static bool globs_parse(const char *text, globs *out)
{
    memset(out, 0, sizeof *out);
    out->storage = strdup(text);
    if (out->storage == NULL)
        return false;
    char *rest = out->storage;
    for (;;) {
        char *comma = strchr(rest, ',');
        if (comma != NULL)
            *comma = '\0';
        if (rest[0] == '\0' || out->count == GLOBS_MAX)
            return false;
        out->pattern[out->count++] = rest;
        if (comma == NULL)
            return true;
        rest = comma + 1;
    }
}

/* No globs means every tensor. Counts the matches of each glob (st_convert_select_fn). */
static bool globs_match(void *ctx, const char *name)
{
    globs *g = ctx;
    if (g->count == 0)
        return true;
    bool any = false;
    for (size_t i = 0; i < g->count; i++) {
        if (fnmatch(g->pattern[i], name, 0) == 0) {
            g->matched[i]++;
            any = true;
        }
    }
    return any;
}

static int fsync_parent_directory(const char *path)
{
    char *copy = strdup(path);
    if (copy == NULL)
        return -1;
    int dir = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(copy);
    if (dir < 0)
        return -1;
    int rc = fsync(dir);
    close(dir);
    return rc;
}

int tg_cmd_convert(int argc, char **argv)
{
    static const struct option options[] = {
        {"dtype", required_argument, NULL, 'd'},
        {"tensors", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *dtype_name = NULL, *tensor_globs = NULL;
    optind = 1;
    opterr = 0;
    for (;;) {
        int opt = getopt_long(argc, argv, "h", options, NULL);
        if (opt == -1)
            break;
        switch (opt) {
        case 'd':
            dtype_name = optarg;
            break;
        case 't':
            tensor_globs = optarg;
            break;
        case 'h':
            convert_usage(stdout);
            return 0;
        default:
            tg_local_print_option_error("convert", argv[optind - 1]);
            convert_usage(stderr);
            return 2;
        }
    }
    if (argc - optind != 2 || dtype_name == NULL) {
        fprintf(stderr, "tensorgate convert: IN, OUT and --dtype are required\n");
        convert_usage(stderr);
        return 2;
    }
    const char *in_path = argv[optind], *out_path = argv[optind + 1];
    st_dtype to;
    if (!st_dtype_from_name(dtype_name, strlen(dtype_name), &to) || !st_convert_supported(to, to)) {
        fprintf(stderr,
                "tensorgate convert: unsupported dtype '%s': convert to one of F64, F32, F16, "
                "BF16, F8_E4M3, F8_E5M2\n",
                dtype_name);
        return 2;
    }
    if (strcmp(in_path, "-") == 0 || strcmp(out_path, "-") == 0) {
        fprintf(stderr, "tensorgate convert: IN and OUT must be files\n");
        return 2;
    }
    globs patterns;
    memset(&patterns, 0, sizeof patterns);
    if (tensor_globs != NULL && !globs_parse(tensor_globs, &patterns)) {
        fprintf(stderr,
                "tensorgate convert: --tensors wants GLOB[,GLOB...] (at most %d, none empty)\n",
                GLOBS_MAX);
        free(patterns.storage);
        return 2;
    }

    int status = 2;
    int in_fd = -1, out_fd = -1;
    char *tmp_path = NULL;
    st_dtype *dtypes = NULL;
    tg_local_run run;
    memset(&run, 0, sizeof run);

    /* the file read for the data is the one validated: same inode, size and mtime */
    in_fd = open(in_path, O_RDONLY | O_CLOEXEC);
    struct stat before, after;
    if (in_fd < 0 || fstat(in_fd, &before) != 0) {
        fprintf(stderr, "tensorgate convert: %s: %s\n", in_path, strerror(errno));
        goto done;
    }
    st_gate_config config;
    memset(&config, 0, sizeof config);
    config.kind = ST_GATE_SAFETENSORS;
    if (tg_local_gate_file(in_path, &config, TG_LOCAL_HASH_NONE, &run) != 0)
        goto done;
    if (!run.verdict.valid) {
        tg_local_print_verdict(stdout, in_path, &run.verdict, NULL);
        status = 1;
        goto done;
    }
    const st_file *file = st_gate_file(run.gate);

    size_t count = file->tensor_count;
    dtypes = calloc(count + 1, sizeof *dtypes);
    if (dtypes == NULL) {
        fprintf(stderr, "tensorgate convert: out of memory\n");
        goto done;
    }
    size_t converted = st_convert_choose(file, to, globs_match, &patterns, dtypes);
    size_t selected = 0;
    for (size_t g = 0; g < patterns.count; g++) {
        selected += patterns.matched[g];
        if (patterns.matched[g] == 0)
            fprintf(stderr, "tensorgate convert: warning: '%s' matches no tensor\n",
                    patterns.pattern[g]);
    }
    if (patterns.count > 0 && selected == 0) {
        printf("%s: refused: tensors_not_found: --tensors matches no tensor; nothing written\n",
               in_path);
        status = 1;
        goto done;
    }

    size_t path_len = strlen(out_path);
    tmp_path = malloc(path_len + 5);
    if (tmp_path == NULL) {
        fprintf(stderr, "tensorgate convert: out of memory\n");
        goto done;
    }
    memcpy(tmp_path, out_path, path_len);
    memcpy(tmp_path + path_len, ".tmp", 5);
    out_fd = open(tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out_fd < 0) {
        fprintf(stderr, "tensorgate convert: %s: %s\n", tmp_path, strerror(errno));
        free(tmp_path);
        tmp_path = NULL; /* not ours to unlink */
        goto done;
    }
    file_io io = {in_fd, out_fd, 0, 0};
    st_convert_options convert_options = {.dtypes = dtypes, .chunk_bytes = CONVERT_CHUNK_BYTES};
    st_error err;
    st_convert_status converted_status =
        st_convert_stream(file, read_input, &io, write_output, &io, &convert_options, &err);
    if (converted_status == ST_CONVERT_READ_FAILED || converted_status == ST_CONVERT_WRITE_FAILED) {
        errno = io.error;
        goto write_failed;
    }
    if (converted_status == ST_CONVERT_NO_MEMORY) {
        fprintf(stderr, "tensorgate convert: out of memory\n");
        goto done;
    }
    if (converted_status != ST_CONVERT_OK) {
        fprintf(stderr, "tensorgate convert: cannot plan %s: %s: %s\n", out_path,
                st_reason_name(err.reason), err.detail);
        goto done;
    }
    if (fstat(in_fd, &after) != 0 || after.st_ino != before.st_ino ||
        after.st_size != before.st_size || (uint64_t)after.st_size != run.size ||
        after.st_mtim.tv_sec != before.st_mtim.tv_sec ||
        after.st_mtim.tv_nsec != before.st_mtim.tv_nsec) {
        fprintf(stderr, "tensorgate convert: %s changed while it was converted\n", in_path);
        goto done;
    }
    if (fsync(out_fd) != 0)
        goto write_failed;
    if (close(out_fd) != 0) {
        out_fd = -1;
        goto write_failed;
    }
    out_fd = -1;
    if (rename(tmp_path, out_path) != 0) {
        fprintf(stderr, "tensorgate convert: rename to %s: %s\n", out_path, strerror(errno));
        goto done;
    }
    free(tmp_path);
    tmp_path = NULL;
    if (fsync_parent_directory(out_path) != 0)
        fprintf(stderr, "tensorgate convert: warning: fsync of the directory of %s: %s\n", out_path,
                strerror(errno));
    printf("%s -> %s: %zu of %zu tensors converted to %s, %zu kept; %" PRIu64 " -> %" PRIu64
           " bytes\n",
           in_path, out_path, converted, count, st_dtype_name(to), count - converted, run.size,
           io.written);
    status = 0;
    goto done;

write_failed:
    fprintf(stderr, "tensorgate convert: copying %s to %s: %s\n", in_path, tmp_path,
            strerror(errno));
done:
    if (out_fd >= 0)
        close(out_fd);
    if (tmp_path != NULL) {
        unlink(tmp_path);
        free(tmp_path);
    }
    if (in_fd >= 0)
        close(in_fd);
    free(dtypes);
    free(patterns.storage);
    st_gate_free(run.gate);
    fflush(stdout);
    return status;
}
