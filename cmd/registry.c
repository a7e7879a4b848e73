/* The registry commands (docs/MANUAL.md, "The registry from the command line"): a
 * model's and a version's description and tags (model show|tag|describe), the search
 * (models), a version's life cycle (version deprecate|undeprecate|delete, draft
 * delete), aliases (alias set|delete) and a namespace's storage (namespace
 * show|quota). Each talks to a server through libtgclient with the common options
 * and exit statuses of cmd/remote.c (remote_cli.h): every refusal prints the
 * server's reason code and sentence and exits 1. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "remote_cli.h"
#include "tensorgate_client.h"

#define EXIT_USAGE 2
#define MAX_TAG_ARGS 64 /* the most KEY=VALUE and --remove of one `model tag` */
#define MAX_TAG_FILTERS 8

enum {
    OPT_REMOVE = TG_REMOTE_EXTRA_OPT,
    OPT_TAG,
    OPT_SEARCH,
    OPT_SORT,
    OPT_LIMIT,
    OPT_REASON,
    OPT_SET,
    OPT_DEFAULT,
};

#define shown tg_remote_shown

/* "org/name@rev" into model and rev; the @rev is required when need_rev. 0, or -1
 * after reporting a usage error. */
static int parse_ref(const char *cmd, const char *text, bool need_rev, char *model, char *rev,
                     void (*usage)(FILE *))
{
    tgc_error e;
    if (tgc_parse_ref(text, model, 160, rev, 160, &e) != 0) {
        tg_remote_usage_error(cmd, e.detail, usage);
        return -1;
    }
    if (strchr(rev, '/') != NULL) {
        char msg[256];
        snprintf(msg, sizeof msg, "'%.200s': a REV (number, alias, digest) has no '/'", text);
        tg_remote_usage_error(cmd, msg, usage);
        return -1;
    }
    if (need_rev && strchr(text, '@') == NULL) {
        char msg[256];
        snprintf(msg, sizeof msg, "'%s' names no version: write ORG/NAME@REV", text);
        tg_remote_usage_error(cmd, msg, usage);
        return -1;
    }
    return 0;
}

/* "k=v, k2=v2" of a Tags object, keys in the server's order */
static void print_tags(const char *label, const json_t *tags)
{
    if (json_object_size(tags) == 0) {
        printf("%s-\n", label);
        return;
    }
    printf("%s", label);
    const char *key;
    json_t *value;
    bool first = true;
    json_object_foreach((json_t *)tags, key, value)
    {
        printf("%s%s=%s", first ? "" : ", ", shown(key), shown(json_string_value(value)));
        first = false;
    }
    printf("\n");
}

static void print_deprecation(const json_t *v)
{
    if (!json_is_true(json_object_get(v, "deprecated")))
        return;
    const char *reason = json_string_value(json_object_get(v, "deprecation_reason"));
    printf("deprecated:  %s%s%s\n", shown(json_string_value(json_object_get(v, "deprecated_at"))),
           reason != NULL && reason[0] != '\0' ? ": " : "",
           reason != NULL && reason[0] != '\0' ? shown(reason) : "");
}

/* One VersionSummary (or Version) as lines. */
static void print_version(const char *model, const json_t *v)
{
    printf("%s@%" JSON_INTEGER_FORMAT "\n", shown(model),
           json_integer_value(json_object_get(v, "version")));
    printf("state:       %s\n", shown(json_string_value(json_object_get(v, "state"))));
    const char *pub = json_string_value(json_object_get(v, "published_at"));
    if (pub != NULL)
        printf("published:   %s\n", shown(pub));
    const char *digest = json_string_value(json_object_get(v, "digest"));
    if (digest != NULL)
        printf("digest:      %s\n", shown(digest));
    const char *desc = json_string_value(json_object_get(v, "description"));
    printf("description: %s\n", desc != NULL && desc[0] != '\0' ? shown(desc) : "-");
    print_tags("tags:        ", json_object_get(v, "tags"));
    print_deprecation(v);
    const json_t *files = json_object_get(v, "files");
    if (json_is_array(files))
        printf("files:       %zu\n", json_array_size(files));
}

/* ---------- model show | tag | describe ---------- */

