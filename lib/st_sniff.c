/* Content classification of what is not safetensors (docs/DESIGN.md §3).
 *
 * Everything here reads untrusted bytes: every offset and length taken from the
 * input is compared against the bytes actually present before use, nothing is
 * allocated, and the work is linear in the bytes looked at (at most
 * ST_SNIFF_HEAD_MAX of the head and ST_SNIFF_TAIL_MAX of the tail). */
#include "st_sniff.h"
#include "st_utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The file size value meaning "not known" (same as ST_FILE_SIZE_UNKNOWN in st_header.h). */
#define SNIFF_SIZE_UNKNOWN UINT64_MAX

static const char *const format_names[ST_FORMAT_COUNT] = {
    [ST_FORMAT_SAFETENSORS] = "safetensors",
    [ST_FORMAT_PICKLE] = "pickle",
    [ST_FORMAT_PYTORCH_ZIP] = "pytorch-zip",
    [ST_FORMAT_PYTORCH_LEGACY] = "pytorch-legacy",
    [ST_FORMAT_ZIP] = "zip",
    [ST_FORMAT_TAR] = "tar",
    [ST_FORMAT_NUMPY] = "numpy",
    [ST_FORMAT_GGUF] = "gguf",
    [ST_FORMAT_HDF5] = "hdf5",
    [ST_FORMAT_TFLITE] = "tflite",
    [ST_FORMAT_ONNX] = "onnx",
    [ST_FORMAT_COMPRESSED] = "compressed",
    [ST_FORMAT_TEXT] = "text",
    [ST_FORMAT_JSON] = "json",
    [ST_FORMAT_UNKNOWN] = "unknown",
};

const char *st_format_name(st_format format)
{
    if ((unsigned)format >= ST_FORMAT_COUNT)
        return NULL;
    return format_names[format];
}

/* ---------------------------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------------------------- */

__attribute__((format(printf, 2, 3))) static void note(st_sniff_info *info, const char *fmt, ...)
{
    if (info == NULL)
        return;
    va_list args;
    va_start(args, fmt);
    vsnprintf(info->detail, sizeof info->detail, fmt, args);
    va_end(args);
}

static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | ((uint64_t)le32(p + 4) << 32);
}

static bool has_at(const uint8_t *buf, size_t len, size_t offset, const void *magic,
                   size_t magic_len)
{
    return offset <= len && magic_len <= len - offset &&
           memcmp(buf + offset, magic, magic_len) == 0;
}

/* Copies at most 48 bytes of an untrusted name into out, printable ASCII only,
 * so a detail string never carries control bytes or broken UTF-8. */
static void printable_copy(char *out, size_t out_size, const uint8_t *name, size_t name_len)
{
    size_t limit = name_len < 48 ? name_len : 48;
    size_t n = 0;
    for (size_t i = 0; i < limit && n + 1 < out_size; i++)
        out[n++] = (name[i] >= 0x20 && name[i] < 0x7f && name[i] != '\'') ? (char)name[i] : '?';
    if (name_len > limit && n + 4 < out_size) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
}

static bool ends_with(const uint8_t *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);
    return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

/* ---------------------------------------------------------------------------------------------
 * UTF-8 text
 * ------------------------------------------------------------------------------------------- */

/* UTF-8 without NUL, C0 controls other than tab, LF, FF, CR, DEL or C1 controls.
 * When complete is false, a valid but cut multi-byte character at the end is allowed. */
static bool is_utf8_text(const uint8_t *buf, size_t len, bool complete)
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

/* ---------------------------------------------------------------------------------------------
 * Pickle opcode walker
 *
 * Walks the opcodes of protocols 0-5 from the start of a buffer, checking each
 * argument against the bytes present, and runs a small model of CPython's
 * unpickler: a stack of item kinds with its mark stack and the memo indexes set.
 * An opcode CPython would refuse (REDUCE on an empty stack, APPENDS without a
 * mark, GET of an index never PUT, a call whose argument is not a tuple) ends
 * the valid prefix. The model is never stricter than CPython: where it cannot
 * know (memo contents, deep stacks) it accepts. That is what keeps prose from
 * reading as a protocol-0 pickle (letters are opcodes, but sentences do not
 * balance a stack) without letting a real pickle end its walk early.
 * ------------------------------------------------------------------------------------------- */

/* Longest string argument taken as real when it runs past the buffer: below the
 * smallest length four text bytes can spell (a tab first: 0x09000000, 144 MiB). */
#define PICKLE_PLAUSIBLE_LENGTH ((uint64_t)128 << 20)

/* Past these sizes the model stops checking the stack (lenient mode). */
#define PICKLE_STACK_MAX 512
#define PICKLE_MARKS_MAX 128

/* What an item on the unpickler's stack is, as far as calls care. */
enum pickle_kind {
    KIND_UNKNOWN,  /* from the memo, a persistent id, or beyond the model */
    KIND_CALLABLE, /* GLOBAL, STACK_GLOBAL, EXT: an imported object */
    KIND_OBJECT,   /* the result of a call: may be anything, a callable or a tuple too */
    KIND_TUPLE,
    KIND_DICT,
    KIND_DATA,       /* numbers, strings, bytes, lists, sets, None, booleans: never callable */
    KIND_PERSISTENT, /* from PERSID/BINPERSID: the loader's own objects, not the file's code */
};

typedef struct pickle_walk {
    size_t opcodes;       /* valid opcodes read */
    size_t end;           /* offset after the last valid opcode */
    bool reached_stop;    /* a valid STOP ended the walk */
    bool clean_stop;      /* ... with one item, no mark, at the end or before another opcode */
    bool invalid;         /* the walk ended on an opcode CPython would refuse */
    bool jumped;          /* a binary argument was read (text can be skipped over by it) */
    bool runs_code;       /* a call of an imported or unknown callable, or INST */
    bool imports_as_text; /* GLOBAL/INST in a stream of text opcodes only */
    int protocol;         /* last PROTO argument, -1 when none */
    uint8_t code_op;      /* the opcode that made runs_code or imports_as_text */
    size_t code_offset;   /* and its offset */
    uint8_t global_op;    /* the first GLOBAL or INST, for the detail */
    const uint8_t *global_module, *global_name;
    size_t global_module_len, global_name_len;
} pickle_walk;

typedef struct pickle_stack {
    size_t size;                      /* items on the stack, all marks included */
    uint8_t kinds[PICKLE_STACK_MAX];  /* enum pickle_kind of each item */
    size_t marks;                     /* marks in force */
    size_t mark_at[PICKLE_MARKS_MAX]; /* stack size when each mark was set */
    uint8_t memo_small[32];           /* which memo indexes 0..255 were set */
    size_t memo_count;                /* distinct memo entries set */
    bool memo_uncertain;              /* an index >= 256 was set: count approximate */
    bool lenient;                     /* the model overflowed: every check passes */
} pickle_stack;

/* Items above the topmost mark. */
static size_t stack_depth(const pickle_stack *st)
{
    return st->size - (st->marks > 0 ? st->mark_at[st->marks - 1] : 0);
}

static bool stack_need(const pickle_stack *st, size_t n)
{
    return st->lenient || stack_depth(st) >= n;
}

/* Kind of the item n places below the top (0 is the top); unknown in lenient mode. */
static enum pickle_kind stack_kind(const pickle_stack *st, size_t n)
{
    if (st->lenient || n >= st->size)
        return KIND_UNKNOWN;
    return (enum pickle_kind)st->kinds[st->size - 1 - n];
}

static void stack_push(pickle_stack *st, enum pickle_kind kind)
{
    if (st->lenient)
        return;
    if (st->size == PICKLE_STACK_MAX) {
        st->lenient = true;
        return;
    }
    st->kinds[st->size++] = (uint8_t)kind;
}

