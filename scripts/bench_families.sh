#!/usr/bin/env bash
# The per-family decode table of docs/families.md: for each preset (real
# shapes, random weights) a bf16 checkpoint is synthesized, converted in
# memory by bench (--dtype bf16), run on 2 threads (prompt 128, 32 generated
# tokens) and deleted. PRESET:LAYERS keeps only LAYERS layers (0 = all) for
# models larger than this machine's memory; the table says so.
# Usage: scripts/bench_families.sh OUT PRESET:LAYERS... (RINFER=build/bin/rinfer, TMP=models/fam)
set -euo pipefail
out=$1; shift
rinfer=${RINFER:-build/bin/rinfer}
tmp=${TMP:-models/fam}
mkdir -p "$out"
for pl in "$@"; do
  preset=${pl%%:*} layers=${pl##*:}
  rm -rf "$tmp"
  extra=()
  [ "$layers" != 0 ] && extra=(--layers "$layers")
  "$rinfer" synth --preset "$preset" --out "$tmp" --dtype bf16 "${extra[@]}" > /dev/null
  "$rinfer" bench --model "$tmp" --dtype bf16 --prompt-len 128 --gen-len 32 --samples 2 --warmup 1 --threads 2 \
    --json "$out/$preset-L$layers.json" | sed "s|^|[$preset L$layers] |"
  rm -rf "$tmp"
done
