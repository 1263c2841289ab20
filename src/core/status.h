/* status.h — errors as values.
 *
 * A fallible function returns `tern_err *`: NULL on success, otherwise a heap
 * error carrying a code and a message a user can act on. The caller either
 * handles it (and frees it with tern_err_free) or passes it up, optionally
 * prefixing context with tern_err_wrap. Messages read outermost-first:
 * "model.safetensors: tensor x.weight: data offsets [0, 12) exceed file size 8". */
#ifndef TERN_CORE_STATUS_H
#define TERN_CORE_STATUS_H

#include <stdarg.h>

typedef enum tern_code {
    TERN_OK = 0,
    TERN_EINVAL,       /* bad argument or bad input value */
    TERN_EIO,          /* file or OS call failed */
    TERN_ENOMEM,       /* allocation failed */
    TERN_EFORMAT,      /* corrupt or inconsistent file content */
    TERN_ENOTFOUND,    /* a named thing (file, tensor, key) is absent */
    TERN_EUNSUPPORTED, /* valid input this build cannot handle */
    TERN_EOVERLOAD,    /* queue full or budget exhausted */
    TERN_ECANCELLED,   /* the caller cancelled the operation */
    TERN_EINTERNAL     /* a bug: an invariant did not hold */
} tern_code;

typedef struct tern_err {
    tern_code code;
    char *msg;
} tern_err;

/* Makes an error with a printf-style message; never returns NULL (falls back to a static OOM error). */
tern_err *tern_errf(tern_code code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* va_list form of tern_errf. */
tern_err *tern_verrf(tern_code code, const char *fmt, va_list ap);
/* Prefixes `err`'s message with "<context>: " and returns it; NULL in, NULL out. */
tern_err *tern_err_wrap(tern_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Frees an error; NULL is fine. */
void tern_err_free(tern_err *err);
/* The message of `err`, or "ok" for NULL. */
const char *tern_err_msg(const tern_err *err);
/* A short stable name for a code ("invalid argument", "format error", ...). */
const char *tern_code_name(tern_code code);

/* Propagate an error from an expression: TERN_TRY(f(x)); */
#define TERN_TRY(expr)                    \
    do {                                  \
        tern_err *tern_try_err_ = (expr); \
        if (tern_try_err_)                \
            return tern_try_err_;         \
    } while (0)

#endif
