/* mapping_faults.c — a model file truncated or rewritten in place under a running tern takes away pages the
 * weights are read from; the next read of them raises SIGBUS. Nothing can be served from bytes that are gone, so
 * the process stops — but says which file and why, instead of vanishing. A file replaced by rename (how downloads
 * and `cp` to a new name then `mv` work) keeps its old bytes mapped and never gets here. */
#include "cli/mapping_faults.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "core/mapped_files.h"

static void say(const char *s) {
    ssize_t r = write(STDERR_FILENO, s, strlen(s));
    (void)r;
}

static void on_sigbus(int sig, siginfo_t *info, void *uctx) {
    (void)uctx;
    const char *path = info ? tern_mapped_files_find(info->si_addr) : NULL;
    if (!path) {
        signal(sig, SIG_DFL); /* not ours to explain: the default action, with a core dump if enabled */
        raise(sig);
        return;
    }
    say("\ntern: ");
    say(path[0] ? path : "a mapped file");
    say(" was truncated or rewritten in place while tern was reading it; the bytes tern had mapped are gone, so it "
        "stops here. Replace model and cache files by writing a new file and renaming it over the old one, then "
        "start tern again.\n");
    _exit(74);
}

void cli_report_mapping_faults(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}
