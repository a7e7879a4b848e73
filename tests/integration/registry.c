/* Integration tests of the registry metadata (docs/MANUAL.md "Tags and
 * descriptions", "Search", "Download counts") over real HTTP: PATCH merges tags
 * and keeps the bound whole (nothing changes past 32), a version's own metadata,
 * another namespace's token and no token refused with nothing changed, GET
 * /v1/models by tag and text, the Hub list (/api/models) by registry tags, card
 * tags and "gguf", only published models, and the download counter: which GETs
 * count, sort=downloads on both lists with paging, and counts kept across a
 * restart (written at shutdown). */
#include "harness.h"

static const char *writer, *other_writer, *admin;
static it_buf weights, gguf;

/* Creates model (if new) with a draft holding model.safetensors and, when readme is
 * not NULL, README.md and config.json; publishes it when publish. The version. */
static int make(const char *model, const char *readme, bool with_gguf, bool publish)
{
    int version = it_make_version(writer, model, "model.safetensors", &weights, false);
    CHECK(version >= 1);
    char url[512];
    if (readme != NULL) {
        snprintf(url, sizeof url, "/v1/models/%s/versions/%d/files/README.md", model, version);
        it_response r = it_send("PUT", url, writer, readme, strlen(readme));
        CHECK_STATUS(r, 201);
        it_response_free(&r);
        snprintf(url, sizeof url, "/v1/models/%s/versions/%d/files/config.json", model, version);
        r = it_send("PUT", url, writer, "{\"model_type\":\"reg\"}", 20);
        CHECK_STATUS(r, 201);
        it_response_free(&r);
    }
    if (with_gguf) {
        snprintf(url, sizeof url, "/v1/models/%s/versions/%d/files/model.gguf", model, version);
        it_response r = it_send("PUT", url, writer, gguf.data, gguf.len);
        CHECK_STATUS(r, 201);
        it_response_free(&r);
    }
    if (publish) {
        snprintf(url, sizeof url, "/v1/models/%s/versions/%d/publish", model, version);
        it_response r = it_send_json("POST", url, writer, "{}");
        CHECK_STATUS(r, 200);
        it_response_free(&r);
    }
    return version;
}

/* The "name" (or Hub "id") of each item of a list answer, joined with ",". */
static void names_of(const json_t *items, const char *field, char *out, size_t cap)
{
    out[0] = '\0';
    size_t i, used = 0;
    json_t *item;
    json_array_foreach(items, i, item)
    {
        const char *name = json_string_value(json_object_get(item, field));
        int n = snprintf(out + used, cap - used, "%s%s", used ? "," : "", name ? name : "?");
        if (n < 0 || (size_t)n >= cap - used)
            break;
        used += (size_t)n;
    }
}

static void expect_v1(const char *query, const char *want)
{
    char path[512], got[1024];
    snprintf(path, sizeof path, "/v1/models?%s", query);
    it_response r = it_get(path);
    CHECK_STATUS(r, 200);
    names_of(json_object_get(r.json, "models"), "name", got, sizeof got);
    CHECK_STR(got, want);
    it_response_free(&r);
}

static void expect_hub(const char *query, const char *want)
{
    char path[512], got[1024];
    snprintf(path, sizeof path, "/api/models?%s", query);
    it_response r = it_get(path);
    CHECK_STATUS(r, 200);
    names_of(r.json, "id", got, sizeof got);
    CHECK_STR(got, want);
    it_response_free(&r);
}

/* GET /v1/models/org/name: the field's JSON text (compact). */
static char *model_field(const char *model, const char *field)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/models/%s", model);
    it_response r = it_get(path);
    CHECK_STATUS(r, 200);
    char *text =
        json_dumps(json_object_get(r.json, field), JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    it_response_free(&r);
    return text;
}

static void check_field(const char *model, const char *field, const char *want)
{
    char *got = model_field(model, field);
    CHECK_STR(got, want);
    free(got);
}

