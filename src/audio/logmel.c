/* logmel.c — Gemma 4 log-mel features (Hugging Face Gemma4AudioFeatureExtractor, GEMMA4.md §4) and
 * the soft-token count.
 *
 * Per frame f (hop 160) of the waveform with 160 zeros prepended:
 *   x[n] = (float)(sample * hann[n]), n < 320          numpy multiplies two float32 arrays
 *   X = rfft(x, 512) in float64, |X[k]|, k <= 256      numpy promotes to float64
 *   mel[m] = sum_k |X[k]| * bank[k][m]                 HTK triangles over 0–8 kHz, float64
 *   out[m] = (float)((log(mel[m] + 1e-3) - mean[m]) / stddev[m])
 * and frames whose last (321st) sample is not real audio are all zero. The reference pads the
 * waveform to a multiple of 128 samples first, which only adds trailing invalid frames.
 *
 * Speed: the 512-point real FFT runs as one 256-point complex FFT (even samples real, odd
 * imaginary) plus a split step, on 2 or 4 frames at once (one per vector lane, logmel_kernel.inc);
 * the mel bank is stored sparse (each FFT bin feeds at most two triangles, so ~260 multiply-adds
 * per frame instead of 257 x 128). Tables are built once. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "core/json_util.h"
#include "tensor/cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

#define FFT_N 512           /* rfft length: 2^ceil(log2(320)) */
#define FFT_H (FFT_N / 2)   /* the complex FFT that computes it */
#define FREQ_BINS (FFT_H + 1)
#define PAD_LEFT (TERN_AUDIO_FRAME / 2) /* semicausal padding */
#define PAD_MULTIPLE 128
#define MEL_FLOOR 1e-3

/* The periodic Hann(320) window exactly as the Python reference holds it: numpy computes it in
 * float32 (cos of a float32 argument), which differs from a float64 Hann rounded to float32 in
 * the last bit of about two thirds of the entries. The log amplifies that in near-silent bins
 * (~4e-4), so the table is the specification. Source: the seed's features.ts (WINDOW_B64). */
