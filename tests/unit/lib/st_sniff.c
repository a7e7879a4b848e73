/* Tests of the content classifier, lib/sniff/ (through sniff.h): every format class
 * on real files (made by torch 1.13, NumPy, pickle, zipfile, tarfile:
 * tests/unit/lib/gen_sniff_samples.py), every scanner-bypass family of
 * REFERENCES.md, text that must not read as a pickle, truncated and empty inputs. */
#include "sniff.h"

#include <stdlib.h>

#include "../test.h"
#include "sniff_samples/samples.inc"

#define SAMPLE(name) sample_##name, sizeof sample_##name

/* How a caller may hand the bytes over. */
enum sniff_mode {
    MODE_HEAD_AND_TAIL, /* head, tail and the size (the gate on a file) */
    MODE_HEAD_ONLY,     /* head and the size, no tail */
    MODE_STREAMING,     /* head only, size unknown */
    MODE_COUNT
};

static st_format sniff_mode(const uint8_t *buf, size_t len, enum sniff_mode mode,
                            st_sniff_info *info)
{
    size_t head = len < ST_SNIFF_HEAD_MAX ? len : ST_SNIFF_HEAD_MAX;
    size_t tail = len < ST_SNIFF_TAIL_MAX ? len : ST_SNIFF_TAIL_MAX;
    switch (mode) {
    case MODE_HEAD_AND_TAIL:
        return st_sniff(buf, head, buf + len - tail, tail, len, info);
    case MODE_HEAD_ONLY:
        return st_sniff(buf, head, NULL, 0, len, info);
    default:
        return st_sniff(buf, head, NULL, 0, UINT64_MAX, info);
    }
}

static st_format sniff(const uint8_t *buf, size_t len, st_sniff_info *info)
{
    return sniff_mode(buf, len, MODE_HEAD_AND_TAIL, info);
}

/* The format, and the detail containing `want` (NULL: anything). */
static void check_sniff(int line, const uint8_t *buf, size_t len, st_format format,
                        const char *want)
{
    st_sniff_info info;
    st_format got = sniff(buf, len, &info);
    if (got == format && (want == NULL || strstr(info.detail, want) != NULL)) {
        test_checks_passed++;
        return;
    }
    test_checks_failed++;
    fprintf(stderr, "%s:%d: %s: sniffed %s (\"%s\"), expected %s with \"%s\"\n", __FILE__, line,
            test_current, st_format_name(got), info.detail, st_format_name(format),
            want ? want : "");
}

#define CHECK_SNIFF(buf, len, format, want) check_sniff(__LINE__, (buf), (len), (format), (want))

static uint8_t *copy_of(const uint8_t *buf, size_t len)
{
    uint8_t *out = malloc(len ? len : 1);
    if (out != NULL && len > 0)
        memcpy(out, buf, len);
    return out;
}

static const uint8_t *find(const uint8_t *buf, size_t len, const void *what, size_t n)
{
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(buf + i, what, n) == 0)
            return buf + i;
    return NULL;
}

TEST(format_names)
{
    static const char *const expected[] = {"safetensors", "pickle",
                                           "pytorch-zip", "pytorch-legacy",
                                           "zip",         "tar",
                                           "numpy",       "gguf",
                                           "hdf5",        "tflite",
                                           "onnx",        "compressed",
                                           "text",        "json",
                                           "unknown",     "png",
                                           "jpeg",        "gif",
                                           "webp",        "sentencepiece",
                                           "native",      "python-bytecode",
                                           "script"};
    CHECK_EQ_U64(sizeof expected / sizeof expected[0], ST_FORMAT_COUNT);
    for (unsigned i = 0; i < ST_FORMAT_COUNT; i++)
        CHECK_STR(st_format_name((st_format)i), expected[i]);
    CHECK(st_format_name(ST_FORMAT_COUNT) == NULL);
    CHECK(st_format_name((st_format)-1) == NULL);
}

typedef struct expectation {
    const char *name;
    const uint8_t *bytes;
    size_t len;
    st_format format;
    const char *detail;
} expectation;

#define EXPECT(sample, format, detail)                                                             \
    {                                                                                              \
#sample, SAMPLE(sample), format, detail                                                    \
    }

static const expectation real_files[] = {
    EXPECT(torch_zip, ST_FORMAT_PYTORCH_ZIP, "'archive/data.pkl' holds a pickle (0x80 0x02)"),
    EXPECT(torch_legacy, ST_FORMAT_PYTORCH_LEGACY, "magic-number pickle"),
    EXPECT(pickle_p0, ST_FORMAT_PICKLE, "GLOBAL '_codecs encode'"),
    EXPECT(pickle_p1, ST_FORMAT_PICKLE, "REDUCE at offset 77 after GLOBAL '_codecs encode'"),
    EXPECT(pickle_p2, ST_FORMAT_PICKLE, "pickle protocol 2 (0x80 0x02) at offset 0"),
    EXPECT(pickle_p3, ST_FORMAT_PICKLE, "pickle protocol 3 (0x80 0x03) at offset 0"),
    EXPECT(pickle_p4, ST_FORMAT_PICKLE, "pickle protocol 4 (0x80 0x04) at offset 0"),
    EXPECT(pickle_p5, ST_FORMAT_PICKLE, "pickle protocol 5 (0x80 0x05) at offset 0"),
    /* issue 23: text that is a data-only pickle is text */
    EXPECT(pickle_p0_data_only, ST_FORMAT_TEXT, "UTF-8 text"),
    EXPECT(pickle_mixed_0_4, ST_FORMAT_PICKLE, "GLOBAL 'builtins str'"),
    EXPECT(pickle_breaks_after_payload, ST_FORMAT_PICKLE, "GLOBAL 'builtins str'"),
    EXPECT(pickle_stack_global_no_proto, ST_FORMAT_PICKLE, "REDUCE"),
    EXPECT(pickle_inst, ST_FORMAT_PICKLE, "INST"),
    EXPECT(pickle_hex_int_first, ST_FORMAT_PICKLE, "GLOBAL 'builtins str'"),
    EXPECT(pickle_deep_marks, ST_FORMAT_PICKLE, "GLOBAL 'builtins str'"),
    EXPECT(pickle_none_stop, ST_FORMAT_TEXT, "UTF-8 text"),
    EXPECT(npy_int64, ST_FORMAT_NUMPY, "descr <i8"),
    EXPECT(npy_object, ST_FORMAT_NUMPY, "|O"),
    EXPECT(npz, ST_FORMAT_NUMPY, ".npz"),
    EXPECT(npz_compressed, ST_FORMAT_NUMPY, ".npz"),
    EXPECT(zip_p0_member_renamed, ST_FORMAT_PYTORCH_ZIP, "'model/weights.bin' holds a pickle"),
    EXPECT(zip_text_only, ST_FORMAT_ZIP, "zip at offset 0"),
    EXPECT(zip_deflated_text, ST_FORMAT_ZIP, "zip at offset 0"),
    EXPECT(zip_empty, ST_FORMAT_ZIP, "empty zip"),
    EXPECT(tar_torch_legacy, ST_FORMAT_PYTORCH_LEGACY, "legacy member 'pickle'"),
    EXPECT(tar_plain, ST_FORMAT_TAR, "ustar"),
    EXPECT(onnx_linear, ST_FORMAT_ONNX, "ir_version"),
    EXPECT(gzip_torch, ST_FORMAT_COMPRESSED, "gzip"),
    EXPECT(bz2_torch, ST_FORMAT_COMPRESSED, "bzip2"),
    EXPECT(xz_torch, ST_FORMAT_COMPRESSED, "xz"),
    EXPECT(zlib_torch, ST_FORMAT_COMPRESSED, "zlib"),
    EXPECT(zstd_torch, ST_FORMAT_COMPRESSED, "zstd"),
    EXPECT(lz4_torch, ST_FORMAT_COMPRESSED, "lz4"),
};

