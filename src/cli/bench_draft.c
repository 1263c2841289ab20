/* bench_draft.c — see bench_draft.h. */
#include "cli/bench_draft.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "loader/loader.h"

typedef struct reply {
    int32_t toks[8192];
    int n;
    double decode_s;
    tern_usage usage;
} reply;

static TERN_MUST_CHECK tern_err *answer(tern_engine *e, const tern_sampling_params *sp, const int32_t *ids,
                                        size_t n_ids, int64_t n, int plain, reply *o) {
    tern_request r;
    tern_request_default(&r);
    r.sampling = *sp;
    r.prompt_ids = ids;
    r.n_prompt_ids = n_ids;
    r.max_tokens = n;
    r.draft_off = plain;
    tern_stream *s;
    TERN_TRY(tern_engine_submit(e, &r, NULL, NULL, &s, NULL));
    memset(o, 0, sizeof *o);
    tern_event ev;
    while (tern_stream_next(s, &ev, -1) == 1) {
        if (ev.kind == TERN_EV_TOKEN && o->n < 8192)
            o->toks[o->n++] = ev.token;
        if (ev.kind == TERN_EV_DONE) {
            o->usage = ev.usage;
            o->decode_s = ev.timings.decode_s;
        }
    }
    tern_stream_free(s);
    return NULL;
}

int tern_bench_draft(const char *model, const tern_engine_opts *eo, const tern_sampling_params *sp, const char *prompts,
                     int64_t n, int threads, int json) {
    tern_model_opts mo = {.model_dir = model, .threads = threads};
    tern_model *m = NULL;
    tern_engine *e = NULL;
    FILE *f = NULL;
    static reply plain, spec;
    char line[4096];
    double t_plain = 0, t_spec = 0;
    int64_t toks = 0, drafted = 0, kept = 0;
    int count = 0;
    /* Greedy and seeded replies are the tokens of plain decoding; unseeded sampling draws its drafts at random. */
    const int comparable = !(sp->temperature > 0) || sp->has_seed;
    tern_err *err = tern_model_load(&mo, &m);
    tern_engine_opts o = *eo;
    o.parallel = 1;
    o.threads = threads;
    if (!err)
        err = tern_engine_create(m, &o, &e);
    if (!err && !(f = fopen(prompts, "r")))
        err = tern_errf(TERN_EIO, "%s: cannot read the prompts", prompts);
    while (!err && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!line[0])
            continue;
        json_t *messages = json_pack("[{s:s,s:s}]", "role", "user", "content", line);
        int32_t *ids = NULL;
        size_t n_ids = 0;
        err = messages ? tern_model_chat_prompt(m, messages, NULL, NULL, 1, &ids, &n_ids)
                       : tern_errf(TERN_ENOMEM, "out of memory");
        json_decref(messages);
        if (!err)
            err = answer(e, sp, ids, n_ids, n, 1, &plain);
        if (!err)
            err = answer(e, sp, ids, n_ids, n, 0, &spec);
        tern_free(ids);
        if (!err && comparable &&
            (plain.n != spec.n || memcmp(plain.toks, spec.toks, (size_t)plain.n * sizeof *plain.toks)))
            err = tern_errf(TERN_EINVAL, "drafting changed the reply to '%s': speculative decoding must not", line);
        if (!err && plain.n > 1 && plain.decode_s > 0 && spec.decode_s > 0) {
            toks += plain.n - 1;
            t_plain += plain.decode_s;
            t_spec += spec.decode_s;
        }
        drafted += spec.usage.drafted_tokens;
        kept += spec.usage.accepted_draft_tokens;
        count++;
    }
    if (f)
        fclose(f);
    if (!err && !toks)
        err = tern_errf(TERN_EINVAL, "%s: no prompt gave a reply of two tokens or more", prompts);
    if (!err) {
        const double acc = drafted ? (double)kept / (double)drafted : 0;
        if (json)
            printf("{\"prompts\": %d, \"tokens\": %lld, \"drafted\": %lld, \"kept\": %lld, \"acceptance\": %.4f, "
                   "\"plain_tok_s\": %.3f, \"draft_tok_s\": %.3f, \"speedup\": %.3f}\n", count, (long long)toks,
                   (long long)drafted, (long long)kept, acc, toks / t_plain, toks / t_spec, t_plain / t_spec);
        else
            printf("%d prompts, %lld tokens after each first: drafted %lld, kept %lld (acceptance %.1f%%)\n"
                   "decode %.2f tok/s plain, %.2f tok/s with drafting: %.2fx (%s)\n", count, (long long)toks,
                   (long long)drafted, (long long)kept, 100 * acc, toks / t_plain, toks / t_spec, t_plain / t_spec,
                   comparable ? "the same replies" : "sampled replies, not compared");
    }
    tern_engine_destroy(e);
    tern_model_free(m);
    if (err) {
        fprintf(stderr, "tern bench: %s\n", tern_err_msg(err));
        tern_err_free(err);
        return 1;
    }
    return 0;
}
