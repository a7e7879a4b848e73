/* The version digest ("manifest"): what identifies a version's content, computed
 * the same way wherever a version is frozen (publish, a conversion job's commit) or
 * named (the Hub routes' commit ids). */
#ifndef TG_MANIFEST_H
#define TG_MANIFEST_H

#include <stddef.h>

#include "catalog.h"

/* SHA-256 over one "path sha256 size\n" line per file, in the order given (callers
 * pass the catalog's order: byte order of path). Returns 0, or -1 when a line does
 * not fit or the digest failed (hex is then ""; a failure is never a digest). The
 * digest is named "manifest" (TENSORGATE_TEST_SHA256_FAIL, common/sha256.h). */
int tg_manifest_digest(const tg_file_record *files, size_t count, char hex[65]);

#endif
