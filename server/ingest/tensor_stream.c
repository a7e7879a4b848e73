/* The tensor streaming engine (see tensor_stream.h).
 *
 * The body is a sequence of "units": for a plain copy one unit is one byte (so
 * sub-byte dtypes, whose slices st_slice keeps on whole bytes, need nothing
 * special); for a conversion one unit is one element, unit_in source bytes
 * becoming unit_out output bytes. Output position p lies in unit p / unit_out;
 * units are laid out run after run in the slice's run order, so a position maps
 * to (run, bytes of the run before it) and the cursor is set on that run.
 * Conversion always works on whole elements and cuts the bytes asked for, so a
 * read may start or end in the middle of an element.
 *
 * Small runs (strided slices such as ::2,::2) are not stepped one by one: when a
 * run ends, the rest of its row of the innermost loop dimension that lies in the
 * read window is copied in one fixed-stride pass (gather_row), the cursor moving
 * only between rows.
 *
 * A mapped stream (tg_tensor_stream_map) has one window over the whole tensor, the
 * file's own pages: no read copies the source, and a gather reads the page cache
 * directly. Its loads run inside a SIGBUS guard (map_guard.h), so a file cut short on
 * disk behind the server's back fails the read with EIO, as pread would. */
#include "tensor_stream.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "map_guard.h"
#include "st_convert.h"
#include "st_npy.h"

/* 256 + 24 * rank bytes always hold an .npy header (st_npy.h). */
#define NPY_HEADER_CAP (256 + 24 * ST_SLICE_RANK_MAX)

struct tg_tensor_stream {
    tg_tensor_plan plan;
    st_slice slice;
    tg_tensor_read_fn read; /* NULL: plan only */
    void *read_ctx;
    uint64_t tensor_base;  /* absolute file offset of the tensor's first byte */
    uint64_t tensor_bytes; /* end - begin */
    uint8_t header[NPY_HEADER_CAP];
    uint64_t body_length; /* plan.length - plan.header_length */
    unsigned unit_in, unit_out;
    bool backward; /* runs go down in the file: read windows that end at the run */
    bool sparse;   /* runs lie far apart: read each run alone, not a whole window */
    /* Position: the state below describes body position body_pos, which lies in
     * the unit starting run_done bytes into run number cursor.next - 1. */
    bool positioned;
    uint64_t body_pos;
    st_slice_cursor cursor;
    uint64_t run_src;  /* tensor-relative offset of the current run */
    uint64_t run_done; /* bytes of the current run before the current unit */
    /* Source window: the tensor's bytes [window_begin, window_begin + window_len). */
    uint8_t *window;
    uint64_t window_begin;
    size_t window_len;
    /* Mapped: window points into the mapping [map, map + map_len), which holds the
     * whole tensor (window_begin 0, window_len tensor_bytes) and is never refilled. */
    void *map;
    size_t map_len;
    uint8_t *staging;   /* conversion: the source elements of one batch, gathered */
    uint8_t *converted; /* conversion output when it cannot go straight to the caller */
};

static void set_error(tg_tensor_error *err, unsigned status, const char *reason, size_t dim,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void set_error(tg_tensor_error *err, unsigned status, const char *reason, size_t dim,
                      const char *fmt, ...)
{
    if (err == NULL)
        return;
    err->status = status;
    err->reason = reason;
    err->dim = dim;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->detail, sizeof err->detail, fmt, ap);
    va_end(ap);
}

/* A client's text quoted into a message only when it is short printable ASCII. */
static const char *printable_or(const char *text, const char *fallback)
{
    size_t n = 0;
    for (const char *p = text; *p; p++, n++) {
        if (n >= 32 || *p < 0x21 || *p > 0x7e || *p == '"' || *p == '\\')
            return fallback;
    }
    return text;
}