static const float hann_window[TERN_AUDIO_FRAME] = {
    0x0p+0f, 0x1.944p-14f, 0x1.9438p-12f, 0x1.c6a8p-11f, 0x1.940ep-10f, 0x1.3b93p-9f,
    0x1.c644p-9f, 0x1.3506p-8f, 0x1.936d8p-8f, 0x1.fe4f8p-8f, 0x1.3ad08p-7f, 0x1.7cabp-7f,
    0x1.c4b1p-7f, 0x1.096dap-6f, 0x1.33912p-6f, 0x1.60beap-6f, 0x1.90f1ep-6f, 0x1.c4262p-6f,
    0x1.fa562p-6f, 0x1.19be6p-5f, 0x1.37ca2p-5f, 0x1.574b5p-5f, 0x1.783eep-5f, 0x1.9aa19p-5f,
    0x1.be6ffp-5f, 0x1.e3a69p-5f, 0x1.0520dp-4f, 0x1.191eb8p-4f, 0x1.2dcbp-4f, 0x1.4323ap-4f,
    0x1.592678p-4f, 0x1.6fd16p-4f, 0x1.872218p-4f, 0x1.9f1658p-4f, 0x1.b7abcp-4f, 0x1.d0dfe8p-4f,
    0x1.eab048p-4f, 0x1.028d2cp-3f, 0x1.100dc4p-3f, 0x1.1dd89p-3f, 0x1.2bec34p-3f, 0x1.3a474cp-3f,
    0x1.48e878p-3f, 0x1.57ce34p-3f, 0x1.66f71cp-3f, 0x1.76619cp-3f, 0x1.860c3cp-3f, 0x1.95f57p-3f,
    0x1.a61bap-3f, 0x1.b67d3cp-3f, 0x1.c7189cp-3f, 0x1.d7ec24p-3f, 0x1.e8f628p-3f, 0x1.fa34fp-3f,
    0x1.05d372p-2f, 0x1.0ea514p-2f, 0x1.178e9p-2f, 0x1.208ef8p-2f, 0x1.29a56cp-2f, 0x1.32d10cp-2f,
    0x1.3c10eap-2f, 0x1.45642p-2f, 0x1.4ec9cp-2f, 0x1.5840dcp-2f, 0x1.61c888p-2f, 0x1.6b5fdp-2f,
    0x1.7505c4p-2f, 0x1.7eb96ep-2f, 0x1.8879dcp-2f, 0x1.924614p-2f, 0x1.9c1d22p-2f, 0x1.a5fe0ap-2f,
    0x1.afe7d2p-2f, 0x1.b9d988p-2f, 0x1.c3d224p-2f, 0x1.cdd0b6p-2f, 0x1.d7d436p-2f, 0x1.e1dbbp-2f,
    0x1.ebe624p-2f, 0x1.f5f294p-2f, 0x1p-1f, 0x1.0506b8p-1f, 0x1.0a0ceep-1f, 0x1.0f122ap-1f,
    0x1.1415e6p-1f, 0x1.1917a6p-1f, 0x1.1e16eep-1f, 0x1.23134p-1f, 0x1.280c18p-1f, 0x1.2d00fcp-1f,
    0x1.31f17p-1f, 0x1.36dcf8p-1f, 0x1.3bc314p-1f, 0x1.40a34ap-1f, 0x1.457d2p-1f, 0x1.4a501cp-1f,
    0x1.4f1bbep-1f, 0x1.53df94p-1f, 0x1.589b22p-1f, 0x1.5d4dfp-1f, 0x1.61f78cp-1f, 0x1.66977cp-1f,
    0x1.6b2d4ap-1f, 0x1.6fb886p-1f, 0x1.7438bap-1f, 0x1.78ad76p-1f, 0x1.7d1648p-1f, 0x1.8172c4p-1f,
    0x1.85c27ap-1f, 0x1.8a04f8p-1f, 0x1.8e39d8p-1f, 0x1.9260b4p-1f, 0x1.96791cp-1f, 0x1.9a82a4p-1f,
    0x1.9e7cfp-1f, 0x1.a2679cp-1f, 0x1.a6423ap-1f, 0x1.aa0c74p-1f, 0x1.adc5e4p-1f, 0x1.b16e3p-1f,
    0x1.b504f4p-1f, 0x1.b889dcp-1f, 0x1.bbfc9p-1f, 0x1.bf5cb4p-1f, 0x1.c2a9f8p-1f, 0x1.c5e404p-1f,
    0x1.c90a88p-1f, 0x1.cc1d34p-1f, 0x1.cf1bbcp-1f, 0x1.d205d4p-1f, 0x1.d4db32p-1f, 0x1.d79b8cp-1f,
    0x1.da46ap-1f, 0x1.dcdc2ap-1f, 0x1.df5be8p-1f, 0x1.e1c598p-1f, 0x1.e41902p-1f, 0x1.e655e8p-1f,
    0x1.e87c14p-1f, 0x1.ea8b4cp-1f, 0x1.ec836p-1f, 0x1.ee641ap-1f, 0x1.f02d5p-1f, 0x1.f1dedp-1f,
    0x1.f3787p-1f, 0x1.f4fa0cp-1f, 0x1.f66378p-1f, 0x1.f7b494p-1f, 0x1.f8ed3cp-1f, 0x1.fa0d54p-1f,
    0x1.fb14cp-1f, 0x1.fc036p-1f, 0x1.fcd924p-1f, 0x1.fd95f4p-1f, 0x1.fe39bcp-1f, 0x1.fec46cp-1f,
    0x1.ff35fap-1f, 0x1.ff8e56p-1f, 0x1.ffcd78p-1f, 0x1.fff35ep-1f, 0x1p+0f, 0x1.fff35ep-1f,
    0x1.ffcd78p-1f, 0x1.ff8e56p-1f, 0x1.ff35fap-1f, 0x1.fec46cp-1f, 0x1.fe39bcp-1f, 0x1.fd95f4p-1f,
    0x1.fcd924p-1f, 0x1.fc036p-1f, 0x1.fb14cp-1f, 0x1.fa0d54p-1f, 0x1.f8ed3cp-1f, 0x1.f7b492p-1f,
    0x1.f66376p-1f, 0x1.f4fa0ap-1f, 0x1.f3787p-1f, 0x1.f1dedp-1f, 0x1.f02d5p-1f, 0x1.ee641ap-1f,
    0x1.ec835ep-1f, 0x1.ea8b48p-1f, 0x1.e87c1p-1f, 0x1.e655e4p-1f, 0x1.e419p-1f, 0x1.e1c598p-1f,
    0x1.df5be6p-1f, 0x1.dcdc28p-1f, 0x1.da46ap-1f, 0x1.d79b8ap-1f, 0x1.d4db2ep-1f, 0x1.d205d6p-1f,
    0x1.cf1bbcp-1f, 0x1.cc1d34p-1f, 0x1.c90a88p-1f, 0x1.c5e402p-1f, 0x1.c2a9f6p-1f, 0x1.bf5cbp-1f,
    0x1.bbfc9p-1f, 0x1.b889dep-1f, 0x1.b504f2p-1f, 0x1.b16e2ap-1f, 0x1.adc5ep-1f, 0x1.aa0c7p-1f,
    0x1.a64238p-1f, 0x1.a2679ap-1f, 0x1.9e7ceep-1f, 0x1.9a82a4p-1f, 0x1.967914p-1f, 0x1.9260b2p-1f,
    0x1.8e39d6p-1f, 0x1.8a04fp-1f, 0x1.85c27ap-1f, 0x1.8172c4p-1f, 0x1.7d1644p-1f, 0x1.78ad74p-1f,
    0x1.7438b4p-1f, 0x1.6fb884p-1f, 0x1.6b2d4cp-1f, 0x1.669778p-1f, 0x1.61f78cp-1f, 0x1.5d4dfp-1f,
    0x1.589b1cp-1f, 0x1.53df9p-1f, 0x1.4f1bb8p-1f, 0x1.4a5018p-1f, 0x1.457d2p-1f, 0x1.40a348p-1f,
    0x1.3bc314p-1f, 0x1.36dcf4p-1f, 0x1.31f16ap-1f, 0x1.2d00fap-1f, 0x1.280c18p-1f, 0x1.23133ap-1f,
    0x1.1e16eep-1f, 0x1.1917a4p-1f, 0x1.1415e6p-1f, 0x1.0f1224p-1f, 0x1.0a0ce6p-1f, 0x1.0506bap-1f,
    0x1p-1f, 0x1.f5f28ap-2f, 0x1.ebe622p-2f, 0x1.e1dba6p-2f, 0x1.d7d434p-2f, 0x1.cdd0a8p-2f,
    0x1.c3d222p-2f, 0x1.b9d98ap-2f, 0x1.afe7dp-2f, 0x1.a5fdfcp-2f, 0x1.9c1d1cp-2f, 0x1.924608p-2f,
    0x1.8879d6p-2f, 0x1.7eb97p-2f, 0x1.7505bep-2f, 0x1.6b5fd2p-2f, 0x1.61c882p-2f, 0x1.5840dp-2f,
    0x1.4ec9bap-2f, 0x1.456414p-2f, 0x1.3c10e6p-2f, 0x1.32d11p-2f, 0x1.29a568p-2f, 0x1.208ef8p-2f,
    0x1.178e88p-2f, 0x1.0ea508p-2f, 0x1.05d36ap-2f, 0x1.fa34f4p-3f, 0x1.e8f618p-3f, 0x1.d7ec2p-3f,
    0x1.c7188cp-3f, 0x1.b67d38p-3f, 0x1.a61b9p-3f, 0x1.95f554p-3f, 0x1.860c48p-3f, 0x1.766198p-3f,
    0x1.66f708p-3f, 0x1.57ce34p-3f, 0x1.48e864p-3f, 0x1.3a474cp-3f, 0x1.2bec24p-3f, 0x1.1dd888p-3f,
    0x1.100dc8p-3f, 0x1.028d28p-3f, 0x1.eab028p-4f, 0x1.d0dfd8p-4f, 0x1.b7abap-4f, 0x1.9f165p-4f,
    0x1.87222p-4f, 0x1.6fd15p-4f, 0x1.592678p-4f, 0x1.43239p-4f, 0x1.2dcaep-4f, 0x1.191ea8p-4f,
    0x1.0520bp-4f, 0x1.e3a67p-5f, 0x1.be6ffp-5f, 0x1.9aa17p-5f, 0x1.783eep-5f, 0x1.574b3p-5f,
    0x1.37c9ep-5f, 0x1.19be7p-5f, 0x1.fa562p-6f, 0x1.c425ep-6f, 0x1.90f1ep-6f, 0x1.60be8p-6f,
    0x1.3391p-6f, 0x1.096d8p-6f, 0x1.c4b0cp-7f, 0x1.7cabp-7f, 0x1.3ad04p-7f, 0x1.fe4fp-8f,
    0x1.936d8p-8f, 0x1.35058p-8f, 0x1.c644p-9f, 0x1.3b93p-9f, 0x1.940cp-10f, 0x1.c6a8p-11f,
    0x1.9438p-12f, 0x1.944p-14f,
};

