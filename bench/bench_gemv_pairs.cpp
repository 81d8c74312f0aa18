// bench_gemv_pairs: decode GEMVs against a plain read of the same bytes, in
// alternation every few milliseconds.
//
// Why not Google Benchmark (bench_kernels): it runs one benchmark for a
// while and then the next, and on a shared host whose read bandwidth jumps
// between levels within seconds (here about 30 and 50 GB/s on 2 threads) a
// kernel measured in one window and the read probe in another give a ratio
// that says more about the host than the kernel. Here every round reads a
// 64 MB probe, then for each kernel streams pieces of the kernel's size with
// plain loads split over the threads ("plain": what the hardware gives a
// reader of these bytes, call overheads included) and right after runs the
// kernel over as many bytes; the kernel's GB/s is divided by that plain
// read's. The summary gives medians over all rounds and over the third of
// rounds with the fastest probe (where a kernel that cannot keep up with the
// memory shows it).
//
// Kernels (by default the TinyLlama-1.1B gate_up shape, K 2048 x N 5632; --k/--n; weights cold:
// each call reads another copy of the --arena-mb arena):
//   q4   W4A8 GEMV, Q4 group 32 (matmul_q, M = 1), interleaved layout (the
//        scales inside the data: how a copied model is laid out, ops.h)
//   q8   W8A8 GEMV, Q8 group 128, interleaved
//   q4s, q8s (--separate): the same on the separate layout (the scales in
//        their own array: --weights mmap)
//   bf16 blocked BF16 GEMV (matmul_bf16_blocked, M = 1)
//
// Usage: bench_gemv_pairs [--threads N=2] [--rounds N=200] [--arena-mb N=1024] [--rows] [--separate]
//                         [--plain-quarters] [--k K=2048] [--n N=5632] [--profile SPEC]...
//   --rows prints every round (probe, plain and kernel GB/s).
//   --plain-quarters: the probe and the plain reads take each thread's share
//     as four streams (its quarters), the way rinfer bench's probe reads,
//     instead of one; the decode GEMVs read two or four streams per thread.
//   --k / --n: the weight's shape (K a multiple of 128, N of 16), e.g.
//     --n 32000 for TinyLlama's output layer.
//   --profile (repeatable): run every kernel once per decode prefetch spec
//     (perf/decode_tuning.h, e.g. zen5 and zen5:q4_streams=1), interleaved in
//     each round, so that two settings are compared in the same windows.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "kernels/cpu/ops.h"
#include "perf/decode_tuning.h"
#include "perf/roofline.h"
#include "read_probe.h"

namespace kc = rinfer::kernels::cpu;
using Clock = std::chrono::steady_clock;

namespace {

using rinfer::bench::read_avx512;

volatile uint64_t g_sink;  // keeps the probe's reads

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Kernel {
  std::string name;
  size_t bytes;                                   // read per call
  std::function<void(const uint8_t*)> call;       // one call on the copy at that address
  const char* profile = nullptr;                  // decode prefetch spec pinned around the calls (nullptr: automatic)
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "bench_gemv_pairs: %s\nusage: bench_gemv_pairs [--threads N] [--rounds N] [--arena-mb N] [--rows] "
               "[--separate] [--plain-quarters] [--k K] [--n N] [--profile SPEC]...\n",
               why);
  std::exit(2);
}

