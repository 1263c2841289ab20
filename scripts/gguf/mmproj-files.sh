#!/usr/bin/env bash
# mmproj-files.sh LLAMA_SRC — the GGUF projector files the tests read, made by llama.cpp's own converter
# (convert_hf_to_gguf.py --mmproj) from tests/data/audio/audio-tiny (the shared audio oracle model) and
# tests/data/vision/tower-tiny (the vision reference's random tower):
#   tests/data/gguf/mmproj-audio-tiny-f32.gguf           F32, checked against the audio oracle's embeddings;
#   tests/fuzz/corpus/fuzz_gguf_mmproj/mmproj-1blk.gguf  the F16 conversion cut to its first conformer block
#                                                        (block_count 1): a small seed for the fuzz target;
#   tests/data/gguf/mmproj-vision-tiny-f32.gguf, -f16.gguf  the vision tower, checked against the safetensors one
#                                                        and the reference's embeddings;
#   tests/fuzz/corpus/fuzz_gguf_mmproj_vision/mmproj-vision-1blk.gguf  its F16 conversion cut to one layer,
#   tests/fuzz/corpus/fuzz_gguf_mmproj_vision/mmproj-vision-small.gguf  and that layer's tensors cut smaller
#                                                        (mmproj-vision-small.py): the fuzz target's fast seed.
# LLAMA_SRC is llama.cpp's source (bench/llamacpp_build.sh puts it in ~/.cache/tern/llamacpp/src); needs
# python3-numpy and python3-torch.
set -euo pipefail
cd "$(dirname "$0")/../.."
src=${1:?usage: mmproj-files.sh LLAMA_SRC}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
convert() { # convert MODEL OUTTYPE OUT
    PYTHONPATH=bench/hf_standin:$src/gguf-py /usr/bin/python3 "$src/convert_hf_to_gguf.py" "$1" \
        --mmproj --outtype "$2" --outfile "$3" >&2
}
cut_to_one_block() { # cut IN OUT KIND(audio|vision)
    PYTHONPATH=$src/gguf-py /usr/bin/python3 - "$@" <<'PY'
import sys
import gguf

kind = sys.argv[3]
prefix = {"audio": "a.blk.", "vision": "v.blk."}[kind]
r = gguf.GGUFReader(sys.argv[1])
w = gguf.GGUFWriter(sys.argv[2], arch="clip")
for name, f in r.fields.items():
    if name.startswith("GGUF.") or name == "general.architecture":
        continue
    t = f.types[0]
    if name == f"clip.{kind}.block_count":
        w.add_uint32(name, 1)
    elif t == gguf.GGUFValueType.ARRAY:
        w.add_array(name, f.contents())
    else:
        w.add_key_value(name, f.contents(), t)
for t in r.tensors:
    if t.name.startswith(prefix) and not t.name.startswith(prefix + "0."):
        continue
    w.add_tensor(t.name, t.data, raw_shape=list(reversed(t.shape.tolist())), raw_dtype=t.tensor_type)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
PY
}
convert tests/data/audio/audio-tiny f32 tests/data/gguf/mmproj-audio-tiny-f32.gguf
convert tests/data/audio/audio-tiny f16 "$tmp/f16.gguf"
mkdir -p tests/fuzz/corpus/fuzz_gguf_mmproj tests/fuzz/corpus/fuzz_gguf_mmproj_vision
cut_to_one_block "$tmp/f16.gguf" tests/fuzz/corpus/fuzz_gguf_mmproj/mmproj-1blk.gguf audio
convert tests/data/vision/tower-tiny f32 tests/data/gguf/mmproj-vision-tiny-f32.gguf
convert tests/data/vision/tower-tiny f16 tests/data/gguf/mmproj-vision-tiny-f16.gguf
cut_to_one_block tests/data/gguf/mmproj-vision-tiny-f16.gguf \
    tests/fuzz/corpus/fuzz_gguf_mmproj_vision/mmproj-vision-1blk.gguf vision
PYTHONPATH=$src/gguf-py /usr/bin/python3 scripts/gguf/mmproj-vision-small.py \
    tests/fuzz/corpus/fuzz_gguf_mmproj_vision/mmproj-vision-1blk.gguf \
    tests/fuzz/corpus/fuzz_gguf_mmproj_vision/mmproj-vision-small.gguf
ls -l tests/data/gguf/mmproj-*.gguf tests/fuzz/corpus/fuzz_gguf_mmproj*/
