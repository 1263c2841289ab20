#!/usr/bin/env python3
"""Copies a vocabulary-only GGUF file with tokenizer.ggml.pre set to another name (for the test vectors).

usage: set_pre.py IN.gguf OUT.gguf NAME"""
import struct, sys

SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF scalar types

def skip_value(b, o, t):
    if t == 8:  # string
        n, = struct.unpack_from('<Q', b, o)
        return o + 8 + n
    if t == 9:  # array
        et, n = struct.unpack_from('<IQ', b, o)
        o += 12
        if et == 8:
            for _ in range(n):
                o = skip_value(b, o, 8)
            return o
        return o + SIZES[et] * n
    return o + SIZES[t]

b = open(sys.argv[1], 'rb').read()
magic, version, n_tensors, n_kv = struct.unpack_from('<4sIQQ', b, 0)
assert magic == b'GGUF' and n_tensors == 0, 'a vocabulary-only GGUF file'
o, out = 24, bytearray(b[:24])
for _ in range(n_kv):
    klen, = struct.unpack_from('<Q', b, o)
    key = b[o + 8:o + 8 + klen].decode()
    t, = struct.unpack_from('<I', b, o + 8 + klen)
    v0 = o + 12 + klen
    v1 = skip_value(b, v0, t)
    if key == 'tokenizer.ggml.pre':
        name = sys.argv[3].encode()
        out += b[o:v0] + struct.pack('<Q', len(name)) + name
    else:
        out += b[o:v1]
    o = v1
out += b[o:]
open(sys.argv[2], 'wb').write(out)
