/* json_util.h — small helpers over jansson with errors that name the file and key. */
#ifndef TERN_CORE_JSON_UTIL_H
#define TERN_CORE_JSON_UTIL_H

#include <jansson.h>
#include <stdint.h>

#include "core/status.h"

/* Parses a JSON file (size-capped at max_bytes) into *out; the error names file, line and column. */
TERN_MUST_CHECK tern_err *tern_json_load_file(const char *path, size_t max_bytes, json_t **out);
/* tern_json_load_file of the file `name` in folder dir (a checkpoint's "config.json", say). */
TERN_MUST_CHECK tern_err *tern_json_load_in(const char *dir, const char *name, size_t max_bytes, json_t **out);
/* Parses a buffer; `what` names the source in errors. */
TERN_MUST_CHECK tern_err *tern_json_load_buf(const char *buf, size_t len, const char *what, json_t **out);
/* Reads an integer member: absent or null -> *out = dflt; wrong type or out of [lo,hi] -> error naming `key`. */
TERN_MUST_CHECK tern_err *tern_json_get_int(const json_t *obj, const char *key, int64_t dflt, int64_t lo, int64_t hi, int64_t *out);
/* Reads a number member (integer or real) with the same rules. */
TERN_MUST_CHECK tern_err *tern_json_get_num(const json_t *obj, const char *key, double dflt, double *out);
/* Reads a boolean member: absent or null -> dflt. */
TERN_MUST_CHECK tern_err *tern_json_get_bool(const json_t *obj, const char *key, int dflt, int *out);
/* "an object", "an array", "a string", "a number", "a boolean", "null" (or "nothing" for NULL), for messages
 * like "\"stop\" must be a string, got a number". */
const char *tern_json_type_name(const json_t *v);
/* Writes `v` to `path` with indentation (sorted keys off: insertion order kept). */
TERN_MUST_CHECK tern_err *tern_json_save_file(const json_t *v, const char *path);

#endif