/* Callers checked stack_need(n) first. */
static void stack_pop(pickle_stack *st, size_t n)
{
    if (!st->lenient)
        st->size -= n;
}

/* Pops the topmost mark and the items above it; *items says how many there were. */
static bool stack_pop_mark(pickle_stack *st, size_t *items)
{
    if (st->lenient) {
        *items = 1;
        return true;
    }
    if (st->marks == 0)
        return false;
    *items = stack_depth(st);
    st->marks--;
    st->size = st->mark_at[st->marks];
    return true;
}

/* The kind of the first item above the topmost mark (OBJ's class). */
static enum pickle_kind stack_first_after_mark(const pickle_stack *st)
{
    if (st->lenient || st->marks == 0 || stack_depth(st) == 0)
        return KIND_UNKNOWN;
    return (enum pickle_kind)st->kinds[st->mark_at[st->marks - 1]];
}

static bool may_be_callable(enum pickle_kind kind)
{
    return kind == KIND_UNKNOWN || kind == KIND_CALLABLE || kind == KIND_OBJECT ||
           kind == KIND_PERSISTENT;
}

static bool may_be_tuple(enum pickle_kind kind)
{
    return kind == KIND_UNKNOWN || kind == KIND_OBJECT || kind == KIND_TUPLE;
}

/* The memo is modelled exactly while every index is below 256 (MEMOIZE then uses
 * the distinct count, as CPython does); after a larger index it only knows whether
 * anything was set, and then accepts every GET so as never to stop early. */
static void memo_set(pickle_stack *st, uint64_t index)
{
    if (index < 256) {
        uint8_t bit = (uint8_t)(1u << (index & 7));
        if (!(st->memo_small[index >> 3] & bit)) {
            st->memo_small[index >> 3] |= bit;
            st->memo_count++;
        }
    } else {
        st->memo_uncertain = true;
        st->memo_count++;
    }
}

static bool memo_has(const pickle_stack *st, uint64_t index)
{
    if (st->lenient)
        return true;
    if (index < 256 && !st->memo_uncertain)
        return (st->memo_small[index >> 3] >> (index & 7)) & 1u;
    return st->memo_count > 0;
}

/* A line argument: bytes up to '\n' (excluded). Returns false when no newline is left. */
static bool pickle_line(const uint8_t *buf, size_t len, size_t pos, size_t *line_len)
{
    if (pos >= len)
        return false;
    const uint8_t *nl = memchr(buf + pos, '\n', len - pos);
    if (nl == NULL)
        return false;
    *line_len = (size_t)(nl - (buf + pos));
    return true;
}

/* INT, LONG and FLOAT lines, as permissive as CPython's C unpickler: strtol/int()
 * with base 0 and float() take whitespace, signs, 0x/0o/0b prefixes, underscores,
 * inf/nan, and stop at a NUL. A walker stricter than the loader would end the
 * valid prefix early and let a payload behind such a number go unseen, so this
 * only refuses characters no number can hold (which is what ends prose). */
static bool numeric_line(const uint8_t *s, size_t n)
{
    static const char allowed[] = "0123456789abcdefABCDEFxXoOiInNtTyYL_+-. \t\v\f\r";
    size_t alnum = 0;
    for (size_t i = 0; i < n && s[i] != '\0'; i++) {
        if (strchr(allowed, s[i]) == NULL)
            return false;
        if (s[i] > ' ' && s[i] != '_' && s[i] != '+' && s[i] != '-' && s[i] != '.')
            alnum++;
    }
    return alnum > 0;
}

/* GET / PUT lines: a base-10 memo index (whitespace and underscores allowed, as
 * int() takes them). A negative index is refused by the unpickler. */
static bool memo_index_line(const uint8_t *s, size_t n, uint64_t *value)
{
    uint64_t v = 0;
    size_t digits = 0;
    bool negative = false;
    for (size_t i = 0; i < n && s[i] != '\0'; i++) {
        uint8_t c = s[i];
        if (c >= '0' && c <= '9') {
            if (v < UINT64_MAX / 16)
                v = v * 10 + (uint64_t)(c - '0');
            digits++;
        } else if (c == '-') {
            negative = true;
        } else if (c != '+' && c != '_' && c != ' ' && c != '\t' && c != '\r' && c != '\v' &&
                   c != '\f') {
            return false;
        }
    }
    *value = v;
    return digits > 0 && !(negative && v != 0);
}

/* STRING line: a quoted Python literal, the same quote at both ends (CPython's rule). */
static bool quoted_line(const uint8_t *s, size_t n)
{
    return n >= 2 && (s[0] == '\'' || s[0] == '"') && s[n - 1] == s[0];
}

/* GLOBAL / INST module or name: dotted Python identifiers in ASCII. Anything else
 * fails to import, so it is no pickle a loader would run. */
static bool dotted_identifier(const uint8_t *s, size_t n)
{
    if (n == 0)
        return false;
    bool component_start = true;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (c == '.') {
            if (component_start)
                return false;
            component_start = true;
            continue;
        }
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        bool digit = c >= '0' && c <= '9';
        if (!alpha && !(digit && !component_start))
            return false;
        component_start = false;
    }
    return !component_start;
}

/* A line argument cut by the end of the buffer: whether its bytes so far could
 * still become a valid line, so that a long first line of prose (minified code,
 * a paragraph) is not taken for a pickle that runs past the buffer. PERSID never
 * continues: no loader here gives a text persistent id a meaning. */
static bool line_may_continue(uint8_t op, const uint8_t *s, size_t n)
{
    switch (op) {
    case 'I':
    case 'L':
    case 'F':
        return n == 0 || numeric_line(s, n) || s[0] <= ' ';
    case 'S':
        return n == 0 || s[0] == '\'' || s[0] == '"';
    case 'g':
    case 'p': {
        uint64_t ignored;
        return n == 0 || memo_index_line(s, n, &ignored);
    }
    case 'c':
    case 'i':
        for (size_t i = 0; i < n; i++)
            if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
                  (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '.'))
                return false;
        return true;
    case 'P':
        return false;
    default: /* UNICODE takes any line */
        return true;
    }
}

/* Reads an n-byte little-endian argument at pos; false when cut. */
static bool pickle_uint_arg(const uint8_t *buf, size_t len, size_t pos, size_t n, uint64_t *out)
{
    if (pos > len || n > len - pos)
        return false;
    uint64_t v = 0;
    for (size_t k = 0; k < n; k++)
        v |= (uint64_t)buf[pos + k] << (8 * k);
    *out = v;
    return true;
}

/* Whether a byte is an opcode of protocols 0-5. */
static bool pickle_opcode_byte(uint8_t b)
{
    static const char text_ops[] = "(.012FIJKLMNPQRSTUVXabcdeghijlopqrstu}])GBC";
    return (b >= 0x80 && b <= 0x98) || (b != 0 && strchr(text_ops, b) != NULL);
}

enum walk_step { STEP_OK, STEP_STOP, STEP_INVALID, STEP_CUT };

static void note_code(pickle_walk *w, uint8_t op, size_t offset)
{
    if (!w->runs_code && !w->imports_as_text) {
        w->code_op = op;
        w->code_offset = offset;
    }
}

/* A call opcode: it runs code when its callable may be one. */
static void note_call(pickle_walk *w, enum pickle_kind callable, uint8_t op, size_t offset)
{
    if (callable == KIND_CALLABLE || callable == KIND_UNKNOWN) {
        note_code(w, op, offset);
        w->runs_code = true;
    }
}

