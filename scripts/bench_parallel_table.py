#!/usr/bin/env python3
"""The tables of scripts/bench_parallel.sh: per model, decode and prefill
tokens/s of one process (2 threads) and of --tp 2 / --pp 2 (2 ranks x 1
thread), medians over rounds, the split's ratio to one process as the
median of the per-round ratios, and the largest rank's peak RSS against
the single process's. With --serve, scripts/bench_serve_pipeline.sh's:
output tokens/s at 16 streams per layout and the pipeline's bubble. With
--experts, scripts/bench_serve_experts.sh's: output tokens/s and time per
output token at 16 streams per expert placement, and each MoE layer's
measured balancedness (mean / max pairs per rank).
Usage: scripts/bench_parallel_table.py [--serve | --experts] OUT_DIR"""
import glob
import json
import os
import re
import statistics
import sys

serve = len(sys.argv) == 3 and sys.argv[1] == "--serve"
experts = len(sys.argv) == 3 and sys.argv[1] == "--experts"
if len(sys.argv) != 2 and not serve and not experts:
    sys.exit(__doc__)
med = statistics.median


def runs_in(folder, layouts):
    """(path, model, layout, round, the run's JSON) of every OUT/<model>-<layout>-r<round>.json."""
    for path in glob.glob(os.path.join(folder, "*.json")):
        m = re.match(r"(.+)-(" + layouts + r")-r(\d+)\.json$", os.path.basename(path))
        if m:
            with open(path) as f:
                yield path, m.group(1), m.group(2), int(m.group(3)), json.load(f)


