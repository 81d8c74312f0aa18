#!/usr/bin/env bash
# `rinfer serve` over two pipeline stages at 1, 2 and 4 micro-batches per
# step, against one process (2 threads) and --tp 2, on this host: for each
# layout a server starts, `rinfer bench-serve` keeps 16 streams busy
# (NUM_PROMPTS prompts of INPUT_LEN random tokens, OUTPUT_LEN generated,
# EOS ignored), then /metrics gives the pipeline's bubble fraction. Layouts
# run back to back in an order that rotates by round. One pair of files per
# run: OUT_DIR/<model>-<layout>-r<round>.json (bench-serve) and .metrics.
# Then scripts/bench_parallel_table.py --serve OUT_DIR prints the table.
# Usage: scripts/bench_serve_pipeline.sh RINFER OUT_DIR [ROUNDS=2]
# Env: MODELS="qwen2.5-0.5b-bf16" NUM_PROMPTS=32 INPUT_LEN=64 OUTPUT_LEN=64 PORT=18900
set -euo pipefail
. "$(dirname "$0")/bench_lib.sh"
bench_args 2 "$@"
port=${PORT:-18900}
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
layouts=(single tp2 pp2-mb1 pp2-mb2 pp2-mb4)
serve() {  # model layout; run in the background, the server replaces the subshell (so that kill reaches it)
  local args=(serve --model "models/$1" --port "$port" --max-num-seqs 16)
  case $2 in
    single) exec "$bin" "${args[@]}" --threads 2 ;;
    tp2) exec "${mpi[@]}" "$bin" "${args[@]}" --tp 2 ;;
    pp2-mb*) exec "${mpi[@]}" "$bin" "${args[@]}" --pp 2 --micro-batches "${2#pp2-mb}" ;;
  esac
}
for r in $(seq 1 "$rounds"); do
  for m in ${MODELS:-qwen2.5-0.5b-bf16}; do
    for i in "${!layouts[@]}"; do
      l=${layouts[$(( (i + r) % ${#layouts[@]} ))]}
      echo "round $r: $m $l" >&2
      measure_serve "$out/$m-$l-r$r" 0 serve "$m" "$l"
    done
  done
done