static void model_usage(FILE *out)
{
    fprintf(out, "usage: tensorgate model show ORG/NAME[@REV]\n"
                 "       tensorgate model tag ORG/NAME[@REV] [KEY=VALUE...] [--remove KEY]...\n"
                 "       tensorgate model describe ORG/NAME[@REV] TEXT\n"
                 "\n"
                 "show: a model's description, tags, downloads, aliases and versions (deprecated\n"
                 "ones marked), or with @REV that version's description, tags and deprecation.\n"
                 "tag: sets each KEY to VALUE (an empty VALUE is allowed) and removes each\n"
                 "--remove KEY, on the model or, with @REV, on that version; other tags stay.\n"
                 "A key is [A-Za-z0-9][A-Za-z0-9._-]{0,63}, a value at most 256 bytes; at most 32\n"
                 "tags (409 too_many_tags changes nothing). describe: replaces the description\n"
                 "(\"\" clears it). tag and describe need a write token of ORG.\n\n");
    tg_remote_common_help(out);
}

typedef struct tag_args {
    const char *remove[MAX_TAG_ARGS];
    size_t removes;
} tag_args;

static int model_extra(int opt, const char *arg, void *ud)
{
    tag_args *t = ud;
    if (opt != OPT_REMOVE || t == NULL || arg == NULL || t->removes >= MAX_TAG_ARGS)
        return -1;
    t->remove[t->removes++] = arg;
    return 0;
}

static int model_show(const remote_opts *ro, tgc_client *c, const char *model, const char *rev,
                      bool with_rev)
{
    tgc_error e;
    json_t *j = NULL;
    int status = 0;
    if (with_rev) {
        tgc_resolved r;
        if (tgc_resolve(c, model, rev, &r, &e) != 0)
            return tg_remote_fail("model show", ro, &e);
        j = r.version_json;
        if (ro->json)
            tg_remote_print_json(j);
        else
            print_version(model, j);
        json_decref(j);
        return 0;
    }
    if (tgc_get_model(c, model, &j, &e) != 0)
        return tg_remote_fail("model show", ro, &e);
    if (ro->json) {
        tg_remote_print_json(j);
        json_decref(j);
        return 0;
    }
    const char *desc = json_string_value(json_object_get(j, "description"));
    printf("%s\n", shown(json_string_value(json_object_get(j, "name"))));
    printf("description: %s\n", desc != NULL && desc[0] != '\0' ? shown(desc) : "-");
    print_tags("tags:        ", json_object_get(j, "tags"));
    printf("downloads:   %" JSON_INTEGER_FORMAT "\n",
           json_integer_value(json_object_get(j, "downloads")));
    const char *alias;
    json_t *num;
    json_object_foreach(json_object_get(j, "aliases"), alias, num)
    {
        printf("alias:       %s -> %" JSON_INTEGER_FORMAT "\n", shown(alias),
               json_integer_value(num));
    }
    printf("%-8s %-10s %-21s %s\n", "VERSION", "STATE", "PUBLISHED", "NOTE");
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(j, "versions"), i, v)
    {
        const char *pub = json_string_value(json_object_get(v, "published_at"));
        const char *reason = json_string_value(json_object_get(v, "deprecation_reason"));
        bool deprecated = json_is_true(json_object_get(v, "deprecated"));
        printf("%-8" JSON_INTEGER_FORMAT " %-10s %-21s %s%s%s\n",
               json_integer_value(json_object_get(v, "version")),
               shown(json_string_value(json_object_get(v, "state"))), shown(pub),
               deprecated ? "deprecated" : "",
               deprecated && reason != NULL && reason[0] != '\0' ? ": " : "",
               deprecated && reason != NULL ? shown(reason) : "");
    }
    json_decref(j);
    return status;
}

