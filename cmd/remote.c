/* The commands that talk to a tensorgate server through libtgclient
 * (clients/c/tensorgate_client.h): push, pull, ls, header, tensor, scan, rejections. Each takes
 * --url and --token (else $TENSORGATE_URL, default http://127.0.0.1:8080, and
 * $TENSORGATE_TOKEN), --json (one JSON document per line on stdout) and --help.
 * Exit status (docs/MANUAL.md "The CLI"): 0 done; 1 the server refused (a 4xx answer, a
 * file refused by the gate, scan: the file is refused); 2 usage error or a local
 * file that cannot be read or written; 3 the server could not be reached or failed
 * (after the retries, or a 5xx, or an answer the client refuses: a body longer than
 * the request can return, a stall, an unsafe file name); 4 pull: a download's
 * SHA-256 differs. Every string a server sends is shown with its control characters
 * escaped (shown()); a file name holding one is refused before anything is written. */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "model_sig.h"
#include "remote_cli.h"
#include "sha256.h"
#include "tensorgate_client.h"

#define EXIT_REFUSED 1
#define EXIT_USAGE 2
#define EXIT_SERVER 3
#define EXIT_INTEGRITY 4
#define EXIT_SIGNATURE 5 /* pull --verify: the signature was refused */
#define MAX_INCLUDES 32
#define MAX_FILES 100000

static const char remote_common_help[] =
    "Common options:\n"
    "  --url URL       the server (default $TENSORGATE_URL, else http://127.0.0.1:8080)\n"
    "  --token TOKEN   sent as a bearer token (default $TENSORGATE_TOKEN)\n"
    "  --json          print JSON (one document per line) for scripts\n"
    "  --limit-rate BYTES  receive at most BYTES/s per transfer (K, M, G suffixes)\n"
    "  --stall-timeout SECONDS  a read or download that moves under 1 KiB in SECONDS\n"
    "                  fails (stalled), not retried (default 30; 1..3600)\n"
    "  --help          this text\n"
    "Exit status: 0 done; 1 the server refused (4xx, a gate refusal); 2 usage or local\n"
    "file error; 3 the server could not be reached or failed (5xx, after retries);\n"
    "4 a downloaded file's SHA-256 differs; 5 pull --verify refused the signature.\n";

/* The exit status an error stands for. */
static int exit_for(const tgc_error *e)
{
    if (strcmp(e->reason, TGC_REASON_SHA256) == 0)
        return EXIT_INTEGRITY;
    if (e->status >= 500 || strcmp(e->reason, TGC_REASON_CONNECTION) == 0 ||
        strcmp(e->reason, TGC_REASON_BAD_ANSWER) == 0 ||
        strcmp(e->reason, TGC_REASON_TOO_LARGE) == 0 ||
        strcmp(e->reason, TGC_REASON_STALLED) == 0 ||
        strcmp(e->reason, TGC_REASON_UNSAFE_NAME) == 0)
        return EXIT_SERVER;
    if (e->status >= 400)
        return EXIT_REFUSED;
    return EXIT_USAGE; /* usage, io, out of memory, buffer */
}

/* s as printed to a terminal: itself when it holds no control character (C0, DEL,
 * C1 as UTF-8 C2 80..9F), else a copy with each such byte as \xHH (from a ring of
 * buffers, enough for one printf). A server chooses these strings. */
static const char *shown(const char *s)
{
    static char ring[8][1024];
    static unsigned next;
    if (s == NULL)
        return "-";
    const unsigned char *p = (const unsigned char *)s;
    bool clean = true;
    for (size_t i = 0; p[i] && clean; i++)
        clean =
            p[i] >= 0x20 && p[i] != 0x7f && !(p[i] == 0xc2 && p[i + 1] >= 0x80 && p[i + 1] <= 0x9f);
    if (clean)
        return s;
    char *out = ring[next++ % 8];
    size_t used = 0;
    for (size_t i = 0; p[i] && used + 8 < sizeof ring[0]; i++) {
        bool c1 = p[i] == 0xc2 && p[i + 1] >= 0x80 && p[i + 1] <= 0x9f;
        if (p[i] < 0x20 || p[i] == 0x7f || c1) {
            used += (size_t)snprintf(out + used, sizeof ring[0] - used, "\\x%02x", p[i + c1]);
            i += c1;
        } else {
            out[used++] = (char)p[i];
        }
    }
    out[used] = '\0';
    return out;
}

static json_t *error_json(const tgc_error *e)
{
    json_t *j = json_pack("{s:I,s:s,s:s}", "status", (json_int_t)e->status, "reason", e->reason,
                          "detail", e->detail);
    if (j != NULL && e->format[0] != '\0')
        json_object_set_new(j, "format", json_string(e->format));
    return j;
}

static void print_json_line(json_t *j)
{
    if (j == NULL)
        return;
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (s != NULL) {
        puts(s);
        free(s);
    }
    fflush(stdout);
}

/* Reports a failed call: a line on stderr, and {"error":...} on stdout with --json.
 * Returns the exit status. */
static int fail(const char *cmd, const remote_opts *ro, const tgc_error *e)
{
    fprintf(stderr, "tensorgate %s: %s: %s\n", cmd, e->reason, e->detail);
    if (ro->json) {
        json_t *j = json_pack("{s:o}", "error", error_json(e));
        print_json_line(j);
        json_decref(j);
    }
    return exit_for(e);
}

static int usage_error(const char *cmd, const char *text, void (*usage)(FILE *))
{
    fprintf(stderr, "tensorgate %s: %s\n", cmd, text);
    usage(stderr);
    return EXIT_USAGE;
}

enum {
    OPT_URL = 1000,
    OPT_TOKEN,
    OPT_JSON,
    OPT_PUBLISH,
    OPT_ALIAS,
    OPT_INCLUDE,
    OPT_PARALLEL,
    OPT_SLICE,
    OPT_DTYPE,
    OPT_KIND,
    OPT_DESCRIPTION,
    OPT_LIMIT_RATE,
    OPT_STALL_TIMEOUT,
    OPT_TENSORS,
    OPT_FORMAT,
    OPT_REASON,
    OPT_NAMESPACE,
    OPT_SINCE,
    OPT_UNTIL,
    OPT_SHA256,
    OPT_LIMIT,
    OPT_JSONL,
    OPT_VERIFY,
    OPT_PUBLIC_KEY,
    OPT_ALLOW_CODE,
    OPT_DRAFT,
    OPT_RESUME,
    OPT_NO_FSYNC
};

/* Handles the common options; 1 when opt was one of them, -1 on a bad value. */
static int common_opt(int opt, const char *arg, remote_opts *ro)
{
    switch (opt) {
    case OPT_URL:
        ro->url = arg;
        return 1;
    case OPT_TOKEN:
        ro->token = arg;
        return 1;
    case OPT_JSON:
        ro->json = true;
        return 1;
    case OPT_LIMIT_RATE: {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(arg, &end, 10);
        unsigned shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
        if (shift)
            end++;
        if (errno != 0 || end == arg || *end != '\0' || v == 0 || v > (1ull << 40))
            return -1;
        ro->limit_rate = (uint64_t)v << shift;
        return 1;
    }
    case OPT_STALL_TIMEOUT: {
        char *end;
        errno = 0;
        long v = strtol(arg, &end, 10);
        if (errno != 0 || end == arg || *end != '\0' || v < 1 || v > 3600)
            return -1;
        ro->stall_timeout_s = v;
        return 1;
    }
    case OPT_PARALLEL: {
        char *end;
        errno = 0;
        unsigned long v = strtoul(arg, &end, 10);
        if (errno != 0 || *end != '\0' || v == 0 || v > 64)
            return -1;
        ro->parallel = (unsigned)v;
        return 1;
    }
    default:
        return 0;
    }
}

/* The common options, first in every command's table (COMMON_OPTION_COUNT of them). */
// clang-format off
#define COMMON_LONG_OPTIONS                                                                        \
    {"url", required_argument, NULL, OPT_URL},                                                     \
    {"token", required_argument, NULL, OPT_TOKEN},                                                 \
    {"json", no_argument, NULL, OPT_JSON},                                                         \
    {"help", no_argument, NULL, 'h'},                                                              \
    {"parallel", required_argument, NULL, OPT_PARALLEL},                                           \
    {"limit-rate", required_argument, NULL, OPT_LIMIT_RATE},                                       \
    {"stall-timeout", required_argument, NULL, OPT_STALL_TIMEOUT}
// clang-format on
#define COMMON_OPTION_COUNT 7

