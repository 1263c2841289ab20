/* chat_prompt.c — chat messages → template context → prompt text → token ids (see chat_prompt.h). */
#include "core/json_util.h"
#include "chat/chat_prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_TEMPLATE_OUTPUT (64u << 20)

static TERN_MUST_CHECK tern_err *oom(void) { return tern_errf(TERN_ENOMEM, "out of memory"); }

/* ---- content ------------------------------------------------------------------------------ */

/* Appends the text of content parts (OpenAI "text" / Anthropic text blocks) to *acc, joined by '\n'. */
static TERN_MUST_CHECK tern_err *join_text(json_t **acc, const char *s, size_t n) {
    if (!*acc) {
        *acc = json_stringn(s, n);
        return *acc ? NULL : oom();
    }
    size_t old = json_string_length(*acc);
    char *buf = malloc(old + 1 + n + 1);
    if (!buf)
        return oom();
    memcpy(buf, json_string_value(*acc), old);
    buf[old] = '\n';
    memcpy(buf + old + 1, s, n);
    int rc = json_string_setn(*acc, buf, old + 1 + n);
    free(buf);
    return rc ? oom() : NULL;
}

/* Media parts are valid OpenAI input that this server cannot feed to the model (audio and images only with a
 * tower). */
static TERN_MUST_CHECK tern_err *unsupported_part(const char *path, const char *type) {
    if (!strcmp(type, "image_url") || !strcmp(type, "image") || !strcmp(type, "input_image"))
        return tern_errf(TERN_EUNSUPPORTED, "%s: this model has no vision tower (config.json has no vision_config and "
                         "no mmproj with one): image input needs a Gemma 4 model with one", path);
    if (!strcmp(type, "input_audio") || !strcmp(type, "audio_url") || !strcmp(type, "audio"))
        return tern_errf(TERN_EUNSUPPORTED, "%s: this model has no audio tower (config.json has no audio_config): "
                         "audio input needs a Gemma 4 model with one", path);
    if (!strcmp(type, "file") || !strcmp(type, "document") || !strcmp(type, "video_url"))
        return tern_errf(TERN_EUNSUPPORTED, "%s: '%s' content is not supported by this server (text only)", path,
                         type);
    return NULL;
}

/* The `format` values an input_audio part may name (the bytes decide how they are decoded). */
static const char *const audio_formats[] = {"wav", "mp3", "flac", "ogg", "opus", "m4a", "mp4", "aac", "webm",
                                            "aiff", "aif", "caf", "au", "amr", "wma", "mpeg", "mpga", "oga", "x-wav",
                                            "wave", "vorbis", "alac", "ac3", "wv", "ape", "tta", "mpc", "voc"};

static int known_format(const char *f, size_t n) {
    for (size_t i = 0; i < sizeof audio_formats / sizeof *audio_formats; i++)
        if (strlen(audio_formats[i]) == n && !strncasecmp(f, audio_formats[i], n))
            return 1;
    return 0;
}

/* An audio part → {"data", "format", "path"} appended to `audio`. input_audio: {"data": base64, "format"};
 * audio_url: {"url": "data:audio/FORMAT;base64,..."} (no remote URLs: the server fetches nothing). */
static TERN_MUST_CHECK tern_err *audio_part(const json_t *part, const char *type, const char *pp, json_t *audio) {
    const char *data = NULL, *fmt = NULL;
    size_t data_len = 0, fmt_len = 0;
    if (!strcmp(type, "input_audio")) {
        const json_t *ia = json_object_get(part, "input_audio");
        const json_t *d = json_is_object(ia) ? json_object_get(ia, "data") : NULL;
        const json_t *f = json_is_object(ia) ? json_object_get(ia, "format") : NULL;
        if (!json_is_object(ia))
            return tern_errf(TERN_EINVAL, "%s.input_audio: expected an object {\"data\": base64, \"format\": \"wav\"}",
                             pp);
        if (!json_is_string(d) || json_string_length(d) == 0)
            return tern_errf(TERN_EINVAL, "%s.input_audio.data: expected the clip as a non-empty base64 string", pp);
        if (f && !json_is_null(f) && !json_is_string(f))
            return tern_errf(TERN_EINVAL, "%s.input_audio.format: expected a string such as \"wav\" or \"mp3\"", pp);
        data = json_string_value(d), data_len = json_string_length(d);
        if (json_is_string(f))
            fmt = json_string_value(f), fmt_len = json_string_length(f);
    } else if (!strcmp(type, "audio_url")) {
        const json_t *au = json_object_get(part, "audio_url");
        const json_t *u = json_is_object(au) ? json_object_get(au, "url") : json_is_string(au) ? au : NULL;
        if (!json_is_string(u))
            return tern_errf(TERN_EINVAL, "%s.audio_url.url: expected a data: URI (data:audio/wav;base64,...)", pp);
        const char *url = json_string_value(u), *comma = strchr(url, ',');
        if (strncmp(url, "data:", 5))
            return tern_errf(TERN_EINVAL, "%s.audio_url.url: only data: URIs are accepted (data:audio/wav;base64,...); "
                             "this server fetches no URLs", pp);
        const char *semi = comma ? memchr(url, ';', (size_t)(comma - url)) : NULL;
        if (!comma || !semi || strncmp(semi, ";base64,", 8))
            return tern_errf(TERN_EINVAL, "%s.audio_url.url: expected data:audio/FORMAT;base64,DATA", pp);
        const char *mime = url + 5;
        if (!strncmp(mime, "audio/", 6))
            fmt = mime + 6, fmt_len = (size_t)(semi - mime - 6);
        else if (semi != mime && strncmp(mime, "application/octet-stream", 24))
            return tern_errf(TERN_EINVAL, "%s.audio_url.url: the data URI's type '%.*s' is not audio/*", pp,
                             (int)(semi - mime), mime);
        data = comma + 1, data_len = json_string_length(u) - (size_t)(comma + 1 - url);
        if (data_len == 0)
            return tern_errf(TERN_EINVAL, "%s.audio_url.url: the data URI holds no data", pp);
    } else {
        return tern_errf(TERN_EINVAL, "%s.type: use \"input_audio\" ({\"data\": base64, \"format\"}) for audio", pp);
    }
    if (fmt && fmt_len && !known_format(fmt, fmt_len))
        return tern_errf(TERN_EINVAL, "%s: audio format '%.*s' is not supported (wav, mp3, flac, ogg, opus, m4a, aac, "
                         "webm, aiff and the other containers libav reads)", pp, (int)(fmt_len > 32 ? 32 : fmt_len), fmt);
    json_t *a = json_object();
    if (!a || json_object_set_new(a, "data", json_stringn(data, data_len)) ||
        json_object_set_new(a, "format", json_stringn(fmt ? fmt : "", fmt ? fmt_len : 0)) ||
        json_object_set_new(a, "path", json_string(pp)) || json_array_append_new(audio, a)) {
        json_decref(a);
        return oom();
    }
    return NULL;
}

