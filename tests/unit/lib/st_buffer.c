/* Unit tests for lib/st_buffer.c, the one text and byte builder: appends of bytes
 * (NUL included), text and printf through every growth step, the limit met exactly
 * and passed by one byte (every later append dropped, take NULL), printf output
 * longer than the room left (the second pass after growing), allocation failures
 * from st_alloc.h's seam at the first and at a later growth, and take/free leaving
 * the buffer empty and usable again. */
#include <stdlib.h>

#include "st_alloc.h"
#include "st_buffer.h"
#include "test.h"

TEST(empty)
{
    st_buffer b;
    st_buffer_init(&b, 100);
    CHECK(!st_buffer_failed(&b));
    CHECK(b.data == NULL && b.len == 0);
    size_t len = 99;
    char *text = st_buffer_take(&b, &len);
    CHECK(text != NULL);
    if (text != NULL)
        CHECK_STR(text, "");
    CHECK_EQ_U64(len, 0);
    free(text);
    CHECK_EQ_U64(b.limit, 100);

    /* a limit of 0 holds the empty text */
    st_buffer_init(&b, 0);
    CHECK(st_buffer_append(&b, "", 0));
    CHECK(!st_buffer_append(&b, "x", 1));
    CHECK(st_buffer_take(&b, NULL) == NULL);
}

TEST(appends)
{
    st_buffer b;
    st_buffer_init(&b, 1 << 20);
    CHECK(st_buffer_append(&b, "ab\0c", 4));
    CHECK(st_buffer_append_text(&b, "def"));
    CHECK(st_buffer_printf(&b, "[%d:%s]", 42, "x"));
    CHECK_EQ_U64(b.len, 13);
    CHECK(memcmp(b.data, "ab\0cdef[42:x]", 14) == 0); /* terminated after each append */
    /* grow through many doublings: 10000 lines of printf and bytes */
    size_t expect = b.len;
    for (int i = 0; i < 10000; i++) {
        CHECK(st_buffer_printf(&b, "line %05d\n", i) && st_buffer_append(&b, "..", 2));
        expect += 11 + 2;
    }
    CHECK_EQ_U64(b.len, expect);
    CHECK(b.cap > b.len && b.data[b.len] == '\0');
    size_t len = 0;
    char *text = st_buffer_take(&b, &len);
    CHECK(text != NULL);
    CHECK_EQ_U64(len, expect);
    if (text != NULL) {
        CHECK(memcmp(text + 13, "line 00000\n..line 00001\n..", 26) == 0);
        CHECK(memcmp(text + len - 13, "line 09999\n..", 13) == 0);
        CHECK_EQ_U64(strlen(text + 4), len - 4);
    }
    free(text);
    CHECK(b.data == NULL && b.len == 0 && b.cap == 0);
}

