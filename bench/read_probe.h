#pragma once
// The plain read the benchmarks compare decode kernels with: AVX-512 loads
// of [p, p + bytes) (p 64-byte aligned, bytes a multiple of 256), summed so
// that the compiler keeps them. The caller checks for AVX-512.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace rinfer::bench {

__attribute__((target("avx512f"))) inline uint64_t read_avx512(const uint8_t* p, size_t bytes) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 256 <= bytes; i += 256) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 128));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 192));
  }
  // Store and add by hand: GCC 12's _mm512_reduce_add_epi64 trips -Wuninitialized.
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  uint64_t sum = 0;
  for (uint64_t v : lanes) sum += v;
  return sum;
}

}  // namespace rinfer::bench
