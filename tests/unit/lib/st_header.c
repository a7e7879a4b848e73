#include "st_header.h"

#include <stdlib.h>

#include "../test.h"

/* ------------------------------------------------------------- helpers */

/* A file: 8-byte little-endian N, the header bytes, then data_len zero bytes. */
static uint8_t *make_file(const char *header, size_t header_len, size_t data_len, size_t *file_len)
{
    *file_len = 8 + header_len + data_len;
    uint8_t *buf = calloc(1, *file_len + 1);
    for (int k = 0; k < 8; k++)
        buf[k] = (uint8_t)((uint64_t)header_len >> (8 * k));
    memcpy(buf + 8, header, header_len);
    return buf;
}

static st_error last_err;
static size_t last_release_calls;

/* The release hook: each range lies inside the buffer and inside the header. */
typedef struct released {
    size_t buf_len, calls;
} released;

static void count_release(void *context, uint64_t from, uint64_t to)
{
    released *seen = context;
    CHECK(from <= to && to <= seen->buf_len && from >= 8);
    seen->calls++;
}

/* st_header_check gives st_header_parse's verdict word for word, and the counts. */
static void check_only_agrees(const uint8_t *buf, size_t len, uint64_t file_size, st_reason r,
                              const st_error *err, const st_file *parsed)
{
    released seen = {len, 0};
    st_limits limits = {.release = count_release, .release_context = &seen};
    st_file f;
    st_error e;
    CHECK_EQ_U64(st_header_check(buf, len, file_size, &limits, &f, &e), r);
    CHECK_EQ_U64(e.reason, err->reason);
    CHECK_EQ_U64(e.offset, err->offset);
    CHECK_STR(e.detail, err->detail);
    CHECK_EQ_U64(e.tensor_len, err->tensor_len);
    CHECK(memcmp(e.tensor, err->tensor, err->tensor_len) == 0);
    CHECK(f.tensors == NULL && f.metadata == NULL && f.internal == NULL);
    last_release_calls = seen.calls;
    if (r == ST_OK) {
        CHECK_EQ_U64(f.tensor_count, parsed->tensor_count);
        CHECK_EQ_U64(f.metadata_count, parsed->metadata_count);
        CHECK_EQ_U64(f.data_start, parsed->data_start);
        CHECK_EQ_U64(f.data_size, parsed->data_size);
        CHECK(f.has_metadata == parsed->has_metadata);
        CHECK(st_file_find(&f, "a", 1) == NULL && st_file_metadata(&f, "format") == NULL);
    }
    st_file_free(&f);
}

/* Parses header (header_len bytes) followed by data_len bytes with a known file size. */
static st_reason parse_bytes(const char *header, size_t header_len, size_t data_len, st_file *out)
{
    size_t len;
    uint8_t *buf = make_file(header, header_len, data_len, &len);
    st_file scratch;
    st_file *parsed = out ? out : &scratch;
    st_reason r = st_header_parse(buf, len, len, NULL, parsed, &last_err);
    check_only_agrees(buf, len, len, r, &last_err, parsed);
    if (out == NULL)
        st_file_free(&scratch);
    free(buf);
    /* the reason returned and the one in the error agree */
    CHECK_EQ_U64(last_err.reason, r);
    return r;
}

static st_reason parse_str(const char *header, size_t data_len)
{
    return parse_bytes(header, strlen(header), data_len, NULL);
}

#define EXPECT(header, data_len, reason)                                                           \
    CHECK_STR(st_reason_name(parse_str(header, data_len)), st_reason_name(reason))

#define EXPECT_AT(header, data_len, reason, expected_offset)                                       \
    do {                                                                                           \
        CHECK_STR(st_reason_name(parse_str(header, data_len)), st_reason_name(reason));            \
        CHECK_EQ_U64(last_err.offset, (expected_offset));                                          \
    } while (0)

/* Absolute offset of the first occurrence of needle in header (8 + index). */
static uint64_t at(const char *header, const char *needle)
{
    const char *p = strstr(header, needle);
    return p ? 8 + (uint64_t)(p - header) : UINT64_MAX;
}

/* One valid tensor entry of 16 bytes. */
#define T16 "{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}"

/* ------------------------------------------------------------- framing */

TEST(framing)
{
    uint8_t small[5] = {1, 0, 0, 0, 0};
    st_file f;
    st_error e;
    CHECK_EQ_U64(st_header_parse(small, 5, 5, NULL, &f, &e), ST_FILE_TOO_SMALL);
    CHECK_EQ_U64(st_header_parse(small, 0, 0, NULL, &f, &e), ST_FILE_TOO_SMALL);
    CHECK(f.tensors == NULL && f.internal == NULL);
    st_file_free(&f);

    /* N = 100,000,001 */
    uint8_t big[16] = {0x01, 0xe1, 0xf5, 0x05, 0, 0, 0, 0, '{', '}'};
    CHECK_EQ_U64(st_header_parse(big, 16, 16, NULL, &f, &e), ST_HEADER_TOO_LARGE);
    CHECK_EQ_U64(e.offset, 0);
    uint64_t n = 0;
    CHECK_EQ_U64(st_header_length(big, 8, 1ULL << 40, NULL, &n, &e), ST_HEADER_TOO_LARGE);
    /* exactly 100,000,000 is allowed by the length check */
    uint8_t limit[8] = {0x00, 0xe1, 0xf5, 0x05, 0, 0, 0, 0};
    CHECK_EQ_U64(st_header_length(limit, 8, 1ULL << 40, NULL, &n, &e), ST_OK);
    CHECK_EQ_U64(n, 100000000);
    /* a lower configured limit, and a higher one is clamped to the default */
    st_limits low = {.max_header_size = 1000, .max_depth = 0};
    uint8_t k1001[8] = {0xe9, 0x03, 0, 0, 0, 0, 0, 0};
    CHECK_EQ_U64(st_header_length(k1001, 8, 1ULL << 40, &low, &n, &e), ST_HEADER_TOO_LARGE);
    st_limits high = {.max_header_size = 1ULL << 40, .max_depth = 0};
    CHECK_EQ_U64(st_header_length(big, 8, 1ULL << 40, &high, &n, &e), ST_HEADER_TOO_LARGE);
    /* N beyond the file */
    CHECK_EQ_U64(st_header_length(k1001, 8, 500, NULL, &n, &e), ST_HEADER_TRUNCATED);
    CHECK_EQ_U64(st_header_length(small, 5, 5, NULL, &n, &e), ST_FILE_TOO_SMALL);
    /* unknown file size: only N is checked */
    CHECK_EQ_U64(st_header_length(k1001, 8, ST_FILE_SIZE_UNKNOWN, NULL, &n, &e), ST_OK);
    CHECK_EQ_U64(n, 1001);

    /* the file is long enough but the buffer holds less than 8 + N */
    size_t len;
    uint8_t *buf = make_file("{}", 2, 0, &len);
    CHECK_EQ_U64(st_header_parse(buf, len - 1, len, NULL, &f, &e), ST_HEADER_TRUNCATED);
    CHECK_EQ_U64(st_header_parse(buf, len, len - 1, NULL, &f, &e), ST_HEADER_TRUNCATED);
    CHECK_EQ_U64(st_header_parse(buf, 7, ST_FILE_SIZE_UNKNOWN, NULL, &f, &e), ST_HEADER_TRUNCATED);
    CHECK_EQ_U64(st_header_parse(buf, len, len, NULL, &f, &e), ST_OK);
    CHECK_EQ_U64(f.header_size, 2);
    CHECK_EQ_U64(f.data_start, 10);
    CHECK_EQ_U64(f.data_size, 0);
    CHECK_EQ_U64(f.tensor_count, 0);
    CHECK(!f.has_metadata);
    st_file_free(&f);
    free(buf);
}