/* An image_url part → {"data": base64 text | "url": http(s) URL, "detail", "path"} appended to `images`.
 * image_url: {"url": "data:image/png;base64,..." or "https://...", "detail": "auto" | "low" | "high"}, or the URL as
 * a bare string. Remote URLs are passed on: the caller fetches them only when allowed. */
static TERN_MUST_CHECK tern_err *image_part(const json_t *part, const char *pp, json_t *images) {
    const json_t *iu = json_object_get(part, "image_url");
    const json_t *u = json_is_object(iu) ? json_object_get(iu, "url") : json_is_string(iu) ? iu : NULL;
    const json_t *detail = json_is_object(iu) ? json_object_get(iu, "detail") : NULL;
    if (!json_is_string(u))
        return tern_errf(TERN_EINVAL, "%s.image_url.url: expected a data: URI (data:image/png;base64,...) or an "
                         "http(s) URL", pp);
    if (detail && !json_is_null(detail) &&
        !(json_is_string(detail) && (!strcmp(json_string_value(detail), "auto") ||
                                     !strcmp(json_string_value(detail), "low") ||
                                     !strcmp(json_string_value(detail), "high"))))
        return tern_errf(TERN_EINVAL, "%s.image_url.detail: expected \"auto\", \"low\" or \"high\"", pp);
    const char *url = json_string_value(u), *comma = strchr(url, ',');
    json_t *a = json_pack("{s:s,s:s}", "detail", json_is_string(detail) ? json_string_value(detail) : "auto", "path",
                          pp);
    if (!a)
        return oom();
    tern_err *err = NULL;
    if (!strncasecmp(url, "http://", 7) || !strncasecmp(url, "https://", 8)) {
        if (json_object_set(a, "url", (json_t *)u))
            err = oom();
    } else if (strncmp(url, "data:", 5)) {
        err = tern_errf(TERN_EINVAL, "%s.image_url.url: expected a data: URI (data:image/png;base64,...) or an "
                        "http(s) URL", pp);
    } else {
        const char *semi = comma ? memchr(url, ';', (size_t)(comma - url)) : NULL, *mime = url + 5;
        if (!comma || !semi || strncmp(semi, ";base64,", 8))
            err = tern_errf(TERN_EINVAL, "%s.image_url.url: expected data:image/TYPE;base64,DATA", pp);
        else if (strncmp(mime, "image/", 6) && semi != mime && strncmp(mime, "application/octet-stream", 24))
            err = tern_errf(TERN_EINVAL, "%s.image_url.url: the data URI's type '%.*s' is not image/*", pp,
                            (int)(semi - mime), mime);
        else if (json_string_length(u) == (size_t)(comma + 1 - url))
            err = tern_errf(TERN_EINVAL, "%s.image_url.url: the data URI holds no data", pp);
        else if (json_object_set_new(a, "data", json_stringn(comma + 1, json_string_length(u) - (size_t)(comma + 1 - url))))
            err = oom();
    }
    if (!err && json_array_append(images, a))
        err = oom();
    json_decref(a);
    return err;
}

static int is_audio_type(const char *t) { return !strcmp(t, "input_audio") || !strcmp(t, "audio_url"); }

/* OpenAI content: a string, or an array of {"type":"text","text":...} parts (and audio or image parts when `audio` /
 * `images` take them). *out is a new string, or with media a list of text parts and {"type": "audio"} /
 * {"type": "image"} items. */