static int parse_format(const char *text, tg_tensor_format *format, tg_tensor_error *err)
{
    if (text == NULL || text[0] == '\0' || strcmp(text, "raw") == 0) {
        *format = TG_TENSOR_RAW;
        return 0;
    }
    if (strcmp(text, "npy") == 0) {
        *format = TG_TENSOR_NPY;
        return 0;
    }
    set_error(err, 400, "invalid_format", SIZE_MAX, "format \"%s\" is unknown; use raw or npy",
              printable_or(text, "(unprintable)"));
    return -1;
}

static int parse_dtype(const char *text, st_dtype source, st_dtype *out, tg_tensor_error *err)
{
    if (text == NULL || text[0] == '\0') {
        *out = source;
        return 0;
    }
    if (!st_dtype_from_name(text, strlen(text), out)) {
        set_error(err, 400, "invalid_dtype", SIZE_MAX,
                  "dtype \"%s\" is unknown; conversions are to F64, F32, F16, BF16, F8_E4M3 or "
                  "F8_E5M2 (names are case-sensitive)",
                  printable_or(text, "(unprintable)"));
        return -1;
    }
    /* the same dtype is no conversion, whatever the dtype */
    if (*out != source && !st_convert_supported(source, *out)) {
        set_error(err, 422, "unsupported_conversion", SIZE_MAX,
                  "cannot convert %s to %s: conversions are among F64, F32, F16, BF16, F8_E4M3 "
                  "and F8_E5M2 only",
                  st_dtype_name(source), st_dtype_name(*out));
        return -1;
    }
    return 0;
}

static int parse_slice(const char *text, const st_tensor *tensor, st_slice *slice,
                       tg_tensor_error *err)
{
    const char *t = text ? text : "";
    st_slice_error serr;
    st_slice_status status =
        st_slice_parse(t, strlen(t), tensor->shape, tensor->rank, tensor->dtype, slice, &serr);
    switch (status) {
    case ST_SLICE_OK:
        return 0;
    case ST_SLICE_INDEX_RANGE:
        set_error(err, 400, "slice_out_of_range", serr.dim, "slice: %s", serr.detail);
        break;
    case ST_SLICE_RANK:
        set_error(err, 422, "unsupported_tensor", SIZE_MAX, "%s", serr.detail);
        break;
    default:
        /* the detail names the dimension where one is concerned */
        set_error(err, 400, "invalid_slice", serr.dim, "slice: %s", serr.detail);
        break;
    }
    return -1;
}