/* Length of the fixed binary argument of op, 0 for opcodes without one. */
static size_t fixed_arg_size(uint8_t op)
{
    switch (op) {
    case 'K':
    case 'h':
    case 'q':
    case 0x80:
    case 0x82:
        return 1;
    case 'M':
    case 0x83:
        return 2;
    case 'J':
    case 'j':
    case 'r':
    case 0x84:
        return 4;
    case 'G':
    case 0x95:
        return 8;
    default:
        return 0;
    }
}

/* Size of the length prefix of a length-prefixed opcode, 0 for others. */
static size_t length_prefix_size(uint8_t op)
{
    switch (op) {
    case 'U':
    case 'C':
    case 0x8c:
    case 0x8a:
        return 1;
    case 'T':
    case 'X':
    case 'B':
    case 0x8b:
        return 4;
    case 0x8d:
    case 0x8e:
    case 0x96:
        return 8;
    default:
        return 0;
    }
}

/* Reads one opcode at *pos; on STEP_OK / STEP_STOP, *pos moves past it. */
static enum walk_step pickle_step(const uint8_t *buf, size_t len, size_t *pos, pickle_stack *st,
                                  pickle_walk *w)
{
    size_t at = *pos;
    uint8_t op = buf[at];
    size_t p = at + 1;
    uint64_t arg = 0;
    size_t items = 0;

    /* Binary arguments first: fixed sizes, then length-prefixed data. */
    size_t fixed = fixed_arg_size(op);
    if (fixed > 0) {
        if (!pickle_uint_arg(buf, len, p, fixed, &arg))
            return STEP_CUT;
        p += fixed;
        if (op != 0x80 && op != 0x95)
            w->jumped = true;
    }
    size_t prefix = length_prefix_size(op);
    if (prefix > 0) {
        if (!pickle_uint_arg(buf, len, p, prefix, &arg))
            return STEP_CUT;
        /* BINSTRING and LONG4 lengths are signed; CPython refuses negative ones. */
        if ((op == 'T' || op == 0x8b) && (arg & 0x80000000u))
            return STEP_INVALID;
        p += prefix;
        /* Never trust a length beyond the buffer. A length past it is a cut stream,
         * unless it is one no file here could hold: four ASCII bytes read as a
         * length are at least 144 MiB, and prose starting "This" must not count as
         * a pickle that runs past the buffer. */
        if (arg > len - p)
            return arg > PICKLE_PLAUSIBLE_LENGTH ? STEP_INVALID : STEP_CUT;
        p += (size_t)arg;
        w->jumped = true;
    }

    switch (op) {
    case 'N':
    case 0x88:
    case 0x89: /* NONE, NEWTRUE, NEWFALSE */
    case 'K':
    case 'M':
    case 'J':
    case 'G': /* BININT1, BININT2, BININT, BINFLOAT */
    case 0x8a:
    case 0x8b: /* LONG1, LONG4 */
    case 'U':
    case 'T':
    case 'X':
    case 0x8c:
    case 0x8d: /* strings */
    case 'C':
    case 'B':
    case 0x8e:
    case 0x96: /* bytes, bytearray */
    case ']':
    case 0x8f: /* EMPTY_LIST, EMPTY_SET */
    case 0x97: /* NEXT_BUFFER */
        stack_push(st, KIND_DATA);
        break;
    case '}': /* EMPTY_DICT */
        stack_push(st, KIND_DICT);
        break;
    case ')': /* EMPTY_TUPLE */
        stack_push(st, KIND_TUPLE);
        break;
    case 0x80: /* PROTO */
        if (arg > 5)
            return STEP_INVALID;
        w->protocol = (int)arg;
        break;
    case 0x95: /* FRAME: no stack effect */
        break;
    case '(': /* MARK */
        if (st->lenient)
            break;
        if (st->marks == PICKLE_MARKS_MAX) {
            st->lenient = true;
            break;
        }
        st->mark_at[st->marks++] = st->size;
        break;
    case '.': /* STOP */
        if (!stack_need(st, 1))
            return STEP_INVALID;
        *pos = p;
        return STEP_STOP;
    case '0': /* POP: the top item, or the mark when nothing is above it */
        if (stack_need(st, 1) && !st->lenient)
            stack_pop(st, 1);
        else if (!stack_pop_mark(st, &items))
            return STEP_INVALID;
        break;
    case '1': /* POP_MARK */
        if (!stack_pop_mark(st, &items))
            return STEP_INVALID;
        break;
    case '2': /* DUP */
        if (!stack_need(st, 1))
            return STEP_INVALID;
        stack_push(st, stack_kind(st, 0));
        break;
    case 'Q': /* BINPERSID: pid -> object */
        if (!stack_need(st, 1))
            return STEP_INVALID;
        stack_pop(st, 1);
        stack_push(st, KIND_PERSISTENT);
        break;
    case 0x98: /* READONLY_BUFFER */
        if (!stack_need(st, 1))
            return STEP_INVALID;
        break;
    case 0x94: /* MEMOIZE */
        if (!stack_need(st, 1))
            return STEP_INVALID;
        memo_set(st, st->memo_uncertain ? 256 : st->memo_count);
        break;
    case 'q':
    case 'r': /* BINPUT, LONG_BINPUT */
        if (!stack_need(st, 1))
            return STEP_INVALID;
        memo_set(st, arg);
        break;
    case 'h':
    case 'j': /* BINGET, LONG_BINGET */
        if (!memo_has(st, arg))
            return STEP_INVALID;
        stack_push(st, KIND_UNKNOWN);
        break;
    case 0x82:
    case 0x83:
    case 0x84: /* EXT1, EXT2, EXT4: code 0 is refused */
        if (arg == 0)
            return STEP_INVALID;
        stack_push(st, KIND_CALLABLE);
        break;
    case 'R':  /* REDUCE: callable, args tuple -> result */
    case 0x81: /* NEWOBJ: class, args tuple -> object */
    {
        if (!stack_need(st, 2) || !may_be_tuple(stack_kind(st, 0)) ||
            !may_be_callable(stack_kind(st, 1)))
            return STEP_INVALID;
        note_call(w, stack_kind(st, 1), op, at);
        stack_pop(st, 2);
        stack_push(st, KIND_OBJECT);
        break;
    }
    case 0x92: /* NEWOBJ_EX: class, args tuple, kwargs dict -> object */
    {
        if (!stack_need(st, 3) || !may_be_tuple(stack_kind(st, 1)) ||
            !may_be_callable(stack_kind(st, 2)))
            return STEP_INVALID;
        note_call(w, stack_kind(st, 2), op, at);
        stack_pop(st, 3);
        stack_push(st, KIND_OBJECT);
        break;
    }
    case 'b': /* BUILD: object, state -> object (runs __setstate__ of what a call made) */
    {
        if (!stack_need(st, 2))
            return STEP_INVALID;
        enum pickle_kind object = stack_kind(st, 1);
        if (object == KIND_UNKNOWN) {
            note_code(w, op, at);
            w->runs_code = true;
        }
        stack_pop(st, 1);
        break;
    }
    case 'a': /* APPEND: list, item -> list */
        if (!stack_need(st, 2))
            return STEP_INVALID;
        stack_pop(st, 1);
        break;
    case 's': /* SETITEM: dict, key, value -> dict */
        if (!stack_need(st, 3))
            return STEP_INVALID;
        stack_pop(st, 2);
        break;
    case 0x85:
    case 0x86:
    case 0x87: /* TUPLE1, TUPLE2, TUPLE3 */
    {
        size_t n = (size_t)(op - 0x84);
        if (!stack_need(st, n))
            return STEP_INVALID;
        stack_pop(st, n);
        stack_push(st, KIND_TUPLE);
        break;
    }
    case 0x93: /* STACK_GLOBAL: module, name -> object */
        if (!stack_need(st, 2))
            return STEP_INVALID;
        stack_pop(st, 2);
        stack_push(st, KIND_CALLABLE);
        break;
    case 'd':
    case 'l':
    case 't':
    case 0x91: /* DICT, LIST, TUPLE, FROZENSET */
        if (!stack_pop_mark(st, &items))
            return STEP_INVALID;
        stack_push(st, op == 'd' ? KIND_DICT : op == 't' ? KIND_TUPLE : KIND_DATA);
        break;
    case 'o': /* OBJ: mark, class, args... -> object */
    {
        enum pickle_kind cls = stack_first_after_mark(st);
        if (!may_be_callable(cls) || !stack_pop_mark(st, &items) || items < 1)
            return STEP_INVALID;
        note_call(w, cls, op, at);
        stack_push(st, KIND_OBJECT);
        break;
    }
    case 'e':
    case 'u':
    case 0x90: /* APPENDS, SETITEMS, ADDITEMS: container, mark, items */
        if (!stack_pop_mark(st, &items) || !stack_need(st, 1))
            return STEP_INVALID;
        break;

    /* Newline-terminated text arguments (protocol 0). */
    case 'I':
    case 'L':
    case 'F':
    case 'S':
    case 'V':
    case 'P':
    case 'g':
    case 'p': {
        size_t line_len = 0;
        if (!pickle_line(buf, len, p, &line_len))
            return line_may_continue(op, buf + p, p < len ? len - p : 0) ? STEP_CUT : STEP_INVALID;
        const uint8_t *s = buf + p;
        bool ok = true;
        if (op == 'I' || op == 'L' || op == 'F') {
            ok = numeric_line(s, line_len);
        } else if (op == 'S') {
            ok = quoted_line(s, line_len);
        } else if (op == 'g') {
            ok = memo_index_line(s, line_len, &arg) && memo_has(st, arg);
        } else if (op == 'p') {
            ok = memo_index_line(s, line_len, &arg) && stack_need(st, 1);
            if (ok)
                memo_set(st, arg);
        } else if (op == 'P') {
            /* The persistent id is decoded as ASCII. */
            for (size_t k = 0; k < line_len && ok; k++)
                ok = s[k] < 0x80;
        }
        if (!ok)
            return STEP_INVALID;
        p += line_len + 1;
        if (op != 'p')
            stack_push(st, op == 'g' ? KIND_UNKNOWN : op == 'P' ? KIND_PERSISTENT : KIND_DATA);
        break;
    }
    case 'c': /* GLOBAL: module line, name line -> object */
    case 'i': /* INST: module line, name line, mark, args -> instance (a call) */
    {
        size_t module_len = 0, name_len = 0;
        if (!pickle_line(buf, len, p, &module_len))
            return line_may_continue(op, buf + p, p < len ? len - p : 0) ? STEP_CUT : STEP_INVALID;
        if (!dotted_identifier(buf + p, module_len))
            return STEP_INVALID;
        size_t name_pos = p + module_len + 1;
        if (!pickle_line(buf, len, name_pos, &name_len))
            return line_may_continue(op, buf + name_pos, name_pos < len ? len - name_pos : 0)
                       ? STEP_CUT
                       : STEP_INVALID;
        if (!dotted_identifier(buf + name_pos, name_len))
            return STEP_INVALID;
        if (op == 'i' && !stack_pop_mark(st, &items))
            return STEP_INVALID;
        if (w->global_module == NULL) {
            w->global_op = op;
            w->global_module = buf + p;
            w->global_module_len = module_len;
            w->global_name = buf + name_pos;
            w->global_name_len = name_len;
        }
        /* In a stream of text opcodes only, the import itself is the signal; after a
         * binary argument that may have skipped over prose, only a call is. */
        if (!w->jumped) {
            note_code(w, op, at);
            w->imports_as_text = true;
        }
        if (op == 'i') {
            note_code(w, op, at);
            w->runs_code = true;
        }
        p = name_pos + name_len + 1;
        stack_push(st, op == 'c' ? KIND_CALLABLE : KIND_OBJECT);
        break;
    }
    default:
        return STEP_INVALID;
    }
    *pos = p;
    return STEP_OK;
}

