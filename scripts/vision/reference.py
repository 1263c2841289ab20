#!/usr/bin/python3
"""A float64 reference of Gemma 4's image path as Hugging Face transformers defines it: the image processor (PIL
backend) and the vision tower with its projection into the text model (`embed_vision`). Written from reading
transformers' source, not from tern's C code, so the C side can be tested against it.

    /usr/bin/python3 scripts/vision/reference.py MODEL_DIR IMAGE_FILE OUT.bin [--budget N] [--pixels-out P.bin]
                                                [--tower-out T.bin] [--padded]

MODEL_DIR   Hugging Face layout: config.json ("vision_config", "text_config"), optional processor_config.json,
            one or more *.safetensors (F32 / F16 / BF16) holding model.vision_tower.* and model.embed_vision.*
            (names without the leading "model." — as mlx-vlm saves them — are accepted too).
IMAGE_FILE  any file Pillow opens.
OUT.bin     float32 little-endian [tokens][text_config.hidden_size]: the rows that replace the <|image|> tokens.
--budget N  max_soft_tokens (one of 70, 140, 280, 560, 1120); default from processor_config.json, else 280.
--pixels-out  the resized image as uint8 RGB [H'][W'][3] (Pillow's bicubic resize, byte for byte).
--tower-out   the vision tower's output before embed_vision, float32 [tokens][vision_config.hidden_size].
--padded      run the padded layout the HF processor produces (patches padded to max_patches with position (-1,-1),
              masked in attention, stripped after pooling). It gives the same numbers as the default (real patches
              only); the flag exists to show that.

Prints: tokens=T height=H' width=W' patches=Hp x Wp

Sources followed (huggingface/transformers, src/transformers/):
  models/gemma4/image_processing_pil_gemma4.py  get_aspect_ratio_preserving_size, Gemma4ImageProcessorPil
                                                (_preprocess, aspect_ratio_preserving_resize),
                                                convert_image_to_patches, pad_along_first_dim
  models/gemma4/processing_gemma4.py            Gemma4Processor.__call__ (image_processor.fetch_images, the
                                                <|image> + n x <|image|> + <image|> expansion)
  image_processing_base.py                      ImageProcessingMixin.fetch_images -> image_utils.load_image
  image_utils.py                                load_image (ImageOps.exif_transpose, then .convert("RGB"))
  image_processing_backends.py                  PilBackend.process_image (convert_to_rgb, HWC -> CHW)
  image_transforms.py                           convert_to_rgb, resize (PIL resize, reducing_gap=None), rescale,
                                                normalize
  models/gemma4/configuration_gemma4.py         Gemma4VisionConfig defaults
  models/gemma4/modeling_gemma4.py              Gemma4VisionModel.forward, Gemma4VisionPatchEmbedder,
                                                Gemma4VisionEncoder, Gemma4VisionEncoderLayer, Gemma4VisionAttention,
                                                Gemma4VisionRotaryEmbedding, apply_multidimensional_rope,
                                                Gemma4VisionMLP, Gemma4ClippableLinear, Gemma4RMSNorm,
                                                Gemma4VisionPooler, Gemma4MultimodalEmbedder, Gemma4Model
                                                (get_image_features)
Everything is computed in float64 from the stored weights (HF computes in the weights' dtype, RMSNorm and RoPE
tables in float32), so an exact float32 implementation should agree to float32 rounding.
"""
import argparse
import json
import math
import struct
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageOps

torch.set_num_threads(1)  # be a quiet neighbour on a small machine
F64 = torch.float64

# image_processing_pil_gemma4.py: _SUPPORTED_SOFT_TOKENS; Gemma4ImageProcessorPil.__init__ and _preprocess raise
# ValueError for any other max_soft_tokens.
SUPPORTED_SOFT_TOKENS = (70, 140, 280, 560, 1120)

