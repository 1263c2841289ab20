"""A float64 numpy reference of the dense decoder as Hugging Face's LlamaForCausalLM / MistralForCausalLM /
Qwen2ForCausalLM / Qwen3ForCausalLM compute it, written from their modeling code's definitions (not from tern's):
RMSNorm, rotate-half RoPE (default, linear or llama3 frequencies), grouped-query attention with the causal mask and,
for Mistral, the sliding window (a query at i sees keys j with i - window < j <= i), SwiGLU, tied or separate head.
Reads config.json and a float safetensors checkpoint; writes float32 logits [positions][vocab] for the ids.

    /usr/bin/python3 scripts/dense/reference.py MODEL_DIR 1,2,3,... OUT.bin
"""
import json
import struct
import sys
from pathlib import Path

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None}


def load_safetensors(path):
    raw = Path(path).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        buf = raw[base + b:base + e]
        if t["dtype"] == "BF16":
            v = np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16
            a = v.view(np.float32)
        else:
            a = np.frombuffer(buf, dtype=DTYPES[t["dtype"]])
        out[name] = a.reshape(t["shape"]).astype(np.float64)
    return out


def inv_freq(c, hd):
    theta = c.get("rope_theta", 10000.0)
    f = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    rs = c.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "linear":
        f = f / rs["factor"]
    elif kind == "llama3":
        old, lo, hi, fac = rs["original_max_position_embeddings"], rs["low_freq_factor"], rs["high_freq_factor"], rs["factor"]
        wl = 2 * np.pi / f
        scaled = np.where(wl > old / lo, f / fac, f)
        smooth = (old / wl - lo) / (hi - lo)
        mid = (wl <= old / lo) & (wl >= old / hi)
        f = np.where(mid, (1 - smooth) * f / fac + smooth * f, scaled)
    return f


def rmsnorm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def rope(x, cos, sin):  # x [T, heads, hd]
    h = x.shape[-1] // 2
    rot = np.concatenate([-x[..., h:], x[..., :h]], -1)
    return x * cos[:, None, :] + rot * sin[:, None, :]


def main():
    model, ids, out = sys.argv[1], [int(t) for t in sys.argv[2].split(",")], sys.argv[3]
    c = json.load(open(Path(model) / "config.json"))
    W = load_safetensors(Path(model) / "model.safetensors")
    H, nH = c["hidden_size"], c["num_attention_heads"]
    kvH = c.get("num_key_value_heads", nH)
    hd = c.get("head_dim") or H // nH
    eps = c.get("rms_norm_eps", 1e-6)
    typ = c["model_type"]
    window = c.get("sliding_window") if typ == "mistral" or c.get("use_sliding_window") else None
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)
    ang = pos[:, None] * inv_freq(c, hd)[None, :]
    cos = np.concatenate([np.cos(ang)] * 2, -1)
    sin = np.concatenate([np.sin(ang)] * 2, -1)
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    allowed = j <= i
    if window:
        allowed &= j > i - window
    x = W["model.embed_tokens.weight"][ids]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rmsnorm(x, W[p + "input_layernorm.weight"], eps)

        def proj(name):
            y = h @ W[p + f"self_attn.{name}.weight"].T
            b = W.get(p + f"self_attn.{name}.bias")
            return y if b is None else y + b

        q = proj("q_proj").reshape(T, nH, hd)
        k = proj("k_proj").reshape(T, kvH, hd)
        v = proj("v_proj").reshape(T, kvH, hd)
        if p + "self_attn.q_norm.weight" in W:
            q = rmsnorm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rmsnorm(k, W[p + "self_attn.k_norm.weight"], eps)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        g = nH // kvH
        k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
        s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd)
        s = np.where(allowed[None], s, -np.inf)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = np.einsum("hts,shd->thd", s, v).reshape(T, nH * hd)
        o = a @ W[p + "self_attn.o_proj.weight"].T
        if p + "self_attn.o_proj.bias" in W:
            o = o + W[p + "self_attn.o_proj.bias"]
        x = x + o
        h = rmsnorm(x, W[p + "post_attention_layernorm.weight"], eps)
        gt, up = h @ W[p + "mlp.gate_proj.weight"].T, h @ W[p + "mlp.up_proj.weight"].T
        x = x + (gt / (1 + np.exp(-gt)) * up) @ W[p + "mlp.down_proj.weight"].T
    x = rmsnorm(x, W["model.norm.weight"], eps)
    head = W["lm_head.weight"] if "lm_head.weight" in W else W["model.embed_tokens.weight"]
    (x @ head.T).astype(np.float32).tofile(out)


main()
