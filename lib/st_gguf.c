/* The strict GGUF validator (st_gguf.h). Layout, little-endian throughout:
 *
 *   "GGUF", u32 version (2 or 3), u64 tensor count, u64 key-value count;
 *   each key-value: string key, u32 value type, value (a string is u64 length + bytes;
 *     an array is u32 element type + u64 count + elements);
 *   each tensor: string name, u32 dimension count, u64 per dimension, u32 ggml type,
 *     u64 offset relative to the data section;
 *   zero padding to general.alignment; the data section, each tensor padded to the
 *   alignment; the file ends after the last tensor, padded at most to the alignment.
 *
 * Every read goes through one reader that checks the position against the file size,
 * the header limit and the bytes held, in that order, so a refusal never depends on
 * how much of the file the caller holds (only ST_GGUF_TRUNCATED does). Tables grow with
 * the entries actually read; counts are bounded first by what the header could hold. */
#include "st_gguf.h"
#include "st_alloc.h"
#include "st_utf8.h"

#include <stdlib.h>
#include <string.h>

/* the value types (st_gguf_value_type), short */
enum {
    GV_U8 = ST_GGUF_V_U8,
    GV_I8 = ST_GGUF_V_I8,
    GV_U16 = ST_GGUF_V_U16,
    GV_I16 = ST_GGUF_V_I16,
    GV_U32 = ST_GGUF_V_U32,
    GV_I32 = ST_GGUF_V_I32,
    GV_F32 = ST_GGUF_V_F32,
    GV_BOOL = ST_GGUF_V_BOOL,
    GV_STRING = ST_GGUF_V_STRING,
    GV_ARRAY = ST_GGUF_V_ARRAY,
    GV_U64 = ST_GGUF_V_U64,
    GV_I64 = ST_GGUF_V_I64,
    GV_F64 = ST_GGUF_V_F64,
    GV_COUNT = ST_GGUF_VALUE_TYPES,
};

/* the smallest encodings: a key-value (8-byte length, 1-byte key, type, 1-byte value)
 * and a tensor entry (length, 1-byte name, dimension count, one dimension, type, offset) */
#define KV_MIN_BYTES 14u
#define TENSOR_MIN_BYTES 33u
#define FIXED_HEADER_BYTES 24u

typedef struct ggml_type_info {
    const char *name;
    uint32_t block_elements;
    uint32_t block_bytes;
} ggml_type_info;

/* ggml's type table (ggml.h, the GGUF specification): ids 4, 5, 31-33 and 36-38 were
 * removed and stay unknown here */
static const ggml_type_info ggml_types[] = {
    [0] = {"F32", 1, 4},         [1] = {"F16", 1, 2},         [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},      [6] = {"Q5_0", 32, 22},      [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},      [9] = {"Q8_1", 32, 36},      [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110},   [12] = {"Q4_K", 256, 144},   [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},   [15] = {"Q8_K", 256, 292},   [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74},  [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},   [21] = {"IQ3_S", 256, 110},  [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},         [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},        [27] = {"I64", 1, 8},        [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56},   [30] = {"BF16", 1, 2},       [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66},   [39] = {"MXFP4", 32, 17},
};

bool st_gguf_ggml_type(uint32_t type, const char **name, uint32_t *block_elements,
                       uint32_t *block_bytes)
{
    if (type >= sizeof ggml_types / sizeof ggml_types[0] || ggml_types[type].name == NULL)
        return false;
    if (name != NULL)
        *name = ggml_types[type].name;
    if (block_elements != NULL)
        *block_elements = ggml_types[type].block_elements;
    if (block_bytes != NULL)
        *block_bytes = ggml_types[type].block_bytes;
    return true;
}

bool st_gguf_is_attempt(const uint8_t *buf, size_t len)
{
    if (len < 8 || memcmp(buf, "GGUF", 4) != 0)
        return false;
    for (size_t i = 4; i < 8; i++)
        if (buf[i] < 0x20 || buf[i] > 0x7e)
            return true;
    return false;
}

/* ---- the reader ---- */

typedef struct reader {
    const uint8_t *buf;
    size_t len;
    uint64_t file_size;
    uint64_t limit; /* header_limit */
    uint64_t pos;
    uint64_t need; /* on ST_GGUF_TRUNCATED: the bytes wanted, 0 when final */
    st_error *err;
} reader;

/* The bytes the header may still use from the position on (the file and the limit). */
static uint64_t room_left(const reader *r)
{
    uint64_t end = r->limit;
    if (r->file_size != ST_GGUF_SIZE_UNKNOWN && r->file_size < end)
        end = r->file_size;
    return end > r->pos ? end - r->pos : 0;
}

