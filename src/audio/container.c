/* container.c — decodes every non-WAV audio container (mp3, m4a/AAC, flac, ogg/vorbis, opus, aiff,
 * webm, …) in-process with libavformat/libavcodec, to mono float at the stream's native rate.
 *
 * Three guards, because the bytes come from a network client:
 *   - Memory only: a custom AVIOContext reads the caller's buffer (no temp files), and io_open is
 *     replaced by one that refuses, so no demuxer can follow a reference to another file or URL.
 *   - A demuxer whitelist of audio containers: playlist/concat style demuxers never run.
 *   - A deadline: libav's interrupt callback aborts blocking demuxer work once it passes, and the
 *     packet loop checks it too, so a pathological file costs bounded time.
 * The caller also bounds the output (max_seconds): decoding stops once enough audio is in hand. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/error.h>
#include <libavutil/samplefmt.h>

#include "audio/audio.h"
#include "core/av_log.h"
#include "core/log.h"
#include "core/timeutil.h"

/* Demuxer names as libav spells them; av_match_list also accepts a demuxer listed under an alias
 * ("mov" covers mov,mp4,m4a,3gp; "matroska" covers matroska,webm). */
static const char demuxer_whitelist[] =
    "wav,w64,mp3,aac,mov,flac,ogg,matroska,aiff,caf,au,amr,ac3,eac3,wv,ape,tta,mpc,mpc8,asf,dts,voc";

const char *tern_audio_supported_containers(void) {
    return "WAV (PCM, float, and compressed codecs), MP3, M4A/MP4 (AAC, ALAC), FLAC, Ogg (Vorbis, Opus, FLAC), "
           "WebM/Matroska, AIFF, CAF, AU, AMR, AC-3/E-AC-3, DTS, WavPack, APE, TTA, Musepack, WMA (ASF), VOC";
}

/* ---- memory reader, refusal of other files, deadline ---------------------------------------- */

typedef struct deadline {
    uint64_t at_ns;
    double seconds; /* the budget, for the message */
    int hit;
} deadline;

static int deadline_passed(void *opaque) {
    deadline *d = opaque;
    if (tern_now_ns() >= d->at_ns)
        d->hit = 1;
    return d->hit;
}

static TERN_MUST_CHECK tern_err *timeout_error(const deadline *d) {
    return tern_errf(TERN_ECANCELLED, "audio decode abandoned: over its %.3g s time limit", d->seconds);
}

typedef struct mem_reader {
    const uint8_t *data;
    size_t len;
    size_t pos;
    deadline *dl; /* a demuxer scanning for sync reads in a loop: each read checks the time */
} mem_reader;

static int mem_read(void *opaque, uint8_t *buf, int size) {
    mem_reader *r = opaque;
    if (deadline_passed(r->dl))
        return AVERROR_EXIT;
    if (r->pos >= r->len || size <= 0)
        return AVERROR_EOF;
    size_t n = r->len - r->pos;
    if (n > (size_t)size)
        n = (size_t)size;
    memcpy(buf, r->data + r->pos, n);
    r->pos += n;
    return (int)n;
}

static int64_t mem_seek(void *opaque, int64_t offset, int whence) {
    mem_reader *r = opaque;
    whence &= ~AVSEEK_FORCE;
    if (whence == AVSEEK_SIZE)
        return (int64_t)r->len;
    int64_t base;
    switch (whence) {
    case SEEK_SET: base = 0; break;
    case SEEK_CUR: base = (int64_t)r->pos; break;
    case SEEK_END: base = (int64_t)r->len; break;
    default: return AVERROR(EINVAL);
    }
    if ((offset > 0 && base > INT64_MAX - offset))
        return AVERROR(EINVAL);
    int64_t target = base + offset;
    if (target < 0 || (uint64_t)target > r->len)
        return AVERROR(EINVAL);
    r->pos = (size_t)target;
    return target;
}