int tg_tensor_stream_open(tg_tensor_read_fn read, void *read_ctx, const st_file *file,
                          const st_tensor *tensor, const tg_tensor_options *options,
                          tg_tensor_stream **out, tg_tensor_error *err)
{
    static const tg_tensor_options no_options = {NULL, NULL, NULL};
    if (options == NULL)
        options = &no_options;
    *out = NULL;
    if (err != NULL) {
        err->status = 0;
        err->reason = NULL;
        err->dim = SIZE_MAX;
        err->detail[0] = '\0';
    }
    tg_tensor_stream *s = calloc(1, sizeof *s);
    if (s == NULL) {
        set_error(err, 500, "internal", SIZE_MAX, "out of memory");
        return -1;
    }
    s->read = read;
    s->read_ctx = read_ctx;
    tg_tensor_plan *plan = &s->plan;
    plan->source_dtype = tensor->dtype;
    if (parse_format(options->format, &plan->format, err) != 0 ||
        parse_dtype(options->dtype, tensor->dtype, &plan->out_dtype, err) != 0 ||
        parse_slice(options->slice, tensor, &s->slice, err) != 0)
        goto fail;
    plan->converts = plan->out_dtype != plan->source_dtype;
    plan->out_rank = s->slice.out_rank;
    memcpy(plan->out_shape, s->slice.out_shape, sizeof plan->out_shape);
    plan->out_elements = s->slice.out_elements;

    if (plan->format == TG_TENSOR_NPY) {
        size_t n = st_npy_header(plan->out_dtype, plan->out_shape, plan->out_rank, s->header,
                                 sizeof s->header);
        if (n == 0) {
            const char *name = st_dtype_name(plan->out_dtype);
            if (plan->converts)
                set_error(err, 406, "npy_unsupported_dtype", SIZE_MAX,
                          "NumPy has no %s dtype; ask for ?dtype=F32 (or F16, F64) with "
                          "format=npy, or use format=raw",
                          name);
            else if (st_convert_supported(plan->source_dtype, ST_F32))
                set_error(err, 406, "npy_unsupported_dtype", SIZE_MAX,
                          "NumPy has no %s dtype; add ?dtype=F32 (exact for %s) or use format=raw",
                          name, name);
            else
                set_error(err, 406, "npy_unsupported_dtype", SIZE_MAX,
                          "NumPy has no %s dtype and %s does not convert; use format=raw", name,
                          st_dtype_name(plan->source_dtype));
            goto fail;
        }
        plan->header_length = n;
    }

    /* Conversion works element by element on byte-sized floats; a copy byte by byte. */
    if (plan->converts) {
        s->unit_in = st_dtype_bits(plan->source_dtype) / 8;
        s->unit_out = st_dtype_bits(plan->out_dtype) / 8;
        if (__builtin_mul_overflow(plan->out_elements, (uint64_t)s->unit_out, &s->body_length)) {
            set_error(err, 422, "unsupported_tensor", SIZE_MAX,
                      "the converted tensor's size overflows 64 bits");
            goto fail;
        }
    } else {
        s->unit_in = s->unit_out = 1;
        s->body_length = s->slice.out_bytes;
    }
    if (__builtin_add_overflow(plan->header_length, s->body_length, &plan->length) ||
        __builtin_add_overflow(file->data_start, tensor->begin, &plan->source_begin) ||
        __builtin_add_overflow(file->data_start, tensor->end, &plan->source_end) ||
        tensor->end < tensor->begin) {
        set_error(err, 422, "unsupported_tensor", SIZE_MAX, "the tensor's offsets overflow");
        goto fail;
    }
    s->tensor_base = plan->source_begin;
    s->tensor_bytes = tensor->end - tensor->begin;
    /* The slice was computed from shape and dtype; the file's offsets must agree
     * (the gate checked it; a mismatch here means a corrupt catalog, never an overread). */
    if (s->slice.run_count > 0 &&
        (s->slice.first_offset >= s->tensor_bytes || s->slice.run_bytes > s->tensor_bytes)) {
        set_error(err, 500, "internal", SIZE_MAX, "the tensor's offsets disagree with its shape");
        goto fail;
    }

    plan->contiguous = plan->format == TG_TENSOR_RAW && !plan->converts && s->slice.run_count <= 1;
    plan->contiguous_offset = plan->source_begin + (s->slice.run_count ? s->slice.first_offset : 0);

    if (s->slice.loop_rank > 0) {
        int64_t inner = s->slice.loop_step_bytes[s->slice.loop_rank - 1];
        uint64_t magnitude = inner < 0 ? (uint64_t)0 - (uint64_t)inner : (uint64_t)inner;
        s->backward = inner < 0;
        /* runs 16 KiB or more apart: one pread per run costs less than windows that
         * are mostly gaps (a window reads every byte between the runs) */
        s->sparse = magnitude >= s->slice.run_bytes + 16 * 1024;
    }
    *out = s;
    return 0;
fail:
    free(s);
    return -1;
}

const tg_tensor_plan *tg_tensor_stream_plan(const tg_tensor_stream *stream)
{
    return &stream->plan;
}

void tg_tensor_stream_free(tg_tensor_stream *stream)
{
    if (stream == NULL)
        return;
    if (stream->map != NULL)
        munmap(stream->map, stream->map_len);
    else
        free(stream->window);
    free(stream->staging);
    free(stream->converted);
    free(stream);
}

