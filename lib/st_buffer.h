/* The one text and byte builder of the project: a growing buffer with a byte limit.
 * Appends (bytes, text, printf) after a failure are dropped, so a builder checks
 * once at the end: st_buffer_take hands over the bytes, or NULL when an append went
 * past the limit or out of memory. The bytes are NUL-terminated (the terminator is
 * not counted against the limit), so the result serves as a C string too. The
 * safetensors writer builds headers with it (st_write.c); the server's /metrics text
 * is built with it (http.c, preload.c). Memory comes from st_alloc.h's seam. */
#ifndef ST_BUFFER_H
#define ST_BUFFER_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct st_buffer {
    char *data; /* NUL-terminated; NULL until the first byte */
    size_t len;
    size_t cap;
    size_t limit;   /* len never passes it */
    bool too_large; /* an append would have passed the limit */
    bool no_memory; /* an allocation failed */
} st_buffer;

/* An empty buffer that holds at most limit bytes; nothing is allocated yet. */
void st_buffer_init(st_buffer *b, size_t limit);

/* Appends n bytes (NUL included); false when the buffer has failed, now or before. */
bool st_buffer_append(st_buffer *b, const void *bytes, size_t n);
/* Appends a C string without its NUL. */
bool st_buffer_append_text(st_buffer *b, const char *text);
/* Appends what snprintf would write. An encoding error counts as out of memory. */
bool st_buffer_printf(st_buffer *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool st_buffer_vprintf(st_buffer *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* True once an append went past the limit or out of memory. */
bool st_buffer_failed(const st_buffer *b);

/* Hands over the bytes (NUL-terminated; an empty buffer gives ""), their count in
 * *len (may be NULL); the caller frees them. NULL when the buffer has failed or the
 * last allocation does: the bytes are freed then. The buffer is empty afterwards
 * (its limit kept, its failure cleared). */
char *st_buffer_take(st_buffer *b, size_t *len);

/* Frees the bytes and empties the buffer (its limit kept). */
void st_buffer_free(st_buffer *b);

#endif
