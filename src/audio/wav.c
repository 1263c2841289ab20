/* wav.c — RIFF/WAVE parser: PCM (8-bit unsigned, 16/24/32-bit signed, and any width up to 32 bits
 * stored left-justified in whole bytes), IEEE float 32/64, WAVE_FORMAT_EXTENSIBLE; any channel
 * count, mixed down to mono by the mean. Every read is bound-checked against the buffer length; the
 * RIFF size field and a data chunk size that overruns the file are not trusted (streamed writers
 * leave them 0 or 0xFFFFFFFF), so a cut-short file decodes up to its last whole frame. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"

enum {
    WAVE_FORMAT_PCM = 0x0001,
    WAVE_FORMAT_IEEE_FLOAT = 0x0003,
    WAVE_FORMAT_EXTENSIBLE = 0xFFFE,
};

/* Bytes 2..15 of every KSDATAFORMAT_SUBTYPE_* GUID (xxxxxxxx-0000-0010-8000-00aa00389b71): the
 * first two bytes of an EXTENSIBLE SubFormat are the plain format code only under this base. */
static const uint8_t ks_guid_tail[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80,
                                         0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71};

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

int tern_audio_is_wav(const void *data, size_t len) {
    const uint8_t *b = data;
    return len >= 12 && b && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WAVE", 4);
}

void tern_pcm_free(tern_pcm *pcm) {
    if (!pcm)
        return;
    free(pcm->samples);
    pcm->samples = NULL;
    pcm->n = 0;
    pcm->rate = 0;
}

typedef struct wav_fmt {
    uint16_t format; /* resolved: the SubFormat code for EXTENSIBLE */
    uint16_t channels;
    uint32_t rate;
    uint16_t bits;   /* container bits per sample (wBitsPerSample) */
} wav_fmt;

/* Parses a fmt chunk body of `size` bytes (all inside the buffer). */
static TERN_MUST_CHECK tern_err *parse_fmt(const uint8_t *body, uint32_t size, size_t at, wav_fmt *fmt) {
    if (size < 16)
        return tern_errf(TERN_EFORMAT, "WAV: fmt chunk at offset %zu is %u bytes, need at least 16", at, size);
    fmt->format = rd16(body);
    fmt->channels = rd16(body + 2);
    fmt->rate = rd32(body + 4);
    fmt->bits = rd16(body + 14);
    if (fmt->format == WAVE_FORMAT_EXTENSIBLE) {
        /* cbSize(2) validBits(2) channelMask(4) SubFormat(16) follow the 16 base bytes. */
        if (size < 40)
            return tern_errf(TERN_EFORMAT,
                             "WAV: WAVE_FORMAT_EXTENSIBLE fmt chunk at offset %zu is %u bytes, need 40", at, size);
        const uint8_t *guid = body + 24;
        if (memcmp(guid + 2, ks_guid_tail, sizeof ks_guid_tail) != 0)
            return tern_errf(TERN_EUNSUPPORTED, "WAV: WAVE_FORMAT_EXTENSIBLE with a non-standard SubFormat GUID");
        fmt->format = rd16(guid);
    }
    return NULL;
}