static TERN_MUST_CHECK tern_err *openai_content(const json_t *c, const char *path, json_t *audio, json_t *images, json_t **out) {
    *out = NULL;
    if (json_is_string(c)) {
        *out = json_copy((json_t *)c);
        return *out ? NULL : oom();
    }
    if (!json_is_array(c))
        return tern_errf(TERN_EINVAL, "%s: expected a string or an array of content parts, got %s", path,
                         tern_json_type_name(c));
    if (json_array_size(c) == 0)
        return tern_errf(TERN_EINVAL, "%s: the array of content parts is empty", path);
    size_t i;
    json_t *part;
    json_t *acc = NULL, *list = NULL; /* joined text; the list once a media part is seen */
    json_array_foreach(c, i, part) {
        char pp[256];
        snprintf(pp, sizeof pp, "%s[%zu]", path, i);
        tern_err *err = NULL;
        const json_t *type = json_is_object(part) ? json_object_get(part, "type") : NULL;
        const char *tv = json_string_value(type);
        if (!json_is_object(part))
            err = tern_errf(TERN_EINVAL, "%s: expected a content part object, got %s", pp, tern_json_type_name(part));
        else if (!json_is_string(type))
            err = tern_errf(TERN_EINVAL, "%s.type: expected a string such as \"text\"", pp);
        else if (!strcmp(tv, "text") || !strcmp(tv, "refusal")) {
            const char *key = !strcmp(tv, "text") ? "text" : "refusal";
            const json_t *t = json_object_get(part, key);
            if (!json_is_string(t))
                err = tern_errf(TERN_EINVAL, "%s.%s: expected a string", pp, key);
            else
                err = join_text(&acc, json_string_value(t), json_string_length(t));
        } else if ((audio && is_audio_type(tv)) || (images && !strcmp(tv, "image_url"))) {
            const int is_audio = is_audio_type(tv);
            if (!list && !(list = json_array()))
                err = oom();
            if (!err && acc) { /* the text so far keeps its place before the clip or image */
                if (json_array_append_new(list, json_pack("{s:s,s:O}", "type", "text", "text", acc)))
                    err = oom();
                json_decref(acc);
                acc = NULL;
            }
            if (!err)
                err = is_audio ? audio_part(part, tv, pp, audio) : image_part(part, pp, images);
            if (!err && json_array_append_new(list, json_pack("{s:s}", "type", is_audio ? "audio" : "image")))
                err = oom();
        } else if (!(err = unsupported_part(pp, tv)))
            err = tern_errf(TERN_EINVAL, "%s.type: unknown content part type '%s' (expected \"text\")", pp, tv);
        if (err) {
            json_decref(acc);
            json_decref(list);
            return err;
        }
    }
    if (list && acc) {
        if (json_array_append_new(list, json_pack("{s:s,s:O}", "type", "text", "text", acc))) {
            json_decref(acc);
            json_decref(list);
            return oom();
        }
        json_decref(acc);
        acc = NULL;
    }
    *out = list ? list : acc;
    return NULL;
}

/* ---- tool calls and tools ------------------------------------------------------------------- */

/* An assistant's tool_calls, normalized; "arguments" JSON text becomes the object templates iterate. */
static TERN_MUST_CHECK tern_err *openai_tool_calls(const json_t *calls, const char *path, json_t **out) {
    *out = NULL;
    if (!json_is_array(calls))
        return tern_errf(TERN_EINVAL, "%s: expected an array, got %s", path, tern_json_type_name(calls));
    json_t *res = json_array();
    if (!res)
        return oom();
    size_t i;
    json_t *tc;
    json_array_foreach(calls, i, tc) {
        char pp[256];
        snprintf(pp, sizeof pp, "%s[%zu]", path, i);
        tern_err *err = NULL;
        const json_t *fn = json_is_object(tc) ? json_object_get(tc, "function") : NULL;
        const json_t *type = json_is_object(tc) ? json_object_get(tc, "type") : NULL;
        const json_t *id = json_is_object(tc) ? json_object_get(tc, "id") : NULL;
        const json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
        const json_t *args = json_is_object(fn) ? json_object_get(fn, "arguments") : NULL;
        json_t *args_obj = NULL;
        if (!json_is_object(tc))
            err = tern_errf(TERN_EINVAL, "%s: expected a tool call object, got %s", pp, tern_json_type_name(tc));
        else if (type && !json_is_null(type) && !(json_is_string(type) && !strcmp(json_string_value(type), "function")))
            err = tern_errf(TERN_EINVAL, "%s.type: only \"function\" tool calls are supported", pp);
        else if (id && !json_is_null(id) && !json_is_string(id))
            err = tern_errf(TERN_EINVAL, "%s.id: expected a string", pp);
        else if (!json_is_object(fn))
            err = tern_errf(TERN_EINVAL, "%s.function: expected an object with \"name\" and \"arguments\"", pp);
        else if (!json_is_string(name) || json_string_length(name) == 0)
            err = tern_errf(TERN_EINVAL, "%s.function.name: expected a non-empty string", pp);
        else if (!args || json_is_null(args)) {
            if (!(args_obj = json_object()))
                err = oom();
        } else if (json_is_object(args)) {
            if (!(args_obj = json_deep_copy(args)))
                err = oom();
        } else if (json_is_string(args)) {
            json_error_t je;
            if (json_string_length(args) == 0)
                args_obj = json_object();
            else
                args_obj = json_loadb(json_string_value(args), json_string_length(args), JSON_REJECT_DUPLICATES, &je);
            if (!args_obj)
                err = tern_errf(TERN_EINVAL, "%s.function.arguments: not valid JSON (%s at column %d)", pp, je.text,
                                je.column);
            else if (!json_is_object(args_obj))
                err = tern_errf(TERN_EINVAL, "%s.function.arguments: expected a JSON object, got %s", pp,
                                tern_json_type_name(args_obj));
        } else
            err = tern_errf(TERN_EINVAL, "%s.function.arguments: expected a JSON string or object, got %s", pp,
                            tern_json_type_name(args));
        json_t *n = NULL;
        if (!err) {
            n = json_pack("{s:s,s:{s:O,s:O}}", "type", "function", "function", "name", name, "arguments", args_obj);
            if (!n || (id && json_is_string(id) && json_object_set(n, "id", (json_t *)id)) || json_array_append_new(res, n))
                err = oom();
        }
        json_decref(args_obj);
        if (err) {
            json_decref(res);
            return err;
        }
    }
    *out = res;
    return NULL;
}

