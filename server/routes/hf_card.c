/* README.md front matter -> cardData (see hf_card.h), parsed with libyaml's event API
 * into JSON values on an explicit stack (no recursion, so depth is bounded by a
 * number, not by the C stack). */
#include "hf_card.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include <cmark.h>

/* ---- finding the front matter ---- */

/* Whether the line [start, end) is exactly mark, give or take blanks and a '\r'. */
static bool line_is(const char *start, const char *end, const char *mark)
{
    while (end > start && (end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    size_t len = strlen(mark);
    return (size_t)(end - start) == len && memcmp(start, mark, len) == 0;
}

/* The YAML between the opening "---" line and the closing "---" or "..." line:
 * [*yaml, *yaml + *yaml_len). False when text opens no front matter or never closes
 * it. */
static bool front_matter(const char *text, size_t len, const char **yaml, size_t *yaml_len)
{
    *yaml = NULL;
    *yaml_len = 0;
    const char *p = text, *limit = text + len;
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
        p += 3; /* a UTF-8 byte order mark may precede the first "---" */
    const char *nl = memchr(p, '\n', (size_t)(limit - p));
    if (nl == NULL || !line_is(p, nl, "---"))
        return false;
    const char *body = nl + 1;
    for (const char *line = body; line < limit;) {
        const char *end = memchr(line, '\n', (size_t)(limit - line));
        const char *line_end = end != NULL ? end : limit;
        if (line_is(line, line_end, "---") || line_is(line, line_end, "...")) {
            *yaml = body;
            *yaml_len = (size_t)(line - body);
            return true;
        }
        if (end == NULL)
            break;
        line = end + 1;
    }
    return false;
}

/* ---- scalars, typed by the YAML 1.2 core schema ---- */

static bool equals_any(const char *s, size_t len, const char *const *words)
{
    for (; *words != NULL; words++)
        if (strlen(*words) == len && memcmp(s, *words, len) == 0)
            return true;
    return false;
}

static json_t *plain_number(const char *s, size_t len)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf)
        return NULL;
    memcpy(buf, s, len);
    buf[len] = '\0';
    const char *digits = buf + (buf[0] == '-' || buf[0] == '+');
    if (*digits == '\0')
        return NULL;
    bool integer = true;
    for (const char *q = digits; *q != '\0'; q++)
        integer = integer && *q >= '0' && *q <= '9';
    char *end = NULL;
    errno = 0;
    if (integer) {
        long long v = strtoll(buf, &end, 10);
        if (errno == 0 && end != NULL && *end == '\0')
            return json_integer((json_int_t)v);
        return NULL; /* out of range: kept as the string it is */
    }
    /* a float: digits with one '.' and/or an exponent (no inf/nan words, no hex) */
    bool seen_digit = false;
    for (const char *q = digits; *q != '\0'; q++) {
        if (*q >= '0' && *q <= '9')
            seen_digit = true;
        else if (*q != '.' && *q != 'e' && *q != 'E' && *q != '-' && *q != '+')
            return NULL;
    }
    if (!seen_digit)
        return NULL;
    double d = strtod(buf, &end);
    if (errno != 0 || end == NULL || *end != '\0' || !isfinite(d))
        return NULL;
    return json_real(d);
}

static json_t *scalar_json(const yaml_event_t *event)
{
    const char *s = (const char *)event->data.scalar.value;
    size_t len = event->data.scalar.length;
    if (event->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return json_stringn(s, len);
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"true", "True", "TRUE", NULL};
    static const char *const falses[] = {"false", "False", "FALSE", NULL};
    if (equals_any(s, len, nulls))
        return json_null();
    if (equals_any(s, len, trues))
        return json_true();
    if (equals_any(s, len, falses))
        return json_false();
    json_t *number = plain_number(s, len);
    return number != NULL ? number : json_stringn(s, len);
}

/* ---- the document, built on an explicit stack ---- */

typedef struct frame {
    json_t *value; /* an object or an array */
    char *key;     /* in an object: the key waiting for its value (NULL: none yet) */
} frame;

typedef struct builder {
    frame stack[TG_HF_CARD_MAX_DEPTH];
    int depth;
    size_t nodes;
    json_t *root;
    bool failed;
} builder;

/* Places value (a new reference, taken) where the stack says: the root, the waiting
 * key's value, a list item, or (a scalar in an object with no waiting key) the key. */
static void place(builder *b, json_t *value, const yaml_event_t *event)
{
    if (value == NULL || ++b->nodes > TG_HF_CARD_MAX_NODES) {
        json_decref(value);
        b->failed = true;
        return;
    }
    if (b->depth == 0) {
        if (b->root != NULL) {
            json_decref(value);
            b->failed = true;
            return;
        }
        b->root = value;
        return;
    }
    frame *top = &b->stack[b->depth - 1];
    if (json_is_array(top->value)) {
        if (json_array_append_new(top->value, value) != 0)
            b->failed = true;
        return;
    }
    if (top->key == NULL) {
        /* a key: only a scalar may be one (a UTF-8 check is jansson's) */
        if (event == NULL || event->type != YAML_SCALAR_EVENT) {
            json_decref(value);
            b->failed = true;
            return;
        }
        json_decref(value);
        top->key = strndup((const char *)event->data.scalar.value, event->data.scalar.length);
        if (top->key == NULL || strlen(top->key) != event->data.scalar.length)
            b->failed = true;
        return;
    }
    /* a later duplicate key wins, as in most YAML loaders */
    if (json_object_set_new(top->value, top->key, value) != 0)
        b->failed = true;
    free(top->key);
    top->key = NULL;
}

