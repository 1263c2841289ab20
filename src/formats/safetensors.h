/* safetensors.h — read safetensors checkpoints (mmapped, validated) and write them (streaming).
 *
 * A safetensors file is an 8-byte little-endian header length N, N bytes of JSON
 *   {"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}, ...}
 * and then the data region; offsets are relative to the start of the data region.
 *
 * Reading maps the file read-only and checks every header entry against the bytes actually
 * present before any tensor is handed out, so a tern_tensor's `data` always points at
 * exactly `nbytes` readable bytes. A checkpoint is all safetensors files of a model
 * directory (one file, or shards listed by model.safetensors.index.json) behind one
 * name lookup. Writing produces the same layout as the Python `safetensors` library. */
#ifndef TERN_FORMATS_SAFETENSORS_H
#define TERN_FORMATS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "tensor/dtype.h"
#include "tensor/qblock.h"

#define TERN_MAX_DIMS 8
/* Largest JSON header accepted (the reference implementation's limit). */
#define TERN_ST_MAX_HEADER 100000000u

/* One stored tensor; data points into a read-only mapping owned by its container. */
typedef struct tern_tensor {
    const char *name;
    tern_dtype dtype;
    int ndim;                      /* 0 for a scalar */
    int64_t shape[TERN_MAX_DIMS];  /* entries past ndim are 0 */
    int64_t numel;                 /* product of shape (1 for a scalar, 0 if any dim is 0) */
    const void *data;              /* nbytes readable bytes */
    size_t nbytes;                 /* numel * tern_dtype_size(dtype) */
    const char *file;              /* path of the file holding it (owned by the container) */
    uint64_t offset;               /* byte offset of data within the file */
    int aligned;                   /* 1 if data is aligned to the element size; else kernels must copy */
    tern_qblock qblock;            /* GGUF block-quantized data (dtype U8, nbytes the blocks' bytes; rows are whole
                                    * blocks, as the GGUF parser checks), else NONE */
} tern_tensor;

/* ---- one file ------------------------------------------------------------------------- */

typedef struct tern_safetensors tern_safetensors;

/* Maps and validates the file at `path`; errors name the path and the tensor at fault. */
TERN_MUST_CHECK tern_err *tern_safetensors_open(const char *path, tern_safetensors **out);
/* Validates a safetensors image in memory (for fuzzing and tests); does not own or copy `data`,
 * which must outlive the result. `what` names the source in errors. */
TERN_MUST_CHECK tern_err *tern_safetensors_parse(const void *data, size_t size, const char *what, tern_safetensors **out);
/* Number of tensors. */
size_t tern_safetensors_count(const tern_safetensors *f);
/* The i-th tensor in header order; NULL if i >= count. */
const tern_tensor *tern_safetensors_at(const tern_safetensors *f, size_t i);
/* The tensor called `name` (binary search), or NULL if absent. */
const tern_tensor *tern_safetensors_find(const tern_safetensors *f, const char *name);
/* The __metadata__ value for `key`, or NULL if absent. */
const char *tern_safetensors_metadata(const tern_safetensors *f, const char *key);
/* Number of __metadata__ entries. */
size_t tern_safetensors_metadata_count(const tern_safetensors *f);
/* The i-th __metadata__ entry in header order (*key, *value); returns 0, or -1 if i >= count. */
int tern_safetensors_metadata_at(const tern_safetensors *f, size_t i, const char **key, const char **value);
/* The path (or `what`) this file was opened as. */
const char *tern_safetensors_path(const tern_safetensors *f);
/* Unmaps and frees; NULL is fine. Tensors from this file become invalid. */
void tern_safetensors_close(tern_safetensors *f);

/* ---- a model directory ------------------------------------------------------------------- */

typedef struct tern_checkpoint tern_checkpoint;

/* Opens DIR/model.safetensors.index.json (sharded: every shard named in weight_map, each tensor
 * must be in the shard the index says) or else DIR/model.safetensors, or else the single
 * *.safetensors file in DIR. A tensor may live in only one shard. */
TERN_MUST_CHECK tern_err *tern_checkpoint_open(const char *dir, tern_checkpoint **out);
/* Number of tensors over all files. */
size_t tern_checkpoint_count(const tern_checkpoint *c);
/* The i-th tensor, sorted by name (strcmp order); NULL if i >= count. */
const tern_tensor *tern_checkpoint_at(const tern_checkpoint *c, size_t i);
/* The tensor called `name` (binary search), or NULL if absent. */
const tern_tensor *tern_checkpoint_find(const tern_checkpoint *c, const char *name);
/* The __metadata__ value for `key` from the first file (shard order) that has it, or NULL. */
const char *tern_checkpoint_metadata(const tern_checkpoint *c, const char *key);
/* Number of files (1 unless sharded). */
size_t tern_checkpoint_file_count(const tern_checkpoint *c);
/* The i-th file (shards in name order); NULL if i >= file count. */
const tern_safetensors *tern_checkpoint_file(const tern_checkpoint *c, size_t i);
/* Unmaps every file and frees; NULL is fine. */
void tern_checkpoint_close(tern_checkpoint *c);
/* A checkpoint over tensors read from another container (a GGUF file): takes `tensors` (malloc'd, n of them,
 * names and bytes owned by `holder`, which release(holder) frees at close — also on an error here). Two tensors
 * of one name are an error. */
TERN_MUST_CHECK tern_err *tern_checkpoint_of_tensors(tern_tensor *tensors, size_t n, void (*release)(void *), void *holder,
                                     tern_checkpoint **out);

/* ---- streaming writer ---------------------------------------------------------------------- */

/* What one tensor will be: the header is written before any data, so every shape is known up front. */
typedef struct tern_st_spec {
    const char *name;
    tern_dtype dtype;
    int ndim;
    int64_t shape[TERN_MAX_DIMS];
} tern_st_spec;

typedef struct tern_st_writer tern_st_writer;

/* Starts writing `path` with the tensors of `specs` laid out back to back in the order given
 * (list larger element sizes first to keep every tensor aligned, as the Python library does).
 * `metadata_kv` is a NULL-terminated list of key, value strings, or NULL for no __metadata__.
 * The file appears at `path` only when tern_st_writer_close succeeds. */
TERN_MUST_CHECK tern_err *tern_st_writer_open(const char *path, const tern_st_spec *specs, size_t n, const char *const *metadata_kv,
                              tern_st_writer **out);
/* Appends the next `len` bytes of tensor data (tensors concatenated in spec order, any chunking);
 * errors if that would exceed the declared total. */
TERN_MUST_CHECK tern_err *tern_st_writer_write(tern_st_writer *w, const void *data, size_t len);
/* Finishes the file; errors if fewer bytes than declared were written or an earlier write failed
 * (and then removes the partial file). Always frees `w`; NULL is fine. */
TERN_MUST_CHECK tern_err *tern_st_writer_close(tern_st_writer *w);

#endif
