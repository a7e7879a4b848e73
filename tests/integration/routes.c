/* Route coverage: every path and method of openapi.yaml is served by the real
 * server (a syntactically valid request is not answered 404 not_found, 405 or
 * 5xx), the server's /openapi.yaml is the file in the repository, and unknown
 * routes and methods get 404 not_found and 405 method_not_allowed. */
#include "harness.h"

#define MAX_OPS 128

typedef struct operation {
    char method[8];
    char path[256];
} operation;

static operation ops[MAX_OPS];
static int op_count;
static const char *admin_token;
static it_buf spec;
/* Ids the server assigns, taken from the Location of the 202 that created them, so
 * the routes that read them get a real one (routes run in document order, and the
 * document lists each POST before the routes of what it creates). */
static char job_id[32] = "1";
static char preload_id[32] = "0000000000000000";

static bool read_file(const char *path, it_buf *out)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return false;
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        it_buf_append(out, chunk, n);
    fclose(f);
    return true;
}

/* Line parsing of the `paths:` section: a path is a line "  /...:" and an
 * operation a line "    get:" (or put, post, delete, head, patch, options). */
static void parse_spec(void)
{
    static const char *const methods[] = {"get",  "put",   "post",   "delete",
                                          "head", "patch", "options"};
    char *text = (char *)spec.data;
    bool in_paths = false;
    char current[256] = "";
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        if (strncmp(line, "paths:", 6) == 0) {
            in_paths = true;
            continue;
        }
        if (!in_paths)
            continue;
        if (line[0] != ' ' && line[0] != '#' && line[0] != '\0')
            break; /* the next top-level key */
        if (strncmp(line, "  /", 3) == 0) {
            char *colon = strrchr(line, ':');
            if (colon == NULL)
                continue;
            *colon = '\0';
            snprintf(current, sizeof current, "%s", line + 2);
            continue;
        }
        for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
            size_t ml = strlen(methods[m]);
            if (strncmp(line, "    ", 4) == 0 && line[4] != ' ' &&
                strncmp(line + 4, methods[m], ml) == 0 && line[4 + ml] == ':' &&
                current[0] != '\0' && op_count < MAX_OPS) {
                snprintf(ops[op_count].method, sizeof ops[op_count].method, "%s", methods[m]);
                for (char *c = ops[op_count].method; *c; c++)
                    *c = (char)(*c - 'a' + 'A');
                snprintf(ops[op_count].path, sizeof ops[op_count].path, "%s", current);
                op_count++;
            }
        }
    }
}

/* Replaces each {param} with a value that names something that exists: version 1
 * is published (reads, convert), version 2 a draft (publish), version 3 the draft
 * that POST .../versions opens (file writes, which the document lists after it);
 * model.safetensors (tensor "w") is in versions 1 and 2, sub/config.json in
 * version 1 (a directory for the Hub tree route). */
static void fill_path(const operation *op, char *out, size_t cap)
{
    bool writes = strcmp(op->method, "GET") != 0 && strcmp(op->method, "HEAD") != 0 &&
                  strstr(op->path, "/convert") == NULL;
    bool hub_tree = strncmp(op->path, "/api/models/", 12) == 0;
    const char *p = op->path;
    size_t n = 0;
    out[0] = '\0';
    while (*p != '\0' && n + 1 < cap) {
        if (*p == '{') {
            const char *end = strchr(p, '}');
            if (end == NULL)
                break;
            char param[64];
            snprintf(param, sizeof param, "%.*s", (int)(end - p - 1), p + 1);
            const char *value = "x";
            if (strcmp(param, "org") == 0)
                value = "acme";
            else if (strcmp(param, "name") == 0)
                value = "routes";
            else if (strcmp(param, "rev") == 0)
                value = !writes ? "1" : strstr(op->path, "/files/") != NULL ? "3" : "2";
            else if (strcmp(param, "path") == 0)
                value = hub_tree ? "sub" : "model.safetensors";
            else if (strcmp(param, "alias") == 0)
                value = "stable";
            else if (strcmp(param, "tensor") == 0)
                value = "w";
            else if (strcmp(param, "id") == 0)
                value = strncmp(op->path, "/v1/jobs/", 9) == 0 ? job_id : preload_id;
            n += (size_t)snprintf(out + n, cap - n, "%s", value);
            p = end + 1;
        } else {
            out[n++] = *p++;
            out[n] = '\0';
        }
    }
}

static it_buf model_file;
static const char sidecar[] = "{\"model_type\":\"routes\"}";

static void setup(void)
{
    const char *t = admin_token;
    it_tensor_spec spec_t = {"w", "F32", 1, {4}};
    it_build_safetensors(&model_file, &spec_t, 1, NULL, 11);
    it_response r = it_send_json("POST", "/v1/models", t, "{\"name\":\"acme/routes\"}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    for (int v = 1; v <= 2; v++) {
        r = it_send("POST", "/v1/models/acme/routes/versions", t, NULL, 0);
        CHECK_STATUS(r, 201);
        it_response_free(&r);
        char url[200];
        snprintf(url, sizeof url, "/v1/models/acme/routes/versions/%d/files/model.safetensors", v);
        r = it_send("PUT", url, t, model_file.data, model_file.len);
        CHECK_STATUS(r, 201);
        it_response_free(&r);
    }
    r = it_send("PUT", "/v1/models/acme/routes/versions/1/files/sub/config.json", t, sidecar,
                strlen(sidecar));
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send("POST", "/v1/models/acme/routes/versions/1/publish", t, NULL, 0);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
}

