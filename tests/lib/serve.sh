# serve.sh — sourced by the shell tests that run `tern serve` in the background (tests/soak, tests/webui).
#
#   tern_serve OUT ERR TERN serve MODEL --port 0 ...   (the whole command line after OUT ERR)
#
# Starts the command with stdout to OUT and stderr to ERR, waits until it says it is serving, and sets `pid` and
# `url` (http://HOST:PORT). Exits 1, showing ERR, when the server ends first or never says where it serves.
tern_serve() {
    _out=$1 _err=$2
    shift 2
    # A restart reuses OUT: the old ready line must be gone before the wait starts (the background child truncates
    # OUT only when it runs, which may be after the first look).
    rm -f "$_out" "$_err"
    "$@" >"$_out" 2>"$_err" &
    pid=$!
    for _ in $(seq 600); do
        grep -q "serving" "$_out" 2>/dev/null && break
        kill -0 $pid 2>/dev/null || { cat "$_err" >&2; exit 1; }
        sleep 0.1
    done
    url=$(sed -n 's|.*serving .* at \(http://[0-9.]*:[0-9]*\).*|\1|p' "$_out" | head -1)
    [ -n "$url" ] || { echo "the server did not say where it serves" >&2; cat "$_err" >&2; exit 1; }
}
