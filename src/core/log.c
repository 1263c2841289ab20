/* log.c — leveled logging; one fprintf per line so threads do not interleave. */
#include "core/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int current_level = -1;

int tern_log_parse_level(const char *s) {
    static const char *names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (s && strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

tern_log_level tern_log_get_level(void) {
    int lv = atomic_load(&current_level);
    if (lv < 0) {
        lv = tern_log_parse_level(getenv("TERN_LOG"));
        if (lv < 0)
            lv = TERN_LOG_INFO;
        atomic_store(&current_level, lv);
    }
    return (tern_log_level)lv;
}

void tern_log_set_level(tern_log_level level) { atomic_store(&current_level, (int)level); }

void tern_log(tern_log_level level, const char *fmt, ...) {
    if (level > tern_log_get_level())
        return;
    static const char *tags[] = {"error", "warn", "info", "debug"};
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[%s] %s\n", tags[level], buf);
}
