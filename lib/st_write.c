/* The safetensors serializer (see st_write.h).
 *
 * Output matches the reference writer (huggingface/safetensors `serialize`, serde_json):
 * `{"__metadata__":{...},"NAME":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},...}`
 * with no whitespace, tensors in (st_dtype_writer_rank, name bytes) order, then spaces
 * up to a multiple of 8. Strings are escaped the way serde_json escapes them: `"` `\`
 * and \b \f \n \r \t by name, other bytes below 0x20 as \u00XX with lowercase hex,
 * everything else (DEL, '/', non-ASCII UTF-8) raw.
 *
 * Everything written is also what st_header_parse accepts, so names and metadata are
 * checked against the strict grammar here instead of producing a file the gate refuses. */
#include "st_write.h"
#include "st_alloc.h"
#include "st_buffer.h"
#include "st_utf8.h"

#include <stdlib.h>
#include <string.h>

typedef st_buffer json_buffer;

static void put(json_buffer *b, const void *data, size_t n)
{
    (void)st_buffer_append(b, data, n);
}

static void put_text(json_buffer *b, const char *text)
{
    (void)st_buffer_append_text(b, text);
}

static void put_u64(json_buffer *b, uint64_t v)
{
    char digits[20];
    size_t n = 0;
    do {
        digits[sizeof digits - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    put(b, digits + sizeof digits - n, n);
}

/* A JSON string, escaped as serde_json does. */
static void put_string(json_buffer *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    put(b, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    const unsigned char *run = p; /* start of bytes not yet written that need no escape */
    for (; *p != '\0'; p++) {
        unsigned char c = *p;
        const char *named = NULL;
        switch (c) {
        case '"':
            named = "\\\"";
            break;
        case '\\':
            named = "\\\\";
            break;
        case '\b':
            named = "\\b";
            break;
        case '\f':
            named = "\\f";
            break;
        case '\n':
            named = "\\n";
            break;
        case '\r':
            named = "\\r";
            break;
        case '\t':
            named = "\\t";
            break;
        default:
            if (c >= 0x20)
                continue;
        }
        put(b, run, (size_t)(p - run));
        run = p + 1;
        if (named != NULL) {
            put_text(b, named);
        } else {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            put(b, u, sizeof u);
        }
    }
    put(b, run, (size_t)(p - run));
    put(b, "\"", 1);
}

static st_reason check_name(const char *name, st_error *err)
{
    if (name == NULL || name[0] == '\0')
        return st_error_set(err, ST_TENSOR_NAME_EMPTY, ST_NO_OFFSET, NULL,
                            "a tensor name is empty");
    size_t len = strnlen(name, ST_TENSOR_NAME_MAX + 1);
    if (len > ST_TENSOR_NAME_MAX)
        return st_error_set(err, ST_TENSOR_NAME_TOO_LONG, ST_NO_OFFSET, name,
                            "a tensor name is longer than %d bytes", ST_TENSOR_NAME_MAX);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c < 0x20 || c == 0x7f)
            return st_error_set(err, ST_TENSOR_NAME_CONTROL, ST_NO_OFFSET, name,
                                "tensor name has control character 0x%02x at byte %zu", c, i);
    }
    if (!st_utf8_valid(name, len, NULL))
        return st_error_set(err, ST_HEADER_NOT_UTF8, ST_NO_OFFSET, name,
                            "a tensor name is not valid UTF-8");
    if (strcmp(name, "__metadata__") == 0)
        return st_error_set(err, ST_JSON_DUPLICATE_KEY, ST_NO_OFFSET, name,
                            "the name __metadata__ is reserved for the metadata object");
    return ST_OK;
}

/* Bytewise comparison of NUL-terminated strings (Rust's String order). */
static int compare_bytes(const char *a, const char *b)
{
    return strcmp(a, b); /* strcmp compares as unsigned char, which is bytewise order */
}

typedef struct sort_context {
    const st_write_tensor *tensors;
    bool by_dtype; /* writer order; otherwise by name only */
} sort_context;

static int compare_tensors(const sort_context *ctx, size_t a, size_t b)
{
    if (ctx->by_dtype) {
        unsigned ra = st_dtype_writer_rank(ctx->tensors[a].dtype);
        unsigned rb = st_dtype_writer_rank(ctx->tensors[b].dtype);
        if (ra != rb)
            return ra < rb ? -1 : 1;
    }
    return compare_bytes(ctx->tensors[a].name, ctx->tensors[b].name);
}

/* Merge sort of indices (qsort has no context argument in C11). */
/* A merge sort: each call halves n, so the depth is log2(n), at most 64. */
/* NOLINTNEXTLINE(misc-no-recursion) */
static void sort_indices(const sort_context *ctx, size_t *v, size_t *tmp, size_t n)
{
    if (n < 2)
        return;
    size_t half = n / 2;
    sort_indices(ctx, v, tmp, half);
    sort_indices(ctx, v + half, tmp, n - half);
    size_t i = 0, j = half, k = 0;
    while (i < half && j < n)
        tmp[k++] = compare_tensors(ctx, v[j], v[i]) < 0 ? v[j++] : v[i++];
    while (i < half)
        tmp[k++] = v[i++];
    while (j < n)
        tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
}

static int compare_metadata_keys(const void *a, const void *b)
{
    const st_metadata_entry *const *x = a;
    const st_metadata_entry *const *y = b;
    return compare_bytes((*x)->key, (*y)->key);
}

static st_reason check_metadata(const st_metadata_entry *metadata, size_t count, st_error *err)
{
    for (size_t i = 0; i < count; i++) {
        const char *key = metadata[i].key, *value = metadata[i].value;
        if (key == NULL || value == NULL)
            return st_error_set(err, ST_METADATA_VALUE_NOT_STRING, ST_NO_OFFSET, NULL,
                                "metadata entry %zu has no key or no value", i);
        if (!st_utf8_valid(key, strlen(key), NULL) || !st_utf8_valid(value, strlen(value), NULL))
            return st_error_set(err, ST_HEADER_NOT_UTF8, ST_NO_OFFSET, NULL,
                                "metadata entry %zu is not valid UTF-8", i);
    }
    if (count < 2)
        return ST_OK;
    /* sorted holds pointers: sizeof *sorted is the size of one pointer, as meant */
    /* NOLINTNEXTLINE(bugprone-sizeof-expression) */
    const st_metadata_entry **sorted = st_malloc(count * sizeof *sorted);
    if (sorted == NULL)
        return st_error_set(err, ST_OUT_OF_MEMORY, ST_NO_OFFSET, NULL,
                            "out of memory sorting %zu metadata entries", count);
    for (size_t i = 0; i < count; i++)
        sorted[i] = &metadata[i];
    /* sizeof one pointer, as above */
    /* NOLINTNEXTLINE(bugprone-sizeof-expression) */
    qsort(sorted, count, sizeof *sorted, compare_metadata_keys);
    st_reason r = ST_OK;
    for (size_t i = 1; i < count; i++) {
        if (strcmp(sorted[i - 1]->key, sorted[i]->key) == 0) {
            r = st_error_set(err, ST_JSON_DUPLICATE_KEY, ST_NO_OFFSET, NULL,
                             "metadata key \"%.100s\" appears twice", sorted[i]->key);
            break;
        }
    }
    free(sorted);
    return r;
}

void st_write_plan_free(st_write_plan *plan)
{
    free(plan->header);
    free(plan->order);
    free(plan->begin);
    free(plan->bytes);
    memset(plan, 0, sizeof *plan);
}

st_reason st_write_plan_make(const st_write_tensor *tensors, size_t count,
                             const st_metadata_entry *metadata, size_t metadata_count,
                             bool has_metadata, st_write_plan *plan, st_error *err)
{
    memset(plan, 0, sizeof *plan);
    if (err != NULL)
        st_error_clear(err);
    if (metadata == NULL)
        metadata_count = 0;

    st_reason r;
    for (size_t i = 0; i < count; i++) {
        if ((r = check_name(tensors[i].name, err)) != ST_OK)
            return r;
        if ((unsigned)tensors[i].dtype >= ST_DTYPE_COUNT)
            return st_error_set(err, ST_DTYPE_UNKNOWN, ST_NO_OFFSET, tensors[i].name,
                                "dtype %d is not a safetensors dtype", (int)tensors[i].dtype);
    }
    if ((r = check_metadata(metadata, metadata_count, err)) != ST_OK)
        return r;

    /* count entries of size_t/uint64_t each: the caller already holds count tensors in
     * memory, so these products cannot overflow in practice; check anyway */
    size_t array_bytes;
    if (__builtin_mul_overflow(count + 1, sizeof(uint64_t), &array_bytes))
        return st_error_set(err, ST_SIZE_OVERFLOW, ST_NO_OFFSET, NULL, "too many tensors");
    plan->order = st_malloc(array_bytes);
    plan->begin = st_malloc(array_bytes);
    plan->bytes = st_malloc(array_bytes);
    size_t *scratch = st_malloc(array_bytes);
    if (plan->order == NULL || plan->begin == NULL || plan->bytes == NULL || scratch == NULL) {
        free(scratch);
        st_write_plan_free(plan);
        return st_error_set(err, ST_OUT_OF_MEMORY, ST_NO_OFFSET, NULL,
                            "out of memory planning %zu tensors", count);
    }
    plan->count = count;

    /* duplicates: sorted by name alone they are neighbours */
    for (size_t i = 0; i < count; i++)
        plan->order[i] = i;
    sort_context ctx = {tensors, false};
    sort_indices(&ctx, plan->order, scratch, count);
    for (size_t i = 1; i < count; i++) {
        const char *name = tensors[plan->order[i]].name;
        if (strcmp(tensors[plan->order[i - 1]].name, name) == 0) {
            free(scratch);
            st_write_plan_free(plan);
            return st_error_set(err, ST_JSON_DUPLICATE_KEY, ST_NO_OFFSET, name,
                                "tensor name appears twice");
        }
    }
    ctx.by_dtype = true;
    sort_indices(&ctx, plan->order, scratch, count);
    free(scratch);

    /* sizes and offsets, in data-section order */
    uint64_t offset = 0;
    for (size_t k = 0; k < count; k++) {
        size_t i = plan->order[k];
        const st_write_tensor *t = &tensors[i];
        uint64_t elements, bytes;
        if (!st_shape_elements(t->shape, t->rank, &elements)) {
            st_write_plan_free(plan);
            return st_error_set(err, ST_SIZE_OVERFLOW, ST_NO_OFFSET, t->name,
                                "the shape's element count overflows 64 bits");
        }
        r = st_dtype_bytes(t->dtype, elements, &bytes);
        if (r != ST_OK) {
            st_write_plan_free(plan);
            if (r == ST_SUB_BYTE_PARTIAL)
                return st_error_set(err, r, ST_NO_OFFSET, t->name,
                                    "%llu values of %s do not fill a whole number of bytes",
                                    (unsigned long long)elements, st_dtype_name(t->dtype));
            return st_error_set(err, r, ST_NO_OFFSET, t->name, "the byte size overflows 64 bits");
        }
        plan->begin[i] = offset;
        plan->bytes[i] = bytes;
        if (__builtin_add_overflow(offset, bytes, &offset)) {
            st_write_plan_free(plan);
            return st_error_set(err, ST_SIZE_OVERFLOW, ST_NO_OFFSET, t->name,
                                "the data section's size overflows 64 bits");
        }
    }
    plan->data_size = offset;

    /* the header: 8 length bytes, then JSON, then spaces; never longer than the
     * parser's bound on N */
    json_buffer b;
    st_buffer_init(&b, 8 + ST_HEADER_SIZE_MAX);
    put(&b, "\0\0\0\0\0\0\0\0", 8);
    put(&b, "{", 1);
    bool first = true;
    if (has_metadata || metadata_count > 0) {
        put_text(&b, "\"__metadata__\":{");
        for (size_t i = 0; i < metadata_count; i++) {
            if (i > 0)
                put(&b, ",", 1);
            put_string(&b, metadata[i].key);
            put(&b, ":", 1);
            put_string(&b, metadata[i].value);
        }
        put(&b, "}", 1);
        first = false;
    }
    for (size_t k = 0; k < count; k++) {
        size_t i = plan->order[k];
        const st_write_tensor *t = &tensors[i];
        if (!first)
            put(&b, ",", 1);
        first = false;
        put_string(&b, t->name);
        put_text(&b, ":{\"dtype\":\"");
        put_text(&b, st_dtype_name(t->dtype));
        put_text(&b, "\",\"shape\":[");
        for (size_t d = 0; d < t->rank; d++) {
            if (d > 0)
                put(&b, ",", 1);
            put_u64(&b, t->shape[d]);
        }
        put_text(&b, "],\"data_offsets\":[");
        put_u64(&b, plan->begin[i]);
        put(&b, ",", 1);
        put_u64(&b, plan->begin[i] + plan->bytes[i]);
        put_text(&b, "]}");
    }
    put(&b, "}", 1);
    /* data starts at a multiple of 8: pad N so that 8 + N is one */
    while (!st_buffer_failed(&b) && b.len % 8 != 0)
        put(&b, " ", 1);
    bool no_memory = b.no_memory;
    size_t header_len = 0;
    uint8_t *header = (uint8_t *)st_buffer_take(&b, &header_len);
    if (header == NULL) {
        st_write_plan_free(plan);
        if (no_memory)
            return st_error_set(err, ST_OUT_OF_MEMORY, ST_NO_OFFSET, NULL,
                                "out of memory building the header");
        return st_error_set(err, ST_HEADER_TOO_LARGE, ST_NO_OFFSET, NULL,
                            "the header would exceed %llu bytes",
                            (unsigned long long)ST_HEADER_SIZE_MAX);
    }
    uint64_t n = header_len - 8;
    for (unsigned i = 0; i < 8; i++)
        header[i] = (uint8_t)(n >> (8 * i));
    plan->header = header;
    plan->header_len = header_len;
    return ST_OK;
}

st_reason st_write_to_buffer(const st_write_tensor *tensors, const void *const *data, size_t count,
                             const st_metadata_entry *metadata, size_t metadata_count,
                             bool has_metadata, uint8_t **out, size_t *out_len, st_error *err)
{
    *out = NULL;
    *out_len = 0;
    st_write_plan plan;
    st_reason r =
        st_write_plan_make(tensors, count, metadata, metadata_count, has_metadata, &plan, err);
    if (r != ST_OK)
        return r;
    uint64_t total;
    if (__builtin_add_overflow((uint64_t)plan.header_len, plan.data_size, &total) ||
        total > SIZE_MAX) {
        st_write_plan_free(&plan);
        return st_error_set(err, ST_SIZE_OVERFLOW, ST_NO_OFFSET, NULL,
                            "the file does not fit in memory");
    }
    uint8_t *file = st_malloc(total > 0 ? (size_t)total : 1);
    if (file == NULL) {
        st_write_plan_free(&plan);
        return st_error_set(err, ST_OUT_OF_MEMORY, ST_NO_OFFSET, NULL,
                            "out of memory for a %llu-byte file", (unsigned long long)total);
    }
    /* the plan always has a header (8 length bytes and "{}"), so it is not NULL */
    /* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker) */
    memcpy(file, plan.header, plan.header_len);
    for (size_t i = 0; i < count; i++) {
        if (plan.bytes[i] > 0)
            memcpy(file + plan.header_len + plan.begin[i], data[i], (size_t)plan.bytes[i]);
    }
    *out = file;
    *out_len = (size_t)total;
    st_write_plan_free(&plan);
    return ST_OK;
}
