/* server/routes/hf_card.c: README.md front matter -> cardData, parsed by libyaml.
 * Card shapes as real Hub repositories write them (block and flow lists, nested
 * model-index results, widget lists of maps, literal and folded strings, quoted keys,
 * comments, CRLF, a BOM), typing by the YAML 1.2 core schema, what is not a card, the
 * bounds (depth, node count, aliases), and the Hub tags derived from a card. */
#include "hf_card.h"

#include <stdlib.h>

#include "test.h"

static json_t *card(const char *text)
{
    return tg_hf_card_data(text, strlen(text));
}

/* The value at a path of object keys and array indexes separated by '/'. */
static const json_t *at(const json_t *v, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    char *save = NULL;
    for (char *part = strtok_r(buf, "/", &save); part && v; part = strtok_r(NULL, "/", &save))
        v = json_is_array(v) ? json_array_get(v, strtoul(part, NULL, 10))
                             : json_object_get(v, part);
    return v;
}

static const char *str_at(const json_t *v, const char *path)
{
    return json_string_value(at(v, path));
}

TEST(scalars_and_lists)
{
    json_t *c = card("---\nlicense: mit\nnum: 42\nneg: -7\nratio: 0.25\nflag: true\noff: False\n"
                     "nothing: null\ntilde: ~\nempty:\nquoted: \"a: b\"\nsingle: 'x'\n"
                     "qnum: \"42\"\nyes_word: yes\ncomment: plain # note\n"
                     "tags:\n- one\n- two\nflow: [a, 'b, c', 3]\n---\n# body\n");
    CHECK(c != NULL);
    CHECK_STR(str_at(c, "license"), "mit");
    CHECK(json_integer_value(json_object_get(c, "num")) == 42);
    CHECK(json_integer_value(json_object_get(c, "neg")) == -7);
    CHECK(json_real_value(json_object_get(c, "ratio")) == 0.25);
    CHECK(json_is_true(json_object_get(c, "flag")));
    CHECK(json_is_false(json_object_get(c, "off")));
    CHECK(json_is_null(json_object_get(c, "nothing")));
    CHECK(json_is_null(json_object_get(c, "tilde")));
    CHECK(json_is_null(json_object_get(c, "empty")));
    CHECK_STR(str_at(c, "quoted"), "a: b");
    CHECK_STR(str_at(c, "single"), "x");
    CHECK_STR(str_at(c, "qnum"), "42"); /* quoted: a string */
    CHECK_STR(str_at(c, "yes_word"), "yes");
    CHECK_STR(str_at(c, "comment"), "plain");
    CHECK(json_array_size(json_object_get(c, "tags")) == 2);
    CHECK_STR(str_at(c, "tags/1"), "two");
    CHECK(json_array_size(json_object_get(c, "flow")) == 3);
    CHECK_STR(str_at(c, "flow/1"), "b, c");
    CHECK(json_integer_value(json_array_get(json_object_get(c, "flow"), 2)) == 3);
    json_decref(c);
}

/* The shape of a fine-tuned speech model's card: model-index with nested results. */
static const char model_index_card[] = "---\n"
                                       "language:\n- en\n- de\n"
                                       "license: apache-2.0\n"
                                       "tags:\n- generated_from_trainer\n- audio\n"
                                       "datasets:\n- mozilla-foundation/common_voice_11_0\n"
                                       "metrics:\n- wer\n"
                                       "base_model: openai/whisper-small\n"
                                       "model-index:\n"
                                       "- name: whisper-small-de\n"
                                       "  results:\n"
                                       "  - task:\n"
                                       "      name: Automatic Speech Recognition\n"
                                       "      type: automatic-speech-recognition\n"
                                       "    dataset:\n"
                                       "      name: Common Voice 11.0\n"
                                       "      type: mozilla-foundation/common_voice_11_0\n"
                                       "      config: de\n"
                                       "      split: test\n"
                                       "      args: 'config: de, split: test'\n"
                                       "    metrics:\n"
                                       "    - name: Wer\n"
                                       "      type: wer\n"
                                       "      value: 11.91\n"
                                       "---\n\n# whisper-small-de\n";

