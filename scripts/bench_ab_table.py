#!/usr/bin/env python3
"""The old-against-new table of scripts/bench_ab.sh.

  scripts/bench_ab_table.py OUT_DIR

Reads OUT_DIR/<preset>-<dtype>-t<T>-<old|new>-r<round>.json (`rinfer bench
--json`) and prints, per configuration, decode and prefill tokens/s of the
old and the new binary (median over rounds of each run's mean over its
samples), new / old of those medians, and each round's own new / old (the
two runs of a round are seconds apart, so the median of the rounds' ratios,
"median round", cancels the host's slow drifts best), so that the noise
between rounds is visible next to the difference. The last two
columns divide out the host's moods: decode over the read bandwidth bench
measured between its own steps, prefill over the instruction peak it probed
next to each sample (decode_bandwidth_ratio, prefill_peak_ratio), new / old of
their medians.
"""
import json
import os
import re
import statistics
import sys

NAME = re.compile(r"^(?P<preset>.+)-(?P<dtype>[^-]+)-t(?P<threads>\d+)-(?P<which>old|new)-r(?P<round>\d+)\.json$")
PRESETS = ["tinyllama-1.1b", "qwen2.5-0.5b"]
DTYPES = ["bf16", "int8", "int4"]


def order(key):
    preset, dtype, threads = key
    return (PRESETS.index(preset) if preset in PRESETS else len(PRESETS), preset,
            DTYPES.index(dtype) if dtype in DTYPES else len(DTYPES), dtype, threads)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    runs = {}  # (preset, dtype, threads) -> round -> which -> json
    for f in sorted(os.listdir(out)):
        m = NAME.match(f)
        if not m:
            continue
        key = (m["preset"], m["dtype"], int(m["threads"]))
        runs.setdefault(key, {}).setdefault(int(m["round"]), {})[m["which"]] = json.load(open(os.path.join(out, f)))
    if not runs:
        sys.exit("no bench JSON in %s" % out)
    metrics = [("decode", "decode_tokens_per_s", "%.2f"), ("prefill", "prefill_tokens_per_s", "%.1f")]
    normalized = [("decode/probe", "decode_bandwidth_ratio"), ("prefill/peak", "prefill_peak_ratio")]
    head = ["model", "weights", "threads", "rounds"]
    for label, _, _ in metrics:
        head += ["%s tok/s old" % label, "new", "new/old", "median round", "per round new/old"]
    head += ["%s new/old" % label for label, _ in normalized]
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for key in sorted(runs, key=order):
        preset, dtype, threads = key
        rounds = {r: w for r, w in sorted(runs[key].items()) if "old" in w and "new" in w}
        row = [preset, dtype, str(threads), str(len(rounds))]
        for _, field, fmt in metrics:
            if not rounds:
                row += ["-", "-", "-", "-", "-"]
                continue
            old = statistics.median(w["old"][field] for w in rounds.values())
            new = statistics.median(w["new"][field] for w in rounds.values())
            ratios = [w["new"][field] / w["old"][field] for w in rounds.values()]
            per_round = " ".join("%.3f" % r for r in ratios)
            row += [fmt % old, fmt % new, "%.3f" % (new / old), "**%.3f**" % statistics.median(ratios), per_round]
        for _, field in normalized:
            if not rounds or any(field not in w[b] for w in rounds.values() for b in ("old", "new")):
                row.append("-")
                continue
            old = statistics.median(w["old"][field] for w in rounds.values())
            new = statistics.median(w["new"][field] for w in rounds.values())
            row.append("%.3f" % (new / old))
        print("| " + " | ".join(row) + " |")
    incomplete = sorted("%s-%s-t%d r%d" % (k + (r,)) for k, rs in runs.items() for r, w in rs.items() if len(w) < 2)
    if incomplete:
        print("\nrounds with only one binary (left out): " + ", ".join(incomplete))


if __name__ == "__main__":
    main()