TEST(real_files_every_class)
{
    for (size_t i = 0; i < sizeof real_files / sizeof real_files[0]; i++) {
        const expectation *e = &real_files[i];
        test_current = e->name;
        CHECK_SNIFF(e->bytes, e->len, e->format, e->detail);
        /* The same class whichever way the bytes are handed over. */
        for (int mode = 0; mode < MODE_COUNT; mode++) {
            st_format got = sniff_mode(e->bytes, e->len, (enum sniff_mode)mode, NULL);
            CHECK_STR(st_format_name(got), st_format_name(e->format));
        }
        /* None of these is text but the data-only pickles, and every pickle is one for
         * the sidecar check too. */
        CHECK(st_sniff_is_text(e->bytes, e->len, true) == (e->format == ST_FORMAT_TEXT));
        if (e->format == ST_FORMAT_PICKLE || e->bytes == sample_torch_legacy)
            CHECK(st_sniff_is_pickle(e->bytes, e->len));
    }
}

/* torch 1.13 names the archive after the file ("archive" for a buffer); the zip
 * bypasses below start from it. */
static const char *const torch_names[][2] = {
    {"archive/data.pkl", "archive/abcd.bin"},
    {"archive/data/0", "archive/tensor"},
    {"archive/version", "archive/meta.xx"},
};

static void rename_members(uint8_t *zip, size_t len, bool in_local, bool in_central)
{
    /* Local headers are followed by their name at +30, central entries at +46. */
    for (size_t i = 0; i + 46 <= len; i++) {
        size_t name_at;
        if (memcmp(zip + i, "PK\3\4", 4) == 0 && in_local)
            name_at = i + 30;
        else if (memcmp(zip + i, "PK\1\2", 4) == 0 && in_central)
            name_at = i + 46;
        else
            continue;
        for (size_t k = 0; k < sizeof torch_names / sizeof torch_names[0]; k++) {
            size_t n = strlen(torch_names[k][0]);
            if (name_at + n <= len && memcmp(zip + name_at, torch_names[k][0], n) == 0)
                memcpy(zip + name_at, torch_names[k][1], n);
        }
    }
}

TEST(zip_bypass_member_names)
{
    size_t len = sizeof sample_torch_zip;
    CHECK(find(sample_torch_zip, len, "archive/data.pkl", 16) != NULL);

    /* Every name changed in both places: the content of the pickle member still tells. */
    uint8_t *zip = copy_of(sample_torch_zip, len);
    rename_members(zip, len, true, true);
    CHECK(find(zip, len, "data.pkl", 8) == NULL && find(zip, len, "version", 7) == NULL);
    CHECK_SNIFF(zip, len, ST_FORMAT_PYTORCH_ZIP, "'archive/abcd.bin' holds a pickle (0x80 0x02)");

    /* Local names differ from central names, each way round. */
    memcpy(zip, sample_torch_zip, len);
    rename_members(zip, len, true, false);
    CHECK_SNIFF(zip, len, ST_FORMAT_PYTORCH_ZIP, "holds a pickle");
    memcpy(zip, sample_torch_zip, len);
    rename_members(zip, len, false, true);
    CHECK_SNIFF(zip, len, ST_FORMAT_PYTORCH_ZIP, "holds a pickle");

    /* The pickle member's content gone too (first opcode byte changed to a non-opcode):
     * the central-directory names alone still say PyTorch. */
    memcpy(zip, sample_torch_zip, len);
    rename_members(zip, len, true, false);
    uint8_t *pickle = (uint8_t *)find(zip, len, "\x80\x02}", 3);
    CHECK(pickle != NULL);
    if (pickle != NULL)
        pickle[0] = 0xff;
    CHECK_SNIFF(zip, len, ST_FORMAT_PYTORCH_ZIP, "zip central-directory member 'archive/data.pkl'");
    free(zip);
}

TEST(zip_bypass_flags_and_crc)
{
    size_t len = sizeof sample_torch_zip;
    uint8_t *zip = copy_of(sample_torch_zip, len);
    rename_members(zip, len, true, true);
    size_t headers = 0;
    for (size_t i = 0; i + 46 <= len; i++) {
        if (memcmp(zip + i, "PK\3\4", 4) == 0) {
            zip[i + 6] |= 0x41;  /* encrypted + strong encryption, data still in clear */
            zip[i + 14] ^= 0xff; /* CRC-32 wrong */
            headers++;
        } else if (memcmp(zip + i, "PK\1\2", 4) == 0) {
            zip[i + 8] |= 0x41;
            zip[i + 16] ^= 0xff;
            headers++;
        }
    }
    CHECK_EQ_U64(headers, 6);
    CHECK_SNIFF(zip, len, ST_FORMAT_PYTORCH_ZIP, "holds a pickle");
    free(zip);
}