/* ---------------------------------------------------------------- UTF-8 */

TEST(utf8)
{
    static const struct {
        const char *bytes;
        size_t bad; /* index of the bad byte in the header */
    } bad[] = {
        {"{\"a\xff\":1}", 3},            /* never valid */
        {"{\"\xc0\xaf\":1}", 2},         /* overlong '/' */
        {"{\"\xc1\xbf\":1}", 2},         /* overlong */
        {"{\"\xe0\x80\xaf\":1}", 2},     /* overlong 3-byte */
        {"{\"\xf0\x80\x80\xaf\":1}", 2}, /* overlong 4-byte */
        {"{\"\xed\xa0\x80\":1}", 2},     /* U+D800 encoded in UTF-8 */
        {"{\"\xed\xbf\xbf\":1}", 2},     /* U+DFFF encoded in UTF-8 */
        {"{\"\xf4\x90\x80\x80\":1}", 2}, /* U+110000 */
        {"{\"\xf5\x80\x80\x80\":1}", 2}, /* beyond */
        {"{\"\x80\":1}", 2},             /* lone continuation */
        {"{\"\xc3\":1}", 2},             /* missing continuation */
        {"{\"\xe2\x82\":1}", 2},         /* short sequence */
        {"{}       \xc3", 9},            /* at the very end, in the padding */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_STR(st_reason_name(parse_str(bad[i].bytes, 0)), "header_not_utf8");
        CHECK_EQ_U64(last_err.offset, 8 + bad[i].bad);
    }
    /* UTF-8 comes before the start byte and before the grammar */
    EXPECT(" {\xff", 0, ST_HEADER_NOT_UTF8);
    EXPECT("{\"a\":]\xff", 0, ST_HEADER_NOT_UTF8);
    /* the largest code points of each length are fine in metadata */
    EXPECT("{\"__metadata__\":{\"k\":"
           "\"\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"}}",
           0, ST_OK);
}

TEST(start_and_trailing)
{
    EXPECT_AT(" {}", 0, ST_HEADER_START, 8);
    EXPECT("\n{}", 0, ST_HEADER_START);
    EXPECT("\t{}", 0, ST_HEADER_START);
    EXPECT("[]", 0, ST_HEADER_START);
    EXPECT("", 0, ST_HEADER_START);
    EXPECT("{}", 0, ST_OK);
    EXPECT("{}      ", 0, ST_OK);
    EXPECT_AT("{}  \n", 0, ST_HEADER_TRAILING_BYTES, 12);
    EXPECT_AT("{} x", 0, ST_HEADER_TRAILING_BYTES, 11);
    EXPECT("{}{}", 0, ST_HEADER_TRAILING_BYTES);
    EXPECT("{}\t", 0, ST_HEADER_TRAILING_BYTES);
    /* inside the JSON, RFC 8259 whitespace between tokens is fine */
    EXPECT("{ \"a\" :\n{\t\"dtype\" : \"U8\" ,\r\n \"shape\" : [ 1 , 2 ] , \"data_offsets\" : [ 0 "
           ", 2 ] } }",
           2, ST_OK);
}

/* ---------------------------------------------------------------- JSON */

TEST(json_syntax)
{
    EXPECT_AT("{", 0, ST_JSON_SYNTAX, 9);
    EXPECT("{\"a\"}", 0, ST_JSON_SYNTAX);
    EXPECT("{\"a\":}", 0, ST_JSON_SYNTAX);
    EXPECT("{\"a\":" T16 ",}", 16, ST_JSON_SYNTAX);
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2,],\"data_offsets\":[0,16]}}", 16,
           ST_JSON_SYNTAX);
    EXPECT("{\"a\":[,]}", 0, ST_JSON_SYNTAX);
    EXPECT("{'a':1}", 0, ST_JSON_SYNTAX);
    EXPECT("{a:1}", 0, ST_JSON_SYNTAX);
    EXPECT("{\"a\":tru}", 0, ST_JSON_SYNTAX);
    EXPECT("{\"a\":nul}", 0, ST_JSON_SYNTAX);
    EXPECT("{\"a\":1.}", 0, ST_JSON_SYNTAX);
    EXPECT("{\"a\":-}", 0, ST_JSON_SYNTAX);
    EXPECT("{\"a\":1e}", 0, ST_JSON_SYNTAX);
    EXPECT("{\"a\":+1}", 0, ST_JSON_SYNTAX);
    EXPECT("{\"a\":\"x}", 0, ST_JSON_SYNTAX);
    EXPECT("{\"a\" 1}", 0, ST_JSON_SYNTAX);
    EXPECT("{\"a\":1 \"b\":2}", 0, ST_JSON_SYNTAX);
    EXPECT("{\"a\":[1 2]}", 0, ST_JSON_SYNTAX);
    EXPECT("{\"a\":[}", 0, ST_JSON_SYNTAX);
    EXPECT("{\"a\":{]}", 0, ST_JSON_SYNTAX);
    EXPECT("{\"a\":NaN}", 0, ST_JSON_SYNTAX);
    /* a raw control character inside a string must be escaped */
    EXPECT_AT("{\"a\tb\":1}", 0, ST_JSON_SYNTAX, 11);
    /* a header cut in the middle */
    EXPECT("{\"a\":"
           "{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]",
           16, ST_JSON_SYNTAX);
}

