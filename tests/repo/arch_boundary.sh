#!/bin/sh
# The engine, server, chat, fit, the KV budget and the verbs know models only through the architecture table
# (src/models/model.h): no Gemma 4 symbol or header outside src/models/, except the synth verb, which writes
# Gemma 4 checkpoints by design. Chat and the tokenizer serve both the loader and the server, so they call
# neither the loaded model (tern_model_*) nor the engine; the draft room is handed a network, a tokenizer and a loader
# by the engine, so it calls neither the loader nor the engine. Fails listing every place that breaks a rule.
# usage: arch_boundary.sh SOURCE_DIR
set -eu
cd "$1"
hits=$(grep -rnE 'tern_gemma4|TERN_GEMMA4|models/gemma4' src --include='*.c' --include='*.h' \
    | grep -v '^src/models/' | grep -v '^src/cli/cmd_synth\.c:' || true)
if [ -n "$hits" ]; then
    echo "Gemma 4 symbols outside src/models/ (use the architecture table in models/model.h):"
    echo "$hits"
    exit 1
fi
up=$(grep -rnE 'tern_model_[a-z_]*\(|tern_engine_[a-z_]*\(|"loader/|"engine/' src/chat src/tokenizer \
    --include='*.c' --include='*.h' || true)
if [ -n "$up" ]; then
    echo "chat/ or tokenizer/ reaching up into the loaded model or the engine (hand them a tokenizer instead):"
    echo "$up"
    exit 1
fi
down=$(grep -rnE 'tern_model_[a-z_]*\(|tern_engine_[a-z_]*\(|"loader/|"engine/|"server/' src/draft \
    --include='*.c' --include='*.h' || true)
if [ -n "$down" ]; then
    echo "draft/ reaching up into the loader, the engine or the server (the engine hands it a network, a tokenizer"
    echo "and a loader; draft.h):"
    echo "$down"
    exit 1
fi
echo "architecture boundary: only src/models/ (and the synth verb) name Gemma 4; chat, tokenizer and draft stay below"
