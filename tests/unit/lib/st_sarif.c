/* Unit tests for lib/st_sarif.c, the SARIF 2.1.0 builder (tests/sarif/run.sh validates
 * its output against the schema with ajv; these check what it says):
 *  - an admitted file: one artifact, no result, no rule;
 *  - a refused pickle: the refusal (ruleId its reason, level error, no region when the
 *    verdict has no offset) then one result per import, ruleId by severity and level
 *    error / warning / note, byteOffset the import's, each rule declared once and
 *    ruleIndex pointing at it;
 *  - code spans the whole file (byteOffset 0, byteLength the file's length);
 *  - uris: a relative path stays, bytes outside the unreserved set are percent-encoded,
 *    an absolute path becomes file://, no name is "unnamed";
 *  - a file that could not be judged sets executionSuccessful false;
 *  - every reason but ok has a summary and a help text (the rules' texts);
 *  - each of jansson's allocations failing in turn: -1 or NULL, never a crash or a leak. */
#include <stdlib.h>

#include "st_sarif.h"
#include "st_version.h"
#include "test.h"

static json_t *run_of(json_t *log)
{
    return json_array_get(json_object_get(log, "runs"), 0);
}

static json_t *results_of(json_t *log)
{
    return json_object_get(run_of(log), "results");
}

static json_t *rules_of(json_t *log)
{
    return json_object_get(json_object_get(json_object_get(run_of(log), "tool"), "driver"),
                           "rules");
}

static const char *str(const json_t *object, const char *key)
{
    const char *s = json_string_value(json_object_get(object, key));
    return s != NULL ? s : "(none)";
}

static json_t *region_of(json_t *result)
{
    json_t *loc = json_array_get(json_object_get(result, "locations"), 0);
    return json_object_get(json_object_get(loc, "physicalLocation"), "region");
}

static void pickle_verdict(st_verdict *v)
{
    memset(v, 0, sizeof *v);
    v->valid = false;
    v->format = ST_FORMAT_PICKLE;
    st_error_set(&v->error, ST_REFUSED_FORMAT, ST_NO_OFFSET, NULL, "not safetensors: pickle");
    const char *globals[] = {"posix.system", "acme.helper", "collections.OrderedDict",
                             "builtins.eval"};
    st_pickle_severity severities[] = {ST_PICKLE_DANGEROUS, ST_PICKLE_UNKNOWN, ST_PICKLE_BENIGN,
                                       ST_PICKLE_DANGEROUS};
    for (size_t i = 0; i < 4; i++) {
        st_pickle_finding *f = &v->findings.items[i];
        snprintf(f->global, sizeof f->global, "%s", globals[i]);
        f->severity = severities[i];
        f->calls = i != 2;
        f->offset = 10 * (i + 1);
    }
    v->findings.count = 4;
    v->findings.omitted = 2;
}

TEST(admitted_file_has_no_result)
{
    json_t *log = st_sarif_log_new();
    CHECK(log != NULL);
    st_verdict v;
    memset(&v, 0, sizeof v);
    v.valid = true;
    v.format = ST_FORMAT_SAFETENSORS;
    st_sarif_file file = {"model.safetensors", 184, "ab12"};
    CHECK_EQ_U64(st_sarif_log_add(log, &file, &v), 0);
    CHECK_STR(str(log, "version"), "2.1.0");
    CHECK_EQ_U64(json_array_size(results_of(log)), 0);
    CHECK_EQ_U64(json_array_size(rules_of(log)), 0);
    json_t *artifact = json_array_get(json_object_get(run_of(log), "artifacts"), 0);
    CHECK_STR(str(json_object_get(artifact, "location"), "uri"), "model.safetensors");
    CHECK_EQ_U64(json_integer_value(json_object_get(artifact, "length")), 184);
    CHECK_STR(str(json_object_get(artifact, "hashes"), "sha-256"), "ab12");
    json_t *invocation = json_array_get(json_object_get(run_of(log), "invocations"), 0);
    CHECK(json_is_true(json_object_get(invocation, "executionSuccessful")));
    json_t *driver = json_object_get(json_object_get(run_of(log), "tool"), "driver");
    CHECK_STR(str(driver, "name"), "tensorgate");
    CHECK_STR(str(driver, "version"), TG_VERSION);
    json_decref(log);
}

