/* GIF 87a/89a (sniff_formats.h), an inert format admitted beside a model, validated
 * by structure: header, logical screen descriptor and its colour table, then image
 * descriptors (with their colour tables, LZW code size and data sub-blocks) and
 * extensions (label and sub-blocks), and the trailer 0x3B as the last byte. Nothing is
 * allocated; every length is checked against the bytes present. */
#include "sniff_formats.h"
#include "sniff_util.h"

bool st_sniff_gif_magic(const uint8_t *head, size_t len)
{
    return st_sniff_has_at(head, len, 0, "GIF87a", 6) || st_sniff_has_at(head, len, 0, "GIF89a", 6);
}

/* Skips data sub-blocks at *at (size byte, bytes; a 0 size ends them). */
static bool skip_sub_blocks(const uint8_t *buf, size_t len, size_t *at)
{
    for (;;) {
        if (*at >= len)
            return false;
        uint8_t size = buf[(*at)++];
        if (size == 0)
            return true;
        if (size > len - *at)
            return false;
        *at += size;
    }
}

/* A colour table of 3 * 2^(N+1) bytes when the flag's top bit says one follows. */
static bool skip_color_table(uint8_t flags, size_t len, size_t *at)
{
    if ((flags & 0x80) == 0)
        return true;
    size_t size = 3u << ((flags & 7) + 1);
    if (size > len - *at)
        return false;
    *at += size;
    return true;
}

bool st_sniff_gif_valid(const uint8_t *buf, size_t len, st_sniff_info *info)
{
    if (!st_sniff_gif_magic(buf, len) || len < 13) {
        st_sniff_note(info, "GIF: no header and screen descriptor");
        return false;
    }
    size_t at = 13;
    if (!skip_color_table(buf[10], len, &at)) {
        st_sniff_note(info, "GIF: the global colour table is cut");
        return false;
    }
    unsigned images = 0;
    while (at < len) {
        uint8_t block = buf[at++];
        if (block == 0x3B) {
            if (at != len || images == 0) {
                st_sniff_note(info, "GIF: the trailer is not the last byte after an image");
                return false;
            }
            return true;
        }
        if (block == 0x21) {
            /* the label byte, then sub-blocks */
            bool ok = at < len;
            if (ok) {
                at++;
                ok = skip_sub_blocks(buf, len, &at);
            }
            if (!ok) {
                st_sniff_note(info, "GIF: an extension is cut");
                return false;
            }
        } else if (block == 0x2C) {
            if (len - at < 9) {
                st_sniff_note(info, "GIF: an image descriptor is cut");
                return false;
            }
            uint8_t flags = buf[at + 8];
            at += 9;
            if (!skip_color_table(flags, len, &at) || at >= len) {
                st_sniff_note(info, "GIF: a local colour table is cut");
                return false;
            }
            uint8_t code_size = buf[at++];
            if (code_size < 2 || code_size > 8 || !skip_sub_blocks(buf, len, &at)) {
                st_sniff_note(info, "GIF: bad image data (LZW code size %u)", code_size);
                return false;
            }
            images++;
        } else {
            st_sniff_note(info, "GIF: unknown block 0x%02x at offset %zu", block, at - 1);
            return false;
        }
    }
    st_sniff_note(info, "GIF: no trailer");
    return false;
}