TEST(zip_bypass_prefix)
{
    size_t zip_len = sizeof sample_torch_zip;
    /* A short junk prefix: the local header is found at offset 37. */
    size_t len = 37 + zip_len;
    uint8_t *buf = malloc(len);
    for (size_t i = 0; i < 37; i++)
        buf[i] = (uint8_t)(0xa0 + i);
    memcpy(buf + 37, sample_torch_zip, zip_len);
    rename_members(buf + 37, zip_len, true, true);
    CHECK_SNIFF(buf, len, ST_FORMAT_PYTORCH_ZIP, "zip after a 37-byte prefix");
    for (int mode = 0; mode < MODE_COUNT; mode++)
        CHECK_EQ_U64(sniff_mode(buf, len, (enum sniff_mode)mode, NULL), ST_FORMAT_PYTORCH_ZIP);

    /* A prefix that is itself a pickle: torch.load sees no zip magic and unpickles it. */
    memcpy(buf, "cbuiltins\nstr\n(S'id'\ntR.", 24);
    memset(buf + 24, ' ', 13);
    CHECK_SNIFF(buf, len, ST_FORMAT_PICKLE, "before a zip at offset 37");
    free(buf);

    /* A prefix longer than the head: only the end-of-central-directory in the tail
     * finds the zip, and the central names say PyTorch. */
    size_t prefix = 100000;
    len = prefix + zip_len;
    buf = malloc(len);
    for (size_t i = 0; i < prefix; i++)
        buf[i] = (uint8_t)(i * 7 + 0x81);
    memcpy(buf + prefix, sample_torch_zip, zip_len);
    CHECK_SNIFF(buf, len, ST_FORMAT_PYTORCH_ZIP, "zip after a 100000-byte prefix");
    /* Without the tail there is nothing to find. */
    CHECK_EQ_U64(sniff_mode(buf, len, MODE_HEAD_ONLY, NULL), ST_FORMAT_UNKNOWN);
    free(buf);
}

TEST(zip_central_directory_beyond_head)
{
    /* A zip whose first member is 100 KB: the head sees one local header, the tail
     * the central directory naming data.pkl. Built by hand: two stored members. */
    size_t big = 100000, len = 0;
    uint8_t *buf = calloc(1, big + 1024);
    const char *names[2] = {"archive/data/0", "archive/data.pkl"};
    size_t sizes[2] = {big, 5}, offsets[2];
    for (int m = 0; m < 2; m++) {
        offsets[m] = len;
        uint8_t *h = buf + len;
        memcpy(h, "PK\3\4\x14\0\0\0\0\0", 10);
        h[18] = (uint8_t)sizes[m], h[19] = (uint8_t)(sizes[m] >> 8),
        h[20] = (uint8_t)(sizes[m] >> 16);
        h[26] = (uint8_t)strlen(names[m]);
        memcpy(h + 30, names[m], strlen(names[m]));
        len += 30 + strlen(names[m]);
        if (m == 1)
            memcpy(buf + len, "\x80\x02K\x01.", 5);
        len += sizes[m];
    }
    size_t cd_start = len;
    for (int m = 0; m < 2; m++) {
        uint8_t *c = buf + len;
        memcpy(c, "PK\1\2\x14\0\x14\0", 8);
        c[28] = (uint8_t)strlen(names[m]);
        c[42] = (uint8_t)offsets[m], c[43] = (uint8_t)(offsets[m] >> 8),
        c[44] = (uint8_t)(offsets[m] >> 16);
        memcpy(c + 46, names[m], strlen(names[m]));
        len += 46 + strlen(names[m]);
    }
    uint8_t *e = buf + len;
    size_t cd_size = len - cd_start;
    memcpy(e, "PK\5\6", 4);
    e[8] = e[10] = 2;
    e[12] = (uint8_t)cd_size;
    e[16] = (uint8_t)cd_start, e[17] = (uint8_t)(cd_start >> 8), e[18] = (uint8_t)(cd_start >> 16);
    len += 22;
    CHECK_SNIFF(buf, len, ST_FORMAT_PYTORCH_ZIP, "");
    st_sniff_info info;
    CHECK_EQ_U64(sniff_mode(buf, len, MODE_HEAD_ONLY, &info), ST_FORMAT_PYTORCH_ZIP);
    /* From the head alone: the data/<n> name of the first member. */
    CHECK(strstr(info.detail, "'archive/data/0'") != NULL);
    free(buf);
}

static const char pickle_os_system[] = "cos\nsystem\n(S'echo hi'\ntR.";

TEST(plain_and_protocol0_pickles)
{
    const uint8_t *p = (const uint8_t *)pickle_os_system;
    size_t n = strlen(pickle_os_system);
    CHECK_SNIFF(p, n, ST_FORMAT_PICKLE, "GLOBAL 'os system' at offset 0");
    CHECK(st_sniff_is_pickle(p, n));
    CHECK(!st_sniff_is_text(p, n, true));
    CHECK(!st_sniff_is_text(p, n, false));

    /* Payload then garbage: still a pickle, still never text. */
    static const char broken[] = "cposix\nsystem\n(S'id'\ntR\nthis is not an opcode stream";
    CHECK_SNIFF((const uint8_t *)broken, strlen(broken), ST_FORMAT_PICKLE, "GLOBAL 'posix system'");
    CHECK(!st_sniff_is_text((const uint8_t *)broken, strlen(broken), true));

    /* 0x80 0x02..0x05 at offset 0 is a pickle whatever follows; 0x80 0x06 is not. */
    CHECK_SNIFF((const uint8_t *)"\x80\x05", 2, ST_FORMAT_PICKLE, "protocol 5");
    CHECK(st_sniff_is_pickle((const uint8_t *)"\x80\x03\xff\xff", 4));
    CHECK(!st_sniff_is_pickle((const uint8_t *)"\x80\x06N.", 4));
    /* PROTO 1 then protocol-1 opcodes: the walker takes it. */
    CHECK_SNIFF((const uint8_t *)"\x80\x01}q\x00.", 6, ST_FORMAT_PICKLE, "PROTO 1 inside");

    /* Ops CPython refuses end the valid prefix: REDUCE on an empty stack, a string
     * called as a function, APPENDS without a mark, GET of an index never PUT. */
    CHECK(!st_sniff_is_pickle((const uint8_t *)"R.", 2));
    CHECK(!st_sniff_is_pickle((const uint8_t *)"Vos\nVsystem\n)R.", 15));
    CHECK(!st_sniff_is_pickle((const uint8_t *)"Vx\n)R.", 6)); /* 'str' is not callable */
    CHECK(!st_sniff_is_pickle((const uint8_t *)"Ne.", 3));
    CHECK(!st_sniff_is_pickle((const uint8_t *)"g0\n.", 4));
    CHECK(st_sniff_is_pickle((const uint8_t *)"Np0\n0g0\n.", 9));
}

