#pragma once
// Internal to kernels/cpu, for the SIMD files: the quantized decode GEMVs'
// choice of kernel instance, shared by the AVX-512 and AVX2 files.
//
// Internal linkage on purpose (an anonymous namespace in a header): each
// SIMD-flagged file instantiates its own copy with its own -m flags (the ODR
// rule in impl.h).
#include "kernels/cpu/ops.h"

namespace rinfer::kernels::cpu::detail {
namespace {

template <template <bool, int, bool, int> class Kernel, bool Q4, int GS, int NB, typename Blk>
void run_q_block_gs(const Blk* blk) {
  if (blk[0].c->prefetch)
    Kernel<Q4, GS, true, NB>::run(blk);
  else
    Kernel<Q4, GS, false, NB>::run(blk);
}

// Kernel<Q4, GS, PF, NB>::run(blk) for NB (1 or 2) blocks of one job, with
// the weights' type (Q4 or Q8), group size (32, 64 or 128: check_quant_shape)
// and the job's prefetch switch as constants, so that the kernel's loops
// unroll. Every block of a job has the same type and group size. Blk: a
// BlockOf<Ctx> whose Ctx has `a` (the QMatmulArgs) and `prefetch`.
template <template <bool, int, bool, int> class Kernel, int NB, typename Blk>
void run_q_block(const Blk* blk) {
  const QuantizedWeight& w = *blk[0].c->a->w;
  if (w.type == QuantType::Q4) {
    switch (w.group_size) {
      case 32: return run_q_block_gs<Kernel, true, 32, NB>(blk);
      case 64: return run_q_block_gs<Kernel, true, 64, NB>(blk);
      default: return run_q_block_gs<Kernel, true, 128, NB>(blk);
    }
  }
  switch (w.group_size) {
    case 32: return run_q_block_gs<Kernel, false, 32, NB>(blk);
    case 64: return run_q_block_gs<Kernel, false, 64, NB>(blk);
    default: return run_q_block_gs<Kernel, false, 128, NB>(blk);
  }
}

}  // namespace
}  // namespace rinfer::kernels::cpu::detail
