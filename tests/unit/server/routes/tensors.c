/* server/routes/tensors.c, black-box: GET .../versions/{rev}/tensors and GET and
 * HEAD .../tensors/{tensor} (whole, sliced, converted, .npy) against the real
 * server through the integration harness (tests/integration/harness.h), one
 * server for the program. Each route's main success path, and refusals with the
 * status and reason openapi.yaml names. */
#include "harness.h"

#define V1 "/v1/models/acme/ten/versions/1"

static const char *write_acme;
static it_buf file;

/* The bytes of tensor i (in file order) of `file`. */
static const unsigned char *tensor_bytes(uint64_t begin)
{
    return file.data + 8 + it_header_len(&file) + begin;
}

TEST(list_tensors)
{
    it_response r = it_get(V1 "/tensors");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(it_json_int(r.json, "total"), 2);
    CHECK_EQ_U64(it_json_int(r.json, "count"), 2);
    json_t *tensors = json_object_get(r.json, "tensors");
    json_t *b = json_array_get(tensors, 1);
    CHECK_STR(json_string_value(json_object_get(b, "name")), "b");
    CHECK_STR(json_string_value(json_object_get(b, "file")), "model.safetensors");
    uint64_t data_start = 8 + it_header_len(&file);
    json_t *offsets = json_object_get(b, "data_offsets");
    CHECK_EQ_U64(json_integer_value(json_array_get(offsets, 0)), data_start + 24);
    CHECK_EQ_U64(json_integer_value(json_array_get(offsets, 1)), data_start + 24 + 16);
    CHECK(json_is_null(json_object_get(r.json, "next_cursor")));
    it_response_free(&r);
    r = it_get(V1 "/tensors?limit=1");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(it_json_int(r.json, "count"), 1);
    CHECK(json_is_string(json_object_get(r.json, "next_cursor")));
    it_response_free(&r);
    r = it_get("/v1/models/acme/ten/versions/5/tensors");
    CHECK_PROBLEM(r, 404, "version_not_found");
    it_response_free(&r);
}

TEST(get_tensor)
{
    /* a: F32 [2, 3], the first 24 bytes of the data */
    it_response r = it_get(V1 "/tensors/a");
    CHECK_STATUS(r, 200);
    CHECK(r.body.len == 24 && memcmp(r.body.data, tensor_bytes(0), 24) == 0);
    it_response_free(&r);
    /* a slice: row 1 */
    r = it_get(V1 "/tensors/a?slice=1");
    CHECK_STATUS(r, 200);
    CHECK(r.body.len == 12 && memcmp(r.body.data, tensor_bytes(12), 12) == 0);
    it_response_free(&r);
    /* converted: F16, 2 bytes an element */
    r = it_get(V1 "/tensors/a?dtype=F16");
    CHECK_STATUS(r, 200);
    CHECK_EQ_U64(r.body.len, 12);
    it_response_free(&r);
    /* .npy: the magic, then the header and the values */
    r = it_get(V1 "/tensors/a?format=npy");
    CHECK_STATUS(r, 200);
    CHECK(r.body.len > 24 && memcmp(r.body.data, "\x93NUMPY", 6) == 0 &&
          memcmp(r.body.data + r.body.len - 24, tensor_bytes(0), 24) == 0);
    it_response_free(&r);
    r = it_request("HEAD", V1 "/tensors/b", NULL);
    CHECK_STATUS(r, 200);
    char length[32];
    it_header(&r, "Content-Length", length, sizeof length);
    CHECK_STR(length, "16");
    it_response_free(&r);
}

TEST(tensor_refusals)
{
    it_response r = it_get(V1 "/tensors/nope");
    CHECK_PROBLEM(r, 404, "tensor_not_found");
    it_response_free(&r);
    r = it_get(V1 "/tensors/a?dtype=f16");
    CHECK_PROBLEM(r, 400, "invalid_dtype");
    it_response_free(&r);
    r = it_get(V1 "/tensors/a?format=csv");
    CHECK_PROBLEM(r, 400, "invalid_format");
    it_response_free(&r);
    r = it_get(V1 "/tensors/a?slice=2");
    CHECK_PROBLEM(r, 400, "slice_out_of_range");
    it_response_free(&r);
    r = it_get(V1 "/tensors/a?slice=x");
    CHECK_PROBLEM(r, 400, "invalid_slice");
    it_response_free(&r);
    /* I64 converts to nothing */
    r = it_get(V1 "/tensors/b?dtype=F32");
    CHECK_PROBLEM(r, 422, "unsupported_conversion");
    it_response_free(&r);
    r = it_get(V1 "/tensors/a?dtype=BF16&format=npy");
    CHECK_PROBLEM(r, 406, "npy_unsupported_dtype");
    it_response_free(&r);
}

int main(int argc, char **argv)
{
    it_init(argc, argv, NULL);
    write_acme = it_token("write", "acme");
    it_tensor_spec t[] = {{"a", "F32", 2, {2, 3}}, {"b", "I64", 1, {2}}};
    it_build_safetensors(&file, t, 2, NULL, 6);
    CHECK_EQ_U64(it_make_version(write_acme, "acme/ten", "model.safetensors", &file, true), 1);
    RUN(list_tensors);
    RUN(get_tensor);
    RUN(tensor_refusals);
    it_buf_free(&file);
    return it_finish(argv[0]);
}