/* Places the state on body position pos (< body_length). */
static void seek(tg_tensor_stream *s, uint64_t pos)
{
    const st_slice *slice = &s->slice;
    /* unit * unit_in <= the selection's source bytes, so no overflow */
    uint64_t source_byte = pos / s->unit_out * s->unit_in;
    uint64_t run = source_byte / slice->run_bytes;
    st_slice_cursor *c = &s->cursor;
    c->slice = slice;
    memset(c->index, 0, sizeof c->index);
    uint64_t rest = run;
    for (size_t d = slice->loop_rank; d-- > 0;) {
        c->index[d] = rest % slice->dims[d].count;
        rest /= slice->dims[d].count;
    }
    c->next = run;
    c->offset = st_slice_run_offset(slice, run);
    /* run < run_count: next gives run's offset and moves to run + 1 */
    st_slice_cursor_next(c, &s->run_src);
    s->run_done = source_byte % slice->run_bytes;
    s->body_pos = pos;
    s->positioned = true;
}

/* Reads the tensor's bytes [begin, end) (end - begin <= TG_TENSOR_CHUNK, end <=
 * tensor_bytes) into the window. */
static int refill(tg_tensor_stream *s, uint64_t begin, uint64_t end)
{
    s->window_len = 0;
    if (s->read(s->read_ctx, s->window, (size_t)(end - begin), s->tensor_base + begin) != 0)
        return -1;
    s->window_begin = begin;
    s->window_len = (size_t)(end - begin);
    return 0;
}

/* The tensor's bytes [off, off + n), read through the window. need (n <= need <=
 * TG_TENSOR_CHUNK, off + need <= tensor_bytes) is how much from off the caller will
 * want soon; a refill always covers it. NULL with errno on a read error. */
