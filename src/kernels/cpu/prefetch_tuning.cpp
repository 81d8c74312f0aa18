#include "kernels/cpu/prefetch_tuning.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace rinfer::kernels::cpu {

namespace {
// Tuned on the Zen 4 EPYC (and the Xeon before it); why each distance is
// what it is: the comments at kSparsePrefetch, kQ4NtaPrefetch and
// kQ8L2Prefetch in kernels_avx512.cpp.
constexpr DecodePrefetch kDefault{"default", 12288, 12288, 24576, false, 4096, 32768};
// Zen 5 EPYC (family 0x1A), each choice an A/B in the model on one run,
// 2 and 1 threads (docs/performance.md):
//  - BF16: no prefetch, 40-43 -> 63-66 GB/s (2 threads), 20 -> 26-29 (1);
//  - Q8: T2 only, on one thread too: 48.5 -> 52 GB/s (2), 20-23 -> 23-28 (1);
//  - Q4: nta 8 KB ahead, no L2 prefetch: 33-36 -> 38.5-39 GB/s (2),
//    18 -> 20 (1).
constexpr DecodePrefetch kZen5{"zen5", 0, 12288, 0, true, 8192, 0};

const DecodePrefetch* by_name(const std::string& v) {
  if (v == kDefault.name) return &kDefault;
  if (v == kZen5.name) return &kZen5;
  return nullptr;
}

std::atomic<const DecodePrefetch*> g_forced{nullptr};
}  // namespace

const DecodePrefetch& decode_prefetch_for(const CpuFeatures& cpu, const char* env) {
  if (env && *env) {
    if (const DecodePrefetch* p = by_name(env)) return *p;
    fail("RINFER_DECODE_PREFETCH=\"", env, "\": expected default or zen5");
  }
  return cpu.is_amd() && cpu.family >= 0x1A ? kZen5 : kDefault;
}

const DecodePrefetch& decode_prefetch() {
  if (const DecodePrefetch* f = g_forced.load(std::memory_order_relaxed)) return *f;
  // Chosen once. A bad RINFER_DECODE_PREFETCH throws out of the initializer,
  // which leaves it to run again on the next call (main() calls this first).
  static const DecodePrefetch& chosen = decode_prefetch_for(cpu_features(), std::getenv("RINFER_DECODE_PREFETCH"));
  return chosen;
}

void force_decode_prefetch(const char* name) {
  if (!name) {
    g_forced.store(nullptr, std::memory_order_relaxed);
    return;
  }
  const DecodePrefetch* p = by_name(name);
  if (!p) fail("decode prefetch profile \"", name, "\": expected default or zen5");
  g_forced.store(p, std::memory_order_relaxed);
}

}  // namespace rinfer::kernels::cpu