static int deny_io_open(AVFormatContext *s, AVIOContext **pb, const char *url, int flags, AVDictionary **options) {
    TLOG_DEBUG("audio: refused a container's request to open '%s'", url ? url : "");
    return AVERROR(EPERM);
}

/* ---- decoded frames → mono ------------------------------------------------------------------ */

typedef struct mono_buf {
    float *s;
    size_t n, cap;
    size_t max;         /* frames to keep, 0 = unbounded; set from max_seconds at the first frame */
    double max_seconds; /* <= 0: unbounded */
    int rate;
} mono_buf;

static double sample_at(const uint8_t *p, enum AVSampleFormat packed, size_t i) {
    switch (packed) {
    case AV_SAMPLE_FMT_U8: return (p[i] - 128) / 128.0;
    case AV_SAMPLE_FMT_S16: return ((const int16_t *)p)[i] / 32768.0;
    case AV_SAMPLE_FMT_S32: return ((const int32_t *)p)[i] / 2147483648.0;
    case AV_SAMPLE_FMT_S64: return (double)((const int64_t *)p)[i] / 9223372036854775808.0;
    case AV_SAMPLE_FMT_FLT: return ((const float *)p)[i];
    case AV_SAMPLE_FMT_DBL: return ((const double *)p)[i];
    default: return 0.0; /* not reached: checked by the caller */
    }
}

/* Appends one decoded frame, mixed down by the mean of its channels. */
static TERN_MUST_CHECK tern_err *append_frame(mono_buf *mb, const AVFrame *fr) {
    int ch = fr->ch_layout.nb_channels;
    enum AVSampleFormat fmt = (enum AVSampleFormat)fr->format;
    enum AVSampleFormat packed = av_get_packed_sample_fmt(fmt);
    if (ch <= 0)
        return tern_errf(TERN_EFORMAT, "decoded audio frame has %d channels", ch);
    if (packed != AV_SAMPLE_FMT_U8 && packed != AV_SAMPLE_FMT_S16 && packed != AV_SAMPLE_FMT_S32 &&
        packed != AV_SAMPLE_FMT_S64 && packed != AV_SAMPLE_FMT_FLT && packed != AV_SAMPLE_FMT_DBL)
        return tern_errf(TERN_EUNSUPPORTED, "decoder produced sample format %d, which tern does not read", fr->format);
    if (fr->sample_rate < TERN_AUDIO_MIN_RATE || fr->sample_rate > TERN_AUDIO_MAX_RATE)
        return tern_errf(TERN_EUNSUPPORTED, "audio stream at %d Hz, outside the supported %d..%d Hz",
                         fr->sample_rate, TERN_AUDIO_MIN_RATE, TERN_AUDIO_MAX_RATE);
    if (mb->rate == 0) {
        mb->rate = fr->sample_rate;
        if (mb->max_seconds > 0)
            mb->max = (size_t)ceil(mb->max_seconds * mb->rate);
    } else if (mb->rate != fr->sample_rate)
        return tern_errf(TERN_EUNSUPPORTED, "audio stream changes sample rate mid-stream (%d Hz, then %d Hz)",
                         mb->rate, fr->sample_rate);
    if (fr->nb_samples <= 0)
        return NULL;
    size_t take = (size_t)fr->nb_samples;
    if (mb->max && take > mb->max - mb->n)
        take = mb->max - mb->n;
    if (mb->n + take > mb->cap) {
        size_t ncap = mb->cap ? mb->cap : 16384;
        while (ncap < mb->n + take)
            ncap *= 2;
        float *ns = realloc(mb->s, ncap * sizeof(float));
        if (!ns)
            return tern_errf(TERN_ENOMEM, "cannot allocate %zu decoded samples", ncap);
        mb->s = ns;
        mb->cap = ncap;
    }
    int planar = av_sample_fmt_is_planar(fmt);
    float *dst = mb->s + mb->n;
    for (size_t i = 0; i < take; i++) {
        double acc = 0.0;
        for (int c = 0; c < ch; c++)
            acc += planar ? sample_at(fr->extended_data[c], packed, i)
                          : sample_at(fr->extended_data[0], packed, i * (size_t)ch + (size_t)c);
        float v = (float)(acc / ch);
        if (!isfinite(v))
            return tern_errf(TERN_EFORMAT, "decoded sample %zu is not finite (NaN or Inf)", mb->n + i);
        dst[i] = v;
    }
    mb->n += take;
    return NULL;
}

