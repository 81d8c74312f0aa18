// The W8A8 / W4A8 prefill GEMM for CPUs with AVX-VNNI but not AVX-512
// (Intel Alder Lake and later client cores; AMD Zen 5 has both): vpdpbusd
// on ymm registers, 8 sums of 4 u8 x s8 products per instruction. Without
// it the AVX2 level's prefill runs qgemm_avx2.cpp (Q4) or dequantizes the
// weights to f32 (Q8); with it a 512-token prefill does the int8 dot
// products that avx512::matmul_q_gemm does, at 8 lanes instead of 16, with
// its bits (the GEMM around the micro kernel: qgemm_ymm.h). Compiled with
// -mavx2 -mfma -mf16c -mavxvnni (its own file: the AVX2 files must run on
// CPUs without AVX-VNNI, and GCC may emit vpdpbusd for plain dot-product
// loops when the flag is on).
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/impl.h"
#include "kernels/cpu/qgemm_ymm.h"

namespace rinfer::kernels::cpu::avxvnni {

using detail::QMatmulArgs;
using detail::Runner;

namespace {

// 6 rows by one 16-row weight block (two ymm of 8 outputs): 12 int32
// accumulators, two weight vectors and the broadcast x quad fill the 16 ymm
// registers, and the f32 sums live in L1 (touched once per group). Per 4 k:
// 2 weight loads and 6 x broadcasts feed 12 vpdpbusd, 12 independent
// chains, enough to cover the instruction's latency at two per cycle (3
// rows with the f32 sums in registers gave only 6 chains, and ran slower).
constexpr int kMR = 6;

template <int MR, int GK4>
struct Micro {
  static void run(const int32_t* xp, const int32_t* comp, const uint8_t* w, const float* sp, int64_t n_groups,
                  const float* sx, float* c, int64_t ldc, int64_t ncols, bool first, const float* bias) {
    alignas(32) float accf[MR][16];  // in memory on purpose: the registers hold the int32 chains
    memset(accf, 0, sizeof(accf));
    for (int64_t g = 0; g < n_groups; ++g) {
      __m256i acci[MR][2];
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) acci[i][0] = acci[i][1] = _mm256_set1_epi32(comp[g * kMR + i]);
      const int32_t* x = xp + g * GK4 * kMR;
      const uint8_t* p = w + g * GK4 * 64;
#pragma GCC unroll 32
      for (int s = 0; s < GK4; ++s) {
        const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + s * 64));
        const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + s * 64 + 32));
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
          const __m256i xb = _mm256_set1_epi32(x[s * kMR + i]);
          acci[i][0] = _mm256_dpbusd_avx_epi32(acci[i][0], w0, xb);
          acci[i][1] = _mm256_dpbusd_avx_epi32(acci[i][1], w1, xb);
        }
      }
      detail::qymm_add_group<MR>(acci, sp + g * 16, accf);
    }
    detail::qymm_store<MR>(accf, sx, c, ldc, ncols, first, bias);
  }
};

using VnniKernel = detail::QYmmKernel<Micro, kMR>;

}  // namespace

void matmul_q_gemm_multi(const QMatmulArgs* as, int n, const Runner& runner) {
  detail::qymm_gemm_multi<VnniKernel>(as, n, runner);
}

}  // namespace rinfer::kernels::cpu::avxvnni
