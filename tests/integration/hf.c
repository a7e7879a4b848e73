/* The Hugging Face Hub read routes over real HTTP (routes_hf.c): publishes a
 * single-file model (with config.json) and a 2-shard model with its index, then
 *  - checks every header rule the Hub clients rely on with libcurl: HEAD on
 *    /resolve/ and /raw/ (X-Repo-Commit = the version digest, ETag and X-Linked-Etag
 *    = the sha256 in quotes, X-Linked-Size, the real Content-Length, Accept-Ranges),
 *    Range 0-0 -> 206 "bytes 0-0/TOTAL" (never 200), the 404 X-Error-Code variants,
 *    the revisions main/HEAD/latest/number/alias/digest, drafts invisible;
 *    /api/models (search, limit, Link paging to the end), model info (siblings,
 *    safetensors parameters per dtype computed here from the built tensors), tree
 *    (lfs fields, directories, recursive, Link paging);
 *  - runs the real @huggingface/hub JS client (tests/hf/run.sh -> metadata.mjs):
 *    parseSafetensorsMetadata, listFiles, downloadFile, modelInfo, listModels
 *    against the tensor tables computed here with the lib's header parser. */
#include <strings.h>

#include "harness.h"

#include "st_header.h"
#include "st_stats.h"

#define SINGLE "acme/hf-single"
#define SHARDED "acme/hf-sharded"
#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"
#define CONFIG_JSON "{\"model_type\":\"tensorgate-test\",\"hidden_size\":16}"

static const char *write_token;

typedef struct built_file {
    const char *path;
    it_buf bytes;
    char sha256[65];
} built_file;

static built_file single_model, shard1, shard2, sharded_index, config_file, readme_file;
static char single_digest[65], sharded_digest[65];
/* the Hub's 40-hex commit ids: the first 40 hex digits of each digest */
static char single_commit[41], sharded_commit[41];

static void build(built_file *f, const char *path, const it_tensor_spec *tensors, int count,
                  unsigned seed)
{
    f->path = path;
    it_build_safetensors(&f->bytes, tensors, count, "{\"format\":\"pt\"}", seed);
    it_sha256_hex(f->bytes.data, f->bytes.len, f->sha256);
}

static void build_text(built_file *f, const char *path, const char *text)
{
    f->path = path;
    f->bytes.len = 0;
    it_buf_append(&f->bytes, text, strlen(text));
    it_sha256_hex(f->bytes.data, f->bytes.len, f->sha256);
}

static void build_files(void)
{
    const it_tensor_spec single[] = {{"embed.weight", "F32", 2, {16, 8, 0, 0}},
                                     {"norm.scale", "F16", 1, {8, 0, 0, 0}},
                                     {"positions", "I64", 1, {5, 0, 0, 0}}};
    const it_tensor_spec one[] = {{"layers.0.weight", "F32", 2, {4, 6, 0, 0}},
                                  {"layers.0.bias", "F32", 1, {4, 0, 0, 0}}};
    const it_tensor_spec two[] = {{"head.weight", "F16", 2, {3, 7, 0, 0}},
                                  {"step", "I32", 0, {0, 0, 0, 0}}};
    build(&single_model, "model.safetensors", single, 3, 1);
    build(&shard1, SHARD1, one, 2, 2);
    build(&shard2, SHARD2, two, 2, 3);
    build_text(&config_file, "config.json", CONFIG_JSON);
    build_text(&readme_file, "docs/README.md", "# hf-single\nA test model.\n");
    it_buf index = {0};
    it_buf_printf(&index,
                  "{\"metadata\":{\"total_size\":%llu},\"weight_map\":{"
                  "\"layers.0.weight\":\"" SHARD1 "\",\"layers.0.bias\":\"" SHARD1 "\","
                  "\"head.weight\":\"" SHARD2 "\",\"step\":\"" SHARD2 "\"}}",
                  (unsigned long long)(shard1.bytes.len - 8 - it_header_len(&shard1.bytes) +
                                       shard2.bytes.len - 8 - it_header_len(&shard2.bytes)));
    build_text(&sharded_index, "model.safetensors.index.json", (const char *)index.data);
    it_buf_free(&index);
}

static void upload(const char *repo, int version, const built_file *f)
{
    char url[512];
    snprintf(url, sizeof url, "/v1/models/%s/versions/%d/files/%s", repo, version, f->path);
    it_response r = it_send("PUT", url, write_token, f->bytes.data, f->bytes.len);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
}

