/* hub_fetch.c — downloads from the Hugging Face hub (or HF_ENDPOINT) into the cache layout of hub.h, with libcurl:
 *   GET /api/models/ORG/NAME/revision/REV?blobs=true   the commit and every file with its size and ETag
 *   GET /ORG/NAME/resolve/COMMIT/PATH                  a file (LFS files redirect to a CDN), ranges for resume
 * Files go to blobs/ETAG.incomplete, are hashed while they arrive (a resumed file's bytes on disk first), and are
 * renamed to blobs/ETAG and linked into the snapshot only when their size and hash match the ETag. Several files
 * transfer at once (curl multi); a cut connection resumes from the bytes already written. */
#include <curl/curl.h>
#include <errno.h>
#include <fnmatch.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/timeutil.h"
#include "hub/hub.h"
#include "hub/hub_internal.h"
#include "hub/sha.h"

void hub_listing_free(hub_listing *l) {
    for (size_t i = 0; i < l->n; i++)
        free(l->f[i].path), free(l->f[i].etag);
    free(l->f);
    memset(l, 0, sizeof *l);
}

static const char *endpoint(void) {
    const char *e = getenv("HF_ENDPOINT");
    return e && *e ? e : "https://huggingface.co";
}

static const char *token(void) {
    const char *t = getenv("HF_TOKEN");
    if (!t || !*t)
        t = getenv("HUGGING_FACE_HUB_TOKEN");
    return t && *t ? t : NULL;
}

static struct curl_slist *auth_headers(void) {
    const char *t = token();
    if (!t)
        return NULL;
    char h[1024];
    snprintf(h, sizeof h, "Authorization: Bearer %s", t);
    return curl_slist_append(NULL, h);
}

/* ---- the file listing ---------------------------------------------------------------------------------------- */

typedef struct body {
    char *p;
    size_t len;
    char error_code[64]; /* the hub's X-Error-Code header */
    char error_msg[256]; /* its X-Error-Message */
} body;

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
    body *b = ud;
    size_t add = size * n;
    if (b->len + add > (64u << 20))
        return 0; /* no listing is this large */
    char *np = realloc(b->p, b->len + add + 1);
    if (!np)
        return 0;
    memcpy(np + b->len, p, add);
    b->p = np;
    b->len += add;
    b->p[b->len] = 0;
    return add;
}

/* Copies header `name`'s value (trimmed) into out when line is that header. */
static void header_value(const char *line, size_t len, const char *name, char *out, size_t cap) {
    size_t n = strlen(name);
    if (len <= n + 1 || strncasecmp(line, name, n) || line[n] != ':')
        return;
    const char *v = line + n + 1, *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    snprintf(out, cap, "%.*s", (int)(end - v), v);
}

static size_t on_listing_header(char *p, size_t size, size_t n, void *ud) {
    body *b = ud;
    header_value(p, size * n, "X-Error-Code", b->error_code, sizeof b->error_code);
    header_value(p, size * n, "X-Error-Message", b->error_msg, sizeof b->error_msg);
    return size * n;
}

/* The URL-escaped form of a path, each segment escaped and the slashes kept. */
static char *escape_path(CURL *c, const char *path) {
    size_t cap = strlen(path) * 3 + 1, len = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    out[0] = 0;
    for (const char *p = path; *p;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        char *seg = curl_easy_escape(c, p, (int)n);
        if (!seg) {
            free(out);
            return NULL;
        }
        len += (size_t)snprintf(out + len, cap - len, "%s%s", seg, slash ? "/" : "");
        curl_free(seg);
        p += n + (slash != NULL);
    }
    return out;
}

static TERN_MUST_CHECK tern_err *listing_error(const hub_ref *ref, long status, const body *b) {
    const char *hint = b->error_msg[0] ? b->error_msg : "";
    if (!strcmp(b->error_code, "RevisionNotFound") || (status == 404 && strcmp(b->error_code, "RepoNotFound") &&
                                                       strcmp(b->error_code, "EntryNotFound") && b->error_code[0]))
        return tern_errf(TERN_ENOTFOUND, "revision '%s' of %s does not exist on %s (%s)", ref->revision, ref->repo,
                         endpoint(), hint);
    if (!strcmp(b->error_code, "GatedRepo") || status == 403)
        return tern_errf(TERN_EINVAL,
                         "%s is gated: accept its licence at %s/%s while logged in, then set HF_TOKEN to a token of "
                         "that account (%s)",
                         ref->repo, endpoint(), ref->repo, hint);
    if (status == 401 || status == 404)
        return tern_errf(TERN_ENOTFOUND,
                         "%s was not found on %s: check the name%s (%s)", ref->repo, endpoint(),
                         token() ? "" : ", or set HF_TOKEN if it is private or gated", hint);
    return tern_errf(TERN_EIO, "%s answered %ld for %s's file list (%s)", endpoint(), status, ref->repo, hint);
}

