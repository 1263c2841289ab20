/* log.h — leveled logging to stderr. The level comes from TERN_LOG
 * (error|warn|info|debug) or tern_log_set_level; default info. */
#ifndef TERN_CORE_LOG_H
#define TERN_CORE_LOG_H

typedef enum { TERN_LOG_ERROR = 0, TERN_LOG_WARN, TERN_LOG_INFO, TERN_LOG_DEBUG } tern_log_level;

/* Sets the threshold: messages above it are dropped. */
void tern_log_set_level(tern_log_level level);
/* Current threshold (reads TERN_LOG on first use). */
tern_log_level tern_log_get_level(void);
/* Parses "error|warn|info|debug"; returns -1 for anything else. */
int tern_log_parse_level(const char *s);
/* Writes one line "[level] message" to stderr if `level` passes the threshold. Thread-safe. */
void tern_log(tern_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define TLOG_ERROR(...) tern_log(TERN_LOG_ERROR, __VA_ARGS__)
#define TLOG_WARN(...) tern_log(TERN_LOG_WARN, __VA_ARGS__)
#define TLOG_INFO(...) tern_log(TERN_LOG_INFO, __VA_ARGS__)
#define TLOG_DEBUG(...) tern_log(TERN_LOG_DEBUG, __VA_ARGS__)

#endif
