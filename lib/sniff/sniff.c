/* The content classifier's dispatcher (lib/sniff/, see sniff.h): the format names,
 * the order in which the formats of this folder are tried (sniff_formats.h). The
 * helpers the format files share are sniff_util.c's.
 *
 * Everything here reads untrusted bytes: every offset and length taken from the
 * input is compared against the bytes actually present before use, nothing is
 * allocated, and the work is linear in the bytes looked at (at most
 * ST_SNIFF_HEAD_MAX of the head and ST_SNIFF_TAIL_MAX of the tail). */
#include "sniff.h"
#include "sniff_formats.h"

#include <stdio.h>
#include <string.h>

static const char *const format_names[ST_FORMAT_COUNT] = {
    [ST_FORMAT_SAFETENSORS] = "safetensors",
    [ST_FORMAT_PICKLE] = "pickle",
    [ST_FORMAT_PYTORCH_ZIP] = "pytorch-zip",
    [ST_FORMAT_PYTORCH_LEGACY] = "pytorch-legacy",
    [ST_FORMAT_ZIP] = "zip",
    [ST_FORMAT_TAR] = "tar",
    [ST_FORMAT_NUMPY] = "numpy",
    [ST_FORMAT_GGUF] = "gguf",
    [ST_FORMAT_HDF5] = "hdf5",
    [ST_FORMAT_TFLITE] = "tflite",
    [ST_FORMAT_ONNX] = "onnx",
    [ST_FORMAT_COMPRESSED] = "compressed",
    [ST_FORMAT_TEXT] = "text",
    [ST_FORMAT_JSON] = "json",
    [ST_FORMAT_UNKNOWN] = "unknown",
    [ST_FORMAT_PNG] = "png",
    [ST_FORMAT_JPEG] = "jpeg",
    [ST_FORMAT_GIF] = "gif",
    [ST_FORMAT_WEBP] = "webp",
    [ST_FORMAT_SENTENCEPIECE] = "sentencepiece",
    [ST_FORMAT_NATIVE] = "native",
    [ST_FORMAT_PYTHON_BYTECODE] = "python-bytecode",
    [ST_FORMAT_SCRIPT] = "script",
};

const char *st_format_name(st_format format)
{
    if ((unsigned)format >= ST_FORMAT_COUNT)
        return NULL;
    return format_names[format];
}

/* ---- inert formats ---- */

st_format st_sniff_inert(const uint8_t *head, size_t head_len)
{
    if (head == NULL)
        return ST_FORMAT_UNKNOWN;
    if (st_sniff_png_magic(head, head_len))
        return ST_FORMAT_PNG;
    if (st_sniff_jpeg_magic(head, head_len))
        return ST_FORMAT_JPEG;
    if (st_sniff_gif_magic(head, head_len))
        return ST_FORMAT_GIF;
    if (st_sniff_webp_magic(head, head_len))
        return ST_FORMAT_WEBP;
    if (st_sniff_sentencepiece_magic(head, head_len))
        return ST_FORMAT_SENTENCEPIECE;
    return ST_FORMAT_UNKNOWN;
}

bool st_sniff_inert_valid(st_format format, const uint8_t *buf, size_t len, st_sniff_info *info)
{
    if (info != NULL) {
        info->detail[0] = '\0';
        info->findings.count = 0;
        info->findings.omitted = 0;
        info->findings.next_id = 0;
    }
    if (buf == NULL)
        len = 0;
    switch (format) {
    case ST_FORMAT_PNG:
        return st_sniff_png_valid(buf, len, info);
    case ST_FORMAT_JPEG:
        return st_sniff_jpeg_valid(buf, len, info);
    case ST_FORMAT_GIF:
        return st_sniff_gif_valid(buf, len, info);
    case ST_FORMAT_WEBP:
        return st_sniff_webp_valid(buf, len, info);
    case ST_FORMAT_SENTENCEPIECE:
        return st_sniff_sentencepiece_valid(buf, len, info);
    default:
        st_sniff_note(info, "not an inert format");
        return false;
    }
}

/* ---- the classifier ---- */

/* The order, and why:
 * 1. Magics at offset 0 (pickle PROTO, legacy torch, zip, npy, GGUF, HDF5, 7z/gzip/
 *    xz/zstd/lz4/bzip2, ELF/PE/Mach-O, Python bytecode): the cheapest and most certain signals; the
 * loaders (torch.load, np.load, ...) dispatch on these very bytes.
 * 2. Magics at fixed offsets (tar 'ustar' at 257, TFLite 'TFL3' at 4, HDF5 after
 *    a user block): binary signatures that still fix the format, but only after
 *    bytes that could be anything.
 * 3. A zip elsewhere (a PK\3\4 local header after a prefix, or an end-of-central-
 *    directory record at the end): weaker, as those bytes may sit inside another
 *    format; a prefix that is itself a pickle is reported as the pickle.
 * 4. The protocol-0/1 pickle walker: headerless pickles are ASCII, so this must run
 *    before the text check, which they would otherwise pass; text that is a
 *    data-only pickle (nothing imported, called or built) goes on to the text check.
 * 5. A #! interpreter line (a script), JSON, then text: valid UTF-8 without control bytes (zlib's
 * 'x' magic is ASCII, so a text starting "x^" is text, and zlib is only tried on binary content).
 * 6. zlib, then the ONNX/protobuf weak signal: both are a byte or two of structure
 *    that many binaries happen to start with, so only when nothing else matched.
 * 7. Unknown. */
