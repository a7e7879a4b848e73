/* NumPy basic indexing turned into byte runs (see st_slice.h).
 *
 * Parsing is two passes: a lexical pass over the whole text (so a syntax error
 * anywhere wins over a semantic one, as in Python, where the expression must
 * parse before it is evaluated), then the items are applied to the dimensions
 * left to right, the order in which NumPy reports step-zero and out-of-range
 * errors. Slice bounds are clamped with the rules of CPython's
 * PySlice_AdjustIndices. */
#include "st_slice.h"

#include <assert.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#define ST_SLICE_SSE2 1
#endif

/* One comma-separated item of the text. */
typedef struct slice_item {
    bool is_slice;
    bool has_start, has_stop, has_step;
    int64_t start, stop, step; /* for an integer item: start holds the index */
    size_t position;           /* byte offset of the item in the text, for messages */
} slice_item;

static st_slice_status fail(st_slice_error *err, st_slice_status status, size_t dim,
                            const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static st_slice_status fail(st_slice_error *err, st_slice_status status, size_t dim,
                            const char *fmt, ...)
{
    if (err == NULL)
        return status;
    err->status = status;
    err->dim = dim;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->detail, sizeof err->detail, fmt, ap);
    va_end(ap);
    return status;
}

/* Printable description of one byte of hostile text, for error details. */
static void describe_byte(unsigned char c, char *buf, size_t cap)
{
    if (c > 0x20 && c < 0x7f)
        snprintf(buf, cap, "'%c'", c);
    else
        snprintf(buf, cap, "byte 0x%02x", c);
}

/* Lexes an optional integer at *pos: '-'? digit+. Returns false (and leaves *pos) when
 * there is no integer there. A value outside int64 ([-2^63, 2^63 - 1], as in NumPy)
 * sets *overflow; the digits are still consumed so the syntax check can go on. */
static bool lex_integer(const char *text, size_t len, size_t *pos, int64_t *value, bool *overflow,
                        bool *syntax_error)
{
    size_t p = *pos;
    bool negative = false;
    if (p < len && text[p] == '-') {
        negative = true;
        p++;
    }
    if (p >= len || text[p] < '0' || text[p] > '9') {
        /* a lone '-' is a syntax error; nothing at all is simply "no integer" */
        if (negative)
            *syntax_error = true;
        return false;
    }
    /* the largest magnitude: 2^63 when negative (INT64_MIN), 2^63 - 1 otherwise */
    uint64_t limit = (uint64_t)INT64_MAX + (negative ? 1 : 0);
    uint64_t magnitude = 0;
    bool too_big = false;
    while (p < len && text[p] >= '0' && text[p] <= '9') {
        uint64_t digit = (uint64_t)(text[p] - '0');
        if (!too_big && (__builtin_mul_overflow(magnitude, 10, &magnitude) ||
                         __builtin_add_overflow(magnitude, digit, &magnitude) || magnitude > limit))
            too_big = true;
        p++;
    }
    *pos = p;
    if (too_big) {
        *overflow = true;
        *value = 0;
    } else if (negative) {
        /* -(m - 1) - 1 reaches INT64_MIN without negating 2^63 */
        *value = magnitude == 0 ? 0 : -(int64_t)(magnitude - 1) - 1;
    } else {
        *value = (int64_t)magnitude;
    }
    return true;
}

