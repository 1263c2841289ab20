/* policy.h — when a row drafts and how much: the speculation policy the engine follows. Which source serves a
 * request (its prediction, else an assistant drafter, else a draft model, else prompt lookup); how many tokens a row
 * asks for (a little more than it has lately been keeping: full agreement grows it to draft_max, a run that keeps k
 * settles near k + 2); and when drafting is not paying — almost nothing kept, or steps with drafts slower than plain
 * ones — the row decodes plainly for a while, a pause that doubles each time drafting fails again after it. What a
 * source's rows learn (drafts kept and still slower: drafting costs more than it yields on this machine) sets how
 * many plain steps its new rows start with. The engine owns the counters; nothing here touches a row's tokens. */
#ifndef TERN_DRAFT_POLICY_H
#define TERN_DRAFT_POLICY_H

#include <stdint.h>

#include "draft/draft.h"

/* One row's drafting state. */
typedef struct tern_draft_policy {
    int k;                        /* drafts to ask for next (adaptive) */
    int rest;                     /* steps left without drafting */
    int rest_len;                 /* the next such pause */
    float rate_plain, rate_draft; /* running tokens per second of step time, without and with drafts */
    float acc_len;                /* running mean of drafted tokens kept per verify step */
    int fixed;                    /* set by the caller: always draft_max, never a pause */
} tern_draft_policy;

/* What each source's rows have taught: the plain steps a new row of that source starts with (8, doubled while its
 * drafting is found slower than plain decoding, halved back when it pays). */
typedef struct tern_draft_lessons {
    int pause[TERN_DRAFT_KINDS];
} tern_draft_lessons;

/* Fresh lessons. */
void tern_draft_lessons_init(tern_draft_lessons *l);
/* The source for a request (NULL: none is on): its prediction when it has one, else an assistant drafter, else a
 * draft model, else prompt lookup, each only if the engine runs it. */
tern_draft_source *tern_draft_pick(tern_draft_source *const sources[TERN_DRAFT_KINDS], int has_prediction);
/* A row starts, drafting up to draft_max tokens a step from a source of kind `kind` (-1: no source): hopeful
 * length, and plain steps first (the speed drafting has to beat). */
void tern_draft_policy_start(tern_draft_policy *p, int draft_max, int kind, const tern_draft_lessons *l);
/* The tokens to ask for this step (0: decode plainly): the adaptive length, within `left` (what max_tokens leaves
 * after this step's own token) and `room` (the step's token budget left); fewer than draft_min is none. A row in
 * a pause counts one step of it down. */
int tern_draft_policy_ask(tern_draft_policy *p, int64_t left, int64_t room, int draft_min);
/* After a step of the row: n_chosen tokens chosen in dt seconds, n_draft of them drafted and verified (0: a plain
 * step) by a source of kind `kind`; updates the length, the pause and the source's lessons. */
void tern_draft_policy_after(tern_draft_policy *p, int kind, int n_draft, int n_chosen, double dt, int draft_max,
                             tern_draft_lessons *l);

#endif
