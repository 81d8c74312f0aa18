#!/usr/bin/env bash
# The decode prefetch profiles (RINFER_DECODE_PREFETCH,
# src/perf/decode_tuning.h) against each other in the model: for each precision and
# thread count one `rinfer bench --ab-decode-prefetch PROFILES...` run, whose
# decode steps take the profiles in turn (512-token prompt, 64 generated
# tokens, 3 samples after 1 warm-up: 63 steps per sample), so that every
# profile meets the same phases of a drifting host. Prints each profile's
# median step as tokens/s and its speed against the first profile. Needs the
# models of scripts/bench_precisions.sh.
# Usage: scripts/ab_decode_prefetch.sh [RINFER=build/bin/rinfer]
# Env: PRESETS="tinyllama-1.1b qwen2.5-0.5b", PRECISIONS="bf16 int8 int4 int4h8",
#      THREADS="1 2", PROFILES="default zen5" (two or more specs)
# (Profiles interleave within one run because whole benches run back to back
# meet different bandwidth phases, which makes their ratios unstable.)
set -euo pipefail
cd "$(dirname "$0")/.."
rinfer=${1:-build/bin/rinfer}
profiles=${PROFILES:-default zen5}
echo "| model | weights | threads |$(for p in $profiles; do printf ' %s tok/s (speed vs first) |' "$p"; done)"
echo "| --- | --- | --- |$(for p in $profiles; do printf ' --- |'; done)"
for preset in ${PRESETS:-tinyllama-1.1b qwen2.5-0.5b}; do
  for prec in ${PRECISIONS:-bf16 int8 int4 int4h8}; do
    m=models/$preset-$prec
    [ -d "$m" ] || { echo "no $m: run scripts/bench_precisions.sh first" >&2; exit 1; }
    for t in ${THREADS:-1 2}; do
      # shellcheck disable=SC2086  # one argument per profile spec
      r=$("$rinfer" bench --model "$m" --prompt-len 512 --gen-len 64 --samples 3 --warmup 1 --threads "$t" \
            --no-roofline --ab-decode-prefetch $profiles)
      # Rows of the A/B table: "<spec> <n> steps <ms> ms <tok/s> tok/s <GB/s> GB/s <speed>".
      cells=$(awk '/ steps .* tok\/s .* GB\/s / {printf " %s (%s) |", $6, $10}' <<< "$r")
      echo "| $preset | $prec | $t |$cells"
    done
  done
done