static void create_model(const char *repo)
{
    char body[256], url[256];
    snprintf(body, sizeof body, "{\"name\":\"%s\"}", repo);
    it_response r = it_send_json("POST", "/v1/models", write_token, body);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    snprintf(url, sizeof url, "/v1/models/%s/versions", repo);
    r = it_send_json("POST", url, write_token, "{}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
}

static void publish(const char *repo, int version, char digest[65])
{
    char url[256];
    snprintf(url, sizeof url, "/v1/models/%s/versions/%d/publish", repo, version);
    it_response r = it_send_json("POST", url, write_token, NULL);
    CHECK_STATUS(r, 200);
    const char *value = it_json_str(&r, "digest");
    snprintf(digest, 65, "%s", value ? value : "");
    CHECK(strlen(digest) == 64);
    it_response_free(&r);
}

static it_response request_with(const char *method, const char *url, const char *header_line)
{
    const char *headers[] = {header_line, NULL};
    it_request_opts o;
    memset(&o, 0, sizeof o);
    o.headers = header_line ? headers : NULL;
    return it_request(method, url, &o);
}

static void check_header(const it_response *r, const char *name, const char *want)
{
    char value[512];
    it_header(r, name, value, sizeof value);
    CHECK_STR(value, want);
    if (strcmp(value, want) != 0)
        fprintf(stderr, "  (header %s)\n", name);
}

TEST(publish_models)
{
    create_model(SINGLE);
    upload(SINGLE, 1, &single_model);
    upload(SINGLE, 1, &config_file);
    upload(SINGLE, 1, &readme_file);
    publish(SINGLE, 1, single_digest);
    snprintf(single_commit, sizeof single_commit, "%.40s", single_digest);
    it_response r =
        it_send_json("PUT", "/v1/models/" SINGLE "/aliases/stable", write_token, "{\"version\":1}");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    /* version 2 stays a draft: invisible to the Hub routes */
    r = it_send_json("POST", "/v1/models/" SINGLE "/versions", write_token, "{}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    upload(SINGLE, 2, &config_file);

    create_model(SHARDED);
    upload(SHARDED, 1, &shard1);
    upload(SHARDED, 1, &shard2);
    upload(SHARDED, 1, &sharded_index);
    publish(SHARDED, 1, sharded_digest);
    snprintf(sharded_commit, sizeof sharded_commit, "%.40s", sharded_digest);
}

/* HEAD and GET on /resolve/ and /raw/: the headers huggingface_hub and the JS client read. */
TEST(resolve_headers)
{
    char etag[80], size[32], url[512];
    snprintf(etag, sizeof etag, "\"%s\"", single_model.sha256);
    snprintf(size, sizeof size, "%zu", single_model.bytes.len);
    const char *const kinds[] = {"resolve", "raw"};
    const char *const revisions[] = {"main",   "HEAD",        "latest",     "1",
                                     "stable", single_digest, single_commit};
    for (int k = 0; k < 2; k++) {
        for (size_t v = 0; v < sizeof revisions / sizeof revisions[0]; v++) {
            snprintf(url, sizeof url, "/" SINGLE "/%s/%s/model.safetensors", kinds[k],
                     revisions[v]);
            it_response r = it_request("HEAD", url, NULL);
            CHECK_STATUS(r, 200);
            check_header(&r, "X-Repo-Commit", single_commit);
            check_header(&r, "ETag", etag);
            check_header(&r, "X-Linked-Etag", etag);
            check_header(&r, "X-Linked-Size", size);
            check_header(&r, "Content-Length", size);
            check_header(&r, "Accept-Ranges", "bytes");
            CHECK(r.body.len == 0);
            it_response_free(&r);
        }
    }
    /* GET: the whole file, byte for byte */
    it_response r = it_get("/" SINGLE "/resolve/main/model.safetensors");
    CHECK_STATUS(r, 200);
    CHECK(r.body.len == single_model.bytes.len &&
          memcmp(r.body.data, single_model.bytes.data, r.body.len) == 0);
    check_header(&r, "X-Repo-Commit", single_commit);
    it_response_free(&r);
    /* a file in a directory, and a sidecar */
    r = it_get("/" SINGLE "/resolve/main/docs/README.md");
    CHECK_STATUS(r, 200);
    CHECK(r.body.len == readme_file.bytes.len &&
          memcmp(r.body.data, readme_file.bytes.data, r.body.len) == 0);
    it_response_free(&r);
    r = it_get("/" SHARDED "/raw/main/model.safetensors.index.json");
    CHECK_STATUS(r, 200);
    check_header(&r, "X-Repo-Commit", sharded_commit);
    CHECK(r.json != NULL && json_object_get(r.json, "weight_map") != NULL);
    it_response_free(&r);
}

/* The JS client's probes: Range 0-0, 0-7, then the header; a 200 would break it. */
TEST(ranges_are_206)
{
    char want[64];
    const built_file *files[] = {&single_model, &shard2};
    const char *repos[] = {SINGLE, SHARDED};
    for (int i = 0; i < 2; i++) {
        char url[512];
        snprintf(url, sizeof url, "/%s/resolve/main/%s", repos[i], files[i]->path);
        it_response r = request_with("GET", url, "Range: bytes=0-0");
        CHECK_STATUS(r, 206);
        snprintf(want, sizeof want, "bytes 0-0/%zu", files[i]->bytes.len);
        check_header(&r, "Content-Range", want);
        CHECK(r.body.len == 1 && r.body.data[0] == files[i]->bytes.data[0]);
        char etag[80];
        snprintf(etag, sizeof etag, "\"%s\"", files[i]->sha256);
        check_header(&r, "ETag", etag);
        it_response_free(&r);

        r = request_with("GET", url, "Range: bytes=0-7");
        CHECK_STATUS(r, 206);
        CHECK(r.body.len == 8 && memcmp(r.body.data, files[i]->bytes.data, 8) == 0);
        it_response_free(&r);

        uint64_t n = it_header_len(&files[i]->bytes);
        char range[64];
        snprintf(range, sizeof range, "Range: bytes=8-%llu", (unsigned long long)(7 + n));
        r = request_with("GET", url, range);
        CHECK_STATUS(r, 206);
        snprintf(want, sizeof want, "bytes 8-%llu/%zu", (unsigned long long)(7 + n),
                 files[i]->bytes.len);
        check_header(&r, "Content-Range", want);
        CHECK(r.body.len == n && memcmp(r.body.data, files[i]->bytes.data + 8, n) == 0);
        it_response_free(&r);
    }
    /* past the end: 416 with the total */
    it_response r =
        request_with("GET", "/" SINGLE "/resolve/main/config.json", "Range: bytes=999999-");
    CHECK_STATUS(r, 416);
    snprintf(want, sizeof want, "bytes */%zu", config_file.bytes.len);
    check_header(&r, "Content-Range", want);
    it_response_free(&r);
    /* If-None-Match with the ETag: 304, still with the commit */
    char inm[100];
    snprintf(inm, sizeof inm, "If-None-Match: \"%s\"", config_file.sha256);
    r = request_with("GET", "/" SINGLE "/resolve/main/config.json", inm);
    CHECK_STATUS(r, 304);
    check_header(&r, "X-Repo-Commit", single_commit);
    it_response_free(&r);
}

static void check_hub_404(const char *method, const char *url, const char *error_code,
                          const char *reason)
{
    it_response r = it_request(method, url, NULL);
    CHECK_STATUS(r, 404);
    check_header(&r, "X-Error-Code", error_code);
    char message[256];
    CHECK(it_header(&r, "X-Error-Message", message, sizeof message) != NULL && message[0] != '\0');
    if (strcmp(method, "GET") == 0)
        CHECK_PROBLEM(r, 404, reason);
    it_response_free(&r);
}

TEST(not_found_codes)
{
    const char *const methods[] = {"GET", "HEAD"};
    for (int m = 0; m < 2; m++) {
        const char *method = methods[m];
        check_hub_404(method, "/acme/no-such-model/resolve/main/model.safetensors", "RepoNotFound",
                      "model_not_found");
        check_hub_404(method, "/acme/bad..name/resolve/main/model.safetensors", "RepoNotFound",
                      "model_not_found");
        check_hub_404(method, "/" SINGLE "/resolve/v9/model.safetensors", "RevisionNotFound",
                      "version_not_found");
        check_hub_404(method, "/" SINGLE "/resolve/7/model.safetensors", "RevisionNotFound",
                      "version_not_found");
        /* version 2 is a draft: not a revision of the Hub view */
        check_hub_404(method, "/" SINGLE "/resolve/2/config.json", "RevisionNotFound",
                      "version_not_found");
        check_hub_404(
            method,
            "/" SINGLE
            "/resolve/0000000000000000000000000000000000000000000000000000000000000000/config.json",
            "RevisionNotFound", "version_not_found");
        check_hub_404(method, "/" SINGLE "/resolve/main/nope.safetensors", "EntryNotFound",
                      "file_not_found");
        check_hub_404(method, "/" SINGLE "/raw/main/docs", "EntryNotFound", "file_not_found");
    }
    /* an EntryNotFound in a known revision names its commit */
    it_response r = it_request("HEAD", "/" SINGLE "/resolve/main/nope.safetensors", NULL);
    check_header(&r, "X-Repo-Commit", single_commit);
    it_response_free(&r);
    /* the Hub routes come after the fixed ones: /v1 and /healthz still answer */
    r = it_get("/healthz");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    r = it_get("/v1/models/" SINGLE);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    r = it_get("/v1/models/" SINGLE "/versions/1/files/model.safetensors");
    CHECK_STATUS(r, 200);
    char commit[80];
    CHECK(it_header(&r, "X-Repo-Commit", commit, sizeof commit) == NULL);
    it_response_free(&r);
    /* writes are not routed to the Hub view */
    r = it_send("PUT", "/" SINGLE "/resolve/main/x.json", write_token, "{}", 2);
    CHECK_STATUS(r, 405);
    it_response_free(&r);
}

/* Parameters per dtype of the built files, computed with the lib's parser. A scalar
 * (shape []) is one parameter for tensorgate; the JS client's own count skips
 * scalars (skip_scalars). */
static void add_parameters(const built_file *f, uint64_t counts[ST_DTYPE_COUNT], bool skip_scalars)
{
    st_file file;
    st_error err;
    if (st_header_parse(f->bytes.data, f->bytes.len, f->bytes.len, NULL, &file, &err) != ST_OK) {
        CHECK(false);
        return;
    }
    uint64_t c[ST_DTYPE_COUNT], total = 0;
    st_file_parameter_counts(&file, c, &total);
    for (int d = 0; d < ST_DTYPE_COUNT; d++)
        counts[d] += c[d];
    for (size_t t = 0; skip_scalars && t < file.tensor_count; t++)
        if (file.tensors[t].rank == 0)
            counts[file.tensors[t].dtype] -= 1;
    st_file_free(&file);
}

static json_t *count_parameters(const built_file *const *files, int count, uint64_t *total,
                                bool skip_scalars)
{
    uint64_t counts[ST_DTYPE_COUNT] = {0};
    for (int i = 0; i < count; i++)
        add_parameters(files[i], counts, skip_scalars);
    json_t *object = json_object();
    *total = 0;
    for (int d = 0; d < ST_DTYPE_COUNT; d++) {
        if (counts[d] > 0)
            json_object_set_new(object, st_dtype_name((st_dtype)d),
                                json_integer((json_int_t)counts[d]));
        *total += counts[d];
    }
    return object;
}

static json_t *parameters_json(const built_file *const *files, int count, uint64_t *total)
{
    return count_parameters(files, count, total, false);
}

static const char *text_or_empty(const json_t *value)
{
    const char *text = json_string_value(value);
    return text ? text : "";
}

static bool has_sibling(const json_t *siblings, const char *path)
{
    size_t i;
    json_t *item;
    json_array_foreach(siblings, i, item)
    {
        if (strcmp(text_or_empty(json_object_get(item, "rfilename")), path) == 0)
            return true;
    }
    return false;
}

TEST(model_info)
{
    const char *const urls[] = {"/api/models/" SHARDED, "/api/models/" SHARDED "/revision/main",
                                "/api/models/" SHARDED "/revision/1"};
    const built_file *shards[] = {&shard1, &shard2};
    uint64_t total = 0;
    json_t *want = parameters_json(shards, 2, &total);
    CHECK(total == 4 * 6 + 4 + 3 * 7 + 1);
    for (int u = 0; u < 3; u++) {
        it_response r = it_get(urls[u]);
        CHECK_STATUS(r, 200);
        CHECK_STR(it_json_str(&r, "id"), SHARDED);
        CHECK_STR(it_json_str(&r, "modelId"), SHARDED);
        CHECK_STR(it_json_str(&r, "sha"), sharded_commit);
        CHECK(json_is_false(json_object_get(r.json, "private")));
        json_t *siblings = json_object_get(r.json, "siblings");
        CHECK(json_array_size(siblings) == 3);
        CHECK(has_sibling(siblings, SHARD1) && has_sibling(siblings, SHARD2) &&
              has_sibling(siblings, "model.safetensors.index.json"));
        json_t *safetensors = json_object_get(r.json, "safetensors");
        CHECK(json_equal(json_object_get(safetensors, "parameters"), want));
        CHECK(it_json_int(safetensors, "total") == (long long)total);
        it_response_free(&r);
    }
    json_decref(want);

    const built_file *single[] = {&single_model};
    want = parameters_json(single, 1, &total);
    it_response r = it_get("/api/models/" SINGLE "/revision/stable");
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "sha"), single_commit);
    CHECK(json_equal(json_object_get(json_object_get(r.json, "safetensors"), "parameters"), want));
    CHECK(has_sibling(json_object_get(r.json, "siblings"), "docs/README.md"));
    it_response_free(&r);
    json_decref(want);

    check_hub_404("GET", "/api/models/acme/missing", "RepoNotFound", "model_not_found");
    check_hub_404("GET", "/api/models/" SINGLE "/revision/2", "RevisionNotFound",
                  "version_not_found");
}

