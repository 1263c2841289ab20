/* bench_startup.h — `tern bench --startup`: start-to-ready of `tern serve`, cold and warm, beside reading the
 * model's files once. */
#ifndef TERN_CLI_BENCH_STARTUP_H
#define TERN_CLI_BENCH_STARTUP_H

/* Runs `rounds` rounds (files read once cold, a cold start, a warm start) and prints the medians (JSON with
 * `json`); returns the process exit code. */
int tern_bench_startup(const char *model, int rounds, int threads, int json);

#endif