static st_reason take(reader *r, uint64_t n, const uint8_t **out, const char *what)
{
    uint64_t end;
    if (__builtin_add_overflow(r->pos, n, &end))
        end = UINT64_MAX;
    if (r->file_size != ST_GGUF_SIZE_UNKNOWN && end > r->file_size) {
        r->need = 0;
        st_error_set(r->err, ST_GGUF_TRUNCATED, r->pos, NULL,
                     "the file ends at offset %llu inside the header (%s)",
                     (unsigned long long)r->file_size, what);
        return ST_GGUF_TRUNCATED;
    }
    if (end > r->limit) {
        st_error_set(r->err, ST_GGUF_HEADER_TOO_LARGE, r->pos, NULL,
                     "the header goes past the limit of %llu bytes (%s)",
                     (unsigned long long)r->limit, what);
        return ST_GGUF_HEADER_TOO_LARGE;
    }
    if (end > r->len) {
        r->need = end;
        st_error_set(r->err, ST_GGUF_TRUNCATED, r->pos, NULL,
                     "the input ends at offset %llu inside the header (%s)",
                     (unsigned long long)r->len, what);
        return ST_GGUF_TRUNCATED;
    }
    *out = r->buf + r->pos;
    r->pos = end;
    return ST_OK;
}

static uint64_t le(const uint8_t *p, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned i = bytes; i-- > 0;)
        v = (v << 8) | p[i];
    return v;
}

static st_reason read_u32(reader *r, uint32_t *v, const char *what)
{
    const uint8_t *p;
    st_reason reason = take(r, 4, &p, what);
    if (reason == ST_OK)
        *v = (uint32_t)le(p, 4);
    return reason;
}

static st_reason read_u64(reader *r, uint64_t *v, const char *what)
{
    const uint8_t *p;
    st_reason reason = take(r, 8, &p, what);
    if (reason == ST_OK)
        *v = le(p, 8);
    return reason;
}

/* ---- growing tables ---- */

typedef struct name_ref {
    const uint8_t *name;
    size_t len;
    uint64_t offset;
    size_t index;
} name_ref;

static bool grow(void **items, size_t *cap, size_t count, size_t size)
{
    if (count < *cap)
        return true;
    size_t next = *cap ? *cap * 2 : 16;
    if (next > SIZE_MAX / size)
        return false;
    void *grown = st_realloc(*items, next * size);
    if (grown == NULL)
        return false;
    *items = grown;
    *cap = next;
    return true;
}

static int compare_names(const void *a, const void *b)
{
    const name_ref *x = a;
    const name_ref *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->name, y->name, n) : 0;
    if (c != 0)
        return c;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Sorts refs; the first repeated name (in sorted order) at its second occurrence. */
static const name_ref *find_duplicate(name_ref *refs, size_t count)
{
    if (count < 2)
        return NULL;
    qsort(refs, count, sizeof *refs, compare_names);
    for (size_t i = 1; i < count; i++)
        if (refs[i].len == refs[i - 1].len &&
            (refs[i].len == 0 || memcmp(refs[i].name, refs[i - 1].name, refs[i].len) == 0))
            return &refs[i];
    return NULL;
}

/* ---- metadata ---- */

typedef struct parse_state {
    reader r;
    st_gguf_file *file;
    name_ref *keys;
    size_t key_count;
    size_t key_cap;
    size_t kv_cap; /* of file->kvs */
    bool have_alignment;
} parse_state;

static unsigned fixed_size(uint32_t type)
{
    switch (type) {
    case GV_U8:
    case GV_I8:
    case GV_BOOL:
        return 1;
    case GV_U16:
    case GV_I16:
        return 2;
    case GV_U32:
    case GV_I32:
    case GV_F32:
        return 4;
    case GV_U64:
    case GV_I64:
    case GV_F64:
        return 8;
    default:
        return 0; /* string, array */
    }
}

static st_reason read_string(reader *r, const char *key, const uint8_t **s, uint64_t *len)
{
    uint64_t at = r->pos;
    st_reason reason = read_u64(r, len, "a string length");
    if (reason != ST_OK)
        return reason;
    if (*len > ST_GGUF_STRING_MAX || *len > room_left(r))
        return st_error_set(r->err, ST_GGUF_STRING, at, key,
                            "a string of %llu bytes is longer than the bound or the file",
                            (unsigned long long)*len);
    reason = take(r, *len, s, "a string");
    if (reason != ST_OK)
        return reason;
    size_t bad = 0;
    if (!st_utf8_valid(*s, (size_t)*len, &bad))
        return st_error_set(r->err, ST_GGUF_UTF8, at + 8 + bad, key,
                            "a string is not UTF-8 (byte at offset %llu)",
                            (unsigned long long)(at + 8 + bad));
    return ST_OK;
}