static TERN_MUST_CHECK tern_err *openai_tools(const json_t *tools, json_t **out) {
    *out = NULL;
    if (!tools || json_is_null(tools))
        return NULL;
    if (!json_is_array(tools))
        return tern_errf(TERN_EINVAL, "tools: expected an array of tools, got %s", tern_json_type_name(tools));
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        const json_t *type = json_is_object(t) ? json_object_get(t, "type") : NULL;
        const json_t *fn = json_is_object(t) ? json_object_get(t, "function") : NULL;
        const json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
        const json_t *desc = json_is_object(fn) ? json_object_get(fn, "description") : NULL;
        const json_t *params = json_is_object(fn) ? json_object_get(fn, "parameters") : NULL;
        if (!json_is_object(t))
            return tern_errf(TERN_EINVAL, "tools[%zu]: expected a tool object, got %s", i, tern_json_type_name(t));
        if (!json_is_string(type) || strcmp(json_string_value(type), "function"))
            return tern_errf(TERN_EINVAL, "tools[%zu].type: only \"function\" tools are supported", i);
        if (!json_is_object(fn))
            return tern_errf(TERN_EINVAL, "tools[%zu].function: expected an object with a \"name\"", i);
        if (!json_is_string(name) || json_string_length(name) == 0)
            return tern_errf(TERN_EINVAL, "tools[%zu].function.name: expected a non-empty string", i);
        if (desc && !json_is_null(desc) && !json_is_string(desc))
            return tern_errf(TERN_EINVAL, "tools[%zu].function.description: expected a string", i);
        if (params && !json_is_null(params) && !json_is_object(params))
            return tern_errf(TERN_EINVAL, "tools[%zu].function.parameters: expected a JSON Schema object", i);
    }
    if (json_array_size(tools) == 0)
        return NULL;
    *out = json_deep_copy(tools);
    return *out ? NULL : oom();
}

tern_err *tern_chat_validate_tools(const json_t *tools) {
    json_t *copy;
    TERN_TRY(openai_tools(tools, &copy));
    json_decref(copy);
    return NULL;
}

/* ---- messages ------------------------------------------------------------------------------- */

static int role_is(const char *r, const char *a) { return !strcmp(r, a); }

static TERN_MUST_CHECK tern_err *openai_message(const json_t *m, size_t i, json_t *audio, json_t *images, json_t **out) {
    char path[64];
    snprintf(path, sizeof path, "messages[%zu]", i);
    *out = NULL;
    if (!json_is_object(m))
        return tern_errf(TERN_EINVAL, "%s: expected a message object, got %s", path, tern_json_type_name(m));
    const json_t *role = json_object_get(m, "role");
    if (!json_is_string(role))
        return tern_errf(TERN_EINVAL, "%s.role: expected a string (system, developer, user, assistant or tool)",
                         path);
    const char *r = json_string_value(role);
    if (!role_is(r, "system") && !role_is(r, "developer") && !role_is(r, "user") && !role_is(r, "assistant") &&
        !role_is(r, "tool"))
        return tern_errf(TERN_EINVAL,
                         "%s.role: unknown role '%.64s' (expected system, developer, user, assistant or tool)", path,
                         r);
    json_t *n = json_object();
    if (!n || json_object_set(n, "role", (json_t *)role)) {
        json_decref(n);
        return oom();
    }
    tern_err *err = NULL;
    char pp[96];
    const json_t *content = json_object_get(m, "content");
    const json_t *calls = json_object_get(m, "tool_calls");
    int has_calls = calls && !json_is_null(calls) && !(json_is_array(calls) && json_array_size(calls) == 0);
    if (has_calls && !role_is(r, "assistant"))
        err = tern_errf(TERN_EINVAL, "%s.tool_calls: only assistant messages carry tool calls", path);
    if (!err && has_calls) {
        json_t *tc;
        snprintf(pp, sizeof pp, "%s.tool_calls", path);
        if (!(err = openai_tool_calls(calls, pp, &tc)) && json_object_set_new(n, "tool_calls", tc))
            err = oom();
    }
    if (!err) {
        snprintf(pp, sizeof pp, "%s.content", path);
        if (!content || json_is_null(content)) {
            if (!role_is(r, "assistant"))
                err = tern_errf(TERN_EINVAL, "%s: a %s message needs content", pp, r);
            else if (!has_calls)
                err = tern_errf(TERN_EINVAL, "%s: an assistant message needs content or tool_calls", pp);
        } else {
            json_t *c;
            if (!(err = openai_content(content, pp, audio, images, &c)) && json_object_set_new(n, "content", c))
                err = oom();
        }
    }
    static const char *const optional_strings[] = {"name", "tool_call_id", "reasoning_content", "reasoning"};
    for (size_t k = 0; !err && k < sizeof optional_strings / sizeof *optional_strings; k++) {
        const json_t *v = json_object_get(m, optional_strings[k]);
        if (!v || json_is_null(v))
            continue;
        if (!json_is_string(v))
            err = tern_errf(TERN_EINVAL, "%s.%s: expected a string, got %s", path, optional_strings[k], tern_json_type_name(v));
        else if (json_object_set(n, optional_strings[k], (json_t *)v))
            err = oom();
    }
    if (err) {
        json_decref(n);
        return err;
    }
    *out = n;
    return NULL;
}

