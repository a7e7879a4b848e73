/* SARIF 2.1.0 reports of the gate's verdicts: see st_sarif.h. */
#include "st_sarif.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "st_utf8.h"
#include "st_version.h"

#define SARIF_SCHEMA_URI "https://json.schemastore.org/sarif-2.1.0.json"

/* The rules of a refused pickle's imports, one per severity (sniff.h). */
static const struct {
    const char *id;
    const char *level;
    const char *summary;
    const char *help;
} pickle_rules[] = {
    [ST_PICKLE_DANGEROUS] =
        {ST_SARIF_RULE_PICKLE_DANGEROUS, "error",
         "The pickle imports a dangerous global: process, file system, network, eval/exec, "
         "imports or another unpickler.",
         "Unpickling this file calls the global (with a call opcode applied, it runs at load "
         "time): treat the file as malware, do not load it, and find out where it came from."},
    [ST_PICKLE_UNKNOWN] =
        {ST_SARIF_RULE_PICKLE_UNKNOWN, "warning",
         "The pickle imports a global that is in neither the dangerous nor the benign list.",
         "Unpickling this file imports the global and may call it. Review what it does before "
         "anyone loads the file; convert the weights to safetensors in a sandbox."},
    [ST_PICKLE_BENIGN] =
        {ST_SARIF_RULE_PICKLE_BENIGN, "note",
         "The pickle imports a known tensor or container rebuilding global.",
         "An ordinary checkpoint's import: no action for this global itself. The file is still "
         "a pickle, refused as a whole (refused_format)."},
};

static int set_new(json_t *object, const char *key, json_t *value)
{
    return json_object_set_new(object, key, value);
}

static int append_new(json_t *array, json_t *value)
{
    return json_array_append_new(array, value);
}

char *st_sarif_uri(const char *path)
{
    if (path == NULL || path[0] == '\0')
        path = ST_SARIF_UNNAMED_URI;
    size_t len = strlen(path);
    /* "file://" + each byte as at most 3 characters + NUL */
    char *out = malloc(7 + 3 * len + 1);
    if (out == NULL)
        return NULL;
    size_t n = 0;
    if (path[0] == '/') {
        memcpy(out, "file://", 7);
        n = 7;
    }
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)path[i];
        bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                     c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
        if (plain) {
            out[n++] = (char)c;
        } else {
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    out[n] = '\0';
    return out;
}

static json_t *message(const char *text)
{
    return json_pack("{s:o}", "text", st_json_string_lossy(text));
}

json_t *st_sarif_log_new(void)
{
    json_t *driver =
        json_pack("{s:s, s:s, s:s, s:s, s:[]}", "name", "tensorgate", "version", TG_VERSION,
                  "semanticVersion", TG_VERSION, "informationUri", ST_SARIF_TOOL_URI, "rules");
    json_t *run = json_pack("{s:{s:o}, s:[{s:b}], s:[], s:[]}", "tool", "driver", driver,
                            "invocations", "executionSuccessful", 1, "artifacts", "results");
    return json_pack("{s:s, s:s, s:[o]}", "$schema", SARIF_SCHEMA_URI, "version", "2.1.0", "runs",
                     run);
}

static json_t *the_run(json_t *log)
{
    return json_array_get(json_object_get(log, "runs"), 0);
}

/* The index of rule id in the driver's rules, added (with its texts) when absent; -1
 * on allocation failure. */
static json_int_t rule_index(json_t *run, const char *id, const char *level, const char *summary,
                             const char *help)
{
    json_t *rules =
        json_object_get(json_object_get(json_object_get(run, "tool"), "driver"), "rules");
    if (rules == NULL)
        return -1;
    size_t i;
    json_t *rule;
    json_array_foreach(rules, i, rule)
    {
        if (strcmp(json_string_value(json_object_get(rule, "id")), id) == 0)
            return (json_int_t)i;
    }
    rule = json_pack("{s:s, s:o, s:o, s:{s:s}, s:{s:[s]}}", "id", id, "shortDescription",
                     message(summary), "help", message(help), "defaultConfiguration", "level",
                     level, "properties", "tags", "security");
    if (rule == NULL || append_new(rules, rule) != 0)
        return -1;
    return (json_int_t)json_array_size(rules) - 1;
}

