/* SentencePiece model files (tokenizer.model; sniff_formats.h), an inert format
 * admitted beside a model, validated by structure: the whole file is one protobuf
 * ModelProto. Its fields are all length-delimited (1 pieces, 2 trainer_spec,
 * 3 normalizer_spec, 4 self_test_data, 5 denormalizer_spec); there is at least one
 * piece, and each piece holds a UTF-8 piece string (field 1), a float score (2) and
 * a type (3) only. The other messages are walked as well-formed protobuf one level
 * deep (tags, wire types, lengths within the bytes). Nothing is allocated; every
 * varint is at most 10 bytes and every length is checked against the bytes present. */
#include "sniff_formats.h"
#include "sniff_util.h"

#include "st_utf8.h"

/* Reads a varint at *at (below end): false when cut or longer than 10 bytes. */
static bool read_varint(const uint8_t *buf, size_t end, size_t *at, uint64_t *value)
{
    uint64_t v = 0;
    for (unsigned shift = 0, i = 0; i < 10; i++, shift += 7) {
        if (*at >= end)
            return false;
        uint8_t byte = buf[(*at)++];
        v |= (uint64_t)(byte & 0x7f) << shift;
        if ((byte & 0x80) == 0) {
            *value = v;
            return true;
        }
    }
    return false;
}

/* One field at *at: its number and wire type, and for length-delimited fields the
 * bounds of its payload. False when malformed (group wire types included). */
typedef struct pb_field {
    uint64_t number;
    unsigned wire;
    size_t start, end; /* payload of a length-delimited field */
} pb_field;

static bool read_field(const uint8_t *buf, size_t end, size_t *at, pb_field *field)
{
    uint64_t tag, value;
    if (!read_varint(buf, end, at, &tag))
        return false;
    field->number = tag >> 3;
    field->wire = (unsigned)(tag & 7);
    if (field->number == 0 || field->number > 536870911u)
        return false;
    switch (field->wire) {
    case 0:
        return read_varint(buf, end, at, &value);
    case 1:
        if (end - *at < 8)
            return false;
        *at += 8;
        return true;
    case 5:
        if (end - *at < 4)
            return false;
        *at += 4;
        return true;
    case 2:
        if (!read_varint(buf, end, at, &value) || value > end - *at)
            return false;
        field->start = *at;
        field->end = *at + (size_t)value;
        *at = field->end;
        return true;
    default:
        return false; /* 3, 4: groups (not in these messages); 6, 7: invalid */
    }
}

/* Every field of the message [start, end) is well formed. */
static bool message_valid(const uint8_t *buf, size_t start, size_t end)
{
    size_t at = start;
    pb_field field;
    while (at < end)
        if (!read_field(buf, end, &at, &field))
            return false;
    return true;
}

static bool piece_valid(const uint8_t *buf, size_t start, size_t end)
{
    size_t at = start;
    bool has_piece = false;
    pb_field field;
    while (at < end) {
        if (!read_field(buf, end, &at, &field))
            return false;
        if (field.number == 1 && field.wire == 2) {
            if (!st_utf8_valid(buf + field.start, field.end - field.start, NULL))
                return false;
            has_piece = true;
        } else if (!(field.number == 2 && field.wire == 5) &&
                   !(field.number == 3 && field.wire == 0)) {
            return false;
        }
    }
    return has_piece;
}

bool st_sniff_sentencepiece_magic(const uint8_t *head, size_t len)
{
    /* field 1 (pieces), a length, then the piece's field 1 (its string) */
    size_t at = 0;
    uint64_t length;
    if (len < 3 || head[at++] != 0x0a || !read_varint(head, len, &at, &length))
        return false;
    return at < len && head[at] == 0x0a;
}

bool st_sniff_sentencepiece_valid(const uint8_t *buf, size_t len, st_sniff_info *info)
{
    if (!st_sniff_sentencepiece_magic(buf, len)) {
        st_sniff_note(info, "SentencePiece: the file does not start with a piece");
        return false;
    }
    size_t at = 0, pieces = 0;
    pb_field field;
    while (at < len) {
        size_t field_at = at;
        if (!read_field(buf, len, &at, &field) || field.wire != 2 || field.number > 5) {
            st_sniff_note(info, "SentencePiece: not a ModelProto field at offset %zu", field_at);
            return false;
        }
        bool ok = field.number == 1 ? piece_valid(buf, field.start, field.end)
                                    : message_valid(buf, field.start, field.end);
        if (!ok) {
            st_sniff_note(info, "SentencePiece: a malformed message (field %u) at offset %zu",
                          (unsigned)field.number, field_at);
            return false;
        }
        if (field.number == 1)
            pieces++;
    }
    if (pieces == 0) {
        st_sniff_note(info, "SentencePiece: no pieces");
        return false;
    }
    return true;
}
