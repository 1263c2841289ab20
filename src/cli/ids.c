/* ids.c — token id lists from the command line. */
#include "cli/ids.h"

#include <ctype.h>
#include <stdlib.h>

tern_err *tern_parse_ids(const char *s, int32_t **ids, int64_t *n) {
    *ids = NULL;
    *n = 0;
    int64_t cap = 16, k = 0;
    int32_t *v = malloc((size_t)cap * sizeof *v);
    if (!v)
        return tern_errf(TERN_ENOMEM, "out of memory");
    const char *p = s;
    while (*p) {
        while (*p == ',' || isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        if (!isdigit((unsigned char)*p)) {
            free(v);
            return tern_errf(TERN_EINVAL, "--ids: expected a non-negative integer at \"%.16s\"", p);
        }
        long long x = 0;
        while (isdigit((unsigned char)*p)) {
            x = x * 10 + (*p++ - '0');
            if (x > INT32_MAX) {
                free(v);
                return tern_errf(TERN_EINVAL, "--ids: token id too large");
            }
        }
        if (k == cap) {
            int32_t *nv = realloc(v, (size_t)(cap *= 2) * sizeof *nv);
            if (!nv) {
                free(v);
                return tern_errf(TERN_ENOMEM, "out of memory");
            }
            v = nv;
        }
        v[k++] = (int32_t)x;
    }
    if (k == 0) {
        free(v);
        return tern_errf(TERN_EINVAL, "--ids: no token ids given");
    }
    *ids = v;
    *n = k;
    return NULL;
}