/* Follows Link rel="next" from url; returns every item of every page (a new array). */
static json_t *follow_pages(const char *first_url, int *pages)
{
    json_t *all = json_array();
    char url[2048];
    snprintf(url, sizeof url, "%s", first_url);
    *pages = 0;
    while (url[0] != '\0' && *pages < 50) {
        it_response r = it_get(url);
        CHECK_STATUS(r, 200);
        (*pages)++;
        CHECK(json_is_array(r.json));
        json_array_extend(all, r.json);
        char link[2048];
        url[0] = '\0';
        if (it_header(&r, "Link", link, sizeof link) != NULL) {
            /* <http://127.0.0.1:PORT/api/...>; rel="next": absolute, on this server */
            size_t base_len = strlen(it_srv.base);
            char *end = strstr(link, ">; rel=\"next\"");
            CHECK(link[0] == '<' && end != NULL && strncmp(link + 1, it_srv.base, base_len) == 0);
            if (link[0] == '<' && end != NULL && strncmp(link + 1, it_srv.base, base_len) == 0) {
                *end = '\0';
                snprintf(url, sizeof url, "%s", link + 1 + base_len);
            }
        }
        it_response_free(&r);
    }
    return all;
}

TEST(models_list_and_paging)
{
    /* three more published models so that paging has several pages, and one with
     * nothing published, which the Hub's list leaves out */
    const char *const extra[] = {"acme/hf-zeta", "other/hf-unrelated", "acme/hf-alpha"};
    for (int i = 0; i < 3; i++)
        CHECK(it_make_version(it_token("write", NULL), extra[i], "model.safetensors",
                              &single_model.bytes, true) == 1);
    it_response created = it_send_json("POST", "/v1/models", it_token("write", NULL),
                                       "{\"name\":\"acme/hf-unpublished\"}");
    CHECK_STATUS(created, 201);
    it_response_free(&created);
    int pages = 0;
    json_t *all = follow_pages("/api/models?search=acme/hf&limit=2", &pages);
    CHECK(json_array_size(all) == 4);
    CHECK(pages == 2);
    const char *const want[] = {"acme/hf-alpha", "acme/hf-sharded", "acme/hf-single",
                                "acme/hf-zeta"};
    for (size_t i = 0; i < 4 && i < json_array_size(all); i++) {
        json_t *item = json_array_get(all, i);
        CHECK_STR(json_string_value(json_object_get(item, "id")), want[i]);
        CHECK(json_is_string(json_object_get(item, "_id")));
        CHECK(json_is_false(json_object_get(item, "private")));
    }
    /* a published model carries its sha; one with nothing published is not listed */
    CHECK_STR(json_string_value(json_object_get(json_array_get(all, 1), "sha")), sharded_commit);
    json_decref(all);
    all = follow_pages("/api/models?search=hf-unpublished", &pages);
    CHECK(json_array_size(all) == 0);
    json_decref(all);

    all = follow_pages("/api/models?limit=1", &pages);
    CHECK(json_array_size(all) == 5);
    CHECK(pages == 5);
    json_decref(all);
    it_response r = it_get("/api/models?search=zzz-nothing");
    CHECK_STATUS(r, 200);
    CHECK(json_is_array(r.json) && json_array_size(r.json) == 0);
    char link[64];
    CHECK(it_header(&r, "Link", link, sizeof link) == NULL);
    it_response_free(&r);
    r = it_get("/api/models?limit=0");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
}

static json_t *find_entry(const json_t *entries, const char *path)
{
    size_t i;
    json_t *item;
    json_array_foreach(entries, i, item)
    {
        if (strcmp(text_or_empty(json_object_get(item, "path")), path) == 0)
            return item;
    }
    return NULL;
}

TEST(tree)
{
    it_response r = it_get("/api/models/" SINGLE "/tree/main");
    CHECK_STATUS(r, 200);
    CHECK(json_array_size(r.json) == 3); /* config.json, docs/, model.safetensors */
    json_t *model = find_entry(r.json, "model.safetensors");
    CHECK_STR(json_string_value(json_object_get(model, "type")), "file");
    CHECK_STR(json_string_value(json_object_get(model, "oid")), single_model.sha256);
    CHECK(it_json_int(model, "size") == (long long)single_model.bytes.len);
    json_t *lfs = json_object_get(model, "lfs");
    CHECK_STR(json_string_value(json_object_get(lfs, "oid")), single_model.sha256);
    CHECK(it_json_int(lfs, "size") == (long long)single_model.bytes.len);
    char pointer[256];
    int pointer_size =
        snprintf(pointer, sizeof pointer,
                 "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %zu\n",
                 single_model.sha256, single_model.bytes.len);
    CHECK(it_json_int(lfs, "pointerSize") == pointer_size);
    json_t *config = find_entry(r.json, "config.json");
    CHECK(config != NULL && json_object_get(config, "lfs") == NULL);
    json_t *docs = find_entry(r.json, "docs");
    CHECK_STR(json_string_value(json_object_get(docs, "type")), "directory");
    CHECK(strlen(text_or_empty(json_object_get(docs, "oid"))) == 64);
    CHECK(find_entry(r.json, "docs/README.md") == NULL);
    it_response_free(&r);

    r = it_get("/api/models/" SINGLE "/tree/main?recursive=true");
    CHECK_STATUS(r, 200);
    CHECK(json_array_size(r.json) == 4);
    CHECK_STR(json_string_value(json_object_get(find_entry(r.json, "docs/README.md"), "oid")),
              readme_file.sha256);
    it_response_free(&r);

    r = it_get("/api/models/" SINGLE "/tree/1/docs");
    CHECK_STATUS(r, 200);
    CHECK(json_array_size(r.json) == 1 && find_entry(r.json, "docs/README.md") != NULL);
    it_response_free(&r);

    int pages = 0;
    json_t *all = follow_pages("/api/models/" SHARDED "/tree/main?limit=1", &pages);
    CHECK(pages == 3 && json_array_size(all) == 3);
    CHECK(find_entry(all, SHARD1) && find_entry(all, SHARD2) &&
          find_entry(all, "model.safetensors.index.json"));
    json_decref(all);

    check_hub_404("GET", "/api/models/" SINGLE "/tree/main/nothing-here", "EntryNotFound",
                  "file_not_found");
    check_hub_404("GET", "/api/models/" SINGLE "/tree/2", "RevisionNotFound", "version_not_found");
    check_hub_404("GET", "/api/models/acme/absent/tree/main", "RepoNotFound", "model_not_found");
}

