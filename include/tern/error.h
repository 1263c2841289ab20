/* error.h — errors as values, the public half: what a caller of libtern reads and frees.
 *
 * A fallible function returns `tern_err *`: NULL on success, otherwise a heap error carrying a code and a
 * message a user can act on, outermost context first ("model.safetensors: tensor x.weight: data offsets
 * [0, 12) exceed file size 8"). Read it with tern_err_msg and err->code, free it with tern_err_free. */
#ifndef TERN_ERROR_H
#define TERN_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* The library's exported symbols (everything else in libtern.so is hidden). */
#ifndef TERN_API
#define TERN_API __attribute__((visibility("default")))
#endif

/* On every function that returns an error: a caller that drops it unread gets a compiler warning. */
#ifndef TERN_MUST_CHECK
#define TERN_MUST_CHECK __attribute__((warn_unused_result))
#endif

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

/* Frees an error; NULL is fine. */
TERN_API void tern_err_free(tern_err *err);
/* The message of `err`, or "ok" for NULL. */
TERN_API const char *tern_err_msg(const tern_err *err);
/* A short stable name for a code ("invalid argument", "format error", ...). */
TERN_API const char *tern_code_name(tern_code code);

#ifdef __cplusplus
}
#endif

#endif