/* A location in artifact index: byte_offset (none: no region), byte_length (none:
 * left out). */
static json_t *location(const char *uri, json_int_t index, uint64_t byte_offset,
                        uint64_t byte_length)
{
    json_t *physical = json_pack("{s:{s:s, s:I}}", "artifactLocation", "uri", uri, "index", index);
    if (physical == NULL)
        return NULL;
    if (byte_offset != ST_NO_OFFSET && byte_offset <= INT64_MAX) {
        json_t *region = json_pack("{s:I}", "byteOffset", (json_int_t)byte_offset);
        if (region != NULL && byte_length != ST_FILE_SIZE_UNKNOWN && byte_length <= INT64_MAX)
            set_new(region, "byteLength", json_integer((json_int_t)byte_length));
        if (region == NULL || set_new(physical, "region", region) != 0) {
            json_decref(physical);
            return NULL;
        }
    }
    return json_pack("[{s:o}]", "physicalLocation", physical);
}

static json_t *result(json_t *run, const char *rule_id, const char *level, const char *summary,
                      const char *help, const char *text, json_t *locations)
{
    json_int_t index = rule_index(run, rule_id, level, summary, help);
    if (index < 0 || locations == NULL) {
        json_decref(locations);
        return NULL;
    }
    return json_pack("{s:s, s:I, s:s, s:o, s:o}", "ruleId", rule_id, "ruleIndex", index, "level",
                     level, "message", message(text), "locations", locations);
}

static bool is_code_reason(st_reason reason)
{
    return reason >= ST_CODE_PYTHON && reason <= ST_CODE_REFERENCE;
}

/* The refusal's result: its reason, its sentence, where. */
static int add_refusal(json_t *run, json_t *results, const char *uri, json_int_t artifact,
                       const st_sarif_file *file, const st_verdict *verdict)
{
    const st_error *err = &verdict->error;
    uint64_t offset = err->offset, length = ST_FILE_SIZE_UNKNOWN;
    /* code is the whole file (by its name, its magic or its configuration) */
    if (is_code_reason(err->reason) && (offset == ST_NO_OFFSET || offset == 0)) {
        offset = 0;
        length = file->length;
    }
    const char *text = err->detail[0] != '\0' ? err->detail : st_reason_summary(err->reason);
    json_t *r = result(run, st_reason_name(err->reason), "error", st_reason_summary(err->reason),
                       st_reason_help(err->reason), text, location(uri, artifact, offset, length));
    if (r == NULL)
        return -1;
    json_t *properties = json_pack("{s:s}", "format", st_format_name(verdict->format));
    if (properties != NULL && err->tensor_len > 0)
        set_new(properties, "tensor", st_error_tensor_json(err));
    if (properties != NULL && verdict->findings.omitted > 0)
        set_new(properties, "omittedFindings", json_integer((json_int_t)verdict->findings.omitted));
    /* set_new takes properties even when it fails; r is the caller's until appended */
    if (properties == NULL || set_new(r, "properties", properties) != 0) {
        json_decref(r);
        return -1;
    }
    return append_new(results, r) != 0 ? -1 : 0;
}