TEST(json_escape)
{
    EXPECT_AT("{\"a\\x\":1}", 0, ST_JSON_ESCAPE, 11);
    EXPECT("{\"a\\'\":1}", 0, ST_JSON_ESCAPE);
    EXPECT("{\"a\\u12\":1}", 0, ST_JSON_ESCAPE);
    EXPECT("{\"a\\u12g4\":1}", 0, ST_JSON_ESCAPE);
    EXPECT("{\"\\uD800\":1}", 0, ST_JSON_ESCAPE); /* lone high surrogate */
    EXPECT("{\"\\uD800x\":1}", 0, ST_JSON_ESCAPE);
    EXPECT("{\"\\uD800\\u0041\":1}", 0, ST_JSON_ESCAPE); /* high then not a low */
    EXPECT("{\"\\uD800\\uD800\":1}", 0, ST_JSON_ESCAPE);
    EXPECT("{\"\\uDC00\":1}", 0, ST_JSON_ESCAPE);        /* lone low surrogate */
    EXPECT("{\"\\udfff\\ud800\":1}", 0, ST_JSON_ESCAPE); /* reversed pair */
    /* U+0000 in a key other than a tensor name, or in a metadata value */
    EXPECT("{\"__metadata__\":{\"k\\u0000\":\"v\"}}", 0, ST_JSON_ESCAPE);
    EXPECT("{\"__metadata__\":{\"k\":\"v\\u0000\"}}", 0, ST_JSON_ESCAPE);
    EXPECT("{\"a\":{\"dtype\\u0000\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16,
           ST_JSON_ESCAPE);
    /* but in a tensor name it is a control character */
    EXPECT("{\"a\\u0000\":" T16 "}", 16, ST_TENSOR_NAME_CONTROL);
    /* all simple escapes are fine in metadata */
    st_file f;
    const char *h = "{\"__metadata__\":{\"k\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}}";
    CHECK_EQ_U64(parse_bytes(h, strlen(h), 0, &f), ST_OK);
    CHECK_STR(st_file_metadata(&f, "k"), "\"\\/\b\f\n\r\t");
    st_file_free(&f);
}

TEST(duplicate_keys)
{
    /* the reference keeps the last duplicate tensor silently */
    const char *h = "{\"a\":" T16 ",\"a\":" T16 "}";
    EXPECT_AT(h, 16, ST_JSON_DUPLICATE_KEY, 8 + 5 + strlen(T16) + 1);
    CHECK_STR(last_err.tensor, "a");
    /* keys are compared decoded */
    EXPECT("{\"a\":" T16 ",\"\\u0061\":" T16 "}", 16, ST_JSON_DUPLICATE_KEY);
    EXPECT("{\"\\u00e9\":" T16 ",\"\xc3\xa9\":" T16 "}", 16, ST_JSON_DUPLICATE_KEY);
    EXPECT("{\"\\ud83d\\ude00\":" T16 ",\"\xf0\x9f\x98\x80\":" T16 "}", 16, ST_JSON_DUPLICATE_KEY);
    /* inside a tensor entry */
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}",
           16, ST_JSON_DUPLICATE_KEY);
    EXPECT(
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16],\"s\\u0068ape\":[4]}}",
        16, ST_JSON_DUPLICATE_KEY);
    /* inside __metadata__ (the reference accepts these) */
    EXPECT("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, ST_JSON_DUPLICATE_KEY);
    EXPECT("{\"__metadata__\":{\"k\":\"1\"},\"__metadata__\":{}}", 0, ST_JSON_DUPLICATE_KEY);
    /* inside a value nobody reads */
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16],\"x\":{\"q\":1,\"q\":"
           "2}}}",
           16, ST_JSON_DUPLICATE_KEY);
    /* duplicates come before semantics, even when the semantic problem is earlier */
    EXPECT("{\"a\":5,\"b\":" T16 ",\"b\":" T16 "}", 16, ST_JSON_DUPLICATE_KEY);
    /* same key in different objects is fine */
    EXPECT("{\"dtype\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}", 1, ST_OK);

    /* big objects: sorted at close; the earliest second occurrence is reported */
    char big[4096];
    size_t n = (size_t)snprintf(big, sizeof big, "{\"__metadata__\":{");
    for (int i = 0; i < 40; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "%s\"k%d\":\"v\"", i ? "," : "",
                              i == 30 ? 7 : (i == 35 ? 3 : i));
    snprintf(big + n, sizeof big - n, "}}");
    CHECK_STR(st_reason_name(parse_str(big, 0)), "json_duplicate_key");
    /* k7 repeats at i == 30, k3 at i == 35: the k7 repeat is first in the document */
    const char *rep = strstr(strstr(big, "\"k7\"") + 1, "\"k7\"");
    CHECK_EQ_U64(last_err.offset, 8 + (uint64_t)(rep - big));
    CHECK(strstr(last_err.detail, "k7") != NULL);

    /* a duplicate in a big root object, found before a later syntax error */
    n = (size_t)snprintf(big, sizeof big, "{");
    for (int i = 0; i < 30; i++)
        n +=
            (size_t)snprintf(big + n, sizeof big - n, "%s\"t%d\":5", i ? "," : "", i == 20 ? 4 : i);
    snprintf(big + n, sizeof big - n, ",\"z\":[1 2]}");
    CHECK_STR(st_reason_name(parse_str(big, 0)), "json_duplicate_key");
    rep = strstr(strstr(big, "\"t4\"") + 1, "\"t4\"");
    CHECK_EQ_U64(last_err.offset, 8 + (uint64_t)(rep - big));
    /* ... but a syntax error before the duplicate wins */
    n = (size_t)snprintf(big, sizeof big, "{\"z\":[1 2]");
    for (int i = 0; i < 30; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, ",\"t%d\":5", i == 20 ? 4 : i);
    snprintf(big + n, sizeof big - n, "}");
    CHECK_STR(st_reason_name(parse_str(big, 0)), "json_syntax");
}

TEST(nesting)
{
    /* 64 levels are fine (root + 63), 65 are not */
    char h[400000];
    size_t n = 0;
    n += (size_t)snprintf(h, sizeof h, "{\"__metadata__\":{\"k\":\"v\"},\"x\":");
    for (int i = 0; i < 62; i++)
        h[n++] = '[';
    for (int i = 0; i < 62; i++)
        h[n++] = ']';
    h[n++] = '}';
    h[n] = '\0';
    /* depth 63 reached: legal grammar, the entry is not an object */
    EXPECT(h, 0, ST_TENSOR_NOT_OBJECT);
    n = (size_t)snprintf(h, sizeof h, "{\"x\":");
    for (int i = 0; i < 64; i++)
        h[n++] = '[';
    for (int i = 0; i < 64; i++)
        h[n++] = ']';
    h[n++] = '}';
    h[n] = '\0';
    EXPECT_AT(h, 0, ST_JSON_NESTING, 8 + 5 + 63);
    /* very deep input does not recurse */
    n = (size_t)snprintf(h, sizeof h, "{\"x\":");
    while (n < sizeof h - 1)
        h[n++] = '[';
    h[n] = '\0';
    EXPECT(h, 0, ST_JSON_NESTING);
    /* objects count too, and the limit is configurable */
    const char *objs = "{\"a\":{\"b\":{\"c\":1}}}";
    size_t len;
    uint8_t *buf = make_file(objs, strlen(objs), 0, &len);
    st_limits three = {.max_depth = 3};
    st_limits two = {.max_depth = 2};
    st_file f;
    st_error e;
    /* three levels are legal grammar; "b" is then an unknown field of tensor "a" */
    CHECK_EQ_U64(st_header_parse(buf, len, len, &three, &f, &e), ST_TENSOR_UNKNOWN_FIELD);
    CHECK_EQ_U64(st_header_parse(buf, len, len, &two, &f, &e), ST_JSON_NESTING);
    CHECK_EQ_U64(e.offset, at(objs, "{\"c\""));
    free(buf);
}