/* Walks the valid opcode prefix of buf. Linear: every step moves forward, and
 * the only scan inside a step (for a newline) covers bytes the step consumes. */
static void pickle_walk_buffer(const uint8_t *buf, size_t len, pickle_walk *w)
{
    pickle_stack st;
    memset(&st, 0, sizeof st);
    memset(w, 0, sizeof *w);
    w->protocol = -1;
    size_t pos = 0;
    while (pos < len) {
        enum walk_step step = pickle_step(buf, len, &pos, &st, w);
        if (step == STEP_INVALID) {
            w->invalid = true;
            break;
        }
        if (step == STEP_CUT)
            break;
        w->opcodes++;
        w->end = pos;
        if (step == STEP_STOP) {
            w->reached_stop = true;
            /* What a pickler writes: one item left, no mark, then the end or the next
             * pickle (a PROTO, or any opcode after a text-only stream). A period in
             * prose reached by a lucky jump over a binary argument is rarely that. */
            bool next_pickle =
                pos < len && ((buf[pos] == 0x80 && pos + 1 < len && buf[pos + 1] <= 5) ||
                              (!w->jumped && pickle_opcode_byte(buf[pos])));
            w->clean_stop =
                !st.lenient && st.marks == 0 && st.size == 1 && (pos == len || next_pickle);
            break;
        }
    }
}

/* Buffers at least this long whose every byte is a valid opcode stream are
 * pickles even without STOP or a call in view (see pickle_walk_is_pickle). */
#define PICKLE_RUN_OFF_MIN 4096

/* The verdict on a walked prefix: two or more stack-valid opcodes that
 * - run code: REDUCE, NEWOBJ, NEWOBJ_EX, OBJ or BUILD on an imported (or unknown)
 *   callable, or INST; the stream may break right after, the payload already ran;
 * - or import with GLOBAL/INST in a stream of text opcodes only (protocol 0);
 * - or end in a clean STOP (a data-only pickle).
 * A REDUCE on strings is no call CPython would make, and prose reaches one easily
 * ("V...\nV...\nR..."), so the model's kinds decide. When the buffer is only the
 * start of the file, a valid stream that runs off its end over PICKLE_RUN_OFF_MIN
 * bytes is a pickle too: that is how a payload is pushed past the bytes a scanner
 * reads (harmless opcodes, or one long UNICODE line, first), and prose does not
 * stay a valid opcode stream that long. */
static bool pickle_walk_is_pickle(const pickle_walk *w, size_t len, bool complete)
{
    if (w->opcodes >= 2 && (w->runs_code || w->imports_as_text || w->clean_stop))
        return true;
    return !complete && !w->invalid && !w->reached_stop && len >= PICKLE_RUN_OFF_MIN;
}

static bool strong_pickle_magic(const uint8_t *buf, size_t len)
{
    return len >= 2 && buf[0] == 0x80 && buf[1] >= 2 && buf[1] <= 5;
}

/* complete says buf is the whole stream (see pickle_walk_is_pickle). */
static bool is_pickle_stream(const uint8_t *buf, size_t len, bool complete)
{
    if (buf == NULL || len == 0)
        return false;
    if (strong_pickle_magic(buf, len))
        return true;
    pickle_walk w;
    pickle_walk_buffer(buf, len, &w);
    return pickle_walk_is_pickle(&w, len, complete);
}

/* Without being told, the buffer is taken as the start of a stream: the cautious side. */
bool st_sniff_is_pickle(const uint8_t *buf, size_t len)
{
    return is_pickle_stream(buf, len, false);
}