TEST(model_index)
{
    json_t *c = card(model_index_card);
    CHECK(c != NULL);
    CHECK_STR(str_at(c, "model-index/0/name"), "whisper-small-de");
    CHECK_STR(str_at(c, "model-index/0/results/0/task/type"), "automatic-speech-recognition");
    CHECK_STR(str_at(c, "model-index/0/results/0/dataset/args"), "config: de, split: test");
    CHECK(json_real_value(at(c, "model-index/0/results/0/metrics/0/value")) == 11.91);
    json_t *tags = json_array();
    json_array_append_new(tags, json_string("safetensors"));
    tg_hf_card_tags(c, tags);
    /* safetensors, the card's two tags, two languages, license, base_model, dataset */
    CHECK(json_array_size(tags) == 8);
    CHECK_STR(json_string_value(json_array_get(tags, 1)), "generated_from_trainer");
    CHECK_STR(json_string_value(json_array_get(tags, 3)), "en");
    CHECK_STR(json_string_value(json_array_get(tags, 5)), "license:apache-2.0");
    CHECK_STR(json_string_value(json_array_get(tags, 6)), "base_model:openai/whisper-small");
    CHECK_STR(json_string_value(json_array_get(tags, 7)),
              "dataset:mozilla-foundation/common_voice_11_0");
    json_decref(tags);
    json_decref(c);
}

/* A gated LLM's card: literal and folded multi-line strings, a widget list of maps,
 * a quoted key, extra_gated_fields with a nested map, a flow map. */
static const char gated_card[] = "\xEF\xBB\xBF---\r\n"
                                 "language: [en, fr]\r\n"
                                 "pipeline_tag: text-generation\r\n"
                                 "inference: false\r\n"
                                 "extra_gated_prompt: |\r\n"
                                 "  ### LICENSE AGREEMENT\r\n"
                                 "  By clicking below you accept the terms.\r\n"
                                 "extra_gated_fields:\r\n"
                                 "  First Name: text\r\n"
                                 "  Country: country\r\n"
                                 "  \"I accept the terms\": checkbox\r\n"
                                 "description: >\r\n"
                                 "  A folded\r\n"
                                 "  description.\r\n"
                                 "widget:\r\n"
                                 "  - text: \"My name is Julien and I like to\"\r\n"
                                 "    example_title: Julien\r\n"
                                 "  - messages:\r\n"
                                 "      - role: user\r\n"
                                 "        content: Hi   # a comment\r\n"
                                 "parameters: {temperature: 0.7, max_new_tokens: 256}\r\n"
                                 "...\r\n"
                                 "body\r\n";

TEST(gated_llm_card)
{
    json_t *c = card(gated_card);
    CHECK(c != NULL);
    CHECK_STR(str_at(c, "extra_gated_prompt"),
              "### LICENSE AGREEMENT\nBy clicking below you accept the terms.\n");
    CHECK_STR(str_at(c, "description"), "A folded description.\n");
    CHECK_STR(str_at(c, "extra_gated_fields/I accept the terms"), "checkbox");
    CHECK_STR(str_at(c, "widget/0/example_title"), "Julien");
    CHECK_STR(str_at(c, "widget/1/messages/0/content"), "Hi");
    CHECK(json_is_false(json_object_get(c, "inference")));
    CHECK(json_integer_value(at(c, "parameters/max_new_tokens")) == 256);
    CHECK_STR(str_at(c, "language/1"), "fr");
    json_decref(c);
}

TEST(not_a_card)
{
    CHECK(card("") == NULL);
    CHECK(card("# title\n---\nlicense: mit\n---\n") == NULL);
    CHECK(card("---\nlicense: mit\n") == NULL);       /* never closed */
    CHECK(card("---\nbad: \"\xff\"\n---\n") == NULL); /* not UTF-8 */
    CHECK(card("---\n- a list\n- at the top\n---\n") == NULL);
    CHECK(card("---\njust a scalar\n---\n") == NULL);
    CHECK(card("---\nkey: [unclosed\n---\n") == NULL); /* YAML that does not parse */
    CHECK(card("---\n? [a, b]\n: complex key\n---\n") == NULL);
    json_t *empty = card("---\n---\n");
    CHECK(empty != NULL && json_object_size(empty) == 0);
    json_decref(empty);
    /* a truncated buffer never reads past len */
    const char text[] = "---\nlicense: mit\ntags: [a, b]\n---\n";
    for (size_t len = 0; len < sizeof text - 1; len++)
        json_decref(tg_hf_card_data(text, len));
    for (size_t len = 0; len < sizeof model_index_card - 1; len += 7)
        json_decref(tg_hf_card_data(model_index_card, len));
    CHECK(1);
}