long parse_positive(const char* flag, const char* v) {
  char* end = nullptr;
  const long n = v ? std::strtol(v, &end, 10) : 0;
  if (!v || *end || n <= 0) usage((std::string(flag) + " needs a positive integer").c_str());
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  rinfer::perf::apply_decode_tuning();
  int threads = 2, rounds = 200;
  int64_t K = 2048, N = 5632;
  size_t arena_mb = 1024;
  bool rows = false, separate = false, quarters = false;
  std::vector<const char*> profiles;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--threads") threads = int(parse_positive("--threads", v)), ++i;
    else if (a == "--rounds") rounds = int(parse_positive("--rounds", v)), ++i;
    else if (a == "--arena-mb") arena_mb = size_t(parse_positive("--arena-mb", v)), ++i;
    else if (a == "--rows") rows = true;
    else if (a == "--separate") separate = true;
    else if (a == "--plain-quarters") quarters = true;
    else if (a == "--k") K = parse_positive("--k", v), ++i;
    else if (a == "--n") N = parse_positive("--n", v), ++i;
    else if (a == "--profile" && v) profiles.push_back(v), ++i;
    else usage(("unknown argument " + a).c_str());
  }
  if (!rinfer::cpu_features().has_avx512_core()) {
    std::fprintf(stderr, "bench_gemv_pairs: needs AVX-512 (the read probe and the kernels measured are AVX-512)\n");
    return 77;  // ctest: skipped on such a machine (SKIP_RETURN_CODE)
  }
  constexpr size_t kProbeBytes = size_t(64) << 20;
  constexpr int kCallsPerRound = 10;
  const size_t arena_bytes = arena_mb << 20;
  if (arena_bytes < 2 * kProbeBytes) usage("--arena-mb must be at least 128");
  if (K % 128 != 0 || N % 16 != 0) usage("--k must be a multiple of 128 and --n of 16");

  rinfer::ThreadPool pool(threads);
  rinfer::Buffer arena(arena_bytes);
  {
    // Bytes that are valid f16 scales and BF16 weights; any bytes are valid quants.
    auto* p = arena.as<uint16_t>();
    uint32_t s = 12345;
    for (size_t i = 0; i < arena_bytes / 2; ++i) {
      s = s * 1664525u + 1013904223u;
      p[i] = uint16_t(0x3c00u | ((s >> 16) & 0x00ffu) | ((s >> 8) & 0x8000u));
    }
  }
  const auto* base = arena.as<uint8_t>();
  std::vector<float> x(K), y(N);
  for (int64_t k = 0; k < K; ++k) x[size_t(k)] = float((k * 7919) % 200 - 100) / 100.0f;

  std::vector<Kernel> kernels;
  for (kc::QuantType qt : {kc::QuantType::Q4, kc::QuantType::Q8})
    for (bool il : {true, false}) {
      if (!il && !separate) continue;
      kc::QuantizedWeight w;
      w.type = qt;
      w.N = N;
      w.K = K;
      w.group_size = qt == kc::QuantType::Q4 ? 32 : 128;
      w.scale_dtype = rinfer::DType::F16;
      w.interleaved = il;
      const size_t db = kc::quant_data_bytes(qt, N, K), sb = kc::quant_scale_bytes(N, K, w.group_size, w.scale_dtype);
      const size_t bytes = il ? kc::quant_interleaved_bytes(qt, N, K, w.group_size, w.scale_dtype) : db + sb;
      const std::string name = std::string(qt == kc::QuantType::Q4 ? "q4" : "q8") + (il ? "" : "s");
      kernels.push_back({name, bytes, [&, w, db](const uint8_t* p) mutable {
                           w.data = p;
                           if (!w.interleaved) w.scales = p + db;
                           kc::matmul_q(x.data(), 1, K, K, w, nullptr, y.data(), N, pool);
                         }});
    }
  kernels.push_back({"bf16", size_t(N * K * 2), [&](const uint8_t* p) {
                       kc::matmul_bf16_blocked(x.data(), 1, K, K, reinterpret_cast<const uint16_t*>(p), N, nullptr,
                                               y.data(), N, pool);
                     }});
  if (!profiles.empty()) {  // each kernel once per profile, named kernel/A, kernel/B, ...
    std::vector<Kernel> per_profile;
    for (size_t p = 0; p < profiles.size(); ++p) {
      try {
        rinfer::perf::parse_decode_prefetch(profiles[p]);
      } catch (const std::exception& e) {
        usage(e.what());
      }
      std::printf("profile %c: %s\n", char('A' + p), profiles[p]);
      for (const auto& k : kernels) {
        per_profile.push_back(k);
        per_profile.back().name += std::string("/") + char('A' + p);
        per_profile.back().profile = profiles[p];
      }
    }
    kernels = per_profile;
  }
  size_t max_bytes = 0;
  for (const auto& k : kernels) max_bytes = std::max(max_bytes, k.bytes);
  const size_t stride = (max_bytes + 4095) / 4096 * 4096, copies = arena_bytes / stride;
  if (copies < 2 * kCallsPerRound) usage("--arena-mb too small for cold calls (use at least 512)");

  std::vector<uint64_t> sink(size_t(threads) * 8);
  auto plain_read = [&](const uint8_t* p, size_t bytes) {
    const size_t part = bytes / size_t(threads) / 256 * 256;
    pool.run(threads, [&](int64_t t, int) {
      const uint8_t* share = p + size_t(t) * part;
      sink[size_t(t) * 8] += quarters ? rinfer::perf::read_quarters(share, part) : read_avx512(share, part);
    });
    return part * size_t(threads);
  };
  auto call_pinned = [](const Kernel& k, const uint8_t* p) {
    if (k.profile) rinfer::perf::force_decode_prefetch(k.profile);
    k.call(p);
  };
  for (const auto& k : kernels) call_pinned(k, base);  // warm-up: code, scratch buffers, thread wake-up

  // per round: the probe, then per kernel a plain read of its bytes and the kernel
  const size_t n_rounds = static_cast<size_t>(rounds);
  std::vector<double> probe(n_rounds);
  std::vector<std::vector<double>> gbs(kernels.size(), std::vector<double>(n_rounds)), plain = gbs;
  size_t copy = 0, probe_chunk = 0;
  if (rows) {
    std::printf("round probe");
    for (const auto& k : kernels) std::printf(" plain %s", k.name.c_str());
    std::printf("   (GB/s)\n");
  }
  // GB/s of f(), which reads and returns a byte count.
  auto gb_per_s = [](const auto& f) {
    const auto t0 = Clock::now();
    const size_t bytes = f();
    return double(bytes) / seconds_since(t0) / 1e9;
  };
  const size_t n_chunks = arena_bytes / kProbeBytes;
  for (int r = 0; r < rounds; ++r) {
    probe[size_t(r)] = gb_per_s([&] { return plain_read(base + (probe_chunk++ % n_chunks) * kProbeBytes, kProbeBytes); });
    for (size_t i = 0; i < kernels.size(); ++i) {
      plain[i][size_t(r)] = gb_per_s([&] {
        size_t bytes = 0;
        for (int c = 0; c < kCallsPerRound; ++c) bytes += plain_read(base + (copy++ % copies) * stride, kernels[i].bytes);
        return bytes;
      });
      if (kernels[i].profile) rinfer::perf::force_decode_prefetch(kernels[i].profile);
      gbs[i][size_t(r)] = gb_per_s([&] {
        for (int c = 0; c < kCallsPerRound; ++c) kernels[i].call(base + (copy++ % copies) * stride);
        return kernels[i].bytes * kCallsPerRound;
      });
    }
    if (rows) {
      std::printf("%5d %5.1f", r, probe[size_t(r)]);
      for (size_t i = 0; i < kernels.size(); ++i) std::printf(" %5.1f %5.1f", plain[i][size_t(r)], gbs[i][size_t(r)]);
      std::printf("\n");
    }
  }

  // The fastest third of rounds by probe: the host's high-bandwidth phase.
  std::vector<size_t> order(n_rounds);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return probe[a] > probe[b]; });
  const size_t n_fast = std::max<size_t>(1, order.size() / 3);
  auto summarize = [&](const char* label, const std::vector<size_t>& idx) {
    std::vector<double> pr;
    for (size_t i : idx) pr.push_back(probe[i]);
    std::printf("%-22s rounds %4zu  probe %5.1f GB/s", label, idx.size(), median(pr));
    for (size_t k = 0; k < kernels.size(); ++k) {
      std::vector<double> g, pl, ratio;
      for (size_t i : idx) g.push_back(gbs[k][i]), pl.push_back(plain[k][i]), ratio.push_back(gbs[k][i] / plain[k][i]);
      std::printf("  %s %5.1f / plain %5.1f = %.2f", kernels[k].name.c_str(), median(g), median(pl), median(ratio));
    }
    std::printf("\n");
  };
  std::printf("bench_gemv_pairs: %d threads, K %lld x N %lld, %d calls per kernel per round; medians, GB/s "
              "(kernel / plain read of the same bytes just before)\n",
              threads, static_cast<long long>(K), static_cast<long long>(N), kCallsPerRound);
  summarize("all rounds", order);
  summarize("fastest third (probe)", std::vector<size_t>(order.begin(), order.begin() + long(n_fast)));
  g_sink = sink[0];
  return 0;
}
