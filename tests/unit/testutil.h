/* testutil.h — shared helpers for the unit tests (cmocka). */
#ifndef TERN_TESTUTIL_H
#define TERN_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>

#include "core/status.h"
#include "models/synth.h"
#include "tokenizer/tokenizer.h"
#include "tensor/cpu.h"
#include "tensor/weight.h"

/* Path under tests/data (TERN_TESTDATA); static buffer, valid until the next call. */
const char *tu_testdata(const char *rel);
/* A fresh empty directory for this test under TERN_TMP (or /tmp); static buffer. */
const char *tu_tmpdir(const char *name);
/* Path of the tern binary (TERN_BIN). */
const char *tu_tern_bin(void);
/* Writes bytes to dir/name, returns the full path (static buffer). */
const char *tu_write(const char *dir, const char *name, const void *data, size_t len);
/* Runs a shell command, captures stdout into *out (malloc'd, may be NULL), returns the exit status. */
int tu_run(const char *cmd, char **out);
/* tu_run with a printf-style command line. */
int tu_runf(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Runs a printf-style command line that must exit 0 and print JSON on stdout; returns it parsed (the test fails,
 * showing the output, otherwise). */
json_t *tu_run_json(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Calls fn(ctx, text, len, ids, n_ids) for each case of the tokenizer test vectors vocab/ggml-vocab-NAME.gguf.inp
 * and .out (llama.cpp's test-tokenizer-0 layout: cases separated by "\n__ggml_vocab_test__\n", one line of ids
 * per case); fails if there are fewer id lines than cases. Returns the number of cases. */
int tu_vocab_vectors(const char *name, void (*fn)(void *ctx, const char *text, size_t len, const int32_t *ids,
                                                  size_t n_ids),
                     void *ctx);
/* Writes the tests' tiny random Gemma 4 (vocabulary 512, 6 layers: sliding, full and KV-shared ones,
 * double-wide MLP, per-layer inputs, window 8) to a fresh directory `name` under the test scratch area, in
 * dtype dt (MLX recipes at group 32) from `seed`; `quantization` (JSON, or NULL) is the config's
 * "quantization" entry. The directory is written into dir[4096]. */
tern_err *tu_tiny_model(const char *name, tern_synth_dtype dt, uint64_t seed, const char *quantization, char *dir);
/* The next pseudo-random value in [-1, 1) of a xorshift64 sequence held in *state (non-zero). */
float tu_frand(uint64_t *state);
/* An MLX affine weight [rows][in] (bits, group, scale dtype sdt) quantized from pseudo-random rows whose groups
 * have uneven ranges; fills w and returns its buffers in *data, *scales, *biases (the caller frees them). */
void tu_mlx_weight(tern_weight *w, int64_t rows, int64_t in, int bits, int group, tern_dtype sdt, uint64_t seed,
                   void **data, void **scales, void **biases);
/* Tokenizes text[0..len) and fails the test, listing what came out, unless the ids are exactly want[0..n_want). */
void tu_expect_ids(const tern_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                   const tern_token *want, size_t n_want);
/* tu_expect_ids with a NUL-terminated text and the expected ids as the trailing arguments. */
#define TU_EXPECT_IDS(t, text, add, parse, ...)                                                          \
    do {                                                                                                 \
        static const tern_token want_[] = {__VA_ARGS__};                                                 \
        tu_expect_ids((t), (text), strlen(text), (add), (parse), want_, sizeof want_ / sizeof want_[0]); \
    } while (0)
/* Tests of one kernel path: TU_ISA_TESTS(f) registers f once per path (f[portable], f[avx2], f[avx512]). f calls
 * tu_isa_begin(state) first: on a CPU without that path (or one TERN_ISA=portable|avx2 caps) the test reports
 * itself skipped (nothing was checked); otherwise the path is made active and returned. The teardown makes the
 * best path active again. */
tern_isa tu_isa_begin(void **state);
int tu_isa_restore(void **state);
extern const tern_isa tu_isa_paths[4];
#define TU_ISA_TEST(f, i, name) {#f "[" name "]", f, NULL, tu_isa_restore, (void *)&tu_isa_paths[i]}
#define TU_ISA_TESTS(f)                                                                                    \
    TU_ISA_TEST(f, 0, "portable"), TU_ISA_TEST(f, 1, "avx2"), TU_ISA_TEST(f, 2, "avx512"), TU_ISA_TEST(f, 3, "amx")
/* The SIMD paths only (tests comparing a SIMD path with the portable one). */
#define TU_SIMD_TESTS(f) TU_ISA_TEST(f, 1, "avx2"), TU_ISA_TEST(f, 2, "avx512"), TU_ISA_TEST(f, 3, "amx")
/* Fails the test with the error's message if err is not NULL. */
#define TU_OK(expr)                                                        \
    do {                                                                   \
        tern_err *tu_e_ = (expr);                                          \
        if (tu_e_) {                                                       \
            print_error("unexpected error: %s\n", tern_err_msg(tu_e_));    \
            tern_err_free(tu_e_);                                          \
            fail();                                                        \
        }                                                                  \
    } while (0)
/* Asserts that expr fails with a message containing `needle`, then frees the error. */
#define TU_FAILS_WITH(expr, needle) tu_expect_error((expr), (needle), __FILE__, __LINE__)
void tu_expect_error(tern_err *err, const char *needle, const char *file, int line);

#endif
