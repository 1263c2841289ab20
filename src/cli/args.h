/* args.h — the option parser every verb uses: "--name value", "--name=value", flags, positionals, "-h", the
 * short options llama.cpp users type (-m -c -t -np -n -p -s -o), and "did you mean" for unknown options. */
#ifndef TERN_CLI_ARGS_H
#define TERN_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>

typedef struct tern_opt {
    const char *name;  /* without dashes, e.g. "preset" */
    int takes_value;   /* 0 = boolean flag */
    const char *value; /* set by tern_args_parse; "1" for a present flag */
} tern_opt;

/* Parses argv[1..argc) into opts (NULL-name terminated) and up to max_pos positionals. A short option "-x"
 * is the verb's option named "x" if it has one, else the long option llama.cpp gives that letter ("-m" model,
 * "-c" ctx, "-t" threads, "-np" parallel, "-n" n, "-p" prompt, "-s" seed, "-o" out, "-h" help). A verb with a
 * "model" option takes the model either as "-m DIR" / "--model DIR" or as the first positional: given as an
 * option it is moved in front of the positionals, so pos[0] is the model either way.
 * Returns the number of positionals, or -1 after printing "tern VERB: ..." to stderr (unknown options name the
 * closest valid one). */
int tern_args_parse(const char *verb, int argc, char **argv, tern_opt *opts, const char **pos, int max_pos);
/* The value of option `name`, or NULL. */
const char *tern_args_get(const tern_opt *opts, const char *name);
/* Parses an integer option in [lo, hi]; missing -> dflt. Returns 0, or -1 after printing an error. */
int tern_args_int(const char *verb, const tern_opt *opts, const char *name, int64_t dflt, int64_t lo, int64_t hi,
                  int64_t *out);
/* Parses a number option in [lo, hi]; missing -> dflt. Returns 0, or -1 after printing an error. */
int tern_args_float(const char *verb, const tern_opt *opts, const char *name, float dflt, float lo, float hi,
                    float *out);
/* The candidate closest to `word` by edit distance, or NULL when none is close enough to be a likely typo. */
const char *tern_args_closest(const char *word, size_t len, const char *const *candidates, size_t n);

#endif