/* Lexical pass. Stores up to max_items items, counts all of them in *item_count. */
static st_slice_status lex_items(const char *text, size_t len, slice_item *items, size_t max_items,
                                 size_t *item_count, st_slice_error *err)
{
    size_t count = 0;
    size_t pos = 0;
    size_t overflow_item = SIZE_MAX;
    if (len == 0) {
        *item_count = 0;
        return ST_SLICE_OK;
    }
    for (;;) {
        slice_item item = {0};
        item.position = pos;
        bool overflow = false, syntax_error = false;
        /* parts[0..2] = start, stop, step; colons counts the ':' seen */
        int64_t parts[3] = {0, 0, 0};
        bool present[3] = {false, false, false};
        unsigned colons = 0;
        for (;;) {
            present[colons] =
                lex_integer(text, len, &pos, &parts[colons], &overflow, &syntax_error);
            if (syntax_error)
                break;
            if (pos < len && text[pos] == ':' && colons < 2) {
                colons++;
                pos++;
                continue;
            }
            break;
        }
        if (!syntax_error && colons == 0 && !present[0]) {
            if (pos < len && text[pos] != ',') {
                char what[16];
                describe_byte((unsigned char)text[pos], what, sizeof what);
                return fail(err, ST_SLICE_SYNTAX, count, "unexpected %s at position %zu", what,
                            pos);
            }
            return fail(err, ST_SLICE_SYNTAX, count, "empty index at position %zu", pos);
        }
        if (syntax_error || (pos < len && text[pos] != ',')) {
            if (pos >= len)
                return fail(err, ST_SLICE_SYNTAX, count, "'-' without digits at the end");
            char what[16];
            describe_byte((unsigned char)text[pos], what, sizeof what);
            return fail(err, ST_SLICE_SYNTAX, count, "unexpected %s at position %zu", what, pos);
        }
        if (overflow && overflow_item == SIZE_MAX)
            overflow_item = count;
        item.is_slice = colons > 0;
        item.has_start = present[0];
        item.start = parts[0];
        item.has_stop = present[1];
        item.stop = parts[1];
        item.has_step = present[2];
        item.step = parts[2];
        if (count < max_items)
            items[count] = item;
        count++;
        if (pos >= len)
            break;
        /* text[pos] == ',': another item must follow */
        pos++;
        if (pos >= len)
            return fail(err, ST_SLICE_SYNTAX, count, "empty index after the last ','");
    }
    *item_count = count;
    if (overflow_item != SIZE_MAX)
        return fail(err, ST_SLICE_OVERFLOW, overflow_item,
                    "an integer in index %zu is outside the signed 64-bit range "
                    "[-9223372036854775808, 9223372036854775807]",
                    overflow_item);
    return ST_SLICE_OK;
}

/* Product that is 0 as soon as any factor is 0, so an empty tensor with huge other
 * dimensions does not count as an overflow. False on overflow. */
static bool zero_aware_product(const uint64_t *values, size_t n, uint64_t *product)
{
    for (size_t i = 0; i < n; i++) {
        if (values[i] == 0) {
            *product = 0;
            return true;
        }
    }
    uint64_t p = 1;
    for (size_t i = 0; i < n; i++) {
        if (__builtin_mul_overflow(p, values[i], &p))
            return false;
    }
    *product = p;
    return true;
}

/* Applies one slice item to a dimension of size n (n <= INT64_MAX), like CPython's
 * PySlice_Unpack + PySlice_AdjustIndices. Bounds may be INT64_MIN: adding n >= 0 to a
 * negative bound cannot overflow. A step of INT64_MIN becomes -INT64_MAX, as CPython
 * does (PySlice_Unpack): both exceed any span of the dimension, so the selection is the
 * same, and -step stays representable. */
static void adjust_slice(const slice_item *item, int64_t n, st_slice_dim *dim)
{
    int64_t step = item->has_step ? item->step : 1;
    if (step == INT64_MIN)
        step = -INT64_MAX;
    int64_t start = item->has_start ? item->start : (step < 0 ? INT64_MAX : 0);
    int64_t stop = item->has_stop ? item->stop : (step < 0 ? INT64_MIN : INT64_MAX);
    if (start < 0) {
        start += n;
        if (start < 0)
            start = step < 0 ? -1 : 0;
    } else if (start >= n) {
        start = step < 0 ? n - 1 : n;
    }
    if (stop < 0) {
        stop += n;
        if (stop < 0)
            stop = step < 0 ? -1 : 0;
    } else if (stop >= n) {
        stop = step < 0 ? n - 1 : n;
    }
    uint64_t count = 0;
    if (step < 0) {
        if (stop < start)
            count = (uint64_t)((start - stop - 1) / (-step)) + 1;
    } else if (start < stop) {
        count = (uint64_t)((stop - start - 1) / step) + 1;
    }
    dim->start = start;
    dim->step = step;
    dim->count = count;
    dim->keep = true;
}

