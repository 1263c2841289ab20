#!/usr/bin/env python3
"""Reads llama.cpp's src/llama-vocab.cpp and prints, as JSON, the byte-level BPE pre-tokenizers it knows:
each tokenizer.ggml.pre name with its type and flags, and each type's regex list (runtime strings, after C
escapes). Used to write src/tokenizer/pretok_names.c and to make the test vectors (README.md here).

usage: extract.py LLAMA_CPP_SRC/src/llama-vocab.cpp > pretok.json"""
import json, re, sys

src = open(sys.argv[1], encoding='utf-8').read()

def c_string(lit):
    """The runtime value of a C++ string literal body (UTF-8 source characters kept)."""
    out, i = [], 0
    esc = {'n': '\n', 'r': '\r', 't': '\t', '\\': '\\', '"': '"', "'": "'", '0': '\0'}
    while i < len(lit):
        c = lit[i]
        if c == '\\':
            n = lit[i + 1]
            if n == 'x':
                j = i + 2
                while j < len(lit) and lit[j] in '0123456789abcdefABCDEF':
                    j += 1
                out.append(chr(int(lit[i + 2:j], 16)))
                i = j
                continue
            out.append(esc[n])
            i += 2
            continue
        out.append(c)
        i += 1
    return ''.join(out)

# 1. The constructor's switch: case labels -> regex list (and byte_encode = false).
ctor = src[src.index('llm_tokenizer_bpe(const llama_vocab & vocab)'):]
ctor = ctor[:ctor.index('std::vector<std::string> regex_exprs;')]
types = {}
for block in re.split(r'\n\s*break;', ctor):
    labels = re.findall(r'case (LLAMA_VOCAB_PRE_TYPE_\w+):', block)
    if 'default:' in block:
        labels.append('DEFAULT')
    m = re.search(r'regex_exprs = \{(.*?)\};', block, re.S)
    if not labels or not m:
        continue
    body = '\n'.join(l for l in m.group(1).split('\n') if not l.strip().startswith('//'))
    regexes = [c_string(x) for x in re.findall(r'"((?:[^"\\]|\\.)*)"', body)]
    for lab in labels:
        types[lab.replace('LLAMA_VOCAB_PRE_TYPE_', '')] = {
            'regexes': regexes, 'byte_encode': 'byte_encode = false' not in block}

# 2. The name chain: names -> type and the flags set with it.
chain = src[src.index('} else if (tokenizer_pre == "default") {'):src.index('unknown pre-tokenizer type')]
names = {}
for names_part, body in re.findall(r'if \(((?:\s*tokenizer_pre == "[^"]+"\s*\|\|)*\s*tokenizer_pre == "[^"]+")\s*\)\s*\{(.*?)\}', chain, re.S):
    t = re.search(r'pre_type = LLAMA_VOCAB_PRE_TYPE_(\w+);', body).group(1)
    flags = sorted(set(re.findall(r'(\w+) = true;', body)) | ({'no_bos'} if 'special_bos_id = LLAMA_TOKEN_NULL' in body else set()))
    for n in re.findall(r'"([^"]+)"', names_part):
        names[n] = {'type': t, 'flags': flags}

json.dump({'types': types, 'names': names}, sys.stdout, ensure_ascii=False, indent=1)
