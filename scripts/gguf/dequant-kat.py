#!/usr/bin/env python3
"""dequant-kat.py OUT.bin GGUF... — known answers for tern's GGUF block dequantization.

For every block type found in the given GGUF files (llama-quantize output), the raw bytes of the first two rows of
the first tensor of that type and their values as llama.cpp's gguf-py dequantizes them (an implementation
independent of tern's). Record layout, repeated: u32 ggml type, u32 values n, u32 byte count b, b raw bytes,
n float32 values. Run with gguf-py on PYTHONPATH (llama.cpp's source: gguf-py/).
"""
import struct
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

out = sys.argv[1]
seen = {}
for path in sys.argv[2:]:
    for t in GGUFReader(path).tensors:
        ty = t.tensor_type
        if ty.name in ("F32", "F16", "BF16") or ty.value in seen or len(t.shape) < 2:
            continue
        row = int(t.shape[0])
        raw = np.asarray(t.data).reshape(-1).view(np.uint8)
        per_row = raw.size // int(np.prod(t.shape[1:]))
        raw2 = raw[: 2 * per_row].copy()
        vals = dequantize(raw2, ty).astype(np.float32).reshape(-1)
        assert vals.size == 2 * row, (ty.name, vals.size, row)
        seen[ty.value] = (raw2, vals)
        print(f"{ty.name}: {t.name} row {row} values, {per_row} bytes per row", file=sys.stderr)
with open(out, "wb") as f:
    for ty, (raw, vals) in sorted(seen.items()):
        f.write(struct.pack("<III", ty, vals.size, raw.size))
        f.write(raw.tobytes())
        f.write(vals.tobytes())
