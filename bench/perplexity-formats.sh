#!/usr/bin/env bash
# Quality per weight format: the demo model (models/demo, a small Gemma 4 trained on English) in its own bf16
# safetensors and as GGUF files llama.cpp makes of it (convert_hf_to_gguf.py to F32, llama-quantize to Q8_0, Q6_K,
# Q5_K_M, Q4_K_M, Q4_0), each scored by `tern perplexity` on the held-out text (windows of 256 every 128, as the
# training script's own evaluation in tests/data/demo/eval.json), and the GGUF files also by llama.cpp's
# llama-perplexity beside it (its own windows: -c 256, each scoring its second half).
#
#   bench/perplexity-formats.sh            (CACHE as in bench/vs-llamacpp.sh; KV cache bf16, 2 threads)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
threads=${THREADS:-2}
cache=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tern}
tern=$root/build/tern
[ -x "$tern" ] || make build >/dev/null
for mod in numpy torch tqdm; do
    /usr/bin/python3 -c "import $mod" 2>/dev/null || apt-get install -y "python3-$mod" >/dev/null
done
bin=$(bench/llamacpp_build.sh "$cache/llamacpp")
src=$cache/llamacpp/src
export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
out=$cache/bench/demo
mkdir -p "$out"
text=$root/tests/data/demo/heldout.txt
if [ ! -f "$out/demo-f32.gguf" ]; then
    PYTHONPATH=$root/bench/hf_standin:$src/gguf-py /usr/bin/python3 "$src/convert_hf_to_gguf.py" models/demo \
        --outtype f32 --outfile "$out/demo-f32.gguf" >&2
fi
formats="Q8_0 Q6_K Q5_K_M Q4_K_M Q4_0"
for q in $formats; do
    [ -f "$out/demo-${q,,}.gguf" ] || "$bin/llama-quantize" "$out/demo-f32.gguf" "$out/demo-${q,,}.gguf" "$q" >/dev/null 2>&1
done
ppl_tern() { "$tern" perplexity "$1" "$text" -c 256 --stride 128 -t "$threads" --json 2>/dev/null |
    sed -n 's/.*"perplexity": \([0-9.]*\).*/\1/p'; }
ppl_llama() { "$bin/llama-perplexity" -m "$1" -f "$text" -c 256 -b 256 -t "$threads" 2>&1 |
    sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p'; }
echo "demo model, held-out text ($(wc -c <"$text") bytes), $(date -u +%F)"
printf '| %-26s | %9s | %11s | %22s |\n' weights "size MiB" "tern (256/128)" "llama.cpp (-c 256)"
printf '|----------------------------|-----------|-------------|------------------------|\n'
printf '| %-26s | %9.1f | %11s | %22s |\n' "bf16 safetensors (models/demo)" \
    "$(du -k models/demo/model.safetensors | awk '{print $1 / 1024}')" "$(ppl_tern models/demo)" "-"
for f in f32 $formats; do
    g=$out/demo-${f,,}.gguf
    printf '| %-26s | %9.1f | %11s | %22s |\n' "GGUF ${f^^}" "$(du -k "$g" | awk '{print $1 / 1024}')" \
        "$(ppl_tern "$g")" "$(ppl_llama "$g")"
done
