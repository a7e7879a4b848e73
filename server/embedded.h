/* Files compiled into the binary (see scripts/embed.sh and the Makefile). */
#ifndef TG_EMBEDDED_H
#define TG_EMBEDDED_H

#include <stddef.h>

extern const unsigned char tg_openapi_yaml[]; /* openapi.yaml, NUL-terminated */
extern const size_t tg_openapi_yaml_len;

#endif
