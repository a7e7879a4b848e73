/* Streaming facts about a file's data section, computed in the same single pass
 * that hashes the bytes: NaN/Inf counts per tensor and parameter counts per dtype.
 * Feed the data section (the bytes after 8+N) in order, in chunks of any size;
 * an element cut between two chunks is carried over. */
#ifndef ST_STATS_H
#define ST_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "st_header.h"

typedef struct st_tensor_stats {
    uint64_t nan;
    uint64_t inf;
} st_tensor_stats;

typedef struct st_scanner {
    const st_file *file;
    st_tensor_stats *stats; /* file->tensor_count entries, same order as file->tensors */
    uint64_t position;      /* bytes of the data section seen so far */
    size_t tensor;          /* index (file order) of the tensor at position */
    uint8_t carry[16];      /* partial element across chunk boundaries */
    size_t carry_len;
    uint64_t total_nan, total_inf;
} st_scanner;

/* Allocates stats for file->tensor_count tensors; returns -1 on allocation failure. */
int st_scanner_init(st_scanner *scanner, const st_file *file);
/* Consumes data-section bytes; bytes past data_size are ignored (the caller refuses them). */
void st_scanner_feed(st_scanner *scanner, const uint8_t *data, size_t len);
void st_scanner_free(st_scanner *scanner);

/* Parameters (elements) per dtype, over all tensors of file. counts has ST_DTYPE_COUNT entries. */
void st_file_parameter_counts(const st_file *file, uint64_t counts[ST_DTYPE_COUNT],
                              uint64_t *total);

#endif
