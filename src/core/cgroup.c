/* cgroup.c — a container's CPU quota and memory limit (see cgroup.h).
 *
 * Where a group's files are: /proc/self/cgroup names the group's path per hierarchy ("0::/path" for v2,
 * "N:cpu,cpuacct:/path" for v1). Inside a container with its own cgroup namespace the path is "/" and the mount
 * is the container's own group; without one, the path is the host's, and the mount may show the host's root or
 * the container's group itself — so each of root/PATH, its parents up to root/, is read, and the tightest limit
 * found wins (a limit on an enclosing group binds as much as one on the group). */
#include "core/cgroup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first line of a small file (NUL-terminated, newline dropped), or 0 when it cannot be read. */
static int read_line(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    if (ok)
        buf[strcspn(buf, "\n")] = 0;
    return ok;
}

/* The value of "key N" in a flat-keyed file (memory.stat), or -1. */
static long long stat_value(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[256];
    long long v = -1;
    const size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ' ') {
            v = atoll(line + n + 1);
            break;
        }
    fclose(f);
    return v;
}

/* The limits found in one group folder, merged into out (the tightest wins). v2 when `v2`, else v1's files. */
static void read_dir(const char *dir, int v2, int cpu, int mem, tern_cgroup_limits *out) {
    char path[4400], line[256];
    if (cpu) {
        double quota = -1, period = 0;
        if (v2) {
            snprintf(path, sizeof path, "%s/cpu.max", dir);
            char q[64];
            if (read_line(path, line, sizeof line) && sscanf(line, "%63s %lf", q, &period) == 2 && strcmp(q, "max"))
                quota = atof(q);
        } else {
            snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
            if (read_line(path, line, sizeof line))
                quota = atof(line);
            snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
            if (read_line(path, line, sizeof line))
                period = atof(line);
        }
        if (quota > 0 && period > 0 && (out->cpus == 0 || quota / period < out->cpus))
            out->cpus = quota / period;
    }
    if (mem) {
        snprintf(path, sizeof path, v2 ? "%s/memory.max" : "%s/memory.limit_in_bytes", dir);
        /* v1 writes "no limit" as a page-rounded LLONG_MAX; anything past 2^60 is that */
        if (read_line(path, line, sizeof line) && strcmp(line, "max")) {
            unsigned long long lim = strtoull(line, NULL, 10);
            if (lim > 0 && lim < (1ULL << 60) && (out->mem_limit == 0 || lim < out->mem_limit)) {
                out->mem_limit = lim;
                snprintf(path, sizeof path, "%s/memory.stat", dir);
                long long anon = stat_value(path, v2 ? "anon" : "total_rss");
                out->mem_anon = anon > 0 ? (uint64_t)anon : 0;
            }
        }
    }
}

/* Reads the group at base + rel and every parent of it up to base. */
static void read_up(const char *base, const char *rel, int v2, int cpu, int mem, tern_cgroup_limits *out) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s%s", base, rel);
    const size_t floor = strlen(base);
    for (;;) {
        read_dir(dir, v2, cpu, mem, out);
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < floor)
            break;
        *slash = 0;
    }
}

void tern_cgroup_read(const char *root, const char *self_cgroup, tern_cgroup_limits *out) {
    memset(out, 0, sizeof *out);
    if (!root || !self_cgroup)
        return;
    char base[4096];
    for (const char *p = self_cgroup; *p;) {
        const char *eol = strchr(p, '\n');
        const size_t n = eol ? (size_t)(eol - p) : strlen(p);
        char line[4096];
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), p);
        p += n + (eol ? 1 : 0);
        /* "ID:CONTROLLERS:PATH" */
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/')
            continue;
        *c2 = 0;
        const char *controllers = c1 + 1, *path = c2 + 1;
        if (!strcmp(path, "/"))
            path = "";
        if (!*controllers) { /* v2 */
            read_up(root, path, 1, 1, 1, out);
            continue;
        }
        char list[256];
        snprintf(list, sizeof list, ",%s,", controllers);
        const int cpu = strstr(list, ",cpu,") != NULL, mem = strstr(list, ",memory,") != NULL;
        if (!cpu && !mem)
            continue;
        snprintf(base, sizeof base, "%s/%s", root, controllers);
        read_up(base, path, 0, cpu, mem, out);
    }
}

void tern_cgroup_self(tern_cgroup_limits *out) {
    char buf[16384];
    FILE *f = fopen("/proc/self/cgroup", "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    tern_cgroup_read("/sys/fs/cgroup", buf, out);
}
