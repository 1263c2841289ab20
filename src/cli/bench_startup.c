/* bench_startup.c — `tern bench MODEL --startup`: how long a server takes from process start to its first
 * answered request, cold (the model's files and tern's cache files evicted from the page cache first,
 * posix_fadvise DONTNEED) and warm, beside the time to read the model's files once (what reading every file of
 * the folder costs cold): the limit a server that mmaps its weights could approach. Before the rounds, one first
 * start with an empty cache folder of its own (cold too): what a new model costs once, and the cache it leaves.
 * Each start runs `tern serve MODEL --port 0` (this binary), reads the port from its ready line, sends
 * GET /health until it is answered, then stops it. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/bench_startup.h"
#include "core/cache_dir.h"
#include "core/fileio.h"
#include "core/timeutil.h"

static void evict(void *ctx, const char *name, const char *path) {
    (void)ctx, (void)name;
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

static void read_all(void *ctx, const char *name, const char *path) {
    (void)name;
    static char buf[1 << 20];
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        *(uint64_t *)ctx += (uint64_t)n;
    close(fd);
}

/* 1 when GET /health on 127.0.0.1:port is answered 200 (the model loaded; while it loads the answer is 503). */
static int health_answered(int port) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    static const char req[] = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    char resp[64] = {0};
    int ok = connect(s, (struct sockaddr *)&a, sizeof a) == 0 && write(s, req, sizeof req - 1) == (ssize_t)(sizeof req - 1) &&
             read(s, resp, sizeof resp - 1) > 12 && !strncmp(resp, "HTTP/1.", 7) && !strncmp(resp + 8, " 200", 4);
    close(s);
    return ok;
}

static void add_size(void *ctx, const char *name, const char *path) {
    (void)name;
    struct stat st;
    if (!stat(path, &st))
        *(uint64_t *)ctx += (uint64_t)st.st_size;
}

static void remove_file(void *ctx, const char *name, const char *path) {
    (void)ctx, (void)name;
    unlink(path);
}

/* fn over the model's files: a folder's, or the one file a GGUF model is. */
static void each_model_file(const char *model, void (*fn)(void *ctx, const char *name, const char *path), void *ctx) {
    if (tern_is_file(model))
        fn(ctx, model, model);
    else
        tern_err_free(tern_dir_files(model, fn, ctx));
}

/* The model's files and the cache folder's (the packed weights, the tokenizer's tables) leave the page cache. */
static void evict_all(const char *model) {
    each_model_file(model, evict, NULL);
    char *cache = tern_cache_dir();
    if (cache)
        tern_err_free(tern_dir_files(cache, evict, NULL));
    free(cache);
}

/* One start of `tern serve MODEL --port 0` (with TERN_CACHE_DIR=cache_dir when given): seconds from fork to the
 * first answered /health, or < 0. */