static TERN_MUST_CHECK tern_err *fetch_listing(const hub_ref *ref, hub_listing *out) {
    memset(out, 0, sizeof *out);
    CURL *c = curl_easy_init();
    if (!c)
        return tern_errf(TERN_ENOMEM, "out of memory starting libcurl");
    char *rev = curl_easy_escape(c, ref->revision, 0);
    char url[2048];
    snprintf(url, sizeof url, "%s/api/models/%s/revision/%s?blobs=true", endpoint(), ref->repo, rev ? rev : "");
    curl_free(rev);
    body b = {0};
    struct curl_slist *h = auth_headers();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "tern/hub");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_listing_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &b);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    tern_err *err = NULL;
    if (rc != CURLE_OK)
        err = tern_errf(TERN_EIO, "could not reach %s for %s's file list: %s (set HF_ENDPOINT for a mirror, or "
                                  "HF_HUB_OFFLINE=1 to use only what is cached)",
                        endpoint(), ref->repo, curl_easy_strerror(rc));
    else if (status != 200)
        err = listing_error(ref, status, &b);
    if (!err)
        err = hub_listing_parse(b.p ? b.p : "", b.len, ref->repo, out);
    free(b.p);
    return err;
}

/* A path the cache can hold: relative, segments neither empty nor "." nor "..", no control characters. */
static int safe_path(const char *p) {
    if (!*p || strlen(p) > 1024)
        return 0;
    for (const char *seg = p;;) {
        const char *end = strchr(seg, '/');
        size_t n = end ? (size_t)(end - seg) : strlen(seg);
        if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
            return 0;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)seg[i] < 0x20 || seg[i] == '\\' || seg[i] == 0x7f)
                return 0;
        if (!end)
            return 1;
        seg = end + 1;
    }
}

tern_err *hub_listing_parse(const char *text, size_t len, const char *repo, hub_listing *out) {
    memset(out, 0, sizeof *out);
    json_t *j = json_loadb(text, len, 0, NULL);
    tern_err *err = NULL;
    const char *sha = json_string_value(json_object_get(j, "sha"));
    const json_t *sib = json_object_get(j, "siblings");
    if (!sha || !hub_is_commit(sha) || !json_is_array(sib)) {
        json_decref(j);
        return tern_errf(TERN_EFORMAT, "%s's file list from %s is not what the hub sends (no commit or no files)",
                         repo, endpoint());
    }
    snprintf(out->commit, sizeof out->commit, "%s", sha);
    out->f = calloc(json_array_size(sib) + 1, sizeof *out->f);
    for (size_t i = 0; out->f && i < json_array_size(sib); i++) {
        const json_t *s = json_array_get(sib, i), *lfs = json_object_get(s, "lfs");
        const char *path = json_string_value(json_object_get(s, "rfilename"));
        const char *etag = lfs ? json_string_value(json_object_get(lfs, "sha256"))
                               : json_string_value(json_object_get(s, "blobId"));
        const json_t *size = lfs ? json_object_get(lfs, "size") : json_object_get(s, "size");
        if (!path || !safe_path(path) || !etag || !json_is_integer(size) || json_integer_value(size) < 0 ||
            strlen(etag) != (lfs ? 64u : 40u) || strspn(etag, "0123456789abcdef") != strlen(etag)) {
            err = tern_errf(TERN_EFORMAT, "%s's file list has an entry tern cannot use (file %zu: %s)", repo, i,
                            path ? path : "no name");
            break;
        }
        hub_file *f = &out->f[out->n++];
        f->path = strdup(path);
        f->etag = strdup(etag);
        f->size = (uint64_t)json_integer_value(size);
        f->lfs = lfs != NULL;
        if (!f->path || !f->etag)
            err = tern_errf(TERN_ENOMEM, "out of memory reading the file list");
    }
    json_decref(j);
    if (!err && !out->f)
        err = tern_errf(TERN_ENOMEM, "out of memory reading the file list");
    if (err)
        hub_listing_free(out);
    return err;
}