TEST(patch_merges_tags_and_bounds_them)
{
    make("acme/reg-a",
         "---\ntags: [tiny, vision]\nlicense: mit\nlanguage: en\ndatasets: [c4]\n---\n# A\n", false,
         true);
    it_response r =
        it_send_json("PATCH", "/v1/models/acme/reg-a", writer,
                     "{\"description\":\"Tiny Vision encoder\","
                     "\"tags\":{\"stage\":\"prod\",\"team\":\"vision\",\"old\":\"x\"}}");
    CHECK_STATUS(r, 200);
    CHECK_STR(json_string_value(json_object_get(r.json, "description")), "Tiny Vision encoder");
    it_response_free(&r);
    /* merge: replace one, delete one, add one; the description stays */
    r = it_send_json("PATCH", "/v1/models/acme/reg-a", writer,
                     "{\"tags\":{\"stage\":\"staging\",\"old\":null,\"bare\":\"\",\"gone\":null}}");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    check_field("acme/reg-a", "tags", "{\"bare\":\"\",\"stage\":\"staging\",\"team\":\"vision\"}");
    check_field("acme/reg-a", "description", "\"Tiny Vision encoder\"");
    /* null clears the description */
    r = it_send_json("PATCH", "/v1/models/acme/reg-a", writer, "{\"description\":null}");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    check_field("acme/reg-a", "description", "\"\"");
    r = it_send_json("PATCH", "/v1/models/acme/reg-a", writer,
                     "{\"description\":\"Tiny Vision encoder\"}");
    it_response_free(&r);

    /* 30 more would make 33: refused whole, the description included */
    it_buf body = {0};
    it_buf_printf(&body, "{\"description\":\"lost\",\"tags\":{");
    for (int i = 0; i < 30; i++)
        it_buf_printf(&body, "%s\"k%02d\":\"v\"", i ? "," : "", i);
    it_buf_printf(&body, "}}");
    it_buf_append(&body, "", 1);
    r = it_send_json("PATCH", "/v1/models/acme/reg-a", writer, (const char *)body.data);
    CHECK_PROBLEM(r, 409, "too_many_tags");
    it_response_free(&r);
    check_field("acme/reg-a", "tags", "{\"bare\":\"\",\"stage\":\"staging\",\"team\":\"vision\"}");
    check_field("acme/reg-a", "description", "\"Tiny Vision encoder\"");
    /* 29 fit exactly (32 in all), on a model of its own */
    make("acme/reg-full", NULL, false, false);
    body.len = 0;
    it_buf_printf(&body, "{\"tags\":{");
    for (int i = 0; i < 32; i++)
        it_buf_printf(&body, "%s\"k%02d\":\"v\"", i ? "," : "", i);
    it_buf_printf(&body, "}}");
    it_buf_append(&body, "", 1);
    r = it_send_json("PATCH", "/v1/models/acme/reg-full", writer, (const char *)body.data);
    CHECK_STATUS(r, 200);
    CHECK(json_object_size(json_object_get(r.json, "tags")) == 32);
    it_response_free(&r);
    r = it_send_json("PATCH", "/v1/models/acme/reg-full", writer,
                     "{\"tags\":{\"one-more\":\"v\"}}");
    CHECK_PROBLEM(r, 409, "too_many_tags");
    it_response_free(&r);
    /* a deletion and an addition in one PATCH stay within the bound */
    r = it_send_json("PATCH", "/v1/models/acme/reg-full", writer,
                     "{\"tags\":{\"k00\":null,\"one-more\":\"v\"}}");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    it_buf_free(&body);
}