/* The dimension to blame for runs that are not whole bytes (rank >= 1): dimensions
 * [loop_rank, rank) lie inside one run. With none (loop_rank == rank) the innermost
 * dimension is stepped or reversed, so each run is one value: blame it; else the
 * outermost dimension inside the run, whose selection sets the run's length. */
static size_t run_dimension(size_t loop_rank, size_t rank)
{
    return loop_rank < rank ? loop_rank : rank - 1;
}

/* The dimension to blame for a first value inside a byte: the innermost one whose
 * start moves the first value by a count that is not a multiple of group. One exists,
 * since their sum (the first value) is not a multiple. */
static size_t start_dimension(const st_slice_dim *dims, const uint64_t *stride, size_t rank,
                              unsigned group)
{
    for (size_t d = rank; d-- > 0;) {
        if (((uint64_t)dims[d].start * stride[d]) % group != 0)
            return d;
    }
    return 0;
}

/* Elements-to-bytes for an element count known to be a multiple of the dtype's
 * packing group (group elements take group_bytes bytes). */
static uint64_t group_bytes_of(uint64_t elements, unsigned group, unsigned group_bytes)
{
    return elements / group * group_bytes;
}

st_slice_status st_slice_parse(const char *text, size_t len, const uint64_t *shape, size_t rank,
                               st_dtype dtype, st_slice *out, st_slice_error *err)
{
    memset(out, 0, sizeof *out);
    if (err != NULL) {
        err->status = ST_SLICE_OK;
        err->dim = 0;
        err->detail[0] = '\0';
    }
    unsigned bits = st_dtype_bits(dtype);
    if (bits == 0)
        return fail(err, ST_SLICE_SYNTAX, 0, "unknown dtype");
    if (rank > ST_SLICE_RANK_MAX)
        return fail(err, ST_SLICE_RANK, 0, "the tensor has %zu dimensions, more than %d", rank,
                    ST_SLICE_RANK_MAX);
    if (len > ST_SLICE_TEXT_MAX)
        return fail(err, ST_SLICE_SYNTAX, 0, "slice text of %zu bytes is longer than %d", len,
                    ST_SLICE_TEXT_MAX);
    if (text == NULL && len > 0)
        return fail(err, ST_SLICE_SYNTAX, 0, "no slice text");

    slice_item items[ST_SLICE_RANK_MAX];
    size_t item_count = 0;
    st_slice_status status = lex_items(text, len, items, ST_SLICE_RANK_MAX, &item_count, err);
    if (status != ST_SLICE_OK)
        return status;
    if (item_count > rank)
        return fail(err, ST_SLICE_TOO_MANY_INDICES, ST_SLICE_NO_DIM,
                    "too many indices: the tensor has %zu dimension%s, but %zu were given", rank,
                    rank == 1 ? "" : "s", item_count);

    /* The tensor itself must be addressable: every dimension fits int64 (slice arithmetic
     * is signed) and elements * bits fits u64. */
    for (size_t d = 0; d < rank; d++) {
        if (shape[d] > (uint64_t)INT64_MAX)
            return fail(err, ST_SLICE_OVERFLOW, d, "dimension %zu of size %llu is too large", d,
                        (unsigned long long)shape[d]);
    }
    uint64_t elements, total_bits;
    if (!zero_aware_product(shape, rank, &elements) ||
        __builtin_mul_overflow(elements, (uint64_t)bits, &total_bits))
        return fail(err, ST_SLICE_OVERFLOW, 0, "the tensor's size overflows 64 bits");

    out->rank = rank;
    for (size_t d = 0; d < rank; d++) {
        st_slice_dim *dim = &out->dims[d];
        int64_t n = (int64_t)shape[d];
        if (d >= item_count) {
            dim->start = 0;
            dim->step = 1;
            dim->count = shape[d];
            dim->keep = true;
            continue;
        }
        const slice_item *item = &items[d];
        if (!item->is_slice) {
            if (item->start < -n || item->start >= n)
                return fail(err, ST_SLICE_INDEX_RANGE, d,
                            "index %lld is out of bounds for dimension %zu with size %llu",
                            (long long)item->start, d, (unsigned long long)shape[d]);
            dim->start = item->start < 0 ? item->start + n : item->start;
            dim->step = 1;
            dim->count = 1;
            dim->keep = false;
            continue;
        }
        if (item->has_step && item->step == 0)
            return fail(err, ST_SLICE_STEP_ZERO, d, "slice step cannot be zero (dimension %zu)", d);
        adjust_slice(item, n, dim);
    }

    for (size_t d = 0; d < rank; d++) {
        if (out->dims[d].keep)
            out->out_shape[out->out_rank++] = out->dims[d].count;
    }
    uint64_t counts[ST_SLICE_RANK_MAX];
    for (size_t d = 0; d < rank; d++)
        counts[d] = out->dims[d].count;
    /* counts never exceed their dimension, so this product is at most `elements` */
    if (!zero_aware_product(counts, rank, &out->out_elements))
        return fail(err, ST_SLICE_OVERFLOW, 0, "the selection's size overflows 64 bits");
    assert(out->out_elements <= elements);

    /* Sub-byte packing: `group` consecutive elements fill exactly `group_bytes` bytes
     * (F4: 2 in 1, F6: 4 in 3, byte-sized types: 1 in bits/8). */
    unsigned group = bits % 8 == 0 ? 1 : (bits % 4 == 0 ? 2 : 4);
    unsigned group_bytes = group * bits / 8;

    if (out->out_elements == 0) {
        /* nothing to copy: no runs */
        return ST_SLICE_OK;
    }

    /* From here every count is >= 1 and the tensor is non-empty, so each stride
     * (product of later dimensions) is at most `elements` and fits. */
    uint64_t stride[ST_SLICE_RANK_MAX];
    uint64_t s = 1;
    for (size_t d = rank; d-- > 0;) {
        stride[d] = s;
        s *= shape[d];
    }

    /* Merge trailing dimensions into runs: those taken whole in natural order, then at
     * most one more taken in natural order (a partial range of whole rows). */
    size_t r = rank;
    uint64_t run_elements = 1;
    while (r > 0) {
        const st_slice_dim *dim = &out->dims[r - 1];
        bool natural = dim->step == 1 || dim->count == 1;
        if (!natural || dim->count != shape[r - 1])
            break;
        run_elements *= dim->count;
        r--;
    }
    if (r > 0 && (out->dims[r - 1].step == 1 || out->dims[r - 1].count == 1)) {
        run_elements *= out->dims[r - 1].count;
        r--;
    }
    out->loop_rank = r;

    uint64_t first_element = 0;
    for (size_t d = 0; d < rank; d++)
        first_element += (uint64_t)out->dims[d].start * stride[d];

    if (group > 1) {
        if (run_elements % group != 0 && rank == 0)
            return fail(err, ST_SLICE_SUB_BYTE, ST_SLICE_NO_DIM,
                        "%s packs %u values in %u byte%s: a scalar is one value, not whole bytes",
                        st_dtype_name(dtype), group, group_bytes, group_bytes == 1 ? "" : "s");
        if (run_elements % group != 0) {
            size_t d = run_dimension(r, rank);
            return fail(err, ST_SLICE_SUB_BYTE, d,
                        "%s packs %u values in %u byte%s: the selection in dimension %zu makes "
                        "runs of %llu value%s, not of whole bytes",
                        st_dtype_name(dtype), group, group_bytes, group_bytes == 1 ? "" : "s", d,
                        (unsigned long long)run_elements, run_elements == 1 ? "" : "s");
        }
        if (first_element % group != 0) {
            size_t d = start_dimension(out->dims, stride, rank, group);
            return fail(err, ST_SLICE_SUB_BYTE, d,
                        "%s packs %u values in %u byte%s: the selection starts at value %llu, "
                        "inside a byte (dimension %zu starts at index %lld)",
                        st_dtype_name(dtype), group, group_bytes, group_bytes == 1 ? "" : "s",
                        (unsigned long long)first_element, d, (long long)out->dims[d].start);
        }
        for (size_t d = 0; d < r; d++) {
            const st_slice_dim *dim = &out->dims[d];
            uint64_t magnitude = (uint64_t)(dim->step < 0 ? -dim->step : dim->step);
            if (dim->count > 1 && (magnitude * stride[d]) % group != 0)
                return fail(err, ST_SLICE_SUB_BYTE, d,
                            "%s packs %u values in %u byte%s: stepping dimension %zu by %lld "
                            "starts runs inside a byte",
                            st_dtype_name(dtype), group, group_bytes, group_bytes == 1 ? "" : "s",
                            d, (long long)dim->step);
        }
    }

    out->run_bytes = group_bytes_of(run_elements, group, group_bytes);
    out->run_count = out->out_elements / run_elements;
    out->out_bytes = out->run_count * out->run_bytes;
    out->first_offset = group_bytes_of(first_element, group, group_bytes);
    for (size_t d = 0; d < r; d++) {
        const st_slice_dim *dim = &out->dims[d];
        if (dim->count <= 1) {
            out->loop_step_bytes[d] = 0;
            continue;
        }
        /* |step| * stride < elements here (count >= 2 keeps both in the dimension) */
        uint64_t magnitude = (uint64_t)(dim->step < 0 ? -dim->step : dim->step) * stride[d];
        int64_t bytes = (int64_t)group_bytes_of(magnitude, group, group_bytes);
        out->loop_step_bytes[d] = dim->step < 0 ? -bytes : bytes;
    }
    return ST_SLICE_OK;
}

