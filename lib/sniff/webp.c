/* WebP (sniff_formats.h), an inert format admitted beside a model, validated by
 * structure: a RIFF container whose size is the file's, form type WEBP, chunks
 * (FourCC, size, data, padding to even) that fill it exactly, the first one VP8
 * (with its key-frame start code), VP8L (with its signature byte) or VP8X. Nothing
 * is allocated; every length is checked against the bytes present. */
#include "sniff_formats.h"
#include "sniff_util.h"

bool st_sniff_webp_magic(const uint8_t *head, size_t len)
{
    return st_sniff_has_at(head, len, 0, "RIFF", 4) && st_sniff_has_at(head, len, 8, "WEBP", 4);
}

static bool fourcc_valid(const uint8_t *p)
{
    for (int i = 0; i < 4; i++)
        if (p[i] < 0x20 || p[i] > 0x7e)
            return false;
    return true;
}

bool st_sniff_webp_valid(const uint8_t *buf, size_t len, st_sniff_info *info)
{
    if (!st_sniff_webp_magic(buf, len) || len < 20) {
        st_sniff_note(info, "WebP: no RIFF/WEBP header");
        return false;
    }
    uint32_t riff_size = st_sniff_le32(buf + 4);
    if ((uint64_t)riff_size + 8 != len) {
        st_sniff_note(info, "WebP: the RIFF size %u is not the file's (%zu bytes)",
                      (unsigned)riff_size, len);
        return false;
    }
    size_t at = 12;
    for (unsigned index = 0; at < len; index++) {
        if (len - at < 8 || !fourcc_valid(buf + at)) {
            st_sniff_note(info, "WebP: a chunk header is cut or malformed at offset %zu", at);
            return false;
        }
        const uint8_t *fourcc = buf + at;
        uint32_t size = st_sniff_le32(buf + at + 4);
        uint64_t padded = (uint64_t)size + (size & 1);
        if (padded > len - at - 8) {
            st_sniff_note(info, "WebP: the %.4s chunk at offset %zu runs past the end",
                          (const char *)fourcc, at);
            return false;
        }
        const uint8_t *data = buf + at + 8;
        if (index == 0) {
            bool ok = false;
            if (memcmp(fourcc, "VP8 ", 4) == 0)
                ok = size >= 10 && data[3] == 0x9d && data[4] == 0x01 && data[5] == 0x2a;
            else if (memcmp(fourcc, "VP8L", 4) == 0)
                ok = size >= 5 && data[0] == 0x2f;
            else if (memcmp(fourcc, "VP8X", 4) == 0)
                ok = size >= 10;
            if (!ok) {
                st_sniff_note(info, "WebP: the first chunk is not a valid VP8, VP8L or VP8X");
                return false;
            }
        }
        at += 8 + (size_t)padded;
    }
    return true;
}
