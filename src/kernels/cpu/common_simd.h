#pragma once
// Internal to the SIMD files of every level (common_avx2.h and
// common_avx512.h include it): the names and scalar helpers that do not
// depend on the vector width. Internal linkage (an anonymous namespace), as
// impl.h requires of code compiled with SIMD flags.
#include <stdint.h>

#include "kernels/cpu/impl.h"
#include "kernels/cpu/owned_ranges.h"

namespace rinfer::kernels::cpu::simd {

using detail::MatmulArgs;
using detail::QMatmulArgs;
using detail::Runner;
using detail::OwnedRanges;  // owned_ranges.h
using detail::kGemvClaimBytes;
using detail::part_of;

constexpr int64_t kGemvMaxM = 8;  // matmul: above this many x rows, the packed GEMM path

namespace {

inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
inline int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

}  // namespace
}  // namespace rinfer::kernels::cpu::simd
