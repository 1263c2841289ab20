# llamacpp_env.sh — sourced by the scripts that run llama.cpp's tools beside tern (vs-llamacpp.sh,
# perplexity-formats.sh) with $cache set: installs the Python modules llama.cpp's converter imports (Debian's
# python3-numpy, -torch, -tqdm), builds llama.cpp (llamacpp_build.sh) and sets $bin (its binaries, on
# LD_LIBRARY_PATH) and $src (its source: convert_hf_to_gguf.py, gguf-py).
for mod in numpy torch tqdm; do
    if ! /usr/bin/python3 -c "import $mod" 2>/dev/null; then
        echo "installing python3-$mod (convert_hf_to_gguf.py imports it)" >&2
        apt-get install -y "python3-$mod" >/dev/null
    fi
done
bin=$(bench/llamacpp_build.sh "$cache/llamacpp")
src=$cache/llamacpp/src
export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
