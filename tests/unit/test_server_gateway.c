/* test_server_gateway.c — the model-server protocol the Kubernetes inference gateway's endpoint picker scrapes from
 * /metrics (docs/deploy.md): requests waiting (tern_queue_depth) and running (tern_active_rows) move as requests are
 * queued, run and finish; tern_kv_cache_usage_ratio is the reserved KV over the budget, and that budget and each
 * request's reservation are exactly what `tern fit --json` computes for the same flags; tern_cache_config_info
 * carries the prefix cache's block size and how many blocks its memory tier holds. */
#include <math.h>

#include "server_util.h"

#define CTX 8192
#define PROMPT 40 /* token ids of every request */
#define MAX_TOKENS 8000

static json_t *FIT; /* tern fit --json of the demo model at --ctx CTX --parallel 2 */

static int64_t fit_int(const char *path) { return (int64_t)ts_int(FIT, path); }

/* KV bytes of a sequence of n positions, from fit's per-position costs (sliding layers stop at their ring). */
static uint64_t kv_cost(int64_t n) {
    int64_t ring = fit_int("kv.sliding_positions");
    return (uint64_t)n * (uint64_t)fit_int("kv.full_bytes_per_position") +
           (uint64_t)(n < ring ? n : ring) * (uint64_t)fit_int("kv.sliding_bytes_per_position");
}

/* The label value of `label` on the first line of metric `name` (into out), or fails. */
static void metric_label(int port, const char *name, const char *label, char *out, size_t cap) {
    ts_resp r;
    ts_http(port, "GET", "/metrics", NULL, NULL, &r);
    char key[128];
    snprintf(key, sizeof key, "%s=\"", label);
    out[0] = 0;
    for (const char *p = r.body; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, name, strlen(name)) || p[strlen(name)] != '{')
            continue;
        const char *eol = strchr(p, '\n'), *at = strstr(p, key);
        assert_true(at && (!eol || at < eol));
        at += strlen(key);
        size_t n = strcspn(at, "\"");
        assert_true(n < cap);
        memcpy(out, at, n);
        out[n] = 0;
        break;
    }
    ts_resp_free(&r);
    assert_true(out[0] != 0);
}

/* A streamed completion of PROMPT token ids that decodes MAX_TOKENS tokens unless cancelled (by closing the fd). */
static int open_long_stream(int port) {
    char body[4096];
    int k = snprintf(body, sizeof body, "{\"prompt\":[");
    for (int i = 0; i < PROMPT; i++)
        k += snprintf(body + k, sizeof body - (size_t)k, "%s%d", i ? "," : "", 1000 + i);
    snprintf(body + k, sizeof body - (size_t)k, "],\"max_tokens\":%d,\"ignore_eos\":true,\"stream\":true}", MAX_TOKENS);
    char req[8192];
    int n = snprintf(req, sizeof req,
                     "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                     "%zu\r\n\r\n%s",
                     strlen(body), body);
    int fd = ts_connect(port);
    assert_true(fd >= 0);
    ts_send(fd, req, (size_t)n);
    return fd;
}

/* Waits (bounded) until running and waiting read as given; fails otherwise. */
static void wait_rows(int port, int running, int waiting) {
    double r = -1, w = -1;
    for (int i = 0; i < TS_WAIT_S * 20; i++) {
        r = ts_metric(port, "tern_active_rows");
        w = ts_metric(port, "tern_queue_depth");
        if (r == running && w == waiting)
            return;
        ts_sleep_ms(50);
    }
    fail_msg("running %g waiting %g, expected %d and %d", r, w, running, waiting);
}

static void test_protocol_gauges(void **state) {
    (void)state;
    char cmd[8192], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' fit '%s' --json --ctx %d --parallel 2", tu_tern_bin(), ts_model(), CTX);
    assert_int_equal(tu_run(cmd, &out), 0);
    json_error_t je;
    FIT = json_loads(out, 0, &je);
    free(out);
    assert_non_null(FIT);

    ts_server S;
    char args[128];
    snprintf(args, sizeof args, "--parallel 2 --ctx %d --max-queue 8", CTX);
    ts_start(&S, args);
    const double budget = ts_metric(S.port, "tern_kv_budget_bytes");
    /* the budget the server runs with is the one fit plans for the same flags */
    assert_true(budget == (double)fit_int("kv_budget_bytes"));
    assert_true(budget == 2.0 * (double)kv_cost(CTX));
    assert_true(ts_metric(S.port, "tern_parallel_rows") == 2);

    /* the prefix cache layout: block tokens, and blocks = capacity / (block x all layers' K+V per position) */
    char v[64];
    metric_label(S.port, "tern_cache_config_info", "block_size", v, sizeof v);
    assert_string_equal(v, "64");
    metric_label(S.port, "tern_cache_config_info", "num_gpu_blocks", v, sizeof v);
    const double block_bytes = 64.0 * (double)(fit_int("kv.full_bytes_per_position") +
                                               fit_int("kv.sliding_bytes_per_position"));
    const double cap = ts_metric(S.port, "tern_prefix_cache_capacity_bytes");
    assert_true(cap > 0);
    assert_true(atof(v) == (double)(uint64_t)(cap / block_bytes));

    /* idle */
    wait_rows(S.port, 0, 0);
    assert_true(ts_metric(S.port, "tern_kv_cache_usage_ratio") == 0);

    /* three long requests on two rows: two run, one waits; each running one reserves prompt + max_tokens */
    int fd[3];
    fd[0] = open_long_stream(S.port);
    fd[1] = open_long_stream(S.port);
    wait_rows(S.port, 2, 0);
    fd[2] = open_long_stream(S.port);
    wait_rows(S.port, 2, 1);
    const double one = (double)kv_cost(PROMPT + MAX_TOKENS);
    double ratio = ts_metric(S.port, "tern_kv_cache_usage_ratio");
    assert_true(ts_metric(S.port, "tern_kv_bytes_in_use") == 2 * one);
    assert_true(fabs(ratio - 2 * one / budget) < 1e-12);
    assert_true(ratio > 0 && ratio <= 1);

    /* one client leaves: the waiting request takes its row */
    char buf[4096];
    assert_true(ts_read_until(fd[0], "data:", buf, sizeof buf) > 0);
    close(fd[0]);
    wait_rows(S.port, 2, 0);
    assert_true(fabs(ts_metric(S.port, "tern_kv_cache_usage_ratio") - 2 * one / budget) < 1e-12);

    /* one more leaves: one row runs, half the reservation is left */
    close(fd[1]);
    wait_rows(S.port, 1, 0);
    assert_true(fabs(ts_metric(S.port, "tern_kv_cache_usage_ratio") - one / budget) < 1e-12);

    /* all gone: back to zero */
    close(fd[2]);
    wait_rows(S.port, 0, 0);
    assert_true(ts_metric(S.port, "tern_kv_cache_usage_ratio") == 0);
    ts_stop(&S);
    json_decref(FIT);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_protocol_gauges)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