/* ---- the decode ----------------------------------------------------------------------------- */

static TERN_MUST_CHECK tern_err *av_err(int rc, const char *what) {
    char msg[AV_ERROR_MAX_STRING_SIZE] = {0};
    av_strerror(rc, msg, sizeof msg);
    return tern_errf(TERN_EFORMAT, "%s: %s", what, msg);
}

/* Drains every frame the decoder has ready into mb. */
static TERN_MUST_CHECK tern_err *drain(AVCodecContext *dec, AVFrame *frame, mono_buf *mb, deadline *dl) {
    for (;;) {
        if (deadline_passed(dl))
            return timeout_error(dl);
        int rc = avcodec_receive_frame(dec, frame);
        if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF)
            return NULL;
        if (rc == AVERROR_INVALIDDATA)
            continue; /* a corrupt packet: skip it, as players do */
        if (rc < 0)
            return av_err(rc, "decoding audio");
        tern_err *e = append_frame(mb, frame);
        av_frame_unref(frame);
        if (e)
            return e;
    }
}

tern_err *tern_audio_decode_container(const void *data, size_t len, double timeout_s, double max_seconds,
                                      tern_pcm *out) {
    memset(out, 0, sizeof *out);
    tern_av_log_route();
    if (len == 0)
        return tern_errf(TERN_EFORMAT, "audio is empty (0 bytes); supported containers: %s",
                         tern_audio_supported_containers());
    if (!(timeout_s > 0)) /* also NaN */
        timeout_s = TERN_AUDIO_DEFAULT_TIMEOUT_S;
    if (timeout_s > 86400.0) /* keeps the nanosecond deadline far from overflow */
        timeout_s = 86400.0;
    deadline dl = {tern_now_ns() + (uint64_t)(timeout_s * 1e9), timeout_s, 0};
    mem_reader rd = {data, len, 0, &dl};
    mono_buf mb = {.max_seconds = max_seconds};
    tern_err *err = NULL;

    AVFormatContext *fmt = NULL;
    AVIOContext *avio = NULL;
    AVCodecContext *dec = NULL;
    AVPacket *pkt = NULL;
    AVFrame *frame = NULL;
    AVDictionary *opts = NULL;
    const int io_size = 32768;
    uint8_t *io_buf = av_malloc(io_size);
    if (io_buf)
        avio = avio_alloc_context(io_buf, io_size, 0, &rd, mem_read, NULL, mem_seek);
    if (!avio) {
        av_free(io_buf);
        return tern_errf(TERN_ENOMEM, "cannot allocate the audio reader");
    }
    fmt = avformat_alloc_context();
    if (!fmt) {
        err = tern_errf(TERN_ENOMEM, "cannot allocate the audio demuxer");
        goto done;
    }
    fmt->pb = avio;
    fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
    fmt->interrupt_callback.callback = deadline_passed;
    fmt->interrupt_callback.opaque = &dl;
    fmt->io_open = deny_io_open;
    av_dict_set(&opts, "format_whitelist", demuxer_whitelist, 0);

    int rc = avformat_open_input(&fmt, NULL, NULL, &opts); /* frees fmt on failure */
    /* An interrupted call may fail in any way, or return early looking successful: check the
     * deadline's flag after each one, before believing its result. */
    if (dl.hit)
        goto timed_out;
    if (rc < 0) {
        char msg[AV_ERROR_MAX_STRING_SIZE] = {0};
        av_strerror(rc, msg, sizeof msg);
        /* EINVAL here is usually a demuxer off the whitelist recognising the bytes. */
        err = tern_errf(TERN_EFORMAT,
                        "unrecognised audio: not a WAV file nor a container tern decodes (libav: %s); "
                        "supported containers: %s",
                        msg, tern_audio_supported_containers());
        goto done;
    }
    rc = avformat_find_stream_info(fmt, NULL);
    if (dl.hit)
        goto timed_out;
    if (rc < 0) {
        err = av_err(rc, fmt->iformat ? fmt->iformat->name : "audio container");
        goto done;
    }
    const AVCodec *codec = NULL;
    int si = av_find_best_stream(fmt, AVMEDIA_TYPE_AUDIO, -1, -1, &codec, 0);
    if (si == AVERROR_DECODER_NOT_FOUND || (si >= 0 && !codec)) {
        err = tern_errf(TERN_EUNSUPPORTED, "%s: no decoder for its audio codec in this libavcodec build",
                        fmt->iformat->name);
        goto done;
    }
    if (si < 0) {
        err = tern_errf(TERN_EFORMAT, "%s container holds no audio stream", fmt->iformat->name);
        goto done;
    }
    for (unsigned i = 0; i < fmt->nb_streams; i++)
        fmt->streams[i]->discard = (int)i == si ? AVDISCARD_DEFAULT : AVDISCARD_ALL;
    AVStream *st = fmt->streams[si];
    dec = avcodec_alloc_context3(codec);
    pkt = av_packet_alloc();
    frame = av_frame_alloc();
    if (!dec || !pkt || !frame) {
        err = tern_errf(TERN_ENOMEM, "cannot allocate the audio decoder");
        goto done;
    }
    if ((rc = avcodec_parameters_to_context(dec, st->codecpar)) < 0) {
        err = av_err(rc, "audio codec parameters");
        goto done;
    }
    dec->pkt_timebase = st->time_base;
    dec->thread_count = 1; /* a 30 s clip decodes in milliseconds; the engine owns the cores */
    if ((rc = avcodec_open2(dec, codec, NULL)) < 0) {
        err = av_err(rc, codec->name);
        goto done;
    }

    int read_error = 0;
    for (;;) {
        if (deadline_passed(&dl))
            goto timed_out;
        if (mb.max && mb.n >= mb.max)
            break;
        rc = av_read_frame(fmt, pkt);
        if (dl.hit) {
            av_packet_unref(pkt);
            goto timed_out;
        }
        if (rc < 0) {
            if (rc != AVERROR_EOF)
                read_error = rc; /* a cut-short or damaged file: keep what decoded so far */
            break;
        }
        if (pkt->stream_index == si) {
            rc = avcodec_send_packet(dec, pkt);
            if (rc < 0 && rc != AVERROR_INVALIDDATA && rc != AVERROR(EAGAIN)) {
                av_packet_unref(pkt);
                err = av_err(rc, codec->name);
                goto done;
            }
            if ((err = drain(dec, frame, &mb, &dl)))
                goto done;
        }
        av_packet_unref(pkt);
    }
    if (!(mb.max && mb.n >= mb.max)) {
        avcodec_send_packet(dec, NULL); /* flush: the decoder's delayed frames */
        if ((err = drain(dec, frame, &mb, &dl)))
            goto done;
    }
    if (mb.n == 0) {
        if (read_error)
            err = av_err(read_error, fmt->iformat->name);
        else
            err = tern_errf(TERN_EFORMAT, "%s (%s): no audio could be decoded", fmt->iformat->name,
                            avcodec_get_name(st->codecpar->codec_id));
        goto done;
    }
    out->samples = mb.s;
    out->n = mb.n;
    out->rate = mb.rate;
    mb.s = NULL;
    goto done;

timed_out:
    err = timeout_error(&dl);
done:
    free(mb.s);
    av_dict_free(&opts);
    av_frame_free(&frame);
    av_packet_free(&pkt);
    avcodec_free_context(&dec);
    avformat_close_input(&fmt);
    if (avio) {
        av_freep(&avio->buffer);
        avio_context_free(&avio);
    }
    return err;
}
