/* audio.h — the audio front end: bytes of any supported container → mono 16 kHz float samples
 * → Gemma 4 log-mel features [frames][128] with a validity mask (GEMMA4.md §4).
 *
 * One job per file:
 *   wav.c        RIFF/WAVE parser (PCM 8/16/24/32, float 32/64, EXTENSIBLE), mono mix-down
 *   container.c  every other container through libavformat/libavcodec, in memory, time-bounded
 *   resample.c   any rate → 16 kHz with libswresample (windowed-sinc, anti-aliased)
 *   decode.c     the dispatcher: sniff content, decode, resample, truncate at 30 s
 *   logmel.c     the Hugging Face Gemma4AudioFeatureExtractor arithmetic, and the soft-token count
 *
 * Input bytes are untrusted: every parser bound-checks its reads and returns an error, never crashes. */
#ifndef TERN_AUDIO_AUDIO_H
#define TERN_AUDIO_AUDIO_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/threadpool.h"

#define TERN_AUDIO_RATE 16000           /* the model's sample rate (Hz) */
#define TERN_AUDIO_MAX_SAMPLES 480000   /* 30 s at 16 kHz: longer input is truncated */
#define TERN_AUDIO_MEL_BINS 128         /* feature width */
#define TERN_AUDIO_FRAME 320            /* analysis window, samples (20 ms) */
#define TERN_AUDIO_HOP 160              /* frame step, samples (10 ms) */
#define TERN_AUDIO_MAX_SOFT_TOKENS 750  /* soft tokens of a 30 s clip */
#define TERN_AUDIO_MIN_RATE 1000        /* accepted native sample rates (Hz), inclusive */
#define TERN_AUDIO_MAX_RATE 384000
#define TERN_AUDIO_DEFAULT_TIMEOUT_S 10.0 /* container decode deadline when the caller gives none */

/* Mono float samples at `rate` Hz; `samples` is malloc'd (NULL when n == 0). */
typedef struct tern_pcm {
    float *samples;
    size_t n;
    int rate;
} tern_pcm;

/* Frees the samples and zeroes the struct; a zeroed struct is fine. */
void tern_pcm_free(tern_pcm *pcm);

/* ---- wav.c ---------------------------------------------------------------------------------- */

/* 1 if the bytes start with the RIFF/WAVE magic ("RIFF" at 0, "WAVE" at 8), else 0. */
int tern_audio_is_wav(const void *data, size_t len);

/* Decodes a RIFF/WAVE file to mono (mean of channels) at its native rate, keeping at most the first
 * `max_seconds` of it (<= 0: all). A data chunk cut short by the end of the file is decoded up to
 * the last whole frame. TERN_EUNSUPPORTED for a well-formed file whose codec is not PCM/float
 * (µ-law, ADPCM, …: the caller may hand those to the container decoder); TERN_EFORMAT otherwise. */
TERN_MUST_CHECK tern_err *tern_wav_decode(const void *data, size_t len, double max_seconds, tern_pcm *out);

/* ---- container.c ---------------------------------------------------------------------------- */

/* The containers the libav path accepts, for error messages ("MP3, M4A/MP4 (AAC, ALAC), …"). */
const char *tern_audio_supported_containers(void);

/* Decodes the best audio stream of an in-memory container (mp3, m4a, flac, ogg, opus, aiff,
 * webm, …) with libavformat/libavcodec to mono (mean of channels) at its native rate, keeping at
 * most the first `max_seconds` (<= 0: all); decoding stops there. No temp files, and the demuxer
 * cannot open other files or URLs. Gives up with TERN_ECANCELLED once `timeout_s` seconds
 * (<= 0: the default) have passed. A damaged stream keeps what decoded before the damage. */
TERN_MUST_CHECK tern_err *tern_audio_decode_container(const void *data, size_t len, double timeout_s, double max_seconds,
                                      tern_pcm *out);

/* ---- resample.c ----------------------------------------------------------------------------- */

/* Resamples mono `in` (n samples at rate_in Hz) to rate_out Hz with libswresample's windowed-sinc
 * filter (anti-aliased, delay-compensated: output sample i is the signal at time i / rate_out);
 * about n * rate_out / rate_in samples. Equal rates copy the samples untouched. Both rates must be
 * in [TERN_AUDIO_MIN_RATE, TERN_AUDIO_MAX_RATE]. */
