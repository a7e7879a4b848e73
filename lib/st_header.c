/* The strict safetensors header parser and validator (docs/DESIGN.md §3).
 *
 * The JSON grammar is written here for this one purpose, so that exactly one
 * reading of a header exists: no general JSON library decides what we accept.
 *
 * Rule order, when several rules are broken the first one in this list wins:
 *   1. framing: file_too_small, header_too_large, header_truncated;
 *   2. the whole header is valid UTF-8 (header_not_utf8);
 *   3. the first header byte is '{' (header_start);
 *   4. JSON grammar, the earliest problem in document order: json_syntax,
 *      json_escape, json_duplicate_key, json_nesting, integer_format,
 *      integer_overflow (every number in the header must be a plain u64);
 *   5. only 0x20 after the closing '}' (header_trailing_bytes);
 *   6. per-entry semantics, the first problem in document order: tensor names,
 *      tensor_not_object, unknown/missing fields, dtype, shape, data_offsets,
 *      __metadata__ (a missing field is noticed at the entry's closing '}');
 *   7. sizes, tensors in document order: size_overflow, sub_byte_partial,
 *      size_mismatch;
 *   8. coverage, tensors sorted by (begin, end, name): data_hole, data_overlap,
 *      then against the file size: data_trailing, data_truncated.
 *
 * Error offsets are absolute file offsets: 8 + position in the header for
 * header problems, data_start + data offset for coverage problems.
 *
 * Memory: every buffer has a capacity bound derived from N before anything is
 * allocated (see bounds below), and the result lives in one allocation. */
#include "st_header.h"
#include "st_alloc.h"
#include "st_utf8.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Objects with at most this many keys check duplicates as each key arrives;
 * bigger objects sort their keys when they close (or when the parse fails). */
#define SMALL_OBJECT_KEYS 16

#define FIELD_DTYPE 1u
#define FIELD_SHAPE 2u
#define FIELD_OFFSETS 4u
#define FIELD_ALL (FIELD_DTYPE | FIELD_SHAPE | FIELD_OFFSETS)

#define NO_TENSOR UINT32_MAX

/* A key of an open object. Positions and lengths fit in 32 bits because
 * N <= ST_HEADER_SIZE_MAX < 2^32. */
typedef struct key_record {
    uint32_t offset; /* decoded bytes at strings + offset */
    uint32_t len;
    uint32_t pos;    /* header position of the key's opening quote */
    uint32_t tensor; /* draft index for a root key, else NO_TENSOR */
} key_record;

/* What a value (or the container being read) means to the validator. */
typedef enum value_role {
    ROLE_IGNORED, /* no meaning (inside something already refused), grammar only */
    ROLE_ROOT,
    ROLE_TENSOR,
    ROLE_METADATA,
    ROLE_METADATA_VALUE,
    ROLE_DTYPE,
    ROLE_SHAPE,
    ROLE_SHAPE_ELEMENT,
    ROLE_OFFSETS,
    ROLE_OFFSET_ELEMENT,
} value_role;

typedef struct frame {
    bool is_object;
    bool metadata_object;   /* structurally the object under the root key __metadata__ */
    bool sorted_keys;       /* too many keys for pairwise checks: sort at close */
    value_role role;        /* ROOT, TENSOR, METADATA, SHAPE, OFFSETS or IGNORED */
    uint32_t key_start;     /* first key_record of this object */
    uint32_t strings_start; /* strings_used when it opened: an entry's decoded keys go at close */
    uint32_t count;         /* keys or elements so far */
    uint32_t tensor;        /* draft index for TENSOR, SHAPE, OFFSETS frames */
    uint32_t pos;           /* header position of the opening bracket */
    unsigned fields;        /* FIELD_* seen in a TENSOR frame */
} frame;

/* A tensor entry in document order, before sorting. */
typedef struct tensor_draft {
    uint32_t name_offset, name_len;
    st_dtype dtype;
    uint32_t shape_start, rank;
    uint64_t offsets[2];
    uint32_t shape_pos, offsets_pos;
} tensor_draft;

typedef struct metadata_draft {
    uint32_t key_offset, value_offset;
} metadata_draft;

typedef struct parser {
    const uint8_t *h; /* header bytes */
    size_t n;
    size_t pos;

    char *strings; /* decoded strings, capacity n + 1 (decoded + NUL <= encoded) */
    size_t strings_used;

    key_record *keys;
    size_t key_count, key_cap, key_max;
    tensor_draft *tensors;
    size_t tensor_count, tensor_cap, tensor_max;
    uint64_t *shapes;
    size_t shape_count, shape_cap, shape_max;
    metadata_draft *metadata;
    size_t metadata_count, metadata_cap, metadata_max;

    frame *frames;
    size_t depth, max_depth;
    size_t root_end; /* position after the root object's '}' */
    bool has_metadata;
    bool root_key_is_metadata; /* the last root key read was __metadata__ */
    bool string_has_control;   /* the last decoded string holds U+0000-U+001F, U+007F-U+009F */
    uint8_t dtype_len[ST_DTYPE_COUNT];
    st_dtype last_dtype; /* most headers use one or two dtypes: try the last one first */

    /* the current root key (tensor name), for error messages */
    uint32_t current_name_offset, current_name_len;

    const st_limits *limits; /* for the release hook, or NULL */
    size_t released;         /* header bytes before this were given to the hook */

    st_reason size_reason; /* first size problem of a complete entry (check_sizes) */
    st_error size_err;
    bool keep_shapes; /* the result is built from the drafts' shapes */

    st_reason semantic; /* first per-entry problem, reported after the grammar */
    st_error semantic_err;
    st_error *err;
} parser;

/* The result: one allocation laid out as file_arena, tensors, name index,
 * metadata, shapes, strings. */
typedef struct file_arena {
    const st_tensor **by_name;
    size_t count;
} file_arena;

/* ---------------------------------------------------------------- errors */

static st_reason verror(st_error *e, st_reason reason, uint64_t offset, const char *tensor,
                        size_t tensor_len, const char *fmt, va_list ap)
    __attribute__((format(printf, 6, 0)));

static st_reason verror(st_error *e, st_reason reason, uint64_t offset, const char *tensor,
                        size_t tensor_len, const char *fmt, va_list ap)
{
    e->reason = reason;
    e->offset = offset;
    st_error_set_tensor(e, tensor, tensor_len);
    vsnprintf(e->detail, sizeof e->detail, fmt, ap);
    return reason;
}

