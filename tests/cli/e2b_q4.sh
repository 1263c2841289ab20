#!/bin/sh
# The full-size e2b preset at 4 bits: synth writes it in bounded memory, info finds it complete, and
# run generates from it. Usage: e2b_q4.sh TERN_BIN SCRATCH_DIR
set -eu
tern=$1
dir=$2/e2b-q4.$$
trap 'rm -rf "$dir"' EXIT
"$tern" synth --preset e2b --dtype q4 --seed 1 "$dir"
"$tern" info "$dir" | tee "$dir.info"
grep -q "tensors:      540 needed, 540 bound, complete" "$dir.info"
grep -q "parameters:   4.629 B" "$dir.info"
rm -f "$dir.info"
out=$("$tern" run "$dir" --ids 2,105,2364,107 -n 3)
echo "generated: $out"
[ "$(echo "$out" | wc -w)" -eq 3 ]
