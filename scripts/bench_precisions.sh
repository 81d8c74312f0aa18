#!/usr/bin/env bash
# The precision table of docs/performance.md: TinyLlama-1.1B and Qwen2.5-0.5B
# shapes (random weights), bf16 / int8 / int4, 1 and 2 threads, prompt 512,
# 64 generated tokens; bench measures the read bandwidth between the decode steps and
# the prefill instruction's peak itself. One JSON per row in OUT. Also int4
# with an int8 lm_head (convert --lm-head int8: int4h8). --profile puts each
# row's per-stage times (qkv, attention, gate-up, ...) in its JSON.
# Usage: scripts/bench_precisions.sh [OUT=perf_data/<date>] [RINFER=build/bin/rinfer]
set -euo pipefail
out=${1:-perf_data/$(date +%F)}
rinfer=${2:-build/bin/rinfer}
mkdir -p "$out" models
for preset in tinyllama-1.1b qwen2.5-0.5b; do
  hf=models/synth-$preset
  [ -d "$hf" ] || "$rinfer" synth --preset "$preset" --out "$hf" --dtype bf16
  for dtype in bf16 int8 int4 int4h8; do
    m=models/$preset-$dtype
    args="--dtype $dtype"
    [ "$dtype" = int4h8 ] && args="--dtype int4 --lm-head int8"
    [ -d "$m" ] || "$rinfer" convert --hf "$hf" --out "$m" $args > /dev/null
    for t in 1 2; do
      "$rinfer" bench --model "$m" --prompt-len 512 --gen-len 64 --samples 3 --warmup 1 --threads "$t" \
        --profile --json "$out/$preset-$dtype-t$t.json" | sed "s|^|[$preset $dtype t$t] |"
    done
  done
done
