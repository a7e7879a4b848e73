/* Every route x every token kind: a table with one row per operation of
 * openapi.yaml (an operation without a row, or a row without an operation, fails),
 * what each needs read from the contract the server serves (GET /openapi.yaml: each
 * operation's x-tensorgate-scope), never from the routing table under test,
 * each tried with no token, a token never issued, a revoked admin token, an
 * unlimited read token, a read, a write and an admin token of another namespace, a
 * write token of the namespace and an unlimited admin token, first with open reads and then under
 * --auth-read (same data). Each attempt must get exactly the status the contract names: 401
 * unauthorized (with WWW-Authenticate: Bearer) where a token is needed and missing or revoked, 403
 * forbidden for too little scope or another namespace (on a Hub route: 404 model_not_found, as a
 * model that does not exist), the route's 2xx otherwise.
 * A refused write must leave what it aimed at as it was (an admin GET of it, the
 * probe, answers the same before and after). Lists under --auth-read keep a token
 * limited to another namespace to that namespace. The preload socket's hand-off is
 * tried with the same kinds of token. */
#include <sys/un.h>

#include "harness.h"
#include "tg_preload_client.h"

typedef enum kind {
    K_NONE,
    K_UNKNOWN,
    K_REVOKED,
    K_READ,
    K_READ_OTHER,
    K_WRITE_OTHER,
    K_WRITE,
    K_ADMIN_OTHER,
    K_ADMIN,
    K_COUNT
} kind;

static const char *const kind_names[K_COUNT] = {"no token",
                                                "unknown token",
                                                "revoked admin token",
                                                "read token",
                                                "read token of 'other'",
                                                "write token of 'other'",
                                                "write token of 'acme'",
                                                "admin token of 'other'",
                                                "admin token"};
static char tokens[K_COUNT][128];

/* What a route needs (docs/DESIGN.md §7, openapi.yaml's Auth paragraph), as the
 * contract's scope of the operation says (need_from_scope). */
typedef enum need {
    N_OPEN,       /* service routes: never a token */
    N_READ,       /* read scope on the org; open unless --auth-read */
    N_HUB_READ,   /* N_READ on a Hub route: another namespace's token gets 404 model_not_found */
    N_LIST,       /* read scope, any namespace, the list kept to the token's namespace */
    N_READ_ANY,   /* read scope, no org (POST /v1/scan) */
    N_TOKEN,      /* any valid token, always (GET /api/whoami-v2) */
    N_WRITE,      /* write scope on the org */
    N_ADMIN,      /* admin scope */
    N_ADMIN_LIST, /* admin scope, any namespace, the list kept to the token's namespace */
    N_UNKNOWN     /* the contract names no scope this test knows */
} need;

/* How a refused write is shown to have changed nothing. */
typedef enum probe_kind { P_NONE, P_BODY, P_STATUS, P_COUNT } probe_kind;

typedef struct attempt {
    char path[512];
    char body[512];
    char probe[512];
    char count_key[32]; /* P_COUNT: the array counted */
} attempt;

typedef struct row {
    const char *method;
    const char *op; /* the path as openapi.yaml writes it */
    int ok;         /* the status when allowed */
    int ok_alt;     /* another allowed status, or 0 */
    const char *path;
    enum { B_NONE, B_JSON, B_MODEL } body_kind;
    const char *body;
    probe_kind probe;
    void (*prepare)(attempt *a); /* a fresh target for this attempt (admin token) */
    bool seen;                   /* the document has this operation */
} row;

static it_buf model_file;
static char job_id[32];
static char preload_id[32];
static char draft_w[16]; /* a draft of acme/w that the file rows write into */
static int serial;
static bool auth_read;
static char socket_path[100];

static const char *admin(void)
{
    return tokens[K_ADMIN];
}

static void must(it_response r, int status, const char *what)
{
    if (r.status != status)
        fprintf(stderr, "setup: %s -> %ld: %.300s\n", what, r.status,
                r.body.data ? (const char *)r.body.data : "");
    CHECK_STATUS(r, status);
}

static void put_file(const char *model, const char *version, const char *path, const void *data,
                     size_t len)
{
    char url[512];
    snprintf(url, sizeof url, "/v1/models/%s/versions/%s/files/%s", model, version, path);
    it_response r = it_send("PUT", url, admin(), data, len);
    must(r, 201, url);
    it_response_free(&r);
}

static void create_model(const char *name)
{
    char body[200];
    snprintf(body, sizeof body, "{\"name\":\"%s\"}", name);
    it_response r = it_send_json("POST", "/v1/models", admin(), body);
    must(r, 201, body);
    it_response_free(&r);
}

/* A new draft of model; its number goes to out. */
static void create_draft(const char *model, char *out, size_t cap)
{
    char url[300];
    snprintf(url, sizeof url, "/v1/models/%s/versions", model);
    it_response r = it_send("POST", url, admin(), NULL, 0);
    must(r, 201, url);
    snprintf(out, cap, "%lld", r.json ? it_json_int(r.json, "version") : -1);
    it_response_free(&r);
}

/* model with version 1 published: model.safetensors (tensor w), sub/config.json and a
 * README.md (the card). */
static void create_published(const char *model)
{
    create_model(model);
    char v[16];
    create_draft(model, v, sizeof v);
    put_file(model, v, "model.safetensors", model_file.data, model_file.len);
    static const char sidecar[] = "{\"model_type\":\"authz\"}";
    put_file(model, v, "sub/config.json", sidecar, strlen(sidecar));
    static const char readme[] = "---\nlicense: mit\n---\n# authz\n";
    put_file(model, v, "README.md", readme, strlen(readme));
    char url[300];
    snprintf(url, sizeof url, "/v1/models/%s/versions/%s/publish", model, v);
    it_response r = it_send("POST", url, admin(), NULL, 0);
    must(r, 200, url);
    it_response_free(&r);
}

static bool wait_json_state(const char *path, const char *want)
{
    for (int i = 0; i < 500; i++) {
        it_response r = it_request("GET", path, &(it_request_opts){.token = admin()});
        const char *state = it_json_str(&r, "state");
        bool done = r.status == 200 && state != NULL && strcmp(state, want) == 0;
        it_response_free(&r);
        if (done)
            return true;
        usleep(20 * 1000);
    }
    fprintf(stderr, "setup: %s never reached state %s\n", path, want);
    return false;
}

/* A host preload of acme/m's tensor w, resident; its id goes to out (17 bytes). */
static void create_preload(char *out)
{
    it_response r = it_send_json("POST", "/v1/preloads", admin(),
                                 "{\"model\":\"acme/m\",\"version\":1,\"device\":\"host\","
                                 "\"tensors\":[\"w\"]}");
    must(r, 202, "POST /v1/preloads");
    const char *id = it_json_str(&r, "id");
    snprintf(out, 17, "%s", id ? id : "");
    it_response_free(&r);
    char path[64];
    snprintf(path, sizeof path, "/v1/preloads/%s", out);
    CHECK(wait_json_state(path, "resident"));
}