static st_reason check_bools(reader *r, const uint8_t *p, uint64_t n, uint64_t at, const char *key)
{
    for (uint64_t i = 0; i < n; i++)
        if (p[i] > 1)
            return st_error_set(r->err, ST_GGUF_BOOL, at + i, key,
                                "a boolean is %u, neither 0 nor 1", p[i]);
    return ST_OK;
}

static st_reason read_array(reader *r, const char *key)
{
    uint64_t at = r->pos;
    uint32_t type;
    uint64_t count;
    st_reason reason = read_u32(r, &type, "an array type");
    if (reason == ST_OK)
        reason = read_u64(r, &count, "an array length");
    if (reason != ST_OK)
        return reason;
    if (type == GV_ARRAY)
        return st_error_set(r->err, ST_GGUF_ARRAY, at, key,
                            "an array of arrays (nested arrays are refused)");
    if (type >= GV_COUNT)
        return st_error_set(r->err, ST_GGUF_ARRAY, at, key, "an array of unknown type %u", type);
    unsigned size = fixed_size(type);
    uint64_t min_bytes = size ? size : 8; /* a string is at least its length */
    if (count > ST_GGUF_ARRAY_MAX || count > room_left(r) / min_bytes)
        return st_error_set(r->err, ST_GGUF_ARRAY, at + 4, key,
                            "an array of %llu elements is longer than the bound or the file",
                            (unsigned long long)count);
    if (size != 0) {
        const uint8_t *p;
        uint64_t start = r->pos;
        reason = take(r, count * size, &p, "array elements");
        if (reason == ST_OK && type == GV_BOOL)
            reason = check_bools(r, p, count, start, key);
        return reason;
    }
    for (uint64_t i = 0; i < count && reason == ST_OK; i++) {
        const uint8_t *s;
        uint64_t len;
        reason = read_string(r, key, &s, &len);
    }
    return reason;
}

static bool is_power_of_two(uint64_t v)
{
    return v != 0 && (v & (v - 1)) == 0;
}

/* The keys the validator gives a meaning: general.alignment and general.architecture. */
static st_reason special_key(parse_state *st, const char *key, uint32_t type, uint64_t value_at)
{
    reader *r = &st->r;
    if (strcmp(key, "general.alignment") == 0) {
        if (type != GV_U32)
            return st_error_set(r->err, ST_GGUF_ALIGNMENT, value_at, key,
                                "general.alignment must be a u32 (value type 4), not type %u",
                                type);
        uint32_t a = (uint32_t)le(r->buf + value_at, 4);
        if (!is_power_of_two(a) || a > ST_GGUF_ALIGNMENT_MAX)
            return st_error_set(r->err, ST_GGUF_ALIGNMENT, value_at, key,
                                "general.alignment %u is not a power of two up to %u", a,
                                ST_GGUF_ALIGNMENT_MAX);
        st->file->alignment = a;
    } else if (strcmp(key, "general.architecture") == 0) {
        if (type != GV_STRING)
            return st_error_set(r->err, ST_GGUF_ARCHITECTURE, value_at, key,
                                "general.architecture must be a string, not type %u", type);
        st->file->architecture = r->buf + value_at + 8;
        st->file->architecture_len = (size_t)le(r->buf + value_at, 8);
    }
    return ST_OK;
}

static st_reason read_key(parse_state *st, char *key, uint64_t *key_at)
{
    reader *r = &st->r;
    uint64_t len;
    *key_at = r->pos;
    st_reason reason = read_u64(r, &len, "a key length");
    if (reason != ST_OK)
        return reason;
    if (len == 0)
        return st_error_set(r->err, ST_GGUF_KEY, *key_at, NULL, "an empty key");
    if (len > ST_GGUF_KEY_MAX)
        return st_error_set(r->err, ST_GGUF_KEY, *key_at, NULL, "a key of %llu bytes, more than %u",
                            (unsigned long long)len, ST_GGUF_KEY_MAX);
    const uint8_t *p;
    reason = take(r, len, &p, "a key");
    if (reason != ST_OK)
        return reason;
    for (uint64_t i = 0; i < len; i++)
        if (p[i] < 0x21 || p[i] > 0x7e)
            return st_error_set(r->err, ST_GGUF_KEY, *key_at + 8 + i, NULL,
                                "a key holds byte 0x%02x: keys are printable ASCII", p[i]);
    memcpy(key, p, (size_t)len);
    key[len] = '\0';
    if (!grow((void **)&st->keys, &st->key_cap, st->key_count, sizeof *st->keys))
        return ST_OUT_OF_MEMORY;
    st->keys[st->key_count] = (name_ref){p, (size_t)len, *key_at, st->key_count};
    st->key_count++;
    return ST_OK;
}

