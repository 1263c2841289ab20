/* openai_audio.c — POST /v1/audio/transcriptions as the official OpenAI clients send it: a multipart/form-data
 * upload with the clip in `file` and the options as text fields (`model`, `prompt`, `language`, `temperature`,
 * `response_format` json or text). The clip becomes a one-turn chat — the audio, then an instruction to transcribe
 * it (in the language asked for, following the prompt's text) — generated like any chat request in the engine's
 * batch, and the reply's text is answered as {"text": ...} or plain text. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <microhttpd.h>

#include "core/base64.h"
#include "server/multipart.h"
#include "server/server_internal.h"

#define MAX_PARTS 32

/* A text field's value as a NUL-terminated copy in buf; 0 when absent, -1 when too long or not text. */
static int field(const srv_part *parts, size_t n, const char *name, char *buf, size_t cap) {
    const srv_part *p = srv_multipart_find(parts, n, name);
    if (!p)
        return 0;
    if (p->len >= cap || memchr(p->data, 0, p->len))
        return -1;
    memcpy(buf, p->data, p->len);
    buf[p->len] = 0;
    return 1;
}

/* The instruction that follows the clip in the user's turn. */
static char *instruction(const char *language, const char *prompt) {
    sbuf b = {0};
    int bad = sbuf_printf(&b, "Transcribe this audio clip verbatim");
    if (language[0])
        bad |= sbuf_printf(&b, " in the language with ISO-639-1 code '%s'", language);
    bad |= sbuf_printf(&b, ". Reply with the transcription only.");
    if (prompt[0])
        bad |= sbuf_printf(&b, " The text before it, or its vocabulary: %s", prompt);
    if (bad || sbuf_add(&b, "", 1)) {
        sbuf_free(&b);
        return NULL;
    }
    return b.p;
}

/* Reads the upload into the chat body it stands for; *text_reply says response_format "text". */
static TERN_MUST_CHECK tern_err *read_upload(srv_req *r, json_t **chat, int *text_reply) {
    *chat = NULL;
    *text_reply = 0;
    const char *ctype = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    char boundary[128];
    TERN_TRY(srv_multipart_boundary(ctype ? ctype : "", boundary, sizeof boundary));
    srv_part parts[MAX_PARTS];
    size_t n = 0;
    TERN_TRY(srv_multipart_parse(r->body.p ? r->body.p : "", r->body.len, boundary, parts, MAX_PARTS, &n));
    const srv_part *file = srv_multipart_find(parts, n, "file");
    if (!file)
        return tern_errf(TERN_EINVAL, "'file': required (the audio to transcribe, as a multipart file upload)");
    if (file->len == 0)
        return tern_errf(TERN_EINVAL, "'file': the uploaded file is empty");
    char format[32] = "", language[32] = "", prompt[4096] = "", temp[64] = "", model[256] = "";
    static const char *const fields[] = {"response_format", "language", "prompt", "temperature", "model"};
    char *bufs[] = {format, language, prompt, temp, model};
    const size_t caps[] = {sizeof format, sizeof language, sizeof prompt, sizeof temp, sizeof model};
    for (int i = 0; i < 5; i++)
        if (field(parts, n, fields[i], bufs[i], caps[i]) < 0)
            return tern_errf(TERN_EINVAL, "'%s': expected a text field of at most %zu bytes", fields[i], caps[i] - 1);
    if (format[0] && strcmp(format, "json") && strcmp(format, "text"))
        return tern_errf(TERN_EUNSUPPORTED, "'response_format' \"%s\" is not supported: use \"json\" or \"text\"",
                         format);
    *text_reply = !strcmp(format, "text");
    for (const char *c = language; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '-'))
            return tern_errf(TERN_EINVAL, "'language': expected an ISO-639-1 code such as \"en\", got \"%s\"",
                             language);
    double t = 0;
    if (temp[0]) {
        char *end;
        t = strtod(temp, &end);
        if (end == temp || *end || !(t >= 0 && t <= 2))
            return tern_errf(TERN_EINVAL, "'temperature': expected a number in [0, 2], got \"%s\"", temp);
    }
    char *b64 = tern_base64_encode(file->data, file->len);
    char *instr = instruction(language, prompt);
    if (!b64 || !instr) {
        free(b64);
        free(instr);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    /* No `format`: the bytes decide how the upload is decoded, whatever its name says. The instruction may carry
     * the client's prompt, which need not be valid UTF-8. */
    *chat = json_pack("{s:f,s:[{s:s,s:[{s:s,s:{s:s}},{s:s,s:o}]}]}", "temperature", t, "messages", "role", "user",
                      "content", "type", "input_audio", "input_audio", "data", b64, "type", "text", "text",
                      srv_json_string_lossy(instr, strlen(instr)));
    free(b64);
    free(instr);
    return *chat ? NULL : tern_errf(TERN_ENOMEM, "out of memory");
}

int srv_handle_transcriptions(srv_req *r, json_t *unused) {
    (void)unused;
    tern_server *s = r->srv;
    json_t *chat = NULL;
    int text_reply = 0;
    srv_params p;
    memset(&p, 0, sizeof p);
    tern_media_prompt mp = {0};
    void *c = NULL;
    tern_err *err = NULL;
    if (!s->info.audio)
        err = tern_errf(TERN_EUNSUPPORTED, "this model has no audio tower (config.json has no audio_config): "
                                           "transcription needs a Gemma 4 model with one");
    if (!err)
        err = read_upload(r, &chat, &text_reply);
    if (!err)
        err = srv_params_parse(chat, PARAMS_CHAT, s->info.vocab_size, &p);
    if (!err)
        err = srv_chat_prompt_media(s, json_object_get(chat, "messages"), NULL, NULL, 1, &mp);
    json_decref(chat);
    if (!err && !(c = srv_chat_run_new(s, 0, 0, 0)))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    if (err) {
        tern_media_prompt_free(&mp);
        srv_params_free(&p);
        return srv_reply_err(r, err);
    }
    srv_gen *g;
    err = srv_gen_start_chat_media(r, s, &p, &mp, srv_chat_ops(), c, &g);
    if (err)
        return srv_reply_err(r, err);
    int k = srv_gen_run(g), rc;
    if (k < 0) {
        rc = 0; /* the client is gone */
    } else if (k > 0) {
        rc = srv_reply_error(r, g->fail_status, "%s", g->fail_msg);
    } else {
        json_t *v = srv_chat_response(c);
        const json_t *msg = json_object_get(json_array_get(json_object_get(v, "choices"), 0), "message");
        const json_t *text = json_object_get(msg, "content");
        const json_t *u = json_object_get(v, "usage");
        if (!json_is_string(text)) {
            rc = srv_reply_error(r, 503, "out of memory");
        } else if (text_reply) {
            rc = srv_reply_text(r, 200, "text/plain; charset=utf-8", json_string_value(text), json_string_length(text));
        } else {
            json_int_t in = json_integer_value(json_object_get(u, "prompt_tokens"));
            json_int_t out = json_integer_value(json_object_get(u, "completion_tokens"));
            json_t *reply = json_pack("{s:O,s:{s:s,s:I,s:I,s:I}}", "text", text, "usage", "type", "tokens",
                                      "input_tokens", in, "output_tokens", out, "total_tokens", in + out);
            rc = srv_reply_json(r, 200, reply);
            json_decref(reply);
        }
        json_decref(v);
    }
    srv_gen_free(g);
    return rc;
}
