#!/usr/bin/env python3
"""Writes tests/data/pretok/vectors.json: the pieces each pre-tokenizer type's regexes make of the test strings,
and what each Unicode normalizer makes of them — computed here by independent implementations (Python's `regex`
module for the regexes; `unicodedata` and str methods for the normalizers), for tern's tests to match.

Pieces: each regex splits every piece left by the one before; matches and the text between them are both kept
(an empty match only parts the text). Kimi K2 is checked against its original pattern (class intersections,
regex's V1 syntax), not against tern's lookahead spelling of it.

usage: vectors.py pretok.json > ../../tests/data/pretok/vectors.json  (Debian: python3-regex)"""
import json, random, sys, unicodedata
import regex
from pretok_lists import load, regexes_of

d = load(sys.argv[1])
KIMI_ORIGINAL = (r"[\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*"
                 r"[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?"
                 r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*"
                 r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

FIXED = [
    "hello world", "  hello", "hello   ", "hello\n\n\n", "\n\n  hello", "\n\n\thello", "a\r\nb", "a\r\n\r\nb",
    "x  \n  y", "x\n  \n  y", "line1\n\n\nline2", " \t \n \t ", "end with spaces   ", "12345678", "1 22 333 4444",
    "3.14159 and 1,234,567", "日本語のテキスト", "中文 测试 한국어", "emoji 😀😃 👍🏽 family 👨‍👩‍👧",
    "café naïve Ångström", "e\u0301 a\u0308", "don't I'll we're they've HE'D", "MixedCASE camelCase HTTPServer",
    "snake_case __init__", "def f(x):\n    return x  \n\n", "<sentinel:12> IMGIMGABZ", "price: $1,234.56!!",
    "a...b!!!c???", "x=1e10;y=0x1F", "tabs\t\there", "\u3000ideographic space", "Ünïcödé ÆØÅ Σίσυφος",
]
ALPHA = [' ', ' ', ' ', '\t', '\r', '\n', '\n', 'a', 'b', 'Z', 'É', '.', ',', '$', '1', '2', '3', 'é', '中', '語',
         '😀', "'", 's', 'D', '\u3000', '\u0301', '-', '_', '/']
rng = random.Random(20261202)
CASES = FIXED + [''.join(rng.choice(ALPHA) for _ in range(rng.randint(1, 16))) for _ in range(60)]

def split(pieces, pattern, flags=0):
    rx = regex.compile(pattern, flags)
    out = []
    for p in pieces:
        pos = 0
        for m in rx.finditer(p):
            if m.start() > pos:
                out.append(p[pos:m.start()])
            if m.end() > m.start():
                out.append(m.group())
            pos = max(pos, m.end())
        if pos < len(p):
            out.append(p[pos:])
    return out

pre = {}
for t in sorted(d['types']):
    names = sorted(n for n, v in d['names'].items() if v['type'] == t)
    if not names:
        continue
    key = tuple(regexes_of(d, t))
    metaspace = any('escape_whitespaces' in d['names'][n]['flags'] for n in names)
    if (key, metaspace) in [(tuple(v['regexes']), v['metaspace']) for v in pre.values()]:
        for v in pre.values():
            if tuple(v['regexes']) == key and v['metaspace'] == metaspace:
                v['names'] += names
        continue
    cases = []
    for s in CASES:
        text = s.replace(' ', '\u2581') if metaspace else s
        pieces = [text]
        for r in ([KIMI_ORIGINAL] if t == 'KIMI_K2' else key):
            pieces = split(pieces, r, regex.V1 if t == 'KIMI_K2' else 0)
        cases.append([s, pieces])
    pre[t] = {'names': names, 'regexes': list(key), 'metaspace': metaspace, 'cases': cases}

def lower_chars(s):  # Hugging Face: each char by Rust's char::to_lowercase (no final-sigma context)
    return ''.join(c.lower() if c != '\u03a3' else '\u03c3' for c in s)

NORM_CASES = FIXED + ["ﬁ ligature Ⅻ ① ㎏", "ΣΊΣΥΦΟΣ ΟΔΟΣ", "İstanbul ẞ", "Å\u030a e\u0301\u0327", "\u1e9b\u0323",
                      "  \t padded \u3000 ", "\u00a0nbsp\u00a0", "한국어 가나다", "ﾊﾝｶｸ ｶﾀｶﾅ"]
norms = {
    'NFC': [[s, unicodedata.normalize('NFC', s)] for s in NORM_CASES],
    'NFD': [[s, unicodedata.normalize('NFD', s)] for s in NORM_CASES],
    'NFKC': [[s, unicodedata.normalize('NFKC', s)] for s in NORM_CASES],
    'NFKD': [[s, unicodedata.normalize('NFKD', s)] for s in NORM_CASES],
    'Lowercase': [[s, lower_chars(s)] for s in NORM_CASES],
    'StripAccents': [[s, ''.join(c for c in s if unicodedata.category(c) != 'Mn')] for s in NORM_CASES],
    'Strip': [[s, s.strip()] for s in NORM_CASES],
}
json.dump({'unicode': unicodedata.unidata_version, 'pre': pre, 'normalizers': norms}, sys.stdout,
          ensure_ascii=False, indent=0)
print()
