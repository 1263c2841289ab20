#!/usr/bin/python3
"""Writes a small random Gemma 4 vision tower in Hugging Face layout, for scripts/vision/reference.py and tern's
vision tests to run without a real checkpoint.

    /usr/bin/python3 scripts/vision/make-tower.py OUT_DIR [--hidden 64] [--layers 2] [--heads 2] [--kv-heads H]
        [--head-dim 32] [--inter 128] [--text-hidden 96] [--pos 64] [--seed 1] [--clipped] [--standardize]
        [--budget 280]

OUT_DIR gets
  config.json            {"model_type": "gemma4", "vision_config": {...}, "text_config": {"hidden_size": ...}, ...}
                         with the vision keys named as Gemma4VisionConfig names them (rope_parameters.rope_theta).
  processor_config.json  {"processor_class": "Gemma4Processor", "image_processor": {... "max_soft_tokens": ...}}
  model.safetensors      float32 model.vision_tower.* and model.embed_vision.embedding_projection.weight only.

Weights are normal with std 1/sqrt(fan_in) so activations stay O(1); norm weights 1 + N(0, 0.1); the position table
N(0, 0.5). With --clipped every clippable linear gets scalar input/output bounds, asymmetric and random, drawn so
that some inputs and outputs are actually clamped (normalised inputs are ~N(0, 1), so bounds of 1-2 clip the tails).
With --standardize the tower gets std_bias / std_scale (the larger Gemma 4 models have them). numpy only."""
import argparse
import json
import os
import struct

import numpy as np


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype="<f4")
        data = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # keep the data 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--kv-heads", type=int, default=None)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--inter", type=int, default=128)
    ap.add_argument("--text-hidden", type=int, default=96)
    ap.add_argument("--pos", type=int, default=64, help="position_embedding_size (largest patch row/column + 1)")
    ap.add_argument("--patch", type=int, default=16)
    ap.add_argument("--pool", type=int, default=3)
    ap.add_argument("--theta", type=float, default=100.0)
    ap.add_argument("--budget", type=int, default=280, help="max_soft_tokens in processor_config.json")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--clipped", action="store_true")
    ap.add_argument("--standardize", action="store_true")
    a = ap.parse_args()
    kv = a.kv_heads or a.heads
    rng = np.random.default_rng(a.seed)
    H, I, hd, p = a.hidden, a.inter, a.head_dim, a.patch

    def lin(out_f, in_f):
        return rng.normal(0.0, 1.0 / np.sqrt(in_f), (out_f, in_f))

    def norm(n):
        return 1.0 + rng.normal(0.0, 0.1, n)

    t = {}
    pre = "model.vision_tower."
    t[pre + "patch_embedder.input_proj.weight"] = lin(H, 3 * p * p)
    t[pre + "patch_embedder.position_embedding_table"] = rng.normal(0.0, 0.5, (2, a.pos, H))
    clippable = []
    for i in range(a.layers):
        L = f"{pre}encoder.layers.{i}."
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm"):
            t[L + n + ".weight"] = norm(H)
        t[L + "self_attn.q_norm.weight"] = norm(hd)
        t[L + "self_attn.k_norm.weight"] = norm(hd)
        shapes = {"self_attn.q_proj": (a.heads * hd, H), "self_attn.k_proj": (kv * hd, H),
                  "self_attn.v_proj": (kv * hd, H), "self_attn.o_proj": (H, a.heads * hd),
                  "mlp.gate_proj": (I, H), "mlp.up_proj": (I, H), "mlp.down_proj": (H, I)}
        for n, (o, inn) in shapes.items():
            t[L + n + ".linear.weight"] = lin(o, inn)
            clippable.append(L + n)
    if a.clipped:
        # Scalar (0-d) buffers, as Gemma4ClippableLinear registers them.
        # o_proj and down_proj see and produce smaller values (mixtures of normalised activations), so their
        # bounds are tighter. On a 300x200 photo-like image (seed 2) every clip bound is hit: from 0.3% to 25% of the
        # values land outside, depending on the linear.
        for c in clippable:
            lo, hi = (0.6, 1.5) if c.endswith(("o_proj", "down_proj")) else (1.0, 2.0)
            t[c + ".input_min"] = np.array(-rng.uniform(lo, hi))
            t[c + ".input_max"] = np.array(rng.uniform(lo, hi))
            t[c + ".output_min"] = np.array(-rng.uniform(lo, hi))
            t[c + ".output_max"] = np.array(rng.uniform(lo, hi))
    if a.standardize:
        t[pre + "std_bias"] = rng.normal(0.0, 0.1, H)
        t[pre + "std_scale"] = 1.0 + rng.normal(0.0, 0.1, H)
    t["model.embed_vision.embedding_projection.weight"] = lin(a.text_hidden, H)

    os.makedirs(a.out_dir, exist_ok=True)
    write_safetensors(os.path.join(a.out_dir, "model.safetensors"), t)
    vision_config = {
        "model_type": "gemma4_vision",
        "hidden_size": H,
        "intermediate_size": I,
        "num_hidden_layers": a.layers,
        "num_attention_heads": a.heads,
        "num_key_value_heads": kv,
        "head_dim": hd,
        "hidden_activation": "gelu_pytorch_tanh",
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 131072,
        "rope_parameters": {"rope_type": "default", "rope_theta": a.theta},
        "pooling_kernel_size": a.pool,
        "patch_size": p,
        "position_embedding_size": a.pos,
        "use_clipped_linears": a.clipped,
        "standardize": a.standardize,
        "initializer_range": 0.02,
    }
    config = {
        "architectures": ["Gemma4ForConditionalGeneration"],
        "model_type": "gemma4",
        "boi_token_id": 255999,
        "eoi_token_id": 258882,
        "image_token_id": 258880,
        "vision_config": vision_config,
        "text_config": {"model_type": "gemma4_text", "hidden_size": a.text_hidden},
        "audio_config": None,
    }
    with open(os.path.join(a.out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    processor = {
        "processor_class": "Gemma4Processor",
        "image_seq_length": a.budget,
        "image_processor": {
            "image_processor_type": "Gemma4ImageProcessor",
            "do_convert_rgb": True,
            "do_normalize": False,
            "do_rescale": True,
            "do_resize": True,
            "image_mean": [0.0, 0.0, 0.0],
            "image_std": [1.0, 1.0, 1.0],
            "image_seq_length": a.budget,
            "max_soft_tokens": a.budget,
            "patch_size": p,
            "pooling_kernel_size": a.pool,
            "resample": 3,
            "rescale_factor": 1 / 255,
        },
    }
    with open(os.path.join(a.out_dir, "processor_config.json"), "w") as f:
        json.dump(processor, f, indent=2)
    print(f"{a.out_dir}: {len(t)} tensors")


if __name__ == "__main__":
    main()
