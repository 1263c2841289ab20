/* test_gguf.c — GGUF reader: the real vocabulary files, a file with tensors built here, typed getters and
 * their coercions, and corrupt files that must fail with a precise message (never crash). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "testutil.h"

/* ---- a tiny GGUF writer ---------------------------------------------------------------------- */

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_u8(buf *b, uint8_t v) { put(b, &v, 1); }
static void put_u32(buf *b, uint32_t v) {
    unsigned char x[4] = {v, v >> 8, v >> 16, v >> 24};
    put(b, x, 4);
}
static void put_u64(buf *b, uint64_t v) {
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}
static void put_f32(buf *b, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    put_u32(b, u);
}
static void put_f64(buf *b, double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    put_u64(b, u);
}
static void put_str(buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void header(buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    put(b, "GGUF", 4);
    put_u32(b, version);
    put_u64(b, n_tensors);
    put_u64(b, n_kv);
}
static void kv_u32(buf *b, const char *key, uint32_t v) {
    put_str(b, key);
    put_u32(b, TERN_GGUF_U32);
    put_u32(b, v);
}
static void kv_str(buf *b, const char *key, const char *v) {
    put_str(b, key);
    put_u32(b, TERN_GGUF_STRING);
    put_str(b, v);
}
static void tensor_info(buf *b, const char *name, uint32_t n_dims, const uint64_t *dims, uint32_t type, uint64_t off) {
    put_str(b, name);
    put_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++)
        put_u64(b, dims[i]);
    put_u32(b, type);
    put_u64(b, off);
}
static void pad_to(buf *b, size_t align) {
    while (b->n % align)
        put_u8(b, 0);
}

static TERN_MUST_CHECK tern_err *parse(const buf *b, tern_gguf **g) { return tern_gguf_parse(b->p, b->n, "t.gguf", g); }

/* ---- the real vocabulary files ---------------------------------------------------------------- */

static void expect_str(const tern_gguf_array *a, uint64_t i, const char *want) {
    tern_gguf_str s;
    TU_OK(tern_gguf_array_str(a, i, &s));
    assert_int_equal(s.len, strlen(want));
    assert_memory_equal(s.ptr, want, s.len);
}

static void test_gemma4_vocab(void **state) {
    tern_gguf *g;
    TU_OK(tern_gguf_open(tu_testdata("vocab/ggml-vocab-gemma-4.gguf"), &g));
    assert_int_equal(tern_gguf_version(g), 3);
    assert_int_equal(tern_gguf_kv_count(g), 42);
    assert_int_equal(tern_gguf_tensor_count(g), 0);
    char *arch;
    TU_OK(tern_gguf_get_str_dup(g, "general.architecture", &arch));
    assert_string_equal(arch, "gemma4");
    free(arch);
    tern_gguf_str model;
    TU_OK(tern_gguf_get_str(g, "tokenizer.ggml.model", &model));
    assert_int_equal(model.len, 6);
    assert_memory_equal(model.ptr, "gemma4", 6);

    tern_gguf_array tokens;
    TU_OK(tern_gguf_get_array(g, "tokenizer.ggml.tokens", &tokens));
    assert_int_equal(tokens.elem_type, TERN_GGUF_STRING);
    assert_int_equal(tokens.count, 262144);
    expect_str(&tokens, 0, "<pad>");
    expect_str(&tokens, 2, "<bos>");
    expect_str(&tokens, 105, "<|turn>");
    TU_FAILS_WITH(tern_gguf_array_str(&tokens, 262144, &model), "index 262144 out of range");

    tern_gguf_array scores, types, merges;
    TU_OK(tern_gguf_get_array(g, "tokenizer.ggml.scores", &scores));
    assert_int_equal(scores.elem_type, TERN_GGUF_F32);
    assert_int_equal(scores.count, 262144);
    float f;
    TU_OK(tern_gguf_array_f32(&scores, 0, &f));
    assert_true(f == -1000.0f);
    TU_OK(tern_gguf_get_array(g, "tokenizer.ggml.token_type", &types));
    assert_int_equal(types.elem_type, TERN_GGUF_I32);
    int64_t tt;
    TU_OK(tern_gguf_array_i64(&types, 2, &tt));
    assert_int_equal(tt, 3); /* control */
    TU_FAILS_WITH(tern_gguf_array_f32(&types, 0, &f), "expected an array of f32, found an array of i32");
    TU_FAILS_WITH(tern_gguf_array_str(&types, 0, &model), "expected an array of string");
    TU_OK(tern_gguf_get_array(g, "tokenizer.ggml.merges", &merges));
    assert_int_equal(merges.count, 514906);
    tern_gguf_str last;
    TU_OK(tern_gguf_array_str(&merges, 514905, &last));
    assert_non_null(memchr(last.ptr, ' ', last.len)); /* "left right" */

    uint32_t bos;
    TU_OK(tern_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &bos));
    assert_int_equal(bos, 2);
    int add_bos;
    TU_OK(tern_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos));
    assert_true(add_bos);
    tern_gguf_array kvh;
    TU_OK(tern_gguf_get_array(g, "gemma4.attention.head_count_kv", &kvh));
    assert_int_equal(kvh.count, 30);
    TU_FAILS_WITH(tern_gguf_get_u32(g, "no.such.key", &bos), "key 'no.such.key' not found");
    TU_FAILS_WITH(tern_gguf_get_u32(g, "general.architecture", &bos), "expected u32, found string");
    assert_true(tern_gguf_find(g, "tokenizer.ggml.merges") >= 0);
    assert_int_equal(tern_gguf_find(g, "tokenizer.ggml"), -1);
    tern_gguf_close(g);
}

