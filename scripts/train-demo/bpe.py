"""bpe.py — a byte-level BPE vocabulary (GPT-2's byte-to-unicode alphabet and pre-tokenizer regex) with Gemma 4's
special tokens at Gemma 4's ids: training, encoding, and the Hugging Face tokenizer.json it is shipped as."""
import heapq
import json
from collections import Counter, defaultdict

import regex

# The GPT-2 pre-tokenizer pattern (ByteLevel with use_regex), as tern and Hugging Face run it.
PRETOK = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

# Gemma 4's special tokens that a text model uses, at their real ids (the rest of 0..106 are unused slots).
SPECIAL_LOW = {0: "<pad>", 1: "<eos>", 2: "<bos>", 3: "<unk>", 4: "<mask>", 46: "<|tool>", 47: "<tool|>",
               48: "<|tool_call>", 49: "<tool_call|>", 50: "<|tool_response>", 51: "<tool_response|>",
               52: '<|"|>', 98: "<|think|>", 100: "<|channel>", 101: "<channel|>", 105: "<|turn>", 106: "<turn|>"}
# Tokens Gemma 4 marks special (skipped when decoding for the user); the tool and channel markers are not.
NOT_SPECIAL = {48, 49, 50, 51, 52, 100, 101}
N_LOW = 107
# Media markers the chat template may name, placed at the top of the vocabulary.
MEDIA = ["<|image>", "<|audio>", "<|image|>", "<|audio|>", "<image|>", "<audio|>", "<|video|>"]


def bytes_to_unicode():
    """GPT-2's map from the 256 byte values to printable characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = bytes_to_unicode()


def specials(vocab_size):
    """id -> content for every special token."""
    out = {i: SPECIAL_LOW.get(i, f"<unused{i}>") for i in range(N_LOW)}
    for k, m in enumerate(MEDIA):
        out[vocab_size - len(MEDIA) + k] = m
    return out


def train(texts, vocab_size):
    """Learns merges over the pre-tokenized words of texts until the vocabulary holds vocab_size entries.
    Ties between equally frequent pairs go to the lexically smallest, so the result is deterministic."""
    marks = regex.compile("|".join(regex.escape(s) for s in specials(vocab_size).values()))
    counts = Counter()
    for t in texts:
        for seg in marks.split(t):
            for w in PRETOK.findall(seg):
                counts[w] += 1
    words = [[B2U[b] for b in w.encode()] for w in counts]
    freq = list(counts.values())
    pair_count = Counter()
    where = defaultdict(set)
    for i, syms in enumerate(words):
        for a, b in zip(syms, syms[1:]):
            pair_count[(a, b)] += freq[i]
            where[(a, b)].add(i)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    n_merges = vocab_size - N_LOW - len(MEDIA) - 256
    merges = []
    while len(merges) < n_merges and heap:
        c, p = heapq.heappop(heap)
        if -c != pair_count.get(p, 0) or c == 0:
            continue
        merges.append(p)
        new = p[0] + p[1]
        touched = set()
        for i in list(where[p]):
            syms = words[i]
            for a, b in zip(syms, syms[1:]):
                pair_count[(a, b)] -= freq[i]
                touched.add((a, b))
            out, j = [], 0
            while j < len(syms):
                if j + 1 < len(syms) and syms[j] == p[0] and syms[j + 1] == p[1]:
                    out.append(new)
                    j += 2
                else:
                    out.append(syms[j])
                    j += 1
            words[i] = out
            for a, b in zip(out, out[1:]):
                pair_count[(a, b)] += freq[i]
                where[(a, b)].add(i)
                touched.add((a, b))
        for q in touched:
            if pair_count[q] > 0:
                heapq.heappush(heap, (-pair_count[q], q))
            else:
                pair_count.pop(q, None)
        del where[p]
    return merges


class Tokenizer:
    def __init__(self, merges, vocab_size):
        self.vocab_size = vocab_size
        self.special = specials(vocab_size)
        self.merges = merges
        self.rank = {p: r for r, p in enumerate(merges)}
        self.vocab = {}
        nid = N_LOW
        for b in range(256):
            self.vocab[B2U[b]] = nid
            nid += 1
        for a, b in merges:
            self.vocab[a + b] = nid
            nid += 1
        assert nid == vocab_size - len(MEDIA), (nid, vocab_size)
        self.inv = {i: s for s, i in self.vocab.items()}
        self.special_id = {s: i for i, s in self.special.items()}
        self.split = regex.compile("(" + "|".join(regex.escape(s) for s in sorted(self.special_id, key=len,
                                                                                   reverse=True)) + ")")
        self.cache = {}

    def encode_word(self, w):
        ids = self.cache.get(w)
        if ids is not None:
            return ids
        syms = [B2U[b] for b in w.encode()]
        while len(syms) > 1:
            best = min(range(len(syms) - 1), key=lambda j: self.rank.get((syms[j], syms[j + 1]), 1 << 30))
            if (syms[best], syms[best + 1]) not in self.rank:
                break
            syms[best:best + 2] = [syms[best] + syms[best + 1]]
        ids = [self.vocab[s] for s in syms]
        self.cache[w] = ids
        return ids

    def encode(self, text):
        """Special tokens written in the text become their ids; the rest is byte-level BPE (no BOS added)."""
        out = []
        for seg in self.split.split(text):
            if not seg:
                continue
            sid = self.special_id.get(seg)
            if sid is not None:
                out.append(sid)
                continue
            for w in PRETOK.findall(seg):
                out.extend(self.encode_word(w))
        return out

    def decode(self, ids):
        u2b = {u: b for b, u in B2U.items()}
        out = bytearray()
        for i in ids:
            if i in self.special:
                out += self.special[i].encode()
            else:
                out += bytes(u2b[ch] for ch in self.inv[i])
        return out.decode("utf-8", errors="replace")

    def tokenizer_json(self):
        vocab = {s: i for i, s in self.special.items()}
        vocab.update(self.vocab)
        added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                  "normalized": False, "special": i not in NOT_SPECIAL} for i, s in sorted(self.special.items())]
        return {
            "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                              "use_regex": True},
            "post_processor": {
                "type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": "<bos>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}}},
            "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": vocab, "merges": [a + " " + b for a, b in self.merges]},
        }

    @staticmethod
    def from_json(path):
        t = json.load(open(path))
        merges = [tuple(m.split(" ")) for m in t["model"]["merges"]]
        return Tokenizer(merges, len(t["model"]["vocab"]))