/* ---- which files ------------------------------------------------------------------------------------------------ */

static int matches_any(const char *const *globs, const char *path) {
    for (; globs && *globs; globs++)
        if (!fnmatch(*globs, path, 0))
            return 1;
    return 0;
}

/* Marks the files to fetch in want[]; an error when a tag names nothing. */
static TERN_MUST_CHECK tern_err *select_files(const hub_ref *ref, const hub_listing *l, const hub_get_options *opt, char *want) {
    const char **paths = malloc((l->n + 1) * sizeof *paths);
    if (!paths)
        return tern_errf(TERN_ENOMEM, "out of memory");
    int has_config = 0, has_gguf = 0;
    for (size_t i = 0; i < l->n; i++) {
        paths[i] = l->f[i].path;
        has_config |= !strcmp(paths[i], "config.json");
        has_gguf |= hub_is_gguf(paths[i]);
    }
    tern_err *err = NULL;
    if (opt->include || opt->exclude) {
        for (size_t i = 0; i < l->n; i++)
            want[i] = (!opt->include || matches_any(opt->include, paths[i])) && !matches_any(opt->exclude, paths[i]);
    } else if (ref->tag[0] || (has_gguf && !has_config)) {
        int g = hub_pick_gguf(paths, l->n, ref->tag);
        if (g < 0) {
            char avail[1024] = "";
            size_t len = 0;
            for (size_t i = 0; i < l->n && len < sizeof avail - 1; i++)
                if (hub_is_gguf(paths[i]))
                    len += (size_t)snprintf(avail + len, sizeof avail - len, "%s%s", len ? ", " : "", paths[i]);
            err = tern_errf(TERN_ENOTFOUND, "%s has no GGUF file for '%s'; it has: %s", ref->repo,
                            ref->tag[0] ? ref->tag : "Q4_K_M", avail[0] ? avail : "none");
        } else {
            for (size_t i = 0; i < l->n; i++)
                want[i] = (size_t)g == i || hub_split_siblings(paths[g], paths[i]);
            int m = hub_pick_mmproj(paths, l->n, ref->tag);
            if (m >= 0)
                want[m] = 1;
        }
    } else {
        static const char *const tern_reads[] = {"*.json", "*.safetensors", "*.jinja", "*.txt", "tokenizer.model",
                                                 NULL};
        for (size_t i = 0; i < l->n; i++)
            want[i] = matches_any(tern_reads, paths[i]) && !strchr(paths[i], '/');
    }
    free(paths);
    return err;
}

/* ---- the cache ------------------------------------------------------------------------------------------------ */

/* The folders a file at path goes in (mkdir -p of its parent). */
static TERN_MUST_CHECK tern_err *make_parent(const char *path) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    return slash ? tern_mkdir_p(dir) : NULL;
}

/* snapshots/COMMIT/PATH -> ../../blobs/ETAG (one more ../ per folder in PATH). */
static TERN_MUST_CHECK tern_err *link_file(const char *repo_dir, const char *commit, const hub_file *f) {
    char link[PATH_MAX], target[PATH_MAX];
    snprintf(link, sizeof link, "%s/snapshots/%s/%s", repo_dir, commit, f->path);
    size_t len = 0;
    for (const char *p = f->path; *p; p++)
        if (*p == '/')
            len += (size_t)snprintf(target + len, sizeof target - len, "../");
    snprintf(target + len, sizeof target - len, "../../blobs/%s", f->etag);
    TERN_TRY(make_parent(link));
    unlink(link);
    if (symlink(target, link))
        return tern_errf(TERN_EIO, "cannot link %s: %s", link, strerror(errno));
    return NULL;
}

static TERN_MUST_CHECK tern_err *write_ref(const char *repo_dir, const char *revision, const char *commit) {
    if (hub_is_commit(revision))
        return NULL;
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s/refs/%s", repo_dir, revision);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    TERN_TRY(make_parent(path));
    FILE *f = fopen(tmp, "w");
    int ok = f && fputs(commit, f) >= 0;
    ok = f && !fclose(f) && ok;
    if (!ok || rename(tmp, path)) {
        unlink(tmp);
        return tern_errf(TERN_EIO, "cannot write %s: %s", path, strerror(errno));
    }
    return NULL;
}