static void test_llama_vocabs(void **state) {
    tern_gguf *g;
    TU_OK(tern_gguf_open(tu_testdata("vocab/ggml-vocab-llama-bpe.gguf"), &g));
    tern_gguf_array tokens, merges;
    TU_OK(tern_gguf_get_array(g, "tokenizer.ggml.tokens", &tokens));
    assert_int_equal(tokens.count, 128256);
    expect_str(&tokens, 0, "!");
    expect_str(&tokens, 128000, "<|begin_of_text|>");
    TU_OK(tern_gguf_get_array(g, "tokenizer.ggml.merges", &merges));
    assert_int_equal(merges.count, 280147);
    expect_str(&merges, 0, "\xc4\xa0 \xc4\xa0"); /* "Ġ Ġ" */
    tern_gguf_str pre;
    TU_OK(tern_gguf_get_str(g, "tokenizer.ggml.pre", &pre));
    assert_int_equal(pre.len, 9);
    assert_memory_equal(pre.ptr, "llama-bpe", 9);
    uint64_t bos;
    TU_OK(tern_gguf_get_u64(g, "tokenizer.ggml.bos_token_id", &bos)); /* u32 widens to u64 */
    assert_int_equal(bos, 128000);
    tern_gguf_close(g);

    TU_OK(tern_gguf_open(tu_testdata("vocab/ggml-vocab-llama-spm.gguf"), &g));
    TU_OK(tern_gguf_get_array(g, "tokenizer.ggml.tokens", &tokens));
    assert_int_equal(tokens.count, 32000);
    expect_str(&tokens, 1, "<s>");
    expect_str(&tokens, 3, "<0x00>");
    int add_eos;
    TU_OK(tern_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &add_eos));
    assert_false(add_eos);
    tern_gguf_close(g);

    TU_FAILS_WITH(tern_gguf_open(tu_testdata("vocab/no-such-file.gguf"), &g), "no-such-file.gguf: cannot open");
    assert_null(g);
}

/* ---- a file with every value type and some tensors -------------------------------------------- */