int tg_cmd_model(int argc, char **argv)
{
    static const struct option extra[] = {
        {"remove", required_argument, NULL, OPT_REMOVE},
        {NULL, 0, NULL, 0},
    };
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        model_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    const char *sub = argv[1];
    char cmd[32];
    snprintf(cmd, sizeof cmd, "model %s", sub);
    bool show = strcmp(sub, "show") == 0, tag = strcmp(sub, "tag") == 0,
         describe = strcmp(sub, "describe") == 0;
    if (!show && !tag && !describe)
        return tg_remote_usage_error("model", "the subcommands are show, tag and describe",
                                     model_usage);
    remote_opts ro = {0};
    tag_args t = {0};
    int rc = tg_remote_parse(cmd, argc - 1, argv + 1, &ro, tag ? extra : NULL, model_usage,
                             tag ? model_extra : NULL, &t);
    if (rc >= 0)
        return rc;
    int n = argc - 1 - optind;
    char **args = argv + 1 + optind;
    if (n < 1)
        return tg_remote_usage_error(cmd, "expected ORG/NAME[@REV]", model_usage);
    if ((show && n != 1) || (describe && n != 2))
        return tg_remote_usage_error(cmd,
                                     show ? "expected one ORG/NAME[@REV]"
                                          : "expected ORG/NAME[@REV] and one TEXT (quote it)",
                                     model_usage);
    char model[160], rev[160];
    if (parse_ref(cmd, args[0], false, model, rev, model_usage) != 0)
        return EXIT_USAGE;
    bool with_rev = strchr(args[0], '@') != NULL;
    json_t *patch = NULL;
    if (tag) {
        if (n - 1 + t.removes == 0)
            return tg_remote_usage_error(cmd, "expected KEY=VALUE or --remove KEY", model_usage);
        if (n - 1 > MAX_TAG_ARGS)
            return tg_remote_usage_error(cmd, "too many KEY=VALUE", model_usage);
        json_t *tags = json_object();
        patch = json_pack("{s:o}", "tags", tags);
        if (patch == NULL) {
            fprintf(stderr, "tensorgate %s: out of memory\n", cmd);
            return EXIT_USAGE;
        }
        for (int i = 1; i < n; i++) {
            const char *eq = strchr(args[i], '=');
            char key[80];
            if (eq == NULL || eq == args[i] || (size_t)(eq - args[i]) >= sizeof key) {
                json_decref(patch);
                char msg[160];
                snprintf(msg, sizeof msg, "'%.60s' is not KEY=VALUE", args[i]);
                return tg_remote_usage_error(cmd, msg, model_usage);
            }
            memcpy(key, args[i], (size_t)(eq - args[i]));
            key[eq - args[i]] = '\0';
            json_t *value = json_string(eq + 1);
            if (value == NULL || json_object_set_new(tags, key, value) != 0) {
                json_decref(patch);
                return tg_remote_usage_error(cmd, "a tag key or value is not UTF-8 text",
                                             model_usage);
            }
        }
        for (size_t i = 0; i < t.removes; i++) {
            if (json_object_get(tags, t.remove[i]) != NULL ||
                json_object_set_new(tags, t.remove[i], json_null()) != 0) {
                json_decref(patch);
                return tg_remote_usage_error(
                    cmd, "a --remove KEY is also set, or is not UTF-8 text", model_usage);
            }
        }
    } else if (describe) {
        patch = json_pack("{s:s}", "description", args[1]);
        if (patch == NULL)
            return tg_remote_usage_error(cmd, "TEXT is not UTF-8 text", model_usage);
    }
    int status = 0;
    tgc_client *c = tg_remote_connect(cmd, &ro, &status);
    if (c == NULL) {
        json_decref(patch);
        return status;
    }
    if (show) {
        status = model_show(&ro, c, model, rev, with_rev);
    } else {
        json_t *j = NULL;
        tgc_error e;
        if (tgc_patch_metadata(c, model, with_rev ? rev : NULL, patch, &j, &e) != 0) {
            status = tg_remote_fail(cmd, &ro, &e);
        } else if (ro.json) {
            tg_remote_print_json(j);
        } else if (with_rev) {
            print_version(model, j);
        } else {
            const char *desc = json_string_value(json_object_get(j, "description"));
            printf("%s\n", shown(json_string_value(json_object_get(j, "name"))));
            printf("description: %s\n", desc != NULL && desc[0] != '\0' ? shown(desc) : "-");
            print_tags("tags:        ", json_object_get(j, "tags"));
        }
        json_decref(j);
    }
    json_decref(patch);
    tgc_close(c);
    return status;
}

/* ---------- models (search) ---------- */

