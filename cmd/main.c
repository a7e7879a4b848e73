/* tensorgate: one binary, subcommands. argv[0] of each command is its name. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"validate", tg_cmd_validate, "run the gate on files: exit 0 valid, 1 refused, 2 error"},
    {"inspect", tg_cmd_inspect, "tensor table, parameters per dtype, NaN/Inf counts, SHA-256"},
    {"convert", tg_cmd_convert, "convert tensors to another dtype into a new file"},
    {"serve", tg_cmd_serve, "run the registry server"},
    {"token", tg_cmd_token, "create and list API tokens"},
    {"gc", tg_cmd_gc, "delete blobs no catalog row references"},
    {"fsck", tg_cmd_fsck, "re-hash every blob against the catalog"},
    {"audit", tg_cmd_audit, "verify the audit log's hash chain, list its records"},
    {"push", tg_cmd_push, "upload a directory as a new version of a model (server)"},
    {"pull", tg_cmd_pull, "download a version's files, resumable, SHA-256 checked (server)"},
    {"ls", tg_cmd_ls, "list models, a model's versions, or a version's files (server)"},
    {"header", tg_cmd_header, "a stored file's parsed header (server)"},
    {"tensor", tg_cmd_tensor, "fetch one tensor, sliced or converted, as .npy or raw (server)"},
    {"scan", tg_cmd_scan, "the server's gate verdict on a local file, nothing stored"},
    {"rejections", tg_cmd_rejections, "what the server refused, filtered (admin token)"},
    {"sign", tg_cmd_sign, "sign a model directory (OpenSSF model signing v1, model.sig)"},
    {"verify", tg_cmd_verify, "verify a model directory against its model.sig"},
    {"namespace", tg_cmd_namespace_all,
     "a namespace's storage usage, quota and code policy (server)"},
    {"mirror", tg_cmd_mirror, "mirror a Hub repository into a new version (server)"},
    {"model", tg_cmd_model, "a model's or version's details, tags, description (server)"},
    {"models", tg_cmd_models, "search models by text and tags, by name or downloads (server)"},
    {"version", tg_cmd_version,
     "alone: print the version (also --version); else deprecate,\n"
     "            undeprecate or delete a version (server)"},
    {"draft", tg_cmd_draft, "delete a draft version (server)"},
    {"alias", tg_cmd_alias, "point an alias at a version, or delete it (server)"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: tensorgate COMMAND [ARGS...]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n`tensorgate COMMAND --help` describes each.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0 || (strcmp(argv[1], "version") == 0 && argc == 2)) {
        printf("tensorgate %s\n", TG_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    }
    fprintf(stderr, "tensorgate: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