TEST(hostile_patches_change_nothing)
{
    static const char *const bad[] = {
        "{\"tags\":{\"bad key\":\"v\"}}",
        "{\"tags\":{\"-lead\":\"v\"}}",
        "{\"tags\":{\"a..b\":\"v\"}}",
        "{\"tags\":{\"k\":\"line\\nbreak\"}}",
        "{\"tags\":{\"k\":7}}",
        "{\"tags\":{\"k\":[\"v\"]}}",
        "{\"tags\":[\"k\"]}",
        "{\"tags\":\"k=v\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        it_response r = it_send_json("PATCH", "/v1/models/acme/reg-a", writer, bad[i]);
        CHECK_PROBLEM(r, 400, "invalid_tag");
        if (r.status != 400)
            fprintf(stderr, "  body %s\n", bad[i]);
        it_response_free(&r);
    }
    char body[1024];
    /* a 65-byte key, a 257-byte value */
    snprintf(body, sizeof body, "{\"tags\":{\"%065d\":\"v\"}}", 0);
    it_response r = it_send_json("PATCH", "/v1/models/acme/reg-a", writer, body);
    CHECK_PROBLEM(r, 400, "invalid_tag");
    it_response_free(&r);
    snprintf(body, sizeof body, "{\"tags\":{\"k\":\"%0257d\"}}", 0);
    r = it_send_json("PATCH", "/v1/models/acme/reg-a", writer, body);
    CHECK_PROBLEM(r, 400, "invalid_tag");
    it_response_free(&r);
    /* jansson refuses a NUL inside a string before any tag check */
    r = it_send_json("PATCH", "/v1/models/acme/reg-a", writer,
                     "{\"tags\":{\"k\":\"nul\\u0000inside\"}}");
    CHECK_PROBLEM(r, 400, "invalid_json");
    it_response_free(&r);
    /* one PATCH names at most 64 tags, deletions included */
    it_buf many = {0};
    it_buf_printf(&many, "{\"tags\":{");
    for (int i = 0; i < 65; i++)
        it_buf_printf(&many, "%s\"d%02d\":null", i ? "," : "", i);
    it_buf_printf(&many, "}}");
    it_buf_append(&many, "", 1);
    r = it_send_json("PATCH", "/v1/models/acme/reg-a", writer, (const char *)many.data);
    CHECK_PROBLEM(r, 409, "too_many_tags");
    it_response_free(&r);
    it_buf_free(&many);
    r = it_send_json("PATCH", "/v1/models/acme/reg-a", writer, "{\"owner\":\"me\"}");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = it_send_json("PATCH", "/v1/models/acme/reg-a", writer, "{\"description\":5}");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    /* another namespace's write token, a read token, no token */
    r = it_send_json("PATCH", "/v1/models/acme/reg-a", other_writer, "{\"tags\":{\"x\":\"y\"}}");
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_send_json("PATCH", "/v1/models/acme/reg-a/versions/1", other_writer,
                     "{\"description\":\"mine\"}");
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_send_json("PATCH", "/v1/models/acme/reg-a", it_token("read", NULL),
                     "{\"tags\":{\"x\":\"y\"}}");
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_send_json("PATCH", "/v1/models/acme/reg-a", NULL, "{\"tags\":{\"x\":\"y\"}}");
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    r = it_send_json("PATCH", "/v1/models/acme/no-such", writer, "{\"tags\":{\"x\":\"y\"}}");
    CHECK_PROBLEM(r, 404, "model_not_found");
    it_response_free(&r);
    check_field("acme/reg-a", "tags", "{\"bare\":\"\",\"stage\":\"staging\",\"team\":\"vision\"}");
    check_field("acme/reg-a", "description", "\"Tiny Vision encoder\"");
}

TEST(version_metadata)
{
    it_response r = it_send_json("PATCH", "/v1/models/acme/reg-a/versions/1", writer,
                                 "{\"description\":\"first cut\",\"tags\":{\"run\":\"42\"}}");
    CHECK_STATUS(r, 200);
    CHECK_STR(json_string_value(json_object_get(r.json, "state")), "published");
    it_response_free(&r);
    r = it_get("/v1/models/acme/reg-a/versions/latest");
    CHECK_STATUS(r, 200);
    CHECK_STR(json_string_value(json_object_get(r.json, "description")), "first cut");
    CHECK_STR(json_string_value(json_object_get(json_object_get(r.json, "tags"), "run")), "42");
    it_response_free(&r);
    /* the model's versions list shows them; the model's own tags are apart */
    char *versions = model_field("acme/reg-a", "versions");
    CHECK(strstr(versions, "\"description\":\"first cut\"") != NULL);
    CHECK(strstr(versions, "\"tags\":{\"run\":\"42\"}") != NULL);
    free(versions);
    r = it_send_json("PATCH", "/v1/models/acme/reg-a/versions/9", writer, "{\"tags\":{}}");
    CHECK_PROBLEM(r, 404, "version_not_found");
    it_response_free(&r);
}

