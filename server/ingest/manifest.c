/* The version digest (see manifest.h). */
#include "manifest.h"

#include <stdio.h>

#include "sha256.h"

int tg_manifest_digest(const tg_file_record *files, size_t count, char hex[65])
{
    tg_sha256 sha;
    if (tg_sha256_init(&sha, "manifest") != 0)
        return tg_sha256_final_hex(&sha, hex);
    for (size_t i = 0; i < count; i++) {
        char line[TG_PATH_MAX + 100];
        int n = snprintf(line, sizeof line, "%s %s %llu\n", files[i].path, files[i].sha256,
                         (unsigned long long)files[i].size);
        if (n < 0 || (size_t)n >= sizeof line || tg_sha256_update(&sha, line, (size_t)n) != 0) {
            tg_sha256_free(&sha);
            hex[0] = '\0';
            return -1;
        }
    }
    return tg_sha256_final_hex(&sha, hex);
}
