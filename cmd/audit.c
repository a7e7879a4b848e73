/* tensorgate audit verify | list: the audit log (docs/SECURITY.md, "The audit log").
 * verify recomputes the hash chain, from a server's JSON-lines export (GET /v1/audit,
 * an admin token) or offline from a data directory's catalog, and names each break;
 * list prints the records a server's filters keep. */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_record.h"
#include "catalog.h"
#include "commands.h"
#include "data_dir.h"
#include "tensorgate_client.h"

#define EXIT_BROKEN 1
#define EXIT_USAGE 2
#define EXIT_SERVER 3

static int audit_usage(FILE *out)
{
    fprintf(out,
            "usage: tensorgate audit verify [--url URL] [--token TOKEN] [--json]\n"
            "       tensorgate audit verify --data DIR\n"
            "       tensorgate audit list [--url URL] [--token TOKEN] [--json] [FILTERS]\n"
            "verify reads every record of the audit log in sequence order, from the server's\n"
            "JSON-lines export (an admin token) or, with --data, from the data directory's\n"
            "catalog (a PostgreSQL one too, through TENSORGATE_CATALOG), recomputes each\n"
            "record's SHA-256 and checks the chain: one line per break (record N edited: hash\n"
            "mismatch; record N missing: sequence gap; prev_hash mismatch at N), then a\n"
            "summary with the last seq and hash (keep them: removing the newest records\n"
            "leaves a shorter chain that still holds).\n"
            "list prints one line per record: seq, time, status, reason, token id (- when\n"
            "anonymous), action, resource. FILTERS: --since TIME --until TIME (RFC 3339),\n"
            "--actor ID|anonymous, --namespace ORG, --action 'METHOD PATTERN',\n"
            "--resource PATH-PREFIX, --status N, --outcome success|refused|failure,\n"
            "--limit N.\n"
            "--url defaults to $TENSORGATE_URL, else http://127.0.0.1:8080; --token to\n"
            "$TENSORGATE_TOKEN; --data (also --data-dir) has no default here.\n"
            "Exit status: 0 the chain holds (list: done); 1 the chain is broken, or the server\n"
            "refused; 2 usage; 3 the server or the catalog could not be read.\n");
    return out == stdout ? 0 : EXIT_USAGE;
}

enum {
    OPT_URL = 256,
    OPT_TOKEN,
    OPT_DATA,
    OPT_JSON,
    OPT_SINCE,
    OPT_UNTIL,
    OPT_ACTOR,
    OPT_NAMESPACE,
    OPT_ACTION,
    OPT_RESOURCE,
    OPT_STATUS,
    OPT_OUTCOME,
    OPT_LIMIT,
};

typedef struct audit_args {
    const char *url, *token, *data;
    bool json;
    /* the filters, as query parameters: name and value */
    const char *filter[9][2];
    size_t filters;
} audit_args;