/* ---- tables, built once --------------------------------------------------------------------- */

static struct {
    /* Twiddles of the radix-2 stage whose butterflies span `half`: entry half + j is
     * exp(-2 pi i j / (2 half)), j < half (so the stages pack into 256 entries). */
    double tw_re[FFT_H], tw_im[FFT_H];
    /* exp(-2 pi i k / 512), k <= 256: the real-FFT split step. */
    double split_re[FREQ_BINS], split_im[FREQ_BINS];
    uint16_t bitrev[FFT_H];
    /* Sparse mel bank: triangle m covers bins [lo[m], lo[m] + len[m]) with weights w[off[m]..]. */
    uint16_t mel_lo[TERN_AUDIO_MEL_BINS], mel_len[TERN_AUDIO_MEL_BINS];
    uint32_t mel_off[TERN_AUDIO_MEL_BINS];
    double mel_w[FREQ_BINS * 2 + TERN_AUDIO_MEL_BINS];
} T;

static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static double hz_to_mel(double hz) { return 2595.0 * log10(1.0 + hz / 700.0); }
static double mel_to_hz(double mel) { return 700.0 * (pow(10.0, mel / 2595.0) - 1.0); }

/* numpy.linspace(start, stop, num)[i]: i * step + start, the last point exactly `stop`. */
static double linspace_at(double start, double stop, int num, int i) {
    if (i == num - 1)
        return stop;
    return (double)i * ((stop - start) / (num - 1)) + start;
}

