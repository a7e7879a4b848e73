/* The tensor streaming engine behind GET .../tensors/{name}: independent of HTTP.
 *
 * Given a validated safetensors file (an open fd and its parsed st_file), one of
 * its tensors, and the request's options (?slice= NumPy basic indexing, ?dtype=
 * conversion, ?format=raw|npy), it plans the response (output dtype and shape,
 * exact body length, whether the body is one contiguous range of the file) and
 * otherwise generates the body at any output position: pread of the source in
 * bounded chunks, the slice's byte runs walked in order, conversion on the fly.
 * Memory per stream is bounded (three TG_TENSOR_CHUNK buffers at most),
 * independent of the tensor's size.
 *
 * Error statuses (decided here, documented in openapi.yaml):
 *   400 invalid_slice / slice_out_of_range  the slice text is wrong for this tensor;
 *                                           the detail names the dimension and bound
 *   400 invalid_dtype                       ?dtype= is not one of the 22 dtype names
 *   400 invalid_format                      ?format= is not raw or npy
 *   422 unsupported_conversion              a valid dtype this tensor cannot be
 *                                           converted to (only F64/F32/F16/BF16/
 *                                           F8_E4M3/F8_E5M2 convert, among themselves;
 *                                           the request is well-formed, the tensor
 *                                           cannot satisfy it)
 *   406 npy_unsupported_dtype               format=npy for a dtype NumPy lacks; the
 *                                           detail gives the fix ("add ?dtype=F32")
 */
#ifndef TG_TENSOR_STREAM_H
#define TG_TENSOR_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "st_header.h"
#include "st_slice.h"

/* Size of each internal buffer (source window, conversion output). */
#define TG_TENSOR_CHUNK (1u << 20)
/* Longest JSON text of a shape: "[" + 64 * (20 digits + ",") + "]" + NUL. */
#define TG_TENSOR_SHAPE_TEXT_MAX (ST_SLICE_RANK_MAX * 21 + 3)

typedef enum tg_tensor_format {
    TG_TENSOR_RAW, /* the bytes, little-endian, C order */
    TG_TENSOR_NPY, /* a .npy file: header then the same bytes */
} tg_tensor_format;

/* What the client asked for; every field may be NULL (no slice, same dtype, raw). */
typedef struct tg_tensor_options {
    const char *slice;
    const char *dtype;
    const char *format;
} tg_tensor_options;

typedef struct tg_tensor_error {
    unsigned status;    /* HTTP status to answer */
    const char *reason; /* stable snake_case code (static string) */
    size_t dim;         /* slice errors: the dimension concerned; else SIZE_MAX */
    char detail[320];   /* one human sentence */
} tg_tensor_error;

typedef struct tg_tensor_plan {
    st_dtype source_dtype;
    st_dtype out_dtype;
    bool converts; /* out_dtype differs from source_dtype */
    tg_tensor_format format;
    size_t out_rank;
    uint64_t out_shape[ST_SLICE_RANK_MAX];
    uint64_t out_elements;
    uint64_t header_length; /* .npy header bytes at the start of the body; 0 for raw */
    uint64_t length;        /* the whole body, header included */
    /* The tensor's bytes in the file: [source_begin, source_end), absolute offsets. */
    uint64_t source_begin, source_end;
    /* When true the body is exactly the file's bytes [contiguous_offset,
     * contiguous_offset + length): serve them with sendfile. */
    bool contiguous;
    uint64_t contiguous_offset;
} tg_tensor_plan;

typedef struct tg_tensor_stream tg_tensor_stream;

/* Reads exactly len bytes of the file at offset: 0, or -1 with errno (EIO when the
 * file ends first). */
typedef int (*tg_tensor_read_fn)(void *ctx, void *buf, size_t len, uint64_t offset);

/* Plans the response for tensor (which must belong to file, parsed from the file
 * read_ctx reads). The stream reads the file's bytes through read(read_ctx, ...)
 * (the routes pass a blob reader of the blob store: tg_blob_read_at) and borrows
 * read_ctx until tg_tensor_stream_free. read may be NULL when only the plan is
 * wanted (HEAD). Returns 0, or -1 with err filled (no stream is returned). */
int tg_tensor_stream_open(tg_tensor_read_fn read, void *read_ctx, const st_file *file,
                          const st_tensor *tensor, const tg_tensor_options *options,
                          tg_tensor_stream **out, tg_tensor_error *err);

const tg_tensor_plan *tg_tensor_stream_plan(const tg_tensor_stream *stream);

/* Reads the tensor's bytes through a read-only shared mapping of fd (the file read
 * reads) instead of read(): one window over the whole tensor, so a strided gather or a
 * conversion reads the page cache in place, with no copy into a window. Loads run in a
 * SIGBUS guard: a file found shorter than the tensor fails the read with EIO. Worth it
 * past one window (TG_TENSOR_CHUNK); the mapping lasts until tg_tensor_stream_free.
 * 0, or -1 with errno (EINVAL for an empty tensor or when the guard cannot be
 * installed, or mmap's), and the stream keeps reading through read. */
int tg_tensor_stream_map(tg_tensor_stream *stream, int fd);

/* Whether tg_tensor_stream_map should pay for this stream (measured, docs/PERFORMANCE.md
 * goal 3): the tensor spans more than one window and the body is converted or made of
 * runs of TG_TENSOR_MAP_RUN_MIN bytes or more. A gather of small runs (::2 of 4-byte
 * elements) reads faster from a window pread into cache-resident memory than strided
 * from the page cache through a fresh mapping, whose first touch of each page costs
 * page-table work; runs of a page or more are one memcpy each either way, and the
 * mapping saves pread's copy. */
#define TG_TENSOR_MAP_RUN_MIN 4096u
bool tg_tensor_stream_map_pays(const tg_tensor_stream *stream);

/* Writes up to max output bytes starting at output position pos (0 <= pos <= length)
 * into buf. Any position may be asked, in any order; increasing positions read the
 * source sequentially. Returns the number of bytes written (> 0 while pos < length),
 * 0 at pos == length, or -1 with errno set on a read error (EIO when the file is
 * shorter than its header says). Buffers are allocated on the first call. */
ssize_t tg_tensor_stream_read(tg_tensor_stream *stream, uint64_t pos, uint8_t *buf, size_t max);

void tg_tensor_stream_free(tg_tensor_stream *stream);

/* Shape as a compact JSON array ("[2,3]", "[]"); out needs TG_TENSOR_SHAPE_TEXT_MAX bytes
 * for any rank up to ST_SLICE_RANK_MAX. Returns the text length, or 0 if cap is too small. */
size_t tg_tensor_shape_text(const uint64_t *shape, size_t rank, char *out, size_t cap);

#endif