static buf build_full(size_t *data_end) {
    buf b = {0};
    header(&b, 3, 4, 14);
    kv_str(&b, "general.architecture", "toy");
    kv_u32(&b, "general.alignment", 64);
    put_str(&b, "v.u8"), put_u32(&b, TERN_GGUF_U8), put_u8(&b, 200);
    put_str(&b, "v.i8"), put_u32(&b, TERN_GGUF_I8), put_u8(&b, 0xfe); /* -2 */
    put_str(&b, "v.u16"), put_u32(&b, TERN_GGUF_U16), put_u8(&b, 0x34), put_u8(&b, 0x12);
    put_str(&b, "v.i64"), put_u32(&b, TERN_GGUF_I64), put_u64(&b, (uint64_t)-5);
    put_str(&b, "v.u64big"), put_u32(&b, TERN_GGUF_U64), put_u64(&b, 1ull << 40);
    put_str(&b, "v.f32"), put_u32(&b, TERN_GGUF_F32), put_f32(&b, 0.25f);
    put_str(&b, "v.f64half"), put_u32(&b, TERN_GGUF_F64), put_f64(&b, 1.5);
    put_str(&b, "v.f64tenth"), put_u32(&b, TERN_GGUF_F64), put_f64(&b, 0.1);
    put_str(&b, "v.bool"), put_u32(&b, TERN_GGUF_BOOL), put_u8(&b, 1);
    /* [[1,2],[3]] of u16 */
    put_str(&b, "v.nested"), put_u32(&b, TERN_GGUF_ARRAY), put_u32(&b, TERN_GGUF_ARRAY), put_u64(&b, 2);
    put_u32(&b, TERN_GGUF_U16), put_u64(&b, 2), put_u8(&b, 1), put_u8(&b, 0), put_u8(&b, 2), put_u8(&b, 0);
    put_u32(&b, TERN_GGUF_U16), put_u64(&b, 1), put_u8(&b, 3), put_u8(&b, 0);
    /* [["a","bc"],[]] */
    put_str(&b, "v.nested_str"), put_u32(&b, TERN_GGUF_ARRAY), put_u32(&b, TERN_GGUF_ARRAY), put_u64(&b, 2);
    put_u32(&b, TERN_GGUF_STRING), put_u64(&b, 2), put_str(&b, "a"), put_str(&b, "bc");
    put_u32(&b, TERN_GGUF_STRING), put_u64(&b, 0);
    put_str(&b, "v.strs"), put_u32(&b, TERN_GGUF_ARRAY), put_u32(&b, TERN_GGUF_STRING), put_u64(&b, 3);
    put_str(&b, "x"), put_str(&b, ""), put_str(&b, "hello");

    uint64_t d_f32[2] = {4, 3}, d_q8[2] = {64, 2}, d_unk[1] = {8}, d_q4k[1] = {256};
    tensor_info(&b, "w.f32", 2, d_f32, TERN_GGML_F32, 0);               /* 48 bytes */
    tensor_info(&b, "w.q8", 2, d_q8, TERN_GGML_Q8_0, 64);               /* 4 blocks * 34 = 136 */
    tensor_info(&b, "w.unknown", 1, d_unk, 200, 256);                   /* size unknown */
    tensor_info(&b, "w.q4k", 1, d_q4k, TERN_GGML_Q4_K, 320);            /* 144 */
    pad_to(&b, 64);
    size_t data_start = b.n;
    for (int i = 0; i < 12; i++)
        put_f32(&b, (float)i);
    pad_to(&b, 64);
    for (int i = 0; i < 136; i++)
        put_u8(&b, (uint8_t)i);
    while (b.n < data_start + 320 + 144)
        put_u8(&b, 0xaa);
    *data_end = b.n;
    return b;
}

