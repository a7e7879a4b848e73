/* libFuzzer target for the content classifier (lib/sniff/).
 *
 * The input is a whole file. It is handed to st_sniff in several ways a caller
 * may use: head + tail + size, head only, a stream of unknown size, and head/tail
 * windows of different lengths. Each window is copied into its own allocation of
 * exactly that size, so AddressSanitizer sees any read past what was handed over.
 * The promises of sniff.h are checked and a violation aborts (fine in a
 * harness, never in lib/).
 *
 * Build: make build-fuzz/fuzz_sniff (clang, libFuzzer, every lib/ source). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sniff.h"

static uint8_t *exact_copy(const uint8_t *data, size_t len)
{
    uint8_t *out = malloc(len ? len : 1);
    if (out == NULL)
        abort();
    if (len > 0)
        memcpy(out, data, len);
    return out;
}

static void check_result(st_format format, const st_sniff_info *info)
{
    if (format == ST_FORMAT_SAFETENSORS || (unsigned)format >= ST_FORMAT_COUNT)
        abort();
    if (st_format_name(format) == NULL)
        abort();
    /* The detail is a terminated, printable ASCII sentence. */
    const char *end = memchr(info->detail, '\0', sizeof info->detail);
    if (end == NULL)
        abort();
    for (const char *p = info->detail; p < end; p++)
        if (*p < 0x20 || *p > 0x7e)
            abort();
}

/* Sniffs with head = the first head_len bytes, tail = the last tail_len bytes. */
static st_format sniff_window(const uint8_t *data, size_t size, size_t head_len, size_t tail_len,
                              uint64_t file_size)
{
    if (head_len > size)
        head_len = size;
    if (tail_len > size)
        tail_len = size;
    uint8_t *head = exact_copy(data, head_len);
    uint8_t *tail = tail_len > 0 ? exact_copy(data + size - tail_len, tail_len) : NULL;
    st_sniff_info info;
    st_format format = st_sniff(head, head_len, tail, tail_len, file_size, &info);
    check_result(format, &info);
    /* Same answer without an info struct, and on a second call. */
    if (st_sniff(head, head_len, tail, tail_len, file_size, NULL) != format)
        abort();
    free(head);
    free(tail);
    return format;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t head_max = size < ST_SNIFF_HEAD_MAX ? size : ST_SNIFF_HEAD_MAX;
    size_t tail_max = size < ST_SNIFF_TAIL_MAX ? size : ST_SNIFF_TAIL_MAX;

    sniff_window(data, size, head_max, tail_max, size);
    sniff_window(data, size, head_max, 0, size);
    sniff_window(data, size, head_max, 0, UINT64_MAX);
    sniff_window(data, size, head_max, tail_max, UINT64_MAX);
    /* Windows shorter than the file: a head cut anywhere, a tail of a third. */
    sniff_window(data, size, size / 2, size / 3, size);
    sniff_window(data, size, size / 3 + 1, size - size / 3, size);
    /* A file size that disagrees with the bytes (a caller's bug) must not hurt either. */
    sniff_window(data, size, head_max, tail_max, size / 2);
    sniff_window(data, size, head_max, tail_max, (uint64_t)size + 12345);

    /* The predicates on the whole input and on a cut: the sidecar gate relies on
     * text never being a pickle that can import or call when both look at the same
     * bytes the same way (a data-only pickle may be text), and on a code pickle
     * always being a pickle. */
    uint8_t *whole = exact_copy(data, size);
    bool pickle = st_sniff_is_pickle(whole, size);
    bool code_pickle = st_sniff_is_code_pickle(whole, size, false);
    bool text_head = st_sniff_is_text(whole, size, false);
    if ((code_pickle && text_head) || (code_pickle && !pickle))
        abort();
    (void)st_sniff_is_text(whole, size, true);
    if (size >= 2 && whole[0] == 0x80 && whole[1] >= 2 && whole[1] <= 5 && !pickle)
        abort();
    free(whole);
    /* The inert formats' structural validators (png.c, jpeg.c, gif.c, webp.c,
     * sentencepiece.c) on the exact bytes, whatever the magic says: bounded and
     * allocation-free; a file they accept must carry its format's magic. */
    uint8_t *inert = exact_copy(data, size);
    static const st_format inert_formats[] = {ST_FORMAT_PNG, ST_FORMAT_JPEG, ST_FORMAT_GIF,
                                              ST_FORMAT_WEBP, ST_FORMAT_SENTENCEPIECE};
    st_format named = st_sniff_inert(inert, size);
    for (size_t i = 0; i < sizeof inert_formats / sizeof inert_formats[0]; i++) {
        st_sniff_info info;
        if (st_sniff_inert_valid(inert_formats[i], inert, size, &info) && named != inert_formats[i])
            abort();
        check_result(inert_formats[i], &info);
    }
    free(inert);
    size_t cut = size / 2;
    uint8_t *part = exact_copy(data, cut);
    if (st_sniff_is_code_pickle(part, cut, false) && st_sniff_is_text(part, cut, false))
        abort();
    free(part);
    return 0;
}
