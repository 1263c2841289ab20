#!/usr/bin/env bash
# The quality table of issue 23: `tern perplexity` of the demo model on its held-out text, per weight format and per
# KV cache type, windows of 256 every 128 (docs/demo-model.md).
#
#   bench/perplexity-formats.sh        (CACHE=folder for llama.cpp and the converted files, default
#                                       ${XDG_CACHE_HOME:-~/.cache}/tern; THREADS=2)
#
# Weight formats: the committed bf16 safetensors; MLX 8- and 4-bit (`tern quantize`); GGUF made by llama.cpp's own
# tools — convert_hf_to_gguf.py (BF16; bench/hf_standin/convert_bytelevel.py writes the demo's byte-level
# vocabulary, the one step the converter's Gemma 4 path cannot) and llama-quantize (Q8_0, Q4_0, Q4_K_M). KV types:
# f32, bf16, f16, q8_0, q4_0 and q8_0 K with q4_0 V, on the bf16 weights. Prints a markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
threads=${THREADS:-2}
cache=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tern}
tern=$root/build/tern
[ -x "$tern" ] || make build >/dev/null
. bench/llamacpp_env.sh
out=$cache/perplexity
mkdir -p "$out"
demo=$root/models/demo
text=$root/tests/data/demo/heldout.txt

if [ ! -f "$out/demo-bf16.gguf" ]; then
    PYTHONPATH=$root/bench/hf_standin:$src/gguf-py:$src /usr/bin/python3 bench/hf_standin/convert_bytelevel.py \
        "$demo" --outtype bf16 --outfile "$out/demo-bf16.gguf.tmp" >&2
    mv "$out/demo-bf16.gguf.tmp" "$out/demo-bf16.gguf"
fi
for q in Q8_0 Q4_0 Q4_K_M; do
    f=$out/demo-${q,,}.gguf
    [ -f "$f" ] || { "$bin/llama-quantize" "$out/demo-bf16.gguf" "$f.tmp" "$q" >&2 && mv "$f.tmp" "$f"; }
done
for b in 8 4; do
    [ -f "$out/demo-mlx$b/config.json" ] || "$tern" quantize "$demo" "$out/demo-mlx$b" --bits "$b" >&2
done

ppl() { # ppl MODEL KV-ARGS...: the perplexity tern reports
    "$tern" perplexity "$1" "$text" --ctx 256 --stride 128 --threads "$threads" "${@:2}" --json 2>/dev/null |
        sed -n 's/.*"perplexity": \([0-9.]*\).*/\1/p'
}
base=$(ppl "$demo" --kv f32)
row() { # row LABEL PPL
    awk -v l="$1" -v p="$2" -v b="$base" 'BEGIN { printf "| %-44s | %10.4f | %+8.2f%% |\n", l, p, (p / b - 1) * 100 }'
}
echo "demo model, held-out text ($(wc -c <"$text") bytes), windows 256 / stride 128, $threads threads; $(date -u +%F)"
echo "llama.cpp tools: $(cd "$src" && git log -1 --format=%h) (node-llama-cpp@3.22.1)"
echo
printf '| %-44s | %10s | %9s |\n' "weights (KV f32)" perplexity "vs bf16"
printf '|%s|%s|%s|\n' "----------------------------------------------" "------------" "-----------"
row "bf16 safetensors (committed)" "$base"
row "MLX 8-bit (tern quantize --bits 8)" "$(ppl "$out/demo-mlx8" --kv f32)"
row "MLX 4-bit (tern quantize --bits 4)" "$(ppl "$out/demo-mlx4" --kv f32)"
row "GGUF BF16 (convert_hf_to_gguf.py)" "$(ppl "$out/demo-bf16.gguf" --kv f32)"
for q in q8_0 q4_0 q4_k_m; do
    row "GGUF ${q^^} (llama-quantize)" "$(ppl "$out/demo-$q.gguf" --kv f32)"
done
echo
printf '| %-44s | %10s | %9s |\n' "KV cache (bf16 weights)" perplexity "vs f32"
printf '|%s|%s|%s|\n' "----------------------------------------------" "------------" "-----------"
for kv in f32 bf16 f16 q8_0 q4_0; do
    row "--kv $kv" "$(ppl "$demo" --kv $kv)"
done
row "-ctk q8_0 -ctv q4_0" "$(ppl "$demo" -ctk q8_0 -ctv q4_0)"
