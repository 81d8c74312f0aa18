#!/usr/bin/env bash
# rinfer next to llama.cpp on this machine, in one run: the TinyLlama-1.1B
# and Qwen2.5-0.5B shapes (random weights, as scripts/bench_precisions.sh),
# each precision with its nearest llama.cpp type, 1 and 2 threads, prompt 512
# and 64 generated tokens. Per row it runs `rinfer bench` (which measures the
# read bandwidth after each sample) and then llama.cpp's own llama-bench on
# the same weights exported with `rinfer export-gguf`:
#   rinfer bf16                  <-> f16
#   rinfer int8 (lm_head bf16)   <-> q8_0, output f16
#   rinfer int4 (lm_head bf16)   <-> q4_0, output f16
#   rinfer int4h8 (lm_head int8) <-> q4_0, output q8_0
# llama-bench: pp512 from an empty context (prefill), tg64 after 512 tokens of
# context (-d 512, as rinfer's decode follows its 512-token prompt).
#
# llama.cpp: LLAMA_BENCH=/path/to/llama-bench, or else it is built once into
# WORK from the llama.cpp source that node-llama-cpp ships in its npm package
# (llama/gitRelease.bundle; not part of rinfer, nothing is copied into the
# repo), with -DGGML_NATIVE=ON. Before measuring, the exported stories260K is
# run through llama.cpp's llama-simple and must print the reference text first
# (testdata/stories260K/reference/greedy_llamacpp.json), which checks the
# export (rotary row order, vocabulary) end to end.
#
# Usage: scripts/bench_llamacpp.sh [OUT=perf_data/<date>-vs-llamacpp] [WORK=/tmp/rinfer-llamacpp]
# Env: RINFER=build/bin/rinfer, PRESETS="tinyllama-1.1b qwen2.5-0.5b",
#      PRECISIONS="bf16 int8 int4 int4h8", THREADS="1 2", REPS=3
# Table: scripts/perf_table.py llamacpp OUT/*.json
set -euo pipefail
cd "$(dirname "$0")/.."  # paths below are relative to the repository
out=${1:-perf_data/$(date +%F)-vs-llamacpp}
work=${2:-/tmp/rinfer-llamacpp}
rinfer=${RINFER:-build/bin/rinfer}
presets=${PRESETS:-tinyllama-1.1b qwen2.5-0.5b}
precisions=${PRECISIONS:-bf16 int8 int4 int4h8}
threads=${THREADS:-1 2}
reps=${REPS:-3}
testdata=${RINFER_TESTDATA_DIR:-../shared/testdata}
node_llama_cpp=3.22.1
mkdir -p "$out" "$work" models

# --- llama.cpp
bench=${LLAMA_BENCH:-}
if [ -z "$bench" ]; then
  src=$work/llama.cpp
  if [ ! -x "$src/build/bin/llama-bench" ]; then
    echo "building llama.cpp (node-llama-cpp $node_llama_cpp's bundled source) in $src" >&2
    (cd "$work" && rm -rf pkg && mkdir pkg && cd pkg && npm pack --silent "node-llama-cpp@$node_llama_cpp" > /dev/null &&
       tar xzf node-llama-cpp-*.tgz)
    rm -rf "$src" && git clone -q "$work/pkg/package/llama/gitRelease.bundle" "$src"
    cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF > "$work/cmake.log"
    cmake --build "$src/build" -j"$(nproc)" --target llama-bench llama-simple > "$work/build.log"
  fi
  bench=$src/build/bin/llama-bench
fi
simple=$(dirname "$bench")/llama-simple
commit=$(git -C "$(dirname "$bench")/../.." rev-parse --short HEAD 2>/dev/null || echo unknown)
# GGUF files are cached in WORK per rinfer commit (a changed exporter writes new ones).
rev=$(git rev-parse --short HEAD)

# --- the export, checked end to end on the real tiny model
if [ ! -x "$simple" ]; then
  echo "warning: no llama-simple next to $bench: the export is not checked end to end" >&2
else
  rm -f "$work/stories260K.gguf"
  "$rinfer" export-gguf --hf "$testdata/stories260K/hf" --out "$work/stories260K.gguf" --type f32 -q > /dev/null
  "$simple" -m "$work/stories260K.gguf" -n 200 "Once upon a time" 2> /dev/null > "$work/stories.txt" || true
  python3 - "$testdata/stories260K/reference/greedy_llamacpp.json" "$work/stories.txt" <<'PY'
