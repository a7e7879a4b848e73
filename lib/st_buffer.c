/* The bounded byte buffer (see st_buffer.h). */
#include "st_buffer.h"
#include "st_alloc.h"

#include <assert.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIRST_CAP 256

void st_buffer_init(st_buffer *b, size_t limit)
{
    memset(b, 0, sizeof *b);
    /* room for the terminator past the limit */
    b->limit = limit < SIZE_MAX ? limit : SIZE_MAX - 1;
}

bool st_buffer_failed(const st_buffer *b)
{
    return b->too_large || b->no_memory;
}

/* Makes room for extra more bytes and the terminator; false (the buffer failed)
 * when that passes the limit or memory runs out. */
static bool reserve(st_buffer *b, size_t extra)
{
    if (st_buffer_failed(b))
        return false;
    size_t need;
    if (__builtin_add_overflow(b->len, extra, &need) || need > b->limit) {
        b->too_large = true;
        return false;
    }
    need++; /* the terminator; limit < SIZE_MAX, so this does not wrap */
    if (need <= b->cap)
        return true;
    size_t cap = b->cap < FIRST_CAP ? FIRST_CAP : b->cap;
    while (cap < need)
        cap = cap > b->limit / 2 ? b->limit + 1 : cap * 2;
    if (cap > b->limit + 1)
        cap = b->limit + 1; /* a small limit caps the first allocation */
    char *grown = st_realloc(b->data, cap);
    if (grown == NULL) {
        b->no_memory = true;
        return false;
    }
    b->data = grown;
    b->cap = cap;
    b->data[b->len] = '\0'; /* a first allocation holds "" at once */
    assert(b->len < b->cap && need <= b->cap && b->cap <= b->limit + 1);
    return true;
}

bool st_buffer_append(st_buffer *b, const void *bytes, size_t n)
{
    if (!reserve(b, n))
        return false;
    if (n > 0)
        memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

bool st_buffer_append_text(st_buffer *b, const char *text)
{
    return st_buffer_append(b, text, strlen(text));
}

/* vsnprintf into the room after len: the length of the whole text, or -1. */
__attribute__((format(printf, 2, 0))) static int format_into(st_buffer *b, const char *fmt,
                                                             va_list ap)
{
    if (b->data == NULL)
        return vsnprintf(NULL, 0, fmt, ap); /* only the length */
    size_t room = b->cap - b->len;          /* >= 1: the terminator's place */
    int n = vsnprintf(b->data + b->len, room, fmt, ap);
    if (n < 0 || (size_t)n >= room)
        b->data[b->len] = '\0'; /* nothing, or a cut copy, was written: the terminator goes back */
    return n;
}

bool st_buffer_vprintf(st_buffer *b, const char *fmt, va_list ap)
{
    if (st_buffer_failed(b))
        return false;
    va_list again;
    va_copy(again, ap); /* for a second pass once the buffer has grown */
    int n = format_into(b, fmt, ap);
    bool ok = false;
    if (n < 0) {
        b->no_memory = true;
    } else if (b->data != NULL && (size_t)n < b->cap - b->len) {
        b->len += (size_t)n;
        ok = true;
    } else if (reserve(b, (size_t)n)) {
        /* too long for the room there was: grown to the length reported, again */
        if (format_into(b, fmt, again) == n) {
            b->len += (size_t)n;
            ok = true;
        } else {
            b->no_memory = true; /* the same arguments formatted differently */
        }
    }
    va_end(again);
    return ok;
}

bool st_buffer_printf(st_buffer *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bool ok = st_buffer_vprintf(b, fmt, ap);
    va_end(ap);
    return ok;
}

char *st_buffer_take(st_buffer *b, size_t *len)
{
    if (!st_buffer_failed(b) && b->data == NULL)
        (void)reserve(b, 0); /* an empty buffer gives "" */
    /* data is non-NULL and terminated after every append that did not fail */
    char *data = st_buffer_failed(b) ? NULL : b->data;
    size_t n = data != NULL ? b->len : 0;
    if (data == NULL)
        free(b->data);
    size_t limit = b->limit;
    memset(b, 0, sizeof *b);
    b->limit = limit;
    if (len != NULL)
        *len = n;
    return data;
}

void st_buffer_free(st_buffer *b)
{
    size_t limit = b->limit;
    free(b->data);
    memset(b, 0, sizeof *b);
    b->limit = limit;
}