static void models_usage(FILE *out)
{
    fprintf(
        out,
        "usage: tensorgate models [--search TEXT] [--tag KEY[=VALUE]]... [--sort name|downloads]\n"
        "                         [--limit N]\n"
        "\n"
        "The models matching every filter: --search TEXT in the name, the description or\n"
        "a tag value (ASCII letters in any case); --tag KEY (has the tag) or KEY=VALUE\n"
        "(exactly that value), up to 8, all must match. Ordered by name, or with --sort\n"
        "downloads most downloaded first. Prints name, downloads, tags, description.\n\n");
    tg_remote_common_help(out);
}

typedef struct models_args {
    tgc_model_query q;
    const char *tags[MAX_TAG_FILTERS + 1];
    bool bad;
} models_args;

static int models_extra(int opt, const char *arg, void *ud)
{
    models_args *a = ud;
    switch (opt) {
    case OPT_SEARCH:
        a->q.text = arg;
        return 0;
    case OPT_TAG:
        if (a->q.tag_count >= MAX_TAG_FILTERS || arg[0] == '\0')
            return -1;
        a->tags[a->q.tag_count++] = arg;
        return 0;
    case OPT_SORT:
        if (strcmp(arg, "name") != 0 && strcmp(arg, "downloads") != 0)
            return -1;
        a->q.sort = arg;
        return 0;
    case OPT_LIMIT: {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(arg, &end, 10);
        if (errno != 0 || end == arg || *end != '\0' || v == 0 || arg[0] == '-')
            return -1;
        a->q.limit = v;
        return 0;
    }
    default:
        return -1;
    }
}

int tg_cmd_models(int argc, char **argv)
{
    static const struct option extra[] = {
        {"search", required_argument, NULL, OPT_SEARCH},
        {"tag", required_argument, NULL, OPT_TAG},
        {"sort", required_argument, NULL, OPT_SORT},
        {"limit", required_argument, NULL, OPT_LIMIT},
        {NULL, 0, NULL, 0},
    };
    remote_opts ro = {0};
    models_args a = {0};
    int rc = tg_remote_parse("models", argc, argv, &ro, extra, models_usage, models_extra, &a);
    if (rc >= 0)
        return rc;
    if (optind != argc)
        return tg_remote_usage_error("models", "no operand expected (use --search TEXT)",
                                     models_usage);
    a.q.tags = a.tags;
    int status = 0;
    tgc_client *c = tg_remote_connect("models", &ro, &status);
    if (c == NULL)
        return status;
    json_t *j = NULL;
    tgc_error e;
    if (tgc_search_models(c, &a.q, &j, &e) != 0) {
        status = tg_remote_fail("models", &ro, &e);
    } else if (ro.json) {
        tg_remote_print_json(j);
    } else {
        size_t i;
        json_t *m;
        json_array_foreach(j, i, m)
        {
            char tags[512] = "";
            size_t used = 0;
            const char *key;
            json_t *value;
            json_object_foreach(json_object_get(m, "tags"), key, value)
            {
                int w = snprintf(tags + used, sizeof tags - used, "%s%s=%s", used ? "," : "",
                                 shown(key), shown(json_string_value(value)));
                if (w < 0 || (size_t)w >= sizeof tags - used)
                    break;
                used += (size_t)w;
            }
            const char *desc = json_string_value(json_object_get(m, "description"));
            printf("%-40s %8" JSON_INTEGER_FORMAT "  %s  %s\n",
                   shown(json_string_value(json_object_get(m, "name"))),
                   json_integer_value(json_object_get(m, "downloads")), used ? tags : "-",
                   desc ? shown(desc) : "");
        }
    }
    json_decref(j);
    tgc_close(c);
    return status;
}

/* ---------- version deprecate | undeprecate | delete; draft delete ---------- */

static void version_usage(FILE *out)
{
    fprintf(out, "usage: tensorgate version deprecate ORG/NAME@REV [--reason TEXT]\n"
                 "       tensorgate version undeprecate ORG/NAME@REV\n"
                 "       tensorgate version delete ORG/NAME@REV\n"
                 "       tensorgate draft delete ORG/NAME@N\n"
                 "       tensorgate version            (alone: print tensorgate's version)\n"
                 "\n"
                 "deprecate: marks a published version deprecated (with --reason, shown to\n"
                 "readers): it stays readable by number and digest, latest skips it. undeprecate\n"
                 "takes the mark away. delete: a draft goes with its files (a write token); a\n"
                 "published version (an admin token of ORG) becomes a tombstone answering 410\n"
                 "version_deleted, and the aliases that named it go. draft delete deletes N only\n"
                 "when it is still a draft. REV is a number, an alias or a digest.\n\n");
    tg_remote_common_help(out);
}

