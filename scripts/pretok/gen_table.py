#!/usr/bin/env python3
"""Writes src/tokenizer/pretok_names.c from extract.py's JSON: every tokenizer.ggml.pre name llama.cpp knows,
with its regex list and flags. Two of llama.cpp's lists are triggers for hand-written splitters rather than
regexes; here they are the regexes those splitters stand for (KIMI_K2: tokenization_kimi.py's pattern, its
class intersections written as lookaheads; AFMOE: digit runs in threes from the right).

usage: gen_table.py pretok.json > ../../src/tokenizer/pretok_names.c"""
import sys

from pretok_lists import load, regexes_of as _regexes_of

d = load(sys.argv[1])
regexes_of = lambda t: _regexes_of(d, t)
def c_lit(s):
    out = ''
    for ch in s:
        if ch == '\\': out += '\\\\'
        elif ch == '"': out += '\\"'
        elif ch == '\n': out += '\\n'
        elif ch == '\r': out += '\\r'
        elif ch == '\t': out += '\\t'
        else: out += ch
    return '"' + out + '"'

# Types sharing a list share one array, named after the type most names use.
uses = {t: sum(1 for v in d['names'].values() if v['type'] == t) for t in d['types']}
lists, list_id = [], {}
for t in sorted(d['types'], key=lambda t: (-uses[t], t)):
    key = tuple(regexes_of(t))
    if key not in list_id:
        list_id[key] = 'RE_%s' % t
        lists.append((list_id[key], key))
lists.sort()

print('''/* pretok_names.c — the byte-level BPE pre-tokenizers llama.cpp knows by their tokenizer.ggml.pre name, each as
 * the list of regexes llama.cpp applies one after another (every regex splits the pieces the one before left; the
 * matches and the text between them are both kept) and the flags it sets with the name. Written by
 * scripts/pretok/gen_table.py from llama.cpp's src/llama-vocab.cpp as node-llama-cpp 3.22.1 carries it; do not
 * edit by hand. The regexes run on PCRE2 as written, so pieces are what the regexes define (llama.cpp runs most
 * of them through hand-written splitters or std::regex over collapsed text, which agree on ordinary text). */
#include <string.h>

#include "tokenizer/tok_internal.h"
''')
for name, key in lists:
    print('static const char *const %s[] = {' % name)
    for r in key:
        print('    %s,' % c_lit(r))
    print('    NULL};')
print()
print('static const tok_pre_name NAMES[] = {')
for n in sorted(d['names']):
    v = d['names'][n]
    t = v['type']
    flags = []
    if 'ignore_merges' in v['flags']: flags.append('TOK_PRE_IGNORE_MERGES')
    if 'add_bos' in v['flags']: flags.append('TOK_PRE_ADD_BOS')
    if 'no_bos' in v['flags']: flags.append('TOK_PRE_NO_BOS')
    if not d['types'][t]['byte_encode']: flags.append('TOK_PRE_RAW_UTF8')
    if 'escape_whitespaces' in v['flags']: flags.append('TOK_PRE_SPACES_AS_METASPACE')
    if t == 'GEMMA4': flags.append('TOK_PRE_NEWLINES_WHOLE')
    print('    {%s, %s, %s},' % (c_lit(n), list_id[tuple(regexes_of(t))], ' | '.join(flags) or '0'))
print('};')
print('''
const tok_pre_name *tok_pre_by_name(const char *name) {
    if (!name || !*name)
        name = "default";
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++)
        if (!strcmp(NAMES[i].name, name))
            return &NAMES[i];
    return NULL;
}''')