/* Builds padded pickles the generator proved loadable: the payload comes after 64 KiB. */
TEST(payload_pushed_past_the_head)
{
    static const char payload[] = "cbuiltins\nstr\n(S'id'\ntR.";
    size_t pad = 80000, len = pad + strlen(payload);
    uint8_t *buf = malloc(len);
    for (size_t i = 0; i < pad; i += 2)
        memcpy(buf + i, "N0", 2);
    memcpy(buf + pad, payload, strlen(payload));
    CHECK(!st_sniff_is_text(buf, len, true));
    CHECK(!st_sniff_is_text(buf, ST_SNIFF_HEAD_MAX, false));
    CHECK(st_sniff_is_pickle(buf, ST_SNIFF_HEAD_MAX));
    CHECK_EQ_U64(sniff_mode(buf, len, MODE_HEAD_ONLY, NULL), ST_FORMAT_PICKLE);
    CHECK_EQ_U64(sniff_mode(buf, len, MODE_STREAMING, NULL), ST_FORMAT_PICKLE);
    free(buf);

    len = 1 + 70000 + 2 + strlen(payload);
    buf = malloc(len);
    buf[0] = 'V';
    memset(buf + 1, 'a', 70000);
    memcpy(buf + 70001, "\n0", 2);
    memcpy(buf + 70003, payload, strlen(payload));
    CHECK(!st_sniff_is_text(buf, len, true));
    CHECK(!st_sniff_is_text(buf, ST_SNIFF_HEAD_MAX, false));
    CHECK_EQ_U64(sniff_mode(buf, len, MODE_HEAD_ONLY, NULL), ST_FORMAT_PICKLE);
    free(buf);
}

/* Realistic sidecars: none is a pickle, each is text (or JSON). */
static const char readme_md[] =
    "---\nlicense: apache-2.0\nlanguage:\n- en\ntags:\n- text-generation\n---\n\n"
    "# Model card for tiny-llama\n\n"
    "This model is a 1.1B parameter decoder trained on 3T tokens.\n\n"
    "## Usage\n\n```python\nfrom transformers import AutoModelForCausalLM\n"
    "model = AutoModelForCausalLM.from_pretrained(\"org/tiny\")\n```\n\n"
    "## Citation\n\n(see below) N.B. results may vary.\n";
static const char merges_txt[] = "#version: 0.2\n\xc4\xa0 t\n\xc4\xa0 a\nh e\ni n\nr e\no n\n"
                                 "\xc4\xa0t he\ne r\n\xc4\xa0 s\na t\n\xc4\xa0 w\n\xc4\xa0 o\n"
                                 "e n\n\xc4\xa0 c\ni t\ni s\na n\no r\ne s\n\xc4\xa0 b\ne d\n";
static const char vocab_txt[] =
    "[PAD]\n[unused0]\n[unused1]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nof\n";
static const char labels_txt[] = "cat\ndog\nhorse\nbird\nbuild\nRun\ncar\n";
static const char changelog[] = "Version 2.0\nVersion 1.0\nRemoved the old tokenizer.\n";
static const char copyright[] =
    "Copyright (c) 2023 The Authors. All rights reserved. Licensed under "
    "the Apache License, Version 2.0 (the \"License\"). You may not use "
    "this file except in compliance with the License. cat\ndog\nRun.\n";
static const char usage[] = "Usage\n=====\n\nRun the script. It prints. Then it exits. Done.\n"
                            "See also: tools/convert.py. Or not.\n";
static const char release_notes[] = "Git v2.11.2 Release Notes\n=========================\n";
static const char tokenizer_config[] = "{\n  \"add_bos_token\": true,\n  \"model_max_length\": "
                                       "2048,\n  \"tokenizer_class\": \"LlamaTokenizer\"\n}\n";
static const char json_list[] = "  \n[1, 2, 3]\n";
static const char unicode_text[] = "Mod\xc3\xa8le fran\xc3\xa7"
                                   "ais \xe2\x80\x94 r\xc3\xa9sum\xc3\xa9 "
                                   "\xe2\x82\xac 5 \xe2\x80\x9cquoted\xe2\x80\x9d\n";

