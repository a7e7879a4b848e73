/* Reason codes of the gate and the error detail every lib/ function fills.
 *
 * A reason code's string name (st_reason_name) is part of the public contract:
 * it appears in problem+json responses, `tensorgate validate --json` and the
 * corpus table. Once published a name never changes meaning; new codes are
 * appended before ST_REASON_COUNT. */
#ifndef ST_ERROR_H
#define ST_ERROR_H

#include <stddef.h>
#include <stdint.h>

#define ST_TENSOR_NAME_MAX 1024
#define ST_NO_OFFSET UINT64_MAX

typedef enum st_reason {
    ST_OK = 0,
    /* framing */
    ST_FILE_TOO_SMALL,   /* fewer than 8 bytes */
    ST_HEADER_TOO_LARGE, /* N above the limit */
    ST_HEADER_TRUNCATED, /* 8+N beyond the end of the file */
    /* header bytes and JSON grammar */
    ST_HEADER_NOT_UTF8,       /* invalid UTF-8 anywhere in the header */
    ST_HEADER_START,          /* first header byte is not '{' */
    ST_HEADER_TRAILING_BYTES, /* something other than spaces after the closing '}' */
    ST_JSON_SYNTAX,           /* not RFC 8259 JSON */
    ST_JSON_ESCAPE,           /* bad string escape (unknown escape, lone surrogate) */
    ST_JSON_DUPLICATE_KEY,    /* a key repeated in one object, at any level */
    ST_JSON_NESTING,          /* nesting deeper than the bound */
    ST_INTEGER_FORMAT,        /* sign, leading zero, fraction or exponent */
    ST_INTEGER_OVERFLOW,      /* integer does not fit in u64 */
    /* tensor entries */
    ST_TENSOR_NOT_OBJECT,    /* entry is not an object (array form, string, ...) */
    ST_TENSOR_UNKNOWN_FIELD, /* a field other than dtype, shape, data_offsets */
    ST_TENSOR_MISSING_FIELD, /* dtype, shape or data_offsets missing */
    ST_DTYPE_INVALID,        /* dtype is not a string */
    ST_DTYPE_UNKNOWN,        /* dtype string is not one of the 22 names */
    ST_SHAPE_INVALID,        /* shape is not an array of integers */
    ST_OFFSETS_INVALID,      /* data_offsets not [begin, end] integers with begin <= end */
    ST_TENSOR_NAME_EMPTY,
    ST_TENSOR_NAME_TOO_LONG, /* more than ST_TENSOR_NAME_MAX bytes */
    ST_TENSOR_NAME_CONTROL,  /* a control character (U+0000-U+001F, U+007F-U+009F) in the name */
    ST_METADATA_NOT_OBJECT,  /* __metadata__ is not an object */
    ST_METADATA_VALUE_NOT_STRING,
    /* sizes */
    ST_SIZE_OVERFLOW,    /* shape product or byte size overflows u64 */
    ST_SUB_BYTE_PARTIAL, /* sub-byte dtype whose bits are not a whole number of bytes */
    ST_SIZE_MISMATCH,    /* end - begin differs from the computed byte size */
    /* data section coverage */
    ST_DATA_HOLE,      /* bytes between tensors (or before the first) covered by none */
    ST_DATA_OVERLAP,   /* two tensors share bytes */
    ST_DATA_TRAILING,  /* bytes after the last tensor */
    ST_DATA_TRUNCATED, /* the file ends before the last tensor does */
    /* policy on values */
    ST_NONFINITE_VALUES, /* NaN or Inf where the policy refuses them */
    /* not safetensors at all: the format is named separately (st_format) */
    ST_REFUSED_FORMAT,
    /* sidecar files */
    ST_SIDECAR_TOO_LARGE,
    ST_SIDECAR_JSON_INVALID,
    ST_SIDECAR_TEXT_INVALID, /* not UTF-8 text, or text that is a pickle */
    /* not a verdict on the content: an allocation failed (a server error, never a
     * refusal; the gate reports it as st_gate_out_of_memory) */
    ST_OUT_OF_MEMORY,
    /* code a loader would execute (st_code.h, docs/DESIGN.md §3) */
    ST_CODE_PYTHON,          /* Python source, by name (.py, .pyw) */
    ST_CODE_COMPILED_PYTHON, /* Python bytecode, by name (.pyc, .pyo) or by its magic */
    ST_CODE_NOTEBOOK,        /* a Jupyter notebook, by name (.ipynb) or by its keys */
    ST_CODE_SCRIPT,          /* a shell or other script, by name or by a #! line */
    ST_CODE_NATIVE,          /* a shared object or executable, by name or by its magic */
    ST_CODE_REFERENCE,       /* configuration pointing a loader at code (auto_map, ...) */
    /* GGUF (st_gguf.h) */
    ST_GGUF_MAGIC,            /* the first four bytes are not GGUF */
    ST_GGUF_VERSION,          /* a version other than 2 or 3 */
    ST_GGUF_COUNT,            /* a tensor or key-value count the header cannot hold */
    ST_GGUF_TRUNCATED,        /* the file ends inside the header */
    ST_GGUF_HEADER_TOO_LARGE, /* the header ends past the header limit */
    ST_GGUF_KEY,              /* a key empty, too long or not printable ASCII */
    ST_GGUF_STRING,           /* a string longer than the bound or than the file */
    ST_GGUF_UTF8,             /* a string or tensor name that is not UTF-8 */
    ST_GGUF_TYPE,             /* an unknown metadata value type */
    ST_GGUF_ARRAY,            /* an array too long, of an unknown type, or nested */
    ST_GGUF_BOOL,             /* a boolean other than 0 or 1 */
    ST_GGUF_DUPLICATE_KEY,    /* a key repeated */
    ST_GGUF_ALIGNMENT,        /* general.alignment not a u32 power of two within the bound */
    ST_GGUF_ARCHITECTURE,     /* general.architecture missing or not a string */
    ST_GGUF_TENSOR_NAME,      /* a tensor name empty or too long */
    ST_GGUF_DUPLICATE_TENSOR, /* a tensor name repeated */
    ST_GGUF_DIMS,             /* fewer than 1 or more than 4 dimensions */
    ST_GGUF_SHAPE,            /* a dimension of 0 or above INT64_MAX */
    ST_GGUF_GGML_TYPE,        /* an unknown or removed ggml type */
    ST_GGUF_BLOCK,            /* a row length not a multiple of the type's block */
    ST_GGUF_SIZE_OVERFLOW,    /* element count or byte size overflows */
    ST_GGUF_OFFSET,           /* a tensor offset not a multiple of the alignment */
    ST_GGUF_OVERLAP,          /* a tensor offset before the previous tensor's padded end */
    ST_GGUF_DATA_HOLE,        /* a tensor offset after the previous tensor's padded end */
    ST_GGUF_DATA_TRUNCATED,   /* the file ends before the last tensor does */
    ST_GGUF_TRAILING,         /* bytes after the padded end of the last tensor */
    ST_GGUF_PADDING,          /* a padding byte that is not zero */
    ST_REASON_COUNT
} st_reason;

