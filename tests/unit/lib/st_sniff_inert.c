/* lib/sniff/png.c, jpeg.c, gif.c, webp.c, sentencepiece.c and the gate's handling of
 * them: the inert formats a mirrored Hub repository holds beside its weights. A
 * minimal valid file of each is admitted (st_sniff_inert_valid, and the gate gives
 * the format as the sidecar's), every proper prefix and every single-byte change
 * that breaks the structure is refused without reading past the buffer (each buffer
 * is its own allocation, so ASan sees any overread), and pickles, zips and files
 * with a zip appended stay refused. */
#include "sniff.h"
#include "sniff_formats.h"
#include "st_gate.h"

#include <stdlib.h>

#include "../test.h"

typedef struct sample {
    uint8_t bytes[512];
    size_t len;
} sample;

static void put(sample *s, const void *data, size_t len)
{
    memcpy(s->bytes + s->len, data, len);
    s->len += len;
}

static void put_byte(sample *s, uint8_t b)
{
    s->bytes[s->len++] = b;
}

static void put_be32(sample *s, uint32_t v)
{
    const uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    put(s, b, 4);
}

static void put_le32(sample *s, uint32_t v)
{
    const uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(s, b, 4);
}

static void png_chunk(sample *s, const char *type, const uint8_t *data, uint32_t len)
{
    put_be32(s, len);
    size_t start = s->len;
    put(s, type, 4);
    if (len)
        put(s, data, len);
    put_be32(s, st_sniff_crc32(s->bytes + start, len + 4));
}

static sample make_png(void)
{
    sample s = {.len = 0};
    put(&s, "\x89PNG\r\n\x1a\n", 8);
    const uint8_t ihdr[13] = {0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0}; /* 1x1 grey 8 bit */
    png_chunk(&s, "IHDR", ihdr, 13);
    png_chunk(&s, "tEXt", (const uint8_t *)"k\0v", 3);
    const uint8_t idat[] = {0x78, 0x9c, 0x63, 0x60, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01};
    png_chunk(&s, "IDAT", idat, sizeof idat);
    png_chunk(&s, "IEND", NULL, 0);
    return s;
}

static sample make_jpeg(void)
{
    sample s = {.len = 0};
    put(&s, "\xff\xd8", 2);
    put(&s, "\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00", 18);
    put(&s, "\xff\xc0\x00\x0b\x08\x00\x01\x00\x01\x01\x01\x11\x00", 13);
    put(&s,
        "\xff\xc4\x00\x14\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
        "\x00\x00",
        22);
    put(&s, "\xff\xda\x00\x08\x01\x01\x00\x00\x3f\x00", 10);
    put(&s, "\x12\xff\x00\x34\xff\xd0\x56", 7); /* stuffed 0xFF and a restart marker */
    put(&s, "\xff\xd9", 2);
    return s;
}

static sample make_gif(void)
{
    sample s = {.len = 0};
    put(&s, "GIF89a\x01\x00\x01\x00\x80\x00\x00", 13); /* global table of 2 colours */
    put(&s, "\x00\x00\x00\xff\xff\xff", 6);
    put(&s, "\x21\xf9\x04\x00\x00\x00\x00\x00", 8); /* graphic control extension */
    put(&s, "\x2c\x00\x00\x00\x00\x01\x00\x01\x00\x00", 10);
    put(&s, "\x02\x02\x44\x01\x00", 5); /* LZW code size 2, one sub-block */
    put_byte(&s, 0x3b);
    return s;
}

static sample make_webp(void)
{
    sample s = {.len = 0};
    put(&s, "RIFF", 4);
    put_le32(&s, 4 + 8 + 6);
    put(&s, "WEBPVP8L", 8);
    put_le32(&s, 5);
    put(&s, "\x2f\x00\x00\x00\x00\x00", 6); /* 5 bytes and the padding byte */
    return s;
}

static sample make_sentencepiece(void)
{
    sample s = {.len = 0};
    /* pieces: "<unk>" score 0 type 2, then "a" score -1.5 type 1 */
    put(&s, "\x0a\x0e\x0a\x05<unk>\x15\x00\x00\x00\x00\x18\x02", 16);
    put(&s,
        "\x0a\x0a\x0a\x01"
        "a\x15\x00\x00\xc0\xbf\x18\x01",
        12);
    put(&s, "\x12\x04\x08\x01\x10\x02", 6); /* trainer_spec {1: 1, 2: 2} */
    put(&s, "\x1a\x02\x0a\x00", 4);         /* normalizer_spec {name: ""} */
    return s;
}

typedef struct kind {
    const char *name;
    st_format format;
    sample (*make)(void);
} kind;

