/* test_fault_alloc.c — allocation failure at every allocation site a load, an engine, a request and the HTTP server
 * reach: each must end in an error value (a load error, a DONE event with an error, a 4xx/5xx answer), never a
 * crash or a hang, and must leave behind no allocation it made.
 *
 * How: this program replaces malloc and its family (glibc lets a program do so; the library and libc itself then
 * call these), forwarding to glibc's own allocator. A first pass of a scenario records every call site (the return
 * address into the caller); then the scenario runs once per site with that site's first allocation refused, and
 * the count of live allocations must come back to what it was before. Refusing by site rather than by sequence
 * number keeps the choice the same when the engine's and the server's threads interleave differently.
 *
 * Under the sanitizers the replacement would fight their allocator, so there the test says "skipped". */
#include <dlfcn.h>
#include <execinfo.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/server.h"
#include "server_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define TERN_FAULT_SKIP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TERN_FAULT_SKIP 1
#endif
#endif

#ifndef TERN_FAULT_SKIP

/* ---- the allocator ------------------------------------------------------------------------------- */

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

#define MAX_SITES 4096
static _Atomic long live;           /* allocations made and not freed */
static _Atomic int recording;       /* 1: note each call site */
static _Atomic uintptr_t fail_site; /* refuse the fail_nth allocation from this site */
static _Atomic int fail_nth, fail_seen, fail_fired;
static _Atomic uintptr_t sites[MAX_SITES];
static _Atomic int site_calls[MAX_SITES]; /* allocations from each site in the recording run */
static _Atomic int n_sites;
static int trace;        /* print where each refusal lands (TERN_FAULT_TRACE=part of a scenario's name) */
static const char *trace_what;

static void note_site(uintptr_t ra) {
    const int n = atomic_load(&n_sites);
    for (int i = 0; i < n && i < MAX_SITES; i++)
        if (atomic_load(&sites[i]) == ra) {
            atomic_fetch_add(&site_calls[i], 1);
            return;
        }
    /* Racing recorders may both add a site: a duplicate only costs one more run. */
    const int k = atomic_fetch_add(&n_sites, 1);
    if (k < MAX_SITES) {
        atomic_store(&site_calls[k], 1);
        atomic_store(&sites[k], ra);
    }
}

/* 1 when the allocation from site ra must fail. */
static int refuse(uintptr_t ra) {
    if (atomic_load(&recording))
        note_site(ra);
    if (atomic_load(&fail_site) != ra || ra == 0 || atomic_fetch_add(&fail_seen, 1) + 1 != atomic_load(&fail_nth))
        return 0;
    atomic_store(&fail_fired, 1);
    if (trace) {
        void *frames[16];
        backtrace_symbols_fd(frames, backtrace(frames, 16), 2);
        (void)!write(2, "--\n", 3);
    }
    return 1;
}

void *malloc(size_t n) {
    if (refuse((uintptr_t)__builtin_return_address(0))) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = __libc_malloc(n);
    if (p)
        atomic_fetch_add(&live, 1);
    return p;
}

void *calloc(size_t a, size_t b) {
    if (refuse((uintptr_t)__builtin_return_address(0))) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = __libc_calloc(a, b);
    if (p)
        atomic_fetch_add(&live, 1);
    return p;
}

void *realloc(void *old, size_t n) {
    if (old && n == 0) {
        atomic_fetch_sub(&live, 1);
        __libc_free(old);
        return NULL;
    }
    if (refuse((uintptr_t)__builtin_return_address(0))) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = __libc_realloc(old, n);
    if (p && !old)
        atomic_fetch_add(&live, 1);
    return p;
}

void free(void *p) {
    if (!p)
        return;
    atomic_fetch_sub(&live, 1);
    __libc_free(p);
}

static void *aligned(size_t al, size_t n, uintptr_t ra) {
    if (refuse(ra))
        return NULL;
    void *p = __libc_memalign(al, n);
    if (p)
        atomic_fetch_add(&live, 1);
    return p;
}

int posix_memalign(void **out, size_t al, size_t n) {
    void *p = aligned(al, n, (uintptr_t)__builtin_return_address(0));
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t al, size_t n) {
    void *p = aligned(al, n, (uintptr_t)__builtin_return_address(0));
    if (!p)
        errno = ENOMEM;
    return p;
}

void *memalign(size_t al, size_t n) {
    void *p = aligned(al, n, (uintptr_t)__builtin_return_address(0));
    if (!p)
        errno = ENOMEM;
    return p;
}

/* "module+offset" of a call site (for addr2line -e MODULE OFFSET); static buffer. */
static const char *site_name(uintptr_t ra) {
    static char buf[512];
    Dl_info info;
    if (dladdr((void *)ra, &info) && info.dli_fname)
        snprintf(buf, sizeof buf, "%s+0x%lx", info.dli_fname, (unsigned long)(ra - (uintptr_t)info.dli_fbase));
    else
        snprintf(buf, sizeof buf, "%p", (void *)ra);
    return buf;
}

/* ---- the scenarios ------------------------------------------------------------------------------- */

