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
#include "st_convert.h"
#include "st_write.h"
#include "tg_local.h"

/* Elements per conversion chunk: 1 MiB of the widest (8-byte) dtype. */
#define CONVERT_CHUNK_ELEMENTS (128u * 1024u)
#define COPY_CHUNK_BYTES (1u << 20)
#define GLOBS_MAX 256

static void convert_usage(FILE *out)
{
    fprintf(out, "usage: tensorgate convert IN OUT --dtype DTYPE [--tensors GLOB[,GLOB...]]\n"
                 "\n"
                 "Converts the floating tensors of IN (F64, F32, F16, BF16, F8_E4M3, F8_E5M2)\n"
                 "whose names match a GLOB (default: all of them) to DTYPE, one of those six,\n"
                 "rounding as PyTorch's .to() does; other tensors are copied unchanged. OUT keeps\n"
                 "IN's metadata and is written atomically.\n"
                 "Exit status: 0 written, 1 IN refused by the gate, 2 an I/O, out-of-memory or "
                 "usage error.\n");
}

static int write_all(int fd, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t put = write(fd, p, len);
        if (put < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += put;
        len -= (size_t)put;
    }
    return 0;
}

/* Reads exactly len bytes at offset; a short read means the file shrank. */
static int pread_all(int fd, void *data, size_t len, uint64_t offset)
{
    uint8_t *p = data;
    while (len > 0) {
        ssize_t got = pread(fd, p, len, (off_t)offset);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (got == 0) {
            errno = EIO;
            return -1;
        }
        p += got;
        len -= (size_t)got;
        offset += (uint64_t)got;
    }
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

/* No globs means every tensor. Counts the matches of each glob. */
static bool globs_match(globs *g, const char *name)
{
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

/* Copies or converts one tensor from in_fd at absolute offset source to out_fd. */
static int stream_tensor(int in_fd, int out_fd, uint64_t source, const st_tensor *t, st_dtype to,
                         uint8_t *src_buf, uint8_t *dst_buf)
{
    if (t->dtype == to) {
        uint64_t left = t->end - t->begin;
        while (left > 0) {
            size_t n = left < COPY_CHUNK_BYTES ? (size_t)left : COPY_CHUNK_BYTES;
            if (pread_all(in_fd, src_buf, n, source) != 0 || write_all(out_fd, src_buf, n) != 0)
                return -1;
            source += n;
            left -= n;
        }
        return 0;
    }
    /* both dtypes are among the six convertible ones: whole bytes per element */
    size_t from_size = st_dtype_bits(t->dtype) / 8, to_size = st_dtype_bits(to) / 8;
    uint64_t left = t->elements;
    while (left > 0) {
        size_t n = left < CONVERT_CHUNK_ELEMENTS ? (size_t)left : CONVERT_CHUNK_ELEMENTS;
        if (pread_all(in_fd, src_buf, n * from_size, source) != 0)
            return -1;
        st_convert(t->dtype, to, src_buf, dst_buf, n);
        if (write_all(out_fd, dst_buf, n * to_size) != 0)
            return -1;
        source += n * from_size;
        left -= n;
    }
    return 0;
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
    st_write_tensor *wanted = NULL;
    uint8_t *src_buf = NULL, *dst_buf = NULL;
    st_write_plan plan;
    memset(&plan, 0, sizeof plan);
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
    if (tg_local_gate_file(in_path, &config, false, &run) != 0)
        goto done;
    if (!run.verdict.valid) {
        tg_local_print_verdict(stdout, in_path, &run.verdict, NULL);
        status = 1;
        goto done;
    }
    const st_file *file = st_gate_file(run.gate);

    size_t count = file->tensor_count, converted = 0;
    wanted = calloc(count + 1, sizeof *wanted);
    src_buf = malloc(COPY_CHUNK_BYTES);
    dst_buf = malloc(COPY_CHUNK_BYTES);
    if (wanted == NULL || src_buf == NULL || dst_buf == NULL) {
        fprintf(stderr, "tensorgate convert: out of memory\n");
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        const st_tensor *t = &file->tensors[i];
        bool match = globs_match(&patterns, t->name);
        wanted[i].name = t->name;
        wanted[i].rank = t->rank;
        wanted[i].shape = t->shape;
        wanted[i].dtype = t->dtype;
        if (match && st_convert_supported(t->dtype, to) && t->dtype != to) {
            wanted[i].dtype = to;
            converted++;
        }
    }
    for (size_t g = 0; g < patterns.count; g++)
        if (patterns.matched[g] == 0)
            fprintf(stderr, "tensorgate convert: warning: '%s' matches no tensor\n",
                    patterns.pattern[g]);

    st_error err;
    st_error_clear(&err);
    if (st_write_plan_make(wanted, count, file->metadata, file->metadata_count, file->has_metadata,
                           &plan, &err) != ST_OK) {
        fprintf(stderr, "tensorgate convert: cannot plan %s: %s: %s\n", out_path,
                st_reason_name(err.reason), err.detail);
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
    if (write_all(out_fd, plan.header, plan.header_len) != 0)
        goto write_failed;
    uint64_t written = 0;
    for (size_t k = 0; k < plan.count; k++) {
        size_t i = plan.order[k];
        /* the plan lays tensors out back to back in this order */
        if (plan.begin[i] != written) {
            fprintf(stderr,
                    "tensorgate convert: internal error: plan offsets are not contiguous\n");
            goto done;
        }
        const st_tensor *t = &file->tensors[i];
        if (stream_tensor(in_fd, out_fd, file->data_start + t->begin, t, wanted[i].dtype, src_buf,
                          dst_buf) != 0)
            goto write_failed;
        written += plan.bytes[i];
    }
    if (written != plan.data_size) {
        fprintf(stderr,
                "tensorgate convert: internal error: %" PRIu64
                " data bytes written, plan says %" PRIu64 "\n",
                written, plan.data_size);
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
           (uint64_t)plan.header_len + plan.data_size);
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
    st_write_plan_free(&plan);
    free(wanted);
    free(src_buf);
    free(dst_buf);
    free(patterns.storage);
    st_gate_free(run.gate);
    fflush(stdout);
    return status;
}