static const kind kinds[] = {
    {"png", ST_FORMAT_PNG, make_png},
    {"jpeg", ST_FORMAT_JPEG, make_jpeg},
    {"gif", ST_FORMAT_GIF, make_gif},
    {"webp", ST_FORMAT_WEBP, make_webp},
    {"sentencepiece", ST_FORMAT_SENTENCEPIECE, make_sentencepiece},
};
#define KIND_COUNT (sizeof kinds / sizeof kinds[0])

/* The validator on an exact-size heap copy (an overread is an ASan error). */
static bool valid_copy(st_format format, const uint8_t *bytes, size_t len)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (copy == NULL)
        return false;
    if (len)
        memcpy(copy, bytes, len);
    st_sniff_info info;
    bool ok = st_sniff_inert_valid(format, copy, len, &info);
    free(copy);
    return ok;
}

static st_verdict gate_verdict(st_gate_kind gate_kind, const uint8_t *bytes, size_t len)
{
    st_gate_config config;
    memset(&config, 0, sizeof config);
    config.kind = gate_kind;
    st_verdict verdict;
    st_gate_check_buffer(&config, bytes, len, &verdict);
    return verdict;
}

TEST(crc32_vector)
{
    CHECK(st_sniff_crc32((const uint8_t *)"123456789", 9) == 0xcbf43926u);
    CHECK(st_sniff_crc32((const uint8_t *)"", 0) == 0);
}

TEST(valid_samples_pass)
{
    for (size_t k = 0; k < KIND_COUNT; k++) {
        sample s = kinds[k].make();
        test_current = kinds[k].name;
        CHECK(st_sniff_inert(s.bytes, s.len) == kinds[k].format);
        CHECK(valid_copy(kinds[k].format, s.bytes, s.len));
        CHECK_STR(st_format_name(kinds[k].format), kinds[k].name);
        /* no other validator takes it */
        for (size_t o = 0; o < KIND_COUNT; o++)
            if (o != k)
                CHECK(!valid_copy(kinds[o].format, s.bytes, s.len));
        /* the gate admits it as a sidecar, whole or fed byte by byte */
        st_verdict v = gate_verdict(ST_GATE_SIDECAR, s.bytes, s.len);
        CHECK(v.valid && v.format == kinds[k].format);
        st_gate_config config;
        memset(&config, 0, sizeof config);
        config.kind = ST_GATE_SIDECAR;
        st_gate *gate = st_gate_new(&config, s.len);
        CHECK(gate != NULL);
        if (gate != NULL) {
            for (size_t i = 0; i < s.len; i++)
                st_gate_feed(gate, s.bytes + i, 1);
            CHECK(st_gate_finish(gate) == ST_GATE_ACCEPTED);
            st_verdict fed;
            st_gate_verdict(gate, &fed);
            CHECK(fed.valid && fed.format == kinds[k].format);
            st_gate_free(gate);
        }
        /* never as a .json file nor as weights */
        CHECK(!gate_verdict(ST_GATE_SIDECAR_JSON, s.bytes, s.len).valid);
        CHECK(!gate_verdict(ST_GATE_SAFETENSORS, s.bytes, s.len).valid);
    }
}

TEST(every_prefix_refused)
{
    for (size_t k = 0; k < KIND_COUNT; k++) {
        sample s = kinds[k].make();
        test_current = kinds[k].name;
        bool all_refused = true;
        for (size_t len = 0; len < s.len; len++) {
            /* protobuf has no end marker: a SentencePiece model cut between its
             * top-level fields (after a piece, after trainer_spec) is a smaller model */
            bool boundary =
                kinds[k].format == ST_FORMAT_SENTENCEPIECE && (len == 16 || len == 28 || len == 34);
            if (valid_copy(kinds[k].format, s.bytes, len) != boundary)
                all_refused = false;
        }
        CHECK(all_refused);
        st_verdict v = gate_verdict(ST_GATE_SIDECAR, s.bytes, s.len - 1);
        CHECK(!v.valid);
        CHECK_STR(st_reason_name(v.error.reason), "sidecar_text_invalid");
    }
}

/* Every byte changed to every value: the validators never crash or overread; the
 * changes that keep a valid file are few (payload bytes), never the framing. */
TEST(mutations_are_bounded)
{
    for (size_t k = 0; k < KIND_COUNT; k++) {
        sample s = kinds[k].make();
        test_current = kinds[k].name;
        size_t accepted = 0, tried = 0;
        for (size_t i = 0; i < s.len; i++) {
            uint8_t original = s.bytes[i];
            for (unsigned v = 0; v < 256; v += 7) {
                s.bytes[i] = (uint8_t)v;
                accepted += valid_copy(kinds[k].format, s.bytes, s.len) ? 1 : 0;
                tried++;
            }
            s.bytes[i] = original;
        }
        CHECK(tried > 0 && accepted < tried);
    }
}

