#!/bin/sh
# The full-size e2b preset at 4 bits: synth writes it in bounded memory, info finds it complete, and
# run generates from it. Usage: e2b_q4.sh TERN_BIN SCRATCH_DIR
set -eu
tern=$1
dir=$2/e2b-q4.$$
trap 'rm -rf "$dir" "$dir.cache" "$dir.log"' EXIT
"$tern" synth --preset e2b --dtype q4 --seed 1 "$dir"
"$tern" info "$dir" | tee "$dir.info"
grep -q "tensors:      540 needed, 540 bound, complete" "$dir.info"
grep -q "parameters:   4.629 B" "$dir.info"
rm -f "$dir.info"
out=$("$tern" run "$dir" --ids 2,105,2364,107 -n 3 --print-ids)
echo "generated ids: $out"
[ "$(echo "$out" | tr ', ' '\n\n' | grep -c '^[0-9][0-9]*$')" -eq 3 ]
# bench on the real shape: every reported figure present and positive (timings are not judged).
"$tern" bench "$dir" -p 16 -n 2 --batch 2 --json | tee "$dir.bench"
for f in prefill_tok_s decode_tok_s decode_aggregate_tok_s bytes_per_token bandwidth_gb_s decode_efficiency; do
    grep -q "\"$f\": [0-9]*\.*[0-9]*[1-9]" "$dir.bench" || { echo "bench: $f missing or zero"; exit 1; }
done
rm -f "$dir.bench"
# The first start on this CPU with a cache folder measures where the int8 products request their weight stream
# (1.2 GB of packed weights leave any last-level cache) and keeps the choice; the next start reads it.
if [ -z "${TERN_STREAM_TOKENS:-}" ]; then
    TERN_CACHE_DIR=$dir.cache "$tern" run "$dir" --ids 2,105 -n 1 >/dev/null 2>"$dir.log"
    grep "request their weight stream ahead from [1-4] token(s) a pass on this CPU (measured" "$dir.log"
    grep -q "^stream_tokens [1-4]$" "$dir.cache"/cpu-*.stream
    TERN_CACHE_DIR=$dir.cache "$tern" run "$dir" --ids 2,105 -n 1 >/dev/null 2>"$dir.log"
    if grep -q "(measured" "$dir.log"; then echo "the second start measured again"; exit 1; fi
    rm -rf "$dir.cache" "$dir.log"
fi
