#!/bin/sh
# The library as a C user gets it: install into a scratch prefix, build examples/generate.c with nothing but
# `pkg-config --cflags --libs tern` (so the public header must compile with only the installed include/), check
# that it runs against the installed libtern.so.MAJOR, and generate from a model.
# usage: example_installed.sh SOURCE_DIR BUILD_DIR MODEL_DIR
set -eu
src=$1
build=$2
model=$3
prefix=$build/testtmp/install.$$
trap 'rm -rf "$prefix"' EXIT
mkdir -p "$prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
pc=$(dirname "$(find "$prefix" -name tern.pc)")
export PKG_CONFIG_PATH="$pc"
libdir=$(pkg-config --variable=libdir tern)
echo "installed: $(pkg-config --modversion tern) in $prefix; cflags: $(pkg-config --cflags tern)"
cc -std=c11 -Wall -Wextra -Werror "$src/examples/generate.c" $(pkg-config --cflags --libs tern) \
    -Wl,-rpath,"$libdir" -o "$prefix/generate"
ldd "$prefix/generate" | grep -q "$libdir/libtern.so.[0-9]" || { echo "not linked to the installed shared library"; ldd "$prefix/generate"; exit 1; }
# Only the public API is exported.
if nm -D --defined-only "$libdir"/libtern.so.[0-9] | awk '{print $3}' | grep -v '^tern_' | grep -q .; then
    echo "libtern.so exports symbols outside the tern_ API:"
    nm -D --defined-only "$libdir"/libtern.so.[0-9] | awk '{print $3}' | grep -v '^tern_' | head
    exit 1
fi
"$prefix/generate" "$model" "The" 5 >"$prefix/out.txt" 2>"$prefix/err.txt" || { cat "$prefix/err.txt"; exit 1; }
cat "$prefix/out.txt" "$prefix/err.txt"
grep -q "^libtern $(pkg-config --modversion tern) " "$prefix/err.txt"
grep -q " 5 generated" "$prefix/err.txt"
# The installed binary finds its assets under PREFIX/share/tern.
"$prefix/bin/tern" --version
"$prefix/bin/tern" synth --preset tiny --dtype bf16 "$prefix/synth" | grep "vocabulary $prefix/bin/../share/tern/gemma4/vocab.gguf"
"$prefix/bin/tern" info "$prefix/synth" | grep -q complete