import json, sys
ref = json.load(open(sys.argv[1]))["cases"][0]["llama_simple_stdout"]
got = open(sys.argv[2]).read()
# llama-simple's -n counting differs between versions (this build prints a
# few more tokens): the reference's text, without its final newline, must
# begin what this build printed.
if not got.startswith(ref.rstrip("\n")):
    sys.exit("export check FAILED: llama-simple on the exported stories260K printed\n%r\nexpected\n%r" % (got[:300], ref[:300]))
print("export check: llama.cpp's llama-simple on the exported stories260K prints the reference text (%d characters)" % len(ref.rstrip("\n")))
PY
fi

# --- the table
for preset in $presets; do
  hf=models/synth-$preset
  [ -d "$hf" ] || "$rinfer" synth --preset "$preset" --out "$hf" --dtype bf16
  for prec in $precisions; do
    m=models/$preset-$prec
    case $prec in
      bf16) cargs="--dtype bf16"; gtype=f16; gout=f16 ;;
      int8) cargs="--dtype int8"; gtype=q8_0; gout=f16 ;;
      int4) cargs="--dtype int4"; gtype=q4_0; gout=f16 ;;
      int4h8) cargs="--dtype int4 --lm-head int8"; gtype=q4_0; gout=q8_0 ;;
      *) echo "unknown precision $prec" >&2; exit 1 ;;
    esac
    [ -d "$m" ] || "$rinfer" convert --hf "$hf" --out "$m" $cargs > /dev/null
    gguf=$work/$preset-$gtype-out-$gout-$rev.gguf
    [ -f "$gguf" ] || "$rinfer" export-gguf --hf "$hf" --out "$gguf" --type "$gtype" --output-type "$gout" -q \
      > "$gguf.txt"
    gbytes=$(sed -n 's/.*MB of weights read per decoded token (\([0-9]*\) bytes).*/\1/p' "$gguf.txt")
    [ -n "$gbytes" ] || { echo "cannot read the bytes per token from $gguf.txt" >&2; exit 1; }
    for t in $threads; do
      row=$out/$preset-$prec-t$t
      "$rinfer" bench --model "$m" --prompt-len 512 --gen-len 64 --samples "$reps" --warmup 1 --threads "$t" \
        --json "$row.rinfer.tmp" > /dev/null
      for test in "pp -p 512 -n 0" "tg -p 0 -n 64 -d 512"; do
        set -- $test
        name=$1
        shift
        "$bench" -m "$gguf" -t "$t" "$@" -r "$reps" -o json > "$row.$name.tmp" 2> "$row.$name.log" ||
          { echo "llama-bench failed:" >&2; cat "$row.$name.log" >&2; exit 1; }
        rm -f "$row.$name.log"
      done
      python3 - "$row" "$gtype" "$gout" "$gbytes" "$commit" <<'PY'
import json, os, sys
row, gtype, gout, gbytes, commit = sys.argv[1:]
r = json.load(open(row + ".rinfer.tmp"))
pp, tg = json.load(open(row + ".pp.tmp"))[0], json.load(open(row + ".tg.tmp"))[0]
bpt = float(gbytes)
r["llama_cpp"] = {
    "build_commit": pp.get("build_commit", commit), "gguf_type": gtype, "output_type": gout,
    "weight_bytes_per_token": bpt, "threads": pp["n_threads"], "flash_attn": pp.get("flash_attn"),
    "type_k": pp.get("type_k"), "prefill_tokens_per_s": pp["avg_ts"], "prefill_tokens_per_s_std": pp["stddev_ts"],
    "decode_tokens_per_s": tg["avg_ts"], "decode_tokens_per_s_std": tg["stddev_ts"], "decode_depth": tg["n_depth"],
    # against the bandwidth rinfer bench measured in the same run
    "decode_bandwidth_ratio": bpt * tg["avg_ts"] / (r["mem_bw_gb_s"] * 1e9),
}
json.dump(r, open(row + ".json.tmp", "w"), indent=1, sort_keys=True)
os.replace(row + ".json.tmp", row + ".json")
for ext in (".rinfer.tmp", ".pp.tmp", ".tg.tmp"):
    os.remove(row + ext)
l = r["llama_cpp"]
print("[%s t%d] decode rinfer %.1f / llama.cpp %.1f tok/s (x%.2f; of bandwidth %.2f / %.2f), prefill %.0f / %.0f tok/s (x%.2f)" % (
    os.path.basename(row).rsplit("-t", 1)[0], r["threads"], r["decode_tokens_per_s"], l["decode_tokens_per_s"],
    r["decode_tokens_per_s"] / l["decode_tokens_per_s"], r["decode_bandwidth_ratio"], l["decode_bandwidth_ratio"],
    r["prefill_tokens_per_s"], l["prefill_tokens_per_s"], r["prefill_tokens_per_s"] / l["prefill_tokens_per_s"]))
PY
    done
  done
done
