"""The regex list of each llama.cpp pre-tokenizer type, as tern uses it (gen_table.py, vectors.py)."""
import json

UPPER = r'[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]'
LOWER = r'[\p{Ll}\p{Lm}\p{Lo}\p{M}]'
NOHAN = r'(?:(?!\p{Han})%s)'
CONTR = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
STAND_IN = {
    'KIMI_K2': [r'[\p{Han}]+|[^\r\n\p{L}\p{N}]?' + NOHAN % UPPER + '*' + NOHAN % LOWER + '+' + CONTR +
                r'|[^\r\n\p{L}\p{N}]?' + NOHAN % UPPER + '+' + NOHAN % LOWER + '*' + CONTR +
                r'|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+'],
}
AFMOE_DIGITS = r'\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N}))'


def load(path):
    return json.load(open(path, encoding='utf-8'))

def regexes_of(d, t):
    if t in STAND_IN:
        return STAND_IN[t]
    return [AFMOE_DIGITS if r == r'\p{AFMoE_digits}' else r for r in d['types'][t]['regexes']]
