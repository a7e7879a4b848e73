/* The reason table: every reason code of the service's problem answers and the HTTP
 * status it implies, declared once in reasons.c. tg_respond_problem (request.h) takes
 * the reason and answers with its status; the problem's title is that status's phrase. */
#ifndef TG_REASONS_H
#define TG_REASONS_H

#include <stddef.h>

#include "st_error.h"

typedef struct tg_reason {
    const char *name; /* snake_case, stable once published */
    unsigned status;  /* the HTTP status every answer with this reason has */
} tg_reason;

/* The whole table, in the order of its declaration. */
const tg_reason *tg_reasons(size_t *count);
/* The status of reason, or 0 when the table does not know it. */
unsigned tg_reason_status(const char *reason);
/* The status of a gate refusal (lib/st_error.h): 415 for a file that is not
 * safetensors at all (refused_format), 422 for every other verdict. */
unsigned tg_gate_reason_status(st_reason reason);

#endif
