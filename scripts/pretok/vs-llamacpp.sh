#!/bin/sh
# Compares tern's tokenizer with llama.cpp's on the test vocabularies and on the llama-bpe vocabulary under every
# tokenizer.ggml.pre name llama.cpp knows. LLAMA_CPP is a llama.cpp source folder built with CMake in
# LLAMA_CPP/build (e.g. the one node-llama-cpp 3.22.1 carries, see README.md here); tern must be built (make build).
#   usage: scripts/pretok/vs-llamacpp.sh LLAMA_CPP [COUNT]
set -eu
L=$(cd "$1" && pwd)
N=${2:-1000}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${TMPDIR:-/tmp}/tern-vs-llamacpp
mkdir -p "$work"
g++ -O1 -std=c++17 "$here/llama_ids.cpp" -I"$L/include" -I"$L/ggml/include" -L"$L/build/bin" -lllama -lggml -lggml-base \
    -Wl,-rpath,"$L/build/bin" -o "$work/llama_ids"
gcc -O1 "$here/tern_ids.c" -I"$root/src" -I"$root/include" "$root/build/libtern.a" \
    $(pkg-config --libs jansson libpcre2-8 icu-uc libmicrohttpd libavformat libavcodec libswresample libavutil) \
    -lpthread -lm -o "$work/tern_ids"
for v in gemma-4 llama-bpe llama-spm; do
    printf '%-28s ' "$v"
    python3 "$here/compare.py" "$work/llama_ids" "$work/tern_ids" "$root/tests/data/vocab/ggml-vocab-$v.gguf" 1 "$N"
done
python3 "$here/extract.py" "$L/src/llama-vocab.cpp" > "$work/pretok.json"
for n in $(python3 -c "import json,sys; print(' '.join(sorted(json.load(open(sys.argv[1]))['names'])))" "$work/pretok.json"); do
    python3 "$here/set_pre.py" "$root/tests/data/vocab/ggml-vocab-llama-bpe.gguf" "$work/v.gguf" "$n"
    printf 'llama-bpe as %-20s ' "$n"
    python3 "$here/compare.py" "$work/llama_ids" "$work/tern_ids" "$work/v.gguf" 3 "$N" 2>/dev/null | tail -1
done
