#include "st_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The families of reasons: what the help text of a refusal says to do. */
typedef enum reason_family {
    FAMILY_NONE, /* ok, out_of_memory: no refusal */
    FAMILY_FRAMING,
    FAMILY_HEADER,
    FAMILY_TENSORS,
    FAMILY_DATA,
    FAMILY_FORMAT,
    FAMILY_SIDECAR,
    FAMILY_CODE,
    FAMILY_GGUF,
} reason_family;

static const char *const family_help[] = {
    [FAMILY_NONE] = "",
    [FAMILY_FRAMING] =
        "A safetensors file starts with an 8-byte little-endian header length N, then N bytes "
        "of JSON header, then the data. This file's framing is broken: it was cut short, "
        "padded, or is not safetensors. Re-export the weights with the safetensors library.",
    [FAMILY_HEADER] =
        "The header of a safetensors file must be strict RFC 8259 JSON in UTF-8 with no "
        "duplicate keys: parsers that disagree on loose JSON read different tensors from the "
        "same bytes. Re-export the file; never hand-edit the header.",
    [FAMILY_TENSORS] =
        "Each header entry must be an object with exactly dtype, shape and data_offsets, a "
        "clean name, and __metadata__ an object of strings. Re-export the weights with the "
        "safetensors library.",
    [FAMILY_DATA] =
        "The tensors must cover the data section exactly, each as long as its dtype and "
        "shape say: no hole, no overlap, nothing after the last tensor (bytes a loader never "
        "reads can hide a payload). Re-export the file, or check it was not truncated in "
        "transit.",
    [FAMILY_FORMAT] =
        "Only safetensors (and, where admitted, GGUF and inert sidecars) is accepted. Pickle "
        "based formats (PyTorch .bin/.pt, NumPy object arrays, joblib) run code when loaded: "
        "convert the weights to safetensors in a sandbox and upload that instead. The "
        "findings of this run list what the pickle would import.",
    [FAMILY_SIDECAR] =
        "A sidecar (config, tokenizer, card) must be strict JSON when named *.json, else "
        "UTF-8 text or an inert format, and within the sidecar size limit.",
    [FAMILY_CODE] =
        "Code that a loader would execute (trust_remote_code, custom pipelines, scripts, "
        "native libraries) is never admitted into the registry. Review it outside the "
        "registry; ship weights and plain configuration only.",
    [FAMILY_GGUF] =
        "A GGUF file must follow the GGUF 2/3 layout strictly: bounded counts and strings, "
        "known types, aligned tensors that cover the data exactly with zero padding. "
        "Re-export the file with a current llama.cpp converter.",
};

/* One row per reason: the stable name, the family and what the reason means. */
typedef struct reason_row {
    const char *name;
    reason_family family;
    const char *summary;
} reason_row;

