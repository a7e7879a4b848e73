/* The blob store's factory (blobstore.h): tg_blobstore_open picks the backend
 * from the URL ("file:DIR" or a path: blobstore_local.c; "s3://...":
 * blobstore_s3.c). Apart from blobstore.c, the dispatcher the backends call back
 * into, so that no file of the folder and its backends include each other. */
#include "blobstore.h"
#include "blobstore_backend.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* The length of a URL scheme followed by "://" at the start of text, else 0. */
static size_t url_scheme_length(const char *text)
{
    size_t n = 0;
    if (!isalpha((unsigned char)text[0]))
        return 0;
    while (isalnum((unsigned char)text[n]) || text[n] == '+' || text[n] == '-' || text[n] == '.')
        n++;
    return strncmp(text + n, "://", 3) == 0 ? n : 0;
}

int tg_blobstore_open(const char *url, tg_blobstore **out, char *err, size_t err_len)
{
    return tg_blobstore_open_options(url, NULL, out, err, err_len);
}

int tg_blobstore_open_options(const char *url, const tg_blobstore_options *options,
                              tg_blobstore **out, char *err, size_t err_len)
{
    *out = NULL;
    if (strncmp(url, "file:", 5) == 0)
        return tg_blobstore_local_open(url + 5, out, err, err_len);
    size_t scheme = url_scheme_length(url);
    if (scheme > 0) {
        if (scheme == 2 && strncmp(url, "s3", 2) == 0)
            return tg_blobstore_s3_open(url, options, out, err, err_len);
        snprintf(err, err_len,
                 "unknown blob store URL scheme \"%.*s://\"; use file:DIR, s3://BUCKET[/PREFIX] "
                 "or a directory path",
                 (int)scheme, url);
        return -1;
    }
    return tg_blobstore_local_open(url, out, err, err_len);
}