static void test_built_file(void **state) {
    size_t data_end;
    buf b = build_full(&data_end);
    const char *path = tu_write(tu_tmpdir("gguf"), "full.gguf", b.p, b.n);
    tern_gguf *g;
    TU_OK(tern_gguf_open(path, &g));
    assert_int_equal(tern_gguf_alignment(g), 64);
    assert_int_equal(tern_gguf_data_offset(g) % 64, 0);
    assert_int_equal(tern_gguf_kv_count(g), 14);
    assert_string_equal(tern_gguf_kv_key(g, 2), "v.u8");
    assert_int_equal(tern_gguf_kv_type(g, 2), TERN_GGUF_U8);

    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f;
    double d;
    int bl;
    TU_OK(tern_gguf_get_u32(g, "v.u8", &u32));
    assert_int_equal(u32, 200);
    TU_OK(tern_gguf_get_i32(g, "v.i8", &i32));
    assert_int_equal(i32, -2);
    TU_FAILS_WITH(tern_gguf_get_u32(g, "v.i8", &u32), "value -2 does not fit in u32");
    TU_OK(tern_gguf_get_u32(g, "v.u16", &u32));
    assert_int_equal(u32, 0x1234);
    TU_OK(tern_gguf_get_i64(g, "v.i64", &i64));
    assert_int_equal(i64, -5);
    TU_FAILS_WITH(tern_gguf_get_u64(g, "v.i64", &u64), "value -5 does not fit in u64");
    TU_OK(tern_gguf_get_u64(g, "v.u64big", &u64));
    assert_int_equal(u64, 1ull << 40);
    TU_FAILS_WITH(tern_gguf_get_u32(g, "v.u64big", &u32), "key 'v.u64big': value 1099511627776 does not fit in u32");
    TU_FAILS_WITH(tern_gguf_get_i32(g, "v.f32", &i32), "expected i32, found f32");
    TU_OK(tern_gguf_get_f32(g, "v.f32", &f));
    assert_true(f == 0.25f);
    TU_OK(tern_gguf_get_f32(g, "v.f64half", &f));
    assert_true(f == 1.5f);
    TU_FAILS_WITH(tern_gguf_get_f32(g, "v.f64tenth", &f), "not exactly representable as f32");
    TU_OK(tern_gguf_get_f64(g, "v.f64tenth", &d));
    assert_true(d == 0.1);
    TU_OK(tern_gguf_get_f64(g, "v.f32", &d));
    assert_true(d == 0.25);
    TU_FAILS_WITH(tern_gguf_get_f32(g, "v.u8", &f), "expected f32, found u8");
    TU_OK(tern_gguf_get_bool(g, "v.bool", &bl));
    assert_true(bl);
    TU_FAILS_WITH(tern_gguf_get_bool(g, "v.u8", &bl), "expected bool, found u8");

    tern_gguf_array a, sub;
    TU_OK(tern_gguf_get_array(g, "v.nested", &a));
    assert_int_equal(a.elem_type, TERN_GGUF_ARRAY);
    assert_int_equal(a.count, 2);
    TU_OK(tern_gguf_array_sub(&a, 1, &sub));
    assert_int_equal(sub.elem_type, TERN_GGUF_U16);
    assert_int_equal(sub.count, 1);
    TU_OK(tern_gguf_array_i64(&sub, 0, &i64));
    assert_int_equal(i64, 3);
    TU_OK(tern_gguf_array_sub(&a, 0, &sub));
    TU_OK(tern_gguf_array_f64(&sub, 1, &d));
    assert_true(d == 2.0);
    TU_FAILS_WITH(tern_gguf_array_i64(&a, 0, &i64), "expected an array of integers, found an array of array");
    TU_OK(tern_gguf_get_array(g, "v.nested_str", &a));
    TU_OK(tern_gguf_array_sub(&a, 0, &sub));
    expect_str(&sub, 1, "bc");
    TU_OK(tern_gguf_array_sub(&a, 1, &sub));
    assert_int_equal(sub.count, 0);
    TU_OK(tern_gguf_get_array(g, "v.strs", &a));
    expect_str(&a, 0, "x");
    expect_str(&a, 1, "");
    expect_str(&a, 2, "hello");
    TU_FAILS_WITH(tern_gguf_get_array(g, "v.u8", &a), "expected array, found u8");

    assert_int_equal(tern_gguf_tensor_count(g), 4);
    const tern_gguf_tensor *t = tern_gguf_find_tensor(g, "w.f32");
    assert_non_null(t);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->dims[0], 4);
    assert_int_equal(t->dims[1], 3);
    assert_int_equal(t->dims[2], 1);
    assert_int_equal(t->n_elems, 12);
    const void *data;
    size_t nbytes;
    TU_OK(tern_gguf_tensor_data(g, t, &data, &nbytes));
    assert_int_equal(nbytes, 48);
    const float *fp = data;
    assert_true(fp[0] == 0.0f && fp[11] == 11.0f);
    t = tern_gguf_find_tensor(g, "w.q8");
    TU_OK(tern_gguf_tensor_data(g, t, &data, &nbytes));
    assert_int_equal(nbytes, 4 * 34);
    assert_int_equal(((const unsigned char *)data)[135], 135);
    t = tern_gguf_find_tensor(g, "w.q4k");
    TU_OK(tern_gguf_tensor_data(g, t, &data, &nbytes));
    assert_int_equal(nbytes, 144);
    t = tern_gguf_find_tensor(g, "w.unknown");
    assert_int_equal(t->ggml_type, 200);
    TU_FAILS_WITH(tern_gguf_tensor_data(g, t, &data, &nbytes), "tensor 'w.unknown': ggml type 200 is unknown");
    assert_null(tern_gguf_find_tensor(g, "w"));
    assert_ptr_equal(tern_gguf_tensor_at(g, 1), tern_gguf_find_tensor(g, "w.q8"));
    assert_null(tern_gguf_tensor_at(g, 4));
    tern_gguf_close(g);

    /* Every prefix that cuts into the last tensor's data or earlier is refused cleanly. */
    for (size_t n = 0; n < b.n; n += (n < 600 ? 1 : 7)) {
        tern_err *e = tern_gguf_parse(b.p, n, "cut.gguf", &g);
        if (n >= data_end) {
            TU_OK(e);
            tern_gguf_close(g);
        } else {
            assert_non_null(e);
            assert_null(g);
            tern_err_free(e);
        }
    }
    free(b.p);
}

