#!/bin/sh
# faults.sh — injected faults around the files tern writes and maps (issue 43; docs/reliability.md):
#   1. an unwritable cache folder, and a full disk (a small tmpfs) under the packed-weights and tokenizer caches:
#      the run goes on without them and generates what it generates with caching off;
#   2. `kill -9` at moments spread over a start that writes those caches, and over a server writing its prompt
#      cache's disk tier: every next start generates the same tokens, from the cache files or without them;
#   3. a model file or packed-weights cache truncated in place under a running server: the server stops with a
#      message naming the file and status 74, never a bare SIGBUS; a file replaced by rename keeps being served.
# Usage: faults.sh TERN_BIN SCRATCH_DIR
set -eu
tern=$1
dir=$2/faults.$$
trap 'for p in $(cat "$dir"/*.pid 2>/dev/null); do kill -9 $p 2>/dev/null; done; rm -rf "$dir"' EXIT
mkdir -p "$dir"
ids=2,105,2364,107,9259,8,506,1164,108
fail() { echo "FAIL: $*" >&2; exit 1; }

"$tern" synth --preset tiny --dtype q4 --seed 5 "$dir/q4" >/dev/null
"$tern" synth --preset tiny --dtype bf16 --seed 5 "$dir/bf16" >/dev/null
gen() { # gen CACHE_DIR MODEL: the greedy ids, or FAIL
    TERN_CACHE_DIR=$1 "$tern" run "$2" --ids $ids -n 12 --print-ids 2>"$dir/gen.err" || { cat "$dir/gen.err" >&2; fail "run exited $? with cache $1"; }
}
ref=$(gen off "$dir/q4")
echo "reference: $ref"

# ---- 1. unwritable and full cache folders ----
: >"$dir/a-file"
out=$(gen "$dir/a-file/cache" "$dir/q4")
[ "$out" = "$ref" ] || fail "cache folder under a regular file: $out"
grep -q "not kept" "$dir/gen.err" || fail "no warning that the packed weights are not kept: $(cat "$dir/gen.err")"
echo "ok: unwritable cache folder"

if unshare --mount true 2>/dev/null; then as_root=; else as_root=--map-root-user; fi
mkdir -p "$dir/probe"
if unshare $as_root --mount sh -c "mount -t tmpfs -o size=64k tmpfs '$dir/probe'" 2>/dev/null; then
    # 1 MiB holds neither cache file; 24 MiB holds the packed weights (19 MiB) but not the tokenizer's tables too.
    for size in 1m 24m; do
        mkdir -p "$dir/full"
        out=$(unshare $as_root --mount sh -c "mount -t tmpfs -o size=$size tmpfs '$dir/full' &&
            TERN_CACHE_DIR='$dir/full/c' '$tern' run '$dir/q4' --ids $ids -n 12 --print-ids 2>'$dir/gen.err'") ||
            { cat "$dir/gen.err" >&2; fail "full disk ($size): the run failed"; }
        [ "$out" = "$ref" ] || fail "full disk ($size): $out"
        grep -q "not kept\|cannot" "$dir/gen.err" || fail "full disk ($size): no warning that a cache is not kept"
        echo "ok: full disk of $size ($(grep -c "not kept\|cannot" "$dir/gen.err") warnings)"
    done
else
    echo "skipped: full disk (no mount namespace here: unshare --mount refused)"
fi

# ---- 2. kill -9 while the caches are written ----
t0=$(date +%s%N)
gen "$dir/c-time" "$dir/q4" >/dev/null
ms=$((($(date +%s%N) - t0) / 1000000))
for k in 1 2 3 4 5 6 7 8; do
    rm -rf "$dir/c-kill"
    TERN_CACHE_DIR=$dir/c-kill "$tern" run "$dir/q4" --ids $ids -n 12 --print-ids >/dev/null 2>&1 &
    pid=$!
    sleep "$(awk "BEGIN { printf \"%.3f\", $ms * $k / 9000 }")"
    kill -9 $pid 2>/dev/null || true
    wait $pid 2>/dev/null || true
    for pass in after-kill cached; do
        out=$(gen "$dir/c-kill" "$dir/q4")
        [ "$out" = "$ref" ] || fail "kill -9 at $k/9 of the start ($pass): $out"
    done
done
echo "ok: kill -9 at 8 moments of a start writing the caches (run ${ms} ms), each next start and the one after right"

serve() { # serve NAME MODEL ARGS...: starts a server, sets $url; its pid is in $dir/NAME.pid
    name=$1 model=$2
    shift 2
    # Emptied here, not only by the child's redirection: a wait that ran first would read the last server's line.
    : >"$dir/$name.out"
    TERN_CACHE_DIR=${CACHE:-off} "$tern" serve "$model" --port 0 "$@" >"$dir/$name.out" 2>"$dir/$name.err" &
    echo $! >"$dir/$name.pid"
    for _ in $(seq 300); do
        grep -q serving "$dir/$name.out" 2>/dev/null && break
        kill -0 "$(cat "$dir/$name.pid")" 2>/dev/null || { cat "$dir/$name.err" >&2; fail "$name did not start"; }
        sleep 0.1
    done
    url=$(sed -n 's|.*at \(http://[0-9.]*:[0-9]*\).*|\1|p' "$dir/$name.out" | head -1)
}
kill_server() { # kill_server NAME: kill -9 of server NAME, reaped
    kill -9 "$(cat "$dir/$1.pid")"
    wait "$(cat "$dir/$1.pid")" 2>/dev/null || true
    rm "$dir/$1.pid"
}
ask() { # ask URL N: the greedy reply to prompt N (a long shared prefix: several prompt-cache blocks)
    curl -s --max-time 60 "$1/v1/completions" -H 'content-type: application/json' -d "{\"prompt\": \"$(
        seq 1 150 | tr '\n' ' ') question $2\", \"max_tokens\": 8, \"temperature\": 0}"
}
text() { sed -n 's/.*"text":"\([^"]*\)".*/\1/p'; }
serve plain "$dir/q4"
want=$(ask "$url" 1 | text)
[ -n "$want" ] || fail "no reply from the plain server"
kill_server plain
for k in 1 2 3 4 5 6; do
    serve tier "$dir/q4" --cache-disk "$dir/tier"
    for n in 1 2 3 4; do ask "$url" $n >/dev/null & done
    sleep "0.$((k * 15))"
    kill_server tier
    wait 2>/dev/null || true # the requests cut off with it
    serve tier "$dir/q4" --cache-disk "$dir/tier"
    got=$(ask "$url" 1 | text)
    [ "$got" = "$want" ] || fail "prompt-cache disk tier after kill -9 #$k: '$got' (want '$want')"
    kill_server tier
