#!/usr/bin/env bash
# Old binary against new on speed: TinyLlama-1.1B and Qwen2.5-0.5B shapes
# (random weights, the models of scripts/bench_precisions.sh, made here with
# OLD_RINFER where missing), bf16 / int8 / int4, 1 and 2 threads, prompt 256,
# 32 generated tokens, 2 samples after 1 warm-up. In each round every
# configuration runs both binaries back to back, old then new in odd rounds
# and new then old in even ones, so that neither always meets the host's
# later phase. One `bench --json` per run:
# OUT_DIR/<preset>-<dtype>-t<T>-<old|new>-r<round>.json. Then
# scripts/bench_ab_table.py OUT_DIR prints the table (medians over rounds,
# new/old ratios, and each round's ratio).
# Usage: scripts/bench_ab.sh OLD_RINFER NEW_RINFER OUT_DIR [ROUNDS=3]
# Env: ONLY=regex  run only the configurations "<preset>-<dtype>-t<T>" it
#                  matches (grep -E, whole name), e.g. ONLY=qwen2.5-0.5b-int4-t1
#      PRESETS="tinyllama-1.1b qwen2.5-0.5b", PRECISIONS="bf16 int8 int4", THREADS="1 2"
#      BENCH_ARGS="..." extra bench options for both binaries
#      PROMPT_LEN=256 GEN_LEN=32 SAMPLES=2  the bench run's size (longer runs: less noise)
set -euo pipefail
if [ $# -lt 3 ] || [ $# -gt 4 ]; then
  sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
old=$(realpath "$1") new=$(realpath "$2")
mkdir -p "$3"
out=$(realpath "$3")
rounds=${4:-3}
for b in "$old" "$new"; do [ -x "$b" ] || { echo "not an executable: $b" >&2; exit 2; }; done
cd "$(dirname "$0")/.."
# shellcheck disable=SC2206  # word-split the extra options on purpose
extra=(${BENCH_ARGS:-})
presets=${PRESETS:-tinyllama-1.1b qwen2.5-0.5b}
precisions=${PRECISIONS:-bf16 int8 int4}
threads=${THREADS:-1 2}
prompt_len=${PROMPT_LEN:-256} gen_len=${GEN_LEN:-32} samples=${SAMPLES:-2}
selected() { [ -z "${ONLY:-}" ] || grep -qxE -- "$ONLY" <<< "$1"; }

# The models (as scripts/bench_precisions.sh makes them); the format is the
# same for both binaries.
mkdir -p models
for preset in $presets; do
  for dtype in $precisions; do
    need=0
    for t in $threads; do selected "$preset-$dtype-t$t" && need=1; done
    [ "$need" = 1 ] || continue
    hf=models/synth-$preset m=models/$preset-$dtype
    [ -d "$hf" ] || "$old" synth --preset "$preset" --out "$hf" --dtype bf16
    [ -d "$m" ] || "$old" convert --hf "$hf" --out "$m" --dtype "$dtype" > /dev/null
  done
done

n_runs=0
start=$(date +%s)
for ((r = 1; r <= rounds; r++)); do
  order="old new"
  [ $((r % 2)) = 0 ] && order="new old"
  for preset in $presets; do
    for dtype in $precisions; do
      for t in $threads; do
        cfg=$preset-$dtype-t$t
        selected "$cfg" || continue
        for which in $order; do
          bin=$old
          [ "$which" = new ] && bin=$new
          t0=$(date +%s.%N)
          "$bin" bench --model "models/$preset-$dtype" --prompt-len "$prompt_len" --gen-len "$gen_len" --samples "$samples" --warmup 1 \
            --threads "$t" "${extra[@]}" --json "$out/$cfg-$which-r$r.json" > "$out/$cfg-$which-r$r.log" 2>&1 ||
            { echo "bench failed: $cfg $which round $r (log: $out/$cfg-$which-r$r.log)" >&2; exit 1; }
          n_runs=$((n_runs + 1))
          printf '[round %d/%d] %-24s %-3s %6.1f s  %s\n' "$r" "$rounds" "$cfg" "$which" \
            "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')" \
            "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("decode %.2f tok/s, prefill %.1f tok/s" % (d["decode_tokens_per_s"], d["prefill_tokens_per_s"]))' "$out/$cfg-$which-r$r.json")"
        done
      done
    done
  done
done
[ "$n_runs" -gt 0 ] || { echo "no configuration matches ONLY=${ONLY:-}" >&2; exit 1; }
echo "$n_runs bench runs in $(($(date +%s) - start)) s"
echo
python3 scripts/bench_ab_table.py "$out"
