#!/bin/sh
# run.sh — three `tern serve` replicas behind HAProxy with the proxy configuration users get
# (deploy/compose/haproxy.cfg), and a client keeping 16 chat streams going through it (client.mjs):
#   1. a rolling restart: each replica in turn gets SIGTERM, drains (exit 0) and starts again on its port, while the
#      streams go on — no request may be lost and no reply may be a 5xx;
#   2. a crash: one replica is killed with SIGKILL mid-stream — only the requests it held may fail, each one as an
#      error the client sees (never a hang), and every request sent after the kill must succeed.
# Exits 0 when both hold, 1 otherwise, 77 (skipped) without haproxy. Figures: docs/deploy.md.
#
#   tests/scale/run.sh TERN_BIN [--streams 16] [--json DIR]
set -eu
tern=$1
shift
streams=16 json=
while [ $# -gt 0 ]; do
    case "$1" in
        --streams) streams=$2; shift 2 ;;
        --json) json=$2; shift 2 ;;
        *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ -z "$json" ] || mkdir -p "$json"
command -v haproxy >/dev/null || { echo "skipped: haproxy is not installed (scripts/install-deps installs it)"; exit 77; }
root=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tern-scale.XXXXXX")
pid1= pid2= pid3= hpid= cpid=
cleanup() {
    for p in $pid1 $pid2 $pid3 $hpid $cpid; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$scratch"
}
trap cleanup EXIT
fail() {
    echo "run.sh: $*" >&2
    for i in 1 2 3; do echo "--- replica $i" >&2; tail -5 "$scratch/err$i" >&2 || true; done
    echo "--- haproxy" >&2; tail -20 "$scratch/haproxy.log" >&2 || true
    exit 1
}

"$tern" synth --preset tiny --dtype bf16 --seed 3 "$scratch/model" >/dev/null
export TERN_CACHE_DIR="$scratch/cache"
. "$root/tests/lib/serve.sh"

# start_replica I [PORT]: replica I on PORT (0: a free one), sets pidI and portI.
start_replica() {
    tern_serve "$scratch/out$1" "$scratch/err$1" "$tern" serve "$scratch/model" --alias tern --port "${2:-0}" \
        --parallel 4 --threads 1 --ctx 1024 --drain-timeout 60 --timeout 120
    eval "pid$1=$pid port$1=${url##*:}"
}
# stop_replica I: SIGTERM, and the exit status must be 0 (the drain finished what it held).
stop_replica() {
    eval "p=\$pid$1"
    kill -TERM "$p"
    rc=0
    wait "$p" || rc=$?
    eval "pid$1="
    cat "$scratch/err$1" >>"$scratch/stopped.log"
    [ $rc -eq 0 ] || fail "replica $1 exited $rc after SIGTERM (wanted 0)"
}
# client_end STOPFILE OUT MESSAGE: tells the client to stop, waits for its verdict and shows it; fails with MESSAGE.
client_end() {
    touch "$scratch/$1"
    rc=0
    wait $cpid || rc=$?
    cpid=
    cat "$scratch/$2"
    [ $rc -eq 0 ] || fail "$3"
}
for i in 1 2 3; do start_replica $i; done

proxy_port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
TERN_PROXY_BIND=127.0.0.1:$proxy_port TERN_1=127.0.0.1:$port1 TERN_2=127.0.0.1:$port2 TERN_3=127.0.0.1:$port3 \
    haproxy -db -f "$root/deploy/compose/haproxy.cfg" >"$scratch/haproxy.log" 2>&1 &
hpid=$!
proxy=http://127.0.0.1:$proxy_port
for _ in $(seq 100); do
    node -e 'fetch(process.argv[1]).then(r=>process.exit(r.status==200?0:1),()=>process.exit(1))' "$proxy/health" && break
    kill -0 $hpid 2>/dev/null || fail "haproxy did not start"
    sleep 0.1
done

# ---- 1. rolling restart ----
node "$root/tests/scale/client.mjs" --url "$proxy" --stop "$scratch/stop1" --streams "$streams" \
    ${json:+--json "$json/rolling.json"} >"$scratch/rolling.out" 2>&1 &
cpid=$!
sleep 2
for i in 1 2 3; do
    eval "port=\$port$i"
    stop_replica $i
    start_replica $i "$port"
    sleep 3 # two health checks a second apart bring it back into the pool
done
client_end stop1 rolling.out "the rolling restart lost requests"
drained=$(sed -n 's/.*draining \([0-9]*\) request.*/\1/p' "$scratch/stopped.log" | awk '{s += $1} END {print s + 0}')
echo "rolling restart: the three drains finished $drained requests in flight"
[ "$drained" -gt 0 ] || fail "no request was in flight when a replica drained: the test did not test the drain"

# ---- 2. a replica killed ----
node "$root/tests/scale/client.mjs" --url "$proxy" --stop "$scratch/stop2" --streams "$streams" \
    --killed tern2 --killed-at "$scratch/killed_at" ${json:+--json "$json/kill.json"} >"$scratch/kill.out" 2>&1 &
cpid=$!
sleep 3
kill -9 "$pid2"
date +%s%3N >"$scratch/killed_at"
wait "$pid2" 2>/dev/null || true
pid2=
sleep 4 # the proxy marks it down; requests meanwhile go to the other two
start_replica 2 "$port2"
sleep 3
client_end stop2 kill.out "killing one replica cost more than the requests it held"
grep -q '"held_by_killed":0,' "$scratch/kill.out" && fail "the killed replica held no request: the test did not test the kill"

for i in 1 2 3; do stop_replica $i; done
kill "$hpid"
wait "$hpid" 2>/dev/null || true
hpid=
echo "run.sh: ok"
