/* GGUF (llama.cpp, Ollama, LM Studio), admitted strictly: a validator of the header
 * (magic, version 2 or 3, counts, metadata, tensor table) and of the data section
 * (offsets, padding, the end of the file), written to the GGUF specification and to
 * the checks of ggml's reference parser, tightened (docs/DESIGN.md, "GGUF").
 *
 * Pure functions over bytes the caller supplies. The header parse is a function of a
 * prefix of the file: it reads in order and answers ST_GGUF_TRUNCATED (with *need set)
 * when the prefix ends before the header does, so a streaming caller may try again with
 * more bytes and gets the verdict a whole-file parse gives. Memory grows with the bytes
 * actually parsed (never from a count read in the file). */
#ifndef ST_GGUF_H
#define ST_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "st_dtype.h"
#include "st_error.h"

#define ST_GGUF_KEY_MAX 65535u      /* the specification's bound on a key */
#define ST_GGUF_TENSOR_NAME_MAX 63u /* ggml's GGML_MAX_NAME - 1 */
/* Bounds of @huggingface/gguf (the Hub's parser), tighter than ggml's 1 GiB: a file the
 * Hub cannot read is not admitted either (docs/DESIGN.md, "GGUF") */
#define ST_GGUF_STRING_MAX 10000000u /* bytes in a string value */
#define ST_GGUF_ARRAY_MAX 1000000u   /* elements in an array */
#define ST_GGUF_KV_COUNT_MAX 100000u /* key-value pairs */
#define ST_GGUF_TENSOR_COUNT_MAX 10000000u
#define ST_GGUF_DIM_MAX (1ULL << 32) /* elements along one dimension */
#define ST_GGUF_ALIGNMENT_DEFAULT 32u
#define ST_GGUF_ALIGNMENT_MAX 65536u /* a power of two up to this */
#define ST_GGUF_DIMS_MAX 4u
#define ST_GGUF_SIZE_UNKNOWN UINT64_MAX /* file_size when the caller does not know it */

typedef struct st_gguf_tensor {
    const uint8_t *name; /* into the caller's buffer, name_len bytes, UTF-8 */
    size_t name_len;
    uint64_t info_offset; /* where its entry in the tensor table starts */
    uint32_t type;        /* ggml type id */
    uint32_t n_dims;
    uint64_t ne[ST_GGUF_DIMS_MAX]; /* 1 beyond n_dims */
    uint64_t elements;
    uint64_t offset; /* relative to the data section */
    uint64_t size;   /* bytes */
} st_gguf_tensor;

/* Metadata value types (the specification's gguf_metadata_value_type). */
typedef enum st_gguf_value_type {
    ST_GGUF_V_U8 = 0,
    ST_GGUF_V_I8,
    ST_GGUF_V_U16,
    ST_GGUF_V_I16,
    ST_GGUF_V_U32,
    ST_GGUF_V_I32,
    ST_GGUF_V_F32,
    ST_GGUF_V_BOOL,
    ST_GGUF_V_STRING,
    ST_GGUF_V_ARRAY,
    ST_GGUF_V_U64,
    ST_GGUF_V_I64,
    ST_GGUF_V_F64,
    ST_GGUF_VALUE_TYPES,
} st_gguf_value_type;

/* One key-value of the metadata, as the validator read it (the parse's result: no
 * second reader). Pointers point into the caller's buffer. */
typedef struct st_gguf_kv {
    const uint8_t *key; /* printable ASCII, key_len bytes, not NUL-terminated */
    size_t key_len;
    uint32_t type;        /* st_gguf_value_type */
    uint32_t array_type;  /* an array's element type (never an array) */
    uint64_t array_count; /* an array's element count */
    uint64_t value_at;    /* file offset of the value (an array's: its first element) */
    const uint8_t *value; /* the same, in the buffer */
} st_gguf_kv;

/* A decoded value (a scalar or a string; never an array). */
typedef struct st_gguf_value {
    uint32_t type;
    uint64_t u;         /* U8..U64, BOOL */
    int64_t i;          /* I8..I64 */
    double f;           /* F32, F64 */
    const uint8_t *str; /* STRING: str_len bytes of UTF-8 */
    uint64_t str_len;
} st_gguf_value;

