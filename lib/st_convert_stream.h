/* Streaming conversion of a whole safetensors file: the one converter behind both
 * `tensorgate convert` (cmd/convert.c) and the server's conversion jobs
 * (server/jobs/convert_job.c). It owns the walk over a validated file: choosing each
 * tensor's output dtype, laying the output out (st_write_plan_make: same tensor
 * order, header and metadata rules as the reference writer), then reading, converting
 * (st_convert, bit-exact with PyTorch's .to()) or copying each tensor in bounded
 * chunks and handing the output bytes, in order, to a write callback. Where the bytes
 * come from and where they go (a file, the blob store through the gate and SHA-256)
 * is the caller's: memory stays at two chunks whatever the file size. */
#ifndef ST_CONVERT_STREAM_H
#define ST_CONVERT_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "st_dtype.h"
#include "st_error.h"
#include "st_header.h"
#include "st_write.h"

/* The chunk used when the options give none. */
#define ST_CONVERT_CHUNK_DEFAULT ((size_t)1 << 20)
/* The smallest chunk (one element of the widest convertible dtype). */
#define ST_CONVERT_CHUNK_MIN ((size_t)8)

/* Reads exactly len bytes of the input file at offset (absolute: the 8-byte length
 * prefix is offset 0) into buf. Returns 0, or -1 when it cannot (the conversion then
 * ends with ST_CONVERT_READ_FAILED; the callback keeps its own errno or reason). */
typedef int (*st_convert_read_fn)(void *ctx, void *buf, size_t len, uint64_t offset);
/* Takes the next len bytes of the output. Returns 0, or -1 to end the conversion
 * (ST_CONVERT_WRITE_FAILED): a failed write, or a caller that wants to stop. */
typedef int (*st_convert_write_fn)(void *ctx, const void *data, size_t len);
/* True when the tensor named name is to be converted (st_convert_choose). */
typedef bool (*st_convert_select_fn)(void *ctx, const char *name);

typedef enum st_convert_status {
    ST_CONVERT_OK = 0,
    ST_CONVERT_BAD_INPUT,   /* a tensor's output dtype is not one it converts to, or the
                             * output cannot be laid out (err->reason: the plan's reason) */
    ST_CONVERT_NO_MEMORY,   /* an allocation failed */
    ST_CONVERT_READ_FAILED, /* the read callback failed (err->tensor: the tensor read) */
    ST_CONVERT_WRITE_FAILED /* the write callback failed or stopped the conversion */
} st_convert_status;

typedef struct st_convert_options {
    /* in->tensor_count entries, in the input's tensor order (file order): the dtype
     * each tensor is written as (st_convert_choose fills it) */
    const st_dtype *dtypes;
    /* the size of the writes: every write but the last is exactly this long, reads
     * are at most this long (0: ST_CONVERT_CHUNK_DEFAULT; below ST_CONVERT_CHUNK_MIN:
     * that minimum). Memory: two buffers of this size. */
    size_t chunk_bytes;
} st_convert_options;

/* Fills dtypes (in->tensor_count entries) with each tensor's output dtype: to for a
 * tensor that select accepts (select NULL: every tensor), whose dtype is not to and
 * converts to it (st_convert_supported), its own dtype otherwise. select is called
 * once for every tensor, in file order, whatever its dtype (callers count the
 * matches of their patterns). Returns how many tensors change dtype. */
size_t st_convert_choose(const st_file *in, st_dtype to, st_convert_select_fn select,
                         void *select_ctx, st_dtype *dtypes);

/* The output's layout: in's tensors (names, shapes) with dtypes, in's metadata.
 * plan must be freed with st_write_plan_free (also after a failure). The output file
 * is plan->header_len + plan->data_size bytes. */
st_reason st_convert_plan(const st_file *in, const st_dtype *dtypes, st_write_plan *plan,
                          st_error *err);

/* Writes the converted copy of in (a header the gate accepted, so every tensor lies
 * inside the file) through write, reading its tensors through read. The output is
 * exactly what st_convert_plan lays out: the header, then each tensor's bytes,
 * converted where its dtype changes, copied otherwise. Returns ST_CONVERT_OK, or
 * another status with err's sentence set (its reason: the plan's for BAD_INPUT,
 * ST_OUT_OF_MEMORY for NO_MEMORY, ST_OK for a callback's failure, which is no
 * verdict on the file); nothing is left allocated in either case, and what was
 * already written is the caller's to discard. */
st_convert_status st_convert_stream(const st_file *in, st_convert_read_fn read, void *read_ctx,
                                    st_convert_write_fn write, void *write_ctx,
                                    const st_convert_options *options, st_error *err);

#endif