uint64_t st_slice_run_offset(const st_slice *slice, uint64_t i)
{
    /* Offsets are sums of signed steps that always land inside the tensor; unsigned
     * wrap-around arithmetic gives the exact result. */
    uint64_t offset = slice->first_offset;
    for (size_t d = slice->loop_rank; d-- > 0;) {
        uint64_t count = slice->dims[d].count;
        uint64_t index = i % count;
        i /= count;
        offset += index * (uint64_t)slice->loop_step_bytes[d];
    }
    return offset;
}

void st_slice_cursor_init(st_slice_cursor *cursor, const st_slice *slice)
{
    cursor->slice = slice;
    cursor->next = 0;
    memset(cursor->index, 0, sizeof cursor->index);
    cursor->offset = slice->first_offset;
}

bool st_slice_cursor_next(st_slice_cursor *cursor, uint64_t *offset)
{
    const st_slice *slice = cursor->slice;
    if (cursor->next >= slice->run_count)
        return false;
    *offset = cursor->offset;
    cursor->next++;
    if (cursor->next >= slice->run_count)
        return true;
    /* odometer over the loop dimensions, last fastest */
    for (size_t d = slice->loop_rank; d-- > 0;) {
        uint64_t step = (uint64_t)slice->loop_step_bytes[d];
        if (++cursor->index[d] < slice->dims[d].count) {
            cursor->offset += step;
            break;
        }
        cursor->offset -= (cursor->index[d] - 1) * step;
        cursor->index[d] = 0;
    }
    return true;
}