static int add_finding(json_t *run, json_t *results, const char *uri, json_int_t artifact,
                       const st_pickle_finding *f)
{
    unsigned s = (unsigned)f->severity;
    if (s >= sizeof pickle_rules / sizeof pickle_rules[0] || pickle_rules[s].id == NULL)
        s = ST_PICKLE_UNKNOWN;
    char text[256];
    snprintf(text, sizeof text, "The pickle imports %s%s (%s).", f->global,
             f->calls ? " and calls it" : "", st_pickle_severity_name((st_pickle_severity)s));
    json_t *r = result(run, pickle_rules[s].id, pickle_rules[s].level, pickle_rules[s].summary,
                       pickle_rules[s].help, text,
                       location(uri, artifact, f->offset, ST_FILE_SIZE_UNKNOWN));
    if (r == NULL)
        return -1;
    json_t *properties =
        json_pack("{s:o, s:b, s:s}", "global", st_json_string_lossy(f->global), "calls", f->calls,
                  "severity", st_pickle_severity_name((st_pickle_severity)s));
    /* set_new takes properties even when it fails; r is the caller's until appended */
    if (properties == NULL || set_new(r, "properties", properties) != 0) {
        json_decref(r);
        return -1;
    }
    return append_new(results, r) != 0 ? -1 : 0;
}

int st_sarif_log_add(json_t *log, const st_sarif_file *file, const st_verdict *verdict)
{
    json_t *run = the_run(log);
    json_t *artifacts = json_object_get(run, "artifacts");
    json_t *results = json_object_get(run, "results");
    if (artifacts == NULL || results == NULL)
        return -1;
    char *uri = st_sarif_uri(file->path);
    if (uri == NULL)
        return -1;
    json_int_t index = (json_int_t)json_array_size(artifacts);
    json_t *artifact =
        json_pack("{s:{s:s}, s:[s]}", "location", "uri", uri, "roles", "analysisTarget");
    int rc = artifact != NULL ? 0 : -1;
    if (rc == 0 && file->length != ST_FILE_SIZE_UNKNOWN && file->length <= INT64_MAX)
        rc = set_new(artifact, "length", json_integer((json_int_t)file->length));
    if (rc == 0 && file->sha256 != NULL)
        rc = set_new(artifact, "hashes", json_pack("{s:s}", "sha-256", file->sha256));
    if (rc == 0)
        rc = set_new(artifact, "properties",
                     json_pack("{s:s}", "format", st_format_name(verdict->format)));
    if (rc != 0 || append_new(artifacts, artifact) != 0) {
        if (rc != 0)
            json_decref(artifact);
        free(uri);
        return -1;
    }
    if (!verdict->valid) {
        rc = add_refusal(run, results, uri, index, file, verdict);
        for (size_t i = 0; rc == 0 && i < verdict->findings.count; i++)
            rc = add_finding(run, results, uri, index, &verdict->findings.items[i]);
    }
    free(uri);
    return rc;
}

int st_sarif_log_add_failure(json_t *log, const char *path, const char *text)
{
    json_t *run = the_run(log);
    json_t *invocation = json_array_get(json_object_get(run, "invocations"), 0);
    if (invocation == NULL)
        return -1;
    char *uri = st_sarif_uri(path);
    if (uri == NULL)
        return -1;
    json_t *notification =
        json_pack("{s:s, s:o, s:[{s:{s:{s:s}}}]}", "level", "error", "message", message(text),
                  "locations", "physicalLocation", "artifactLocation", "uri", uri);
    free(uri);
    if (notification == NULL)
        return -1;
    json_t *list = json_object_get(invocation, "toolExecutionNotifications");
    if (list == NULL) {
        list = json_array();
        if (list == NULL || set_new(invocation, "toolExecutionNotifications", list) != 0) {
            json_decref(notification);
            return -1;
        }
    }
    if (append_new(list, notification) != 0)
        return -1;
    return set_new(invocation, "executionSuccessful", json_false());
}

char *st_sarif_dump(const json_t *log)
{
    char *text = json_dumps(log, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text == NULL)
        return NULL;
    size_t n = strlen(text);
    char *out = realloc(text, n + 2);
    if (out == NULL) {
        free(text);
        return NULL;
    }
    out[n] = '\n';
    out[n + 1] = '\0';
    return out;
}
