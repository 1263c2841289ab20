/* jinja.c — the public face of the Jinja renderer (jinja.h): compiling a template (UTF-8 check, lexer, parser),
 * freeing it, and finding a model's chat template on disk. Rendering itself is in jinja_eval.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_internal.h"
#include "core/fileio.h"
#include "core/json_util.h"

tern_err *tern_jinja_compile(const char *src, size_t len, const char *name, tern_jinja **out) {
    *out = NULL;
    if (!name)
        name = "template";
    if (!src && len)
        return tern_errf(TERN_EINVAL, "%s: no template source", name);
    size_t bad;
    if (len && !tern_utf8_valid(src, len, &bad)) {
        char where[256];
        jinja_where(name, src, len, (uint32_t)(bad < UINT32_MAX ? bad : UINT32_MAX), where, sizeof where);
        return tern_errf(TERN_EFORMAT, "%sinvalid UTF-8 (byte 0x%02x at offset %zu)", where, (unsigned char)src[bad], bad);
    }
    tern_jinja *t = calloc(1, sizeof *t);
    if (!t)
        return tern_errf(TERN_ENOMEM, "%s: out of memory", name);
    t->name = strdup(name);
    t->src = malloc(len + 1);
    if (!t->name || !t->src) {
        tern_jinja_free(t);
        return tern_errf(TERN_ENOMEM, "%s: out of memory", name);
    }
    if (len)
        memcpy(t->src, src, len);
    t->src[len] = 0;
    t->src_len = len;
    jtoken *toks;
    size_t count;
    tern_err *e = jinja_lex(t->name, t->src, len, &t->arena, &toks, &count);
    if (!e)
        e = jinja_parse(t->name, t->src, len, toks, count, &t->arena, &t->body);
    if (e) {
        tern_jinja_free(t);
        return e;
    }
    *out = t;
    return NULL;
}

void tern_jinja_free(tern_jinja *tpl) {
    if (!tpl)
        return;
    ja_free(&tpl->arena);
    free(tpl->name);
    free(tpl->src);
    free(tpl);
}

/* ------------------------------------------------------------------ finding a model's template */

#define MAX_TEMPLATE_BYTES ((size_t)16 << 20)
#define MAX_CONFIG_BYTES ((size_t)64 << 20)

/* The "chat_template" member of a JSON config: a string, or [{name, template}...] from
 * which "default" is taken. *found = 0 when the member is absent. */
static TERN_MUST_CHECK tern_err *template_from_config(const char *path, char **out, size_t *out_len, int *found) {
    *found = 0;
    json_t *cfg;
    TERN_TRY(tern_json_load_file(path, MAX_CONFIG_BYTES, &cfg));
    tern_err *e = NULL;
    json_t *ct = json_is_object(cfg) ? json_object_get(cfg, "chat_template") : NULL;
    const char *s = NULL;
    size_t n = 0;
    if (!ct || json_is_null(ct)) {
        json_decref(cfg);
        return NULL;
    }
    if (json_is_string(ct)) {
        s = json_string_value(ct);
        n = json_string_length(ct);
    } else if (json_is_array(ct)) {
        size_t i;
        json_t *item;
        char names[512] = "";
        json_array_foreach(ct, i, item) {
            const char *nm = json_string_value(json_object_get(item, "name"));
            json_t *tp = json_object_get(item, "template");
            if (nm && strlen(names) + strlen(nm) + 4 < sizeof names)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s'%s'", names[0] ? ", " : "", nm);
            if (nm && !strcmp(nm, "default") && json_is_string(tp)) {
                s = json_string_value(tp);
                n = json_string_length(tp);
            }
        }
        if (!s)
            e = tern_errf(TERN_ENOTFOUND, "%s: chat_template lists no template named 'default' (it has %s)", path,
                          names[0] ? names : "none");
    } else
        e = tern_errf(TERN_EFORMAT, "%s: chat_template must be a string or a list of {name, template}", path);
    if (s) {
        *out = malloc(n + 1);
        if (!*out)
            e = tern_errf(TERN_ENOMEM, "%s: out of memory", path);
        else {
            memcpy(*out, s, n);
            (*out)[n] = 0;
            if (out_len)
                *out_len = n;
            *found = 1;
        }
    }
    json_decref(cfg);
    return e;
}

tern_err *tern_chat_template_load(const char *model_dir, char **out, size_t *out_len, char **origin) {
    *out = NULL;
    if (out_len)
        *out_len = 0;
    if (origin)
        *origin = NULL;
    static const char *const sources[] = {"chat_template.jinja", "tokenizer_config.json", "chat_template.json"};
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
        char *path = tern_path_join(model_dir, sources[i]);
        if (!path)
            return tern_errf(TERN_ENOMEM, "out of memory");
        if (!tern_is_file(path)) {
            free(path);
            continue;
        }
        tern_err *e;
        int found = 1;
        if (i == 0) {
            size_t n;
            e = tern_read_file(path, MAX_TEMPLATE_BYTES, out, &n);
            if (!e && out_len)
                *out_len = n;
        } else
            e = template_from_config(path, out, out_len, &found);
        if (e || !found) {
            free(path);
            if (e)
                return e;
            continue;
        }
        if (origin && i > 0) { /* name the member: error lines count within the template */
            size_t n = strlen(path) + 16;
            char *o = malloc(n);
            if (o)
                snprintf(o, n, "%s[chat_template]", path);
            free(path);
            path = o;
        }
        if (origin)
            *origin = path;
        else
            free(path);
        return NULL;
    }
    return tern_errf(TERN_ENOTFOUND,
                     "%s: no chat template (looked for chat_template.jinja, \"chat_template\" in tokenizer_config.json "
                     "and in chat_template.json)",
                     model_dir);
}
