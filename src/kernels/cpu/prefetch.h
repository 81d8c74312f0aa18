#pragma once
// Internal to kernels/cpu, for the SIMD files: the software prefetches the
// decode kernels (and the prefill GEMM) issue. Each is an asm statement with side effects because
// GCC 12 deletes a loop whose only work is __builtin_prefetch /
// _mm_prefetch (known codegen issue), while such a statement stays.
//
// Internal linkage on purpose (an anonymous namespace in a header), as
// qgemm_ymm.h: each SIMD-flagged file gets its own copy (the ODR rule in
// impl.h).

namespace rinfer::kernels::cpu {
namespace {

// Into L1 (prefetcht0).
inline void prefetch_l1(const void* p) { asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p))); }

// Into L2 (prefetcht1).
inline void prefetch_l2(const void* p) { asm volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p))); }

// The decode GEMVs' per-line prefetch (DecodePrefetch's *_nta distances):
// prefetchnta, or prefetcht0 where the profile's line_t0 says so (on Ice
// Lake a non-temporal prefetch costs).
inline void prefetch_line(const void* p, bool t0) {
  if (t0)
    asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
  else
    asm volatile("prefetchnta %0" : : "m"(*static_cast<const char*>(p)));
}

}  // namespace
}  // namespace rinfer::kernels::cpu
