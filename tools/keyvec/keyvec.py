#!/usr/bin/python3
"""keyvec.py -- an independent implementation of docs/keys.md that writes tests/vectors/keys.txt.

Needs python3-xxhash (Debian). The C unit test tests/unit/test_keys.c checks libkvtier against
the file; any other language can check itself against it the same way.

Format, one record a line:
  ns NAME REVISION dtype n_layers n_kv_heads head_dim tokens_per_chunk tp_rank tp_size kv_group layout -> NS_HEX
  keys NS_HEX C t0,t1,... -> KEY0_HEX KEY1_HEX ...
(REVISION is '-' for NULL/empty; hex is the 128-bit value as w[1] then w[0], i.e. big-endian.)
"""
import struct
import sys
import xxhash


def h128(b):
    v = xxhash.xxh3_128_intdigest(b)
    return v & (2**64 - 1), v >> 64  # (low, high)


def idbytes(lo, hi):
    return struct.pack('<QQ', lo, hi)


def hexid(lo, hi):
    return '%016x%016x' % (hi, lo)


def namespace(name, rev, vals):
    b = b'kvtier-ns-v1'
    for s in (name, rev):
        e = s.encode()
        b += struct.pack('<I', len(e)) + e
    vals = list(vals)
    if vals[6] == 0:
        vals[6] = 1
    b += struct.pack('<9I', *vals)
    return h128(b)


def keys(ns, tokens, c):
    out, prev = [], ns
    for i in range(len(tokens) // c):
        prev = h128(idbytes(*prev) + struct.pack('<%dI' % c, *tokens[i * c:(i + 1) * c]))
        out.append(prev)
    return out


def main():
    models = [
        ('aidreams260K', '', (1, 4, 4, 16, 16, 0, 1, 0, 0)),
        ('aidreams260K', '', (0, 4, 4, 16, 16, 0, 1, 0, 0)),
        ('aidreams260K', '', (1, 4, 4, 16, 32, 0, 1, 0, 0)),
        ('meta-llama/Llama-3.1-8B', 'main', (2, 32, 8, 128, 256, 1, 4, 0, 0)),
        ('m', '', (3, 1, 1, 1, 1, 0, 0, 0, 0)),
        ('Qwen/Qwen2.5-7B-Instruct', 'a09a3545', (1, 28, 4, 128, 16, 0, 2, 1, 0)),
    ]
    out = []
    for name, rev, vals in models:
        lo, hi = namespace(name, rev, vals)
        out.append('ns %s %s %s -> %s' % (name, rev or '-', ' '.join(map(str, vals)), hexid(lo, hi)))
    seqs = [
        (16, list(range(1, 65))),
        (16, [1] + [319, 459, 355, 260, 275, 429, 339, 315, 374, 327, 446, 262, 421, 392, 275, 280] * 3),
        (1, [0, 1, 4294967295]),
        (4, [7, 7, 7]),
        (256, [(i * 2654435761) & 0xffffffff for i in range(1024)]),
    ]
    for c, toks in seqs:
        ns = namespace(*models[0][:2], models[0][2])
        ks = keys(ns, toks, c)
        out.append('keys %s %d %s -> %s' % (hexid(*ns), c, ','.join(map(str, toks)),
                                           ' '.join(hexid(*k) for k in ks)))
    sys.stdout.write('\n'.join(out) + '\n')


if __name__ == '__main__':
    main()
