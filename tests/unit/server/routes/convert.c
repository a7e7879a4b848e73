/* server/routes/convert.c, black-box: POST .../versions/{rev}/convert (a job
 * that makes a converted version) against the real server through the
 * integration harness (tests/integration/harness.h), one server for the
 * program. The main success path (202 with the job and its Location, the new
 * version once done), and refusals with the status and reason openapi.yaml
 * names. */
#include "harness.h"

#define MODEL "/v1/models/acme/conv"

static const char *write_acme, *read_acme;

/* Polls the job until it is done or failed (at most ~20 s); returns its state. */
static void wait_done(const char *location, char *state, size_t cap)
{
    snprintf(state, cap, "(none)");
    for (int i = 0; i < 1000; i++) {
        it_response r = it_get(location);
        const char *s = it_json_str(&r, "state");
        snprintf(state, cap, "%s", s ? s : "(none)");
        it_response_free(&r);
        if (strcmp(state, "done") == 0 || strcmp(state, "failed") == 0)
            return;
        usleep(20 * 1000);
    }
}

TEST(convert_version)
{
    it_response r = it_send_json("POST", MODEL "/versions/1/convert", write_acme,
                                 "{\"dtype\":\"F16\",\"tensors\":[\"*.weight\"]}");
    CHECK_STATUS(r, 202);
    CHECK_STR(it_json_str(&r, "kind"), "convert");
    CHECK_EQ_U64(it_json_int(r.json, "source_version"), 1);
    char location[128] = "", want[128];
    it_header(&r, "Location", location, sizeof location);
    snprintf(want, sizeof want, "/v1/jobs/%lld", it_json_int(r.json, "id"));
    CHECK_STR(location, want);
    char retry[16];
    CHECK(it_header(&r, "Retry-After", retry, sizeof retry) != NULL);
    it_response_free(&r);
    char state[32];
    wait_done(location, state, sizeof state);
    CHECK_STR(state, "done");
    /* version 2: the weight in F16, the bias as it was */
    r = it_get(MODEL "/versions/2/tensors");
    CHECK_STATUS(r, 200);
    json_t *tensors = json_object_get(r.json, "tensors");
    for (size_t i = 0; i < json_array_size(tensors); i++) {
        json_t *t = json_array_get(tensors, i);
        const char *name = json_string_value(json_object_get(t, "name"));
        const char *dtype = json_string_value(json_object_get(t, "dtype"));
        CHECK_STR(dtype, name && strcmp(name, "l.weight") == 0 ? "F16" : "F32");
    }
    CHECK_EQ_U64(json_array_size(tensors), 2);
    it_response_free(&r);
}

TEST(convert_refused)
{
    it_response r =
        it_send_json("POST", MODEL "/versions/1/convert", write_acme, "{\"dtype\":\"I8\"}");
    CHECK_PROBLEM(r, 422, "unsupported_dtype");
    it_response_free(&r);
    r = it_send_json("POST", MODEL "/versions/1/convert", write_acme,
                     "{\"dtype\":\"F16\",\"tensors\":[\"nothing.*\"]}");
    CHECK_PROBLEM(r, 422, "tensors_not_found");
    it_response_free(&r);
    r = it_send_json("POST", MODEL "/versions/1/convert", write_acme, "{\"dtype\":\"F32\"}");
    CHECK_PROBLEM(r, 422, "nothing_to_convert");
    it_response_free(&r);
    r = it_send_json("POST", MODEL "/versions/1/convert", write_acme, "{}");
    CHECK_PROBLEM(r, 400, "invalid_request");
    it_response_free(&r);
    r = it_send_json("POST", MODEL "/versions/1/convert", read_acme, "{\"dtype\":\"F16\"}");
    CHECK_PROBLEM(r, 403, "forbidden");
    it_response_free(&r);
    /* the source must be published */
    CHECK_EQ_U64(it_make_version(write_acme, "acme/conv", NULL, NULL, false), 3);
    r = it_send_json("POST", MODEL "/versions/3/convert", write_acme, "{\"dtype\":\"F16\"}");
    CHECK_PROBLEM(r, 409, "version_not_published");
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    write_acme = it_token("write", "acme");
    read_acme = it_token("read", "acme");
    it_tensor_spec t[] = {{"l.weight", "F32", 2, {4, 4}}, {"l.bias", "F32", 1, {4}}};
    it_buf file = {0};
    it_build_safetensors(&file, t, 2, NULL, 7);
    CHECK_EQ_U64(it_make_version(write_acme, "acme/conv", "model.safetensors", &file, true), 1);
    it_buf_free(&file);
    RUN(convert_version);
    RUN(convert_refused);
    return it_finish(argv[0]);
}
