/* server/routes/hf_card.c: README.md front matter -> cardData. The YAML subset
 * (scalars typed, quoted strings, flow and block lists, CRLF, a BOM), what is not
 * a card (no opening "---", no closing one), and what is skipped (nested maps,
 * comments, lines without a key). */
#include "hf_card.h"

#include "test.h"

static json_t *card(const char *text)
{
    return tg_hf_card_data(text, strlen(text));
}

TEST(scalars_and_lists)
{
    json_t *c = card("---\nlicense: mit\nnum: 42\nneg: -7\nflag: true\noff: False\nnothing: null\n"
                     "quoted: \"a: b\"\nsingle: 'x'\ncomment: plain # note\n"
                     "tags:\n- one\n  - two\nflow: [a, 'b, c', 3]\n---\n# body\n");
    CHECK(c != NULL);
    CHECK_STR(json_string_value(json_object_get(c, "license")), "mit");
    CHECK(json_integer_value(json_object_get(c, "num")) == 42);
    CHECK(json_integer_value(json_object_get(c, "neg")) == -7);
    CHECK(json_is_true(json_object_get(c, "flag")));
    CHECK(json_is_false(json_object_get(c, "off")));
    CHECK(json_is_null(json_object_get(c, "nothing")));
    CHECK_STR(json_string_value(json_object_get(c, "quoted")), "a: b");
    CHECK_STR(json_string_value(json_object_get(c, "single")), "x");
    CHECK_STR(json_string_value(json_object_get(c, "comment")), "plain");
    json_t *tags = json_object_get(c, "tags");
    CHECK(json_array_size(tags) == 2);
    CHECK_STR(json_string_value(json_array_get(tags, 1)), "two");
    json_t *flow = json_object_get(c, "flow");
    CHECK(json_array_size(flow) == 3);
    CHECK_STR(json_string_value(json_array_get(flow, 1)), "b, c");
    CHECK(json_integer_value(json_array_get(flow, 2)) == 3);
    json_decref(c);
}

TEST(crlf_bom_nested_skipped)
{
    json_t *c = card("\xEF\xBB\xBF---\r\nlicense: apache-2.0\r\nmodel-index:\r\n  - name: x\r\n"
                     "base:\r\n  nested: 1\r\n# a comment\r\nno key here\r\n...\r\n");
    CHECK(c != NULL);
    CHECK_STR(json_string_value(json_object_get(c, "license")), "apache-2.0");
    /* "- name: x" is an item of the block list (as a plain string) */
    CHECK(json_array_size(json_object_get(c, "model-index")) == 1);
    CHECK(json_array_size(json_object_get(c, "base")) == 0);
    CHECK(json_object_size(c) == 3);
    json_decref(c);
}

TEST(not_a_card)
{
    CHECK(card("") == NULL);
    CHECK(card("# title\n---\nlicense: mit\n---\n") == NULL);
    CHECK(card("---\nlicense: mit\n") == NULL);       /* never closed */
    CHECK(card("---\nbad: \"\xff\"\n---\n") == NULL); /* not UTF-8 */
    json_t *empty = card("---\n---\n");
    CHECK(empty != NULL && json_object_size(empty) == 0);
    json_decref(empty);
    /* a truncated buffer never reads past len */
    const char text[] = "---\nlicense: mit\n---\n";
    for (size_t len = 0; len < sizeof text - 1; len++)
        json_decref(tg_hf_card_data(text, len));
    CHECK(1);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(scalars_and_lists);
    RUN(crlf_bom_nested_skipped);
    RUN(not_a_card);
    return test_report(argv[0]);
}
