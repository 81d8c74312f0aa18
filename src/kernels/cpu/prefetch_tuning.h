#pragma once
// The software prefetches of the decode GEMVs, per CPU generation.
//
// A decode GEMV does more work per byte than a plain read, so fewer of its
// loads are in flight and the hardware prefetcher alone can fall behind; a
// software prefetch some kilobytes ahead helps where that happens and costs
// where it does not. Which one pays is a property of the core: the same
// prefetch that won 20-30 % on Zen 4 (and on the Xeon before it) lost 10-50 %
// on Zen 5, whose hardware prefetcher keeps up with these loops by itself
// for BF16 (docs/performance.md, "Decode prefetch per CPU generation"). So
// the distances are data, one profile per generation, chosen once.
#include <cstdint>

#include "core/cpu_features.h"

namespace rinfer::kernels::cpu {

struct DecodePrefetch {
  const char* name;
  // Blocked BF16 GEMV (AVX-512): a T2 prefetch this many bytes ahead, once
  // per 4 lines, and a prefetchnta this far ahead on every line; 0: none.
  int64_t bf16_t2, bf16_nta;
  // Q8 A8 GEMV: the same kind of T2 prefetch, a prefetcht1 (into L2)
  // this far ahead once per 4 lines, and a prefetchnta this far ahead on
  // every line; 0: none. All only with several threads unless
  // q8_one_thread. (AVX-512 only: the AVX2 GEMV reads Q8
  // faster without, kernels_avx2.cpp.)
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
  // BF16 one reads one: kernels_avx2.cpp says why).
  int bf16_streams, q8_streams, q4_streams;
  // The per-line prefetches (bf16_nta, q8_nta, q4_nta) as prefetcht0 into
  // L1 instead of prefetchnta: Ice Lake reads faster with it, Zen 5 with nta.
  bool line_t0;
};

// A profile spec: a profile's name ("default", "zen5", "icelake"), optionally followed
// by ':' and field=value pairs separated by ',' that change its fields, e.g.
// "zen5:q4_streams=1,q4_nta=4096" (fields as above; q8_one_thread 0 or 1). The
// result keeps the whole spec as its name. Anything else is an error that
// names the profiles and fields. Profiles are interned: the reference stays
// valid for the life of the process.
const DecodePrefetch& parse_decode_prefetch(const char* spec);
// The profile in use: RINFER_DECODE_PREFETCH=<spec> if set (a bad spec is an
// error), else decode_prefetch_for(cpu).
const DecodePrefetch& decode_prefetch();
// The profile for a CPU and a RINFER_DECODE_PREFETCH value (nullptr or "":
// unset). AMD family 0x1A and later (Zen 5) gets "zen5", Intel Ice Lake-SP/-D
// (family 6, model 0x6A or 0x6C) "icelake", the rest "default".
const DecodePrefetch& decode_prefetch_for(const CpuFeatures& cpu, const char* env);
// Pins the profile by spec, e.g. to test both paths on one machine or to
// A/B two settings in one process (bench_gemv_pairs --profile); nullptr
// returns to the automatic choice.
void force_decode_prefetch(const char* spec);

}  // namespace rinfer::kernels::cpu
