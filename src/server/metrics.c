/* metrics.c — the server's counters and latency histograms, and /metrics in Prometheus text format (version
 * 0.0.4): HTTP responses by endpoint and code, requests by outcome, tokens, queue depth, batch size, KV memory,
 * prefix-cache use, and histograms of time to first token, time per output token and request duration. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chat/tool_calls.h"
#include "server/server_internal.h"
#include "tensor/cpu.h"

static const double TTFT_BUCKETS[SRV_HIST_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                                      2.5,   5,    10,    25,   50,  100,  250, 500};
static const double TPOT_BUCKETS[SRV_HIST_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08,
                                                      0.1,   0.15,   0.2,   0.3,  0.5,  1,    2.5,  5};

static const char *ROUTE_NAMES[SRV_N_ROUTES] = {
    "chat_completions", "completions", "responses", "embeddings", "messages", "count_tokens", "models", "health",
    "metrics",          "audio_transcriptions", "webui", "other"};
static const char *FINISH_NAMES[5] = {"none", "stop", "length", "cancelled", "error"};

const char *srv_route_name(int route) {
    return route >= 0 && route < SRV_N_ROUTES ? ROUTE_NAMES[route] : "other";
}

void srv_metrics_init(srv_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
}

void srv_metrics_destroy(srv_metrics *m) { pthread_mutex_destroy(&m->mu); }

void srv_metrics_http(srv_metrics *m, int route, int status) {
    if (route < 0 || route >= SRV_N_ROUTES || status < 0 || status >= 600)
        return;
    pthread_mutex_lock(&m->mu);
    m->http[route][status]++;
    pthread_mutex_unlock(&m->mu);
}

static void observe(srv_hist *h, const double *bounds, double x) {
    if (!isfinite(x) || x < 0)
        return;
    int b = 0;
    while (b < SRV_HIST_BUCKETS && x > bounds[b])
        b++;
    h->count[b]++;
    h->sum += x;
    h->n++;
}

void srv_metrics_done(srv_metrics *m, const tern_event *ev) {
    pthread_mutex_lock(&m->mu);
    m->completion_tokens += (uint64_t)(ev->usage.completion_tokens > 0 ? ev->usage.completion_tokens : 0);
    if (ev->usage.completion_tokens > 0) {
        observe(&m->ttft, TTFT_BUCKETS, ev->timings.ttft_s);
        observe(&m->e2e, TTFT_BUCKETS, ev->timings.ttft_s + ev->timings.decode_s);
        if (ev->usage.completion_tokens > 1)
            observe(&m->tpot, TPOT_BUCKETS, ev->timings.decode_s / (double)(ev->usage.completion_tokens - 1));
    }
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_disconnect(srv_metrics *m) {
    pthread_mutex_lock(&m->mu);
    m->disconnects++;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_timeout(srv_metrics *m) {
    pthread_mutex_lock(&m->mu);
    m->timeouts++;
    pthread_mutex_unlock(&m->mu);
}

static void head(sbuf *b, const char *name, const char *type, const char *help) {
    sbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void scalar(sbuf *b, const char *name, const char *type, const char *help, double v) {
    head(b, name, type, help);
    sbuf_printf(b, "%s %.17g\n", name, v);
}

static void hist(sbuf *b, const char *name, const char *help, const srv_hist *h, const double *bounds) {
    head(b, name, "histogram", help);
    uint64_t cum = 0;
    for (int i = 0; i < SRV_HIST_BUCKETS; i++) {
        cum += h->count[i];
        sbuf_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[i], (unsigned long long)cum);
    }
    cum += h->count[SRV_HIST_BUCKETS];
    sbuf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.17g\n%s_count %llu\n", name, (unsigned long long)cum, name,
                h->sum, name, (unsigned long long)h->n);
}

char *srv_metrics_render(srv_metrics *m, tern_engine *e, size_t *len) {
    sbuf b = {0};
    pthread_mutex_lock(&m->mu);
    srv_metrics c = *m; /* a consistent copy; the mutex inside is not used */
    pthread_mutex_unlock(&m->mu);

    head(&b, "tern_build_info", "gauge", "Which tern this is (always 1): version, and the kernels in use.");
    sbuf_printf(&b, "tern_build_info{version=\"%s\",isa=\"%s\"} 1\n", tern_version(), tern_isa_name(tern_isa_active()));
    head(&b, "tern_http_responses_total", "counter", "HTTP responses by endpoint and status code.");
    for (int r = 0; r < SRV_N_ROUTES; r++)
        for (int st = 0; st < 600; st++)
            if (c.http[r][st])
                sbuf_printf(&b, "tern_http_responses_total{endpoint=\"%s\",code=\"%d\"} %llu\n", ROUTE_NAMES[r], st,
                            (unsigned long long)c.http[r][st]);
    scalar(&b, "tern_client_disconnects_total", "counter", "Requests whose client went away before the end.",
           (double)c.disconnects);
    scalar(&b, "tern_request_timeouts_total", "counter", "Requests cancelled by the server's --timeout.",
           (double)c.timeouts);
    scalar(&b, "tern_tool_calls_malformed_total", "counter",
           "Tool calls the model wrote that did not parse (passed on as content).",
           (double)tern_reply_malformed_tool_calls());
    hist(&b, "tern_time_to_first_token_seconds", "Submit to first generated token.", &c.ttft, TTFT_BUCKETS);
    hist(&b, "tern_time_per_output_token_seconds", "Decode time per generated token after the first.", &c.tpot,
         TPOT_BUCKETS);
    hist(&b, "tern_request_duration_seconds", "Submit to the last generated token.", &c.e2e, TTFT_BUCKETS);

    if (e) {
        tern_metrics em;
        tern_engine_metrics(e, &em);
        scalar(&b, "tern_requests_submitted_total", "counter", "Requests accepted by the engine.",
               (double)em.requests_submitted);
        head(&b, "tern_requests_finished_total", "counter", "Requests by how they ended.");
        for (int f = 1; f < 5; f++)
            sbuf_printf(&b, "tern_requests_finished_total{reason=\"%s\"} %llu\n", FINISH_NAMES[f],
                        (unsigned long long)em.requests_finished[f]);
        head(&b, "tern_requests_rejected_total", "counter", "Requests the engine refused, by reason.");
        sbuf_printf(&b, "tern_requests_rejected_total{reason=\"invalid\"} %llu\n",
                    (unsigned long long)em.requests_rejected);
        sbuf_printf(&b, "tern_requests_rejected_total{reason=\"queue_full\"} %llu\n",
                    (unsigned long long)em.requests_overloaded);
        scalar(&b, "tern_prompt_tokens_total", "counter", "Prompt tokens of finished requests.", (double)em.prompt_tokens);
        scalar(&b, "tern_prompt_tokens_cached_total", "counter", "Prompt tokens served from the prefix cache.",
               (double)em.cached_tokens);
        scalar(&b, "tern_generated_tokens_total", "counter", "Tokens generated.", (double)em.tokens_generated);
        scalar(&b, "tern_queue_depth", "gauge", "Requests waiting for a row.", em.queue_depth);
        scalar(&b, "tern_active_rows", "gauge", "Rows prefilling or decoding.", em.active_rows);
        scalar(&b, "tern_prefilling_rows", "gauge", "Rows still prefilling their prompt.", em.prefilling_rows);
        scalar(&b, "tern_parallel_rows", "gauge", "Rows decoded together at most (--parallel).", em.parallel);
        scalar(&b, "tern_threads", "gauge", "Kernel threads (--threads).", em.threads);
        scalar(&b, "tern_max_queue", "gauge", "Waiting requests allowed before 429 (--max-queue).", em.max_queue);
        scalar(&b, "tern_ctx_tokens", "gauge", "Positions per request (--ctx).", (double)em.ctx);
        scalar(&b, "tern_engine_steps_total", "counter", "Batched forwards run.", (double)em.steps);
        scalar(&b, "tern_engine_step_rows_total", "counter", "Rows summed over all forwards.", (double)em.step_rows);
        scalar(&b, "tern_batch_size_mean", "gauge", "Mean rows per forward so far.",
               em.steps ? (double)em.step_rows / (double)em.steps : 0.0);
        scalar(&b, "tern_kv_bytes_in_use", "gauge", "KV memory reserved by admitted requests.",
               (double)em.kv_bytes_in_use);
        scalar(&b, "tern_kv_bytes_peak", "gauge", "Most KV memory reserved at once.", (double)em.kv_bytes_peak);
        scalar(&b, "tern_kv_budget_bytes", "gauge", "KV memory budget for all rows.", (double)em.kv_budget_bytes);
        /* The model-server protocol of the Kubernetes inference gateway: KV-cache utilization as a fraction, and the
         * cache layout its prefix-affinity scorer sizes its index by (labels named as vLLM's cache_config_info). */
        scalar(&b, "tern_kv_cache_usage_ratio", "gauge",
               "KV memory reserved by admitted requests as a fraction of the budget (0..1).",
               em.kv_budget_bytes ? (double)em.kv_bytes_in_use / (double)em.kv_budget_bytes : 0.0);
        head(&b, "tern_cache_config_info", "gauge",
             "Prefix cache layout (always 1): tokens per block, and the blocks the memory tier holds.");
        sbuf_printf(&b, "tern_cache_config_info{block_size=\"%d\",num_gpu_blocks=\"%llu\"} 1\n", em.prefix_block,
                    (unsigned long long)(em.prefix_block_bytes ? em.prefix_cache_cap_bytes / em.prefix_block_bytes
                                                                : 0));
        scalar(&b, "tern_prefix_cache_bytes", "gauge", "Bytes held by the prefix cache.", (double)em.prefix_cache_bytes);
        scalar(&b, "tern_prefix_cache_capacity_bytes", "gauge", "Prefix cache cap.", (double)em.prefix_cache_cap_bytes);
        scalar(&b, "tern_prefix_cache_lookups_total", "counter", "Prefix cache lookups.", (double)em.prefix_lookups);
        scalar(&b, "tern_prefix_cache_hits_total", "counter", "Prefix cache lookups that reused tokens.",
               (double)em.prefix_hits);
        scalar(&b, "tern_prefix_cache_evictions_total", "counter", "Prefix cache blocks evicted.",
               (double)em.prefix_evictions);
        head(&b, "tern_prefix_cache_hit_tokens_total", "counter", "Prompt tokens reused from the prefix cache, by tier.");
        sbuf_printf(&b, "tern_prefix_cache_hit_tokens_total{tier=\"memory\"} %llu\n",
                    (unsigned long long)(em.prefix_hit_tokens - em.prefix_disk_hit_tokens));
        sbuf_printf(&b, "tern_prefix_cache_hit_tokens_total{tier=\"disk\"} %llu\n",
                    (unsigned long long)em.prefix_disk_hit_tokens);
        head(&b, "tern_prefix_cache_tier_bytes", "gauge", "Bytes the prefix cache holds, by tier.");
        sbuf_printf(&b, "tern_prefix_cache_tier_bytes{tier=\"memory\"} %llu\n",
                    (unsigned long long)em.prefix_cache_bytes);
        sbuf_printf(&b, "tern_prefix_cache_tier_bytes{tier=\"disk\"} %llu\n", (unsigned long long)em.prefix_disk_bytes);
        scalar(&b, "tern_prefix_cache_disk_capacity_bytes", "gauge", "The disk tier's size cap (0: no disk tier).",
               (double)em.prefix_disk_cap_bytes);
        scalar(&b, "tern_prefix_cache_disk_writes_total", "counter", "Blocks written to the disk tier.",
               (double)em.prefix_disk_writes);
        scalar(&b, "tern_prefix_cache_disk_dropped_total", "counter",
               "Blocks not written to the disk tier (write queue full, disk error).", (double)em.prefix_disk_dropped);
        scalar(&b, "tern_prefix_cache_disk_removed_total", "counter",
               "Disk-tier files found truncated, corrupt or foreign, and removed.", (double)em.prefix_disk_removed_bad);
        static const char *const SOURCES[4] = {"ngram", "prediction", "assistant", "draft_model"};
        head(&b, "tern_draft_tokens_total", "counter", "Speculative decoding: tokens drafted and verified, by source.");
        for (int k = 0; k < 4; k++)
            sbuf_printf(&b, "tern_draft_tokens_total{source=\"%s\"} %llu\n", SOURCES[k],
                        (unsigned long long)em.draft_tokens[k]);
        head(&b, "tern_draft_accepted_total", "counter", "Speculative decoding: drafted tokens kept, by source.");
        for (int k = 0; k < 4; k++)
            sbuf_printf(&b, "tern_draft_accepted_total{source=\"%s\"} %llu\n", SOURCES[k],
                        (unsigned long long)em.draft_accepted[k]);
        scalar(&b, "tern_draft_failures_total", "counter", "Draft source failures (those rows decoded plainly).",
               (double)em.draft_failures);
    }
    if (b.oom) {
        sbuf_free(&b);
        return NULL;
    }
    *len = b.len;
    return b.p;
}
