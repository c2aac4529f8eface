#!/usr/bin/python3
"""learned_bound.py -- how far a general learner gets on a Mooncake-format trace (docs/policies.md,
"A sixth look"). An offline experiment, not part of the build: it needs python3-sklearn (Debian).

Per block access it takes what a KV store could know when the access happens (the block's reuse
count and last gap, its depth and distance from the request's end, the request's length and new
blocks, the conversation's turn and last gap in accesses and milliseconds, the prompt and answer
lengths), trains gradient-boosted trees on the first half of the requests to predict "the block is
used again within W accesses" (labels taken from the whole trace: an advantage no online learner
has), and replays the whole trace through a cache that keeps each block for mu * W * p accesses
past its last use (p the prediction; the block with the earliest such expiry goes first), counting
only the second half, as `kvtier sim --warmup 50%` does. It prints LRU and OPT for the same half
to check the replay against kvtier sim.

usage: /usr/bin/python3 tools/sim/learned_bound.py [--store-only] [--linear] TRACE.jsonl
                                                   CAPACITY[,...] [K[,...]]
(W = K x capacity; K defaults to 1,2,4,8. --store-only leaves out the answer's length, which the
engine knows and a KV store is not told. --linear: logistic regression over the features' log2
bins and four crosses of them, in place of the trees.)
"""
import heapq
import json
import sys

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import OneHotEncoder


def features(path):
    reqs = [json.loads(line) for line in open(path) if line.strip()]
    cnt, last, last_ms = {}, {}, {}
    rows, keys, t = [], [], 0
    for r in reqs:
        h = r["hash_ids"]
        n = len(h)
        new = sum(1 for b in h if b not in cnt)
        head = h[1] if n > 1 else None  # the conversation's first own block (h[0] is shared)
        turn = cnt.get(head, 0) + 1 if head is not None else 1
        conv_ms = r["timestamp"] - last_ms[head] if head in last_ms else -1
        conv_acc = t - last[head] if head in last else -1
        for i, b in enumerate(h):
            rows.append((cnt.get(b, 0), t - last[b] if b in last else -1, i, n, n - 1 - i,
                         new, turn, r["input_length"], r["output_length"], conv_ms, conv_acc))
            keys.append(b)
            cnt[b] = cnt.get(b, 0) + 1
            last[b] = t
            last_ms[b] = r["timestamp"]
            t += 1
    nxt = np.full(len(keys), 2**40, dtype=np.int64)
    seen = {}
    for j in range(len(keys) - 1, -1, -1):
        if keys[j] in seen:
            nxt[j] = seen[keys[j]] - j
        seen[keys[j]] = j
    split = sum(len(r["hash_ids"]) for r in reqs[: len(reqs) // 2])
    return np.array(rows, dtype=np.float64), keys, nxt, split


def replay(keys, expiry, cap, split):
    """Evicts the resident block with the smallest expiry[j] of its last access j."""
    res, heap, hits = {}, [], 0
    for j, b in enumerate(keys):
        if b in res and j >= split:
            hits += 1
        res[b] = j
        heapq.heappush(heap, (expiry[j], j, b))
        while len(res) > cap:
            _, jj, bb = heapq.heappop(heap)
            if res.get(bb) == jj:
                del res[bb]
    return hits / (len(keys) - split)


def binned(X, store_only):
    """One-hot log2 bins of every feature, and of (reuses, turn), (last gap, turn), (distance from
    the end, new blocks), (last gap, conversation gap)."""
    b = np.where(X < 0, -1, np.floor(np.log2(np.maximum(X, 0) + 1))).astype(int)
    cols = [c for c in range(X.shape[1]) if not (store_only and c == 8)]
    cross = [(b[:, i] + 1) * 64 + b[:, j] + 1 for i, j in ((0, 6), (1, 6), (4, 5), (1, 10))]
    return np.column_stack([b[:, cols]] + cross)


def main():
    flags = {a for a in sys.argv[1:] if a.startswith("--")}
    sys.argv = [a for a in sys.argv if not a.startswith("--")]
    store_only, linear = "--store-only" in flags, "--linear" in flags
    X, keys, nxt, split = features(sys.argv[1])
    if linear:
        enc = OneHotEncoder(handle_unknown="ignore")
        B = binned(X, store_only)
        enc.fit(B[:split])
        X = enc.transform(B)
    elif store_only:
        X = np.delete(X, 8, axis=1)  # output_length
    idx = np.arange(len(keys), dtype=np.float64)
    ks = [int(k) for k in sys.argv[3].split(",")] if len(sys.argv) > 3 else [1, 2, 4, 8]
    for cap in (int(c) for c in sys.argv[2].split(",")):
        lru = replay(keys, idx, cap, split)
        opt = replay(keys, -(idx + nxt), cap, split)  # MIN without bypass
        print(f"capacity {cap}: lru {lru:.4f}  opt(no bypass) {opt:.4f}", flush=True)
        for k in ks:
            w = k * cap
            y = (nxt < w).astype(int)
            if linear:
                m = LogisticRegression(max_iter=1000)
            else:
                m = HistGradientBoostingClassifier(max_iter=200, max_leaf_nodes=63, random_state=1)
            m.fit(X[:split], y[:split])
            p = m.predict_proba(X)[:, 1]
            auc = roc_auc_score(y[split:], p[split:])
            out = "  ".join(f"mu {mu}: {replay(keys, idx + mu * w * p, cap, split):.4f}"
                            for mu in (1, 2, 4, 8))
            print(f"  W = {k} x capacity (base rate {y[split:].mean():.3f}, AUC {auc:.3f}): {out}",
                  flush=True)


if __name__ == "__main__":
    main()
