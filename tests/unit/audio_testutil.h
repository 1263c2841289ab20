/* audio_testutil.h — helpers shared by the audio tests that make their own input at test time:
 * running sox, and encoding samples with libav's own encoders straight into memory (no ffmpeg
 * binary needed: the libraries tern links are enough). */
#ifndef TERN_AUDIO_TESTUTIL_H
#define TERN_AUDIO_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* Runs `sox <args>`; fails the test with sox's output if it exits non-zero. */
void atu_sox(const char *args);

/* Encodes `frames` frames of interleaved float samples (`channels` per frame, full scale ±1) at
 * `rate` Hz with the libavcodec encoder `codec` (e.g. "libmp3lame", "aac", "libopus") in the
 * libavformat muxer `muxer` (e.g. "mp3", "ipod", "ogg", "webm"), at `bit_rate` bits/s where the
 * codec has one. Returns the file's bytes (malloc'd, *len of them); fails the test on any libav
 * error. Integer sample formats get lrint(v * 2^(bits-1)), clamped, so int16/32768 values
 * round-trip exactly. */
uint8_t *atu_libav_encode(const char *muxer, const char *codec, int rate, int channels, const float *interleaved,
                          size_t frames, int64_t bit_rate, size_t *len);

#endif