static st_reason read_kv(parse_state *st, char *key)
{
    reader *r = &st->r;
    uint64_t key_at;
    st_reason reason = read_key(st, key, &key_at);
    if (reason != ST_OK)
        return reason;
    uint64_t type_at = r->pos;
    uint32_t type;
    reason = read_u32(r, &type, "a value type");
    if (reason != ST_OK)
        return reason;
    if (type >= GV_COUNT)
        return st_error_set(r->err, ST_GGUF_TYPE, type_at, key, "unknown value type %u", type);
    uint64_t value_at = r->pos;
    st_gguf_file *file = st->file;
    if (!grow((void **)&file->kvs, &st->kv_cap, st->key_count - 1, sizeof *file->kvs))
        return ST_OUT_OF_MEMORY;
    const name_ref *named = &st->keys[st->key_count - 1];
    st_gguf_kv *entry = &file->kvs[st->key_count - 1];
    *entry = (st_gguf_kv){.key = named->name,
                          .key_len = named->len,
                          .type = type,
                          .value_at = value_at,
                          .value = r->buf + value_at};
    if (type == GV_STRING) {
        const uint8_t *s;
        uint64_t len;
        reason = read_string(r, key, &s, &len);
    } else if (type == GV_ARRAY) {
        reason = read_array(r, key);
    } else {
        const uint8_t *p;
        reason = take(r, fixed_size(type), &p, "a value");
        if (reason == ST_OK && type == GV_BOOL)
            reason = check_bools(r, p, 1, value_at, key);
    }
    if (reason != ST_OK)
        return reason;
    if (type == GV_ARRAY) {
        entry->array_type = (uint32_t)le(r->buf + value_at, 4);
        entry->array_count = le(r->buf + value_at + 4, 8);
        entry->value_at = value_at + 12;
        entry->value = r->buf + entry->value_at;
    }
    return special_key(st, key, type, value_at);
}

static st_reason read_metadata(parse_state *st)
{
    char *key = st_malloc(ST_GGUF_KEY_MAX + 1);
    if (key == NULL)
        return ST_OUT_OF_MEMORY;
    st_reason reason = ST_OK;
    for (uint64_t i = 0; i < st->file->kv_count && reason == ST_OK; i++)
        reason = read_kv(st, key);
    free(key);
    if (reason != ST_OK)
        return reason;
    const name_ref *dup = find_duplicate(st->keys, st->key_count);
    if (dup != NULL) {
        char name[ST_TENSOR_NAME_MAX + 1];
        size_t n = dup->len < ST_TENSOR_NAME_MAX ? dup->len : ST_TENSOR_NAME_MAX;
        memcpy(name, dup->name, n);
        name[n] = '\0';
        return st_error_set(st->r.err, ST_GGUF_DUPLICATE_KEY, dup->offset, name,
                            "the key is repeated");
    }
    if (st->file->architecture == NULL)
        return st_error_set(st->r.err, ST_GGUF_ARCHITECTURE, st->r.pos, NULL,
                            "general.architecture is missing (the specification requires it)");
    return ST_OK;
}

/* ---- the tensor table ---- */

static st_reason tensor_error(reader *r, st_reason reason, uint64_t at, const st_gguf_tensor *t,
                              const char *sentence)
{
    st_error_set(r->err, reason, at, NULL, "%s", sentence);
    if (t != NULL && t->name != NULL)
        st_error_set_tensor(r->err, (const char *)t->name, t->name_len);
    return reason;
}