TERN_MUST_CHECK tern_err *tern_audio_resample(const float *in, size_t n, int rate_in, int rate_out, tern_pcm *out);

/* ---- decode.c ------------------------------------------------------------------------------- */

/* Any supported audio bytes → mono 16 kHz, at most TERN_AUDIO_MAX_SAMPLES samples. RIFF/WAVE
 * (decided by content, never by a name or MIME type) goes to the WAV parser, everything else
 * (and WAV with a compressed codec) to libav; other rates are resampled; 16 kHz passes through.
 * `timeout_s` bounds the container decode (<= 0: TERN_AUDIO_DEFAULT_TIMEOUT_S). */
TERN_MUST_CHECK tern_err *tern_audio_decode(const void *data, size_t len, double timeout_s, tern_pcm *out);

/* tern_audio_decode keeping up to max_samples (> 30 s: a long clip encoded in 30 s windows). */
TERN_MUST_CHECK tern_err *tern_audio_decode_long(const void *data, size_t len, double timeout_s, size_t max_samples, tern_pcm *out);

/* tern_audio_decode on the contents of a file; errors are prefixed with the path. */
TERN_MUST_CHECK tern_err *tern_audio_decode_file(const char *path, double timeout_s, tern_pcm *out);

/* ---- logmel.c ------------------------------------------------------------------------------- */

/* Optional per-bin normalisation (preprocessor_config.json `per_bin_mean` / `per_bin_stddev`):
 * feature = (log_mel - mean[b]) / stddev[b], computed in float64 like the reference. */
typedef struct tern_logmel_norm {
    int has_mean, has_stddev;
    double mean[TERN_AUDIO_MEL_BINS];
    double stddev[TERN_AUDIO_MEL_BINS];
} tern_logmel_norm;

/* Reads per_bin_mean / per_bin_stddev from a preprocessor_config.json (top level, or inside a
 * "feature_extractor" object). Absent or null keys leave that part off; a present key must be an
 * array of 128 numbers (stddev entries non-zero). */
TERN_MUST_CHECK tern_err *tern_logmel_norm_load(const char *path, tern_logmel_norm *out);

/* Log-mel features with their validity mask. */
typedef struct tern_logmel {
    float *features;     /* [frames][TERN_AUDIO_MEL_BINS], invalid frames all zero; malloc'd */
    uint8_t *mask;       /* [frames], 1 = every sample of the frame is real audio; malloc'd */
    size_t frames;       /* frames the reference emits (input padded to a multiple of 128) */
    size_t valid_frames; /* the valid frames form a prefix of this length */
} tern_logmel;

/* Frees and zeroes; a zeroed struct is fine. */
void tern_logmel_free(tern_logmel *m);

/* The name of the frame kernel tern_logmel_compute uses now: 4-lane AVX2 when tern_isa_active()
 * (tensor/cpu.h; TERN_ISA overrides) allows it, else the 2-lane portable one. Both give
 * bit-identical features. */
const char *tern_logmel_kernel(void);

/* The 320-entry float32 periodic Hann window the features use, as the Python reference computes it. */
const float *tern_logmel_window(void);

/* Frames emitted for n samples (after truncation at 30 s): floor((160 + pad128(n) - 321) / 160) + 1, or 0. */
size_t tern_logmel_frame_count(size_t n_samples);
/* Valid frames for n samples (after truncation): floor((n - 161) / 160) + 1 for n >= 161, else 0. */
size_t tern_logmel_valid_frames(size_t n_samples);
/* Soft tokens the audio tower emits for `valid_frames` mel frames: two stride-2 convolutions,
 * min(ceil(ceil(F / 2) / 2), 750). */
size_t tern_audio_soft_tokens(size_t valid_frames);

/* Gemma 4 log-mel of mono 16 kHz samples (truncated at TERN_AUDIO_MAX_SAMPLES first), exactly the
 * Hugging Face Gemma4AudioFeatureExtractor arithmetic: semicausal 160-zero left pad, 321-sample
 * frames at hop 160 keeping 320, float32 periodic Hann product, float64 rfft 512, magnitude, HTK mel
 * bank 0–8 kHz, log(x + 1e-3), optional per-bin normalisation (`norm` may be NULL), invalid frames
 * zeroed. `pool` (may be NULL) spreads frames over threads. */
TERN_MUST_CHECK tern_err *tern_logmel_compute(const float *samples, size_t n, const tern_logmel_norm *norm, tern_pool *pool,
                              tern_logmel *out);

#endif
