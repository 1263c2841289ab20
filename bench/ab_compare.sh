#!/bin/sh
# Two builds of tern on the same model in one run: `tern bench` alternating A and B (A B B A per round, so a
# drift of the machine hits both alike), printing prefill and decode tok/s of every run and the medians' ratio.
# For "does this change cost speed": A = a build of the commit before it, B = the build with it.
# usage: bench/ab_compare.sh TERN_A TERN_B MODEL_DIR [ROUNDS] [extra tern bench options]
set -eu
a=$1
b=$2
model=$3
rounds=${4:-2}
shift 3
[ $# -gt 0 ] && shift
opts="-p 512 -n 128 --threads 2 --json $*"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
field() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p" "$2" | head -1; }
i=0
while [ $i -lt "$rounds" ]; do
    for which in A B B A; do
        bin=$a
        [ $which = B ] && bin=$b
        f="$out/$which.$i.$(date +%s%N).json"
        "$bin" bench "$model" $opts >"$f" 2>/dev/null
        printf '%s round %d: prefill %s tok/s, decode %s tok/s, bandwidth %s GB/s\n' "$which" "$i" \
            "$(field prefill_tok_s "$f")" "$(field decode_tok_s "$f")" "$(field bandwidth_gb_s "$f")"
    done
    i=$((i + 1))
done
median() { sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
for which in A B; do
    eval "${which}_pre=\$(for f in $out/$which.*; do field prefill_tok_s \$f; done | median)"
    eval "${which}_dec=\$(for f in $out/$which.*; do field decode_tok_s \$f; done | median)"
done
echo "median prefill: A $A_pre, B $B_pre tok/s (B/A $(echo "$B_pre $A_pre" | awk '{printf "%.3f", $1 / $2}'))"
echo "median decode:  A $A_dec, B $B_dec tok/s (B/A $(echo "$B_dec $A_dec" | awk '{printf "%.3f", $1 / $2}'))"