bool st_sniff_is_text(const uint8_t *buf, size_t len, bool complete)
{
    if (len == 0)
        return true;
    if (buf == NULL)
        return false;
    return is_utf8_text(buf, len, complete) && !is_pickle_stream(buf, len, complete);
}

static const char *pickle_op_name(uint8_t op)
{
    switch (op) {
    case 'c':
        return "GLOBAL";
    case 'i':
        return "INST";
    case 'R':
        return "REDUCE";
    case 'b':
        return "BUILD";
    case 'o':
        return "OBJ";
    case 0x81:
        return "NEWOBJ";
    default:
        return "NEWOBJ_EX";
    }
}

/* Describes a walked pickle in the detail: what made it one and where. */
static void note_pickle_walk(st_sniff_info *info, const pickle_walk *w, const char *where)
{
    char module[64] = "", name[64] = "", global[140] = "";
    if (w->global_module != NULL) {
        printable_copy(module, sizeof module, w->global_module, w->global_module_len);
        printable_copy(name, sizeof name, w->global_name, w->global_name_len);
        snprintf(global, sizeof global, "%s '%s %s'", w->global_op == 'i' ? "INST" : "GLOBAL",
                 module, name);
    }
    const char *stop = w->reached_stop ? " to STOP" : "";
    if ((w->runs_code || w->imports_as_text) && (w->code_op == 'c' || w->code_op == 'i'))
        note(info, "pickle opcodes%s: %s at offset %zu, %zu valid opcodes%s", where, global,
             w->code_offset, w->opcodes, stop);
    else if (w->runs_code || w->imports_as_text)
        note(info, "pickle opcodes%s: %s at offset %zu%s%s, %zu valid opcodes%s", where,
             pickle_op_name(w->code_op), w->code_offset, global[0] ? " after " : "", global,
             w->opcodes, stop);
    else if (w->reached_stop)
        note(info, "pickle opcodes%s: %zu valid opcodes reach STOP at offset %zu", where,
             w->opcodes, w->end - 1);
    else
        note(info,
             "pickle opcodes%s: a valid opcode stream (%zu opcodes) runs past the bytes "
             "looked at",
             where, w->opcodes);
}

/* ---------------------------------------------------------------------------------------------
 * NumPy .npy
 * ------------------------------------------------------------------------------------------- */

static const uint8_t npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* Whether the .npy header dict in buf holds an object dtype ('|O'): its data is a pickle. */
static bool npy_has_objects(const uint8_t *buf, size_t len)
{
    if (len < 10)
        return false;
    size_t header_start = buf[6] >= 2 ? 12 : 10;
    uint64_t header_len = buf[6] >= 2 ? (len >= 12 ? le32(buf + 8) : 0) : le16(buf + 8);
    if (header_start >= len)
        return false;
    size_t avail = len - header_start;
    size_t n = header_len < avail ? (size_t)header_len : avail;
    for (size_t i = 0; i + 1 < n; i++)
        if (buf[header_start + i] == '|' && buf[header_start + i + 1] == 'O')
            return true;
    return false;
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
            printable_copy(descr, sizeof descr, buf + start, end - start);
        }
        break;
    }
    unsigned major = len > 6 ? buf[6] : 0, minor = len > 7 ? buf[7] : 0;
    if (npy_has_objects(buf, len))
        note(info, "NumPy .npy v%u.%u, descr %s: object array (|O), pickled objects follow", major,
             minor, descr);
    else
        note(info, "NumPy .npy v%u.%u, descr %s", major, minor, descr);
}

/* ---------------------------------------------------------------------------------------------
 * ZIP (PyTorch checkpoints, .npz, anything else)
 *
 * The loaders that matter (PyTorch's miniz, NumPy's zipfile) are lenient, so the
 * scan is too: no CRC is checked, flag bits (encrypted, data descriptor) are
 * ignored, and both the local-header names (every PK\3\4 in the head) and the
 * central-directory names (from the EOCD found in the tail) are looked at. Member
 * content is looked at whatever its name says.
 * ------------------------------------------------------------------------------------------- */

/* Total pickle-walker bytes a zip scan may spend on member contents: the walk
 * over each member is bounded by the head, and this bounds their sum. */
#define ZIP_WALK_BUDGET (2 * ST_SNIFF_HEAD_MAX)

/* End-of-central-directory signatures tried from the end before giving up. */
#define ZIP_EOCD_CANDIDATES_MAX 8

typedef struct zip_scan {
    int torch;            /* evidence of a PyTorch checkpoint: 0 none, 1 a name, 2 content */
    char torch_why[136];  /* the strongest such evidence (kind, name, why fit) */
    size_t members;       /* member records seen (local and central) */
    size_t npy_members;   /* of which .npy by content or by name */
    bool npy_objects;     /* some .npy member holds an object array */
    size_t walk_budget;   /* bytes the pickle walker may still read */
    bool have_head_start; /* a plausible local header was found in the head */
    size_t head_start;    /* offset of the first one */
    bool have_eocd;
    uint64_t eocd_entries;
    bool have_shift; /* the prefix length the EOCD implies */
    uint64_t shift;
    bool zip64;
} zip_scan;

/* Keeps the strongest evidence seen: a member's content over a member's name. */
static void zip_torch(zip_scan *z, int strength, const char *kind, const uint8_t *name,
                      size_t name_len, const char *why)
{
    if (z->torch >= strength)
        return;
    char printable[64];
    printable_copy(printable, sizeof printable, name, name_len);
    z->torch = strength;
    snprintf(z->torch_why, sizeof z->torch_why, "%s member '%s' %s", kind, printable, why);
}

/* Names PyTorch's writer gives members: <archive>/data.pkl, <archive>/version,
 * <archive>/data/<n>, <archive>/byteorder, <archive>/.data/..., and any name
 * with a pickle extension. */
static bool torch_member_name(const uint8_t *name, size_t n)
{
    if (ends_with(name, n, "data.pkl") || ends_with(name, n, ".pkl") ||
        ends_with(name, n, ".pickle") || ends_with(name, n, "/version") ||
        ends_with(name, n, "/byteorder") || ends_with(name, n, "/.data/serialization_id"))
        return true;
    /* <anything>data/<digits> */
    size_t i = n;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
        i--;
    if (i == n)
        return false;
    return (i == 5 && memcmp(name, "data/", 5) == 0) ||
           (i >= 6 && memcmp(name + i - 6, "/data/", 6) == 0);
}

static void zip_member_name(zip_scan *z, const char *kind, const uint8_t *name, size_t n)
{
    z->members++;
    if (torch_member_name(name, n))
        zip_torch(z, 1, kind, name, n, "is named like a PyTorch checkpoint part");
    else if (ends_with(name, n, ".npy"))
        z->npy_members++;
}

/* Looks at the first bytes of a member's data, whatever its name or flags say. */
static void zip_member_content(zip_scan *z, const uint8_t *name, size_t name_len,
                               const uint8_t *data, size_t len, bool *is_npy)
{
    *is_npy = false;
    if (strong_pickle_magic(data, len)) {
        char why[48];
        snprintf(why, sizeof why, "holds a pickle (0x80 0x%02x)", data[1]);
        zip_torch(z, 2, "zip", name, name_len, why);
        return;
    }
    if (has_at(data, len, 0, npy_magic, sizeof npy_magic)) {
        *is_npy = true;
        /* The header scan draws on the same budget as the pickle walks. */
        size_t n = len < z->walk_budget ? len : z->walk_budget;
        z->walk_budget -= n;
        if (npy_has_objects(data, n))
            z->npy_objects = true;
        return;
    }
    size_t n = len < z->walk_budget ? len : z->walk_budget;
    if (n == 0)
        return;
    z->walk_budget -= n;
    pickle_walk w;
    pickle_walk_buffer(data, n, &w);
    if (pickle_walk_is_pickle(&w, n, false))
        zip_torch(z, 2, "zip", name, name_len, "holds a pickle (protocol 0/1 opcodes)");
}