# configuration_gemma4.py, Gemma4VisionConfig: the field defaults a config.json may leave out. Note head_dim defaults
# to 64 (a class default), not hidden_size // num_attention_heads; and the RoPE base lives in
# rope_parameters["rope_theta"] (default {"rope_type": "default", "rope_theta": 100.0} from __post_init__).
VISION_DEFAULTS = {
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 16,
    "num_attention_heads": 12,
    "num_key_value_heads": 12,
    "head_dim": 64,
    "hidden_activation": "gelu_pytorch_tanh",
    "rms_norm_eps": 1e-6,
    "pooling_kernel_size": 3,
    "patch_size": 16,
    "position_embedding_size": 10 * 1024,
    "use_clipped_linears": False,
    "standardize": False,
}

# image_processing_pil_gemma4.py, Gemma4ImageProcessorPil class attributes: the defaults when processor_config.json
# is absent or leaves a key out. resample 3 = PIL.Image.BICUBIC. do_normalize is False: the model rescales to [-1, 1]
# itself (Gemma4VisionPatchEmbedder.forward).
PROCESSOR_DEFAULTS = {
    "do_resize": True,
    "resample": 3,
    "do_rescale": True,
    "rescale_factor": 1 / 255,
    "do_normalize": False,
    "image_mean": [0.0, 0.0, 0.0],
    "image_std": [1.0, 1.0, 1.0],
    "do_convert_rgb": True,
    "patch_size": 16,
    "max_soft_tokens": 280,
    "pooling_kernel_size": 3,
}


# ---------------------------------------------------------------------------------------------------------------
# Configuration and weights
# ---------------------------------------------------------------------------------------------------------------

def read_configs(model_dir):
    cfg = json.loads((model_dir / "config.json").read_text())
    if "vision_config" not in cfg or cfg["vision_config"] is None:
        sys.exit(f"{model_dir}/config.json has no vision_config: this model takes no images")
    vc = dict(VISION_DEFAULTS)
    vc.update(cfg["vision_config"])
    rope = vc.get("rope_parameters") or {"rope_type": "default", "rope_theta": vc.get("rope_theta", 100.0)}
    if rope.get("rope_type", "default") != "default":
        # Gemma4VisionRotaryEmbedding uses ROPE_INIT_FUNCTIONS for other types; no Gemma 4 checkpoint does.
        sys.exit(f"vision rope_type {rope['rope_type']!r} is not implemented here")
    vc["rope_theta"] = float(rope.get("rope_theta", 100.0))
    text_hidden = cfg["text_config"]["hidden_size"]

    # processor_config.json nests the image processor's settings under "image_processor" (ProcessorMixin layout, as
    # Gemma4Processor.save_pretrained writes it); an older standalone preprocessor_config.json holds them flat.
    pc = dict(PROCESSOR_DEFAULTS)
    if (model_dir / "processor_config.json").exists():
        pc.update(json.loads((model_dir / "processor_config.json").read_text()).get("image_processor") or {})
    elif (model_dir / "preprocessor_config.json").exists():
        pc.update(json.loads((model_dir / "preprocessor_config.json").read_text()))
    return vc, text_hidden, pc


def read_safetensors(paths, want):
    """Tensors whose name (with any leading "model." removed) satisfies want(name), as float64 torch tensors.
    Format: 8-byte little-endian header length, JSON header {name: {dtype, shape, data_offsets}}, raw data.
    Only the wanted tensors are read, so a full multi-gigabyte checkpoint costs little memory."""
    out = {}
    for path in paths:
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            base = 8 + n
            for name, t in header.items():
                if name == "__metadata__":
                    continue
                short = name[len("model."):] if name.startswith("model.") else name
                if not want(short):
                    continue
                b, e = t["data_offsets"]
                f.seek(base + b)
                buf = f.read(e - b)
                dt = t["dtype"]
                if dt == "BF16":  # bfloat16 is the top half of a float32
                    a = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
                elif dt == "F16":
                    a = np.frombuffer(buf, dtype="<f2")
                elif dt == "F32":
                    a = np.frombuffer(buf, dtype="<f4")
                elif dt == "F64":
                    a = np.frombuffer(buf, dtype="<f8")
                else:
                    sys.exit(f"{path}: tensor {name} has dtype {dt}, not a float type this script reads")
                out[short] = torch.from_numpy(a.astype(np.float64).reshape(t["shape"]))
    return out


