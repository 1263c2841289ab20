#!/bin/sh
# campaign.sh — runs every fuzz target under clang's libFuzzer (with ASan+UBSan) for an execution count or a time,
# merges the inputs that reach new code back into the repository's corpora (tests/fuzz/corpus/<target>, which the
# plain build replays in `make test`), keeps each crash as a regression seed, and writes a table of executions per
# target for docs/reliability.md.
#
#   tests/fuzz/campaign.sh [--runs N] [--time S] [--targets "fuzz_a fuzz_b"] [--out DIR] [--no-merge]
#
#   --runs N     executions per target (default 10000000)
#   --time S     at most S seconds per target, whichever ends first (default 3600)
#   --targets    a subset (default: every tests/fuzz/fuzz_*.c)
#   --out DIR    build tree, working corpora, crashes and results (default build-fuzz)
#   --no-merge   leave the repository's corpora as they are
#
# A crash stops that target's run; its input is copied to tests/fuzz/corpus/<target>/crash-<sha1> and the run goes
# on from there (at most 5 crashes per target), so a finding is replayed by `make test` until it is fixed. The exit
# status is 1 when anything crashed. One core per target at a time: the machine's other core stays free. SIGINT to
# a target's fuzzer (not SIGSTOP: its per-input timeout would fire) ends that target early: its executions are
# counted and its inputs merged, and the next target starts.
set -eu

runs=10000000
max_time=3600
targets=
out=build-fuzz
merge=1
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs=$2; shift 2 ;;
        --time) max_time=$2; shift 2 ;;
        --targets) targets=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --no-merge) merge=0; shift ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        *) echo "campaign.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

root=$(cd "$(dirname "$0")/../.." && pwd)
command -v clang >/dev/null || { echo "campaign.sh: clang is missing (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

if [ -z "$targets" ]; then
    targets=$(ls "$root"/tests/fuzz/fuzz_*.c | sed 's|.*/||; s|\.c$||')
fi

CC=clang cmake -S "$root" -B "$out/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_LIBFUZZER=ON -DTERN_SANITIZE=ON >/dev/null
# shellcheck disable=SC2086
cmake --build "$out/build" -j "$(nproc)" --target $targets >"$out/build.log" 2>&1 ||
    { tail -30 "$out/build.log" >&2; exit 2; }

results="$out/results.tsv"
printf 'target\texecutions\tseconds\texec_per_s\tcorpus_files\tadded\tcrashes\n' >"$results"
# Inputs the sanitizers must not cut short: leaks are reported, huge allocations are refused by the parsers.
# Two frames of allocation stack instead of 30: recording them took a fifth of the time of allocation-heavy targets
# (fuzz_json_schema); a finding's full stacks come from running the target on its seed again.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:malloc_limit_mb=4096:malloc_context_size=2}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# The library's info lines (one per prompt-cache folder opened, say) would fill the logs and slow the run.
export TERN_LOG="${TERN_LOG:-error}"
# Targets that write files (fuzz_prefix_disk) write them under TMPDIR: memory, not the disk.
[ -d /dev/shm ] && export TMPDIR="${TMPDIR:-/dev/shm}"
found=0
for t in $targets; do
    seeds="$root/tests/fuzz/corpus/$t"
    work="$out/corpus/$t"
    crashes="$out/crashes/$t"
    mkdir -p "$seeds" "$work" "$crashes"
    left=$runs
    secs_left=$max_time
    total=0
    spent=0
    n_crash=0
    while [ "$left" -gt 0 ] && [ "$secs_left" -gt 0 ] && [ "$n_crash" -lt 5 ]; do
        log="$out/$t.log"
        start=$(date +%s)
        set +e
        "$out/build/$t" -runs="$left" -max_total_time="$secs_left" -print_final_stats=1 -timeout=30 -rss_limit_mb=4096 \
            -artifact_prefix="$crashes/" "$work" "$seeds" >"$log" 2>&1
        rc=$?
        set -e
        end=$(date +%s)
        done_runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        [ -n "$done_runs" ] || done_runs=$(sed -n 's/^#\([0-9]*\).*/\1/p' "$log" | tail -1)
        [ -n "$done_runs" ] || done_runs=0
        total=$((total + done_runs))
        left=$((left - done_runs))
        spent=$((spent + end - start))
        secs_left=$((max_time - spent))
        # libFuzzer exits 72 when interrupted (SIGINT: the way to stop a target early, its inputs still merged)
        [ $rc -eq 72 ] && break
        rm -f "$crashes"/slow-unit-* # a unit that ran long (as any does when the machine is busy): not a finding
        if [ $rc -ne 0 ]; then
            art=$(ls -t "$crashes" 2>/dev/null | head -1)
            if [ -z "$art" ]; then
                echo "campaign.sh: $t exited $rc without an artifact; see $log" >&2
                found=1
                break
            fi
            n_crash=$((n_crash + 1))
            found=1
            sum=$(sha1sum "$crashes/$art" | cut -c1-12)
            cp "$crashes/$art" "$seeds/crash-$sum"
            cp "$log" "$out/$t.crash-$sum.log"
            echo "campaign.sh: $t crashed ($art); seed tests/fuzz/corpus/$t/crash-$sum, log $out/$t.crash-$sum.log" >&2
            rm -f "$crashes/$art"
        elif [ "$done_runs" -eq 0 ]; then
            break
        fi
    done
    added=0
    if [ $merge -eq 1 ]; then
        before=$(ls "$seeds" | wc -l)
        "$out/build/$t" -merge=1 -timeout=30 -rss_limit_mb=4096 "$seeds" "$work" >"$out/$t.merge.log" 2>&1 || true
        added=$(($(ls "$seeds" | wc -l) - before))
    fi
    rate=0
    [ "$spent" -gt 0 ] && rate=$((total / spent))
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$total" "$spent" "$rate" "$(ls "$seeds" | wc -l)" "$added" "$n_crash" >>"$results"
    printf '%-26s %12s runs %6ss %8s/s  +%s seeds  %s crashes\n' "$t" "$total" "$spent" "$rate" "$added" "$n_crash"
done
echo "results: $results"
exit $found