/* Every "PK\3\4" in the head: a local header when its name fits and has no control bytes. */
static void zip_scan_local_headers(zip_scan *z, const uint8_t *head, size_t head_len)
{
    for (size_t pos = 0; pos + 30 <= head_len; pos++) {
        if (head[pos] != 'P' || memcmp(head + pos, "PK\3\4", 4) != 0)
            continue;
        size_t name_len = le16(head + pos + 26), extra_len = le16(head + pos + 28);
        const uint8_t *name = head + pos + 30;
        if (name_len == 0 || name_len > head_len - pos - 30)
            continue;
        bool clean = true;
        for (size_t i = 0; i < name_len && clean; i++)
            clean = name[i] >= 0x20 && name[i] != 0x7f;
        if (!clean)
            continue;
        if (!z->have_head_start) {
            z->have_head_start = true;
            z->head_start = pos;
        }
        size_t npy_before = z->npy_members;
        zip_member_name(z, "zip", name, name_len);
        size_t data_start = pos + 30 + name_len;
        if (extra_len > head_len - data_start)
            continue;
        data_start += extra_len;
        /* The stored size is not trusted (0 with a data descriptor, or forged): look at
         * what the head holds, with the walk budget bounding the total work. */
        bool is_npy = false;
        zip_member_content(z, name, name_len, head + data_start, head_len - data_start, &is_npy);
        if (is_npy && z->npy_members == npy_before)
            z->npy_members++;
    }
}

/* Finds the end-of-central-directory record in the view of the file's end and
 * walks the central directory names. view_abs is the view's offset in the file
 * when known (for the prefix length). */
static void zip_scan_central(zip_scan *z, const uint8_t *view, size_t view_len, bool view_abs_known,
                             uint64_t view_abs)
{
    if (view == NULL || view_len < 22)
        return;
    size_t lowest = view_len - 22 > 65535 ? view_len - 22 - 65535 : 0;
    /* Each candidate record may cost a scan of the view, so only the last few are
     * tried: the work stays linear when the tail is full of fake records. */
    unsigned candidates = 0;
    for (size_t pos = view_len - 22 + 1; pos-- > lowest;) {
        if (view[pos] != 'P' || memcmp(view + pos, "PK\5\6", 4) != 0)
            continue;
        if (++candidates > ZIP_EOCD_CANDIDATES_MAX)
            return;
        uint64_t entries = le16(view + pos + 10);
        uint64_t cd_size = le32(view + pos + 12);
        uint64_t cd_offset = le32(view + pos + 16);
        size_t cd_end = pos;
        bool zip64 = false;
        /* Zip64: a locator 20 bytes before the EOCD, the zip64 record 56 bytes before it. */
        if (pos >= 20 + 56 && memcmp(view + pos - 20, "PK\6\7", 4) == 0 &&
            memcmp(view + pos - 76, "PK\6\6", 4) == 0) {
            zip64 = true;
            cd_end = pos - 76;
            entries = le64(view + cd_end + 32);
            cd_size = le64(view + cd_end + 40);
            cd_offset = le64(view + cd_end + 48);
        }
        /* The central directory ends where the (zip64) EOCD begins. */
        size_t cd_start;
        if (cd_size <= cd_end) {
            cd_start = cd_end - (size_t)cd_size;
            bool empty = cd_size == 0 && entries == 0;
            if (!empty && (cd_end - cd_start < 4 || memcmp(view + cd_start, "PK\1\2", 4) != 0))
                continue;
        } else {
            /* The directory starts before the view: resynchronize on the first entry. */
            if (entries == 0)
                continue;
            cd_start = 0;
            while (cd_start + 4 <= cd_end && memcmp(view + cd_start, "PK\1\2", 4) != 0)
                cd_start++;
            if (cd_start + 4 > cd_end)
                continue;
        }
        z->have_eocd = true;
        z->eocd_entries = entries;
        z->zip64 = zip64;
        uint64_t cd_start_abs;
        if (view_abs_known && cd_size <= cd_end &&
            !__builtin_add_overflow(view_abs, (uint64_t)cd_start, &cd_start_abs) &&
            cd_start_abs >= cd_offset) {
            z->have_shift = true;
            z->shift = cd_start_abs - cd_offset;
        }
        /* Central directory entries: 46 fixed bytes, then name, extra, comment. */
        size_t p = cd_start;
        while (p + 46 <= cd_end && memcmp(view + p, "PK\1\2", 4) == 0) {
            size_t name_len = le16(view + p + 28);
            size_t extra_len = le16(view + p + 30);
            size_t comment_len = le16(view + p + 32);
            if (name_len > cd_end - p - 46)
                break;
            if (name_len > 0)
                zip_member_name(z, "zip central-directory", view + p + 46, name_len);
            size_t next = p + 46 + name_len;
            if (extra_len + comment_len > cd_end - next)
                break;
            p = next + extra_len + comment_len;
        }
        return;
    }
}

/* ---------------------------------------------------------------------------------------------
 * tar (and PyTorch's legacy tar checkpoints)
 * ------------------------------------------------------------------------------------------- */

static bool tar_magic_at(const uint8_t *buf, size_t len, size_t header)
{
    return has_at(buf, len, header + 257, "ustar\0", 6) ||
           has_at(buf, len, header + 257, "ustar  \0", 8);
}

/* A tar size field: octal digits (spaces/NULs around), or base-256 when the top bit is set. */
static bool tar_size(const uint8_t *field, uint64_t *out)
{
    uint64_t v = 0;
    if (field[0] & 0x80) {
        for (size_t i = 1; i < 12; i++) {
            if (v >> 56)
                return false;
            v = (v << 8) | field[i];
        }
        *out = v;
        return true;
    }
    size_t i = 0;
    while (i < 12 && field[i] == ' ')
        i++;
    for (; i < 12 && field[i] >= '0' && field[i] <= '7'; i++) {
        if (v >> 60)
            return false;
        v = (v << 3) | (uint64_t)(field[i] - '0');
    }
    *out = v;
    return true;
}

static bool tar_name_is(const uint8_t *name, size_t n, const char *want)
{
    if (n >= 2 && name[0] == '.' && name[1] == '/')
        name += 2, n -= 2;
    return n == strlen(want) && memcmp(name, want, n) == 0;
}

/* Walks the tar headers present in the head. PyTorch's legacy tar format has the
 * members sys_info, pickle, storages and tensors. */
static st_format classify_tar(const uint8_t *head, size_t head_len, st_sniff_info *info)
{
    size_t pos = 0;
    size_t members = 0;
    char pickle_member[64] = "";
    while (pos <= head_len && head_len - pos >= 512) {
        const uint8_t *h = head + pos;
        if (h[0] == '\0')
            break;
        size_t name_len = 0;
        while (name_len < 100 && h[name_len] != '\0')
            name_len++;
        members++;
        if (tar_name_is(h, name_len, "pickle") || tar_name_is(h, name_len, "storages") ||
            tar_name_is(h, name_len, "tensors")) {
            char printable[64];
            printable_copy(printable, sizeof printable, h, name_len);
            note(info, "tar with PyTorch legacy member '%s' (ustar at offset %zu)", printable,
                 pos + 257);
            return ST_FORMAT_PYTORCH_LEGACY;
        }
        uint64_t size = 0, padded = 0, next = 0;
        if (!tar_size(h + 124, &size) || __builtin_add_overflow(size, 511, &padded))
            break;
        padded &= ~(uint64_t)511;
        if (pickle_member[0] == '\0' && h[156] != 'x' && h[156] != 'g' && size > 0) {
            size_t avail = head_len - pos - 512;
            size_t n = size < avail ? (size_t)size : avail;
            if (st_sniff_is_pickle(h + 512, n))
                printable_copy(pickle_member, sizeof pickle_member, h, name_len);
        }
        if (__builtin_add_overflow((uint64_t)pos + 512, padded, &next) || next > head_len)
            break;
        pos = (size_t)next;
    }
    if (pickle_member[0] != '\0')
        note(info, "tar (ustar at offset 257), member '%s' holds a pickle", pickle_member);
    else
        note(info, "tar (ustar at offset 257), %zu member header%s in the head", members,
             members == 1 ? "" : "s");
    return ST_FORMAT_TAR;
}

