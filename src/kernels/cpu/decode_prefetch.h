#pragma once
// How the decode GEMVs read their weights: software prefetch distances and
// weight streams per thread. Which values pay is a property of the core, so
// they are data: the kernels read the profile installed here, and the table
// of profiles per CPU generation that picks one lives outside the kernels
// (perf/decode_tuning.h, installed once at start by every binary).
#include <cstdint>

namespace rinfer::kernels::cpu {

struct DecodePrefetch {
  const char* name;
  // Blocked BF16 GEMV (AVX-512): a T2 prefetch this many bytes ahead, once
  // per 4 lines, and a prefetchnta this far ahead on every line; 0: none.
  int64_t bf16_t2, bf16_nta;
  // Q8 A8 GEMV: the same kind of T2 prefetch, a prefetcht1 (into L2)
  // this far ahead once per 4 lines, and a prefetchnta this far ahead on
  // every line; 0: none. All only with several threads unless
  // q8_one_thread. (AVX-512 only: the AVX2 GEMV reads Q8 faster without.)
  int64_t q8_t2, q8_l2, q8_nta;
  bool q8_one_thread;
  // Q4 A8 GEMV: a prefetchnta this far ahead on every line, and a
  // prefetcht1 this far ahead once per 4 lines; 0: none.
  int64_t q4_nta, q4_l2;
  // Weight streams per thread, 1, 2 or 4 per GEMV (BF16 also 3): with S > 1
  // each thread splits its share of the blocks in S parts and works one
  // block of each side by side, so that S runs of lines are read at once
  // (BF16 with one x row; Q8/Q4 two with up to two x rows, four with one.
  // The AVX-512 GEMVs; the AVX2 Q8/Q4 ones read at most two and the AVX2
  // BF16 one reads one).
  int bf16_streams, q8_streams, q4_streams;
  // The per-line prefetches (bf16_nta, q8_nta, q4_nta) as prefetcht0 into
  // L1 instead of prefetchnta.
  bool line_t0;
};

// The profile the decode GEMVs use: the one installed by set_decode_prefetch,
// or default_decode_prefetch() while none is.
const DecodePrefetch& decode_prefetch();
// Installs p for the whole process (nullptr: back to the default). p must
// stay valid while it is installed; set it while no kernel runs.
void set_decode_prefetch(const DecodePrefetch* p);
// The "default" profile: what the kernels use until a profile is installed.
const DecodePrefetch& default_decode_prefetch();

}  // namespace rinfer::kernels::cpu
