/* Unit tests for server/core/request.c without a daemon: the path parameters of a
 * request (tg_param), the one newline every JSON body ends with (tg_text_end_line),
 * the next_cursor member of a list (tg_set_next_cursor, decoded back by
 * tg_cursor_decode) and the problem+json body (tg_problem_json: titles, and details
 * made valid UTF-8). The responders themselves answer real requests in the unit
 * test of http.c. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "request.h"
#include "test.h"

static const char *json_str(json_t *object, const char *key)
{
    return json_string_value(json_object_get(object, key));
}

/* A placeholder's value by name; NULL for a name the pattern lacks. */
TEST(params)
{
    tg_request req;
    memset(&req, 0, sizeof req);
    char org[] = "acme", name[] = "bert";
    req.param_names[0] = "org";
    req.params[0] = org;
    req.param_names[1] = "name";
    req.params[1] = name;
    CHECK_STR(tg_param(&req, "org"), "acme");
    CHECK_STR(tg_param(&req, "name"), "bert");
    CHECK(tg_param(&req, "version") == NULL);
    CHECK(tg_param(&req, "") == NULL);
}

/* A text gets its final newline once; one that has it is left as it is. */
TEST(text_end_line)
{
    char *text = strdup("{}");
    CHECK(text != NULL && tg_text_end_line(&text) == 0);
    CHECK_STR(text, "{}\n");
    CHECK(tg_text_end_line(&text) == 0);
    CHECK_STR(text, "{}\n");
    free(text);
    text = strdup("");
    CHECK(text != NULL && tg_text_end_line(&text) == 0);
    CHECK_STR(text, "\n");
    free(text);
}

/* next_cursor: null at the end of a list, else a cursor that decodes to the key. */
TEST(next_cursor)
{
    json_t *body = json_object();
    tg_set_next_cursor(body, NULL);
    CHECK(json_is_null(json_object_get(body, "next_cursor")));
    tg_set_next_cursor(body, "acme/bert");
    const char *cursor = json_str(body, "next_cursor");
    CHECK(cursor != NULL);
    char key[256];
    CHECK(cursor != NULL && tg_cursor_decode(cursor, key, sizeof key) == 0);
    CHECK_STR(key, "acme/bert");
    json_decref(body);
}

/* Details echo client input: bytes that are not UTF-8 become \xNN (st_utf8's
 * decoder decides), valid characters pass, and a long detail is cut on a
 * character boundary. */
TEST(problem_json_utf8)
{
    json_t *p = tg_problem_json(400, "invalid_request", "bad \xff byte, caf\xc3\xa9, \xc3");
    CHECK(p != NULL);
    CHECK_STR(json_str(p, "detail"), "bad \\xff byte, caf\xc3\xa9, \\xc3");
    CHECK_STR(json_str(p, "title"), "Bad Request");
    json_decref(p);
    static char long_detail[4000];
    for (size_t i = 0; i + 2 < sizeof long_detail; i += 2)
        memcpy(long_detail + i, "\xc3\xa9", 2);
    p = tg_problem_json(404, "not_found", long_detail);
    const char *detail = json_str(p, "detail");
    CHECK(detail != NULL && strlen(detail) < 2048 && strlen(detail) % 2 == 0);
    json_decref(p);
    p = tg_problem_json(499, "odd", "x");
    CHECK_STR(json_str(p, "title"), "Client Error");
    json_decref(p);
    /* a failed import's problem carries 502 (the source's fault): its own title */
    p = tg_problem_json(502, "import_fetch_failed", "x");
    CHECK_STR(json_str(p, "title"), "Bad Gateway");
    json_decref(p);
    p = tg_problem_json(599, "odd", "x");
    CHECK_STR(json_str(p, "title"), "Server Error");
    json_decref(p);
    /* no problem status has a bare "Error" title */
    for (unsigned status = 400; status < 600; status++) {
        p = tg_problem_json(status, "any", "x");
        const char *title = json_str(p, "title");
        CHECK(title != NULL && strcmp(title, "Error") != 0);
        json_decref(p);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(params);
    RUN(text_end_line);
    RUN(next_cursor);
    RUN(problem_json_utf8);
    return test_report(argv[0]);
}
