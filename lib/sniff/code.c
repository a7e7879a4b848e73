/* Code a loader would execute (lib/sniff/, see sniff.h), recognised by content: native
 * executables and shared objects (ELF, PE, Mach-O), Python bytecode (.pyc) and scripts
 * that open with a #! interpreter line. The gate refuses each with its code_* reason
 * (docs/DESIGN.md §3); the file names that mark code are st_code.h's. */
#include "sniff_formats.h"
#include "sniff_util.h"

/* ELF; Mach-O 32/64-bit in either byte order; the fat Mach-O magic, which a Java
 * class file shares (code either way). */
static const struct {
    const char *magic;
    const char *what;
} native_magics[] = {
    {"\x7f"
     "ELF",
     "ELF executable or shared object"},
    {"\xfe\xed\xfa\xce", "Mach-O executable (32-bit, big-endian)"},
    {"\xfe\xed\xfa\xcf", "Mach-O executable (64-bit, big-endian)"},
    {"\xce\xfa\xed\xfe", "Mach-O executable (32-bit)"},
    {"\xcf\xfa\xed\xfe", "Mach-O executable (64-bit)"},
    {"\xca\xfe\xba\xbe", "Mach-O universal binary or Java class file"},
};

/* PE: "MZ", then e_lfanew (at 0x3c) pointing at "PE\0\0" inside the head. An "MZ"
 * alone is two letters of text, so the PE signature is required. */
static bool is_pe(const uint8_t *head, size_t head_len)
{
    if (!st_sniff_has_at(head, head_len, 0, "MZ", 2) || head_len < 0x40)
        return false;
    uint32_t pe = st_sniff_le32(head + 0x3c);
    return pe >= 0x40 && st_sniff_has_at(head, head_len, pe, "PE\0\0", 4);
}

/* Python bytecode: a 16-bit version number, CR LF, then (after 4, 8 or 12 more bytes of
 * flags, date and size, by version) the marshal byte of a code object ('c', or 0xe3
 * with the reference flag). CPython 3 numbers its bytecode 3000-3999, Python 2 from
 * 20121 (1.5) to 62211 (2.7). Text never is bytecode. */
static bool is_python_bytecode(const uint8_t *head, size_t head_len, unsigned *version)
{
    if (head_len < 9 || head[2] != '\r' || head[3] != '\n')
        return false;
    /* the 4 bytes after CR LF are flags (zero) or a date: a real .pyc's first 16 bytes
     * are never text, while "Hi\r\nThe cat" would match the numbers below */
    if (st_sniff_utf8_text(head, head_len < 16 ? head_len : 16, false))
        return false;
    unsigned magic = st_sniff_le16(head);
    if (!((magic >= 3000 && magic < 4000) || (magic >= 20000 && magic < 63000)))
        return false;
    size_t code_at = magic >= 3392 && magic < 4000 ? 16 : magic >= 3230 && magic < 4000 ? 12 : 8;
    if (head_len <= code_at || (head[code_at] != 'c' && head[code_at] != 0xe3))
        return false;
    *version = magic;
    return true;
}

st_format st_sniff_code(const uint8_t *head, size_t head_len, st_sniff_info *info)
{
    for (size_t i = 0; i < sizeof native_magics / sizeof native_magics[0]; i++)
        if (st_sniff_has_at(head, head_len, 0, native_magics[i].magic, 4)) {
            st_sniff_note(info, "%s (magic at offset 0)", native_magics[i].what);
            return ST_FORMAT_NATIVE;
        }
    if (is_pe(head, head_len)) {
        st_sniff_note(info, "Windows PE executable or DLL (MZ, PE signature at offset %u)",
                      st_sniff_le32(head + 0x3c));
        return ST_FORMAT_NATIVE;
    }
    unsigned version = 0;
    if (is_python_bytecode(head, head_len, &version)) {
        st_sniff_note(info, "Python bytecode (magic number %u)", version);
        return ST_FORMAT_PYTHON_BYTECODE;
    }
    return ST_FORMAT_UNKNOWN;
}

static bool has_shebang(const uint8_t *head, size_t head_len)
{
    if (!st_sniff_has_at(head, head_len, 0, "#!", 2))
        return false;
    size_t i = 2;
    while (i < head_len && i < 64 && (head[i] == ' ' || head[i] == '\t'))
        i++;
    return i < head_len && head[i] == '/';
}

st_format st_sniff_shebang(const uint8_t *head, size_t head_len, st_sniff_info *info)
{
    if (!has_shebang(head, head_len) || !st_sniff_utf8_text(head, head_len, false))
        return ST_FORMAT_UNKNOWN;
    size_t end = 0;
    while (end < head_len && end < 48 && head[end] != '\n' && head[end] != '\r')
        end++;
    char line[64];
    st_sniff_printable(line, sizeof line, head, end);
    st_sniff_note(info, "a script: its first line is '%s'", line);
    return ST_FORMAT_SCRIPT;
}
