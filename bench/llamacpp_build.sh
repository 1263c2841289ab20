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
# Built without AMX: on a CPU that has it (Sapphire Rapids-class Xeons), this llama.cpp's AMX path crashes in
# ggml_backend_amx_mul_mat on the benchmark's e2b files (SIGSEGV / SIGILL in llama-bench's first prompt;
# llama.cpp issue 20824), so its AVX-512 kernels are what runs; tern uses no AMX either. The flags change nothing
# on a CPU without AMX.
build=build-noamx
noamx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
if [ ! -x $build/bin/llama-bench ] || [ ! -x $build/bin/llama-batched-bench ] || [ ! -x $build/bin/llama-quantize ] ||
    [ ! -x $build/bin/llama-perplexity ]; then
    cmake -S src -B $build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF "-DCMAKE_C_FLAGS=$noamx" \
        "-DCMAKE_CXX_FLAGS=$noamx" >&2
    cmake --build $build -j "$(nproc)" --target llama-bench llama-batched-bench llama-quantize llama-perplexity \
        llama-eval-callback >&2
fi
echo "$cache/$build/bin"