static void test_type_sizes(void **state) {
    struct { uint32_t type; uint64_t n; uint64_t bytes; } cases[] = {
        {TERN_GGML_F32, 10, 40},    {TERN_GGML_F16, 10, 20},   {TERN_GGML_BF16, 10, 20},  {TERN_GGML_Q8_0, 64, 68},
        {TERN_GGML_Q4_0, 64, 36},   {TERN_GGML_Q4_1, 32, 20},  {TERN_GGML_Q5_0, 32, 22},  {TERN_GGML_Q5_1, 32, 24},
        {TERN_GGML_Q8_1, 32, 36},   {TERN_GGML_Q4_K, 512, 288}, {TERN_GGML_Q6_K, 256, 210}, {TERN_GGML_Q2_K, 256, 84},
        {TERN_GGML_Q3_K, 256, 110}, {TERN_GGML_Q5_K, 256, 176}, {TERN_GGML_Q8_K, 256, 292}, {TERN_GGML_I32, 3, 12},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t n;
        TU_OK(tern_ggml_nbytes(cases[i].type, cases[i].n, cases[i].n, &n));
        assert_int_equal(n, cases[i].bytes);
    }
    uint64_t n;
    TU_FAILS_WITH(tern_ggml_nbytes(TERN_GGML_Q8_0, 33, 66, &n), "row length 33 is not a multiple of the q8_0 block length 32");
    TU_FAILS_WITH(tern_ggml_nbytes(4, 32, 32, &n), "ggml type 4 is unknown"); /* retired Q4_2 */
    TU_FAILS_WITH(tern_ggml_nbytes(TERN_GGML_F64, 1, UINT64_MAX / 4, &n), "overflow");
    assert_string_equal(tern_ggml_type_name(TERN_GGML_Q6_K), "q6_K");
    assert_string_equal(tern_ggml_type_name(99), "unknown");
}

/* ---- corrupt files ---------------------------------------------------------------------------- */

