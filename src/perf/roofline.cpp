#include "perf/roofline.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include <sys/mman.h>

#include "core/error.h"
#include "kernels/cpu/ops.h"

// The probes live in roofline_avx512.cpp / roofline_avx2.cpp / roofline_avxvnni.cpp (own -m flags).
namespace rinfer::perf::avx512 {
double peak_loop(int kind, int64_t iters);
int64_t peak_loop_macs(int kind);
uint64_t read_stream(const void* p, size_t bytes);
}  // namespace rinfer::perf::avx512
namespace rinfer::perf::avx2 {
double peak_loop_fma(int64_t iters);
int64_t peak_loop_fma_macs();
double peak_loop_maddubs(int64_t iters);
int64_t peak_loop_maddubs_macs();
uint64_t read_stream(const void* p, size_t bytes);
}  // namespace rinfer::perf::avx2
namespace rinfer::perf::avxvnni {
double peak_loop_int8(int64_t iters);
int64_t peak_loop_int8_macs();
}  // namespace rinfer::perf::avxvnni

namespace rinfer::perf {

using kernels::cpu::active_isa;
using kernels::cpu::avx_vnni_active;
using kernels::cpu::Isa;

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

volatile double g_sink_f = 0;
volatile uint64_t g_sink_u = 0;

// Four concurrent streams (the quarters), like the SIMD probes.
uint64_t read_stream_scalar(const void* p, size_t bytes) {
  const auto* v = static_cast<const uint64_t*>(p);
  const size_t q = bytes / 32;  // words per quarter
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i < q; ++i) s0 ^= v[i], s1 ^= v[q + i], s2 ^= v[2 * q + i], s3 ^= v[3 * q + i];
  return s0 ^ s1 ^ s2 ^ s3;
}
}  // namespace

const char* peak_kind_name(PeakKind k) {
  switch (k) {
    case PeakKind::F32Fma: return "f32-fma";
    case PeakKind::Bf16Dot: return "bf16-dot";
    case PeakKind::Int8Dot: return "int8-dot";
  }
  return "?";
}

bool peak_kind_of_path(std::string_view path, PeakKind& kind) {
  auto has = [&](std::string_view part) { return path.find(part) != std::string_view::npos; };
  if (has("scalar")) return false;
  if (has("vnni") || has("a8-avx2-gemm"))  // w8a8 / w4a8: VNNI, AVX-VNNI, vpmaddubsw
    kind = PeakKind::Int8Dot;
  else if (has("dot-gemm") || has("dot-blocked"))  // bf16-dot-gemm, bf16-dot-blocked
    kind = PeakKind::Bf16Dot;
  else  // fma GEMMs, dequant GEMMs, GEMVs
    kind = PeakKind::F32Fma;
  return true;
}

double measure_peak_gops(PeakKind k, ThreadPool& pool) {
  const Isa isa = active_isa();
  int64_t macs_per_iter = 0;
  if (isa == Isa::Avx512)
    macs_per_iter = avx512::peak_loop_macs(int(k));
  else if (isa == Isa::Avx2 && k == PeakKind::F32Fma)
    macs_per_iter = avx2::peak_loop_fma_macs();
  else if (isa == Isa::Avx2 && k == PeakKind::Int8Dot)
    macs_per_iter = avx_vnni_active() ? avxvnni::peak_loop_int8_macs() : avx2::peak_loop_maddubs_macs();
  if (macs_per_iter == 0) return 0;
  // About 10-20 ms per run at one instruction per cycle.
  const int64_t iters = int64_t(40'000'000) / 12;
  const int n = pool.size();
  double best = 0;
  for (int rep = 0; rep < 6; ++rep) {  // the first run warms the clocks up
    const auto t0 = std::chrono::steady_clock::now();
    pool.run(n, [&](int64_t, int) {
      const double r = isa == Isa::Avx512                        ? avx512::peak_loop(int(k), iters)
                       : k != PeakKind::Int8Dot                  ? avx2::peak_loop_fma(iters)
                       : avx_vnni_active()                       ? avxvnni::peak_loop_int8(iters)
                                                                 : avx2::peak_loop_maddubs(iters);
      g_sink_f = g_sink_f + r;
    });
    const double dt = seconds_since(t0);
    if (rep > 0) best = std::max(best, 2.0 * double(macs_per_iter) * double(iters) * n / dt / 1e9);
  }
  return best;
}

ReadProbe::ReadProbe(ThreadPool& pool, size_t slice_bytes, int n_slices) : pool_(pool) {
  const int n = pool.size();
  chunk_ = slice_bytes / size_t(n) / 256 * 256;
  RINFER_CHECK(chunk_ > 0 && n_slices > 0, "read bandwidth probe: buffer too small");
  n_slices_ = n_slices;
  constexpr size_t kHuge = size_t(2) << 20;
  bytes_ = (chunk_ * size_t(n) * size_t(n_slices) + kHuge - 1) / kHuge * kHuge;
  buf_ = static_cast<uint8_t*>(std::aligned_alloc(kHuge, bytes_));
  RINFER_CHECK(buf_ != nullptr, "read bandwidth probe: cannot allocate ", bytes_, " bytes");
  madvise(buf_, bytes_, MADV_HUGEPAGE);  // as core/buffer.cpp does for weights
  std::memset(buf_, 1, bytes_);          // fault the pages in: all of it is resident from here on
}

ReadProbe::~ReadProbe() { std::free(buf_); }

uint64_t read_quarters(const void* p, size_t bytes) {
  switch (active_isa()) {
    case Isa::Avx512: return avx512::read_stream(p, bytes);
    case Isa::Avx2: return avx2::read_stream(p, bytes);
    default: return read_stream_scalar(p, bytes);
  }
}

double ReadProbe::read_slice() {
  const int n = pool_.size();
  const uint8_t* slice = buf_ + size_t(next_) * chunk_ * size_t(n);
  next_ = (next_ + 1) % n_slices_;
  const auto t0 = std::chrono::steady_clock::now();
  pool_.run(n, [&](int64_t task, int) { g_sink_u = g_sink_u ^ read_quarters(slice + size_t(task) * chunk_, chunk_); });
  return seconds_since(t0);
}

double measure_read_bandwidth_gbs(ThreadPool& pool, size_t bytes, int reps) {
  ReadProbe probe(pool, bytes, 1);
  double best = 0;
  for (int rep = 0; rep <= reps; ++rep) {  // rep 0 warms up
    const double dt = probe.read_slice();
    if (rep > 0) best = std::max(best, double(probe.slice_bytes()) / dt / 1e9);
  }
  return best;
}

}  // namespace rinfer::perf
