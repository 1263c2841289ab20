/* args.h — a small option parser shared by the verbs: "--name value", "--name=value", flags, positionals. */
#ifndef TERN_CLI_ARGS_H
#define TERN_CLI_ARGS_H

#include <stdint.h>

typedef struct tern_opt {
    const char *name;  /* without dashes, e.g. "preset" */
    int takes_value;   /* 0 = boolean flag */
    const char *value; /* set by tern_args_parse; "1" for a present flag */
} tern_opt;

/* Parses argv[1..argc) into opts (NULL-name terminated) and up to max_pos positionals.
 * Returns the number of positionals, or -1 after printing "tern VERB: ..." to stderr. */
int tern_args_parse(const char *verb, int argc, char **argv, tern_opt *opts, const char **pos, int max_pos);
/* The value of option `name`, or NULL. */
const char *tern_args_get(const tern_opt *opts, const char *name);
/* Parses an integer option in [lo, hi]; missing -> dflt. Returns 0, or -1 after printing an error. */
int tern_args_int(const char *verb, const tern_opt *opts, const char *name, int64_t dflt, int64_t lo, int64_t hi,
                  int64_t *out);

#endif
