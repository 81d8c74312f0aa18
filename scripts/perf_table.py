#!/usr/bin/env python3
"""Markdown tables for docs/ from `rinfer bench --json` files.

  scripts/perf_table.py precisions perf_data/DIR/*.json   # the precision table
  scripts/perf_table.py families  perf_data/DIR/*.json    # the per-family decode table
  scripts/perf_table.py stages    perf_data/DIR/*.json    # decode step by stage (bench --profile)
  scripts/perf_table.py llamacpp  perf_data/DIR/*.json    # rinfer next to llama.cpp (scripts/bench_llamacpp.sh)
"""
import json
import os
import sys


def load(paths):
    return [(os.path.basename(p)[:-5], json.load(open(p))) for p in sorted(paths)]


def fmt_ratio(x, target):
    s = "%.2f" % x
    return "**%s**" % s if x >= target else s


def precisions(rows):
    print("| model | weights | threads | decode tok/s | weight MB/token | read GB/s (probe) | decode / bandwidth "
          "| prefill tok/s | prefill GFLOP/s | / peak (instruction) | TTFT | peak RSS / (weights + KV) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, d in rows:
        print("| %s | %s | %d | %.2f ± %.2f | %.1f | %.1f | %s | %.1f | %.0f | %s (%.0f %s) | %.2f s | %.0f MB / %.0f MB = %.2f |" % (
            name.rsplit("-", 2)[0], d["dtype"] + (" (lm_head %s)" % d["lm_head"] if d.get("lm_head") in ("int8", "int4") else ""), d["threads"], d["decode_tokens_per_s"], d["decode_tokens_per_s_std"],
            d["weight_bytes_per_token"] / 1e6, d["mem_bw_gb_s"], fmt_ratio(d["decode_bandwidth_ratio"], 0.8),
            d["prefill_tokens_per_s"], d["prefill_matmul_gflop_s"], fmt_ratio(d["prefill_peak_ratio"], 0.5),
            d["peak_gops"], d["peak_kind"], d["ttft_ms"] / 1e3, d["peak_rss_bytes"] / 1e6,
            (d["weight_bytes_total"] + d["kv_cache_bytes"]) / 1e6, d["peak_rss_over_weights_and_kv"]))


def families(rows):
    print("| preset | architecture | layers run | decode tok/s (2 threads) | weight MB/token | decode / bandwidth "
          "| prefill tok/s (128) | KV bytes/token | peak RSS |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, d in rows:
        preset, layers = name.rsplit("-L", 1)
        print("| %s | %s | %s | %.2f | %.1f | %.2f | %.1f | %s | %.0f MB |" % (
            preset, d["architecture"], "all" if layers == "0" else layers, d["decode_tokens_per_s"],
            d["weight_bytes_per_token"] / 1e6, d.get("decode_bandwidth_ratio", 0), d["prefill_tokens_per_s"],
            d.get("kv_bytes_per_token", "-"), d["peak_rss_bytes"] / 1e6))


STAGES = ["qkv", "attention", "attn-out", "gate-up", "down", "lm-head"]


def stages(rows):
    """Per decode step: ms and share of the step for each stage, and for the
    weight stages their read rate against the run's probe (bench --profile)."""
    print("| model | weights | threads | step ms | " + " | ".join(STAGES) + " | other |")
    print("| --- | --- | --- | --- | " + " | ".join("---" for _ in STAGES) + " | --- |")
    for name, d in rows:
        prof = d.get("profile", {}).get("decode")
        if not prof:
            continue
        by = {s["stage"]: s for s in prof["stages"]}
        cells, listed = [], 0.0
        for st in STAGES:
            s = by.get(st)
            if not s:
                cells.append("-")
                continue
            listed += s["ms"]
            cell = "%.2f ms (%.0f %%)" % (s["ms"], 100 * s["share"])
            if st != "attention" and "bandwidth_ratio" in s:
                cell += " %.2f" % s["bandwidth_ratio"]
            cells.append(cell)
        other = prof["forward_ms"] - listed
        print("| %s | %s | %d | %.2f | %s | %.2f ms |" % (
            name.rsplit("-", 2)[0], d["dtype"] + (" (lm_head %s)" % d["lm_head"] if d.get("lm_head") in ("int8", "int4") else ""),
            d["threads"], prof["forward_ms"], " | ".join(cells), other))


def llamacpp(rows):
    print("| model | rinfer / llama.cpp weights | threads | decode tok/s rinfer | llama.cpp | x | of bandwidth rinfer "
          "| llama.cpp | prefill tok/s rinfer | llama.cpp | x | probe GB/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, d in rows:
        l = d["llama_cpp"]
        ours = d["dtype"] + (" (lm_head %s)" % d["lm_head"] if d.get("lm_head") in ("int8", "int4") else "")
        theirs = l["gguf_type"] + ("" if l["output_type"] == l["gguf_type"] else " (output %s)" % l["output_type"])
        print("| %s | %s / %s | %d | %.1f | %.1f | %.2f | %.2f | %.2f | %.0f | %.0f | %.2f | %.1f |" % (
            name.rsplit("-", 2)[0], ours, theirs, d["threads"], d["decode_tokens_per_s"], l["decode_tokens_per_s"],
            d["decode_tokens_per_s"] / l["decode_tokens_per_s"], d["decode_bandwidth_ratio"],
            l["decode_bandwidth_ratio"], d["prefill_tokens_per_s"], l["prefill_tokens_per_s"],
            d["prefill_tokens_per_s"] / l["prefill_tokens_per_s"], d["mem_bw_gb_s"]))


if __name__ == "__main__":
    modes = {"precisions": precisions, "families": families, "stages": stages, "llamacpp": llamacpp}
    if len(sys.argv) < 3 or sys.argv[1] not in modes:
        sys.exit(__doc__)
    modes[sys.argv[1]](load(sys.argv[2:]))