static tgc_client *remote_connect(const char *cmd, remote_opts *ro, int *status)
{
    if (ro->url == NULL)
        ro->url = getenv("TENSORGATE_URL");
    if (ro->url == NULL || ro->url[0] == '\0')
        ro->url = "http://127.0.0.1:8080";
    if (ro->token == NULL)
        ro->token = getenv("TENSORGATE_TOKEN");
    tgc_options o = {.base_url = ro->url,
                     .token = ro->token,
                     .parallel = ro->parallel,
                     .max_recv_speed = ro->limit_rate,
                     .stall_timeout_s = ro->stall_timeout_s,
                     .no_fsync = ro->no_fsync};
    const char *retries = getenv("TENSORGATE_RETRIES");
    if (retries != NULL && retries[0] >= '0' && retries[0] <= '9')
        o.max_retries = (unsigned)strtoul(retries, NULL, 10);
    /* TENSORGATE_HASH_INLINE=1: downloads hash in the transfer loop (tgc_options) */
    const char *inline_hash = getenv("TENSORGATE_HASH_INLINE");
    o.hash_inline = inline_hash != NULL && strcmp(inline_hash, "1") == 0;
    tgc_error e;
    tgc_client *c = tgc_connect(&o, &e);
    if (c == NULL)
        *status = fail(cmd, ro, &e);
    return c;
}

static void human_size(uint64_t bytes, char *out, size_t cap)
{
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    size_t u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(out, cap, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
}

/* ---------- progress ---------- */

typedef struct progress_state {
    const char *cmd;
    const remote_opts *ro;
    bool bar; /* a progress bar on stderr (a terminal, no --json) */
    const char *const *paths;
    size_t ok, refused, failed_other;
    int worst; /* the exit status of the worst failure */
} progress_state;

static void on_progress(void *user, uint64_t done, uint64_t total, size_t items_done,
                        size_t items_total)
{
    progress_state *p = user;
    if (!p->bar)
        return;
    int pct = total ? (int)(done * 100 / total) : 0;
    if (pct > 100)
        pct = 100;
    char bar[31];
    int fill = pct * 30 / 100;
    for (int i = 0; i < 30; i++)
        bar[i] = i < fill ? '#' : ' ';
    bar[30] = '\0';
    char d[32], t[32];
    human_size(done, d, sizeof d);
    human_size(total, t, sizeof t);
    fprintf(stderr, "\r\033[K[%s] %3d%%  %s / %s  %zu/%zu files", bar, pct, d, t, items_done,
            items_total);
    fflush(stderr);
}

static void note_failure(progress_state *p, const tgc_error *e)
{
    int code = exit_for(e);
    if (code == EXIT_REFUSED)
        p->refused++;
    else
        p->failed_other++;
    /* the worst: server trouble (3) and integrity (4) before refusals (1) */
    if (p->worst == 0 || (code != EXIT_REFUSED && p->worst == EXIT_REFUSED) ||
        (code > p->worst && p->worst != EXIT_REFUSED))
        p->worst = code;
}

static void clear_bar(const progress_state *p)
{
    if (p->bar) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
}

/* ---------- push ---------- */

static void push_usage(FILE *out)
{
    fprintf(out, "usage: tensorgate push DIR ORG/NAME [--publish] [--alias NAME] [--parallel N]\n"
                 "                       [--draft N | --resume] [--description TEXT] [--url URL]\n"
                 "                       [--token TOKEN] [--json]\n"
                 "\n"
                 "Creates the model if needed and a draft version, uploads every file under DIR\n"
                 "(hidden files left out; at most --parallel at once, default 4) through the\n"
                 "server's gate, prints each refusal with its reason, and publishes the draft\n"
                 "with --publish (and points --alias at it) when every file was accepted.\n"
                 "--draft N pushes into the existing draft N instead, --resume into the model's\n"
                 "newest draft (a new one when it has none): a file whose path, size and SHA-256\n"
                 "(hashed here) the draft already holds is not sent again. A push that did not\n"
                 "store every file prints the command that continues it.\n"
                 "A progress bar on a terminal, one line per file otherwise.\n\n");
    fputs(remote_common_help, out);
}

typedef struct file_list {
    char **rel; /* relative paths, sorted */
    size_t count, cap;
} file_list;

static void file_list_free(file_list *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->rel[i]);
    free(l->rel);
}

