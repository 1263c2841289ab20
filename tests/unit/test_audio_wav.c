/* test_audio_wav.c — the RIFF/WAVE parser: every sample format with exact expected values, channel
 * mix-down, chunk walking (odd sizes, padding, order, duplicates), cut-short and streamed files,
 * every malformed case with its message, and the decode dispatcher's WAV path (16 kHz passthrough,
 * resampling, 30 s truncation, content-based detection). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "core/fileio.h"
#include "testutil.h"

/* ---- a small WAV builder -------------------------------------------------------------------- */

typedef struct buf {
    uint8_t d[1 << 16];
    size_t n;
} buf;

static void put(buf *b, const void *p, size_t n) {
    assert_true(b->n + n <= sizeof b->d);
    if (n)
        memcpy(b->d + b->n, p, n);
    b->n += n;
}
static void put_u8(buf *b, uint8_t v) { put(b, &v, 1); }
static void put_u16(buf *b, uint16_t v) {
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(b, x, 2);
}
static void put_u32(buf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}
static void put_tag(buf *b, const char *t) { put(b, t, 4); }
static void riff_start(buf *b) {
    b->n = 0;
    put_tag(b, "RIFF");
    put_u32(b, 0); /* patched by riff_end; the parser ignores it anyway */
    put_tag(b, "WAVE");
}
static void riff_end(buf *b) {
    uint32_t sz = (uint32_t)(b->n - 8);
    memcpy(b->d + 4, &sz, 4);
}
static void fmt_chunk(buf *b, uint16_t format, uint16_t channels, uint32_t rate, uint16_t bits) {
    put_tag(b, "fmt ");
    put_u32(b, 16);
    put_u16(b, format);
    put_u16(b, channels);
    put_u32(b, rate);
    put_u32(b, rate * channels * ((bits + 7u) / 8u));
    put_u16(b, (uint16_t)(channels * ((bits + 7u) / 8u)));
    put_u16(b, bits);
}
/* WAVE_FORMAT_EXTENSIBLE with the standard KSDATAFORMAT GUID for `sub` (1 = PCM, 3 = float). */
static void fmt_ext_chunk(buf *b, uint16_t sub, uint16_t channels, uint32_t rate, uint16_t bits, uint16_t valid) {
    put_tag(b, "fmt ");
    put_u32(b, 40);
    put_u16(b, 0xFFFE);
    put_u16(b, channels);
    put_u32(b, rate);
    put_u32(b, rate * channels * (bits / 8u));
    put_u16(b, (uint16_t)(channels * (bits / 8u)));
    put_u16(b, bits);
    put_u16(b, 22);
    put_u16(b, valid);
    put_u32(b, 0x3); /* FL | FR */
    static const uint8_t tail[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71};
    put_u16(b, sub);
    put(b, tail, sizeof tail);
}
static void data_chunk(buf *b, const void *p, uint32_t n) {
    put_tag(b, "data");
    put_u32(b, n);
    put(b, p, n);
    if (n & 1)
        put_u8(b, 0);
}

static tern_pcm decode_ok(const buf *b) {
    tern_pcm p;
    TU_OK(tern_wav_decode(b->d, b->n, 0, &p));
    return p;
}

/* ---- sample formats ------------------------------------------------------------------------- */

static void test_pcm16(void **state) {
    buf b;
    int16_t s[] = {0, 16384, -32768, 32767, -1};
    riff_start(&b);
    fmt_chunk(&b, 1, 1, 16000, 16);
    data_chunk(&b, s, sizeof s);
    riff_end(&b);
    assert_true(tern_audio_is_wav(b.d, b.n));
    tern_pcm p = decode_ok(&b);
    assert_int_equal(p.rate, 16000);
    assert_int_equal(p.n, 5);
    assert_true(p.samples[0] == 0.0f);
    assert_true(p.samples[1] == 0.5f);
    assert_true(p.samples[2] == -1.0f);
    assert_true(p.samples[3] == 32767.0f / 32768.0f);
    assert_true(p.samples[4] == -1.0f / 32768.0f);
    tern_pcm_free(&p);
}

