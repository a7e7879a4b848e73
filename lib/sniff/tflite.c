/* TFLite (lib/sniff/, see sniff.h): a FlatBuffer with the identifier "TFL3" at offset 4
 * whose root-table offset (u32 at 0) points inside the file. */
#include "sniff_formats.h"
#include "sniff_util.h"

st_format st_sniff_tflite(const uint8_t *head, size_t head_len, uint64_t file_size,
                          st_sniff_info *info)
{
    if (!st_sniff_has_at(head, head_len, 4, "TFL3", 4))
        return ST_FORMAT_UNKNOWN;
    uint32_t root = st_sniff_le32(head);
    uint64_t limit = file_size != ST_SNIFF_SIZE_UNKNOWN ? file_size : (uint64_t)1 << 31;
    if (root < 8 || root % 4 != 0 || root >= limit)
        return ST_FORMAT_UNKNOWN;
    st_sniff_note(info, "TFLite FlatBuffer: identifier TFL3 at offset 4, root table at %u", root);
    return ST_FORMAT_TFLITE;
}