static st_reason read_tensor_name(reader *r, st_gguf_tensor *t)
{
    uint64_t len;
    st_reason reason = read_u64(r, &len, "a tensor name length");
    if (reason != ST_OK)
        return reason;
    if (len == 0)
        return tensor_error(r, ST_GGUF_TENSOR_NAME, t->info_offset, NULL, "an empty tensor name");
    if (len > ST_GGUF_TENSOR_NAME_MAX)
        return st_error_set(r->err, ST_GGUF_TENSOR_NAME, t->info_offset, NULL,
                            "a tensor name of %llu bytes, more than %u", (unsigned long long)len,
                            ST_GGUF_TENSOR_NAME_MAX);
    const uint8_t *p;
    reason = take(r, len, &p, "a tensor name");
    if (reason != ST_OK)
        return reason;
    size_t bad = 0;
    if (!st_utf8_valid(p, (size_t)len, &bad))
        return st_error_set(r->err, ST_GGUF_UTF8, t->info_offset + 8 + bad, NULL,
                            "a tensor name is not UTF-8");
    t->name = p;
    t->name_len = (size_t)len;
    return ST_OK;
}

static st_reason read_shape(reader *r, st_gguf_tensor *t)
{
    uint64_t at = r->pos;
    st_reason reason = read_u32(r, &t->n_dims, "a dimension count");
    if (reason != ST_OK)
        return reason;
    if (t->n_dims < 1 || t->n_dims > ST_GGUF_DIMS_MAX)
        return tensor_error(r, ST_GGUF_DIMS, at, t, "a tensor needs 1 to 4 dimensions");
    for (uint32_t j = 0; j < ST_GGUF_DIMS_MAX; j++)
        t->ne[j] = 1;
    for (uint32_t j = 0; j < t->n_dims; j++) {
        uint64_t dim_at = r->pos;
        reason = read_u64(r, &t->ne[j], "a dimension");
        if (reason != ST_OK)
            return reason;
        if (t->ne[j] == 0 || t->ne[j] > ST_GGUF_DIM_MAX)
            return tensor_error(r, ST_GGUF_SHAPE, dim_at, t, "a dimension is 0 or above 2^32");
    }
    return ST_OK;
}

/* Type, block and byte size; t's shape is read. */
static st_reason check_type(reader *r, st_gguf_tensor *t, uint64_t type_at)
{
    uint32_t block;
    uint32_t bytes;
    if (!st_gguf_ggml_type(t->type, NULL, &block, &bytes))
        return tensor_error(r, ST_GGUF_GGML_TYPE, type_at, t, "an unknown or removed ggml type id");
    if (t->ne[0] % block != 0)
        return tensor_error(r, ST_GGUF_BLOCK, type_at, t,
                            "the row length (first dimension) is not a multiple of the "
                            "type's block size");
    uint64_t elements = 1;
    uint64_t size = (t->ne[0] / block) * bytes; /* ne[0] < 2^63, bytes < 2^9: no overflow */
    for (uint32_t j = 0; j < ST_GGUF_DIMS_MAX; j++)
        if (__builtin_mul_overflow(elements, t->ne[j], &elements) || elements > (uint64_t)INT64_MAX)
            return tensor_error(r, ST_GGUF_SIZE_OVERFLOW, type_at, t,
                                "the element count overflows");
    for (uint32_t j = 1; j < ST_GGUF_DIMS_MAX; j++)
        if (__builtin_mul_overflow(size, t->ne[j], &size) || size > (uint64_t)INT64_MAX)
            return tensor_error(r, ST_GGUF_SIZE_OVERFLOW, type_at, t, "the byte size overflows");
    t->elements = elements;
    t->size = size;
    return ST_OK;
}

static uint64_t align_up(uint64_t v, uint64_t alignment, bool *overflow)
{
    uint64_t rem = v % alignment;
    uint64_t out = v;
    if (rem != 0 && __builtin_add_overflow(v, alignment - rem, &out))
        *overflow = true;
    return out;
}

/* The offset must be the running sum of the padded sizes before it (the reference
 * parser's rule): aligned, neither overlapping the previous tensor nor leaving a gap. */
static st_reason check_offset(reader *r, const st_gguf_tensor *t, uint64_t at, uint64_t *expected,
                              uint32_t alignment)
{
    if (t->offset % alignment != 0)
        return tensor_error(r, ST_GGUF_OFFSET, at, t,
                            "the data offset is not a multiple of the alignment");
    if (t->offset < *expected)
        return tensor_error(r, ST_GGUF_OVERLAP, at, t,
                            "the data offset overlaps the previous tensor (or goes back)");
    if (t->offset > *expected)
        return tensor_error(r, ST_GGUF_DATA_HOLE, at, t,
                            "the data offset leaves a gap after the previous tensor");
    bool overflow = false;
    uint64_t padded = align_up(t->size, alignment, &overflow);
    if (overflow || __builtin_add_overflow(*expected, padded, expected))
        return tensor_error(r, ST_GGUF_SIZE_OVERFLOW, at, t, "the data section size overflows");
    return ST_OK;
}

