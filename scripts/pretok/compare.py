#!/usr/bin/env python3
"""Tokenizes the same strings with llama.cpp and tern (vs-llamacpp.sh builds both programs) and counts the
strings whose ids differ: a fixed list (whitespace runs, CRLF, newline runs, digits, CJK, emoji, accents) and
random strings over such characters.

usage: compare.py LLAMA_IDS TERN_IDS VOCAB.gguf [SEED [COUNT]]"""
import random, struct, subprocess, sys

FIXED = [
    "hello world", " hello", "  hello", "   hello  ", "hello   ", "hello\n", "hello\n\n\n", "\n", "\n\n\n\n", " \n",
    "  \n\n", "\n  ", "\n\n  hello", "\n\n\thello", "\t\thello", "a\r\nb", "a\r\n\r\nb", "\r\n\r\n", "a\r\r\nb",
    "a \r\n b", "x  \n  y", "x\n  \n  y", "line1\n\n\nline2\n\n\n\n\nline3", " \t \n \t ", "end with spaces   ",
    "12345678", "1 22 333 4444", "3.14159", "日本語のテキスト", "中文 测试", "한국어 텍스트", "emoji 😀😃 👍🏽 👨‍👩‍👧",
    "café naïve Ångström", "e\u0301", "ﬁ ligature", "don't I'll we're they've He'D", "HTTPServer camelCase",
    "def f(x):\n    return x  \n\n", "    indented\n        more", "price: $1,234.56!!", "  \u00a0 nbsp",
    "\u3000ideographic space", "mixed \t \r\n  \n\n   end", "\n" * 35, " " * 90 + "x",
]
ALPHA = [' ', ' ', ' ', '\t', '\r', '\n', '\n', 'a', 'b', 'Z', '.', ',', '1', '2', 'é', '中', '😀', "'", 's',
         '\u00a0', '\u3000', '\u0301', '-', '_']
llama_ids, tern_ids, vocab = sys.argv[1:4]
rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
cases = FIXED + [''.join(rng.choice(ALPHA) for _ in range(rng.randint(1, 14)))
                 for _ in range(int(sys.argv[5]) if len(sys.argv) > 5 else 1000)]
batch = '/tmp/tern-compare-batch.bin'
with open(batch, 'wb') as f:
    for s in cases:
        b = s.encode()
        f.write(struct.pack('<I', len(b)) + b)
ra = subprocess.run([llama_ids, vocab, batch], capture_output=True)
rb = subprocess.run([tern_ids, vocab, batch], capture_output=True)
if ra.returncode or rb.returncode:
    print('%s failed on this vocabulary' % ('llama.cpp' if ra.returncode else 'tern'))
    sys.exit(0)
a, b = ra.stdout.decode().split('\n'), rb.stdout.decode().split('\n')
bad = [i for i, s in enumerate(cases) if a[i] != b[i]]
for i in bad[:int(sys.argv[6]) if len(sys.argv) > 6 else 0]:
    print('  %r\n    llama.cpp %s\n    tern      %s' % (cases[i], a[i], b[i]))
print('%d strings, %d differ' % (len(cases), len(bad)))
