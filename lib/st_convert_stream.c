/* Streaming conversion of a safetensors file (see st_convert_stream.h).
 *
 * The output is gathered in one buffer of chunk bytes and handed to the write
 * callback whenever it is full (and once more at the end); a tensor that keeps its
 * dtype is read straight into that buffer, one that changes is read into a second
 * buffer and converted into the first. */
#include "st_convert_stream.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "st_alloc.h"
#include "st_convert.h"

size_t st_convert_choose(const st_file *in, st_dtype to, st_convert_select_fn select,
                         void *select_ctx, st_dtype *dtypes)
{
    size_t changed = 0;
    for (size_t i = 0; i < in->tensor_count; i++) {
        const st_tensor *t = &in->tensors[i];
        bool selected = select == NULL || select(select_ctx, t->name);
        dtypes[i] = t->dtype;
        if (selected && t->dtype != to && st_convert_supported(t->dtype, to)) {
            dtypes[i] = to;
            changed++;
        }
    }
    return changed;
}

st_reason st_convert_plan(const st_file *in, const st_dtype *dtypes, st_write_plan *plan,
                          st_error *err)
{
    memset(plan, 0, sizeof *plan);
    st_write_tensor *wanted = st_calloc(in->tensor_count ? in->tensor_count : 1, sizeof *wanted);
    if (wanted == NULL)
        return st_error_set(err, ST_OUT_OF_MEMORY, ST_NO_OFFSET, NULL,
                            "out of memory planning %zu tensors", in->tensor_count);
    for (size_t i = 0; i < in->tensor_count; i++) {
        wanted[i].name = in->tensors[i].name;
        wanted[i].dtype = dtypes[i];
        wanted[i].rank = in->tensors[i].rank;
        wanted[i].shape = in->tensors[i].shape;
    }
    st_reason reason = st_write_plan_make(wanted, in->tensor_count, in->metadata,
                                          in->metadata_count, in->has_metadata, plan, err);
    free(wanted);
    return reason;
}

/* The output side: one buffer, handed to the callback when full. */
typedef struct out_buffer {
    uint8_t *data;
    size_t used, cap;
    uint64_t written; /* bytes handed to the callback */
    st_convert_write_fn write;
    void *ctx;
} out_buffer;

static int out_flush(out_buffer *out)
{
    if (out->used == 0)
        return 0;
    if (out->write(out->ctx, out->data, out->used) != 0)
        return -1;
    out->written += out->used;
    out->used = 0;
    return 0;
}

/* Copies len bytes into the buffer, flushing each time it fills. */
static int out_put(out_buffer *out, const uint8_t *data, size_t len)
{
    while (len > 0) {
        size_t n = out->cap - out->used < len ? out->cap - out->used : len;
        memcpy(out->data + out->used, data, n);
        out->used += n;
        data += n;
        len -= n;
        if (out->used == out->cap && out_flush(out) != 0)
            return -1;
    }
    return 0;
}

typedef struct in_source {
    st_convert_read_fn read;
    void *ctx;
} in_source;

static st_convert_status read_failed(const st_tensor *t, uint64_t at, size_t len, st_error *err)
{
    st_error_set(err, ST_OK, at, t->name,
                 "reading %zu bytes of tensor \"%.200s\" at offset %llu failed", len, t->name,
                 (unsigned long long)at);
    return ST_CONVERT_READ_FAILED;
}

/* A tensor that keeps its dtype: read straight into the output buffer. */
static st_convert_status copy_tensor(const st_tensor *t, uint64_t at, in_source *src,
                                     out_buffer *out, st_error *err)
{
    uint64_t left = t->end - t->begin;
    while (left > 0) {
        size_t room = out->cap - out->used;
        size_t n = left < room ? (size_t)left : room;
        if (src->read(src->ctx, out->data + out->used, n, at) != 0)
            return read_failed(t, at, n, err);
        out->used += n;
        at += n;
        left -= n;
        if (out->used == out->cap && out_flush(out) != 0)
            return ST_CONVERT_WRITE_FAILED;
    }
    return ST_CONVERT_OK;
}

/* A tensor whose dtype changes: read into scratch, converted into the output buffer.
 * Both dtypes are among the six convertible ones: whole bytes per element, 8 at most,
 * so a chunk (at least 8 bytes) holds one element of either. */