static int version_extra(int opt, const char *arg, void *ud)
{
    if (opt != OPT_REASON || ud == NULL)
        return -1;
    *(const char **)ud = arg;
    return 0;
}

/* tensorgate version SUB ... and tensorgate draft delete ... (draft true) */
static int version_command(int argc, char **argv, bool draft)
{
    static const struct option extra[] = {
        {"reason", required_argument, NULL, OPT_REASON},
        {NULL, 0, NULL, 0},
    };
    const char *top = draft ? "draft" : "version";
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        version_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    const char *sub = argv[1];
    bool deprecate = !draft && strcmp(sub, "deprecate") == 0,
         undeprecate = !draft && strcmp(sub, "undeprecate") == 0, del = strcmp(sub, "delete") == 0;
    if (!deprecate && !undeprecate && !del)
        return tg_remote_usage_error(top,
                                     draft ? "the subcommand is delete"
                                           : "the subcommands are deprecate, undeprecate, delete",
                                     version_usage);
    char cmd[40];
    snprintf(cmd, sizeof cmd, "%s %s", top, sub);
    remote_opts ro = {0};
    const char *reason = NULL;
    int rc = tg_remote_parse(cmd, argc - 1, argv + 1, &ro, deprecate ? extra : NULL, version_usage,
                             deprecate ? version_extra : NULL, &reason);
    if (rc >= 0)
        return rc;
    if (argc - 1 - optind != 1)
        return tg_remote_usage_error(cmd, "expected one ORG/NAME@REV", version_usage);
    char model[160], rev[160];
    if (parse_ref(cmd, argv[1 + optind], true, model, rev, version_usage) != 0)
        return EXIT_USAGE;
    if (draft && strspn(rev, "0123456789") != strlen(rev))
        return tg_remote_usage_error(cmd, "a draft is named by its number: ORG/NAME@N",
                                     version_usage);
    int status = 0;
    tgc_client *c = tg_remote_connect(cmd, &ro, &status);
    if (c == NULL)
        return status;
    tgc_error e;
    json_t *j = NULL;
    if (draft) {
        tgc_resolved r;
        if (tgc_resolve(c, model, rev, &r, &e) != 0) {
            status = tg_remote_fail(cmd, &ro, &e);
        } else {
            bool is_draft = strcmp(r.state, "draft") == 0;
            json_decref(r.version_json);
            if (!is_draft) {
                fprintf(stderr,
                        "tensorgate %s: %s@%s is published, not a draft: nothing deleted "
                        "(tensorgate version delete deletes a published version)\n",
                        cmd, model, rev);
                status = 1;
            }
        }
        if (status != 0) {
            tgc_close(c);
            return status;
        }
    }
    if (deprecate || undeprecate) {
        rc = deprecate ? tgc_deprecate(c, model, rev, reason, &j, &e)
                       : tgc_undeprecate(c, model, rev, &j, &e);
        if (rc != 0)
            status = tg_remote_fail(cmd, &ro, &e);
        else if (ro.json)
            tg_remote_print_json(j);
        else
            print_version(model, j);
    } else if (tgc_delete_version(c, model, rev, &e) != 0) {
        status = tg_remote_fail(cmd, &ro, &e);
    } else if (ro.json) {
        json_t *done = json_pack("{s:s,s:s,s:b}", "model", model, "rev", rev, "deleted", 1);
        tg_remote_print_json(done);
        json_decref(done);
    } else {
        printf("%s@%s: deleted\n", model, shown(rev));
    }
    json_decref(j);
    tgc_close(c);
    return status;
}

int tg_cmd_version(int argc, char **argv)
{
    return version_command(argc, argv, false);
}

int tg_cmd_draft(int argc, char **argv)
{
    return version_command(argc, argv, true);
}

/* ---------- alias set | delete ---------- */

