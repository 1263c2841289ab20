#!/usr/bin/python3
"""vision-goldens.py — the vision tower's goldens in tests/data/vision, from the independent float reference
(scripts/vision/reference.py, Hugging Face's semantics read from transformers' source):

  tower-tiny/          a random tower (scripts/vision/make-tower.py: hidden 64, 2 layers, 4 heads over 2 key/value
                       heads of 16, clipped linears, standardize), Hugging Face layout, float32
  IMAGE.png            test pictures of several sizes and aspect ratios (made here, seeded); other.png is
                       image/photo.png mirrored (the server test's second picture of one size)
  IMAGE.BUDGET.emb.bin float32 [tokens][96]: the rows embed_vision gives for IMAGE at BUDGET soft tokens
  index.json           every case with the resized size and token count the processor chose

Run from the repository root: /usr/bin/python3 scripts/vision/vision-goldens.py (needs python3-numpy, -torch, -pil)."""
import json
import os
import subprocess
import sys

import numpy as np
from PIL import Image

root = "tests/data/vision"
tower = os.path.join(root, "tower-tiny")
if not os.path.exists(os.path.join(tower, "model.safetensors")):
    subprocess.run([sys.executable, "scripts/vision/make-tower.py", tower, "--hidden", "64", "--layers", "2",
                    "--heads", "4", "--kv-heads", "2", "--head-dim", "16", "--inter", "128", "--text-hidden", "96",
                    "--pos", "256", "--seed", "3", "--clipped", "--standardize"], check=True)

rng = np.random.default_rng(11)


def picture(w, h):
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    planes = [128 + 90 * np.sin(x / (9 + 4 * k) - y / (13 + 2 * k)) + rng.normal(0, 20, (h, w)) for k in range(3)]
    return Image.fromarray(np.clip(np.stack(planes, -1), 0, 255).astype(np.uint8), "RGB")


images = {"square.png": (200, 200), "tall.png": (48, 400), "wide.png": (500, 60)}
for name, (w, h) in images.items():
    picture(w, h).save(os.path.join(root, name))
# Another picture of photo.png's size (the server test's second image: same token count, other pixels).
Image.open("tests/data/image/photo.png").transpose(Image.FLIP_LEFT_RIGHT).save(os.path.join(root, "other.png"))

cases = [("square.png", 70), ("square.png", 280), ("tall.png", 140), ("wide.png", 280), ("../image/photo.png", 70),
         ("../image/alpha.png", 140), ("../image/photo.png", 1120)]
index = []
for image, budget in cases:
    base = os.path.basename(image).rsplit(".", 1)[0]
    out = os.path.join(root, f"{base}.{budget}.emb.bin")
    r = subprocess.run([sys.executable, "scripts/vision/reference.py", tower, os.path.join(root, image), out,
                        "--budget", str(budget)], check=True, capture_output=True, text=True)
    fields = dict(kv.split("=") for kv in r.stdout.split() if "=" in kv)
    index.append({"image": os.path.normpath(os.path.join("vision", image)), "budget": budget,
                  "tokens": int(fields["tokens"]), "width": int(fields["width"]), "height": int(fields["height"]),
                  "golden": os.path.join("vision", os.path.basename(out))})
    print(index[-1])
with open(os.path.join(root, "index.json"), "w") as f:
    json.dump({"tower": "vision/tower-tiny", "text_hidden": 96, "cases": index}, f, indent=1)
