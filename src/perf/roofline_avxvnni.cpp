// AVX-VNNI probe for roofline.cpp: the int8 dot-product peak on ymm
// registers, what the AVX2 level's int8 prefill GEMM (qgemm_avxvnni.cpp)
// runs on. Own file: compiled with -mavxvnni.
//
// The loop is inline assembly: GCC 12 compiles a loop of 12 chains of
// _mm256_dpbusd_avx_epi32 with register copies and stores between the
// instructions, which then bound the probe instead of the instruction.
#include <immintrin.h>

#include <cstdint>

namespace rinfer::perf::avxvnni {

double peak_loop_int8(int64_t iters) {
  __m256i c0 = _mm256_set1_epi32(0), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0, c9 = c0,
          c10 = c0, c11 = c0;
  const __m256i a = _mm256_set1_epi8(1), b = _mm256_set1_epi8(-1);
#define RINFER_DPBUSD(i) "%{vex%} vpdpbusd %[b], %[a], %[c" #i "]\n\t"
  for (int64_t i = 0; i < iters; ++i)
    __asm__(RINFER_DPBUSD(0) RINFER_DPBUSD(1) RINFER_DPBUSD(2) RINFER_DPBUSD(3) RINFER_DPBUSD(4) RINFER_DPBUSD(5)
                RINFER_DPBUSD(6) RINFER_DPBUSD(7) RINFER_DPBUSD(8) RINFER_DPBUSD(9) RINFER_DPBUSD(10) RINFER_DPBUSD(11)
            : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3), [c4] "+x"(c4), [c5] "+x"(c5),
              [c6] "+x"(c6), [c7] "+x"(c7), [c8] "+x"(c8), [c9] "+x"(c9), [c10] "+x"(c10), [c11] "+x"(c11)
            : [a] "x"(a), [b] "x"(b));
#undef RINFER_DPBUSD
  const __m256i s = _mm256_add_epi32(
      _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(c0, c1), _mm256_add_epi32(c2, c3)),
                       _mm256_add_epi32(_mm256_add_epi32(c4, c5), _mm256_add_epi32(c6, c7))),
      _mm256_add_epi32(_mm256_add_epi32(c8, c9), _mm256_add_epi32(c10, c11)));
  alignas(32) int32_t t[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(t), s);
  double sum = 0;
  for (int32_t x : t) sum += x;
  return sum;
}

// Multiply-adds one peak_loop_int8 iteration performs.
int64_t peak_loop_int8_macs() { return 12 * 32; }

}  // namespace rinfer::perf::avxvnni