/* ---- fresh targets for the writes ---- */

static void prep_model_create(attempt *a)
{
    snprintf(a->body, sizeof a->body, "{\"name\":\"acme/new-%d\"}", ++serial);
    snprintf(a->probe, sizeof a->probe, "/v1/models/acme/new-%d", serial);
}

static void prep_model_delete(attempt *a)
{
    char name[64];
    snprintf(name, sizeof name, "acme/del-%d", ++serial);
    create_model(name);
    snprintf(a->path, sizeof a->path, "/v1/models/%s", name);
    snprintf(a->probe, sizeof a->probe, "/v1/models/%s", name);
}

static void prep_publish(attempt *a)
{
    char v[16];
    create_draft("acme/w", v, sizeof v);
    put_file("acme/w", v, "model.safetensors", model_file.data, model_file.len);
    snprintf(a->path, sizeof a->path, "/v1/models/acme/w/versions/%s/publish", v);
    snprintf(a->probe, sizeof a->probe, "/v1/models/acme/w/versions/%s", v);
}

/* a new tag value each time: an allowed PATCH changes the model, a refused one must not */
static void prep_model_patch(attempt *a)
{
    snprintf(a->path, sizeof a->path, "/v1/models/acme/w");
    snprintf(a->body, sizeof a->body, "{\"tags\":{\"authz\":\"v%d\"}}", ++serial);
}

static void prep_version_patch(attempt *a)
{
    snprintf(a->path, sizeof a->path, "/v1/models/acme/w/versions/%s", draft_w);
    snprintf(a->probe, sizeof a->probe, "/v1/models/acme/w/versions/%s", draft_w);
    snprintf(a->body, sizeof a->body, "{\"description\":\"d%d\",\"tags\":{\"n\":\"%d\"}}",
             serial + 1, serial + 1);
    serial++;
}

/* a new published version of acme/w; its number goes to out */
static void publish_w(char *v, size_t cap)
{
    create_draft("acme/w", v, cap);
    put_file("acme/w", v, "model.safetensors", model_file.data, model_file.len);
    char url[300];
    snprintf(url, sizeof url, "/v1/models/acme/w/versions/%s/publish", v);
    it_response r = it_send("POST", url, admin(), NULL, 0);
    must(r, 200, url);
    it_response_free(&r);
}

/* a write token deletes a draft (a published version needs admin: tests/integration/lifecycle.c) */
static void prep_version_delete(attempt *a)
{
    char v[16];
    create_draft("acme/w", v, sizeof v);
    snprintf(a->path, sizeof a->path, "/v1/models/acme/w/versions/%s", v);
    snprintf(a->probe, sizeof a->probe, "/v1/models/acme/w/versions/%s", v);
}

static void prep_deprecate(attempt *a)
{
    char v[16];
    publish_w(v, sizeof v);
    snprintf(a->path, sizeof a->path, "/v1/models/acme/w/versions/%s/deprecation", v);
    snprintf(a->probe, sizeof a->probe, "/v1/models/acme/w/versions/%s", v);
}

static void prep_undeprecate(attempt *a)
{
    prep_deprecate(a);
    it_response r = it_send_json("PUT", a->path, admin(), "{\"reason\":\"matrix\"}");
    must(r, 200, a->path);
    it_response_free(&r);
}

static void prep_alias_delete(attempt *a)
{
    snprintf(a->path, sizeof a->path, "/v1/models/acme/w/aliases/d%d", ++serial);
    it_response r = it_send_json("PUT", a->path, admin(), "{\"version\":1}");
    must(r, 200, a->path);
    it_response_free(&r);
    snprintf(a->probe, sizeof a->probe, "/v1/models/acme/w/versions/d%d", serial);
}

static void prep_alias(attempt *a)
{
    snprintf(a->path, sizeof a->path, "/v1/models/acme/w/aliases/a%d", ++serial);
}

static void prep_file_put(attempt *a)
{
    snprintf(a->path, sizeof a->path, "/v1/models/acme/w/versions/%s/files/up-%d.safetensors",
             draft_w, ++serial);
}

static void prep_file_delete(attempt *a)
{
    char path[64];
    snprintf(path, sizeof path, "del-%d.safetensors", ++serial);
    put_file("acme/w", draft_w, path, model_file.data, model_file.len);
    snprintf(a->path, sizeof a->path, "/v1/models/acme/w/versions/%s/files/%s", draft_w, path);
}

/* ---- the Hub's write routes ---- */

static void prep_hub_create(attempt *a)
{
    snprintf(a->body, sizeof a->body, "{\"name\":\"hc-%d\",\"organization\":\"acme\"}", ++serial);
    snprintf(a->probe, sizeof a->probe, "/v1/models/acme/hc-%d", serial);
}

static void prep_hub_delete(attempt *a)
{
    char name[64];
    snprintf(name, sizeof name, "acme/hd-%d", ++serial);
    create_model(name);
    snprintf(a->body, sizeof a->body, "{\"name\":\"hd-%d\",\"organization\":\"acme\"}", serial);
    snprintf(a->probe, sizeof a->probe, "/v1/models/%s", name);
}

static void prep_hub_branch(attempt *a)
{
    snprintf(a->path, sizeof a->path, "/api/models/acme/w/branch/hb-%d", ++serial);
}

static void prep_hub_branch_delete(attempt *a)
{
    snprintf(a->path, sizeof a->path, "/api/models/acme/w/branch/hbd-%d", ++serial);
    it_response r = it_send_json("POST", a->path, admin(), "{}");
    must(r, 200, a->path);
    it_response_free(&r);
}

static void prep_hub_tag(attempt *a)
{
    snprintf(a->body, sizeof a->body, "{\"tag\":\"ht-%d\"}", ++serial);
}

static void prep_hub_tag_delete(attempt *a)
{
    snprintf(a->body, sizeof a->body, "{\"tag\":\"htd-%d\"}", ++serial);
    it_response r = it_send_json("POST", "/api/models/acme/w/tag/1", admin(), a->body);
    must(r, 200, a->body);
    it_response_free(&r);
    snprintf(a->path, sizeof a->path, "/api/models/acme/w/tag/htd-%d", serial);
    a->body[0] = '\0';
}

static void prep_hub_verify(attempt *a)
{
    char sha[65];
    it_sha256_hex(model_file.data, model_file.len, sha);
    snprintf(a->body, sizeof a->body, "{\"oid\":\"%s\",\"size\":%zu}", sha, model_file.len);
}

/* an import into the draft: a name that resolves to loopback, so the queued job
 * fails at once at its connect (the default policy) */
static void prep_import(attempt *a)
{
    snprintf(a->path, sizeof a->path,
             "/v1/models/acme/w/versions/%s/files/imp-%d.safetensors/import", draft_w, ++serial);
    snprintf(a->probe, sizeof a->probe, "/v1/jobs?model=acme/w&limit=1000");
    snprintf(a->count_key, sizeof a->count_key, "jobs");
}

