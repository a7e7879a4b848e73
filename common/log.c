/* One logging function for the whole server: a UTC timestamp, a level, one line. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static tg_log_level minimum_level = TG_LOG_INFO;

void tg_log_set_level(tg_log_level level)
{
    minimum_level = level;
}

void tg_log(tg_log_level level, const char *fmt, ...)
{
    static const char *const level_names[] = {"debug", "info", "warn", "error"};
    if (level < minimum_level)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    /* One fprintf per line so lines from different threads do not interleave. */
    fprintf(stderr, "%s.%03ldZ %s %s\n", stamp, now.tv_nsec / 1000000, level_names[level], line);
}
