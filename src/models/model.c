/* model.c — the architecture table and what every family shares: finding the entry for a checkpoint, the spec
 * (parsed once), loading, KV caches from the description, and forwarding to the family. */
#include "models/model.h"

#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/json_util.h"
#include "formats/checkpoint_dir.h"
#include "formats/gguf.h"

static const tern_arch *const TABLE[] = {&tern_arch_gemma4, &tern_arch_llama, &tern_arch_qwen2, &tern_arch_qwen3};

struct tern_lm_spec {
    const tern_arch *arch;
    char *dir;
    void *state; /* the family's parse */
    tern_lm_desc d;
};

struct tern_lm {
    tern_lm_spec *spec;
    void *impl;
};

/* "gemma4, gemma4_text, llama, ..." — every model_type the table runs (from GGUF only: gguf set), into buf. */
static const char *arch_list(int gguf, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof TABLE / sizeof TABLE[0]; i++)
        for (int k = 0; TABLE[i]->model_types[k] && (!gguf || TABLE[i]->gguf) && at < len; k++)
            at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? ", " : "", TABLE[i]->model_types[k]);
    return buf;
}

const tern_arch *tern_arch_find(const char *type) {
    for (size_t i = 0; i < sizeof TABLE / sizeof TABLE[0]; i++)
        for (int k = 0; TABLE[i]->model_types[k]; k++)
            if (!strcmp(TABLE[i]->model_types[k], type))
                return TABLE[i];
    return NULL;
}

void tern_lm_desc_kv_bytes(const tern_lm_desc *d, tern_kv_type k_type, tern_kv_type v_type, uint64_t *full,
                           uint64_t *ring) {
    *full = *ring = 0;
    for (int l = 0; l < d->n_kv; l++) {
        const int64_t row = d->kv[l].kv_heads * d->kv[l].head_dim;
        const uint64_t b = (uint64_t)tern_kv_type_bytes(k_type, row) + tern_kv_type_bytes(v_type, row);
        *(d->kv[l].ring ? ring : full) += b;
    }
}

uint64_t tern_lm_desc_kv_read_bytes(const tern_lm_desc *d, tern_kv_type k_type, tern_kv_type v_type, int64_t n) {
    uint64_t total = 0;
    for (int64_t l = 0; l < d->n_layers && n > 0; l++) {
        const int c = d->layer_kv[l];
        if (c < 0 || c >= d->n_kv)
            continue;
        const int64_t row = d->kv[c].kv_heads * d->kv[c].head_dim;
        const int64_t read = d->kv[c].ring && d->sliding_window > 0 && n > d->sliding_window ? d->sliding_window : n;
        total += (uint64_t)read * ((uint64_t)tern_kv_type_bytes(k_type, row) + tern_kv_type_bytes(v_type, row));
    }
    return total;
}

/* A GGUF model: the architecture its metadata names, parsed from the file (no config.json: root NULL). */
static TERN_MUST_CHECK tern_err *spec_load_gguf(const char *file, tern_lm_spec **out) {
    tern_gguf *g;
    TERN_TRY(tern_gguf_open(file, &g));
    char *name = NULL;
    tern_err *err = tern_gguf_get_str_dup(g, "general.architecture", &name);
    tern_gguf_close(g);
    const tern_arch *arch = err ? NULL : tern_arch_find(name);
    tern_lm_spec *s = NULL;
    char list[256];
    if (!err && (!arch || !arch->gguf))
        err = tern_errf(TERN_EUNSUPPORTED, "%s: general.architecture \"%s\" is not one tern runs from GGUF (it runs: "
                        "%s)", file, name, arch_list(1, list, sizeof list));
    else if (!err && (!(s = calloc(1, sizeof *s)) || !(s->dir = strdup(file))))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    else if (!err) {
        s->arch = arch;
        err = arch->parse(file, NULL, &s->state, &s->d);
    }
    free(name);
    if (err) {
        tern_lm_spec_free(s);
        return err;
    }
    *out = s;
    return NULL;
}