/* ---- transfers ----------------------------------------------------------------------------------------------- */

typedef struct transfer {
    const hub_file *f;
    CURL *c;
    FILE *out;
    char part[PATH_MAX], blob[PATH_MAX];
    hub_sha sha;
    uint64_t have;      /* bytes in the .incomplete file */
    uint64_t start;     /* where this attempt started */
    int tries, checked; /* checked: the first byte's response code was looked at */
    int write_errno;
    char etag_header[128];
    tern_err *err;
} transfer;

typedef struct progress {
    uint64_t total, done_bytes;
    int files, files_done, tty;
    double t0, last;
} progress;

static void hash_start(transfer *t) {
    hub_sha_init(&t->sha, !t->f->lfs);
    if (!t->f->lfs) { /* a git blob id hashes a header first */
        char head[64];
        int n = snprintf(head, sizeof head, "blob %llu", (unsigned long long)t->f->size);
        hub_sha_feed(&t->sha, head, (size_t)n + 1);
    }
}

static size_t on_data(char *p, size_t size, size_t n, void *ud) {
    transfer *t = ud;
    size_t len = size * n;
    if (!t->checked) {
        t->checked = 1;
        long status = 0;
        curl_easy_getinfo(t->c, CURLINFO_RESPONSE_CODE, &status);
        if (status == 200 && t->have > 0) { /* the server ignored the range: start over */
            if (ftruncate(fileno(t->out), 0) || fseek(t->out, 0, SEEK_SET)) {
                t->write_errno = errno;
                return 0;
            }
            t->have = t->start = 0;
            hash_start(t);
        } else if (status != 200 && status != 206)
            return len; /* an error page: the response code decides after */
    }
    long status = 0;
    curl_easy_getinfo(t->c, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200 && status != 206)
        return len;
    if (t->have + len > t->f->size) {
        t->write_errno = EOVERFLOW;
        return 0;
    }
    if (fwrite(p, 1, len, t->out) != len) {
        t->write_errno = errno ? errno : EIO;
        return 0;
    }
    hub_sha_feed(&t->sha, p, len);
    t->have += len;
    return len;
}

static size_t on_file_header(char *p, size_t size, size_t n, void *ud) {
    transfer *t = ud;
    char v[128] = "";
    header_value(p, size * n, "X-Linked-Etag", v, sizeof v);
    if (!v[0] && !t->etag_header[0])
        header_value(p, size * n, "ETag", v, sizeof v);
    if (v[0]) { /* W/"abc" -> abc */
        const char *s = v;
        if (!strncmp(s, "W/", 2))
            s += 2;
        size_t len = strlen(s);
        if (len >= 2 && s[0] == '"' && s[len - 1] == '"')
            s++, len -= 2;
        snprintf(t->etag_header, sizeof t->etag_header, "%.*s", (int)len, s);
    }
    return size * n;
}

static void show_progress(progress *pg, const transfer *ts, size_t nts, int force) {
    if (!pg->tty)
        return;
    double now = tern_now_s();
    if (!force && now - pg->last < 0.2)
        return;
    pg->last = now;
    uint64_t got = pg->done_bytes;
    for (size_t i = 0; i < nts; i++)
        if (ts[i].c)
            got += ts[i].have;
    double rate = now > pg->t0 ? (double)got / (now - pg->t0) : 0;
    int width = 30, fill = pg->total ? (int)((double)width * (double)got / (double)pg->total) : width;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '-';
    bar[width] = 0;
    fprintf(stderr, "\r[%s] %7.1f / %.1f MB  %6.1f MB/s  %d/%d files ", bar, (double)got / 1e6, (double)pg->total / 1e6,
            rate / 1e6, pg->files_done, pg->files);
}

