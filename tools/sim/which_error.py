#!/usr/bin/python3
"""which_error.py -- how well a KV store can tell, at an access, whether the block will be read
again (docs/policies.md, "An eleventh look"). An offline experiment, not part of the build; the
standard library only.

Each block access gets features a store sees: the chain's turn (how many earlier requests the
request extends, found by its deepest block past the first that an earlier request held), the
block's reuses so far, whether it ends its request, the request's new blocks, the block's depth
and its distance from the request's end (log2 buckets). Its label: is the block accessed again
later in the trace. For each feature set, every class predicts its majority label, fitted on the
whole trace with hindsight (in-sample, so a bound on what those features can tell); printed are
the share of accesses it gets wrong and its Brier score.

With --write PREFIX it also writes, for `kvtier sim --bypass FILE` (one byte per access, 1 =
not kept): PREFIX.exact, the truth (every access whose block is not read again), and
PREFIX.<set>.<t>, each feature set's table with hindsight bypassing the classes whose share of
"read again" is below t (0.1 to 0.5; 0.5 is the majority label).

With --opt C the label is OPT's decision instead, as Hawkeye learns it (docs/policies.md, "A
fifteenth look"): is the block's next access a hit of MIN at C blocks, i.e. did OPT keep it.

usage: /usr/bin/python3 tools/sim/which_error.py TRACE.jsonl [--write PREFIX] [--opt C]
"""
import heapq
import json
import math
import sys
from collections import Counter, defaultdict


def features(reqs):
    reuses, turn_of, out = Counter(), {}, []
    for ids in reqs:
        n, turn = len(ids), 0
        for d in range(n - 1, 0, -1):  # block 0 begins every request: not a chain
            if ids[d] in turn_of:
                turn = turn_of[ids[d]] + 1
                break
        new = sum(1 for b in ids if b not in reuses)
        for d, b in enumerate(ids):
            out.append((b, (min(turn, 6), min(reuses[b], 6), d == n - 1,
                            min(int(math.log2(new + 1)), 5), min(int(math.log2(d + 1)), 5),
                            min(int(math.log2(n - d)), 4))))
            reuses[b] += 1
        for b in ids[1:]:
            turn_of.setdefault(b, turn)
    return out


def opt_kept(blocks, cap):
    """Per access: is the block's next access a hit of MIN (Belady) at cap blocks."""
    n, never = len(blocks), len(blocks)
    nxt, last = [never] * n, {}
    for i in range(n - 1, -1, -1):
        nxt[i] = last.get(blocks[i], never)
        last[blocks[i]] = i
    hit, cur, heap = [False] * (n + 1), {}, []  # cur: block -> its next use
    for i, b in enumerate(blocks):
        if b in cur:
            hit[i] = True
        elif len(cur) >= cap:
            while True:  # the farthest next use goes (stale heap entries skipped)
                nu, v = heapq.heappop(heap)
                if cur.get(v) == -nu:
                    del cur[v]
                    break
        cur[b] = nxt[i]
        heapq.heappush(heap, (-nxt[i], b))
    print(f"OPT at {cap}: {sum(hit) / n:.4f}")
    return [hit[nxt[i]] for i in range(n)]


def write(path, flags):
    with open(path, "wb") as f:
        f.write(bytes(flags))


def main():
    args, opts = sys.argv[2:], {}
    while len(args) >= 2 and args[0] in ("--write", "--opt"):
        opts[args[0]], args = args[1], args[2:]
    if len(sys.argv) < 2 or args:
        sys.exit(__doc__)
    prefix = opts.get("--write")
    with open(sys.argv[1]) as f:
        reqs = [json.loads(line)["hash_ids"] for line in f if line.strip()]
    acc = features(reqs)
    if "--opt" in opts:
        label, what = opt_kept([b for b, _ in acc], int(opts["--opt"])), "kept by OPT"
    else:
        label, seen, what = [0] * len(acc), set(), "read again"
        for i in range(len(acc) - 1, -1, -1):
            label[i] = acc[i][0] in seen
            seen.add(acc[i][0])
    print(f"{len(acc)} accesses, {sum(label) / len(acc):.4f} {what}")
    if prefix:
        write(prefix + ".exact", (not y for y in label))
    sets = [("all six", "six", lambda f: f), ("turn, reuses, tip", "three", lambda f: f[:3]),
            ("turn", "turn", lambda f: f[:1]), ("none", "none", lambda f: ())]
    for name, short, key in sets:
        cls = defaultdict(lambda: [0, 0])
        for (_, f), y in zip(acc, label):
            c = cls[key(f)]
            c[0] += 1
            c[1] += y
        wrong = sum(min(c, n - c) for n, c in cls.values()) / len(acc)
        brier = sum(c * (1 - c / n) ** 2 + (n - c) * (c / n) ** 2 for n, c in cls.values())
        print(f"{name}: {len(cls)} classes, wrong on {wrong:.4f}, Brier {brier / len(acc):.4f}")
        for t in (0.1, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5) if prefix else ():
            share = {k: c / n for k, (n, c) in cls.items()}
            write(f"{prefix}.{short}.{t}", (share[key(f)] < t for _, f in acc))


if __name__ == "__main__":
    main()