/* ---- strided copies: the inner loop of every gather ----
 * Portable: one fixed-size memcpy per element (the constant size lets the compiler
 * make each one load and one store). Fast paths (x86-64, SSE2, part of the base
 * instruction set, so no runtime check): every other element (step = 2 x size:
 * "::2") and reversed elements (step = -size: "::-1") of 1-, 2- and 4-byte
 * elements, 16 output bytes per step: two loads, a shuffle or a pack, one store.
 * A vector never reads a byte outside [first element, last element]: "::2" stops
 * its vectors while the next element wanted lies past what they read, reversed
 * vectors only read elements wanted. */

static atomic_bool slice_force_portable;

bool st_slice_force_portable(bool on)
{
    return atomic_exchange(&slice_force_portable, on);
}

#define COPY_FIXED(size)                                                                           \
    for (; k < count; k++, src += step, dst += (size))                                             \
    memcpy(dst, src, (size))

/* count elements from src, src + step, ...; src advances only while elements remain,
 * so no pointer is formed past the last element */
static void strided_portable(uint8_t *dst, const uint8_t *src, int64_t step, uint64_t count,
                             size_t size)
{
    uint64_t k = 0;
    if (count == 0)
        return;
    count--; /* the last element is copied after the loop, without a step */
    switch (size) {
    case 1:
        COPY_FIXED(1);
        break;
    case 2:
        COPY_FIXED(2);
        break;
    case 4:
        COPY_FIXED(4);
        break;
    case 8:
        COPY_FIXED(8);
        break;
    case 16:
        COPY_FIXED(16);
        break;
    default:
        COPY_FIXED(size);
        break;
    }
    memcpy(dst, src, size);
}

