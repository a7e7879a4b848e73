#include "st_write.h"

#include <stdlib.h>

#include "../test.h"

/* Compares a written file with expected bytes; prints both on a mismatch. */
static void check_bytes(const uint8_t *got, size_t got_len, const void *want, size_t want_len)
{
    CHECK_EQ_U64(got_len, want_len);
    bool same = got_len == want_len && memcmp(got, want, want_len) == 0;
    CHECK(same);
    if (!same) {
        fprintf(stderr, "  got:  ");
        for (size_t i = 0; i < got_len; i++)
            fputc(got[i] >= 0x20 && got[i] < 0x7f ? got[i] : '.', stderr);
        fprintf(stderr, "\n  want: ");
        for (size_t i = 0; i < want_len; i++) {
            uint8_t c = ((const uint8_t *)want)[i];
            fputc(c >= 0x20 && c < 0x7f ? c : '.', stderr);
        }
        fputc('\n', stderr);
    }
}

/* Expected bytes from huggingface/safetensors, safetensors/src/tensor.rs, tests
 * `test_serialization`, `test_serialization_forced_alignement` and `test_empty`: byte
 * literals the reference writer must produce. */
TEST(reference_writer_vectors)
{
    float values[] = {0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
    const void *data[] = {values};
    uint8_t *out;
    size_t len;
    st_error err;

    /* test_serialization: "attn.0" F32 [1,2,3]; the JSON is exactly 64 bytes, no padding */
    static const uint8_t serialization[] = {
        64, 0,  0,   0,   0,   0,   0,   0,   123, 34,  97,  116, 116, 110, 46,  48,
        34, 58, 123, 34,  100, 116, 121, 112, 101, 34,  58,  34,  70,  51,  50,  34,
        44, 34, 115, 104, 97,  112, 101, 34,  58,  91,  49,  44,  50,  44,  51,  93,
        44, 34, 100, 97,  116, 97,  95,  111, 102, 102, 115, 101, 116, 115, 34,  58,
        91, 48, 44,  50,  52,  93,  125, 125, 0,   0,   0,   0,   0,   0,   128, 63,
        0,  0,  0,   64,  0,   0,   64,  64,  0,   0,   128, 64,  0,   0,   160, 64};
    uint64_t shape3[] = {1, 2, 3};
    st_write_tensor attn = {"attn.0", ST_F32, 3, shape3};
    CHECK_EQ_U64(st_write_to_buffer(&attn, data, 1, NULL, 0, false, &out, &len, &err), ST_OK);
    check_bytes(out, len, serialization, sizeof serialization);
    free(out);

    /* test_serialization_forced_alignement: "attn0" F32 [1,1,2,3], 7 spaces of padding */
    static const uint8_t forced_alignment[] = {
        72,  0,   0,   0,   0,   0,   0,   0,   123, 34, 97, 116, 116, 110, 48,  34,  58,  123,
        34,  100, 116, 121, 112, 101, 34,  58,  34,  70, 51, 50,  34,  44,  34,  115, 104, 97,
        112, 101, 34,  58,  91,  49,  44,  49,  44,  50, 44, 51,  93,  44,  34,  100, 97,  116,
        97,  95,  111, 102, 102, 115, 101, 116, 115, 34, 58, 91,  48,  44,  50,  52,  93,  125,
        125, 32,  32,  32,  32,  32,  32,  32,  0,   0,  0,  0,   0,   0,   128, 63,  0,   0,
        0,   64,  0,   0,   64,  64,  0,   0,   128, 64, 0,  0,   160, 64};
    uint64_t shape4[] = {1, 1, 2, 3};
    st_write_tensor attn0 = {"attn0", ST_F32, 4, shape4};
    CHECK_EQ_U64(st_write_to_buffer(&attn0, data, 1, NULL, 0, false, &out, &len, &err), ST_OK);
    check_bytes(out, len, forced_alignment, sizeof forced_alignment);
    free(out);

    /* test_empty: no tensors, without and with {"framework": "pt"} metadata */
    static const uint8_t empty[] = {8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32};
    CHECK_EQ_U64(st_write_to_buffer(NULL, NULL, 0, NULL, 0, false, &out, &len, &err), ST_OK);
    check_bytes(out, len, empty, sizeof empty);
    free(out);
    static const uint8_t empty_metadata[] = {
        40,  0,   0,   0,  0,  0,  0,   0,   123, 34,  95,  95,  109, 101, 116, 97,
        100, 97,  116, 97, 95, 95, 34,  58,  123, 34,  102, 114, 97,  109, 101, 119,
        111, 114, 107, 34, 58, 34, 112, 116, 34,  125, 125, 32,  32,  32,  32,  32};
    st_metadata_entry framework = {"framework", "pt"};
    CHECK_EQ_U64(st_write_to_buffer(NULL, NULL, 0, &framework, 1, true, &out, &len, &err), ST_OK);
    check_bytes(out, len, empty_metadata, sizeof empty_metadata);
    free(out);

    /* huggingface/safetensors bindings/python/tests/test_simple.py, test_serialization:
     * np.zeros((2, 2), int32) saved as "test" */
    static const char simple[] = "@\x00\x00\x00\x00\x00\x00\x00"
                                 "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":"
                                 "[0,16]}}    "
                                 "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00";
    uint64_t shape22[] = {2, 2};
    int32_t zeros[4] = {0};
    const void *zero_data[] = {zeros};
    st_write_tensor test = {"test", ST_I32, 2, shape22};
    CHECK_EQ_U64(st_write_to_buffer(&test, zero_data, 1, NULL, 0, false, &out, &len, &err), ST_OK);
    check_bytes(out, len, simple, sizeof simple - 1);
    free(out);
}

TEST(order_is_dtype_then_name)
{
    uint64_t one[] = {1}, two[] = {2};
    st_write_tensor t[] = {
        {"b", ST_F32, 1, one}, {"a", ST_F32, 1, one},     {"z", ST_BOOL, 1, one},
        {"c", ST_U64, 1, one}, {"B", ST_F32, 1, one},     {"\xc3\xa9", ST_F32, 1, one},
        {"f4", ST_F4, 1, two}, {"e", ST_F8_E4M3, 1, one}, {"aa", ST_F32, 0, NULL},
    };
    size_t n = sizeof t / sizeof t[0];
    st_write_plan plan;
    st_error err;
    CHECK_EQ_U64(st_write_plan_make(t, n, NULL, 0, false, &plan, &err), ST_OK);
    /* U64, then F32 by bytes ("B" < "a" < "aa" < "b" < "\xc3\xa9"), F8_E4M3, F4, BOOL */
    size_t want[] = {3, 4, 1, 8, 0, 5, 7, 6, 2};
    for (size_t i = 0; i < n; i++)
        CHECK_EQ_U64(plan.order[i], want[i]);
    const char *json = "{\"c\":{\"dtype\":\"U64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                       "\"B\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]},"
                       "\"aa\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[16,20]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[20,24]},"
                       "\"\xc3\xa9\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[24,28]},"
                       "\"e\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[28,29]},"
                       "\"f4\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[29,30]},"
                       "\"z\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[30,31]}}";
    size_t json_len = strlen(json);
    CHECK_EQ_U64(plan.header_len % 8, 0);
    CHECK_EQ_U64(plan.header_len, 8 + ((json_len + 7) / 8) * 8);
    CHECK(plan.header_len >= 8 + json_len && memcmp(plan.header + 8, json, json_len) == 0);
    for (size_t i = 8 + json_len; i < plan.header_len; i++)
        CHECK(plan.header[i] == ' ');
    uint64_t n_le = 0;
    for (int i = 7; i >= 0; i--)
        n_le = n_le << 8 | plan.header[i];
    CHECK_EQ_U64(n_le, plan.header_len - 8);
    CHECK_EQ_U64(plan.data_size, 31);
    CHECK_EQ_U64(plan.begin[6], 29);
    CHECK_EQ_U64(plan.bytes[6], 1);
    st_write_plan_free(&plan);
    CHECK(plan.header == NULL);
}

TEST(strings_escaped_like_serde_json)
{
    st_metadata_entry m[] = {
        {"k\"\\/\n\r\t\b\f\x01\x1f\x7f", "\xe2\x82\xac \xf0\x9f\x98\x80 </script>"},
        {"format", "pt"},
    };
    uint64_t shape[] = {0};
    st_write_tensor t = {"layer.0/w \"q\" \\ \xe4\xb8\xad", ST_F16, 1, shape};
    st_write_plan plan;
    st_error err;
    CHECK_EQ_U64(st_write_plan_make(&t, 1, m, 2, true, &plan, &err), ST_OK);
    const char *json = "{\"__metadata__\":{\"k\\\"\\\\/\\n\\r\\t\\b\\f\\u0001\\u001f\x7f\":"
                       "\"\xe2\x82\xac \xf0\x9f\x98\x80 </script>\",\"format\":\"pt\"},"
                       "\"layer.0/w \\\"q\\\" \\\\ \xe4\xb8\xad\":{\"dtype\":\"F16\",\"shape\":[0],"
                       "\"data_offsets\":[0,0]}}";
    size_t json_len = strlen(json);
    CHECK(plan.header_len >= 8 + json_len && memcmp(plan.header + 8, json, json_len) == 0);
    if (!(plan.header_len >= 8 + json_len && memcmp(plan.header + 8, json, json_len) == 0))
        fprintf(stderr, "  got: %.*s\n", (int)(plan.header_len - 8), plan.header + 8);
    st_write_plan_free(&plan);

    /* has_metadata with no entries writes an empty object; without, no key at all */
    CHECK_EQ_U64(st_write_plan_make(&t, 1, NULL, 0, true, &plan, &err), ST_OK);
    CHECK(memcmp(plan.header + 8, "{\"__metadata__\":{},\"layer", 25) == 0);
    st_write_plan_free(&plan);
    CHECK_EQ_U64(st_write_plan_make(&t, 1, NULL, 0, false, &plan, &err), ST_OK);
    CHECK(memcmp(plan.header + 8, "{\"layer", 7) == 0);
    st_write_plan_free(&plan);
}

TEST(errors)
{
    uint64_t one[] = {1};
    st_write_plan plan;
    st_error err;
    st_write_tensor dup[] = {{"w", ST_F32, 1, one}, {"x", ST_F32, 1, one}, {"w", ST_I8, 1, one}};
    CHECK_EQ_U64(st_write_plan_make(dup, 3, NULL, 0, false, &plan, &err), ST_JSON_DUPLICATE_KEY);
    CHECK_STR(err.tensor, "w");
    CHECK(plan.header == NULL && plan.order == NULL);
    st_metadata_entry mdup[] = {{"a", "1"}, {"b", "2"}, {"a", "3"}};
    CHECK_EQ_U64(st_write_plan_make(dup, 1, mdup, 3, true, &plan, &err), ST_JSON_DUPLICATE_KEY);
    st_write_tensor reserved = {"__metadata__", ST_F32, 1, one};
    CHECK_EQ_U64(st_write_plan_make(&reserved, 1, NULL, 0, false, &plan, &err),
                 ST_JSON_DUPLICATE_KEY);

    st_write_tensor empty = {"", ST_F32, 1, one};
    CHECK_EQ_U64(st_write_plan_make(&empty, 1, NULL, 0, false, &plan, &err), ST_TENSOR_NAME_EMPTY);
    st_write_tensor null_name = {NULL, ST_F32, 1, one};
    CHECK_EQ_U64(st_write_plan_make(&null_name, 1, NULL, 0, false, &plan, &err),
                 ST_TENSOR_NAME_EMPTY);
    char long_name[ST_TENSOR_NAME_MAX + 2];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[ST_TENSOR_NAME_MAX + 1] = '\0';
    st_write_tensor too_long = {long_name, ST_F32, 1, one};
    CHECK_EQ_U64(st_write_plan_make(&too_long, 1, NULL, 0, false, &plan, &err),
                 ST_TENSOR_NAME_TOO_LONG);
    long_name[ST_TENSOR_NAME_MAX] = '\0'; /* exactly the limit is fine */
    CHECK_EQ_U64(st_write_plan_make(&too_long, 1, NULL, 0, false, &plan, &err), ST_OK);
    st_write_plan_free(&plan);
    const char *control[] = {"a\x01", "tab\there", "new\nline", "del\x7f"};
    for (size_t i = 0; i < 4; i++) {
        st_write_tensor c = {control[i], ST_F32, 1, one};
        CHECK_EQ_U64(st_write_plan_make(&c, 1, NULL, 0, false, &plan, &err),
                     ST_TENSOR_NAME_CONTROL);
    }
    const char *bad_utf8[] = {"\xff", "\xc0\xaf", "\xed\xa0\x80", "a\xe2\x82", "\xf4\x90\x80\x80"};
    for (size_t i = 0; i < 5; i++) {
        st_write_tensor u = {bad_utf8[i], ST_F32, 1, one};
        CHECK_EQ_U64(st_write_plan_make(&u, 1, NULL, 0, false, &plan, &err), ST_HEADER_NOT_UTF8);
    }
    st_metadata_entry bad_value = {"k", "\xff"};
    CHECK_EQ_U64(st_write_plan_make(NULL, 0, &bad_value, 1, true, &plan, &err), ST_HEADER_NOT_UTF8);

    uint64_t huge[] = {1ULL << 62, 8};
    st_write_tensor overflow = {"h", ST_U8, 2, huge};
    CHECK_EQ_U64(st_write_plan_make(&overflow, 1, NULL, 0, false, &plan, &err), ST_SIZE_OVERFLOW);
    /* each tensor is just under 2^61 bytes (elements * bits must fit 64 bits); nine of
     * them pass 2^64 */
    uint64_t big[] = {(1ULL << 58) - 1};
    st_write_tensor nine[9];
    char names[9][16];
    for (unsigned i = 0; i < 9; i++) {
        snprintf(names[i], sizeof names[i], "t%u", i);
        nine[i] = (st_write_tensor){names[i], ST_U64, 1, big};
    }
    CHECK_EQ_U64(st_write_plan_make(nine, 8, NULL, 0, false, &plan, &err), ST_OK);
    CHECK_EQ_U64(plan.data_size, 8 * (((1ULL << 58) - 1) * 8));
    CHECK_EQ_U64(plan.begin[7], 7 * (((1ULL << 58) - 1) * 8));
    st_write_plan_free(&plan);
    CHECK_EQ_U64(st_write_plan_make(nine, 9, NULL, 0, false, &plan, &err), ST_SIZE_OVERFLOW);
    uint64_t three[] = {3};
    st_write_tensor partial = {"f4", ST_F4, 1, three};
    CHECK_EQ_U64(st_write_plan_make(&partial, 1, NULL, 0, false, &plan, &err), ST_SUB_BYTE_PARTIAL);
    CHECK_STR(err.tensor, "f4");
    uint64_t four[] = {4};
    st_write_tensor f6 = {"f6", ST_F6_E2M3, 1, four};
    CHECK_EQ_U64(st_write_plan_make(&f6, 1, NULL, 0, false, &plan, &err), ST_OK);
    CHECK_EQ_U64(plan.bytes[0], 3);
    st_write_plan_free(&plan);
    st_write_tensor bad_dtype = {"d", ST_DTYPE_COUNT, 1, one};
    CHECK_EQ_U64(st_write_plan_make(&bad_dtype, 1, NULL, 0, false, &plan, &err), ST_DTYPE_UNKNOWN);

    /* a header over the parser's 100,000,000-byte bound is refused, not written */
    size_t value_len = (size_t)ST_HEADER_SIZE_MAX;
    char *value = malloc(value_len + 1);
    memset(value, 'v', value_len);
    value[value_len] = '\0';
    st_metadata_entry big_metadata = {"k", value};
    CHECK_EQ_U64(st_write_plan_make(NULL, 0, &big_metadata, 1, true, &plan, &err),
                 ST_HEADER_TOO_LARGE);
    CHECK(plan.header == NULL);
    value[value_len - 40] = '\0';
    CHECK_EQ_U64(st_write_plan_make(NULL, 0, &big_metadata, 1, true, &plan, &err), ST_OK);
    CHECK(plan.header_len - 8 <= ST_HEADER_SIZE_MAX);
    st_write_plan_free(&plan);
    free(value);
}

TEST(written_files_parse_back)
{
    uint64_t s1[] = {2, 3}, s2[] = {0, 5}, s3[] = {4};
    st_write_tensor t[] = {{"w", ST_BF16, 2, s1},
                           {"empty", ST_F32, 2, s2},
                           {"q", ST_F4, 1, s3},
                           {"scalar", ST_I64, 0, NULL}};
    uint8_t bytes[64];
    for (unsigned i = 0; i < sizeof bytes; i++)
        bytes[i] = (uint8_t)(i * 7 + 1);
    const void *data[] = {bytes, NULL, bytes + 20, bytes + 30};
    st_metadata_entry m = {"format", "pt"};
    uint8_t *out;
    size_t len;
    st_error err;
    CHECK_EQ_U64(st_write_to_buffer(t, data, 4, &m, 1, true, &out, &len, &err), ST_OK);
    st_file file;
    CHECK_EQ_U64(st_header_parse(out, len, len, NULL, &file, &err), ST_OK);
    CHECK_EQ_U64(file.tensor_count, 4);
    CHECK_EQ_U64(file.data_start + file.data_size, len);
    CHECK_STR(st_file_metadata(&file, "format"), "pt");
    const st_tensor *w = st_file_find(&file, "w", 1);
    CHECK(w != NULL && w->dtype == ST_BF16 && w->end - w->begin == 12);
    if (w != NULL)
        CHECK(memcmp(out + file.data_start + w->begin, bytes, 12) == 0);
    const st_tensor *q = st_file_find(&file, "q", 1);
    CHECK(q != NULL && q->end - q->begin == 2);
    if (q != NULL)
        CHECK(memcmp(out + file.data_start + q->begin, bytes + 20, 2) == 0);
    st_file_free(&file);
    free(out);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(reference_writer_vectors);
    RUN(order_is_dtype_then_name);
    RUN(strings_escaped_like_serde_json);
    RUN(errors);
    RUN(written_files_parse_back);
    return test_report(argv[0]);
}
