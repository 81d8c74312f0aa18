// bench_read_probe: is `rinfer bench`'s step probe (perf::ReadProbe,
// 64 MiB read after every decode step) a fair yardstick? It alternates, as
// bench does, a "step" (a plain read of --step-mb, the size of a decode
// step's weights) with a 64 MiB probe slice, and prints per round the rate of
// the steps and of the slices and their ratio. A probe that read slower than
// a plain read of a step's size in the same windows would lift bench's
// decode / bandwidth ratios; a ratio near 1 here says it does not.
// Where the CPU has AVX-512, each round also reads a step's size as one
// stream per thread (bench/read_probe.h, the way membw.c reads), against the
// probe's four per thread.
//
// Usage: bench_read_probe [--threads N=2] [--rounds N=4] [--steps N=32] [--step-mb N=600] [--slice-mb N=64]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "perf/roofline.h"
#include "read_probe.h"

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
  rinfer::perf::ReadProbe step(pool, size_t(step_mb) << 20, 1);
  rinfer::perf::ReadProbe probe(pool, size_t(slice_mb) << 20, 4);  // as bench's --bw-probe steps
  std::printf("%d threads, %d steps of %d MiB per round, each followed by a %d MiB probe slice\n", threads, steps,
              step_mb, slice_mb);
  // One stream per thread over the step probe's buffer (it is resident and
  // cold by its turn): each thread reads its share front to back.
  const bool one_stream = rinfer::cpu_features().avx512f;
  const size_t share = step.slice_bytes() / size_t(threads) / 256 * 256;
  volatile uint64_t sink = 0;
  auto read_one_stream = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run(threads, [&](int64_t t, int) {
      sink = sink ^ rinfer::bench::read_avx512(step.data() + size_t(t) * share, share);
    });
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::printf("%6s %14s %14s %14s %18s\n", "round", "steps GB/s", "probe GB/s", "steps / probe",
              one_stream ? "1 stream/thr GB/s" : "");
  for (int r = 0; r < rounds; ++r) {
    double step_s = 0, step_b = 0, probe_s = 0, probe_b = 0, one_s = 0, one_b = 0;
    for (int i = 0; i < steps; ++i) {
      step_s += step.read_slice();
      step_b += double(step.slice_bytes());
      probe_s += probe.read_slice();
      probe_b += double(probe.slice_bytes());
      if (one_stream) {
        one_s += read_one_stream();
        one_b += double(share) * threads;
        probe_s += probe.read_slice();  // between two reads of the step's buffer
        probe_b += double(probe.slice_bytes());
      }
    }
    const double sr = step_b / step_s / 1e9, pr = probe_b / probe_s / 1e9;
    std::printf("%6d %14.1f %14.1f %14.3f", r, sr, pr, sr / pr);
    if (one_stream) std::printf(" %18.1f", one_b / one_s / 1e9);
    std::printf("\n");
  }
  return 0;
}
