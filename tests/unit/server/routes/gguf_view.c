/* server/routes/gguf_view.c: a GGUF file written here byte by byte (the specification's
 * layout), parsed by the gate's validator, rendered as JSON: every value type, the
 * bounds (a long string cut at a character boundary, a long array cut to its first
 * elements, long array strings cut), u64 above INT64_MAX as text, NaN as text, the
 * row-major shape (ne[] reversed), absolute offsets, the parameter count and the Hub
 * summary (context_length present or not). */
#include "gguf_view.h"

#include <stdlib.h>

#include "test.h"

typedef struct out {
    unsigned char buf[1 << 18];
    size_t len;
} out;

static void put(out *o, const void *p, size_t n)
{
    memcpy(o->buf + o->len, p, n);
    o->len += n;
}
static void u32(out *o, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        o->buf[o->len++] = (unsigned char)(v >> (8 * i));
}
static void u64(out *o, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        o->buf[o->len++] = (unsigned char)(v >> (8 * i));
}
static void str(out *o, const char *s, size_t n)
{
    u64(o, n);
    put(o, s, n);
}
static void key(out *o, const char *k, uint32_t type)
{
    str(o, k, strlen(k));
    u32(o, type);
}

/* A file with 9 key-values and two tensors (F32 ne [3, 2], Q8_0 ne [32, 2]). */
static size_t build(out *o, bool with_context)
{
    static char long_text[TG_GGUF_STRING_SHOWN + 8];
    memset(long_text, 'x', sizeof long_text);
    long_text[TG_GGUF_STRING_SHOWN - 1] = (char)0xc3; /* "é" straddles the cut */
    long_text[TG_GGUF_STRING_SHOWN] = (char)0xa9;
    o->len = 0;
    put(o, "GGUF", 4);
    u32(o, 3);
    u64(o, 2);
    u64(o, with_context ? 9 : 8);
    key(o, "general.architecture", ST_GGUF_V_STRING);
    str(o, "llama", 5);
    if (with_context) {
        key(o, "llama.context_length", ST_GGUF_V_U32);
        u32(o, 2048);
    }
    key(o, "general.big", ST_GGUF_V_U64);
    u64(o, UINT64_MAX);
    key(o, "general.neg", ST_GGUF_V_I16);
    o->buf[o->len++] = 0xfe; /* -2 */
    o->buf[o->len++] = 0xff;
    key(o, "general.nan", ST_GGUF_V_F32);
    u32(o, 0x7fc00000u);
    key(o, "general.flag", ST_GGUF_V_BOOL);
    o->buf[o->len++] = 1;
    key(o, "general.readme", ST_GGUF_V_STRING);
    str(o, long_text, sizeof long_text);
    key(o, "tokenizer.ggml.tokens", ST_GGUF_V_ARRAY);
    u32(o, ST_GGUF_V_STRING);
    u64(o, 10);
    for (int i = 0; i < 10; i++) {
        char t[400];
        memset(t, 'a' + i, sizeof t);
        str(o, t, i == 0 ? sizeof t : 1);
    }
    key(o, "general.i8s", ST_GGUF_V_ARRAY);
    u32(o, ST_GGUF_V_I8);
    u64(o, 2);
    o->buf[o->len++] = 0x80; /* -128 */
    o->buf[o->len++] = 0x7f;
    /* tensors */
    str(o, "w", 1);
    u32(o, 2);
    u64(o, 3);
    u64(o, 2);
    u32(o, 0); /* F32: 24 bytes */
    u64(o, 0);
    str(o, "q", 1);
    u32(o, 2);
    u64(o, 32);
    u64(o, 2);
    u32(o, 8); /* Q8_0: 2 blocks of 34 bytes */
    u64(o, 32);
    size_t data = (o->len + 31) / 32 * 32;
    memset(o->buf + o->len, 0, data + 32 + 68 - o->len);
    o->len = data + 32 + 68;
    return data;
}

static json_t *key_of(json_t *h, const char *k)
{
    return json_object_get(json_object_get(h, "metadata"), k);
}

