/* hub_internal.h — what hub_cache.c (the layout) and hub_fetch.c (the network) share. */
#ifndef TERN_HUB_HUB_INTERNAL_H
#define TERN_HUB_HUB_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* One file of a repository. */
typedef struct hub_file {
    char *path; /* in the repository */
    char *etag; /* LFS: SHA-256 of the bytes; otherwise the git blob id (SHA-1) */
    uint64_t size;
    int lfs;
} hub_file;

/* A repository's files at one commit, as the hub's /api/models/ORG/NAME/revision/REV?blobs=true lists them. */
typedef struct hub_listing {
    char commit[48];
    hub_file *f;
    size_t n;
} hub_listing;

/* Reads the hub's JSON answer (len bytes; repo names it in errors). Every entry needs a safe relative path, a size
 * and a well-formed ETag, or the whole listing is refused. */
TERN_MUST_CHECK tern_err *hub_listing_parse(const char *text, size_t len, const char *repo, hub_listing *out);
void hub_listing_free(hub_listing *l);

/* A growable list of paths. */
typedef struct hub_paths {
    char **p;
    size_t n, cap;
} hub_paths;

/* Appends a copy of p: 0, or -1 out of memory. */
int hub_paths_add(hub_paths *l, const char *p);
void hub_paths_free(hub_paths *l);
/* The files of a snapshot folder, relative to it and sorted (symlinks followed, dangling ones left out); *bytes
 * (if not NULL) gains their sizes. 0, or -1. */
int hub_snapshot_files(const char *snap, hub_paths *l, uint64_t *bytes);
/* root/models--ORG--NAME into out. */
void hub_repo_dir(const char *root, const char *repo, char *out, size_t cap);
/* 1 if the path names a GGUF file (by its extension, any case). */
int hub_is_gguf(const char *path);
/* 1 if s is a 40-character lowercase hex commit id. */
int hub_is_commit(const char *s);
/* 1 if other is a part of the same split GGUF as first (…-0000K-of-0000N with the same stem and N). */
int hub_split_siblings(const char *first, const char *other);

#endif
