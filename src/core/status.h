/* status.h — errors as values (the public type and accessors are in include/tern/error.h).
 *
 * A fallible function returns `tern_err *`: NULL on success, otherwise a heap
 * error carrying a code and a message a user can act on. The caller either
 * handles it (and frees it with tern_err_free) or passes it up, optionally
 * prefixing context with tern_err_wrap. Messages read outermost-first:
 * "model.safetensors: tensor x.weight: data offsets [0, 12) exceed file size 8". */
#ifndef TERN_CORE_STATUS_H
#define TERN_CORE_STATUS_H

#include <stdarg.h>

#include "tern/error.h"

/* Makes an error with a printf-style message; never returns NULL (falls back to a static OOM error). */
TERN_MUST_CHECK tern_err *tern_errf(tern_code code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* va_list form of tern_errf. */
TERN_MUST_CHECK tern_err *tern_verrf(tern_code code, const char *fmt, va_list ap);
/* Prefixes `err`'s message with "<context>: " and returns it; NULL in, NULL out. */
TERN_MUST_CHECK tern_err *tern_err_wrap(tern_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Propagate an error from an expression: TERN_TRY(f(x)); */
#define TERN_TRY(expr)                    \
    do {                                  \
        tern_err *tern_try_err_ = (expr); \
        if (tern_try_err_)                \
            return tern_try_err_;         \
    } while (0)

#endif
