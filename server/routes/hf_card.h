/* The model card's metadata for the Hugging Face routes (hf.c): the YAML front matter
 * of a README.md ("---" line, YAML, "---" or "..." line) read as the Hub's cardData.
 * The YAML is parsed by libyaml (a real YAML 1.1/1.2 parser: block and flow
 * collections, nested maps and lists, quoted, folded and literal strings, comments),
 * then mapped to JSON with the YAML 1.2 core schema: plain true/false, null/~/empty,
 * decimal integers and floats are typed; quoted scalars stay strings. Bounded: the
 * caller bounds the bytes, and the card is refused (NULL) past TG_HF_CARD_MAX_DEPTH
 * levels of nesting or TG_HF_CARD_MAX_NODES values, on an alias (anchors are how
 * "billion laughs" documents grow), on a key that is not a scalar, or on YAML that
 * does not parse. Pure function over the bytes given. */
#ifndef TG_HF_CARD_H
#define TG_HF_CARD_H

#include <jansson.h>
#include <stddef.h>

#define TG_HF_CARD_MAX_DEPTH 32
#define TG_HF_CARD_MAX_NODES 20000

/* The front matter of text[0..len) as a JSON object; NULL when text has none, when
 * it is not a YAML mapping within the bounds above, or out of memory. */
json_t *tg_hf_card_data(const char *text, size_t len);

/* The Hub's tags of a card, appended to tags (a JSON array) unless already there: its
 * "tags" and "language" codes as they are, then "license:<value>", "base_model:<value>"
 * for each base model and "dataset:<value>" for each dataset (each a string or a list
 * of strings). card may be NULL. */
void tg_hf_card_tags(const json_t *card, json_t *tags);

/* The card's body (what follows the front matter; all of text when it has none)
 * rendered to HTML by libcmark (CommonMark) with CMARK_OPT_SAFE: raw HTML, inline or
 * block, becomes an "omitted" comment, and javascript:, vbscript:, file: and
 * non-image data: link targets are emptied; invalid UTF-8 becomes U+FFFD. The web
 * page still allow-lists the elements and attributes it keeps. Returns a malloc'd
 * string (free()), or NULL when out of memory. */
char *tg_hf_card_html(const char *text, size_t len);

#endif