static st_reason read_tensor(parse_state *st, st_gguf_tensor *t, uint64_t *expected)
{
    reader *r = &st->r;
    memset(t, 0, sizeof *t);
    t->info_offset = r->pos;
    st_reason reason = read_tensor_name(r, t);
    if (reason == ST_OK)
        reason = read_shape(r, t);
    if (reason != ST_OK)
        return reason;
    uint64_t type_at = r->pos;
    reason = read_u32(r, &t->type, "a ggml type");
    if (reason == ST_OK)
        reason = check_type(r, t, type_at);
    if (reason != ST_OK)
        return reason;
    uint64_t offset_at = r->pos;
    reason = read_u64(r, &t->offset, "a data offset");
    if (reason != ST_OK)
        return reason;
    return check_offset(r, t, offset_at, expected, st->file->alignment);
}

static st_reason read_tensors(parse_state *st)
{
    st_gguf_file *file = st->file;
    size_t cap = 0;
    uint64_t expected = 0;
    for (uint64_t i = 0; i < file->tensor_count; i++) {
        if (!grow((void **)&file->tensors, &cap, (size_t)i, sizeof *file->tensors))
            return ST_OUT_OF_MEMORY;
        st_reason reason = read_tensor(st, &file->tensors[i], &expected);
        if (reason != ST_OK)
            return reason;
    }
    size_t n = (size_t)file->tensor_count;
    name_ref *refs = st_malloc((n ? n : 1) * sizeof *refs);
    if (refs == NULL)
        return ST_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++)
        refs[i] = (name_ref){file->tensors[i].name, file->tensors[i].name_len,
                             file->tensors[i].info_offset, i};
    const name_ref *dup = find_duplicate(refs, n);
    st_reason reason = ST_OK;
    if (dup != NULL)
        reason = tensor_error(&st->r, ST_GGUF_DUPLICATE_TENSOR, dup->offset,
                              &file->tensors[dup->index], "the tensor name is repeated");
    free(refs);
    return reason;
}

/* ---- the header ---- */

static st_reason read_counts(parse_state *st)
{
    reader *r = &st->r;
    const uint8_t *p;
    st_reason reason = take(r, 4, &p, "the magic");
    if (reason != ST_OK)
        return reason;
    if (memcmp(p, "GGUF", 4) != 0)
        return st_error_set(r->err, ST_GGUF_MAGIC, 0, NULL, "the file does not start with GGUF");
    reason = read_u32(r, &st->file->version, "the version");
    if (reason != ST_OK)
        return reason;
    if (st->file->version != 2 && st->file->version != 3)
        return st_error_set(r->err, ST_GGUF_VERSION, 4, NULL,
                            "GGUF version %u (only 2 and 3 are admitted; a big-endian file "
                            "reads as a huge version)",
                            st->file->version);
    reason = read_u64(r, &st->file->tensor_count, "the tensor count");
    if (reason == ST_OK)
        reason = read_u64(r, &st->file->kv_count, "the key-value count");
    if (reason != ST_OK)
        return reason;
    uint64_t room = room_left(r);
    uint64_t tc = st->file->tensor_count;
    uint64_t kc = st->file->kv_count;
    if (tc > ST_GGUF_TENSOR_COUNT_MAX || kc > ST_GGUF_KV_COUNT_MAX)
        return st_error_set(r->err, ST_GGUF_COUNT, 8, NULL,
                            "%llu tensors and %llu key-values: more than %u or %u",
                            (unsigned long long)tc, (unsigned long long)kc,
                            ST_GGUF_TENSOR_COUNT_MAX, ST_GGUF_KV_COUNT_MAX);
    if (tc > room / TENSOR_MIN_BYTES || kc > room / KV_MIN_BYTES ||
        tc * TENSOR_MIN_BYTES + kc * KV_MIN_BYTES > room)
        return st_error_set(r->err, ST_GGUF_COUNT, 8, NULL,
                            "%llu tensors and %llu key-values cannot fit in the header",
                            (unsigned long long)tc, (unsigned long long)kc);
    return ST_OK;
}