/* A scenario returns 0 when it completed and 1 when it reported an error cleanly; it fails the test on anything
 * else (a hang, a missing error message). */
typedef int (*scenario_fn)(void *ctx);

static tern_model *the_model; /* loaded once for the engine, request and server scenarios */
static int dropped;           /* server answers that were a closed connection */

static int load(void *ctx) {
    tern_model_opts o = {.model_dir = ctx, .threads = 2};
    tern_model *m = NULL;
    tern_err *e = tern_model_load(&o, &m);
    if (e) {
        assert_non_null(tern_err_msg(e));
        tern_err_free(e);
        assert_null(m);
        return 1;
    }
    tern_model_free(m);
    return 0;
}

/* A small engine over the_model, or NULL when it could not be made (the error is dropped: a refused allocation). */
static tern_engine *engine(void) {
    tern_engine_opts o;
    tern_engine_opts_default(&o);
    o.parallel = 2;
    o.ctx = 256;
    o.threads = 2;
    tern_engine *e = NULL;
    tern_err *err = tern_engine_create(the_model, &o, &e);
    if (err) {
        assert_non_null(tern_err_msg(err));
        tern_err_free(err);
    }
    return e;
}

/* One text request with stop strings, logprobs and a grammar, read to its DONE event. */
static int request(void *ctx) {
    (void)ctx;
    tern_engine *e = engine();
    if (!e)
        return 1;
    tern_request r;
    tern_request_default(&r);
    static const char prompt[] = "<start_of_turn>user\nWhat does harbor mean?<end_of_turn>\n<start_of_turn>model\n";
    static const char *const stops[] = {"zzz", "\n\n\n"};
    static const char grammar[] = "root ::= [a-z ]+";
    r.prompt_text = prompt;
    r.prompt_text_len = sizeof prompt - 1;
    r.add_special = r.parse_special = 1;
    r.max_tokens = 6;
    r.stop_strings = stops;
    r.n_stop_strings = 2;
    r.top_logprobs = 2;
    r.grammar = grammar;
    r.grammar_len = sizeof grammar - 1;
    tern_stream *s = NULL;
    int status = 0;
    tern_err *err = tern_engine_submit(e, &r, NULL, NULL, &s, NULL);
    if (err) {
        assert_non_null(tern_err_msg(err));
        tern_err_free(err);
        status = 1;
    } else {
        tern_event ev;
        int got;
        int64_t tokens = 0;
        while ((got = tern_stream_next(s, &ev, 20000)) == 1) {
            tokens += ev.kind == TERN_EV_TOKEN;
            if (ev.kind == TERN_EV_DONE && ev.finish == TERN_FINISH_ERROR) {
                assert_non_null(ev.error);
                status = 1;
            } else if (ev.kind == TERN_EV_DONE && ev.finish == TERN_FINISH_LENGTH &&
                       tokens != ev.usage.completion_tokens) /* a reply cut short without a word */
                fail_msg("the reply ended normally with %lld of its %lld tokens delivered", (long long)tokens,
                         (long long)ev.usage.completion_tokens);
        }
        if (got == 0)
            fail_msg("the request hung with an allocation refused");
    }
    tern_stream_free(s);
    tern_engine_destroy(e);
    return status;
}

/* POSTs a chat request on a connection of its own and reads the answer to its end, allocating nothing on this side
 * (an allocation here could be the one refused); returns the status code (0: the connection closed unanswered). */