int tern_chat_template_wants_tool_responses(const char *src) {
    return src && strstr(src, "tool_responses") && !strstr(src, "tool_call_id");
}

/* Moves each run of tool messages into the assistant message with tool_calls just before it, as
 * "tool_responses": [{"name": the called function (found by tool_call_id), "response": the content}]. */
static TERN_MUST_CHECK tern_err *fold_tool_results(json_t *msgs) {
    json_t *owner = NULL; /* the assistant message the current run of tool messages answers */
    for (size_t i = 0; i < json_array_size(msgs);) {
        json_t *m = json_array_get(msgs, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        if (strcmp(role, "tool")) {
            owner = !strcmp(role, "assistant") && json_object_get(m, "tool_calls") ? m : NULL;
            i++;
            continue;
        }
        if (!owner) {
            i++;
            continue;
        }
        const char *id = json_string_value(json_object_get(m, "tool_call_id"));
        const char *name = json_string_value(json_object_get(m, "name"));
        size_t k;
        json_t *tc;
        json_array_foreach(json_object_get(owner, "tool_calls"), k, tc) {
            const char *tid = json_string_value(json_object_get(tc, "id"));
            if (id && tid && !strcmp(id, tid))
                name = json_string_value(json_object_get(json_object_get(tc, "function"), "name"));
        }
        json_t *list = json_object_get(owner, "tool_responses");
        if (!list && (!(list = json_array()) || json_object_set_new(owner, "tool_responses", list)))
            return oom();
        json_t *content = json_object_get(m, "content");
        json_t *resp = json_pack("{s:s,s:O}", "name", name ? name : "unknown", "response",
                                 content ? content : json_null());
        if (!resp || json_array_append_new(list, resp) || json_array_remove(msgs, i))
            return oom();
    }
    return NULL;
}

tern_err *tern_chat_build_context(const tern_chat_input *in, json_t **ctx) {
    *ctx = NULL;
    if (!in->messages || json_is_null(in->messages))
        return tern_errf(TERN_EINVAL, "messages: required (an array of chat messages)");
    if (!json_is_array(in->messages))
        return tern_errf(TERN_EINVAL, "messages: expected an array of chat messages, got %s",
                         tern_json_type_name(in->messages));
    if (json_array_size(in->messages) == 0)
        return tern_errf(TERN_EINVAL, "messages: must contain at least one message");
    if (in->template_kwargs && !json_is_null(in->template_kwargs) && !json_is_object(in->template_kwargs))
        return tern_errf(TERN_EINVAL, "chat_template_kwargs: expected an object, got %s",
                         tern_json_type_name(in->template_kwargs));
    json_t *c = json_is_object(in->template_kwargs) ? json_deep_copy(in->template_kwargs) : json_object();
    json_t *msgs = json_array();
    json_t *tools = NULL;
    tern_err *err = c && msgs ? NULL : oom();
    size_t i;
    json_t *m;
    json_array_foreach(in->messages, i, m) {
        json_t *n;
        if (err || (err = openai_message(m, i, in->audio, in->images, &n)))
            break;
        if (json_array_append_new(msgs, n))
            err = oom();
    }
    if (!err && in->fold_tool_results)
        err = fold_tool_results(msgs);
    if (!err)
        err = openai_tools(in->tools, &tools);
    if (!err && (json_object_set(c, "messages", msgs) ||
                 json_object_set_new(c, "add_generation_prompt", json_boolean(in->add_generation_prompt)) ||
                 json_object_set_new(c, "bos_token", json_string(in->bos_token ? in->bos_token : "")) ||
                 json_object_set_new(c, "eos_token", json_string(in->eos_token ? in->eos_token : ""))))
        err = oom();
    if (!err && tools && json_object_set(c, "tools", tools))
        err = oom();
    else if (!err && !tools)
        json_object_del(c, "tools"); /* "no tools" must read as undefined, whatever the kwargs said */
    json_decref(msgs);
    json_decref(tools);
    if (err) {
        json_decref(c);
        return err;
    }
    *ctx = c;
    return NULL;
}

tern_err *tern_chat_render(const tern_jinja *tpl, const json_t *ctx, char **text, size_t *len) {
    tern_jinja_limits lim = {.max_output = MAX_TEMPLATE_OUTPUT};
    tern_err *err = tern_jinja_render(tpl, ctx, &lim, text, len);
    if (err) {
        if (err->code != TERN_ENOMEM)
            err->code = TERN_EINVAL;
        return tern_err_wrap(err, "chat template");
    }
    return NULL;
}

tern_err *tern_chat_tokenize(const tern_tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n) {
    tern_tokens t = {0};
    *ids = NULL;
    *n = 0;
    tern_err *err = tern_tokenize(tok, text, len, 1, 1, &t);
    if (err) {
        tern_tokens_free(&t);
        return err;
    }
    *ids = t.ids;
    *n = t.n;
    const int32_t bos = tern_tokenizer_bos(tok);
    if (bos >= 0 && *n >= 2 && (*ids)[0] == bos && (*ids)[1] == bos) {
        memmove(*ids, *ids + 1, (*n - 1) * sizeof **ids);
        (*n)--;
    }
    return NULL;
}

/* ---- Anthropic Messages ------------------------------------------------------------------- */

/* Text of a block list / string (tool_result content, system), joined by '\n'; *out a new string or NULL. */
static TERN_MUST_CHECK tern_err *anthropic_text(const json_t *c, const char *path, json_t **out) {
    *out = NULL;
    if (json_is_string(c)) {
        *out = json_copy((json_t *)c);
        return *out ? NULL : oom();
    }
    if (!json_is_array(c))
        return tern_errf(TERN_EINVAL, "%s: expected a string or an array of text blocks, got %s", path,
                         tern_json_type_name(c));
    size_t i;
    json_t *b;
    json_array_foreach(c, i, b) {
        const json_t *type = json_is_object(b) ? json_object_get(b, "type") : NULL;
        const json_t *text = json_is_object(b) ? json_object_get(b, "text") : NULL;
        char pp[256];
        snprintf(pp, sizeof pp, "%s[%zu]", path, i);
        tern_err *err = NULL;
        if (!json_is_string(type))
            err = tern_errf(TERN_EINVAL, "%s.type: expected a block type such as \"text\"", pp);
        else if (strcmp(json_string_value(type), "text")) {
            if (!(err = unsupported_part(pp, json_string_value(type))))
                err = tern_errf(TERN_EINVAL, "%s.type: expected \"text\" here, got '%.64s'", pp,
                                json_string_value(type));
        } else if (!json_is_string(text))
            err = tern_errf(TERN_EINVAL, "%s.text: expected a string", pp);
        else
            err = join_text(out, json_string_value(text), json_string_length(text));
        if (err) {
            json_decref(*out);
            *out = NULL;
            return err;
        }
    }
    if (!*out && !(*out = json_string("")))
        return oom();
    return NULL;
}

static TERN_MUST_CHECK tern_err *append_msg(json_t *msgs, json_t *m) {
    if (!m || json_array_append_new(msgs, m))
        return oom();
    return NULL;
}

/* An Anthropic image block {"source": {"type": "base64", "media_type", "data"} | {"type": "url", "url"}} as the
 * OpenAI image_url part the chat path reads. */
static TERN_MUST_CHECK tern_err *anthropic_image(const json_t *b, const char *pp, json_t **part) {
    *part = NULL;
    const json_t *src = json_object_get(b, "source");
    const char *st = json_is_object(src) ? json_string_value(json_object_get(src, "type")) : NULL;
    if (!st)
        return tern_errf(TERN_EINVAL, "%s.source: expected {\"type\": \"base64\", \"media_type\", \"data\"} or "
                         "{\"type\": \"url\", \"url\"}", pp);
    json_t *url = NULL;
    if (!strcmp(st, "base64")) {
        const json_t *mt = json_object_get(src, "media_type"), *data = json_object_get(src, "data");
        if (!json_is_string(mt) || strncmp(json_string_value(mt), "image/", 6))
            return tern_errf(TERN_EINVAL, "%s.source.media_type: expected image/jpeg, image/png, image/gif or "
                             "image/webp", pp);
        if (!json_is_string(data) || json_string_length(data) == 0)
            return tern_errf(TERN_EINVAL, "%s.source.data: expected the image as a non-empty base64 string", pp);
        const size_t n = json_string_length(mt) + json_string_length(data) + 16;
        char *u = malloc(n);
        if (!u)
            return oom();
        snprintf(u, n, "data:%s;base64,%s", json_string_value(mt), json_string_value(data));
        url = json_string(u);
        free(u);
    } else if (!strcmp(st, "url")) {
        const json_t *u = json_object_get(src, "url");
        if (!json_is_string(u))
            return tern_errf(TERN_EINVAL, "%s.source.url: expected a string", pp);
        url = json_copy((json_t *)u);
    } else {
        return tern_errf(TERN_EINVAL, "%s.source.type: '%.32s' image sources are not supported (base64, url)", pp, st);
    }
    *part = url ? json_pack("{s:s,s:{s:o}}", "type", "image_url", "image_url", "url", url) : NULL;
    return *part ? NULL : oom();
}

/* One Anthropic message → zero or more OpenAI messages appended to msgs. */
static TERN_MUST_CHECK tern_err *anthropic_message(const json_t *m, size_t i, json_t *msgs) {
    char path[64];
    snprintf(path, sizeof path, "messages[%zu]", i);
    if (!json_is_object(m))
        return tern_errf(TERN_EINVAL, "%s: expected a message object, got %s", path, tern_json_type_name(m));
    const json_t *role = json_object_get(m, "role");
    const json_t *content = json_object_get(m, "content");
    if (!json_is_string(role) || (strcmp(json_string_value(role), "user") && strcmp(json_string_value(role), "assistant")))
        return tern_errf(TERN_EINVAL, "%s.role: expected \"user\" or \"assistant\"%s", path,
                         json_is_string(role) ? " (system text goes in the top-level \"system\" field)" : "");
    int user = !strcmp(json_string_value(role), "user");
    if (json_is_string(content))
        return append_msg(msgs, json_pack("{s:O,s:O}", "role", role, "content", content));
    if (!json_is_array(content))
        return tern_errf(TERN_EINVAL, "%s.content: expected a string or an array of content blocks, got %s", path,
                         content ? tern_json_type_name(content) : "nothing");
    if (json_array_size(content) == 0)
        return tern_errf(TERN_EINVAL, "%s.content: the array of content blocks is empty", path);
    json_t *text = NULL, *reasoning = NULL, *calls = json_array();
    json_t *parts = NULL; /* once an image block is seen: text and image parts in order */
    tern_err *err = calls ? NULL : oom();
    size_t k;
    json_t *b;
    json_array_foreach(content, k, b) {
        if (err)
            break;
        char pp[128];
        snprintf(pp, sizeof pp, "%s.content[%zu]", path, k);
        const json_t *type = json_is_object(b) ? json_object_get(b, "type") : NULL;
        const char *t = json_is_string(type) ? json_string_value(type) : NULL;
        if (!json_is_object(b)) {
            err = tern_errf(TERN_EINVAL, "%s: expected a content block object, got %s", pp, tern_json_type_name(b));
        } else if (!t) {
            err = tern_errf(TERN_EINVAL, "%s.type: expected a string such as \"text\"", pp);
        } else if (!strcmp(t, "text")) {
            const json_t *s = json_object_get(b, "text");
            if (!json_is_string(s))
                err = tern_errf(TERN_EINVAL, "%s.text: expected a string", pp);
            else if (parts)
                err = json_array_append_new(parts, json_pack("{s:s,s:O}", "type", "text", "text", s)) ? oom() : NULL;
            else
                err = join_text(&text, json_string_value(s), json_string_length(s));
        } else if (!strcmp(t, "image") && user) {
            json_t *part = NULL;
            if (!parts && !(parts = json_array()))
                err = oom();
            if (!err && text) { /* the text so far keeps its place before the image */
                if (json_array_append_new(parts, json_pack("{s:s,s:O}", "type", "text", "text", text)))
                    err = oom();
                json_decref(text);
                text = NULL;
            }
            if (!err && !(err = anthropic_image(b, pp, &part)) && json_array_append_new(parts, part))
                err = oom();
        } else if (!strcmp(t, "tool_result") && user) {
            const json_t *id = json_object_get(b, "tool_use_id");
            const json_t *c = json_object_get(b, "content");
            json_t *body = NULL;
            char cp[160];
            snprintf(cp, sizeof cp, "%s.content", pp);
            if (!json_is_string(id))
                err = tern_errf(TERN_EINVAL, "%s.tool_use_id: expected a string", pp);
            else if (!c || json_is_null(c))
                body = json_string("");
            else
                err = anthropic_text(c, cp, &body);
            if (!err)
                err = append_msg(msgs, body ? json_pack("{s:s,s:O,s:O}", "role", "tool", "tool_call_id", id, "content",
                                                        body)
                                            : NULL);
            json_decref(body);
        } else if (!strcmp(t, "tool_use") && !user) {
            const json_t *id = json_object_get(b, "id");
            const json_t *name = json_object_get(b, "name");
            const json_t *input = json_object_get(b, "input");
            if (!json_is_string(id))
                err = tern_errf(TERN_EINVAL, "%s.id: expected a string", pp);
            else if (!json_is_string(name) || json_string_length(name) == 0)
                err = tern_errf(TERN_EINVAL, "%s.name: expected a non-empty string", pp);
            else if (input && !json_is_null(input) && !json_is_object(input))
                err = tern_errf(TERN_EINVAL, "%s.input: expected an object, got %s", pp, tern_json_type_name(input));
            else {
                json_t *args = json_is_object(input) ? json_deep_copy(input) : json_object();
                json_t *call = args ? json_pack("{s:O,s:s,s:{s:O,s:o}}", "id", id, "type", "function", "function",
                                                "name", name, "arguments", args)
                                    : NULL;
                if (!call || json_array_append_new(calls, call))
                    err = oom();
            }
        } else if (!strcmp(t, "thinking") && !user) {
            const json_t *s = json_object_get(b, "thinking");
            err = json_is_string(s) ? join_text(&reasoning, json_string_value(s), json_string_length(s))
                                    : tern_errf(TERN_EINVAL, "%s.thinking: expected a string", pp);
        } else if (!strcmp(t, "redacted_thinking") && !user) {
            /* opaque to us: nothing to render */
        } else if (!strcmp(t, "image") || !(err = unsupported_part(pp, t))) { /* an image here: an assistant's */
            err = tern_errf(TERN_EINVAL, "%s.type: '%.64s' blocks are not valid in a%s message", pp, t,
                            user ? " user" : "n assistant");
        }
    }
    if (!err && parts) {
        text = parts;
        parts = NULL;
    }
    if (!err && (text || json_array_size(calls) || reasoning)) {
        json_t *n = json_pack("{s:O}", "role", role);
        if (!n)
            err = oom();
        else {
            if ((text && json_object_set(n, "content", text)) ||
                (json_array_size(calls) && json_object_set(n, "tool_calls", calls)) ||
                (reasoning && json_object_set(n, "reasoning_content", reasoning)))
                err = oom();
            if (!err && !text && json_object_set_new(n, "content", json_array_size(calls) ? json_null() : json_string("")))
                err = oom();
            if (err)
                json_decref(n);
            else
                err = append_msg(msgs, n);
        }
    }
    json_decref(text);
    json_decref(parts);
    json_decref(reasoning);
    json_decref(calls);
    return err;
}

tern_err *tern_chat_from_anthropic(const json_t *req, json_t **messages, json_t **tools) {
    *messages = NULL;
    *tools = NULL;
    const json_t *system = json_object_get(req, "system");
    const json_t *in = json_object_get(req, "messages");
    const json_t *tl = json_object_get(req, "tools");
    if (!in || json_is_null(in))
        return tern_errf(TERN_EINVAL, "messages: required (an array of messages)");
    if (!json_is_array(in))
        return tern_errf(TERN_EINVAL, "messages: expected an array of messages, got %s", tern_json_type_name(in));
    if (json_array_size(in) == 0)
        return tern_errf(TERN_EINVAL, "messages: must contain at least one message");
    json_t *msgs = json_array();
    if (!msgs)
        return oom();
    tern_err *err = NULL;
    if (system && !json_is_null(system)) {
        json_t *s;
        if (!(err = anthropic_text(system, "system", &s))) {
            err = append_msg(msgs, json_pack("{s:s,s:o}", "role", "system", "content", s));
        }
    }
    size_t i;
    json_t *m;
    json_array_foreach(in, i, m) {
        if (err || (err = anthropic_message(m, i, msgs)))
            break;
    }
    json_t *out_tools = NULL;
    if (!err && tl && !json_is_null(tl)) {
        if (!json_is_array(tl))
            err = tern_errf(TERN_EINVAL, "tools: expected an array of tools, got %s", tern_json_type_name(tl));
        else if (json_array_size(tl) && !(out_tools = json_array()))
            err = oom();
        json_t *t;
        json_array_foreach(tl, i, t) {
            if (err)
                break;
            const json_t *name = json_is_object(t) ? json_object_get(t, "name") : NULL;
            const json_t *desc = json_is_object(t) ? json_object_get(t, "description") : NULL;
            const json_t *schema = json_is_object(t) ? json_object_get(t, "input_schema") : NULL;
            const json_t *type = json_is_object(t) ? json_object_get(t, "type") : NULL;
            if (!json_is_object(t))
                err = tern_errf(TERN_EINVAL, "tools[%zu]: expected a tool object, got %s", i, tern_json_type_name(t));
            else if (type && !json_is_null(type) &&
                     !(json_is_string(type) && !strcmp(json_string_value(type), "custom")))
                err = tern_errf(TERN_EUNSUPPORTED,
                                "tools[%zu].type: server tools ('%.64s') are not supported; give a custom tool with "
                                "name, description and input_schema",
                                i, json_is_string(type) ? json_string_value(type) : "?");
            else if (!json_is_string(name) || json_string_length(name) == 0)
                err = tern_errf(TERN_EINVAL, "tools[%zu].name: expected a non-empty string", i);
            else if (desc && !json_is_null(desc) && !json_is_string(desc))
                err = tern_errf(TERN_EINVAL, "tools[%zu].description: expected a string", i);
            else if (!json_is_object(schema))
                err = tern_errf(TERN_EINVAL, "tools[%zu].input_schema: expected a JSON Schema object", i);
            else {
                json_t *fn = json_pack("{s:O,s:O}", "name", name, "parameters", schema);
                if (fn && json_is_string(desc) && json_object_set(fn, "description", (json_t *)desc)) {
                    json_decref(fn);
                    fn = NULL;
                }
                if (!fn || json_array_append_new(out_tools, json_pack("{s:s,s:o}", "type", "function", "function", fn)))
                    err = oom();
            }
        }
    }
    if (err) {
        json_decref(msgs);
        json_decref(out_tools);
        return err;
    }
    *messages = msgs;
    *tools = out_tools;
    return NULL;
}