static void prep_mirror(attempt *a)
{
    snprintf(a->path, sizeof a->path, "/v1/models/acme/w/mirror");
    snprintf(a->probe, sizeof a->probe, "/v1/jobs?model=acme/w&limit=1000");
    snprintf(a->count_key, sizeof a->count_key, "jobs");
}

static void prep_preload_delete(attempt *a)
{
    char id[17];
    create_preload(id);
    snprintf(a->path, sizeof a->path, "/v1/preloads/%s", id);
    snprintf(a->probe, sizeof a->probe, "/v1/preloads/%s", id);
}

/* ---- webhooks: the fixture subscription of acme asks for signature.invalid, which
 * nothing here sends, so only pings make deliveries (to a name that resolves to
 * loopback: refused at connect, retried much later) ---- */
static char hook_id[32];
static char delivery_id[32];
#define HOOKS "/v1/namespaces/acme/webhooks"
#define HOOK_BODY "{\"url\":\"http://localhost:1/hook\",\"events\":[\"signature.invalid\"]}"

static char *make_hook(char *out, size_t cap)
{
    it_response r = it_send_json("POST", HOOKS, admin(), HOOK_BODY);
    must(r, 201, "POST " HOOKS);
    snprintf(out, cap, "%lld", r.json ? it_json_int(r.json, "id") : -1);
    it_response_free(&r);
    return out;
}

static void prep_hook_create(attempt *a)
{
    snprintf(a->probe, sizeof a->probe, HOOKS);
    snprintf(a->count_key, sizeof a->count_key, "webhooks");
}

static void prep_hook(attempt *a)
{
    snprintf(a->path, sizeof a->path, HOOKS "/%s", hook_id);
    snprintf(a->probe, sizeof a->probe, HOOKS "/%s", hook_id);
}

static void prep_hook_delete(attempt *a)
{
    char id[32];
    make_hook(id, sizeof id);
    snprintf(a->path, sizeof a->path, HOOKS "/%s", id);
    snprintf(a->probe, sizeof a->probe, HOOKS "/%s", id);
}

static void prep_hook_ping(attempt *a)
{
    snprintf(a->path, sizeof a->path, HOOKS "/%s/ping", hook_id);
    snprintf(a->probe, sizeof a->probe, HOOKS "/%s/deliveries", hook_id);
    snprintf(a->count_key, sizeof a->count_key, "deliveries");
}

static void prep_hook_deliveries(attempt *a)
{
    snprintf(a->path, sizeof a->path, HOOKS "/%s/deliveries", hook_id);
}

static void prep_hook_delivery(attempt *a)
{
    snprintf(a->path, sizeof a->path, HOOKS "/%s/deliveries/%s", hook_id, delivery_id);
    snprintf(a->probe, sizeof a->probe, HOOKS "/%s/deliveries/%s", hook_id, delivery_id);
}

static void prep_hook_redeliver(attempt *a)
{
    prep_hook_delivery(a);
    snprintf(a->path, sizeof a->path, HOOKS "/%s/deliveries/%s/redeliver", hook_id, delivery_id);
}

static void prep_job(attempt *a)
{
    snprintf(a->path, sizeof a->path, "/v1/jobs/%s", job_id);
}

static void prep_preload(attempt *a)
{
    snprintf(a->path, sizeof a->path, "/v1/preloads/%s", preload_id);
}

#define M "/v1/models/acme/m"
#define V "/v1/models/{org}/{name}/versions/{rev}"

/* One row per operation of openapi.yaml. acme/m is the read fixture (version 1
 * published); acme/w takes the writes; acme/cv the conversions. A probe with no
 * prepare is the row's fixed probe path (the prepare may set its own). */
