/* tensorgate pull ORG/NAME[@REV] --tensors SEL[,SEL...] [--slice SPEC] [--dtype DT]
 * [--file PATH] -o FILE: many tensors of a version as one safetensors file, in one
 * request (the bundle route, through tgc_bundle_to_file). cmd/remote.c's pull hands
 * its arguments here when they hold --tensors. Exit statuses as the other remote
 * commands (cmd/remote.c): 0 done, 1 refused, 2 usage or a local file, 3 the server. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "tensorgate_client.h"

#define BUNDLE_EXIT_REFUSED 1
#define BUNDLE_EXIT_USAGE 2
#define BUNDLE_EXIT_SERVER 3
#define BUNDLE_SELECTORS_MAX 65536

static void bundle_usage(FILE *out)
{
    fprintf(out, "usage: tensorgate pull ORG/NAME[@REV] --tensors SEL[,SEL...] [--tensors ...]\n"
                 "                       [--slice SPEC] [--dtype DT] [--file PATH] -o FILE\n"
                 "                       [--url URL] [--token TOKEN] [--json]\n"
                 "\n"
                 "Fetches the selected tensors of a version (REV default latest) in one request\n"
                 "and writes them as one safetensors file FILE (written as FILE.part, renamed\n"
                 "when complete). SEL is a tensor name or a glob (* and ?), optionally with its\n"
                 "own slice, NAME[SPEC] (NumPy basic indexing: 0:4,::2); a comma inside [...]\n"
                 "belongs to the slice. --slice gives the slice of every selector without one;\n"
                 "--dtype converts every floating tensor (F64, F32, F16, BF16, F8_E4M3, F8_E5M2);\n"
                 "--file limits the selection to one file of the version. The tensors come in\n"
                 "the order asked (a glob's in file order), each once.\n");
}

typedef struct selectors {
    char **items;
    size_t count, cap;
} selectors;

static void selectors_free(selectors *s)
{
    for (size_t i = 0; i < s->count; i++)
        free(s->items[i]);
    free(s->items);
}

/* Adds text[0, len) (with slice appended when it has none); false when out of memory
 * or past the bound. */
static bool selectors_add(selectors *s, const char *text, size_t len, const char *slice)
{
    if (s->count + 1 >= BUNDLE_SELECTORS_MAX)
        return false;
    if (s->count + 1 >= s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        char **grown = realloc(s->items, cap * sizeof *grown);
        if (grown == NULL)
            return false;
        s->items = grown;
        s->cap = cap;
    }
    bool own_slice = len > 0 && text[len - 1] == ']';
    size_t extra = slice != NULL && !own_slice ? strlen(slice) + 2 : 0;
    char *item = malloc(len + extra + 1);
    if (item == NULL)
        return false;
    memcpy(item, text, len);
    if (extra > 0)
        snprintf(item + len, extra + 1, "[%s]", slice);
    item[len + extra] = '\0';
    s->items[s->count++] = item;
    s->items[s->count] = NULL;
    return true;
}

/* Splits a --tensors value at the commas outside [...]. */
static bool selectors_add_list(selectors *s, const char *text, const char *slice)
{
    size_t start = 0, depth = 0;
    for (size_t i = 0;; i++) {
        char c = text[i];
        if (c == '[')
            depth++;
        else if (c == ']' && depth > 0)
            depth--;
        if (c == '\0' || (c == ',' && depth == 0)) {
            if (!selectors_add(s, text + start, i - start, slice))
                return false;
            if (c == '\0')
                return true;
            start = i + 1;
        }
    }
}

static int bundle_exit(const tgc_error *e)
{
    if (e->status >= 500 || strcmp(e->reason, TGC_REASON_CONNECTION) == 0 ||
        strcmp(e->reason, TGC_REASON_BAD_ANSWER) == 0 ||
        strcmp(e->reason, TGC_REASON_TOO_LARGE) == 0 || strcmp(e->reason, TGC_REASON_STALLED) == 0)
        return BUNDLE_EXIT_SERVER;
    if (e->status >= 400)
        return BUNDLE_EXIT_REFUSED;
    return BUNDLE_EXIT_USAGE;
}

/* The text shown on a terminal: control bytes as '?' (a server chooses the detail). */
static void print_clean(FILE *out, const char *s)
{
    for (; *s; s++)
        fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, out);
}

enum { B_URL = 1000, B_TOKEN, B_JSON, B_TENSORS, B_SLICE, B_DTYPE, B_FILE };

