/* Pickles (lib/sniff/, see sniff.h): the opcode walker.
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
 *
 * The same walk names what a pickle would do (st_pickle_findings): each global
 * imported by GLOBAL or INST (names in the opcode), STACK_GLOBAL (the two strings
 * below it, pushed directly or fetched from the memo), or EXT1/2/4, and whether a
 * call opcode is applied to it; pickle_globals.c grades each. The model carries,
 * beside each stack item's kind, the string it is (for STACK_GLOBAL) or the
 * finding it came from (for calls), and keeps both for memo entries in a small
 * table; an item it cannot follow gives an unresolved "?" import, never none. */
#include "sniff_formats.h"
#include "sniff_util.h"

#include <stdio.h>
#include <string.h>

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

/* What the model knows of an item beyond its kind: a string's bytes in the buffer,
 * or the finding an imported global (or what a memo fetch of it gave) stands for. */
typedef struct pickle_ref {
    uint32_t str_off, str_len;
    int32_t finding; /* the finding's id (st_pickle_findings.ids), -1 none */
    bool is_str;
} pickle_ref;

static const pickle_ref no_ref = {0, 0, -1, false};

/* Memo entries whose refs are kept: by index modulo the table, checked on fetch. */
#define PICKLE_MEMO_REFS 256

typedef struct pickle_stack {
    size_t size;                     /* items on the stack, all marks included */
    uint8_t kinds[PICKLE_STACK_MAX]; /* enum pickle_kind of each item */
    pickle_ref refs[PICKLE_STACK_MAX];
    struct {
        uint64_t index;
        bool set;
        pickle_ref ref;
    } memo_refs[PICKLE_MEMO_REFS];
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

static void stack_push_ref(pickle_stack *st, enum pickle_kind kind, pickle_ref ref)
{
    if (st->lenient)
        return;
    if (st->size == PICKLE_STACK_MAX) {
        st->lenient = true;
        return;
    }
    st->refs[st->size] = ref;
    st->kinds[st->size++] = (uint8_t)kind;
}

static void stack_push(pickle_stack *st, enum pickle_kind kind)
{
    stack_push_ref(st, kind, no_ref);
}

/* The ref of the item n places below the top; none in lenient mode. */
static pickle_ref stack_ref(const pickle_stack *st, size_t n)
{
    if (st->lenient || n >= st->size)
        return no_ref;
    return st->refs[st->size - 1 - n];
}

/* The ref of the first item above the topmost mark (OBJ's class). */
static pickle_ref stack_ref_after_mark(const pickle_stack *st)
{
    if (st->lenient || st->marks == 0 || stack_depth(st) == 0)
        return no_ref;
    return st->refs[st->mark_at[st->marks - 1]];
}

/* Remembers the top item's ref under a memo index. */
static void memo_keep_ref(pickle_stack *st, uint64_t index)
{
    size_t slot = (size_t)(index % PICKLE_MEMO_REFS);
    st->memo_refs[slot].index = index;
    st->memo_refs[slot].set = true;
    st->memo_refs[slot].ref = stack_ref(st, 0);
}

static pickle_ref memo_ref(const pickle_stack *st, uint64_t index)
{
    size_t slot = (size_t)(index % PICKLE_MEMO_REFS);
    if (!st->memo_refs[slot].set || st->memo_refs[slot].index != index)
        return no_ref;
    return st->memo_refs[slot].ref;
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

/* Copies an untrusted name part into out at *at, printable ASCII, '?' for others. */
static void global_append(char *out, size_t *at, const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n && *at + 1 < ST_PICKLE_GLOBAL_MAX; i++)
        out[(*at)++] = (s[i] >= 0x20 && s[i] < 0x7f) ? (char)s[i] : '?';
    out[*at] = '\0';
}

/* The slot a new finding of this severity takes in a full list: the first of the
 * lowest severity when that is lower, else none. */
static int finding_slot_to_displace(const st_pickle_findings *f, st_pickle_severity severity)
{
    int slot = -1;
    for (size_t i = 0; i < f->count; i++)
        if (f->items[i].severity < severity &&
            (slot < 0 || f->items[i].severity < f->items[slot].severity))
            slot = (int)i;
    return slot;
}

/* Adds module.name (module NULL: the name alone, already formatted) to the
 * findings, once per name; returns its id, -1 when not kept. */
static int32_t finding_add(st_pickle_walk *w, const uint8_t *module, size_t module_len,
                           const uint8_t *name, size_t name_len, size_t at)
{
    st_pickle_findings *f = w->findings;
    if (f == NULL)
        return -1;
    char global[ST_PICKLE_GLOBAL_MAX] = "";
    size_t n = 0;
    st_pickle_severity severity = ST_PICKLE_UNKNOWN;
    if (module != NULL) {
        char mod[ST_PICKLE_GLOBAL_MAX] = "", nam[ST_PICKLE_GLOBAL_MAX] = "";
        size_t mn = 0, nn = 0;
        global_append(mod, &mn, module, module_len);
        global_append(nam, &nn, name, name_len);
        severity = st_pickle_global_severity(mod, nam);
        global_append(global, &n, module, module_len);
        global_append(global, &n, (const uint8_t *)".", 1);
    }
    global_append(global, &n, name, name_len);
    for (size_t i = 0; i < f->count; i++)
        if (strcmp(f->items[i].global, global) == 0)
            return (int32_t)f->ids[i];
    size_t slot = f->count;
    if (f->count == ST_PICKLE_FINDINGS_MAX) {
        int displaced = finding_slot_to_displace(f, severity);
        f->omitted++;
        if (displaced < 0)
            return -1;
        slot = (size_t)displaced;
    } else {
        f->count++;
    }
    st_pickle_finding *item = &f->items[slot];
    memcpy(item->global, global, sizeof item->global);
    item->calls = false;
    item->severity = severity;
    item->offset = w->base + at;
    f->ids[slot] = f->next_id++ & 0x7fffffffu;
    return (int32_t)f->ids[slot];
}

/* A STACK_GLOBAL: module and name are the two items below the top when the
 * model knows them as strings, else the import is unresolved ("?"). */
static int32_t finding_stack_global(st_pickle_walk *w, const uint8_t *buf, pickle_ref module,
                                    pickle_ref name, size_t at)
{
    if (!module.is_str || !name.is_str)
        return finding_add(w, NULL, 0, (const uint8_t *)"?", 1, at);
    return finding_add(w, buf + module.str_off, module.str_len, buf + name.str_off, name.str_len,
                       at);
}

static void finding_called(st_pickle_walk *w, pickle_ref callable)
{
    if (w->findings == NULL || callable.finding < 0)
        return;
    for (size_t i = 0; i < w->findings->count; i++)
        if (w->findings->ids[i] == (uint32_t)callable.finding)
            w->findings->items[i].calls = true;
}

static pickle_ref finding_ref(int32_t finding)
{
    pickle_ref ref = no_ref;
    ref.finding = finding;
    return ref;
}

static pickle_ref string_ref(size_t off, size_t len)
{
    pickle_ref ref = no_ref;
    ref.is_str = true;
    ref.str_off = (uint32_t)off;
    ref.str_len = (uint32_t)len;
    return ref;
}

static void note_code(st_pickle_walk *w, uint8_t op, size_t offset)
{
    if (!w->runs_code && !w->imports_as_text) {
        w->code_op = op;
        w->code_offset = offset;
    }
}

/* A call opcode: it runs code when its callable may be one. */
static void note_call(st_pickle_walk *w, enum pickle_kind callable, uint8_t op, size_t offset)
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
                                  st_pickle_walk *w)
{
    size_t at = *pos;
    uint8_t op = buf[at];
    size_t p = at + 1;
    uint64_t arg = 0;
    size_t items = 0;
    size_t data_off = 0; /* a length-prefixed argument's bytes */

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
        data_off = p;
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
    case 'C':
    case 'B':
    case 0x8e:
    case 0x96: /* bytes, bytearray */
    case ']':
    case 0x8f: /* EMPTY_LIST, EMPTY_SET */
    case 0x97: /* NEXT_BUFFER */
        stack_push(st, KIND_DATA);
        break;
    case 'U':
    case 'T':
    case 'X':
    case 0x8c:
    case 0x8d: /* strings: STACK_GLOBAL may name a global with them */
        stack_push_ref(st, KIND_DATA, string_ref(data_off, (size_t)arg));
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
        stack_push_ref(st, stack_kind(st, 0), stack_ref(st, 0));
        break;
    case 'Q': /* BINPERSID: pid -> object */
        if (!stack_need(st, 1))
            return STEP_INVALID;
        w->code_ops = true;
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
        memo_keep_ref(st, st->memo_uncertain ? 256 : st->memo_count);
        memo_set(st, st->memo_uncertain ? 256 : st->memo_count);
        break;
    case 'q':
    case 'r': /* BINPUT, LONG_BINPUT */
        if (!stack_need(st, 1))
            return STEP_INVALID;
        memo_keep_ref(st, arg);
        memo_set(st, arg);
        break;
    case 'h':
    case 'j': /* BINGET, LONG_BINGET */
        if (!memo_has(st, arg))
            return STEP_INVALID;
        stack_push_ref(st, KIND_UNKNOWN, memo_ref(st, arg));
        break;
    case 0x82:
    case 0x83:
    case 0x84: /* EXT1, EXT2, EXT4: code 0 is refused */
        if (arg == 0)
            return STEP_INVALID;
        w->code_ops = true;
        {
            char ext[48];
            int n = snprintf(ext, sizeof ext, "(extension code %llu)", (unsigned long long)arg);
            stack_push_ref(st, KIND_CALLABLE,
                           finding_ref(finding_add(w, NULL, 0, (const uint8_t *)ext,
                                                   n > 0 ? (size_t)n : 0, at)));
        }
        break;
    case 'R':  /* REDUCE: callable, args tuple -> result */
    case 0x81: /* NEWOBJ: class, args tuple -> object */
    {
        if (!stack_need(st, 2) || !may_be_tuple(stack_kind(st, 0)) ||
            !may_be_callable(stack_kind(st, 1)))
            return STEP_INVALID;
        note_call(w, stack_kind(st, 1), op, at);
        finding_called(w, stack_ref(st, 1));
        w->code_ops = true;
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
        finding_called(w, stack_ref(st, 2));
        w->code_ops = true;
        stack_pop(st, 3);
        stack_push(st, KIND_OBJECT);
        break;
    }
    case 'b': /* BUILD: object, state -> object (runs __setstate__ of what a call made) */
    {
        if (!stack_need(st, 2))
            return STEP_INVALID;
        w->code_ops = true;
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
    {
        if (!stack_need(st, 2))
            return STEP_INVALID;
        w->code_ops = true;
        int32_t finding = finding_stack_global(w, buf, stack_ref(st, 1), stack_ref(st, 0), at);
        stack_pop(st, 2);
        stack_push_ref(st, KIND_CALLABLE, finding_ref(finding));
        break;
    }
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
        pickle_ref cls_ref = stack_ref_after_mark(st);
        if (!may_be_callable(cls) || !stack_pop_mark(st, &items) || items < 1)
            return STEP_INVALID;
        note_call(w, cls, op, at);
        finding_called(w, cls_ref);
        w->code_ops = true;
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
        if (op == 'P')
            w->code_ops = true;
        if (op == 'p')
            memo_keep_ref(st, arg);
        else if (op == 'g')
            stack_push_ref(st, KIND_UNKNOWN, memo_ref(st, arg));
        else if (op == 'V')
            stack_push_ref(st, KIND_DATA, string_ref((size_t)(s - buf), line_len));
        else if (op == 'S')
            stack_push_ref(st, KIND_DATA, string_ref((size_t)(s - buf) + 1, line_len - 2));
        else
            stack_push(st, op == 'P' ? KIND_PERSISTENT : KIND_DATA);
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
        w->code_ops = true;
        int32_t finding = finding_add(w, buf + p, module_len, buf + name_pos, name_len, at);
        if (op == 'i')
            finding_called(w, finding_ref(finding));
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
        stack_push_ref(st, op == 'c' ? KIND_CALLABLE : KIND_OBJECT,
                       op == 'c' ? finding_ref(finding) : no_ref);
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
static void pickle_walk(const uint8_t *buf, size_t len, st_pickle_findings *findings, uint64_t base,
                        st_pickle_walk *w)
{
    pickle_stack st;
    memset(&st, 0, sizeof st);
    memset(w, 0, sizeof *w);
    w->protocol = -1;
    w->findings = findings;
    w->base = base;
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

void st_pickle_walk_buffer(const uint8_t *buf, size_t len, st_pickle_walk *w)
{
    pickle_walk(buf, len, NULL, 0, w);
}

void st_pickle_walk_findings(const uint8_t *buf, size_t len, uint64_t base,
                             st_pickle_findings *findings, st_pickle_walk *w)
{
    pickle_walk(buf, len, findings, base, w);
}

/* Pickles walked one after another (legacy torch.save writes several; a payload
 * may follow a harmless first pickle): at most this many, each consuming bytes. */
#define PICKLE_SUCCESSORS_MAX 64

void st_pickle_collect_findings(const uint8_t *buf, size_t len, uint64_t base,
                                st_pickle_findings *findings)
{
    if (buf == NULL || findings == NULL)
        return;
    size_t pos = 0;
    for (int i = 0; i < PICKLE_SUCCESSORS_MAX && pos < len; i++) {
        st_pickle_walk w;
        pickle_walk(buf + pos, len - pos, findings, base + pos, &w);
        if (!w.reached_stop || w.end == 0)
            return;
        pos += w.end;
    }
}

st_pickle_severity st_pickle_findings_worst(const st_pickle_findings *findings)
{
    st_pickle_severity worst = ST_PICKLE_BENIGN;
    for (size_t i = 0; i < findings->count; i++)
        if (findings->items[i].severity > worst)
            worst = findings->items[i].severity;
    return worst;
}

bool st_pickle_walk_data_only(const st_pickle_walk *w, const uint8_t *buf, size_t len,
                              bool complete)
{
    if (w->code_ops || !w->clean_stop || w->end > len)
        return false;
    size_t pos = w->end;
    for (int i = 0; i < PICKLE_SUCCESSORS_MAX; i++) {
        if (pos >= len)
            return true;
        st_pickle_walk next;
        st_pickle_walk_buffer(buf + pos, len - pos, &next);
        if (!st_pickle_walk_is_pickle(&next, len - pos, complete))
            return true; /* what follows is no pickle: prose after "N." */
        if (next.code_ops || !next.clean_stop || next.end == 0)
            return false;
        pos += next.end;
    }
    return false;
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
bool st_pickle_walk_is_pickle(const st_pickle_walk *w, size_t len, bool complete)
{
    if (w->opcodes >= 2 && (w->runs_code || w->imports_as_text || w->clean_stop))
        return true;
    return !complete && !w->invalid && !w->reached_stop && len >= PICKLE_RUN_OFF_MIN;
}

bool st_pickle_strong_magic(const uint8_t *buf, size_t len)
{
    return len >= 2 && buf[0] == 0x80 && buf[1] >= 2 && buf[1] <= 5;
}

/* complete says buf is the whole stream (see pickle_walk_is_pickle). */
bool st_pickle_is_stream(const uint8_t *buf, size_t len, bool complete)
{
    if (buf == NULL || len == 0)
        return false;
    if (st_pickle_strong_magic(buf, len))
        return true;
    st_pickle_walk w;
    st_pickle_walk_buffer(buf, len, &w);
    return st_pickle_walk_is_pickle(&w, len, complete);
}

bool st_sniff_is_code_pickle(const uint8_t *buf, size_t len, bool complete)
{
    if (buf == NULL || len == 0)
        return false;
    if (st_pickle_strong_magic(buf, len))
        return true;
    st_pickle_walk w;
    st_pickle_walk_buffer(buf, len, &w);
    return st_pickle_walk_is_pickle(&w, len, complete) &&
           !st_pickle_walk_data_only(&w, buf, len, complete);
}

/* Without being told, the buffer is taken as the start of a stream: the cautious side. */
bool st_sniff_is_pickle(const uint8_t *buf, size_t len)
{
    return st_pickle_is_stream(buf, len, false);
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
void st_pickle_note_walk(st_sniff_info *info, const st_pickle_walk *w, const char *where)
{
    char module[64] = "", name[64] = "", global[140] = "";
    if (w->global_module != NULL) {
        st_sniff_printable(module, sizeof module, w->global_module, w->global_module_len);
        st_sniff_printable(name, sizeof name, w->global_name, w->global_name_len);
        snprintf(global, sizeof global, "%s '%s %s'", w->global_op == 'i' ? "INST" : "GLOBAL",
                 module, name);
    }
    const char *stop = w->reached_stop ? " to STOP" : "";
    if ((w->runs_code || w->imports_as_text) && (w->code_op == 'c' || w->code_op == 'i'))
        st_sniff_note(info, "pickle opcodes%s: %s at offset %zu, %zu valid opcodes%s", where,
                      global, w->code_offset, w->opcodes, stop);
    else if (w->runs_code || w->imports_as_text)
        st_sniff_note(info, "pickle opcodes%s: %s at offset %zu%s%s, %zu valid opcodes%s", where,
                      pickle_op_name(w->code_op), w->code_offset, global[0] ? " after " : "",
                      global, w->opcodes, stop);
    else if (w->reached_stop)
        st_sniff_note(info, "pickle opcodes%s: %zu valid opcodes reach STOP at offset %zu", where,
                      w->opcodes, w->end - 1);
    else
        st_sniff_note(info,
                      "pickle opcodes%s: a valid opcode stream (%zu opcodes) runs past the bytes "
                      "looked at",
                      where, w->opcodes);
}

static const uint8_t legacy_torch_magic[14] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                               0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

st_format st_sniff_pickle_magic(const uint8_t *head, size_t head_len, st_sniff_info *info)
{
    if (info != NULL &&
        (st_sniff_has_at(head, head_len, 0, legacy_torch_magic, sizeof legacy_torch_magic) ||
         st_pickle_strong_magic(head, head_len)))
        st_pickle_collect_findings(head, head_len, 0, &info->findings);
    if (st_sniff_has_at(head, head_len, 0, legacy_torch_magic, sizeof legacy_torch_magic)) {
        st_sniff_note(info, "PyTorch legacy checkpoint: magic-number pickle (0x80 0x02 0x8a 0x0a "
                            "0x6c 0xfc 0x9c 0x46 ...) at offset 0");
        return ST_FORMAT_PYTORCH_LEGACY;
    }
    if (st_pickle_strong_magic(head, head_len)) {
        st_sniff_note(info, "pickle protocol %u (0x80 0x%02x) at offset 0", head[1], head[1]);
        return ST_FORMAT_PICKLE;
    }
    return ST_FORMAT_UNKNOWN;
}

st_format st_sniff_pickle_walk(const uint8_t *head, size_t head_len, bool whole, bool is_text,
                               st_sniff_info *info)
{
    st_pickle_walk w;
    st_pickle_walk_buffer(head, head_len, &w);
    if (!st_pickle_walk_is_pickle(&w, head_len, whole))
        return ST_FORMAT_UNKNOWN;
    /* Text that is a data-only pickle ("N.B." is NONE STOP) is text: nothing in it
     * imports, calls or builds an object. Binary ones stay pickles. */
    if (is_text && st_pickle_walk_data_only(&w, head, head_len, whole))
        return ST_FORMAT_UNKNOWN;
    if (info != NULL)
        st_pickle_collect_findings(head, head_len, 0, &info->findings);
    char where[48];
    if (w.protocol >= 0)
        snprintf(where, sizeof where, " (mixed, PROTO %d inside)", w.protocol);
    else
        snprintf(where, sizeof where, " (protocol 0/1, no PROTO header)");
    st_pickle_note_walk(info, &w, where);
    return ST_FORMAT_PICKLE;
}
