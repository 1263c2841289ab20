/* server_util.h — helpers for the server tests (header-only, included by tests/unit/test_server_*.c): make the
 * demo model, start `tern serve` on a free loopback port (--port 0; the ready line says which), talk raw HTTP/1.1
 * over a socket (so malformed requests, slow clients and disconnects can be staged), read SSE, stop the server
 * with SIGTERM and collect its exit status. Every wait is bounded, so a hung server fails the test instead of
 * hanging it. */
#ifndef TERN_TESTS_SERVER_UTIL_H
#define TERN_TESTS_SERVER_UTIL_H

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define TS_WAIT_S 120 /* the most any single wait may take before the test fails */
#define TS_FN static __attribute__((unused))

typedef struct ts_server {
    pid_t pid;
    int port;
    char ready[1024];
    char log[4300]; /* the server's stderr file */
} ts_server;

TS_FN void ts_sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* The demo model (tiny preset, real Gemma 4 vocabulary and template), made once per test program. */
TS_FN const char *ts_model(void) {
    static char dir[4200];
    if (dir[0])
        return dir;
    char base[4096], cmd[10000];
    snprintf(base, sizeof base, "%s", tu_tmpdir("server-model"));
    snprintf(dir, sizeof dir, "%s/m", base);
    snprintf(cmd, sizeof cmd, "'%s' synth --preset tiny --dtype bf16 --seed 1 '%s' >/dev/null", tu_tern_bin(), dir);
    if (tu_run(cmd, NULL) != 0) {
        print_error("tern synth failed\n");
        fail();
    }
    return dir;
}

/* Starts `tern serve MODEL --port 0 ARGS` and waits for its ready line. */
TS_FN void ts_start_model(ts_server *s, const char *model, const char *args) {
    memset(s, 0, sizeof *s);
    static int n;
    static char logdir[4096]; /* made once: tu_tmpdir empties the directory */
    if (!logdir[0])
        snprintf(logdir, sizeof logdir, "%s", tu_tmpdir("server-logs"));
    snprintf(s->log, sizeof s->log, "%s/serve-%d.log", logdir, n++);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    char cmd[40000];
    snprintf(cmd, sizeof cmd, "exec '%s' serve '%s' --port 0 %s 2>'%s'", tu_tern_bin(), model, args ? args : "",
             s->log);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    s->pid = pid;
    size_t len = 0;
    time_t t0 = time(NULL);
    while (len + 1 < sizeof s->ready && !memchr(s->ready, '\n', len)) {
        struct pollfd p = {fds[0], POLLIN, 0};
        if (time(NULL) - t0 > TS_WAIT_S || poll(&p, 1, 1000) < 0)
            break;
        if (!(p.revents & (POLLIN | POLLHUP)))
            continue;
        ssize_t k = read(fds[0], s->ready + len, sizeof s->ready - 1 - len);
        if (k <= 0)
            break;
        len += (size_t)k;
        s->ready[len] = 0;
    }
    close(fds[0]);
    const char *at = strstr(s->ready, "://127.0.0.1:"); /* http or https */
    if (!at) {
        char *log = NULL;
        char c2[8192];
        snprintf(c2, sizeof c2, "cat '%s'", s->log);
        tu_run(c2, &log);
        print_error("server did not become ready: stdout '%s' stderr '%s'\n", s->ready, log ? log : "");
        free(log);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fail();
    }
    s->port = atoi(at + strlen("://127.0.0.1:"));
    assert_true(s->port > 0);
}

/* Starts `tern serve` on the tiny synthetic model (ts_model) with ARGS. */
TS_FN void ts_start(ts_server *s, const char *args) { ts_start_model(s, ts_model(), args); }

