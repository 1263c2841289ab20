/* audio_testutil.c — sox runner and an in-memory libav encoder for the audio tests (see
 * audio_testutil.h). The encoder writes through a custom AVIOContext with a seek callback, so
 * muxers that patch their header at the end (MP3's Xing/LAME frame with the encoder delay, the
 * MP4 moov atom) produce the same bytes they would write to a file. */
#include "audio_testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>

#include "testutil.h"

void atu_sox(const char *args) {
    char cmd[8192], *out = NULL;
    snprintf(cmd, sizeof cmd, "sox %s 2>&1", args);
    int rc = tu_run(cmd, &out);
    if (rc != 0)
        fail_msg("sox %s failed (%d): %s (scripts/install-deps installs sox)", args, rc, out ? out : "");
    free(out);
}

/* ---- a growable memory file ----------------------------------------------------------------- */

typedef struct membuf {
    uint8_t *d;
    size_t n, cap, pos;
} membuf;

#if LIBAVFORMAT_VERSION_MAJOR >= 61 /* FFmpeg 7 made the write callback's buffer const */
static int mem_write(void *opaque, const uint8_t *p, int n) {
#else
static int mem_write(void *opaque, uint8_t *p, int n) {
#endif
    membuf *m = opaque;
    if (m->pos + (size_t)n > m->cap) {
        size_t cap = (m->pos + (size_t)n) * 2;
        uint8_t *d = realloc(m->d, cap);
        if (!d)
            return AVERROR(ENOMEM);
        m->d = d;
        m->cap = cap;
    }
    if (m->pos > m->n) /* a seek past the end leaves a hole: zero it */
        memset(m->d + m->n, 0, m->pos - m->n);
    memcpy(m->d + m->pos, p, (size_t)n);
    m->pos += (size_t)n;
    if (m->pos > m->n)
        m->n = m->pos;
    return n;
}

static int64_t mem_seek(void *opaque, int64_t off, int whence) {
    membuf *m = opaque;
    if (whence & AVSEEK_SIZE)
        return (int64_t)m->n;
    int w = whence & ~AVSEEK_FORCE;
    int64_t base = w == SEEK_CUR ? (int64_t)m->pos : w == SEEK_END ? (int64_t)m->n : 0;
    if (base + off < 0)
        return -1;
    m->pos = (size_t)(base + off);
    return (int64_t)m->pos;
}

/* ---- float samples → an encoder's frame ----------------------------------------------------- */

static int64_t to_int(double v, double scale, double lo, double hi) {
    double x = nearbyint(v * scale);
    return (int64_t)(x < lo ? lo : x > hi ? hi : x);
}

/* Copies frames [start, start + fr->nb_samples) of `src` into fr in fr's sample format. */
static void fill_frame(AVFrame *fr, const float *src, size_t start) {
    int ch = fr->ch_layout.nb_channels;
    for (int i = 0; i < fr->nb_samples; i++) {
        for (int c = 0; c < ch; c++) {
            double v = src[(start + (size_t)i) * (size_t)ch + (size_t)c];
            switch (fr->format) {
            case AV_SAMPLE_FMT_FLTP: ((float *)fr->extended_data[c])[i] = (float)v; break;
            case AV_SAMPLE_FMT_FLT: ((float *)fr->extended_data[0])[i * ch + c] = (float)v; break;
            case AV_SAMPLE_FMT_S16P:
                ((int16_t *)fr->extended_data[c])[i] = (int16_t)to_int(v, 32768.0, -32768, 32767);
                break;
            case AV_SAMPLE_FMT_S16:
                ((int16_t *)fr->extended_data[0])[i * ch + c] = (int16_t)to_int(v, 32768.0, -32768, 32767);
                break;
            case AV_SAMPLE_FMT_S32P:
                ((int32_t *)fr->extended_data[c])[i] =
                    (int32_t)to_int(v, 2147483648.0, -2147483648.0, 2147483647.0);
                break;
            case AV_SAMPLE_FMT_S32:
                ((int32_t *)fr->extended_data[0])[i * ch + c] =
                    (int32_t)to_int(v, 2147483648.0, -2147483648.0, 2147483647.0);
                break;
            default: fail_msg("encoder wants sample format %d, which the test does not write", fr->format);
            }
        }
    }
}

uint8_t *atu_libav_encode(const char *muxer, const char *codec_name, int rate, int channels, const float *interleaved,
                          size_t frames, int64_t bit_rate, size_t *len) {
    membuf mb = {0};
    AVFormatContext *oc = NULL;
    if (avformat_alloc_output_context2(&oc, NULL, muxer, NULL) < 0)
        fail_msg("libavformat has no %s muxer", muxer);
    uint8_t *iobuf = av_malloc(65536);
    oc->pb = avio_alloc_context(iobuf, 65536, 1, &mb, NULL, mem_write, mem_seek);
    assert_non_null(oc->pb);
    oc->flags |= AVFMT_FLAG_CUSTOM_IO;
    const AVCodec *codec = avcodec_find_encoder_by_name(codec_name);
    if (!codec)
        fail_msg("libavcodec has no %s encoder", codec_name);
    AVStream *st = avformat_new_stream(oc, NULL);
    AVCodecContext *enc = avcodec_alloc_context3(codec);
    assert_true(st && enc);
    enc->sample_rate = rate;
    av_channel_layout_default(&enc->ch_layout, channels);
    enc->sample_fmt = codec->sample_fmts ? codec->sample_fmts[0] : AV_SAMPLE_FMT_S16;
    enc->bit_rate = bit_rate;
    enc->time_base = (AVRational){1, rate};
    if (oc->oformat->flags & AVFMT_GLOBALHEADER)
        enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    int rc = avcodec_open2(enc, codec, NULL);
    if (rc < 0)
        fail_msg("cannot open the %s encoder at %d Hz, %d channels (libav error %d)", codec_name, rate, channels, rc);
    assert_true(avcodec_parameters_from_context(st->codecpar, enc) >= 0);
    st->time_base = enc->time_base;
    assert_true(avformat_write_header(oc, NULL) >= 0);

    AVFrame *fr = av_frame_alloc();
    AVPacket *pkt = av_packet_alloc();
    size_t done = 0;
    size_t fsz = enc->frame_size > 0 ? (size_t)enc->frame_size : 1024;
    for (;;) {
        size_t n = frames - done < fsz ? frames - done : fsz;
        if (n > 0) {
            fr->nb_samples = (int)n;
            fr->format = enc->sample_fmt;
            fr->sample_rate = rate;
            av_channel_layout_copy(&fr->ch_layout, &enc->ch_layout);
            assert_true(av_frame_get_buffer(fr, 0) >= 0);
            fill_frame(fr, interleaved, done);
            fr->pts = (int64_t)done;
            done += n;
            assert_true(avcodec_send_frame(enc, fr) >= 0);
            av_frame_unref(fr);
        } else {
            avcodec_send_frame(enc, NULL); /* flush; repeated calls after EOF are harmless */
        }
        while ((rc = avcodec_receive_packet(enc, pkt)) >= 0) {
            av_packet_rescale_ts(pkt, enc->time_base, st->time_base);
            pkt->stream_index = st->index;
            assert_true(av_interleaved_write_frame(oc, pkt) >= 0);
        }
        if (rc == AVERROR_EOF)
            break;
        if (rc != AVERROR(EAGAIN))
            fail_msg("%s encoder failed (libav error %d)", codec_name, rc);
    }
    assert_true(av_write_trailer(oc) >= 0);
    av_packet_free(&pkt);
    av_frame_free(&fr);
    avcodec_free_context(&enc);
    av_freep(&oc->pb->buffer);
    avio_context_free(&oc->pb);
    avformat_free_context(oc);
    *len = mb.n;
    return mb.d;
}
