"""split_experts.py IN.gguf OUT.gguf — a Gemma 4 GGUF with its fused gate-up experts (ffn_gate_up_exps, [E, 2I, H])
written as the separate gate and up experts (ffn_gate_exps, ffn_up_exps, [E, I, H] each) that llama.cpp's converter
writes for checkpoints storing every expert apart. Everything else is copied as it is (quantized blocks stay
blocks: a row of H weights is whole blocks, so splitting rows moves bytes only). Needs llama.cpp's gguf-py."""
import sys

import gguf
import numpy as np


def main(src: str, dst: str) -> None:
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    for f in r.fields.values():
        if f.name == "general.architecture" or f.name.startswith("GGUF."):
            continue
        kind = f.types[0]
        sub = f.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(f.name, f.contents(), kind, sub_type=sub)
    out = []
    for t in r.tensors:
        if t.name.endswith("ffn_gate_up_exps.weight"):
            half = t.data.shape[1] // 2  # data is [E, 2I, row] (bytes per row for quantized types)
            base = t.name[: -len("ffn_gate_up_exps.weight")]
            out.append((base + "ffn_gate_exps.weight", np.ascontiguousarray(t.data[:, :half]), t.tensor_type))
            out.append((base + "ffn_up_exps.weight", np.ascontiguousarray(t.data[:, half:]), t.tensor_type))
        else:
            out.append((t.name, t.data, t.tensor_type))
    for name, data, ttype in out:
        w.add_tensor_info(name, data.shape, data.dtype, data.nbytes, ttype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for _, data, _ in out:
        w.write_tensor_data(data)
    w.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