static int post_chat(int port, const char *body) {
    char req[2048], head[64], sink[4096];
    const int len = snprintf(req, sizeof req,
                             "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
                             strlen(body), body);
    const int fd = ts_connect(port);
    if (fd < 0)
        return 0;
    ts_send(fd, req, (size_t)len);
    ts_read_until(fd, "\r\n", head, sizeof head);
    ssize_t n;
    while ((n = recv(fd, sink, sizeof sink, 0)) > 0) {
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        fail_msg("the server hung with an allocation refused");
    close(fd);
    return strncmp(head, "HTTP/1.1 ", 9) ? 0 : atoi(head + 9);
}

/* A server over a fresh engine answering a chat request, streamed and not, then stopped. */
static int server(void *ctx) {
    (void)ctx;
    tern_engine *e = engine();
    if (!e)
        return 1;
    tern_server_config c;
    tern_server_config_default(&c);
    c.port = 0;
    c.max_connections = 8;
    c.timeout_s = 30;
    tern_server *srv = NULL;
    tern_err *err = tern_server_start(the_model, e, &c, &srv);
    if (err) {
        assert_non_null(tern_err_msg(err));
        tern_err_free(err);
        tern_engine_destroy(e);
        return 1;
    }
    const char *bodies[2] = {
        "{\"messages\":[{\"role\":\"user\",\"content\":\"What does harbor mean?\"}],\"max_tokens\":4,"
        "\"stop\":[\"zz\"],\"logprobs\":true,\"top_logprobs\":2}",
        "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi\"}],"
        "\"max_tokens\":4,\"stream\":true,\"stream_options\":{\"include_usage\":true},"
        "\"response_format\":{\"type\":\"json_object\"}}"};
    int status = 0;
    for (int k = 0; k < 2; k++) {
        const int code = post_chat(tern_server_port(srv), bodies[k]);
        if (code != 200) {
            /* 0: the connection closed unanswered — what libmicrohttpd does when it, or the first allocation
             * of a request, finds no memory to answer with; the next request must still be served. */
            if (code != 0 && code < 400)
                fail_msg("status %d with an allocation refused at %s", code, site_name(atomic_load(&fail_site)));
            dropped += code == 0;
            status = 1;
        }
    }
    tern_server_quiesce(srv);
    tern_server_detach_engine(srv);
    tern_engine_destroy(e);
    tern_server_stop(srv);
    return status;
}

/* Runs fn once recording its allocation sites, then once per site with that site refused. */
static void each_site(const char *name, scenario_fn fn, void *ctx) {
    atomic_store(&n_sites, 0);
    atomic_store(&recording, 1);
    assert_int_equal(fn(ctx), 0); /* nothing refused: it must succeed */
    atomic_store(&recording, 0);
    /* Lazily made state that stays (the cached compiled grammar, the tokenizer's tables) is made by this first
     * run; every later run must end where this one did. */
    const long base = atomic_load(&live);
    int n = atomic_load(&n_sites);
    if (n > MAX_SITES)
        n = MAX_SITES;
    int fired = 0, errors = 0, leaks = 0, runs = 0, skipped_dep = 0;
    trace = trace_what && strstr(name, trace_what);
    /* Each site's first allocation, and for a site called more than once also the one halfway through (an
     * allocation in a loop, or on the second token, meets state the first did not). */
    for (int j = 0; j < 2 * n; j++) {
        const int i = j % n, calls = atomic_load(&site_calls[i]);
        const int nth = j < n ? 1 : (calls + 1) / 2 + 1;
        if (j >= n && calls < 2)
            continue;
        /* jansson 2.14's own allocations are left alone: its lexer asserts (load.c lex_scan_string) when one of
         * them fails mid-string — a finding in the dependency, docs/reliability.md. Ours around it are refused. */
        if (strstr(site_name(atomic_load(&sites[i])), "libjansson")) {
            skipped_dep++;
            continue;
        }
        runs++;
        atomic_store(&fail_fired, 0);
        atomic_store(&fail_seen, 0);
        atomic_store(&fail_nth, nth);
        const long l0 = atomic_load(&live);
        atomic_store(&fail_site, atomic_load(&sites[i]));
        const int r = fn(ctx);
        atomic_store(&fail_site, 0);
        fired += atomic_load(&fail_fired);
        errors += r;
        long l1 = atomic_load(&live);
        for (int w = 0; w < 100 && l1 > l0; w++) { /* connection threads may free a moment later */
            usleep(10000);
            l1 = atomic_load(&live);
        }
        if (l1 > l0) {
            leaks++;
            print_message("%s: refusing the allocation at %s left %ld allocations behind\n", name,
                          site_name(atomic_load(&sites[i])), l1 - l0);
        }
    }
    print_message("%s: %d allocation sites, %d runs each refusing one allocation, %d refusals made, %d ended in an "
                  "error (%d of them connections closed unanswered), %d recovered, %d leaked (%ld live at the start); %d "
                  "refusals inside jansson not made\n",
                  name, n, runs, fired, errors, dropped, runs - errors, leaks, base, skipped_dep);
    dropped = 0;
    assert_int_equal(leaks, 0);
    assert_true(fired > runs / 2); /* the sites were reached again */
}

static void test_load_safetensors(void **state) {
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", tu_testdata("oracle/tiny-v4096-f32"));
    each_site("load (safetensors f32 + tokenizer)", load, dir);
}

static void test_load_gguf(void **state) {
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s", tu_testdata("gguf/tiny-kev-q8_0.gguf"));
    each_site("load (GGUF q8_0)", load, path);
}

static void test_request(void **state) {
    (void)state;
    each_site("engine + request", request, NULL);
}

static void test_server(void **state) {
    (void)state;
    each_site("server + chat requests", server, NULL);
}

static int setup(void **state) {
    (void)state;
    setenv("TERN_CACHE_DIR", "off", 1);
    setenv("TERN_LOG", "error", 0); /* the refused allocations' own messages are expected */
    if ((trace_what = getenv("TERN_FAULT_TRACE"))) {
        void *frames[4];
        backtrace(frames, 4); /* loads libgcc's unwinder now, not inside a refused allocation */
    }
    tern_model_opts o = {.model_dir = tu_testdata("oracle/tiny-v4096-f32"), .threads = 2};
    tern_err *e = tern_model_load(&o, &the_model);
    if (e) {
        fprintf(stderr, "%s\n", tern_err_msg(e));
        tern_err_free(e);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tern_model_free(the_model);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_safetensors),
        cmocka_unit_test(test_load_gguf),
        cmocka_unit_test(test_request),
        cmocka_unit_test(test_server),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

#else

int main(void) {
    printf("skipped: allocation-failure injection replaces malloc, which the sanitizers' allocator owns\n");
    return 0;
}

#endif
