#!/usr/bin/python3
"""keep_ttl.py -- what an engine gets from keeping each request's chunks for a fixed time
(docs/policies.md, "A tenth look: keeps as a policy"). An offline experiment, not part of the
build; the standard library only.

One tier of CAPACITY blocks running LRU, as `kvtier sim --policy lru` does, plus keeps as kvtierd
makes them (ipc/daemon/keep.c): after each request the engine keeps the request's blocks, in
prefix order, for T ms of trace time; a kept block leaves LRU and comes back at its most recent
end when its keep runs out; kept blocks hold at most PCT % of the tier, and a keep past that
keeps the blocks before it. Keeping a kept block again moves its end. Block hit ratio over the
whole trace; T = 0 is plain LRU and matches `kvtier sim` (0.0445 / 0.0876 / 0.2656 on Mooncake).

usage: /usr/bin/python3 tools/sim/keep_ttl.py TRACE.jsonl CAPACITY[,...] T_MS[,...] PCT[,...]
"""
import heapq
import json
import sys
from collections import OrderedDict


def replay(reqs, cap, ttl_ms, pct):
    lru, kept, ends = OrderedDict(), {}, []
    kcap = cap * pct // 100
    hits = accesses = 0
    for ts, ids in reqs:
        while ends and ends[0][0] <= ts:  # keeps that ran out go back to LRU
            end, b = heapq.heappop(ends)
            if kept.get(b) == end:
                del kept[b]
                lru[b] = True
                while len(lru) + len(kept) > cap:
                    lru.popitem(last=False)
        for b in ids:
            accesses += 1
            if b in kept:
                hits += 1
            elif b in lru:
                hits += 1
                lru.move_to_end(b)
            else:
                lru[b] = True
                while len(lru) + len(kept) > cap and lru:
                    lru.popitem(last=False)
        if not ttl_ms:
            continue
        for b in ids:
            if b in kept:
                kept[b] = ts + ttl_ms
            elif len(kept) >= kcap:
                break
            elif b in lru:
                del lru[b]
                kept[b] = ts + ttl_ms
            else:
                continue
            heapq.heappush(ends, (ts + ttl_ms, b))
    return hits / accesses


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__.split("usage: ")[1])
    reqs = []
    with open(sys.argv[1]) as f:
        for line in f:
            r = json.loads(line)
            reqs.append((r["timestamp"], r["hash_ids"]))
    caps = [int(x) for x in sys.argv[2].split(",")]
    ttls = [int(x) for x in sys.argv[3].split(",")]
    pcts = [int(x) for x in sys.argv[4].split(",")]
    for cap in caps:
        row = ["lru %.4f" % replay(reqs, cap, 0, 0)]
        for t in ttls:
            for p in pcts:
                row.append("T=%gs,%d%% %.4f" % (t / 1000, p, replay(reqs, cap, t, p)))
        print("%d: %s" % (cap, "  ".join(row)))


if __name__ == "__main__":
    main()