static void alias_usage(FILE *out)
{
    fprintf(out, "usage: tensorgate alias set ORG/NAME ALIAS VERSION\n"
                 "       tensorgate alias delete ORG/NAME ALIAS\n"
                 "\n"
                 "set: points ALIAS at a published VERSION (a number); delete: removes ALIAS (the\n"
                 "version stays). latest, main and HEAD are reserved. A write token of ORG.\n\n");
    tg_remote_common_help(out);
}

int tg_cmd_alias(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        alias_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    bool set = strcmp(argv[1], "set") == 0;
    if (!set && strcmp(argv[1], "delete") != 0)
        return tg_remote_usage_error("alias", "the subcommands are set and delete", alias_usage);
    const char *cmd = set ? "alias set" : "alias delete";
    remote_opts ro = {0};
    int rc = tg_remote_parse(cmd, argc - 1, argv + 1, &ro, NULL, alias_usage, NULL, NULL);
    if (rc >= 0)
        return rc;
    char **args = argv + 1 + optind;
    if (argc - 1 - optind != (set ? 3 : 2))
        return tg_remote_usage_error(
            cmd, set ? "expected ORG/NAME ALIAS VERSION" : "expected ORG/NAME ALIAS", alias_usage);
    char model[160], rev[160];
    if (strchr(args[0], '@') != NULL) {
        return tg_remote_usage_error(cmd, "expected ORG/NAME without @REV", alias_usage);
    }
    if (parse_ref(cmd, args[0], false, model, rev, alias_usage) != 0)
        return EXIT_USAGE;
    if (strchr(args[1], '/') != NULL || args[1][0] == '\0')
        return tg_remote_usage_error(cmd, "an ALIAS is [A-Za-z0-9][A-Za-z0-9._-]{0,63}",
                                     alias_usage);
    long version = 0;
    if (set) {
        char *end;
        errno = 0;
        version = strtol(args[2], &end, 10);
        if (errno != 0 || end == args[2] || *end != '\0' || version < 1 || version > INT32_MAX)
            return tg_remote_usage_error(cmd, "VERSION is a version number (1, 2, ...)",
                                         alias_usage);
    }
    int status = 0;
    tgc_client *c = tg_remote_connect(cmd, &ro, &status);
    if (c == NULL)
        return status;
    tgc_error e;
    rc = set ? tgc_set_alias(c, model, args[1], (int)version, &e)
             : tgc_delete_alias(c, model, args[1], &e);
    if (rc != 0) {
        status = tg_remote_fail(cmd, &ro, &e);
    } else if (ro.json) {
        json_t *done =
            set ? json_pack("{s:s,s:s,s:i}", "model", model, "alias", args[1], "version",
                            (int)version)
                : json_pack("{s:s,s:s,s:b}", "model", model, "alias", args[1], "deleted", 1);
        tg_remote_print_json(done);
        json_decref(done);
    } else if (set) {
        printf("%s: alias %s -> %ld\n", model, shown(args[1]), version);
    } else {
        printf("%s: alias %s deleted\n", model, shown(args[1]));
    }
    tgc_close(c);
    return status;
}

/* ---------- namespace show | quota (policy: cmd/remote.c) ---------- */

static void namespace_usage(FILE *out)
{
    fprintf(out,
            "usage: tensorgate namespace show ORG\n"
            "       tensorgate namespace quota ORG [--set SIZE | --default]\n"
            "       tensorgate namespace policy ORG [--allow-code yes|no]\n"
            "\n"
            "show: ORG's storage usage (its distinct blobs, drafts included), the quota in\n"
            "force and its code policy. quota: without an option the same usage and quota;\n"
            "--set SIZE sets ORG's own quota (bytes, or with a K, M, G or T suffix: powers of\n"
            "1024; 0 means no bound); --default goes back to the server's --namespace-quota.\n"
            "Setting needs an admin token of ORG or of every org. `tensorgate namespace policy\n"
            "--help` describes policy.\n\n");
    tg_remote_common_help(out);
}

typedef struct quota_args {
    const char *set;
    bool use_default;
} quota_args;

static int quota_extra(int opt, const char *arg, void *ud)
{
    quota_args *q = ud;
    if (opt == OPT_SET && arg != NULL) {
        q->set = arg;
        return 0;
    }
    if (opt == OPT_DEFAULT) {
        q->use_default = true;
        return 0;
    }
    return -1;
}