static void test_pcm24(void **state) {
    buf b;
    uint8_t s[] = {0xff, 0xff, 0x7f, /* max */ 0x00, 0x00, 0x80, /* min: -1 */ 0x00, 0x00, 0x40, /* 0.5 */
                   0xff, 0xff, 0xff /* -1 LSB */};
    riff_start(&b);
    fmt_chunk(&b, 1, 1, 48000, 24);
    data_chunk(&b, s, sizeof s);
    riff_end(&b);
    tern_pcm p = decode_ok(&b);
    assert_int_equal(p.rate, 48000);
    assert_int_equal(p.n, 4);
    assert_true(p.samples[0] == (float)(8388607.0 / 8388608.0));
    assert_true(p.samples[1] == -1.0f);
    assert_true(p.samples[2] == 0.5f);
    assert_true(p.samples[3] == (float)(-1.0 / 8388608.0));
    tern_pcm_free(&p);
}

static void test_pcm32_and_narrow_widths(void **state) {
    buf b;
    int32_t s[] = {INT32_MIN, 1 << 30, INT32_MAX};
    riff_start(&b);
    fmt_chunk(&b, 1, 1, 8000, 32);
    data_chunk(&b, s, sizeof s);
    riff_end(&b);
    tern_pcm p = decode_ok(&b);
    assert_int_equal(p.n, 3);
    assert_true(p.samples[0] == -1.0f);
    assert_true(p.samples[1] == 0.5f);
    assert_true(p.samples[2] == (float)(2147483647.0 / 2147483648.0));
    tern_pcm_free(&p);

    /* 12-bit PCM sits left-justified in 16-bit containers: scaled like 16-bit. */
    int16_t s12[] = {(int16_t)(0x400 << 4), (int16_t)(-0x800 * 16)};
    riff_start(&b);
    fmt_chunk(&b, 1, 1, 8000, 12);
    data_chunk(&b, s12, sizeof s12);
    riff_end(&b);
    p = decode_ok(&b);
    assert_int_equal(p.n, 2);
    assert_true(p.samples[0] == 0.5f);
    assert_true(p.samples[1] == -1.0f);
    tern_pcm_free(&p);
}

static void test_pcm8_unsigned(void **state) {
    buf b;
    uint8_t s[] = {0, 128, 255, 192, 64};
    riff_start(&b);
    fmt_chunk(&b, 1, 1, 11025, 8);
    data_chunk(&b, s, sizeof s); /* odd size: a pad byte follows */
    riff_end(&b);
    tern_pcm p = decode_ok(&b);
    assert_int_equal(p.n, 5);
    assert_true(p.samples[0] == -1.0f);
    assert_true(p.samples[1] == 0.0f);
    assert_true(p.samples[2] == 127.0f / 128.0f);
    assert_true(p.samples[3] == 0.5f);
    assert_true(p.samples[4] == -0.5f);
    tern_pcm_free(&p);
}

static void test_float32_float64(void **state) {
    buf b;
    float f[] = {0.25f, -1.5f, 1e-30f}; /* floats are not clipped */
    riff_start(&b);
    fmt_chunk(&b, 3, 1, 16000, 32);
    data_chunk(&b, f, sizeof f);
    riff_end(&b);
    tern_pcm p = decode_ok(&b);
    assert_int_equal(p.n, 3);
    assert_true(p.samples[0] == 0.25f && p.samples[1] == -1.5f && p.samples[2] == 1e-30f);
    tern_pcm_free(&p);

    double d[] = {0.125, -0.75, 0.1};
    riff_start(&b);
    fmt_chunk(&b, 3, 1, 22050, 64);
    data_chunk(&b, d, sizeof d);
    riff_end(&b);
    p = decode_ok(&b);
    assert_int_equal(p.rate, 22050);
    assert_int_equal(p.n, 3);
    assert_true(p.samples[0] == 0.125f && p.samples[1] == -0.75f && p.samples[2] == 0.1f);
    tern_pcm_free(&p);
}

static void test_extensible(void **state) {
    buf b;
    /* stereo 24-bit PCM (20 valid bits): L = 0.5, R = -0.25 → mean 0.125 */
    uint8_t s[] = {0x00, 0x00, 0x40, 0x00, 0x00, 0xe0};
    riff_start(&b);
    fmt_ext_chunk(&b, 1, 2, 44100, 24, 20);
    data_chunk(&b, s, sizeof s);
    riff_end(&b);
    tern_pcm p = decode_ok(&b);
    assert_int_equal(p.rate, 44100);
    assert_int_equal(p.n, 1);
    assert_true(p.samples[0] == 0.125f);
    tern_pcm_free(&p);

    float f[] = {1.0f, 0.0f, -0.5f, 0.25f};
    riff_start(&b);
    fmt_ext_chunk(&b, 3, 2, 48000, 32, 32);
    data_chunk(&b, f, sizeof f);
    riff_end(&b);
    p = decode_ok(&b);
    assert_int_equal(p.n, 2);
    assert_true(p.samples[0] == 0.5f && p.samples[1] == -0.125f);
    tern_pcm_free(&p);
}

