/* JPEG (sniff_formats.h), an inert format admitted beside a model, validated by
 * structure: SOI, then marker segments (each length checked against the bytes
 * present), a frame header (SOF) before the first scan, each scan's entropy-coded
 * data up to the next marker (stuffed 0xFF00 and restart markers inside), and EOI as
 * the last two bytes. Nothing is allocated. */
#include "sniff_formats.h"
#include "sniff_util.h"

bool st_sniff_jpeg_magic(const uint8_t *head, size_t len)
{
    return len >= 3 && head[0] == 0xff && head[1] == 0xd8 && head[2] == 0xff;
}

static uint16_t be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static bool is_sof(uint8_t marker)
{
    return marker >= 0xc0 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 && marker != 0xcc;
}

bool st_sniff_jpeg_valid(const uint8_t *buf, size_t len, st_sniff_info *info)
{
    if (!st_sniff_jpeg_magic(buf, len)) {
        st_sniff_note(info, "JPEG: no start of image");
        return false;
    }
    size_t at = 2;
    bool frame = false, scanned = false;
    while (at < len) {
        if (buf[at] != 0xff) {
            st_sniff_note(info, "JPEG: no marker at offset %zu", at);
            return false;
        }
        while (at < len && buf[at] == 0xff) /* fill bytes */
            at++;
        if (at >= len)
            break;
        uint8_t marker = buf[at++];
        if (marker == 0xd9) {
            if (at != len || !scanned) {
                st_sniff_note(info, "JPEG: end of image is not the last bytes after a scan");
                return false;
            }
            return true;
        }
        if (marker == 0x00 || marker == 0xd8 || (marker >= 0xd0 && marker <= 0xd7) ||
            marker == 0x01) {
            st_sniff_note(info, "JPEG: marker 0x%02x out of place at offset %zu", marker, at - 1);
            return false;
        }
        if (len - at < 2 || be16(buf + at) < 2 || be16(buf + at) > len - at) {
            st_sniff_note(info, "JPEG: the segment of marker 0x%02x is cut", marker);
            return false;
        }
        size_t segment = be16(buf + at);
        if (is_sof(marker))
            frame = true;
        at += segment;
        if (marker != 0xda)
            continue;
        if (!frame) {
            st_sniff_note(info, "JPEG: a scan before any frame header");
            return false;
        }
        scanned = true;
        /* entropy-coded data: up to an 0xFF that is neither stuffing nor a restart */
        while (at < len) {
            if (buf[at] != 0xff) {
                at++;
                continue;
            }
            if (len - at < 2)
                break;
            uint8_t next = buf[at + 1];
            if (next == 0x00 || (next >= 0xd0 && next <= 0xd7)) {
                at += 2;
                continue;
            }
            break;
        }
    }
    st_sniff_note(info, "JPEG: no end of image");
    return false;
}