TEST(refused_pickle_results)
{
    json_t *log = st_sarif_log_new();
    st_verdict v;
    pickle_verdict(&v);
    st_sarif_file file = {"evil.pkl", ST_FILE_SIZE_UNKNOWN, NULL};
    CHECK_EQ_U64(st_sarif_log_add(log, &file, &v), 0);
    /* a second file with the same rules: declared once */
    st_sarif_file again = {"evil2.pkl", 100, NULL};
    CHECK_EQ_U64(st_sarif_log_add(log, &again, &v), 0);
    json_t *results = results_of(log), *rules = rules_of(log);
    CHECK_EQ_U64(json_array_size(results), 10);
    CHECK_EQ_U64(json_array_size(rules), 4); /* refused_format and three severities */
    const char *ids[] = {"refused_format", "pickle_global_dangerous", "pickle_global_unknown",
                         "pickle_global_benign", "pickle_global_dangerous"};
    const char *levels[] = {"error", "error", "warning", "note", "error"};
    for (size_t i = 0; i < 5; i++) {
        json_t *r = json_array_get(results, i);
        CHECK_STR(str(r, "ruleId"), ids[i]);
        CHECK_STR(str(r, "level"), levels[i]);
        json_t *rule =
            json_array_get(rules, (size_t)json_integer_value(json_object_get(r, "ruleIndex")));
        CHECK_STR(str(rule, "id"), ids[i]);
        CHECK_STR(str(json_object_get(rule, "defaultConfiguration"), "level"), levels[i]);
        if (i == 0) {
            CHECK(region_of(r) == NULL);
            CHECK_STR(str(json_object_get(r, "message"), "text"), "not safetensors: pickle");
            CHECK_EQ_U64(json_integer_value(
                             json_object_get(json_object_get(r, "properties"), "omittedFindings")),
                         2);
        } else {
            CHECK_EQ_U64(json_integer_value(json_object_get(region_of(r), "byteOffset")), 10 * i);
            CHECK(json_object_get(region_of(r), "byteLength") == NULL);
        }
    }
    /* the second file's results point at its own artifact */
    json_t *last = json_array_get(results, 9);
    json_t *loc = json_array_get(json_object_get(last, "locations"), 0);
    json_t *artifact_loc =
        json_object_get(json_object_get(loc, "physicalLocation"), "artifactLocation");
    CHECK_STR(str(artifact_loc, "uri"), "evil2.pkl");
    CHECK_EQ_U64(json_integer_value(json_object_get(artifact_loc, "index")), 1);
    /* the first artifact's length was unknown: left out */
    json_t *first = json_array_get(json_object_get(run_of(log), "artifacts"), 0);
    CHECK(json_object_get(first, "length") == NULL && json_object_get(first, "hashes") == NULL);
    json_decref(log);
}

TEST(code_spans_the_file)
{
    json_t *log = st_sarif_log_new();
    st_verdict v;
    memset(&v, 0, sizeof v);
    v.format = ST_FORMAT_TEXT;
    st_error_set(&v.error, ST_CODE_PYTHON, ST_NO_OFFSET, NULL, "x.py is Python source");
    st_sarif_file file = {"x.py", 26, NULL};
    CHECK_EQ_U64(st_sarif_log_add(log, &file, &v), 0);
    json_t *r = json_array_get(results_of(log), 0);
    CHECK_STR(str(r, "ruleId"), "code_python");
    CHECK_EQ_U64(json_integer_value(json_object_get(region_of(r), "byteOffset")), 0);
    CHECK_EQ_U64(json_integer_value(json_object_get(region_of(r), "byteLength")), 26);
    json_decref(log);
}

