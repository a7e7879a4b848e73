/* server/routes/preloads.c, black-box: POST and GET /v1/preloads, GET and DELETE
 * /v1/preloads/{id} (host backend) against the real server through the
 * integration harness (tests/integration/harness.h), one server for the
 * program. Each route's main success path, and refusals with the status and
 * reason openapi.yaml names. */
#include "harness.h"

static const char *write_acme, *write_any, *read_acme;
static char id[40];
static char url[128];

static it_response post_preload(const char *token, const char *body)
{
    return it_send_json("POST", "/v1/preloads", token, body);
}

static bool wait_resident(void)
{
    for (int i = 0; i < 500; i++) {
        it_response r = it_request("GET", url, &(it_request_opts){.token = read_acme});
        const char *state = it_json_str(&r, "state");
        bool resident = state != NULL && strcmp(state, "resident") == 0;
        it_response_free(&r);
        if (resident)
            return true;
        usleep(20 * 1000);
    }
    return false;
}

TEST(create_preload)
{
    it_response r = post_preload(
        write_acme,
        "{\"model\":\"acme/pre\",\"version\":1,\"device\":\"host\",\"tensors\":[\"l.*\"]}");
    CHECK_STATUS(r, 202);
    /* (the state is not checked: the copy may have begun before the answer is built) */
    snprintf(id, sizeof id, "%s", it_json_str(&r, "id") ? it_json_str(&r, "id") : "");
    CHECK_EQ_U64(strlen(id), 16);
    CHECK_STR(it_json_str(&r, "model"), "acme/pre");
    snprintf(url, sizeof url, "/v1/preloads/%s", id);
    char location[128];
    it_header(&r, "Location", location, sizeof location);
    CHECK_STR(location, url);
    it_response_free(&r);
    CHECK(wait_resident());
}

TEST(get_and_list_preloads)
{
    it_response r = it_request("GET", url, &(it_request_opts){.token = read_acme});
    CHECK_STATUS(r, 200);
    CHECK_STR(it_json_str(&r, "state"), "resident");
    json_t *layout = json_object_get(r.json, "layout");
    CHECK_EQ_U64(json_array_size(layout), 2);
    CHECK_STR(json_string_value(json_object_get(json_array_get(layout, 0), "name")), "l.a");
    CHECK(it_json_int(json_array_get(layout, 1), "offset") % 256 == 0);
    it_response_free(&r);
    r = it_request("GET", "/v1/preloads", &(it_request_opts){.token = read_acme});
    CHECK_STATUS(r, 200);
    json_t *list = json_object_get(r.json, "preloads");
    CHECK_EQ_U64(json_array_size(list), 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(list, 0), "id")), id);
    CHECK(json_array_size(json_object_get(r.json, "devices")) >= 1);
    it_response_free(&r);
    r = it_request("GET", "/v1/preloads/0123456789abcdef", &(it_request_opts){.token = read_acme});
    CHECK_PROBLEM(r, 404, "preload_not_found");
    it_response_free(&r);
}

TEST(preload_refusals)
{
    it_response r = post_preload(write_acme, "{\"model\":\"acme/pre\",\"device\":\"tpu\"}");
    CHECK_PROBLEM(r, 400, "invalid_device");
    it_response_free(&r);
    r = post_preload(write_acme, "{\"model\":\"acme/pre\",\"tensors\":[\"absent\"]}");
    CHECK_PROBLEM(r, 404, "tensor_not_found");
    it_response_free(&r);
    r = post_preload(write_acme, "{\"model\":\"acme/pre\",\"tensors\":[\"zz*\"]}");
    CHECK_PROBLEM(r, 422, "no_tensors");
    it_response_free(&r);
    r = post_preload(write_acme, "{\"model\":\"acme/absent\"}");
    CHECK_PROBLEM(r, 404, "model_not_found");
    it_response_free(&r);
    r = post_preload(NULL, "{\"model\":\"acme/pre\"}");
    CHECK_PROBLEM(r, 401, "unauthorized");
    it_response_free(&r);
    r = post_preload(read_acme, "{\"model\":\"acme/pre\"}");
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
}

TEST(delete_preload)
{
    it_response r = it_send("DELETE", url, write_acme, NULL, 0);
    CHECK_STATUS(r, 204);
    it_response_free(&r);
    r = it_request("GET", url, &(it_request_opts){.token = read_acme});
    CHECK_PROBLEM(r, 404, "preload_not_found");
    it_response_free(&r);
    /* an unknown id is 404 for a write token; a namespace-limited one learns nothing */
    r = it_send("DELETE", url, write_any, NULL, 0);
    CHECK_PROBLEM(r, 404, "preload_not_found");
    it_response_free(&r);
    r = it_send("DELETE", url, write_acme, NULL, 0);
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    write_acme = it_token("write", "acme");
    write_any = it_token("write", NULL);
    read_acme = it_token("read", "acme");
    it_tensor_spec t[] = {{"l.a", "F32", 1, {10}}, {"l.b", "F32", 1, {3}}, {"m", "F32", 1, {2}}};
    it_buf file = {0};
    it_build_safetensors(&file, t, 3, NULL, 9);
    CHECK_EQ_U64(it_make_version(write_acme, "acme/pre", "model.safetensors", &file, true), 1);
    it_buf_free(&file);
    RUN(create_preload);
    RUN(get_and_list_preloads);
    RUN(preload_refusals);
    RUN(delete_preload);
    return it_finish(argv[0]);
}