static const reason_row reasons[ST_REASON_COUNT] = {
    [ST_OK] = {"ok", FAMILY_NONE, ""},
    [ST_FILE_TOO_SMALL] = {"file_too_small", FAMILY_FRAMING,
                           "The file is shorter than the 8 bytes of the header length."},
    [ST_HEADER_TOO_LARGE] = {"header_too_large", FAMILY_FRAMING,
                             "The header length is above the limit."},
    [ST_HEADER_TRUNCATED] = {"header_truncated", FAMILY_FRAMING,
                             "The header length points past the end of the file."},
    [ST_HEADER_NOT_UTF8] = {"header_not_utf8", FAMILY_HEADER,
                            "The header holds bytes that are not UTF-8."},
    [ST_HEADER_START] = {"header_start", FAMILY_HEADER,
                         "The header does not begin with a JSON object."},
    [ST_HEADER_TRAILING_BYTES] = {"header_trailing_bytes", FAMILY_HEADER,
                                  "Something other than spaces follows the header object."},
    [ST_JSON_SYNTAX] = {"json_syntax", FAMILY_HEADER, "The header is not RFC 8259 JSON."},
    [ST_JSON_ESCAPE] = {"json_escape", FAMILY_HEADER,
                        "A string of the header has an unknown escape or a lone surrogate."},
    [ST_JSON_DUPLICATE_KEY] = {"json_duplicate_key", FAMILY_HEADER,
                               "A key is repeated in one object of the header."},
    [ST_JSON_NESTING] = {"json_nesting", FAMILY_HEADER, "The header nests deeper than the bound."},
    [ST_INTEGER_FORMAT] =
        {"integer_format", FAMILY_HEADER,
         "An integer of the header has a sign, a leading zero, a fraction or an exponent."},
    [ST_INTEGER_OVERFLOW] = {"integer_overflow", FAMILY_HEADER,
                             "An integer of the header does not fit in 64 bits."},
    [ST_TENSOR_NOT_OBJECT] = {"tensor_not_object", FAMILY_TENSORS,
                              "A tensor entry is not an object."},
    [ST_TENSOR_UNKNOWN_FIELD] =
        {"tensor_unknown_field", FAMILY_TENSORS,
         "A tensor entry has a field other than dtype, shape and data_offsets."},
    [ST_TENSOR_MISSING_FIELD] = {"tensor_missing_field", FAMILY_TENSORS,
                                 "A tensor entry lacks dtype, shape or data_offsets."},
    [ST_DTYPE_INVALID] = {"dtype_invalid", FAMILY_TENSORS, "A dtype is not a string."},
    [ST_DTYPE_UNKNOWN] = {"dtype_unknown", FAMILY_TENSORS, "A dtype is none of the known names."},
    [ST_SHAPE_INVALID] = {"shape_invalid", FAMILY_TENSORS, "A shape is not an array of integers."},
    [ST_OFFSETS_INVALID] = {"offsets_invalid", FAMILY_TENSORS,
                            "data_offsets is not [begin, end] with begin <= end."},
    [ST_TENSOR_NAME_EMPTY] = {"tensor_name_empty", FAMILY_TENSORS, "A tensor name is empty."},
    [ST_TENSOR_NAME_TOO_LONG] = {"tensor_name_too_long", FAMILY_TENSORS,
                                 "A tensor name is longer than the bound."},
    [ST_TENSOR_NAME_CONTROL] = {"tensor_name_control", FAMILY_TENSORS,
                                "A tensor name holds a control character."},
    [ST_METADATA_NOT_OBJECT] = {"metadata_not_object", FAMILY_TENSORS,
                                "__metadata__ is not an object."},
    [ST_METADATA_VALUE_NOT_STRING] = {"metadata_value_not_string", FAMILY_TENSORS,
                                      "A __metadata__ value is not a string."},
    [ST_SIZE_OVERFLOW] = {"size_overflow", FAMILY_DATA,
                          "A tensor's element count or byte size overflows 64 bits."},
    [ST_SUB_BYTE_PARTIAL] = {"sub_byte_partial", FAMILY_DATA,
                             "A sub-byte tensor does not fill a whole number of bytes."},
    [ST_SIZE_MISMATCH] = {"size_mismatch", FAMILY_DATA,
                          "A tensor's data_offsets span differs from its dtype and shape."},
    [ST_DATA_HOLE] = {"data_hole", FAMILY_DATA, "Bytes of the data section belong to no tensor."},
    [ST_DATA_OVERLAP] = {"data_overlap", FAMILY_DATA, "Two tensors share bytes."},
    [ST_DATA_TRAILING] = {"data_trailing", FAMILY_DATA, "Bytes follow the last tensor."},
    [ST_DATA_TRUNCATED] = {"data_truncated", FAMILY_DATA,
                           "The file ends before the last tensor does."},
    [ST_NONFINITE_VALUES] = {"nonfinite_values", FAMILY_DATA,
                             "A floating tensor holds NaN or Inf, which the policy refuses."},
    [ST_REFUSED_FORMAT] = {"refused_format", FAMILY_FORMAT,
                           "The file is not safetensors: another format (a pickle, an archive, "
                           "...) that the gate does not admit."},
    [ST_SIDECAR_TOO_LARGE] = {"sidecar_too_large", FAMILY_SIDECAR,
                              "A sidecar file is larger than the sidecar limit."},
    [ST_SIDECAR_JSON_INVALID] = {"sidecar_json_invalid", FAMILY_SIDECAR,
                                 "A sidecar that must be JSON is not strict JSON."},
    [ST_SIDECAR_TEXT_INVALID] = {"sidecar_text_invalid", FAMILY_SIDECAR,
                                 "A sidecar is not UTF-8 text (or is text that is a pickle)."},
    [ST_OUT_OF_MEMORY] = {"out_of_memory", FAMILY_NONE,
                          "The gate ran out of memory (a server error, never a refusal)."},
    [ST_CODE_PYTHON] = {"code_python", FAMILY_CODE, "Python source, by its name (.py, .pyw)."},
    [ST_CODE_COMPILED_PYTHON] = {"code_compiled_python", FAMILY_CODE,
                                 "Python bytecode, by its name (.pyc, .pyo) or its magic."},
    [ST_CODE_NOTEBOOK] = {"code_notebook", FAMILY_CODE,
                          "A Jupyter notebook, by its name (.ipynb) or its keys."},
    [ST_CODE_SCRIPT] = {"code_script", FAMILY_CODE,
                        "A shell or other script, by its name or a #! line."},
    [ST_CODE_NATIVE] = {"code_native", FAMILY_CODE,
                        "A shared object or executable, by its name or its magic."},
    [ST_CODE_REFERENCE] =
        {"code_reference", FAMILY_CODE,
         "Configuration that points a loader at code (auto_map, custom_pipelines)."},
    [ST_GGUF_MAGIC] = {"gguf_magic", FAMILY_GGUF, "The first four bytes are not GGUF."},
    [ST_GGUF_VERSION] = {"gguf_version", FAMILY_GGUF, "A GGUF version other than 2 or 3."},
    [ST_GGUF_COUNT] = {"gguf_count", FAMILY_GGUF,
                       "A tensor or key-value count the header cannot hold."},
    [ST_GGUF_TRUNCATED] = {"gguf_truncated", FAMILY_GGUF, "The file ends inside the GGUF header."},
    [ST_GGUF_HEADER_TOO_LARGE] = {"gguf_header_too_large", FAMILY_GGUF,
                                  "The GGUF header ends past the header limit."},
    [ST_GGUF_KEY] = {"gguf_key", FAMILY_GGUF,
                     "A metadata key is empty, too long or not printable ASCII."},
    [ST_GGUF_STRING] = {"gguf_string", FAMILY_GGUF,
                        "A string is longer than the bound or than the file."},
    [ST_GGUF_UTF8] = {"gguf_utf8", FAMILY_GGUF, "A string or tensor name is not UTF-8."},
    [ST_GGUF_TYPE] = {"gguf_type", FAMILY_GGUF, "A metadata value has an unknown type."},
    [ST_GGUF_ARRAY] = {"gguf_array", FAMILY_GGUF,
                       "An array is too long, of an unknown type, or nested."},
    [ST_GGUF_BOOL] = {"gguf_bool", FAMILY_GGUF, "A boolean is neither 0 nor 1."},
    [ST_GGUF_DUPLICATE_KEY] = {"gguf_duplicate_key", FAMILY_GGUF, "A metadata key is repeated."},
    [ST_GGUF_ALIGNMENT] = {"gguf_alignment", FAMILY_GGUF,
                           "general.alignment is not a u32 power of two within the bound."},
    [ST_GGUF_ARCHITECTURE] = {"gguf_architecture", FAMILY_GGUF,
                              "general.architecture is missing or not a string."},
    [ST_GGUF_TENSOR_NAME] = {"gguf_tensor_name", FAMILY_GGUF,
                             "A tensor name is empty or too long."},
    [ST_GGUF_DUPLICATE_TENSOR] = {"gguf_duplicate_tensor", FAMILY_GGUF,
                                  "A tensor name is repeated."},
    [ST_GGUF_DIMS] = {"gguf_dims", FAMILY_GGUF,
                      "A tensor has fewer than 1 or more than 4 dimensions."},
    [ST_GGUF_SHAPE] = {"gguf_shape", FAMILY_GGUF, "A dimension is 0 or above INT64_MAX."},
    [ST_GGUF_GGML_TYPE] = {"gguf_ggml_type", FAMILY_GGUF,
                           "A tensor has an unknown or removed ggml type."},
    [ST_GGUF_BLOCK] = {"gguf_block", FAMILY_GGUF,
                       "A row length is not a multiple of the type's block."},
    [ST_GGUF_SIZE_OVERFLOW] = {"gguf_size_overflow", FAMILY_GGUF,
                               "A tensor's element count or byte size overflows."},
    [ST_GGUF_OFFSET] = {"gguf_offset", FAMILY_GGUF,
                        "A tensor offset is not a multiple of the alignment."},
    [ST_GGUF_OVERLAP] = {"gguf_overlap", FAMILY_GGUF,
                         "A tensor starts before the previous tensor's padded end."},
    [ST_GGUF_DATA_HOLE] = {"gguf_data_hole", FAMILY_GGUF,
                           "A tensor starts after the previous tensor's padded end."},
    [ST_GGUF_DATA_TRUNCATED] = {"gguf_data_truncated", FAMILY_GGUF,
                                "The file ends before the last tensor does."},
    [ST_GGUF_TRAILING] = {"gguf_trailing", FAMILY_GGUF,
                          "Bytes follow the padded end of the last tensor."},
    [ST_GGUF_PADDING] = {"gguf_padding", FAMILY_GGUF, "A padding byte is not zero."},
};

const char *st_reason_name(st_reason reason)
{
    if ((unsigned)reason >= ST_REASON_COUNT || reasons[reason].name == NULL)
        return "unknown";
    return reasons[reason].name;
}

const char *st_reason_summary(st_reason reason)
{
    if (reason == ST_OK || (unsigned)reason >= ST_REASON_COUNT || reasons[reason].summary == NULL)
        return "";
    return reasons[reason].summary;
}

const char *st_reason_help(st_reason reason)
{
    if (reason == ST_OK || (unsigned)reason >= ST_REASON_COUNT)
        return "";
    return family_help[reasons[reason].family];
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
