/* Unit tests for server/core/reasons.c: the reason table against openapi.yaml (the
 * copy compiled into the server). Every reason of the table is in the document's
 * ServiceReason enum and every member of that enum is in the table, each once; every
 * status is a client or server error; a reason the table lacks gives 0. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "embedded.h"
#include "reasons.h"
#include "test.h"

#define ENUM_MAX 256

static char members[ENUM_MAX][64];
static size_t member_count;

/* The enum of components.schemas.ServiceReason, read simply: after the line
 * "    ServiceReason:", the first "      enum:" and then its "        - name" lines. */
static void parse_service_reasons(const char *text)
{
    const char *start = strstr(text, "\n    ServiceReason:\n");
    CHECK(start != NULL);
    if (start == NULL)
        return;
    const char *list = strstr(start, "\n      enum:\n");
    CHECK(list != NULL);
    if (list == NULL)
        return;
    const char *line = list + strlen("\n      enum:\n");
    while (strncmp(line, "        - ", 10) == 0 && member_count < ENUM_MAX) {
        const char *name = line + 10;
        size_t len = strcspn(name, "\n");
        CHECK(len > 0 && len < sizeof members[0]);
        snprintf(members[member_count++], sizeof members[0], "%.*s", (int)len, name);
        line = name + len + (name[len] == '\n');
    }
}

TEST(document_read)
{
    parse_service_reasons((const char *)tg_openapi_yaml);
    /* a sanity floor: the enum has dozens of members, and these among them */
    CHECK(member_count >= 50);
    CHECK_EQ_U64(tg_reason_status("internal"), 500);
    CHECK_EQ_U64(tg_reason_status("not_found"), 404);
}

/* Each row is a member of the enum; each member is one row. */
TEST(table_matches_document)
{
    size_t count = 0;
    const tg_reason *reasons = tg_reasons(&count);
    CHECK(reasons != NULL && count > 0);
    for (size_t r = 0; r < count; r++) {
        bool found = false;
        for (size_t i = 0; i < member_count; i++)
            found |= strcmp(members[i], reasons[r].name) == 0;
        if (!found)
            fprintf(stderr, "reasons.c: %s is not in openapi.yaml's ServiceReason enum\n",
                    reasons[r].name);
        CHECK(found);
        for (size_t other = r + 1; other < count; other++)
            CHECK(strcmp(reasons[r].name, reasons[other].name) != 0);
        CHECK(reasons[r].status >= 400 && reasons[r].status <= 599);
    }
    for (size_t i = 0; i < member_count; i++) {
        unsigned rows = 0;
        for (size_t r = 0; r < count; r++)
            rows += strcmp(members[i], reasons[r].name) == 0;
        if (rows != 1)
            fprintf(stderr, "openapi.yaml: the reason %s has %u rows in reasons.c, not 1\n",
                    members[i], rows);
        CHECK_EQ_U64(rows, 1);
    }
}

TEST(unknown_reason)
{
    CHECK_EQ_U64(tg_reason_status("no_such_reason"), 0);
    CHECK_EQ_U64(tg_reason_status(""), 0);
}

/* A gate refusal is 415 when the file is not safetensors at all, 422 otherwise. */
TEST(gate_statuses)
{
    CHECK(tg_gate_reason_status(ST_REFUSED_FORMAT) == 415);
    CHECK(tg_gate_reason_status(ST_JSON_ESCAPE) == 422);
    CHECK(tg_gate_reason_status(ST_DATA_TRUNCATED) == 422);
    CHECK(tg_gate_reason_status(ST_HEADER_TOO_LARGE) == 422);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(document_read);
    RUN(table_matches_document);
    RUN(unknown_reason);
    RUN(gate_statuses);
    return test_report(argv[0]);
}
