# Sourced by the bench scripts (not run): their argument handling and the
# serve-and-measure step they share.

# bench_args DEFAULT_ROUNDS "$@": the usage (the calling script's header
# comment) unless the arguments are RINFER OUT_DIR [ROUNDS]; sets bin, out,
# rounds and moves to the repository root.
bench_args() {
  local default_rounds=$1
  shift
  if [ $# -lt 2 ] || [ $# -gt 3 ]; then
    sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
  fi
  bin=$(realpath "$1")
  mkdir -p "$2"
  out=$(realpath "$2")
  rounds=${3:-$default_rounds}
  cd "$(dirname "$0")/.."
}

# measure_serve PREFIX SEED LAUNCHER [ARGS...]: runs `LAUNCHER ARGS` (a
# function that execs a server on $port) in the background, waits for
# /health, keeps 16 streams busy with bench-serve (NUM_PROMPTS prompts of
# INPUT_LEN random tokens from SEED, OUTPUT_LEN generated), then writes
# PREFIX.json (bench-serve), PREFIX.metrics and PREFIX.log, and stops the
# server with SIGINT.
measure_serve() {
  local prefix=$1 seed=$2
  shift 2
  "$@" > "$prefix.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$port/health" > /dev/null && break
    sleep 0.2
  done
  "$bin" bench-serve --url "http://127.0.0.1:$port" --concurrency 16 --num-prompts "${NUM_PROMPTS:-32}" \
    --input-len "${INPUT_LEN:-64}" --output-len "${OUTPUT_LEN:-64}" --seed "$seed" --json "$prefix.json" > /dev/null
  curl -sf "http://127.0.0.1:$port/metrics" > "$prefix.metrics"
  kill -INT "$pid"
  wait "$pid" || true
  sleep 1
}