/* "10G", "512M", "1048576", "0": bytes; -1 for anything else */
static int parse_size(const char *text, uint64_t *out)
{
    char *end;
    errno = 0;
    if (text[0] < '0' || text[0] > '9')
        return -1;
    unsigned long long v = strtoull(text, &end, 10);
    unsigned shift = 0;
    switch (*end) {
    case 'K':
    case 'k':
        shift = 10;
        break;
    case 'M':
        shift = 20;
        break;
    case 'G':
        shift = 30;
        break;
    case 'T':
        shift = 40;
        break;
    default:
        break;
    }
    if (shift != 0) {
        end++;
        if (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0)
            end += strlen(end);
    }
    if (errno != 0 || end == text || *end != '\0' || v > (uint64_t)INT64_MAX >> shift)
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

static void print_namespace(const json_t *j, bool policy)
{
    char usage[32], quota[32];
    uint64_t used = (uint64_t)json_integer_value(json_object_get(j, "usage_bytes"));
    tg_remote_human_size(used, usage, sizeof usage);
    const json_t *q = json_object_get(j, "quota_bytes");
    const char *name = shown(json_string_value(json_object_get(j, "namespace")));
    printf("%s: usage %s (%" PRIu64 " bytes)\n", name, usage, used);
    bool by_default = json_is_true(json_object_get(j, "quota_default"));
    if (json_is_integer(q) && json_integer_value(q) > 0) {
        tg_remote_human_size((uint64_t)json_integer_value(q), quota, sizeof quota);
        printf("%s: quota %s (%" JSON_INTEGER_FORMAT " bytes)%s\n", name, quota,
               json_integer_value(q), by_default ? ", the server's default" : "");
    } else {
        printf("%s: quota none%s\n", name, by_default ? " (the server's default)" : "");
    }
    if (policy)
        printf("%s: code %s\n", name,
               json_is_true(json_object_get(j, "allow_code")) ? "allowed" : "refused");
}

int tg_cmd_namespace_all(int argc, char **argv)
{
    static const struct option extra[] = {
        {"set", required_argument, NULL, OPT_SET},
        {"default", no_argument, NULL, OPT_DEFAULT},
        {NULL, 0, NULL, 0},
    };
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        namespace_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    if (strcmp(argv[1], "policy") == 0)
        return tg_cmd_namespace(argc, argv);
    bool show = strcmp(argv[1], "show") == 0;
    if (!show && strcmp(argv[1], "quota") != 0)
        return tg_remote_usage_error("namespace", "the subcommands are show, quota and policy",
                                     namespace_usage);
    const char *cmd = show ? "namespace show" : "namespace quota";
    remote_opts ro = {0};
    quota_args q = {0};
    int rc = tg_remote_parse(cmd, argc - 1, argv + 1, &ro, show ? NULL : extra, namespace_usage,
                             show ? NULL : quota_extra, &q);
    if (rc >= 0)
        return rc;
    if (argc - 1 - optind != 1)
        return tg_remote_usage_error(cmd, "expected one ORG", namespace_usage);
    const char *org = argv[1 + optind];
    uint64_t bytes = 0;
    if (q.set != NULL && q.use_default)
        return tg_remote_usage_error(cmd, "--set and --default exclude each other",
                                     namespace_usage);
    if (q.set != NULL && parse_size(q.set, &bytes) != 0)
        return tg_remote_usage_error(cmd, "--set takes a size: 1073741824, 512M, 10G, 0 (no bound)",
                                     namespace_usage);
    int status = 0;
    tgc_client *c = tg_remote_connect(cmd, &ro, &status);
    if (c == NULL)
        return status;
    json_t *j = NULL;
    tgc_error e;
    if (q.set != NULL || q.use_default)
        rc = tgc_set_namespace_quota(c, org, bytes, q.use_default, &j, &e);
    else
        rc = tgc_get_namespace(c, org, &j, &e);
    if (rc != 0)
        status = tg_remote_fail(cmd, &ro, &e);
    else if (ro.json)
        tg_remote_print_json(j);
    else
        print_namespace(j, show);
    json_decref(j);
    tgc_close(c);
    return status;
}