TEST(search_by_tag_and_text)
{
    make("acme/reg-b", "---\nlicense: apache-2.0\n---\n", true, true);
    make("acme/reg-draft", NULL, false, false);
    it_response r =
        it_send_json("PATCH", "/v1/models/acme/reg-b", writer, "{\"tags\":{\"team\":\"audio\"}}");
    it_response_free(&r);
    r = it_send_json("PATCH", "/v1/models/acme/reg-draft", writer,
                     "{\"tags\":{\"team\":\"vision\"},\"description\":\"work in progress\"}");
    it_response_free(&r);
    expect_v1("tag=team", "acme/reg-a,acme/reg-b,acme/reg-draft");
    expect_v1("tag=team=vision", "acme/reg-a,acme/reg-draft");
    expect_v1("tag=team=vision&tag=stage", "acme/reg-a");
    expect_v1("tag=team=vision&tag=stage=prod", "");
    expect_v1("tag=bare", "acme/reg-a");
    expect_v1("q=VISION+ENCODER", "acme/reg-a");   /* the description, any case */
    expect_v1("q=audio", "acme/reg-b");            /* a tag value */
    expect_v1("q=reg-dr", "acme/reg-draft");       /* the name */
    expect_v1("q=vision&tag=stage", "acme/reg-a"); /* all filters at once */
    expect_v1("q=%25&tag=team", "");               /* no pattern characters */
    /* the listing shows each model's tags and downloads */
    r = it_get("/v1/models?tag=team=audio");
    json_t *item = json_array_get(json_object_get(r.json, "models"), 0);
    CHECK_STR(json_string_value(json_object_get(json_object_get(item, "tags"), "team")), "audio");
    CHECK(json_is_integer(json_object_get(item, "downloads")));
    it_response_free(&r);
    /* bad filters */
    static const char *const bad[] = {"/v1/models?tag=bad%20key",
                                      "/v1/models?tag=", "/v1/models?tag=k=%01"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = it_get(bad[i]);
        CHECK_PROBLEM(r, 400, "invalid_tag");
        it_response_free(&r);
    }
    r = it_get("/v1/models?tag=a&tag=b&tag=c&tag=d&tag=e&tag=f&tag=g&tag=h&tag=i");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = it_get("/v1/models?sort=likes");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = it_get("/v1/models?sort=downloads&direction=1");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);

    /* the Hub list: published models only, by registry tags, card tags and gguf */
    expect_hub("search=acme/reg-", "acme/reg-a,acme/reg-b");
    expect_hub("filter=tiny", "acme/reg-a");
    expect_hub("filter=license:mit", "acme/reg-a");
    expect_hub("filter=dataset:c4", "acme/reg-a");
    expect_hub("filter=en", "acme/reg-a");
    expect_hub("filter=team:vision", "acme/reg-a"); /* reg-draft is not published */
    expect_hub("filter=bare", "acme/reg-a");
    expect_hub("filter=gguf", "acme/reg-b");
    expect_hub("filter=license:apache-2.0&filter=team:audio", "acme/reg-b");
    expect_hub("filter=gguf&filter=tiny", "");
    expect_hub("filter=safetensors&search=acme/reg-", "acme/reg-a,acme/reg-b");
    expect_hub("filter=team", ""); /* team has a value: its tag is team:VALUE */
    expect_hub("filter=&search=acme/reg-", "acme/reg-a,acme/reg-b"); /* empty: no filter */
    r = it_get("/api/models?search=acme/reg-a");
    json_t *tags = json_object_get(json_array_get(r.json, 0), "tags");
    char *text = json_dumps(tags, JSON_COMPACT);
    CHECK_STR(text, "[\"safetensors\",\"bare\",\"stage:staging\",\"team:vision\",\"dataset:c4\","
                    "\"en\",\"license:mit\",\"tiny\",\"vision\"]");
    free(text);
    it_response_free(&r);
    /* modelInfo: the card's tags first, as before, then the registry's */
    r = it_get("/api/models/acme/reg-a");
    text = json_dumps(json_object_get(r.json, "tags"), JSON_COMPACT);
    CHECK_STR(text, "[\"safetensors\",\"tiny\",\"vision\",\"en\",\"license:mit\",\"dataset:c4\","
                    "\"bare\",\"stage:staging\",\"team:vision\"]");
    free(text);
    it_response_free(&r);
    /* a newer published version without the card: its tags no longer find the model */
    make("acme/reg-a", NULL, false, true);
    expect_hub("filter=tiny", "");
    expect_hub("filter=team:vision", "acme/reg-a");
}

static long long downloads_of(const char *model)
{
    char *text = model_field(model, "downloads");
    long long n = text ? atoll(text) : -1;
    free(text);
    return n;
}

static void get_counted(const char *path, const char *range, long want_status)
{
    char header[64];
    const char *headers[] = {header, NULL};
    snprintf(header, sizeof header, "Range: %s", range ? range : "");
    it_request_opts o = {.headers = range ? headers : NULL};
    it_response r = it_request("GET", path, &o);
    CHECK_STATUS(r, want_status);
    it_response_free(&r);
}