/* ---- the real JS client ---- */

static json_t *tensor_table(const built_file *const *files, int count)
{
    json_t *table = json_object();
    for (int i = 0; i < count; i++) {
        st_file file;
        st_error err;
        if (st_header_parse(files[i]->bytes.data, files[i]->bytes.len, files[i]->bytes.len, NULL,
                            &file, &err) != ST_OK) {
            CHECK(false);
            continue;
        }
        for (size_t t = 0; t < file.tensor_count; t++) {
            const st_tensor *tensor = &file.tensors[t];
            json_t *shape = json_array();
            for (size_t d = 0; d < tensor->rank; d++)
                json_array_append_new(shape, json_integer((json_int_t)tensor->shape[d]));
            /* data_offsets as in the header: relative to the data section */
            json_object_set_new(table, tensor->name,
                                json_pack("{s:s, s:o, s:[I,I]}", "dtype",
                                          st_dtype_name(tensor->dtype), "shape", shape,
                                          "data_offsets", (json_int_t)tensor->begin,
                                          (json_int_t)tensor->end));
        }
        st_file_free(&file);
    }
    return table;
}

static json_t *client_case(const char *repo, const char *revision, bool sharded,
                           const built_file *const *weights, int weight_count,
                           const char *const *paths, int path_count, const built_file *download)
{
    uint64_t total;
    json_t *files = json_array();
    for (int i = 0; i < path_count; i++)
        json_array_append_new(files, json_string(paths[i]));
    return json_pack(
        "{s:s, s:s, s:b, s:o, s:o, s:o, s:o, s:{s:s, s:I, s:s}}", "repo", repo, "revision",
        revision, "sharded", sharded, "tensors", tensor_table(weights, weight_count), "parameters",
        parameters_json(weights, weight_count, &total), "clientParameters",
        count_parameters(weights, weight_count, &total, true), "files", files, "download", "path",
        download->path, "size", (json_int_t)download->bytes.len, "sha256", download->sha256);
}

TEST(javascript_client)
{
    const built_file *single[] = {&single_model};
    const built_file *shards[] = {&shard1, &shard2};
    const char *const single_paths[] = {"config.json", "docs/README.md", "model.safetensors"};
    const char *const sharded_paths[] = {SHARD1, SHARD2, "model.safetensors.index.json"};
    json_t *expect = json_pack(
        "{s:s, s:s, s:[s,s,s,s], s:[o,o,o]}", "hubUrl", it_srv.base, "search", "acme/hf", "models",
        "acme/hf-alpha", "acme/hf-sharded", "acme/hf-single", "acme/hf-zeta", "cases",
        client_case(SINGLE, "main", false, single, 1, single_paths, 3, &single_model),
        client_case(SHARDED, "main", true, shards, 2, sharded_paths, 3, &shard2),
        client_case(SINGLE, single_commit, false, single, 1, single_paths, 3, &config_file));
    /* listModels by tags: a registry tag on hf-single ("js-filter"), and both a
     * registry tag and one of the sharded model's own (none: its card has none) */
    it_response r = it_send_json("PATCH", "/v1/models/" SINGLE, write_token,
                                 "{\"tags\":{\"js-filter\":\"\",\"lane\":\"fast\"}}");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    json_object_set_new(expect, "tagFilter",
                        json_pack("{s:s, s:[s,s], s:[s]}", "search", "acme/hf", "tags", "js-filter",
                                  "lane:fast", "models", SINGLE));
    /* listModels by downloads: two more downloads of hf-zeta (pending until a sorted
     * list writes them), then the order and the counts the catalog holds */
    for (int i = 0; i < 2; i++) {
        r = it_get("/acme/hf-zeta/resolve/main/model.safetensors");
        CHECK_STATUS(r, 200);
        it_response_free(&r);
    }
    r = it_get("/v1/models?q=acme/hf-&sort=downloads&direction=-1");
    CHECK_STATUS(r, 200);
    json_t *order = json_array(), *counts = json_array();
    size_t i;
    json_t *item;
    json_array_foreach(json_object_get(r.json, "models"), i, item)
    {
        const char *name = json_string_value(json_object_get(item, "name"));
        if (strcmp(name, "acme/hf-unpublished") == 0)
            continue; /* the Hub's list has published models only */
        json_array_append_new(order, json_string(name));
        json_array_append(counts, json_object_get(item, "downloads"));
    }
    CHECK(json_array_size(order) == 4);
    it_response_free(&r);
    json_object_set_new(
        expect, "byDownloads",
        json_pack("{s:s, s:o, s:o}", "search", "acme/hf-", "models", order, "downloads", counts));
    /* the calls that need an hf_ token, paths-info and the commit id */
    char prefixed[300];
    snprintf(prefixed, sizeof prefixed, "hf_%s", write_token);
    json_object_set_new(expect, "accessToken", json_string(prefixed));
    json_object_set_new(expect, "tokenRepo",
                        json_pack("{s:s, s:s, s:[s,s,s]}", "repo", SINGLE, "commit", single_commit,
                                  "paths", "model.safetensors", "config.json", "docs/README.md"));
    char path[400];
    snprintf(path, sizeof path, "%s/hf-expect.json", it_srv.root);
    CHECK(expect != NULL && json_dump_file(expect, path, JSON_INDENT(1)) == 0);
    json_decref(expect);

    char command[600];
    snprintf(command, sizeof command, "TG_HF_EXPECT='%s' sh tests/hf/run.sh 2>&1", path);
    FILE *p = popen(command, "r");
    CHECK(p != NULL);
    if (p == NULL)
        return;
    char line[4096];
    bool reported = false;
    while (fgets(line, sizeof line, p) != NULL) {
        fputs(line, stdout);
        if (strncmp(line, "hf-js: ", 7) == 0)
            reported = true;
    }
    int status = pclose(p);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code == 77) {
        printf("javascript_client: SKIPPED (node is not installed)\n");
        return;
    }
    CHECK(code == 0);
    CHECK(reported);
}

/* Writes with the real @huggingface/hub JS client (tests/hf/write.mjs): createRepo,
 * uploadFiles (inline and LFS: a sharded safetensors model with its index), commits
 * with deletions, refusals (a pickle, code, an inconsistent index, a stale parent)
 * that publish nothing and name the reason, branches and tags, deleteRepo, and the
 * tokens of another namespace and none. */
