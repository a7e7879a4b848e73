/* server/routes/models.c, black-box: its routes (GET and POST /v1/models, GET,
 * PATCH and DELETE /v1/models/{org}/{name}, PUT .../aliases/{alias}) against the real
 * server through the integration harness (tests/integration/harness.h), one
 * server for the program. Each route's main success path, and refusals with the
 * status and reason openapi.yaml names. */
#include "harness.h"

static const char *write_acme, *read_any, *admin;
static it_buf file;

TEST(create_model)
{
    it_response r = it_send_json("POST", "/v1/models", write_acme,
                                 "{\"name\":\"acme/unit\",\"description\":\"a unit model\"}");
    CHECK_STATUS(r, 201);
    CHECK_STR(it_json_str(&r, "name"), "acme/unit");
    CHECK_STR(it_json_str(&r, "description"), "a unit model");
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "versions")), 0);
    it_response_free(&r);
    /* the same name again */
    r = it_send_json("POST", "/v1/models", write_acme, "{\"name\":\"acme/unit\"}");
    CHECK_PROBLEM(r, 409, "model_exists");
    it_response_free(&r);
    r = it_send_json("POST", "/v1/models", write_acme, "{\"name\":\"acme/bad name\"}");
    CHECK_PROBLEM(r, 400, "invalid_name");
    it_response_free(&r);
    r = it_send_json("POST", "/v1/models", read_any, "{\"name\":\"acme/unit2\"}");
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
}

TEST(list_models)
{
    it_response r = it_get("/v1/models?q=unit");
    CHECK_STATUS(r, 200);
    json_t *models = json_object_get(r.json, "models");
    CHECK_EQ_U64(json_array_size(models), 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(models, 0), "name")), "acme/unit");
    it_response_free(&r);
    r = it_get("/v1/models?limit=0");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
}

/* PATCH /v1/models/{org}/{name}: description and tags merged; bounds refused */
TEST(patch_model)
{
    it_response r = it_send_json("PATCH", "/v1/models/acme/unit", write_acme,
                                 "{\"description\":\"patched\",\"tags\":{\"a\":\"1\",\"b\":\"\"}}");
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "description"), "patched");
    CHECK_STR(json_string_value(json_object_get(json_object_get(r.json, "tags"), "a")), "1");
    it_response_free(&r);
    r = it_send_json("PATCH", "/v1/models/acme/unit", write_acme, "{\"tags\":{\"a\":null}}");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(json_object_size(json_object_get(r.json, "tags")), 1);
    CHECK_STR(it_json_str(&r, "description"), "patched");
    it_response_free(&r);
    r = it_get("/v1/models?tag=b&q=unit");
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "models")), 1);
    it_response_free(&r);
    r = it_send_json("PATCH", "/v1/models/acme/unit", write_acme, "{\"tags\":{\"a b\":\"1\"}}");
    CHECK_PROBLEM(r, 400, "invalid_tag");
    it_response_free(&r);
    r = it_send_json("PATCH", "/v1/models/acme/unit", read_any, "{\"tags\":{}}");
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_send_json("PATCH", "/v1/models/acme/absent", write_acme, "{\"tags\":{}}");
    CHECK_PROBLEM(r, 404, "model_not_found");
    it_response_free(&r);
}

TEST(get_model)
{
    CHECK_EQ_U64(it_make_version(write_acme, "acme/unit", "model.safetensors", &file, true), 1);
    it_response r = it_get("/v1/models/acme/unit");
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "name"), "acme/unit");
    CHECK_EQ_U64(json_array_size(json_object_get(r.json, "versions")), 1);
    it_response_free(&r);
    r = it_get("/v1/models/acme/missing");
    CHECK_PROBLEM(r, 404, "model_not_found");
    it_response_free(&r);
}

TEST(set_alias)
{
    it_response r =
        it_send_json("PUT", "/v1/models/acme/unit/aliases/stable", write_acme, "{\"version\":1}");
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "alias"), "stable");
    CHECK_EQ_U64(it_json_int(r.json, "version"), 1);
    it_response_free(&r);
    r = it_get("/v1/models/acme/unit/versions/stable");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(it_json_int(r.json, "version"), 1);
    it_response_free(&r);
    /* latest is reserved; the version must exist and be published */
    r = it_send_json("PUT", "/v1/models/acme/unit/aliases/latest", write_acme, "{\"version\":1}");
    CHECK_PROBLEM(r, 400, "reserved_alias");
    it_response_free(&r);
    r = it_send_json("PUT", "/v1/models/acme/unit/aliases/stable", write_acme, "{\"version\":9}");
    CHECK_PROBLEM(r, 404, "version_not_found");
    it_response_free(&r);
    CHECK_EQ_U64(it_make_version(write_acme, "acme/unit", "model.safetensors", &file, false), 2);
    r = it_send_json("PUT", "/v1/models/acme/unit/aliases/stable", write_acme, "{\"version\":2}");
    CHECK_PROBLEM(r, 409, "version_not_published");
    it_response_free(&r);
}

TEST(delete_model)
{
    it_response r = it_send("DELETE", "/v1/models/acme/unit", write_acme, NULL, 0);
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    r = it_send("DELETE", "/v1/models/acme/unit", admin, NULL, 0);
    CHECK_STATUS(r, 204);
    it_response_free(&r);
    r = it_get("/v1/models/acme/unit");
    CHECK_PROBLEM(r, 404, "model_not_found");
    it_response_free(&r);
    r = it_send("DELETE", "/v1/models/acme/unit", admin, NULL, 0);
    CHECK_PROBLEM(r, 404, "model_not_found");
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    write_acme = it_token("write", "acme");
    read_any = it_token("read", NULL);
    admin = it_token("admin", NULL);
    it_tensor_spec t = {"w", "F32", 1, {4}};
    it_build_safetensors(&file, &t, 1, NULL, 1);
    RUN(create_model);
    RUN(list_models);
    RUN(patch_model);
    RUN(get_model);
    RUN(set_alias);
    RUN(delete_model);
    it_buf_free(&file);
    return it_finish(argv[0]);
}
