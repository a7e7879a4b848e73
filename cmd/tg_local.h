/* Shared by the local file commands (validate, inspect, convert): running the gate
 * over a file in one read pass, and printing a verdict the same way everywhere. */
#ifndef TG_LOCAL_H
#define TG_LOCAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "st_gate.h"
#include "st_utf8.h"

/* Bytes per read(2) of the local commands. */
#define TG_LOCAL_READ_SIZE (1u << 20)

typedef struct tg_local_run {
    st_gate *gate; /* finished; the caller frees it with st_gate_free */
    st_verdict verdict;
    uint64_t size; /* bytes judged: read, or passed over unread (the data section of a
                    * regular file under TG_LOCAL_HASH_NONE); the whole file at its end */
    bool hashed;   /* sha256 holds the SHA-256 of the whole file (never after a refusal) */
    uint8_t sha256[32];
} tg_local_run;

/* What tg_local_gate_file hashes. */
typedef enum tg_local_hash {
    TG_LOCAL_HASH_NONE,     /* nothing; a refused file's rest is never read, nor the data
                               section of a regular file when no value check is asked
                               (st_gate_data_skippable): its size comes from fstat */
    TG_LOCAL_HASH_ADMITTED, /* a file read to its end (never one refused before its end) */
    TG_LOCAL_HASH_WHOLE,    /* every file: a refused one is read on to its end to hash it */
} tg_local_hash;

/* Streams path ("-" is standard input) through a gate of config, with the size from
 * fstat declared for regular files. Stops reading at a refusal unless hash is
 * TG_LOCAL_HASH_WHOLE: the rest of a refused file is never read, so run->size is what
 * was read and run->hashed is false. With TG_LOCAL_HASH_ADMITTED, a file read to its
 * end is hashed in the same pass (hashed true); with TG_LOCAL_HASH_WHOLE every file is
 * (run->size is then the whole file). Returns 0 with run filled, or -1 after printing
 * an I/O, out-of-memory or SHA-256 error to stderr. */
int tg_local_gate_file(const char *path, const st_gate_config *config, tg_local_hash hash,
                       tg_local_run *run);

/* One line: "FILE: valid (safetensors, 3 tensors)" or
 * "FILE: refused: REASON at offset N (tensor T): DETAIL [format F]". file may be
 * NULL for a valid safetensors count of 0. */
void tg_local_print_verdict(FILE *out, const char *path, const st_verdict *verdict,
                            const st_file *file);

/* The verdict as one JSON object: file, valid, reason, detail, offset, tensor, format.
 * "tensor" is the name whole (err->tensor_len bytes, U+0000 included), as POST /v1/scan
 * gives it. */
json_t *tg_local_verdict_json(const char *path, const st_verdict *verdict);

/* Prints a JSON value compactly on one line. */
void tg_local_print_json(FILE *out, const json_t *value);

/* Parses --max-header BYTES: decimal, 1 .. ST_HEADER_SIZE_MAX. */
bool tg_local_parse_header_limit(const char *text, uint64_t *out);

/* --max-header for "tensorgate COMMAND": parses text into *out, or prints the usage
 * complaint to stderr and returns false. */
bool tg_local_header_limit_option(const char *command, const char *text, uint64_t *out);

/* Prints "tensorgate COMMAND: unknown or incomplete option 'OPTION'" to stderr. */
void tg_local_print_option_error(const char *command, const char *option);

/* The run's verdict on one line: as tg_local_verdict_json when json, else as
 * tg_local_print_verdict. Returns -1 (nothing printed) when out of memory, else 0. */
int tg_local_print_run_verdict(FILE *out, const char *path, const tg_local_run *run, bool json);

#endif
