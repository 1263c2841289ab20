#!/usr/bin/env bash
# mmproj-files.sh LLAMA_SRC — the GGUF audio projector files the tests read, made by llama.cpp's own converter
# (convert_hf_to_gguf.py --mmproj) from tests/data/audio/audio-tiny (the shared audio oracle model):
#   tests/data/gguf/mmproj-audio-tiny-f32.gguf           F32, checked against the audio oracle's embeddings;
#   tests/fuzz/corpus/fuzz_gguf_mmproj/mmproj-1blk.gguf  the F16 conversion cut to its first conformer block
#                                                        (block_count 1): a small seed for the fuzz target.
# LLAMA_SRC is llama.cpp's source (bench/llamacpp_build.sh puts it in ~/.cache/tern/llamacpp/src); needs
# python3-numpy and python3-torch.
set -euo pipefail
cd "$(dirname "$0")/../.."
src=${1:?usage: mmproj-files.sh LLAMA_SRC}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
convert() { # convert OUTTYPE OUT
    PYTHONPATH=bench/hf_standin:$src/gguf-py /usr/bin/python3 "$src/convert_hf_to_gguf.py" tests/data/audio/audio-tiny \
        --mmproj --outtype "$1" --outfile "$2" >&2
}
convert f32 tests/data/gguf/mmproj-audio-tiny-f32.gguf
convert f16 "$tmp/f16.gguf"
mkdir -p tests/fuzz/corpus/fuzz_gguf_mmproj
PYTHONPATH=$src/gguf-py /usr/bin/python3 - "$tmp/f16.gguf" tests/fuzz/corpus/fuzz_gguf_mmproj/mmproj-1blk.gguf <<'PY'
import sys
import gguf

r = gguf.GGUFReader(sys.argv[1])
w = gguf.GGUFWriter(sys.argv[2], arch="clip")
for name, f in r.fields.items():
    if name.startswith("GGUF.") or name == "general.architecture":
        continue
    t = f.types[0]
    if name == "clip.audio.block_count":
        w.add_uint32(name, 1)
    elif t == gguf.GGUFValueType.ARRAY:
        w.add_array(name, f.contents())
    else:
        w.add_key_value(name, f.contents(), t)
for t in r.tensors:
    if t.name.startswith("a.blk.") and not t.name.startswith("a.blk.0."):
        continue
    w.add_tensor(t.name, t.data, raw_shape=list(reversed(t.shape.tolist())), raw_dtype=t.tensor_type)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
PY
ls -l tests/data/gguf/mmproj-audio-tiny-f32.gguf tests/fuzz/corpus/fuzz_gguf_mmproj/mmproj-1blk.gguf
