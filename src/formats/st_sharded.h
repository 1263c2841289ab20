/* st_sharded.h — write a model directory's safetensors: one model.safetensors, or above a size limit
 * model-0000i-of-0000n.safetensors shards plus model.safetensors.index.json, as Hugging Face does.
 * Tensors are streamed in the order given, so memory stays bounded whatever the model's size. */
#ifndef TERN_FORMATS_ST_SHARDED_H
#define TERN_FORMATS_ST_SHARDED_H

#include <stdint.h>

#include "formats/safetensors.h"

typedef struct tern_sharded_writer tern_sharded_writer;

/* Plans shards over `specs` (a new shard when the next tensor would pass shard_bytes; 0 = 4 GiB) and opens
 * the first; `format` is the __metadata__ "format" value ("pt", "mlx"). specs are copied. */
TERN_MUST_CHECK tern_err *tern_sharded_open(const char *dir, const tern_st_spec *specs, size_t n, uint64_t shard_bytes,
                            const char *format, tern_sharded_writer **out);
/* Appends tensor bytes in spec order, in chunks of any size (a chunk may run across tensors and shards). */
TERN_MUST_CHECK tern_err *tern_sharded_write(tern_sharded_writer *w, const void *data, size_t len);
/* Finishes the last shard and writes the index when sharded; always frees. Errors if bytes are missing. */
TERN_MUST_CHECK tern_err *tern_sharded_close(tern_sharded_writer *w);

#endif
