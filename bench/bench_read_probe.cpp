// bench_read_probe: is `rinfer bench`'s step probe (kernels::cpu::ReadProbe,
// 64 MiB read after every decode step) a fair yardstick? It alternates, as
// bench does, a "step" (a plain read of --step-mb, the size of a decode
// step's weights) with a 64 MiB probe slice, and prints per round the rate of
// the steps and of the slices and their ratio. A probe that read slower than
// a plain read of a step's size in the same windows would lift bench's
// decode / bandwidth ratios; a ratio near 1 here says it does not.
//
// Usage: bench_read_probe [--threads N=2] [--rounds N=4] [--steps N=32] [--step-mb N=600] [--slice-mb N=64]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/thread_pool.h"
#include "kernels/cpu/roofline.h"

int main(int argc, char** argv) {
  int threads = 2, rounds = 4, steps = 32, step_mb = 600, slice_mb = 64;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    int* target = a == "--threads"    ? &threads
                  : a == "--rounds"   ? &rounds
                  : a == "--steps"    ? &steps
                  : a == "--step-mb"  ? &step_mb
                  : a == "--slice-mb" ? &slice_mb
                                      : nullptr;
    if (target == nullptr || i + 1 >= argc || std::atoi(argv[i + 1]) <= 0) {
      std::fprintf(stderr,
                   "usage: bench_read_probe [--threads N] [--rounds N] [--steps N] [--step-mb N] [--slice-mb N]\n");
      return 2;
    }
    *target = std::atoi(argv[++i]);
  }
  rinfer::ThreadPool pool(threads);
  rinfer::kernels::cpu::ReadProbe step(pool, size_t(step_mb) << 20, 1);
  rinfer::kernels::cpu::ReadProbe probe(pool, size_t(slice_mb) << 20, 4);  // as bench's --bw-probe steps
  std::printf("%d threads, %d steps of %d MiB per round, each followed by a %d MiB probe slice\n", threads, steps,
              step_mb, slice_mb);
  std::printf("%6s %14s %14s %14s\n", "round", "steps GB/s", "probe GB/s", "steps / probe");
  for (int r = 0; r < rounds; ++r) {
    double step_s = 0, step_b = 0, probe_s = 0, probe_b = 0;
    for (int i = 0; i < steps; ++i) {
      step_s += step.read_slice();
      step_b += double(step.slice_bytes());
      probe_s += probe.read_slice();
      probe_b += double(probe.slice_bytes());
    }
    const double sr = step_b / step_s / 1e9, pr = probe_b / probe_s / 1e9;
    std::printf("%6d %14.1f %14.1f %14.3f\n", r, sr, pr, sr / pr);
  }
  return 0;
}
