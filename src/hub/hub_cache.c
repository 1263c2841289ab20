/* hub_cache.c — the Hugging Face cache layout without the network (hub.h): model names, the cache root, finding a
 * fetched model, listing and removing models, and which GGUF file a tag names. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub/hub.h"
#include "hub/hub_internal.h"

static int name_char(int c) { return isalnum(c) || c == '-' || c == '_' || c == '.'; }

int hub_ref_parse(const char *s, hub_ref *ref) {
    memset(ref, 0, sizeof *ref);
    const char *slash = strchr(s, '/');
    if (!slash || slash == s)
        return 0;
    size_t i = 0;
    int slashes = 0;
    for (; s[i] && s[i] != '@' && s[i] != ':'; i++) {
        if (s[i] == '/')
            slashes++;
        else if (!name_char((unsigned char)s[i]))
            return 0;
    }
    size_t repo_len = i;
    if (slashes != 1 || repo_len >= sizeof ref->repo || s[repo_len - 1] == '/' || s[0] == '.' || slash[1] == '.')
        return 0;
    memcpy(ref->repo, s, repo_len);
    const char *rest = s + repo_len;
    snprintf(ref->revision, sizeof ref->revision, "main");
    if (*rest == '@') {
        const char *end = strchr(rest + 1, ':');
        size_t n = end ? (size_t)(end - rest - 1) : strlen(rest + 1);
        if (n == 0 || n >= sizeof ref->revision)
            return 0;
        memcpy(ref->revision, rest + 1, n);
        ref->revision[n] = 0;
        if (strstr(ref->revision, "..") || ref->revision[0] == '/')
            return 0;
        rest += 1 + n;
    }
    if (*rest == ':') {
        size_t n = strlen(rest + 1);
        if (n == 0 || n >= sizeof ref->tag)
            return 0;
        for (size_t k = 0; k < n; k++)
            if (!name_char((unsigned char)rest[1 + k]))
                return 0;
        memcpy(ref->tag, rest + 1, n);
        rest += 1 + n;
    }
    return *rest == 0;
}

char *hub_cache_root(void) {
    const char *v = getenv("HF_HUB_CACHE");
    if (v && *v)
        return strdup(v);
    char buf[PATH_MAX];
    if ((v = getenv("HF_HOME")) && *v)
        snprintf(buf, sizeof buf, "%s/hub", v);
    else if ((v = getenv("XDG_CACHE_HOME")) && *v)
        snprintf(buf, sizeof buf, "%s/huggingface/hub", v);
    else if ((v = getenv("HOME")) && *v)
        snprintf(buf, sizeof buf, "%s/.cache/huggingface/hub", v);
    else
        return NULL;
    return strdup(buf);
}

int hub_offline(void) {
    const char *v = getenv("HF_HUB_OFFLINE");
    return v && (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"));
}

void hub_model_free(hub_model *m) {
    if (!m)
        return;
    free(m->path);
    free(m->mmproj);
    m->path = m->mmproj = NULL;
}

void hub_repo_dir(const char *root, const char *repo, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s/models--", root);
    for (const char *p = repo; *p && n + 3 < (int)cap; p++) {
        if (*p == '/')
            out[n++] = '-', out[n++] = '-';
        else
            out[n++] = *p;
    }
    out[n] = 0;
}

int hub_is_commit(const char *s) {
    size_t n = strlen(s);
    if (n != 40)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
            return 0;
    return 1;
}

/* ---- which GGUF file ------------------------------------------------------------------------------------ */

static int word_char(int c) { return isalnum(c) || c == '_'; }

/* 1 when word occurs in s (case-insensitive) with no letter, digit or '_' on either side. */
static int has_word(const char *s, const char *word) {
    size_t n = strlen(word);
    for (const char *p = s; *p; p++)
        if (!strncasecmp(p, word, n) && (p == s || !word_char((unsigned char)p[-1])) &&
            !word_char((unsigned char)p[n]))
            return 1;
    return 0;
}