static void test_channel_mixdown(void **state) {
    buf b;
    /* 3 channels: 0.5, 0.25, -0.75 → mean 0; then 0.5, 0.5, 0.5 → 0.5 */
    int16_t s[] = {16384, 8192, -24576, 16384, 16384, 16384};
    riff_start(&b);
    fmt_chunk(&b, 1, 3, 16000, 16);
    data_chunk(&b, s, sizeof s);
    riff_end(&b);
    tern_pcm p = decode_ok(&b);
    assert_int_equal(p.n, 2);
    assert_true(p.samples[0] == 0.0f);
    assert_true(p.samples[1] == 0.5f);
    tern_pcm_free(&p);

    /* 7 channels (no standard layout) of 8-bit: mean of -1, 0 x5, 127/128 */
    uint8_t s8[] = {0, 128, 128, 128, 128, 128, 255};
    riff_start(&b);
    fmt_chunk(&b, 1, 7, 16000, 8);
    data_chunk(&b, s8, sizeof s8);
    riff_end(&b);
    p = decode_ok(&b);
    assert_int_equal(p.n, 1);
    assert_true(p.samples[0] == (float)((-1.0 + 127.0 / 128.0) / 7.0));
    tern_pcm_free(&p);
}

/* ---- chunk walking -------------------------------------------------------------------------- */

static void test_odd_chunks_padding_and_order(void **state) {
    buf b;
    int16_t s[] = {1000, -1000};
    riff_start(&b);
    put_tag(&b, "LIST"); /* odd-sized chunk, then its pad byte */
    put_u32(&b, 5);
    put(&b, "abcde", 5);
    put_u8(&b, 0);
    put_tag(&b, "data"); /* data before fmt */
    put_u32(&b, sizeof s);
    put(&b, s, sizeof s);
    put_tag(&b, "junk");
    put_u32(&b, 3);
    put(&b, "xyz", 3);
    put_u8(&b, 0);
    fmt_chunk(&b, 1, 1, 16000, 16);
    put_tag(&b, "data"); /* a second data chunk is ignored */
    put_u32(&b, 2);
    put_u16(&b, 0x7fff);
    riff_end(&b);
    tern_pcm p = decode_ok(&b);
    assert_int_equal(p.n, 2);
    assert_true(p.samples[0] == 1000.0f / 32768.0f);
    assert_true(p.samples[1] == -1000.0f / 32768.0f);
    tern_pcm_free(&p);

    /* A fmt chunk longer than 16 bytes (cbSize + extra) with an odd size and its pad. */
    riff_start(&b);
    put_tag(&b, "fmt ");
    put_u32(&b, 19);
    put_u16(&b, 1);
    put_u16(&b, 1);
    put_u32(&b, 16000);
    put_u32(&b, 32000);
    put_u16(&b, 2);
    put_u16(&b, 16);
    put_u16(&b, 1);
    put_u8(&b, 0xAA);
    put_u8(&b, 0); /* pad */
    data_chunk(&b, s, sizeof s);
    riff_end(&b);
    p = decode_ok(&b);
    assert_int_equal(p.n, 2);
    tern_pcm_free(&p);
}

static void test_truncated_and_streamed_data(void **state) {
    buf b;
    int16_t s[] = {100, 200, 300, 400, 500};
    riff_start(&b);
    fmt_chunk(&b, 1, 2, 16000, 16);
    put_tag(&b, "data");
    put_u32(&b, 4000); /* claims 1000 frames */
    put(&b, s, 7);     /* one whole stereo frame and 3 stray bytes */
    tern_pcm p = decode_ok(&b);
    assert_int_equal(p.n, 1);
    assert_true(p.samples[0] == (float)(150.0 / 32768.0));
    tern_pcm_free(&p);

    /* Streamed writers leave 0xFFFFFFFF in the size fields: read to the end. */
    riff_start(&b);
    fmt_chunk(&b, 1, 1, 16000, 16);
    put_tag(&b, "data");
    put_u32(&b, 0xFFFFFFFFu);
    put(&b, s, sizeof s);
    memset(b.d + 4, 0xff, 4);
    p = decode_ok(&b);
    assert_int_equal(p.n, 5);
    assert_true(p.samples[4] == 500.0f / 32768.0f);
    tern_pcm_free(&p);

    /* An empty data chunk is a valid, empty clip. */
    riff_start(&b);
    fmt_chunk(&b, 1, 1, 16000, 16);
    data_chunk(&b, NULL, 0);
    p = decode_ok(&b);
    assert_int_equal(p.n, 0);
    assert_null(p.samples);
    assert_int_equal(p.rate, 16000);
    tern_pcm_free(&p);
}

