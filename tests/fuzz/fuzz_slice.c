/* libFuzzer target for st_slice_parse and the run enumeration.
 *
 * Input: byte 0 picks the dtype, byte 1 the rank (0-6; 0xff asks for 65, above the
 * bound), then one byte per dimension (low 3 bits: size 0-7; with the high bit set a
 * huge size 2^(b & 63) instead), the rest is the slice text.
 * On ST_SLICE_OK it checks: out_bytes == run_count * run_bytes, out_elements is the
 * product of out_shape, every cursor run lies inside the tensor, the cursor order equals
 * st_slice_run_offset, and for tensors small enough to allocate, st_slice_gather copies
 * exactly the runs the cursor names. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "st_slice.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond))                                                                               \
            __builtin_trap();                                                                      \
    } while (0)

/* bounds that keep one execution fast */
#define MAX_CHECKED_RUNS 4096
#define MAX_GATHER_BYTES (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    st_dtype dtype = (st_dtype)(data[0] % ST_DTYPE_COUNT);
    size_t rank = data[1] == 0xff ? ST_SLICE_RANK_MAX + 1 : data[1] % 7;
    uint64_t shape[ST_SLICE_RANK_MAX + 1];
    size_t pos = 2;
    for (size_t d = 0; d < rank; d++) {
        uint8_t b = pos < size ? data[pos++] : 1;
        shape[d] = (b & 0x80) ? (1ULL << (b & 63)) : (uint64_t)(b & 7);
    }
    const char *text = (const char *)data + pos;
    size_t len = size - pos;

    st_slice slice;
    st_slice_error err;
    st_slice_status status = st_slice_parse(text, len, shape, rank, dtype, &slice, &err);
    if (status != ST_SLICE_OK) {
        REQUIRE(err.status == status);
        REQUIRE(err.detail[0] != '\0');
        REQUIRE(strnlen(err.detail, sizeof err.detail) < sizeof err.detail);
        return 0;
    }

    /* the tensor's size: parse succeeded, so it fits in 64 bits */
    uint64_t elements = 1;
    bool empty = false;
    for (size_t d = 0; d < rank; d++)
        empty = empty || shape[d] == 0;
    for (size_t d = 0; d < rank && !empty; d++)
        REQUIRE(!__builtin_mul_overflow(elements, shape[d], &elements));
    if (empty)
        elements = 0;
    unsigned __int128 tensor_bits = (unsigned __int128)elements * st_dtype_bits(dtype);
    uint64_t tensor_bytes = (uint64_t)(tensor_bits / 8);

    REQUIRE((unsigned __int128)slice.run_count * slice.run_bytes == slice.out_bytes);
    unsigned __int128 out_elements = 1;
    for (size_t d = 0; d < slice.out_rank; d++)
        out_elements *= slice.out_shape[d];
    REQUIRE(out_elements == slice.out_elements);
    REQUIRE((unsigned __int128)slice.out_elements * st_dtype_bits(dtype) ==
            (unsigned __int128)slice.out_bytes * 8);
    REQUIRE(slice.out_bytes <= tensor_bytes);
    REQUIRE(slice.out_elements == 0 || slice.run_bytes > 0);

    st_slice_cursor cursor;
    st_slice_cursor_init(&cursor, &slice);
    uint64_t offset, i = 0;
    while (i < MAX_CHECKED_RUNS && st_slice_cursor_next(&cursor, &offset)) {
        REQUIRE(offset == st_slice_run_offset(&slice, i));
        REQUIRE(offset <= tensor_bytes && slice.run_bytes <= tensor_bytes - offset);
        i++;
    }
    REQUIRE(i == (slice.run_count < MAX_CHECKED_RUNS ? slice.run_count : MAX_CHECKED_RUNS));
    if (slice.run_count > 0)
        REQUIRE(st_slice_run_offset(&slice, slice.run_count - 1) + slice.run_bytes <= tensor_bytes);

    if (tensor_bytes <= MAX_GATHER_BYTES && slice.run_count <= MAX_CHECKED_RUNS) {
        uint8_t *tensor = malloc(tensor_bytes + 1);
        uint8_t *out = malloc(slice.out_bytes + 1);
        for (uint64_t k = 0; k < tensor_bytes; k++)
            tensor[k] = (uint8_t)(k * 131 + (k >> 8));
        st_slice_gather(&slice, tensor, out);
        st_slice_cursor_init(&cursor, &slice);
        uint64_t at = 0;
        while (st_slice_cursor_next(&cursor, &offset)) {
            REQUIRE(memcmp(out + at, tensor + offset, slice.run_bytes) == 0);
            at += slice.run_bytes;
        }
        REQUIRE(at == slice.out_bytes);
        free(tensor);
        free(out);
    }
    return 0;
}
