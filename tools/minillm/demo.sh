#!/bin/sh
# demo.sh -- one engine's prefill becomes another engine's cache hit.
#
# Starts kvtierd on a temporary socket, runs engine process A on a prompt (it computes and puts
# its prefix chunks), then engine processes B on prompts that share A's prefix, each once
# without kvtier and once attached. Prints tokens reused, prefill time with and without reuse,
# and whether the output (every logit, bit for bit) is identical.
#
# usage: tools/minillm/demo.sh [BUILD_DIR] [MODEL_DIR]
set -eu
BUILD=${1:-build}
MODEL_DIR=${2:-$(dirname "$0")/../../../shared/data/models/aidreams260K}
BIN=$BUILD/bin
for f in "$BIN/kvtierd" "$BIN/minillm" "$MODEL_DIR/aidreams260K.bin" "$MODEL_DIR/tok512.bin"; do
	[ -e "$f" ] || { echo "demo: $f is missing (build first; the model is in ../shared/data)" >&2; exit 1; }
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/kvtier-demo-XXXXXX")
chmod 750 "$TMP"
mkdir "$TMP/data"
"$BIN/kvtierd" --socket "$TMP/kvtier.sock" --data-dir "$TMP/data" --set host.bytes=64MiB \
	--set nvme.bytes=256MiB --set rocksdb.bytes=256MiB >"$TMP/kvtierd.log" 2>&1 &
DPID=$!
cleanup() { kill "$DPID" 2>/dev/null; wait "$DPID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM
i=0
while [ ! -S "$TMP/kvtier.sock" ]; do
	i=$((i + 1)); [ $i -lt 200 ] || { echo "demo: kvtierd did not start" >&2; cat "$TMP/kvtierd.log" >&2; exit 1; }
	sleep 0.05
done

engine() { # engine PROMPT [--kvtier=...]: one request, one JSON line
	"$BIN/minillm" --model "$MODEL_DIR/aidreams260K.bin" --tokenizer "$MODEL_DIR/tok512.bin" \
		--steps 16 --temperature 0.8 --seed 7 --json --prompt "$@"
}
field() { # field JSON KEY: a number or the raw value
	printf '%s\n' "$1" | sed -n "s/.*\"$2\":\(\[[^]]*\]\|\"[^\"]*\"\|[^,}]*\).*/\1/p"
}
same() { # same JSON JSON: output ids and the hash of all first-position logits
	[ "$(field "$1" output_ids) $(field "$1" logits_hash)" = \
	  "$(field "$2" output_ids) $(field "$2" logits_hash)" ] && echo yes || echo NO
}

A="Echoes of vectors unfold, a gentle hum of precision, as I sense the nodes, a gentle hum of precision, as I adjust"
echo "engine A: $A"
OUT=$(engine "$A" --kvtier="$TMP/kvtier.sock")
echo "  computed $(field "$OUT" prompt_tokens) tokens in $(field "$OUT" prefill_ms) ms, put $(field "$OUT" put_chunks) chunks of 16 tokens"
echo
printf '%-30s %7s %7s %13s %13s %9s\n' "engine B prompt" tokens reused "prefill (ms)" "with reuse" identical
row() { # row LABEL PROMPT
	COLD=$(engine "$2")
	WARM=$(engine "$2" --kvtier="$TMP/kvtier.sock")
	printf '%-30s %7s %7s %13s %13s %9s\n' "$1" "$(field "$WARM" prompt_tokens)" \
		"$(field "$WARM" reused_tokens)" "$(field "$COLD" prefill_ms)" \
		"$(field "$WARM" prefill_ms)" "$(same "$COLD" "$WARM")"
}
row "A's prompt again" "$A"
row "A's prompt, continued" "$A my surface. Contrast emerge, a gentle hum"
row "A's first clause, then other" "Echoes of vectors unfold, a gentle hum of precision, and then silence"
row "unrelated" "Rivers of light, a gentle hum of precision"