if experts:
    rows = {}
    for path, model, layout, rnd, j in runs_in(sys.argv[2], r"single|ep2-[a-z]+(?:-r\d+)?"):
        run = j["runs"][0]
        metrics = open(path[:-5] + ".metrics").read()
        bal = [float(v) for v in re.findall(r'^rinfer_expert_balancedness\{layer="\d+"\} (\S+)$', metrics, re.M)]
        moves = re.search(r"^rinfer_expert_moves_total (\S+)$", metrics, re.M)
        rows.setdefault((model, layout), {})[rnd] = (run["output_tokens_per_s"], run["tpot_ms"]["p50"], bal,
                                                     float(moves.group(1)) if moves else None)
    order = ["single", "ep2-contiguous", "ep2-planned-r0", "ep2-planned-r2", "ep2-planned-r4", "ep2-online-r2"]
    names = {"single": "1 process, 2 threads", "ep2-contiguous": "--ep 2, contiguous",
             "ep2-planned-r0": "--ep 2, planned, 0 redundant", "ep2-planned-r2": "--ep 2, planned, 2 redundant",
             "ep2-planned-r4": "--ep 2, planned, 4 redundant",
             "ep2-online-r2": "--ep 2, online, 2 redundant"}
    print("| model | layout | output tok/s at 16 streams | ratio to 1 process | median TPOT ms | "
          "balancedness per MoE layer | experts moved |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for (model, layout) in sorted(rows, key=lambda k: (k[0], order.index(k[1]) if k[1] in order else 99)):
        r = rows[(model, layout)]
        base = rows.get((model, "single"), {})
        tps = med(v[0] for v in r.values())
        ratio = med(v[0] / base[k][0] for k, v in r.items() if k in base) if base else float("nan")
        tpot = [v[1] for v in r.values() if v[1] is not None]
        bal = [v[2] for v in r.values() if v[2]]
        per_layer = " / ".join(f"{med(b[i] for b in bal):.3f}" for i in range(len(bal[0]))) if bal else ""
        moves = [v[3] for v in r.values() if v[3] is not None]
        print(f"| {model} | {names.get(layout, layout)} | {tps:.1f} | {ratio:.2f} | "
              f"{med(tpot):.1f} | {per_layer} | {med(moves):.0f} |" if moves else
              f"| {model} | {names.get(layout, layout)} | {tps:.1f} | {ratio:.2f} | "
              f"{med(tpot) if tpot else float('nan'):.1f} | {per_layer} | |")
    print(f"\n{len(next(iter(rows.values())))} rounds; medians; ratio: median of the per-round ratios.")
    sys.exit(0)

if serve:
    rows = {}
    for path, model, layout, rnd, j in runs_in(sys.argv[2], r"single|tp2|pp2-mb\d+"):
        run = j["runs"][0]
        metrics = open(path[:-5] + ".metrics").read()
        b = re.search(r"^rinfer_pipeline_bubble_fraction (\S+)$", metrics, re.M)
        rows.setdefault((model, layout), {})[rnd] = (run["output_tokens_per_s"], float(b.group(1)) if b else None)
    print("| model | layout | output tok/s at 16 streams | ratio to 1 process | bubble fraction |")
    print("| --- | --- | --- | --- | --- |")
    order = ["single", "tp2", "pp2-mb1", "pp2-mb2", "pp2-mb4"]
    names = {"single": "1 process, 2 threads", "tp2": "--tp 2", "pp2-mb1": "--pp 2 --micro-batches 1",
             "pp2-mb2": "--pp 2 --micro-batches 2", "pp2-mb4": "--pp 2 --micro-batches 4"}
    for (model, layout) in sorted(rows, key=lambda k: (k[0], order.index(k[1]))):
        r = rows[(model, layout)]
        base = rows.get((model, "single"), {})
        tps = med(v[0] for v in r.values())
        ratio = med(v[0] / base[k][0] for k, v in r.items() if k in base) if base else float("nan")
        bub = [v[1] for v in r.values() if v[1] is not None]
        print(f"| {model} | {names[layout]} | {tps:.1f} | {ratio:.2f} | {med(bub):.2f} |" if bub else
              f"| {model} | {names[layout]} | {tps:.1f} | {ratio:.2f} | |")
    print(f"\n{len(next(iter(rows.values())))} rounds; ratio: median of the per-round ratios.")
    sys.exit(0)

runs = {}
for path, model, layout, rnd, j in runs_in(sys.argv[1], "single|tp2|pp2"):
    with open(path[:-5] + ".rss") as f:
        rss = [int(x) * 1024 for x in f.read().split()]
    runs.setdefault(model, {}).setdefault(rnd, {})[layout] = (j, rss)

print("| model | layout | decode tok/s | ratio | prefill tok/s | ratio | peak RSS per rank, MB | largest / 1 process | bubble |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for model in sorted(runs):
    rounds = runs[model]
    for layout in ("single", "tp2", "pp2"):
        have = [r for r in rounds.values() if layout in r and "single" in r]
        if not have:
            continue
        dec = med(r[layout][0]["decode_tokens_per_s"] for r in have)
        pre = med(r[layout][0]["prefill_tokens_per_s"] for r in have)
        dr = med(r[layout][0]["decode_tokens_per_s"] / r["single"][0]["decode_tokens_per_s"] for r in have)
        pr = med(r[layout][0]["prefill_tokens_per_s"] / r["single"][0]["prefill_tokens_per_s"] for r in have)
        ranks = len(have[0][layout][1])
        rss = [med(r[layout][1][k] for r in have) for k in range(ranks)]
        rss_ratio = med(max(r[layout][1]) / max(r["single"][1]) for r in have)
        bubble = med(r[layout][0].get("pipeline_bubble_fraction", 0) for r in have)
        name = {"single": "1 process, 2 threads", "tp2": "--tp 2", "pp2": "--pp 2"}[layout]
        print(f"| {model} | {name} | {dec:.1f} | {dr:.2f} | {pre:.0f} | {pr:.2f} | "
              f"{' / '.join(f'{x / 1e6:.0f}' for x in rss)} | {rss_ratio:.2f} | "
              f"{bubble:.2f} |" if layout == "pp2" else
              f"| {model} | {name} | {dec:.1f} | {dr:.2f} | {pre:.0f} | {pr:.2f} | "
              f"{' / '.join(f'{x / 1e6:.0f}' for x in rss)} | {rss_ratio:.2f} | |")
print(f"\n{len(next(iter(runs.values())))} rounds; ratios: median of the per-round ratios to the single process.")