/* printf output longer than the room left: written on the second pass, whole */
TEST(printf_grows)
{
    st_buffer b;
    st_buffer_init(&b, 1 << 20);
    char big[5000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK(st_buffer_printf(&b, "<%s>", "start"));
    size_t cap = b.cap;
    CHECK(cap > 7 && cap < 5000);
    CHECK(st_buffer_printf(&b, "%s|%s|%d", big, "tail", 7));
    CHECK_EQ_U64(b.len, 7 + 4999 + 1 + 4 + 1 + 1);
    CHECK(memcmp(b.data, "<start>qqq", 10) == 0);
    CHECK_STR(b.data + 7 + 4999, "|tail|7");
    /* a printf that fits exactly the room left (terminator included) */
    st_buffer_free(&b);
    CHECK(st_buffer_printf(&b, "%s", "x"));
    size_t room = b.cap - b.len - 1;
    char fill[1024];
    CHECK(room < sizeof fill);
    memset(fill, 'f', room);
    fill[room] = '\0';
    cap = b.cap;
    CHECK(st_buffer_printf(&b, "%s", fill));
    CHECK_EQ_U64(b.cap, cap);
    CHECK_EQ_U64(b.len, 1 + room);
    CHECK(st_buffer_printf(&b, "%c", 'z'));
    CHECK(b.cap > cap);
    CHECK_EQ_U64(b.len, 2 + room);
    CHECK(b.data[b.len - 1] == 'z' && b.data[b.len] == '\0');
    st_buffer_free(&b);
    CHECK(b.data == NULL && b.len == 0);
}

TEST(limit)
{
    st_buffer b;
    st_buffer_init(&b, 10);
    CHECK(st_buffer_append(&b, "12345", 5));
    CHECK(st_buffer_printf(&b, "%s", "6789"));
    CHECK(st_buffer_append(&b, "0", 1)); /* exactly the limit */
    CHECK(!st_buffer_failed(&b));
    CHECK_EQ_U64(b.len, 10);
    CHECK(b.cap <= 11);
    CHECK_STR(b.data, "1234567890");
    size_t len = 0;
    char *text = st_buffer_take(&b, &len);
    CHECK(text != NULL && len == 10);
    free(text);

    /* one byte past: failed, the bytes kept so far are not handed out */
    CHECK(st_buffer_append(&b, "1234567890", 10));
    CHECK(!st_buffer_append(&b, "x", 1));
    CHECK(b.too_large && !b.no_memory && st_buffer_failed(&b));
    CHECK_EQ_U64(b.len, 10);
    /* every later append is dropped, even one that would fit */
    CHECK(!st_buffer_append(&b, "", 0));
    CHECK(!st_buffer_printf(&b, "%s", ""));
    CHECK(!st_buffer_append_text(&b, ""));
    len = 99;
    CHECK(st_buffer_take(&b, &len) == NULL);
    CHECK_EQ_U64(len, 0);
    /* take cleared the failure */
    CHECK(!st_buffer_failed(&b));
    CHECK(st_buffer_append_text(&b, "again"));
    st_buffer_free(&b);

    /* printf past the limit */
    CHECK(st_buffer_printf(&b, "%d", 123456789));
    CHECK(!st_buffer_printf(&b, "%d", 12));
    CHECK(b.too_large);
    CHECK_STR(b.data, "123456789"); /* a cut copy was not left behind */
    st_buffer_free(&b);
    CHECK(!st_buffer_failed(&b));

    /* a size that overflows len + n */
    CHECK(st_buffer_append(&b, "a", 1));
    CHECK(!st_buffer_append(&b, "b", SIZE_MAX));
    CHECK(b.too_large);
    st_buffer_free(&b);

    /* the widest limit still leaves room for the terminator */
    st_buffer_init(&b, SIZE_MAX);
    CHECK(b.limit == SIZE_MAX - 1);
    CHECK(st_buffer_append_text(&b, "wide"));
    text = st_buffer_take(&b, NULL);
    CHECK(text != NULL);
    free(text);
}

static int refuse_after;
static bool refuse(void *context, size_t size)
{
    (void)context;
    (void)size;
    return refuse_after-- <= 0;
}

TEST(out_of_memory)
{
    st_buffer b;
    st_buffer_init(&b, 1 << 20);
    refuse_after = 0; /* the first allocation */
    st_alloc_set_refuse(refuse, NULL);
    CHECK(!st_buffer_append_text(&b, "x"));
    CHECK(b.no_memory && !b.too_large);
    CHECK(!st_buffer_printf(&b, "%d", 1));
    CHECK(st_buffer_take(&b, NULL) == NULL);
    /* an empty buffer whose take cannot allocate "" */
    refuse_after = 0;
    CHECK(st_buffer_take(&b, NULL) == NULL);

    /* a later growth fails: the bytes so far are freed by take */
    refuse_after = 1;
    CHECK(st_buffer_append_text(&b, "first"));
    char big[1000];
    memset(big, 'b', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK(!st_buffer_printf(&b, "%s", big));
    CHECK(b.no_memory);
    CHECK_STR(b.data, "first");
    CHECK(st_buffer_take(&b, NULL) == NULL);
    st_alloc_set_refuse(NULL, NULL);

    CHECK(st_buffer_printf(&b, "%s", big));
    char *text = st_buffer_take(&b, NULL);
    CHECK(text != NULL && strlen(text) == sizeof big - 1);
    free(text);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(empty);
    RUN(appends);
    RUN(printf_grows);
    RUN(limit);
    RUN(out_of_memory);
    return test_report(argv[0]);
}