TEST(javascript_client_writes)
{
    char write_hf[300], admin_hf[300], other_hf[300];
    snprintf(write_hf, sizeof write_hf, "hf_%s", it_token("write", "acme"));
    snprintf(admin_hf, sizeof admin_hf, "hf_%s", it_token("admin", NULL));
    snprintf(other_hf, sizeof other_hf, "hf_%s", it_token("write", "other"));
    json_t *expect =
        json_pack("{s:s, s:s, s:s, s:s, s:s}", "hubUrl", it_srv.base, "repo", "acme/hf-write",
                  "writeToken", write_hf, "adminToken", admin_hf, "otherToken", other_hf);
    char path[400];
    snprintf(path, sizeof path, "%s/hf-write.json", it_srv.root);
    CHECK(expect != NULL && json_dump_file(expect, path, 0) == 0);
    json_decref(expect);
    char command[600];
    snprintf(command, sizeof command,
             "TG_HF_SCRIPT=write.mjs TG_HF_EXPECT='%s' sh tests/hf/run.sh 2>&1", path);
    FILE *p = popen(command, "r");
    CHECK(p != NULL);
    if (p == NULL)
        return;
    char line[4096];
    bool reported = false;
    while (fgets(line, sizeof line, p) != NULL) {
        fputs(line, stdout);
        if (strncmp(line, "hf-js-write: ", 13) == 0)
            reported = true;
    }
    int status = pclose(p);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code == 77) {
        printf("javascript_client_writes: SKIPPED (node is not installed)\n");
        return;
    }
    CHECK(code == 0);
    CHECK(reported);
}

/* The real huggingface_hub Python client (tests/hf/python_client.sh starts its own
 * server; TG_HF_HUB_SRC names the client's source trees, never vendored): skipped
 * when the client cannot be imported. */
TEST(python_client)
{
    char command[1200];
    snprintf(command, sizeof command, "sh tests/hf/python_client.sh '%s' 2>&1", it_binary);
    FILE *p = popen(command, "r");
    CHECK(p != NULL);
    if (p == NULL)
        return;
    char line[4096];
    bool reported = false;
    while (fgets(line, sizeof line, p) != NULL) {
        fputs(line, stdout);
        if (strncmp(line, "hf-py ", 6) == 0)
            reported = true;
    }
    int status = pclose(p);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code == 77) {
        printf("python_client: SKIPPED (huggingface_hub cannot be imported; see "
               "docs/HF_CLIENTS.md)\n");
        return;
    }
    CHECK(code == 0);
    CHECK(reported);
}

/* ---- issue 12: what the real clients need beyond the read routes ---- */

static it_response post_form(const char *url, const char *form)
{
    const char *headers[] = {"Content-Type: application/x-www-form-urlencoded", NULL};
    it_request_opts o;
    memset(&o, 0, sizeof o);
    o.headers = headers;
    o.body = form;
    o.body_len = strlen(form);
    o.has_body = true;
    return it_request("POST", url, &o);
}

static it_response get_with_token(const char *url, const char *token)
{
    return it_request("GET", url, &(it_request_opts){.token = token});
}

/* The 40-hex commit id is a revision everywhere: Hub routes and /v1. */
TEST(commit_ids)
{
    char url[512];
    snprintf(url, sizeof url, "/v1/models/" SINGLE "/versions/%s", single_commit);
    it_response r = it_get(url);
    CHECK_STATUS(r, 200);
    CHECK(it_json_int(r.json, "version") == 1);
    it_response_free(&r);
    snprintf(url, sizeof url, "/api/models/" SHARDED "/revision/%s", sharded_commit);
    r = it_get(url);
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "sha"), sharded_commit);
    it_response_free(&r);
    snprintf(url, sizeof url, "/" SHARDED "/resolve/%s/" SHARD1, sharded_commit);
    r = it_request("HEAD", url, NULL);
    CHECK_STATUS(r, 200);
    check_header(&r, "X-Repo-Commit", sharded_commit);
    it_response_free(&r);
    /* another model's commit, and an unknown one, are not revisions of this one */
    snprintf(url, sizeof url, "/" SINGLE "/resolve/%s/model.safetensors", sharded_commit);
    check_hub_404("GET", url, "RevisionNotFound", "version_not_found");
    check_hub_404("GET", "/" SINGLE "/resolve/0123456789abcdef0123456789abcdef01234567/config.json",
                  "RevisionNotFound", "version_not_found");
}

TEST(refs_and_commits)
{
    it_response r = it_get("/api/models/" SINGLE "/refs");
    CHECK_STATUS(r, 200);
    json_t *branches = json_object_get(r.json, "branches");
    CHECK(json_array_size(branches) == 2);
    json_t *main_ref = json_array_get(branches, 0), *stable = json_array_get(branches, 1);
    CHECK_STR(json_string_value(json_object_get(main_ref, "name")), "main");
    CHECK_STR(json_string_value(json_object_get(main_ref, "ref")), "refs/heads/main");
    CHECK_STR(json_string_value(json_object_get(main_ref, "targetCommit")), single_commit);
    CHECK_STR(json_string_value(json_object_get(stable, "name")), "stable");
    CHECK_STR(json_string_value(json_object_get(stable, "targetCommit")), single_commit);
    json_t *tags = json_object_get(r.json, "tags");
    CHECK(json_array_size(tags) == 1); /* version 2 is a draft */
    CHECK_STR(json_string_value(json_object_get(json_array_get(tags, 0), "ref")), "refs/tags/1");
    CHECK(json_is_array(json_object_get(r.json, "converts")));
    it_response_free(&r);

    r = it_get("/api/models/" SINGLE "/commits/main");
    CHECK_STATUS(r, 200);
    CHECK(json_array_size(r.json) == 1);
    json_t *commit = json_array_get(r.json, 0);
    CHECK_STR(json_string_value(json_object_get(commit, "id")), single_commit);
    CHECK_STR(json_string_value(json_object_get(commit, "title")), "version 1");
    CHECK(json_is_string(json_object_get(commit, "date")));
    it_response_free(&r);
    char url[256];
    snprintf(url, sizeof url, "/api/models/" SINGLE "/commits/%s", single_commit);
    r = it_get(url);
    CHECK_STATUS(r, 200);
    CHECK(json_array_size(r.json) == 1);
    it_response_free(&r);
    check_hub_404("GET", "/api/models/acme/absent/refs", "RepoNotFound", "model_not_found");
    check_hub_404("GET", "/api/models/" SINGLE "/commits/2", "RevisionNotFound",
                  "version_not_found");
}

TEST(paths_info)
{
    /* huggingface_hub's form body */
    it_response r = post_form("/api/models/" SINGLE "/paths-info/main",
                              "paths=model.safetensors&paths=docs&paths=nope.bin&expand=True");
    CHECK_STATUS(r, 200);
    check_header(&r, "X-Repo-Commit", single_commit);
    CHECK(json_array_size(r.json) == 2);
    json_t *model = find_entry(r.json, "model.safetensors");
    CHECK_STR(json_string_value(json_object_get(model, "type")), "file");
    CHECK_STR(json_string_value(json_object_get(model, "oid")), single_model.sha256);
    CHECK_STR(json_string_value(json_object_get(json_object_get(model, "lfs"), "oid")),
              single_model.sha256);
    CHECK_STR(json_string_value(json_object_get(json_object_get(model, "lastCommit"), "id")),
              single_commit);
    json_t *docs = find_entry(r.json, "docs");
    CHECK_STR(json_string_value(json_object_get(docs, "type")), "directory");
    it_response_free(&r);
    /* the JS client's JSON body */
    char url[256];
    snprintf(url, sizeof url, "/api/models/" SINGLE "/paths-info/%s", single_commit);
    r = it_send_json("POST", url, NULL, "{\"paths\":[\"config.json\"],\"expand\":false}");
    CHECK_STATUS(r, 200);
    CHECK(json_array_size(r.json) == 1);
    json_t *config = json_array_get(r.json, 0);
    CHECK_STR(json_string_value(json_object_get(config, "path")), "config.json");
    CHECK(json_object_get(config, "lfs") == NULL && json_object_get(config, "lastCommit") == NULL);
    it_response_free(&r);
    r = it_send_json("POST", url, NULL, "{\"paths\":7}");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = post_form("/api/models/" SINGLE "/paths-info/9", "paths=config.json");
    CHECK_PROBLEM(r, 404, "version_not_found");
    check_header(&r, "X-Error-Code", "RevisionNotFound");
    it_response_free(&r);
}

