/* PNG (sniff_formats.h), an inert format admitted beside a model (an image of the
 * model card), validated by structure: the signature, then chunks (length, type,
 * data, CRC-32 checked) of which the first is a well-formed IHDR, at least one IDAT,
 * only known critical chunks, and IEND as the last bytes. Nothing is allocated; the
 * lengths are checked against the bytes present. */
#include "sniff_formats.h"
#include "sniff_util.h"

static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

bool st_sniff_png_magic(const uint8_t *head, size_t len)
{
    return st_sniff_has_at(head, len, 0, png_signature, sizeof png_signature);
}

static bool is_letter(uint8_t c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static bool ihdr_valid(const uint8_t *d)
{
    uint32_t width = be32(d), height = be32(d + 4);
    uint8_t depth = d[8], color = d[9];
    if (width == 0 || height == 0 || width > 0x7fffffffu || height > 0x7fffffffu)
        return false;
    bool depth_ok;
    switch (color) {
    case 0: /* greyscale */
        depth_ok = depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16;
        break;
    case 3: /* palette */
        depth_ok = depth == 1 || depth == 2 || depth == 4 || depth == 8;
        break;
    case 2: /* RGB */
    case 4: /* grey + alpha */
    case 6: /* RGBA */
        depth_ok = depth == 8 || depth == 16;
        break;
    default:
        depth_ok = false;
    }
    return depth_ok && d[10] == 0 && d[11] == 0 && d[12] <= 1;
}

bool st_sniff_png_valid(const uint8_t *buf, size_t len, st_sniff_info *info)
{
    if (!st_sniff_png_magic(buf, len)) {
        st_sniff_note(info, "PNG: no signature");
        return false;
    }
    size_t at = sizeof png_signature;
    bool seen_idat = false;
    for (unsigned index = 0;; index++) {
        if (len - at < 12) {
            st_sniff_note(info, "PNG: a chunk is cut at offset %zu (no IEND)", at);
            return false;
        }
        uint32_t length = be32(buf + at);
        const uint8_t *type = buf + at + 4;
        if (length > 0x7fffffffu || length > len - at - 12) {
            st_sniff_note(info, "PNG: the chunk at offset %zu runs past the end", at);
            return false;
        }
        if (!is_letter(type[0]) || !is_letter(type[1]) || !is_letter(type[2]) ||
            !is_letter(type[3])) {
            st_sniff_note(info, "PNG: the chunk at offset %zu has no valid type", at);
            return false;
        }
        uint32_t crc = be32(buf + at + 8 + length);
        if (st_sniff_crc32(type, (size_t)length + 4) != crc) {
            st_sniff_note(info, "PNG: CRC mismatch in the %.4s chunk at offset %zu",
                          (const char *)type, at);
            return false;
        }
        bool ihdr = memcmp(type, "IHDR", 4) == 0;
        if (index == 0 && (!ihdr || length != 13 || !ihdr_valid(type + 4))) {
            st_sniff_note(info, "PNG: the first chunk is not a valid IHDR");
            return false;
        }
        if (index > 0 && ihdr) {
            st_sniff_note(info, "PNG: a second IHDR at offset %zu", at);
            return false;
        }
        bool critical = type[0] >= 'A' && type[0] <= 'Z';
        if (memcmp(type, "IDAT", 4) == 0) {
            seen_idat = true;
        } else if (memcmp(type, "IEND", 4) == 0) {
            at += 12 + (size_t)length;
            if (length != 0 || !seen_idat || at != len) {
                st_sniff_note(info, "PNG: IEND is not an empty last chunk after the image data");
                return false;
            }
            return true;
        } else if (critical && !ihdr && memcmp(type, "PLTE", 4) != 0) {
            st_sniff_note(info, "PNG: unknown critical chunk %.4s", (const char *)type);
            return false;
        }
        at += 12 + (size_t)length;
    }
}