TEST(integers)
{
    static const char *const bad_format[] = {"-1", "-0", "1.0", "1e3", "1E+3",
                                             "01", "00", "0.5", "2e0"};
    char h[256];
    for (size_t i = 0; i < sizeof bad_format / sizeof bad_format[0]; i++) {
        snprintf(h, sizeof h, "{\"a\":{\"dtype\":\"U8\",\"shape\":[%s],\"data_offsets\":[0,1]}}",
                 bad_format[i]);
        EXPECT_AT(h, 1, ST_INTEGER_FORMAT, at(h, bad_format[i]));
        snprintf(h, sizeof h, "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,%s]}}",
                 bad_format[i]);
        EXPECT(h, 1, ST_INTEGER_FORMAT);
        /* numbers anywhere are checked by the grammar, before semantics */
        snprintf(h, sizeof h, "{\"__metadata__\":{\"k\":%s}}", bad_format[i]);
        EXPECT(h, 0, ST_INTEGER_FORMAT);
    }
    EXPECT("{\"a\":{\"dtype\":\"U8\",\"shape\":[18446744073709551616],\"data_offsets\":[0,1]}}", 1,
           ST_INTEGER_OVERFLOW);
    EXPECT("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,99999999999999999999999]}}",
           1, ST_INTEGER_OVERFLOW);
    /* the largest u64 is an integer; with a zero dimension the tensor is empty */
    st_file f;
    const char *max =
        "{\"a\":{\"dtype\":\"U8\",\"shape\":[0,18446744073709551615],\"data_offsets\":[0,0]}}";
    CHECK_EQ_U64(parse_bytes(max, strlen(max), 0, &f), ST_OK);
    CHECK_EQ_U64(f.tensors[0].shape[1], UINT64_MAX);
    CHECK_EQ_U64(f.tensors[0].elements, 0);
    st_file_free(&f);
    /* "0" alone is fine */
    EXPECT("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}", 0, ST_OK);
}

/* ------------------------------------------------------- tensor entries */

TEST(tensor_entries)
{
    /* the reference accepts the array form */
    EXPECT("{\"a\":[\"F32\",[2,2],[0,16]]}", 16, ST_TENSOR_NOT_OBJECT);
    EXPECT_AT("{\"a\":\"F32\"}", 0, ST_TENSOR_NOT_OBJECT, 13);
    CHECK_STR(last_err.tensor, "a");
    EXPECT("{\"a\":null}", 0, ST_TENSOR_NOT_OBJECT);
    EXPECT("{\"a\":7}", 0, ST_TENSOR_NOT_OBJECT);
    EXPECT("{\"a\":true}", 0, ST_TENSOR_NOT_OBJECT);
    /* unknown fields (the reference ignores them) */
    const char *h =
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16],\"extra\":1}}";
    EXPECT_AT(h, 16, ST_TENSOR_UNKNOWN_FIELD, at(h, "\"extra\""));
    CHECK_STR(last_err.tensor, "a");
    EXPECT("{\"a\":{\"Dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16,
           ST_TENSOR_UNKNOWN_FIELD);
    /* missing fields */
    h = "{\"a\":{\"shape\":[2,2],\"data_offsets\":[0,16]}}";
    EXPECT_AT(h, 16, ST_TENSOR_MISSING_FIELD, 13);
    CHECK(strstr(last_err.detail, "dtype") != NULL);
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,16]}}", 16, ST_TENSOR_MISSING_FIELD);
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2]}}", 16, ST_TENSOR_MISSING_FIELD);
    EXPECT("{\"a\":{}}", 0, ST_TENSOR_MISSING_FIELD);
    /* dtype: the reference accepts {"F32": null} */
    h = "{\"a\":{\"dtype\":{\"F32\":null},\"shape\":[2,2],\"data_offsets\":[0,16]}}";
    EXPECT_AT(h, 16, ST_DTYPE_INVALID, at(h, "{\"F32\""));
    EXPECT("{\"a\":{\"dtype\":32,\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16, ST_DTYPE_INVALID);
    EXPECT("{\"a\":{\"dtype\":[\"F32\"],\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16,
           ST_DTYPE_INVALID);
    EXPECT("{\"a\":{\"dtype\":null,\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16,
           ST_DTYPE_INVALID);
    h = "{\"a\":{\"dtype\":\"f32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}";
    EXPECT_AT(h, 16, ST_DTYPE_UNKNOWN, at(h, "\"f32\""));
    EXPECT("{\"a\":{\"dtype\":\"F32 \",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16,
           ST_DTYPE_UNKNOWN);
    EXPECT("{\"a\":{\"dtype\":\"\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16,
           ST_DTYPE_UNKNOWN);
    EXPECT("{\"a\":{\"dtype\":\"F32\\u0000\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16,
           ST_DTYPE_UNKNOWN);
    /* escapes in the dtype decode to the real name */
    EXPECT("{\"a\":{\"dtype\":\"\\u004632\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16, ST_OK);
    /* shape */
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":\"2,2\",\"data_offsets\":[0,16]}}", 16,
           ST_SHAPE_INVALID);
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,16]}}", 16, ST_SHAPE_INVALID);
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":null,\"data_offsets\":[0,16]}}", 16,
           ST_SHAPE_INVALID);
    h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,\"2\"],\"data_offsets\":[0,16]}}";
    EXPECT_AT(h, 16, ST_SHAPE_INVALID, at(h, "\"2\""));
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[[2,2]],\"data_offsets\":[0,16]}}", 16,
           ST_SHAPE_INVALID);
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":{\"0\":4},\"data_offsets\":[0,16]}}", 16,
           ST_SHAPE_INVALID);
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2.5],\"data_offsets\":[0,16]}}", 16,
           ST_INTEGER_FORMAT);
    /* data_offsets */
    h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0]}}";
    EXPECT_AT(h, 16, ST_OFFSETS_INVALID, at(h, "[0]"));
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[]}}", 16,
           ST_OFFSETS_INVALID);
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16,32]}}", 16,
           ST_OFFSETS_INVALID);
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[16,0]}}", 16,
           ST_OFFSETS_INVALID);
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":\"0,16\"}}", 16,
           ST_OFFSETS_INVALID);
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,\"16\"]}}", 16,
           ST_OFFSETS_INVALID);
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":{\"begin\":0}}}", 16,
           ST_OFFSETS_INVALID);
    /* fields in any order */
    EXPECT("{\"a\":{\"data_offsets\":[0,16],\"shape\":[2,2],\"dtype\":\"F32\"}}", 16, ST_OK);
}

