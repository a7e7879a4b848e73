/* The server's one logging function: a timestamped line on stderr. */
#ifndef TG_LOG_H
#define TG_LOG_H

typedef enum tg_log_level { TG_LOG_DEBUG, TG_LOG_INFO, TG_LOG_WARN, TG_LOG_ERROR } tg_log_level;

/* Messages below this level are dropped (default TG_LOG_INFO). */
void tg_log_set_level(tg_log_level level);

void tg_log(tg_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