TEST(text_is_not_pickle)
{
    static const struct {
        const char *text;
        st_format format;
    } cases[] = {
        {readme_md, ST_FORMAT_TEXT},
        {merges_txt, ST_FORMAT_TEXT},
        {vocab_txt, ST_FORMAT_JSON},
        {labels_txt, ST_FORMAT_TEXT},
        {changelog, ST_FORMAT_TEXT},
        {copyright, ST_FORMAT_TEXT},
        {usage, ST_FORMAT_TEXT},
        {release_notes, ST_FORMAT_TEXT},
        {tokenizer_config, ST_FORMAT_JSON},
        {json_list, ST_FORMAT_JSON},
        {unicode_text, ST_FORMAT_TEXT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint8_t *t = (const uint8_t *)cases[i].text;
        size_t n = strlen(cases[i].text);
        CHECK(!st_sniff_is_pickle(t, n));
        CHECK(st_sniff_is_text(t, n, true));
        CHECK(st_sniff_is_text(t, n, false));
        st_sniff_info info;
        st_format got = sniff(t, n, &info);
        if (got != cases[i].format)
            fprintf(stderr, "case %zu: %s (%s)\n", i, st_format_name(got), info.detail);
        CHECK_STR(st_format_name(got), st_format_name(cases[i].format));
    }
}

/* Long text bigger than the run-off threshold, first line longer than the buffer. */
TEST(long_text_lines_are_not_pickle)
{
    size_t len = 20000;
    uint8_t *buf = malloc(len);
    static const char *const starts[] = {"Search.setIndex({docnames:[", "import{a}from\"b\";",
                                         "Prism.languages.x={",         "This paragraph goes on ",
                                         "BOOL\t-\t934e554d",           "Intro: "};
    for (size_t s = 0; s < sizeof starts / sizeof starts[0]; s++) {
        size_t k = strlen(starts[s]);
        memcpy(buf, starts[s], k);
        for (size_t i = k; i < len; i++)
            buf[i] = (uint8_t)("lorem ipsum dolor sit amet, "[i % 28]);
        CHECK(!st_sniff_is_pickle(buf, len));
        CHECK(st_sniff_is_text(buf, len, false));
        CHECK_EQ_U64(sniff_mode(buf, len, MODE_STREAMING, NULL), ST_FORMAT_TEXT);
    }
    free(buf);
}

TEST(is_text_rules)
{
    CHECK(st_sniff_is_text((const uint8_t *)"", 0, true));
    CHECK(st_sniff_is_text((const uint8_t *)"a\tb\r\n\fc", 7, true));
    CHECK(!st_sniff_is_text((const uint8_t *)"a\0b", 3, true));
    CHECK(!st_sniff_is_text((const uint8_t *)"a\x1b[0m", 5, true));
    CHECK(!st_sniff_is_text((const uint8_t *)"a\x7f", 2, true));
    CHECK(!st_sniff_is_text((const uint8_t *)"a\xc2\x85", 3, true));        /* C1 control NEL */
    CHECK(!st_sniff_is_text((const uint8_t *)"\xc0\x80", 2, true));         /* overlong NUL */
    CHECK(!st_sniff_is_text((const uint8_t *)"\xe0\x80\xaf", 3, true));     /* overlong '/' */
    CHECK(!st_sniff_is_text((const uint8_t *)"\xed\xa0\x80", 3, true));     /* surrogate */
    CHECK(!st_sniff_is_text((const uint8_t *)"\xf4\x90\x80\x80", 4, true)); /* > U+10FFFF */
    CHECK(!st_sniff_is_text((const uint8_t *)"\xff", 1, true));
    CHECK(st_sniff_is_text((const uint8_t *)"\xef\xbb\xbfhi", 5, true)); /* BOM */
    CHECK(st_sniff_is_text((const uint8_t *)"\xf0\x9f\x98\x80", 4, true));
    /* A character cut by the end of the buffer: fine in a head, not in a whole file. */
    CHECK(st_sniff_is_text((const uint8_t *)"ok \xe2\x82", 5, false));
    CHECK(!st_sniff_is_text((const uint8_t *)"ok \xe2\x82", 5, true));
    CHECK(!st_sniff_is_text((const uint8_t *)"ok \xe2\x28", 5, false));
    CHECK(!st_sniff_is_text((const uint8_t *)"ok \xed\xa0", 5, false));
    /* Protocol-0 pickles that import or call are ASCII but never text; data-only
     * ones are text (issue 23: a model card starting "N.B." is NONE STOP). */
    CHECK(st_sniff_is_text((const uint8_t *)"N.", 2, true));
    CHECK(st_sniff_is_text((const uint8_t *)"N.B. see below\n", 15, true));
    CHECK(!st_sniff_is_text((const uint8_t *)"N.cos\nsystem\n(S'ls'\ntR.", 23, true));
    CHECK(!st_sniff_is_text(SAMPLE(pickle_p0), true));
    CHECK(st_sniff_is_text(SAMPLE(pickle_p0_data_only), true));
    CHECK(!st_sniff_is_text(SAMPLE(pickle_inst), true));
}

TEST(crafted_magics)
{
    static const uint8_t gguf[] = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0};
    CHECK_SNIFF(gguf, sizeof gguf, ST_FORMAT_GGUF, "GGUF version 3");

    static const uint8_t hdf5_sig[8] = {0x89, 'H', 'D', 'F', 0x0d, 0x0a, 0x1a, 0x0a};
    uint8_t *buf = calloc(1, 8192);
    memcpy(buf, hdf5_sig, 8);
    CHECK_SNIFF(buf, 8192, ST_FORMAT_HDF5, "offset 0");
    static const size_t user_blocks[] = {512, 1024, 2048, 4096};
    for (size_t i = 0; i < 4; i++) {
        memset(buf, 0, 8192);
        memcpy(buf + user_blocks[i], hdf5_sig, 8);
        char want[64];
        snprintf(want, sizeof want, "offset %zu (after a user block)", user_blocks[i]);
        CHECK_SNIFF(buf, 8192, ST_FORMAT_HDF5, want);
    }
    memset(buf, 0, 8192);
    memcpy(buf + 700, hdf5_sig, 8); /* not a power-of-two block */
    CHECK(sniff(buf, 8192, NULL) != ST_FORMAT_HDF5);

    /* TFLite: a root-table offset, then the identifier. */
    memset(buf, 0, 8192);
    memcpy(buf, "\x1c\0\0\0TFL3", 8);
    CHECK_SNIFF(buf, 8192, ST_FORMAT_TFLITE, "TFL3 at offset 4");
    CHECK_SNIFF((const uint8_t *)"abcdTFL3 in prose\n", 18, ST_FORMAT_TEXT, NULL);

    static const uint8_t seven_z[] = {0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c, 0, 4, 1, 2};
    CHECK_SNIFF(seven_z, sizeof seven_z, ST_FORMAT_COMPRESSED, "7z");
    static const uint8_t lz4_legacy[] = {0x02, 0x21, 0x4c, 0x18, 1, 2, 3};
    CHECK_SNIFF(lz4_legacy, sizeof lz4_legacy, ST_FORMAT_COMPRESSED, "lz4 legacy");
    static const uint8_t zstd_skippable[] = {0x5a, 0x2a, 0x4d, 0x18, 0, 0, 0, 0};
    CHECK_SNIFF(zstd_skippable, sizeof zstd_skippable, ST_FORMAT_COMPRESSED, "skippable");
    /* "x^" is zlib's 0x78 0x5e, but as text it is text. */
    CHECK_SNIFF((const uint8_t *)"x^2 + y^2\n", 10, ST_FORMAT_TEXT, NULL);
    /* "BZh" needs its block size and block magic. */
    CHECK_SNIFF((const uint8_t *)"BZh is not bzip2\n", 17, ST_FORMAT_TEXT, NULL);
    free(buf);
}