def load_weights(model_dir):
    paths = sorted(model_dir.glob("*.safetensors"))
    if not paths:
        sys.exit(f"{model_dir}: no *.safetensors")
    return read_safetensors(paths, lambda s: s.startswith(("vision_tower.", "embed_vision.")))


# ---------------------------------------------------------------------------------------------------------------
# Image processor (PIL backend)
# ---------------------------------------------------------------------------------------------------------------

def load_image(path):
    """Gemma4Processor.__call__ passes images through image_processor.fetch_images; for a path string that is
    image_utils.load_image: PIL.Image.open, ImageOps.exif_transpose (EXIF orientation applied), .convert("RGB").
    (A caller passing an already opened PIL image skips load_image, so no EXIF transpose happens there.)
    convert("RGB") drops an alpha channel: transparent pixels keep whatever colour is stored under them. Nothing is
    composited on white: image_transforms.convert_to_rgb, which PilBackend.process_image calls next (do_convert_rgb),
    is a plain image.convert("RGB") as well and a no-op for an RGB image. The composite-on-white variant of
    convert_to_rgb exists only as private copies in other models (idefics2, mllama, ...)."""
    im = Image.open(path)
    im = ImageOps.exif_transpose(im)
    im = im.convert("RGB")
    return im


def target_size(height, width, patch_size, max_patches, k):
    """image_processing_pil_gemma4.py: get_aspect_ratio_preserving_size, operation for operation (Python floats are
    IEEE doubles; keep this order of operations to reproduce the floor at exact multiples)."""
    total_px = height * width
    target_px = max_patches * (patch_size ** 2)
    factor = math.sqrt(target_px / total_px)
    ideal_height = factor * height
    ideal_width = factor * width
    side_mult = k * patch_size
    target_height = int(math.floor(ideal_height / side_mult)) * side_mult
    target_width = int(math.floor(ideal_width / side_mult)) * side_mult
    if target_height == 0 and target_width == 0:
        raise ValueError(f"resizing {height}x{width} to 0x0")
    # A side that rounds to zero becomes one side_mult; the other side is then recomputed from the raw aspect ratio
    # (floor(long / short) side_mults), capped at max_soft_tokens side_mults.
    max_side_length = (max_patches // k ** 2) * side_mult
    if target_height == 0:
        target_height = side_mult
        target_width = min(int(math.floor(width / height)) * side_mult, max_side_length)
    elif target_width == 0:
        target_width = side_mult
        target_height = min(int(math.floor(height / width)) * side_mult, max_side_length)
    if target_height * target_width > target_px:
        raise ValueError(f"resizing {height}x{width} to {target_height}x{target_width} exceeds {max_patches} patches")
    return target_height, target_width


def preprocess(im, pc, budget):
    """Gemma4ImageProcessorPil._preprocess for one image. Returns the resized uint8 [H', W', 3], the patches
    float64 [Hp*Wp, p*p*3] (after rescale / normalize, before the model's own 2x-1) and positions int64 [Hp*Wp, 2]."""
    p, k = int(pc["patch_size"]), int(pc["pooling_kernel_size"])
    max_patches = budget * k ** 2
    if pc["do_resize"]:
        w, h = im.size
        th, tw = target_size(h, w, p, max_patches, k)
        if (th, tw) != (h, w):  # aspect_ratio_preserving_resize returns the image untouched when the size matches
            # image_transforms.resize: to_pil_image (uint8 stays uint8, no rescale) then
            # PIL resize((width, height), resample, reducing_gap=None) — Pillow's own uint8 resampler.
            im = im.resize((tw, th), resample=int(pc["resample"]), reducing_gap=None)
    rgb = np.asarray(im, dtype=np.uint8)  # [H', W', 3]
    H, W = rgb.shape[:2]
    if H % p or W % p:
        sys.exit(f"image {W}x{H} is not a multiple of patch_size {p} (do_resize is off?)")

    x = rgb.astype(np.float64)
    if pc["do_rescale"]:
        x = x * float(pc["rescale_factor"])  # image_transforms.rescale: astype(float64) * scale (then float32 in HF)
    if pc["do_normalize"]:
        mean, std = np.asarray(pc["image_mean"], np.float64), np.asarray(pc["image_std"], np.float64)
        x = (x - mean) / std  # image_transforms.normalize, per channel

    # convert_image_to_patches: (C, H, W) -> (C, Hp, p, Wp, p) -> (Hp, Wp, p, p, C) -> (Hp*Wp, p*p*C): patch index
    # py*Wp + px (row-major), and inside a patch the columns run (ky, kx, channel). Starting from HWC here.
    Hp, Wp = H // p, W // p
    patches = x.reshape(Hp, p, Wp, p, 3).transpose(0, 2, 1, 3, 4).reshape(Hp * Wp, p * p * 3)

    # Step 5 of _preprocess: np.meshgrid(arange(Wp), arange(Hp), indexing="xy") stacked as (x, y): position [..., 0]
    # is the column px, [..., 1] the row py.
    gx, gy = np.meshgrid(np.arange(Wp), np.arange(Hp), indexing="xy")
    positions = np.stack([gx, gy], axis=-1).reshape(Hp * Wp, 2).astype(np.int64)
    return rgb, patches, positions, (Hp, Wp)


def pad_patches(patches, positions, max_patches):
    """pad_along_first_dim: zero pixels and (-1, -1) positions up to max_patches, as the processor ships them."""
    n = patches.shape[0]
    if n >= max_patches:
        return patches, positions
    patches = np.concatenate([patches, np.zeros((max_patches - n, patches.shape[1]))], 0)
    positions = np.concatenate([positions, np.full((max_patches - n, 2), -1, np.int64)], 0)
    return patches, positions


# ---------------------------------------------------------------------------------------------------------------
# Vision tower
# ---------------------------------------------------------------------------------------------------------------

def rms_norm(x, weight, eps):
    """Gemma4RMSNorm: x * (mean(x^2) + eps)^-0.5, times the weight as stored (no 1 + w), or no weight at all
    (with_scale=False: the attention's v_norm and embed_vision's embedding_pre_projection_norm)."""
    y = x * torch.pow(x.pow(2).mean(-1, keepdim=True) + eps, -0.5)
    return y * weight if weight is not None else y


def activation(name):
    """activations.ACT2FN for the names a vision_config may carry."""
    if name in ("gelu_pytorch_tanh", "gelu_new", "gelu_fast"):
        return lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))
    if name == "gelu":
        return lambda x: 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    if name == "quick_gelu":
        return lambda x: x * torch.sigmoid(1.702 * x)
    if name in ("silu", "swish"):
        return lambda x: x * torch.sigmoid(x)
    if name == "relu":
        return torch.relu
    sys.exit(f"hidden_activation {name!r} is not implemented here")


