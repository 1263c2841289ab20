#!/usr/bin/env bash
# tern beside llama.cpp on the very same GGUF files, in one run, 2 threads (issue 23's evidence).
#
#   bench/vs-llamacpp.sh [ROUNDS]          (default 3; CACHE=folder for llama.cpp and the models,
#                                           default ${XDG_CACHE_HOME:-~/.cache}/tern; THREADS=2)
#   PRESET=26b-a4b LAYERS=6 FORMATS=q4_0 DEPTH=0 bench/vs-llamacpp.sh 3
#                                          (another `tern synth` preset, cut to its first LAYERS layers; the
#                                           formats to quantize to; DEPTH=0 leaves out the long-context section)
#   PRESET=llama-3.2-1b VOCAB=tests/data/vocab/ggml-vocab-llama-bpe.gguf bench/vs-llamacpp.sh 3
#                                          (a dense family's preset: synthesized with that vocabulary, converted
#                                           through scripts/gguf/convert_dense.py)
#
# 1. llama.cpp as node-llama-cpp@3.22.1 ships it, built for this CPU without AMX (bench/llamacpp_build.sh says why).
# 2. An e2b-shaped (or PRESET) synthetic checkpoint (`tern synth --preset e2b --dtype bf16`, Hugging Face layout) converted by
#    llama.cpp's own convert_hf_to_gguf.py (BF16; bench/hf_standin stands in for the two `transformers` classes it
#    imports), then llama-quantize to Q4_0 and Q8_0.
# 3. Per round and format, alternating which engine goes first: llama-bench (pp512, tg128) and `tern bench`
#    (-p 512 -n 128) on the same file; then 8 rows decoding after 128 tokens of prompt each: llama-batched-bench
#    (npp 128, ntg 128, npl 8) against `tern bench --batch 8 --depth 128`; then decoding 64 tokens after 4096 of
#    context (DEPTH) on the Q4_0 file with each engine's 16-bit KV cache (llama.cpp f16, tern bf16) and with q8_0
#    K and V (llama-bench -d 4096 -fa on -ctk/-ctv, `tern bench --depth 4096 --kv`). Medians and tern / llama.cpp
#    ratios; tern's decode against the bandwidth its own probe measured (the weights, and after the long context
#    the weights and the KV read), and against the plain read bandwidth bench_read measures before and after the
#    rounds and right before and after each tern run (per round, then the median).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
rounds=${1:-3}
threads=${THREADS:-2}
depth=${DEPTH:-4096}
preset=${PRESET:-e2b}
layers=${LAYERS:-}
vocab=${VOCAB:-}
formats=${FORMATS:-q4_0 q8_0}
cache=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tern}
tern=$root/build/tern
[ -x "$tern" ] || make build >/dev/null

. bench/llamacpp_env.sh
models=$cache/bench
mkdir -p "$models"
name=$preset${layers:+-l$layers}
hf=$models/$name-bf16
[ -f "$hf/config.json" ] || "$tern" synth --preset "$preset" ${layers:+--layers $layers} --dtype bf16 --seed 1 \
    ${vocab:+--vocab "$root/$vocab"} "$hf" >&2
converter=$src/convert_hf_to_gguf.py
[ -n "$vocab" ] && converter=$root/scripts/gguf/convert_dense.py
if [ ! -f "$models/$name-bf16.gguf" ]; then
    PYTHONPATH=$root/bench/hf_standin:$src/gguf-py:$src /usr/bin/python3 "$converter" "$hf" \
        --outtype bf16 --outfile "$models/$name-bf16.gguf.tmp" >&2
    mv "$models/$name-bf16.gguf.tmp" "$models/$name-bf16.gguf"
fi
for fmt in $formats; do
    f=$models/$name-$fmt.gguf
    [ -f "$f" ] || { "$bin/llama-quantize" "$models/$name-bf16.gguf" "$f.tmp" "${fmt^^}" >&2 && mv "$f.tmp" "$f"; }
