/* json_util.c — jansson helpers. */
#include "core/json_util.h"

#include <math.h>
#include <string.h>
#include <stdlib.h>

#include "core/fileio.h"

tern_err *tern_json_load_buf(const char *buf, size_t len, const char *what, json_t **out) {
    json_error_t je;
    *out = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!*out)
        return tern_errf(TERN_EFORMAT, "%s: invalid JSON at line %d column %d: %s", what, je.line, je.column,
                         je.text);
    return NULL;
}

tern_err *tern_json_load_file(const char *path, size_t max_bytes, json_t **out) {
    char *buf;
    size_t len;
    *out = NULL;
    TERN_TRY(tern_read_file(path, max_bytes, &buf, &len));
    tern_err *e = tern_json_load_buf(buf, len, path, out);
    free(buf);
    return e;
}

tern_err *tern_json_load_in(const char *dir, const char *name, size_t max_bytes, json_t **out) {
    *out = NULL;
    char *path = tern_path_join(dir, name);
    if (!path)
        return tern_errf(TERN_ENOMEM, "out of memory");
    tern_err *err = tern_json_load_file(path, max_bytes, out);
    free(path);
    return err;
}

tern_err *tern_json_get_int(const json_t *obj, const char *key, int64_t dflt, int64_t lo, int64_t hi, int64_t *out) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return NULL;
    }
    int64_t x;
    if (json_is_integer(v)) {
        x = (int64_t)json_integer_value(v);
    } else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
               fabs(json_real_value(v)) < 9e15) {
        x = (int64_t)json_real_value(v);
    } else {
        return tern_errf(TERN_EFORMAT, "\"%s\" must be an integer", key);
    }
    if (x < lo || x > hi)
        return tern_errf(TERN_EFORMAT, "\"%s\" = %lld is out of range [%lld, %lld]", key, (long long)x,
                         (long long)lo, (long long)hi);
    *out = x;
    return NULL;
}

tern_err *tern_json_get_num(const json_t *obj, const char *key, double dflt, double *out) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return NULL;
    }
    if (!json_is_number(v))
        return tern_errf(TERN_EFORMAT, "\"%s\" must be a number", key);
    *out = json_number_value(v);
    if (!isfinite(*out))
        return tern_errf(TERN_EFORMAT, "\"%s\" must be finite", key);
    return NULL;
}

tern_err *tern_json_get_bool(const json_t *obj, const char *key, int dflt, int *out) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return NULL;
    }
    if (!json_is_boolean(v))
        return tern_errf(TERN_EFORMAT, "\"%s\" must be true or false", key);
    *out = json_is_true(v);
    return NULL;
}

tern_err *tern_json_save_file(const json_t *v, const char *path) {
    char *s = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    if (!s)
        return tern_errf(TERN_ENOMEM, "%s: cannot serialise JSON", path);
    tern_err *e = tern_write_file(path, s, strlen(s));
    free(s);
    return e;
}

const char *tern_json_type_name(const json_t *v) {
    if (!v)
        return "nothing";
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}
