/* tar, and PyTorch's legacy tar checkpoints (lib/sniff/, see sniff.h): 'ustar' at
 * offset 257, then the member headers the head holds. */
#include "sniff_formats.h"
#include "sniff_util.h"

#include <stdio.h>
#include <string.h>

static bool tar_magic_at(const uint8_t *buf, size_t len, size_t header)
{
    return st_sniff_has_at(buf, len, header + 257, "ustar\0", 6) ||
           st_sniff_has_at(buf, len, header + 257, "ustar  \0", 8);
}

/* A tar size field: octal digits (spaces/NULs around), or base-256 when the top bit is set. */
static bool tar_size(const uint8_t *field, uint64_t *out)
{
    uint64_t v = 0;
    if (field[0] & 0x80) {
        for (size_t i = 1; i < 12; i++) {
            if (v >> 56)
                return false;
            v = (v << 8) | field[i];
        }
        *out = v;
        return true;
    }
    size_t i = 0;
    while (i < 12 && field[i] == ' ')
        i++;
    for (; i < 12 && field[i] >= '0' && field[i] <= '7'; i++) {
        if (v >> 60)
            return false;
        v = (v << 3) | (uint64_t)(field[i] - '0');
    }
    *out = v;
    return true;
}

static bool tar_name_is(const uint8_t *name, size_t n, const char *want)
{
    if (n >= 2 && name[0] == '.' && name[1] == '/')
        name += 2, n -= 2;
    return n == strlen(want) && memcmp(name, want, n) == 0;
}

/* Walks the tar headers present in the head. PyTorch's legacy tar format has the
 * members sys_info, pickle, storages and tensors. */
static st_format walk_tar(const uint8_t *head, size_t head_len, st_sniff_info *info)
{
    size_t pos = 0;
    size_t members = 0;
    char pickle_member[64] = "";
    while (pos <= head_len && head_len - pos >= 512) {
        const uint8_t *h = head + pos;
        if (h[0] == '\0')
            break;
        size_t name_len = 0;
        while (name_len < 100 && h[name_len] != '\0')
            name_len++;
        members++;
        if (tar_name_is(h, name_len, "pickle") || tar_name_is(h, name_len, "storages") ||
            tar_name_is(h, name_len, "tensors")) {
            char printable[64];
            st_sniff_printable(printable, sizeof printable, h, name_len);
            st_sniff_note(info, "tar with PyTorch legacy member '%s' (ustar at offset %zu)",
                          printable, pos + 257);
            return ST_FORMAT_PYTORCH_LEGACY;
        }
        uint64_t size = 0, padded = 0, next = 0;
        if (!tar_size(h + 124, &size) || __builtin_add_overflow(size, 511, &padded))
            break;
        padded &= ~(uint64_t)511;
        if (pickle_member[0] == '\0' && h[156] != 'x' && h[156] != 'g' && size > 0) {
            size_t avail = head_len - pos - 512;
            size_t n = size < avail ? (size_t)size : avail;
            if (st_sniff_is_pickle(h + 512, n))
                st_sniff_printable(pickle_member, sizeof pickle_member, h, name_len);
        }
        if (__builtin_add_overflow((uint64_t)pos + 512, padded, &next) || next > head_len)
            break;
        pos = (size_t)next;
    }
    if (pickle_member[0] != '\0')
        st_sniff_note(info, "tar (ustar at offset 257), member '%s' holds a pickle", pickle_member);
    else
        st_sniff_note(info, "tar (ustar at offset 257), %zu member header%s in the head", members,
                      members == 1 ? "" : "s");
    return ST_FORMAT_TAR;
}

st_format st_sniff_tar(const uint8_t *head, size_t head_len, st_sniff_info *info)
{
    if (!tar_magic_at(head, head_len, 0))
        return ST_FORMAT_UNKNOWN;
    return walk_tar(head, head_len, info);
}