/* Opens t's .incomplete file and hashes what it holds; sets the next range. */
static TERN_MUST_CHECK tern_err *open_part(transfer *t) {
    t->out = fopen(t->part, "ab+");
    if (!t->out)
        return tern_errf(TERN_EIO, "cannot write %s: %s", t->part, strerror(errno));
    hash_start(t);
    t->have = 0;
    if (fseek(t->out, 0, SEEK_END) == 0) {
        long size = ftell(t->out);
        if (size > 0 && (uint64_t)size <= t->f->size) {
            rewind(t->out);
            char buf[1 << 16];
            size_t got;
            while ((got = fread(buf, 1, sizeof buf, t->out)) > 0) {
                hub_sha_feed(&t->sha, buf, got);
                t->have += got;
            }
        } else if (size > 0 && ftruncate(fileno(t->out), 0)) {
            return tern_errf(TERN_EIO, "cannot truncate %s: %s", t->part, strerror(errno));
        }
    }
    fseek(t->out, 0, SEEK_END);
    t->start = t->have;
    return NULL;
}

static TERN_MUST_CHECK tern_err *start_transfer(CURLM *m, transfer *t, const char *repo, const char *commit,
                                struct curl_slist *headers) {
    tern_err *err = open_part(t);
    if (err)
        return err;
    t->checked = 0;
    t->write_errno = 0;
    t->etag_header[0] = 0;
    if (t->have == t->f->size && t->f->size > 0)
        return NULL; /* already whole: finish() checks it */
    if (!(t->c = curl_easy_init()))
        return tern_errf(TERN_ENOMEM, "out of memory starting a transfer");
    char *path = escape_path(t->c, t->f->path);
    char url[4096], range[64];
    snprintf(url, sizeof url, "%s/%s/resolve/%s/%s", endpoint(), repo, commit, path ? path : "");
    free(path);
    curl_easy_setopt(t->c, CURLOPT_URL, url);
    curl_easy_setopt(t->c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(t->c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(t->c, CURLOPT_USERAGENT, "tern/hub");
    curl_easy_setopt(t->c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(t->c, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(t->c, CURLOPT_HEADERFUNCTION, on_file_header);
    curl_easy_setopt(t->c, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(t->c, CURLOPT_PRIVATE, t);
    curl_easy_setopt(t->c, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(t->c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(t->c, CURLOPT_LOW_SPEED_TIME, 60L);
    if (t->have > 0) {
        snprintf(range, sizeof range, "%llu-", (unsigned long long)t->have);
        curl_easy_setopt(t->c, CURLOPT_RANGE, range);
    }
    curl_multi_add_handle(m, t->c);
    return NULL;
}

/* After a transfer: whole and matching → blobs/ETAG; cut → 1 (try again); failed → t->err. Returns 0 when t is
 * done (well or not). */
static int finish(transfer *t, CURLcode rc, const char *root_hint) {
    long status = 0;
    if (t->c)
        curl_easy_getinfo(t->c, CURLINFO_RESPONSE_CODE, &status);
    int ok_status = !t->c || status == 200 || status == 206 || (status == 416 && t->have == t->f->size);
    if (t->out && fflush(t->out) && !t->write_errno)
        t->write_errno = errno;
    if (t->out)
        fclose(t->out);
    t->out = NULL;
    if (t->write_errno == ENOSPC || t->write_errno == EDQUOT || (t->write_errno && t->write_errno != EOVERFLOW)) {
        t->err = tern_errf(TERN_EIO, "writing %s: %s (the cache is %s: free some space there, or point HF_HOME at "
                                     "a larger disk; the download resumes where it stopped)",
                           t->part, strerror(t->write_errno), root_hint);
        return 0;
    }
    if (rc != CURLE_OK || !ok_status || t->have < t->f->size) {
        int transient = (rc != CURLE_OK && rc != CURLE_WRITE_ERROR) || status >= 500 || status == 429 ||
                        (ok_status && t->have < t->f->size);
        if (transient && t->tries-- > 0)
            return 1;
        if (rc != CURLE_OK && rc != CURLE_WRITE_ERROR)
            t->err = tern_errf(TERN_EIO, "downloading %s failed: %s (%llu of %llu bytes are kept; run again to "
                                         "resume)",
                               t->f->path, curl_easy_strerror(rc), (unsigned long long)t->have,
                               (unsigned long long)t->f->size);
        else if (!ok_status)
            t->err = tern_errf(status == 404 ? TERN_ENOTFOUND : TERN_EIO, "the hub answered %ld for %s", status,
                               t->f->path);
        else if (t->write_errno == EOVERFLOW)
            t->err = tern_errf(TERN_EFORMAT, "%s is larger than the %llu bytes the file list gives", t->f->path,
                               (unsigned long long)t->f->size);
        else
            t->err = tern_errf(TERN_EIO, "%s ended after %llu of %llu bytes", t->f->path, (unsigned long long)t->have,
                               (unsigned long long)t->f->size);
        return 0;
    }
    char hex[65];
    hub_sha_hex(&t->sha, hex);
    if (t->etag_header[0] && strlen(t->etag_header) == strlen(t->f->etag) && strcmp(t->etag_header, t->f->etag)) {
        unlink(t->part);
        t->err = tern_errf(TERN_EFORMAT, "%s: the server's ETag %s is not the file list's %s (the repository "
                                         "changed meanwhile? run again)",
                           t->f->path, t->etag_header, t->f->etag);
        return 0;
    }
    if (strcmp(hex, t->f->etag)) {
        unlink(t->part); /* a retry starts from the first byte */
        t->err = tern_errf(TERN_EFORMAT, "checksum mismatch for %s: the hub says %s %s, the bytes received give %s; "
                                         "the partial file was deleted, run again (a proxy or mirror may be changing "
                                         "files)",
                           t->f->path, t->f->lfs ? "SHA-256" : "git blob id", t->f->etag, hex);
        return 0;
    }
    if (rename(t->part, t->blob))
        t->err = tern_errf(TERN_EIO, "cannot rename %s: %s", t->part, strerror(errno));
    return 0;
}

/* A transfer that ended: its error, or counted as done. */
static TERN_MUST_CHECK tern_err *file_done(transfer *t, progress *pg) {
    tern_err *err = t->err;
    t->err = NULL;
    if (err)
        return err;
    pg->files_done++;
    pg->done_bytes += t->f->size;
    if (!pg->tty)
        fprintf(stderr, "tern get: %s (%.1f MB) ok\n", t->f->path, (double)t->f->size / 1e6);
    return NULL;
}

/* Starts (or resumes) t; a file whose .incomplete already holds every byte is checked and finished at once. */
static TERN_MUST_CHECK tern_err *launch(CURLM *m, transfer *t, const char *repo, const char *commit, struct curl_slist *headers,
                        const char *root, progress *pg) {
    tern_err *err = start_transfer(m, t, repo, commit, headers);
    if (err || t->c)
        return err;
    finish(t, CURLE_OK, root);
    return file_done(t, pg);
}

static TERN_MUST_CHECK tern_err *download(const char *root, const char *repo_dir, const hub_ref *ref, const hub_listing *l,
                          const char *want, const hub_get_options *opt) {
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++)
        n += want[i] != 0;
    transfer *ts = calloc(n ? n : 1, sizeof *ts);
    if (!ts)
        return tern_errf(TERN_ENOMEM, "out of memory");
    progress pg = {.tty = opt->progress, .t0 = tern_now_s()};
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (!want[i])
            continue;
        transfer *t = &ts[k++];
        t->f = &l->f[i];
        t->tries = opt->retries;
        snprintf(t->blob, sizeof t->blob, "%s/blobs/%s", repo_dir, t->f->etag);
        snprintf(t->part, sizeof t->part, "%s.incomplete", t->blob);
        pg.files++;
        pg.total += t->f->size;
    }
    tern_err *err = NULL;
    char blobs[PATH_MAX];
    snprintf(blobs, sizeof blobs, "%s/blobs", repo_dir);
    tern_err *mk = tern_mkdir_p(blobs);
    if (mk) {
        err = tern_errf(TERN_EIO, "%s (set HF_HOME to a writable place)", tern_err_msg(mk));
        tern_err_free(mk);
    }
    CURLM *m = err ? NULL : curl_multi_init();
    if (!err && !m)
        err = tern_errf(TERN_ENOMEM, "out of memory starting libcurl");
    struct curl_slist *headers = auth_headers();
    size_t next = 0;
    int running = 0, active = 0;
    while (!err && (next < n || active > 0)) {
        while (!err && next < n && active < opt->parallel) {
            transfer *t = &ts[next++];
            struct stat st;
            if (!stat(t->blob, &st) && (uint64_t)st.st_size == t->f->size) { /* fetched before */
                pg.files_done++;
                pg.done_bytes += t->f->size;
                continue;
            }
            if ((err = launch(m, t, ref->repo, l->commit, headers, root, &pg)))
                break;
            active += t->c != NULL;
        }
        if (err)
            break;
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while (!err && (msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            transfer *t = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
            CURLcode rc = msg->data.result;
            int again = finish(t, rc, root);
            curl_multi_remove_handle(m, t->c);
            curl_easy_cleanup(t->c);
            t->c = NULL;
            active--;
            if (again) {
                if (!pg.tty)
                    fprintf(stderr, "tern get: %s was cut off at %llu bytes; resuming\n", t->f->path,
                            (unsigned long long)t->have);
                if ((err = launch(m, t, ref->repo, l->commit, headers, root, &pg)))
                    break;
                active += t->c != NULL;
                continue;
            }
            if ((err = file_done(t, &pg)))
                break;
        }
        show_progress(&pg, ts, n, 0);
        if (!err && active > 0)
            curl_multi_poll(m, NULL, 0, 200, NULL);
    }
    show_progress(&pg, ts, n, 1);
    if (pg.tty)
        fputc('\n', stderr);
    for (size_t i = 0; i < n; i++) {
        if (ts[i].c) {
            curl_multi_remove_handle(m, ts[i].c);
            curl_easy_cleanup(ts[i].c);
        }
        if (ts[i].out)
            fclose(ts[i].out);
        tern_err_free(ts[i].err);
    }
    curl_slist_free_all(headers);
    if (m)
        curl_multi_cleanup(m);
    free(ts);
    return err;
}

tern_err *hub_get(const char *root, const hub_ref *ref, const hub_get_options *options, hub_model *out) {
    memset(out, 0, sizeof *out);
    hub_get_options opt = options ? *options : (hub_get_options){0};
    if (opt.parallel <= 0)
        opt.parallel = 4;
    if (opt.retries == 0)
        opt.retries = 5;
    else if (opt.retries < 0)
        opt.retries = 0;
    if (hub_offline()) {
        tern_err *e = hub_find(root, ref, out);
        if (!e)
            return NULL;
        tern_err_free(e);
        return tern_errf(TERN_ENOTFOUND, "HF_HUB_OFFLINE is set and %s%s%s%s%s is not in the cache (%s): unset it "
                                         "to download",
                         ref->repo, strcmp(ref->revision, "main") ? "@" : "",
                         strcmp(ref->revision, "main") ? ref->revision : "", ref->tag[0] ? ":" : "", ref->tag, root);
    }
    static int curl_ready;
    if (!curl_ready) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT))
            return tern_errf(TERN_EIO, "libcurl could not start");
        curl_ready = 1;
    }
    hub_listing l;
    tern_err *err = fetch_listing(ref, &l);
    if (err)
        return err;
    char *want = calloc(l.n + 1, 1);
    if (!want) {
        hub_listing_free(&l);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    err = select_files(ref, &l, &opt, want);
    size_t n_want = 0;
    for (size_t i = 0; i < l.n; i++)
        n_want += want[i] != 0;
    if (!err && !n_want)
        err = tern_errf(TERN_ENOTFOUND, "no file of %s matches what was asked (--include / --exclude)", ref->repo);
    char repo_dir[PATH_MAX];
    hub_repo_dir(root, ref->repo, repo_dir, sizeof repo_dir);
    if (!err)
        err = download(root, repo_dir, ref, &l, want, &opt);
    for (size_t i = 0; !err && i < l.n; i++)
        if (want[i])
            err = link_file(repo_dir, l.commit, &l.f[i]);
    if (!err)
        err = write_ref(repo_dir, ref->revision, l.commit);
    char l_commit[48];
    snprintf(l_commit, sizeof l_commit, "%s", l.commit);
    free(want);
    hub_listing_free(&l);
    if (err)
        return err;
    if (opt.include || opt.exclude) { /* the snapshot folder, whatever was fetched */
        char snap[PATH_MAX];
        snprintf(snap, sizeof snap, "%s/snapshots/%s", repo_dir, l_commit);
        out->path = strdup(snap);
        return out->path ? NULL : tern_errf(TERN_ENOMEM, "out of memory");
    }
    return hub_find(root, ref, out);
}
