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

tern_err *tern_cache_begin_write(const char *path, char **tmp) {
    *tmp = NULL;
    const char *slash = strrchr(path, '/');
    if (slash) {
        char *dir = strndup(path, (size_t)(slash - path));
        tern_err *e = dir ? tern_mkdir_p(dir) : tern_errf(TERN_ENOMEM, "out of memory");
        free(dir);
        TERN_TRY(e);
    }
    const size_t n = strlen(path) + 32;
    if (!(*tmp = malloc(n)))
        return tern_errf(TERN_ENOMEM, "out of memory");
    snprintf(*tmp, n, "%s.tmp.%ld", path, (long)getpid()); /* temp_pid reads it back */
    return NULL;
}

void tern_cache_used(const char *path) { (void)utimensat(AT_FDCWD, path, NULL, 0); }

/* The writer's pid of a temporary "NAME.tmp.PID", or 0 when `name` is not one. */
static long temp_pid(const char *name) {
    const char *t = strstr(name, ".tmp.");
    if (!t)
        return 0;
    char *end;
    const long pid = strtol(t + 5, &end, 10);
    return *end == 0 && pid > 0 ? pid : 0;
}

/* Whether `name` is one of tern's cache files (or a temporary of one). */
static int ours(const char *name) {
    const char *t = strstr(name, ".tmp.");
    const size_t n = t ? (size_t)(t - name) : strlen(name);
    return (n > 5 && !memcmp(name + n - 5, ".pack", 5)) ||
           (n > 17 && !strncmp(name, "tokenizer-", 10) && !memcmp(name + n - 7, ".tables", 7));
}

void tern_cache_prune(const char *path, double max_age_days) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    DIR *d = opendir(dir);
    if (!d)
        return;
    const time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!ours(e->d_name))
            continue;
        char file[8192];
        snprintf(file, sizeof file, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(file, &st) || !S_ISREG(st.st_mode))
            continue;
        const long pid = temp_pid(e->d_name);
        const int writer_gone = pid && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
        if (writer_gone || difftime(now, st.st_mtime) > max_age_days * 86400.0)
            unlink(file);
    }
    closedir(d);
}
