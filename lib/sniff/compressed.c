/* Compressed streams and archives (lib/sniff/, see sniff.h): 7z, xz, gzip, zstd
 * (frames and skippable frames), lz4, bzip2 by their magics at offset 0, and zlib,
 * whose two-byte header is a weak signal tried only on binary content. */
#include "sniff_formats.h"
#include "sniff_util.h"

typedef struct compressed_magic {
    const char *name;
    uint8_t bytes[6];
    size_t len;
} compressed_magic;

static const compressed_magic compressed_magics[] = {
    {"7z", {0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c}, 6},
    {"xz", {0xfd, '7', 'z', 'X', 'Z', 0x00}, 6},
    {"gzip", {0x1f, 0x8b, 0x08}, 3},
    {"zstd", {0x28, 0xb5, 0x2f, 0xfd}, 4},
    {"lz4 frame", {0x04, 0x22, 0x4d, 0x18}, 4},
    {"lz4 legacy", {0x02, 0x21, 0x4c, 0x18}, 4},
};

st_format st_sniff_compressed(const uint8_t *head, size_t head_len, st_sniff_info *info)
{
    for (size_t i = 0; i < sizeof compressed_magics / sizeof compressed_magics[0]; i++) {
        const compressed_magic *m = &compressed_magics[i];
        if (st_sniff_has_at(head, head_len, 0, m->bytes, m->len)) {
            st_sniff_note(info, "%s archive/stream magic at offset 0", m->name);
            return ST_FORMAT_COMPRESSED;
        }
    }
    /* bzip2: "BZh" and a block size digit, then the block or end-of-stream magic. */
    if (head_len >= 10 && memcmp(head, "BZh", 3) == 0 && head[3] >= '1' && head[3] <= '9' &&
        (memcmp(head + 4, "\x31\x41\x59\x26\x53\x59", 6) == 0 ||
         memcmp(head + 4, "\x17\x72\x45\x38\x50\x90", 6) == 0)) {
        st_sniff_note(info, "bzip2 stream magic at offset 0");
        return ST_FORMAT_COMPRESSED;
    }
    /* zstd skippable frames 0x184D2A50..5F. */
    if (head_len >= 4 && (head[0] & 0xf0) == 0x50 && head[1] == 0x2a && head[2] == 0x4d &&
        head[3] == 0x18) {
        st_sniff_note(info, "zstd skippable frame at offset 0");
        return ST_FORMAT_COMPRESSED;
    }
    return ST_FORMAT_UNKNOWN;
}

/* CMF 0x78 (deflate, 32K window), a valid FCHECK, no preset dictionary, and a first
 * deflate block type other than the reserved 3. */
st_format st_sniff_zlib(const uint8_t *head, size_t head_len, st_sniff_info *info)
{
    if (head_len >= 3 && head[0] == 0x78 &&
        (head[1] == 0x01 || head[1] == 0x5e || head[1] == 0x9c || head[1] == 0xda) &&
        ((head[2] >> 1) & 3) != 3) {
        st_sniff_note(info, "zlib stream header 0x78 0x%02x at offset 0", head[1]);
        return ST_FORMAT_COMPRESSED;
    }
    return ST_FORMAT_UNKNOWN;
}