TEST(uris)
{
    char *u = st_sarif_uri("models/a b/ü.bin");
    CHECK_STR(u, "models/a%20b/%C3%BC.bin");
    free(u);
    u = st_sarif_uri("/tmp/x.safetensors");
    CHECK_STR(u, "file:///tmp/x.safetensors");
    free(u);
    u = st_sarif_uri(NULL);
    CHECK_STR(u, ST_SARIF_UNNAMED_URI);
    free(u);
    u = st_sarif_uri("");
    CHECK_STR(u, ST_SARIF_UNNAMED_URI);
    free(u);
    u = st_sarif_uri("a\nb%?#");
    CHECK_STR(u, "a%0Ab%25%3F%23");
    free(u);
}

TEST(failure_marks_the_run)
{
    json_t *log = st_sarif_log_new();
    CHECK_EQ_U64(st_sarif_log_add_failure(log, "missing.bin", "cannot read"), 0);
    CHECK_EQ_U64(st_sarif_log_add_failure(log, NULL, "cannot read either"), 0);
    json_t *invocation = json_array_get(json_object_get(run_of(log), "invocations"), 0);
    CHECK(json_is_false(json_object_get(invocation, "executionSuccessful")));
    json_t *notes = json_object_get(invocation, "toolExecutionNotifications");
    CHECK_EQ_U64(json_array_size(notes), 2);
    CHECK_STR(str(json_array_get(notes, 0), "level"), "error");
    char *text = st_sarif_dump(log);
    CHECK(text != NULL && text[strlen(text) - 1] == '\n');
    free(text);
    json_decref(log);
}

TEST(every_reason_has_texts)
{
    for (int r = ST_OK + 1; r < ST_REASON_COUNT; r++) {
        if (r == ST_OUT_OF_MEMORY)
            continue;
        if (st_reason_summary((st_reason)r)[0] == '\0' || st_reason_help((st_reason)r)[0] == '\0')
            fprintf(stderr, "reason %s lacks a summary or help\n", st_reason_name((st_reason)r));
        CHECK(st_reason_summary((st_reason)r)[0] != '\0');
        CHECK(st_reason_help((st_reason)r)[0] != '\0');
    }
    CHECK_STR(st_reason_summary(ST_OK), "");
    CHECK_STR(st_reason_help(ST_REASON_COUNT), "");
}

/* jansson's allocations fail from the nth on */
static unsigned long alloc_calls, alloc_fail_at;

static void *counting_malloc(size_t size)
{
    if (alloc_fail_at != 0 && ++alloc_calls >= alloc_fail_at)
        return NULL;
    return malloc(size);
}

static void counting_free(void *p)
{
    free(p);
}

TEST(allocation_failures)
{
    json_set_alloc_funcs(counting_malloc, counting_free);
    unsigned long n;
    bool completed = false;
    for (n = 1; n < 2000 && !completed; n++) {
        alloc_calls = 0;
        alloc_fail_at = n;
        json_t *log = st_sarif_log_new();
        if (log == NULL)
            continue;
        st_verdict v;
        pickle_verdict(&v);
        st_sarif_file file = {"evil.pkl", 100, "ab"};
        int rc = st_sarif_log_add(log, &file, &v);
        if (rc == 0)
            rc = st_sarif_log_add_failure(log, "x", "cannot read");
        char *text = rc == 0 ? st_sarif_dump(log) : NULL;
        completed = text != NULL;
        free(text);
        json_decref(log);
    }
    alloc_fail_at = 0;
    json_set_alloc_funcs(malloc, free);
    CHECK(completed);
    CHECK(n > 20); /* the walk failed many allocations before one run got through */
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(admitted_file_has_no_result);
    RUN(refused_pickle_results);
    RUN(code_spans_the_file);
    RUN(uris);
    RUN(failure_marks_the_run);
    RUN(every_reason_has_texts);
    RUN(allocation_failures);
    return test_report(argv[0]);
}
