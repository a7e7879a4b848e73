/* The allocator seam of lib/: every allocation of the library goes through
 * st_malloc, st_calloc and st_realloc, which are malloc, calloc and realloc unless a
 * test installs a refusal hook. Memory is released with free(3) as ever, so callers
 * outside lib/ may free what lib/ allocated.
 *
 * Tests use the hook to fail the 1st, 2nd, ... Nth allocation of a call and check that
 * each run ends in a clean error (ST_OUT_OF_MEMORY, st_gate_out_of_memory), with no
 * leak and no crash. */
#ifndef ST_ALLOC_H
#define ST_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

/* Returns true to make the allocation of size bytes fail (NULL, as if out of memory). */
typedef bool (*st_alloc_refuse_fn)(void *context, size_t size);

/* Installs the hook (NULL removes it). Not synchronised: set it while no lib/ call
 * runs in another thread. */
void st_alloc_set_refuse(st_alloc_refuse_fn refuse, void *context);

void *st_malloc(size_t size);
void *st_calloc(size_t count, size_t size);
void *st_realloc(void *old, size_t size);

#endif