TEST(bounds)
{
    /* anchors and aliases: how "billion laughs" documents grow */
    CHECK(card("---\na: &x [1, 2]\nb: *x\n---\n") == NULL);
    /* nesting past the depth bound, as flow lists and as block maps */
    char deep[512] = "---\nk: ";
    size_t n = strlen(deep);
    for (int i = 0; i < TG_HF_CARD_MAX_DEPTH + 1; i++)
        deep[n++] = '[';
    for (int i = 0; i < TG_HF_CARD_MAX_DEPTH + 1; i++)
        deep[n++] = ']';
    memcpy(deep + n, "\n---\n", 6);
    CHECK(card(deep) == NULL);
    /* just inside the bound it parses */
    char ok[512] = "---\nk: ";
    n = strlen(ok);
    for (int i = 0; i < TG_HF_CARD_MAX_DEPTH - 2; i++)
        ok[n++] = '[';
    for (int i = 0; i < TG_HF_CARD_MAX_DEPTH - 2; i++)
        ok[n++] = ']';
    memcpy(ok + n, "\n---\n", 6);
    json_t *c = card(ok);
    CHECK(c != NULL);
    json_decref(c);
    /* more values than the node bound */
    size_t cap = (size_t)TG_HF_CARD_MAX_NODES * 3 + 64;
    char *many = malloc(cap);
    CHECK(many != NULL);
    if (many != NULL) {
        size_t used = (size_t)snprintf(many, cap, "---\nk: [");
        for (int i = 0; i < TG_HF_CARD_MAX_NODES; i++)
            used += (size_t)snprintf(many + used, cap - used, "1,");
        snprintf(many + used, cap - used, "1]\n---\n");
        CHECK(card(many) == NULL);
        free(many);
    }
    /* duplicate keys: the later one wins */
    c = card("---\nlicense: mit\nlicense: apache-2.0\n---\n");
    CHECK_STR(str_at(c, "license"), "apache-2.0");
    json_decref(c);
    tg_hf_card_tags(NULL, NULL); /* no card: nothing, no crash */
}

/* the body as HTML: front matter left out, raw HTML and unsafe links dropped */
TEST(html)
{
    const char *text =
        "---\nlicense: mit\n---\n# Head\n\n<b>raw</b> <img src=x onerror=a()>\n\n"
        "[j](javascript:x) [v](vbscript:x) [f](file:///etc/passwd) [ok](https://a.b/c)\n"
        "![i](data:image/png;base64,AA==) [d](data:text/html,x)\n\n\xff bad\n";
    char *html = tg_hf_card_html(text, strlen(text));
    CHECK(html != NULL);
    if (html != NULL) {
        CHECK(strstr(html, "<h1>Head</h1>") != NULL);
        CHECK(strstr(html, "license") == NULL);
        CHECK(strstr(html, "<b>") == NULL && strstr(html, "onerror") == NULL);
        CHECK(strstr(html, "javascript:") == NULL && strstr(html, "vbscript:") == NULL &&
              strstr(html, "file:") == NULL && strstr(html, "data:text") == NULL);
        CHECK(strstr(html, "href=\"https://a.b/c\"") != NULL);
        CHECK(strstr(html, "\xEF\xBF\xBD") != NULL); /* invalid UTF-8 -> U+FFFD */
        free(html);
    }
    /* no front matter: all of it; an unclosed one is text */
    html = tg_hf_card_html("plain", 5);
    CHECK(html != NULL && strcmp(html, "<p>plain</p>\n") == 0);
    free(html);
    html = tg_hf_card_html("---\nk: v\n", 9);
    CHECK(html != NULL && strstr(html, "k: v") != NULL);
    free(html);
    html = tg_hf_card_html("---\nk: v\n---", 12); /* closed on the last line: empty body */
    CHECK(html != NULL && html[0] == '\0');
    free(html);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(scalars_and_lists);
    RUN(model_index);
    RUN(gated_llm_card);
    RUN(not_a_card);
    RUN(bounds);
    RUN(html);
    return test_report(argv[0]);
}
