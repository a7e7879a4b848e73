/* The one redaction of a URL that may hold credentials (an import's source URL): what
 * the server shows and logs of it, and keeps of it once its job has ended. The
 * userinfo ("user:secret@") is removed; a query is replaced by "?REDACTED" (its
 * names and values alike: a signed URL's signature, a token); a fragment is removed.
 * Scheme, host (an IPv6 literal with its brackets), port and path are kept as
 * written. "https://u:p@host:8443/a/b?token=x#f" becomes
 * "https://host:8443/a/b?REDACTED". Pure: no I/O, no allocation. */
#ifndef TG_URL_REDACT_H
#define TG_URL_REDACT_H

#include <stdbool.h>
#include <stddef.h>

#define TG_URL_REDACTED_QUERY "?REDACTED"

/* Writes the redacted form of url into out (out_size bytes, NUL-terminated). When
 * "?REDACTED" would not fit, the query is dropped instead; when even the rest does not
 * fit it is cut at out_size - 1 bytes (never a byte of the userinfo, query or
 * fragment). Redacting a redacted URL gives it back unchanged. Returns true when the
 * result differs from url. */
bool tg_url_redact(const char *url, char *out, size_t out_size);

#endif
