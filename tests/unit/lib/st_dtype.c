#include "st_dtype.h"

#include "../test.h"

TEST(names_round_trip)
{
    for (unsigned i = 0; i < ST_DTYPE_COUNT; i++) {
        const char *name = st_dtype_name((st_dtype)i);
        st_dtype back;
        CHECK(name != NULL);
        CHECK(st_dtype_from_name(name, strlen(name), &back));
        CHECK_EQ_U64(back, i);
    }
    st_dtype d;
    CHECK(!st_dtype_from_name("f32", 3, &d));
    CHECK(!st_dtype_from_name("F3", 2, &d));
    CHECK(!st_dtype_from_name("F32 ", 4, &d));
    CHECK(!st_dtype_from_name("", 0, &d));
    CHECK(st_dtype_name(ST_DTYPE_COUNT) == NULL);
}

TEST(bits_of_every_dtype)
{
    CHECK_EQ_U64(st_dtype_bits(ST_BOOL), 8);
    CHECK_EQ_U64(st_dtype_bits(ST_F4), 4);
    CHECK_EQ_U64(st_dtype_bits(ST_F6_E2M3), 6);
    CHECK_EQ_U64(st_dtype_bits(ST_F6_E3M2), 6);
    CHECK_EQ_U64(st_dtype_bits(ST_F8_E8M0), 8);
    CHECK_EQ_U64(st_dtype_bits(ST_BF16), 16);
    CHECK_EQ_U64(st_dtype_bits(ST_U32), 32);
    CHECK_EQ_U64(st_dtype_bits(ST_C64), 64);
    CHECK_EQ_U64(st_dtype_bits(ST_U64), 64);
    CHECK(st_dtype_is_float(ST_BF16));
    CHECK(!st_dtype_is_float(ST_I64));
}

TEST(writer_order_is_a_permutation)
{
    unsigned seen = 0;
    for (unsigned i = 0; i < ST_DTYPE_COUNT; i++)
        seen |= 1u << st_dtype_writer_rank((st_dtype)i);
    CHECK_EQ_U64(seen, (1u << ST_DTYPE_COUNT) - 1);
    CHECK(st_dtype_writer_rank(ST_U64) < st_dtype_writer_rank(ST_F32));
    CHECK(st_dtype_writer_rank(ST_F4) < st_dtype_writer_rank(ST_BOOL));
}

TEST(checked_sizes)
{
    uint64_t n, bytes;
    uint64_t shape[] = {2, 3, 4};
    CHECK(st_shape_elements(shape, 3, &n));
    CHECK_EQ_U64(n, 24);
    CHECK(st_shape_elements(shape, 0, &n));
    CHECK_EQ_U64(n, 1);
    uint64_t zero[] = {5, 0, 7};
    CHECK(st_shape_elements(zero, 3, &n));
    CHECK_EQ_U64(n, 0);
    uint64_t huge[] = {UINT64_MAX / 2, 3};
    CHECK(!st_shape_elements(huge, 2, &n));
    CHECK_EQ_U64(st_dtype_bytes(ST_F32, 24, &bytes), ST_OK);
    CHECK_EQ_U64(bytes, 96);
    CHECK_EQ_U64(st_dtype_bytes(ST_F64, UINT64_MAX / 4, &bytes), ST_SIZE_OVERFLOW);
    CHECK_EQ_U64(st_dtype_bytes(ST_F4, 3, &bytes), ST_SUB_BYTE_PARTIAL);
    CHECK_EQ_U64(st_dtype_bytes(ST_F4, 4, &bytes), ST_OK);
    CHECK_EQ_U64(bytes, 2);
    CHECK_EQ_U64(st_dtype_bytes(ST_F6_E2M3, 2, &bytes), ST_SUB_BYTE_PARTIAL);
    CHECK_EQ_U64(st_dtype_bytes(ST_F6_E3M2, 4, &bytes), ST_OK);
    CHECK_EQ_U64(bytes, 3);
    /* elements * bits overflows although elements * bytes would not for 8-bit types */
    CHECK_EQ_U64(st_dtype_bytes(ST_U8, UINT64_MAX / 4, &bytes), ST_SIZE_OVERFLOW);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(names_round_trip);
    RUN(bits_of_every_dtype);
    RUN(writer_order_is_a_permutation);
    RUN(checked_sizes);
    return test_report(argv[0]);
}
