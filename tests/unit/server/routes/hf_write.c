/* server/routes/hf_write.c: the pure helpers (base64, the preupload decision), then,
 * black-box against the real server through the integration harness
 * (tests/integration/harness.h), the Hub write protocol by hand: create a repo, ask
 * preupload and the LFS batch API, PUT the bytes to the signed href (a forged or
 * tampered one is 401, bytes of another SHA-256 are 400 digest_mismatch and kept
 * nowhere), verify, commit (lfsFile + inline file) as one version, and refusals that
 * publish nothing: a stale parentCommit (412), an LFS object never uploaded, code by
 * name. The real clients' runs are tests/integration/hf.c's. */
#include "harness.h"
#include "routes.h"

#define REPO "/api/models/acme/hw"

static const char *write_acme;
static it_buf file;
static char sha[65];

TEST(base64_decode)
{
    uint8_t out[16];
    CHECK(tg_hub_base64_decode("aGk=", 4, out) == 2 && memcmp(out, "hi", 2) == 0);
    CHECK(tg_hub_base64_decode("aGk", 3, out) == 2 && memcmp(out, "hi", 2) == 0);
    CHECK(tg_hub_base64_decode("", 0, out) == 0);
    CHECK(tg_hub_base64_decode("-_8=", 4, out) == 2 && out[0] == 0xfb && out[1] == 0xff);
    CHECK(tg_hub_base64_decode("+/8=", 4, out) == 2 && out[0] == 0xfb && out[1] == 0xff);
    CHECK(tg_hub_base64_decode("a!==", 4, out) == -1);
    CHECK(tg_hub_base64_decode("aG=k", 4, out) == -1); /* nothing after padding */
}

TEST(upload_modes)
{
    static const uint8_t text[] = "{\"a\": 1}";
    static const uint8_t binary[] = {'a', 0, 'b'};
    CHECK(!tg_hub_upload_lfs("config.json", 8, text, 8));
    CHECK(!tg_hub_upload_lfs("README.md", 8, text, 8));
    CHECK(tg_hub_upload_lfs("model.safetensors", 8, text, 8));
    CHECK(tg_hub_upload_lfs("w.GGUF", 8, text, 8));
    CHECK(tg_hub_upload_lfs("pytorch_model.bin", 8, text, 8));
    CHECK(tg_hub_upload_lfs("big.txt", 2 * 1024 * 1024, text, 8));
    CHECK(tg_hub_upload_lfs("data.txt", 3, binary, 3));
}

static it_response post_ndjson(const char *lines)
{
    return it_send("POST", REPO "/commit/main", write_acme, lines, strlen(lines));
}

static int versions(void)
{
    it_response r = it_get("/v1/models/acme/hw");
    int n = (int)json_array_size(json_object_get(r.json, "versions"));
    it_response_free(&r);
    return n;
}

/* The href of the batch answer for oid (size), relative to the server; "" when none. */
static void batch_href(const char *oid, size_t size, char *href, size_t cap)
{
    char body[300];
    snprintf(body, sizeof body,
             "{\"operation\":\"upload\",\"transfers\":[\"basic\"],\"objects\":[{\"oid\":\"%s\","
             "\"size\":%zu}]}",
             oid, size);
    it_response r = it_send_json("POST", "/acme/hw.git/info/lfs/objects/batch", write_acme, body);
    CHECK_STATUS(r, 200);
    json_t *object = json_array_get(json_object_get(r.json, "objects"), 0);
    const char *url = json_string_value(
        json_object_get(json_object_get(json_object_get(object, "actions"), "upload"), "href"));
    size_t base = strlen(it_srv.base);
    snprintf(href, cap, "%s",
             url != NULL && strncmp(url, it_srv.base, base) == 0 ? url + base : "");
    it_response_free(&r);
}

