/* libFuzzer target for the GGUF validator (lib/st_gguf.c) and its admission by the gate.
 *
 * The input is a whole file, copied into an allocation of exactly its size so that
 * AddressSanitizer sees any read past it. Checked, aborting on a violation (fine in a
 * harness, never in lib/):
 *   - st_gguf_check_buffer and the gate (sidecar kind, whole buffer) agree on GGUF
 *     attempts: the same reason, and acceptance only as format gguf;
 *   - the gate fed in chunks (sizes taken from the input) with the size declared gives
 *     the verdict of the whole buffer: reason, offset and detail;
 *   - an accepted file's tensors lie inside it, in order, aligned.
 *
 * Build: make build-fuzz/fuzz_gguf (clang, libFuzzer, every lib/ source). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "st_gate.h"
#include "st_gguf.h"

#define HEADER_LIMIT (64u * 1024u * 1024u)

static void check_accepted(const uint8_t *data, size_t size)
{
    st_gguf_file file;
    st_error err;
    st_error_clear(&err);
    if (st_gguf_parse_header(data, size, size, HEADER_LIMIT, &file, NULL, &err) != ST_OK)
        abort();
    uint64_t end = file.data_start;
    for (uint64_t i = 0; i < file.tensor_count; i++) {
        const st_gguf_tensor *t = &file.tensors[i];
        uint64_t begin = file.data_start + t->offset;
        if (begin < end || begin % file.alignment != 0 || t->size > size - begin)
            abort();
        end = begin + t->size;
        if (t->name_len == 0 || t->name_len > ST_GGUF_TENSOR_NAME_MAX)
            abort();
    }
    if (file.content_end > size || size > file.padded_end)
        abort();
    /* the key-value table the serving routes read: every value (every array element)
     * decodes inside the header, and the walk ends where the next key begins */
    for (uint64_t i = 0; i < file.kv_count; i++) {
        const st_gguf_kv *kv = &file.kvs[i];
        const uint8_t *p = kv->value;
        uint64_t n = kv->type == ST_GGUF_V_ARRAY ? kv->array_count : 1;
        uint32_t type = kv->type == ST_GGUF_V_ARRAY ? kv->array_type : kv->type;
        st_gguf_value v;
        for (uint64_t j = 0; j < n; j++)
            p = st_gguf_value_decode(type, p, &v);
        const uint8_t *next = i + 1 < file.kv_count
                                  ? file.kvs[i + 1].key - 8
                                  : (file.tensor_count > 0 ? data + file.tensors[0].info_offset
                                                           : data + file.header_end);
        if (p != next || st_gguf_value_type_name(kv->type) == NULL)
            abort();
    }
    st_gguf_file_free(&file);
}

static void gate_chunked(const st_gate_config *config, const uint8_t *data, size_t size,
                         const st_verdict *whole)
{
    st_gate *gate = st_gate_new(config, size);
    if (gate == NULL)
        abort();
    size_t pos = 0;
    size_t step = size > 0 ? (size_t)data[size - 1] % 97 + 1 : 1;
    while (pos < size && st_gate_feed(gate, data + pos, size - pos < step ? size - pos : step) ==
                             ST_GATE_CONTINUE) {
        pos += step;
        step = step * 3 % 1021 + 1;
    }
    st_gate_finish(gate);
    st_verdict v;
    st_gate_verdict(gate, &v);
    st_gate_free(gate);
    if (v.valid != whole->valid || v.error.reason != whole->error.reason ||
        v.error.offset != whole->error.offset || strcmp(v.error.detail, whole->error.detail) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *input, size_t size)
{
    uint8_t *data = malloc(size ? size : 1);
    if (data == NULL)
        abort();
    if (size > 0)
        memcpy(data, input, size);

    st_error err;
    st_error_clear(&err);
    st_reason direct = st_gguf_check_buffer(data, size, HEADER_LIMIT, &err);

    st_gate_config config;
    memset(&config, 0, sizeof config);
    config.kind = ST_GATE_SIDECAR;
    config.limits.max_header_size = HEADER_LIMIT;
    st_verdict whole;
    st_gate_check_buffer(&config, data, size, &whole);

    if (st_gguf_is_attempt(data, size)) {
        if (whole.format != ST_FORMAT_GGUF)
            abort();
        if (whole.valid ? direct != ST_OK : whole.error.reason != direct)
            abort();
        if (whole.valid)
            check_accepted(data, size);
        gate_chunked(&config, data, size, &whole);
    } else if (whole.valid && whole.format == ST_FORMAT_GGUF) {
        abort();
    }
    free(data);
    return 0;
}
