/* open.c — which kind of drafter a draft model's folder holds, and opening it (see draft.h). The drafter kinds are a
 * table: the first whose test accepts the checkpoint's model_type opens it; a model of its own (two-model drafting)
 * takes whatever the others do not. */
#include <jansson.h>

#include "core/json_util.h"
#include "draft/draft.h"

typedef struct drafter_args {
    const char *dir;
    tern_draft_head head;
    const tern_draft_target *target;
    const tern_draft_loader *ld;
    int rows;
    int64_t ctx;
    tern_pool *pool;
} drafter_args;

static tern_err *open_cache_drafter(const drafter_args *a, tern_draft_source **out) {
    return tern_draft_assistant_new(a->dir, a->head, a->target->lm, a->target->kv, a->pool, out);
}

static tern_err *open_model(const drafter_args *a, tern_draft_source **out) {
    if (a->head != TERN_DRAFT_HEAD_AUTO)
        return tern_errf(TERN_EINVAL, "--draft-head applies to an assistant drafter; %s is a model of its own", a->dir);
    return tern_draft_model_new(a->dir, a->ld, a->target, a->rows, a->ctx, a->pool, out);
}

static const struct {
    int (*accepts)(const char *model_type); /* NULL: any */
    tern_err *(*open)(const drafter_args *a, tern_draft_source **out);
} DRAFTERS[] = {
    {tern_cache_drafter_type, open_cache_drafter}, /* reads the target's cache (models/cache_drafter.h) */
    {NULL, open_model},                            /* a smaller model of the same vocabulary, with its own cache */
};

tern_err *tern_draft_open(const char *dir, tern_draft_head head, const tern_draft_target *target,
                          const tern_draft_loader *ld, int rows, int64_t ctx, tern_pool *pool, tern_draft_source **out) {
    *out = NULL;
    json_t *root = NULL;
    tern_err *err = tern_json_load_in(dir, "config.json", 16u << 20, &root);
    if (err)
        return tern_err_wrap(err, "draft model");
    const char *type = json_string_value(json_object_get(root, "model_type"));
    const drafter_args a = {dir, head, target, ld, rows, ctx, pool};
    for (size_t i = 0; i < sizeof DRAFTERS / sizeof DRAFTERS[0]; i++)
        if (!DRAFTERS[i].accepts || DRAFTERS[i].accepts(type)) {
            json_decref(root);
            return DRAFTERS[i].open(&a, out);
        }
    json_decref(root);
    return tern_errf(TERN_EINTERNAL, "no drafter kind takes %s", dir); /* unreachable: the last takes any */
}