tern_err *tern_lm_spec_load(const char *dir, tern_lm_spec **out) {
    *out = NULL;
    char *gguf;
    if (tern_checkpoint_gguf_file(dir, &gguf)) {
        tern_err *e = spec_load_gguf(gguf, out);
        free(gguf);
        return e;
    }
    TERN_TRY(tern_checkpoint_dir_check(dir));
    char *cfg_path = tern_path_join(dir, "config.json");
    if (!cfg_path)
        return tern_errf(TERN_ENOMEM, "out of memory");
    json_t *root = NULL;
    tern_err *err = tern_json_load_file(cfg_path, 16u << 20, &root);
    tern_lm_spec *s = NULL;
    if (!err) {
        const json_t *mt = json_object_get(root, "model_type");
        const tern_arch *arch = json_is_string(mt) ? tern_arch_find(json_string_value(mt)) : NULL;
        if (!json_is_string(mt)) {
            err = tern_errf(TERN_EFORMAT, "%s: no \"model_type\" (which architecture is this?)", cfg_path);
        } else if (!arch) {
            char list[256];
            err = tern_errf(TERN_EUNSUPPORTED, "%s: model_type \"%s\" is not one tern runs (it runs: %s)", cfg_path,
                            json_string_value(mt), arch_list(0, list, sizeof list));
        } else if (!(s = calloc(1, sizeof *s)) || !(s->dir = strdup(dir))) {
            err = tern_errf(TERN_ENOMEM, "out of memory");
        } else {
            s->arch = arch;
            err = arch->parse(dir, root, &s->state, &s->d);
        }
    }
    json_decref(root);
    free(cfg_path);
    if (err) {
        tern_lm_spec_free(s);
        return err;
    }
    *out = s;
    return NULL;
}

void tern_lm_spec_free(tern_lm_spec *s) {
    if (!s)
        return;
    if (s->state)
        s->arch->state_free(s->state);
    free(s->dir);
    free(s);
}

const tern_lm_desc *tern_lm_spec_desc(const tern_lm_spec *s) { return &s->d; }

uint64_t tern_lm_spec_work_bytes(const tern_lm_spec *s, int64_t T) { return s->arch->work_bytes(s->state, T); }

void tern_lm_spec_report(const tern_lm_spec *s, FILE *out) { s->arch->report(s->dir, s->state, &s->d, out); }

tern_err *tern_lm_load(const char *dir, int threads, tern_lm **out) {
    *out = NULL;
    if (threads < 0 || threads > 1024)
        return tern_errf(TERN_EINVAL, "threads must be in [0, 1024], got %d", threads);
    tern_lm *m = calloc(1, sizeof *m);
    if (!m)
        return tern_errf(TERN_ENOMEM, "out of memory");
    tern_err *err = tern_lm_spec_load(dir, &m->spec);
    if (!err && m->spec->d.has_problems)
        err = tern_errf(TERN_EFORMAT, "%s: tensors are missing or mis-shaped (run 'tern info %s' for the list)", dir,
                        dir);
    if (!err)
        err = m->spec->arch->load(m->spec->dir, m->spec->state, threads, &m->impl);
    if (err) {
        tern_lm_free(m);
        return err;
    }
    *out = m;
    return NULL;
}

void tern_lm_free(tern_lm *m) {
    if (!m)
        return;
    if (m->impl)
        m->spec->arch->free(m->impl);
    tern_lm_spec_free(m->spec);
    free(m);
}

const tern_lm_spec *tern_lm_spec_of(const tern_lm *m) { return m->spec; }
const tern_lm_desc *tern_lm_desc_of(const tern_lm *m) { return &m->spec->d; }
int tern_lm_layout_threads(const tern_lm *m) { return m->spec->arch->layout_threads(m->impl); }
uint64_t tern_lm_decode_bytes(const tern_lm *m) { return m->spec->arch->decode_bytes(m->impl); }

tern_err *tern_lm_kv_create(const tern_lm *m, int n_seq, int64_t ctx, int64_t chunk, tern_kv_type k_type,
                            tern_kv_type v_type, tern_kv **out) {
    const tern_lm_desc *d = &m->spec->d;
    return tern_kv_create(d->kv, d->n_kv, n_seq, ctx, d->sliding_window, chunk, k_type, v_type, out);
}

tern_err *tern_lm_forward(tern_lm *m, tern_kv *kv, tern_pool *pool, const tern_batch *b, float *logits, float *hidden) {
    return m->spec->arch->forward(m->impl, kv, pool, b, logits, hidden);
}

tern_err *tern_lm_embed(const tern_lm *m, int32_t id, float *out) {
    const tern_lm_desc *d = &m->spec->d;
    if (id < 0 || id >= d->vocab)
        return tern_errf(TERN_EINVAL, "token id %d is outside the vocabulary [0, %lld)", id, (long long)d->vocab);
    m->spec->arch->embed(m->impl, id, out);
    return NULL;
}

void tern_lm_set_profile(tern_lm *m, tern_lm_profile *p) { m->spec->arch->set_profile(m->impl, p); }
