/* status.c — error values: allocation, wrapping, messages. */
#include "core/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Returned when an error cannot even be allocated; never freed. */
static tern_err oom_err = {TERN_ENOMEM, "out of memory while reporting an error"};

tern_err *tern_verrf(tern_code code, const char *fmt, va_list ap) {
    tern_err *e = malloc(sizeof *e);
    if (!e)
        return &oom_err;
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        n = 0;
    e->msg = malloc((size_t)n + 1);
    if (!e->msg) {
        free(e);
        return &oom_err;
    }
    vsnprintf(e->msg, (size_t)n + 1, fmt, ap);
    e->code = code;
    return e;
}

tern_err *tern_errf(tern_code code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tern_err *e = tern_verrf(code, fmt, ap);
    va_end(ap);
    return e;
}

tern_err *tern_err_wrap(tern_err *err, const char *fmt, ...) {
    if (!err || err == &oom_err)
        return err;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return err;
    size_t old = strlen(err->msg);
    char *m = malloc((size_t)n + 2 + old + 1);
    if (!m)
        return err;
    va_start(ap, fmt);
    vsnprintf(m, (size_t)n + 1, fmt, ap);
    va_end(ap);
    memcpy(m + n, ": ", 2);
    memcpy(m + n + 2, err->msg, old + 1);
    free(err->msg);
    err->msg = m;
    return err;
}

void tern_err_free(tern_err *err) {
    if (!err || err == &oom_err)
        return;
    free(err->msg);
    free(err);
}

const char *tern_err_msg(const tern_err *err) { return err ? err->msg : "ok"; }

const char *tern_code_name(tern_code code) {
    switch (code) {
    case TERN_OK: return "ok";
    case TERN_EINVAL: return "invalid argument";
    case TERN_EIO: return "i/o error";
    case TERN_ENOMEM: return "out of memory";
    case TERN_EFORMAT: return "format error";
    case TERN_ENOTFOUND: return "not found";
    case TERN_EUNSUPPORTED: return "unsupported";
    case TERN_EOVERLOAD: return "overloaded";
    case TERN_ECANCELLED: return "cancelled";
    case TERN_EINTERNAL: return "internal error";
    }
    return "unknown error";
}
