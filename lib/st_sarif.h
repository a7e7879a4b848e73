/* SARIF 2.1.0 reports of the gate's verdicts (docs/DESIGN.md, "Reports for a security
 * team"): the one builder behind POST /v1/scan?format=sarif and `tensorgate validate
 * --format sarif` (and so `tensorgate scan --format sarif`, which prints the server's).
 *
 * A log has one run of the tool "tensorgate" (TG_VERSION). Each file judged is one
 * artifact (its uri, length and SHA-256 when known); each refusal is one result whose
 * ruleId is the gate's reason code (st_error.h), level "error"; each global a refused
 * pickle imports (st_verdict.findings) is one more result, ruleId
 * pickle_global_dangerous, pickle_global_unknown or pickle_global_benign, level error,
 * warning or note. An admitted file adds its artifact and no result. The driver's rules
 * are the ones the run's results use, in order of first use (ruleIndex points there),
 * each with the reason table's summary and its family's help (st_reason_summary,
 * st_reason_help). Locations are byte regions (byteOffset, and byteLength when the
 * whole file is the finding, as for code).
 *
 *   json_t *log = st_sarif_log_new();
 *   st_sarif_log_add(log, &(st_sarif_file){"model.bin", size, sha256_hex}, &verdict);
 *   char *text = json_dumps(log, JSON_COMPACT | JSON_PRESERVE_ORDER);
 */
#ifndef ST_SARIF_H
#define ST_SARIF_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "st_gate.h"

/* The media type of a SARIF log (SARIF 2.1.0, §3.1). */
#define ST_SARIF_MEDIA_TYPE "application/sarif+json"
/* The uri of a file that has no name (a scan without ?name=, standard input). */
#define ST_SARIF_UNNAMED_URI "unnamed"
/* The tool's informationUri. */
#define ST_SARIF_TOOL_URI "https://tensorgate.dev/"

/* The rule ids of a refused pickle's imports, by severity. */
#define ST_SARIF_RULE_PICKLE_DANGEROUS "pickle_global_dangerous"
#define ST_SARIF_RULE_PICKLE_UNKNOWN "pickle_global_unknown"
#define ST_SARIF_RULE_PICKLE_BENIGN "pickle_global_benign"

typedef struct st_sarif_file {
    /* The file's name or path as given (a relative path stays relative, an absolute
     * one becomes a file:// URI; bytes outside A-Z a-z 0-9 - . _ ~ / are
     * percent-encoded); NULL or "" is ST_SARIF_UNNAMED_URI. */
    const char *path;
    uint64_t length;    /* bytes, or ST_FILE_SIZE_UNKNOWN */
    const char *sha256; /* 64 lowercase hex digits of the whole file, or NULL */
} st_sarif_file;

/* A new log: $schema, version 2.1.0 and one run with the tool, no artifact, no result
 * and invocations[0].executionSuccessful true. NULL on allocation failure. */
json_t *st_sarif_log_new(void);

/* Adds file as an artifact of the log's run and the verdict's results (none when it is
 * valid). 0, or -1 on allocation failure (the log may then hold part of it). */
int st_sarif_log_add(json_t *log, const st_sarif_file *file, const st_verdict *verdict);

/* A file that could not be judged (unreadable, out of memory): a
 * toolExecutionNotification of level error naming it, and executionSuccessful false.
 * 0, or -1 on allocation failure. */
int st_sarif_log_add_failure(json_t *log, const char *path, const char *message);

/* path as a SARIF uri (see st_sarif_file.path); NULL on allocation failure. The
 * caller frees it. */
char *st_sarif_uri(const char *path);

/* Compact text of the log ending in "\n" (JSON_PRESERVE_ORDER); NULL on allocation
 * failure. The caller frees it. */
char *st_sarif_dump(const json_t *log);

#endif
