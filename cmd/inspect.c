/* tensorgate inspect: the gate, the tensor table with absolute offsets and NaN/Inf
 * counts, parameters per dtype, metadata and the SHA-256 of the whole file, all
 * from one read pass. A refused file prints its verdict as validate does (exit 1). */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "sha256.h"
#include "st_stats.h"
#include "tg_local.h"

static void inspect_usage(FILE *out)
{
    fprintf(out, "usage: tensorgate inspect [--json] [--max-header BYTES] FILE\n"
                 "\n"
                 "Validates FILE and prints its tensor table (name, dtype, shape, absolute\n"
                 "begin/end, NaN and Inf counts), parameters per dtype, metadata and SHA-256.\n"
                 "Exit status: 0 valid, 1 refused (the verdict is printed), 2 an I/O, "
                 "out-of-memory or usage error.\n");
}

/* "[2, 3]" into a malloc'd string; NULL on allocation failure. */
static char *shape_text(const st_tensor *t)
{
    size_t cap = 3 + t->rank * 22;
    char *text = malloc(cap);
    if (text == NULL)
        return NULL;
    size_t used = 0;
    text[used++] = '[';
    for (size_t d = 0; d < t->rank; d++)
        used += (size_t)snprintf(text + used, cap - used, "%s%" PRIu64, d ? ", " : "", t->shape[d]);
    text[used++] = ']';
    text[used] = '\0';
    return text;
}

static int print_text(const char *path, const tg_local_run *run, const st_file *file,
                      const st_tensor_stats *stats)
{
    char sha[65];
    tg_hex_encode(run->sha256, sizeof run->sha256, sha);
    printf("file: %s\n", path);
    printf("size: %" PRIu64 " bytes\n", run->size);
    printf("sha256: %s\n", sha);
    printf("header: %" PRIu64 " bytes; data section at offset %" PRIu64 ", %" PRIu64 " bytes\n",
           file->header_size, file->data_start, file->data_size);
    printf("tensors: %zu\n", file->tensor_count);

    char **shapes = calloc(file->tensor_count + 1, sizeof *shapes);
    if (shapes == NULL)
        return -1;
    int name_width = 4, shape_width = 5;
    int failed = 0;
    for (size_t i = 0; i < file->tensor_count; i++) {
        shapes[i] = shape_text(&file->tensors[i]);
        if (shapes[i] == NULL) {
            failed = -1;
            goto done;
        }
        int n = (int)(file->tensors[i].name_len < 64 ? file->tensors[i].name_len : 64);
        int s = (int)(strlen(shapes[i]) < 40 ? strlen(shapes[i]) : 40);
        name_width = n > name_width ? n : name_width;
        shape_width = s > shape_width ? s : shape_width;
    }
    if (file->tensor_count > 0) {
        printf("  %-*s  %-11s  %-*s  %14s  %14s  %10s  %10s\n", name_width, "NAME", "DTYPE",
               shape_width, "SHAPE", "BEGIN", "END", "NAN", "INF");
        for (size_t i = 0; i < file->tensor_count; i++) {
            const st_tensor *t = &file->tensors[i];
            printf(
                "  %-*s  %-11s  %-*s  %14" PRIu64 "  %14" PRIu64 "  %10" PRIu64 "  %10" PRIu64 "\n",
                name_width, t->name, st_dtype_name(t->dtype), shape_width, shapes[i],
                file->data_start + t->begin, file->data_start + t->end, stats[i].nan, stats[i].inf);
        }
    }

    uint64_t counts[ST_DTYPE_COUNT], total = 0, nan = 0, inf = 0;
    st_file_parameter_counts(file, counts, &total);
    printf("parameters: %" PRIu64, total);
    const char *sep = " (";
    for (unsigned d = 0; d < ST_DTYPE_COUNT; d++) {
        if (counts[d] == 0)
            continue;
        printf("%s%s: %" PRIu64, sep, st_dtype_name((st_dtype)d), counts[d]);
        sep = ", ";
    }
    printf("%s\n", sep[0] == ',' ? ")" : "");
    for (size_t i = 0; i < file->tensor_count; i++) {
        nan += stats[i].nan;
        inf += stats[i].inf;
    }
    printf("nonfinite: %" PRIu64 " NaN, %" PRIu64 " Inf\n", nan, inf);
    if (file->has_metadata) {
        printf("metadata: %zu\n", file->metadata_count);
        for (size_t m = 0; m < file->metadata_count; m++)
            printf("  %s: %s\n", file->metadata[m].key, file->metadata[m].value);
    } else {
        printf("metadata: none\n");
    }
done:
    for (size_t i = 0; i < file->tensor_count; i++)
        free(shapes[i]);
    free(shapes);
    return failed;
}