static double one_start(const char *model, int threads, const char *cache_dir, char *why, size_t why_len) {
    int out[2];
    if (pipe(out)) {
        snprintf(why, why_len, "pipe: %s", strerror(errno));
        return -1;
    }
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) {
        snprintf(why, why_len, "cannot find this program: %s", strerror(errno));
        close(out[0]);
        close(out[1]);
        return -1;
    }
    self[sl] = 0;
    char th[16];
    snprintf(th, sizeof th, "%d", threads);
    const double t0 = tern_now_s();
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        close(out[0]);
        close(out[1]);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, STDERR_FILENO);
        if (cache_dir)
            setenv("TERN_CACHE_DIR", cache_dir, 1);
        execl(self, self, "serve", model, "--port", "0", "--parallel", "1", "--threads", th, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    if (pid < 0) {
        close(out[0]);
        snprintf(why, why_len, "fork: %s", strerror(errno));
        return -1;
    }
    /* The ready line: "tern: serving NAME at http://127.0.0.1:PORT (...)". */
    char line[1024];
    size_t n = 0;
    int port = 0;
    for (;;) {
        ssize_t r = read(out[0], line + n, sizeof line - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        line[n] = 0;
        const char *p = strstr(line, "127.0.0.1:");
        if (p && strchr(p, ' ')) {
            port = atoi(p + 10);
            break;
        }
        if (n + 1 >= sizeof line)
            break;
    }
    double ready = -1;
    while (port > 0 && tern_now_s() - t0 < 600) {
        if (health_answered(port)) {
            ready = tern_now_s() - t0;
            break;
        }
        usleep(2000);
    }
    if (ready < 0)
        snprintf(why, why_len, "the server did not become ready (%s)", port ? "no answer to /health" : "no ready line");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(out[0]);
    return ready;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int tern_bench_startup(const char *model, int rounds, int threads, int json) {
    double cold[32], warm[32], read_s[32];
    uint64_t bytes = 0;
    char why[256] = "";
    if (rounds < 1 || rounds > 32) {
        fprintf(stderr, "tern bench: --rounds must be in [1, 32]\n");
        return 2;
    }
    /* The first start: an empty cache folder of its own, removed after. */
    char fresh[] = "/tmp/tern-first-start-XXXXXX";
    if (!mkdtemp(fresh)) {
        fprintf(stderr, "tern bench: cannot make a folder in /tmp: %s\n", strerror(errno));
        return 1;
    }
    evict_all(model);
    const double first = one_start(model, threads, fresh, why, sizeof why);
    uint64_t cache_bytes = 0;
    tern_err_free(tern_dir_files(fresh, add_size, &cache_bytes));
    tern_err_free(tern_dir_files(fresh, remove_file, NULL));
    rmdir(fresh);
    if (first < 0) {
        fprintf(stderr, "tern bench: %s\n", why);
        return 1;
    }
    if (!json)
        fprintf(stderr, "first start (an empty cache folder): %.3f s, leaving %.1f MiB of cache\n", first,
                (double)cache_bytes / (1 << 20));
    for (int r = 0; r < rounds; r++) {
        evict_all(model);
        double t0 = tern_now_s();
        bytes = 0;
        each_model_file(model, read_all, &bytes);
        read_s[r] = tern_now_s() - t0;
        evict_all(model);
        cold[r] = one_start(model, threads, NULL, why, sizeof why);
        warm[r] = cold[r] < 0 ? -1 : one_start(model, threads, NULL, why, sizeof why);
        if (cold[r] < 0 || warm[r] < 0) {
            fprintf(stderr, "tern bench: %s\n", why);
            return 1;
        }
        if (!json)
            fprintf(stderr, "round %d: read once %.3f s, cold start %.3f s, warm start %.3f s\n", r, read_s[r],
                    cold[r], warm[r]);
    }
    qsort(cold, (size_t)rounds, sizeof(double), cmp_double);
    qsort(warm, (size_t)rounds, sizeof(double), cmp_double);
    qsort(read_s, (size_t)rounds, sizeof(double), cmp_double);
    const double c = cold[rounds / 2], w = warm[rounds / 2], rd = read_s[rounds / 2];
    if (json)
        printf("{\"model\": \"%s\", \"rounds\": %d, \"files_bytes\": %llu, \"read_once_s\": %.4f, \"cold_start_s\": "
               "%.4f, \"warm_start_s\": %.4f, \"cold_over_read\": %.3f, \"first_start_s\": %.4f, \"cache_bytes\": "
               "%llu}\n",
               model, rounds, (unsigned long long)bytes, rd, c, w, rd > 0 ? c / rd : 0.0, first,
               (unsigned long long)cache_bytes);
    else
        printf("start to first answer (median of %d): cold %.3f s, warm %.3f s; reading the %.1f MiB of files once "
               "takes %.3f s (cold / read %.2fx)\n",
               rounds, c, w, (double)bytes / (1 << 20), rd, rd > 0 ? c / rd : 0.0);
    return 0;
}