TEST(protocol_by_hand)
{
    it_response r = it_send_json("POST", "/api/repos/create", write_acme, "{\"name\":\"hw\"}");
    CHECK_STATUS(r, 200); /* the organization is the token's namespace */
    CHECK_STR(it_json_str(&r, "name"), "acme/hw");
    it_response_free(&r);

    r = it_send_json("POST", REPO "/preupload/main", write_acme,
                     "{\"files\":[{\"path\":\"model.safetensors\",\"size\":64,\"sample\":\"\"},"
                     "{\"path\":\"config.json\",\"size\":8,\"sample\":\"eyJhIjoxfQ==\"}]}");
    CHECK_STATUS(r, 200);
    json_t *files = json_object_get(r.json, "files");
    CHECK_STR(json_string_value(json_object_get(json_array_get(files, 0), "uploadMode")), "lfs");
    CHECK_STR(json_string_value(json_object_get(json_array_get(files, 1), "uploadMode")),
              "regular");
    it_response_free(&r);

    char href[1024];
    batch_href(sha, file.len, href, sizeof href);
    CHECK(href[0] == '/');
    /* a tampered link: refused before a byte is stored */
    char forged[1100];
    snprintf(forged, sizeof forged, "%s0", href);
    r = it_send("PUT", forged, NULL, file.data, file.len);
    CHECK_STATUS(r, 401);
    it_response_free(&r);
    /* bytes of the same length that are not the object's: nothing kept */
    it_buf other = {0};
    it_tensor_spec t = {"w", "F32", 2, {2, 4}};
    it_build_safetensors(&other, &t, 1, NULL, 9);
    CHECK(other.len == file.len && memcmp(other.data, file.data, file.len) != 0);
    r = it_send("PUT", href, NULL, other.data, other.len);
    CHECK_STATUS(r, 400);
    CHECK_STR(it_reason(&r), "digest_mismatch");
    it_response_free(&r);
    char other_sha[65];
    it_sha256_hex(other.data, other.len, other_sha);
    CHECK(!it_blob_exists(other_sha));
    it_buf_free(&other);
    /* the object's own bytes: stored, pending; verify sees it */
    r = it_send("PUT", href, NULL, file.data, file.len);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    char verify[200];
    snprintf(verify, sizeof verify, "{\"oid\":\"%s\",\"size\":%zu}", sha, file.len);
    r = it_send_json("POST", "/api/tensorgate/lfs-verify/acme/hw", write_acme, verify);
    CHECK_STATUS(r, 200);
    it_response_free(&r);

    /* never uploaded: nothing published */
    char lines[1024];
    snprintf(lines, sizeof lines,
             "{\"key\":\"header\",\"value\":{\"summary\":\"s\"}}\n"
             "{\"key\":\"lfsFile\",\"value\":{\"path\":\"x.safetensors\",\"algo\":\"sha256\","
             "\"oid\":\"%064d\",\"size\":3}}\n",
             0);
    r = post_ndjson(lines);
    CHECK_STATUS(r, 400);
    CHECK_STR(it_reason(&r), "invalid_request");
    it_response_free(&r);
    /* code by name, inline: the gate's reason in X-Error-Code */
    r = post_ndjson("{\"key\":\"header\",\"value\":{\"summary\":\"s\"}}\n"
                    "{\"key\":\"file\",\"value\":{\"path\":\"run.py\",\"content\":\"eCA9IDEK\","
                    "\"encoding\":\"base64\"}}\n");
    CHECK_STATUS(r, 422);
    char code[64];
    CHECK_STR(it_header(&r, "X-Error-Code", code, sizeof code), "code_python");
    it_response_free(&r);
    CHECK(versions() == 0);

    /* the commit: the LFS object and an inline file, one version */
    snprintf(lines, sizeof lines,
             "{\"key\":\"header\",\"value\":{\"summary\":\"first\"}}\n"
             "{\"key\":\"lfsFile\",\"value\":{\"path\":\"model.safetensors\",\"algo\":\"sha256\","
             "\"oid\":\"%s\",\"size\":%zu}}\n"
             "{\"key\":\"file\",\"value\":{\"path\":\"config.json\",\"content\":\"eyJhIjoxfQ==\","
             "\"encoding\":\"base64\"}}",
             sha, file.len);
    r = post_ndjson(lines);
    CHECK_STATUS(r, 200);
    char oid[41] = "";
    snprintf(oid, sizeof oid, "%s",
             it_json_str(&r, "commitOid") ? it_json_str(&r, "commitOid") : "");
    it_response_free(&r);
    CHECK(versions() == 1);
    r = it_get(REPO);
    CHECK_STR(it_json_str(&r, "sha"), oid);
    it_response_free(&r);
    r = it_get("/acme/hw/resolve/main/model.safetensors");
    CHECK(r.status == 200 && r.body.len == file.len &&
          memcmp(r.body.data, file.data, file.len) == 0);
    it_response_free(&r);

    /* JSON bytes through LFS (content decides: accepted as JSON), then committed under
     * a .safetensors name: gated again under that name, refused, nothing published */
    static const char json_bytes[] = "{\"not\": \"weights\"}";
    char json_sha[65], json_href[1024];
    it_sha256_hex(json_bytes, strlen(json_bytes), json_sha);
    batch_href(json_sha, strlen(json_bytes), json_href, sizeof json_href);
    r = it_send("PUT", json_href, NULL, json_bytes, strlen(json_bytes));
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    snprintf(lines, sizeof lines,
             "{\"key\":\"header\",\"value\":{\"summary\":\"s\"}}\n"
             "{\"key\":\"lfsFile\",\"value\":{\"path\":\"fake.safetensors\",\"algo\":"
             "\"sha256\",\"oid\":\"%s\",\"size\":%zu}}\n",
             json_sha, strlen(json_bytes));
    r = post_ndjson(lines);
    CHECK(r.status == 415 || r.status == 422);
    CHECK(it_header(&r, "X-Error-Message", code, sizeof code) != NULL);
    it_response_free(&r);
    CHECK(versions() == 1);

    /* a stale parent: 412, nothing published */
    snprintf(lines, sizeof lines,
             "{\"key\":\"header\",\"value\":{\"summary\":\"s\",\"parentCommit\":\"%040d\"}}\n"
             "{\"key\":\"deletedFile\",\"value\":{\"path\":\"config.json\"}}\n",
             0);
    r = post_ndjson(lines);
    CHECK_STATUS(r, 412);
    CHECK_STR(it_reason(&r), "parent_commit_mismatch");
    it_response_free(&r);
    CHECK(versions() == 1);
}