/* Recursion bounded by depth (32 levels). */
// NOLINTNEXTLINE(misc-no-recursion): a directory tree, depth bounded above
static int walk(const char *root, const char *rel, file_list *l, int depth)
{
    if (depth > 32)
        return -1;
    char dir[4096];
    if ((size_t)snprintf(dir, sizeof dir, "%s%s%s", root, rel[0] ? "/" : "", rel) >= sizeof dir)
        return -1;
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    int rc = 0;
    struct dirent *ent;
    while (rc == 0 && (ent = readdir(d)) != NULL) {
        if (ent->d_name[0] == '.')
            continue;
        char child[4096];
        if ((size_t)snprintf(child, sizeof child, "%s%s%s", rel, rel[0] ? "/" : "", ent->d_name) >=
            sizeof child) {
            rc = -1;
            break;
        }
        char full[8192];
        snprintf(full, sizeof full, "%s/%s", root, child);
        struct stat st;
        if (stat(full, &st) != 0) {
            rc = -1;
        } else if (S_ISDIR(st.st_mode)) {
            rc = walk(root, child, l, depth + 1);
        } else if (S_ISREG(st.st_mode)) {
            if (l->count == MAX_FILES) {
                rc = -1;
                break;
            }
            if (l->count == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 64;
                char **p = realloc(l->rel, cap * sizeof *p);
                if (p == NULL) {
                    rc = -1;
                    break;
                }
                l->rel = p;
                l->cap = cap;
            }
            l->rel[l->count] = strdup(child);
            if (l->rel[l->count] == NULL)
                rc = -1;
            else
                l->count++;
        }
    }
    closedir(d);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool already_there(const char *path, const char *sha, uint64_t size);

/* The draft to push into: --draft N (checked to be a draft of model), or with resume
 * the newest draft (0 when none). 0 or an exit status with *e set. */
static int find_draft(tgc_client *c, const char *model, int wanted, bool resume, int *version,
                      tgc_error *e)
{
    json_t *versions = NULL;
    if (tgc_list_versions(c, model, &versions, e) != 0)
        return -1;
    *version = 0;
    size_t i;
    json_t *v;
    json_array_foreach(versions, i, v)
    {
        int number = (int)json_integer_value(json_object_get(v, "version"));
        const char *state = json_string_value(json_object_get(v, "state"));
        bool draft = state != NULL && strcmp(state, "draft") == 0;
        if (wanted > 0 && number == wanted) {
            if (!draft) {
                *e = (tgc_error){409, "version_not_draft", "", ""};
                snprintf(e->detail, sizeof e->detail,
                         "version %d of %s is published, not a draft: push without --draft", number,
                         model);
                json_decref(versions);
                return -1;
            }
            *version = number;
        } else if (wanted == 0 && resume && draft && number > *version) {
            *version = number;
        }
    }
    json_decref(versions);
    if (wanted > 0 && *version == 0) {
        *e = (tgc_error){404, "version_not_found", "", ""};
        snprintf(e->detail, sizeof e->detail, "%s has no draft %d", model, wanted);
        return -1;
    }
    return 0;
}

/* Marks in skip[] the files of dir that draft version of model already holds with the
 * same path, size and SHA-256. Returns how many, or -1 with *e. */
static long mark_present(tgc_client *c, const char *model, int version, const char *dir,
                         const file_list *files, bool *skip, tgc_error *e)
{
    char rev[24];
    snprintf(rev, sizeof rev, "%d", version);
    json_t *listed = NULL;
    if (tgc_list_files(c, model, rev, &listed, e) != 0)
        return -1;
    long present = 0;
    for (size_t i = 0; i < files->count; i++) {
        size_t k;
        json_t *f;
        json_array_foreach(listed, k, f)
        {
            const char *path = json_string_value(json_object_get(f, "path"));
            const char *sha = json_string_value(json_object_get(f, "sha256"));
            if (path == NULL || sha == NULL || strcmp(path, files->rel[i]) != 0)
                continue;
            char full[8192];
            snprintf(full, sizeof full, "%s/%s", dir, files->rel[i]);
            if (already_there(full, sha,
                              (uint64_t)json_integer_value(json_object_get(f, "size")))) {
                skip[i] = true;
                present++;
            }
            break;
        }
    }
    json_decref(listed);
    return present;
}

static void push_item(void *user, size_t index, int rc, const tgc_error *e, const json_t *file)
{
    progress_state *p = user;
    const char *path = p->paths[index];
    clear_bar(p);
    if (rc == 0) {
        p->ok++;
        if (p->ro->json) {
            json_t *j = json_pack("{s:s,s:b,s:O}", "path", path, "ok", 1, "file", file);
            print_json_line(j);
            json_decref(j);
        } else {
            const char *sha = json_string_value(json_object_get(file, "sha256"));
            printf("uploaded %s (%" JSON_INTEGER_FORMAT " bytes, sha256 %s)\n", path,
                   json_integer_value(json_object_get(file, "size")), sha ? shown(sha) : "?");
            fflush(stdout);
        }
        return;
    }
    note_failure(p, e);
    if (p->ro->json) {
        json_t *j = json_pack("{s:s,s:b,s:o}", "path", path, "ok", 0, "error", error_json(e));
        print_json_line(j);
        json_decref(j);
    } else {
        printf("%s %s: %s: %s%s%s%s\n", e->status >= 400 && e->status < 500 ? "refused" : "failed",
               path, e->reason, e->detail, e->format[0] ? " (format " : "", e->format,
               e->format[0] ? ")" : "");
        fflush(stdout);
    }
}

int tg_cmd_push(int argc, char **argv)
{
    static const struct option options[] = {
        COMMON_LONG_OPTIONS,
        {"publish", no_argument, NULL, OPT_PUBLISH},
        {"alias", required_argument, NULL, OPT_ALIAS},
        {"description", required_argument, NULL, OPT_DESCRIPTION},
        {"draft", required_argument, NULL, OPT_DRAFT},
        {"resume", no_argument, NULL, OPT_RESUME},
        {NULL, 0, NULL, 0},
    };
    remote_opts ro = {0};
    bool publish = false, resume = false;
    int wanted_draft = 0;
    const char *alias = NULL, *description = NULL;
    optind = 1;
    opterr = 0;
    for (;;) {
        int opt = getopt_long(argc, argv, "h", options, NULL);
        if (opt == -1)
            break;
        int k = common_opt(opt, optarg, &ro);
        if (k < 0)
            return usage_error(
                "push",
                "--parallel takes 1..64, --limit-rate a byte count, --stall-timeout 1..3600",
                push_usage);
        if (k > 0)
            continue;
        if (opt == 'h') {
            push_usage(stdout);
            return 0;
        } else if (opt == OPT_PUBLISH) {
            publish = true;
        } else if (opt == OPT_ALIAS) {
            alias = optarg;
        } else if (opt == OPT_DESCRIPTION) {
            description = optarg;
        } else if (opt == OPT_DRAFT) {
            char *end = NULL;
            long n = strtol(optarg, &end, 10);
            if (end == optarg || *end != '\0' || n < 1 || n > INT32_MAX)
                return usage_error("push", "--draft takes a version number", push_usage);
            wanted_draft = (int)n;
        } else if (opt == OPT_RESUME) {
            resume = true;
        } else {
            return usage_error("push", "unknown option", push_usage);
        }
    }
    if (argc - optind != 2)
        return usage_error("push", "expected DIR and ORG/NAME", push_usage);
    if (alias != NULL && !publish)
        return usage_error("push", "--alias needs --publish", push_usage);
    if (resume && wanted_draft > 0)
        return usage_error("push", "--draft and --resume exclude each other", push_usage);
    const char *dir = argv[optind];
    char model[160], rev[160];
    tgc_error e;
    if (tgc_parse_ref(argv[optind + 1], model, sizeof model, rev, sizeof rev, &e) != 0 ||
        strchr(argv[optind + 1], '@') != NULL)
        return usage_error("push", "expected ORG/NAME (no @rev: push makes a new version)",
                           push_usage);
    file_list files = {0};
    if (walk(dir, "", &files, 0) != 0) {
        fprintf(stderr, "tensorgate push: cannot read the directory %s: %s\n", dir,
                strerror(errno));
        file_list_free(&files);
        return EXIT_USAGE;
    }
    if (files.count == 0) {
        fprintf(stderr, "tensorgate push: %s holds no files\n", dir);
        file_list_free(&files);
        return EXIT_USAGE;
    }
    qsort(files.rel, files.count, sizeof *files.rel, cmp_str);

    int status = 0;
    tgc_client *c = remote_connect("push", &ro, &status);
    if (c == NULL) {
        file_list_free(&files);
        return status;
    }
    bool existed = false;
    int version = 0;
    tgc_batch *b = NULL;
    bool *skip = calloc(files.count, sizeof *skip);
    const char **todo = calloc(files.count, sizeof *todo);
    size_t todo_count = 0;
    long present = 0;
    if (skip == NULL || todo == NULL) {
        status = fail("push", &ro, &(tgc_error){0, TGC_REASON_MEMORY, "out of memory", ""});
        goto done;
    }
    if (tgc_create_model(c, model, description, &existed, &e) != 0 ||
        ((wanted_draft > 0 || resume) &&
         find_draft(c, model, wanted_draft, resume, &version, &e) != 0) ||
        (version == 0 && tgc_create_version(c, model, &version, &e) != 0)) {
        status = fail("push", &ro, &e);
        goto done;
    }
    if (wanted_draft > 0 || resume) {
        present = mark_present(c, model, version, dir, &files, skip, &e);
        if (present < 0) {
            status = fail("push", &ro, &e);
            goto done;
        }
    }
    if (!ro.json)
        fprintf(stderr, "%s %s, draft version %d: %zu files (%ld already in the draft)\n",
                existed ? "model" : "created model", model, version, files.count, present);
    b = tgc_batch_new(c);
    if (b == NULL) {
        status = fail("push", &ro, &(tgc_error){0, TGC_REASON_MEMORY, "out of memory", ""});
        goto done;
    }
    for (size_t i = 0; i < files.count; i++) {
        if (skip[i])
            continue;
        char full[8192];
        snprintf(full, sizeof full, "%s/%s", dir, files.rel[i]);
        todo[todo_count++] = files.rel[i];
        if (tgc_batch_add_upload(b, model, version, files.rel[i], full) < 0) {
            fprintf(stderr, "tensorgate push: cannot open %s: %s\n", full, strerror(errno));
            status = EXIT_USAGE;
            goto done;
        }
    }
    progress_state p = {
        .cmd = "push", .ro = &ro, .bar = !ro.json && isatty(STDERR_FILENO), .paths = todo};
    size_t failed = todo_count > 0 ? tgc_batch_run(b, ro.parallel, on_progress, push_item, &p) : 0;
    clear_bar(&p);
    bool published = false;
    char digest[65] = "";
    if (failed > 0) {
        status = p.worst ? p.worst : EXIT_SERVER;
        fprintf(stderr, "tensorgate push: %zu of %zu files not stored; version %d stays a draft\n",
                failed, files.count, version);
        /* what continues it: the same draft, the files that arrived not sent again */
        fprintf(stderr,
                "tensorgate push: to continue (with the same --url and --token): tensorgate push "
                "%s %s --draft %d%s%s%s\n",
                dir, model, version, publish ? " --publish" : "", alias ? " --alias " : "",
                alias ? alias : "");
    } else if (publish) {
        json_t *v = NULL;
        if (tgc_publish(c, model, version, &v, &e) != 0) {
            status = fail("push", &ro, &e);
        } else {
            published = true;
            const char *d = json_string_value(json_object_get(v, "digest"));
            snprintf(digest, sizeof digest, "%s", d ? d : "");
            json_decref(v);
            if (alias != NULL && tgc_set_alias(c, model, alias, version, &e) != 0)
                status = fail("push", &ro, &e);
        }
    }
    if (ro.json) {
        json_t *j = json_pack("{s:s,s:i,s:b,s:s?,s:s?,s:I,s:I}", "model", model, "version", version,
                              "published", published, "digest", digest[0] ? digest : NULL, "alias",
                              status == 0 ? alias : NULL, "uploaded", (json_int_t)p.ok, "refused",
                              (json_int_t)(p.refused + p.failed_other));
        print_json_line(j);
        json_decref(j);
    } else if (published) {
        printf("published %s version %d (digest %s)%s%s\n", model, version, digest,
               alias && status == 0 ? ", alias " : "", alias && status == 0 ? alias : "");
    } else if (failed == 0 && publish) { /* the publish was refused (said above) */
        fprintf(stderr,
                "tensorgate push: %s version %d stays a draft: its files are stored but the "
                "publish failed; fix what it names and push again\n",
                model, version);
    } else if (failed == 0) {
        printf("%s version %d is a draft (not published: add --publish to publish it)\n", model,
               version);
    }
done:
    free(skip);
    free(todo);
    tgc_batch_free(b);
    tgc_close(c);
    file_list_free(&files);
    return status;
}

/* ---------- pull ---------- */

static void pull_usage(FILE *out)
{
    fprintf(out, "usage: tensorgate pull ORG/NAME[@REV] [DIR] [--include GLOB]... [--parallel N]\n"
                 "                       [--verify [--public-key PEM]] [--no-fsync] [--url URL]\n"
                 "                       [--token TOKEN] [--json]\n"
                 "\n"
                 "Downloads the files of a version (REV: a number, an alias, latest (the\n"
                 "default) or a digest) into DIR (default: NAME), at most --parallel at once\n"
                 "(default 4). --include keeps only the paths matching a glob (repeatable).\n"
                 "Each file is written as FILE.part, resumed from there with Range when a\n"
                 "pull is run again, checked against its SHA-256, fsynced and only then renamed:\n"
                 "a file under its final name is always complete, after a crash too (the folders\n"
                 "are fsynced at the end). --no-fsync skips the fsyncs, for scratch space: the\n"
                 "SHA-256 is still checked, but after a crash a renamed file may lack bytes that\n"
                 "never reached the disk. A file already there with the right\n"
                 "SHA-256 is not downloaded again; a resumed one whose SHA-256 differs is started\n"
                 "over from byte 0 once. A body longer than the file's listed size fails it\n"
                 "(body_too_large, its .part removed); a file name with a control character,\n"
                 "'..' or a leading '/' refuses the version before anything is written\n"
                 "(unsafe_name).\n"
                 "--verify checks a signature of the version against the downloaded bytes\n"
                 "(OpenSSF model signing v1, docs/SIGNING.md): model.server.sig with the key\n"
                 "the server publishes at /.well-known/tensorgate/signing-keys, or, with\n"
                 "--public-key PEM, model.sig with that key. A refused signature exits 5\n"
                 "(the files stay; the message names those that differ).\n\n");
    fputs(remote_common_help, out);
}

/* mkdir -p of the parent folders of path. */
static int make_parents(const char *path)
{
    char buf[8192];
    if ((size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf)
        return -1;
    for (char *s = buf + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -1;
        *s = '/';
    }
    return 0;
}

/* Every file the version lists has a safe path (tgc_path_is_safe: relative, no
 * "..", no control character), a SHA-256 and a size: checked for all of them before
 * anything is printed or created. 0, or -1 with *e. */
static int check_files(const json_t *files, tgc_error *e)
{
    size_t i;
    const json_t *f;
    json_array_foreach(files, i, f)
    {
        const char *path = json_string_value(json_object_get(f, "path"));
        const char *sha = json_string_value(json_object_get(f, "sha256"));
        const json_t *size = json_object_get(f, "size");
        if (path == NULL || !tgc_path_is_safe(path)) {
            *e = (tgc_error){200, TGC_REASON_UNSAFE_NAME, "", ""};
            snprintf(e->detail, sizeof e->detail,
                     "the version lists a file named \"%s\": a control character, an absolute "
                     "path or a '..' segment is never used as a file name; nothing was written",
                     shown(path));
            return -1;
        }
        if (sha == NULL || strlen(sha) != 64 || strspn(sha, "0123456789abcdefABCDEF") != 64 ||
            !json_is_integer(size) || json_integer_value(size) < 0) {
            *e = (tgc_error){200, TGC_REASON_BAD_ANSWER,
                             "the version lists a file without a SHA-256 or a size", ""};
            return -1;
        }
    }
    return 0;
}

/* An empty file is made here, never fetched: a size of 0 cannot bound a body. */
static int write_empty(const char *dest, const char *sha, tgc_error *e)
{
    static const char empty_sha[] =
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    char part[8200];
    snprintf(part, sizeof part, "%s.part", dest);
    if (strcasecmp(sha, empty_sha) != 0) {
        *e = (tgc_error){0, TGC_REASON_SHA256, "", ""};
        snprintf(e->detail, sizeof e->detail,
                 "%.900s: listed with 0 bytes and SHA-256 %s, not the empty file's", dest, sha);
        return -1;
    }
    FILE *f = fopen(part, "wb");
    if (f == NULL || fclose(f) != 0 || rename(part, dest) != 0) {
        *e = (tgc_error){0, TGC_REASON_IO, "", ""};
        snprintf(e->detail, sizeof e->detail, "%.900s: %s", dest, strerror(errno));
        return -1;
    }
    return 0;
}

/* True when path holds exactly the content with this SHA-256 and size. */
static bool already_there(const char *path, const char *sha, uint64_t size)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != size)
        return false;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return false;
    tg_sha256 s;
    bool same = false;
    if (tg_sha256_init(&s, "client") == 0) {
        static unsigned char buf[1 << 16];
        size_t n;
        int rc = 0;
        while (rc == 0 && (n = fread(buf, 1, sizeof buf, f)) > 0)
            rc = tg_sha256_update(&s, buf, n);
        char hex[65];
        if (rc == 0 && !ferror(f) && tg_sha256_final_hex(&s, hex) == 0)
            same = strcmp(hex, sha) == 0;
        tg_sha256_free(&s);
    }
    fclose(f);
    return same;
}