#ifdef ST_SLICE_SSE2
/* every other element: 2 x 16 input bytes -> 16 output bytes */
static inline __m128i even_1(__m128i a, __m128i b)
{
    const __m128i low = _mm_set1_epi16(0x00FF);
    return _mm_packus_epi16(_mm_and_si128(a, low), _mm_and_si128(b, low));
}

static inline __m128i even_2(__m128i a, __m128i b)
{
    /* sign-extend the low halves of the 32-bit lanes so the signed pack is exact */
    a = _mm_srai_epi32(_mm_slli_epi32(a, 16), 16);
    b = _mm_srai_epi32(_mm_slli_epi32(b, 16), 16);
    return _mm_packs_epi32(a, b);
}

static inline __m128i even_4(__m128i a, __m128i b)
{
    return _mm_castps_si128(
        _mm_shuffle_ps(_mm_castsi128_ps(a), _mm_castsi128_ps(b), _MM_SHUFFLE(2, 0, 2, 0)));
}

/* the 16 bytes reversed in units of 1, 2, 4 */
static inline __m128i reverse_4(__m128i a)
{
    return _mm_shuffle_epi32(a, _MM_SHUFFLE(0, 1, 2, 3));
}

static inline __m128i reverse_2(__m128i a)
{
    a = _mm_shufflelo_epi16(a, _MM_SHUFFLE(0, 1, 2, 3));
    a = _mm_shufflehi_epi16(a, _MM_SHUFFLE(0, 1, 2, 3));
    return _mm_shuffle_epi32(a, _MM_SHUFFLE(1, 0, 3, 2));
}

static inline __m128i reverse_1(__m128i a)
{
    a = _mm_or_si128(_mm_slli_epi16(a, 8), _mm_srli_epi16(a, 8));
    return reverse_2(a);
}

/* Vector part of "::2": returns the elements done (the caller finishes the rest).
 * Always inlined with a constant size, so each size gets its own loop. */
