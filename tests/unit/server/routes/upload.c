/* server/routes/upload.c, black-box: PUT /v1/models/{org}/{name}/versions/{rev}/files/{path}
 * (the upload through the gate) against the real server through the integration
 * harness (tests/integration/harness.h), one server for the program. The main
 * success path (stored, described, readable), and refusals with the status and
 * reason openapi.yaml names, each storing nothing. */
#include "harness.h"

#define V1 "/v1/models/acme/up/versions/1"

static const char *write_acme, *read_acme;
static it_buf file;

TEST(upload_stored)
{
    char sha[65];
    it_sha256_hex(file.data, file.len, sha);
    it_response r = it_send("PUT", V1 "/files/model.safetensors", write_acme, file.data, file.len);
    CHECK_STATUS(r, 201);
    CHECK_STR(it_json_str(&r, "path"), "model.safetensors");
    CHECK_STR(it_json_str(&r, "kind"), "safetensors");
    CHECK_STR(it_json_str(&r, "sha256"), sha);
    CHECK_EQ_U64(it_json_int(r.json, "size"), file.len);
    CHECK_EQ_U64(it_json_int(r.json, "tensors"), 1);
    CHECK_EQ_U64(it_json_int(r.json, "parameters"), 8);
    it_response_free(&r);
    CHECK(it_blob_exists(sha));
    r = it_get(V1 "/files/model.safetensors");
    CHECK(r.status == 200 && r.body.len == file.len &&
          memcmp(r.body.data, file.data, file.len) == 0);
    it_response_free(&r);
    /* a sidecar, sent chunked */
    static const char config[] = "{\"model_type\":\"unit\"}";
    r = it_request("PUT", V1 "/files/config.json",
                   &(it_request_opts){.token = write_acme,
                                      .body = config,
                                      .body_len = strlen(config),
                                      .has_body = true,
                                      .chunked = true});
    CHECK_STATUS(r, 201);
    CHECK_STR(it_json_str(&r, "kind"), "json");
    it_response_free(&r);
}

TEST(upload_refused)
{
    int blobs = it_count_blobs();
    /* another format, named */
    it_response r = it_send("PUT", V1 "/files/pickle.safetensors", write_acme, it_pickle_p2,
                            sizeof it_pickle_p2);
    CHECK_PROBLEM(r, 415, "refused_format");
    CHECK_STR(it_json_str(&r, "format"), "pickle");
    it_response_free(&r);
    /* not valid safetensors: a space before the header's { */
    it_buf bad = {0};
    it_build_raw_safetensors(&bad, " {}     ", 0);
    r = it_send("PUT", V1 "/files/bad.safetensors", write_acme, bad.data, bad.len);
    CHECK_PROBLEM(r, 422, "header_start");
    CHECK_EQ_U64(it_json_int(r.json, "offset"), 8);
    it_response_free(&r);
    it_buf_free(&bad);
    /* a .json path holds strict JSON */
    r = it_send("PUT", V1 "/files/extra.json", write_acme, "{\"a\":1,\"a\":2}", 13);
    CHECK_PROBLEM(r, 422, "sidecar_json_invalid");
    it_response_free(&r);
    /* refused at the headers */
    r = it_send("PUT", V1 "/files/other.safetensors", read_acme, file.data, file.len);
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_send("PUT", "/v1/models/acme/up/versions/7/files/x.safetensors", write_acme, file.data,
                file.len);
    CHECK_PROBLEM(r, 404, "version_not_found");
    it_response_free(&r);
    /* nothing of them was kept */
    CHECK_EQ_U64(it_count_blobs(), blobs);
    CHECK_EQ_U64(it_count_tmp_settled(), 0);
    r = it_get(V1 "/files");
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "files")), 2);
    it_response_free(&r);
}

TEST(upload_into_published)
{
    it_response r = it_send("POST", V1 "/publish", write_acme, NULL, 0);
    CHECK_STATUS(r, 200);
    it_response_free(&r);
    r = it_send("PUT", V1 "/files/late.safetensors", write_acme, file.data, file.len);
    CHECK_PROBLEM(r, 409, "version_published");
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    write_acme = it_token("write", "acme");
    read_acme = it_token("read", "acme");
    it_tensor_spec t = {"w", "F32", 2, {2, 4}};
    it_build_safetensors(&file, &t, 1, NULL, 4);
    CHECK_EQ_U64(it_make_version(write_acme, "acme/up", NULL, NULL, false), 1);
    RUN(upload_stored);
    RUN(upload_refused);
    RUN(upload_into_published);
    it_buf_free(&file);
    return it_finish(argv[0]);
}