static void test_max_seconds(void **state) {
    static int16_t s[8000];
    buf b;
    riff_start(&b);
    fmt_chunk(&b, 1, 1, 8000, 16);
    data_chunk(&b, s, sizeof s);
    tern_pcm p;
    TU_OK(tern_wav_decode(b.d, b.n, 0.25, &p));
    assert_int_equal(p.n, 2000);
    tern_pcm_free(&p);
    TU_OK(tern_wav_decode(b.d, b.n, 10.0, &p));
    assert_int_equal(p.n, 8000);
    tern_pcm_free(&p);
}

/* ---- malformed input ------------------------------------------------------------------------ */

static void expect_fail(const buf *b, const char *needle, tern_code code) {
    tern_pcm p = {(float *)1, 1, 1};
    tern_err *e = tern_wav_decode(b->d, b->n, 0, &p);
    assert_non_null(e);
    assert_int_equal(e->code, code);
    assert_null(p.samples);
    assert_int_equal(p.n, 0);
    TU_FAILS_WITH(e, needle);
}

static void test_malformed(void **state) {
    buf b;
    int16_t s[] = {1, 2};

    b.n = 0;
    put(&b, "RIFF\0\0\0\0WAV", 11); /* 11 bytes */
    assert_false(tern_audio_is_wav(b.d, b.n));
    expect_fail(&b, "no RIFF/WAVE header", TERN_EFORMAT);
    b.n = 0;
    put(&b, "RIFX\0\0\0\0WAVEfmt ", 16); /* big-endian RIFX is not RIFF */
    expect_fail(&b, "no RIFF/WAVE header", TERN_EFORMAT);
    b.n = 0;
    put(&b, "RIFF\0\0\0\0AVI ", 12);
    expect_fail(&b, "no RIFF/WAVE header", TERN_EFORMAT);
    assert_false(tern_audio_is_wav(NULL, 0));

    riff_start(&b); /* header only */
    expect_fail(&b, "no fmt chunk", TERN_EFORMAT);

    riff_start(&b);
    data_chunk(&b, s, sizeof s);
    expect_fail(&b, "no fmt chunk", TERN_EFORMAT);

    riff_start(&b);
    fmt_chunk(&b, 1, 1, 16000, 16);
    expect_fail(&b, "no data chunk", TERN_EFORMAT);

    riff_start(&b); /* fmt chunk of 14 bytes */
    put_tag(&b, "fmt ");
    put_u32(&b, 14);
    put(&b, "\1\0\1\0\x80\x3e\0\0\0\x7d\0\0\2\0", 14);
    data_chunk(&b, s, sizeof s);
    expect_fail(&b, "need at least 16", TERN_EFORMAT);

    riff_start(&b); /* fmt chunk claims more than the file holds */
    put_tag(&b, "fmt ");
    put_u32(&b, 100);
    put(&b, "\1\0\1\0\x80\x3e\0\0\0\x7d\0\0\2\0\x10\0", 16);
    expect_fail(&b, "claims 100 bytes", TERN_EFORMAT);

    riff_start(&b); /* a huge unknown chunk hides everything after it */
    put_tag(&b, "LIST");
    put_u32(&b, 0xFFFFFFF0u);
    fmt_chunk(&b, 1, 1, 16000, 16);
    data_chunk(&b, s, sizeof s);
    expect_fail(&b, "no fmt chunk", TERN_EFORMAT);

    riff_start(&b); /* EXTENSIBLE with only the 16 base bytes + cbSize */
    put_tag(&b, "fmt ");
    put_u32(&b, 18);
    put_u16(&b, 0xFFFE);
    put_u16(&b, 1);
    put_u32(&b, 16000);
    put_u32(&b, 32000);
    put_u16(&b, 2);
    put_u16(&b, 16);
    put_u16(&b, 0);
    data_chunk(&b, s, sizeof s);
    expect_fail(&b, "need 40", TERN_EFORMAT);

    riff_start(&b); /* EXTENSIBLE with a non-KSDATAFORMAT GUID */
    fmt_ext_chunk(&b, 1, 1, 16000, 16, 16);
    b.d[b.n - 1] ^= 0xff;
    data_chunk(&b, s, sizeof s);
    expect_fail(&b, "non-standard SubFormat GUID", TERN_EUNSUPPORTED);

    riff_start(&b);
    fmt_chunk(&b, 1, 0, 16000, 16);
    data_chunk(&b, s, sizeof s);
    expect_fail(&b, "0 channels", TERN_EFORMAT);

    riff_start(&b);
    fmt_chunk(&b, 1, 1, 0, 16);
    data_chunk(&b, s, sizeof s);
    expect_fail(&b, "sample rate of 0 Hz", TERN_EFORMAT);

    riff_start(&b);
    fmt_chunk(&b, 1, 1, 500, 16);
    data_chunk(&b, s, sizeof s);
    expect_fail(&b, "500 Hz outside", TERN_EUNSUPPORTED);

    riff_start(&b);
    fmt_chunk(&b, 1, 1, 1000000, 16);
    data_chunk(&b, s, sizeof s);
    expect_fail(&b, "1000000 Hz outside", TERN_EUNSUPPORTED);

    riff_start(&b);
    fmt_chunk(&b, 1, 1, 16000, 0);
    data_chunk(&b, s, sizeof s);
    expect_fail(&b, "0-bit PCM", TERN_EUNSUPPORTED);

    riff_start(&b);
    fmt_chunk(&b, 1, 1, 16000, 40);
    data_chunk(&b, s, sizeof s);
    expect_fail(&b, "40-bit PCM", TERN_EUNSUPPORTED);

    riff_start(&b);
    fmt_chunk(&b, 3, 1, 16000, 16);
    data_chunk(&b, s, sizeof s);
    expect_fail(&b, "16-bit IEEE float", TERN_EUNSUPPORTED);

    riff_start(&b); /* µ-law: well-formed, not ours (the dispatcher hands it to libav) */
    fmt_chunk(&b, 7, 1, 8000, 8);
    data_chunk(&b, s, sizeof s);
    expect_fail(&b, "codec 0x0007", TERN_EUNSUPPORTED);

    float bad[] = {0.5f, NAN};
    riff_start(&b);
    fmt_chunk(&b, 3, 1, 16000, 32);
    data_chunk(&b, bad, sizeof bad);
    expect_fail(&b, "frame 1 is not finite", TERN_EFORMAT);

    double huge[] = {1e300};
    riff_start(&b);
    fmt_chunk(&b, 3, 1, 16000, 64);
    data_chunk(&b, huge, sizeof huge);
    expect_fail(&b, "frame 0 is not finite", TERN_EFORMAT);
}

