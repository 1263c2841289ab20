"""llama.cpp's convert_hf_to_gguf.py for a Gemma 4 checkpoint whose tokenizer is byte-level BPE (tern's demo model,
scripts/train-demo), used by bench/perplexity-formats.sh. The converter's Gemma 4 path reads only SentencePiece-style
vocabularies (byte fallback, '▁' spaces); this runs the converter unchanged except for that one step, which here
writes the vocabulary as llama.cpp's byte-level "gpt2" kind with the GPT-2 pre-tokenizer (what the checkpoint's
tokenizer.json says: a ByteLevel pre-tokenizer with its regex), tokens in id order, added special tokens as control
tokens, the merges, special ids and chat template as the converter's SpecialVocab reads them.

    PYTHONPATH=bench/hf_standin:LLAMA_SRC/gguf-py:LLAMA_SRC python3 bench/hf_standin/convert_bytelevel.py \
        MODEL_DIR --outtype f32 --outfile OUT.gguf
"""
import json
from pathlib import Path

import gguf
import convert_hf_to_gguf
from conversion.gemma import Gemma4Model


def set_vocab_bytelevel(self):
    with open(Path(self.dir_model) / "tokenizer.json", encoding="utf-8") as f:
        tok = json.load(f)
    pre = tok.get("pre_tokenizer") or {}
    if tok["model"]["type"] != "BPE" or pre.get("type") != "ByteLevel" or not pre.get("use_regex", True):
        raise ValueError("convert_bytelevel.py converts byte-level BPE tokenizers (ByteLevel pre-tokenizer with its "
                         "regex) only")
    n = self.hparams.get("vocab_size") or len(tok["model"]["vocab"])
    tokens = [f"[PAD{i}]" for i in range(n)]
    types = [gguf.TokenType.UNUSED] * n
    for text, i in tok["model"]["vocab"].items():
        tokens[i], types[i] = text, gguf.TokenType.NORMAL
    for a in tok.get("added_tokens", []):
        tokens[a["id"]] = a["content"]
        types[a["id"]] = gguf.TokenType.CONTROL if a.get("special") else gguf.TokenType.USER_DEFINED
    self.gguf_writer.add_tokenizer_model("gpt2")
    self.gguf_writer.add_tokenizer_pre("gpt-2")
    self.gguf_writer.add_token_list(tokens)
    self.gguf_writer.add_token_types(types)
    gguf.SpecialVocab(self.dir_model, load_merges=True).add_to_gguf(self.gguf_writer)
    self.gguf_writer.add_add_bos_token(True)


Gemma4Model.set_vocab = set_vocab_bytelevel
convert_hf_to_gguf.main()
