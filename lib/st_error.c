#include "st_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const reason_names[ST_REASON_COUNT] = {
    [ST_OK] = "ok",
    [ST_FILE_TOO_SMALL] = "file_too_small",
    [ST_HEADER_TOO_LARGE] = "header_too_large",
    [ST_HEADER_TRUNCATED] = "header_truncated",
    [ST_HEADER_NOT_UTF8] = "header_not_utf8",
    [ST_HEADER_START] = "header_start",
    [ST_HEADER_TRAILING_BYTES] = "header_trailing_bytes",
    [ST_JSON_SYNTAX] = "json_syntax",
    [ST_JSON_ESCAPE] = "json_escape",
    [ST_JSON_DUPLICATE_KEY] = "json_duplicate_key",
    [ST_JSON_NESTING] = "json_nesting",
    [ST_INTEGER_FORMAT] = "integer_format",
    [ST_INTEGER_OVERFLOW] = "integer_overflow",
    [ST_TENSOR_NOT_OBJECT] = "tensor_not_object",
    [ST_TENSOR_UNKNOWN_FIELD] = "tensor_unknown_field",
    [ST_TENSOR_MISSING_FIELD] = "tensor_missing_field",
    [ST_DTYPE_INVALID] = "dtype_invalid",
    [ST_DTYPE_UNKNOWN] = "dtype_unknown",
    [ST_SHAPE_INVALID] = "shape_invalid",
    [ST_OFFSETS_INVALID] = "offsets_invalid",
    [ST_TENSOR_NAME_EMPTY] = "tensor_name_empty",
    [ST_TENSOR_NAME_TOO_LONG] = "tensor_name_too_long",
    [ST_TENSOR_NAME_CONTROL] = "tensor_name_control",
    [ST_METADATA_NOT_OBJECT] = "metadata_not_object",
    [ST_METADATA_VALUE_NOT_STRING] = "metadata_value_not_string",
    [ST_SIZE_OVERFLOW] = "size_overflow",
    [ST_SUB_BYTE_PARTIAL] = "sub_byte_partial",
    [ST_SIZE_MISMATCH] = "size_mismatch",
    [ST_DATA_HOLE] = "data_hole",
    [ST_DATA_OVERLAP] = "data_overlap",
    [ST_DATA_TRAILING] = "data_trailing",
    [ST_DATA_TRUNCATED] = "data_truncated",
    [ST_NONFINITE_VALUES] = "nonfinite_values",
    [ST_REFUSED_FORMAT] = "refused_format",
    [ST_SIDECAR_TOO_LARGE] = "sidecar_too_large",
    [ST_SIDECAR_JSON_INVALID] = "sidecar_json_invalid",
    [ST_SIDECAR_TEXT_INVALID] = "sidecar_text_invalid",
    [ST_OUT_OF_MEMORY] = "out_of_memory",
    [ST_CODE_PYTHON] = "code_python",
    [ST_CODE_COMPILED_PYTHON] = "code_compiled_python",
    [ST_CODE_NOTEBOOK] = "code_notebook",
    [ST_CODE_SCRIPT] = "code_script",
    [ST_CODE_NATIVE] = "code_native",
    [ST_CODE_REFERENCE] = "code_reference",
    [ST_GGUF_MAGIC] = "gguf_magic",
    [ST_GGUF_VERSION] = "gguf_version",
    [ST_GGUF_COUNT] = "gguf_count",
    [ST_GGUF_TRUNCATED] = "gguf_truncated",
    [ST_GGUF_HEADER_TOO_LARGE] = "gguf_header_too_large",
    [ST_GGUF_KEY] = "gguf_key",
    [ST_GGUF_STRING] = "gguf_string",
    [ST_GGUF_UTF8] = "gguf_utf8",
    [ST_GGUF_TYPE] = "gguf_type",
    [ST_GGUF_ARRAY] = "gguf_array",
    [ST_GGUF_BOOL] = "gguf_bool",
    [ST_GGUF_DUPLICATE_KEY] = "gguf_duplicate_key",
    [ST_GGUF_ALIGNMENT] = "gguf_alignment",
    [ST_GGUF_ARCHITECTURE] = "gguf_architecture",
    [ST_GGUF_TENSOR_NAME] = "gguf_tensor_name",
    [ST_GGUF_DUPLICATE_TENSOR] = "gguf_duplicate_tensor",
    [ST_GGUF_DIMS] = "gguf_dims",
    [ST_GGUF_SHAPE] = "gguf_shape",
    [ST_GGUF_GGML_TYPE] = "gguf_ggml_type",
    [ST_GGUF_BLOCK] = "gguf_block",
    [ST_GGUF_SIZE_OVERFLOW] = "gguf_size_overflow",
    [ST_GGUF_OFFSET] = "gguf_offset",
    [ST_GGUF_OVERLAP] = "gguf_overlap",
    [ST_GGUF_DATA_HOLE] = "gguf_data_hole",
    [ST_GGUF_DATA_TRUNCATED] = "gguf_data_truncated",
    [ST_GGUF_TRAILING] = "gguf_trailing",
    [ST_GGUF_PADDING] = "gguf_padding",
};

const char *st_reason_name(st_reason reason)
{
    if ((unsigned)reason >= ST_REASON_COUNT || reason_names[reason] == NULL)
        return "unknown";
    return reason_names[reason];
}

void st_error_clear(st_error *err)
{
    err->reason = ST_OK;
    err->offset = ST_NO_OFFSET;
    err->tensor[0] = '\0';
    err->tensor_len = 0;
    err->detail[0] = '\0';
}

void st_error_set_tensor(st_error *err, const char *name, size_t len)
{
    size_t n = name != NULL ? len : 0;
    if (n > ST_TENSOR_NAME_MAX) {
        /* cut before the character that crosses the bound: back over continuation bytes */
        n = ST_TENSOR_NAME_MAX;
        while (n > 0 && ((unsigned char)name[n] & 0xc0) == 0x80)
            n--;
    }
    if (n > 0)
        memcpy(err->tensor, name, n);
    err->tensor[n] = '\0';
    err->tensor_len = n;
}

st_reason st_error_set(st_error *err, st_reason reason, uint64_t offset, const char *tensor,
                       const char *fmt, ...)
{
    if (err == NULL)
        return reason;
    err->reason = reason;
    err->offset = offset;
    st_error_set_tensor(err, tensor, tensor != NULL ? strnlen(tensor, ST_TENSOR_NAME_MAX + 1) : 0);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->detail, sizeof err->detail, fmt, ap);
    va_end(ap);
    return reason;
}
