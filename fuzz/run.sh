#!/usr/bin/env bash
# Runs the libFuzzer targets of a RINFER_FUZZ build (see docs/fuzzing.md).
#   fuzz/run.sh BUILD SECONDS [TARGET...]   fuzz each target for SECONDS
#   fuzz/run.sh --replay BUILD [TARGET...]  replay seeds + regressions, then 10 s each
# The seed corpus is rebuilt from TESTDATA (fuzz/seed_corpus.py) into
# BUILD/fuzz-seeds; what a run finds goes into BUILD/fuzz-corpus/<target>
# (kept between runs) and crashing inputs into BUILD/fuzz-artifacts/<target>.
# One fuzzing process at a time (-workers=1): the machine is shared.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
replay=0
if [ "${1:-}" = "--replay" ]; then replay=1; shift; fi
build="$1"; shift
if [ $replay = 0 ]; then seconds="$1"; shift; else seconds="${REPLAY_SECONDS:-10}"; fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors gguf config tokenizer_json openai jinja)
testdata="${TESTDATA:-$here/../../shared/testdata}"

# The longest input each target mutates to: a few KB reach every branch of
# these parsers, and a short input keeps an execution cheap.
declare -A max_len=([safetensors]=8192 [gguf]=16384 [config]=4096 [tokenizer_json]=16384 [jinja]=4096 [openai]=2048)
declare -A dicts=([safetensors]="json" [gguf]="gguf" [config]="json config" [tokenizer_json]="json tokenizer_json"
                  [jinja]="jinja" [openai]="json openai")

python3 "$here/seed_corpus.py" "$testdata" "$build/fuzz-seeds" >/dev/null
status=0
summary=()
for t in "${targets[@]}"; do
  bin="$build/bin/${t}_fuzzer"
  [ -x "$bin" ] || { echo "no $bin: build it first (make fuzz)"; exit 1; }
  corpus="$build/fuzz-corpus/$t" art="$build/fuzz-artifacts/$t" dict="$build/fuzz-dict/$t.dict"
  mkdir -p "$corpus" "$art" "$(dirname "$dict")"
  for d in ${dicts[$t]}; do cat "$here/dict/$d.dict"; done > "$dict"
  inputs=("$corpus" "$build/fuzz-seeds/$t")
  [ -d "$here/regressions/$t" ] && inputs+=("$here/regressions/$t")
  # -timeout is wall time: on a shared machine a process that others starve
  # of CPU takes many times its own time, so only a much longer run is a hang.
  common=(-max_len="${max_len[$t]}" -rss_limit_mb=2048 -timeout=60 -dict="$dict" -artifact_prefix="$art/"
          -print_final_stats=1)
  log="$build/fuzz-logs/$t.log"
  mkdir -p "$(dirname "$log")"
  if [ $replay = 1 ]; then
    # Every seed and regression input once (-runs=0 after loading them).
    if ! "$bin" "${common[@]}" -runs=0 "${inputs[@]}" >"$log.replay" 2>&1; then
      echo "FAIL $t: replay (see $log.replay)"; tail -30 "$log.replay"; status=1; continue
    fi
  fi
  # New inputs go into the first folder, the target's own corpus.
  set +e
  started=$(date +%s)
  "$bin" "${common[@]}" -max_total_time="$seconds" "${inputs[@]}" >"$log" 2>&1
  rc=$?
  elapsed=$(($(date +%s) - started))
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  crashes=$(find "$art" -type f | wc -l)
  line="$t: ${execs:-?} executions in ${elapsed} s (${rate:-?} exec/s), corpus $(ls "$corpus" | wc -l) files, artifacts $crashes"
  [ $rc = 0 ] || { line="$line  FINDING (exit $rc, see $log)"; status=1; tail -40 "$log"; }
  echo "$line"
  summary+=("$line")
  # Running totals across runs, for the report.
  echo "$(date -u +%FT%TZ) ${execs:-0} ${elapsed} ${rate:-0} rc=$rc" >> "$build/fuzz-logs/$t.totals"
done
echo "---- summary"
printf '%s\n' "${summary[@]}"
exit $status
