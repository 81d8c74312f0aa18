#!/usr/bin/env bash
# `rinfer serve --ep 2` on a MoE model against one process (2 threads) at
# 16 streams, per expert placement: contiguous ranges; planned from
# measured loads with 0, 2 (= EP) and 4 (= 2 EP) redundant experts; and
# online (2 redundant, re-planned every REBALANCE steps from the loads of
# those steps). The loads come from a first serve run of the same workload
# with another prompt seed (--expert-stats), so the plans are judged out of
# sample. Each run: `rinfer bench-serve` keeps 16 streams busy (NUM_PROMPTS
# random prompts of INPUT_LEN tokens, OUTPUT_LEN generated, EOS ignored),
# then /metrics gives each MoE layer's measured balancedness (mean / max
# (token, expert) pairs per rank). Layouts rotate by round. Files:
# OUT_DIR/stats.json, plan-r<N>.json, <model>-<layout>-r<round>.json/.metrics.
# Then scripts/bench_parallel_table.py --experts OUT_DIR prints the table.
# Usage: scripts/bench_serve_experts.sh RINFER OUT_DIR [ROUNDS=2]
# Env: MODEL=qwen3-30b-a3b-l2-bf16 LAYOUTS="single ep2-contiguous ..." NUM_PROMPTS=32 INPUT_LEN=64 OUTPUT_LEN=64 REBALANCE=20 PORT=18910
set -euo pipefail
. "$(dirname "$0")/bench_lib.sh"
bench_args 2 "$@"
port=${PORT:-18910}
model=${MODEL:-qwen3-30b-a3b-l2-bf16}
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
layouts=(${LAYOUTS:-single ep2-contiguous ep2-planned-r0 ep2-planned-r2 ep2-planned-r4 ep2-online-r2})
serve() {  # layout [extra args]; the server replaces the subshell (so that kill reaches it)
  local l=$1
  shift
  local args=(serve --model "models/$model" --port "$port" --max-num-seqs 16 "$@")
  case $l in
    single) exec "$bin" "${args[@]}" --threads 2 ;;
    ep2-contiguous) exec "${mpi[@]}" "$bin" "${args[@]}" --ep 2 ;;
    ep2-planned-r*) exec "${mpi[@]}" "$bin" "${args[@]}" --ep 2 --expert-placement "$out/plan-r${l#ep2-planned-r}.json" ;;
    ep2-online-r*) exec "${mpi[@]}" "$bin" "${args[@]}" --ep 2 --redundant-experts "${l#ep2-online-r}" \
      --rebalance-every "${REBALANCE:-20}" ;;
  esac
}
echo "loads: one process, seed 1" >&2
measure_serve "$out/stats-run" 1 serve single --expert-stats "$out/stats.json"
for n in 0 2 4; do
  "$bin" plan-experts --stats "$out/stats.json" --ranks 2 --redundant "$n" --out "$out/plan-r$n.json" > /dev/null
done
for r in $(seq 1 "$rounds"); do
  for i in "${!layouts[@]}"; do
    l=${layouts[$(( (i + r) % ${#layouts[@]} ))]}
    echo "round $r: $model $l" >&2
    measure_serve "$out/$model-$l-r$r" 2 serve "$l"
  done
done
