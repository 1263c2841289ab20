#!/usr/bin/env bash
# llamacpp_build.sh [CACHE] — llama.cpp as node-llama-cpp@3.22.1 ships it (its source is a git bundle inside the
# npm package), cloned and built for this CPU (Release, native, CPU only) into CACHE (default
# ${XDG_CACHE_HOME:-~/.cache}/tern/llamacpp). Prints the folder holding the binaries. Nothing is built twice.
set -euo pipefail
cache=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/tern/llamacpp}
pkg=node-llama-cpp@3.22.1
mkdir -p "$cache"
cd "$cache"
if [ ! -d src/.git ]; then
    [ -f node-llama-cpp-3.22.1.tgz ] || npm pack --silent "$pkg" >&2
    rm -rf pkg && mkdir pkg && tar -xzf node-llama-cpp-3.22.1.tgz -C pkg
    git clone --quiet pkg/package/llama/gitRelease.bundle src.tmp >&2
    mv src.tmp src
fi
if [ ! -x build/bin/llama-bench ] || [ ! -x build/bin/llama-batched-bench ] || [ ! -x build/bin/llama-quantize ]; then
    cmake -S src -B build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF >&2
    cmake --build build -j "$(nproc)" --target llama-bench llama-batched-bench llama-quantize llama-perplexity \
        llama-eval-callback >&2
fi
echo "$cache/build/bin"
