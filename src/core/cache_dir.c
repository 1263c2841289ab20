/* cache_dir.c — the cache folder (see cache_dir.h). */
#include "core/cache_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"

char *tern_cache_dir(void) {
    const char *d = getenv("TERN_CACHE_DIR");
    if (d)
        return *d && strcmp(d, "off") ? strdup(d) : NULL;
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char buf[4096];
    if (x && *x)
        snprintf(buf, sizeof buf, "%s/tern", x);
    else if (home && *home)
        snprintf(buf, sizeof buf, "%s/.cache/tern", home);
    else
        return NULL;
    return strdup(buf);
}

/* This machine's name as the file-name part of a temporary: containers sharing a cache volume (Kubernetes pods,
 * Docker Compose replicas) each run tern as the same pid, so the pid alone would name one temporary for all of them,
 * and a pid seen in another container's pid space says nothing about this one's. Characters outside [A-Za-z0-9-]
 * become '-'. */
static void this_host(char out[65]) {
    if (gethostname(out, 64) != 0 || !out[0])
        strcpy(out, "localhost");
    out[64] = 0;
    for (char *c = out; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-'))
            *c = '-';
}

tern_err *tern_cache_begin_write(const char *path, char **tmp) {
    *tmp = NULL;
    const char *slash = strrchr(path, '/');
    if (slash) {
        char *dir = strndup(path, (size_t)(slash - path));
        tern_err *e = dir ? tern_mkdir_p(dir) : tern_errf(TERN_ENOMEM, "out of memory");
        free(dir);
        TERN_TRY(e);
    }
    char host[65];
    this_host(host);
    const size_t n = strlen(path) + 32 + sizeof host;
    if (!(*tmp = malloc(n)))
        return tern_errf(TERN_ENOMEM, "out of memory");
    snprintf(*tmp, n, "%s.tmp.%ld.%s", path, (long)getpid(), host); /* temp_writer reads it back */
    return NULL;
}

void tern_cache_used(const char *path) { (void)utimensat(AT_FDCWD, path, NULL, 0); }

/* The writer of a temporary "NAME.tmp.PID.HOST" (or "NAME.tmp.PID", as written before hosts were named): its pid,
 * or 0 when `name` is not a temporary; *here says whether the writer ran on this machine, named `host` (only then
 * can the pid be asked whether it still runs). */
static long temp_writer(const char *name, const char *host, int *here) {
    const char *t = strstr(name, ".tmp.");
    *here = 0;
    if (!t)
        return 0;
    char *end;
    const long pid = strtol(t + 5, &end, 10);
    if (pid <= 0 || (*end && *end != '.'))
        return 0;
    *here = !*end || !strcmp(end + 1, host);
    return pid;
}

/* Whether `name` is one of tern's cache files (or a temporary of one). */
static int ours(const char *name) {
    const char *t = strstr(name, ".tmp.");
    const size_t n = t ? (size_t)(t - name) : strlen(name);
    return (n > 5 && !memcmp(name + n - 5, ".pack", 5)) ||
           (n > 17 && !strncmp(name, "tokenizer-", 10) && !memcmp(name + n - 7, ".tables", 7)) ||
           (n > 11 && !strncmp(name, "cpu-", 4) && !memcmp(name + n - 7, ".stream", 7));
}

void tern_cache_prune(const char *path, double max_age_days) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    DIR *d = opendir(dir);
    if (!d)
        return;
    const time_t now = time(NULL);
    char host[65];
    this_host(host);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!ours(e->d_name))
            continue;
        char file[8192];
        snprintf(file, sizeof file, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(file, &st) || !S_ISREG(st.st_mode))
            continue;
        int here;
        const long pid = temp_writer(e->d_name, host, &here);
        const int writer_gone = pid && here && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
        if (writer_gone || difftime(now, st.st_mtime) > max_age_days * 86400.0)
            unlink(file);
    }
    closedir(d);
}