int hub_is_gguf(const char *p) {
    size_t n = strlen(p);
    return n > 5 && !strcasecmp(p + n - 5, ".gguf");
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int is_mmproj(const char *p) { return hub_is_gguf(p) && strcasestr(base_name(p), "mmproj") != NULL; }

/* A split file's part number (1 for "-00001-of-00003"), 0 when not split. */
static int split_part(const char *p, int *of) {
    const char *s = strstr(p, "-of-");
    if (!s || s - p < 6)
        return 0;
    int part = atoi(s - 5);
    *of = atoi(s + 4);
    return part;
}

int hub_pick_gguf(const char *const *paths, size_t n, const char *tag) {
    const char *want[2] = {tag && *tag ? tag : "Q4_K_M", NULL};
    for (int round = 0; round < 2; round++) {
        if (round == 1 && tag && *tag)
            break; /* a named tag that is not there is an error, not a different file */
        for (size_t i = 0; i < n; i++) {
            int of = 0, part = split_part(paths[i], &of);
            if (!hub_is_gguf(paths[i]) || is_mmproj(paths[i]) || (part && part != 1))
                continue;
            if (round == 1 || has_word(paths[i], want[0]))
                return (int)i;
        }
    }
    return -1;
}

int hub_pick_mmproj(const char *const *paths, size_t n, const char *tag) {
    const char *prefs[] = {tag && *tag ? tag : NULL, "F16", "BF16"};
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; prefs[k] && i < n; i++)
            if (is_mmproj(paths[i]) && has_word(base_name(paths[i]), prefs[k]))
                return (int)i;
    for (size_t i = 0; i < n; i++)
        if (is_mmproj(paths[i]))
            return (int)i;
    return -1;
}

int hub_split_siblings(const char *first, const char *other) {
    int of_a = 0, of_b = 0;
    if (!split_part(first, &of_a) || !split_part(other, &of_b) || of_a != of_b)
        return 0;
    const char *a = strstr(first, "-of-"), *b = strstr(other, "-of-");
    return a - first == b - other && !strncmp(first, other, (size_t)(a - first) - 5);
}

/* ---- a snapshot's files ---------------------------------------------------------------------------------- */

void hub_paths_free(hub_paths *l) {
    for (size_t i = 0; i < l->n; i++)
        free(l->p[i]);
    free(l->p);
    l->p = NULL;
    l->n = l->cap = 0;
}

int hub_paths_add(hub_paths *l, const char *p) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **np = realloc(l->p, cap * sizeof *np);
        if (!np)
            return -1;
        l->p = np, l->cap = cap;
    }
    if (!(l->p[l->n] = strdup(p)))
        return -1;
    l->n++;
    return 0;
}

/* Adds every file under dir/rel (following the snapshot's symlinks; a dangling one is skipped) to l, as paths
 * relative to dir; *bytes sums their sizes. */
static int walk(const char *dir, const char *rel, hub_paths *l, uint64_t *bytes) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s%s%s", dir, *rel ? "/" : "", rel);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *de;
    int rc = 0;
    while (!rc && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char sub[PATH_MAX], full[PATH_MAX];
        snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", de->d_name);
        snprintf(full, sizeof full, "%s/%s", dir, sub);
        struct stat st;
        if (stat(full, &st))
            continue;
        if (S_ISDIR(st.st_mode))
            rc = walk(dir, sub, l, bytes);
        else if (S_ISREG(st.st_mode)) {
            rc = hub_paths_add(l, sub);
            if (bytes)
                *bytes += (uint64_t)st.st_size;
        }
    }
    closedir(d);
    return rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int hub_snapshot_files(const char *snap, hub_paths *l, uint64_t *bytes) {
    if (walk(snap, "", l, bytes))
        return -1;
    if (l->n) /* an empty snapshot has no array at all */
        qsort(l->p, l->n, sizeof *l->p, cmp_str);
    return 0;
}

/* The commit ref's revision points to in repo_dir, into commit (41 bytes); 0, or -1 when unknown. */
static int read_ref(const char *repo_dir, const char *revision, char *commit) {
    char path[PATH_MAX];
    if (hub_is_commit(revision)) {
        snprintf(path, sizeof path, "%s/snapshots/%s", repo_dir, revision);
        struct stat st;
        if (stat(path, &st))
            return -1;
        snprintf(commit, 41, "%s", revision);
        return 0;
    }
    snprintf(path, sizeof path, "%s/refs/%s", repo_dir, revision);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(commit, 1, 40, f);
    fclose(f);
    commit[n] = 0;
    return hub_is_commit(commit) ? 0 : -1;
}

/* Fills out from a snapshot's files: the GGUF file the tag names (and its mmproj), or the folder. Returns 0, or -1
 * when what ref names is not all there. */
