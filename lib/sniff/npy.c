/* NumPy .npy (lib/sniff/, see sniff.h): the magic, the version and the dtype of
 * the header dict, and whether the array holds pickled objects ('|O'), with what
 * that pickle imports. */
#include "sniff_formats.h"
#include "sniff_util.h"

#include <stdio.h>
#include <string.h>

const uint8_t st_sniff_npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* Whether the .npy header dict in buf holds an object dtype ('|O'): its data is a pickle. */
bool st_sniff_npy_has_objects(const uint8_t *buf, size_t len)
{
    if (len < 10)
        return false;
    size_t header_start = buf[6] >= 2 ? 12 : 10;
    uint64_t header_len =
        buf[6] >= 2 ? (len >= 12 ? st_sniff_le32(buf + 8) : 0) : st_sniff_le16(buf + 8);
    if (header_start >= len)
        return false;
    size_t avail = len - header_start;
    size_t n = header_len < avail ? (size_t)header_len : avail;
    for (size_t i = 0; i + 1 < n; i++)
        if (buf[header_start + i] == '|' && buf[header_start + i + 1] == 'O')
            return true;
    return false;
}

void st_sniff_npy_findings(const uint8_t *buf, size_t len, uint64_t base,
                           st_pickle_findings *findings)
{
    if (findings == NULL || len < 10 || !st_sniff_npy_has_objects(buf, len))
        return;
    size_t header_start = buf[6] >= 2 ? 12 : 10;
    uint64_t header_len =
        buf[6] >= 2 ? (len >= 12 ? st_sniff_le32(buf + 8) : 0) : st_sniff_le16(buf + 8);
    if (header_len >= len - header_start)
        return;
    size_t payload = header_start + (size_t)header_len;
    st_pickle_collect_findings(buf + payload, len - payload, base + payload, findings);
}

static void note_npy(st_sniff_info *info, const uint8_t *buf, size_t len)
{
    char descr[40] = "?";
    size_t header_start = (len > 6 && buf[6] >= 2) ? 12 : 10;
    /* descr is the quoted value after 'descr': in the header dict. */
    for (size_t i = header_start; i + 8 <= len && i < header_start + 512; i++) {
        if (memcmp(buf + i, "'descr':", 8) != 0)
            continue;
        size_t k = i + 8;
        while (k < len && buf[k] == ' ')
            k++;
        if (k < len && buf[k] == '[') {
            snprintf(descr, sizeof descr, "structured");
        } else if (k < len && (buf[k] == '\'' || buf[k] == '"')) {
            size_t start = k + 1, end = start;
            while (end < len && end - start < 16 && buf[end] != buf[k])
                end++;
            st_sniff_printable(descr, sizeof descr, buf + start, end - start);
        }
        break;
    }
    unsigned major = len > 6 ? buf[6] : 0, minor = len > 7 ? buf[7] : 0;
    if (st_sniff_npy_has_objects(buf, len))
        st_sniff_note(info,
                      "NumPy .npy v%u.%u, descr %s: object array (|O), pickled objects follow",
                      major, minor, descr);
    else
        st_sniff_note(info, "NumPy .npy v%u.%u, descr %s", major, minor, descr);
}

st_format st_sniff_npy(const uint8_t *head, size_t head_len, st_sniff_info *info)
{
    if (!st_sniff_has_at(head, head_len, 0, st_sniff_npy_magic, sizeof st_sniff_npy_magic))
        return ST_FORMAT_UNKNOWN;
    note_npy(info, head, head_len);
    if (info != NULL)
        st_sniff_npy_findings(head, head_len, 0, &info->findings);
    return ST_FORMAT_NUMPY;
}