static const uint8_t *source_bytes(tg_tensor_stream *s, uint64_t off, size_t n, size_t need)
{
    if (s->window_len > 0 && off >= s->window_begin && off - s->window_begin + n <= s->window_len)
        return s->window + (off - s->window_begin);
    uint64_t begin, end;
    if (s->sparse) {
        begin = off;
        end = off + need;
    } else if (s->backward) {
        end = off + need;
        begin = end > TG_TENSOR_CHUNK ? end - TG_TENSOR_CHUNK : 0;
    } else {
        begin = off;
        end = s->tensor_bytes - off > TG_TENSOR_CHUNK ? off + TG_TENSOR_CHUNK : s->tensor_bytes;
    }
    if (refill(s, begin, end) != 0)
        return NULL;
    return s->window + (off - begin);
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* Copies count runs of size bytes each from window offsets at, at + step, ... into
 * dst: st_slice_strided_copy (vector paths for "::2" and "::-1" of 1-, 2- and 4-byte
 * elements), which forms no pointer outside the runs. */
static void copy_strided(uint8_t *dst, const uint8_t *window, int64_t at, int64_t step,
                         uint64_t count, size_t size)
{
    st_slice_strided_copy(dst, window + at, step, count, size);
}

/* Whether the rows of the innermost loop dimension lie so far apart (16 KiB or more of
 * gap after a row of row_span bytes) that each is read alone rather than in a window
 * that spans the rows skipped between them. */
static bool rows_apart(const tg_tensor_stream *s, uint64_t row_span)
{
    const st_slice *slice = &s->slice;
    if (s->map != NULL || slice->loop_rank < 2)
        return false;
    int64_t outer = slice->loop_step_bytes[slice->loop_rank - 2];
    uint64_t magnitude = outer < 0 ? (uint64_t)0 - (uint64_t)outer : (uint64_t)outer;
    return magnitude >= row_span + 16 * 1024;
}

/* Fast path of gather, taken when the current run is finished: copies the next whole
 * runs of the innermost loop dimension (at most `bytes` worth, at least one) that lie
 * in one read window, in one strided pass, and leaves the state on the last of them,
 * finished. Returns the bytes copied, 0 when the fast path does not apply (the
 * caller steps one run), or -1 with errno on a read error. */
static int64_t gather_row(tg_tensor_stream *s, uint8_t *dst, uint64_t bytes)
{
    const st_slice *slice = &s->slice;
    st_slice_cursor *c = &s->cursor;
    uint64_t run_bytes = slice->run_bytes;
    if (s->sparse || slice->loop_rank == 0 || run_bytes == 0 || run_bytes > TG_TENSOR_CHUNK / 4 ||
        c->next >= slice->run_count || bytes < 2 * run_bytes)
        return 0;
    size_t inner = slice->loop_rank - 1;
    /* the cursor stands on run `next`, index[inner] of the row's dims[inner].count */
    uint64_t count = slice->dims[inner].count - c->index[inner];
    if (count > bytes / run_bytes)
        count = bytes / run_bytes;
    int64_t step = slice->loop_step_bytes[inner];
    uint64_t first = c->offset;
    uint64_t magnitude = step < 0 ? (uint64_t)0 - (uint64_t)step : (uint64_t)step;
    if (s->window_len == 0 || first < s->window_begin ||
        first - s->window_begin + run_bytes > s->window_len) {
        /* Refill so that the window holds the rest of this row and as many of the next
         * rows as fit: when the outer walk goes the other way than the row (::-1,::2),
         * a window read in the row's direction would hold one row only. The row's runs
         * all lie inside the tensor, so the span below does not wrap. */
        uint64_t row_left = slice->dims[inner].count - c->index[inner];
        uint64_t lo = step < 0 ? first - (row_left - 1) * magnitude : first;
        uint64_t hi = (step < 0 ? first : first + (row_left - 1) * magnitude) + run_bytes;
        bool rows_down = inner > 0 ? slice->loop_step_bytes[inner - 1] < 0 : step < 0;
        uint64_t begin, end;
        if (hi - lo > TG_TENSOR_CHUNK)
            rows_down = step < 0; /* the row alone overfills a window: follow the row */
        if (hi - lo <= TG_TENSOR_CHUNK && rows_apart(s, hi - lo)) {
            /* the next row starts far beyond this one (::2,::2 skips every other row):
             * a window of whole rows would read the rows between, as many bytes again */
            begin = lo;
            end = hi;
        } else if (rows_down) {
            end = hi - lo > TG_TENSOR_CHUNK ? first + run_bytes : hi;
            begin = end > TG_TENSOR_CHUNK ? end - TG_TENSOR_CHUNK : 0;
        } else {
            begin = hi - lo > TG_TENSOR_CHUNK ? first : lo;
            end = s->tensor_bytes - begin > TG_TENSOR_CHUNK ? begin + TG_TENSOR_CHUNK
                                                            : s->tensor_bytes;
        }
        if (refill(s, begin, end) != 0)
            return -1;
    }
    uint64_t at = first - s->window_begin;
    /* runs of this row that lie in the window: forward up to its end, backward down
     * to its start (the first run is in it, so each bound is >= 1) */
    uint64_t in_window;
    if (magnitude == 0)
        in_window = count;
    else if (step > 0)
        in_window = (s->window_len - at - run_bytes) / magnitude + 1;
    else
        in_window = at / magnitude + 1;
    if (count > in_window)
        count = in_window;
    if (count < 2)
        return 0;
    /* at < window_len <= TG_TENSOR_CHUNK and every run copied lies in the window,
     * so the signed offsets below stay within [-|step|, TG_TENSOR_CHUNK] */
    copy_strided(dst, s->window, (int64_t)at, step, count, (size_t)run_bytes);
    /* move to the last run copied, then let the cursor step over it (odometer carry) */
    c->index[inner] += count - 1;
    c->offset += (count - 1) * (uint64_t)step;
    c->next += count - 1;
    st_slice_cursor_next(c, &s->run_src);
    s->run_done = run_bytes;
    return (int64_t)(count * run_bytes);
}

/* Copies the next `bytes` source bytes of the selection (whole units) into dst and
 * moves the state past them. Runs are walked with the cursor; rows of small runs
 * that lie in one window are copied by gather_row in one strided pass. */
static int gather(tg_tensor_stream *s, uint8_t *dst, uint64_t bytes)
{
    const st_slice *slice = &s->slice;
    while (bytes > 0) {
        if (s->run_done == slice->run_bytes) {
            int64_t copied = gather_row(s, dst, bytes);
            if (copied < 0)
                return -1;
            if (copied > 0) {
                dst += copied;
                bytes -= (uint64_t)copied;
                continue;
            }
        }
        if (s->run_done == slice->run_bytes) {
            if (!st_slice_cursor_next(&s->cursor, &s->run_src)) {
                errno = EIO; /* cannot happen: the body length counts exactly the runs */
                return -1;
            }
            s->run_done = 0;
        }
        uint64_t run_left = slice->run_bytes - s->run_done;
        size_t need = (size_t)min_u64(run_left, TG_TENSOR_CHUNK);
        size_t take = (size_t)min_u64(need, bytes);
        const uint8_t *src = source_bytes(s, s->run_src + s->run_done, take, need);
        if (src == NULL)
            return -1;
        memcpy(dst, src, take);
        dst += take;
        bytes -= take;
        s->run_done += take;
    }
    return 0;
}

/* Writes want (> 0, within the body) bytes of the body from s->body_pos into buf. */
static int generate(tg_tensor_stream *s, uint8_t *buf, size_t want)
{
    const tg_tensor_plan *plan = &s->plan;
    if (!plan->converts) {
        /* one unit = one byte: the body is the runs' bytes */
        if (gather(s, buf, want) != 0)
            return -1;
        s->body_pos += want;
        return 0;
    }
    size_t produced = 0;
    size_t batch_units = TG_TENSOR_CHUNK / (s->unit_in > s->unit_out ? s->unit_in : s->unit_out);
    while (produced < want) {
        /* This batch covers output bytes [skip, end) of the elements starting at the
         * current unit: `full` whole elements, then maybe part of one more. */
        size_t skip = (size_t)(s->body_pos % s->unit_out);
        uint64_t end = (uint64_t)skip + (want - produced);
        if (end > (uint64_t)batch_units * s->unit_out)
            end = (uint64_t)batch_units * s->unit_out;
        size_t full = (size_t)(end / s->unit_out);
        bool partial = end % s->unit_out != 0;
        if (gather(s, s->staging, (uint64_t)full * s->unit_in) != 0)
            return -1;
        if (partial) {
            /* the last element is only partly consumed: read it, but leave the state on it */
            st_slice_cursor cursor = s->cursor;
            uint64_t run_src = s->run_src, run_done = s->run_done;
            int rc = gather(s, s->staging + (size_t)full * s->unit_in, s->unit_in);
            s->cursor = cursor;
            s->cursor.slice = &s->slice;
            s->run_src = run_src;
            s->run_done = run_done;
            if (rc != 0)
                return -1;
        }
        size_t count = full + (partial ? 1 : 0);
        size_t written = (size_t)(end - skip);
        if (skip == 0 && !partial) {
            st_convert(plan->source_dtype, plan->out_dtype, s->staging, buf + produced, count);
        } else {
            /* whole elements converted aside, then the bytes asked for are cut out */
            st_convert(plan->source_dtype, plan->out_dtype, s->staging, s->converted, count);
            memcpy(buf + produced, s->converted + skip, written);
        }
        produced += written;
        s->body_pos += written;
    }
    return 0;
}

int tg_tensor_stream_map(tg_tensor_stream *s, int fd)
{
    if (s->map != NULL)
        return 0;
    if (s->tensor_bytes == 0 || s->tensor_bytes > SIZE_MAX / 2 || tg_map_guard_init() != 0) {
        errno = EINVAL;
        return -1;
    }
    long page = sysconf(_SC_PAGESIZE);
    uint64_t lead = s->tensor_base % (uint64_t)(page > 0 ? page : 4096);
    uint64_t start = s->tensor_base - lead;
    if (start > (uint64_t)INT64_MAX) {
        errno = EOVERFLOW;
        return -1;
    }
    size_t len = (size_t)(lead + s->tensor_bytes);
    void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)start);
    if (map == MAP_FAILED)
        return -1;
    free(s->window);
    s->map = map;
    s->map_len = len;
    s->window = (uint8_t *)map + lead;
    s->window_begin = 0;
    s->window_len = (size_t)s->tensor_bytes;
    s->sparse = false; /* every run is in the one window: no per-run reads */
    return 0;
}

