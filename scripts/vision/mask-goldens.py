"""mask-goldens.py — golden logits for the larger Gemma 4 models' image mask (use_bidirectional_attention "vision"):
the oracle tiny target (tests/data/oracle/tiny-v4096-f32: window 8, per-layer inputs, KV sharing) run by the
project's independent PyTorch decoder (scripts/train-demo/gemma4.py, written from GEMMA4.md) over a prompt whose
positions 5..16 are one image's 12 soft tokens — longer than the window, so on sliding layers they see each other
both ways and past the window, as Hugging Face's create_causal_mask_mapping ORs "same image" into the sliding mask
(full layers stay causal).

Writes tests/data/vision-mask/: case.json (ids, the span), soft_rows.bin (float32 [12][128]) and logits.bin (float32
[24][4096], after the soft-cap).
usage: /usr/bin/python3 scripts/vision/mask-goldens.py (Debian's python3-torch)"""
import json
import os
import sys

import torch

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(root, "scripts", "train-demo"))
import gemma4  # noqa: E402

src = os.path.join(root, "tests", "data", "oracle", "tiny-v4096-f32")
out = os.path.join(root, "tests", "data", "vision-mask")
tc = json.load(open(os.path.join(src, "config.json")))["text_config"]
c = gemma4.Config(vocab=tc["vocab_size"], hidden=tc["hidden_size"], layer_types=tc["layer_types"],
                  heads=tc["num_attention_heads"], kv_heads=tc["num_key_value_heads"], head_dim=tc["head_dim"],
                  global_head_dim=tc["global_head_dim"], intermediate=tc["intermediate_size"],
                  double_wide=tc["use_double_wide_mlp"], ple=tc["hidden_size_per_layer_input"],
                  kv_shared=tc["num_kv_shared_layers"], window=tc["sliding_window"],
                  softcap=tc["final_logit_softcapping"])
m = gemma4.Gemma4(c)
gemma4.assign(m.tensors(), gemma4.load_safetensors(os.path.join(src, "model.safetensors")))

T, at, n = 24, 5, 12
g = torch.Generator().manual_seed(7)
ids = torch.randint(3, c.vocab, (T,), generator=g)
ids[at:at + n] = tc["pad_token_id"] if "pad_token_id" in tc else 0
where = torch.zeros(T, dtype=torch.bool)
where[at:at + n] = True
rows = torch.randn(n, c.hidden, generator=g)
groups = torch.full((T,), -1)
groups[at:at + n] = 0
with torch.no_grad():
    logits, _, _ = m(ids[None], soft=(where, rows), groups=groups)
os.makedirs(out, exist_ok=True)
json.dump({"ids": ids.tolist(), "span": {"pos": at, "n": n}, "model": "oracle/tiny-v4096-f32",
           "config": {"use_bidirectional_attention": "vision"}}, open(os.path.join(out, "case.json"), "w"), indent=1)
rows.float().numpy().tofile(os.path.join(out, "soft_rows.bin"))
logits[0].float().numpy().tofile(os.path.join(out, "logits.bin"))
print("wrote", out)
