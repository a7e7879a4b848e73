/* Unit tests for common/log.c: the line format (UTC timestamp with milliseconds,
 * level, message, newline), the level filter, truncation of a long message to one
 * bounded line, and whole lines from concurrent threads. stderr is redirected to a
 * temporary file while tg_log writes. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "test.h"

static char capture_path[64];
static int saved_stderr = -1;

static void capture_begin(void)
{
    snprintf(capture_path, sizeof capture_path, "/tmp/tg-log-XXXXXX");
    int fd = mkstemp(capture_path);
    CHECK(fd >= 0);
    fflush(stderr);
    saved_stderr = dup(STDERR_FILENO);
    CHECK(saved_stderr >= 0 && dup2(fd, STDERR_FILENO) == STDERR_FILENO);
    close(fd);
}

/* Restores stderr and returns what was written (malloc'd, NUL-terminated). */
static char *capture_end(size_t *len)
{
    fflush(stderr);
    CHECK(dup2(saved_stderr, STDERR_FILENO) == STDERR_FILENO);
    close(saved_stderr);
    saved_stderr = -1;
    FILE *f = fopen(capture_path, "rb");
    char *text = NULL;
    *len = 0;
    if (f != NULL) {
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        fseek(f, 0, SEEK_SET);
        text = calloc((size_t)(size > 0 ? size : 0) + 1, 1);
        if (text != NULL && size > 0 && fread(text, 1, (size_t)size, f) == (size_t)size)
            *len = (size_t)size;
        fclose(f);
    }
    unlink(capture_path);
    CHECK(text != NULL);
    return text;
}

/* "2026-11-24T20:07:11.828Z " : 25 bytes of digits and separators in place. */
static bool stamp_ok(const char *line)
{
    static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ ";
    for (size_t i = 0; i < sizeof shape - 1; i++) {
        if (line[i] == '\0')
            return false;
        if (shape[i] == 'd' ? (line[i] < '0' || line[i] > '9') : line[i] != shape[i])
            return false;
    }
    return true;
}

TEST(one_line_with_stamp_level_and_message)
{
    tg_log_set_level(TG_LOG_DEBUG);
    capture_begin();
    tg_log(TG_LOG_ERROR, "blob %s is damaged: %d", "abc", 42);
    tg_log(TG_LOG_WARN, "warned");
    tg_log(TG_LOG_INFO, "informed");
    tg_log(TG_LOG_DEBUG, "debugged");
    size_t len;
    char *text = capture_end(&len);
    if (text == NULL)
        return;
    const char *want[] = {"error blob abc is damaged: 42", "warn warned", "info informed",
                          "debug debugged"};
    char *line = text;
    for (size_t i = 0; i < 4; i++) {
        char *end = strchr(line, '\n');
        CHECK(end != NULL);
        if (end == NULL)
            break;
        *end = '\0';
        CHECK(stamp_ok(line));
        CHECK_STR(line + 25, want[i]);
        line = end + 1;
    }
    CHECK_STR(line, "");
    free(text);
}

TEST(lines_below_the_level_are_dropped)
{
    tg_log_set_level(TG_LOG_WARN);
    capture_begin();
    tg_log(TG_LOG_DEBUG, "no");
    tg_log(TG_LOG_INFO, "no");
    tg_log(TG_LOG_WARN, "yes");
    tg_log(TG_LOG_ERROR, "yes");
    size_t len;
    char *text = capture_end(&len);
    if (text == NULL)
        return;
    CHECK(strstr(text, " no\n") == NULL);
    size_t lines = 0;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    CHECK_EQ_U64(lines, 2);
    free(text);
    tg_log_set_level(TG_LOG_INFO);
}

TEST(a_long_message_is_cut_to_one_bounded_line)
{
    tg_log_set_level(TG_LOG_INFO);
    size_t n = 5000;
    char *big = malloc(n + 1);
    CHECK(big != NULL);
    if (big == NULL)
        return;
    memset(big, 'x', n);
    big[n] = '\0';
    capture_begin();
    tg_log(TG_LOG_INFO, "%s", big);
    size_t len;
    char *text = capture_end(&len);
    free(big);
    if (text == NULL)
        return;
    /* stamp (25) + "info " (5) + at most 1023 message bytes + newline */
    CHECK(len > 30 && len <= 25 + 5 + 1023 + 1);
    CHECK(text[len - 1] == '\n');
    CHECK(strchr(text, '\n') == text + len - 1);
    free(text);
}

#define THREADS 4
#define LINES_EACH 200

static void *writer(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < LINES_EACH; i++)
        tg_log(TG_LOG_INFO, "thread %d line %d %s", id, i, "0123456789abcdef0123456789abcdef");
    return NULL;
}

TEST(concurrent_lines_stay_whole)
{
    tg_log_set_level(TG_LOG_INFO);
    capture_begin();
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&threads[i], NULL, writer, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    size_t len;
    char *text = capture_end(&len);
    if (text == NULL)
        return;
    size_t lines = 0, whole = 0;
    char *line = text;
    for (char *end; (end = strchr(line, '\n')) != NULL; line = end + 1) {
        *end = '\0';
        lines++;
        int id, i;
        char tail[64];
        if (stamp_ok(line) &&
            sscanf(line + 25, "info thread %d line %d %63s", &id, &i, tail) == 3 &&
            strcmp(tail, "0123456789abcdef0123456789abcdef") == 0)
            whole++;
    }
    CHECK_EQ_U64(lines, THREADS * LINES_EACH);
    CHECK_EQ_U64(whole, THREADS * LINES_EACH);
    free(text);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(one_line_with_stamp_level_and_message);
    RUN(lines_below_the_level_are_dropped);
    RUN(a_long_message_is_cut_to_one_bounded_line);
    RUN(concurrent_lines_stay_whole);
    return test_report(argv[0]);
}