TEST(blobs_expand_author_filter)
{
    it_response r = it_get("/api/models/" SINGLE "?blobs=True");
    CHECK_STATUS(r, 200);
    json_t *siblings = json_object_get(r.json, "siblings");
    CHECK(json_array_size(siblings) == 3);
    size_t i;
    json_t *sibling;
    json_array_foreach(siblings, i, sibling)
    {
        const char *name = text_or_empty(json_object_get(sibling, "rfilename"));
        CHECK(json_is_integer(json_object_get(sibling, "size")));
        CHECK(strlen(text_or_empty(json_object_get(sibling, "blobId"))) == 64);
        json_t *lfs = json_object_get(sibling, "lfs");
        if (strcmp(name, "model.safetensors") == 0) {
            CHECK_STR(json_string_value(json_object_get(lfs, "sha256")), single_model.sha256);
            CHECK(it_json_int(lfs, "size") == (long long)single_model.bytes.len);
            CHECK(it_json_int(lfs, "pointerSize") > 100);
        } else {
            CHECK(lfs == NULL);
        }
    }
    it_response_free(&r);
    r = it_get("/api/models/" SINGLE);
    CHECK_STATUS(r, 200);
    sibling = json_array_get(json_object_get(r.json, "siblings"), 0);
    CHECK(sibling != NULL && json_object_get(sibling, "size") == NULL);
    it_response_free(&r);

    r = it_get("/api/models/" SINGLE "/tree/main?expand=True&recursive=True");
    CHECK_STATUS(r, 200);
    CHECK(json_array_size(r.json) == 4);
    json_array_foreach(r.json, i, sibling)
    {
        json_t *last = json_object_get(sibling, "lastCommit");
        CHECK_STR(json_string_value(json_object_get(last, "id")), single_commit);
    }
    it_response_free(&r);

    r = it_get("/api/models?author=other");
    CHECK_STATUS(r, 200);
    CHECK(json_array_size(r.json) == 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(r.json, 0), "id")),
              "other/hf-unrelated");
    it_response_free(&r);
    r = it_get("/api/models?author=acme&search=hf-s&filter=safetensors");
    CHECK_STATUS(r, 200);
    CHECK(json_array_size(r.json) == 2);
    it_response_free(&r);
    r = it_get("/api/models?filter=text-classification");
    CHECK_STATUS(r, 200);
    CHECK(json_array_size(r.json) == 0);
    it_response_free(&r);
}

TEST(card_data)
{
    static const char readme[] = "---\n"
                                 "license: apache-2.0\n"
                                 "library_name: \"safetensors\"\n"
                                 "tags:\n"
                                 "- text-generation\n"
                                 "- 'tiny'\n"
                                 "datasets: [wikitext, c4]\n"
                                 "base_model: acme/base\n"
                                 "model-index:\n"
                                 "- name: hf-card\n"
                                 "  results:\n"
                                 "  - metrics: [{type: wer, value: 11.5}]\n"
                                 "inference: false\n"
                                 "---\n"
                                 "# A card\n";
    built_file card;
    memset(&card, 0, sizeof card);
    build_text(&card, "README.md", readme);
    create_model("acme/hf-card");
    upload("acme/hf-card", 1, &card);
    upload("acme/hf-card", 1, &config_file);
    char digest[65];
    publish("acme/hf-card", 1, digest);
    it_buf_free(&card.bytes);
    it_response r = it_get("/api/models/acme/hf-card");
    CHECK_STATUS(r, 200);
    json_t *data = json_object_get(r.json, "cardData");
    CHECK_STR(json_string_value(json_object_get(data, "license")), "apache-2.0");
    CHECK_STR(json_string_value(json_object_get(data, "library_name")), "safetensors");
    json_t *tags = json_object_get(data, "tags");
    CHECK(json_array_size(tags) == 2);
    CHECK_STR(json_string_value(json_array_get(tags, 1)), "tiny");
    CHECK(json_array_size(json_object_get(data, "datasets")) == 2);
    CHECK(json_is_false(json_object_get(data, "inference")));
    /* nested maps and lists (parsed by libyaml) */
    json_t *metric = json_array_get(
        json_object_get(
            json_array_get(
                json_object_get(json_array_get(json_object_get(data, "model-index"), 0), "results"),
                0),
            "metrics"),
        0);
    CHECK(json_real_value(json_object_get(metric, "value")) == 11.5);
    /* the card's tags, license, base model and datasets join the Hub's tags */
    json_t *hub_tags = json_object_get(r.json, "tags");
    static const char *const expected[] = {
        "safetensors",          "text-generation",  "tiny",      "license:apache-2.0",
        "base_model:acme/base", "dataset:wikitext", "dataset:c4"};
    CHECK(json_array_size(hub_tags) == sizeof expected / sizeof expected[0]);
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        CHECK_STR(json_string_value(json_array_get(hub_tags, i)), expected[i]);
    it_response_free(&r);
    /* a model without a root README.md has no cardData */
    r = it_get("/api/models/" SINGLE);
    CHECK(r.json != NULL && json_object_get(r.json, "cardData") == NULL);
    it_response_free(&r);
}

TEST(whoami_and_hf_tokens)
{
    it_response r = it_get("/api/whoami-v2");
    CHECK_PROBLEM(r, 401, "unauthorized");
    check_header(&r, "X-Error-Message", "Invalid credentials in Authorization header");
    it_response_free(&r);
    r = get_with_token("/api/whoami-v2", "hf_nonsense");
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    char prefixed[300];
    snprintf(prefixed, sizeof prefixed, "hf_%s", write_token);
    const char *const tokens[] = {write_token, prefixed};
    for (int i = 0; i < 2; i++) {
        r = get_with_token("/api/whoami-v2", tokens[i]);
        CHECK_STATUS(r, 200);
        CHECK_STR(it_json_str(&r, "name"), "acme");
        CHECK_STR(it_json_str(&r, "type"), "user");
        json_t *access = json_object_get(json_object_get(r.json, "auth"), "accessToken");
        CHECK_STR(json_string_value(json_object_get(access, "role")), "write");
        json_t *tg = json_object_get(r.json, "tensorgate");
        CHECK_STR(json_string_value(json_object_get(tg, "scope")), "write");
        CHECK_STR(json_string_value(json_object_get(tg, "namespace")), "acme");
        it_response_free(&r);
    }
    r = get_with_token("/api/whoami-v2", it_token("read", NULL));
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "name"), "tensorgate");
    CHECK(json_is_null(json_object_get(json_object_get(r.json, "tensorgate"), "namespace")));
    it_response_free(&r);
    /* the hf_ form writes too */
    r = it_send_json("POST", "/v1/models/" SINGLE "/versions", prefixed, "{}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
}

/* A repository as the Hub holds them: variants without an index, shards with an index
 * beside a consolidated file, a SentencePiece tokenizer.model, the card's images, and
 * paths with a space, '+' and non-ASCII letters. It publishes and downloads; a pickle
 * and the paths the Hub refuses too stay refused. */
static void put_file(const char *repo, const char *url_path, const void *data, size_t len, int want)
{
    char url[600];
    snprintf(url, sizeof url, "/v1/models/%s/versions/1/files/%s", repo, url_path);
    it_response r = it_send("PUT", url, write_token, data, len);
    CHECK_STATUS(r, want);
    if (r.status != want)
        fprintf(stderr, "  (PUT %s: %.*s)\n", url_path, (int)r.body.len,
                r.body.data ? (const char *)r.body.data : "");
    it_response_free(&r);
}

