/* The helpers the format files of lib/sniff/ share (sniff_formats.h): the detail
 * sentence, printable names, little-endian reads, bounded magic checks and CRC-32.
 * They sit apart from the dispatcher (sniff.c), which calls the format files, so
 * that the format files never call back into it. Everything here reads untrusted
 * bytes under the rules of sniff.c. Not for use outside lib/sniff/. */
#ifndef ST_SNIFF_UTIL_H
#define ST_SNIFF_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sniff.h"

/* The file size value meaning "not known" (same as ST_FILE_SIZE_UNKNOWN in st_header.h). */
#define ST_SNIFF_SIZE_UNKNOWN UINT64_MAX

/* Writes the detail (info may be NULL). */
void st_sniff_note(st_sniff_info *info, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Copies at most 48 bytes of an untrusted name into out, printable ASCII only,
 * so a detail string never carries control bytes or broken UTF-8. */
void st_sniff_printable(char *out, size_t out_size, const uint8_t *name, size_t name_len);

static inline uint16_t st_sniff_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t st_sniff_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t st_sniff_le64(const uint8_t *p)
{
    return (uint64_t)st_sniff_le32(p) | ((uint64_t)st_sniff_le32(p + 4) << 32);
}

/* Whether magic sits at offset in buf (len bytes). */
static inline bool st_sniff_has_at(const uint8_t *buf, size_t len, size_t offset, const void *magic,
                                   size_t magic_len)
{
    return offset <= len && magic_len <= len - offset &&
           memcmp(buf + offset, magic, magic_len) == 0;
}

static inline bool st_sniff_ends_with(const uint8_t *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);
    return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

/* CRC-32 (ISO-HDLC, as PNG and zip use it) of len bytes. */
uint32_t st_sniff_crc32(const uint8_t *p, size_t len);

#endif