bool tg_tensor_stream_map_pays(const tg_tensor_stream *s)
{
    if (s->tensor_bytes <= TG_TENSOR_CHUNK || s->plan.contiguous)
        return false;
    return s->plan.converts || s->slice.run_bytes >= TG_TENSOR_MAP_RUN_MIN;
}

/* generate() over a mapped window, with SIGBUS past the file's end turned into EIO. */
static int generate_mapped(tg_tensor_stream *s, uint8_t *buf, size_t want)
{
    tg_map_guard guard;
    if (sigsetjmp(guard.env, 0) != 0) {
        tg_map_guard_leave();
        errno = EIO;
        return -1;
    }
    tg_map_guard_enter(&guard, s->map, s->map_len);
    int rc = generate(s, buf, want);
    tg_map_guard_leave();
    return rc;
}

ssize_t tg_tensor_stream_read(tg_tensor_stream *s, uint64_t pos, uint8_t *buf, size_t max)
{
    const tg_tensor_plan *plan = &s->plan;
    if (pos > plan->length) {
        errno = EINVAL;
        return -1;
    }
    uint64_t want64 = min_u64(plan->length - pos, min_u64(max, (uint64_t)SSIZE_MAX));
    size_t want = (size_t)want64;
    size_t produced = 0;
    if (pos < plan->header_length) {
        size_t n = (size_t)min_u64(plan->header_length - pos, want);
        memcpy(buf, s->header + pos, n);
        produced = n;
    }
    if (produced == want)
        return (ssize_t)produced;
    if (s->read == NULL && s->map == NULL) {
        errno = EBADF;
        return -1;
    }
    /* buffers on first use, sized by what this tensor can need */
    if (s->window == NULL) {
        s->window = malloc((size_t)min_u64(s->tensor_bytes, TG_TENSOR_CHUNK));
        if (s->window == NULL)
            return -1;
    }
    if (plan->converts && s->converted == NULL) {
        s->staging = malloc(TG_TENSOR_CHUNK);
        s->converted = malloc(TG_TENSOR_CHUNK);
        if (s->staging == NULL || s->converted == NULL)
            return -1;
    }
    uint64_t body_pos = pos + produced - plan->header_length;
    if (!s->positioned || s->body_pos != body_pos)
        seek(s, body_pos);
    if ((s->map != NULL ? generate_mapped(s, buf + produced, want - produced)
                        : generate(s, buf + produced, want - produced)) != 0) {
        s->positioned = false;
        return -1;
    }
    return (ssize_t)want;
}

size_t tg_tensor_shape_text(const uint64_t *shape, size_t rank, char *out, size_t cap)
{
    size_t used = 0;
    if (cap < 3)
        return 0;
    out[used++] = '[';
    for (size_t d = 0; d < rank; d++) {
        int n =
            snprintf(out + used, cap - used, "%s%llu", d ? "," : "", (unsigned long long)shape[d]);
        if (n < 0 || (size_t)n >= cap - used)
            return 0;
        used += (size_t)n;
    }
    if (used + 2 > cap)
        return 0;
    out[used++] = ']';
    out[used] = '\0';
    return used;
}