static void png_chunk(it_buf *b, const char *type, const void *data, uint32_t len)
{
    uint8_t be[4] = {(uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len};
    it_buf_append(b, be, 4);
    size_t start = b->len;
    it_buf_append(b, type, 4);
    if (len)
        it_buf_append(b, data, len);
    uint32_t crc = it_crc32(b->data + start, len + 4);
    uint8_t crc_be[4] = {(uint8_t)(crc >> 24), (uint8_t)(crc >> 16), (uint8_t)(crc >> 8),
                         (uint8_t)crc};
    it_buf_append(b, crc_be, 4);
}

TEST(mirror_hub_repository)
{
    const char *repo = "acme/hf-mirror";
    create_model(repo);
    const it_tensor_spec full[] = {{"embed.weight", "F32", 2, {4, 4, 0, 0}},
                                   {"head.weight", "F32", 2, {4, 2, 0, 0}}};
    const it_tensor_spec half[] = {{"embed.weight", "F16", 2, {4, 4, 0, 0}},
                                   {"head.weight", "F16", 2, {4, 2, 0, 0}}};
    const it_tensor_spec part1[] = {{"embed.weight", "F32", 2, {4, 4, 0, 0}}};
    const it_tensor_spec part2[] = {{"head.weight", "F32", 2, {4, 2, 0, 0}}};
    built_file variant_full, variant_half, consolidated, s1, s2;
    memset(&variant_full, 0, sizeof variant_full);
    memset(&variant_half, 0, sizeof variant_half);
    memset(&consolidated, 0, sizeof consolidated);
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    build(&variant_full, "model.safetensors", full, 2, 11);
    build(&variant_half, "model.fp16.safetensors", half, 2, 12);
    build(&consolidated, "original/consolidated.safetensors", full, 2, 13);
    build(&s1, "original/model-00001-of-00002.safetensors", part1, 1, 14);
    build(&s2, "original/model-00002-of-00002.safetensors", part2, 1, 15);
    const built_file *weights[] = {&variant_full, &variant_half, &consolidated, &s1, &s2};
    for (int i = 0; i < 5; i++)
        put_file(repo, weights[i]->path, weights[i]->bytes.data, weights[i]->bytes.len, 201);
    it_buf index = {0};
    it_buf_printf(&index,
                  "{\"metadata\":{\"total_size\":%llu},\"weight_map\":{"
                  "\"embed.weight\":\"model-00001-of-00002.safetensors\","
                  "\"head.weight\":\"model-00002-of-00002.safetensors\"}}",
                  (unsigned long long)(s1.bytes.len - 8 - it_header_len(&s1.bytes) + s2.bytes.len -
                                       8 - it_header_len(&s2.bytes)));
    put_file(repo, "original/model.safetensors.index.json", index.data, index.len, 201);
    it_buf_free(&index);

    /* tokenizer.model: a SentencePiece ModelProto with two pieces */
    static const uint8_t spm[] = {0x0a, 0x0e, 0x0a, 0x05, '<',  'u',  'n',  'k',  '>',  0x15, 0,
                                  0,    0,    0,    0x18, 0x02, 0x0a, 0x0a, 0x0a, 0x01, 'a',  0x15,
                                  0,    0,    0xc0, 0xbf, 0x18, 0x01, 0x12, 0x02, 0x08, 0x01};
    put_file(repo, "tokenizer.model", spm, sizeof spm, 201);
    /* the card's image, at a path with a space, '+' and non-ASCII letters */
    it_buf png = {0};
    it_buf_append(&png, "\x89PNG\r\n\x1a\n", 8);
    const uint8_t ihdr[13] = {0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0};
    png_chunk(&png, "IHDR", ihdr, 13);
    png_chunk(&png, "IDAT", "\x78\x9c\x63\x60\x00\x00\x00\x02\x00\x01", 10);
    png_chunk(&png, "IEND", NULL, 0);
    put_file(repo, "images/logo%20caf%C3%A9+1.png", png.data, png.len, 201);
    /* a broken PNG (its CRC) is refused, as are a pickle and the paths the Hub refuses */
    png.data[png.len - 1] ^= 1;
    put_file(repo, "images/broken.png", png.data, png.len, 422);
    put_file(repo, "pytorch_model.bin", it_pickle_p4, sizeof it_pickle_p4, 415);
    put_file(repo, "a%5Cb.json", "{}", 2, 400);           /* a backslash */
    put_file(repo, "a%01b.json", "{}", 2, 400);           /* a control character */
    put_file(repo, "images/%2E%2E/x.json", "{}", 2, 400); /* .. */
    put_file(repo, "bad%FF.json", "{}", 2, 400);          /* not UTF-8 */
    png.data[png.len - 1] ^= 1;

    put_file(repo, "my%20dir/a.json", "{}", 2, 201);
    put_file(repo, "my%20dir/b.json", "[]", 2, 201);
    char digest[65];
    publish(repo, 1, digest);
    CHECK(strlen(digest) == 64);
    /* the Link of a directory with a space is percent-encoded and leads on */
    int pages = 0;
    json_t *dir = follow_pages("/api/models/acme/hf-mirror/tree/main/my%20dir?limit=1", &pages);
    CHECK(pages == 2 && json_array_size(dir) == 2);
    CHECK(find_entry(dir, "my dir/b.json") != NULL);
    json_decref(dir);
    it_response r = it_get("/v1/models/acme/hf-mirror/versions/1/files");
    CHECK_STATUS(r, 200);
    json_t *files = json_object_get(r.json, "files");
    CHECK(json_array_size(files) == 10);
    size_t i;
    json_t *file;
    json_array_foreach(files, i, file)
    {
        const char *path = text_or_empty(json_object_get(file, "path"));
        const char *kind = text_or_empty(json_object_get(file, "kind"));
        if (strcmp(path, "tokenizer.model") == 0)
            CHECK_STR(kind, "sentencepiece");
        if (strncmp(path, "images/", 7) == 0) {
            CHECK_STR(path, "images/logo caf\xc3\xa9+1.png");
            CHECK_STR(kind, "png");
        }
    }
    it_response_free(&r);
    /* the Hub routes serve them byte for byte, the image with the lfs fields */
    r = it_get("/acme/hf-mirror/resolve/main/images/logo%20caf%C3%A9+1.png");
    CHECK_STATUS(r, 200);
    CHECK(r.body.len == png.len && memcmp(r.body.data, png.data, png.len) == 0);
    it_response_free(&r);
    r = it_get("/acme/hf-mirror/resolve/main/tokenizer.model");
    CHECK_STATUS(r, 200);
    CHECK(r.body.len == sizeof spm && memcmp(r.body.data, spm, sizeof spm) == 0);
    it_response_free(&r);
    r = it_get("/api/models/acme/hf-mirror/tree/main/images");
    CHECK_STATUS(r, 200);
    json_t *entry = json_array_get(r.json, 0);
    CHECK_STR(text_or_empty(json_object_get(entry, "path")), "images/logo caf\xc3\xa9+1.png");
    CHECK(json_object_get(entry, "lfs") != NULL);
    it_response_free(&r);
    r = it_get("/api/models/acme/hf-mirror?blobs=true");
    CHECK_STATUS(r, 200);
    CHECK(json_array_size(json_object_get(r.json, "siblings")) == 10);
    it_response_free(&r);
    it_buf_free(&png);
    for (int w = 0; w < 5; w++)
        it_buf_free(&((built_file *)weights[w])->bytes);

    /* a shard set without an index must still hold disjoint tensors */
    r = it_send_json("POST", "/v1/models/acme/hf-mirror/versions", write_token, "{}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    built_file dup1, dup2;
    memset(&dup1, 0, sizeof dup1);
    memset(&dup2, 0, sizeof dup2);
    build(&dup1, "model-00001-of-00002.safetensors", full, 2, 16);
    build(&dup2, "model-00002-of-00002.safetensors", part2, 1, 17);
    upload(repo, 2, &dup1);
    upload(repo, 2, &dup2);
    r = it_send_json("POST", "/v1/models/acme/hf-mirror/versions/2/publish", write_token, NULL);
    CHECK_PROBLEM(r, 422, "index_mismatch");
    it_response_free(&r);
    it_buf_free(&dup1.bytes);
    it_buf_free(&dup2.bytes);
}

/* A Hub time as the Hub writes it: "2026-01-01T00:00:00.000Z" (milliseconds). */
static void check_hub_time(const json_t *value)
{
    const char *text = json_string_value(value);
    bool ok =
        text != NULL && strlen(text) == 24 && text[10] == 'T' && text[19] == '.' && text[23] == 'Z';
    for (int i = 20; ok && i < 23; i++)
        ok = text[i] >= '0' && text[i] <= '9';
    CHECK(ok);
    if (!ok)
        fprintf(stderr, "  (time '%s')\n", text ? text : "(none)");
}

/* Every time of the Hub routes carries milliseconds: huggingface_hub 0.17 parses no
 * other form. */
TEST(hub_times_milliseconds)
{
    it_response r = it_get("/api/models/" SINGLE);
    CHECK_STATUS(r, 200);
    check_hub_time(json_object_get(r.json, "createdAt"));
    check_hub_time(json_object_get(r.json, "lastModified"));
    it_response_free(&r);
    r = it_get("/api/models?search=hf-");
    CHECK_STATUS(r, 200);
    CHECK(json_array_size(r.json) >= 2);
    size_t i;
    json_t *item;
    json_array_foreach(r.json, i, item)
    {
        check_hub_time(json_object_get(item, "createdAt"));
        check_hub_time(json_object_get(item, "lastModified"));
    }
    it_response_free(&r);
    r = it_get("/api/models/" SINGLE "/commits/main");
    CHECK_STATUS(r, 200);
    check_hub_time(json_object_get(json_array_get(r.json, 0), "date"));
    it_response_free(&r);
    r = it_get("/api/models/" SINGLE "/tree/main?expand=True");
    CHECK_STATUS(r, 200);
    CHECK(json_array_size(r.json) > 0);
    json_array_foreach(r.json, i, item)
    {
        if (json_object_get(item, "lastCommit") != NULL)
            check_hub_time(json_object_get(json_object_get(item, "lastCommit"), "date"));
    }
    it_response_free(&r);
}

/* huggingface_hub's repo_type="dataset" and "space" requests: a Hub 404 saying that
 * only models are served, never the router's bare "no such route". */
TEST(datasets_and_spaces)
{
    static const char *const requests[][2] = {
        {"GET", "/api/datasets"},
        {"GET", "/api/datasets/acme/data"},
        {"GET", "/api/datasets/squad"},
        {"GET", "/api/datasets/acme/data/revision/main"},
        {"GET", "/api/datasets/acme/data/tree/main"},
        {"GET", "/api/datasets/acme/data/refs"},
        {"POST", "/api/datasets/acme/data/paths-info/main"},
        {"HEAD", "/datasets/acme/data/resolve/main/train.json"},
        {"GET", "/datasets/squad/resolve/main/train.json"},
        {"GET", "/api/spaces"},
        {"GET", "/api/spaces/acme/app"},
        {"POST", "/api/spaces/acme/app/preupload/main"},
        {"HEAD", "/spaces/acme/app/resolve/main/app.py"},
    };
    for (size_t i = 0; i < sizeof requests / sizeof requests[0]; i++) {
        it_response r = it_request(requests[i][0], requests[i][1], NULL);
        CHECK_STATUS(r, 404);
        check_header(&r, "X-Error-Code", "RepoNotFound");
        char message[256] = "";
        it_header(&r, "X-Error-Message", message, sizeof message);
        CHECK(strstr(message, "serves models only") != NULL);
        if (strcmp(requests[i][0], "HEAD") != 0)
            CHECK_PROBLEM(r, 404, "repo_type_not_served");
        if (r.status != 404 || strstr(message, "serves models only") == NULL)
            fprintf(stderr, "  (%s %s)\n", requests[i][0], requests[i][1]);
        it_response_free(&r);
    }
}

/* An answer as text to compare: the status, every header but Date, the body; the
 * model's name (hf-single or hf-absent, the same length) written as NAME. */
static void answer_text(const it_response *r, char *out, size_t cap)
{
    snprintf(out, cap, "%ld\n", r->status);
    size_t used = strlen(out);
    const char *p = (const char *)r->headers.data;
    const char *end = p + r->headers.len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        size_t len = eol ? (size_t)(eol - p + 1) : (size_t)(end - p);
        if (strncasecmp(p, "Date:", 5) != 0 && used + len < cap) {
            memcpy(out + used, p, len);
            used += len;
        }
        p += len;
    }
    if (used + r->body.len < cap) {
        memcpy(out + used, r->body.data, r->body.len);
        used += r->body.len;
    }
    out[used] = '\0';
    static const char *const names[] = {"hf-single", "hf-absent"};
    for (size_t n = 0; n < 2; n++)
        for (char *at = strstr(out, names[n]); at != NULL; at = strstr(at, names[n]))
            memcpy(at, "NAME-NAME", 9);
}

/* Under --auth-read the Hub routes' 401 carry the Hub's error codes: huggingface_hub's
 * repo_exists answers False for RepoNotFound (no token) instead of raising. A model of
 * a namespace the token may not read is answered exactly as a model that does not
 * exist (404 RepoNotFound), never 403 GatedRepo, which repo_exists reads as "exists". */
TEST(auth_errors_hub_codes)
{
    int status = it_server_stop();
    CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    static const char *const flags[] = {"--auth-read", NULL};
    CHECK(it_server_start_args(flags, NULL) == 0);
    const char *const urls[] = {"/api/models/" SINGLE, "/" SINGLE "/resolve/main/config.json",
                                "/api/models/" SINGLE "/tree/main", "/api/models/" SINGLE "/refs"};
    char prefixed[300];
    snprintf(prefixed, sizeof prefixed, "hf_%s", it_token("read", "acme"));
    const char *other = it_token("read", "other");
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        it_response r = it_get(urls[i]);
        CHECK_PROBLEM(r, 401, "unauthorized");
        check_header(&r, "X-Error-Code", "RepoNotFound");
        it_response_free(&r);
        r = get_with_token(urls[i], "tg_0000");
        CHECK_PROBLEM(r, 401, "unauthorized");
        check_header(&r, "X-Error-Message", "Invalid credentials in Authorization header");
        char code[64];
        CHECK(it_header(&r, "X-Error-Code", code, sizeof code) == NULL);
        it_response_free(&r);
        /* a model the token may not read is answered as one that does not exist */
        r = get_with_token(urls[i], other);
        CHECK_PROBLEM(r, 404, "model_not_found");
        check_header(&r, "X-Error-Code", "RepoNotFound");
        char invisible[4096], absent[4096], absent_url[300];
        answer_text(&r, invisible, sizeof invisible);
        it_response_free(&r);
        snprintf(absent_url, sizeof absent_url, "%s", urls[i]);
        memcpy(strstr(absent_url, "hf-single"), "hf-absent", 9);
        r = get_with_token(absent_url, prefixed);
        answer_text(&r, absent, sizeof absent);
        it_response_free(&r);
        CHECK_STR(invisible, absent);
        r = get_with_token(absent_url, other);
        answer_text(&r, absent, sizeof absent);
        it_response_free(&r);
        CHECK_STR(invisible, absent);
        r = get_with_token(urls[i], prefixed);
        CHECK_STATUS(r, 200);
        it_response_free(&r);
    }
    /* the /v1 routes keep their plain problem answers */
    it_response r = it_get("/v1/models/" SINGLE);
    CHECK_PROBLEM(r, 401, "unauthorized");
    char code[64];
    CHECK(it_header(&r, "X-Error-Code", code, sizeof code) == NULL);
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    write_token = it_token("write", "acme");
    build_files();
    RUN(publish_models);
    RUN(resolve_headers);
    RUN(ranges_are_206);
    RUN(not_found_codes);
    RUN(model_info);
    RUN(models_list_and_paging);
    RUN(tree);
    RUN(javascript_client);
    RUN(javascript_client_writes);
    RUN(python_client);
    RUN(commit_ids);
    RUN(refs_and_commits);
    RUN(paths_info);
    RUN(blobs_expand_author_filter);
    RUN(card_data);
    RUN(whoami_and_hf_tokens);
    RUN(mirror_hub_repository);
    RUN(hub_times_milliseconds);
    RUN(datasets_and_spaces);
    RUN(auth_errors_hub_codes);
    built_file *files[] = {&single_model,  &shard1,      &shard2,
                           &sharded_index, &config_file, &readme_file};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        it_buf_free(&files[i]->bytes);
    return it_finish(argv[0]);
}
