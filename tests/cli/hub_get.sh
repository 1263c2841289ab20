#!/bin/sh
# hub_get.sh — `tern get / ls / rm` and models by name, against a local stand-in of the Hugging Face hub
# (tests/hub/hub_standin.mjs): a fresh download in the cache layout (checked by @huggingface/hub's own cache scanner,
# and a cache that library downloads read by tern),
# resume after a cut connection and after kill -9, a checksum mismatch refused, offline mode, unknown repository and
# revision, a gated model and HF_TOKEN, GGUF tags with their mmproj, a full disk, and `tern info|serve ORG/NAME`.
#   tests/cli/hub_get.sh TERN_BIN
set -eu
tern=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
s=$(mktemp -d "${TMPDIR:-/tmp}/tern-hub.XXXXXX")
hub_pid=
trap '[ -n "$hub_pid" ] && kill $hub_pid 2>/dev/null; rm -rf "$s"' EXIT
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

# The repositories: a safetensors model (with files tern does not read), a GGUF repository, a gated one.
repos=$s/repos
mkdir -p "$repos/test/tiny/original" "$repos/test/tiny-GGUF" "$repos/test/gated-tiny"
"$tern" synth --preset tiny --dtype q4 --seed 3 "$repos/test/tiny" >/dev/null
echo "# tiny" >"$repos/test/tiny/README.md"
head -c 300000 /dev/urandom >"$repos/test/tiny/original/consolidated.pth"
cp "$root/tests/data/gguf/tiny-kev-q8_0.gguf" "$repos/test/tiny-GGUF/tiny-Q8_0.gguf"
cp "$root/tests/data/gguf/tiny-kev-q4_k_m.gguf" "$repos/test/tiny-GGUF/tiny-Q4_K_M.gguf"
cp "$root/tests/data/gguf/mmproj-audio-tiny-f32.gguf" "$repos/test/tiny-GGUF/mmproj-tiny-F32.gguf"
cp "$repos/test/tiny/config.json" "$repos/test/gated-tiny/"

node "$root/tests/hub/hub_standin.mjs" "$repos" >"$s/standin.out" 2>&1 &
hub_pid=$!
for _ in $(seq 100); do grep -q listening "$s/standin.out" && break; sleep 0.1; done
hub=http://127.0.0.1:$(awk '/listening/ {print $2}' "$s/standin.out")
control() { node -e 'fetch(process.argv[1] + "/_control", {method: "POST", body: process.argv[2]}).then((r) => r.text())' "$hub" "$1"; }
file_requests() { node -e 'fetch(process.argv[1] + "/_log").then((r) => r.json()).then((l) => console.log(l.filter((e) => !e.url.startsWith("/api") && !e.url.startsWith("/_")).length))' "$hub"; }
ranges() { node -e 'fetch(process.argv[1] + "/_log").then((r) => r.json()).then((l) => console.log(l.filter((e) => e.range).map((e) => e.range).join(" ")))' "$hub"; }
export HF_ENDPOINT=$hub
unset HF_TOKEN HUGGING_FACE_HUB_TOKEN HF_HUB_OFFLINE HF_HUB_CACHE || true

# 1. A fresh download: the files tern reads, in the cache layout, byte for byte.
export HF_HOME=$s/hf1
out=$("$tern" get test/tiny 2>"$s/err") || { cat "$s/err"; bad "tern get test/tiny"; }
repo=$HF_HOME/hub/models--test--tiny
commit=$(cat "$repo/refs/main")
check "tern get prints the snapshot folder" '[ "$out" = "$repo/snapshots/$commit" ]'
same=1
for f in config.json model.safetensors tokenizer.json tokenizer_config.json chat_template.jinja; do
    cmp -s "$out/$f" "$repos/test/tiny/$f" || same=0