TEST(tensor_names)
{
    EXPECT_AT("{\"\":" T16 "}", 16, ST_TENSOR_NAME_EMPTY, 9);
    char h[4096], name[1100];
    memset(name, 'n', sizeof name);
    name[1024] = '\0';
    snprintf(h, sizeof h, "{\"%s\":" T16 "}", name);
    EXPECT(h, 16, ST_OK);
    name[1024] = 'n';
    name[1025] = '\0';
    snprintf(h, sizeof h, "{\"%s\":" T16 "}", name);
    EXPECT_AT(h, 16, ST_TENSOR_NAME_TOO_LONG, 9);
    /* the bound is on decoded bytes: 512 escaped two-byte characters are 1024 bytes */
    size_t n = (size_t)snprintf(h, sizeof h, "{\"");
    for (int i = 0; i < 512; i++)
        n += (size_t)snprintf(h + n, sizeof h - n, "\\u00e9");
    snprintf(h + n, sizeof h - n, "\":" T16 "}");
    EXPECT(h, 16, ST_OK);
    /* control characters, escaped or raw where JSON allows raw */
    EXPECT("{\"a\\u0001\":" T16 "}", 16, ST_TENSOR_NAME_CONTROL);
    EXPECT("{\"a\\n\":" T16 "}", 16, ST_TENSOR_NAME_CONTROL);
    EXPECT("{\"a\\u001f\":" T16 "}", 16, ST_TENSOR_NAME_CONTROL);
    EXPECT("{\"a\x7f\":" T16 "}", 16, ST_TENSOR_NAME_CONTROL);
    EXPECT("{\"a\\u007f\":" T16 "}", 16, ST_TENSOR_NAME_CONTROL);
    EXPECT("{\"a\xc2\x85\":" T16 "}", 16, ST_TENSOR_NAME_CONTROL);
    EXPECT("{\"a\\u0080\":" T16 "}", 16, ST_TENSOR_NAME_CONTROL);
    EXPECT("{\"a\\u009f\":" T16 "}", 16, ST_TENSOR_NAME_CONTROL);
    EXPECT("{\"a\\u00a0\":" T16 "}", 16, ST_OK);
    EXPECT("{\"a\\u0000\":" T16 "}", 16, ST_TENSOR_NAME_CONTROL);
    /* a raw control byte is a JSON problem first */
    EXPECT("{\"a\x01\":" T16 "}", 16, ST_JSON_SYNTAX);
}

TEST(metadata)
{
    EXPECT_AT("{\"__metadata__\":[]}", 0, ST_METADATA_NOT_OBJECT, 24);
    EXPECT("{\"__metadata__\":\"x\"}", 0, ST_METADATA_NOT_OBJECT);
    EXPECT("{\"__metadata__\":null}", 0, ST_METADATA_NOT_OBJECT);
    EXPECT("{\"__metadata__\":{\"k\":1}}", 0, ST_METADATA_VALUE_NOT_STRING);
    EXPECT("{\"__metadata__\":{\"k\":null}}", 0, ST_METADATA_VALUE_NOT_STRING);
    EXPECT("{\"__metadata__\":{\"k\":{}}}", 0, ST_METADATA_VALUE_NOT_STRING);
    const char *h = "{\"__metadata__\":{\"a\":\"1\",\"k\":[\"v\"]}}";
    EXPECT_AT(h, 0, ST_METADATA_VALUE_NOT_STRING, at(h, "[\"v\"]"));
    /* a tensor called __metadata__ cannot exist; an empty metadata object is fine */
    st_file f;
    h = "{\"__metadata__\":{},\"a\":" T16 "}";
    CHECK_EQ_U64(parse_bytes(h, strlen(h), 16, &f), ST_OK);
    CHECK(f.has_metadata);
    CHECK_EQ_U64(f.metadata_count, 0);
    CHECK(st_file_metadata(&f, "format") == NULL);
    st_file_free(&f);
    /* metadata anywhere in the root, values decoded, header order kept */
    h = "{\"a\":" T16
        ",\"__metadata__\":{\"format\":\"pt\",\"note\":\"caf\\u00e9 \xe2\x9c\x93\",\"\":\"\"}}";
    CHECK_EQ_U64(parse_bytes(h, strlen(h), 16, &f), ST_OK);
    CHECK(f.has_metadata);
    CHECK_EQ_U64(f.metadata_count, 3);
    CHECK_STR(f.metadata[0].key, "format");
    CHECK_STR(f.metadata[1].key, "note");
    CHECK_STR(st_file_metadata(&f, "format"), "pt");
    CHECK_STR(st_file_metadata(&f, "note"), "caf\xc3\xa9 \xe2\x9c\x93");
    CHECK_STR(st_file_metadata(&f, ""), "");
    CHECK(st_file_metadata(&f, "missing") == NULL);
    CHECK(st_file_find(&f, "__metadata__", 12) == NULL);
    CHECK_EQ_U64(f.tensor_count, 1);
    st_file_free(&f);
}

/* ---------------------------------------------------------------- sizes */

TEST(sizes)
{
    const char *h = "{\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}";
    EXPECT_AT(h, 12, ST_SIZE_MISMATCH, at(h, "[0,12]"));
    CHECK_STR(last_err.tensor, "a.weight");
    CHECK_STR(
        last_err.detail,
        "tensor 'a.weight': data_offsets [0, 12] span 12 bytes but shape [2, 2] of F32 needs 16");
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,20]}}", 20,
           ST_SIZE_MISMATCH);
    /* sub-byte dtypes need whole bytes */
    h = "{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}";
    EXPECT_AT(h, 2, ST_SUB_BYTE_PARTIAL, at(h, "[3]"));
    EXPECT("{\"a\":{\"dtype\":\"F6_E2M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2,
           ST_SUB_BYTE_PARTIAL);
    EXPECT("{\"a\":{\"dtype\":\"F6_E3M2\",\"shape\":[4],\"data_offsets\":[0,3]}}", 3, ST_OK);
    EXPECT("{\"a\":{\"dtype\":\"F4\",\"shape\":[3,2],\"data_offsets\":[0,3]}}", 3, ST_OK);
    /* overflow of the shape product and of the byte size */
    EXPECT("{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", 0,
           ST_SIZE_OVERFLOW);
    EXPECT("{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}", 0,
           ST_SIZE_OVERFLOW);
    /* a zero dimension anywhere makes the product 0 even after a big one */
    EXPECT("{\"a\":{\"dtype\":\"F64\",\"shape\":[18446744073709551615,0],\"data_offsets\":[0,0]}}",
           0, ST_OK);
    /* semantics come before sizes, sizes in document order */
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]},\"b\":5}", 12,
           ST_TENSOR_NOT_OBJECT);
    EXPECT("{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,12]},"
           "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           12, ST_SIZE_MISMATCH);
    CHECK_STR(last_err.tensor, "b");
}

/* ------------------------------------------------------------- coverage */