TEST(png_structure)
{
    sample s = make_png();
    s.bytes[s.len - 5] ^= 1; /* the IEND CRC */
    CHECK(!valid_copy(ST_FORMAT_PNG, s.bytes, s.len));
    s = make_png();
    s.bytes[8 + 8 + 9] = 5; /* IHDR colour type 5 does not exist */
    CHECK(!valid_copy(ST_FORMAT_PNG, s.bytes, s.len));
    /* a PNG with a zip behind it */
    s = make_png();
    put(&s, "PK\x05\x06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
        22);
    CHECK(!valid_copy(ST_FORMAT_PNG, s.bytes, s.len));
    st_verdict v = gate_verdict(ST_GATE_SIDECAR, s.bytes, s.len);
    CHECK(!v.valid);
    /* an unknown critical chunk */
    s = (sample){.len = 0};
    put(&s, "\x89PNG\r\n\x1a\n", 8);
    const uint8_t ihdr[13] = {0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0};
    png_chunk(&s, "IHDR", ihdr, 13);
    png_chunk(&s, "ZZZZ", ihdr, 1);
    png_chunk(&s, "IDAT", ihdr, 2);
    png_chunk(&s, "IEND", NULL, 0);
    CHECK(!valid_copy(ST_FORMAT_PNG, s.bytes, s.len));
}

TEST(others_stay_refused)
{
    /* a pickle, a zip, a PyTorch-style zip name, and an ONNX-like protobuf are not inert */
    static const uint8_t pickle[] = {0x80, 0x04, 0x95, 0x05, 0, 0,   0,    0,
                                     0,    0,    0,    0x8c, 1, 'a', 0x94, 0x2e};
    CHECK(st_sniff_inert(pickle, sizeof pickle) == ST_FORMAT_UNKNOWN);
    CHECK(!gate_verdict(ST_GATE_SIDECAR, pickle, sizeof pickle).valid);
    static const uint8_t zip[] = "PK\x03\x04\x14\x00\x00\x00\x00\x00";
    CHECK(st_sniff_inert(zip, sizeof zip - 1) == ST_FORMAT_UNKNOWN);
    CHECK(!gate_verdict(ST_GATE_SIDECAR, zip, sizeof zip - 1).valid);
    /* protobuf that is not a SentencePiece model (an ONNX ModelProto starts 0x08) */
    static const uint8_t onnx[] = {0x08, 0x07, 0x12, 0x04, 't', 'e', 's', 't'};
    CHECK(st_sniff_inert(onnx, sizeof onnx) == ST_FORMAT_UNKNOWN);
    /* a SentencePiece piece whose string is not UTF-8 */
    static const uint8_t bad_piece[] = {0x0a, 0x03, 0x0a, 0x01, 0xff};
    CHECK(st_sniff_inert(bad_piece, sizeof bad_piece) == ST_FORMAT_SENTENCEPIECE);
    CHECK(!valid_copy(ST_FORMAT_SENTENCEPIECE, bad_piece, sizeof bad_piece));
    /* a varint longer than 10 bytes */
    static const uint8_t long_varint[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                          0xff, 0xff, 0xff, 0xff, 0x01, 0x0a};
    CHECK(!valid_copy(ST_FORMAT_SENTENCEPIECE, long_varint, sizeof long_varint));
    /* not an inert format at all */
    CHECK(!st_sniff_inert_valid(ST_FORMAT_ZIP, zip, sizeof zip - 1, NULL));
    CHECK(!st_sniff_inert_valid(ST_FORMAT_PNG, NULL, 0, NULL));
    CHECK(st_sniff_inert(NULL, 0) == ST_FORMAT_UNKNOWN);
    /* the WebP RIFF size must be the file's */
    sample w = make_webp();
    w.bytes[4]++;
    CHECK(!valid_copy(ST_FORMAT_WEBP, w.bytes, w.len));
    /* a GIF without an image */
    static const uint8_t empty_gif[] = "GIF89a\x01\x00\x01\x00\x00\x00\x00\x3b";
    CHECK(!valid_copy(ST_FORMAT_GIF, empty_gif, sizeof empty_gif - 1));
    /* a JPEG scan before any frame header */
    static const uint8_t no_frame[] =
        "\xff\xd8\xff\xda\x00\x08\x01\x01\x00\x00\x3f\x00\x12\xff\xd9";
    CHECK(!valid_copy(ST_FORMAT_JPEG, no_frame, sizeof no_frame - 1));
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(crc32_vector);
    RUN(valid_samples_pass);
    RUN(every_prefix_refused);
    RUN(mutations_are_bounded);
    RUN(png_structure);
    RUN(others_stay_refused);
    return test_report(argv[0]);
}
