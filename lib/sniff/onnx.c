/* ONNX / protobuf (lib/sniff/, see sniff.h): a weak signal, a ModelProto's first
 * fields with their wire types, tried only when nothing else matched. */
#include "sniff_formats.h"
#include "sniff_util.h"

static bool read_varint(const uint8_t *buf, size_t len, size_t *pos, uint64_t *out)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (*pos >= len)
            return false;
        uint8_t b = buf[(*pos)++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* ModelProto: field 1 ir_version (varint) first, as every writer emits it, then
 * known fields with their wire types: 2 producer_name, 3 producer_version,
 * 4 domain, 6 doc_string, 7 graph, 8 opset_import, 14 metadata_props,
 * 20 training_info, 25 functions (length-delimited); 5 model_version (varint). */
static bool onnx_signal(const uint8_t *head, size_t head_len, uint64_t file_size,
                        st_sniff_info *info)
{
    size_t pos = 0;
    uint64_t tag = 0, ir_version = 0;
    if (!read_varint(head, head_len, &pos, &tag) || tag != 0x08)
        return false;
    if (!read_varint(head, head_len, &pos, &ir_version) || ir_version == 0 || ir_version > 64)
        return false;
    size_t fields = 0;
    uint64_t first_field = 0;
    while (pos < head_len) {
        size_t field_start = pos;
        if (!read_varint(head, head_len, &pos, &tag)) {
            pos = field_start;
            break;
        }
        uint64_t field = tag >> 3, wire = tag & 7;
        if (field == 5 && wire == 0) {
            uint64_t ignored;
            if (!read_varint(head, head_len, &pos, &ignored)) {
                pos = field_start;
                break;
            }
        } else if (wire == 2 &&
                   (field == 2 || field == 3 || field == 4 || field == 6 || field == 7 ||
                    field == 8 || field == 14 || field == 20 || field == 25)) {
            uint64_t length = 0;
            if (!read_varint(head, head_len, &pos, &length)) {
                pos = field_start;
                break;
            }
            /* The field must fit in the file; past the head it cannot be checked further. */
            if (file_size != ST_SNIFF_SIZE_UNKNOWN && (pos > file_size || length > file_size - pos))
                return false;
            if (length > head_len - pos) {
                if (fields == 0)
                    first_field = field;
                fields++;
                break;
            }
            /* Names and versions are text. */
            if ((field == 2 || field == 3 || field == 4) &&
                !st_sniff_utf8_text(head + pos, (size_t)length, true))
                return false;
            pos += (size_t)length;
        } else {
            /* An unknown field after a valid start: the prefix decides. */
            pos = field_start;
            break;
        }
        if (fields == 0)
            first_field = field;
        fields++;
    }
    if (fields == 0)
        return false;
    /* A buffer that is the whole file must be consumed whole. */
    if (file_size == head_len && pos != head_len)
        return false;
    st_sniff_note(info,
                  "protobuf: ir_version %llu then field %llu, %zu valid ModelProto field%s (ONNX)",
                  (unsigned long long)ir_version, (unsigned long long)first_field, fields,
                  fields == 1 ? "" : "s");
    return true;
}

st_format st_sniff_onnx(const uint8_t *head, size_t head_len, uint64_t file_size,
                        st_sniff_info *info)
{
    return onnx_signal(head, head_len, file_size, info) ? ST_FORMAT_ONNX : ST_FORMAT_UNKNOWN;
}
