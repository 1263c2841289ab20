"""mini-moe-seed.py OUT.gguf — the fuzz seed tests/fuzz/corpus/fuzz_gguf_model/mini-moe.gguf: a 2-layer Gemma 4
with K=V full attention and experts beside the dense MLP (fused gate-up in layer tensors as llama.cpp's converter
names them, experts in Q8_0 blocks, the rest F32), small enough for a fuzzer to mutate. Random weights; the metadata
keys are those convert_hf_to_gguf.py writes for Gemma 4 (no tokenizer). Needs llama.cpp's gguf-py and numpy."""
import sys

import gguf
import numpy as np

H, E, K, I, F, V, HD, GHD = 32, 4, 2, 32, 32, 64, 16, 32


def main(out: str) -> None:
    rng = np.random.default_rng(7)
    w = gguf.GGUFWriter(out, "gemma4")
    a = "gemma4."
    w.add_uint32(a + "block_count", 2)
    w.add_uint32(a + "context_length", 256)
    w.add_uint32(a + "embedding_length", H)
    w.add_uint32(a + "feed_forward_length", F)
    w.add_uint32(a + "attention.head_count", 2)
    w.add_array(a + "attention.head_count_kv", [2, 1])
    w.add_float32(a + "rope.freq_base", 1e6)
    w.add_float32(a + "rope.freq_base_swa", 1e4)
    w.add_float32(a + "attention.layer_norm_rms_epsilon", 1e-6)
    w.add_uint32(a + "expert_count", E)
    w.add_uint32(a + "expert_used_count", K)
    w.add_uint32(a + "expert_feed_forward_length", I)
    w.add_uint32(a + "attention.key_length", GHD)
    w.add_uint32(a + "attention.value_length", GHD)
    w.add_uint32(a + "attention.key_length_swa", HD)
    w.add_uint32(a + "attention.value_length_swa", HD)
    w.add_float32(a + "final_logit_softcapping", 30.0)
    w.add_uint32(a + "attention.sliding_window", 8)
    w.add_uint32(a + "attention.shared_kv_layers", 0)
    w.add_uint32(a + "embedding_length_per_layer_input", 0)
    w.add_array(a + "attention.sliding_window_pattern", [True, False])

    def f32(name, *shape):  # shape in PyTorch order
        w.add_tensor(name, (rng.standard_normal(shape) * 0.1).astype(np.float32))

    def q8(name, *shape):
        x = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        w.add_tensor(name, gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0),
                     raw_dtype=gguf.GGMLQuantizationType.Q8_0)

    w.add_tensor("rope_freqs.weight", np.array([1.0] * 4 + [1e30] * 12, dtype=np.float32))
    f32("token_embd.weight", V, H)
    f32("output_norm.weight", H)
    for l, (hd, kv) in enumerate([(HD, 2), (GHD, 1)]):
        b = f"blk.{l}."
        for n in ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm", "pre_ffw_norm_2",
                  "post_ffw_norm_1", "post_ffw_norm_2"):
            f32(b + n + ".weight", H)
        f32(b + "layer_output_scale.weight", 1)
        f32(b + "attn_q.weight", 2 * hd, H)
        f32(b + "attn_k.weight", kv * hd, H)
        if l == 0:  # the full layer (1) has none: K=V
            f32(b + "attn_v.weight", kv * hd, H)
        f32(b + "attn_output.weight", H, 2 * hd)
        f32(b + "attn_q_norm.weight", hd)
        f32(b + "attn_k_norm.weight", hd)
        f32(b + "ffn_gate.weight", F, H)
        f32(b + "ffn_up.weight", F, H)
        f32(b + "ffn_down.weight", H, F)
        f32(b + "ffn_gate_inp.weight", E, H)
        f32(b + "ffn_gate_inp.scale", H)
        f32(b + "ffn_down_exps.scale", E)
        q8(b + "ffn_gate_up_exps.weight", E, 2 * I, H)
        q8(b + "ffn_down_exps.weight", E, H, I)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main(sys.argv[1])