done

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
field() { # field NAME JSON: one number from tern bench's JSON object
    sed -n "s/.*\"$1\": \([0-9.e+-]*\).*/\1/p" <<<"$2" | head -1
}
llama_ts() { # llama_ts N_PROMPT N_GEN FILE: avg_ts of that test in llama-bench's JSON
    /usr/bin/python3 -c 'import json,sys; print(next(r["avg_ts"] for r in json.load(open(sys.argv[3]))
        if r["n_prompt"] == int(sys.argv[1]) and r["n_gen"] == int(sys.argv[2])))' "$@"
}
run_llama() { # run_llama FMT ROUND
    local f=$models/$name-$1.gguf o=$log/llama-$1-$2
    "$bin/llama-bench" -m "$f" -p 512 -n 128 -t "$threads" -r 1 -o json >"$o.json" 2>/dev/null
    echo "$(llama_ts 512 0 "$o.json") $(llama_ts 0 128 "$o.json")" >>"$log/llama-$1"
    "$bin/llama-batched-bench" -m "$f" -c 2048 -b 512 -ub 512 -npp 128 -ntg 128 -npl 8 -t "$threads" \
        --output-format jsonl >"$o.batched" 2>/dev/null
    /usr/bin/python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1];
print(r["speed_tg"])' "$o.batched" >>"$log/llama-$1-batched"
}
run_tern() { # run_tern FMT
    local f=$models/$name-$1.gguf one eight before
    before=$("$root/build/bench_read" --threads "$threads")
    one=$("$tern" bench "$f" -p 512 -n 128 --threads "$threads" --json 2>/dev/null)
    echo "$before $("$root/build/bench_read" --threads "$threads")" >>"$log/tern-$1-read"
    echo "$(field prefill_tok_s "$one") $(field decode_tok_s "$one")" >>"$log/tern-$1"
    echo "$(field decode_efficiency "$one") $(field bytes_per_token "$one") $(field bandwidth_gb_s "$one")" \
        >>"$log/tern-$1-roofline"
    eight=$("$tern" bench "$f" -p 16 -n 128 --batch 8 --depth 128 --threads "$threads" --json 2>/dev/null)
    field decode_aggregate_tok_s "$eight" >>"$log/tern-$1-batched"
}
run_llama_kv() { # run_llama_kv TYPE: decode after $depth tokens with K and V stored as TYPE
    local o=$log/llama-kv-$1.json
    "$bin/llama-bench" -m "$models/$name-q4_0.gguf" -p 0 -n 64 -d "$depth" -fa on -ctk "$1" -ctv "$1" -t "$threads" \
        -r 1 -o json >"$o" 2>/dev/null
    llama_ts 0 64 "$o" >>"$log/llama-kv-$1"
}
run_tern_kv() { # run_tern_kv TYPE
    local j
    j=$("$tern" bench "$models/$name-q4_0.gguf" -p 0 -n 64 --depth "$depth" --kv "$1" --threads "$threads" --json \
        2>/dev/null)
    field decode_tok_s "$j" >>"$log/tern-kv-$1"
    field decode_efficiency "$j" >>"$log/tern-kv-$1-roofline"
}

# The machine's plain read bandwidth (bench_read: contiguous shares, no software prefetch, best of 5 passes of
# 2 GiB) before and after the rounds, and right before and after each tern run (a virtual machine's bandwidth
# moves within minutes): the roofline a decode rate is judged against, beside tern's own probe.
[ -x "$root/build/bench_read" ] || make -C "$root/build" bench_read >/dev/null
read_before=$("$root/build/bench_read" --threads "$threads")
for r in $(seq 1 "$rounds"); do
    for fmt in $formats; do
        echo "round $r $fmt" >&2
        if [ $((r % 2)) = 1 ]; then run_llama $fmt $r; run_tern $fmt; else run_tern $fmt; run_llama $fmt $r; fi
        echo "  tern prefill decode: $(tail -1 "$log/tern-$fmt"), 8 rows: $(tail -1 "$log/tern-$fmt-batched");" \
            "llama.cpp: $(tail -1 "$log/llama-$fmt"), 8 rows: $(tail -1 "$log/llama-$fmt-batched")" >&2
    done
    for kv in $([ "$depth" -gt 0 ] && echo 16 q8_0); do
        echo "round $r KV $kv at depth $depth" >&2
        lk=$([ $kv = 16 ] && echo f16 || echo $kv) tk=$([ $kv = 16 ] && echo bf16 || echo $kv)
        if [ $((r % 2)) = 1 ]; then run_llama_kv $lk; run_tern_kv $tk; else run_tern_kv $tk; run_llama_kv $lk; fi
    done
done

read_after=$("$root/build/bench_read" --threads "$threads")