TEST(onnx_weak_signal)
{
    const uint8_t *m = sample_onnx_linear;
    size_t n = sizeof sample_onnx_linear;
    /* A head of the model with the size unknown is still the weak signal. */
    CHECK_EQ_U64(st_sniff(m, 40, NULL, 0, UINT64_MAX, NULL), ST_FORMAT_ONNX);
    /* ir_version then an unknown field, or a length past the file: no signal. */
    static const uint8_t bad_field[] = {0x08, 0x07, 0xf8, 0x01, 0x00, 0x00};
    CHECK(sniff(bad_field, sizeof bad_field, NULL) != ST_FORMAT_ONNX);
    static const uint8_t too_long[] = {0x08, 0x07, 0x12, 0x7f, 'p', 'y'};
    CHECK(sniff(too_long, sizeof too_long, NULL) != ST_FORMAT_ONNX);
    static const uint8_t zero_ir[] = {0x08, 0x00, 0x12, 0x02, 'p', 'y'};
    CHECK(sniff(zero_ir, sizeof zero_ir, NULL) != ST_FORMAT_ONNX);
    /* A whole file with trailing junk after the last field is not a model either. */
    uint8_t *junk = malloc(n + 1);
    memcpy(junk, m, n);
    junk[n] = 0xff;
    CHECK(sniff(junk, n + 1, NULL) != ST_FORMAT_ONNX);
    free(junk);
}