static row rows[] = {
    {"GET", "/v1/models", 200, 0, "/v1/models", B_NONE, NULL, P_NONE, NULL, false},
    {"POST", "/v1/models", 201, 0, "/v1/models", B_JSON, NULL, P_BODY, prep_model_create, false},
    {"GET", "/v1/models/{org}/{name}", 200, 0, M, B_NONE, NULL, P_NONE, NULL, false},
    {"DELETE", "/v1/models/{org}/{name}", 204, 0, NULL, B_NONE, NULL, P_BODY, prep_model_delete,
     false},
    {"PATCH", "/v1/models/{org}/{name}", 200, 0, NULL, B_JSON, NULL, P_BODY, prep_model_patch,
     false},
    {"PATCH", V, 200, 0, NULL, B_JSON, NULL, P_BODY, prep_version_patch, false},
    {"POST", "/v1/models/{org}/{name}/versions", 201, 0, "/v1/models/acme/w/versions", B_NONE, NULL,
     P_BODY, NULL, false},
    {"GET", V, 200, 0, M "/versions/1", B_NONE, NULL, P_NONE, NULL, false},
    {"POST", V "/publish", 200, 0, NULL, B_NONE, NULL, P_BODY, prep_publish, false},
    {"DELETE", V, 204, 0, NULL, B_NONE, NULL, P_STATUS, prep_version_delete, false},
    {"PUT", V "/deprecation", 200, 0, NULL, B_JSON, "{\"reason\":\"old\"}", P_BODY, prep_deprecate,
     false},
    {"DELETE", V "/deprecation", 200, 0, NULL, B_NONE, NULL, P_BODY, prep_undeprecate, false},
    {"DELETE", "/v1/models/{org}/{name}/aliases/{alias}", 204, 0, NULL, B_NONE, NULL, P_STATUS,
     prep_alias_delete, false},
    {"GET", "/v1/namespaces/{org}", 200, 0, "/v1/namespaces/acme", B_NONE, NULL, P_NONE, NULL,
     false},
    {"PUT", "/v1/namespaces/{org}/quota", 200, 0, "/v1/namespaces/acme/quota", B_JSON,
     "{\"quota_bytes\":null}", P_BODY, NULL, false},
    {"PUT", "/v1/models/{org}/{name}/aliases/{alias}", 200, 0, NULL, B_JSON, "{\"version\":1}",
     P_BODY, prep_alias, false},
    {"GET", V "/files", 200, 0, M "/versions/1/files", B_NONE, NULL, P_NONE, NULL, false},
    {"PUT", V "/files/{path}", 201, 0, NULL, B_MODEL, NULL, P_BODY, prep_file_put, false},
    {"GET", V "/files/{path}", 200, 0, M "/versions/1/files/model.safetensors", B_NONE, NULL,
     P_NONE, NULL, false},
    {"HEAD", V "/files/{path}", 200, 0, M "/versions/1/files/model.safetensors", B_NONE, NULL,
     P_NONE, NULL, false},
    {"DELETE", V "/files/{path}", 204, 0, NULL, B_NONE, NULL, P_BODY, prep_file_delete, false},
    {"POST", V "/files/{path}/import", 202, 0, NULL, B_JSON,
     "{\"url\":\"http://localhost:1/x.safetensors\"}", P_COUNT, prep_import, false},
    /* a mirror: a name that resolves to loopback, so the queued job fails at once */
    {"POST", "/v1/models/{org}/{name}/mirror", 202, 0, "/v1/jobs?model=acme/w&limit=1000", B_JSON,
     "{\"endpoint\":\"http://localhost:1\",\"repo\":\"up/m\"}", P_COUNT, prep_mirror, false},
    {"GET", V "/files/{path}/header", 200, 0, M "/versions/1/files/model.safetensors/header",
     B_NONE, NULL, P_NONE, NULL, false},
    {"GET", V "/card", 200, 0, M "/versions/1/card", B_NONE, NULL, P_NONE, NULL, false},
    {"GET", V "/tensors", 200, 0, M "/versions/1/tensors", B_NONE, NULL, P_NONE, NULL, false},
    {"GET", V "/tensors/{tensor}", 200, 0, M "/versions/1/tensors/w", B_NONE, NULL, P_NONE, NULL,
     false},
    {"HEAD", V "/tensors/{tensor}", 200, 0, M "/versions/1/tensors/w", B_NONE, NULL, P_NONE, NULL,
     false},
    {"GET", V "/bundle", 200, 0, M "/versions/1/bundle?tensors=w", B_NONE, NULL, P_NONE, NULL,
     false},
    {"HEAD", V "/bundle", 200, 0, M "/versions/1/bundle?tensors=w", B_NONE, NULL, P_NONE, NULL,
     false},
    {"POST", V "/bundle", 200, 0, M "/versions/1/bundle", B_JSON, "{\"tensors\":[\"w\"]}", P_NONE,
     NULL, false},
    {"POST", V "/convert", 202, 0, "/v1/models/acme/cv/versions/1/convert", B_JSON,
     "{\"dtype\":\"F16\"}", P_COUNT, NULL, false},
    {"GET", "/v1/jobs", 200, 0, "/v1/jobs", B_NONE, NULL, P_NONE, NULL, false},
    {"GET", "/v1/jobs/{id}", 200, 0, NULL, B_NONE, NULL, P_NONE, prep_job, false},
    /* the job is done: an allowed cancel is 409 job_finished (after the token check) */
    {"DELETE", "/v1/jobs/{id}", 409, 0, NULL, B_NONE, NULL, P_BODY, prep_job, false},
    {"POST", "/v1/preloads", 202, 0, "/v1/preloads", B_JSON,
     "{\"model\":\"acme/m\",\"version\":1,\"device\":\"host\",\"tensors\":[\"w\"]}", P_COUNT, NULL,
     false},
    {"GET", "/v1/preloads", 200, 0, "/v1/preloads", B_NONE, NULL, P_NONE, NULL, false},
    {"GET", "/v1/preloads/{id}", 200, 0, NULL, B_NONE, NULL, P_NONE, prep_preload, false},
    {"DELETE", "/v1/preloads/{id}", 204, 202, NULL, B_NONE, NULL, P_STATUS, prep_preload_delete,
     false},
    {"POST", "/v1/scan", 200, 0, "/v1/scan", B_MODEL, NULL, P_NONE, NULL, false},
    {"GET", "/v1/rejections", 200, 0, "/v1/rejections", B_NONE, NULL, P_NONE, NULL, false},
    {"GET", "/v1/audit", 200, 0, "/v1/audit", B_NONE, NULL, P_NONE, NULL, false},
    {"POST", "/v1/namespaces/{org}/webhooks", 201, 0, HOOKS, B_JSON, HOOK_BODY, P_COUNT,
     prep_hook_create, false},
    {"GET", "/v1/namespaces/{org}/webhooks", 200, 0, HOOKS, B_NONE, NULL, P_NONE, NULL, false},
    {"GET", "/v1/namespaces/{org}/webhooks/{id}", 200, 0, NULL, B_NONE, NULL, P_NONE, prep_hook,
     false},
    {"PATCH", "/v1/namespaces/{org}/webhooks/{id}", 200, 0, NULL, B_JSON,
     "{\"url\":\"http://localhost:2/hook\"}", P_BODY, prep_hook, false},
    {"DELETE", "/v1/namespaces/{org}/webhooks/{id}", 204, 0, NULL, B_NONE, NULL, P_STATUS,
     prep_hook_delete, false},
    {"POST", "/v1/namespaces/{org}/webhooks/{id}/ping", 202, 0, NULL, B_NONE, NULL, P_COUNT,
     prep_hook_ping, false},
    {"GET", "/v1/namespaces/{org}/webhooks/{id}/deliveries", 200, 0, NULL, B_NONE, NULL, P_NONE,
     prep_hook_deliveries, false},
    {"GET", "/v1/namespaces/{org}/webhooks/{id}/deliveries/{delivery}", 200, 0, NULL, B_NONE, NULL,
     P_NONE, prep_hook_delivery, false},
    {"POST", "/v1/namespaces/{org}/webhooks/{id}/deliveries/{delivery}/redeliver", 202, 0, NULL,
     B_NONE, NULL, P_STATUS, prep_hook_redeliver, false},
    {"GET", "/v1/namespaces/{org}/policy", 200, 0, "/v1/namespaces/acme/policy", B_NONE, NULL,
     P_NONE, NULL, false},
    /* refusing code is the default: an allowed attempt leaves the matrix's uploads as they are */
    {"PUT", "/v1/namespaces/{org}/policy", 200, 0, "/v1/namespaces/acme/policy", B_JSON,
     "{\"allow_code\":false}", P_BODY, NULL, false},
    {"GET", "/healthz", 200, 0, "/healthz", B_NONE, NULL, P_NONE, NULL, false},
    {"GET", "/readyz", 200, 0, "/readyz", B_NONE, NULL, P_NONE, NULL, false},
    {"GET", "/metrics", 200, 0, "/metrics", B_NONE, NULL, P_NONE, NULL, false},
    {"GET", "/openapi.yaml", 200, 0, "/openapi.yaml", B_NONE, NULL, P_NONE, NULL, false},
    {"GET", "/v1/reasons", 200, 0, "/v1/reasons", B_NONE, NULL, P_NONE, NULL, false},
    {"GET", "/.well-known/tensorgate/signing-keys", 200, 0, "/.well-known/tensorgate/signing-keys",
     B_NONE, NULL, P_NONE, NULL, false},
    {"GET", "/v1/namespaces/{org}/signing", 200, 0, "/v1/namespaces/acme/signing", B_NONE, NULL,
     P_NONE, NULL, false},
    /* require_signature false on acme: the same as no policy, so the other rows' publishes
     * are unaffected whichever attempt went through */
    {"PUT", "/v1/namespaces/{org}/signing", 200, 0, "/v1/namespaces/acme/signing", B_JSON,
     "{\"require_signature\":false}", P_NONE, NULL, false},
    {"GET", "/", 200, 0, "/", B_NONE, NULL, P_NONE, NULL, false},
    {"GET", "/ui/{path}", 200, 0, "/ui/app.js", B_NONE, NULL, P_NONE, NULL, false},
    {"GET", "/{org}/{name}/resolve/{rev}/{path}", 200, 0, "/acme/m/resolve/1/model.safetensors",
     B_NONE, NULL, P_NONE, NULL, false},
    {"GET", "/{org}/{name}/raw/{rev}/{path}", 200, 0, "/acme/m/raw/1/sub/config.json", B_NONE, NULL,
     P_NONE, NULL, false},
    /* the Hub's write routes */
    {"POST", "/api/repos/create", 200, 0, "/api/repos/create", B_JSON, NULL, P_STATUS,
     prep_hub_create, false},
    {"DELETE", "/api/repos/delete", 200, 0, "/api/repos/delete", B_JSON, NULL, P_STATUS,
     prep_hub_delete, false},
    /* never served: an allowed move is 400 invalid_request */
    {"POST", "/api/repos/move", 400, 0, "/api/repos/move", B_JSON,
     "{\"fromRepo\":\"acme/w\",\"toRepo\":\"acme/w2\"}", P_NONE, NULL, false},
    {"POST", "/api/validate-yaml", 200, 0, "/api/validate-yaml", B_JSON,
     "{\"content\":\"---\\nlicense: mit\\n---\\n\",\"repoType\":\"model\"}", P_NONE, NULL, false},
    {"POST", "/api/models/{org}/{name}/preupload/{rev}", 200, 0,
     "/api/models/acme/w/preupload/main", B_JSON, "{\"files\":[{\"path\":\"a.txt\",\"size\":1}]}",
     P_NONE, NULL, false},
    /* a commit that changes nothing: main's commit, no new version */
    {"POST", "/api/models/{org}/{name}/commit/{rev}", 200, 0, "/api/models/acme/w/commit/main",
     B_JSON, "{\"key\":\"header\",\"value\":{\"summary\":\"x\"}}", P_BODY, NULL, false},
    {"POST", "/api/models/{org}/{name}/branch/{alias}", 200, 0, NULL, B_JSON, "{}", P_BODY,
     prep_hub_branch, false},
    {"DELETE", "/api/models/{org}/{name}/branch/{alias}", 200, 0, NULL, B_NONE, NULL, P_BODY,
     prep_hub_branch_delete, false},
    {"POST", "/api/models/{org}/{name}/tag/{rev}", 200, 0, "/api/models/acme/w/tag/1", B_JSON, NULL,
     P_BODY, prep_hub_tag, false},
    {"DELETE", "/api/models/{org}/{name}/tag/{rev}", 200, 0, NULL, B_NONE, NULL, P_BODY,
     prep_hub_tag_delete, false},
    /* the upload link: its signature is its authorization, whatever the token (401 here) */
    {"PUT", "/api/tensorgate/lfs/{org}/{name}/{id}", 401, 0,
     "/api/tensorgate/lfs/acme/w/"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa?size=1&expires=1&sig=x",
     B_MODEL, NULL, P_NONE, NULL, false},
    {"POST", "/api/tensorgate/lfs-verify/{org}/{name}", 200, 0, "/api/tensorgate/lfs-verify/acme/w",
     B_JSON, NULL, P_NONE, prep_hub_verify, false},
    {"POST", "/{org}/{name}/info/lfs/objects/batch", 200, 0, "/acme/w.git/info/lfs/objects/batch",
     B_JSON,
     "{\"operation\":\"upload\",\"objects\":[{\"oid\":"
     "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"size\":3}]}",
     P_NONE, NULL, false},
    {"GET", "/api/models", 200, 0, "/api/models", B_NONE, NULL, P_NONE, NULL, false},
    {"GET", "/api/models/{org}/{name}", 200, 0, "/api/models/acme/m", B_NONE, NULL, P_NONE, NULL,
     false},
    {"GET", "/api/models/{org}/{name}/revision/{rev}", 200, 0, "/api/models/acme/m/revision/1",
     B_NONE, NULL, P_NONE, NULL, false},
    {"GET", "/api/models/{org}/{name}/tree/{rev}", 200, 0, "/api/models/acme/m/tree/1", B_NONE,
     NULL, P_NONE, NULL, false},
    {"GET", "/api/models/{org}/{name}/tree/{rev}/{path}", 200, 0, "/api/models/acme/m/tree/1/sub",
     B_NONE, NULL, P_NONE, NULL, false},
    {"POST", "/api/models/{org}/{name}/paths-info/{rev}", 200, 0, "/api/models/acme/m/paths-info/1",
     B_JSON, "{\"paths\":[\"sub\"]}", P_NONE, NULL, false},
    {"GET", "/api/models/{org}/{name}/refs", 200, 0, "/api/models/acme/m/refs", B_NONE, NULL,
     P_NONE, NULL, false},
    {"GET", "/api/models/{org}/{name}/commits/{rev}", 200, 0, "/api/models/acme/m/commits/1",
     B_NONE, NULL, P_NONE, NULL, false},
    {"GET", "/api/whoami-v2", 200, 0, "/api/whoami-v2", B_NONE, NULL, P_NONE, NULL, false},
    /* datasets and Spaces: 404 RepoNotFound whatever the token */
    {"GET", "/api/datasets", 404, 0, "/api/datasets", B_NONE, NULL, P_NONE, NULL, false},
    {"GET", "/api/datasets/{path}", 404, 0, "/api/datasets/acme/m", B_NONE, NULL, P_NONE, NULL,
     false},
    {"POST", "/api/datasets/{path}", 404, 0, "/api/datasets/acme/m/paths-info/main", B_NONE, NULL,
     P_NONE, NULL, false},
    {"GET", "/datasets/{path}", 404, 0, "/datasets/acme/m/resolve/main/x.json", B_NONE, NULL,
     P_NONE, NULL, false},
    {"GET", "/api/spaces", 404, 0, "/api/spaces", B_NONE, NULL, P_NONE, NULL, false},
    {"GET", "/api/spaces/{path}", 404, 0, "/api/spaces/acme/m", B_NONE, NULL, P_NONE, NULL, false},
    {"POST", "/api/spaces/{path}", 404, 0, "/api/spaces/acme/m/preupload/main", B_NONE, NULL,
     P_NONE, NULL, false},
    {"GET", "/spaces/{path}", 404, 0, "/spaces/acme/m/resolve/main/app.py", B_NONE, NULL, P_NONE,
     NULL, false},
};
#define ROW_COUNT (sizeof rows / sizeof rows[0])

