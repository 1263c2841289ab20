"""gemma4.py — the Gemma 4 text decoder and the Gemma 4 assistant drafter in PyTorch, written from GEMMA4.md
(sections 1 and 5) for training the demo models, with export to the Hugging Face checkpoint layout.

It computes what tern computes: RMSNorm in float32 with the weight used as is, q/k norms, a scale-free v norm,
attention scale 1.0, default RoPE on sliding layers and proportional RoPE on full ones, per-layer embeddings,
KV sharing, GeGLU (tanh), layer scalars, tied embeddings and the final soft-cap."""
import json
import math
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

EPS = 1e-6


def rms_norm(x, w=None):
    y = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + EPS)
    return y * w if w is not None else y


def gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


def rope_tables(head_dim, positions, theta, rotary_fraction):
    """cos/sin [T, head_dim] for rotate-half RoPE; frequencies past the rotary fraction are zero, so those
    dimensions pass through (proportional RoPE of full layers)."""
    half = head_dim // 2
    n_rot = int(rotary_fraction * head_dim) // 2
    i = torch.arange(half, dtype=torch.float64)
    inv = theta ** (-2.0 * i / head_dim)
    inv[n_rot:] = 0.0
    ang = positions.double()[:, None] * inv[None, :]
    ang = torch.cat([ang, ang], -1)
    return ang.cos().float(), ang.sin().float()


def rope(x, cos, sin):
    """x [..., T, D]; rotate-half pairs (i, i + D/2)."""
    h = x.shape[-1] // 2
    rot = torch.cat([-x[..., h:], x[..., :h]], -1)
    return x * cos + rot * sin