/* One sample of the given format/width at p, scaled to [-1, 1). */
static double read_sample(const uint8_t *p, uint16_t format, unsigned bytes) {
    if (format == WAVE_FORMAT_IEEE_FLOAT) {
        if (bytes == 4) {
            uint32_t u = rd32(p);
            float f;
            memcpy(&f, &u, 4);
            return f;
        }
        uint64_t u = (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32);
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    switch (bytes) {
    case 1: return ((int)p[0] - 128) / 128.0; /* 8-bit PCM is unsigned, 128 = silence */
    case 2: return (int16_t)rd16(p) / 32768.0;
    case 3: {
        int32_t v = (int32_t)((uint32_t)p[0] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 24) >> 8;
        return v / 8388608.0;
    }
    default: return (int32_t)rd32(p) / 2147483648.0;
    }
}

tern_err *tern_wav_decode(const void *data, size_t len, double max_seconds, tern_pcm *out) {
    memset(out, 0, sizeof *out);
    const uint8_t *b = data;
    if (!tern_audio_is_wav(data, len))
        return tern_errf(TERN_EFORMAT, "WAV: no RIFF/WAVE header (need \"RIFF\" at offset 0 and \"WAVE\" at 8)");

    wav_fmt fmt = {0};
    int have_fmt = 0, have_data = 0;
    size_t data_off = 0, data_len = 0;
    size_t o = 12;
    while (len - o >= 8) { /* o <= len holds throughout */
        uint32_t size = rd32(b + o + 4);
        size_t body = o + 8;
        size_t avail = len - body;
        if (!memcmp(b + o, "fmt ", 4) && !have_fmt) {
            if (size > avail)
                return tern_errf(TERN_EFORMAT, "WAV: fmt chunk at offset %zu claims %u bytes, only %zu remain", o,
                                 size, avail);
            TERN_TRY(parse_fmt(b + body, size, o, &fmt));
            have_fmt = 1;
        } else if (!memcmp(b + o, "data", 4) && !have_data) {
            data_off = body;
            data_len = size < avail ? size : avail; /* cut short: keep what is there */
            have_data = 1;
        }
        /* Chunks are word-aligned: an odd-sized body is followed by one pad byte. */
        size_t step = (size_t)size + (size & 1u);
        if (step >= avail)
            break;
        o = body + step;
    }
    if (!have_fmt)
        return tern_errf(TERN_EFORMAT, "WAV: no fmt chunk before the end of the file");
    if (!have_data)
        return tern_errf(TERN_EFORMAT, "WAV: no data chunk before the end of the file");
    if (fmt.channels == 0)
        return tern_errf(TERN_EFORMAT, "WAV: fmt chunk declares 0 channels");
    if (fmt.rate == 0)
        return tern_errf(TERN_EFORMAT, "WAV: fmt chunk declares a sample rate of 0 Hz");
    if (fmt.rate > (uint32_t)TERN_AUDIO_MAX_RATE || fmt.rate < (uint32_t)TERN_AUDIO_MIN_RATE)
        return tern_errf(TERN_EUNSUPPORTED, "WAV: sample rate %u Hz outside the supported %d..%d Hz", fmt.rate,
                         TERN_AUDIO_MIN_RATE, TERN_AUDIO_MAX_RATE);

    unsigned bytes;
    if (fmt.format == WAVE_FORMAT_PCM) {
        if (fmt.bits == 0 || fmt.bits > 32)
            return tern_errf(TERN_EUNSUPPORTED, "WAV: %u-bit PCM (supported: 1..32 bits)", fmt.bits);
        bytes = (fmt.bits + 7u) / 8u; /* narrower samples sit left-justified in whole bytes */
    } else if (fmt.format == WAVE_FORMAT_IEEE_FLOAT) {
        if (fmt.bits != 32 && fmt.bits != 64)
            return tern_errf(TERN_EUNSUPPORTED, "WAV: %u-bit IEEE float (supported: 32, 64)", fmt.bits);
        bytes = fmt.bits / 8u;
    } else {
        return tern_errf(TERN_EUNSUPPORTED,
                         "WAV: codec 0x%04x is not PCM or IEEE float (the WAV parser reads those only)",
                         fmt.format);
    }

    size_t frame_bytes = (size_t)bytes * fmt.channels; /* <= 8 * 65535: no overflow */
    size_t frames = data_len / frame_bytes;
    if (max_seconds > 0 && (double)frames > ceil(max_seconds * fmt.rate))
        frames = (size_t)ceil(max_seconds * fmt.rate);
    out->rate = (int)fmt.rate;
    if (frames == 0)
        return NULL;
    out->samples = malloc(frames * sizeof(float)); /* frames <= len: no overflow */
    if (!out->samples)
        return tern_errf(TERN_ENOMEM, "WAV: cannot allocate %zu samples", frames);
    out->n = frames;

    const uint8_t *p = b + data_off;
    if (fmt.channels == 1) {
        for (size_t f = 0; f < frames; f++, p += bytes)
            out->samples[f] = (float)read_sample(p, fmt.format, bytes);
    } else {
        for (size_t f = 0; f < frames; f++) {
            double acc = 0.0;
            for (unsigned c = 0; c < fmt.channels; c++, p += bytes)
                acc += read_sample(p, fmt.format, bytes);
            out->samples[f] = (float)(acc / fmt.channels);
        }
    }
    if (fmt.format == WAVE_FORMAT_IEEE_FLOAT) {
        /* NaN or Inf would poison every feature of its frames; say where instead. */
        for (size_t f = 0; f < frames; f++)
            if (!isfinite(out->samples[f])) {
                tern_pcm_free(out);
                return tern_errf(TERN_EFORMAT, "WAV: float sample at frame %zu is not finite (NaN or Inf)", f);
            }
    }
    return NULL;
}
