"""A stand-in for the two pieces of Hugging Face `transformers` that llama.cpp's convert_hf_to_gguf.py calls when it
converts a Gemma 4 checkpoint (Debian ships no `transformers`): AutoConfig, which reads config.json, and
AutoTokenizer, a read-only view of tokenizer.json and tokenizer_config.json. Used only by bench/vs-llamacpp.sh, on
the checkpoints `tern synth` writes; anything the converter asks for beyond this fails loudly.
"""
import json
from pathlib import Path


class _Config:
    def __init__(self, d):
        self._d = d

    def to_dict(self):
        return dict(self._d)

    def __getattr__(self, name):
        try:
            return self._d[name]
        except KeyError:
            raise AttributeError(name) from None


class AutoConfig:
    @staticmethod
    def from_pretrained(path, **kwargs):
        with open(Path(path) / "config.json", encoding="utf-8") as f:
            return _Config(json.load(f))


class _FastTokenizer:
    """What a fast tokenizer reports about its vocabulary: the model's tokens, the added ones, the special ones."""

    is_fast = True

    def __init__(self, path):
        path = Path(path)
        with open(path / "tokenizer.json", encoding="utf-8") as f:
            tj = json.load(f)
        cfg = {}
        if (path / "tokenizer_config.json").exists():
            with open(path / "tokenizer_config.json", encoding="utf-8") as f:
                cfg = json.load(f)
        model_vocab = tj["model"]["vocab"]
        self._base = dict(model_vocab) if isinstance(model_vocab, dict) else {t: i for i, (t, _) in enumerate(model_vocab)}
        self._added = {a["content"]: a["id"] for a in tj.get("added_tokens", [])}
        self._vocab = dict(self._base)
        self._vocab.update(self._added)
        specials = []
        for key in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"):
            v = cfg.get(key)
            if isinstance(v, dict):
                v = v.get("content")
            if v:
                specials.append(v)
        for v in cfg.get("additional_special_tokens", []) or []:
            specials.append(v["content"] if isinstance(v, dict) else v)
        specials += [a["content"] for a in tj.get("added_tokens", []) if a.get("special")]
        self.all_special_tokens = [t for i, t in enumerate(specials) if t in self._vocab and t not in specials[:i]]
        self.all_special_ids = [self._vocab[t] for t in self.all_special_tokens]

    @property
    def vocab_size(self):
        return len(self._base)

    @property
    def vocab(self):
        return self._vocab

    def get_vocab(self):
        return dict(self._vocab)

    def get_added_vocab(self):
        return dict(self._added)

    def __len__(self):
        return len(self._vocab)


class AutoTokenizer:
    @staticmethod
    def from_pretrained(path, **kwargs):
        return _FastTokenizer(path)