/* Sends `sig` and waits (bounded) for the exit; returns the exit status, or -1 if it had to be killed. */
TS_FN int ts_signal_wait(ts_server *s, int sig) {
    if (sig)
        kill(s->pid, sig);
    for (int i = 0; i < TS_WAIT_S * 10; i++) {
        int st;
        pid_t r = waitpid(s->pid, &st, WNOHANG);
        if (r == s->pid) {
            s->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        }
        ts_sleep_ms(100);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
    return -1;
}

/* Stops the server with SIGTERM and requires a clean exit (under ASan that also means no leaks). */
TS_FN void ts_stop(ts_server *s) {
    int st = ts_signal_wait(s, SIGTERM);
    if (st != 0) {
        char *log = NULL;
        char c2[8192];
        snprintf(c2, sizeof c2, "tail -c 4000 '%s'", s->log);
        tu_run(c2, &log);
        print_error("server exit status %d; stderr:\n%s\n", st, log ? log : "");
        free(log);
    }
    assert_int_equal(st, 0);
}

/* ---- sockets ------------------------------------------------------------------------------------------ */

TS_FN int ts_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {TS_WAIT_S, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

TS_FN void ts_send(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len) {
        ssize_t k = send(fd, p, len, MSG_NOSIGNAL);
        if (k <= 0)
            return; /* the server may legitimately close early (413, 401) */
        p += k;
        len -= (size_t)k;
    }
}

/* Reads until `needle` arrives (or EOF, or cap - 1 bytes); the bytes so far in buf. Returns 1 if it arrived. */
TS_FN int ts_read_until(int fd, const char *needle, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    while (n < cap - 1) {
        ssize_t k = recv(fd, buf + n, cap - 1 - n, 0);
        if (k <= 0)
            return 0;
        n += (size_t)k;
        buf[n] = 0;
        if (strstr(buf, needle))
            return 1;
    }
    return 0;
}

/* Reads until EOF (bounded by the receive timeout); malloc'd, NUL-terminated. */
TS_FN char *ts_read_all(int fd, size_t *len) {
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (n + 4096 > cap)
            buf = realloc(buf, cap *= 2);
        ssize_t k = recv(fd, buf + n, cap - n - 1, 0);
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}

/* Decodes a chunked body in place; returns its length. */
TS_FN size_t ts_dechunk(char *b, size_t n) {
    size_t in = 0, out = 0;
    while (in < n) {
        char *end;
        unsigned long sz = strtoul(b + in, &end, 16);
        char *crlf = strstr(b + in, "\r\n");
        if (!crlf || end == b + in)
            break;
        in = (size_t)(crlf - b) + 2;
        if (sz == 0 || in + sz > n)
            break;
        memmove(b + out, b + in, sz);
        out += sz;
        in += sz + 2;
    }
    b[out] = 0;
    return out;
}

typedef struct ts_resp {
    int status;
    char *head; /* status line and headers */
    char *body; /* de-chunked */
    size_t body_len;
    json_t *json; /* the body parsed, or NULL */
} ts_resp;

TS_FN void ts_resp_free(ts_resp *r) {
    free(r->head);
    free(r->body);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

/* Parses a whole HTTP/1.1 response (read to EOF). */
TS_FN void ts_parse_response(char *raw, size_t n, ts_resp *r) {
    memset(r, 0, sizeof *r);
    char *sep = strstr(raw, "\r\n\r\n");
    if (!sep || strncmp(raw, "HTTP/1.", 7)) {
        r->status = 0;
        r->head = raw;
        r->body = strdup("");
        return;
    }
    *sep = 0;
    r->head = raw;
    r->status = atoi(raw + 9);
    size_t hl = (size_t)(sep + 4 - raw);
    r->body = malloc(n - hl + 1);
    memcpy(r->body, sep + 4, n - hl);
    r->body[n - hl] = 0;
    r->body_len = n - hl;
    if (strcasestr(r->head, "transfer-encoding: chunked"))
        r->body_len = ts_dechunk(r->body, r->body_len);
    r->json = json_loadb(r->body, r->body_len, 0, NULL);
}

/* Sends raw bytes as a request on a fresh connection and reads the whole response. */
TS_FN void ts_raw(int port, const void *req, size_t len, ts_resp *r) {
    int fd = ts_connect(port);
    assert_true(fd >= 0);
    ts_send(fd, req, len);
    size_t n;
    char *raw = ts_read_all(fd, &n);
    close(fd);
    ts_parse_response(raw, n, r);
}

/* METHOD PATH with extra header lines (each ending in \r\n, may be NULL) and a body (may be NULL). */
TS_FN void ts_http(int port, const char *method, const char *path, const char *headers, const char *body,
                    ts_resp *r) {
    size_t bl = body ? strlen(body) : 0;
    size_t cap = bl + 4096 + (headers ? strlen(headers) : 0);
    char *req = malloc(cap);
    int k = snprintf(req, cap, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s", method, path,
                     headers ? headers : "");
    if (body)
        k += snprintf(req + k, cap - (size_t)k, "Content-Type: application/json\r\nContent-Length: %zu\r\n", bl);
    k += snprintf(req + k, cap - (size_t)k, "\r\n");
    memcpy(req + k, body ? body : "", bl);
    ts_raw(port, req, (size_t)k + bl, r);
    free(req);
}

/* POST a JSON body. */
TS_FN void ts_post(int port, const char *path, const char *body, ts_resp *r) {
    ts_http(port, "POST", path, NULL, body, r);
}

/* The string at a JSON path like "choices.0.message.content" (numbers index arrays), or NULL. */
TS_FN json_t *ts_get(json_t *v, const char *path) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *tok = strtok(buf, "."); tok && v; tok = strtok(NULL, ".")) {
        if (json_is_array(v))
            v = json_array_get(v, (size_t)atoi(tok));
        else
            v = json_object_get(v, tok);
    }
    return v;
}