static void expect_corrupt(buf *b, const char *needle) {
    tern_gguf *g = (tern_gguf *)1;
    TU_FAILS_WITH(parse(b, &g), needle);
    assert_null(g);
    free(b->p);
    memset(b, 0, sizeof *b);
}

static void test_corrupt(void **state) {
    buf b = {0};
    put(&b, "GGML", 4), put_u32(&b, 3), put_u64(&b, 0), put_u64(&b, 0);
    expect_corrupt(&b, "t.gguf: not a GGUF file (bad magic");

    header(&b, 1, 0, 0);
    expect_corrupt(&b, "unsupported GGUF version 1");
    header(&b, 0x03000000u, 0, 0);
    expect_corrupt(&b, "big-endian GGUF files are not supported");
    put(&b, "GGUF\3\0\0", 7);
    expect_corrupt(&b, "truncated header");

    header(&b, 3, 0, 1000000);
    kv_u32(&b, "a", 1);
    expect_corrupt(&b, "key/value count 1000000 is absurd for a file of 41 bytes");
    header(&b, 3, UINT64_MAX, 0);
    expect_corrupt(&b, "tensor count 18446744073709551615 is absurd");

    header(&b, 3, 0, 1);
    put_u64(&b, 100), put(&b, "abcdefghijklmnopqrst", 20);
    expect_corrupt(&b, "key/value 0 of 1: key at offset 24: length 100 exceeds the 20 bytes left");
    header(&b, 3, 0, 2);
    kv_str(&b, "long.key.name", "value");
    put(&b, "\5\0\0", 3);
    expect_corrupt(&b, "key/value 1 of 2: key at offset 62: truncated length");

    header(&b, 3, 0, 1);
    put_str(&b, "k"), put_u32(&b, TERN_GGUF_STRING), put_u64(&b, 1ull << 62), put(&b, "xyzw", 4);
    expect_corrupt(&b, "key 'k': string value at offset 37: length 4611686018427387904 exceeds the 4 bytes left");
    header(&b, 3, 0, 1);
    put_str(&b, "k"), put_u32(&b, TERN_GGUF_U64), put_u32(&b, 7);
    expect_corrupt(&b, "key 'k': truncated u64 value at offset 37");

    header(&b, 3, 0, 1);
    put_str(&b, "k"), put_u32(&b, 13), put_u32(&b, 0);
    expect_corrupt(&b, "key 'k': unknown value type 13 at offset 33");

    header(&b, 3, 0, 1);
    put_str(&b, "k"), put_u32(&b, TERN_GGUF_ARRAY), put_u32(&b, TERN_GGUF_U32), put_u64(&b, 1ull << 62), put_u64(&b, 0);
    expect_corrupt(&b, "key 'k': array at offset 37: count 4611686018427387904 of u32 elements overflows the 8 bytes left");
    header(&b, 3, 0, 1);
    put_str(&b, "k"), put_u32(&b, TERN_GGUF_ARRAY), put_u32(&b, 99), put_u64(&b, 0);
    expect_corrupt(&b, "array at offset 37: unknown element type 99");
    header(&b, 3, 0, 1);
    put_str(&b, "k"), put_u32(&b, TERN_GGUF_ARRAY), put_u32(&b, TERN_GGUF_STRING), put_u64(&b, 2);
    put_str(&b, "ok"), put_u64(&b, 50), put(&b, "short", 5);
    expect_corrupt(&b, "key 'k': array at offset 37: element 1 of 2: string at offset 59: length 50 exceeds the 5 bytes left");

    header(&b, 3, 0, 1); /* arrays of arrays of arrays ... five deep */
    put_str(&b, "deep"), put_u32(&b, TERN_GGUF_ARRAY);
    for (int i = 0; i < 5; i++)
        put_u32(&b, TERN_GGUF_ARRAY), put_u64(&b, 1);
    put_u32(&b, TERN_GGUF_U8), put_u64(&b, 0);
    expect_corrupt(&b, "arrays nested deeper than 4 levels");

    header(&b, 3, 0, 2);
    kv_u32(&b, "same", 1), kv_u32(&b, "same", 2);
    expect_corrupt(&b, "duplicate key 'same' (key/values 0 and 1)");
    header(&b, 3, 0, 1);
    kv_u32(&b, "", 1);
    expect_corrupt(&b, "key at offset 24 is empty");

    header(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 48);
    expect_corrupt(&b, "general.alignment 48 is not a power of two");
    header(&b, 3, 0, 1);
    kv_str(&b, "general.alignment", "32");
    expect_corrupt(&b, "key 'general.alignment': expected u32, found string");

    uint64_t huge[3] = {1ull << 32, 1ull << 32, 4};
    header(&b, 3, 1, 0);
    tensor_info(&b, "big", 3, huge, TERN_GGML_F32, 0);
    expect_corrupt(&b, "tensor 'big': dimension 1 (4294967296) overflows the element count");
    uint64_t five[5] = {1, 1, 1, 1, 1};
    header(&b, 3, 1, 0);
    tensor_info(&b, "w", 5, five, TERN_GGML_F32, 0);
    expect_corrupt(&b, "tensor 'w': 5 dimensions (at most 4)");

    uint64_t dims[1] = {16};
    header(&b, 3, 1, 0);
    tensor_info(&b, "w", 1, dims, TERN_GGML_F32, 0);
    pad_to(&b, 32);
    put(&b, "0123456789abcdef0123456789abcdef", 32); /* 32 of the 64 bytes */
    expect_corrupt(&b, "tensor 'w': data [0, 64) of the data section lies beyond the end of the file (the data section holds 32 bytes)");
    header(&b, 3, 1, 0);
    tensor_info(&b, "w", 1, dims, TERN_GGML_F32, 8);
    expect_corrupt(&b, "tensor 'w': data offset 8 is not a multiple of the alignment 32");
    header(&b, 3, 1, 0);
    tensor_info(&b, "w", 1, dims, TERN_GGML_F32, 0);
    expect_corrupt(&b, "data section would start at offset 64, past the end of the file (57 bytes)");
    uint64_t odd[1] = {40};
    header(&b, 3, 1, 0);
    tensor_info(&b, "q", 1, odd, TERN_GGML_Q4_0, 0);
    pad_to(&b, 32);
    expect_corrupt(&b, "tensor 'q': row length 40 is not a multiple of the q4_0 block length 32");
    header(&b, 3, 2, 0);
    tensor_info(&b, "w", 1, dims, 77, 0), tensor_info(&b, "w", 1, dims, 77, 0);
    pad_to(&b, 32);
    expect_corrupt(&b, "duplicate tensor name 'w' (tensor infos 0 and 1)");
    header(&b, 3, 1, 0);
    tensor_info(&b, "w", 1, dims, TERN_GGML_F32, 0);
    b.n -= 3;
    expect_corrupt(&b, "tensor 'w': truncated type/offset");
}

/* An empty file or NULL buffer is a clean error too. */
static void test_empty(void **state) {
    tern_gguf *g;
    TU_FAILS_WITH(tern_gguf_parse(NULL, 0, "empty.gguf", &g), "empty.gguf: not a GGUF file");
    const char *path = tu_write(tu_tmpdir("gguf-empty"), "empty.gguf", "", 0);
    TU_FAILS_WITH(tern_gguf_open(path, &g), "not a GGUF file");
    /* The smallest valid file: header only. */
    buf b = {0};
    header(&b, 2, 0, 0);
    TU_OK(parse(&b, &g));
    assert_int_equal(tern_gguf_version(g), 2);
    assert_int_equal(tern_gguf_kv_count(g), 0);
    assert_int_equal(tern_gguf_alignment(g), 32);
    tern_gguf_close(g);
    free(b.p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemma4_vocab), cmocka_unit_test(test_llama_vocabs), cmocka_unit_test(test_built_file),
        cmocka_unit_test(test_type_sizes),   cmocka_unit_test(test_corrupt),      cmocka_unit_test(test_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