static int model_in_snapshot(const char *snap, const hub_paths *files, const hub_ref *ref, hub_model *out) {
    const char *const *p = (const char *const *)files->p;
    int has_config = 0, n_gguf = 0;
    for (size_t i = 0; i < files->n; i++) {
        has_config |= !strcmp(p[i], "config.json");
        n_gguf += hub_is_gguf(p[i]) && !is_mmproj(p[i]);
    }
    char path[PATH_MAX];
    if (ref->tag[0] || (!has_config && n_gguf)) {
        int g = hub_pick_gguf(p, files->n, ref->tag);
        if (g < 0)
            return -1;
        int of = 0;
        if (split_part(p[g], &of)) { /* every part must be there */
            int parts = 0;
            for (size_t i = 0; i < files->n; i++)
                parts += hub_split_siblings(p[g], p[i]);
            if (parts != of)
                return -1;
        }
        snprintf(path, sizeof path, "%s/%s", snap, p[g]);
        out->path = strdup(path);
        int m = hub_pick_mmproj(p, files->n, ref->tag);
        if (m >= 0) {
            snprintf(path, sizeof path, "%s/%s", snap, p[m]);
            out->mmproj = strdup(path);
        }
        return out->path && (m < 0 || out->mmproj) ? 0 : -1;
    }
    if (!has_config)
        return -1;
    out->path = strdup(snap);
    return out->path ? 0 : -1;
}

tern_err *hub_find(const char *root, const hub_ref *ref, hub_model *out) {
    memset(out, 0, sizeof *out);
    char repo_dir[PATH_MAX], commit[48], snap[PATH_MAX];
    hub_repo_dir(root, ref->repo, repo_dir, sizeof repo_dir);
    if (read_ref(repo_dir, ref->revision, commit))
        return tern_errf(TERN_ENOTFOUND, "%s@%s is not in the cache (%s)", ref->repo, ref->revision, root);
    snprintf(snap, sizeof snap, "%s/snapshots/%s", repo_dir, commit);
    hub_paths files = {0};
    int rc = hub_snapshot_files(snap, &files, NULL) ? -1 : model_in_snapshot(snap, &files, ref, out);
    hub_paths_free(&files);
    if (rc) {
        hub_model_free(out);
        return tern_errf(TERN_ENOTFOUND, "%s@%s%s%s is not complete in the cache (%s)", ref->repo, ref->revision,
                         ref->tag[0] ? ":" : "", ref->tag, snap);
    }
    return NULL;
}

/* ---- listing and removing ---------------------------------------------------------------------------------- */

/* "MLX 4-bit", "safetensors bf16", ... from a snapshot's config.json. */
static void describe_config(const char *snap, char *out, size_t cap) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/config.json", snap);
    json_t *c = json_load_file(path, 0, NULL);
    const json_t *q = json_object_get(c, "quantization");
    if (!q)
        q = json_object_get(c, "quantization_config");
    const json_t *bits = json_object_get(q, "bits");
    const char *dtype = json_string_value(json_object_get(c, "torch_dtype"));
    if (!dtype)
        dtype = json_string_value(json_object_get(json_object_get(c, "text_config"), "torch_dtype"));
    if (!dtype)
        dtype = json_string_value(json_object_get(c, "dtype"));
    const char *arch = json_string_value(json_object_get(c, "model_type"));
    if (json_is_integer(bits))
        snprintf(out, cap, "%s MLX %d-bit", arch ? arch : "safetensors", (int)json_integer_value(bits));
    else
        snprintf(out, cap, "%s safetensors%s%s", arch ? arch : "", dtype ? " " : "", dtype ? dtype : "");
    json_decref(c);
}

static void describe_gguf(const hub_paths *files, char *out, size_t cap) {
    size_t len = (size_t)snprintf(out, cap, "GGUF");
    int mmproj = 0;
    for (size_t i = 0; i < files->n && len < cap; i++) {
        int of = 0, part = split_part(files->p[i], &of);
        mmproj |= is_mmproj(files->p[i]);
        if (!hub_is_gguf(files->p[i]) || is_mmproj(files->p[i]) || (part && part != 1))
            continue;
        char name[128];
        snprintf(name, sizeof name, "%s", base_name(files->p[i]));
        name[strlen(name) - 5] = 0;
        len += (size_t)snprintf(out + len, cap - len, "%s%s", len == 4 ? " " : ", ", name);
    }
    if (mmproj && len < cap)
        snprintf(out + len, cap - len, " + mmproj");
}