static void open_collection(builder *b, json_t *value, const yaml_event_t *event)
{
    if (value == NULL || b->depth >= TG_HF_CARD_MAX_DEPTH) {
        json_decref(value);
        b->failed = true;
        return;
    }
    if (b->depth > 0 && json_is_object(b->stack[b->depth - 1].value) &&
        b->stack[b->depth - 1].key == NULL) {
        json_decref(value); /* a collection as a key */
        b->failed = true;
        return;
    }
    json_incref(value);
    place(b, value, event); /* attached first; filled in place */
    if (b->failed) {
        json_decref(value);
        return;
    }
    b->stack[b->depth].value = value;
    b->stack[b->depth].key = NULL;
    b->depth++;
}

static void close_collection(builder *b)
{
    if (b->depth == 0) {
        b->failed = true;
        return;
    }
    frame *top = &b->stack[--b->depth];
    if (top->key != NULL)
        b->failed = true; /* cannot happen with a well-formed event stream */
    free(top->key);
    json_decref(top->value);
}

json_t *tg_hf_card_data(const char *text, size_t len)
{
    const char *yaml;
    size_t yaml_len;
    if (text == NULL || !front_matter(text, len, &yaml, &yaml_len))
        return NULL;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return NULL;
    yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, yaml_len);
    builder b = {.depth = 0};
    bool done = false, empty = true;
    while (!done && !b.failed) {
        yaml_event_t event;
        if (!yaml_parser_parse(&parser, &event)) {
            b.failed = true;
            break;
        }
        switch (event.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (b.root != NULL)
                b.failed = true; /* one document only */
            break;
        case YAML_ALIAS_EVENT:
            b.failed = true;
            break;
        case YAML_SCALAR_EVENT:
            empty = false;
            place(&b, scalar_json(&event), &event);
            break;
        case YAML_SEQUENCE_START_EVENT:
            empty = false;
            open_collection(&b, json_array(), &event);
            break;
        case YAML_MAPPING_START_EVENT:
            empty = false;
            open_collection(&b, json_object(), &event);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            close_collection(&b);
            break;
        default:
            break;
        }
        yaml_event_delete(&event);
    }
    yaml_parser_delete(&parser);
    while (b.depth > 0) {
        frame *top = &b.stack[--b.depth];
        free(top->key);
        json_decref(top->value);
    }
    if (!b.failed && empty && b.root == NULL)
        return json_object(); /* "---\n---": an empty card */
    if (b.failed || !json_is_object(b.root)) {
        json_decref(b.root);
        return NULL;
    }
    return b.root;
}

/* ---- the Hub's tags ---- */

static bool has_string(const json_t *list, const char *s)
{
    for (size_t i = 0; i < json_array_size(list); i++) {
        const char *item = json_string_value(json_array_get(list, i));
        if (item != NULL && strcmp(item, s) == 0)
            return true;
    }
    return false;
}

static void add_tag(json_t *tags, const char *prefix, const json_t *value)
{
    if (!json_is_string(value))
        return;
    char tag[512];
    int n = snprintf(tag, sizeof tag, "%s%s", prefix, json_string_value(value));
    if (n <= 0 || (size_t)n >= sizeof tag || has_string(tags, tag))
        return;
    json_array_append_new(tags, json_string(tag));
}

/* Each string of value (a string or a list of them) as prefix + string. */
static void add_tags(json_t *tags, const char *prefix, const json_t *value)
{
    if (json_is_array(value)) {
        for (size_t i = 0; i < json_array_size(value); i++)
            add_tag(tags, prefix, json_array_get(value, i));
    } else {
        add_tag(tags, prefix, value);
    }
}

void tg_hf_card_tags(const json_t *card, json_t *tags)
{
    if (!json_is_object(card) || !json_is_array(tags))
        return;
    add_tags(tags, "", json_object_get(card, "tags"));
    add_tags(tags, "", json_object_get(card, "language"));
    add_tags(tags, "license:", json_object_get(card, "license"));
    add_tags(tags, "base_model:", json_object_get(card, "base_model"));
    add_tags(tags, "dataset:", json_object_get(card, "datasets"));
}

/* ---- the card's body as HTML ---- */

char *tg_hf_card_html(const char *text, size_t len)
{
    const char *body = text, *yaml = NULL;
    size_t yaml_len = 0;
    if (front_matter(text, len, &yaml, &yaml_len)) {
        /* the closing "---" or "..." line starts at yaml + yaml_len; skip it */
        const char *close = yaml + yaml_len;
        const char *nl = memchr(close, '\n', len - (size_t)(close - text));
        body = nl != NULL ? nl + 1 : text + len;
    }
    return cmark_markdown_to_html(body, len - (size_t)(body - text),
                                  CMARK_OPT_SAFE | CMARK_OPT_VALIDATE_UTF8);
}