static st_reason finish_layout(parse_state *st)
{
    st_gguf_file *file = st->file;
    bool overflow = false;
    file->header_end = st->r.pos;
    file->data_start = align_up(file->header_end, file->alignment, &overflow);
    file->content_end = file->header_end;
    if (file->tensor_count > 0) {
        const st_gguf_tensor *last = &file->tensors[file->tensor_count - 1];
        if (__builtin_add_overflow(file->data_start, last->offset, &file->content_end) ||
            __builtin_add_overflow(file->content_end, last->size, &file->content_end))
            return tensor_error(&st->r, ST_GGUF_SIZE_OVERFLOW, last->info_offset, last,
                                "the data section ends past 2^64");
    }
    file->padded_end = align_up(file->content_end, file->alignment, &overflow);
    if (overflow)
        return st_error_set(st->r.err, ST_GGUF_SIZE_OVERFLOW, file->header_end, NULL,
                            "the data section ends past 2^64");
    uint64_t size = st->r.file_size;
    if (size != ST_GGUF_SIZE_UNKNOWN && size < file->content_end) {
        for (uint64_t i = 0; i < file->tensor_count; i++) {
            const st_gguf_tensor *t = &file->tensors[i];
            if (file->data_start + t->offset + t->size > size)
                return tensor_error(&st->r, ST_GGUF_DATA_TRUNCATED, size, t,
                                    "the file ends before the tensor's data does");
        }
    }
    return ST_OK;
}

st_reason st_gguf_parse_header(const uint8_t *buf, size_t len, uint64_t file_size,
                               uint64_t header_limit, st_gguf_file *out, uint64_t *need,
                               st_error *err)
{
    memset(out, 0, sizeof *out);
    out->alignment = ST_GGUF_ALIGNMENT_DEFAULT;
    parse_state st = {.r = {buf, len, file_size, header_limit, 0, 0, err}, .file = out};
    st_reason reason = read_counts(&st);
    if (reason == ST_OK)
        reason = read_metadata(&st);
    if (reason == ST_OK)
        reason = read_tensors(&st);
    if (reason == ST_OK)
        reason = finish_layout(&st);
    free(st.keys);
    if (reason == ST_OUT_OF_MEMORY)
        st_error_set(err, ST_OUT_OF_MEMORY, ST_NO_OFFSET, NULL, "out of memory in the GGUF parser");
    if (need != NULL)
        *need = reason == ST_GGUF_TRUNCATED ? st.r.need : 0;
    if (reason != ST_OK)
        st_gguf_file_free(out);
    return reason;
}

void st_gguf_file_free(st_gguf_file *file)
{
    free(file->tensors);
    file->tensors = NULL;
    free(file->kvs);
    file->kvs = NULL;
}

/* ---- reading the parse's result ---- */

const char *st_gguf_value_type_name(uint32_t type)
{
    static const char *const names[GV_COUNT] = {
        "uint8", "int8",   "uint16", "int16",  "uint32", "int32",   "float32",
        "bool",  "string", "array",  "uint64", "int64",  "float64",
    };
    return type < GV_COUNT ? names[type] : NULL;
}

static int64_t sign_extend(uint64_t v, unsigned bytes)
{
    unsigned shift = 64 - 8 * bytes;
    return (int64_t)(v << shift) >> shift; /* arithmetic shift: GCC and Clang */
}

const uint8_t *st_gguf_value_decode(uint32_t type, const uint8_t *p, st_gguf_value *out)
{
    memset(out, 0, sizeof *out);
    out->type = type;
    if (type == GV_STRING) {
        out->str_len = le(p, 8);
        out->str = p + 8;
        return p + 8 + out->str_len;
    }
    unsigned size = fixed_size(type);
    uint64_t bits = le(p, size);
    switch (type) {
    case GV_I8:
    case GV_I16:
    case GV_I32:
    case GV_I64:
        out->i = sign_extend(bits, size);
        break;
    case GV_F32: {
        uint32_t b32 = (uint32_t)bits;
        float f;
        memcpy(&f, &b32, sizeof f);
        out->f = f;
        break;
    }
    case GV_F64:
        memcpy(&out->f, &bits, sizeof out->f);
        break;
    default: /* unsigned, bool */
        out->u = bits;
        break;
    }
    return p + size;
}

const st_gguf_kv *st_gguf_find_kv(const st_gguf_file *file, const char *key, size_t key_len)
{
    for (uint64_t i = 0; i < file->kv_count; i++)
        if (file->kvs[i].key_len == key_len && memcmp(file->kvs[i].key, key, key_len) == 0)
            return &file->kvs[i];
    return NULL;
}

const st_gguf_tensor *st_gguf_find_tensor(const st_gguf_file *file, const char *name,
                                          size_t name_len)
{
    for (uint64_t i = 0; i < file->tensor_count; i++)
        if (file->tensors[i].name_len == name_len &&
            memcmp(file->tensors[i].name, name, name_len) == 0)
            return &file->tensors[i];
    return NULL;
}