static void build_tables(void) {
    for (int half = 1; half < FFT_H; half *= 2)
        for (int j = 0; j < half; j++) {
            double a = -2.0 * M_PI * j / (2.0 * half);
            T.tw_re[half + j] = cos(a);
            T.tw_im[half + j] = sin(a);
        }
    for (int k = 0; k < FREQ_BINS; k++) {
        double a = -2.0 * M_PI * k / FFT_N;
        T.split_re[k] = cos(a);
        T.split_im[k] = sin(a);
    }
    for (int i = 0; i < FFT_H; i++) {
        int r = 0;
        for (int b = 0; b < 8; b++)
            r |= ((i >> b) & 1) << (7 - b);
        T.bitrev[i] = (uint16_t)r;
    }

    /* transformers.audio_utils.mel_filter_bank(257, 128, 0, 8000, 16000, norm=None, mel_scale="htk"):
     * 130 points evenly spaced in mel, FFT bin k at linspace(0, 8000, 257)[k], and the triangle
     * max(0, min((f - lower) / (center - lower), (upper - f) / (upper - center))). */
    enum { NPTS = TERN_AUDIO_MEL_BINS + 2 };
    double filt_hz[NPTS];
    double mel_lo = hz_to_mel(0.0), mel_hi = hz_to_mel(TERN_AUDIO_RATE / 2.0);
    for (int i = 0; i < NPTS; i++)
        filt_hz[i] = mel_to_hz(linspace_at(mel_lo, mel_hi, NPTS, i));
    uint32_t off = 0;
    for (int m = 0; m < TERN_AUDIO_MEL_BINS; m++) {
        double lower = filt_hz[m], center = filt_hz[m + 1], upper = filt_hz[m + 2];
        int lo = -1, hi = -1;
        double w[FREQ_BINS];
        for (int k = 0; k < FREQ_BINS; k++) {
            double f = linspace_at(0.0, TERN_AUDIO_RATE / 2, FREQ_BINS, k);
            double down = (f - lower) / (center - lower);
            double up = (upper - f) / (upper - center);
            w[k] = fmax(0.0, fmin(down, up));
            if (w[k] > 0.0) {
                if (lo < 0)
                    lo = k;
                hi = k;
            }
        }
        T.mel_off[m] = off;
        if (lo < 0) { /* a triangle narrower than one bin: all zero, log gives log(1e-3) */
            T.mel_lo[m] = 0;
            T.mel_len[m] = 0;
            continue;
        }
        T.mel_lo[m] = (uint16_t)lo;
        T.mel_len[m] = (uint16_t)(hi - lo + 1);
        for (int k = lo; k <= hi; k++)
            T.mel_w[off++] = w[k];
    }
}

