#!/usr/bin/env bash
# The decode prefetch profiles (RINFER_DECODE_PREFETCH, src/kernels/cpu/
# prefetch_tuning.h) against each other in the model: for each precision and
# thread count, `rinfer bench` under each profile back to back (64-token
# prompt, 64 generated tokens, 2 samples), so that a row's two runs meet the
# same phase of a drifting host. Needs the models of scripts/bench_precisions.sh.
# Usage: scripts/ab_decode_prefetch.sh [RINFER=build/bin/rinfer]
# Env: PRESETS="tinyllama-1.1b qwen2.5-0.5b", PRECISIONS="bf16 int8 int4 int4h8",
#      THREADS="1 2", PROFILES="default zen5"
set -euo pipefail
cd "$(dirname "$0")/.."
rinfer=${1:-build/bin/rinfer}
echo "| model | weights | threads |$(for p in ${PROFILES:-default zen5}; do printf ' %s tok/s (GB/s, of probe) |' "$p"; done)"
echo "| --- | --- | --- |$(for p in ${PROFILES:-default zen5}; do printf ' --- |'; done)"
for preset in ${PRESETS:-tinyllama-1.1b qwen2.5-0.5b}; do
  for prec in ${PRECISIONS:-bf16 int8 int4 int4h8}; do
    m=models/$preset-$prec
    [ -d "$m" ] || { echo "no $m: run scripts/bench_precisions.sh first" >&2; exit 1; }
    for t in ${THREADS:-1 2}; do
      line="| $preset | $prec | $t |"
      for p in ${PROFILES:-default zen5}; do
        r=$(RINFER_DECODE_PREFETCH=$p "$rinfer" bench --model "$m" --prompt-len 64 --gen-len 64 --samples 2 \
              --warmup 1 --threads "$t")
        tps=$(sed -n 's/^  decode  *\([0-9.]*\) .*/\1/p' <<< "$r")
        bw=$(sed -n 's/.*-> \([0-9.]*\) GB\/s while decoding = \([0-9.]*\) of \([0-9.]*\) GB\/s.*/\1 GB\/s, \2 of \3/p' <<< "$r")
        line="$line $tps ($bw) |"
      done
      echo "$line"
    done
  done
done