/* Every prefix of a valid file parses or fails cleanly (ASan checks the "cleanly"). */
static void test_every_prefix(void **state) {
    buf b;
    int16_t s[64];
    for (int i = 0; i < 64; i++)
        s[i] = (int16_t)(i * 300);
    riff_start(&b);
    fmt_ext_chunk(&b, 1, 2, 16000, 16, 16);
    put_tag(&b, "LIST");
    put_u32(&b, 3);
    put(&b, "abc", 3);
    put_u8(&b, 0);
    data_chunk(&b, s, sizeof s);
    for (size_t n = 0; n <= b.n; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact size, so ASan sees any overread */
        memcpy(copy, b.d, n);
        tern_pcm p;
        tern_err *e = tern_wav_decode(copy, n, 0, &p);
        if (e) {
            assert_null(p.samples);
            tern_err_free(e);
        } else {
            assert_true(p.n <= 32);
            tern_pcm_free(&p);
        }
        free(copy);
    }
}

/* ---- the dispatcher's WAV path -------------------------------------------------------------- */

static void test_decode_passthrough_resample_truncate(void **state) {
    /* 16 kHz passes through bit for bit. */
    buf b;
    int16_t s[100];
    for (int i = 0; i < 100; i++)
        s[i] = (int16_t)(i * 97 - 5000);
    riff_start(&b);
    fmt_chunk(&b, 1, 1, 16000, 16);
    data_chunk(&b, s, sizeof s);
    tern_pcm p;
    TU_OK(tern_audio_decode(b.d, b.n, 0, &p));
    assert_int_equal(p.rate, 16000);
    assert_int_equal(p.n, 100);
    for (int i = 0; i < 100; i++)
        assert_true(p.samples[i] == s[i] / 32768.0f);
    tern_pcm_free(&p);

    /* 32 s at 8 kHz: resampled to 16 kHz and truncated at exactly 480 000 samples. */
    size_t n8 = 8000 * 32;
    size_t len = 44 + n8 * 2;
    uint8_t *w = calloc(1, len);
    memcpy(w, "RIFF\0\0\0\0WAVEfmt \x10\0\0\0\1\0\1\0\x40\x1f\0\0\x80\x3e\0\0\2\0\x10\0data", 40);
    uint32_t dsz = (uint32_t)(n8 * 2);
    memcpy(w + 40, &dsz, 4);
    for (size_t i = 0; i < n8; i++) {
        int16_t v = (int16_t)lrint(16384.0 * sin(2 * M_PI * 440.0 * (double)i / 8000.0));
        memcpy(w + 44 + 2 * i, &v, 2);
    }
    TU_OK(tern_audio_decode(w, len, 0, &p));
    assert_int_equal(p.rate, 16000);
    assert_int_equal(p.n, TERN_AUDIO_MAX_SAMPLES);
    /* The 440 Hz tone survives resampling: compare with the ideal 16 kHz signal mid-clip. */
    double maxerr = 0.0;
    for (size_t i = 1000; i < 479000; i += 7)
        maxerr = fmax(maxerr, fabs(p.samples[i] - 0.5 * sin(2 * M_PI * 440.0 * (double)i / 16000.0)));
    assert_true(maxerr < 2e-3);
    tern_pcm_free(&p);
    free(w);
}