st_format st_sniff(const uint8_t *head, size_t head_len, const uint8_t *tail, size_t tail_len,
                   uint64_t file_size, st_sniff_info *info)
{
    if (info != NULL) {
        info->detail[0] = '\0';
        info->findings.count = 0;
        info->findings.omitted = 0;
        info->findings.next_id = 0;
    }
    if (head == NULL)
        head_len = 0;
    if (head_len > ST_SNIFF_HEAD_MAX)
        head_len = ST_SNIFF_HEAD_MAX;
    /* The tail is the file's last bytes: keep the last ST_SNIFF_TAIL_MAX of them. */
    if (tail == NULL)
        tail_len = 0;
    if (tail_len > ST_SNIFF_TAIL_MAX) {
        tail += tail_len - ST_SNIFF_TAIL_MAX;
        tail_len = ST_SNIFF_TAIL_MAX;
    }
    if (head_len == 0) {
        st_sniff_note(info, "empty input");
        return ST_FORMAT_UNKNOWN;
    }
    bool head_is_whole = file_size != ST_SNIFF_SIZE_UNKNOWN && file_size <= head_len;

    /* The view of the file's end used for the EOCD: the tail when given, else the head
     * when it may be the whole file. view_abs is the view's offset in the file. */
    const uint8_t *end_view = tail;
    size_t end_view_len = tail_len;
    bool end_abs_known = false;
    uint64_t end_abs = 0;
    if (tail_len > 0 && file_size != ST_SNIFF_SIZE_UNKNOWN && file_size >= tail_len) {
        end_abs_known = true;
        end_abs = file_size - tail_len;
    } else if (tail_len == 0 && (head_is_whole || file_size == ST_SNIFF_SIZE_UNKNOWN)) {
        end_view = head;
        end_view_len = head_len;
        end_abs_known = true;
        end_abs = 0;
    }

    /* 1. Magics at offset 0, in this order. */
    st_format found;
    if ((found = st_sniff_pickle_magic(head, head_len, info)) != ST_FORMAT_UNKNOWN ||
        (found = st_sniff_npy(head, head_len, info)) != ST_FORMAT_UNKNOWN ||
        (found = st_sniff_gguf(head, head_len, info)) != ST_FORMAT_UNKNOWN ||
        (found = st_sniff_hdf5(head, head_len, info)) != ST_FORMAT_UNKNOWN ||
        (found = st_sniff_compressed(head, head_len, info)) != ST_FORMAT_UNKNOWN ||
        (found = st_sniff_code(head, head_len, info)) != ST_FORMAT_UNKNOWN)
        return found;
    if (st_sniff_zip_magic_at_zero(head, head_len))
        return st_sniff_zip(head, head_len, end_view, end_view_len, end_abs_known, end_abs, true,
                            info);

    /* 2. Magics at fixed offsets. */
    if ((found = st_sniff_tar(head, head_len, info)) != ST_FORMAT_UNKNOWN ||
        (found = st_sniff_tflite(head, head_len, file_size, info)) != ST_FORMAT_UNKNOWN ||
        (found = st_sniff_hdf5_user_block(head, head_len, info)) != ST_FORMAT_UNKNOWN)
        return found;

    /* 3. A zip after a prefix. */
    found =
        st_sniff_zip(head, head_len, end_view, end_view_len, end_abs_known, end_abs, false, info);
    if (found != ST_FORMAT_UNKNOWN)
        return found;

    /* 4. Headerless (protocol 0/1) or mixed-protocol pickles. */
    bool is_text = st_sniff_utf8_text(head, head_len, head_is_whole);
    if ((found = st_sniff_pickle_walk(head, head_len, head_is_whole, is_text, info)) !=
        ST_FORMAT_UNKNOWN)
        return found;

    /* 5. A script's #! line, then JSON and text. The pickle walk above already ruled
     * out a pickle. */
    if ((found = st_sniff_shebang(head, head_len, info)) != ST_FORMAT_UNKNOWN)
        return found;
    if ((found = st_sniff_text(head, head_len, head_is_whole, info)) != ST_FORMAT_UNKNOWN)
        return found;

    /* 6. Weak signals: zlib, then ONNX. */
    if ((found = st_sniff_zlib(head, head_len, info)) != ST_FORMAT_UNKNOWN ||
        (found = st_sniff_onnx(head, head_len, file_size, info)) != ST_FORMAT_UNKNOWN)
        return found;

    /* 7. Nothing matched: say what it looked like when it resembles safetensors. */
    if (head_len >= 9 && head[8] == '{')
        st_sniff_note(info,
                      "no known format; starts like a safetensors header (length %llu) but is "
                      "not valid safetensors",
                      (unsigned long long)st_sniff_le64(head));
    else
        st_sniff_note(info, "no known format (first byte 0x%02x)", head[0]);
    return ST_FORMAT_UNKNOWN;
}
