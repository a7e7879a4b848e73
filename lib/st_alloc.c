/* The allocator seam (see st_alloc.h). */
#include "st_alloc.h"

#include <stdlib.h>

static st_alloc_refuse_fn refuse_hook;
static void *refuse_context;

void st_alloc_set_refuse(st_alloc_refuse_fn refuse, void *context)
{
    refuse_hook = refuse;
    refuse_context = context;
}

static bool refused(size_t size)
{
    return refuse_hook != NULL && refuse_hook(refuse_context, size);
}

void *st_malloc(size_t size)
{
    return refused(size) ? NULL : malloc(size);
}

void *st_calloc(size_t count, size_t size)
{
    return refused(count * size) ? NULL : calloc(count, size);
}

void *st_realloc(void *old, size_t size)
{
    return refused(size) ? NULL : realloc(old, size);
}
