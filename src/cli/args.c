/* args.c — option parsing for the verbs. */
#include "cli/args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp's short options and long spellings, by the option they mean here. */
static const struct {
    const char *alias, *name;
} aliases[] = {
    {"h", "help"},   {"m", "model"},    {"c", "ctx"},       {"t", "threads"}, {"np", "parallel"},
    {"p", "prompt"}, {"s", "seed"},     {"o", "out"},       {"ctx-size", "ctx"}, {"n-predict", "n"},
    {"predict", "n"}, {"temperature", "temp"},
};

static tern_opt *find_opt(tern_opt *opts, const char *name, size_t len) {
    for (tern_opt *o = opts; o->name; o++)
        if (strlen(o->name) == len && !strncmp(o->name, name, len))
            return o;
    return NULL;
}

/* The option an argument names: itself, else its alias's target. */
static tern_opt *resolve(tern_opt *opts, const char *name, size_t len) {
    tern_opt *o = find_opt(opts, name, len);
    for (size_t i = 0; !o && i < sizeof aliases / sizeof aliases[0]; i++)
        if (strlen(aliases[i].alias) == len && !strncmp(aliases[i].alias, name, len))
            o = find_opt(opts, aliases[i].name, strlen(aliases[i].name));
    return o;
}

static size_t edit_distance(const char *a, size_t na, const char *b, size_t nb) {
    size_t row[64];
    if (nb >= sizeof row / sizeof row[0])
        return (size_t)-1;
    for (size_t j = 0; j <= nb; j++)
        row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[nb];
}

const char *tern_args_closest(const char *word, size_t len, const char *const *candidates, size_t n) {
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        size_t cl = strlen(candidates[i]);
        size_t d = edit_distance(word, len, candidates[i], cl);
        /* A prefix of a long name ("--temp" for "--temperature") counts as close too. */
        if (len >= 3 && cl > len && !strncmp(word, candidates[i], len))
            d = 1;
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
    size_t allowed = len < 4 ? 1 : len < 8 ? 2 : 3;
    return best_d <= allowed ? best : NULL;
}

static void unknown(const char *verb, const char *dashes, const char *name, size_t len, const tern_opt *opts) {
    const char *names[128];
    size_t n = 0;
    for (const tern_opt *o = opts; o->name && n < sizeof names / sizeof names[0]; o++)
        names[n++] = o->name;
    const char *near = tern_args_closest(name, len, names, n);
    fprintf(stderr, "tern %s: unknown option %s%.*s", verb, dashes, (int)len, name);
    if (near)
        fprintf(stderr, "; did you mean --%s?", near);
    fprintf(stderr, " (see 'tern %s --help')\n", verb);
}

int tern_args_parse(const char *verb, int argc, char **argv, tern_opt *opts, const char **pos, int max_pos) {
    int npos = 0;
    tern_opt *model = find_opt(opts, "model", 5);
    const int pos_cap = max_pos - (model != NULL); /* room left for a model given as an option */
    int only_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_pos && !strcmp(a, "--")) {
            only_pos = 1;
            continue;
        }
        if (!only_pos && a[0] == '-' && a[1] && !(a[1] >= '0' && a[1] <= '9')) {
            const int long_form = a[1] == '-';
            const char *name = a + 1 + long_form, *eq = long_form ? strchr(name, '=') : NULL;
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            tern_opt *o = resolve(opts, name, len);
            if (!o) {
                unknown(verb, long_form ? "--" : "-", name, len, opts);
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
                fprintf(stderr, "tern %s: %s needs a value\n", verb, a);
                return -1;
            }
        } else {
            if (npos >= max_pos) {
                fprintf(stderr, "tern %s: unexpected argument '%s' (see 'tern %s --help')\n", verb, a, verb);
                return -1;
            }
            pos[npos++] = a;
        }
    }
    if (model && model->value) {
        if (npos > pos_cap) {
            fprintf(stderr, "tern %s: the model is given as -m '%s', so '%s' is one argument too many\n", verb,
                    model->value, pos[pos_cap]);
            return -1;
        }
        memmove(pos + 1, pos, (size_t)npos * sizeof *pos);
        pos[0] = model->value;
        npos++;
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

int tern_args_float(const char *verb, const tern_opt *opts, const char *name, float dflt, float lo, float hi,
                    float *out) {
    const char *v = tern_args_get(opts, name);
    *out = dflt;
    if (!v)
        return 0;
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "tern %s: --%s must be a number in [%g, %g], got '%s'\n", verb, name, lo, hi, v);
        return -1;
    }
    *out = (float)x;
    return 0;
}
