/* tensorgate token create | list | revoke: the API tokens of a data directory,
 * beside a running server or before its first start. */
#include <stdio.h>
#include <string.h>

#include "auth.h"
#include "catalog.h"
#include "checks.h"
#include "commands.h"
#include "config.h"
#include "data_dir.h"

static int token_usage(FILE *out)
{
    fprintf(
        out,
        "usage: tensorgate token create [--data DIR] --scope read|write|admin [--namespace ORG]\n"
        "       tensorgate token list [--data DIR]\n"
        "       tensorgate token revoke [--data DIR] ID\n"
        "create prints the new token as the last line of stdout; it is shown only once.\n"
        "create makes DIR as serve does (migrated catalog, blob store) when it is missing\n"
        "or empty, so the first admin token can exist before the first start.\n"
        "list prints one line per token: id, scope, namespace (- if none), created\n"
        "(never the token). revoke deletes the token: the server refuses it (401) at once.\n"
        "Exit status: 0 done, 1 the catalog failed or no such token, 2 a usage error,\n"
        "3 DIR is not a tensorgate data directory (nothing is created; for create: and\n"
        "not empty).\n");
    return out == stdout ? 0 : 2;
}

static void print_token(void *ctx, const tg_token_info *token)
{
    (void)ctx;
    static const char *const scope_names[] = {"none", "read", "write", "admin"};
    unsigned scope = (unsigned)token->scope;
    printf("%lld\t%s\t%s\t%s\n", (long long)token->id, scope < 4 ? scope_names[scope] : "none",
           token->namespace_name[0] ? token->namespace_name : "-", token->created_at);
}

/* token list [--data DIR] | token revoke [--data DIR] ID */
static int token_list_or_revoke(int argc, char **argv)
{
    bool revoke = strcmp(argv[1], "revoke") == 0;
    const char *data_dir = tg_data_dir_default(), *id_text = NULL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            return token_usage(stdout);
        } else if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) {
            data_dir = argv[++i];
        } else if (revoke && id_text == NULL && argv[i][0] != '-') {
            id_text = argv[i];
        } else {
            fprintf(stderr, "tensorgate token: unexpected argument '%s'\n", argv[i]);
            return token_usage(stderr);
        }
    }
    uint64_t id = 0;
    if (revoke && (id_text == NULL || !tg_parse_u64(id_text, &id) || id == 0 || id > INT64_MAX)) {
        fprintf(stderr,
                "tensorgate token revoke: give the token's id (see `tensorgate token list`)\n");
        return 2;
    }
    tg_blobstore *blobs = NULL;
    tg_catalog *catalog = NULL;
    int opened = tg_data_open(data_dir, &blobs, &catalog, TG_DATA_EXISTING, "token", NULL);
    if (opened != 0)
        return opened == TG_EXIT_NOT_DATA_DIR ? opened : 1;
    int rc = 0;
    if (!revoke) {
        printf("id\tscope\tnamespace\tcreated\n");
        if (tg_catalog_token_each(catalog, print_token, NULL) != TG_CAT_OK) {
            fprintf(stderr, "tensorgate token list: the catalog failed\n");
            rc = 1;
        }
    } else {
        tg_cat_status status = tg_catalog_token_revoke(catalog, (int64_t)id);
        if (status == TG_CAT_OK) {
            fprintf(stderr, "tensorgate: revoked token %llu\n", (unsigned long long)id);
        } else if (status == TG_CAT_NOT_FOUND) {
            fprintf(stderr, "tensorgate token revoke: no token has id %llu\n",
                    (unsigned long long)id);
            rc = 1;
        } else {
            fprintf(stderr, "tensorgate token revoke: the catalog failed\n");
            rc = 1;
        }
    }
    tg_data_close(blobs, catalog);
    return rc;
}

int tg_cmd_token(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return token_usage(argc < 2 ? stderr : stdout);
    if (strcmp(argv[1], "list") == 0 || strcmp(argv[1], "revoke") == 0)
        return token_list_or_revoke(argc, argv);
    if (strcmp(argv[1], "create") != 0) {
        fprintf(stderr, "tensorgate token: unknown action '%s'\n", argv[1]);
        return token_usage(stderr);
    }
    const char *data_dir = tg_data_dir_default(), *scope_name = NULL, *namespace_name = NULL;
    for (int i = 2; i < argc; i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return token_usage(stdout);
        if (strcmp(argv[i], "--data") == 0 && value) {
            data_dir = value;
            i++;
        } else if (strcmp(argv[i], "--scope") == 0 && value) {
            scope_name = value;
            i++;
        } else if (strcmp(argv[i], "--namespace") == 0 && value) {
            namespace_name = value;
            i++;
        } else {
            fprintf(stderr, "tensorgate token: unexpected argument '%s'\n", argv[i]);
            return token_usage(stderr);
        }
    }
    tg_scope scope = scope_name ? tg_scope_from_name(scope_name) : TG_SCOPE_NONE;
    if (scope == TG_SCOPE_NONE) {
        fprintf(stderr, "tensorgate token: --scope must be read, write or admin\n");
        return 2;
    }
    if (namespace_name != NULL && !tg_valid_name_part(namespace_name)) {
        fprintf(stderr, "tensorgate token: --namespace must be an org name\n");
        return 2;
    }
    tg_blobstore *blobs = NULL;
    tg_catalog *catalog = NULL;
    int opened = tg_data_open(data_dir, &blobs, &catalog, TG_DATA_CREATE, "token", NULL);
    if (opened != 0)
        return opened == TG_EXIT_NOT_DATA_DIR ? opened : 1;
    char token[TG_TOKEN_LEN + 1], hash[65];
    int rc = 1;
    if (tg_token_generate(token, hash) != 0) {
        fprintf(stderr, "tensorgate token: the random number generator failed\n");
    } else if (tg_catalog_token_add(catalog, hash, scope, namespace_name) != TG_CAT_OK) {
        fprintf(stderr, "tensorgate token: cannot store the token\n");
    } else {
        fprintf(stderr, "tensorgate: created %s %s token%s%s; it is shown once:\n",
                scope == TG_SCOPE_ADMIN ? "an" : "a", scope_name,
                namespace_name ? " for namespace " : "", namespace_name ? namespace_name : "");
        printf("%s\n", token);
        rc = 0;
    }
    tg_data_close(blobs, catalog);
    return rc;
}
