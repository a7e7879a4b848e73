/* The redaction of a URL's credentials (see url_redact.h). */
#include "url_redact.h"

#include <string.h>

/* Where the authority starts: after "scheme:" and any slashes (also "\", which some
 * parsers take for "/"), or after a leading "//", else at 0 (no scheme). */
static size_t authority_start(const char *url)
{
    size_t i = 0;
    while ((url[i] >= 'a' && url[i] <= 'z') || (url[i] >= 'A' && url[i] <= 'Z') ||
           (i > 0 &&
            ((url[i] >= '0' && url[i] <= '9') || url[i] == '+' || url[i] == '-' || url[i] == '.')))
        i++;
    if (i > 0 && url[i] == ':')
        i++;
    else
        i = 0;
    while (url[i] == '/' || url[i] == '\\')
        i++;
    return i;
}

/* Appends len bytes of text at *at, as far as they fit (one byte kept for the NUL). */
static void put(char *out, size_t out_size, size_t *at, const char *text, size_t len)
{
    size_t room = out_size - 1 - *at;
    if (len > room)
        len = room;
    memcpy(out + *at, text, len);
    *at += len;
}

bool tg_url_redact(const char *url, char *out, size_t out_size)
{
    if (out_size == 0)
        return true;
    size_t at = 0;
    size_t start = authority_start(url);
    /* the authority ends at the path, the query or the fragment */
    size_t end = start + strcspn(url + start, "/?#");
    /* the userinfo is everything up to the authority's last "@" */
    const char *host = url + start;
    for (size_t i = start; i < end; i++)
        if (url[i] == '@')
            host = url + i + 1;
    put(out, out_size, &at, url, start);
    size_t rest = strcspn(host, "?#"); /* host, port and path */
    put(out, out_size, &at, host, rest);
    const char *tail = host + rest;
    if (tail[0] == '?' && tail[1] != '\0' && tail[1] != '#' &&
        at + strlen(TG_URL_REDACTED_QUERY) < out_size)
        put(out, out_size, &at, TG_URL_REDACTED_QUERY, strlen(TG_URL_REDACTED_QUERY));
    out[at] = '\0';
    return strcmp(out, url) != 0;
}