TEST(downloads_count_and_sort)
{
    make("acme/reg-c", "# no card\n", false, true);
    long long a0 = downloads_of("acme/reg-a"), b0 = downloads_of("acme/reg-b");
    CHECK(a0 == 0 && b0 == 0);
    /* counted: GETs of config.json and weights, whole or from byte 0, on both APIs */
    get_counted("/acme/reg-b/resolve/main/model.safetensors", NULL, 200);
    get_counted("/acme/reg-b/resolve/main/model.gguf", NULL, 200);
    get_counted("/v1/models/acme/reg-b/versions/1/files/model.safetensors", NULL, 200);
    get_counted("/acme/reg-b/resolve/main/model.safetensors", "bytes=0-99", 206);
    get_counted("/acme/reg-c/resolve/main/config.json", NULL, 200);
    /* not counted: HEAD, a Range continuation, README.md */
    it_response r = it_request("HEAD", "/acme/reg-a/resolve/main/model.safetensors", NULL);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    get_counted("/acme/reg-b/resolve/main/model.safetensors", "bytes=100-", 206);
    get_counted("/acme/reg-c/resolve/main/README.md", NULL, 200);
    /* sort=downloads flushes this server's pending counts first */
    expect_v1("sort=downloads&direction=-1&q=acme/reg-",
              "acme/reg-b,acme/reg-c,acme/reg-a,acme/reg-draft,acme/reg-full");
    CHECK(downloads_of("acme/reg-b") == 4);
    CHECK(downloads_of("acme/reg-c") == 1);
    CHECK(downloads_of("acme/reg-a") == 0);
    expect_hub("sort=downloads&direction=-1&search=acme/reg-", "acme/reg-b,acme/reg-c,acme/reg-a");
    /* the Hub list's next page keeps the order and the filters (Link) */
    char link[2048];
    r = it_get("/api/models?sort=downloads&direction=-1&search=acme/reg-&filter=safetensors"
               "&limit=1");
    CHECK_STATUS(r, 200);
    CHECK(it_header(&r, "Link", link, sizeof link) != NULL);
    it_response_free(&r);
    char *start = strstr(link, "/api/models?"), *end = strstr(link, ">; rel=\"next\"");
    CHECK(start != NULL && end != NULL && strstr(link, "sort=downloads") != NULL &&
          strstr(link, "filter=safetensors") != NULL);
    if (start != NULL && end != NULL) {
        *end = '\0';
        r = it_get(start);
        CHECK_STATUS(r, 200);
        CHECK_STR(json_string_value(json_object_get(json_array_get(r.json, 0), "id")),
                  "acme/reg-c");
        it_response_free(&r);
    }
    r = it_get("/api/models?sort=downloads&search=acme/reg-b");
    CHECK(it_json_int(json_array_get(r.json, 0), "downloads") == 4);
    it_response_free(&r);
    /* paging by downloads: one per page, the cursor keeps the order */
    char path[512] = "/v1/models?sort=downloads&q=acme/reg-&limit=2", got[1024] = "";
    for (int page = 0; page < 5 && path[0] != '\0'; page++) {
        r = it_get(path);
        CHECK_STATUS(r, 200);
        char names[512];
        names_of(json_object_get(r.json, "models"), "name", names, sizeof names);
        size_t used = strlen(got);
        snprintf(got + used, sizeof got - used, "%s%s", used ? "," : "", names);
        const char *next = json_string_value(json_object_get(r.json, "next_cursor"));
        if (next != NULL)
            snprintf(path, sizeof path, "/v1/models?sort=downloads&q=acme/reg-&limit=2&cursor=%s",
                     next);
        else
            path[0] = '\0';
        it_response_free(&r);
    }
    CHECK_STR(got, "acme/reg-b,acme/reg-c,acme/reg-a,acme/reg-draft,acme/reg-full");
    /* a cursor of the name order is not one of the downloads order */
    r = it_get("/v1/models?limit=1&q=acme/reg-");
    char cursor_path[512];
    snprintf(cursor_path, sizeof cursor_path, "/v1/models?sort=downloads&cursor=%s",
             json_string_value(json_object_get(r.json, "next_cursor")));
    it_response_free(&r);
    r = it_get(cursor_path);
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);

    /* a count still pending at shutdown is written then, and kept */
    get_counted("/acme/reg-a/resolve/main/model.safetensors", NULL, 200);
    CHECK(it_server_stop() == 0);
    int status = 0;
    CHECK(it_server_start_args(NULL, &status) == 0);
    CHECK(downloads_of("acme/reg-a") == 1); /* a plain GET: no flush asked */
    CHECK(downloads_of("acme/reg-b") == 4);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    writer = it_token("write", "acme");
    other_writer = it_token("write", "other");
    admin = it_token("admin", NULL);
    const it_tensor_spec tensors[] = {{"w", "F32", 2, {8, 4, 0, 0}}};
    it_build_safetensors(&weights, tensors, 1, NULL, 7);
    CHECK(it_read_file("tests/corpus/cases/sidecar_gguf.gguf", &gguf));
    RUN(patch_merges_tags_and_bounds_them);
    RUN(hostile_patches_change_nothing);
    RUN(version_metadata);
    RUN(search_by_tag_and_text);
    RUN(downloads_count_and_sort);
    it_buf_free(&weights);
    it_buf_free(&gguf);
    return it_finish(argv[0]);
}
