/* README.md front matter -> cardData (see hf_card.h). */
#include "hf_card.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* One line of the front matter: [start, end) without the line break. */
typedef struct card_line {
    const char *start, *end;
} card_line;

static bool next_line(const char **cursor, const char *limit, card_line *line)
{
    if (*cursor >= limit)
        return false;
    const char *nl = memchr(*cursor, '\n', (size_t)(limit - *cursor));
    line->start = *cursor;
    line->end = nl != NULL ? nl : limit;
    *cursor = nl != NULL ? nl + 1 : limit;
    if (line->end > line->start && line->end[-1] == '\r')
        line->end--;
    return true;
}

static void trim(const char **start, const char **end)
{
    while (*start < *end && (**start == ' ' || **start == '\t'))
        (*start)++;
    while (*end > *start && ((*end)[-1] == ' ' || (*end)[-1] == '\t'))
        (*end)--;
}

static bool line_is(const card_line *line, const char *text)
{
    const char *start = line->start, *end = line->end;
    trim(&start, &end);
    size_t len = strlen(text);
    return (size_t)(end - start) == len && memcmp(start, text, len) == 0;
}

/* A scalar: quoted strings lose their quotes; true/false/null and plain integers
 * (up to 18 digits) are typed; a " #" comment ends a plain one. */
static json_t *scalar(const char *start, const char *end)
{
    trim(&start, &end);
    if (end - start >= 2 && (*start == '"' || *start == '\'') && end[-1] == *start)
        return json_stringn(start + 1, (size_t)(end - start - 2));
    for (const char *p = start; p + 1 < end; p++)
        if ((*p == ' ' || *p == '\t') && p[1] == '#') {
            end = p;
            trim(&start, &end);
            break;
        }
    size_t len = (size_t)(end - start);
    if ((len == 4 && memcmp(start, "true", 4) == 0) || (len == 4 && memcmp(start, "True", 4) == 0))
        return json_true();
    if ((len == 5 && memcmp(start, "false", 5) == 0) ||
        (len == 5 && memcmp(start, "False", 5) == 0))
        return json_false();
    if (len == 0 || (len == 4 && memcmp(start, "null", 4) == 0) || (len == 1 && *start == '~'))
        return json_null();
    bool digits = len <= 18;
    const char *p = start;
    if (p < end && *p == '-' && len > 1)
        p++;
    for (; digits && p < end; p++)
        digits = *p >= '0' && *p <= '9';
    if (digits) {
        json_int_t value = 0;
        bool negative = *start == '-';
        for (const char *q = start + (negative ? 1 : 0); q < end; q++)
            value = value * 10 + (*q - '0');
        return json_integer(negative ? -value : value);
    }
    return json_stringn(start, len);
}

/* "[a, b, 'c']" -> a list (no nesting; a comma inside quotes is kept). */
static json_t *flow_list(const char *start, const char *end)
{
    json_t *list = json_array();
    const char *p = start + 1, *item = p;
    char quote = 0;
    end--; /* the ']' */
    for (; list != NULL && p <= end; p++) {
        if (p < end && quote != 0) {
            if (*p == quote)
                quote = 0;
            continue;
        }
        if (p < end && (*p == '"' || *p == '\'')) {
            quote = *p;
            continue;
        }
        if (p == end || *p == ',') {
            const char *a = item, *b = p;
            trim(&a, &b);
            if (b > a && json_array_append_new(list, scalar(a, b)) != 0) {
                json_decref(list);
                return NULL;
            }
            item = p + 1;
        }
    }
    return list;
}

json_t *tg_hf_card_data(const char *text, size_t len)
{
    const char *cursor = text, *limit = text + len;
    card_line line;
    /* a UTF-8 byte order mark may precede the first "---" */
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
        cursor += 3;
    if (!next_line(&cursor, limit, &line) || !line_is(&line, "---"))
        return NULL;
    json_t *card = json_object();
    json_t *open_list = NULL; /* the list "key:" opened, while "- item" lines follow */
    bool closed = false;
    while (card != NULL && next_line(&cursor, limit, &line)) {
        if (line_is(&line, "---") || line_is(&line, "...")) {
            closed = true;
            break;
        }
        const char *start = line.start, *end = line.end;
        bool indented = start < end && (*start == ' ' || *start == '\t');
        trim(&start, &end);
        if (start == end || *start == '#')
            continue;
        if (open_list != NULL && *start == '-' && (end - start == 1 || start[1] == ' ')) {
            if (json_array_append_new(open_list, scalar(start + 1, end)) != 0)
                goto fail;
            continue;
        }
        if (indented)
            continue; /* a nested map's line: not in the subset */
        open_list = NULL;
        const char *colon = NULL;
        for (const char *p = start; p < end; p++)
            if (*p == ':' && (p + 1 == end || p[1] == ' ' || p[1] == '\t')) {
                colon = p;
                break;
            }
        if (colon == NULL || colon == start)
            continue;
        const char *key_end = colon, *key_start = start;
        trim(&key_start, &key_end);
        char key[256];
        size_t key_len = (size_t)(key_end - key_start);
        if (key_len == 0 || key_len >= sizeof key)
            continue;
        memcpy(key, key_start, key_len);
        key[key_len] = '\0';
        const char *value = colon + 1, *value_end = end;
        trim(&value, &value_end);
        json_t *item;
        if (value == value_end) {
            /* "key:" then "- item" lines (a nested map's lines leave it an empty list) */
            item = json_array();
            open_list = item;
        } else if (*value == '[' && value_end[-1] == ']') {
            item = flow_list(value, value_end);
        } else {
            item = scalar(value, value_end);
        }
        if (item == NULL || json_object_set_new(card, key, item) != 0)
            goto fail;
    }
    if (card != NULL && !closed)
        goto fail;
    return card;
fail:
    json_decref(card);
    return NULL;
}