/* A grammar error at header position pos (no tensor). */
static st_reason grammar_error(parser *p, st_reason reason, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static st_reason grammar_error(parser *p, st_reason reason, size_t pos, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verror(p->err, reason, 8 + (uint64_t)pos, NULL, 0, fmt, ap);
    va_end(ap);
    return reason;
}

/* Records the first semantic problem; later ones are dropped (document order). */
static void semantic_error(parser *p, st_reason reason, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void semantic_error(parser *p, st_reason reason, size_t pos, const char *fmt, ...)
{
    if (p->semantic != ST_OK)
        return;
    p->semantic = reason;
    va_list ap;
    va_start(ap, fmt);
    verror(&p->semantic_err, reason, 8 + (uint64_t)pos, p->strings + p->current_name_offset,
           p->current_name_len, fmt, ap);
    va_end(ap);
}

/* Printable form of a decoded string for a detail sentence (shortened). */
static const char *shown(const char *s, size_t len, char *out, size_t out_size)
{
    size_t j = 0;
    for (size_t i = 0; i < len && j + 5 < out_size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f) {
            j += (size_t)snprintf(out + j, out_size - j, "\\x%02x", c);
        } else {
            out[j++] = (char)c;
        }
    }
    if (j + 5 >= out_size && len > 0)
        memcpy(out + out_size - 4, "...", 4);
    else
        out[j] = '\0';
    return out;
}

/* ----------------------------------------------------------- allocation */

/* Grows *array to hold need elements; need never exceeds max, the bound derived
 * from N, so capacity stays within max elements. */
static bool reserve(void **array, size_t *cap, size_t need, size_t max, size_t elem)
{
    if (need <= *cap)
        return true;
    if (need > max)
        return false;
    size_t next = *cap < 64 ? 64 : *cap;
    while (next < need) {
        if (__builtin_mul_overflow(next, (size_t)2, &next))
            return false;
    }
    if (next > max)
        next = max;
    size_t bytes;
    if (__builtin_mul_overflow(next, elem, &bytes))
        return false;
    void *grown = st_realloc(*array, bytes);
    if (grown == NULL)
        return false;
    *array = grown;
    *cap = next;
    assert(need <= *cap && *cap <= max);
    return true;
}

static st_reason out_of_memory(parser *p, size_t pos, const char *what)
{
    return grammar_error(p, ST_OUT_OF_MEMORY, pos,
                         "the header needs more memory for %s than this process can allocate",
                         what);
}

/* ------------------------------------------------------------ scanning */

static inline void skip_whitespace(parser *p)
{
    while (p->pos < p->n) {
        uint8_t c = p->h[p->pos];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t')
            break;
        p->pos++;
    }
}

static int hex_value(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Reads 4 hex digits at p->pos + 2 (after "\u"); -1 if malformed. */
static long read_u_escape(const parser *p, size_t at)
{
    if (p->n - at < 6 || p->h[at] != '\\' || p->h[at + 1] != 'u')
        return -1;
    long v = 0;
    for (size_t k = 2; k < 6; k++) {
        int d = hex_value(p->h[at + k]);
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* 1: bytes that end the plain run of a JSON string: '"', '\\', and C0 controls. */
static const uint8_t string_stop[256] = {
    [0x00] = 1,
    [0x01] = 1,
    [0x02] = 1,
    [0x03] = 1,
    [0x04] = 1,
    [0x05] = 1,
    [0x06] = 1,
    [0x07] = 1,
    [0x08] = 1,
    [0x09] = 1,
    [0x0a] = 1,
    [0x0b] = 1,
    [0x0c] = 1,
    [0x0d] = 1,
    [0x0e] = 1,
    [0x0f] = 1,
    [0x10] = 1,
    [0x11] = 1,
    [0x12] = 1,
    [0x13] = 1,
    [0x14] = 1,
    [0x15] = 1,
    [0x16] = 1,
    [0x17] = 1,
    [0x18] = 1,
    [0x19] = 1,
    [0x1a] = 1,
    [0x1b] = 1,
    [0x1c] = 1,
    [0x1d] = 1,
    [0x1e] = 1,
    [0x1f] = 1,
    ['"'] = 1,
    ['\\'] = 1,
    /* 2: bytes that may start a control character JSON allows raw (DEL, C1) */
    [0x7f] = 2,
    [0xc2] = 2,
};

/* Decodes the string whose opening quote is at p->pos into p->strings at
 * strings_used (NUL-terminated); keep advances strings_used past it. A decoded
 * U+0000 is json_escape unless allow_nul. Leaves p->pos after the closing quote. */
static st_reason scan_string(parser *p, bool keep, bool allow_nul, uint32_t *offset, uint32_t *len)
{
    size_t start = p->pos;
    size_t i = start + 1;
    char *out = p->strings + p->strings_used;
    p->string_has_control = false;
    size_t o = 0;
    for (;;) {
        size_t run = i;
        while (i < p->n && !string_stop[p->h[i]])
            i++;
        memcpy(out + o, p->h + run, i - run);
        o += i - run;
        if (i < p->n && string_stop[p->h[i]] == 2) {
            /* the header is valid UTF-8, so 0xc2 is followed by a continuation byte */
            if (p->h[i] == 0x7f || p->h[i + 1] <= 0x9f)
                p->string_has_control = true;
            out[o++] = (char)p->h[i++];
            continue;
        }
        if (i >= p->n)
            return grammar_error(p, ST_JSON_SYNTAX, start,
                                 "a string starting here is not closed before the header ends");
        uint8_t c = p->h[i];
        if (c == '"')
            break;
        if (c != '\\')
            return grammar_error(p, ST_JSON_SYNTAX, i,
                                 "control character 0x%02x must be escaped inside a JSON string",
                                 c);
        if (i + 1 >= p->n)
            return grammar_error(p, ST_JSON_SYNTAX, start,
                                 "a string starting here is not closed before the header ends");
        uint8_t e = p->h[i + 1];
        char simple = 0;
        switch (e) {
        case '"':
            simple = '"';
            break;
        case '\\':
            simple = '\\';
            break;
        case '/':
            simple = '/';
            break;
        case 'b':
            simple = '\b';
            break;
        case 'f':
            simple = '\f';
            break;
        case 'n':
            simple = '\n';
            break;
        case 'r':
            simple = '\r';
            break;
        case 't':
            simple = '\t';
            break;
        case 'u':
            break;
        default:
            return grammar_error(p, ST_JSON_ESCAPE, i, "unknown string escape '\\%c'",
                                 e >= 0x20 && e < 0x7f ? (char)e : '?');
        }
        if (simple) {
            /* \b \f \n \r \t are controls; " \\ / are not */
            if ((unsigned char)simple < 0x20)
                p->string_has_control = true;
            out[o++] = simple;
            i += 2;
            continue;
        }
        long cp = read_u_escape(p, i);
        if (cp < 0)
            return grammar_error(p, ST_JSON_ESCAPE, i, "\\u must be followed by 4 hex digits");
        size_t escape_len = 6;
        if (cp >= 0xdc00 && cp <= 0xdfff)
            return grammar_error(p, ST_JSON_ESCAPE, i,
                                 "\\u%04lX is a low surrogate without a high surrogate before it",
                                 cp);
        if (cp >= 0xd800 && cp <= 0xdbff) {
            long low = read_u_escape(p, i + 6);
            if (low < 0xdc00 || low > 0xdfff)
                return grammar_error(p, ST_JSON_ESCAPE, i,
                                     "\\u%04lX is a high surrogate not followed by a low surrogate "
                                     "escape",
                                     cp);
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            escape_len = 12;
        }
        if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
            p->string_has_control = true;
        if (cp == 0 && !allow_nul)
            return grammar_error(p, ST_JSON_ESCAPE, i,
                                 "\\u0000 is not allowed in keys or metadata values");
        /* UTF-8 encoding is never longer than the escape it came from */
        if (cp < 0x80) {
            out[o++] = (char)cp;
        } else if (cp < 0x800) {
            out[o++] = (char)(0xc0 | (cp >> 6));
            out[o++] = (char)(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            out[o++] = (char)(0xe0 | (cp >> 12));
            out[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            out[o++] = (char)(0x80 | (cp & 0x3f));
        } else {
            out[o++] = (char)(0xf0 | (cp >> 18));
            out[o++] = (char)(0x80 | ((cp >> 12) & 0x3f));
            out[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            out[o++] = (char)(0x80 | (cp & 0x3f));
        }
        i += escape_len;
    }
    /* each escape decoded to at most its own length, each raw byte to itself */
    assert(o <= i - start - 1);
    out[o] = '\0';
    *offset = (uint32_t)p->strings_used;
    *len = (uint32_t)o;
    if (keep)
        p->strings_used += o + 1;
    p->pos = i + 1;
    return ST_OK;
}

/* Reads a JSON number at p->pos that must be a plain u64: digits only, no sign,
 * no leading zero, no fraction or exponent. */
static st_reason scan_integer(parser *p, uint64_t *value)
{
    size_t start = p->pos, i = start;
    bool negative = false, fraction = false, exponent = false;
    if (p->h[i] == '-') {
        negative = true;
        i++;
    }
    size_t digits_start = i;
    while (i < p->n && p->h[i] >= '0' && p->h[i] <= '9')
        i++;
    size_t digits_end = i;
    if (digits_end == digits_start)
        return grammar_error(p, ST_JSON_SYNTAX, start, "'-' is not followed by a digit");
    if (i < p->n && p->h[i] == '.') {
        fraction = true;
        i++;
        size_t f = i;
        while (i < p->n && p->h[i] >= '0' && p->h[i] <= '9')
            i++;
        if (i == f)
            return grammar_error(p, ST_JSON_SYNTAX, start,
                                 "a number's '.' is not followed by a digit");
    }
    if (i < p->n && (p->h[i] == 'e' || p->h[i] == 'E')) {
        exponent = true;
        i++;
        if (i < p->n && (p->h[i] == '+' || p->h[i] == '-'))
            i++;
        size_t f = i;
        while (i < p->n && p->h[i] >= '0' && p->h[i] <= '9')
            i++;
        if (i == f)
            return grammar_error(p, ST_JSON_SYNTAX, start, "a number's exponent has no digits");
    }
    int shown_len = (int)((i - start) < 40 ? (i - start) : 40);
    if (negative || fraction || exponent ||
        (p->h[digits_start] == '0' && digits_end - digits_start > 1))
        return grammar_error(p, ST_INTEGER_FORMAT, start,
                             "number '%.*s' is not a plain non-negative integer (no sign, leading "
                             "zero, fraction or exponent)",
                             shown_len, (const char *)p->h + start);
    uint64_t v = 0;
    /* up to 19 digits cannot overflow u64 (10^19 - 1 < 2^64) */
    if (digits_end - digits_start <= 19) {
        for (size_t k = digits_start; k < digits_end; k++)
            v = v * 10 + (uint64_t)(p->h[k] - '0');
        *value = v;
        p->pos = i;
        return ST_OK;
    }
    for (size_t k = digits_start; k < digits_end; k++) {
        if (__builtin_mul_overflow(v, (uint64_t)10, &v) ||
            __builtin_add_overflow(v, (uint64_t)(p->h[k] - '0'), &v))
            return grammar_error(p, ST_INTEGER_OVERFLOW, start,
                                 "integer '%.*s' does not fit in 64 bits", shown_len,
                                 (const char *)p->h + start);
    }
    *value = v;
    p->pos = i;
    return ST_OK;
}

static st_reason scan_literal(parser *p)
{
    static const char *const literals[] = {"true", "false", "null"};
    for (size_t k = 0; k < 3; k++) {
        size_t len = strlen(literals[k]);
        if (p->n - p->pos >= len && memcmp(p->h + p->pos, literals[k], len) == 0) {
            p->pos += len;
            return ST_OK;
        }
    }
    return grammar_error(p, ST_JSON_SYNTAX, p->pos,
                         "unexpected character '%c' where a value should start",
                         p->h[p->pos] >= 0x20 && p->h[p->pos] < 0x7f ? (char)p->h[p->pos] : '?');
}

/* ---------------------------------------------------------- duplicates */

static int key_compare(const char *strings, const key_record *a, const key_record *b)
{
    uint32_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(strings + a->offset, strings + b->offset, n);
    if (c != 0)
        return c;
    if (a->len != b->len)
        return a->len < b->len ? -1 : 1;
    return 0;
}

/* Stable bottom-up merge sort of keys by decoded bytes; equal keys stay in
 * document order. Already ordered runs merge in linear time. It sorts 4-byte
 * indices (two arrays of them, half the memory of a copy of the 16-byte records,
 * which matters at the root of a 100,000-tensor header) and then moves the records
 * into place along the permutation's cycles. */
static bool sort_keys(const char *strings, key_record *keys, size_t count)
{
    if (count < 2)
        return true;
    uint32_t *order = st_malloc(2 * count * sizeof *order);
    if (order == NULL)
        return false;
    uint32_t *src = order, *dst = order + count;
    for (size_t i = 0; i < count; i++)
        src[i] = (uint32_t)i;
    for (size_t width = 1; width < count; width *= 2) {
        for (size_t lo = 0; lo < count; lo += 2 * width) {
            size_t mid = lo + width < count ? lo + width : count;
            size_t hi = lo + 2 * width < count ? lo + 2 * width : count;
            size_t a = lo, b = mid, o = lo;
            if (mid < hi && key_compare(strings, &keys[src[mid - 1]], &keys[src[mid]]) <= 0) {
                memcpy(dst + lo, src + lo, (hi - lo) * sizeof *src);
                continue;
            }
            while (a < mid && b < hi)
                dst[o++] =
                    key_compare(strings, &keys[src[b]], &keys[src[a]]) < 0 ? src[b++] : src[a++];
            while (a < mid)
                dst[o++] = src[a++];
            while (b < hi)
                dst[o++] = src[b++];
        }
        uint32_t *t = src;
        src = dst;
        dst = t;
    }
    /* keys[j] becomes the record at src[j]; each index is set to its own position
     * once its place is filled, which ends every cycle */
    for (size_t i = 0; i < count; i++) {
        if (src[i] == i)
            continue;
        key_record first = keys[i];
        size_t j = i;
        for (;;) {
            size_t k = src[j];
            src[j] = (uint32_t)j;
            if (k == i) {
                keys[j] = first;
                break;
            }
            keys[j] = keys[k];
            j = k;
        }
    }
    free(order);
    return true;
}

/* Sorts keys[start..end) and returns the earliest second occurrence of a key
 * (the duplicate), or NULL. */
static const key_record *earliest_duplicate(parser *p, size_t start, size_t end, bool *ok)
{
    *ok = true;
    if (end - start < 2)
        return NULL;
    *ok = sort_keys(p->strings, p->keys + start, end - start);
    if (!*ok)
        return NULL;
    const key_record *found = NULL;
    for (size_t k = start + 1; k < end; k++) {
        if (key_compare(p->strings, &p->keys[k - 1], &p->keys[k]) == 0 &&
            (found == NULL || p->keys[k].pos < found->pos))
            found = &p->keys[k];
    }
    return found;
}

static st_reason duplicate_error(parser *p, const key_record *dup, bool in_root)
{
    char buf[96];
    const char *s = p->strings + dup->offset;
    shown(s, dup->len, buf, sizeof buf);
    grammar_error(p, ST_JSON_DUPLICATE_KEY, dup->pos,
                  in_root ? "tensor '%s' appears twice in the header"
                          : "key '%s' appears twice in the same object",
                  buf);
    if (in_root)
        st_error_set_tensor(p->err, s, dup->len);
    return ST_JSON_DUPLICATE_KEY;
}

/* After a grammar error: a duplicate key earlier in the document, in an object
 * still open, is the first problem and replaces the error. */
static void prefer_earlier_duplicate(parser *p)
{
    uint64_t best_pos = p->err->offset;
    const key_record *best = NULL;
    bool best_in_root = false;
    for (size_t d = 0; d < p->depth; d++) {
        frame *f = &p->frames[d];
        if (!f->is_object || !f->sorted_keys)
            continue;
        /* this object's keys end where the next open frame's begin */
        size_t end = d + 1 < p->depth ? p->frames[d + 1].key_start : p->key_count;
        bool ok;
        const key_record *dup = earliest_duplicate(p, f->key_start, end, &ok);
        if (dup != NULL && 8 + (uint64_t)dup->pos < best_pos) {
            best = dup;
            best_pos = 8 + (uint64_t)dup->pos;
            best_in_root = d == 0;
        }
    }
    if (best != NULL)
        duplicate_error(p, best, best_in_root);
}

/* ------------------------------------------------------------ semantics */

static const char *role_refusal(value_role role, st_reason *reason)
{
    switch (role) {
    case ROLE_TENSOR:
        *reason = ST_TENSOR_NOT_OBJECT;
        return "the tensor entry is not an object";
    case ROLE_METADATA:
        *reason = ST_METADATA_NOT_OBJECT;
        return "__metadata__ is not an object";
    case ROLE_METADATA_VALUE:
        *reason = ST_METADATA_VALUE_NOT_STRING;
        return "a __metadata__ value is not a string";
    case ROLE_DTYPE:
        *reason = ST_DTYPE_INVALID;
        return "dtype is not a string";
    case ROLE_SHAPE:
        *reason = ST_SHAPE_INVALID;
        return "shape is not an array of integers";
    case ROLE_SHAPE_ELEMENT:
        *reason = ST_SHAPE_INVALID;
        return "shape holds something other than an integer";
    case ROLE_OFFSETS:
        *reason = ST_OFFSETS_INVALID;
        return "data_offsets is not an array of two integers";
    case ROLE_OFFSET_ELEMENT:
        *reason = ST_OFFSETS_INVALID;
        return "data_offsets holds something other than an integer";
    default:
        *reason = ST_OK;
        return NULL;
    }
}

/* A value of the wrong JSON type for its role. */
static void refuse_role(parser *p, value_role role, size_t pos)
{
    st_reason reason;
    const char *why = role_refusal(role, &reason);
    if (why == NULL)
        return;
    if (p->current_name_len > 0 && role != ROLE_METADATA && role != ROLE_METADATA_VALUE) {
        char buf[96];
        semantic_error(
            p, reason, pos, "tensor '%s': %s",
            shown(p->strings + p->current_name_offset, p->current_name_len, buf, sizeof buf), why);
    } else {
        semantic_error(p, reason, pos, "%s", why);
    }
}

static const char *current_name(parser *p, char *buf, size_t size)
{
    return shown(p->strings + p->current_name_offset, p->current_name_len, buf, size);
}

/* Handles a root key: __metadata__ or a tensor name. Returns the value's role. */
static value_role root_key(parser *p, const key_record *key, bool key_has_control)
{
    const char *s = p->strings + key->offset;
    p->root_key_is_metadata = key->len == 12 && memcmp(s, "__metadata__", 12) == 0;
    if (p->root_key_is_metadata) {
        p->current_name_len = 0;
        return p->semantic == ST_OK ? ROLE_METADATA : ROLE_IGNORED;
    }
    p->current_name_offset = key->offset;
    p->current_name_len = key->len;
    if (p->semantic != ST_OK)
        return ROLE_IGNORED;
    if (key->len == 0) {
        semantic_error(p, ST_TENSOR_NAME_EMPTY, key->pos, "a tensor name is empty");
        return ROLE_IGNORED;
    }
    if (key->len > ST_TENSOR_NAME_MAX) {
        semantic_error(p, ST_TENSOR_NAME_TOO_LONG, key->pos,
                       "a tensor name is %u bytes long, more than the %d allowed", key->len,
                       ST_TENSOR_NAME_MAX);
        return ROLE_IGNORED;
    }
    if (key_has_control) {
        char buf[96];
        semantic_error(p, ST_TENSOR_NAME_CONTROL, key->pos,
                       "tensor name '%s' contains a control character",
                       current_name(p, buf, sizeof buf));
        return ROLE_IGNORED;
    }
    return ROLE_TENSOR;
}

/* Handles a key of a tensor entry. Returns the value's role. */
/* FIELD_* for the three tensor entry fields, 0 for any other key. */
static unsigned tensor_field(const char *s, uint32_t len)
{
    if (len == 5 && memcmp(s, "dtype", 5) == 0)
        return FIELD_DTYPE;
    if (len == 5 && memcmp(s, "shape", 5) == 0)
        return FIELD_SHAPE;
    if (len == 12 && memcmp(s, "data_offsets", 12) == 0)
        return FIELD_OFFSETS;
    return 0;
}

/* Handles a key of a tensor entry (field from tensor_field, first of its name
 * in this entry). Returns the value's role. */
static value_role tensor_key(parser *p, const key_record *key, unsigned field)
{
    switch (field) {
    case FIELD_DTYPE:
        return ROLE_DTYPE;
    case FIELD_SHAPE:
        return ROLE_SHAPE;
    case FIELD_OFFSETS:
        return ROLE_OFFSETS;
    default:
        break;
    }
    char buf[96], field_buf[64];
    semantic_error(p, ST_TENSOR_UNKNOWN_FIELD, key->pos,
                   "tensor '%s': unknown field '%s' (only dtype, shape and data_offsets)",
                   current_name(p, buf, sizeof buf),
                   shown(p->strings + key->offset, key->len, field_buf, sizeof field_buf));
    return ROLE_IGNORED;
}

static st_reason push_frame(parser *p, bool is_object, value_role role, size_t pos)
{
    if (p->depth >= p->max_depth)
        return grammar_error(p, ST_JSON_NESTING, pos, "JSON nesting deeper than %zu levels",
                             p->max_depth);
    frame *parent = p->depth > 0 ? &p->frames[p->depth - 1] : NULL;
    /* frames is allocated with max_depth entries before parsing starts (the
     * analyzer does not see st_parse set it); depth < max_depth was checked. */
    /* NOLINTNEXTLINE(clang-analyzer-core.NullDereference) */
    p->frames[p->depth++] = (frame){
        .is_object = is_object,
        .role = role,
        .key_start = (uint32_t)p->key_count,
        .strings_start = (uint32_t)p->strings_used,
        .pos = (uint32_t)pos,
        .tensor = parent != NULL ? parent->tensor : NO_TENSOR,
    };
    return ST_OK;
}

/* The value at p->pos starts a container or is a scalar; role says what it must be. */
static st_reason begin_object(parser *p, value_role role)
{
    size_t pos = p->pos;
    value_role frame_role = ROLE_IGNORED;
    if (role == ROLE_ROOT || role == ROLE_TENSOR || role == ROLE_METADATA)
        frame_role = role;
    else
        refuse_role(p, role, pos);
    /* structurally the __metadata__ object, even when semantics are already off */
    bool metadata_object = p->depth == 1 && p->root_key_is_metadata;
    st_reason r = push_frame(p, true, frame_role, pos);
    if (r != ST_OK)
        return r;
    frame *f = &p->frames[p->depth - 1];
    f->metadata_object = metadata_object;
    if (frame_role == ROLE_METADATA)
        p->has_metadata = true;
    p->pos++;
    return ST_OK;
}

static st_reason begin_array(parser *p, value_role role)
{
    size_t pos = p->pos;
    value_role frame_role = ROLE_IGNORED;
    if (role == ROLE_SHAPE || role == ROLE_OFFSETS)
        frame_role = role;
    else
        refuse_role(p, role, pos);
    st_reason r = push_frame(p, false, frame_role, pos);
    if (r != ST_OK)
        return r;
    frame *f = &p->frames[p->depth - 1];
    if (frame_role == ROLE_SHAPE) {
        p->tensors[f->tensor].shape_start = (uint32_t)p->shape_count;
        p->tensors[f->tensor].shape_pos = (uint32_t)pos;
    } else if (frame_role == ROLE_OFFSETS) {
        p->tensors[f->tensor].offsets_pos = (uint32_t)pos;
    }
    p->pos++;
    return ST_OK;
}

/* st_dtype_from_name with the name lengths cached and the last hit tried first. */
static bool dtype_lookup(parser *p, const char *name, size_t len, st_dtype *out)
{
    if (p->dtype_len[p->last_dtype] == len &&
        memcmp(st_dtype_name(p->last_dtype), name, len) == 0) {
        *out = p->last_dtype;
        return true;
    }
    for (unsigned d = 0; d < ST_DTYPE_COUNT; d++) {
        if (p->dtype_len[d] == len && memcmp(st_dtype_name((st_dtype)d), name, len) == 0) {
            p->last_dtype = (st_dtype)d;
            *out = (st_dtype)d;
            return true;
        }
    }
    return false;
}

static st_reason string_value(parser *p, value_role role, bool in_metadata_object)
{
    size_t pos = p->pos;
    bool keep = role == ROLE_METADATA_VALUE && p->semantic == ST_OK;
    uint32_t offset, len;
    st_reason r = scan_string(p, keep, !in_metadata_object, &offset, &len);
    if (r != ST_OK)
        return r;
    if (role == ROLE_DTYPE) {
        st_dtype dtype;
        if (!dtype_lookup(p, p->strings + offset, len, &dtype)) {
            char buf[96], name[64];
            semantic_error(p, ST_DTYPE_UNKNOWN, pos, "tensor '%s': unknown dtype '%s'",
                           current_name(p, buf, sizeof buf),
                           shown(p->strings + offset, len, name, sizeof name));
        } else {
            frame *f = &p->frames[p->depth - 1];
            p->tensors[f->tensor].dtype = dtype;
        }
    } else if (role == ROLE_METADATA_VALUE) {
        if (keep)
            p->metadata[p->metadata_count - 1].value_offset = offset;
    } else {
        refuse_role(p, role, pos);
    }
    return ST_OK;
}

static st_reason number_value(parser *p, value_role role)
{
    size_t pos = p->pos;
    uint64_t v = 0;
    st_reason r = scan_integer(p, &v);
    if (r != ST_OK)
        return r;
    if (role == ROLE_SHAPE_ELEMENT) {
        /* each stored entry took at least 2 header bytes: shape_max bounds them */
        if (!reserve((void **)&p->shapes, &p->shape_cap, p->shape_count + 1, p->shape_max,
                     sizeof *p->shapes))
            return out_of_memory(p, pos, "shapes");
        p->shapes[p->shape_count++] = v;
        p->tensors[p->frames[p->depth - 1].tensor].rank++;
    } else if (role == ROLE_OFFSET_ELEMENT) {
        frame *f = &p->frames[p->depth - 1];
        /* count was incremented for this element already */
        if (f->count > 2) {
            char buf[96];
            semantic_error(p, ST_OFFSETS_INVALID, pos,
                           "tensor '%s': data_offsets has more than 2 entries",
                           current_name(p, buf, sizeof buf));
        } else {
            p->tensors[f->tensor].offsets[f->count - 1] = v;
        }
    } else {
        refuse_role(p, role, pos);
    }
    return ST_OK;
}

/* The value about to be read at p->pos, with its role. */
static st_reason begin_value(parser *p, value_role role, bool in_metadata_object)
{
    skip_whitespace(p);
    if (p->pos >= p->n)
        return grammar_error(p, ST_JSON_SYNTAX, p->pos,
                             "the header ends where a value should start");
    if (p->semantic != ST_OK)
        role = ROLE_IGNORED;
    uint8_t c = p->h[p->pos];
    switch (c) {
    case '{':
        return begin_object(p, role);
    case '[':
        return begin_array(p, role);
    case '"':
        return string_value(p, role, in_metadata_object);
    case '-':
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9':
        return number_value(p, role);
    default: {
        size_t pos = p->pos;
        st_reason r = scan_literal(p);
        if (r == ST_OK)
            refuse_role(p, role, pos);
        return r;
    }
    }
}

/* Reads a key at p->pos inside the object frame f, checks it for duplicates and
 * for its meaning, and consumes the ':'. Sets *role for the value. */
static st_reason read_key(parser *p, value_role *role)
{
    frame *f = &p->frames[p->depth - 1];
    if (p->pos >= p->n || p->h[p->pos] != '"')
        return grammar_error(p, ST_JSON_SYNTAX, p->pos,
                             "an object key (a string) is expected here");
    size_t pos = p->pos;
    bool root = p->depth == 1;
    uint32_t offset, len;
    /* a decoded U+0000 in a tensor name is a name problem, in any other key an escape problem */
    st_reason r = scan_string(p, true, root, &offset, &len);
    if (r != ST_OK)
        return r;
    /* every key is at least 4 header bytes ("":0): key_max bounds them */
    if (!reserve((void **)&p->keys, &p->key_cap, p->key_count + 1, p->key_max, sizeof *p->keys))
        return out_of_memory(p, pos, "keys");
    key_record *key = &p->keys[p->key_count++];
    /* scan_string writes offset and len whenever it returns ST_OK; the analyzer
     * takes a path where st_error_set (another file) returns ST_OK. */
    /* NOLINTNEXTLINE(clang-analyzer-core.uninitialized.Assign) */
    key->offset = offset;
    key->len = len;
    key->pos = (uint32_t)pos;
    key->tensor = NO_TENSOR;
    /* In a tensor entry, the first dtype/shape/data_offsets cannot repeat an
     * earlier key (those are other fields or unknown names), and a second one
     * repeats the first: no key comparisons for the usual entries. */
    unsigned field = f->role == ROLE_TENSOR ? tensor_field(p->strings + offset, len) : 0;
    bool repeated = (f->fields & field) != 0;
    f->fields |= field;
    if (repeated) {
        duplicate_error(p, key, false);
        prefer_earlier_duplicate(p);
        return ST_JSON_DUPLICATE_KEY;
    }
    if (!f->sorted_keys && field == 0) {
        for (size_t k = f->key_start; k + 1 < p->key_count; k++) {
            const key_record *earlier = &p->keys[k];
            if (earlier->len == len && key_compare(p->strings, earlier, key) == 0) {
                duplicate_error(p, key, root);
                prefer_earlier_duplicate(p);
                return ST_JSON_DUPLICATE_KEY;
            }
        }
    }
    if (p->key_count - f->key_start >= SMALL_OBJECT_KEYS)
        f->sorted_keys = true;
    f->count++;

    *role = ROLE_IGNORED;
    if (root) {
        *role = root_key(p, key, p->string_has_control);
        f->tensor = NO_TENSOR;
        if (*role == ROLE_TENSOR) {
            /* a draft exists only while every earlier entry was valid, so each
             * earlier draft took >= 40 header bytes: tensor_max bounds them */
            if (!reserve((void **)&p->tensors, &p->tensor_cap, p->tensor_count + 1, p->tensor_max,
                         sizeof *p->tensors))
                return out_of_memory(p, pos, "tensors");
            p->tensors[p->tensor_count] = (tensor_draft){.name_offset = offset, .name_len = len};
            key->tensor = (uint32_t)p->tensor_count;
            f->tensor = key->tensor;
            p->tensor_count++;
        }
    } else if (p->semantic == ST_OK) {
        if (f->role == ROLE_TENSOR) {
            *role = tensor_key(p, key, field);
        } else if (f->role == ROLE_METADATA) {
            *role = ROLE_METADATA_VALUE;
            /* each entry took >= 6 header bytes ("":"",): metadata_max bounds them */
            if (!reserve((void **)&p->metadata, &p->metadata_cap, p->metadata_count + 1,
                         p->metadata_max, sizeof *p->metadata))
                return out_of_memory(p, pos, "metadata");
            p->metadata[p->metadata_count].key_offset = offset;
            p->metadata[p->metadata_count].value_offset = UINT32_MAX;
            p->metadata_count++;
        }
    }
    skip_whitespace(p);
    if (p->pos >= p->n || p->h[p->pos] != ':')
        return grammar_error(p, ST_JSON_SYNTAX, p->pos, "':' is expected after an object key");
    p->pos++;
    return ST_OK;
}

static st_reason check_draft_size(const parser *p, const tensor_draft *t, st_error *err);

/* Closes the innermost frame at p->pos (its '}' or ']'). */
static st_reason end_frame(parser *p)
{
    frame *f = &p->frames[p->depth - 1];
    bool root = p->depth == 1;
    if (f->is_object && (f->sorted_keys || root)) {
        bool ok;
        const key_record *dup = earliest_duplicate(p, f->key_start, p->key_count, &ok);
        if (!ok)
            return out_of_memory(p, p->pos, "sorting keys");
        if (dup != NULL) {
            duplicate_error(p, dup, root);
            p->depth--; /* this frame's keys are sorted; outer frames still count */
            prefer_earlier_duplicate(p);
            return ST_JSON_DUPLICATE_KEY;
        }
    }
    if (p->semantic == ST_OK && f->role == ROLE_TENSOR && f->fields != FIELD_ALL) {
        char buf[96];
        semantic_error(p, ST_TENSOR_MISSING_FIELD, f->pos, "tensor '%s': missing field%s%s%s",
                       current_name(p, buf, sizeof buf), (f->fields & FIELD_DTYPE) ? "" : " dtype",
                       (f->fields & FIELD_SHAPE) ? "" : " shape",
                       (f->fields & FIELD_OFFSETS) ? "" : " data_offsets");
    }
    if (p->semantic == ST_OK && f->role == ROLE_TENSOR) {
        /* a complete, valid entry: its size arithmetic now, its verdict later */
        const tensor_draft *t = &p->tensors[f->tensor];
        if (p->size_reason == ST_OK)
            p->size_reason = check_draft_size(p, t, &p->size_err);
        /* without a result to build, nothing reads a closed entry's shape again */
        if (!p->keep_shapes)
            p->shape_count = t->shape_start;
    }
    if (p->semantic == ST_OK && f->role == ROLE_OFFSETS) {
        tensor_draft *t = &p->tensors[f->tensor];
        char buf[96];
        if (f->count != 2)
            semantic_error(p, ST_OFFSETS_INVALID, f->pos,
                           "tensor '%s': data_offsets has %u entries, not 2",
                           current_name(p, buf, sizeof buf), f->count);
        else if (t->offsets[0] > t->offsets[1])
            semantic_error(p, ST_OFFSETS_INVALID, f->pos,
                           "tensor '%s': data_offsets [%llu, %llu] begin after they end",
                           current_name(p, buf, sizeof buf), (unsigned long long)t->offsets[0],
                           (unsigned long long)t->offsets[1]);
    }
    /* the root keys stay: they become the name index */
    if (f->is_object && !root)
        p->key_count = f->key_start;
    /* Nothing keeps the decoded keys of a closed object other than __metadata__ (a
     * tensor entry's "dtype", "shape", "data_offsets"): the error sentences were
     * written already and the tensor's name was read before the object opened. Their
     * bytes are given back, so the decoded strings hold little more than the names. */
    if (f->is_object && !root && !f->metadata_object)
        p->strings_used = f->strings_start;
    p->depth--;
    p->pos++;
    if (root)
        p->root_end = p->pos;
    return ST_OK;
}

/* The grammar pass with the per-entry semantics folded in: an explicit frame
 * stack (bounded by max_depth) instead of recursion. */
static st_reason parse_document(parser *p)
{
    st_reason r = begin_value(p, ROLE_ROOT, false);
    bool hook = p->limits != NULL && p->limits->release != NULL;
    for (;;) {
        if (r != ST_OK)
            return r;
        if (hook && p->pos - p->released >= ST_HEADER_RELEASE_STEP) {
            /* offsets count from buf, 8 bytes before the header */
            p->limits->release(p->limits->release_context, 8 + (uint64_t)p->released,
                               8 + (uint64_t)p->pos);
            p->released = p->pos;
        }
        /* after '{' or '[' (count == 0 and nothing read yet) or after a value */
        if (p->depth == 0)
            return ST_OK;
        frame *f = &p->frames[p->depth - 1];
        skip_whitespace(p);
        if (p->pos >= p->n)
            return grammar_error(p, ST_JSON_SYNTAX, p->pos, "the header ends inside an %s",
                                 f->is_object ? "object" : "array");
        uint8_t c = p->h[p->pos];
        /* a ',' is always followed by a key or value below, so "[1,]" and
         * "{"a":1,}" fail there: no trailing commas */
        if (c == (f->is_object ? '}' : ']')) {
            r = end_frame(p);
            continue;
        }
        if (f->count > 0) {
            if (c != ',')
                return grammar_error(p, ST_JSON_SYNTAX, p->pos, "',' or '%c' is expected here",
                                     f->is_object ? '}' : ']');
            p->pos++;
            skip_whitespace(p);
        }
        bool in_metadata_object = f->metadata_object;
        value_role role = ROLE_IGNORED;
        if (f->is_object) {
            r = read_key(p, &role);
            if (r != ST_OK)
                return r;
        } else {
            f->count++;
            if (f->role == ROLE_SHAPE)
                role = ROLE_SHAPE_ELEMENT;
            else if (f->role == ROLE_OFFSETS)
                role = ROLE_OFFSET_ELEMENT;
        }
        r = begin_value(p, role, in_metadata_object);
    }
}

/* ------------------------------------------------------- sizes, coverage */

static void format_shape(char *out, size_t size, const uint64_t *shape, size_t rank)
{
    size_t j = (size_t)snprintf(out, size, "[");
    for (size_t k = 0; k < rank && j < size; k++)
        j += (size_t)snprintf(out + j, size - j, "%s%llu", k ? ", " : "",
                              /* shape is NULL only when every tensor is a scalar (rank 0): the loop
                               * does not run then. */
                              /* NOLINTNEXTLINE(clang-analyzer-core.NullDereference) */
                              (unsigned long long)shape[k]);
    if (j < size)
        snprintf(out + j, size - j, "]");
}

/* Checked size arithmetic of one draft whose entry is complete: ST_OK, or its
 * problem written to err. */
static st_reason check_draft_size(const parser *p, const tensor_draft *t, st_error *err)
{
    const char *name = p->strings + t->name_offset;
    /* no shape storage at all when every tensor is a scalar */
    const uint64_t *shape = p->shapes != NULL ? p->shapes + t->shape_start : NULL;
    uint64_t elements, bytes = 0;
    bool counted = st_shape_elements(shape, t->rank, &elements);
    st_reason r = counted ? st_dtype_bytes(t->dtype, elements, &bytes) : ST_SIZE_OVERFLOW;
    if (r == ST_OK && t->offsets[1] - t->offsets[0] == bytes) /* begin <= end was checked */
        return ST_OK;
    /* the rest only words the error */
    char shown_name[96], shape_text[96];
    shown(name, t->name_len, shown_name, sizeof shown_name);
    format_shape(shape_text, sizeof shape_text, shape, t->rank);
    if (!counted)
        return st_error_set(err, ST_SIZE_OVERFLOW, 8 + (uint64_t)t->shape_pos, name,
                            "tensor '%s': the element count of shape %s overflows 64 bits",
                            shown_name, shape_text);
    if (r == ST_SIZE_OVERFLOW)
        return st_error_set(err, r, 8 + (uint64_t)t->shape_pos, name,
                            "tensor '%s': the byte size of shape %s of %s overflows 64 bits",
                            shown_name, shape_text, st_dtype_name(t->dtype));
    if (r != ST_OK)
        return st_error_set(err, r, 8 + (uint64_t)t->shape_pos, name,
                            "tensor '%s': shape %s of %s is not a whole number of bytes",
                            shown_name, shape_text, st_dtype_name(t->dtype));
    uint64_t span = t->offsets[1] - t->offsets[0];
    return st_error_set(err, ST_SIZE_MISMATCH, 8 + (uint64_t)t->offsets_pos, name,
                        "tensor '%s': data_offsets [%llu, %llu] span %llu bytes but shape "
                        "%s of %s needs %llu",
                        shown_name, (unsigned long long)t->offsets[0],
                        (unsigned long long)t->offsets[1], (unsigned long long)span, shape_text,
                        st_dtype_name(t->dtype), (unsigned long long)bytes);
}

/* The size arithmetic of the drafts, in document order: each entry was checked as it
 * closed (end_frame), the first problem kept for after the grammar and the
 * per-entry rules. */
static st_reason check_sizes(parser *p)
{
    if (p->size_reason == ST_OK)
        return ST_OK;
    *p->err = p->size_err;
    return p->size_reason;
}

/* File order: begin, then end (zero-size tensors first), then name. */
static int draft_compare(const parser *p, uint32_t ia, uint32_t ib)
{
    const tensor_draft *a = &p->tensors[ia], *b = &p->tensors[ib];
    if (a->offsets[0] != b->offsets[0])
        return a->offsets[0] < b->offsets[0] ? -1 : 1;
    if (a->offsets[1] != b->offsets[1])
        return a->offsets[1] < b->offsets[1] ? -1 : 1;
    key_record ka = {a->name_offset, a->name_len, 0, 0}, kb = {b->name_offset, b->name_len, 0, 0};
    return key_compare(p->strings, &ka, &kb);
}

/* Stable bottom-up merge sort of draft indices in file order; linear on input
 * that is already in order (the usual case: writers emit tensors by offset). */
static bool sort_drafts(const parser *p, uint32_t *order, size_t count)
{
    if (count < 2)
        return true;
    uint32_t *tmp = st_malloc(count * sizeof *tmp);
    if (tmp == NULL)
        return false;
    uint32_t *src = order, *dst = tmp;
    for (size_t width = 1; width < count; width *= 2) {
        for (size_t lo = 0; lo < count; lo += 2 * width) {
            size_t mid = lo + width < count ? lo + width : count;
            size_t hi = lo + 2 * width < count ? lo + 2 * width : count;
            size_t a = lo, b = mid, o = lo;
            if (mid < hi && draft_compare(p, src[mid - 1], src[mid]) <= 0) {
                memcpy(dst + lo, src + lo, (hi - lo) * sizeof *src);
                continue;
            }
            while (a < mid && b < hi)
                dst[o++] = draft_compare(p, src[b], src[a]) < 0 ? src[b++] : src[a++];
            while (a < mid)
                dst[o++] = src[a++];
            while (b < hi)
                dst[o++] = src[b++];
        }
        uint32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != order)
        memcpy(order, src, count * sizeof *order);
    free(tmp);
    return true;
}

/* Exact coverage of the data section by the tensors in file order. */
static st_reason check_coverage(parser *p, const uint32_t *order, uint64_t data_start,
                                uint64_t file_size, uint64_t *data_size)
{
    uint64_t expected = 0;
    for (size_t k = 0; k < p->tensor_count; k++) {
        const tensor_draft *t = &p->tensors[order[k]];
        const char *name = p->strings + t->name_offset;
        char shown_name[96];
        if (t->offsets[0] > expected) {
            shown(name, t->name_len, shown_name, sizeof shown_name);
            return st_error_set(p->err, ST_DATA_HOLE, data_start + expected, name,
                                "data bytes [%llu, %llu) before tensor '%s' belong to no tensor",
                                (unsigned long long)expected, (unsigned long long)t->offsets[0],
                                shown_name);
        }
        if (t->offsets[0] < expected) {
            shown(name, t->name_len, shown_name, sizeof shown_name);
            return st_error_set(p->err, ST_DATA_OVERLAP, data_start + t->offsets[0], name,
                                "tensor '%s' at data_offsets [%llu, %llu] overlaps bytes before "
                                "%llu that another tensor already covers",
                                shown_name, (unsigned long long)t->offsets[0],
                                (unsigned long long)t->offsets[1], (unsigned long long)expected);
        }
        expected = t->offsets[1];
    }
    *data_size = expected;
    uint64_t total;
    if (__builtin_add_overflow(data_start, expected, &total))
        return st_error_set(p->err, ST_DATA_TRUNCATED,
                            file_size == ST_FILE_SIZE_UNKNOWN ? ST_NO_OFFSET : file_size, NULL,
                            "the tensors end at data offset %llu, beyond any possible file size",
                            (unsigned long long)expected);
    if (file_size == ST_FILE_SIZE_UNKNOWN)
        return ST_OK;
    if (total < file_size)
        return st_error_set(p->err, ST_DATA_TRAILING, total, NULL,
                            "%llu bytes follow the end of the last tensor at file offset %llu",
                            (unsigned long long)(file_size - total), (unsigned long long)total);
    if (total > file_size)
        return st_error_set(p->err, ST_DATA_TRUNCATED, file_size, NULL,
                            "the file ends at %llu but the tensors need %llu bytes (%llu missing)",
                            (unsigned long long)file_size, (unsigned long long)total,
                            (unsigned long long)(total - file_size));
    return ST_OK;
}

/* ---------------------------------------------------------------- result */

static int tensor_name_compare(const st_tensor *a, const char *name, size_t len)
{
    size_t n = a->name_len < len ? a->name_len : len;
    int c = memcmp(a->name, name, n);
    if (c != 0)
        return c;
    if (a->name_len != len)
        return a->name_len < len ? -1 : 1;
    return 0;
}

/* Copies what the caller keeps into one allocation sized by the real counts. */
static st_reason build_file(parser *p, const uint32_t *order, st_file *out)
{
    size_t names = 0;
    for (size_t i = 0; i < p->tensor_count; i++)
        names += (size_t)p->tensors[i].name_len + 1;
    for (size_t i = 0; i < p->metadata_count; i++)
        names += strlen(p->strings + p->metadata[i].key_offset) + 1 +
                 strlen(p->strings + p->metadata[i].value_offset) + 1;
    size_t t = p->tensor_count, m = p->metadata_count, s = p->shape_count;
    /* all counts are bounded by N <= 1e8, so these sums cannot overflow size_t */
    size_t off_tensors = sizeof(file_arena);
    size_t off_index = off_tensors + t * sizeof(st_tensor);
    size_t off_metadata = off_index + t * sizeof(const st_tensor *);
    size_t off_shapes = off_metadata + m * sizeof(st_metadata_entry);
    size_t off_strings = off_shapes + s * sizeof(uint64_t);
    size_t total = off_strings + names;
    char *base = st_malloc(total);
    if (base == NULL)
        return out_of_memory(p, 0, "the tensor table");
    file_arena *arena = (file_arena *)base;
    st_tensor *tensors = (st_tensor *)(base + off_tensors);
    const st_tensor **by_name = (const st_tensor **)(base + off_index);
    st_metadata_entry *metadata = (st_metadata_entry *)(base + off_metadata);
    uint64_t *shapes = (uint64_t *)(base + off_shapes);
    char *strings = base + off_strings;

    /* position of each draft in file order, to map the name index */
    uint32_t *position = st_malloc((t ? t : 1) * sizeof *position);
    if (position == NULL) {
        free(base);
        return out_of_memory(p, 0, "the tensor table");
    }
    size_t shape_used = 0, string_used = 0;
    for (size_t k = 0; k < t; k++) {
        const tensor_draft *d = &p->tensors[order[k]];
        st_tensor *dst = &tensors[k];
        position[order[k]] = (uint32_t)k;
        memcpy(strings + string_used, p->strings + d->name_offset, (size_t)d->name_len + 1);
        dst->name = strings + string_used;
        dst->name_len = d->name_len;
        string_used += (size_t)d->name_len + 1;
        dst->dtype = d->dtype;
        dst->rank = d->rank;
        if (d->rank > 0)
            memcpy(shapes + shape_used, p->shapes + d->shape_start, d->rank * sizeof *shapes);
        dst->shape = shapes + shape_used;
        shape_used += d->rank;
        st_shape_elements(dst->shape, dst->rank, &dst->elements); /* checked in check_sizes */
        dst->begin = d->offsets[0];
        dst->end = d->offsets[1];
    }
    for (size_t k = 0; k < m; k++) {
        const char *key = p->strings + p->metadata[k].key_offset;
        const char *value = p->strings + p->metadata[k].value_offset;
        size_t kl = strlen(key) + 1, vl = strlen(value) + 1;
        memcpy(strings + string_used, key, kl);
        metadata[k].key = strings + string_used;
        string_used += kl;
        memcpy(strings + string_used, value, vl);
        metadata[k].value = strings + string_used;
        string_used += vl;
    }
    /* the root keys were sorted by name when the root object closed */
    size_t j = 0;
    for (size_t k = 0; k < p->key_count; k++) {
        if (p->keys[k].tensor != NO_TENSOR)
            by_name[j++] = &tensors[position[p->keys[k].tensor]];
    }
    free(position);
    arena->by_name = by_name;
    arena->count = j;

    out->tensor_count = t;
    out->tensors = t ? tensors : NULL;
    out->metadata_count = m;
    out->metadata = m ? metadata : NULL;
    out->has_metadata = p->has_metadata;
    out->internal = base;
    return ST_OK;
}

static void parser_free(parser *p)
{
    free(p->strings);
    free(p->keys);
    free(p->tensors);
    free(p->shapes);
    free(p->metadata);
    free(p->frames);
}

/* ------------------------------------------------------------ public API */

static uint64_t header_limit(const st_limits *limits)
{
    /* the limit is configurable lower, never higher than the reference's bound */
    if (limits == NULL || limits->max_header_size == 0 ||
        limits->max_header_size > ST_HEADER_SIZE_MAX)
        return ST_HEADER_SIZE_MAX;
    return limits->max_header_size;
}

st_reason st_header_length(const uint8_t *prefix, size_t prefix_len, uint64_t file_size,
                           const st_limits *limits, uint64_t *header_size, st_error *err)
{
    if (err != NULL)
        st_error_clear(err);
    if (file_size != ST_FILE_SIZE_UNKNOWN && file_size < 8)
        return st_error_set(err, ST_FILE_TOO_SMALL, 0, NULL,
                            "the file has %llu bytes, fewer than the 8 of the header length",
                            (unsigned long long)file_size);
    if (prefix == NULL || prefix_len < 8)
        return st_error_set(err, ST_HEADER_TRUNCATED, prefix_len, NULL,
                            "only %zu bytes are available, fewer than the 8 of the header length",
                            prefix_len);
    uint64_t n = 0;
    for (int k = 7; k >= 0; k--)
        n = (n << 8) | prefix[k];
    uint64_t limit = header_limit(limits);
    if (n > limit)
        return st_error_set(err, ST_HEADER_TOO_LARGE, 0, NULL,
                            "the header length %llu is above the limit of %llu bytes",
                            (unsigned long long)n, (unsigned long long)limit);
    /* n <= 1e8, so 8 + n cannot overflow */
    if (file_size != ST_FILE_SIZE_UNKNOWN && 8 + n > file_size)
        return st_error_set(err, ST_HEADER_TRUNCATED, file_size, NULL,
                            "the header needs bytes up to %llu but the file ends at %llu",
                            (unsigned long long)(8 + n), (unsigned long long)file_size);
    if (header_size != NULL)
        *header_size = n;
    return ST_OK;
}

static st_reason parse_header(const uint8_t *buf, size_t buf_len, uint64_t file_size,
                              const st_limits *limits, bool build, st_file *out, st_error *err)
{
    st_error scratch;
    if (err == NULL)
        err = &scratch;
    memset(out, 0, sizeof *out);
    st_error_clear(err);

    uint64_t n;
    st_reason r = st_header_length(buf, buf_len, file_size, limits, &n, err);
    if (r != ST_OK)
        return r;
    /* st_header_length sets n whenever it returns ST_OK; the analyzer takes a
     * path where st_error_set (another file) returns ST_OK. */
    /* NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult) */
    if (buf_len - 8 < n)
        return st_error_set(err, ST_HEADER_TRUNCATED, buf_len, NULL,
                            "the header needs bytes up to %llu but only %zu are available",
                            (unsigned long long)(8 + n), buf_len);
    const uint8_t *h = buf + 8;

    size_t bad = 0;
    if (!st_utf8_valid(h, n, &bad))
        return st_error_set(err, ST_HEADER_NOT_UTF8, 8 + (uint64_t)bad, NULL,
                            "the header is not valid UTF-8 at byte 0x%02x", h[bad]);
    if (n == 0 || h[0] != '{')
        return st_error_set(err, ST_HEADER_START, 8, NULL, "the header must start with '{'%s",
                            n == 0 ? " but is empty" : " (no leading whitespace)");
    /* the JSON pass reads it again from the start, a step at a time */
    if (limits != NULL && limits->release != NULL && n >= ST_HEADER_RELEASE_STEP)
        limits->release(limits->release_context, 8, 8 + n);

    parser p;
    memset(&p, 0, sizeof p);
    p.h = h;
    p.n = n;
    p.err = err;
    p.limits = limits;
    p.keep_shapes = build;
    st_error_clear(&p.semantic_err);
    st_error_clear(&p.size_err);
    /* capacity bounds, each from the fewest header bytes one item can take */
    p.key_max = n / 4 + 2; /* "":0 */
    p.tensor_max =
        n / 40 + 2;          /* a valid entry "a":{"dtype":"U8","shape":[],"data_offsets":[0,0]} */
    p.shape_max = n / 2 + 2; /* 0, */
    p.metadata_max = n / 5 + 2; /* "":"" */
    unsigned depth =
        limits != NULL && limits->max_depth != 0 ? limits->max_depth : ST_JSON_DEPTH_MAX;
    p.max_depth = depth < n ? depth : n; /* each level takes a byte */
    for (unsigned d = 0; d < ST_DTYPE_COUNT; d++)
        p.dtype_len[d] = (uint8_t)strlen(st_dtype_name((st_dtype)d));
    p.strings = st_malloc(n + 1);
    p.frames = st_malloc(p.max_depth * sizeof *p.frames);
    if (p.strings == NULL || p.frames == NULL) {
        parser_free(&p);
        return st_error_set(err, ST_OUT_OF_MEMORY, 0, NULL,
                            "a header of %llu bytes needs more memory than can be allocated",
                            (unsigned long long)n);
    }

    r = parse_document(&p);
    /* duplicates in objects still open may come before the error */
    if (r != ST_OK && r != ST_JSON_DUPLICATE_KEY && r != ST_OUT_OF_MEMORY)
        prefer_earlier_duplicate(&p);
    if (r != ST_OK) {
        r = err->reason;
        parser_free(&p);
        return r;
    }
    for (size_t i = p.root_end; i < n; i++) {
        if (h[i] != ' ') {
            parser_free(&p);
            return st_error_set(err, ST_HEADER_TRAILING_BYTES, 8 + (uint64_t)i, NULL,
                                "byte 0x%02x follows the closing '}' (only spaces may)", h[i]);
        }
    }
    if (p.semantic != ST_OK) {
        *err = p.semantic_err;
        parser_free(&p);
        return err->reason;
    }
    r = check_sizes(&p);
    uint32_t *order = NULL;
    if (r == ST_OK) {
        order = st_malloc((p.tensor_count ? p.tensor_count : 1) * sizeof *order);
        if (order == NULL)
            r = out_of_memory(&p, 0, "sorting tensors");
    }
    if (r == ST_OK) {
        for (size_t i = 0; i < p.tensor_count; i++)
            order[i] = (uint32_t)i;
        if (!sort_drafts(&p, order, p.tensor_count))
            r = out_of_memory(&p, 0, "sorting tensors");
    }
    uint64_t data_size = 0;
    if (r == ST_OK)
        r = check_coverage(&p, order, 8 + n, file_size, &data_size);
    if (r == ST_OK && build) {
        r = build_file(&p, order, out);
    } else if (r == ST_OK) {
        /* the verdict alone: counts, no table */
        out->tensor_count = p.tensor_count;
        out->metadata_count = p.metadata_count;
        out->has_metadata = p.has_metadata;
    }
    free(order);
    parser_free(&p);
    if (r != ST_OK)
        return r;
    out->header_size = n;
    out->data_start = 8 + n;
    out->file_size = file_size;
    out->data_size = data_size;
    return ST_OK;
}

st_reason st_header_parse(const uint8_t *buf, size_t buf_len, uint64_t file_size,
                          const st_limits *limits, st_file *out, st_error *err)
{
    return parse_header(buf, buf_len, file_size, limits, true, out, err);
}

st_reason st_header_check(const uint8_t *buf, size_t buf_len, uint64_t file_size,
                          const st_limits *limits, st_file *out, st_error *err)
{
    return parse_header(buf, buf_len, file_size, limits, false, out, err);
}

void st_file_free(st_file *file)
{
    if (file == NULL)
        return;
    free(file->internal);
    memset(file, 0, sizeof *file);
}

const st_tensor *st_file_find(const st_file *file, const char *name, size_t name_len)
{
    if (file == NULL || file->internal == NULL || name == NULL)
        return NULL;
    const file_arena *arena = file->internal;
    size_t lo = 0, hi = arena->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = tensor_name_compare(arena->by_name[mid], name, name_len);
        if (c == 0)
            return arena->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *st_file_metadata(const st_file *file, const char *key)
{
    if (file == NULL || key == NULL || file->metadata == NULL)
        return NULL;
    for (size_t i = 0; i < file->metadata_count; i++) {
        if (strcmp(file->metadata[i].key, key) == 0)
            return file->metadata[i].value;
    }
    return NULL;
}
