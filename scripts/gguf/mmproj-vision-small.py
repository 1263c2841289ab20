"""mmproj-vision-small.py IN.gguf OUT.gguf — a smaller copy of the one-layer vision projector seed (the F16 file
llama.cpp's converter wrote, cut to one layer by mmproj-files.sh), for fuzz_gguf_mmproj_vision: patch size 16 -> 8,
position table 256 -> 16 rows, MLP width 128 -> 32, output width 96 -> 32, each tensor cut to its first rows and
columns and the clip.vision.* keys set to match; everything else as the converter wrote it. At 321 KB the original
made every execution of the target map fresh memory (the sanitizer's allocator serves blocks past 128 KB with mmap):
a fuzzer working from this one spends its time in the loader. Needs llama.cpp's gguf-py and numpy."""
import sys

import gguf
import numpy as np

PATCH, POSITIONS, MLP, OUT = 8, 16, 32, 32
KEYS = {"clip.vision.patch_size": PATCH, "clip.vision.feed_forward_length": MLP, "clip.vision.projection_dim": OUT}


def cut(name: str, a: np.ndarray) -> np.ndarray:
    """The tensor's leading part; numpy's axes are the GGUF dimensions reversed."""
    if name == "v.patch_embd.weight":  # [H, 3, p, p]
        return a[:, :, :PATCH, :PATCH]
    if name == "v.position_embd.weight":  # [2, P, H]
        return a[:, :POSITIONS, :]
    if name.endswith((".ffn_gate.weight", ".ffn_up.weight")):  # [I, H]
        return a[:MLP, :]
    if name.endswith(".ffn_down.weight"):  # [H, I]
        return a[:, :MLP]
    if name == "mm.input_projection.weight":  # [text, H]
        return a[:OUT, :]
    return a


def main(src: str, dst: str) -> None:
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, arch="clip")
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        t = f.types[0]
        if name in KEYS:
            w.add_uint32(name, KEYS[name])
        elif t == gguf.GGUFValueType.ARRAY:
            w.add_array(name, f.contents())
        else:
            w.add_key_value(name, f.contents(), t)
    for t in r.tensors:
        a = np.ascontiguousarray(cut(t.name, np.asarray(t.data).reshape(list(reversed(t.shape.tolist())))))
        w.add_tensor(t.name, a, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