static inline __attribute__((always_inline)) uint64_t even_sse2(uint8_t *dst, const uint8_t *src,
                                                                uint64_t count, size_t size)
{
    uint64_t per = 16 / size; /* outputs per vector step; it reads 2 x per inputs */
    uint64_t k = 0;
    /* element k + per is wanted: the 32 bytes read ([k, k + per) doubled) are inside */
    for (; k + per < count; k += per) {
        const uint8_t *p = src + k * 2 * size;
        __m128i a = _mm_loadu_si128((const __m128i *)p);
        __m128i b = _mm_loadu_si128((const __m128i *)(p + 16));
        __m128i v = size == 1 ? even_1(a, b) : size == 2 ? even_2(a, b) : even_4(a, b);
        _mm_storeu_si128((__m128i *)(dst + k * size), v);
    }
    return k;
}

/* Vector part of "::-1": src is the first element (the highest address). */
static inline __attribute__((always_inline)) uint64_t reverse_sse2(uint8_t *dst, const uint8_t *src,
                                                                   uint64_t count, size_t size)
{
    uint64_t per = 16 / size;
    uint64_t k = 0;
    for (; k + per <= count; k += per) {
        /* elements k .. k + per - 1 lie at src - k*size down to src - (k+per-1)*size */
        const uint8_t *p = src - (k + per - 1) * size;
        __m128i a = _mm_loadu_si128((const __m128i *)p);
        __m128i v = size == 1 ? reverse_1(a) : size == 2 ? reverse_2(a) : reverse_4(a);
        _mm_storeu_si128((__m128i *)(dst + k * size), v);
    }
    return k;
}
#endif

void st_slice_strided_copy(uint8_t *dst, const uint8_t *src, int64_t step, uint64_t count,
                           size_t size)
{
#ifdef ST_SLICE_SSE2
    if ((size == 1 || size == 2 || size == 4) && count >= 2 * (16 / size) &&
        !atomic_load_explicit(&slice_force_portable, memory_order_relaxed)) {
        uint64_t done = 0;
        bool even = step == 2 * (int64_t)size, reverse = step == -(int64_t)size;
        if (even && size == 1)
            done = even_sse2(dst, src, count, 1);
        else if (even && size == 2)
            done = even_sse2(dst, src, count, 2);
        else if (even)
            done = even_sse2(dst, src, count, 4);
        else if (reverse && size == 1)
            done = reverse_sse2(dst, src, count, 1);
        else if (reverse && size == 2)
            done = reverse_sse2(dst, src, count, 2);
        else if (reverse)
            done = reverse_sse2(dst, src, count, 4);
        if (done > 0) {
            strided_portable(dst + done * size, src + (int64_t)done * step, step, count - done,
                             size);
            return;
        }
    }
#endif
    strided_portable(dst, src, step, count, size);
}

void st_slice_gather(const st_slice *slice, const uint8_t *tensor, uint8_t *out)
{
    if (slice->run_count == 0)
        return;
    if (slice->loop_rank == 0) {
        memcpy(out, tensor + slice->first_offset, slice->run_bytes);
        return;
    }
    /* The innermost loop dimension is copied row by row; the outer ones are walked
     * with an odometer. */
    size_t inner = slice->loop_rank - 1;
    uint64_t inner_count = slice->dims[inner].count;
    uint64_t inner_step = (uint64_t)slice->loop_step_bytes[inner];
    uint64_t index[ST_SLICE_RANK_MAX] = {0};
    uint64_t base = slice->first_offset;
    uint64_t rows = slice->run_count / inner_count;
    for (uint64_t row = 0; row < rows; row++) {
        st_slice_strided_copy(out, tensor + base, (int64_t)inner_step, inner_count,
                              (size_t)slice->run_bytes);
        out += inner_count * slice->run_bytes;
        for (size_t d = inner; d-- > 0;) {
            uint64_t step = (uint64_t)slice->loop_step_bytes[d];
            if (++index[d] < slice->dims[d].count) {
                base += step;
                break;
            }
            base -= (index[d] - 1) * step;
            index[d] = 0;
        }
    }
}