TEST(coverage)
{
    /* hole before the first tensor */
    const char *h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
    uint64_t data_start = 8 + strlen(h);
    EXPECT_AT(h, 8, ST_DATA_HOLE, data_start + 0);
    /* hole between tensors */
    h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}";
    data_start = 8 + strlen(h);
    EXPECT_AT(h, 12, ST_DATA_HOLE, data_start + 4);
    CHECK_STR(last_err.tensor, "b");
    /* overlap */
    h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}";
    data_start = 8 + strlen(h);
    EXPECT_AT(h, 12, ST_DATA_OVERLAP, data_start + 4);
    /* two tensors on the same bytes */
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
           8, ST_DATA_OVERLAP);
    /* a zero-size tensor inside another's range overlaps */
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}",
           8, ST_DATA_OVERLAP);
    /* zero-size tensors at the edges and together are fine */
    st_file f;
    h = "{\"z2\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"z1\":{\"dtype\":\"I64\",\"shape\":[0,3],\"data_offsets\":[0,0]},"
        "\"z0\":{\"dtype\":\"BOOL\",\"shape\":[0],\"data_offsets\":[0,0]}}";
    CHECK_EQ_U64(parse_bytes(h, strlen(h), 8, &f), ST_OK);
    CHECK_EQ_U64(f.tensor_count, 4);
    /* file order: begin, then end, then name */
    CHECK_STR(f.tensors[0].name, "z0");
    CHECK_STR(f.tensors[1].name, "z1");
    CHECK_STR(f.tensors[2].name, "a");
    CHECK_STR(f.tensors[3].name, "z2");
    CHECK_EQ_U64(f.data_size, 8);
    st_file_free(&f);
    /* only zero-size tensors: no data at all */
    EXPECT("{\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}", 0, ST_OK);
    /* trailing and missing bytes against the file size */
    h = "{\"a\":" T16 "}";
    data_start = 8 + strlen(h);
    EXPECT_AT(h, 17, ST_DATA_TRAILING, data_start + 16);
    EXPECT_AT(h, 15, ST_DATA_TRUNCATED, data_start + 15);
    EXPECT_AT("{}", 1, ST_DATA_TRAILING, 10);
    /* a data section far beyond the file (the largest byte size st_dtype_bytes allows) */
    EXPECT("{\"a\":{\"dtype\":\"U8\",\"shape\":[2305843009213693951],\"data_offsets\":[0,"
           "2305843009213693951]}}",
           0, ST_DATA_TRUNCATED);

    /* unknown file size: the caller checks data_start + data_size itself */
    size_t len;
    uint8_t *buf = make_file(h, strlen(h), 0, &len);
    st_error e;
    CHECK_EQ_U64(st_header_parse(buf, len, ST_FILE_SIZE_UNKNOWN, NULL, &f, &e), ST_OK);
    CHECK_EQ_U64(f.data_size, 16);
    CHECK_EQ_U64(f.file_size, ST_FILE_SIZE_UNKNOWN);
    CHECK_EQ_U64(f.data_start + f.data_size, len + 16);
    st_file_free(&f);
    free(buf);
}

/* -------------------------------------------------------- happy paths */

TEST(all_dtypes)
{
    char h[8192];
    size_t n = (size_t)snprintf(h, sizeof h, "{");
    uint64_t offset = 0;
    for (unsigned d = 0; d < ST_DTYPE_COUNT; d++) {
        /* 8 elements: a whole number of bytes for every width */
        uint64_t bytes = 8 * (uint64_t)st_dtype_bits((st_dtype)d) / 8;
        n += (size_t)snprintf(
            h + n, sizeof h - n,
            "%s\"t_%s\":{\"dtype\":\"%s\",\"shape\":[2,4],\"data_offsets\":[%llu,%llu]}",
            d ? "," : "", st_dtype_name((st_dtype)d), st_dtype_name((st_dtype)d),
            (unsigned long long)offset, (unsigned long long)(offset + bytes));
        offset += bytes;
    }
    snprintf(h + n, sizeof h - n, "}");
    st_file f;
    CHECK_EQ_U64(parse_bytes(h, strlen(h), offset, &f), ST_OK);
    CHECK_EQ_U64(f.tensor_count, ST_DTYPE_COUNT);
    CHECK_EQ_U64(f.data_size, offset);
    for (unsigned d = 0; d < ST_DTYPE_COUNT; d++) {
        char name[32];
        snprintf(name, sizeof name, "t_%s", st_dtype_name((st_dtype)d));
        const st_tensor *t = st_file_find(&f, name, strlen(name));
        CHECK(t != NULL);
        if (t != NULL) {
            CHECK_EQ_U64(t->dtype, d);
            CHECK_EQ_U64(t->rank, 2);
            CHECK_EQ_U64(t->elements, 8);
            CHECK_EQ_U64(t->end - t->begin, st_dtype_bits((st_dtype)d));
        }
        /* in file order, tensor d is at index d */
        CHECK_EQ_U64(f.tensors[d].dtype, d);
    }
    st_file_free(&f);
}

TEST(scalars_and_unicode)
{
    st_file f;
    const char *h = "{\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]}}";
    CHECK_EQ_U64(parse_bytes(h, strlen(h), 8, &f), ST_OK);
    CHECK_EQ_U64(f.tensors[0].rank, 0);
    CHECK_EQ_U64(f.tensors[0].elements, 1);
    st_file_free(&f);

    /* names through escapes, raw UTF-8 and a surrogate pair */
    h = "{\"caf\\u00e9\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
        "\"\xe6\x97\xa5\xe6\x9c\xac\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]},"
        "\"smile\\uD83D\\uDE00\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]},"
        "\"q\\\"\\\\\\/\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[3,4]}}";
    CHECK_EQ_U64(parse_bytes(h, strlen(h), 4, &f), ST_OK);
    CHECK_EQ_U64(f.tensor_count, 4);
    CHECK_STR(f.tensors[0].name, "caf\xc3\xa9");
    CHECK_EQ_U64(f.tensors[0].name_len, 5);
    CHECK_STR(f.tensors[1].name, "\xe6\x97\xa5\xe6\x9c\xac");
    CHECK_STR(f.tensors[2].name, "smile\xf0\x9f\x98\x80");
    CHECK_STR(f.tensors[3].name, "q\"\\/");
    CHECK(st_file_find(&f, "caf\xc3\xa9", 5) == &f.tensors[0]);
    CHECK(st_file_find(&f, "smile\xf0\x9f\x98\x80", 9) == &f.tensors[2]);
    CHECK(st_file_find(&f, "q\"\\/", 4) == &f.tensors[3]);
    CHECK(st_file_find(&f, "cafe", 4) == NULL);
    st_file_free(&f);
    st_file_free(&f); /* twice is fine: the first call zeroes it */
    st_file zero;
    memset(&zero, 0, sizeof zero);
    st_file_free(&zero);
    CHECK(st_file_find(&zero, "a", 1) == NULL);
    CHECK(st_file_metadata(&zero, "a") == NULL);
}

TEST(find_and_order)
{
    st_file f;
    const char *h = "{\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]},"
                    "\"ab\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[4,5]},"
                    "\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}";
    CHECK_EQ_U64(parse_bytes(h, strlen(h), 5, &f), ST_OK);
    CHECK_STR(f.tensors[0].name, "a");
    CHECK_STR(f.tensors[1].name, "b");
    CHECK_STR(f.tensors[2].name, "ab");
    CHECK(st_file_find(&f, "a", 1) == &f.tensors[0]);
    CHECK(st_file_find(&f, "ab", 2) == &f.tensors[2]);
    CHECK(st_file_find(&f, "b", 1) == &f.tensors[1]);
    /* exact length: a prefix is not a match */
    CHECK(st_file_find(&f, "abc", 2) == &f.tensors[2]);
    CHECK(st_file_find(&f, "abc", 3) == NULL);
    CHECK(st_file_find(&f, "", 0) == NULL);
    CHECK_EQ_U64(f.tensors[1].shape[0], 2);
    CHECK_EQ_U64(f.tensors[1].begin, 2);
    CHECK_EQ_U64(f.tensors[1].end, 4);
    st_file_free(&f);
}