/* ---------------------------------------------------------------------------------------------
 * ONNX / protobuf (weak signal)
 * ------------------------------------------------------------------------------------------- */

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
            if (file_size != SNIFF_SIZE_UNKNOWN && (pos > file_size || length > file_size - pos))
                return false;
            if (length > head_len - pos) {
                if (fields == 0)
                    first_field = field;
                fields++;
                break;
            }
            /* Names and versions are text. */
            if ((field == 2 || field == 3 || field == 4) &&
                !is_utf8_text(head + pos, (size_t)length, true))
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
    note(info, "protobuf: ir_version %llu then field %llu, %zu valid ModelProto field%s (ONNX)",
         (unsigned long long)ir_version, (unsigned long long)first_field, fields,
         fields == 1 ? "" : "s");
    return true;
}

/* ---------------------------------------------------------------------------------------------
 * The classifier
 * ------------------------------------------------------------------------------------------- */

static st_format classify_zip(const uint8_t *head, size_t head_len, const uint8_t *end_view,
                              size_t end_view_len, bool end_abs_known, uint64_t end_abs,
                              bool magic_at_zero, st_sniff_info *info)
{
    zip_scan z;
    memset(&z, 0, sizeof z);
    z.walk_budget = ZIP_WALK_BUDGET;
    zip_scan_local_headers(&z, head, head_len);
    zip_scan_central(&z, end_view, end_view_len, end_abs_known, end_abs);
    if (!magic_at_zero && !z.have_head_start && !z.have_eocd)
        return ST_FORMAT_UNKNOWN;

    /* Where the zip starts: the first local header in the head, else what the EOCD implies. */
    uint64_t prefix = 0;
    if (!magic_at_zero) {
        if (z.have_head_start)
            prefix = z.head_start;
        else if (z.have_shift)
            prefix = z.shift;
    }
    /* A prefix that is itself a pickle is what torch.load would run: it sees no zip
     * magic at offset 0 and unpickles the file from the start. */
    if (prefix > 0) {
        pickle_walk w;
        size_t n = prefix < head_len ? (size_t)prefix : head_len;
        if (strong_pickle_magic(head, n)) {
            note(info, "pickle protocol %u (0x80 0x%02x) at offset 0, before a zip at offset %llu",
                 head[1], head[1], (unsigned long long)prefix);
            return ST_FORMAT_PICKLE;
        }
        pickle_walk_buffer(head, n, &w);
        if (pickle_walk_is_pickle(&w, n, false)) {
            char where[64];
            snprintf(where, sizeof where, " before a zip at offset %llu",
                     (unsigned long long)prefix);
            note_pickle_walk(info, &w, where);
            return ST_FORMAT_PICKLE;
        }
    }
    char where[64] = "";
    if (prefix > 0)
        snprintf(where, sizeof where, " (zip after a %llu-byte prefix)",
                 (unsigned long long)prefix);
    if (z.torch) {
        note(info, "%s%s", z.torch_why, where);
        return ST_FORMAT_PYTORCH_ZIP;
    }
    if (z.members > 0 && z.npy_members == z.members) {
        note(info, "NumPy .npz: zip of .npy members%s%s",
             z.npy_objects ? ", object array (|O): pickled objects" : "", where);
        return ST_FORMAT_NUMPY;
    }
    if (prefix > 0)
        note(info, "zip after a %llu-byte prefix%s", (unsigned long long)prefix,
             z.have_eocd ? " (end-of-central-directory in the tail)" : "");
    else if (z.members == 0 && z.have_eocd && z.eocd_entries == 0)
        note(info, "empty zip (end-of-central-directory only)");
    else
        note(info, "zip at offset 0, %zu member record%s, none a pickle or PyTorch part%s",
             z.members, z.members == 1 ? "" : "s", z.zip64 ? " (zip64)" : "");
    return ST_FORMAT_ZIP;
}

static const uint8_t legacy_torch_magic[14] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                               0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
static const uint8_t hdf5_magic[8] = {0x89, 'H', 'D', 'F', 0x0d, 0x0a, 0x1a, 0x0a};

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

/* Magics a file starts with. Returns ST_FORMAT_UNKNOWN when none matches. */
static st_format classify_magic_at_zero(const uint8_t *head, size_t head_len, st_sniff_info *info)
{
    if (has_at(head, head_len, 0, legacy_torch_magic, sizeof legacy_torch_magic)) {
        note(info, "PyTorch legacy checkpoint: magic-number pickle (0x80 0x02 0x8a 0x0a "
                   "0x6c 0xfc 0x9c 0x46 ...) at offset 0");
        return ST_FORMAT_PYTORCH_LEGACY;
    }
    if (strong_pickle_magic(head, head_len)) {
        note(info, "pickle protocol %u (0x80 0x%02x) at offset 0", head[1], head[1]);
        return ST_FORMAT_PICKLE;
    }
    if (has_at(head, head_len, 0, npy_magic, sizeof npy_magic)) {
        note_npy(info, head, head_len);
        return ST_FORMAT_NUMPY;
    }
    if (has_at(head, head_len, 0, "GGUF", 4)) {
        if (head_len >= 8)
            note(info, "GGUF version %u", le32(head + 4));
        else
            note(info, "GGUF magic at offset 0");
        return ST_FORMAT_GGUF;
    }
    if (has_at(head, head_len, 0, hdf5_magic, sizeof hdf5_magic)) {
        note(info, "HDF5 superblock signature at offset 0");
        return ST_FORMAT_HDF5;
    }
    for (size_t i = 0; i < sizeof compressed_magics / sizeof compressed_magics[0]; i++) {
        const compressed_magic *m = &compressed_magics[i];
        if (has_at(head, head_len, 0, m->bytes, m->len)) {
            note(info, "%s archive/stream magic at offset 0", m->name);
            return ST_FORMAT_COMPRESSED;
        }
    }
    /* bzip2: "BZh" and a block size digit, then the block or end-of-stream magic. */
    if (head_len >= 10 && memcmp(head, "BZh", 3) == 0 && head[3] >= '1' && head[3] <= '9' &&
        (memcmp(head + 4, "\x31\x41\x59\x26\x53\x59", 6) == 0 ||
         memcmp(head + 4, "\x17\x72\x45\x38\x50\x90", 6) == 0)) {
        note(info, "bzip2 stream magic at offset 0");
        return ST_FORMAT_COMPRESSED;
    }
    /* zstd skippable frames 0x184D2A50..5F. */
    if (head_len >= 4 && (head[0] & 0xf0) == 0x50 && head[1] == 0x2a && head[2] == 0x4d &&
        head[3] == 0x18) {
        note(info, "zstd skippable frame at offset 0");
        return ST_FORMAT_COMPRESSED;
    }
    return ST_FORMAT_UNKNOWN;
}