static void pull_item(void *user, size_t index, int rc, const tgc_error *e, const json_t *j)
{
    (void)j;
    progress_state *p = user;
    const char *path = p->paths[index];
    clear_bar(p);
    if (rc == 0) {
        p->ok++;
        if (p->ro->json) {
            json_t *o = json_pack("{s:s,s:b,s:s}", "path", path, "ok", 1, "status", "downloaded");
            print_json_line(o);
            json_decref(o);
        } else {
            printf("downloaded %s\n", path);
            fflush(stdout);
        }
        return;
    }
    note_failure(p, e);
    if (p->ro->json) {
        json_t *o = json_pack("{s:s,s:b,s:o}", "path", path, "ok", 0, "error", error_json(e));
        print_json_line(o);
        json_decref(o);
    } else {
        printf("failed %s: %s: %s\n", path, e->reason, e->detail);
        fflush(stdout);
    }
}

/* pull --verify: the server's model.server.sig with its well-known key, or model.sig
 * with public_key, checked against the files of dir by `tensorgate verify key`
 * (cmd/sign.c). 0 verified, EXIT_SIGNATURE refused, else another exit status. */
static int pull_verify(tgc_client *c, const remote_opts *ro, const char *dir,
                       const char *public_key)
{
    char sig[8192], key_path[64] = "";
    int rc;
    if (public_key != NULL) {
        snprintf(sig, sizeof sig, "%s/%s", dir, TG_MSIG_DEFAULT_NAME);
    } else {
        snprintf(sig, sizeof sig, "%s/%s", dir, TG_MSIG_SERVER_NAME);
        json_t *keys = NULL;
        tgc_error e;
        if (tgc_get_signing_keys(c, &keys, &e) != 0)
            return fail("pull", ro, &e);
        const char *pem = json_string_value(
            json_object_get(json_array_get(json_object_get(keys, "keys"), 0), "pem"));
        if (pem == NULL) {
            json_decref(keys);
            fprintf(stderr, "tensorgate pull: --verify: the server signs nothing (no key at "
                            "/.well-known/tensorgate/signing-keys); give --public-key\n");
            return EXIT_SIGNATURE;
        }
        snprintf(key_path, sizeof key_path, "/tmp/tensorgate-key-XXXXXX");
        int fd = mkstemp(key_path);
        bool written = fd >= 0 && write(fd, pem, strlen(pem)) == (ssize_t)strlen(pem);
        if (fd >= 0)
            close(fd);
        json_decref(keys);
        if (!written) {
            fprintf(stderr, "tensorgate pull: --verify: cannot write the server's key: %s\n",
                    strerror(errno));
            if (key_path[0] != '\0')
                unlink(key_path);
            return EXIT_USAGE;
        }
        public_key = key_path;
    }
    if (access(sig, F_OK) != 0) {
        fprintf(stderr, "tensorgate pull: --verify: the version has no %s\n",
                public_key == key_path ? TG_MSIG_SERVER_NAME : TG_MSIG_DEFAULT_NAME);
        rc = EXIT_SIGNATURE;
    } else {
        char *args[] = {"verify", "key",          (char *)dir,        "--signature",
                        sig,      "--public-key", (char *)public_key, NULL};
        int v = tg_cmd_verify(7, args);
        rc = v == 0 ? 0 : v == 1 ? EXIT_SIGNATURE : EXIT_USAGE;
    }
    if (key_path[0] != '\0')
        unlink(key_path);
    return rc;
}