typedef struct st_gguf_file {
    uint32_t version;
    uint64_t tensor_count;
    uint64_t kv_count;
    uint32_t alignment;
    const uint8_t *architecture; /* general.architecture, into the caller's buffer */
    size_t architecture_len;
    uint64_t header_end;     /* the end of the tensor table */
    uint64_t data_start;     /* header_end rounded up to the alignment */
    uint64_t content_end;    /* the end of the last tensor's bytes (header_end without tensors) */
    uint64_t padded_end;     /* content_end rounded up to the alignment */
    st_gguf_tensor *tensors; /* tensor_count entries, file order */
    st_gguf_kv *kvs;         /* kv_count entries, file order */
} st_gguf_file;

/* The specification's name of a value type ("uint32", "string", "array"); NULL out of range. */
const char *st_gguf_value_type_name(uint32_t type);

/* Decodes one value of type (a scalar or a string, not an array) at p, which must be a
 * value or an array element of a parsed st_gguf_file (st_gguf_kv.value; the bytes are
 * validated, so nothing is checked here). Returns the position after it. */
const uint8_t *st_gguf_value_decode(uint32_t type, const uint8_t *p, st_gguf_value *out);

/* The key-value named key (key_len bytes), or NULL. Linear in kv_count. */
const st_gguf_kv *st_gguf_find_kv(const st_gguf_file *file, const char *key, size_t key_len);

/* The tensor named name (name_len bytes), or NULL. Linear in tensor_count. */
const st_gguf_tensor *st_gguf_find_tensor(const st_gguf_file *file, const char *name,
                                          size_t name_len);

/* The safetensors dtype with a ggml type's exact element layout (F32, F16, BF16, F64, I8,
 * I16, I32, I64: one little-endian value per element), so the slice and conversion code
 * (st_slice.h, st_convert.h) serves it unchanged. False for the quantized (block) types. */
bool st_gguf_plain_dtype(uint32_t ggml_type, st_dtype *out);

/* The tensor's shape in row-major (C, NumPy, PyTorch) order: GGUF's ne[] lists the
 * fastest-varying dimension first, so this is ne[0..n_dims) reversed. shape needs n_dims
 * (at most ST_GGUF_DIMS_MAX) entries. */
void st_gguf_row_major_shape(const st_gguf_tensor *tensor, uint64_t *shape);

/* The ggml type's name ("Q4_K") and its block: elements per block and bytes per block.
 * False for an unknown or removed id. */
bool st_gguf_ggml_type(uint32_t type, const char **name, uint32_t *block_elements,
                       uint32_t *block_bytes);

/* True when the first 8 bytes (len >= 8) start a GGUF attempt: the magic "GGUF" followed
 * by bytes that are not all printable text (a README that begins "GGUF models" is text). */
bool st_gguf_is_attempt(const uint8_t *buf, size_t len);

/* Parses the header held in the first len bytes of a file of file_size bytes
 * (ST_GGUF_SIZE_UNKNOWN when unknown; then len bytes are a prefix). header_limit bounds
 * the header's end. ST_OK fills *out (free with st_gguf_file_free; its pointers point
 * into buf). On ST_GGUF_TRUNCATED, *need is the number of bytes the parse wanted (more
 * than len): a caller holding only a prefix feeds more and parses again. Any other
 * reason is final. ST_OUT_OF_MEMORY is not a verdict. */
st_reason st_gguf_parse_header(const uint8_t *buf, size_t len, uint64_t file_size,
                               uint64_t header_limit, st_gguf_file *out, uint64_t *need,
                               st_error *err);

void st_gguf_file_free(st_gguf_file *file);

/* The data section, streamed after a parsed header: the bytes from file->header_end on,
 * in order, in any chunking. Padding (before the first tensor, between tensors, after
 * the last) must be zero; nothing may follow the padded end. */
typedef struct st_gguf_data {
    uint64_t pos; /* absolute offset of the next byte */
    size_t next;  /* the tensor whose padding or bytes come next */
} st_gguf_data;

void st_gguf_data_init(const st_gguf_file *file, st_gguf_data *state);
st_reason st_gguf_data_feed(const st_gguf_file *file, st_gguf_data *state, const uint8_t *data,
                            size_t len, st_error *err);
/* At the end of the input: the file must reach the last tensor's end. */
st_reason st_gguf_data_finish(const st_gguf_file *file, const st_gguf_data *state, st_error *err);

/* The whole check over a file held in memory. */
st_reason st_gguf_check_buffer(const uint8_t *buf, size_t len, uint64_t header_limit,
                               st_error *err);

#endif
