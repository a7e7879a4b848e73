/* libFuzzer target for the safetensors header parser (lib/st_header.c).
 *
 * The input is a whole file. It is parsed with its real size and again as a
 * stream of unknown length; whenever the parser accepts, the invariants it
 * promises are checked and any violation aborts (fine in a harness, never in lib/).
 *
 * Build: clang -fsanitize=fuzzer,address,undefined -Ilib tests/fuzz/fuzz_header.c lib/\*.c -o
 * /tmp/fh */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "st_header.h"

static void check_invariants(const st_file *f, const uint8_t *data, size_t size, uint64_t file_size)
{
    if (f->data_start != 8 + f->header_size || f->data_start > size)
        abort();
    if (file_size != ST_FILE_SIZE_UNKNOWN && f->data_start + f->data_size != file_size)
        abort();
    uint64_t n = 0;
    for (int k = 7; k >= 0; k--)
        n = (n << 8) | data[k];
    if (n != f->header_size)
        abort();
    /* tensors are contiguous from 0, in file order, and cover exactly data_size */
    uint64_t expected = 0;
    for (size_t i = 0; i < f->tensor_count; i++) {
        const st_tensor *t = &f->tensors[i];
        if (t->begin != expected || t->end < t->begin)
            abort();
        expected = t->end;
        uint64_t elements, bytes;
        if (!st_shape_elements(t->shape, t->rank, &elements) || elements != t->elements)
            abort();
        if (st_dtype_bytes(t->dtype, elements, &bytes) != ST_OK || bytes != t->end - t->begin)
            abort();
        if (t->name_len == 0 || t->name_len > ST_TENSOR_NAME_MAX || t->name[t->name_len] != '\0')
            abort();
        if (st_file_find(f, t->name, t->name_len) != t)
            abort();
        if (i > 0) {
            const st_tensor *prev = &f->tensors[i - 1];
            if (prev->begin == t->begin && prev->end == t->end) {
                size_t m = prev->name_len < t->name_len ? prev->name_len : t->name_len;
                int c = memcmp(prev->name, t->name, m);
                if (c > 0 || (c == 0 && prev->name_len >= t->name_len))
                    abort();
            }
        }
    }
    if (expected != f->data_size)
        abort();
    for (size_t i = 0; i < f->metadata_count; i++) {
        if (st_file_metadata(f, f->metadata[i].key) == NULL)
            abort();
    }
    if (f->metadata_count > 0 && !f->has_metadata)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_file f;
    st_error err;
    st_reason known = st_header_parse(data, size, size, NULL, &f, &err);
    if (known != err.reason || (known == ST_OK && f.internal == NULL))
        abort();
    {
        /* the verdict-only parse agrees word for word */
        st_file c;
        st_error cerr;
        if (st_header_check(data, size, size, NULL, &c, &cerr) != known ||
            cerr.offset != err.offset || strcmp(cerr.detail, err.detail) != 0 ||
            cerr.tensor_len != err.tensor_len ||
            memcmp(cerr.tensor, err.tensor, err.tensor_len) != 0 || c.tensors != NULL ||
            (known == ST_OK && (c.tensor_count != f.tensor_count || c.data_size != f.data_size)))
            abort();
        st_file_free(&c);
    }
    if (known == ST_OK)
        check_invariants(&f, data, size, size);
    else if (f.tensors != NULL || f.internal != NULL || f.tensor_count != 0)
        abort();
    st_file_free(&f);

    st_reason streamed = st_header_parse(data, size, ST_FILE_SIZE_UNKNOWN, NULL, &f, &err);
    if (streamed == ST_OK) {
        check_invariants(&f, data, size, ST_FILE_SIZE_UNKNOWN);
        /* with the real size the only extra verdicts are about the file's length */
        if (known != ST_OK && known != ST_DATA_TRAILING && known != ST_DATA_TRUNCATED)
            abort();
    } else if (known == ST_OK) {
        /* knowing the size can only add refusals */
        abort();
    }
    st_file_free(&f);

    /* a small nesting bound and header limit must still be safe */
    st_limits tight = {.max_header_size = 4096, .max_depth = 3};
    if (st_header_parse(data, size, size, &tight, &f, &err) == ST_OK)
        check_invariants(&f, data, size, size);
    st_file_free(&f);
    return 0;
}
