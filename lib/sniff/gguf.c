/* GGUF (lib/sniff/, see sniff.h): llama.cpp's format, "GGUF" and a version at offset 0. */
#include "sniff_formats.h"
#include "sniff_util.h"

st_format st_sniff_gguf(const uint8_t *head, size_t head_len, st_sniff_info *info)
{
    if (!st_sniff_has_at(head, head_len, 0, "GGUF", 4))
        return ST_FORMAT_UNKNOWN;
    if (head_len >= 8)
        st_sniff_note(info, "GGUF version %u", st_sniff_le32(head + 4));
    else
        st_sniff_note(info, "GGUF magic at offset 0");
    return ST_FORMAT_GGUF;
}