/* Each row's need, from the contract (every_operation_has_a_row). */
static need needs[ROW_COUNT];

/* What the contract's scope of the operation op asks (openapi.yaml, info: Auth):
 * "read" on a path with {org} is that org's, without one a list kept to the token's
 * namespace; "read-object" is a Hub repository's (another namespace's token gets 404
 * model_not_found), a list's without a placeholder (/v1/jobs), else the object's. */
static need need_from_scope(const char *scope, const char *op)
{
    bool hub = strncmp(op, "/api/", 5) == 0 || strncmp(op, "/{org}/", 7) == 0;
    if (strcmp(scope, "public") == 0)
        return N_OPEN;
    if (strcmp(scope, "read") == 0)
        return strstr(op, "{org}") != NULL ? N_READ : N_LIST;
    if (strcmp(scope, "read-object") == 0)
        return hub ? N_HUB_READ : strchr(op, '{') == NULL ? N_LIST : N_READ;
    if (strcmp(scope, "scan") == 0)
        return N_READ_ANY;
    if (strcmp(scope, "write") == 0 || strcmp(scope, "write-object") == 0)
        return N_WRITE;
    if (strcmp(scope, "admin") == 0)
        return N_ADMIN;
    if (strcmp(scope, "admin-list") == 0)
        return N_ADMIN_LIST;
    if (strcmp(scope, "token") == 0)
        return N_TOKEN;
    return N_UNKNOWN;
}

