/* The model card's metadata for the Hugging Face routes (hf.c): the YAML front matter
 * of a README.md ("---" line, YAML, "---" line) read as the Hub's cardData. Only a
 * subset of YAML: "key: value" scalars (plain, 'single' or "double" quoted; true,
 * false, null and integers typed), "key: [a, b]" flow lists and "key:" followed by
 * "- item" lines; nested maps and anything else are skipped, never an error. Pure
 * function over the bytes given (the caller bounds them). */
#ifndef TG_HF_CARD_H
#define TG_HF_CARD_H

#include <jansson.h>
#include <stddef.h>

/* The front matter of text[0..len) as a JSON object; NULL when text has none (or out
 * of memory). */
json_t *tg_hf_card_data(const char *text, size_t len);

#endif