static const struct option audit_options[] = {
    {"url", required_argument, NULL, OPT_URL},
    {"server", required_argument, NULL, OPT_URL},
    {"token", required_argument, NULL, OPT_TOKEN},
    {"data", required_argument, NULL, OPT_DATA},
    {"data-dir", required_argument, NULL, OPT_DATA},
    {"json", no_argument, NULL, OPT_JSON},
    {"since", required_argument, NULL, OPT_SINCE},
    {"until", required_argument, NULL, OPT_UNTIL},
    {"actor", required_argument, NULL, OPT_ACTOR},
    {"namespace", required_argument, NULL, OPT_NAMESPACE},
    {"action", required_argument, NULL, OPT_ACTION},
    {"resource", required_argument, NULL, OPT_RESOURCE},
    {"status", required_argument, NULL, OPT_STATUS},
    {"outcome", required_argument, NULL, OPT_OUTCOME},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* -1 to go on, else an exit status. */
static int parse_args(int argc, char **argv, audit_args *a)
{
    static const char *const names[] = {"since",    "until",  "actor",   "namespace", "action",
                                        "resource", "status", "outcome", "limit"};
    memset(a, 0, sizeof *a);
    optind = 2;
    opterr = 0;
    for (;;) {
        int opt = getopt_long(argc, argv, "h", audit_options, NULL);
        if (opt == -1)
            break;
        switch (opt) {
        case 'h':
            return audit_usage(stdout);
        case OPT_URL:
            a->url = optarg;
            break;
        case OPT_TOKEN:
            a->token = optarg;
            break;
        case OPT_DATA:
            a->data = optarg;
            break;
        case OPT_JSON:
            a->json = true;
            break;
        default:
            if (opt >= OPT_SINCE && opt <= OPT_LIMIT && a->filters < 9) {
                a->filter[a->filters][0] = names[opt - OPT_SINCE];
                a->filter[a->filters][1] = optarg;
                a->filters++;
                break;
            }
            fprintf(stderr, "tensorgate audit: unknown option or missing value\n");
            return audit_usage(stderr);
        }
    }
    if (optind != argc) {
        fprintf(stderr, "tensorgate audit: unexpected argument '%s'\n", argv[optind]);
        return audit_usage(stderr);
    }
    if (a->url == NULL)
        a->url = getenv("TENSORGATE_URL");
    if (a->url == NULL || a->url[0] == '\0')
        a->url = "http://127.0.0.1:8080";
    if (a->token == NULL)
        a->token = getenv("TENSORGATE_TOKEN");
    return -1;
}

/* ---- the chain check, over records from either source ---- */

typedef struct verify_state {
    tg_audit_chain chain;
    int64_t first_seq;
    bool json;
    bool bad_record; /* a line that is not a record */
} verify_state;

static void report(verify_state *v, const char *why)
{
    if (v->json) {
        json_t *j = json_pack("{s:s, s:s}", "break", why, "status", "broken");
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (text)
            printf("%s\n", text);
        free(text);
        json_decref(j);
    } else {
        printf("BREAK: %s\n", why);
    }
}

static void check_record(verify_state *v, const tg_audit_record *r)
{
    char why[512];
    if (v->chain.checked == 0) {
        v->first_seq = r->seq;
        if (r->seq > 1) {
            /* the log begins at 1: what comes before the first record is gone */
            if (r->seq == 2)
                snprintf(why, sizeof why,
                         "record 1 missing: sequence gap (the log begins at "
                         "record 2)");
            else
                snprintf(why, sizeof why,
                         "records 1..%" PRId64 " missing: sequence gap (the log begins at "
                         "record %" PRId64 ")",
                         r->seq - 1, r->seq);
            report(v, why);
            v->chain.breaks++;
        }
    }
    if (!tg_audit_chain_next(&v->chain, r, why, sizeof why))
        report(v, why);
}

/* A field of a JSON record into out: false when absent, not text, or too long. */
static bool take_text(const json_t *j, const char *name, char *out, size_t cap)
{
    const char *s = json_string_value(json_object_get(j, name));
    if (s == NULL || strlen(s) >= cap)
        return false;
    memcpy(out, s, strlen(s) + 1);
    return true;
}

static int on_line(void *user, const char *line, size_t len)
{
    verify_state *v = user;
    if (len == 0)
        return 0;
    json_t *j = json_loadb(line, len, 0, NULL);
    tg_audit_record r;
    memset(&r, 0, sizeof r);
    json_t *token = json_object_get(j, "token_id");
    bool ok = json_is_object(j) && json_is_integer(json_object_get(j, "seq")) &&
              json_is_integer(json_object_get(j, "status")) &&
              (json_is_null(token) || json_is_integer(token)) &&
              take_text(j, "time", r.time, sizeof r.time) &&
              take_text(j, "namespace", r.namespace_name, sizeof r.namespace_name) &&
              take_text(j, "action", r.action, sizeof r.action) &&
              take_text(j, "resource", r.resource, sizeof r.resource) &&
              take_text(j, "reason", r.reason, sizeof r.reason) &&
              take_text(j, "request_id", r.request_id, sizeof r.request_id) &&
              take_text(j, "client", r.client, sizeof r.client) &&
              take_text(j, "user_agent", r.user_agent, sizeof r.user_agent) &&
              take_text(j, "prev_hash", r.prev_hash, sizeof r.prev_hash) &&
              take_text(j, "hash", r.hash, sizeof r.hash);
    if (ok) {
        r.seq = (int64_t)json_integer_value(json_object_get(j, "seq"));
        r.status = (unsigned)json_integer_value(json_object_get(j, "status"));
        r.token_id = json_is_integer(token) ? (int64_t)json_integer_value(token) : 0;
        check_record(v, &r);
    } else {
        char why[160];
        snprintf(why, sizeof why, "a line after record %" PRId64 " is not an audit record",
                 v->chain.last_seq);
        report(v, why);
        v->chain.breaks++;
        v->bad_record = true;
    }
    json_decref(j);
    return 0;
}

static void check_visit(void *ctx, const tg_audit_record *r)
{
    check_record(ctx, r);
}

/* Every record of the data directory's catalog, a page at a time. */
static int verify_offline(const char *data, verify_state *v)
{
    tg_blobstore *blobs = NULL;
    tg_catalog *catalog = NULL;
    int opened = tg_data_open(data, &blobs, &catalog, TG_DATA_EXISTING, "audit verify", NULL);
    if (opened != 0)
        return opened == TG_EXIT_NOT_DATA_DIR ? EXIT_USAGE : EXIT_SERVER;
    tg_audit_filter f;
    memset(&f, 0, sizeof f);
    for (;;) {
        uint64_t before = v->chain.checked;
        tg_cat_status status = tg_catalog_audit_list(catalog, &f, 1000, check_visit, v);
        if (status != TG_CAT_OK) {
            fprintf(stderr, "tensorgate audit verify: the catalog failed\n");
            tg_data_close(blobs, catalog);
            return EXIT_SERVER;
        }
        if (v->chain.checked - before < 1000)
            break;
        f.after_seq = v->chain.last_seq;
    }
    tg_data_close(blobs, catalog);
    return 0;
}

static tgc_client *connect_server(const audit_args *a, const char *cmd)
{
    tgc_options o = {.base_url = a->url, .token = a->token};
    tgc_error e;
    tgc_client *c = tgc_connect(&o, &e);
    if (c == NULL)
        fprintf(stderr, "tensorgate audit %s: %s\n", cmd, e.detail);
    return c;
}

static int server_failure(const char *cmd, const tgc_error *e)
{
    fprintf(stderr, "tensorgate audit %s: %s%s%s\n", cmd, e->reason, e->detail[0] ? ": " : "",
            e->detail);
    return e->status >= 400 && e->status < 500 ? EXIT_BROKEN : EXIT_SERVER;
}

static int audit_verify(const audit_args *a)
{
    verify_state v;
    memset(&v, 0, sizeof v);
    tg_audit_chain_init(&v.chain);
    v.json = a->json;
    if (a->data != NULL) {
        int rc = verify_offline(a->data, &v);
        if (rc != 0)
            return rc;
    } else {
        tgc_client *c = connect_server(a, "verify");
        if (c == NULL)
            return EXIT_USAGE;
        tgc_error e;
        int rc = tgc_get_lines(c, "/v1/audit?format=jsonl", on_line, &v, &e);
        tgc_close(c);
        if (rc != 0)
            return server_failure("verify", &e);
    }
    bool holds = v.chain.breaks == 0;
    if (a->json) {
        json_t *j = json_pack("{s:s, s:I, s:I, s:I, s:s, s:I}", "status", holds ? "ok" : "broken",
                              "records", (json_int_t)v.chain.checked, "first_seq",
                              (json_int_t)v.first_seq, "last_seq", (json_int_t)v.chain.last_seq,
                              "last_hash", v.chain.last_hash, "breaks", (json_int_t)v.chain.breaks);
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (text)
            printf("%s\n", text);
        free(text);
        json_decref(j);
    } else if (v.chain.checked == 0) {
        printf("the audit log is empty\n");
    } else {
        printf("%" PRIu64 " records, seq %" PRId64 "..%" PRId64 ", last hash %s: %s\n",
               v.chain.checked, v.first_seq, v.chain.last_seq, v.chain.last_hash,
               holds ? "the chain holds" : "the chain is BROKEN");
        if (!holds)
            printf("%" PRIu64 " break%s\n", v.chain.breaks, v.chain.breaks == 1 ? "" : "s");
    }
    return holds ? 0 : EXIT_BROKEN;
}

/* ---- list ---- */

static int print_line(void *user, const char *line, size_t len)
{
    const audit_args *a = user;
    if (a->json) {
        printf("%.*s\n", (int)len, line);
        return 0;
    }
    json_t *j = json_loadb(line, len, 0, NULL);
    if (j == NULL)
        return 0;
    json_t *token = json_object_get(j, "token_id");
    const char *reason = json_string_value(json_object_get(j, "reason"));
    char actor[32] = "-";
    if (json_is_integer(token))
        snprintf(actor, sizeof actor, "%" JSON_INTEGER_FORMAT, json_integer_value(token));
    printf("%" JSON_INTEGER_FORMAT "\t%s\t%" JSON_INTEGER_FORMAT "\t%s\t%s\t%s\t%s\n",
           json_integer_value(json_object_get(j, "seq")),
           json_string_value(json_object_get(j, "time")),
           json_integer_value(json_object_get(j, "status")), reason && reason[0] ? reason : "-",
           actor, json_string_value(json_object_get(j, "action")),
           json_string_value(json_object_get(j, "resource")));
    json_decref(j);
    return 0;
}

/* Appends value percent-encoded to out at *used. */
static void add_encoded(char *out, size_t cap, size_t *used, const char *value)
{
    for (const unsigned char *p = (const unsigned char *)value; *p && *used + 4 < cap; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~", *p) != NULL)
            out[(*used)++] = (char)*p;
        else
            *used += (size_t)snprintf(out + *used, cap - *used, "%%%02X", *p);
    }
    out[*used] = '\0';
}

static int audit_list(const audit_args *a)
{
    char path[8192] = "/v1/audit?format=jsonl";
    size_t used = strlen(path);
    for (size_t i = 0; i < a->filters; i++) {
        used += (size_t)snprintf(path + used, sizeof path - used, "&%s=", a->filter[i][0]);
        if (used >= sizeof path - 4) {
            fprintf(stderr, "tensorgate audit list: the filters are too long\n");
            return EXIT_USAGE;
        }
        add_encoded(path, sizeof path, &used, a->filter[i][1]);
    }
    tgc_client *c = connect_server(a, "list");
    if (c == NULL)
        return EXIT_USAGE;
    tgc_error e;
    int rc = tgc_get_lines(c, path, print_line, (void *)a, &e);
    tgc_close(c);
    return rc == 0 ? 0 : server_failure("list", &e);
}

int tg_cmd_audit(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return audit_usage(argc < 2 ? stderr : stdout);
    bool verify = strcmp(argv[1], "verify") == 0;
    if (!verify && strcmp(argv[1], "list") != 0) {
        fprintf(stderr, "tensorgate audit: unknown subcommand '%s'\n", argv[1]);
        return audit_usage(stderr);
    }
    audit_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    if (!verify && a.data != NULL) {
        fprintf(stderr, "tensorgate audit list: reads a server (--url), not --data\n");
        return EXIT_USAGE;
    }
    if (verify && a.filters > 0) {
        fprintf(stderr, "tensorgate audit verify: checks the whole log; filters are for list\n");
        return EXIT_USAGE;
    }
    return verify ? audit_verify(&a) : audit_list(&a);
}
