#!/usr/bin/env bash
# `make run`: text end to end, then a bench summary, on MODEL if given, else
# on a synthetic checkpoint with real shapes (made once under models/).
set -euo pipefail
rinfer=$1 model=$2 preset=$3 threads=$4 prompt=$5
if [ -z "$model" ]; then
  model=models/synth-$preset
  if [ ! -d "$model" ]; then
    echo "== no MODEL given: writing a synthetic $preset checkpoint to $model (random weights, once)"
    mkdir -p models
    "$rinfer" synth --preset "$preset" --out "$model" --dtype bf16
  fi
  cat <<MSG
== NOTE: $model has random weights with the shapes of $preset. It runs the real
   code path at real speed, but the text it produces is nonsense.
   To run a real model:   make run MODEL=/path/to/hf-checkpoint   (or a directory from 'rinfer convert')
MSG
fi
echo "== rinfer run --model $model --prompt \"$prompt\" --max-new-tokens 32"
"$rinfer" run --model "$model" --prompt "$prompt" --max-new-tokens 32 --temperature 0.8 --top-p 0.95 --seed 1 --threads "$threads"
echo "== rinfer bench --model $model --prompt-len 128 --gen-len 32 --samples 3"
"$rinfer" bench --model "$model" --prompt-len 128 --gen-len 32 --samples 3 --threads "$threads"