int tg_cmd_pull(int argc, char **argv)
{
    /* --tensors: one bundle of tensors into one file (cmd/pull_bundle.c) */
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--tensors") == 0 || strncmp(argv[i], "--tensors=", 10) == 0)
            return tg_cmd_pull_bundle(argc, argv);
    static const struct option options[] = {
        COMMON_LONG_OPTIONS,
        {"include", required_argument, NULL, OPT_INCLUDE},
        {"verify", no_argument, NULL, OPT_VERIFY},
        {"public-key", required_argument, NULL, OPT_PUBLIC_KEY},
        {"public_key", required_argument, NULL, OPT_PUBLIC_KEY},
        {"no-fsync", no_argument, NULL, OPT_NO_FSYNC},
        {NULL, 0, NULL, 0},
    };
    remote_opts ro = {0};
    bool verify = false;
    const char *public_key = NULL;
    const char *includes[MAX_INCLUDES];
    size_t n_includes = 0;
    optind = 1;
    opterr = 0;
    for (;;) {
        int opt = getopt_long(argc, argv, "h", options, NULL);
        if (opt == -1)
            break;
        int k = common_opt(opt, optarg, &ro);
        if (k < 0)
            return usage_error(
                "pull",
                "--parallel takes 1..64, --limit-rate a byte count, --stall-timeout 1..3600",
                pull_usage);
        if (k > 0)
            continue;
        if (opt == 'h') {
            pull_usage(stdout);
            return 0;
        } else if (opt == OPT_INCLUDE && n_includes < MAX_INCLUDES) {
            includes[n_includes++] = optarg;
        } else if (opt == OPT_VERIFY) {
            verify = true;
        } else if (opt == OPT_PUBLIC_KEY) {
            public_key = optarg;
        } else if (opt == OPT_NO_FSYNC) {
            ro.no_fsync = true;
        } else {
            return usage_error("pull", "unknown option (or more than 32 --include)", pull_usage);
        }
    }
    if (public_key != NULL && !verify)
        return usage_error("pull", "--public-key goes with --verify", pull_usage);
    if (verify && n_includes > 0)
        return usage_error("pull", "--verify checks the whole version: no --include", pull_usage);
    if (argc - optind < 1 || argc - optind > 2)
        return usage_error("pull", "expected ORG/NAME[@REV] [DIR]", pull_usage);
    char model[160], rev[160];
    tgc_error e;
    if (tgc_parse_ref(argv[optind], model, sizeof model, rev, sizeof rev, &e) != 0)
        return usage_error("pull", e.detail, pull_usage);
    const char *dir = argc - optind == 2 ? argv[optind + 1] : strchr(model, '/') + 1;

    int status = 0;
    tgc_client *c = remote_connect("pull", &ro, &status);
    if (c == NULL)
        return status;
    tgc_resolved v = {0};
    tgc_batch *b = NULL;
    char **paths = NULL;
    size_t n_paths = 0, skipped = 0;
    if (tgc_resolve(c, model, rev, &v, &e) != 0) {
        status = fail("pull", &ro, &e);
        goto done;
    }
    json_t *files = json_object_get(v.version_json, "files");
    if (check_files(files, &e) != 0) {
        status = fail("pull", &ro, &e);
        goto done;
    }
    size_t n = json_array_size(files);
    paths = calloc(n + 1, sizeof *paths);
    b = tgc_batch_new(c);
    if (paths == NULL || b == NULL) {
        status = fail("pull", &ro, &(tgc_error){0, TGC_REASON_MEMORY, "out of memory", ""});
        goto done;
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "tensorgate pull: cannot make %s: %s\n", dir, strerror(errno));
        status = EXIT_USAGE;
        goto done;
    }
    char vrev[24];
    snprintf(vrev, sizeof vrev, "%d", v.version); /* every file from the one version */
    for (size_t i = 0; i < n; i++) {
        json_t *f = json_array_get(files, i);
        const char *path = json_string_value(json_object_get(f, "path"));
        const char *sha = json_string_value(json_object_get(f, "sha256"));
        json_int_t size = json_integer_value(json_object_get(f, "size"));
        bool wanted = n_includes == 0;
        for (size_t k = 0; k < n_includes && !wanted; k++)
            wanted = fnmatch(includes[k], path, 0) == 0;
        if (!wanted)
            continue;
        char dest[8192];
        if ((size_t)snprintf(dest, sizeof dest, "%s/%s", dir, path) >= sizeof dest ||
            make_parents(dest) != 0) {
            fprintf(stderr, "tensorgate pull: cannot make the folders of %s/%s: %s\n", dir, path,
                    strerror(errno));
            status = EXIT_USAGE;
            goto done;
        }
        if (already_there(dest, sha, (uint64_t)size)) {
            skipped++;
            if (ro.json) {
                json_t *o =
                    json_pack("{s:s,s:b,s:s}", "path", path, "ok", 1, "status", "up-to-date");
                print_json_line(o);
                json_decref(o);
            } else {
                printf("up to date %s\n", path);
            }
            continue;
        }
        if (size == 0) {
            if (write_empty(dest, sha, &e) != 0) {
                status = fail("pull", &ro, &e);
                goto done;
            }
            skipped++;
            if (ro.json) {
                json_t *o = json_pack("{s:s,s:b,s:s}", "path", path, "ok", 1, "status", "empty");
                print_json_line(o);
                json_decref(o);
            } else {
                printf("empty %s\n", path);
            }
            continue;
        }
        if (tgc_batch_add_download(b, model, vrev, path, dest, sha, (uint64_t)size) < 0) {
            status = fail("pull", &ro, &(tgc_error){0, TGC_REASON_MEMORY, "out of memory", ""});
            goto done;
        }
        paths[n_paths++] = (char *)path;
    }
    if (n_includes > 0 && n_paths + skipped == 0) {
        fprintf(stderr, "tensorgate pull: no file of %s@%d matches --include\n", model, v.version);
        status = EXIT_REFUSED;
        goto done;
    }
    if (!ro.json)
        fprintf(stderr, "%s version %d: %zu files to download into %s\n", model, v.version, n_paths,
                dir);
    progress_state p = {.cmd = "pull",
                        .ro = &ro,
                        .bar = !ro.json && isatty(STDERR_FILENO),
                        .paths = (const char *const *)paths};
    size_t failed = tgc_batch_run(b, ro.parallel, on_progress, pull_item, &p);
    clear_bar(&p);
    if (failed > 0) {
        status = p.worst ? p.worst : EXIT_SERVER;
        fprintf(stderr, "tensorgate pull: %zu of %zu files failed\n", failed, n_paths);
    }
    if (status == 0 && verify)
        status = pull_verify(c, &ro, dir, public_key);
    if (ro.json) {
        json_t *o = json_pack("{s:s,s:i,s:s?,s:s,s:I,s:I,s:I}", "model", model, "version",
                              v.version, "digest", v.digest[0] ? v.digest : NULL, "dir", dir,
                              "downloaded", (json_int_t)p.ok, "up_to_date", (json_int_t)skipped,
                              "failed", (json_int_t)failed);
        print_json_line(o);
        json_decref(o);
    }
done:
    free(paths);
    tgc_batch_free(b);
    json_decref(v.version_json);
    tgc_close(c);
    return status;
}

/* ---------- ls ---------- */

static void ls_usage(FILE *out)
{
    fprintf(out, "usage: tensorgate ls [ORG[/NAME[@REV]]] [--tensors] [--url URL] [--token TOKEN]\n"
                 "                     [--json]\n"
                 "\n"
                 "Without an argument the models; ORG: that org's models; ORG/NAME: the model's\n"
                 "versions (\"holds code\" after one that holds code its namespace's policy\n"
                 "admitted) and aliases; ORG/NAME@REV: the version's files (path, kind, size,\n"
                 "SHA-256), or with --tensors every tensor of the version (name, dtype, shape,\n"
                 "file).\n\n");
    fputs(remote_common_help, out);
}

/* Parses argv for a command with the common options only; returns -1 to go on, or
 * an exit status. */
static int parse_common(const char *cmd, int argc, char **argv, remote_opts *ro,
                        const struct option *extra, void (*usage)(FILE *),
                        int (*on_extra)(int opt, const char *arg, void *ud), void *ud)
{
    struct option options[16] = {COMMON_LONG_OPTIONS};
    size_t n = COMMON_OPTION_COUNT;
    for (size_t i = 0; extra != NULL && extra[i].name != NULL && n < 15; i++)
        options[n++] = extra[i];
    options[n] = (struct option){NULL, 0, NULL, 0};
    optind = 1;
    opterr = 0;
    for (;;) {
        int opt = getopt_long(argc, argv, "ho:", options, NULL);
        if (opt == -1)
            break;
        int k = common_opt(opt, optarg, ro);
        if (k < 0)
            return usage_error(
                cmd, "--parallel takes 1..64, --limit-rate a byte count, --stall-timeout 1..3600",
                usage);
        if (k > 0)
            continue;
        if (opt == 'h') {
            usage(stdout);
            return 0;
        }
        if (on_extra == NULL || opt == '?' || on_extra(opt, optarg, ud) != 0)
            return usage_error(cmd, "unknown option or missing value", usage);
    }
    return -1;
}

static void shape_string(const json_t *shape, char *out, size_t cap);

static int ls_extra(int opt, const char *arg, void *ud)
{
    (void)arg;
    if (opt != OPT_TENSORS)
        return -1;
    *(bool *)ud = true;
    return 0;
}