class Tower:
    def __init__(self, vc, W):
        self.vc, self.W = vc, W
        self.H = int(vc["hidden_size"])
        self.nH, self.nKV, self.hd = int(vc["num_attention_heads"]), int(vc["num_key_value_heads"]), int(vc["head_dim"])
        self.eps = float(vc["rms_norm_eps"])
        self.clipped = bool(vc["use_clipped_linears"])
        self.act = activation(vc["hidden_activation"])
        if self.hd % 4:
            # apply_multidimensional_rope splits head_dim into 2 parts of 2*(head_dim // 4); torch.split fails unless
            # they cover head_dim.
            sys.exit(f"head_dim {self.hd} is not a multiple of 4; HF's 2D RoPE cannot split it")
        if self.nH % self.nKV:
            sys.exit(f"num_attention_heads {self.nH} is not a multiple of num_key_value_heads {self.nKV}")

    def w(self, name):
        if name not in self.W:
            sys.exit(f"checkpoint has no tensor model.{name}")
        return self.W[name]

    def linear(self, x, prefix):
        """Gemma4ClippableLinear: nn.Linear without bias at PREFIX.linear.weight; with use_clipped_linears the input
        is clamped to [input_min, input_max] and the output to [output_min, output_max] (scalar buffers at
        PREFIX.input_min ...; a checkpoint without them keeps the +-inf initialisation of _init_weights). Without
        use_clipped_linears any stored bounds are unused (unexpected keys)."""
        if self.clipped:
            lo, hi = self.W.get(prefix + ".input_min"), self.W.get(prefix + ".input_max")
            if lo is not None:
                x = torch.maximum(x, lo.reshape(()))
            if hi is not None:
                x = torch.minimum(x, hi.reshape(()))
        y = x @ self.w(prefix + ".linear.weight").T
        if self.clipped:
            lo, hi = self.W.get(prefix + ".output_min"), self.W.get(prefix + ".output_max")
            if lo is not None:
                y = torch.maximum(y, lo.reshape(()))
            if hi is not None:
                y = torch.minimum(y, hi.reshape(()))
        return y

    def patch_embed(self, pixels, positions, pad):
        """Gemma4VisionPatchEmbedder.forward: 2 * (pixels - 0.5), input_proj (no bias), plus the learned 2D position
        embedding table[0][x] + table[1][y] (the one-hot matmul of _position_embeddings, positions clamped at 0),
        zeroed on padding patches."""
        h = (2.0 * (pixels - 0.5)) @ self.w("vision_tower.patch_embedder.input_proj.weight").T
        table = self.w("vision_tower.patch_embedder.position_embedding_table")  # [2, P, H]
        P = table.shape[1]
        cp = positions.clamp(min=0)
        if int(cp.max()) >= P:
            # F.one_hot(..., num_classes=position_embedding_size) raises for a position past the table.
            sys.exit(f"patch position {int(cp.max())} does not fit position_embedding_size {P}")
        pe = table[0][cp[:, 0]] + table[1][cp[:, 1]]
        pe = torch.where(pad[:, None], torch.zeros((), dtype=F64), pe)
        return h + pe

    def rope_tables(self, positions):
        """Gemma4VisionRotaryEmbedding: each spatial axis gets the full frequency range of a head_dim/2-wide
        rotation, inv_freq[j] = theta^(-2j / (head_dim/2)); cos/sin are [cat(f, f) for x, cat(f, f) for y]."""
        spatial = self.hd // 2
        inv_freq = 1.0 / self.vc["rope_theta"] ** (torch.arange(0, spatial, 2, dtype=F64) / spatial)
        cos, sin = [], []
        for axis in range(2):
            f = positions[:, axis].to(F64)[:, None] * inv_freq[None, :]
            emb = torch.cat([f, f], -1)
            cos.append(emb.cos())
            sin.append(emb.sin())
        return torch.cat(cos, -1), torch.cat(sin, -1)  # [N, head_dim]

    @staticmethod
    def rope(x, cos, sin):
        """apply_multidimensional_rope: head dims [0, hd/2) rotate with x (the column), [hd/2, hd) with y (the row);
        within each part rotate_half pairs element i with i + hd/4."""
        half = x.shape[-1] // 2
        parts = []
        for a in range(2):
            xp = x[..., a * half:(a + 1) * half]
            c, s = cos[:, None, a * half:(a + 1) * half], sin[:, None, a * half:(a + 1) * half]
            q = half // 2
            rot = torch.cat([-xp[..., q:], xp[..., :q]], -1)
            parts.append(xp * c + rot * s)
        return torch.cat(parts, -1)

    def attention(self, x, i, cos, sin, key_valid):
        """Gemma4VisionAttention: q/k/v projections (clippable), per-head RMSNorm with weight on q and k, without
        weight on v, 2D RoPE on q and k, scaling 1.0 (no 1/sqrt(d)), bidirectional softmax over the image's patches
        (padding keys masked: create_bidirectional_mask from ~padding_positions), o_proj."""
        pre = f"vision_tower.encoder.layers.{i}.self_attn"
        N = x.shape[0]
        q = self.linear(x, pre + ".q_proj").view(N, self.nH, self.hd)
        k = self.linear(x, pre + ".k_proj").view(N, self.nKV, self.hd)
        v = self.linear(x, pre + ".v_proj").view(N, self.nKV, self.hd)
        q = self.rope(rms_norm(q, self.w(pre + ".q_norm.weight"), self.eps), cos, sin)
        k = self.rope(rms_norm(k, self.w(pre + ".k_norm.weight"), self.eps), cos, sin)
        v = rms_norm(v, None, self.eps)
        rep = self.nH // self.nKV  # repeat_kv: query head h reads kv head h // rep
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) * 1.0
        if key_valid is not None:
            scores = scores.masked_fill(~key_valid[None, None, :], float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        o = torch.einsum("hqk,khd->qhd", probs, v).reshape(N, self.nH * self.hd)
        return self.linear(o, pre + ".o_proj")

    def layer(self, h, i, cos, sin, key_valid):
        """Gemma4VisionEncoderLayer: sandwich norms around attention and the gated MLP, each added to the residual.
        Gemma4VisionMLP: down_proj(act(gate_proj(x)) * up_proj(x)), all three clippable."""
        pre = f"vision_tower.encoder.layers.{i}"
        a = rms_norm(h, self.w(pre + ".input_layernorm.weight"), self.eps)
        a = self.attention(a, i, cos, sin, key_valid)
        h = h + rms_norm(a, self.w(pre + ".post_attention_layernorm.weight"), self.eps)
        m = rms_norm(h, self.w(pre + ".pre_feedforward_layernorm.weight"), self.eps)
        m = self.linear(self.act(self.linear(m, pre + ".mlp.gate_proj")) * self.linear(m, pre + ".mlp.up_proj"),
                        pre + ".mlp.down_proj")
        return h + rms_norm(m, self.w(pre + ".post_feedforward_layernorm.weight"), self.eps)

    def pool(self, h, positions, pad, output_length):
        """Gemma4VisionPooler: zero the padding rows, average k x k blocks of the patch grid by position
        (_avg_pool_by_positions: k = isqrt(N // output_length); block index x//k + (max_x // k) * (y//k) with max_x
        the largest clamped x plus one; weights 1/k^2), multiply by sqrt(hidden_size). Returns the pooled rows and
        the mask of blocks that received any patch (Gemma4VisionModel.forward keeps only those)."""
        h = h.masked_fill(pad[:, None], 0.0)
        N = h.shape[0]
        if N == output_length:
            # HF returns padding_positions as the "valid" mask in this branch (reachable only with
            # pooling_kernel_size 1), which would select the padding rows; not reproduced here.
            raise SystemExit("pooling_kernel_size 1 (no pooling) is not supported by this reference")
        k = int((N // output_length) ** 0.5)
        if k * k * output_length != N:
            raise SystemExit(f"cannot pool {N} patches to {output_length}")
        cp = positions.clamp(min=0)
        max_x = cp[:, 0].max() + 1
        kidx = torch.div(cp, k, rounding_mode="floor")
        kidx = kidx[:, 0] + (max_x // k) * kidx[:, 1]
        weights = torch.nn.functional.one_hot(kidx, output_length).to(F64) / (k * k)  # [N, L]
        pooled = weights.T @ h
        valid = ~(weights == 0).all(dim=0)
        return pooled * (self.H ** 0.5), valid

    def forward(self, pixels, positions, output_length):
        """Gemma4VisionModel.forward, then Gemma4MultimodalEmbedder (Gemma4Model.get_image_features)."""
        pad = (positions == -1).all(dim=-1)
        key_valid = ~pad if bool(pad.any()) else None
        h = self.patch_embed(pixels, positions, pad)
        # Gemma4VisionEncoder: one RoPE table from the (x, y) positions, shared by every layer.
        cos, sin = self.rope_tables(positions)
        for i in range(int(self.vc["num_hidden_layers"])):
            h = self.layer(h, i, cos, sin, key_valid)
        h, valid = self.pool(h, positions, pad, output_length)
        h = h[valid]
        if self.vc["standardize"]:
            h = (h - self.w("vision_tower.std_bias")) * self.w("vision_tower.std_scale")
        tower = h
        # Gemma4MultimodalEmbedder: RMSNorm without weight (eps = vision rms_norm_eps), then embedding_projection
        # [text_hidden, vision_hidden], no bias. The rows replace the <|image|> embeddings as they are.
        e = rms_norm(h, None, self.eps) @ self.w("embed_vision.embedding_projection.weight").T
        return tower, e


# ---------------------------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("image", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--budget", type=int, help="max_soft_tokens (70, 140, 280, 560 or 1120)")
    ap.add_argument("--pixels-out", type=Path, help="write the resized uint8 RGB image [H'][W'][3]")
    ap.add_argument("--tower-out", type=Path, help="write the tower output before embed_vision, float32")
    ap.add_argument("--padded", action="store_true", help="run the processor's padded layout (same result)")
    args = ap.parse_args()

    vc, text_hidden, pc = read_configs(args.model_dir)
    budget = args.budget if args.budget is not None else int(pc["max_soft_tokens"])
    if budget not in SUPPORTED_SOFT_TOKENS:
        sys.exit(f"max_soft_tokens must be one of {SUPPORTED_SOFT_TOKENS}, got {budget}")
    if (int(pc["patch_size"]), int(pc["pooling_kernel_size"])) != (int(vc["patch_size"]),
                                                                   int(vc["pooling_kernel_size"])):
        sys.exit("processor and vision_config disagree on patch_size / pooling_kernel_size")

    rgb, patches, positions, (Hp, Wp) = preprocess(load_image(args.image), pc, budget)
    k = int(vc["pooling_kernel_size"])
    if Hp % k or Wp % k:
        sys.exit(f"patch grid {Hp}x{Wp} is not a multiple of the pooling kernel {k}")
    tokens = (Hp // k) * (Wp // k)  # num_soft_tokens_per_image: patches // k^2

    if args.padded:
        # The processor pads to max_patches; Gemma4VisionModel.forward then pools to max_patches // k^2 blocks and
        # drops the empty ones.
        patches, positions = pad_patches(patches, positions, budget * k * k)
    output_length = patches.shape[0] // (k * k)

    W = load_weights(args.model_dir)
    tower = Tower(vc, W)
    t, e = tower.forward(torch.from_numpy(patches), torch.from_numpy(positions), output_length)
    assert e.shape == (tokens, text_hidden), (tuple(e.shape), tokens, text_hidden)

    e.to(torch.float32).numpy().astype("<f4").tofile(args.out)
    if args.tower_out:
        t.to(torch.float32).numpy().astype("<f4").tofile(args.tower_out)
    if args.pixels_out:
        np.ascontiguousarray(rgb, dtype=np.uint8).tofile(args.pixels_out)
    H, Wd = rgb.shape[:2]
    print(f"tokens={tokens} height={H} width={Wd} patches={Hp} x {Wp}")


if __name__ == "__main__":
    main()