TEST(header_answer)
{
    static out o;
    size_t data = build(&o, true);
    st_gguf_file f;
    st_error err;
    CHECK(st_gguf_parse_header(o.buf, o.len, o.len, 1 << 20, &f, NULL, &err) == ST_OK);
    CHECK_EQ_U64(f.data_start, data);
    json_t *h = tg_gguf_header_json("m.gguf", "ab", o.len, &f);
    CHECK(h != NULL);
    CHECK_STR(json_string_value(json_object_get(h, "format")), "gguf");
    CHECK(json_integer_value(json_object_get(h, "version")) == 3);
    CHECK(json_integer_value(json_object_get(h, "alignment")) == 32);
    CHECK(json_integer_value(json_object_get(h, "data_start")) == (json_int_t)data);
    CHECK(json_integer_value(json_object_get(h, "metadata_count")) == 9);
    CHECK_STR(json_string_value(json_object_get(key_of(h, "general.big"), "value")),
              "18446744073709551615");
    CHECK(json_integer_value(json_object_get(key_of(h, "general.neg"), "value")) == -2);
    CHECK_STR(json_string_value(json_object_get(key_of(h, "general.nan"), "value")), "NaN");
    CHECK(json_is_true(json_object_get(key_of(h, "general.flag"), "value")));
    CHECK_STR(json_string_value(json_object_get(key_of(h, "general.flag"), "type")), "bool");
    json_t *readme = key_of(h, "general.readme");
    CHECK(json_string_length(json_object_get(readme, "value")) == TG_GGUF_STRING_SHOWN - 1);
    CHECK(json_is_true(json_object_get(readme, "truncated")));
    CHECK(json_integer_value(json_object_get(readme, "length")) == TG_GGUF_STRING_SHOWN + 8);
    json_t *tokens = key_of(h, "tokenizer.ggml.tokens");
    CHECK_STR(json_string_value(json_object_get(tokens, "element_type")), "string");
    CHECK(json_integer_value(json_object_get(tokens, "length")) == 10);
    CHECK(json_array_size(json_object_get(tokens, "value")) == TG_GGUF_ARRAY_SHOWN);
    CHECK(json_string_length(json_array_get(json_object_get(tokens, "value"), 0)) ==
          TG_GGUF_ELEMENT_SHOWN);
    CHECK_STR(json_string_value(json_array_get(json_object_get(tokens, "value"), 7)), "h");
    CHECK(json_is_true(json_object_get(tokens, "truncated")));
    json_t *i8s = key_of(h, "general.i8s");
    CHECK(json_integer_value(json_array_get(json_object_get(i8s, "value"), 0)) == -128);
    CHECK(json_object_get(i8s, "truncated") == NULL);
    json_t *w = json_array_get(json_object_get(h, "tensors"), 0);
    CHECK_STR(json_string_value(json_object_get(w, "dtype")), "F32");
    CHECK(json_integer_value(json_array_get(json_object_get(w, "shape"), 0)) == 2); /* reversed */
    CHECK(json_integer_value(json_array_get(json_object_get(w, "shape"), 1)) == 3);
    CHECK(json_integer_value(json_object_get(w, "offset")) == (json_int_t)data);
    CHECK(json_integer_value(json_object_get(w, "size")) == 24);
    json_t *q = json_array_get(json_object_get(h, "tensors"), 1);
    CHECK_STR(json_string_value(json_object_get(q, "dtype")), "Q8_0");
    CHECK(json_integer_value(json_object_get(q, "offset")) == (json_int_t)data + 32);
    CHECK(json_integer_value(json_object_get(q, "size")) == 68);
    CHECK(json_integer_value(json_object_get(h, "parameters_total")) == 70);
    CHECK(json_integer_value(json_object_get(json_object_get(h, "parameters"), "Q8_0")) == 64);
    json_decref(h);
    json_t *hub = tg_gguf_hub_json(&f);
    CHECK(json_integer_value(json_object_get(hub, "total")) == 70);
    CHECK_STR(json_string_value(json_object_get(hub, "architecture")), "llama");
    CHECK(json_integer_value(json_object_get(hub, "context_length")) == 2048);
    json_decref(hub);
    st_gguf_file_free(&f);
}

TEST(hub_without_context_length)
{
    static out o;
    build(&o, false);
    st_gguf_file f;
    st_error err;
    CHECK(st_gguf_parse_header(o.buf, o.len, o.len, 1 << 20, &f, NULL, &err) == ST_OK);
    json_t *hub = tg_gguf_hub_json(&f);
    CHECK(json_object_get(hub, "context_length") == NULL);
    CHECK(json_object_size(hub) == 2);
    json_decref(hub);
    st_dtype d;
    CHECK(st_gguf_plain_dtype(f.tensors[0].type, &d) && d == ST_F32);
    CHECK(!st_gguf_plain_dtype(f.tensors[1].type, &d));
    CHECK(st_gguf_find_tensor(&f, "q", 1) == &f.tensors[1]);
    CHECK(st_gguf_find_tensor(&f, "x", 1) == NULL);
    st_gguf_file_free(&f);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(header_answer);
    RUN(hub_without_context_length);
    return test_report(argv[0]);
}
