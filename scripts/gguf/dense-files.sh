#!/usr/bin/env bash
# dense-files.sh — the test data of the dense families (Llama 3, Qwen 2, Qwen 3) as llama.cpp writes and runs them:
# tiny random models made by `tern synth` from tests/data/gguf/dense/tiny-FAMILY.json (Llama: GQA, an untied head and
# llama3 RoPE scaling whose original context, 16, the 48 test positions pass; Qwen 2: q/k/v biases, tied head;
# Qwen 3: q/k norms, one KV head, head_dim apart from hidden / heads), the vocabulary cut from Llama 3's
# (tests/data/vocab/ggml-vocab-llama-bpe.gguf), converted by llama.cpp's convert_hf_to_gguf.py (F32; through
# convert_dense.py for the byte-level vocabulary), quantized by llama-quantize (Q8_0, Q4_K_M), and llama.cpp's logits
# of every file for the ids (i * 739 + 11) mod 2048, i < 48 (llama_logits.cpp: CPU, f32 KV, no flash attention).
# Writes tests/data/gguf/dense/tiny-FAMILY-{f32,q8_0,q4_k_m}.gguf and tiny-FAMILY.FORMAT.logits.bin. Seeds: Llama 1,
# Qwen 2 2, Qwen 3 3 (the tests make the safetensors checkpoints again from them). Needs `make build`; CACHE as for
# bench/vs-llamacpp.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
cache=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tern}
. bench/llamacpp_env.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
g++ -O1 -std=c++17 scripts/gguf/llama_logits.cpp -I"$src/include" -I"$src/ggml/include" -L"$bin" -lllama -lggml \
    -lggml-base -Wl,-rpath,"$bin" -o "$work/llama_logits"
ids=$(for i in $(seq 0 47); do echo $(((i * 739 + 11) % 2048)); done | paste -sd,)
out=tests/data/gguf/dense
seed=1
for name in llama qwen2 qwen3; do
    hf=$work/tiny-$name
    build/tern synth --preset "$out/tiny-$name.json" --dtype f32 --seed $((seed++)) \
        --vocab tests/data/vocab/ggml-vocab-llama-bpe.gguf "$hf" >/dev/null
    PYTHONPATH=$root/bench/hf_standin:$src/gguf-py:$src /usr/bin/python3 scripts/gguf/convert_dense.py "$hf" \
        --outtype f32 --outfile "$out/tiny-$name-f32.gguf" >/dev/null 2>&1
    for q in Q8_0 Q4_K_M; do
        "$bin/llama-quantize" "$out/tiny-$name-f32.gguf" "$out/tiny-$name-${q,,}.gguf" "$q" >/dev/null 2>&1
    done
    for f in f32 q8_0 q4_k_m; do
        "$work/llama_logits" "$out/tiny-$name-$f.gguf" "$ids" "$out/tiny-$name.$f.logits.bin" 2>/dev/null
    done
done
ls -l "$out"