/* A pending LFS object lives in the catalog (schema 17): uploaded, then the server
 * restarts, then the commit finds it. Another namespace is still asked for the bytes
 * (the batch answer never says another tenant holds them). */
TEST(pending_survives_restart)
{
    it_buf obj = {0};
    it_tensor_spec t = {"r", "F32", 2, {4, 4}};
    it_build_safetensors(&obj, &t, 1, NULL, 21);
    char obj_sha[65], href[1024];
    it_sha256_hex(obj.data, obj.len, obj_sha);
    batch_href(obj_sha, obj.len, href, sizeof href);
    CHECK(href[0] == '/');
    it_response r = it_send("PUT", href, NULL, obj.data, obj.len);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    int before = versions();

    int status = it_server_stop();
    CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(it_server_start_args(NULL, NULL) == 0);

    /* the batch answer of the restarted server: held already, no upload asked */
    char again[1024];
    batch_href(obj_sha, obj.len, again, sizeof again);
    CHECK_STR(again, "");
    /* another namespace's repository: the upload is asked for */
    const char *write_other = it_token("write", "other");
    r = it_send_json("POST", "/api/repos/create", write_other, "{\"name\":\"hw2\"}");
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    char body[300];
    snprintf(body, sizeof body,
             "{\"operation\":\"upload\",\"objects\":[{\"oid\":\"%s\",\"size\":%zu}]}", obj_sha,
             obj.len);
    r = it_send_json("POST", "/other/hw2.git/info/lfs/objects/batch", write_other, body);
    CHECK_STATUS(r, 200);
    json_t *object = json_array_get(json_object_get(r.json, "objects"), 0);
    CHECK(json_object_get(json_object_get(object, "actions"), "upload") != NULL);
    it_response_free(&r);
    /* other's commit cannot take acme's pending object */
    char lines[1024];
    snprintf(lines, sizeof lines,
             "{\"key\":\"header\",\"value\":{\"summary\":\"s\"}}\n"
             "{\"key\":\"lfsFile\",\"value\":{\"path\":\"r.safetensors\",\"algo\":\"sha256\","
             "\"oid\":\"%s\",\"size\":%zu}}\n",
             obj_sha, obj.len);
    r = it_send("POST", "/api/models/other/hw2/commit/main", write_other, lines, strlen(lines));
    CHECK_STATUS(r, 400);
    it_response_free(&r);

    /* acme's commit after the restart takes it */
    r = post_ndjson(lines);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    CHECK(versions() == before + 1);
    r = it_get("/acme/hw/resolve/main/r.safetensors");
    CHECK(r.status == 200 && r.body.len == obj.len && memcmp(r.body.data, obj.data, obj.len) == 0);
    it_response_free(&r);
    it_buf_free(&obj);
}