/* Failure leaves the output empty and safe to free. */
TEST(errors_leave_output_empty)
{
    st_file f;
    memset(&f, 0xab, sizeof f);
    const char *h = "{\"a\":" T16 ",\"b\":5}";
    CHECK_EQ_U64(parse_bytes(h, strlen(h), 16, &f), ST_TENSOR_NOT_OBJECT);
    CHECK(f.tensors == NULL && f.internal == NULL && f.tensor_count == 0);
    st_file_free(&f);
    /* a NULL error pointer is allowed */
    size_t len;
    uint8_t *buf = make_file(h, strlen(h), 16, &len);
    CHECK_EQ_U64(st_header_parse(buf, len, len, NULL, &f, NULL), ST_TENSOR_NOT_OBJECT);
    free(buf);
}

TEST(rule_order)
{
    /* grammar (later in the document) before semantics (earlier) */
    EXPECT("{\"a\":5,\"b\":[1 2]}", 0, ST_JSON_SYNTAX);
    EXPECT("{\"a\":5,\"b\":-1}", 0, ST_INTEGER_FORMAT);
    /* trailing bytes before semantics */
    EXPECT("{\"a\":5}x", 0, ST_HEADER_TRAILING_BYTES);
    /* semantics in document order */
    EXPECT("{\"a\":{\"dtype\":\"X\",\"shape\":[1],\"data_offsets\":[0,1]},\"b\":5}", 1,
           ST_DTYPE_UNKNOWN);
    EXPECT("{\"b\":5,\"a\":{\"dtype\":\"X\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
           ST_TENSOR_NOT_OBJECT);
    /* sizes before coverage */
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,12]}}", 12,
           ST_SIZE_MISMATCH);
    /* coverage before the file size */
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 100, ST_DATA_HOLE);
}

/* --------------------------------------------- reference test vectors */

/* Byte-literal headers from the reference implementation's own tests:
 * huggingface/safetensors safetensors/src/tensor.rs (mod tests) and
 * bindings/python/tests/test_simple.py. Each is the whole serialized file. */
static st_reason parse_whole(const char *bytes, size_t len)
{
    st_file f;
    st_reason r = st_header_parse((const uint8_t *)bytes, len, len, NULL, &f, &last_err);
    st_file_free(&f);
    return r;
}
#define WHOLE(literal) parse_whole(literal, sizeof(literal) - 1)

TEST(reference_vectors)
{
    /* test_deserialization, test_lifetimes (tensor.rs); test_deserialization (test_simple.py) */
    CHECK_EQ_U64(WHOLE("<\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],"
                       "\"data_offsets\":[0,16]}}"
                       "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
                 ST_OK);
    /* test_empty_shapes_allowed */
    CHECK_EQ_U64(WHOLE("8\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[],"
                       "\"data_offsets\":[0,4]}}\x00\x00\x00\x00"),
                 ST_OK);
    /* test_zero_sized_tensor */
    CHECK_EQ_U64(WHOLE("<\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[2,0],"
                       "\"data_offsets\":[0, 0]}}"),
                 ST_OK);
    /* test_header_too_small: empty input */
    CHECK_EQ_U64(parse_whole("", 0), ST_FILE_TOO_SMALL);
    /* test_invalid_header_length: N = 60 with nothing after the length */
    CHECK_EQ_U64(WHOLE("<\x00\x00\x00\x00\x00\x00\x00"), ST_HEADER_TRUNCATED);
    /* test_invalid_header_non_utf8 */
    CHECK_EQ_U64(WHOLE("\x01\x00\x00\x00\x00\x00\x00\x00\xff"), ST_HEADER_NOT_UTF8);
    /* test_invalid_header_not_json */
    CHECK_EQ_U64(WHOLE("\x01\x00\x00\x00\x00\x00\x00\x00{"), ST_JSON_SYNTAX);
    /* test_whitespace_padded_header: the reference accepts JSON whitespace after
     * the '}', the strict grammar allows only spaces */
    CHECK_EQ_U64(WHOLE("\x06\x00\x00\x00\x00\x00\x00\x00{}\x0D\x20\x09\x0A"),
                 ST_HEADER_TRAILING_BYTES);
    CHECK_EQ_U64(last_err.offset, 10);
    /* the commented-out test_whitespace_start_padded_header_is_not_allowed */
    CHECK_EQ_U64(WHOLE("\x06\x00\x00\x00\x00\x00\x00\x00\x09\x0A{}\x0D\x20"), ST_HEADER_START);
    /* test_invalid_info: 4 bytes for a [2,2] I32 */
    CHECK_EQ_U64(WHOLE("<\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],"
                       "\"data_offsets\":[0, 4]}}"),
                 ST_SIZE_MISMATCH);
    /* test_validation_overflow: shape product, then product times dtype size */
    CHECK_EQ_U64(WHOLE("O\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[2,"
                       "18446744073709551614],\"data_offsets\":[0,16]}}"
                       "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
                 ST_SIZE_OVERFLOW);
    CHECK_EQ_U64(WHOLE("N\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[2,"
                       "9223372036854775807],\"data_offsets\":[0,16]}}"
                       "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
                 ST_SIZE_OVERFLOW);
    /* test_metadata_incomplete_buffer: polyglot trailing data, then 2 bytes missing */
    CHECK_EQ_U64(WHOLE("<\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],"
                       "\"data_offsets\":[0,16]}}"
                       "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
                       "extra_bogus_data_for_polyglot_file"),
                 ST_DATA_TRAILING);
    CHECK_EQ_U64(last_err.offset, 8 + 60 + 16);
    CHECK_EQ_U64(WHOLE("<\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],"
                       "\"data_offsets\":[0,16]}}"
                       "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
                 ST_DATA_TRUNCATED);
    /* test_header_too_large */
    CHECK_EQ_U64(WHOLE("<\x00\x00\x00\x00\xff\xff\xff{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],"
                       "\"data_offsets\":[0,16]}}"
                       "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
                 ST_HEADER_TOO_LARGE);
    /* test_serialization: the writer's exact bytes for attn.0 F32 [1,2,3] */
    CHECK_EQ_U64(
        WHOLE("@\x00\x00\x00\x00\x00\x00\x00{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],"
              "\"data_offsets\":[0,24]}}"
              "\x00\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40"
              "\x00\x00\x80\x40\x00\x00\xa0\x40"),
        ST_OK);
    /* test_serialization_forced_alignement: header padded with spaces to 72 */
    CHECK_EQ_U64(
        WHOLE("H\x00\x00\x00\x00\x00\x00\x00{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],"
              "\"data_offsets\":[0,24]}}       "
              "\x00\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40"
              "\x00\x00\x80\x40\x00\x00\xa0\x40"),
        ST_OK);
    /* test_empty: no tensors, and metadata only */
    CHECK_EQ_U64(WHOLE("\x08\x00\x00\x00\x00\x00\x00\x00{}      "), ST_OK);
    CHECK_EQ_U64(
        WHOLE("(\x00\x00\x00\x00\x00\x00\x00{\"__metadata__\":{\"framework\":\"pt\"}}     "),
        ST_OK);
    /* test_json_attack: ten tensors all at [0, 16] */
    char h[2048];
    size_t n = (size_t)snprintf(h, sizeof h, "{");
    for (int i = 0; i < 10; i++)
        n += (size_t)snprintf(
            h + n, sizeof h - n,
            "%s\"weight_%d\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}",
            i ? "," : "", i);
    snprintf(h + n, sizeof h - n, "}");
    EXPECT(h, 16, ST_DATA_OVERLAP);
}

/* The leniencies of the reference (REFERENCES.md), each refused with its code. */
TEST(reference_leniencies_refused)
{
    EXPECT("{\"a\":" T16 ",\"a\":" T16 "}", 16, ST_JSON_DUPLICATE_KEY);
    EXPECT(" {\"a\":" T16 "}", 16, ST_HEADER_START);
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16],\"x\":\"y\"}}", 16,
           ST_TENSOR_UNKNOWN_FIELD);
    EXPECT("{\"a\":[\"F32\",[2,2],[0,16]]}", 16, ST_TENSOR_NOT_OBJECT);
    EXPECT("{\"a\":{\"dtype\":{\"F32\":null},\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16,
           ST_DTYPE_INVALID);
    EXPECT("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"},\"a\":" T16 "}", 16, ST_JSON_DUPLICATE_KEY);
}

/* Trail of Bits audit findings (REFERENCES.md). */
TEST(trail_of_bits)
{
    /* 1: trailing data makes polyglots: a ZIP end-of-central-directory appended */
    const char *h = "{\"a\":" T16 "}";
    size_t len;
    uint8_t *buf = make_file(h, strlen(h), 16 + 22, &len);
    memcpy(buf + len - 22, "PK\x05\x06", 4);
    st_file f;
    st_error e;
    CHECK_EQ_U64(st_header_parse(buf, len, len, NULL, &f, &e), ST_DATA_TRAILING);
    CHECK_EQ_U64(e.offset, 8 + strlen(h) + 16);
    free(buf);
    /* 1: a short data section */
    EXPECT(h, 8, ST_DATA_TRUNCATED);
    /* 2: overflow of shape x dtype */
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}", 0,
           ST_SIZE_OVERFLOW);
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2147483648,2147483648,2],\"data_offsets\":[0,0]}}",
           0, ST_SIZE_OVERFLOW);
    /* 3: zero-size tensors stay valid */
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[0,1024],\"data_offsets\":[0,0]}}", 0, ST_OK);
    /* 7: duplicate keys, unicode escapes, big numbers */
    EXPECT("{\"a\":" T16 ",\"\\u0061\":" T16 "}", 16, ST_JSON_DUPLICATE_KEY);
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16.0]}}", 16,
           ST_INTEGER_FORMAT);
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,1.6e1]}}", 16,
           ST_INTEGER_FORMAT);
    EXPECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,18446744073709551632]}}",
           16, ST_INTEGER_OVERFLOW);
}

