#!/bin/sh
# run.sh — the soak storm (soak.mjs) against a fresh `tern serve`: by default a synthetic Gemma 4 (tiny preset, MLX
# 4-bit, with an audio tower) served with --parallel 8, q8_0 KV and n-gram drafts, so one run crosses quantized
# weights and KV, speculation, audio, structured output and the prompt cache. Ends the server with SIGTERM and
# checks it drained and exited 0.
#
#   tests/soak/run.sh TERN_BIN [--clients 64] [--seconds 600] [--model DIR] [--json FILE] [-- SERVE_ARGS...]
#
# Example (the figures in docs/reliability.md): tests/soak/run.sh build/tern --clients 64 --seconds 600
set -eu
tern=$1
shift
clients=64 seconds=600 model= json=
while [ $# -gt 0 ]; do
    case "$1" in
        --clients) clients=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --model) model=$2; shift 2 ;;
        --json) json=$2; shift 2 ;;
        --) shift; break ;;
        *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
root=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tern-soak.XXXXXX")
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$scratch"' EXIT
audio=
if [ -z "$model" ]; then
    model=$scratch/model
    "$tern" synth --preset tiny --dtype q4 --audio --seed 7 "$model" >/dev/null
    audio=--audio
fi
max_body=1048576
. "$root/tests/lib/serve.sh"
export TERN_CACHE_DIR=$scratch/cache
tern_serve "$scratch/out" "$scratch/err" "$tern" serve "$model" --port 0 --parallel 8 --kv q8_0 --draft-ngram \
    --max-queue 256 --timeout 30 --max-body $max_body "$@"
rc=0
node "$root/tests/soak/soak.mjs" --url "$url" --pid $pid --clients "$clients" --seconds "$seconds" \
    --max-body $max_body $audio ${json:+--json "$json"} || rc=$?
kill -TERM $pid
wait $pid || { echo "run.sh: the server exited $? after SIGTERM (wanted 0)" >&2; tail -20 "$scratch/err" >&2; rc=1; }
pid=
exit $rc