int tg_cmd_ls(int argc, char **argv)
{
    static const struct option extra[] = {
        {"tensors", no_argument, NULL, OPT_TENSORS},
        {NULL, 0, NULL, 0},
    };
    remote_opts ro = {0};
    bool tensors = false;
    int rc = parse_common("ls", argc, argv, &ro, extra, ls_usage, ls_extra, &tensors);
    if (rc >= 0)
        return rc;
    if (argc - optind > 1)
        return usage_error("ls", "expected at most one ORG[/NAME[@REV]]", ls_usage);
    const char *what = argc - optind == 1 ? argv[optind] : NULL;
    int status = 0;
    tgc_client *c = remote_connect("ls", &ro, &status);
    if (c == NULL)
        return status;
    tgc_error e;
    json_t *j = NULL;
    if (what == NULL || strchr(what, '/') == NULL) {
        char q[80];
        if (what != NULL && (strlen(what) > 64 || strchr(what, '@') != NULL)) {
            tgc_close(c);
            return usage_error("ls", "expected ORG[/NAME[@REV]]", ls_usage);
        }
        snprintf(q, sizeof q, "%s/", what ? what : "");
        if (tgc_list_models(c, what ? q : NULL, &j, &e) != 0) {
            status = fail("ls", &ro, &e);
        } else {
            /* q is a substring match: keep the org's own models only */
            json_t *keep = json_array();
            size_t i;
            json_t *m;
            json_array_foreach(j, i, m)
            {
                const char *name = json_string_value(json_object_get(m, "name"));
                if (keep != NULL && name != NULL &&
                    (what == NULL || strncmp(name, q, strlen(q)) == 0))
                    json_array_append(keep, m);
            }
            if (ro.json) {
                print_json_line(keep);
            } else {
                json_array_foreach(keep, i, m)
                {
                    const char *desc = json_string_value(json_object_get(m, "description"));
                    printf("%-40s %s\n", shown(json_string_value(json_object_get(m, "name"))),
                           desc ? shown(desc) : "");
                }
            }
            json_decref(keep);
        }
    } else if (strchr(what, '@') == NULL) {
        char model[160], rev[160];
        if (tgc_parse_ref(what, model, sizeof model, rev, sizeof rev, &e) != 0) {
            tgc_close(c);
            return usage_error("ls", e.detail, ls_usage);
        }
        if (tgc_get_model(c, model, &j, &e) != 0) {
            status = fail("ls", &ro, &e);
        } else if (ro.json) {
            print_json_line(j);
        } else {
            printf("%-8s %-10s %-21s %s\n", "VERSION", "STATE", "PUBLISHED", "DIGEST");
            size_t i;
            json_t *ver;
            json_array_foreach(json_object_get(j, "versions"), i, ver)
            {
                const char *pub = json_string_value(json_object_get(ver, "published_at"));
                const char *dig = json_string_value(json_object_get(ver, "digest"));
                /* a version that holds code says so (docs/DESIGN.md, "The code policy") */
                printf("%-8" JSON_INTEGER_FORMAT " %-10s %-21s %s%s\n",
                       json_integer_value(json_object_get(ver, "version")),
                       shown(json_string_value(json_object_get(ver, "state"))), shown(pub),
                       shown(dig),
                       json_is_true(json_object_get(ver, "holds_code")) ? "  holds code" : "");
            }
            const char *alias;
            json_t *num;
            json_object_foreach(json_object_get(j, "aliases"), alias, num)
            {
                printf("alias %s -> %" JSON_INTEGER_FORMAT "\n", shown(alias),
                       json_integer_value(num));
            }
        }
    } else {
        char model[160], rev[160];
        if (tgc_parse_ref(what, model, sizeof model, rev, sizeof rev, &e) != 0) {
            tgc_close(c);
            return usage_error("ls", e.detail, ls_usage);
        }
        if (tensors) {
            if (tgc_list_tensors(c, model, rev, &j, &e) != 0) {
                status = fail("ls", &ro, &e);
            } else if (ro.json) {
                print_json_line(j);
            } else {
                size_t i;
                json_t *t;
                json_array_foreach(j, i, t)
                {
                    char shape[256];
                    shape_string(json_object_get(t, "shape"), shape, sizeof shape);
                    printf("%-40s %-8s %-20s %s\n",
                           shown(json_string_value(json_object_get(t, "name"))),
                           shown(json_string_value(json_object_get(t, "dtype"))), shape,
                           shown(json_string_value(json_object_get(t, "file"))));
                }
            }
        } else if (tgc_list_files(c, model, rev, &j, &e) != 0) {
            status = fail("ls", &ro, &e);
        } else if (ro.json) {
            print_json_line(j);
        } else {
            size_t i;
            json_t *f;
            json_array_foreach(j, i, f)
            {
                printf("%-12" JSON_INTEGER_FORMAT " %-12s %s  %s\n",
                       json_integer_value(json_object_get(f, "size")),
                       shown(json_string_value(json_object_get(f, "kind"))),
                       shown(json_string_value(json_object_get(f, "sha256"))),
                       shown(json_string_value(json_object_get(f, "path"))));
            }
        }
    }
    json_decref(j);
    tgc_close(c);
    return status;
}

/* ---------- header ---------- */

static void header_usage(FILE *out)
{
    fprintf(out, "usage: tensorgate header ORG/NAME[@REV] FILE [--url URL] [--token TOKEN] "
                 "[--json]\n"
                 "\n"
                 "The parsed header of a stored safetensors file, read without downloading it:\n"
                 "each tensor's dtype, shape, absolute [begin, end) in the file, NaN and Inf\n"
                 "counts; parameters per dtype; metadata.\n\n");
    fputs(remote_common_help, out);
}

static void shape_string(const json_t *shape, char *out, size_t cap)
{
    size_t used = 0;
    used += (size_t)snprintf(out, cap, "[");
    size_t i;
    json_t *d;
    json_array_foreach(shape, i, d)
    {
        if (used < cap)
            used += (size_t)snprintf(out + used, cap - used, "%s%" JSON_INTEGER_FORMAT,
                                     i ? ", " : "", json_integer_value(d));
    }
    if (used < cap)
        snprintf(out + used, cap - used, "]");
}

int tg_cmd_header(int argc, char **argv)
{
    remote_opts ro = {0};
    int rc = parse_common("header", argc, argv, &ro, NULL, header_usage, NULL, NULL);
    if (rc >= 0)
        return rc;
    if (argc - optind != 2)
        return usage_error("header", "expected ORG/NAME[@REV] FILE", header_usage);
    char model[160], rev[160];
    tgc_error e;
    if (tgc_parse_ref(argv[optind], model, sizeof model, rev, sizeof rev, &e) != 0)
        return usage_error("header", e.detail, header_usage);
    int status = 0;
    tgc_client *c = remote_connect("header", &ro, &status);
    if (c == NULL)
        return status;
    json_t *h = NULL;
    if (tgc_get_header(c, model, rev, argv[optind + 1], &h, &e) != 0) {
        status = fail("header", &ro, &e);
    } else if (ro.json) {
        print_json_line(h);
    } else {
        printf("file: %s\nsha256: %s\nsize: %" JSON_INTEGER_FORMAT " bytes\n",
               shown(json_string_value(json_object_get(h, "path"))),
               shown(json_string_value(json_object_get(h, "sha256"))),
               json_integer_value(json_object_get(h, "size")));
        printf("tensors: %zu\n", json_array_size(json_object_get(h, "tensors")));
        printf("  %-40s %-8s %-20s %14s %14s %8s %8s\n", "NAME", "DTYPE", "SHAPE", "BEGIN", "END",
               "NAN", "INF");
        size_t i;
        json_t *t;
        json_array_foreach(json_object_get(h, "tensors"), i, t)
        {
            char shape[256];
            shape_string(json_object_get(t, "shape"), shape, sizeof shape);
            json_t *off = json_object_get(t, "data_offsets");
            printf("  %-40s %-8s %-20s %14" JSON_INTEGER_FORMAT " %14" JSON_INTEGER_FORMAT
                   " %8" JSON_INTEGER_FORMAT " %8" JSON_INTEGER_FORMAT "\n",
                   shown(json_string_value(json_object_get(t, "name"))),
                   shown(json_string_value(json_object_get(t, "dtype"))), shape,
                   json_integer_value(json_array_get(off, 0)),
                   json_integer_value(json_array_get(off, 1)),
                   json_integer_value(json_object_get(t, "nan")),
                   json_integer_value(json_object_get(t, "inf")));
        }
        const char *dt;
        json_t *count;
        json_object_foreach(json_object_get(h, "parameters"), dt, count)
        {
            printf("parameters %s: %" JSON_INTEGER_FORMAT "\n", shown(dt),
                   json_integer_value(count));
        }
        const char *key;
        json_t *val;
        json_object_foreach(json_object_get(h, "metadata"), key, val)
        {
            printf("metadata %s: %s\n", shown(key), shown(json_string_value(val)));
        }
    }
    json_decref(h);
    tgc_close(c);
    return status;
}

/* ---------- tensor ---------- */

