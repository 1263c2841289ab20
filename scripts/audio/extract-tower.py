#!/usr/bin/env python3
"""extract-tower.py — copies a Gemma 4 checkpoint's audio tower into a small checkpoint of its own.

    extract-tower.py SRC_DIR OUT_DIR

OUT_DIR gets SRC_DIR's config.json and processor config unchanged and a model.safetensors holding only the tensors
`tern audio-embed` reads (model.audio_tower.* and model.embed_audio.*), byte for byte: the tests keep the shared
audio-tiny model's tower (2.6 MB) without its text decoder and vision tower (13 MB). Standard library only."""
import json
import os
import shutil
import struct
import sys


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(src, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        keep = sorted(k for k in header if k.startswith(("model.audio_tower.", "model.embed_audio.")))
        new, blobs, off = {}, [], 0
        for k in keep:
            b, e = header[k]["data_offsets"]
            f.seek(base + b)
            data = f.read(e - b)
            new[k] = {"dtype": header[k]["dtype"], "shape": header[k]["shape"], "data_offsets": [off, off + len(data)]}
            blobs.append(data)
            off += len(data)
    if "__metadata__" in header:
        new["__metadata__"] = header["__metadata__"]
    text = json.dumps(new, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)
    for name in ("config.json", "processor_config.json", "preprocessor_config.json"):
        if os.path.exists(os.path.join(src, name)):
            shutil.copyfile(os.path.join(src, name), os.path.join(out, name))
    print(f"{out}: {len(keep)} tensors, {off} bytes")


if __name__ == "__main__":
    main()
