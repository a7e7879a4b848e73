/* The helpers the format files of lib/sniff/ share (sniff_util.h). */
#include "sniff_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void st_sniff_note(st_sniff_info *info, const char *fmt, ...)
{
    if (info == NULL)
        return;
    va_list args;
    va_start(args, fmt);
    vsnprintf(info->detail, sizeof info->detail, fmt, args);
    va_end(args);
}

void st_sniff_printable(char *out, size_t out_size, const uint8_t *name, size_t name_len)
{
    size_t limit = name_len < 48 ? name_len : 48;
    size_t n = 0;
    for (size_t i = 0; i < limit && n + 1 < out_size; i++)
        out[n++] = (name[i] >= 0x20 && name[i] < 0x7f && name[i] != '\'') ? (char)name[i] : '?';
    if (name_len > limit && n + 4 < out_size) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
}

uint32_t st_sniff_crc32(const uint8_t *p, size_t len)
{
    /* by nibbles: a 16-entry table, no state to initialise */
    static const uint32_t table[16] = {0x00000000u, 0x1db71064u, 0x3b6e20c8u, 0x26d930acu,
                                       0x76dc4190u, 0x6b6b51f4u, 0x4db26158u, 0x5005713cu,
                                       0xedb88320u, 0xf00f9344u, 0xd6d6a3e8u, 0xcb61b38cu,
                                       0x9b64c2b0u, 0x86d3d2d4u, 0xa00ae278u, 0xbdbdf21cu};
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        crc = (crc >> 4) ^ table[crc & 15];
        crc = (crc >> 4) ^ table[crc & 15];
    }
    return crc ^ 0xffffffffu;
}
