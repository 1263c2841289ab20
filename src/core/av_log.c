/* av_log.c — libav's log → ours (see av_log.h). */
#include "core/av_log.h"

#include <pthread.h>
#include <string.h>

#include <libavutil/log.h>

#include "core/log.h"

static void av_log_to_tern(void *avcl, int level, const char *fmt, va_list vl) {
    if (level > AV_LOG_WARNING || tern_log_get_level() < TERN_LOG_DEBUG)
        return;
    char line[1024];
    int print_prefix = 1;
    av_log_format_line2(avcl, level, fmt, vl, line, sizeof line, &print_prefix);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = 0;
    TLOG_DEBUG("libav: %s", line);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void install(void) { av_log_set_callback(av_log_to_tern); }

void tern_av_log_route(void) { pthread_once(&once, install); }