static int newest_snapshot(const char *repo_dir, char *commit) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/snapshots", repo_dir);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *de;
    time_t best = 0;
    commit[0] = 0;
    while ((de = readdir(d))) {
        char sub[PATH_MAX];
        struct stat st;
        snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
        if (de->d_name[0] == '.' || stat(sub, &st) || !S_ISDIR(st.st_mode) || strlen(de->d_name) > 40)
            continue;
        if (!commit[0] || st.st_mtime > best) {
            best = st.st_mtime;
            snprintf(commit, 41, "%s", de->d_name);
        }
    }
    closedir(d);
    return commit[0] ? 0 : -1;
}

/* The name of a ref pointing at commit ("main" first), else the commit's first 12 characters. */
static void ref_name(const char *repo_dir, const char *commit, char *out, size_t cap) {
    snprintf(out, cap, "%.12s", commit);
    char c[48];
    if (!read_ref(repo_dir, "main", c) && !strcmp(c, commit)) {
        snprintf(out, cap, "main");
        return;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/refs", repo_dir);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.' && !read_ref(repo_dir, de->d_name, c) && !strcmp(c, commit)) {
            snprintf(out, cap, "%s", de->d_name);
            break;
        }
    closedir(d);
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const hub_entry *)a)->repo, ((const hub_entry *)b)->repo);
}

tern_err *hub_list(const char *root, hub_entry **out, size_t *n) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(root);
    if (!d)
        return errno == ENOENT ? NULL : tern_errf(TERN_EIO, "cannot read the cache %s: %s", root, strerror(errno));
    struct dirent *de;
    size_t cap = 0;
    tern_err *err = NULL;
    while (!err && (de = readdir(d))) {
        if (strncmp(de->d_name, "models--", 8))
            continue;
        char repo_dir[PATH_MAX], snap[PATH_MAX];
        snprintf(repo_dir, sizeof repo_dir, "%s/%s", root, de->d_name);
        hub_entry e;
        memset(&e, 0, sizeof e);
        const char *name = de->d_name + 8, *sep = strstr(name, "--");
        if (!sep)
            continue;
        snprintf(e.repo, sizeof e.repo, "%.*s/%s", (int)(sep - name), name, sep + 2);
        if (newest_snapshot(repo_dir, e.commit))
            continue;
        ref_name(repo_dir, e.commit, e.revision, sizeof e.revision);
        snprintf(snap, sizeof snap, "%s/snapshots/%s", repo_dir, e.commit);
        hub_paths files = {0};
        if (hub_snapshot_files(snap, &files, &e.bytes)) {
            hub_paths_free(&files);
            err = tern_errf(TERN_ENOMEM, "out of memory listing %s", snap);
            break;
        }
        e.files = (int)files.n;
        int gguf = 0;
        for (size_t i = 0; i < files.n; i++)
            gguf |= hub_is_gguf(files.p[i]);
        if (gguf)
            describe_gguf(&files, e.format, sizeof e.format);
        else
            describe_config(snap, e.format, sizeof e.format);
        hub_paths_free(&files);
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            hub_entry *ne = realloc(*out, cap * sizeof *ne);
            if (!ne) {
                err = tern_errf(TERN_ENOMEM, "out of memory listing the cache");
                break;
            }
            *out = ne;
        }
        (*out)[(*n)++] = e;
    }
    closedir(d);
    if (err) {
        free(*out);
        *out = NULL;
        *n = 0;
        return err;
    }
    if (*n)
        qsort(*out, *n, sizeof **out, cmp_entry);
    return NULL;
}

static int remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st))
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return unlink(path);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char sub[PATH_MAX];
        snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
        rc |= remove_tree(sub);
    }
    closedir(d);
    return rc | rmdir(path);
}

tern_err *hub_remove(const char *root, const char *repo) {
    hub_ref ref;
    if (!hub_ref_parse(repo, &ref) || strcmp(ref.repo, repo))
        return tern_errf(TERN_EINVAL, "'%s' is not a model name (ORG/NAME)", repo);
    char dir[PATH_MAX];
    hub_repo_dir(root, repo, dir, sizeof dir);
    struct stat st;
    if (stat(dir, &st))
        return tern_errf(TERN_ENOTFOUND, "%s is not in the cache (%s); `tern ls` lists what is", repo, root);
    if (remove_tree(dir))
        return tern_errf(TERN_EIO, "could not remove all of %s: %s", dir, strerror(errno));
    return NULL;
}