class Config:
    def __init__(self, **kw):
        self.vocab = kw["vocab"]
        self.hidden = kw["hidden"]
        self.layer_types = kw["layer_types"]
        self.heads = kw["heads"]
        self.kv_heads = kw["kv_heads"]
        self.head_dim = kw["head_dim"]
        self.global_head_dim = kw["global_head_dim"]
        self.intermediate = kw["intermediate"]
        self.double_wide = kw.get("double_wide", False)
        self.ple = kw.get("ple", 0)
        self.kv_shared = kw.get("kv_shared", 0)
        self.window = kw["window"]
        self.softcap = kw.get("softcap", 30.0)

    @property
    def n_layers(self):
        return len(self.layer_types)

    def hd(self, l):
        return self.global_head_dim if self.layer_types[l] == "full_attention" else self.head_dim

    def kv_owner(self, l):
        """The layer whose K/V layer l attends over: itself, or for KV-shared layers the last cache-owning layer of
        the same type."""
        first_shared = self.n_layers - self.kv_shared
        if l < first_shared:
            return l
        return max(j for j in range(first_shared) if self.layer_types[j] == self.layer_types[l])

    def inter(self, l):
        shared = l >= self.n_layers - self.kv_shared
        return self.intermediate * (2 if shared and self.double_wide else 1)

    def rope_for(self, l, positions):
        if self.layer_types[l] == "full_attention":
            return rope_tables(self.global_head_dim, positions, 1e6, 0.25)
        return rope_tables(self.head_dim, positions, 1e4, 1.0)

    def text_config(self, dtype):
        return {
            "model_type": "gemma4_text", "vocab_size": self.vocab, "vocab_size_per_layer_input": self.vocab,
            "hidden_size": self.hidden, "intermediate_size": self.intermediate,
            "num_hidden_layers": self.n_layers, "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads, "num_global_key_value_heads": None,
            "head_dim": self.head_dim, "global_head_dim": self.global_head_dim, "attention_k_eq_v": False,
            "hidden_size_per_layer_input": self.ple, "num_kv_shared_layers": self.kv_shared,
            "use_double_wide_mlp": self.double_wide, "sliding_window": self.window,
            "layer_types": self.layer_types,
            "rope_parameters": {
                "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                   "rope_theta": 1000000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
            "max_position_embeddings": 4096, "rms_norm_eps": EPS, "hidden_activation": "gelu_pytorch_tanh",
            "final_logit_softcapping": self.softcap, "attention_bias": False, "attention_dropout": 0.0,
            "enable_moe_block": False, "num_experts": None, "top_k_experts": None, "moe_intermediate_size": None,
            "tie_word_embeddings": True, "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 1, "dtype": dtype,
        }


def linear(i, o):
    m = nn.Linear(i, o, bias=False)
    nn.init.normal_(m.weight, std=0.02)
    return m


class Layer(nn.Module):
    def __init__(self, c, l, q_only=False):
        super().__init__()
        H, hd = c.hidden, c.hd(l)
        self.c, self.l, self.hd = c, l, hd
        self.q_only = q_only or l != c.kv_owner(l)
        self.input_layernorm = nn.Parameter(torch.ones(H))
        self.post_attention_layernorm = nn.Parameter(torch.ones(H))
        self.pre_feedforward_layernorm = nn.Parameter(torch.ones(H))
        self.post_feedforward_layernorm = nn.Parameter(torch.ones(H))
        self.q_proj = linear(H, c.heads * hd)
        self.o_proj = linear(c.heads * hd, H)
        # Scores use scale 1.0, so the learned q norm carries the 1/sqrt(d); start it there.
        self.q_norm = nn.Parameter(torch.full((hd,), hd ** -0.5))
        if not self.q_only:
            self.k_proj = linear(H, c.kv_heads * hd)
            self.v_proj = linear(H, c.kv_heads * hd)
            self.k_norm = nn.Parameter(torch.ones(hd))
        I = c.inter(l)
        self.gate_proj, self.up_proj, self.down_proj = linear(H, I), linear(H, I), linear(I, H)
        if c.ple:
            self.per_layer_input_gate = linear(H, c.ple)
            self.per_layer_projection = linear(c.ple, H)
            self.post_per_layer_input_norm = nn.Parameter(torch.ones(H))
        self.layer_scalar = nn.Parameter(torch.ones(1))

    def kv(self, x, cos, sin):
        B, T, _ = x.shape
        k = self.k_proj(x).view(B, T, self.c.kv_heads, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.c.kv_heads, self.hd).transpose(1, 2)
        return rope(rms_norm(k, self.k_norm), cos, sin), rms_norm(v)

    def attend(self, q, k, v, mask):
        """q [B, nH, Tq, d], k/v [B, nKV, Tk, d], mask [Tq, Tk] (or [B, Tq, Tk]) of allowed pairs."""
        g = self.c.heads // self.c.kv_heads
        k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        s = q @ k.transpose(-1, -2)
        if mask.dim() == 3:
            mask = mask[:, None]
        s = s.masked_fill(~mask, float("-inf"))
        p = torch.softmax(s.float(), -1)
        p = torch.nan_to_num(p)  # a query with no visible key (the drafter at position 0) reads nothing
        return p @ v

    def forward(self, x, cos, sin, mask, kv_cache, pli=None, kv_given=None):
        B, T, H = x.shape
        a_in = rms_norm(x, self.input_layernorm)
        q = self.q_proj(a_in).view(B, T, self.c.heads, self.hd).transpose(1, 2)
        q = rope(rms_norm(q, self.q_norm), cos, sin)
        if kv_given is not None:
            k, v = kv_given
        elif self.q_only:
            k, v = kv_cache[self.c.kv_owner(self.l)]
        else:
            k, v = self.kv(a_in, cos, sin)
            kv_cache[self.l] = (k, v)
        a = self.attend(q, k, v, mask).transpose(1, 2).reshape(B, T, -1)
        x = x + rms_norm(self.o_proj(a), self.post_attention_layernorm)
        f_in = rms_norm(x, self.pre_feedforward_layernorm)
        f = self.down_proj(gelu_tanh(self.gate_proj(f_in)) * self.up_proj(f_in))
        x = x + rms_norm(f, self.post_feedforward_layernorm)
        if pli is not None:
            g = gelu_tanh(self.per_layer_input_gate(x)) * pli
            x = x + rms_norm(self.per_layer_projection(g), self.post_per_layer_input_norm)
        return x * self.layer_scalar


def causal_mask(T, window, device=None):
    i = torch.arange(T, device=device)[:, None]
    j = torch.arange(T, device=device)[None, :]
    m = j <= i
    return m & (i - j < window) if window else m


class Gemma4(nn.Module):
    """The text decoder. forward(ids) -> (logits, final-normed hidden, per-layer K/V)."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Parameter(torch.randn(c.vocab, c.hidden) * 0.02)
        self.layers = nn.ModuleList(Layer(c, l) for l in range(c.n_layers))
        self.norm = nn.Parameter(torch.ones(c.hidden))
        if c.ple:
            self.embed_tokens_per_layer = nn.Parameter(torch.randn(c.vocab, c.n_layers * c.ple) * 0.02)
            self.per_layer_model_projection = linear(c.hidden, c.n_layers * c.ple)
            self.per_layer_projection_norm = nn.Parameter(torch.ones(c.ple))

    def forward(self, ids, soft=None, groups=None):
        """soft: (where [T] bool, rows [n, H]) fed in place of the embeddings at those positions (their ids are the
        pad id, whose per-layer rows they read; the per-layer projection sees the rows). groups [T]: an image's
        index at its soft positions, -1 elsewhere; with it, sliding layers also let the positions of one image see
        each other both ways, past the window too (use_bidirectional_attention "vision"); full layers stay causal."""
        c = self.c
        B, T = ids.shape
        pos = torch.arange(T)
        x = F.embedding(ids, self.embed_tokens) * math.sqrt(c.hidden)
        if soft is not None:
            x = x.clone()
            x[:, soft[0]] = soft[1]
        pli = None
        if c.ple:
            tok = F.embedding(ids, self.embed_tokens_per_layer).view(B, T, c.n_layers, c.ple) * math.sqrt(c.ple)
            proj = self.per_layer_model_projection(x) * c.hidden ** -0.5
            proj = rms_norm(proj.view(B, T, c.n_layers, c.ple), self.per_layer_projection_norm)
            pli = (proj + tok) * 2 ** -0.5
        masks = {"sliding_attention": causal_mask(T, c.window), "full_attention": causal_mask(T, 0)}
        if groups is not None:
            same = (groups[:, None] == groups[None, :]) & (groups[:, None] >= 0)
            masks["sliding_attention"] = masks["sliding_attention"] | same
        ropes = {t: None for t in masks}
        kv = {}
        for l, layer in enumerate(self.layers):
            t = c.layer_types[l]
            if ropes[t] is None:
                ropes[t] = c.rope_for(l, pos)
            x = layer(x, *ropes[t], masks[t], kv, None if pli is None else pli[:, :, l])
        h = rms_norm(x, self.norm)
        logits = h @ self.embed_tokens.t()
        if c.softcap:
            logits = c.softcap * torch.tanh(logits / c.softcap)
        return logits, h, kv

    def tensors(self, prefix="model.language_model."):
        """name -> tensor in the Hugging Face layout."""
        out = {prefix + "embed_tokens.weight": self.embed_tokens, prefix + "norm.weight": self.norm}
        if self.c.ple:
            out[prefix + "embed_tokens_per_layer.weight"] = self.embed_tokens_per_layer
            out[prefix + "per_layer_model_projection.weight"] = self.per_layer_model_projection.weight
            out[prefix + "per_layer_projection_norm.weight"] = self.per_layer_projection_norm
        for l, layer in enumerate(self.layers):
            out.update(layer_tensors(layer, f"{prefix}layers.{l}."))
        return out


def layer_tensors(layer, p):
    out = {}
    for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
              "post_feedforward_layernorm", "post_per_layer_input_norm"):
        if hasattr(layer, n):
            out[p + n + ".weight"] = getattr(layer, n)
    out[p + "layer_scalar"] = layer.layer_scalar
    for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
        if hasattr(layer, n):
            out[p + "self_attn." + n + ".weight"] = getattr(layer, n).weight
    out[p + "self_attn.q_norm.weight"] = layer.q_norm
    if hasattr(layer, "k_norm"):
        out[p + "self_attn.k_norm.weight"] = layer.k_norm
    for n in ("gate_proj", "up_proj", "down_proj"):
        out[p + "mlp." + n + ".weight"] = getattr(layer, n).weight
    if hasattr(layer, "per_layer_input_gate"):
        out[p + "per_layer_input_gate.weight"] = layer.per_layer_input_gate.weight
        out[p + "per_layer_projection.weight"] = layer.per_layer_projection.weight
    return out


class Assistant(nn.Module):
    """The gemma4_assistant drafter (GEMMA4.md section 5): Q-only layers over the target's K/V, fed the target's
    embedding of the last token beside a hidden state (the target's final-normed one at step 0, its own
    post-projection after), with a tied head over its own embedding and no soft-cap."""

    def __init__(self, c, target_c):
        super().__init__()
        self.c, self.tc = c, target_c
        self.embed_tokens = nn.Parameter(torch.randn(c.vocab, c.hidden) * 0.02)
        self.layers = nn.ModuleList(Layer(c, l, q_only=True) for l in range(c.n_layers))
        self.norm = nn.Parameter(torch.ones(c.hidden))
        self.pre_projection = linear(2 * target_c.hidden, c.hidden)
        self.post_projection = linear(c.hidden, target_c.hidden)

    def target_layer(self, l):
        """The target layer whose cache drafter layer l reads: the last cache-owning one of its type."""
        tc = self.tc
        first_shared = tc.n_layers - tc.kv_shared
        return max(j for j in range(first_shared) if tc.layer_types[j] == self.c.layer_types[l])

    def step(self, emb_t, h, P, kv_t, masks):
        """One draft step for every query: emb_t [B, T, H_t] (target embedding, scaled), h [B, T, H_t],
        P [T] query positions, masks per layer type [T, Tk]. Returns (logits, next h)."""
        x = self.pre_projection(torch.cat([emb_t, h], -1))
        for l, layer in enumerate(self.layers):
            cos, sin = self.c.rope_for(l, P)
            x = layer(x, cos, sin, masks[self.c.layer_types[l]], None, kv_given=kv_t[self.target_layer(l)])
        y = rms_norm(x, self.norm)
        return y @ self.embed_tokens.t(), self.post_projection(y)

    def config(self, dtype):
        tc = self.c.text_config(dtype)
        tc["final_logit_softcapping"] = None
        tc["num_kv_shared_layers"] = self.c.n_layers
        return {"architectures": ["Gemma4AssistantForCausalLM"], "model_type": "gemma4_assistant",
                "backbone_hidden_size": self.tc.hidden, "text_config": tc, "tie_word_embeddings": True,
                "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": [1, 106], "dtype": dtype,
                "use_ordered_embeddings": False}

    def tensors(self):
        out = {"model.embed_tokens.weight": self.embed_tokens, "model.norm.weight": self.norm,
               "pre_projection.weight": self.pre_projection.weight,
               "post_projection.weight": self.post_projection.weight}
        for l, layer in enumerate(self.layers):
            out.update(layer_tensors(layer, f"model.layers.{l}."))
        return out


def target_config(c, dtype):
    tc = c.text_config(dtype)
    return {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "text_config": tc,
            "vision_config": None, "audio_config": None, "tie_word_embeddings": True, "pad_token_id": 0,
            "bos_token_id": 2, "eos_token_id": [1, 106], "dtype": dtype}


def save_safetensors(path, tensors, dtype):
    """Writes name -> tensor as safetensors in bfloat16 or float32 (sorted names, 8-byte aligned header)."""
    tdt = {"bfloat16": torch.bfloat16, "float32": torch.float32}[dtype]
    code = {"bfloat16": "BF16", "float32": "F32"}[dtype]
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to(tdt).contiguous()
        b = t.view(torch.int16).numpy().tobytes() if tdt == torch.bfloat16 else t.numpy().tobytes()
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        raw = bytearray(data[a:b])
        if e["dtype"] not in ("BF16", "F32"):
            continue  # (the centroid ordering, I64, is not used here)
        if e["dtype"] == "BF16":
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16).float()
        else:
            t = torch.frombuffer(raw, dtype=torch.float32).clone()
        out[name] = t.view(e["shape"])
    return out


def assign(tensors_of_model, loaded):
    """Copies loaded tensors into a model's parameters (names as tensors() gives them)."""
    with torch.no_grad():
        for name, p in tensors_of_model.items():
            p.copy_(loaded[name].to(p.dtype).view(p.shape))