typedef struct st_error {
    st_reason reason;
    uint64_t offset;                     /* byte offset in the file, or ST_NO_OFFSET */
    char tensor[ST_TENSOR_NAME_MAX + 1]; /* the tensor concerned, or "" */
    size_t tensor_len;                   /* bytes of tensor: a name may hold U+0000 (a
                                          * refused one), so this, not strlen, is its end */
    char detail[256];                    /* one human sentence */
} st_error;

/* Stable snake_case name of a reason code ("header_too_large"); "unknown" out of range. */
const char *st_reason_name(st_reason reason);

/* What the reason means, one sentence ("the file is shorter than the 8 bytes of the
 * header length"), from the same table as the name; "" for ST_OK and out of range.
 * The SARIF reports (st_sarif.h) give it as a rule's short description. */
const char *st_reason_summary(st_reason reason);

/* What to do about a refusal of the reason's family (framing, header JSON, tensors,
 * data, a refused format, sidecars, code, GGUF): a rule's help text in the SARIF
 * reports; "" for ST_OK and out of range. */
const char *st_reason_help(st_reason reason);

/* Copies len bytes of name (which may hold NUL bytes) into err->tensor, cut to
 * ST_TENSOR_NAME_MAX bytes at a UTF-8 character boundary; sets err->tensor_len. */
void st_error_set_tensor(st_error *err, const char *name, size_t len);

/* Clears err to ST_OK, no offset, no tensor, empty detail. */
void st_error_clear(st_error *err);

/* Fills err and returns reason, so callers can `return st_error_set(...)`.
 * tensor may be NULL; it is truncated to ST_TENSOR_NAME_MAX bytes (never inside a
 * UTF-8 character). */
st_reason st_error_set(st_error *err, st_reason reason, uint64_t offset, const char *tensor,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#endif
