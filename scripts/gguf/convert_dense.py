"""llama.cpp's convert_hf_to_gguf.py for the Llama / Qwen 2 / Qwen 3 checkpoints `tern synth` writes, whose
tokenizer.json is a byte-level BPE vocabulary cut from a real one (Debian ships no `transformers`, whose tokenizer the
converter's byte-level path would run to identify the pre-tokenizer). This runs the converter unchanged except for
that one step, which here writes the vocabulary as llama.cpp's "gpt2" kind with the pre-tokenizer of the family
(Llama 3: "llama-bpe", Qwen: "qwen2"), tokens in id order, added special tokens as control tokens, and the merges,
special ids and chat template as the converter's SpecialVocab reads them.

    PYTHONPATH=bench/hf_standin:LLAMA_SRC/gguf-py:LLAMA_SRC python3 scripts/gguf/convert_dense.py \
        MODEL_DIR --outtype f32 --outfile OUT.gguf
"""
import json
from pathlib import Path

import gguf
import convert_hf_to_gguf
from conversion.base import TextModel


def set_vocab_bytelevel(self):
    with open(Path(self.dir_model) / "tokenizer.json", encoding="utf-8") as f:
        tok = json.load(f)
    if tok["model"]["type"] != "BPE" or tok["model"].get("byte_fallback"):
        raise ValueError("convert_dense.py converts byte-level BPE tokenizers only")
    n = self.hparams.get("vocab_size") or len(tok["model"]["vocab"])
    tokens = [f"[PAD{i}]" for i in range(n)]
    types = [gguf.TokenType.UNUSED] * n
    for text, i in tok["model"]["vocab"].items():
        if i < n:
            tokens[i], types[i] = text, gguf.TokenType.NORMAL
    for a in tok.get("added_tokens", []):
        if a["id"] < n:
            tokens[a["id"]] = a["content"]
            types[a["id"]] = gguf.TokenType.CONTROL if a.get("special") else gguf.TokenType.USER_DEFINED
    self.gguf_writer.add_tokenizer_model("gpt2")
    self.gguf_writer.add_tokenizer_pre("llama-bpe" if self.model_arch == gguf.MODEL_ARCH.LLAMA else "qwen2")
    self.gguf_writer.add_token_list(tokens)
    self.gguf_writer.add_token_types(types)
    gguf.SpecialVocab(self.dir_model, load_merges=True).add_to_gguf(self.gguf_writer)


def no_sentencepiece(self, *args, **kwargs):
    raise FileNotFoundError("no tokenizer.model: the vocabulary is byte-level")


TextModel._set_vocab_sentencepiece = no_sentencepiece
TextModel._set_vocab_llama_hf = no_sentencepiece
TextModel._set_vocab_gpt2 = set_vocab_bytelevel
TextModel._set_vocab_qwen = set_vocab_bytelevel
convert_hf_to_gguf.main()