int tg_cmd_pull_bundle(int argc, char **argv)
{
    static const struct option options[] = {
        {"url", required_argument, NULL, B_URL},
        {"token", required_argument, NULL, B_TOKEN},
        {"json", no_argument, NULL, B_JSON},
        {"help", no_argument, NULL, 'h'},
        {"tensors", required_argument, NULL, B_TENSORS},
        {"slice", required_argument, NULL, B_SLICE},
        {"dtype", required_argument, NULL, B_DTYPE},
        {"file", required_argument, NULL, B_FILE},
        {"output", required_argument, NULL, 'o'},
        {NULL, 0, NULL, 0},
    };
    const char *url = NULL, *token = NULL, *slice = NULL, *dtype = NULL, *file = NULL,
               *output = NULL;
    const char *lists[64];
    size_t n_lists = 0;
    bool json = false;
    optind = 1;
    opterr = 0;
    for (;;) {
        int opt = getopt_long(argc, argv, "ho:", options, NULL);
        if (opt == -1)
            break;
        switch (opt) {
        case B_URL:
            url = optarg;
            break;
        case B_TOKEN:
            token = optarg;
            break;
        case B_JSON:
            json = true;
            break;
        case B_TENSORS:
            if (n_lists == sizeof lists / sizeof lists[0]) {
                fprintf(stderr, "tensorgate pull: at most 64 --tensors\n");
                return BUNDLE_EXIT_USAGE;
            }
            lists[n_lists++] = optarg;
            break;
        case B_SLICE:
            slice = optarg;
            break;
        case B_DTYPE:
            dtype = optarg;
            break;
        case B_FILE:
            file = optarg;
            break;
        case 'o':
            output = optarg;
            break;
        case 'h':
            bundle_usage(stdout);
            return 0;
        default:
            fprintf(stderr, "tensorgate pull: unknown option with --tensors\n");
            bundle_usage(stderr);
            return BUNDLE_EXIT_USAGE;
        }
    }
    if (argc - optind != 1 || output == NULL || n_lists == 0) {
        fprintf(stderr, "tensorgate pull: --tensors takes ORG/NAME[@REV] and -o FILE\n");
        bundle_usage(stderr);
        return BUNDLE_EXIT_USAGE;
    }
    char model[160], rev[160];
    tgc_error e;
    if (tgc_parse_ref(argv[optind], model, sizeof model, rev, sizeof rev, &e) != 0) {
        fprintf(stderr, "tensorgate pull: %s\n", e.detail);
        return BUNDLE_EXIT_USAGE;
    }
    selectors sel = {0};
    for (size_t i = 0; i < n_lists; i++)
        if (!selectors_add_list(&sel, lists[i], slice)) {
            fprintf(stderr, "tensorgate pull: too many selectors (or out of memory)\n");
            selectors_free(&sel);
            return BUNDLE_EXIT_USAGE;
        }
    if (url == NULL)
        url = getenv("TENSORGATE_URL");
    if (url == NULL || url[0] == '\0')
        url = "http://127.0.0.1:8080";
    if (token == NULL)
        token = getenv("TENSORGATE_TOKEN");
    tgc_options o = {.base_url = url, .token = token};
    const char *retries = getenv("TENSORGATE_RETRIES");
    if (retries != NULL && retries[0] >= '0' && retries[0] <= '9')
        o.max_retries = (unsigned)strtoul(retries, NULL, 10);
    int status = 0;
    tgc_client *c = tgc_connect(&o, &e);
    uint64_t bytes = 0;
    tgc_bundle_request req = {(const char *const *)sel.items, dtype, file};
    if (c == NULL || tgc_bundle_to_file(c, model, rev, &req, output, &bytes, &e) != 0) {
        fprintf(stderr, "tensorgate pull: ");
        print_clean(stderr, e.reason);
        fprintf(stderr, ": ");
        print_clean(stderr, e.detail);
        fprintf(stderr, "\n");
        status = bundle_exit(&e);
    } else if (json) {
        json_t *j = json_pack("{s:s, s:I, s:I}", "file", output, "bytes", (json_int_t)bytes,
                              "selectors", (json_int_t)sel.count);
        char *text = j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        if (text != NULL)
            puts(text);
        free(text);
        json_decref(j);
    } else {
        printf("%s: %llu bytes\n", output, (unsigned long long)bytes);
    }
    tgc_close(c);
    selectors_free(&sel);
    return status;
}
