/* server/routes/versions.c, black-box: POST /v1/models/{org}/{name}/versions,
 * GET and PATCH .../versions/{rev} and POST .../versions/{rev}/publish against the real
 * server through the integration harness (tests/integration/harness.h), one
 * server for the program. Each route's main success path, and refusals with the
 * status and reason openapi.yaml names. */
#include "harness.h"

#define MODEL "/v1/models/acme/ver"

static const char *write_acme, *write_other;
static it_buf file;

TEST(create_version)
{
    it_response r = it_send_json("POST", "/v1/models", write_acme, "{\"name\":\"acme/ver\"}");
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_send("POST", MODEL "/versions", write_acme, NULL, 0);
    CHECK_STATUS(r, 201);
    CHECK_EQ_U64(it_json_int(r.json, "version"), 1);
    CHECK_STR(it_json_str(&r, "state"), "draft");
    CHECK(json_is_null(json_object_get(r.json, "digest")));
    it_response_free(&r);
    /* `{}` is no body too */
    r = it_send_json("POST", MODEL "/versions", write_acme, "{}");
    CHECK_STATUS(r, 201);
    CHECK_EQ_U64(it_json_int(r.json, "version"), 2);
    it_response_free(&r);
    /* any other body makes no draft */
    r = it_send_json("POST", MODEL "/versions", write_acme, "{\"x\":1}");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = it_send("POST", "/v1/models/acme/missing/versions", write_acme, NULL, 0);
    CHECK_PROBLEM(r, 404, "model_not_found");
    it_response_free(&r);
    r = it_send("POST", MODEL "/versions", write_other, NULL, 0);
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
}

TEST(get_version)
{
    char url[256];
    snprintf(url, sizeof url, MODEL "/versions/1/files/model.safetensors");
    it_response r = it_send("PUT", url, write_acme, file.data, file.len);
    CHECK_STATUS(r, 201);
    it_response_free(&r);
    r = it_get(MODEL "/versions/1");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(it_json_int(r.json, "version"), 1);
    json_t *files = json_object_get(r.json, "files");
    CHECK_EQ_U64(json_array_size(files), 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(files, 0), "path")),
              "model.safetensors");
    it_response_free(&r);
    r = it_get(MODEL "/versions/3");
    CHECK_PROBLEM(r, 404, "version_not_found");
    it_response_free(&r);
    /* no version is published yet: latest names none */
    r = it_get(MODEL "/versions/latest");
    CHECK_PROBLEM(r, 404, "version_not_found");
    it_response_free(&r);
}

TEST(publish_version)
{
    it_response r = it_send("POST", MODEL "/versions/1/publish", write_acme, NULL, 0);
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "state"), "published");
    const char *digest = it_json_str(&r, "digest");
    CHECK(digest != NULL && strlen(digest) == 64);
    char want[65] = "";
    snprintf(want, sizeof want, "%s", digest ? digest : "");
    it_response_free(&r);
    /* the digest and latest name it */
    char url[200];
    snprintf(url, sizeof url, MODEL "/versions/%s", want);
    r = it_get(url);
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(it_json_int(r.json, "version"), 1);
    it_response_free(&r);
    r = it_get(MODEL "/versions/latest");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(it_json_int(r.json, "version"), 1);
    it_response_free(&r);
    r = it_send("POST", MODEL "/versions/1/publish", write_acme, NULL, 0);
    CHECK_PROBLEM(r, 409, "version_published");
    it_response_free(&r);
    /* version 2 holds no file */
    r = it_send("POST", MODEL "/versions/2/publish", write_acme, NULL, 0);
    CHECK_PROBLEM(r, 422, "empty_version");
    it_response_free(&r);
    r = it_send("POST", MODEL "/versions/2/publish", write_other, NULL, 0);
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
}

/* PATCH .../versions/{rev}: a published version's description and tags change */
TEST(patch_version)
{
    it_response r = it_send_json("PATCH", MODEL "/versions/1", write_acme,
                                 "{\"description\":\"v1\",\"tags\":{\"run\":\"7\"}}");
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "description"), "v1");
    CHECK_STR(json_string_value(json_object_get(json_object_get(r.json, "tags"), "run")), "7");
    it_response_free(&r);
    r = it_get(MODEL "/versions/1");
    CHECK_STR(it_json_str(&r, "description"), "v1");
    it_response_free(&r);
    r = it_send_json("PATCH", MODEL "/versions/1", write_other, "{\"description\":\"x\"}");
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_send_json("PATCH", MODEL "/versions/99", write_acme, "{\"description\":\"x\"}");
    CHECK_PROBLEM(r, 404, "version_not_found");
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    write_acme = it_token("write", "acme");
    write_other = it_token("write", "other");
    it_tensor_spec t = {"w", "F32", 1, {4}};
    it_build_safetensors(&file, &t, 1, NULL, 2);
    RUN(create_version);
    RUN(get_version);
    RUN(publish_version);
    RUN(patch_version);
    it_buf_free(&file);
    return it_finish(argv[0]);
}