static st_convert_status convert_tensor(const st_tensor *t, uint64_t at, st_dtype to,
                                        in_source *src, uint8_t *scratch, out_buffer *out,
                                        st_error *err)
{
    size_t from_size = st_dtype_bits(t->dtype) / 8, to_size = st_dtype_bits(to) / 8;
    assert(from_size >= 1 && from_size <= ST_CONVERT_CHUNK_MIN && to_size >= 1 &&
           to_size <= ST_CONVERT_CHUNK_MIN);
    uint64_t left = t->elements;
    while (left > 0) {
        size_t room = (out->cap - out->used) / to_size;
        if (room == 0) {
            if (out_flush(out) != 0)
                return ST_CONVERT_WRITE_FAILED;
            continue;
        }
        size_t n = out->cap / from_size;
        if (n > room)
            n = room;
        if (n > left)
            n = (size_t)left;
        if (src->read(src->ctx, scratch, n * from_size, at) != 0)
            return read_failed(t, at, n * from_size, err);
        st_convert(t->dtype, to, scratch, out->data + out->used, n);
        out->used += n * to_size;
        at += (uint64_t)n * from_size;
        left -= n;
        if (out->used == out->cap && out_flush(out) != 0)
            return ST_CONVERT_WRITE_FAILED;
    }
    return ST_CONVERT_OK;
}

static st_convert_status write_failed(st_error *err)
{
    st_error_set(err, ST_OK, ST_NO_OFFSET, NULL, "the output could not be written");
    return ST_CONVERT_WRITE_FAILED;
}

st_convert_status st_convert_stream(const st_file *in, st_convert_read_fn read, void *read_ctx,
                                    st_convert_write_fn write, void *write_ctx,
                                    const st_convert_options *options, st_error *err)
{
    st_error_clear(err);
    const st_dtype *dtypes = options->dtypes;
    for (size_t i = 0; i < in->tensor_count; i++) {
        const st_tensor *t = &in->tensors[i];
        if (dtypes[i] != t->dtype && !st_convert_supported(t->dtype, dtypes[i])) {
            st_error_set(err, ST_DTYPE_UNKNOWN, ST_NO_OFFSET, t->name,
                         "tensor \"%.200s\" cannot be converted from %s to %s", t->name,
                         st_dtype_name(t->dtype), st_dtype_name(dtypes[i]));
            return ST_CONVERT_BAD_INPUT;
        }
    }
    size_t chunk = options->chunk_bytes == 0 ? ST_CONVERT_CHUNK_DEFAULT : options->chunk_bytes;
    if (chunk < ST_CONVERT_CHUNK_MIN)
        chunk = ST_CONVERT_CHUNK_MIN;

    st_write_plan plan;
    st_convert_status status = ST_CONVERT_OK;
    out_buffer out = {.cap = chunk, .write = write, .ctx = write_ctx};
    in_source src = {read, read_ctx};
    uint8_t *scratch = NULL;
    if (st_convert_plan(in, dtypes, &plan, err) != ST_OK) {
        status = err->reason == ST_OUT_OF_MEMORY ? ST_CONVERT_NO_MEMORY : ST_CONVERT_BAD_INPUT;
        goto out;
    }
    out.data = st_malloc(chunk);
    scratch = st_malloc(chunk);
    if (out.data == NULL || scratch == NULL) {
        st_error_set(err, ST_OUT_OF_MEMORY, ST_NO_OFFSET, NULL,
                     "out of memory for two %zu-byte conversion buffers", chunk);
        status = ST_CONVERT_NO_MEMORY;
        goto out;
    }
    if (out_put(&out, plan.header, plan.header_len) != 0) {
        status = write_failed(err);
        goto out;
    }
    uint64_t data_written = 0;
    for (size_t k = 0; k < plan.count; k++) {
        size_t i = plan.order[k];
        const st_tensor *t = &in->tensors[i];
        /* the plan lays the tensors out back to back in this order */
        assert(plan.begin[i] == data_written);
        uint64_t at;
        if (__builtin_add_overflow(in->data_start, t->begin, &at)) {
            st_error_set(err, ST_SIZE_OVERFLOW, ST_NO_OFFSET, t->name,
                         "tensor \"%.200s\" lies past the largest offset", t->name);
            status = ST_CONVERT_BAD_INPUT;
            goto out;
        }
        status = dtypes[i] == t->dtype ? copy_tensor(t, at, &src, &out, err)
                                       : convert_tensor(t, at, dtypes[i], &src, scratch, &out, err);
        if (status == ST_CONVERT_WRITE_FAILED)
            write_failed(err);
        if (status != ST_CONVERT_OK)
            goto out;
        data_written += plan.bytes[i];
    }
    assert(data_written == plan.data_size);
    if (out_flush(&out) != 0) {
        status = write_failed(err);
        goto out;
    }
    assert(out.written == (uint64_t)plan.header_len + plan.data_size);
out:
    free(out.data);
    free(scratch);
    st_write_plan_free(&plan);
    return status;
}
