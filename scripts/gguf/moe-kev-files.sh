#!/usr/bin/env bash
# moe-kev-files.sh — the test data of Gemma 4's larger layouts as llama.cpp writes and runs them: two tiny random
# models made by `tern synth` (tiny-kev.json: K=V full-attention layers, one KV head there, as the 31B; tiny-moe.json:
# mixture-of-experts beside the dense MLP and K=V, as the 26B-A4B), converted by llama.cpp's convert_hf_to_gguf.py
# (F32), quantized by llama-quantize (Q8_0, Q4_K_M), the MoE Q8_0 file also with its experts' gate and up apart
# (split_experts.py), and llama.cpp's logits of every file for the oracle's 32 ids (llama_logits.cpp: CPU, f32 KV,
# no flash attention). Writes into tests/data/gguf/: tiny-{kev,moe}-f32/ (the float32 safetensors checkpoint:
# config.json + model.safetensors), tiny-{kev,moe}-{f32,q8_0,q4_k_m}.gguf, tiny-moe-q8_0-split.gguf and
# NAME.FORMATgguf.logits.bin for each. Needs `make build`; CACHE as for bench/vs-llamacpp.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
cache=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tern}
. bench/llamacpp_env.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
g++ -O1 -std=c++17 scripts/gguf/llama_logits.cpp -I"$src/include" -I"$src/ggml/include" -L"$bin" -lllama -lggml \
    -lggml-base -Wl,-rpath,"$bin" -o "$work/llama_logits"
ids=$(/usr/bin/python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["cases"][0]["token_ids"])))' \
    tests/data/oracle/index.json)
out=tests/data/gguf
convert() { # convert HF_DIR OUT.gguf
    PYTHONPATH=$root/bench/hf_standin:$src/gguf-py /usr/bin/python3 "$src/convert_hf_to_gguf.py" "$1" --outtype f32 \
        --outfile "$2" >/dev/null 2>&1
}
golden() { # golden NAME FORMAT: llama.cpp's logits of tiny-NAME-FORMAT.gguf
    "$work/llama_logits" "$out/tiny-$1-$2.gguf" "$ids" "$out/tiny-$1.$2gguf.logits.bin" 2>/dev/null
}
seed=1
for name in kev moe; do
    hf=$work/tiny-$name
    build/tern synth --preset "scripts/gguf/tiny-$name.json" --dtype f32 --seed $((seed++)) "$hf" >/dev/null
    convert "$hf" "$out/tiny-$name-f32.gguf"
    for q in Q8_0 Q4_K_M; do
        "$bin/llama-quantize" "$out/tiny-$name-f32.gguf" "$out/tiny-$name-${q,,}.gguf" "$q" >/dev/null 2>&1
    done
    mkdir -p "$out/tiny-$name-f32"
    cp "$hf/config.json" "$hf/model.safetensors" "$out/tiny-$name-f32/"
    for f in f32 q8_0 q4_k_m; do golden $name $f; done
done
PYTHONPATH=$src/gguf-py /usr/bin/python3 scripts/gguf/split_experts.py "$out/tiny-moe-q8_0.gguf" "$out/tiny-moe-q8_0-split.gguf"
golden moe q8_0-split
ls -l "$out"/tiny-kev* "$out"/tiny-moe*