static void tensor_usage(FILE *out)
{
    fprintf(out, "usage: tensorgate tensor ORG/NAME[@REV] NAME [--slice S] [--dtype D] -o OUT\n"
                 "                         [--url URL] [--token TOKEN] [--json]\n"
                 "\n"
                 "Fetches one tensor (the shard found by the server), sliced on the server with\n"
                 "NumPy basic indexing (--slice '1:3,::2') and converted to D (F64, F32, F16,\n"
                 "BF16, F8_E4M3, F8_E5M2), into OUT: a .npy file when OUT ends in .npy, else\n"
                 "the raw little-endian bytes. Written as OUT.part, renamed when complete.\n\n");
    fputs(remote_common_help, out);
}

typedef struct tensor_args {
    const char *slice, *dtype, *out;
} tensor_args;

static int tensor_extra(int opt, const char *arg, void *ud)
{
    tensor_args *a = ud;
    if (opt == OPT_SLICE)
        a->slice = arg;
    else if (opt == OPT_DTYPE)
        a->dtype = arg;
    else if (opt == 'o')
        a->out = arg;
    else
        return -1;
    return 0;
}

int tg_cmd_tensor(int argc, char **argv)
{
    static const struct option extra[] = {
        {"slice", required_argument, NULL, OPT_SLICE},
        {"dtype", required_argument, NULL, OPT_DTYPE},
        {"output", required_argument, NULL, 'o'},
        {NULL, 0, NULL, 0},
    };
    remote_opts ro = {0};
    tensor_args a = {0};
    int rc = parse_common("tensor", argc, argv, &ro, extra, tensor_usage, tensor_extra, &a);
    if (rc >= 0)
        return rc;
    if (argc - optind != 2 || a.out == NULL)
        return usage_error("tensor", "expected ORG/NAME[@REV] NAME -o OUT", tensor_usage);
    char model[160], rev[160];
    tgc_error e;
    if (tgc_parse_ref(argv[optind], model, sizeof model, rev, sizeof rev, &e) != 0)
        return usage_error("tensor", e.detail, tensor_usage);
    size_t olen = strlen(a.out);
    tgc_tensor_request req = {.slice = a.slice,
                              .dtype = a.dtype,
                              .npy = olen >= 4 && strcmp(a.out + olen - 4, ".npy") == 0};
    int status = 0;
    tgc_client *c = remote_connect("tensor", &ro, &status);
    if (c == NULL)
        return status;
    tgc_tensor_info info;
    const char *name = argv[optind + 1];
    if (tgc_tensor_to_file(c, model, rev, name, &req, a.out, &info, &e) != 0) {
        status = fail("tensor", &ro, &e);
    } else if (ro.json) {
        json_t *j =
            json_pack("{s:s,s:s,s:s,s:s,s:s,s:I,s:s}", "tensor", name, "dtype", info.dtype,
                      "source_dtype", info.source_dtype, "shape", info.shape, "format",
                      req.npy ? "npy" : "raw", "bytes", (json_int_t)info.bytes, "file", a.out);
        print_json_line(j);
        json_decref(j);
    } else {
        printf("%s: %s %s -> %s (%" PRIu64 " bytes, %s)\n", name, shown(info.dtype),
               shown(info.shape), a.out, info.bytes, req.npy ? "npy" : "raw");
    }
    tgc_close(c);
    return status;
}

/* ---------- scan ---------- */

static void scan_usage(FILE *out)
{
    fprintf(out, "usage: tensorgate scan FILE [--kind safetensors|sidecar|json] [--url URL]\n"
                 "                       [--token TOKEN] [--json | --format text|json|sarif]\n"
                 "\n"
                 "Sends FILE to the server's gate (POST /v1/scan?name=BASENAME) and prints its\n"
                 "verdict; the server stores nothing. The file's base name goes with it, so a\n"
                 "name that marks code (x.py, run.sh) is refused as code, as an upload would be.\n"
                 "--kind defaults from the name as an upload would be judged: *.safetensors\n"
                 "safetensors, *.json json, anything else sidecar. --format sarif prints the\n"
                 "server's SARIF 2.1.0 report (one run, the file as its artifact). --json is\n"
                 "--format json. Exit 0 valid, 1 refused.\n\n");
    fputs(remote_common_help, out);
}

typedef struct scan_args {
    const char *kind;
    const char *format; /* "text", "json" or "sarif"; NULL: text (or json with --json) */
} scan_args;

