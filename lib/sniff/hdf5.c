/* HDF5 (lib/sniff/, see sniff.h): the superblock signature at offset 0, or after a
 * user block at 512, 1024, 2048, ... */
#include "sniff_formats.h"
#include "sniff_util.h"

static const uint8_t hdf5_magic[8] = {0x89, 'H', 'D', 'F', 0x0d, 0x0a, 0x1a, 0x0a};

st_format st_sniff_hdf5(const uint8_t *head, size_t head_len, st_sniff_info *info)
{
    if (!st_sniff_has_at(head, head_len, 0, hdf5_magic, sizeof hdf5_magic))
        return ST_FORMAT_UNKNOWN;
    st_sniff_note(info, "HDF5 superblock signature at offset 0");
    return ST_FORMAT_HDF5;
}

st_format st_sniff_hdf5_user_block(const uint8_t *head, size_t head_len, st_sniff_info *info)
{
    for (size_t offset = 512; offset <= head_len && head_len - offset >= sizeof hdf5_magic;
         offset *= 2) {
        if (memcmp(head + offset, hdf5_magic, sizeof hdf5_magic) == 0) {
            st_sniff_note(info, "HDF5 superblock signature at offset %zu (after a user block)",
                          offset);
            return ST_FORMAT_HDF5;
        }
    }
    return ST_FORMAT_UNKNOWN;
}
