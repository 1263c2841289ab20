/* testutil.c — shared helpers for the unit tests. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fileio.h"

static const char *env_or(const char *name, const char *dflt) {
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

const char *tu_testdata(const char *rel) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", env_or("TERN_TESTDATA", "../shared/testdata"), rel);
    return buf;
}

const char *tu_tmpdir(const char *name) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s.%d", env_or("TERN_TMP", "/tmp/tern-test"), name, (int)getpid());
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", buf);
    if (system(cmd) != 0)
        fail_msg("cannot clear %s", buf);
    tern_err *e = tern_mkdir_p(buf);
    if (e)
        fail_msg("%s", tern_err_msg(e));
    return buf;
}

const char *tu_tern_bin(void) { return env_or("TERN_BIN", "build/tern"); }

const char *tu_write(const char *dir, const char *name, const void *data, size_t len) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    tern_err *e = tern_write_file(buf, data, len);
    if (e)
        fail_msg("%s", tern_err_msg(e));
    return buf;
}

int tu_run(const char *cmd, char **out) {
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (n + 4096 > cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        size_t r = fread(buf + n, 1, cap - n - 1, p);
        if (r == 0)
            break;
        n += r;
    }
    buf[n] = 0;
    int st = pclose(p);
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void tu_expect_error(tern_err *err, const char *needle, const char *file, int line) {
    if (!err) {
        print_error("%s:%d: expected an error containing \"%s\", got success\n", file, line, needle);
        fail();
    }
    if (!strstr(err->msg, needle)) {
        print_error("%s:%d: expected an error containing \"%s\", got \"%s\"\n", file, line, needle, err->msg);
        tern_err_free(err);
        fail();
    }
    tern_err_free(err);
}
