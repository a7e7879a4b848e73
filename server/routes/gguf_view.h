/* A stored GGUF file as JSON, rendered from the gate's own parse (st_gguf.h, kept by
 * parsed_header_cache.h): the header answer of GET .../files/{path}/header, a tensor's
 * entry (that answer, GET .../tensors) and the Hub's `gguf` summary (hf.c). Pure
 * functions over a parsed header; the output is bounded: a string value shows at most
 * TG_GGUF_STRING_SHOWN bytes, an array its first TG_GGUF_ARRAY_SHOWN elements (strings
 * among them TG_GGUF_ELEMENT_SHOWN bytes each), with its element type and length.
 * docs/MANUAL.md, "GGUF files", describes the shapes. */
#ifndef TG_GGUF_VIEW_H
#define TG_GGUF_VIEW_H

#include <jansson.h>
#include <stdint.h>

#include "st_gguf.h"

#define TG_GGUF_STRING_SHOWN 65536u
#define TG_GGUF_ARRAY_SHOWN 8u
#define TG_GGUF_ELEMENT_SHOWN 256u

/* The sum of the tensors' element counts (the parameter count). */
uint64_t tg_gguf_parameters(const st_gguf_file *file);

/* One tensor: name, dtype (the ggml type's name: "F32", "Q4_K"), shape (row-major:
 * ne[] reversed), offset (absolute), size (bytes), data_offsets [offset, offset + size]. */
json_t *tg_gguf_tensor_json(const st_gguf_file *file, const st_gguf_tensor *tensor);

/* One metadata value: {type, value} (+ element_type, length for an array; length and
 * truncated when a string or an array is cut). */
json_t *tg_gguf_kv_json(const st_gguf_kv *kv);

/* The header answer of a GGUF file (path, sha256 and size from the catalog). */
json_t *tg_gguf_header_json(const char *path, const char *sha256, uint64_t size,
                            const st_gguf_file *file);

/* The Hub's `gguf` field: {total, architecture, context_length} (context_length, the
 * integer "<architecture>.context_length", only when present). */
json_t *tg_gguf_hub_json(const st_gguf_file *file);

#endif
