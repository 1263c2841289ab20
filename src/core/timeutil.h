/* timeutil.h — monotonic time. */
#ifndef TERN_CORE_TIMEUTIL_H
#define TERN_CORE_TIMEUTIL_H

#include <stdint.h>

/* Nanoseconds from CLOCK_MONOTONIC; only differences are meaningful. */
uint64_t tern_now_ns(void);
/* Seconds (double) from CLOCK_MONOTONIC. */
double tern_now_s(void);

#endif
