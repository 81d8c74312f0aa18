#include "kernels/cpu/decode_prefetch.h"

#include <atomic>

namespace rinfer::kernels::cpu {

namespace {
// The Zen 4 (and earlier Xeon) tuning: a T2 prefetch once per 4 lines, one
// weight stream per thread (why each distance: kernels' gemv and qgemv files).
constexpr DecodePrefetch kDefault{"default", 12288, 0, 12288, 24576, 0, false, 4096, 32768, 1, 1, 1, false};

std::atomic<const DecodePrefetch*> g_installed{nullptr};
}  // namespace

const DecodePrefetch& default_decode_prefetch() { return kDefault; }

const DecodePrefetch& decode_prefetch() {
  const DecodePrefetch* p = g_installed.load(std::memory_order_relaxed);
  return p ? *p : kDefault;
}

void set_decode_prefetch(const DecodePrefetch* p) { g_installed.store(p, std::memory_order_relaxed); }

}  // namespace rinfer::kernels::cpu
