/* hub.h — models by name: the Hugging Face hub's download protocol (libcurl) and its local cache layout, shared
 * with huggingface_hub, transformers and huggingface-cli:
 *   $HF_HUB_CACHE (else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub)
 *     models--ORG--NAME/blobs/ETAG              a file's bytes, named by its ETag (LFS: SHA-256; else git blob id)
 *     models--ORG--NAME/blobs/ETAG.incomplete   a download in progress (resumed from its length)
 *     models--ORG--NAME/snapshots/COMMIT/PATH   a relative symlink to ../../blobs/ETAG
 *     models--ORG--NAME/refs/REVISION           the commit a branch or tag name stood for when fetched
 * A file appears in a snapshot only after its bytes matched its ETag, so a partial file is never taken for a whole
 * one. Environment: HF_ENDPOINT (a mirror; default https://huggingface.co), HF_TOKEN (gated and private models),
 * HF_HUB_OFFLINE=1 (the cache only).
 *
 * This room is the CLI's (the tern binary links it; libtern does not depend on libcurl). */
#ifndef TERN_HUB_HUB_H
#define TERN_HUB_HUB_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* ORG/NAME[@REVISION][:TAG] — TAG picks a GGUF quantization (Q4_K_M, q8_0, ...), as llama.cpp's -hf does. */
typedef struct hub_ref {
    char repo[256];     /* ORG/NAME */
    char revision[128]; /* branch, tag or commit; "main" when not given */
    char tag[64];       /* "" when not given */
} hub_ref;

/* 1 if s reads as a model name (ORG/NAME with the hub's characters, optional @REVISION and :TAG), else 0. */
int hub_ref_parse(const char *s, hub_ref *ref);

/* The cache root (see above), malloc'd; NULL when no home folder is known. */
char *hub_cache_root(void);
/* 1 when HF_HUB_OFFLINE is set to a true value. */
int hub_offline(void);

/* What a fetch brings and where a name resolves to. */
typedef struct hub_model {
    char *path;   /* a snapshot folder (safetensors) or the GGUF file (the first part of a split one) */
    char *mmproj; /* a GGUF multimodal projector beside it, or NULL */
} hub_model;

void hub_model_free(hub_model *m);

/* Finds ref in the cache without the network: the snapshot its revision points to, and for a GGUF repository the
 * file its tag names (or the one tern would fetch). TERN_ENOTFOUND when it is not there (or not complete). */
TERN_MUST_CHECK tern_err *hub_find(const char *root, const hub_ref *ref, hub_model *out);

typedef struct hub_get_options {
    const char *const *include; /* globs over the repository's paths (fnmatch); NULL-terminated, or NULL */
    const char *const *exclude;
    int parallel;               /* files downloaded at once; default 4 */
    int retries;                /* a cut connection resumes this many times per file; 0: 5, negative: never */
    int progress;               /* 1: a progress bar (a terminal), 0: a line per file */
} hub_get_options;

/* Downloads what ref names into the cache under root and fills out (as hub_find would afterwards; with globs, the
 * snapshot folder). Without globs:
 * a GGUF repository gives the file of the tag (default Q4_K_M, else the first) and its mmproj; any other repository
 * the files tern reads (*.json, *.safetensors, *.jinja, *.txt, tokenizer.model). Errors say which: unknown
 * repository or revision, a gated model without HF_TOKEN, a network failure, a checksum mismatch, a full disk. */
TERN_MUST_CHECK tern_err *hub_get(const char *root, const hub_ref *ref, const hub_get_options *opt, hub_model *out);

/* One cached model, for `tern ls`. */
typedef struct hub_entry {
    char repo[256];
    char revision[128]; /* the ref naming the newest snapshot, or its commit */
    char commit[48];
    uint64_t bytes;     /* the blobs its newest snapshot links to */
    char format[96];    /* "safetensors bf16", "MLX 4-bit", "GGUF Q4_K_M, Q8_0", ... */
    int files;
} hub_entry;

/* Every model in the cache (sorted by name): *out malloc'd, *n entries. */
TERN_MUST_CHECK tern_err *hub_list(const char *root, hub_entry **out, size_t *n);
/* Deletes a model's whole folder from the cache (every revision); TERN_ENOTFOUND when it is not there. */
TERN_MUST_CHECK tern_err *hub_remove(const char *root, const char *repo);

/* The GGUF file a tag names among paths (case-insensitive, as a word of the file name; mmproj files never), or -1.
 * An empty tag picks Q4_K_M, else the first. A split model's first part (-00001-of-N). */
int hub_pick_gguf(const char *const *paths, size_t n, const char *tag);
/* The mmproj file to go with a model: the one naming the tag, else F16, else BF16, else the first; -1 if none. */
int hub_pick_mmproj(const char *const *paths, size_t n, const char *tag);

#endif