/* The status the contract names for this route, token kind and mode. */
static int expected_status(const row *r, kind k)
{
    need n = needs[r - rows];
    bool needs_token =
        n == N_WRITE || n == N_ADMIN || n == N_ADMIN_LIST || n == N_TOKEN ||
        (auth_read && (n == N_READ || n == N_HUB_READ || n == N_LIST || n == N_READ_ANY));
    if (n == N_OPEN || !needs_token)
        return r->ok; /* an open route does not look at the token at all */
    if (k == K_NONE || k == K_UNKNOWN || k == K_REVOKED)
        return 401;
    bool other = k == K_READ_OTHER || k == K_WRITE_OTHER || k == K_ADMIN_OTHER;
    /* a job another namespace's token cannot read (--auth-read) answers as a missing
     * one, to a read and (past the scope check) to a cancel */
    if (other && auth_read && strcmp(r->op, "/v1/jobs/{id}") == 0 &&
        (n == N_READ || k != K_READ_OTHER))
        return 404;
    switch (n) {
    case N_UNKNOWN:
        return 0; /* never an answer: the row fails */
    case N_READ:
        return other ? 403 : r->ok;
    case N_HUB_READ:
        return other ? 404 : r->ok; /* as a model that does not exist: nothing leaks */
    case N_LIST:
    case N_READ_ANY:
    case N_TOKEN:
        return r->ok;
    case N_WRITE:
        return k == K_WRITE || k == K_ADMIN ? r->ok : 403;
    case N_ADMIN:
        return k == K_ADMIN ? r->ok : 403;
    case N_ADMIN_LIST:
        return k == K_ADMIN || k == K_ADMIN_OTHER ? r->ok : 403;
    case N_OPEN:
        break;
    }
    return r->ok;
}

static it_response perform(const row *r, const attempt *a, const char *token)
{
    const char *body = r->body;
    if (a->body[0] != '\0')
        body = a->body;
    if (r->body_kind == B_JSON)
        return it_send_json(r->method, a->path, token, body ? body : "{}");
    if (r->body_kind == B_MODEL)
        return it_send(r->method, a->path, token, model_file.data, model_file.len);
    return it_request(r->method, a->path, &(it_request_opts){.token = token});
}

/* The probe's answer as one comparable string (malloc'd). */
static char *probe(const row *r, const attempt *a)
{
    if (r->probe == P_NONE || a->probe[0] == '\0')
        return NULL;
    it_response p = it_request("GET", a->probe, &(it_request_opts){.token = admin()});
    char *out = NULL;
    if (r->probe == P_STATUS) {
        if (asprintf(&out, "%ld", p.status) < 0)
            out = NULL;
    } else if (r->probe == P_COUNT) {
        json_t *list = json_object_get(p.json, a->count_key);
        if (asprintf(&out, "%ld %zu", p.status, json_array_size(list)) < 0)
            out = NULL;
    } else if (asprintf(&out, "%ld %s", p.status, p.body.data ? (const char *)p.body.data : "") <
               0) {
        out = NULL;
    }
    it_response_free(&p);
    return out;
}

static void check_refusal(const row *r, const it_response *resp, int want)
{
    if (want == 401) {
        char www[128];
        const char *h = it_header(resp, "WWW-Authenticate", www, sizeof www);
        CHECK(h != NULL && strncasecmp(h, "Bearer", 6) == 0);
    }
    if (strcmp(r->method, "HEAD") == 0) {
        CHECK_EQ_U64(resp->body.len, 0); /* HEAD: the status and headers only */
        return;
    }
    CHECK_STR(it_reason(resp), want == 401 ? "unauthorized" : "forbidden");
    char ct[128];
    it_header(resp, "Content-Type", ct, sizeof ct);
    /* the Hub's write routes answer problems as application/json (their clients read
     * no other type), with X-Error-Message */
    bool hub_write = strncmp(r->op, "/api/repos/", 11) == 0 ||
                     strncmp(r->op, "/api/tensorgate/", 16) == 0 ||
                     strstr(r->op, "/info/lfs/") != NULL || strstr(r->op, "/preupload/") != NULL ||
                     strstr(r->op, "/commit/") != NULL || strstr(r->op, "/branch/") != NULL ||
                     strstr(r->op, "/tag/") != NULL;
    CHECK_STR(ct, hub_write ? "application/json" : "application/problem+json");
    if (hub_write) {
        char message[512];
        CHECK(it_header(resp, "X-Error-Message", message, sizeof message) != NULL);
    }
}

/* A list answered to a token limited to 'other' under --auth-read (or, for an
 * admin-list, to the admin token of 'other' always) shows nothing of acme. */
static void check_list_scope(const row *r, kind k, const it_response *resp)
{
    bool admin_list = needs[r - rows] == N_ADMIN_LIST && k == K_ADMIN_OTHER;
    if (!admin_list && (needs[r - rows] != N_LIST || !auth_read ||
                        (k != K_READ_OTHER && k != K_WRITE_OTHER && k != K_ADMIN_OTHER)))
        return;
    const char *body = resp->body.data ? (const char *)resp->body.data : "";
    bool leaks = strstr(body, "acme/") != NULL;
    CHECK(!leaks);
    if (leaks)
        fprintf(stderr, "  %s %s with a %s shows acme: %.300s\n", r->method, r->op, kind_names[k],
                body);
    if (strcmp(r->op, "/v1/models") == 0 || strcmp(r->op, "/api/models") == 0)
        CHECK(strstr(body, "other/m") != NULL);
}

