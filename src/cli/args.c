/* args.c — option parsing for the verbs. */
#include "cli/args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tern_opt *find_opt(tern_opt *opts, const char *name, size_t len) {
    for (tern_opt *o = opts; o->name; o++)
        if (strlen(o->name) == len && !strncmp(o->name, name, len))
            return o;
    return NULL;
}

int tern_args_parse(const char *verb, int argc, char **argv, tern_opt *opts, const char **pos, int max_pos) {
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] == '-' && a[1] == '-' && a[2]) {
            const char *name = a + 2, *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            tern_opt *o = find_opt(opts, name, len);
            if (!o) {
                fprintf(stderr, "tern %s: unknown option --%.*s (see 'tern %s --help')\n", verb, (int)len, name, verb);
                return -1;
            }
            if (!o->takes_value) {
                if (eq) {
                    fprintf(stderr, "tern %s: --%s takes no value\n", verb, o->name);
                    return -1;
                }
                o->value = "1";
            } else if (eq) {
                o->value = eq + 1;
            } else if (i + 1 < argc) {
                o->value = argv[++i];
            } else {
                fprintf(stderr, "tern %s: --%s needs a value\n", verb, o->name);
                return -1;
            }
        } else if (!strcmp(a, "-n") || !strcmp(a, "-p")) {
            tern_opt *o = find_opt(opts, a + 1, 1);
            if (!o || i + 1 >= argc) {
                fprintf(stderr, "tern %s: %s needs a value\n", verb, a);
                return -1;
            }
            o->value = argv[++i];
        } else {
            if (npos >= max_pos) {
                fprintf(stderr, "tern %s: unexpected argument '%s'\n", verb, a);
                return -1;
            }
            pos[npos++] = a;
        }
    }
    return npos;
}

const char *tern_args_get(const tern_opt *opts, const char *name) {
    for (const tern_opt *o = opts; o->name; o++)
        if (!strcmp(o->name, name))
            return o->value;
    return NULL;
}

int tern_args_int(const char *verb, const tern_opt *opts, const char *name, int64_t dflt, int64_t lo, int64_t hi,
                  int64_t *out) {
    const char *v = tern_args_get(opts, name);
    if (!v) {
        *out = dflt;
        return 0;
    }
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "tern %s: --%s must be an integer in [%lld, %lld], got '%s'\n", verb, name, (long long)lo,
                (long long)hi, v);
        return -1;
    }
    *out = x;
    return 0;
}
