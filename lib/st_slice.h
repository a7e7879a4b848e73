/* NumPy basic indexing over a row-major tensor, turned into byte runs.
 *
 * Syntax (one string, dimensions separated by ','): each item is an integer
 * index (negative counts from the end; removes the dimension) or
 * start:stop[:step] with any part empty (step may be negative, never 0).
 * Fewer items than dimensions: the rest are ':'. Whitespace is not allowed.
 * Out-of-range integer indices are errors naming the dimension; slice bounds
 * are clamped the way NumPy clamps them. */
#ifndef ST_SLICE_H
#define ST_SLICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "st_dtype.h"

#define ST_SLICE_RANK_MAX 64
#define ST_SLICE_TEXT_MAX 4096

typedef enum st_slice_status {
    ST_SLICE_OK = 0,
    ST_SLICE_SYNTAX,           /* not the grammar above */
    ST_SLICE_TOO_MANY_INDICES, /* more items than dimensions */
    ST_SLICE_INDEX_RANGE,      /* integer index outside [-dim, dim) */
    ST_SLICE_STEP_ZERO,
    ST_SLICE_RANK,     /* tensor rank above ST_SLICE_RANK_MAX */
    ST_SLICE_SUB_BYTE, /* sub-byte dtype and a selection that does not start/end on whole bytes */
    ST_SLICE_OVERFLOW,
} st_slice_status;

typedef struct st_slice_dim {
    int64_t start;  /* first index taken (valid when count > 0) */
    int64_t step;   /* != 0 */
    uint64_t count; /* elements taken in this dimension */
    bool keep;      /* false for an integer index: the dimension is dropped */
} st_slice_dim;

typedef struct st_slice {
    size_t rank; /* the tensor's rank */
    st_slice_dim dims[ST_SLICE_RANK_MAX];
    size_t out_rank; /* dimensions kept */
    uint64_t out_shape[ST_SLICE_RANK_MAX];
    uint64_t out_elements;
    uint64_t out_bytes;
    /* Byte runs: the selection is run_count runs of run_bytes contiguous bytes each,
     * enumerated by st_slice_run_offset. Consecutive elements are merged into runs
     * over the trailing dimensions that are taken whole with step 1. */
    uint64_t run_bytes;
    uint64_t run_count;
    /* Added (additive): where the runs lie. The fields above lose the tensor's strides,
     * which st_slice_run_offset needs. Dimensions [0, loop_rank) enumerate the runs
     * (odometer, last fastest); the dimensions after them lie inside one run. */
    size_t loop_rank;
    uint64_t first_offset;                      /* byte offset of run 0 */
    int64_t loop_step_bytes[ST_SLICE_RANK_MAX]; /* byte distance between neighbours in loop
                                                   dimension d */
} st_slice;

/* st_slice_error.dim when no single dimension is concerned (too many indices, a
 * scalar). */
#define ST_SLICE_NO_DIM SIZE_MAX

typedef struct st_slice_error {
    st_slice_status status;
    size_t dim;       /* the dimension concerned, or ST_SLICE_NO_DIM */
    char detail[200]; /* "index 7 is out of bounds for dimension 1 with size 4" */
} st_slice_error;

/* Parses text (len bytes) against a tensor shape and dtype. */
st_slice_status st_slice_parse(const char *text, size_t len, const uint64_t *shape, size_t rank,
                               st_dtype dtype, st_slice *out, st_slice_error *err);

/* Byte offset, relative to the tensor's first byte, of run number i (0 <= i < run_count),
 * in output (C) order. */
uint64_t st_slice_run_offset(const st_slice *slice, uint64_t i);

/* Iterator form for streaming: walks the runs in order without recomputing from scratch. */
typedef struct st_slice_cursor {
    const st_slice *slice;
    uint64_t next;                     /* index of the next run */
    uint64_t index[ST_SLICE_RANK_MAX]; /* odometer over the non-run dimensions */
    uint64_t offset;                   /* added: byte offset of run `next` */
} st_slice_cursor;

void st_slice_cursor_init(st_slice_cursor *cursor, const st_slice *slice);
/* Returns false when all runs were given; else stores the run's byte offset. */
bool st_slice_cursor_next(st_slice_cursor *cursor, uint64_t *offset);

/* Copies the selection out of a whole tensor held in memory into out (out_bytes). */
void st_slice_gather(const st_slice *slice, const uint8_t *tensor, uint8_t *out);

/* The inner loop of a gather: count elements of size bytes from src, src + step, ...
 * (step in bytes, negative for a reversed walk; every element inside the caller's
 * buffer) into dst, packed. Vector fast paths for 1-, 2- and 4-byte elements taken
 * every other one (step 2 x size) or in reverse (step -size). */
void st_slice_strided_copy(uint8_t *dst, const uint8_t *src, int64_t step, uint64_t count,
                           size_t size);
/* Tests: true makes st_slice_strided_copy take the portable loop only; returns the
 * previous setting. */
bool st_slice_force_portable(bool on);

#endif
