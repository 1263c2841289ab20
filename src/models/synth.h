/* synth.h — synthetic Gemma 4 checkpoints in the exact Hugging Face / MLX layout.
 *
 * Tests and benchmarks cannot download real weights, so they generate them: config.json,
 * safetensors (sharded above the shard limit, with model.safetensors.index.json),
 * tokenizer.json / tokenizer_config.json / chat_template.jinja from a GGUF vocabulary,
 * generation_config.json. Weights are random with sane scales (linear N(0, 1/sqrt(in)),
 * norms near 1), deterministic for a seed, written tensor by tensor in bounded memory. */
#ifndef TERN_MODELS_SYNTH_H
#define TERN_MODELS_SYNTH_H

#include <jansson.h>
#include <stdint.h>

#include "core/status.h"

typedef enum { TERN_SYNTH_F32, TERN_SYNTH_BF16, TERN_SYNTH_F16, TERN_SYNTH_Q8, TERN_SYNTH_Q4 } tern_synth_dtype;

typedef struct tern_synth_opts {
    tern_synth_dtype dtype;
    int group;             /* quantization group size (q8/q4) unless the config has its own "quantization" */
    uint64_t seed;
    const char *vocab_gguf; /* GGUF file with tokenizer.ggml.* metadata (the real Gemma 4 vocabulary) */
    uint64_t shard_bytes;  /* split safetensors above this many bytes (4 GiB by default) */
    int audio;             /* add the audio tower (the config's audio_config, else one sized for the text model),
                            * its token ids and processor config */
    int vision;            /* add the vision tower likewise (e2b/e4b shapes beside a text model of hidden >= 512) */
} tern_synth_opts;

/* The config.json object of a named preset (tiny, e2b, e4b, 12b, 26b-a4b, 31b, e4b-moe-like), or loaded from a
 * path. */
TERN_MUST_CHECK tern_err *tern_synth_config(const char *preset_or_path, json_t **out);
/* Keeps the first `layers` layers of a config (its num_hidden_layers and layer_types): a model of a real layout
 * small enough to run here. */
TERN_MUST_CHECK tern_err *tern_synth_cut_layers(json_t *config, int64_t layers);
/* Parses "f32|bf16|f16|q8|q4". */
TERN_MUST_CHECK tern_err *tern_synth_parse_dtype(const char *s, tern_synth_dtype *out);
/* Writes a complete checkpoint for `config` into out_dir (created if needed). */
TERN_MUST_CHECK tern_err *tern_synth_write(const json_t *config, const tern_synth_opts *opts, const char *out_dir);

#endif
