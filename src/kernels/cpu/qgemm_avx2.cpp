// The W8A8 / W4A8 prefill GEMM for CPUs with AVX2 but neither AVX-VNNI nor
// AVX-512 (Intel Haswell to Comet Lake, AMD Zen 1 to 3): int8 dot products by
// vpmaddubsw, fewer instructions than dequantizing the weights to f32 for an
// FMA GEMM. The GEMM around the micro kernels and its arithmetic are
// qgemm_ymm.h's (the AVX-512 VNNI GEMM's bits).
//
// Q4: a weight is u = q + 8 <= 15, so vpmaddubsw's sums of two u8 x s8
// products (at most 2 * 15 * 127 = 3810) never saturate, and 8 of them (at
// most 30480) add exactly in int16 before vpmaddwd against ones widens the
// pairs to int32: one vpmaddubsw and one vpaddw per 32 multiply-adds, where
// f32 FMAs need 4 instructions (and the weights converted first).
//
// Q8: u = q + 128 would saturate (2 * 255 * 127), so the weight is taken
// signed (u ^ 0x80 = q, |q| <= 127 from the symmetric quantizer) and q's sign
// moves onto x: |q| . sign(x, q), pairs up to 2 * 127 * 127, each widened by
// vpmaddwd at once (two never add safely in int16). q and |q| are prepared
// once per weight line for all rows. The int32 dot is then sum q x itself,
// the VNNI GEMM's sum u x + comp (comp = -128 sum x), so the packed x's comp
// is not used. (A byte u = 0, q = -128, which quantize_weights never writes,
// would have |q| = 128 read as u8 and still multiply right.)
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/impl.h"
#include "kernels/cpu/qgemm_ymm.h"

namespace rinfer::kernels::cpu::avx2 {

using detail::QMatmulArgs;
using detail::Runner;

namespace {

// 3 rows by one 16-row weight block: 6 int32 and 6 int16 accumulators, two
// weight vectors, the broadcast x quad and the ones fill the 16 ymm
// registers; the f32 sums live in L1 (touched once per group).
constexpr int kMR = 3;

template <int MR, int GK4>
struct Micro {
  static void run(const int32_t* xp, const int32_t* comp, const uint8_t* w, const float* sp, int64_t n_groups,
                  const float* sx, float* c, int64_t ldc, int64_t ncols, bool first, const float* bias) {
    static_assert(GK4 % 8 == 0, "groups of 32, 64 or 128");
    alignas(32) float accf[MR][16];  // in memory on purpose: the registers hold the integer sums
    memset(accf, 0, sizeof(accf));
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t g = 0; g < n_groups; ++g) {
      __m256i acc32[MR][2];
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) acc32[i][0] = acc32[i][1] = _mm256_set1_epi32(comp[g * kMR + i]);
      const int32_t* x = xp + g * GK4 * kMR;
      const uint8_t* p = w + g * GK4 * 64;
      for (int s0 = 0; s0 < GK4; s0 += 8) {  // 8 quads: the int16 sums' limit
        __m256i acc16[MR][2];
#pragma GCC unroll 4
        for (int i = 0; i < MR; ++i) acc16[i][0] = acc16[i][1] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int s = s0; s < s0 + 8; ++s) {
          const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + s * 64));
          const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + s * 64 + 32));
#pragma GCC unroll 4
          for (int i = 0; i < MR; ++i) {
            const __m256i xb = _mm256_set1_epi32(x[s * kMR + i]);
            acc16[i][0] = _mm256_add_epi16(acc16[i][0], _mm256_maddubs_epi16(w0, xb));
            acc16[i][1] = _mm256_add_epi16(acc16[i][1], _mm256_maddubs_epi16(w1, xb));
            // One chain per accumulator: without this GCC 12 reassociates the
            // 8 steps' adds into a tree and spills the products to the stack.
            __asm__("" : "+x"(acc16[i][0]), "+x"(acc16[i][1]));
          }
        }
#pragma GCC unroll 4
        for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
          for (int v = 0; v < 2; ++v) acc32[i][v] = _mm256_add_epi32(acc32[i][v], _mm256_madd_epi16(acc16[i][v], ones));
      }
      detail::qymm_add_group<MR>(acc32, sp + g * 16, accf);
    }
    detail::qymm_store<MR>(accf, sx, c, ldc, ncols, first, bias);
  }
};

using MaddubsKernel = detail::QYmmKernel<Micro, kMR>;

// Q8: 4 rows by one 16-row weight block. The lines come prepared (qymm_gemm_
// task): q (s8) and |q| (u8) per 4 k. Per row and vector: x's sign onto q
// (vpsignb), |q| . that (vpmaddubsw), widened (vpmaddwd) and added: 8 int32
// accumulators, x's broadcast quad, the ones and the products in registers.
constexpr int kMR8 = 3;

template <int MR, int GK4>
struct MicroQ8 {
  static void run(const int32_t* xp, const int32_t* /*comp: sum u x + comp = sum q x*/, const uint8_t* w,
                  const float* sp, int64_t n_groups, const float* sx, float* c, int64_t ldc, int64_t ncols, bool first,
                  const float* bias) {
    alignas(32) float accf[MR][16];  // in memory on purpose: the registers hold the integer sums
    memset(accf, 0, sizeof(accf));
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t g = 0; g < n_groups; ++g) {
      __m256i acc32[MR][2];
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) acc32[i][0] = acc32[i][1] = _mm256_setzero_si256();
      const int32_t* x = xp + g * GK4 * kMR8;
      const uint8_t* p = w + g * GK4 * 128;
#pragma GCC unroll 4
      for (int s = 0; s < GK4; ++s) {
        const auto* line = reinterpret_cast<const __m256i*>(p + s * 128);
        const __m256i q0 = _mm256_load_si256(line), q1 = _mm256_load_si256(line + 1);
        const __m256i a0 = _mm256_load_si256(line + 2), a1 = _mm256_load_si256(line + 3);
#pragma GCC unroll 4
        for (int i = 0; i < MR; ++i) {
          const __m256i xb = _mm256_set1_epi32(x[s * kMR8 + i]);
          acc32[i][0] = _mm256_add_epi32(acc32[i][0],
                                         _mm256_madd_epi16(_mm256_maddubs_epi16(a0, _mm256_sign_epi8(xb, q0)), ones));
          acc32[i][1] = _mm256_add_epi32(acc32[i][1],
                                         _mm256_madd_epi16(_mm256_maddubs_epi16(a1, _mm256_sign_epi8(xb, q1)), ones));
        }
      }
      detail::qymm_add_group<MR>(acc32, sp + g * 16, accf);
    }
    detail::qymm_store<MR>(accf, sx, c, ldc, ncols, first, bias);
  }
};

using MaddubsQ8Kernel = detail::QYmmKernel<MicroQ8, kMR8, true>;

}  // namespace

void matmul_q_gemm_multi(const QMatmulArgs* as, int n, const Runner& runner) {
  if (as[0].w->type == QuantType::Q8)
    detail::qymm_gemm_multi<MaddubsQ8Kernel>(as, n, runner);
  else
    detail::qymm_gemm_multi<MaddubsKernel>(as, n, runner);
}

}  // namespace rinfer::kernels::cpu::avx2