/* Hostile bodies: a clear refusal each, nothing published. */
TEST(hostile_bodies)
{
    int before = versions();
    it_response r = post_ndjson("not json\n");
    CHECK_STATUS(r, 400);
    CHECK_STR(it_reason(&r), "invalid_json");
    it_response_free(&r);
    r = post_ndjson("{\"key\":\"file\",\"value\":{\"path\":\"a.txt\",\"content\":\"YQ==\"}}\n");
    CHECK_STATUS(r, 400); /* no header first */
    it_response_free(&r);
    r = post_ndjson("{\"key\":\"header\",\"value\":{}}\n"
                    "{\"key\":\"file\",\"value\":{\"path\":\"../x\",\"content\":\"YQ==\"}}\n");
    CHECK_STATUS(r, 400);
    CHECK_STR(it_reason(&r), "invalid_path");
    it_response_free(&r);
    r = post_ndjson("{\"key\":\"header\",\"value\":{}}\n"
                    "{\"key\":\"file\",\"value\":{\"path\":\"a.txt\",\"content\":\"%%%\"}}\n");
    CHECK_STATUS(r, 400);
    it_response_free(&r);
    /* one line past the bound: 413, the rest drained */
    size_t big = 3 * 1024 * 1024;
    char *line = malloc(big + 64);
    CHECK(line != NULL);
    if (line != NULL) {
        int head = snprintf(line, 64, "{\"key\":\"header\",\"value\":{}}\n{\"x\":\"");
        memset(line + head, 'a', big);
        memcpy(line + head + big, "\"}\n", 3);
        r = it_send("POST", REPO "/commit/main", write_acme, line, (size_t)head + big + 3);
        CHECK_STATUS(r, 413);
        it_response_free(&r);
        free(line);
    }
    r = it_send_json("POST", "/acme/hw.git/info/lfs/objects/batch", write_acme,
                     "{\"operation\":\"upload\",\"objects\":[{\"oid\":\"xyz\",\"size\":1}]}");
    CHECK_STATUS(r, 200);
    json_t *object = json_array_get(json_object_get(r.json, "objects"), 0);
    CHECK(json_object_get(object, "error") != NULL && json_object_get(object, "actions") == NULL);
    it_response_free(&r);
    r = it_send_json("POST", "/acme/hw.git/info/lfs/objects/batch", write_acme,
                     "{\"operation\":\"download\",\"objects\":[]}");
    CHECK_STATUS(r, 400);
    it_response_free(&r);
    r = it_send("POST", REPO "/preupload/main", write_acme, "[1,2", 4);
    CHECK_STATUS(r, 400);
    CHECK_STR(it_reason(&r), "invalid_json");
    it_response_free(&r);
    r = it_send_json("POST", "/api/models/acme/absent/preupload/main", write_acme,
                     "{\"files\":[]}");
    CHECK_STATUS(r, 404);
    char code[64];
    CHECK_STR(it_header(&r, "X-Error-Code", code, sizeof code), "RepoNotFound");
    it_response_free(&r);
    CHECK(versions() == before);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    write_acme = it_token("write", "acme");
    it_tensor_spec t = {"w", "F32", 2, {2, 4}};
    it_build_safetensors(&file, &t, 1, NULL, 4);
    it_sha256_hex(file.data, file.len, sha);
    RUN(base64_decode);
    RUN(upload_modes);
    RUN(protocol_by_hand);
    RUN(pending_survives_restart);
    RUN(hostile_bodies);
    it_buf_free(&file);
    return it_finish(argv[0]);
}