done
[ "$(find "$dir/tier" -type f | wc -l)" -gt 0 ] || fail "the disk tier was never written: nothing was tested"
echo "ok: kill -9 at 6 moments of a server writing its disk tier, each restart answers as a server without one"

# ---- 3. files changed under a running server ----
stops_with_74() { # stops_with_74 NAME WHAT: server NAME must end within 5 s with status 74
    pid=$(cat "$dir/$1.pid")
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { kill -9 "$pid"; fail "$2: the server kept running on bytes that are gone"; }
    rc=0
    wait "$pid" 2>/dev/null || rc=$?
    rm "$dir/$1.pid"
    [ $rc -eq 74 ] || fail "$2: exit $rc (want 74)"
}
cp -r "$dir/bf16" "$dir/bf16-b"
serve swap "$dir/bf16-b"
ask "$url" 1 >/dev/null
cp "$dir/bf16-b/model.safetensors" "$dir/new.safetensors"
mv "$dir/new.safetensors" "$dir/bf16-b/model.safetensors" # replaced by rename: the old bytes stay mapped
ask "$url" 2 | grep -q '"text"' || fail "a model file replaced by rename stopped the server"
kill_server swap
serve cut "$dir/bf16-b"
ask "$url" 1 >/dev/null
: >"$dir/bf16-b/model.safetensors" # truncated in place
ask "$url" 3 >/dev/null || true
stops_with_74 cut "model file truncated under the server"
grep -q "bf16-b/model.safetensors was truncated or rewritten in place" "$dir/cut.err" || fail "no message: $(tail -3 "$dir/cut.err")"
echo "ok: model file replaced by rename keeps serving; truncated in place stops with a message, status 74"

gen "$dir/c-pack" "$dir/q4" >/dev/null # the cache made: the server below maps it (a first start keeps its own copy)
CACHE=$dir/c-pack serve pack "$dir/q4"
ask "$url" 1 >/dev/null
for f in "$dir"/c-pack/*.pack; do : >"$f"; done
ask "$url" 2 >/dev/null || true
stops_with_74 pack "packed-weights cache truncated under the server"
grep -q "\.pack was truncated" "$dir/pack.err" || fail "no message naming the .pack file: $(tail -3 "$dir/pack.err")"
out=$(gen "$dir/c-pack" "$dir/q4")
[ "$out" = "$ref" ] || fail "the start after a truncated cache: $out"
echo "ok: packed-weights cache truncated under the server stops it with a message; the next start repacks"
