#!/bin/sh
# run.sh — the chat page's browser test (browser.mjs) against a fresh `tern serve` of a synthetic Gemma 4 with an
# audio tower and an API key; then `--no-webui` must answer 404 at / and leave the API as it was.
#   tests/webui/run.sh TERN_BIN
# Exit 77 (ctest: skipped) when chromium or puppeteer-core is not installed (scripts/install-deps installs both).
set -eu
tern=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
chromium=${CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] || { echo "skipped: no chromium at $chromium (scripts/install-deps installs it)"; exit 77; }
[ -d "$root/tests/oracles/node_modules/puppeteer-core" ] ||
    { echo "skipped: puppeteer-core is not installed (scripts/install-deps)"; exit 77; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tern-webui.XXXXXX")
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$scratch"' EXIT
"$tern" synth --preset tiny --dtype q4 --audio --seed 11 "$scratch/model" >/dev/null

. "$root/tests/lib/serve.sh"
export TERN_CACHE_DIR=$scratch/cache
# serve MODEL ARGS...: starts the server on a free port; sets pid and url.
serve() { tern_serve "$scratch/out" "$scratch/err" "$tern" serve "$@" --port 0; }

serve "$scratch/model" --api-key webui-test-key
grep -q "chat in the browser at $url/" "$scratch/out" || { echo "run.sh: the banner does not give the page's URL" >&2; exit 1; }
rc=0
HOME=$scratch node "$root/tests/webui/browser.mjs" --url "$url" --key webui-test-key --pid $pid \
    --wav "$root/tests/data/audio/short.wav" --chromium "$chromium" || rc=1
wait $pid 2>/dev/null || true # browser.mjs killed it (the "server went away" check)
pid=

serve "$scratch/model" --no-webui
grep -q "chat in the browser" "$scratch/out" && { echo "FAIL --no-webui still prints the page's URL"; rc=1; }
node -e '
const url = process.argv[1];
const page = await fetch(url + "/"), models = await fetch(url + "/v1/models");
const ok = page.status === 404 && models.status === 200;
console.log(`${ok ? "ok  " : "FAIL"} --no-webui: / answers ${page.status}, /v1/models ${models.status}`);
process.exit(ok ? 0 : 1);' --input-type=module "$url" || rc=1
kill -TERM $pid
wait $pid || { echo "FAIL the server exited $? after SIGTERM"; rc=1; }
pid=
exit $rc
