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
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
bin=$(realpath "$1")
mkdir -p "$2"
out=$(realpath "$2")
rounds=${3:-2}
cd "$(dirname "$0")/.."
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
      serve "$m" "$l" > "$out/$m-$l-r$r.log" 2>&1 &
      pid=$!
      for _ in $(seq 1 300); do
        curl -sf "http://127.0.0.1:$port/health" > /dev/null && break
        sleep 0.2
      done
      "$bin" bench-serve --url "http://127.0.0.1:$port" --concurrency 16 --num-prompts "${NUM_PROMPTS:-32}" \
        --input-len "${INPUT_LEN:-64}" --output-len "${OUTPUT_LEN:-64}" --json "$out/$m-$l-r$r.json" > /dev/null
      curl -sf "http://127.0.0.1:$port/metrics" > "$out/$m-$l-r$r.metrics"
      kill -INT "$pid"
      wait "$pid" || true
      sleep 1
    done
  done
done