static void test_decode_by_content_not_name(void **state) {
    buf b;
    int16_t s[] = {1, 2, 3, 4};
    riff_start(&b);
    fmt_chunk(&b, 1, 1, 16000, 16);
    data_chunk(&b, s, sizeof s);
    const char *dir = tu_tmpdir("audio_wav");
    const char *path = tu_write(dir, "clip.mp3", b.d, b.n); /* a WAV named .mp3 */
    tern_pcm p;
    TU_OK(tern_audio_decode_file(path, 0, &p));
    assert_int_equal(p.n, 4);
    assert_true(p.samples[3] == 4.0f / 32768.0f);
    tern_pcm_free(&p);

    char missing[4200];
    snprintf(missing, sizeof missing, "%s/nope.wav", dir);
    TU_FAILS_WITH(tern_audio_decode_file(missing, 0, &p), "nope.wav");
}

/* Huge but finite float samples at 8 kHz overflow to infinities in resampling: refused, nothing returned
 * (found by fuzzing tern_audio_decode). */
static void test_decode_refuses_non_finite(void **state) {
    buf b;
    float s[64] = {0};
    for (int i = 32; i < 40; i++)
        s[i] = i % 2 ? -3e38f : 3e38f;
    riff_start(&b);
    fmt_chunk(&b, 3, 1, 8000, 32);
    data_chunk(&b, s, sizeof s);
    tern_pcm p;
    tern_err *e = tern_audio_decode(b.d, b.n, 0, &p);
    assert_null(p.samples);
    assert_int_equal(p.n, 0);
    TU_FAILS_WITH(e, "non-finite sample values");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_refuses_non_finite),
        cmocka_unit_test(test_pcm16),
        cmocka_unit_test(test_pcm24),
        cmocka_unit_test(test_pcm32_and_narrow_widths),
        cmocka_unit_test(test_pcm8_unsigned),
        cmocka_unit_test(test_float32_float64),
        cmocka_unit_test(test_extensible),
        cmocka_unit_test(test_channel_mixdown),
        cmocka_unit_test(test_odd_chunks_padding_and_order),
        cmocka_unit_test(test_truncated_and_streamed_data),
        cmocka_unit_test(test_max_seconds),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_every_prefix),
        cmocka_unit_test(test_decode_passthrough_resample_truncate),
        cmocka_unit_test(test_decode_by_content_not_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