bool st_gguf_plain_dtype(uint32_t ggml_type, st_dtype *out)
{
    static const struct {
        uint32_t ggml;
        st_dtype dtype;
    } plain[] = {{0, ST_F32},  {1, ST_F16},  {24, ST_I8},  {25, ST_I16},
                 {26, ST_I32}, {27, ST_I64}, {28, ST_F64}, {30, ST_BF16}};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (plain[i].ggml == ggml_type) {
            *out = plain[i].dtype;
            return true;
        }
    return false;
}

void st_gguf_row_major_shape(const st_gguf_tensor *tensor, uint64_t *shape)
{
    for (uint32_t j = 0; j < tensor->n_dims; j++)
        shape[j] = tensor->ne[tensor->n_dims - 1 - j];
}

/* ---- the data section ----
 *
 * Segments in file order: padding before tensor 0 (from header_end), tensor 0's bytes,
 * padding after it, ..., tensor n-1's bytes, padding up to padded_end. Segment k: even k
 * is the padding before tensor k/2 (or the final padding), odd k tensor (k-1)/2. */

static void segment(const st_gguf_file *f, size_t k, uint64_t *begin, uint64_t *end)
{
    size_t n = (size_t)f->tensor_count;
    size_t i = k / 2;
    if (k % 2 == 1) {
        *begin = f->data_start + f->tensors[i].offset;
        *end = *begin + f->tensors[i].size;
        return;
    }
    *begin =
        i == 0 ? f->header_end : f->data_start + f->tensors[i - 1].offset + f->tensors[i - 1].size;
    *end = i < n ? f->data_start + f->tensors[i].offset : f->padded_end;
}

void st_gguf_data_init(const st_gguf_file *file, st_gguf_data *state)
{
    state->pos = file->header_end;
    state->next = 0;
}

st_reason st_gguf_data_feed(const st_gguf_file *file, st_gguf_data *state, const uint8_t *data,
                            size_t len, st_error *err)
{
    size_t segments = 2 * (size_t)file->tensor_count + 1;
    while (len > 0) {
        uint64_t begin;
        uint64_t end;
        while (state->next < segments) {
            segment(file, state->next, &begin, &end);
            if (end > state->pos)
                break;
            state->next++;
        }
        if (state->next >= segments)
            return st_error_set(err, ST_GGUF_TRAILING, state->pos, NULL,
                                "bytes after the end of the data section at offset %llu",
                                (unsigned long long)state->pos);
        uint64_t n = end - state->pos;
        if (n > len)
            n = len;
        if (state->next % 2 == 0) {
            for (uint64_t i = 0; i < n; i++)
                if (data[i] != 0)
                    return st_error_set(err, ST_GGUF_PADDING, state->pos + i, NULL,
                                        "padding byte 0x%02x at offset %llu is not zero", data[i],
                                        (unsigned long long)(state->pos + i));
        }
        state->pos += n;
        data += n;
        len -= (size_t)n;
    }
    return ST_OK;
}

st_reason st_gguf_data_finish(const st_gguf_file *file, const st_gguf_data *state, st_error *err)
{
    if (state->pos >= file->content_end)
        return ST_OK;
    for (uint64_t i = 0; i < file->tensor_count; i++) {
        const st_gguf_tensor *t = &file->tensors[i];
        if (file->data_start + t->offset + t->size > state->pos) {
            st_error_set(err, ST_GGUF_DATA_TRUNCATED, state->pos, NULL,
                         "the input ends at offset %llu before the tensor's data does",
                         (unsigned long long)state->pos);
            st_error_set_tensor(err, (const char *)t->name, t->name_len);
            return ST_GGUF_DATA_TRUNCATED;
        }
    }
    return st_error_set(err, ST_GGUF_DATA_TRUNCATED, state->pos, NULL,
                        "the input ends at offset %llu inside the data section",
                        (unsigned long long)state->pos);
}

st_reason st_gguf_check_buffer(const uint8_t *buf, size_t len, uint64_t header_limit, st_error *err)
{
    st_gguf_file file;
    st_reason reason = st_gguf_parse_header(buf, len, len, header_limit, &file, NULL, err);
    if (reason != ST_OK)
        return reason;
    st_gguf_data state;
    st_gguf_data_init(&file, &state);
    reason =
        st_gguf_data_feed(&file, &state, buf + file.header_end, len - (size_t)file.header_end, err);
    if (reason == ST_OK)
        reason = st_gguf_data_finish(&file, &state, err);
    st_gguf_file_free(&file);
    if (reason == ST_OK)
        st_error_clear(err);
    return reason;
}