TEST(safetensors_lookalikes_are_never_safetensors)
{
    /* A well-formed safetensors file: the sniffer never says so (the validator does). */
    static const char header[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    size_t n = strlen(header);
    uint8_t buf[128] = {0};
    buf[0] = (uint8_t)n;
    memcpy(buf + 8, header, n);
    CHECK_SNIFF(buf, 8 + n + 4, ST_FORMAT_UNKNOWN, "starts like a safetensors header");
    /* N = 67,324,752 spells PK\3\4: with no real zip behind it, still never safetensors. */
    memcpy(buf, "PK\3\4\0\0\0\0", 8);
    CHECK(sniff(buf, 8 + n + 4, NULL) != ST_FORMAT_SAFETENSORS);
    for (size_t i = 0; i < sizeof real_files / sizeof real_files[0]; i++)
        for (int mode = 0; mode < MODE_COUNT; mode++)
            CHECK(sniff_mode(real_files[i].bytes, real_files[i].len, (enum sniff_mode)mode, NULL) !=
                  ST_FORMAT_SAFETENSORS);
}

TEST(truncated_and_empty_inputs)
{
    st_sniff_info info;
    CHECK_EQ_U64(st_sniff(NULL, 0, NULL, 0, 0, &info), ST_FORMAT_UNKNOWN);
    CHECK_STR(info.detail, "empty input");
    CHECK_EQ_U64(st_sniff((const uint8_t *)"", 0, NULL, 0, UINT64_MAX, NULL), ST_FORMAT_UNKNOWN);
    CHECK(!st_sniff_is_pickle(NULL, 0));
    CHECK(!st_sniff_is_pickle((const uint8_t *)"\x80", 1));
    CHECK(!st_sniff_is_pickle((const uint8_t *)"N", 1));
    CHECK_EQ_U64(sniff((const uint8_t *)"\x80", 1, NULL), ST_FORMAT_UNKNOWN);
    CHECK_EQ_U64(sniff((const uint8_t *)"PK", 2, NULL), ST_FORMAT_TEXT);
    CHECK_EQ_U64(sniff((const uint8_t *)"PK\3\4", 4, NULL), ST_FORMAT_ZIP);
    CHECK_EQ_U64(sniff((const uint8_t *)"\x93NUMPY", 6, NULL), ST_FORMAT_NUMPY);

    /* Every prefix of every sample, in every mode: a class, never a crash. A prefix
     * of a pickle with the file size unknown keeps being a pickle once it has its
     * PROTO header or its payload. */
    for (size_t i = 0; i < sizeof real_files / sizeof real_files[0]; i++) {
        const expectation *e = &real_files[i];
        for (size_t cut = 0; cut <= e->len && cut <= 4096; cut++) {
            for (int mode = 0; mode < MODE_COUNT; mode++) {
                st_format got = sniff_mode(e->bytes, cut, (enum sniff_mode)mode, &info);
                CHECK(got > ST_FORMAT_SAFETENSORS && got < ST_FORMAT_COUNT);
                CHECK(memchr(info.detail, '\0', sizeof info.detail) != NULL);
            }
            (void)st_sniff_is_pickle(e->bytes, cut);
            (void)st_sniff_is_text(e->bytes, cut, false);
        }
    }
    /* A torch zip cut before its central directory: the head alone still tells. */
    CHECK_EQ_U64(sniff_mode(sample_torch_zip, 200, MODE_STREAMING, NULL), ST_FORMAT_PYTORCH_ZIP);
    CHECK_EQ_U64(sniff_mode(sample_pickle_p4, 2, MODE_STREAMING, NULL), ST_FORMAT_PICKLE);
}

TEST(bounded_inputs)
{
    /* More than the head: only the first ST_SNIFF_HEAD_MAX bytes are looked at. */
    size_t len = 3 * ST_SNIFF_HEAD_MAX;
    uint8_t *buf = malloc(len);
    memset(buf, 'a', len);
    memset(buf + ST_SNIFF_HEAD_MAX, 0, ST_SNIFF_HEAD_MAX);
    CHECK_EQ_U64(st_sniff(buf, len, NULL, 0, UINT64_MAX, NULL), ST_FORMAT_TEXT);
    /* A tail longer than ST_SNIFF_TAIL_MAX: its last bytes are what count. */
    CHECK_EQ_U64(st_sniff(buf, 16, buf, len, len, NULL), ST_FORMAT_TEXT);

    /* Adversarial heads: every offset a local header, every byte a MARK, a stream of
     * pickles inside zip members. These must finish (linear work), whatever they say. */
    for (size_t i = 0; i + 40 <= ST_SNIFF_HEAD_MAX; i += 40) {
        memcpy(buf + i, "PK\3\4", 4);
        memset(buf + i + 4, 0, 26);
        buf[i + 26] = 5;
        memcpy(buf + i + 30, "x.pkl", 5);
        memcpy(buf + i + 35, "(((N", 4);
    }
    CHECK_EQ_U64(st_sniff(buf, ST_SNIFF_HEAD_MAX, NULL, 0, UINT64_MAX, NULL),
                 ST_FORMAT_PYTORCH_ZIP);
    /* All MARKs: a stream cut short, so a pickle in a head, but not a whole file
     * (CPython stops on the truncation without running anything). */
    memset(buf, '(', len);
    CHECK(st_sniff_is_pickle(buf, ST_SNIFF_HEAD_MAX));
    CHECK(!st_sniff_is_text(buf, ST_SNIFF_HEAD_MAX, false));
    CHECK(st_sniff_is_text(buf, ST_SNIFF_HEAD_MAX, true));
    free(buf);
}

/* ---- what a pickle would do (issue 23) ---- */

/* The finding named global in info, NULL when absent. */
static const st_pickle_finding *finding_of(const st_sniff_info *info, const char *global)
{
    for (size_t i = 0; i < info->findings.count; i++)
        if (strcmp(info->findings.items[i].global, global) == 0)
            return &info->findings.items[i];
    return NULL;
}

/* buf sniffs as format and lists global with that severity and call flag. */
static void check_finding(int line, const uint8_t *buf, size_t len, st_format format,
                          const char *global, st_pickle_severity severity, bool calls)
{
    st_sniff_info info;
    st_format got = sniff(buf, len, &info);
    const st_pickle_finding *f = finding_of(&info, global);
    if (got == format && f != NULL && f->severity == severity && f->calls == calls) {
        test_checks_passed++;
        return;
    }
    test_checks_failed++;
    fprintf(stderr, "%s:%d: sniffed %s with %zu findings; wanted %s with %s (%s%s)\n", __FILE__,
            line, st_format_name(got), info.findings.count, st_format_name(format), global,
            st_pickle_severity_name(severity), calls ? ", called" : "");
    for (size_t i = 0; i < info.findings.count; i++)
        fprintf(stderr, "  %s %s calls=%d\n", info.findings.items[i].global,
                st_pickle_severity_name(info.findings.items[i].severity),
                info.findings.items[i].calls);
}

/* (buf, len, format, global, severity, calls); variadic so that SAMPLE() fits */
#define CHECK_FINDING(...) check_finding(__LINE__, __VA_ARGS__)

TEST(pickle_findings_real_files)
{
    CHECK_FINDING(SAMPLE(findings_os_system_p2), ST_FORMAT_PICKLE, "posix.system",
                  ST_PICKLE_DANGEROUS, true);
    CHECK_FINDING(SAMPLE(findings_exec_p4), ST_FORMAT_PICKLE, "builtins.exec", ST_PICKLE_DANGEROUS,
                  true);
    CHECK_FINDING(SAMPLE(findings_popen_p5), ST_FORMAT_PICKLE, "subprocess.Popen",
                  ST_PICKLE_DANGEROUS, true);
    CHECK_FINDING(SAMPLE(findings_torch_zip_system), ST_FORMAT_PYTORCH_ZIP, "posix.system",
                  ST_PICKLE_DANGEROUS, true);
    CHECK_FINDING(SAMPLE(findings_npy_system), ST_FORMAT_NUMPY, "posix.system", ST_PICKLE_DANGEROUS,
                  true);
    CHECK_FINDING(SAMPLE(pickle_p0), ST_FORMAT_PICKLE, "_codecs.encode", ST_PICKLE_BENIGN, true);
    /* a torch state dict: tensor rebuilding only, every finding benign */
    CHECK_FINDING(SAMPLE(findings_torch_state_dict), ST_FORMAT_PYTORCH_ZIP,
                  "torch._utils._rebuild_tensor_v2", ST_PICKLE_BENIGN, true);
    CHECK_FINDING(SAMPLE(findings_torch_state_dict), ST_FORMAT_PYTORCH_ZIP,
                  "collections.OrderedDict", ST_PICKLE_BENIGN, true);
    CHECK_FINDING(SAMPLE(findings_torch_state_dict), ST_FORMAT_PYTORCH_ZIP, "torch.FloatStorage",
                  ST_PICKLE_BENIGN, false);
    st_sniff_info info;
    (void)sniff(SAMPLE(findings_torch_state_dict), &info);
    CHECK(st_pickle_findings_worst(&info.findings) == ST_PICKLE_BENIGN);
    (void)sniff(SAMPLE(torch_legacy), &info);
    CHECK(finding_of(&info, "torch._utils._rebuild_tensor_v2") != NULL);
    /* the model card starting "N.B." and a data-only pickle are text, with nothing found */
    check_sniff(__LINE__, SAMPLE(text_nb_model_card), ST_FORMAT_TEXT, "UTF-8 text");
    CHECK(st_sniff_is_text(SAMPLE(text_nb_model_card), true));
    CHECK(!st_sniff_is_code_pickle(SAMPLE(text_nb_model_card), true));
    CHECK(st_sniff_is_pickle(SAMPLE(text_nb_model_card)));
    (void)sniff(SAMPLE(pickle_p0_data_only), &info);
    CHECK(info.findings.count == 0);
    /* a binary data-only pickle is still a pickle: not text */
    CHECK_SNIFF((const uint8_t *)"]q\0.", 4, ST_FORMAT_PICKLE, NULL);
}

TEST(pickle_findings_crafted)
{
    /* protocol 0, text opcodes: GLOBAL + REDUCE */
    const char *p0 = "cos\nsystem\n(S'echo hi'\ntR.";
    CHECK_FINDING((const uint8_t *)p0, strlen(p0), ST_FORMAT_PICKLE, "os.system",
                  ST_PICKLE_DANGEROUS, true);
    /* INST imports and calls in one opcode */
    CHECK_FINDING(SAMPLE(pickle_inst), ST_FORMAT_PICKLE, "builtins.str", ST_PICKLE_UNKNOWN, true);
    /* STACK_GLOBAL on strings fetched back from the memo, then NEWOBJ */
    static const uint8_t memo[] = "\x80\x04\x8c\x05runpy\x94\x8c\x08run_path\x94" /* */
                                  "h\x00h\x01\x93)\x81.";
    CHECK_FINDING(memo, sizeof memo - 1, ST_FORMAT_PICKLE, "runpy.run_path", ST_PICKLE_DANGEROUS,
                  true);
    /* imported, never called */
    static const uint8_t imported[] = "\x80\x02"
                                      "cwebbrowser\nopen\n.";
    CHECK_FINDING(imported, sizeof imported - 1, ST_FORMAT_PICKLE, "webbrowser.open",
                  ST_PICKLE_DANGEROUS, false);
    /* OBJ and NEWOBJ_EX call too */
    static const uint8_t obj[] = "\x80\x02(cshutil\nrmtree\nS'/'\no.";
    CHECK_FINDING(obj, sizeof obj - 1, ST_FORMAT_PICKLE, "shutil.rmtree", ST_PICKLE_DANGEROUS,
                  true);
    static const uint8_t newobj_ex[] = "\x80\x04\x8c\x06socket\x8c\x06socket\x93)}\x92.";
    CHECK_FINDING(newobj_ex, sizeof newobj_ex - 1, ST_FORMAT_PICKLE, "socket.socket",
                  ST_PICKLE_DANGEROUS, true);
    /* an extension code, and a STACK_GLOBAL whose operands are not strings */
    static const uint8_t ext[] = "\x80\x02\x82\x05)R.";
    CHECK_FINDING(ext, sizeof ext - 1, ST_FORMAT_PICKLE, "(extension code 5)", ST_PICKLE_UNKNOWN,
                  true);
    static const uint8_t unresolved[] = "\x80\x04K\x01K\x02\x93)R.";
    CHECK_FINDING(unresolved, sizeof unresolved - 1, ST_FORMAT_PICKLE, "?", ST_PICKLE_UNKNOWN,
                  true);
    /* a payload after a harmless first pickle is found */
    const char *second = "N.cos\nsystem\n(S'echo hi'\ntR.";
    CHECK_FINDING((const uint8_t *)second, strlen(second), ST_FORMAT_PICKLE, "os.system",
                  ST_PICKLE_DANGEROUS, true);
}

TEST(pickle_findings_bounded)
{
    /* more distinct globals than the list holds: the first ones listed, the rest counted */
    char buf[1024];
    size_t n = 0;
    for (int i = 0; i < ST_PICKLE_FINDINGS_MAX + 4; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "cm%d\nf\n0", i);
    n += (size_t)snprintf(buf + n, sizeof buf - n, "N.");
    st_sniff_info info;
    CHECK_STR(st_format_name(sniff((const uint8_t *)buf, n, &info)), "pickle");
    CHECK(info.findings.count == ST_PICKLE_FINDINGS_MAX);
    CHECK(info.findings.omitted == 4);
    /* padding with harmless imports does not push a payload out of the list: the
     * dangerous global displaces an unknown one, and its call is seen */
    n = 0;
    for (int i = 0; i < ST_PICKLE_FINDINGS_MAX + 2; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "cm%d\nf\n0", i);
    n += (size_t)snprintf(buf + n, sizeof buf - n, "cos\nsystem\n(S'echo hi'\ntR.");
    CHECK_FINDING((const uint8_t *)buf, n, ST_FORMAT_PICKLE, "os.system", ST_PICKLE_DANGEROUS,
                  true);
    CHECK_STR(st_format_name(sniff((const uint8_t *)buf, n, &info)), "pickle");
    CHECK(info.findings.count == ST_PICKLE_FINDINGS_MAX);
    CHECK(info.findings.omitted == 3);
    CHECK(finding_of(&info, "m0.f") == NULL);
    CHECK(finding_of(&info, "m1.f") != NULL);
    /* a name is cut and kept printable */
    char longname[300] = "\x80\x04\x8c\xc8";
    memset(longname + 4, 'a', 200);
    memcpy(longname + 204, "\x8c\x01\x01\x93.", 5);
    CHECK_STR(st_format_name(sniff((const uint8_t *)longname, 209, &info)), "pickle");
    CHECK(info.findings.count == 1);
    CHECK(strlen(info.findings.items[0].global) == ST_PICKLE_GLOBAL_MAX - 1);
}

TEST(pickle_globals_table)
{
    CHECK(st_pickle_global_severity("os", "system") == ST_PICKLE_DANGEROUS);
    CHECK(st_pickle_global_severity("posix", "system") == ST_PICKLE_DANGEROUS);
    CHECK(st_pickle_global_severity("nt", "system") == ST_PICKLE_DANGEROUS);
    CHECK(st_pickle_global_severity("os.path", "join") == ST_PICKLE_DANGEROUS);
    CHECK(st_pickle_global_severity("builtins", "getattr") == ST_PICKLE_DANGEROUS);
    CHECK(st_pickle_global_severity("builtins", "exec.__call__") == ST_PICKLE_DANGEROUS);
    CHECK(st_pickle_global_severity("__builtin__", "eval") == ST_PICKLE_DANGEROUS);
    CHECK(st_pickle_global_severity("importlib.util", "spec_from_file_location") ==
          ST_PICKLE_DANGEROUS);
    CHECK(st_pickle_global_severity("requests.api", "get") == ST_PICKLE_DANGEROUS);
    CHECK(st_pickle_global_severity("http.client", "HTTPConnection") == ST_PICKLE_DANGEROUS);
    CHECK(st_pickle_global_severity("torch._utils", "_rebuild_tensor_v2") == ST_PICKLE_BENIGN);
    CHECK(st_pickle_global_severity("torch", "FloatStorage") == ST_PICKLE_BENIGN);
    CHECK(st_pickle_global_severity("numpy.core.multiarray", "_reconstruct") == ST_PICKLE_BENIGN);
    CHECK(st_pickle_global_severity("builtins", "set") == ST_PICKLE_BENIGN);
    CHECK(st_pickle_global_severity("builtins", "str") == ST_PICKLE_UNKNOWN);
    CHECK(st_pickle_global_severity("osx", "a") == ST_PICKLE_UNKNOWN);
    CHECK(st_pickle_global_severity("mymodel", "Net") == ST_PICKLE_UNKNOWN);
    CHECK(st_pickle_dangerous_rule_count() >= 100);
    CHECK_STR(st_pickle_severity_name(ST_PICKLE_DANGEROUS), "dangerous");
    CHECK_STR(st_pickle_severity_name(ST_PICKLE_UNKNOWN), "unknown");
    CHECK_STR(st_pickle_severity_name(ST_PICKLE_BENIGN), "benign");
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(format_names);
    RUN(real_files_every_class);
    RUN(zip_bypass_member_names);
    RUN(zip_bypass_flags_and_crc);
    RUN(zip_bypass_prefix);
    RUN(zip_central_directory_beyond_head);
    RUN(plain_and_protocol0_pickles);
    RUN(payload_pushed_past_the_head);
    RUN(text_is_not_pickle);
    RUN(long_text_lines_are_not_pickle);
    RUN(is_text_rules);
    RUN(crafted_magics);
    RUN(onnx_weak_signal);
    RUN(safetensors_lookalikes_are_never_safetensors);
    RUN(truncated_and_empty_inputs);
    RUN(bounded_inputs);
    RUN(pickle_findings_real_files);
    RUN(pickle_findings_crafted);
    RUN(pickle_findings_bounded);
    RUN(pickle_globals_table);
    return test_report(argv[0]);
}