TS_FN const char *ts_str(json_t *v, const char *path) { return json_string_value(ts_get(v, path)); }
TS_FN long long ts_int(json_t *v, const char *path) { return (long long)json_integer_value(ts_get(v, path)); }

/* The "data:" payloads of an SSE body, in order, as a JSON array of parsed objects ("[DONE]" becomes the string
 * "[DONE]"); names of "event:" lines go to *events (a JSON array of strings) when events is not NULL. */
TS_FN json_t *ts_sse(const char *body, json_t **events) {
    json_t *out = json_array();
    if (events)
        *events = json_array();
    const char *p = body;
    while (p && *p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n >= 6 && !strncmp(p, "data: ", 6)) {
            if (n - 6 == 6 && !strncmp(p + 6, "[DONE]", 6))
                json_array_append_new(out, json_string("[DONE]"));
            else {
                json_t *v = json_loadb(p + 6, n - 6, 0, NULL);
                json_array_append_new(out, v ? v : json_string("<bad json>"));
            }
        } else if (events && n >= 7 && !strncmp(p, "event: ", 7)) {
            json_array_append_new(*events, json_stringn(p + 7, n - 7));
        }
        p = nl ? nl + 1 : NULL;
    }
    return out;
}

/* Concatenates choices[0].delta.<field> (chat) over SSE chunks. */
TS_FN char *ts_sse_concat(json_t *chunks, const char *field) {
    size_t cap = 4096, n = 0;
    char *s = calloc(1, cap);
    size_t i;
    json_t *c;
    json_array_foreach(chunks, i, c) {
        const char *t = json_string_value(json_object_get(ts_get(c, "choices.0.delta"), field));
        if (!t)
            t = json_string_value(json_object_get(ts_get(c, "choices.0"), field)); /* completions: choices[0].text */
        if (!t)
            continue;
        size_t l = strlen(t);
        while (n + l + 1 > cap)
            s = realloc(s, cap *= 2);
        memcpy(s + n, t, l + 1);
        n += l;
    }
    return s;
}

/* A value from /metrics: the first line starting with `prefix` (name plus labels); -1 if absent. */
TS_FN double ts_metric(int port, const char *prefix) {
    ts_resp r;
    ts_http(port, "GET", "/metrics", NULL, NULL, &r);
    double v = -1;
    size_t pl = strlen(prefix);
    for (const char *p = r.body; p && *p;) {
        if (!strncmp(p, prefix, pl) && p[pl] == ' ') {
            v = atof(p + pl + 1);
            break;
        }
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    ts_resp_free(&r);
    return v;
}

/* Waits (bounded) until the metric reaches at least `want`; returns its last value. */
TS_FN double ts_wait_metric(int port, const char *prefix, double want) {
    double v = -1;
    for (int i = 0; i < TS_WAIT_S * 10; i++) {
        if ((v = ts_metric(port, prefix)) >= want)
            return v;
        ts_sleep_ms(100);
    }
    return v;
}

/* Runs a node script from tests/server/ against the server; returns its exit status, output in *out. */
TS_FN int ts_node(const ts_server *s, const char *script, const char *extra, char **out) {
    const char *src = getenv("TERN_SOURCE_DIR") ? getenv("TERN_SOURCE_DIR") : ".";
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "node '%s/tests/server/%s' http://127.0.0.1:%d m %s 2>&1", src, script,
             s ? s->port : 0, extra ? extra : "");
    return tu_run(cmd, out);
}

#endif