/* ---- the frame kernels ---------------------------------------------------------------------- */

/* One clip's work, shared by the threads of a parallel region. */
typedef struct job {
    const float *samples;
    const tern_logmel_norm *norm;
    float *features;
} job;

#define KLANES 2
#define K(name) name##_x2
#define KTARGET
#include "audio/logmel_kernel.inc"

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_AVX2_KERNEL 1
#define KLANES 4
#define K(name) name##_avx2
#define KTARGET __attribute__((target("avx2")))
#include "audio/logmel_kernel.inc"
#endif

/* The kernel for the instruction set in use (tensor/cpu.h: cpuid, or TERN_ISA=portable|avx2). */
static tern_range_fn pick_kernel(const char **name) {
#ifdef HAVE_AVX2_KERNEL
    if (tern_isa_active() >= TERN_ISA_AVX2) {
        if (name)
            *name = "4-lane AVX2";
        return run_frames_avx2;
    }
#endif
    if (name)
        *name = "2-lane portable (SSE2 on x86-64)";
    return run_frames_x2;
}

const char *tern_logmel_kernel(void) {
    const char *name;
    pick_kernel(&name);
    return name;
}

const float *tern_logmel_window(void) { return hann_window; }

/* ---- frame counts --------------------------------------------------------------------------- */

size_t tern_logmel_frame_count(size_t n_samples) {
    if (n_samples > TERN_AUDIO_MAX_SAMPLES)
        n_samples = TERN_AUDIO_MAX_SAMPLES;
    size_t padded = (n_samples + PAD_MULTIPLE - 1) / PAD_MULTIPLE * PAD_MULTIPLE;
    size_t total = PAD_LEFT + padded;
    return total < TERN_AUDIO_FRAME + 1 ? 0 : (total - (TERN_AUDIO_FRAME + 1)) / TERN_AUDIO_HOP + 1;
}

size_t tern_logmel_valid_frames(size_t n_samples) {
    if (n_samples > TERN_AUDIO_MAX_SAMPLES)
        n_samples = TERN_AUDIO_MAX_SAMPLES;
    /* Frame f's last sample is original index f * 160 + 160: valid iff that is < n. */
    return n_samples < PAD_LEFT + 1 ? 0 : (n_samples - (PAD_LEFT + 1)) / TERN_AUDIO_HOP + 1;
}

size_t tern_audio_soft_tokens(size_t valid_frames) {
    size_t after_conv1 = (valid_frames + 1) / 2;
    size_t after_conv2 = (after_conv1 + 1) / 2;
    return after_conv2 < TERN_AUDIO_MAX_SOFT_TOKENS ? after_conv2 : TERN_AUDIO_MAX_SOFT_TOKENS;
}