static it_response perform(const operation *op)
{
    char url[512];
    fill_path(op, url, sizeof url);
    const char *body = NULL;
    size_t len = 0;
    bool json = false;
    if (strcmp(op->path, "/v1/models") == 0 && strcmp(op->method, "POST") == 0) {
        body = "{\"name\":\"acme/routes-new\"}";
        json = true;
    } else if (strstr(op->path, "/aliases/") != NULL) {
        body = "{\"version\":1}";
        json = true;
    } else if (strstr(op->path, "/convert") != NULL) {
        body = "{\"dtype\":\"F16\"}";
        json = true;
    } else if (strcmp(op->path, "/v1/preloads") == 0 && strcmp(op->method, "POST") == 0) {
        body = "{\"model\":\"acme/routes\",\"version\":1,\"device\":\"host\"}";
        json = true;
    } else if (strcmp(op->method, "PUT") == 0 || strcmp(op->path, "/v1/scan") == 0) {
        body = (const char *)model_file.data;
        len = model_file.len;
    }
    if (json)
        return it_send_json(op->method, url, admin_token, body);
    if (body != NULL)
        return it_send(op->method, url, admin_token, body, len);
    return it_request(op->method, url, &(it_request_opts){.token = admin_token});
}

/* Deletes run last (files before the model), so every other route finds its target. */
static int op_rank(const operation *op)
{
    if (strcmp(op->method, "DELETE") != 0)
        return 0;
    return strstr(op->path, "/files/") != NULL ? 1 : 2;
}

TEST(every_documented_route_is_served)
{
    CHECK(op_count >= 20);
    for (int rank = 0; rank <= 2; rank++) {
        for (int i = 0; i < op_count; i++) {
            if (op_rank(&ops[i]) != rank)
                continue;
            it_response r = perform(&ops[i]);
            char location[128];
            if (r.status == 202 && it_header(&r, "Location", location, sizeof location) != NULL) {
                const char *last = strrchr(location, '/');
                if (strncmp(location, "/v1/jobs/", 9) == 0)
                    snprintf(job_id, sizeof job_id, "%s", last + 1);
                else if (strncmp(location, "/v1/preloads/", 13) == 0)
                    snprintf(preload_id, sizeof preload_id, "%s", last + 1);
            }
            const char *reason = it_reason(&r);
            bool unrouted = r.status == 404 && (reason == NULL || strcmp(reason, "not_found") == 0);
            bool served = r.curl_code == CURLE_OK && r.status >= 200 && r.status < 500 &&
                          r.status != 405 && !unrouted;
            CHECK(served);
            if (!served)
                fprintf(stderr, "  %s %s -> %ld %s\n", ops[i].method, ops[i].path, r.status,
                        r.body.data ? (const char *)r.body.data : "");
            it_response_free(&r);
        }
    }
}

TEST(served_document_is_the_repository_file)
{
    it_buf file = {0};
    CHECK(read_file("openapi.yaml", &file));
    it_response r = it_get("/openapi.yaml");
    CHECK_STATUS(r, 200);
    CHECK(r.body.len == file.len && file.len > 0 && memcmp(r.body.data, file.data, file.len) == 0);
    it_response_free(&r);
    it_buf_free(&file);
}

TEST(unknown_routes_and_methods)
{
    it_response r = it_get("/v1/nothing-here");
    CHECK_PROBLEM(r, 404, "not_found");
    it_response_free(&r);
    r = it_get("/v2/models");
    CHECK_PROBLEM(r, 404, "not_found");
    it_response_free(&r);
    r = it_request("PATCH", "/v1/models", &(it_request_opts){.token = admin_token});
    CHECK_PROBLEM(r, 405, "method_not_allowed");
    it_response_free(&r);
    r = it_request("DELETE", "/healthz", &(it_request_opts){.token = admin_token});
    CHECK_PROBLEM(r, 405, "method_not_allowed");
    it_response_free(&r);
    /* names and paths are validated */
    r = it_get("/v1/models/acme/..");
    CHECK_PROBLEM(r, 400, "invalid_name");
    it_response_free(&r);
    r = it_get("/v1/models/acme/routes/versions/1/files/a/../model.safetensors");
    CHECK_PROBLEM(r, 400, "invalid_path");
    it_response_free(&r);
    r = it_send_json("POST", "/v1/models", admin_token, "{\"name\":\"bad name/x\"}");
    CHECK_PROBLEM(r, 400, "invalid_name");
    it_response_free(&r);
    r = it_send("PUT", "/v1/models/acme/routes/versions/2/files/a//b.json", admin_token, "{}", 2);
    CHECK_STATUS(r, 400);
    it_response_free(&r);
}

TEST(service_endpoints)
{
    it_response r = it_get("/healthz");
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "status"), "ok");
    it_response_free(&r);
    r = it_get("/readyz");
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "status"), "ready");
    CHECK_STR(it_json_str(&r, "catalog"), "ok");
    it_response_free(&r);
    r = it_get("/metrics");
    CHECK_STATUS(r, 200);
    CHECK(r.body.data != NULL && strstr((const char *)r.body.data, "# TYPE") != NULL);
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    admin_token = it_token("admin", NULL);
    if (!read_file("openapi.yaml", &spec)) {
        fprintf(stderr, "routes: run from the repository root (openapi.yaml not found)\n");
        return 2;
    }
    parse_spec();
    printf("routes: %d operations in openapi.yaml\n", op_count);
    setup();
    RUN(served_document_is_the_repository_file);
    RUN(service_endpoints);
    RUN(unknown_routes_and_methods);
    RUN(every_documented_route_is_served);
    it_buf_free(&spec);
    it_buf_free(&model_file);
    return it_finish(argv[0]);
}