static bool zip_magic_at_zero(const uint8_t *head, size_t head_len)
{
    return has_at(head, head_len, 0, "PK\3\4", 4) || has_at(head, head_len, 0, "PK\5\6", 4) ||
           has_at(head, head_len, 0, "PK\7\10", 4) || has_at(head, head_len, 0, "PK\1\2", 4) ||
           has_at(head, head_len, 0, "PK\6\6", 4);
}

/* Formats recognized by bytes at a fixed offset other than 0. */
static st_format classify_offset_magic(const uint8_t *head, size_t head_len, uint64_t file_size,
                                       st_sniff_info *info)
{
    if (tar_magic_at(head, head_len, 0))
        return classify_tar(head, head_len, info);
    /* TFLite: a FlatBuffer whose root-table offset (u32 at 0) points inside the file. */
    if (has_at(head, head_len, 4, "TFL3", 4)) {
        uint32_t root = le32(head);
        uint64_t limit = file_size != SNIFF_SIZE_UNKNOWN ? file_size : (uint64_t)1 << 31;
        if (root >= 8 && root % 4 == 0 && root < limit) {
            note(info, "TFLite FlatBuffer: identifier TFL3 at offset 4, root table at %u", root);
            return ST_FORMAT_TFLITE;
        }
    }
    /* HDF5 behind a user block: the superblock sits at 512, 1024, 2048, ... */
    for (size_t offset = 512; offset <= head_len && head_len - offset >= sizeof hdf5_magic;
         offset *= 2) {
        if (memcmp(head + offset, hdf5_magic, sizeof hdf5_magic) == 0) {
            note(info, "HDF5 superblock signature at offset %zu (after a user block)", offset);
            return ST_FORMAT_HDF5;
        }
    }
    return ST_FORMAT_UNKNOWN;
}

/* The order, and why:
 * 1. Magics at offset 0 (pickle PROTO, legacy torch, zip, npy, GGUF, HDF5, 7z/gzip/
 *    xz/zstd/lz4/bzip2): the cheapest and most certain signals; the loaders
 *    (torch.load, np.load, ...) dispatch on these very bytes.
 * 2. Magics at fixed offsets (tar 'ustar' at 257, TFLite 'TFL3' at 4, HDF5 after
 *    a user block): binary signatures that still fix the format, but only after
 *    bytes that could be anything.
 * 3. A zip elsewhere (a PK\3\4 local header after a prefix, or an end-of-central-
 *    directory record at the end): weaker, as those bytes may sit inside another
 *    format; a prefix that is itself a pickle is reported as the pickle.
 * 4. The protocol-0/1 pickle walker: headerless pickles are ASCII, so this must run
 *    before the text check, which they would otherwise pass.
 * 5. JSON, then text: valid UTF-8 without control bytes (zlib's 'x' magic is ASCII,
 *    so a text starting "x^" is text, and zlib is only tried on binary content).
 * 6. zlib, then the ONNX/protobuf weak signal: both are a byte or two of structure
 *    that many binaries happen to start with, so only when nothing else matched.
 * 7. Unknown. */
st_format st_sniff(const uint8_t *head, size_t head_len, const uint8_t *tail, size_t tail_len,
                   uint64_t file_size, st_sniff_info *info)
{
    if (info != NULL)
        info->detail[0] = '\0';
    if (head == NULL)
        head_len = 0;
    if (head_len > ST_SNIFF_HEAD_MAX)
        head_len = ST_SNIFF_HEAD_MAX;
    /* The tail is the file's last bytes: keep the last ST_SNIFF_TAIL_MAX of them. */
    if (tail == NULL)
        tail_len = 0;
    if (tail_len > ST_SNIFF_TAIL_MAX) {
        tail += tail_len - ST_SNIFF_TAIL_MAX;
        tail_len = ST_SNIFF_TAIL_MAX;
    }
    if (head_len == 0) {
        note(info, "empty input");
        return ST_FORMAT_UNKNOWN;
    }
    bool head_is_whole = file_size != SNIFF_SIZE_UNKNOWN && file_size <= head_len;

    /* The view of the file's end used for the EOCD: the tail when given, else the head
     * when it may be the whole file. view_abs is the view's offset in the file. */
    const uint8_t *end_view = tail;
    size_t end_view_len = tail_len;
    bool end_abs_known = false;
    uint64_t end_abs = 0;
    if (tail_len > 0 && file_size != SNIFF_SIZE_UNKNOWN && file_size >= tail_len) {
        end_abs_known = true;
        end_abs = file_size - tail_len;
    } else if (tail_len == 0 && (head_is_whole || file_size == SNIFF_SIZE_UNKNOWN)) {
        end_view = head;
        end_view_len = head_len;
        end_abs_known = true;
        end_abs = 0;
    }

    /* 1. Magics at offset 0. */
    st_format found = classify_magic_at_zero(head, head_len, info);
    if (found != ST_FORMAT_UNKNOWN)
        return found;
    if (zip_magic_at_zero(head, head_len))
        return classify_zip(head, head_len, end_view, end_view_len, end_abs_known, end_abs, true,
                            info);

    /* 2. Magics at fixed offsets. */
    found = classify_offset_magic(head, head_len, file_size, info);
    if (found != ST_FORMAT_UNKNOWN)
        return found;

    /* 3. A zip after a prefix. */
    found =
        classify_zip(head, head_len, end_view, end_view_len, end_abs_known, end_abs, false, info);
    if (found != ST_FORMAT_UNKNOWN)
        return found;

    /* 4. Headerless (protocol 0/1) or mixed-protocol pickles. */
    pickle_walk w;
    pickle_walk_buffer(head, head_len, &w);
    if (pickle_walk_is_pickle(&w, head_len, head_is_whole)) {
        char where[48];
        if (w.protocol >= 0)
            snprintf(where, sizeof where, " (mixed, PROTO %d inside)", w.protocol);
        else
            snprintf(where, sizeof where, " (protocol 0/1, no PROTO header)");
        note_pickle_walk(info, &w, where);
        return ST_FORMAT_PICKLE;
    }

    /* 5. JSON and text. The pickle walk above already ruled out a pickle. */
    if (is_utf8_text(head, head_len, head_is_whole)) {
        size_t i = 0;
        while (i < head_len &&
               (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r'))
            i++;
        if (i < head_len && (head[i] == '{' || head[i] == '[')) {
            note(info, "UTF-8 text starting with '%c' at offset %zu", head[i], i);
            return ST_FORMAT_JSON;
        }
        note(info, "UTF-8 text without control characters%s",
             head_is_whole ? "" : " (in the head)");
        return ST_FORMAT_TEXT;
    }

    /* 6. Weak signals. zlib: CMF 0x78 (deflate, 32K window), a valid FCHECK, no preset
     * dictionary, and a first deflate block type other than the reserved 3. */
    if (head_len >= 3 && head[0] == 0x78 &&
        (head[1] == 0x01 || head[1] == 0x5e || head[1] == 0x9c || head[1] == 0xda) &&
        ((head[2] >> 1) & 3) != 3) {
        note(info, "zlib stream header 0x78 0x%02x at offset 0", head[1]);
        return ST_FORMAT_COMPRESSED;
    }
    if (onnx_signal(head, head_len, file_size, info))
        return ST_FORMAT_ONNX;

    /* 7. Nothing matched: say what it looked like when it resembles safetensors. */
    if (head_len >= 9 && head[8] == '{')
        note(info,
             "no known format; starts like a safetensors header (length %llu) but is "
             "not valid safetensors",
             (unsigned long long)le64(head));
    else
        note(info, "no known format (first byte 0x%02x)", head[0]);
    return ST_FORMAT_UNKNOWN;
}