done
check "the files tern reads arrived whole" '[ $same = 1 ]'
check "README.md and original/ were not fetched (not read by tern)" '[ ! -e "$out/README.md" ] && [ ! -e "$out/original" ]'
link=$(readlink "$out/model.safetensors")
sum=$(sha256sum "$repos/test/tiny/model.safetensors" | cut -c1-64)
check "snapshots link to ../../blobs/SHA256 for LFS files" '[ "$link" = "../../blobs/$sum" ]'
blob=$(printf 'blob %s\0' "$(stat -c %s "$repos/test/tiny/config.json")" | cat - "$repos/test/tiny/config.json" | sha1sum | cut -c1-40)
check "and to ../../blobs/GIT-BLOB-ID for the others" '[ "$(readlink "$out/config.json")" = "../../blobs/$blob" ]'
check "no .incomplete file is left" '[ -z "$(ls "$repo/blobs" | grep incomplete || true)" ]'
scan=$(node -e '
const { createRequire } = require("node:module");
const req = createRequire(process.argv[1] + "/tests/oracles/package.json");
const { scanCacheDir } = req("@huggingface/hub");
scanCacheDir(process.argv[2]).then((c) => {
  const r = c.repos.find((x) => x.id.name === "test/tiny");
  const rev = r && r.revisions[0];
  console.log(r ? `${r.id.type} ${r.revisions.length} ${rev.commitOid} ${rev.refs.join(",")} ${rev.files.length} ${c.warnings.length}` : "none");
});' "$root" "$HF_HOME/hub")
check "@huggingface/hub's cache scanner reads the layout (model, 1 revision, ref main, 6 files, no warning)" \
    '[ "$scan" = "model 1 $commit main 6 0" ]'
before=$(file_requests)
"$tern" get test/tiny >/dev/null 2>&1
check "a second get downloads nothing it has" '[ "$(file_requests)" = "$before" ]'

# The other way round: a cache written by another implementation (@huggingface/hub's downloadFileToCacheDir, from
# the same stand-in) is read by tern, offline.
node -e '
const { createRequire } = require("node:module");
const req = createRequire(process.argv[1] + "/tests/oracles/package.json");
const { downloadFileToCacheDir } = req("@huggingface/hub");
(async () => {
  for (const path of ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"])
    await downloadFileToCacheDir({ repo: "test/tiny", path, revision: process.argv[3], hubUrl: process.argv[2],
                                   cacheDir: process.argv[4] });
})().catch((e) => { console.error(e); process.exit(1); });' "$root" "$hub" "$commit" "$s/hf-js/hub" >/dev/null 2>"$s/js.err" ||
    { cat "$s/js.err"; bad "@huggingface/hub downloads from the stand-in"; }
check "a cache written by @huggingface/hub is read by tern (HF_HUB_OFFLINE=1 tern info test/tiny@COMMIT)" \
    'HF_HOME=$s/hf-js HF_HUB_OFFLINE=1 "$tern" info "test/tiny@$commit" 2>&1 | head -1 | grep -q "hf-js/hub/models--test--tiny/snapshots/$commit"'

# 2. Offline: the cache alone; names resolve for the verbs.
info=$(HF_HUB_OFFLINE=1 "$tern" info test/tiny 2>&1 | head -1)
check "HF_HUB_OFFLINE=1 tern info test/tiny reads the cached model" 'echo "$info" | grep -q "snapshots/$commit"'
msg=$(HF_HUB_OFFLINE=1 "$tern" get test/other 2>&1 || true)
check "offline and not cached: says so" 'echo "$msg" | grep -q "HF_HUB_OFFLINE is set and test/other is not in the cache"'
TERN_CACHE_DIR=$s/tc HF_HUB_OFFLINE=1 "$tern" serve test/tiny --port 0 >"$s/serve.out" 2>"$s/serve.err" &
spid=$!
for _ in $(seq 300); do grep -q serving "$s/serve.out" 2>/dev/null && break; sleep 0.1; done
check "tern serve test/tiny serves it as 'tiny'" 'grep -q "serving tiny at" "$s/serve.out"'
kill -TERM $spid 2>/dev/null; wait $spid 2>/dev/null || true

# 3. Bad names.
msg=$("$tern" get test/nope 2>&1 || true)
check "an unknown repository" 'echo "$msg" | grep -q "test/nope was not found on"'
msg=$("$tern" get test/tiny@v9 2>&1 || true)
check "an unknown revision" 'echo "$msg" | grep -q "revision .v9. of test/tiny does not exist"'
msg=$("$tern" get test/gated-tiny --include '*.json' 2>&1 || true)
check "a gated model without HF_TOKEN says to set it" 'echo "$msg" | grep -q "HF_TOKEN"'
check "with HF_TOKEN it downloads" 'HF_TOKEN=hf_test_token "$tern" get test/gated-tiny --include "*.json" >/dev/null 2>&1'

# 4. A connection cut mid-file resumes from the bytes received (Range), within the same run.
export HF_HOME=$s/hf2
control '{"cut": {"file": "model.safetensors", "after": 1000000, "times": 1}}' >/dev/null
"$tern" get test/tiny >"$s/out" 2>"$s/err" || { cat "$s/err"; bad "get after a cut"; }
check "a cut connection resumes (and says so)" 'grep -q "cut off at 1000000 bytes; resuming" "$s/err"'
check "with a Range request from where it was cut" 'ranges | grep -q "bytes=1000000-"'
check "and the file is whole" 'cmp -s "$(cat "$s/out")/model.safetensors" "$repos/test/tiny/model.safetensors"'

# 5. kill -9 mid-download: the partial file is never taken for a whole one; the next run resumes it.
export HF_HOME=$s/hf3
control '{"slow": {"file": "model.safetensors", "bytesPerSec": 2000000}}' >/dev/null
"$tern" get test/tiny >/dev/null 2>&1 &
gpid=$!
part=
for _ in $(seq 100); do
    part=$(ls "$HF_HOME"/hub/models--test--tiny/blobs/*.incomplete 2>/dev/null | head -1 || true)
    [ -n "$part" ] && [ "$(stat -c %s "$part")" -gt 1000000 ] && break
    sleep 0.1
done
kill -9 $gpid; wait $gpid 2>/dev/null || true
have=$(stat -c %s "$part")
check "the killed download left a partial .incomplete file" '[ "$have" -gt 0 ]'
check "which no snapshot links to" '[ ! -e "$HF_HOME/hub/models--test--tiny/snapshots/$commit/model.safetensors" ]'
check "so the model is not found offline" '! HF_HUB_OFFLINE=1 "$tern" info test/tiny >/dev/null 2>&1'
control '{}' >/dev/null
"$tern" get test/tiny >"$s/out" 2>"$s/err" || { cat "$s/err"; bad "get after kill -9"; }
check "the next run resumes from the partial file (Range bytes=$have-)" 'ranges | grep -q "bytes=$have-"'
check "and the file is whole" 'cmp -s "$(cat "$s/out")/model.safetensors" "$repos/test/tiny/model.safetensors"'

# 6. A file whose bytes do not match its ETag is refused and not kept.
for f in tokenizer.json model.safetensors; do
    export HF_HOME=$s/hf-bad-$f
    control "{\"corrupt\": [\"$f\"]}" >/dev/null
    msg=$("$tern" get test/tiny 2>&1 || true)
    check "a checksum mismatch in $f is refused" 'echo "$msg" | grep -q "checksum mismatch for $f"'
    etag=$(sha256sum "$repos/test/tiny/$f" | cut -c1-64)
    check "and nothing of it is kept" '[ ! -e "$HF_HOME/hub/models--test--tiny/snapshots/$commit/$f" ] &&
        [ ! -e "$HF_HOME/hub/models--test--tiny/blobs/$etag" ] && [ ! -e "$HF_HOME/hub/models--test--tiny/blobs/$etag.incomplete" ]'
done
control '{}' >/dev/null

# 7. GGUF repositories: the tag's file and the mmproj, as llama.cpp's -hf.
export HF_HOME=$s/hf4
out=$("$tern" get test/tiny-GGUF:q8_0 2>/dev/null)
check "ORG/NAME:Q8_0 fetches that file and the mmproj (and prints both)" \
    '[ "$(echo "$out" | sed -n 1p | xargs basename)" = tiny-Q8_0.gguf ] && [ "$(echo "$out" | sed -n 2p | xargs basename)" = mmproj-tiny-F32.gguf ]'
snap=$(dirname "$(echo "$out" | sed -n 1p)")
check "and not the other quantization" '[ ! -e "$snap/tiny-Q4_K_M.gguf" ]'
out=$("$tern" get test/tiny-GGUF 2>/dev/null | head -1)
check "without a tag: Q4_K_M" '[ "$(basename "$out")" = tiny-Q4_K_M.gguf ]'
check "tern info test/tiny-GGUF:Q8_0 reads the GGUF by name" 'HF_HUB_OFFLINE=1 "$tern" info test/tiny-GGUF:Q8_0 | grep -q "tiny-Q8_0.gguf"'
msg=$("$tern" get test/tiny-GGUF:Q5_K_S 2>&1 || true)
check "an unknown tag lists what there is" 'echo "$msg" | grep -q "no GGUF file for .Q5_K_S.; it has: .*tiny-Q8_0.gguf"'

out=$(HF_HOME=$s/hf5 "$tern" get test/tiny --include '*.json' --include README.md --exclude 'generation_*' 2>/dev/null)
check "--include / --exclude (repeatable) pick the files" '[ "$(ls "$out" | tr "\n" " ")" = "README.md config.json tokenizer.json tokenizer_config.json " ]'

# 8. ls and rm.
HF_HOME=$s/hf1 "$tern" get test/tiny-GGUF:Q8_0 >/dev/null 2>&1
list=$(HF_HOME=$s/hf1 "$tern" ls)
check "tern ls lists the models with size and format" \
    'echo "$list" | grep -q "^test/tiny  *main .*MB  *6  gemma4 MLX 4-bit" &&
     echo "$list" | grep -q "^test/tiny-GGUF  *main .*MB  *2  GGUF tiny-Q8_0 + mmproj"'
"$tern" rm test/tiny-GGUF >/dev/null
check "tern rm removes a model" '! "$tern" ls 2>/dev/null | grep -q tiny-GGUF && [ ! -e "$HF_HOME/hub/models--test--tiny-GGUF" ]'
msg=$("$tern" rm test/tiny-GGUF 2>&1 || true)
check "tern rm of what is not there says so" 'echo "$msg" | grep -q "not in the cache"'

# 9. A full disk: a message that says so, and a later run (with room) completes.
if unshare --mount true 2>/dev/null; then as_root=; else as_root=--map-root-user; fi
mkdir -p "$s/full"
if unshare $as_root --mount sh -c "mount -t tmpfs -o size=64k tmpfs '$s/full'" 2>/dev/null; then
    msg=$(unshare $as_root --mount sh -c "mount -t tmpfs -o size=8m tmpfs '$s/full' &&
        HF_HOME='$s/full' '$tern' get test/tiny 2>&1" || true)
    check "a full disk is reported as such" 'echo "$msg" | grep -q "No space left on device"'
else
    echo "skipped: a full disk (no unshare --mount here)"
fi

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all hub checks passed"