static void run_row(row *r)
{
    for (kind k = 0; k < K_COUNT; k++) {
        attempt a;
        memset(&a, 0, sizeof a);
        if (r->path != NULL)
            snprintf(a.path, sizeof a.path, "%s", r->path);
        if (r->probe == P_BODY && r->prepare == NULL)
            snprintf(a.probe, sizeof a.probe, "%s", "/v1/models/acme/w");
        if (r->probe == P_COUNT && strcmp(r->op, "/v1/preloads") == 0) {
            snprintf(a.probe, sizeof a.probe, "/v1/preloads");
            snprintf(a.count_key, sizeof a.count_key, "preloads");
        } else if (r->probe == P_COUNT) {
            snprintf(a.probe, sizeof a.probe, "/v1/jobs?model=acme/cv&limit=1000");
            snprintf(a.count_key, sizeof a.count_key, "jobs");
        }
        if (r->prepare != NULL)
            r->prepare(&a);
        if (r->probe == P_BODY && a.probe[0] == '\0') {
            if (strstr(a.path, "/files/") != NULL)
                snprintf(a.probe, sizeof a.probe, "/v1/models/acme/w/versions/%s/files", draft_w);
            else if (strncmp(a.path, "/v1/jobs/", 9) == 0)
                snprintf(a.probe, sizeof a.probe, "%s", a.path);
            else
                snprintf(a.probe, sizeof a.probe, "/v1/models/acme/w");
        }
        int want = expected_status(r, k);
        char *before = want >= 400 && want != r->ok ? probe(r, &a) : NULL;
        it_response resp = perform(r, &a, k == K_NONE ? NULL : tokens[k]);
        bool ok =
            resp.status == want || (want == r->ok && r->ok_alt != 0 && resp.status == r->ok_alt);
        CHECK(ok);
        if (!ok)
            fprintf(stderr, "  %s %s (%s), %s%s: %ld, expected %d: %.300s\n", r->method, r->op,
                    a.path, kind_names[k], auth_read ? ", --auth-read" : "", resp.status, want,
                    resp.body.data ? (const char *)resp.body.data : "");
        if (want == 401 || want == 403)
            check_refusal(r, &resp, want);
        if (want == 404 && needs[r - rows] == N_HUB_READ)
            CHECK_STR(it_reason(&resp), "model_not_found");
        if (want == r->ok)
            check_list_scope(r, k, &resp);
        /* wait for what an allowed preload started, so later probes see a settled list */
        if (resp.status == 202 && strcmp(r->op, "/v1/preloads") == 0) {
            char path[64];
            snprintf(path, sizeof path, "/v1/preloads/%.16s",
                     it_json_str(&resp, "id") ? it_json_str(&resp, "id") : "");
            CHECK(wait_json_state(path, "resident"));
        }
        it_response_free(&resp);
        if (before != NULL) {
            char *after = probe(r, &a);
            bool same = after != NULL && strcmp(before, after) == 0;
            CHECK(same);
            if (!same)
                fprintf(stderr,
                        "  refused %s %s (%s) changed %s:\n    before %.300s\n    after  %.300s\n",
                        r->method, a.path, kind_names[k], a.probe, before,
                        after ? after : "(none)");
            free(after);
        }
        free(before);
    }
}

/* ---- the document's operations ---- */

/* As tests/integration/routes.c: a path is a line "  /...:" of the paths section,
 * an operation a line "    get:" below it, and "      x-tensorgate-scope: NAME" below
 * that its scope. Reads the document the server serves; marks each row the document
 * has, takes its need from the operation's scope, and fails for an operation with
 * no row or no scope. */
TEST(every_operation_has_a_row)
{
    it_response served = it_request("GET", "/openapi.yaml", &(it_request_opts){0});
    CHECK_STATUS(served, 200);
    it_buf spec = {0};
    it_buf_append(&spec, served.body.data, served.body.len);
    it_buf_append(&spec, "", 1);
    it_response_free(&served);
    for (size_t i = 0; i < ROW_COUNT; i++)
        needs[i] = N_UNKNOWN;
    row *operation = NULL; /* the row of the last operation */
    static const char *const methods[] = {"get",  "put",   "post",   "delete",
                                          "head", "patch", "options"};
    bool in_paths = false;
    char current[256] = "";
    int operations = 0;
    for (char *line = strtok((char *)spec.data, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        if (strncmp(line, "paths:", 6) == 0) {
            in_paths = true;
            continue;
        }
        if (!in_paths)
            continue;
        if (line[0] != ' ' && line[0] != '#' && line[0] != '\0')
            break;
        if (operation != NULL && strncmp(line, "      x-tensorgate-scope: ", 26) == 0) {
            needs[operation - rows] = need_from_scope(line + 26, operation->op);
            continue;
        }
        if (strncmp(line, "  /", 3) == 0) {
            operation = NULL;
            char *colon = strrchr(line, ':');
            if (colon != NULL) {
                *colon = '\0';
                snprintf(current, sizeof current, "%s", line + 2);
            }
            continue;
        }
        for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
            size_t ml = strlen(methods[m]);
            if (strncmp(line, "    ", 4) != 0 || strncmp(line + 4, methods[m], ml) != 0 ||
                line[4 + ml] != ':' || current[0] == '\0')
                continue;
            operations++;
            bool found = false;
            operation = NULL;
            for (size_t i = 0; i < ROW_COUNT; i++) {
                if (strcasecmp(rows[i].method, methods[m]) == 0 &&
                    strcmp(rows[i].op, current) == 0) {
                    rows[i].seen = true;
                    found = true;
                    operation = &rows[i];
                }
            }
            CHECK(found);
            if (!found)
                fprintf(stderr, "  %s %s has no row in the authorization matrix\n", methods[m],
                        current);
        }
    }
    for (size_t i = 0; i < ROW_COUNT; i++) {
        CHECK(rows[i].seen);
        if (!rows[i].seen)
            fprintf(stderr, "  row %s %s is not an operation of openapi.yaml\n", rows[i].method,
                    rows[i].op);
        CHECK(needs[i] != N_UNKNOWN);
        if (rows[i].seen && needs[i] == N_UNKNOWN)
            fprintf(stderr, "  %s %s: openapi.yaml names no scope this test knows\n",
                    rows[i].method, rows[i].op);
    }
    CHECK(operations >= 30);
    CHECK_EQ_U64(operations, ROW_COUNT);
    it_buf_free(&spec);
}

TEST(every_route_every_token)
{
    for (size_t i = 0; i < ROW_COUNT; i++)
        run_row(&rows[i]);
}

/* The hand-off takes a token with read scope on the preload's model's org, in
 * both modes (the socket is never open). */
TEST(preload_socket_tokens)
{
    struct {
        kind k;
        const char *want; /* NULL: the lease is granted */
    } cases[] = {
        {K_NONE, "unauthorized"}, {K_UNKNOWN, "unauthorized"},  {K_REVOKED, "unauthorized"},
        {K_READ, NULL},           {K_READ_OTHER, "forbidden"},  {K_WRITE_OTHER, "forbidden"},
        {K_WRITE, NULL},          {K_ADMIN_OTHER, "forbidden"}, {K_ADMIN, NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_preload_client *c = NULL;
        char err[512] = "";
        int rc = tg_preload_open(socket_path, cases[i].k == K_NONE ? "" : tokens[cases[i].k],
                                 preload_id, &c, err, sizeof err);
        bool ok = cases[i].want == NULL
                      ? rc == 0 && c != NULL && tg_preload_find(c, "w") != NULL
                      : rc != 0 && strncmp(err, cases[i].want, strlen(cases[i].want)) == 0 &&
                            err[strlen(cases[i].want)] == ':';
        CHECK(ok);
        if (!ok)
            fprintf(stderr, "  preload socket, %s%s: rc %d, %s (expected %s)\n",
                    kind_names[cases[i].k], auth_read ? ", --auth-read" : "", rc, err,
                    cases[i].want ? cases[i].want : "a lease");
        tg_preload_close(c);
    }
    /* a request without the token field at all is no request */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket_path);
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0);
    char line[128];
    snprintf(line, sizeof line, "{\"preload\":\"%s\"}\n", preload_id);
    CHECK(it_write_all(fd, line, strlen(line)));
    char reply[1024];
    it_read_some(fd, reply, sizeof reply, 5000);
    CHECK(strstr(reply, "\"error\"") != NULL && strstr(reply, "\"invalid_request\"") != NULL);
    close(fd);
}