/* ---- the whole clip ------------------------------------------------------------------------- */

void tern_logmel_free(tern_logmel *m) {
    if (!m)
        return;
    free(m->features);
    free(m->mask);
    memset(m, 0, sizeof *m);
}

tern_err *tern_logmel_compute(const float *samples, size_t n, const tern_logmel_norm *norm, tern_pool *pool,
                              tern_logmel *out) {
    memset(out, 0, sizeof *out);
    pthread_once(&tables_once, build_tables);
    if (n > TERN_AUDIO_MAX_SAMPLES)
        n = TERN_AUDIO_MAX_SAMPLES;
    if (n && !samples)
        return tern_errf(TERN_EINVAL, "log-mel: %zu samples but no sample buffer", n);
    size_t frames = tern_logmel_frame_count(n), valid = tern_logmel_valid_frames(n);
    out->frames = frames;
    out->valid_frames = valid;
    if (frames == 0)
        return NULL;
    out->features = calloc(frames * TERN_AUDIO_MEL_BINS, sizeof(float)); /* invalid frames stay zero */
    out->mask = calloc(frames, 1);
    if (!out->features || !out->mask) {
        tern_logmel_free(out);
        return tern_errf(TERN_ENOMEM, "log-mel: cannot allocate %zu frames", frames);
    }
    memset(out->mask, 1, valid);
    job jb = {samples, norm, out->features};
    tern_range_fn run_frames = pick_kernel(NULL);
    if (pool && tern_pool_size(pool) > 1 && valid >= 64)
        tern_pool_parallel_for(pool, valid, 16, run_frames, &jb);
    else
        run_frames(&jb, 0, valid, 0);
    return NULL;
}

/* ---- per-bin normalisation from preprocessor_config.json ------------------------------------ */

static TERN_MUST_CHECK tern_err *read_bins(const json_t *obj, const char *key, const char *path, double *dst, int *present,
                           int nonzero) {
    json_t *v = json_object_get(obj, key);
    *present = 0;
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_array(v) || json_array_size(v) != TERN_AUDIO_MEL_BINS)
        return tern_errf(TERN_EFORMAT, "%s: %s must be an array of %d numbers", path, key, TERN_AUDIO_MEL_BINS);
    for (size_t i = 0; i < TERN_AUDIO_MEL_BINS; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_number(e))
            return tern_errf(TERN_EFORMAT, "%s: %s[%zu] is not a number", path, key, i);
        dst[i] = json_number_value(e);
        if (!isfinite(dst[i]) || (nonzero && dst[i] == 0.0))
            return tern_errf(TERN_EFORMAT, "%s: %s[%zu] = %g is not usable", path, key, i, dst[i]);
    }
    *present = 1;
    return NULL;
}

tern_err *tern_logmel_norm_load(const char *path, tern_logmel_norm *out) {
    memset(out, 0, sizeof *out);
    json_t *root;
    TERN_TRY(tern_json_load_file(path, 16u << 20, &root));
    tern_err *err = NULL;
    if (!json_is_object(root)) {
        err = tern_errf(TERN_EFORMAT, "%s: expected a JSON object", path);
        goto done;
    }
    /* The keys sit at the top level of preprocessor_config.json; a combined processor config
     * nests them under "feature_extractor". */
    const json_t *obj = root;
    json_t *nested = json_object_get(root, "feature_extractor");
    if (json_is_object(nested) && !json_object_get(root, "per_bin_mean") && !json_object_get(root, "per_bin_stddev"))
        obj = nested;
    if ((err = read_bins(obj, "per_bin_mean", path, out->mean, &out->has_mean, 0)))
        goto done;
    err = read_bins(obj, "per_bin_stddev", path, out->stddev, &out->has_stddev, 1);
done:
    json_decref(root);
    if (err)
        memset(out, 0, sizeof *out);
    return err;
}
