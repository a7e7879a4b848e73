/* tensorgate validate: the gate over local files, one verdict per file.
 * Exit status: 0 all valid, 1 any refused, 2 an I/O, out-of-memory or usage error. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "sha256.h"
#include "st_sarif.h"
#include "tg_local.h"

static void validate_usage(FILE *out)
{
    fprintf(
        out,
        "usage: tensorgate validate [--json | --format text|json|sarif] [--sidecar]\n"
        "                           [--max-header BYTES] [--refuse-nonfinite] FILE...\n"
        "\n"
        "Runs the gate over each FILE (\"-\" is standard input) and prints one verdict per line.\n"
        "  --json              one JSON object per file: file, valid, reason, detail, offset,\n"
        "                      tensor, format (the same as --format json)\n"
        "  --format sarif      one SARIF 2.1.0 log for all the files: one run, each FILE an\n"
        "                      artifact (length, SHA-256: a refused file is read to its end\n"
        "                      to hash it), each refusal and each pickle import a result\n"
        "  --sidecar           judge FILE as a model version's sidecar, as an upload of its\n"
        "                      name is: a FILE named *.json must be strict JSON (an object or\n"
        "                      array); any other also passes as UTF-8 text or safetensors\n"
        "                      (JSON and text 16 MiB at most)\n"
        "Code is refused in either mode: a FILE whose name marks code (*.py, *.sh, *.so, ...),\n"
        "content that is (ELF, PE, Mach-O, .pyc, a #! script, a notebook), or JSON whose\n"
        "auto_map or custom_pipelines points a loader at code (reasons code_*).\n"
        "  --max-header BYTES  refuse headers larger than BYTES (at most 100000000)\n"
        "  --refuse-nonfinite  refuse NaN or Inf values in floating tensors\n"
        "Exit status: 0 all valid, 1 any refused, 2 an I/O, out-of-memory or usage error.\n");
}

int tg_cmd_validate(int argc, char **argv)
{
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},
        {"sidecar", no_argument, NULL, 's'},
        {"max-header", required_argument, NULL, 'm'},
        {"refuse-nonfinite", no_argument, NULL, 'n'},
        {"format", required_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    st_gate_config config;
    memset(&config, 0, sizeof config);
    config.kind = ST_GATE_SAFETENSORS;
    config.admit_gguf = true; /* a GGUF file gets the GGUF validator's verdict */
    bool json = false, sarif = false;
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
        case 'f':
            if (strcmp(optarg, "sarif") == 0) {
                sarif = true;
            } else if (strcmp(optarg, "json") == 0) {
                json = true;
            } else if (strcmp(optarg, "text") != 0) {
                fprintf(stderr, "tensorgate validate: --format is text, json or sarif, not '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 's':
            config.kind = ST_GATE_SIDECAR;
            break;
        case 'm':
            if (!tg_local_header_limit_option("validate", optarg, &config.limits.max_header_size))
                return 2;
            break;
        case 'n':
            config.refuse_nonfinite = true;
            break;
        case 'h':
            validate_usage(stdout);
            return 0;
        default:
            tg_local_print_option_error("validate", argv[optind - 1]);
            validate_usage(stderr);
            return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "tensorgate validate: no FILE given\n");
        validate_usage(stderr);
        return 2;
    }
    if (sarif && json) {
        fprintf(stderr, "tensorgate validate: --json and --format sarif exclude each other\n");
        return 2;
    }
    json_t *log = sarif ? st_sarif_log_new() : NULL;
    if (sarif && log == NULL) {
        fprintf(stderr, "tensorgate validate: out of memory\n");
        return 2;
    }
    bool any_error = false, any_refused = false;
    for (int i = optind; i < argc; i++) {
        /* --sidecar: the kind an upload of this name gets (*.json: strict JSON only) */
        st_gate_config file_config = config;
        if (config.kind == ST_GATE_SIDECAR && strcmp(argv[i], "-") != 0)
            file_config.kind = st_gate_sidecar_kind(argv[i]);
        /* a name that marks code (modeling_x.py, lib.so) is refused as an upload's is */
        if (strcmp(argv[i], "-") != 0)
            file_config.name = argv[i];
        /* only the verdict is printed: no tensor table (the gate keeps it for standard
         * input and --refuse-nonfinite) */
        file_config.verdict_only = true;
        tg_local_run run;
        bool is_stdin = strcmp(argv[i], "-") == 0;
        if (tg_local_gate_file(argv[i], &file_config,
                               sarif ? TG_LOCAL_HASH_WHOLE : TG_LOCAL_HASH_NONE, &run) != 0) {
            any_error = true;
            if (log != NULL &&
                st_sarif_log_add_failure(log, is_stdin ? NULL : argv[i],
                                         "The file could not be judged: an I/O, memory or "
                                         "SHA-256 failure (named on standard error).") != 0)
                fprintf(stderr, "tensorgate validate: out of memory\n");
            continue;
        }
        if (!run.verdict.valid)
            any_refused = true;
        if (log != NULL) {
            char sha[65];
            if (run.hashed)
                tg_hex_encode(run.sha256, sizeof run.sha256, sha);
            st_sarif_file file = {is_stdin ? NULL : argv[i], run.size, run.hashed ? sha : NULL};
            if (st_sarif_log_add(log, &file, &run.verdict) != 0) {
                fprintf(stderr, "tensorgate validate: out of memory\n");
                any_error = true;
            }
        } else if (tg_local_print_run_verdict(stdout, argv[i], &run, json) != 0) {
            fprintf(stderr, "tensorgate validate: out of memory\n");
            any_error = true;
        }
        st_gate_free(run.gate);
    }
    if (log != NULL) {
        char *text = st_sarif_dump(log);
        if (text == NULL) {
            fprintf(stderr, "tensorgate validate: out of memory\n");
            any_error = true;
        } else {
            fputs(text, stdout);
            free(text);
        }
        json_decref(log);
    }
    fflush(stdout);
    return any_error ? 2 : any_refused ? 1 : 0;
}