/* ----------------------------------------------------------- scale */

TEST(hundred_thousand_tensors)
{
    size_t cap = 16u << 20;
    char *h = malloc(cap);
    size_t n = 0;
    uint64_t offset = 0;
    h[n++] = '{';
    n += (size_t)snprintf(h + n, cap - n, "\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < 100000; i++) {
        n += (size_t)snprintf(
            h + n, cap - n,
            ",\"model.layers.%d.mlp.up_proj.weight\":{\"dtype\":\"BF16\",\"shape\":[%d,3],"
            "\"data_offsets\":[%llu,%llu]}",
            i, i % 7 + 1, (unsigned long long)offset,
            (unsigned long long)(offset + (uint64_t)(i % 7 + 1) * 3 * 2));
        offset += (uint64_t)(i % 7 + 1) * 3 * 2;
    }
    h[n++] = '}';
    h[n] = '\0';
    st_file f;
    CHECK_EQ_U64(parse_bytes(h, n, offset, &f), ST_OK);
    /* the check-only parse gave the header back once after the UTF-8 pass, then a
     * step at a time behind the JSON pass */
    CHECK(last_release_calls >= 1 + n / ST_HEADER_RELEASE_STEP - 1);
    CHECK_EQ_U64(f.tensor_count, 100000);
    CHECK_EQ_U64(f.data_size, offset);
    int found = 0;
    for (int i = 0; i < 100000; i += 997) {
        char name[64];
        int len = snprintf(name, sizeof name, "model.layers.%d.mlp.up_proj.weight", i);
        const st_tensor *t = st_file_find(&f, name, (size_t)len);
        found += t != NULL && t->shape[0] == (uint64_t)(i % 7 + 1) && t->dtype == ST_BF16;
    }
    CHECK_EQ_U64(found, (100000 + 996) / 997);
    /* contiguous in file order */
    uint64_t expected = 0;
    int contiguous = 1;
    for (size_t i = 0; i < f.tensor_count; i++) {
        contiguous &= f.tensors[i].begin == expected;
        expected = f.tensors[i].end;
    }
    CHECK(contiguous);
    CHECK_STR(st_file_metadata(&f, "format"), "pt");
    st_file_free(&f);
    /* the same header with the last tensor renamed to the first's name */
    char *last = strstr(h + n - 120, "\"model.layers.99999.");
    CHECK(last != NULL);
    if (last != NULL) {
        /* "99999" is 4 bytes longer than "0": close the gap */
        memcpy(last, "\"model.layers.0.mlp.up_proj.weight\"", 35);
        memmove(last + 35, last + 39, strlen(last + 39) + 1);
        n -= 4;
        CHECK_STR(st_reason_name(parse_bytes(h, n, offset, NULL)), "json_duplicate_key");
        CHECK_STR(last_err.tensor, "model.layers.0.mlp.up_proj.weight");
    }
    free(h);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(framing);
    RUN(utf8);
    RUN(start_and_trailing);
    RUN(json_syntax);
    RUN(json_escape);
    RUN(duplicate_keys);
    RUN(nesting);
    RUN(integers);
    RUN(tensor_entries);
    RUN(tensor_names);
    RUN(metadata);
    RUN(sizes);
    RUN(coverage);
    RUN(all_dtypes);
    RUN(scalars_and_unicode);
    RUN(find_and_order);
    RUN(errors_leave_output_empty);
    RUN(rule_order);
    RUN(reference_vectors);
    RUN(reference_leniencies_refused);
    RUN(trail_of_bits);
    RUN(hundred_thousand_tensors);
    return test_report(argv[0]);
}