static json_t *inspect_json(const char *path, const tg_local_run *run, const st_file *file,
                            const st_tensor_stats *stats)
{
    char sha[65];
    tg_hex_encode(run->sha256, sizeof run->sha256, sha);
    json_t *root = json_object();
    json_t *tensors = json_array();
    json_t *parameters = json_object();
    if (root == NULL || tensors == NULL || parameters == NULL)
        goto fail;
    json_object_set_new(root, "file", st_json_string_lossy(path));
    json_object_set_new(root, "valid", json_true());
    json_object_set_new(root, "format", json_string("safetensors"));
    json_object_set_new(root, "size", json_integer((json_int_t)run->size));
    json_object_set_new(root, "sha256", json_string(sha));
    json_object_set_new(root, "header_size", json_integer((json_int_t)file->header_size));
    json_object_set_new(root, "data_start", json_integer((json_int_t)file->data_start));
    uint64_t nan = 0, inf = 0;
    for (size_t i = 0; i < file->tensor_count; i++) {
        const st_tensor *t = &file->tensors[i];
        json_t *entry = json_object();
        json_t *shape = json_array();
        if (entry == NULL || shape == NULL) {
            json_decref(entry);
            json_decref(shape);
            goto fail;
        }
        /* dimensions and offsets were checked to fit the file, which fits in int64 */
        for (size_t d = 0; d < t->rank; d++)
            json_array_append_new(shape, json_integer((json_int_t)t->shape[d]));
        json_object_set_new(entry, "name", json_stringn(t->name, t->name_len));
        json_object_set_new(entry, "dtype", json_string(st_dtype_name(t->dtype)));
        json_object_set_new(entry, "shape", shape);
        json_object_set_new(entry, "begin",
                            json_integer((json_int_t)(file->data_start + t->begin)));
        json_object_set_new(entry, "end", json_integer((json_int_t)(file->data_start + t->end)));
        json_object_set_new(entry, "nan", json_integer((json_int_t)stats[i].nan));
        json_object_set_new(entry, "inf", json_integer((json_int_t)stats[i].inf));
        json_array_append_new(tensors, entry);
        nan += stats[i].nan;
        inf += stats[i].inf;
    }
    json_object_set_new(root, "tensors", tensors);
    tensors = NULL;
    uint64_t counts[ST_DTYPE_COUNT], total = 0;
    st_file_parameter_counts(file, counts, &total);
    for (unsigned d = 0; d < ST_DTYPE_COUNT; d++)
        if (counts[d] != 0)
            json_object_set_new(parameters, st_dtype_name((st_dtype)d),
                                json_integer((json_int_t)counts[d]));
    json_object_set_new(root, "parameters", parameters);
    parameters = NULL;
    json_object_set_new(root, "total_parameters", json_integer((json_int_t)total));
    json_object_set_new(root, "nan", json_integer((json_int_t)nan));
    json_object_set_new(root, "inf", json_integer((json_int_t)inf));
    if (file->has_metadata) {
        json_t *metadata = json_object();
        if (metadata == NULL)
            goto fail;
        for (size_t m = 0; m < file->metadata_count; m++)
            json_object_set_new(metadata, file->metadata[m].key,
                                json_string(file->metadata[m].value));
        json_object_set_new(root, "metadata", metadata);
    } else {
        json_object_set_new(root, "metadata", json_null());
    }
    return root;
fail:
    json_decref(root);
    json_decref(tensors);
    json_decref(parameters);
    return NULL;
}

int tg_cmd_inspect(int argc, char **argv)
{
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},
        {"max-header", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    st_gate_config config;
    memset(&config, 0, sizeof config);
    config.kind = ST_GATE_SAFETENSORS;
    bool json = false;
    optind = 1;
    opterr = 0;
    for (;;) {
        int opt = getopt_long(argc, argv, "h", options, NULL);
        if (opt == -1)
            break;
        switch (opt) {
        case 'j':
            json = true;
            break;
        case 'm':
            if (!tg_local_header_limit_option("inspect", optarg, &config.limits.max_header_size))
                return 2;
            break;
        case 'h':
            inspect_usage(stdout);
            return 0;
        default:
            tg_local_print_option_error("inspect", argv[optind - 1]);
            inspect_usage(stderr);
            return 2;
        }
    }
    if (argc - optind != 1) {
        fprintf(stderr, "tensorgate inspect: exactly one FILE, please\n");
        inspect_usage(stderr);
        return 2;
    }
    const char *path = argv[optind];
    tg_local_run run;
    if (tg_local_gate_file(path, &config, TG_LOCAL_HASH_ADMITTED, &run) != 0)
        return 2;
    int status = 0;
    if (!run.verdict.valid) {
        /* out of memory: no line, as ever; the status says refused */
        (void)tg_local_print_run_verdict(stdout, path, &run, json);
        status = 1;
    } else {
        const st_file *file = st_gate_file(run.gate);
        const st_tensor_stats *stats = st_gate_stats(run.gate);
        if (json) {
            json_t *root = inspect_json(path, &run, file, stats);
            if (root == NULL) {
                fprintf(stderr, "tensorgate inspect: out of memory\n");
                status = 2;
            } else {
                tg_local_print_json(stdout, root);
                json_decref(root);
            }
        } else if (print_text(path, &run, file, stats) != 0) {
            fprintf(stderr, "tensorgate inspect: out of memory\n");
            status = 2;
        }
    }
    st_gate_free(run.gate);
    fflush(stdout);
    return status;
}
