/* UTF-8 text and JSON (lib/sniff/, see sniff.h): valid UTF-8 (st_utf8.h) without NUL
 * or control characters other than tab, LF, FF, CR, and JSON when such text starts
 * with '{' or '['. A protocol-0 pickle is ASCII too, so text is never a pickle that
 * can import or call; a data-only one ("N.B." is NONE STOP) is text. */
#include "sniff_formats.h"
#include "sniff_util.h"
#include "st_utf8.h"

bool st_sniff_utf8_text(const uint8_t *buf, size_t len, bool complete)
{
    size_t i = 0;
    while (i < len) {
        uint32_t cp = 0;
        size_t n = st_utf8_decode(buf + i, len - i, &cp);
        if (n == ST_UTF8_CUT)
            return !complete;
        if (n == 0)
            return false;
        if (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\f' && cp != '\r')
            return false;
        if (cp >= 0x7f && cp <= 0x9f)
            return false;
        i += n;
    }
    return true;
}

bool st_sniff_is_text(const uint8_t *buf, size_t len, bool complete)
{
    if (len == 0)
        return true;
    if (buf == NULL)
        return false;
    return st_sniff_utf8_text(buf, len, complete) && !st_sniff_is_code_pickle(buf, len, complete);
}

st_format st_sniff_text(const uint8_t *head, size_t head_len, bool whole, st_sniff_info *info)
{
    if (!st_sniff_utf8_text(head, head_len, whole))
        return ST_FORMAT_UNKNOWN;
    size_t i = 0;
    while (i < head_len &&
           (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r'))
        i++;
    if (i < head_len && (head[i] == '{' || head[i] == '[')) {
        st_sniff_note(info, "UTF-8 text starting with '%c' at offset %zu", head[i], i);
        return ST_FORMAT_JSON;
    }
    st_sniff_note(info, "UTF-8 text without control characters%s", whole ? "" : " (in the head)");
    return ST_FORMAT_TEXT;
}
