/* cgroup.h — what a container grants this process: the CPU quota and the memory limit of the control group it runs
 * in (Kubernetes pods, Docker), which /proc/meminfo and the online CPU count do not show. Both cgroup v2 (the
 * unified hierarchy) and v1's cpu and memory controllers are read; a limit set on an enclosing group counts too. */
#ifndef TERN_CORE_CGROUP_H
#define TERN_CORE_CGROUP_H

#include <stdint.h>

typedef struct tern_cgroup_limits {
    double cpus;        /* the CPU quota in CPUs (quota / period); 0 = none */
    uint64_t mem_limit; /* the memory limit in bytes; 0 = none */
    uint64_t mem_anon;  /* anonymous memory charged to the group (file pages are not counted: they can be dropped) */
} tern_cgroup_limits;

/* The limits of the group `self_cgroup` (the contents of a /proc/PID/cgroup file) names, under the cgroup filesystem
 * mounted at `root`. Unreadable or absent files mean no limit; never fails. */
void tern_cgroup_read(const char *root, const char *self_cgroup, tern_cgroup_limits *out);
/* The limits of this process (/proc/self/cgroup under /sys/fs/cgroup). */
void tern_cgroup_self(tern_cgroup_limits *out);

#endif