static int scan_extra(int opt, const char *arg, void *ud)
{
    scan_args *a = ud;
    if (opt == OPT_KIND) {
        a->kind = arg;
        return 0;
    }
    if (opt == OPT_FORMAT &&
        (strcmp(arg, "text") == 0 || strcmp(arg, "json") == 0 || strcmp(arg, "sarif") == 0)) {
        a->format = arg;
        return 0;
    }
    return -1;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* A refused pickle's imports, one line each, as `tensorgate validate` prints them. */
static void print_findings(const json_t *findings)
{
    size_t i;
    const json_t *f;
    json_array_foreach(findings, i, f)
    {
        printf("  imports %s (%s%s) at offset %" JSON_INTEGER_FORMAT "\n",
               shown(json_string_value(json_object_get(f, "global"))),
               shown(json_string_value(json_object_get(f, "severity"))),
               json_is_true(json_object_get(f, "calls")) ? ", called" : "",
               json_integer_value(json_object_get(f, "offset")));
    }
}

int tg_cmd_scan(int argc, char **argv)
{
    static const struct option extra[] = {
        {"kind", required_argument, NULL, OPT_KIND},
        {"format", required_argument, NULL, OPT_FORMAT},
        {NULL, 0, NULL, 0},
    };
    remote_opts ro = {0};
    scan_args a = {0};
    int rc = parse_common("scan", argc, argv, &ro, extra, scan_usage, scan_extra, &a);
    if (rc >= 0)
        return rc;
    if (argc - optind != 1)
        return usage_error("scan", "expected FILE", scan_usage);
    if (a.format != NULL && strcmp(a.format, "json") == 0)
        ro.json = true;
    bool sarif = a.format != NULL && strcmp(a.format, "sarif") == 0;
    if (sarif && ro.json)
        return usage_error("scan", "--json and --format sarif exclude each other", scan_usage);
    const char *file = argv[optind];
    const char *kind = a.kind;
    if (kind == NULL)
        kind = ends_with(file, ".safetensors") ? "safetensors"
               : ends_with(file, ".json")      ? "json"
                                               : "sidecar";
    /* the base name: what the server judges the body under (code names are refused) */
    const char *slash = strrchr(file, '/');
    const char *base = slash != NULL ? slash + 1 : file;
    int status = 0;
    tgc_client *c = remote_connect("scan", &ro, &status);
    if (c == NULL)
        return status;
    json_t *v = NULL;
    tgc_error e;
    tgc_scan_options options = {
        .kind = kind, .name = base[0] != '\0' ? base : NULL, .format = sarif ? "sarif" : NULL};
    if (tgc_scan_with(c, file, &options, &v, &e) != 0) {
        status = fail("scan", &ro, &e);
    } else if (sarif) {
        /* the server's report as it came; an admitted file has no result */
        char *text = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (text == NULL) {
            fprintf(stderr, "tensorgate scan: out of memory\n");
            status = EXIT_USAGE;
        } else {
            puts(text);
            fflush(stdout);
            free(text);
            const json_t *run = json_array_get(json_object_get(v, "runs"), 0);
            status = json_array_size(json_object_get(run, "results")) > 0 ? EXIT_REFUSED : 0;
        }
    } else {
        bool valid = json_is_true(json_object_get(v, "valid"));
        status = valid ? 0 : EXIT_REFUSED;
        if (ro.json) {
            json_object_set_new(v, "file", json_string(file));
            print_json_line(v);
        } else if (valid) {
            printf("%s: valid %s (%" JSON_INTEGER_FORMAT " bytes, sha256 %s)\n", file,
                   shown(json_string_value(json_object_get(v, "format"))),
                   json_integer_value(json_object_get(v, "size")),
                   shown(json_string_value(json_object_get(v, "sha256"))));
        } else {
            printf("%s: refused: %s: %s (format %s)\n", file,
                   shown(json_string_value(json_object_get(v, "reason"))),
                   shown(json_string_value(json_object_get(v, "detail"))),
                   shown(json_string_value(json_object_get(v, "format"))));
            print_findings(json_object_get(v, "findings"));
        }
    }
    json_decref(v);
    tgc_close(c);
    return status;
}

/* ---------- rejections ---------- */

static void rejections_usage(FILE *out)
{
    fprintf(out,
            "usage: tensorgate rejections [--reason R] [--namespace N] [--since T] [--until T]\n"
            "                             [--sha256 H] [--limit N] [--jsonl] [--url URL]\n"
            "                             [--token TOKEN]\n"
            "\n"
            "The uploads and imports the server refused (GET /v1/rejections; an admin\n"
            "token, and a namespace's admin sees its namespace's), newest first: time,\n"
            "reason, namespace, size, SHA-256 of the refused bytes (- when the server did\n"
            "not read them all), token id, model version and path. The filters combine:\n"
            "  --reason R      one reason code (pickle_refused, payload_too_large, ...)\n"
            "  --namespace N   one org\n"
            "  --since T       at or after T, an RFC 3339 time (2026-05-01T00:00:00Z)\n"
            "  --until T       before T\n"
            "  --sha256 H      refusals of the bytes with this SHA-256\n"
            "  --limit N       at most N records (default: every one)\n"
            "  --jsonl         one JSON object a line, as the API gives it (so does --json)\n"
            "Memory stays bounded (a page of 1000 at most), whatever the number of records.\n\n");
    fputs(remote_common_help, out);
}

typedef struct rejections_args {
    tgc_rejection_query q;
    bool jsonl;
    bool bad_limit;
} rejections_args;

static int rejections_extra(int opt, const char *arg, void *ud)
{
    rejections_args *a = ud;
    switch (opt) {
    case OPT_REASON:
        a->q.reason = arg;
        return 0;
    case OPT_NAMESPACE:
        a->q.namespace_name = arg;
        return 0;
    case OPT_SINCE:
        a->q.since = arg;
        return 0;
    case OPT_UNTIL:
        a->q.until = arg;
        return 0;
    case OPT_SHA256:
        a->q.sha256 = arg;
        return 0;
    case OPT_JSONL:
        a->jsonl = true;
        return 0;
    case OPT_LIMIT: {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(arg, &end, 10);
        if (errno != 0 || end == arg || *end != '\0' || v == 0 || arg[0] == '-') {
            a->bad_limit = true; /* said after the parse */
            return 0;
        }
        a->q.limit = v;
        return 0;
    }
    default:
        return -1;
    }
}

static int print_rejection(void *user, const json_t *r)
{
    const bool *jsonl = user;
    if (*jsonl) {
        print_json_line((json_t *)r);
        return 0;
    }
    const json_t *version = json_object_get(r, "version");
    char where[600];
    const char *model = json_string_value(json_object_get(r, "model"));
    if (model != NULL && json_is_integer(version))
        snprintf(where, sizeof where, "%s@%" JSON_INTEGER_FORMAT " %s", shown(model),
                 json_integer_value(version), shown(json_string_value(json_object_get(r, "path"))));
    else
        snprintf(where, sizeof where, "%s %s", shown(model),
                 shown(json_string_value(json_object_get(r, "path"))));
    const json_t *token = json_object_get(r, "token_id");
    char token_text[32] = "-";
    if (json_is_integer(token))
        snprintf(token_text, sizeof token_text, "%" JSON_INTEGER_FORMAT, json_integer_value(token));
    printf("%-20s %-24s %-16s %12" JSON_INTEGER_FORMAT " %-64s %-6s %s\n",
           shown(json_string_value(json_object_get(r, "time"))),
           shown(json_string_value(json_object_get(r, "reason"))),
           shown(json_string_value(json_object_get(r, "namespace"))),
           json_integer_value(json_object_get(r, "size")),
           shown(json_string_value(json_object_get(r, "sha256"))), token_text, where);
    return 0;
}

int tg_cmd_rejections(int argc, char **argv)
{
    static const struct option extra[] = {
        {"reason", required_argument, NULL, OPT_REASON},
        {"namespace", required_argument, NULL, OPT_NAMESPACE},
        {"since", required_argument, NULL, OPT_SINCE},
        {"until", required_argument, NULL, OPT_UNTIL},
        {"sha256", required_argument, NULL, OPT_SHA256},
        {"limit", required_argument, NULL, OPT_LIMIT},
        {"jsonl", no_argument, NULL, OPT_JSONL},
        {NULL, 0, NULL, 0},
    };
    remote_opts ro = {0};
    rejections_args a = {0};
    int rc =
        parse_common("rejections", argc, argv, &ro, extra, rejections_usage, rejections_extra, &a);
    if (rc >= 0)
        return rc;
    if (a.bad_limit)
        return usage_error("rejections", "--limit takes a positive integer", rejections_usage);
    if (argc - optind != 0)
        return usage_error("rejections", "expected no argument", rejections_usage);
    bool jsonl = a.jsonl || ro.json;
    int status = 0;
    tgc_client *c = remote_connect("rejections", &ro, &status);
    if (c == NULL)
        return status;
    if (!jsonl)
        printf("%-20s %-24s %-16s %12s %-64s %-6s %s\n", "TIME", "REASON", "NAMESPACE", "SIZE",
               "SHA256", "TOKEN", "WHERE");
    tgc_error e;
    if (tgc_list_rejections(c, &a.q, print_rejection, &jsonl, &e) != 0)
        status = fail("rejections", &ro, &e);
    fflush(stdout);
    tgc_close(c);
    return status;
}

/* ---------- namespace ---------- */

static void namespace_usage(FILE *out)
{
    fprintf(out,
            "usage: tensorgate namespace policy ORG [--allow-code yes|no] [--url URL]\n"
            "                  [--token TOKEN] [--json]\n"
            "\n"
            "policy: ORG's code policy. Without --allow-code it is shown; --allow-code yes lets\n"
            "uploads and imports into ORG's models hold code (modeling_x.py, a config.json with\n"
            "auto_map, ...), which is then marked on every version that holds it; no refuses\n"
            "code again (versions that hold code stay marked). Needs an admin token of ORG or\n"
            "of every org.\n\n");
    fputs(remote_common_help, out);
}

/* --allow-code's value: 1 yes, 0 no, -1 anything else */
static int namespace_extra(int opt, const char *arg, void *ud)
{
    if (opt != OPT_ALLOW_CODE || arg == NULL)
        return -1;
    int *value = ud;
    if (strcmp(arg, "yes") == 0 || strcmp(arg, "true") == 0)
        *value = 1;
    else if (strcmp(arg, "no") == 0 || strcmp(arg, "false") == 0)
        *value = 0;
    else
        return -1;
    return 0;
}

int tg_cmd_namespace(int argc, char **argv)
{
    static const struct option extra[] = {
        {"allow-code", required_argument, NULL, OPT_ALLOW_CODE},
        {NULL, 0, NULL, 0},
    };
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        namespace_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    if (strcmp(argv[1], "policy") != 0)
        return usage_error("namespace", "the subcommand is 'policy'", namespace_usage);
    remote_opts ro = {0};
    int allow = -1;
    int rc = parse_common("namespace policy", argc - 1, argv + 1, &ro, extra, namespace_usage,
                          namespace_extra, &allow);
    if (rc >= 0)
        return rc;
    if (argc - 1 - optind != 1)
        return usage_error("namespace policy", "expected one ORG", namespace_usage);
    const char *org = argv[1 + optind];
    int status = 0;
    tgc_client *c = remote_connect("namespace policy", &ro, &status);
    if (c == NULL)
        return status;
    bool set = allow == 1;
    json_t *j = NULL;
    tgc_error e;
    if (tgc_namespace_policy(c, org, allow >= 0 ? &set : NULL, &j, &e) != 0) {
        status = fail("namespace policy", &ro, &e);
    } else if (ro.json) {
        print_json_line(j);
    } else {
        const char *since = json_string_value(json_object_get(j, "updated_at"));
        const char *name = shown(json_string_value(json_object_get(j, "namespace")));
        const char *policy = json_is_true(json_object_get(j, "allow_code")) ? "allowed" : "refused";
        if (since != NULL)
            printf("%s: code %s (set %s)\n", name, policy, shown(since));
        else
            printf("%s: code %s (the default)\n", name, policy);
    }
    json_decref(j);
    tgc_close(c);
    return status;
}

/* ---------- for the other server commands (remote_cli.h) ---------- */

const char *tg_remote_shown(const char *s)
{
    return shown(s);
}

int tg_remote_fail(const char *cmd, const remote_opts *ro, const tgc_error *e)
{
    return fail(cmd, ro, e);
}

void tg_remote_print_json(json_t *j)
{
    print_json_line(j);
}

int tg_remote_usage_error(const char *cmd, const char *text, void (*usage)(FILE *))
{
    return usage_error(cmd, text, usage);
}

void tg_remote_common_help(FILE *out)
{
    fputs(remote_common_help, out);
}

int tg_remote_parse(const char *cmd, int argc, char **argv, remote_opts *ro,
                    const struct option *extra, void (*usage)(FILE *),
                    int (*on_extra)(int opt, const char *arg, void *ud), void *ud)
{
    return parse_common(cmd, argc, argv, ro, extra, usage, on_extra, ud);
}

tgc_client *tg_remote_connect(const char *cmd, remote_opts *ro, int *status)
{
    return remote_connect(cmd, ro, status);
}

void tg_remote_human_size(uint64_t bytes, char *out, size_t cap)
{
    human_size(bytes, out, cap);
}