median() { sort -g | awk '{a[NR] = $1} END {print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
echo
echo "tern vs llama.cpp ($(cd "$src" && git log -1 --format=%h), node-llama-cpp@3.22.1) on the same $name-shaped GGUF files,"
echo "$threads threads, $rounds rounds alternating, medians (tok/s); $(date -u +%F)"
printf '| %-6s | %-28s | %9s | %9s | %6s |\n' format test tern llama.cpp ratio
printf '|--------|------------------------------|-----------|-----------|--------|\n'
for fmt in $formats; do
    for col in 1 2; do
        t=$(cut -d' ' -f$col "$log/tern-$fmt" | median)
        l=$(cut -d' ' -f$col "$log/llama-$fmt" | median)
        name=$([ $col = 1 ] && echo "prefill 512 (pp512)" || echo "decode 1 row (tg128)")
        awk -v f="$fmt" -v n="$name" -v t="$t" -v l="$l" 'BEGIN {
            printf "| %-6s | %-28s | %9.2f | %9.2f | %5.2fx |\n", f, n, t, l, t / l }'
    done
    t=$(median <"$log/tern-$fmt-batched")
    l=$(median <"$log/llama-$fmt-batched")
    awk -v f="$fmt" -v t="$t" -v l="$l" 'BEGIN {
        printf "| %-6s | %-28s | %9.2f | %9.2f | %5.2fx |\n", f, "decode 8 rows after 128 (sum)", t, l, t / l }'
done
for kv in $([ "$depth" -gt 0 ] && echo 16 q8_0); do
    lk=$([ $kv = 16 ] && echo f16 || echo $kv) tk=$([ $kv = 16 ] && echo bf16 || echo $kv)
    t=$(median <"$log/tern-kv-$tk")
    l=$(median <"$log/llama-kv-$lk")
    awk -v n="decode after $depth, KV $([ $kv = 16 ] && echo "bf16/f16" || echo q8_0)" -v t="$t" -v l="$l" 'BEGIN {
        printf "| %-6s | %-28s | %9.2f | %9.2f | %5.2fx |\n", "q4_0", n, t, l, t / l }'
done
echo
echo "tern's one-row decode against the read bandwidth its own probe measured in the same runs (medians):"
for fmt in $formats; do
    e=$(cut -d' ' -f1 "$log/tern-$fmt-roofline" | median)
    b=$(cut -d' ' -f2 "$log/tern-$fmt-roofline" | median)
    w=$(cut -d' ' -f3 "$log/tern-$fmt-roofline" | median)
    awk -v f="$fmt" -v e="$e" -v b="$b" -v w="$w" 'BEGIN {
        printf "%s: %.3f GB of weights per token, %.1f GB/s measured, decode at %.0f%% of that bound\n", f, b / 1e9, w, e * 100 }'
done
for kv in $([ "$depth" -gt 0 ] && echo bf16 q8_0); do
    e=$(median <"$log/tern-kv-$kv-roofline")
    awk -v d="$depth" -v k="$kv" -v e="$e" 'BEGIN {
        printf "q4_0 after %d tokens, KV %s: decode at %.0f%% of the bound of the weights and the KV read\n", d, k, e * 100 }'
done
echo
echo "the same decode against the plain read bandwidth (bench_read: $read_before GB/s before the rounds, $read_after after):"
for fmt in $formats; do
    b=$(cut -d' ' -f2 "$log/tern-$fmt-roofline" | median)
    t=$(cut -d' ' -f2 "$log/tern-$fmt" | median)
    awk -v f="$fmt" -v b="$b" -v t="$t" -v r0="$read_before" -v r1="$read_after" 'BEGIN {
        printf "%s: %.1f GB/s read by decoding, %.0f%% of the mean of the two\n", f, t * b / 1e9, t * b / 1e9 / ((r0 + r1) / 2) * 100 }'
    # Each round's decode against bench_read taken just before and after that tern run.
    paste -d' ' "$log/tern-$fmt" "$log/tern-$fmt-read" | awk -v b="$b" '{ print $2 * b / 1e9 / (($3 + $4) / 2) * 100 }' \
        >"$log/tern-$fmt-vsread"
    awk -v f="$fmt" -v m="$(median <"$log/tern-$fmt-vsread")" -v rs="$(sort -g "$log/tern-$fmt-vsread" | awk '{ printf "%s%.0f", (NR > 1 ? ", " : ""), $1 }')" \
        'BEGIN { printf "%s: per round against bench_read just before and after its tern run: median %.0f%% (%s%%)\n", f, m, rs }'
done