/* An id that names nothing: a token limited to a namespace learns nothing from it,
 * so it cannot count or find the other namespaces' jobs by walking the (sequential)
 * job ids: a job id gets 404 job_not_found, as another namespace's job does under
 * --auth-read (a preload id 403, as another namespace's preload); an unlimited token
 * that may act gets 404. A token whose scope is too small gets 403 whatever the id.
 * Reads of an unknown id are open without --auth-read. */
TEST(unknown_ids)
{
    static const struct {
        const char *method, *path;
        bool write;
    } ids[] = {{"GET", "/v1/jobs/999999", false},
               {"DELETE", "/v1/jobs/999999", true},
               {"GET", "/v1/preloads/ffffffffffffffff", false},
               {"DELETE", "/v1/preloads/ffffffffffffffff", true}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        for (kind k = 0; k < K_COUNT; k++) {
            bool limited =
                k == K_READ_OTHER || k == K_WRITE_OTHER || k == K_ADMIN_OTHER || k == K_WRITE;
            int want;
            if (!ids[i].write && !auth_read)
                want = 404;
            else if (k == K_NONE || k == K_UNKNOWN || k == K_REVOKED)
                want = 401;
            else if (ids[i].write && (k == K_READ || k == K_READ_OTHER))
                want = 403; /* the token's scope, whatever the id */
            else if (strncmp(ids[i].path, "/v1/jobs/", 9) == 0)
                want = 404; /* job_not_found to every token, the namespace's own too */
            else
                want = limited && ids[i].write ? 403 : 404;
            it_response r = it_request(ids[i].method, ids[i].path,
                                       &(it_request_opts){.token = k == K_NONE ? NULL : tokens[k]});
            CHECK(r.status == want);
            if (want == 404 && strncmp(ids[i].path, "/v1/jobs/", 9) == 0)
                CHECK_STR(it_reason(&r), "job_not_found");
            if (r.status != want)
                fprintf(stderr, "  %s %s, %s%s: %ld, expected %d: %.300s\n", ids[i].method,
                        ids[i].path, kind_names[k], auth_read ? ", --auth-read" : "", r.status,
                        want, r.body.data ? (const char *)r.body.data : "");
            it_response_free(&r);
        }
    }
}

static void setup(void)
{
    it_tensor_spec t = {"w", "F32", 1, {4}};
    it_build_safetensors(&model_file, &t, 1, NULL, 5);
    create_published("acme/m");
    create_published("acme/w");
    create_published("acme/cv");
    create_published("other/m");
    create_draft("acme/w", draft_w, sizeof draft_w);
    /* a refusal of acme's, which /v1/rejections must not show to other's admin */
    char refused[128];
    snprintf(refused, sizeof refused, "/v1/models/acme/w/versions/%s/files/refused.safetensors",
             draft_w);
    it_response r = it_send("PUT", refused, admin(), "not safetensors at all", 22);
    must(r, 415, refused);
    it_response_free(&r);
    r = it_send_json("PUT", "/v1/models/acme/m/aliases/stable", admin(), "{\"version\":1}");
    must(r, 200, "alias");
    it_response_free(&r);
    r = it_send_json("POST", "/v1/models/acme/m/versions/1/convert", admin(),
                     "{\"dtype\":\"F16\"}");
    must(r, 202, "convert");
    snprintf(job_id, sizeof job_id, "%lld", r.json ? it_json_int(r.json, "id") : -1);
    it_response_free(&r);
    char path[64];
    snprintf(path, sizeof path, "/v1/jobs/%s", job_id);
    CHECK(wait_json_state(path, "done"));
    create_preload(preload_id);
    make_hook(hook_id, sizeof hook_id);
    char url[128];
    snprintf(url, sizeof url, HOOKS "/%s/ping", hook_id);
    r = it_send("POST", url, admin(), NULL, 0);
    must(r, 202, url);
    it_response_free(&r);
    snprintf(url, sizeof url, HOOKS "/%s/deliveries", hook_id);
    r = it_request("GET", url, &(it_request_opts){.token = admin()});
    must(r, 200, url);
    json_t *first = json_array_get(json_object_get(r.json, "deliveries"), 0);
    snprintf(delivery_id, sizeof delivery_id, "%lld", first ? it_json_int(first, "id") : -1);
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    snprintf(socket_path, sizeof socket_path, "%.80s/preload.sock", it_srv.data);
    snprintf(tokens[K_REVOKED], sizeof tokens[0], "%s", it_token_revoked("admin", NULL));
    snprintf(tokens[K_READ], sizeof tokens[0], "%s", it_token("read", NULL));
    snprintf(tokens[K_READ_OTHER], sizeof tokens[0], "%s", it_token("read", "other"));
    snprintf(tokens[K_WRITE_OTHER], sizeof tokens[0], "%s", it_token("write", "other"));
    snprintf(tokens[K_WRITE], sizeof tokens[0], "%s", it_token("write", "acme"));
    snprintf(tokens[K_ADMIN_OTHER], sizeof tokens[0], "%s", it_token("admin", "other"));
    /* the form of a token, never issued */
    snprintf(tokens[K_UNKNOWN], sizeof tokens[0], "tg_%064d", 7);
    snprintf(tokens[K_ADMIN], sizeof tokens[0], "%s", it_token("admin", NULL));
    for (kind k = K_UNKNOWN; k < K_COUNT; k++)
        CHECK(strncmp(tokens[k], "tg_", 3) == 0);
    RUN(every_operation_has_a_row);
    setup();
    RUN(every_route_every_token);
    RUN(preload_socket_tokens);
    RUN(unknown_ids);

    /* the same data, the same tokens, reads closed */
    int status = it_server_stop();
    CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    static const char *const flags[] = {"--auth-read", NULL};
    CHECK(it_server_start_args(flags, NULL) == 0);
    auth_read = true;
    create_preload(preload_id); /* preloads do not outlive the server */
    RUN(every_route_every_token);
    RUN(preload_socket_tokens);
    RUN(unknown_ids);
    it_buf_free(&model_file);
    return it_finish(argv[0]);
}
