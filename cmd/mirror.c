/* tensorgate mirror ENDPOINT REPO[@REVISION] ORG/NAME: asks a server to mirror a Hub
 * repository (POST /v1/models/{org}/{name}/mirror, server/jobs/mirror_job.h), then
 * waits for the job (GET /v1/jobs/{id}, once a second) and prints what was fetched,
 * copied and refused, and the version it published. The upstream token is read
 * from the environment variable --upstream-token-env names, never from the command
 * line (where other users' ps would see it), and is never printed.
 * Exit status: 0 published (or already mirrored); 1 the server or the gate refused
 * (a 4xx answer, a failed job: refused files, a forbidden address); 2 usage; 3 the
 * server or the upstream could not be reached or failed. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "tensorgate_client.h"

#define EXIT_REFUSED 1
#define EXIT_USAGE 2
#define EXIT_SERVER 3

static const char help[] =
    "usage: tensorgate mirror [OPTIONS] ENDPOINT REPO[@REVISION] ORG/NAME\n"
    "Mirror the Hub repository REPO (at REVISION, default main) of ENDPOINT (e.g.\n"
    "https://huggingface.co) into a new published version of ORG/NAME on the server:\n"
    "every file goes through the gate; a mirror again fetches only what changed.\n"
    "  --allow-partial           publish without the files the gate refuses (listed)\n"
    "  --upstream-token-env VAR  send the upstream the token in $VAR\n"
    "  --no-wait                 print the queued job and return\n"
    "  --url URL       the server (default $TENSORGATE_URL, else http://127.0.0.1:8080)\n"
    "  --token TOKEN   sent as a bearer token (default $TENSORGATE_TOKEN)\n"
    "  --json          print the job as JSON\n"
    "  --help          this text\n"
    "Exit status: 0 published or already mirrored; 1 refused (4xx, or the job failed:\n"
    "refused files, a forbidden address); 2 usage; 3 the server or the upstream failed.\n";

static int exit_for(const tgc_error *e)
{
    if (e->status >= 500 || strcmp(e->reason, TGC_REASON_CONNECTION) == 0 ||
        strcmp(e->reason, TGC_REASON_BAD_ANSWER) == 0)
        return EXIT_SERVER;
    return e->status >= 400 ? EXIT_REFUSED : EXIT_USAGE;
}

static const char *text(json_t *object, const char *key)
{
    const char *s = json_string_value(json_object_get(object, key));
    return s != NULL ? s : "-";
}

static void print_job(json_t *job, bool as_json)
{
    if (as_json) {
        char *s = json_dumps(job, JSON_COMPACT | JSON_ENSURE_ASCII);
        if (s != NULL)
            puts(s);
        free(s);
        return;
    }
    json_t *result = json_object_get(job, "result");
    size_t i;
    json_t *file;
    json_array_foreach(json_object_get(result, "files"), i, file)
    {
        const char *action = text(file, "action");
        if (strcmp(action, "refused") == 0)
            printf("refused  %s: %s: %s\n", text(file, "path"), text(file, "reason"),
                   text(file, "detail"));
        else
            printf("%-8s %s (%lld bytes)\n", action, text(file, "path"),
                   (long long)json_integer_value(json_object_get(file, "size")));
    }
    const char *state = text(job, "state");
    if (strcmp(state, "done") == 0) {
        bool already = json_is_true(json_object_get(result, "already_mirrored"));
        printf("%s %s@%s (commit %s) %s version %lld\n", already ? "already mirrored" : "mirrored",
               text(result, "repo"), text(result, "revision"), text(result, "commit"),
               already ? "as" : "into",
               (long long)json_integer_value(json_object_get(job, "version")));
    } else if (strcmp(state, "failed") == 0) {
        json_t *error = json_object_get(job, "error");
        fprintf(stderr, "tensorgate mirror: failed: %s: %s\n", text(error, "reason"),
                text(error, "detail"));
    } else {
        printf("job %lld %s\n", (long long)json_integer_value(json_object_get(job, "id")), state);
    }
}

int tg_cmd_mirror(int argc, char **argv)
{
    enum { OPT_URL = 256, OPT_TOKEN, OPT_JSON, OPT_PARTIAL, OPT_TOKEN_ENV, OPT_NO_WAIT, OPT_HELP };
    static const struct option options[] = {
        {"url", required_argument, NULL, OPT_URL},
        {"token", required_argument, NULL, OPT_TOKEN},
        {"json", no_argument, NULL, OPT_JSON},
        {"allow-partial", no_argument, NULL, OPT_PARTIAL},
        {"upstream-token-env", required_argument, NULL, OPT_TOKEN_ENV},
        {"no-wait", no_argument, NULL, OPT_NO_WAIT},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    const char *url = NULL, *token = NULL, *token_env = NULL;
    bool as_json = false, partial = false, wait = true;
    optind = 1;
    int opt;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (opt) {
        case OPT_URL:
            url = optarg;
            break;
        case OPT_TOKEN:
            token = optarg;
            break;
        case OPT_JSON:
            as_json = true;
            break;
        case OPT_PARTIAL:
            partial = true;
            break;
        case OPT_TOKEN_ENV:
            token_env = optarg;
            break;
        case OPT_NO_WAIT:
            wait = false;
            break;
        case OPT_HELP:
            fputs(help, stdout);
            return 0;
        default:
            fputs(help, stderr);
            return EXIT_USAGE;
        }
    }
    if (argc - optind != 3) {
        fputs(help, stderr);
        return EXIT_USAGE;
    }
    const char *endpoint = argv[optind], *ref = argv[optind + 1], *model = argv[optind + 2];
    char repo[256], revision[256] = "main";
    const char *at = strrchr(ref, '@');
    size_t repo_len = at ? (size_t)(at - ref) : strlen(ref);
    if (repo_len == 0 || repo_len >= sizeof repo ||
        (at && (at[1] == '\0' || strlen(at + 1) >= sizeof revision))) {
        fprintf(stderr, "tensorgate mirror: REPO[@REVISION] is malformed: %s\n", ref);
        return EXIT_USAGE;
    }
    memcpy(repo, ref, repo_len);
    repo[repo_len] = '\0';
    if (at)
        snprintf(revision, sizeof revision, "%s", at + 1);
    const char *upstream_token = NULL;
    if (token_env != NULL) {
        upstream_token = getenv(token_env);
        if (upstream_token == NULL || upstream_token[0] == '\0') {
            fprintf(stderr, "tensorgate mirror: $%s is not set\n", token_env);
            return EXIT_USAGE;
        }
    }
    if (url == NULL)
        url = getenv("TENSORGATE_URL");
    if (url == NULL || url[0] == '\0')
        url = "http://127.0.0.1:8080";
    if (token == NULL)
        token = getenv("TENSORGATE_TOKEN");
    tgc_options o = {.base_url = url, .token = token};
    tgc_error e;
    tgc_client *c = tgc_connect(&o, &e);
    if (c == NULL) {
        fprintf(stderr, "tensorgate mirror: %s\n", e.detail);
        return exit_for(&e);
    }
    json_t *body = json_pack("{s:s, s:s, s:s, s:b}", "endpoint", endpoint, "repo", repo, "revision",
                             revision, "allow_partial", partial);
    if (body != NULL && upstream_token != NULL)
        json_object_set_new(body, "token", json_string(upstream_token));
    json_t *job = NULL;
    int status = 0;
    if (body == NULL || tgc_mirror(c, model, body, &job, &e) != 0) {
        fprintf(stderr, "tensorgate mirror: %s: %s\n", body ? e.reason : "memory",
                body ? e.detail : "out of memory");
        status = body ? exit_for(&e) : EXIT_USAGE;
        goto out;
    }
    long long id = (long long)json_integer_value(json_object_get(job, "id"));
    while (wait) {
        const char *state = text(job, "state");
        if (strcmp(state, "done") == 0 || strcmp(state, "failed") == 0)
            break;
        sleep(1);
        json_t *next = NULL;
        if (tgc_get_job(c, id, &next, &e) != 0) {
            fprintf(stderr, "tensorgate mirror: job %lld: %s: %s\n", id, e.reason, e.detail);
            status = exit_for(&e);
            goto out;
        }
        json_decref(job);
        job = next;
    }
    print_job(job, as_json);
    if (strcmp(text(job, "state"), "failed") == 0) {
        const char *reason = text(json_object_get(job, "error"), "reason");
        status =
            strncmp(reason, "mirror_upstream_", 16) == 0 || strcmp(reason, "internal_error") == 0
                ? EXIT_SERVER
                : EXIT_REFUSED;
    }
out:
    json_decref(job);
    json_decref(body);
    tgc_close(c);
    return status;
}
