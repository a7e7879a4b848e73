/* Streaming NaN/Inf counts over a data section, and parameter counts per dtype.
 *
 * The scanner walks file->tensors in file order (sorted by begin) alongside the
 * bytes it is fed. Invariant between calls: scanner->position bytes have been
 * seen; every tensor before scanner->tensor ends at or before position; carry
 * holds the first carry_len bytes of an element of scanner->tensor that the
 * previous chunk cut, and carry_len < that element's width. */
#include "st_stats.h"
#include "st_alloc.h"

#include <stdlib.h>
#include <string.h>

#include "st_convert.h"

int st_scanner_init(st_scanner *scanner, const st_file *file)
{
    memset(scanner, 0, sizeof *scanner);
    scanner->file = file;
    if (file->tensor_count > 0) {
        /* calloc checks tensor_count * size for overflow */
        scanner->stats = st_calloc(file->tensor_count, sizeof *scanner->stats);
        if (scanner->stats == NULL)
            return -1;
    }
    return 0;
}

void st_scanner_free(st_scanner *scanner)
{
    free(scanner->stats);
    scanner->stats = NULL;
}

/* The unit NaN/Inf are counted in, in bytes, and the dtype that reads one unit;
 * 0 for dtypes with no NaN or Inf (integers, BOOL, F4, F6_*). C64 is read as its
 * two F32 parts, so an element split anywhere still lands in 4-byte units. */
static size_t count_unit(st_dtype dtype, st_dtype *unit_dtype)
{
    switch (dtype) {
    case ST_F64:
    case ST_F32:
    case ST_F16:
    case ST_BF16:
    case ST_F8_E4M3:
    case ST_F8_E5M2:
    case ST_F8_E4M3FNUZ:
    case ST_F8_E5M2FNUZ:
    case ST_F8_E8M0:
        *unit_dtype = dtype;
        return st_dtype_bits(dtype) / 8;
    case ST_C64:
        *unit_dtype = ST_F32;
        return 4;
    default:
        return 0;
    }
}

static void count_units(st_scanner *scanner, st_dtype unit_dtype, const uint8_t *data,
                        uint64_t units)
{
    uint64_t nan = 0, inf = 0;
    st_count_nonfinite(unit_dtype, data, units, &nan, &inf);
    st_tensor_stats *stats = &scanner->stats[scanner->tensor];
    stats->nan += nan;
    stats->inf += inf;
    scanner->total_nan += nan;
    scanner->total_inf += inf;
}

/* Counts len bytes that all belong to scanner->tensor (starting at position). */
static void scan_tensor_bytes(st_scanner *scanner, const uint8_t *data, size_t len)
{
    st_dtype unit_dtype = ST_F32;
    size_t unit = count_unit(scanner->file->tensors[scanner->tensor].dtype, &unit_dtype);
    if (unit == 0)
        return;
    if (scanner->carry_len > 0) {
        size_t take = unit - scanner->carry_len;
        if (take > len)
            take = len;
        memcpy(scanner->carry + scanner->carry_len, data, take);
        scanner->carry_len += take;
        data += take;
        len -= take;
        if (scanner->carry_len < unit)
            return;
        count_units(scanner, unit_dtype, scanner->carry, 1);
        scanner->carry_len = 0;
    }
    size_t whole = len / unit;
    if (whole > 0)
        count_units(scanner, unit_dtype, data, whole);
    size_t rest = len - whole * unit;
    memcpy(scanner->carry, data + whole * unit, rest);
    scanner->carry_len = rest;
}

void st_scanner_feed(st_scanner *scanner, const uint8_t *data, size_t len)
{
    const st_file *file = scanner->file;
    while (len > 0 && scanner->tensor < file->tensor_count) {
        const st_tensor *tensor = &file->tensors[scanner->tensor];
        if (scanner->position >= tensor->end) {
            /* finished, or zero-size: an element cut at its end cannot continue elsewhere */
            scanner->tensor++;
            scanner->carry_len = 0;
            continue;
        }
        uint64_t step;
        if (scanner->position < tensor->begin) {
            /* bytes no tensor covers (a validated file has none): skip them */
            step = tensor->begin - scanner->position;
            if (step > len)
                step = len;
        } else {
            step = tensor->end - scanner->position;
            if (step > len)
                step = len;
            scan_tensor_bytes(scanner, data, (size_t)step);
        }
        data += step;
        len -= (size_t)step;
        scanner->position += step;
    }
    /* bytes past the last tensor are not counted; position still says how many came */
    if (__builtin_add_overflow(scanner->position, (uint64_t)len, &scanner->position))
        scanner->position = UINT64_MAX;
}

void st_file_parameter_counts(const st_file *file, uint64_t counts[ST_DTYPE_COUNT], uint64_t *total)
{
    memset(counts, 0, sizeof(uint64_t) * ST_DTYPE_COUNT);
    uint64_t sum = 0;
    for (size_t i = 0; i < file->tensor_count; i++) {
        const st_tensor *tensor = &file->tensors[i];
        if ((unsigned)tensor->dtype >= ST_DTYPE_COUNT)
            continue;
        /* a validated file's elements fit its byte size, but saturate rather than wrap */
        if (__builtin_add_overflow(counts[tensor->dtype], tensor->elements, &counts[tensor->dtype]))
            counts[tensor->dtype] = UINT64_MAX;
        if (__builtin_add_overflow(sum, tensor->elements, &sum))
            sum = UINT64_MAX;
    }
    *total = sum;
}
