#pragma once
// Internal to kernels/cpu, for the SIMD files: how a decode GEMV's blocks of
// weight rows are split over the threads (OwnedRanges), and the decode
// GEMVs' pool job over several matrices (BlockJob), shared by the AVX-512
// and AVX2 kernels.
//
// Everything here has internal linkage (an anonymous namespace, deliberately
// in a header): each SIMD-flagged file gets its own copy, compiled with its
// own -m flags, so the linker can never hand an AVX-512 build of this code to
// an AVX2 caller (the ODR rule in impl.h). Only plain C++ and GCC builtins.
#include <stdint.h>

#include "kernels/cpu/impl.h"

namespace rinfer::kernels::cpu::detail {
namespace {

// How a decode GEMV's blocks of W rows are split over the threads. A thread
// streams W at the memory's speed only along a long contiguous run: every
// jump to another run costs the prefetchers a ramp, so each thread owns one
// range instead of taking chunks in turn. A shared host also stalls a thread
// now and then, so ranges alone would leave the other one waiting: each
// thread owns one contiguous range of [0, n) and claims a few blocks at a
// time from its front; a thread done with its own range claims from the
// fronts of the others (the owner then skips what was taken).
constexpr int kMaxRanges = 256;
struct OwnedRanges {
  static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
  static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
  struct alignas(64) Front {  // one cache line per counter
    int64_t next;
  };
  int n_ranges = 1;
  int64_t claim = 1;
  int64_t hi[kMaxRanges];
  Front front[kMaxRanges];

  // ranges: one per thread (at most kMaxRanges); claim: blocks per claim.
  void init(int64_t n, int ranges, int64_t claim_) {
    n_ranges = int(max64(1, min64(min64(ranges, kMaxRanges), n)));
    claim = max64(1, claim_);
    for (int r = 0; r < n_ranges; ++r) {
      front[r].next = n * r / n_ranges;
      hi[r] = n * (r + 1) / n_ranges;
    }
  }
  // f(b0, b1) over claims [b0, b1): range `self` first, then the others.
  template <typename F>
  void work(int self, F&& f) {
    for (int i = 0; i < n_ranges; ++i) {
      const int r = (self + i) % n_ranges;
      for (;;) {
        const int64_t b = __atomic_fetch_add(&front[r].next, claim, __ATOMIC_RELAXED);
        if (b >= hi[r]) break;
        f(b, min64(b + claim, hi[r]));
      }
    }
  }
  // S streams per thread (S = 2, 3 or 4): thread `self` owns the ranges
  // S * self .. S * self + S - 1 (the S parts of its share) and claims from
  // all their fronts at once; fs(b0, b1), with b0[S] and b1[S], works one
  // claim of each side by side, f1(b0, b1) a claim when some sides have no
  // blocks left. Then the same for the other threads' groups. n_ranges must
  // be a multiple of S.
  //
  // Why: on some cores (Zen 5) one core reads several runs of lines at once
  // faster than one run, and the GEMVs that do the most work per byte (Q4,
  // BF16) fall furthest behind a plain read with one. How many streams each
  // GEMV reads on each CPU: DecodePrefetch::*_streams (perf/decode_tuning.cpp).
  template <int S, typename FS, typename F1>
  void work_streams(int self, FS&& fs, F1&& f1) {
    const int n_groups = n_ranges / S;
    for (int i = 0; i < n_groups; ++i) {
      const int r = S * ((self + i) % n_groups);
      for (;;) {
        int64_t b0[S], b1[S];
        int n_ok = 0;
        for (int s = 0; s < S; ++s) {
          b0[s] = __atomic_fetch_add(&front[r + s].next, claim, __ATOMIC_RELAXED);
          b1[s] = min64(b0[s] + claim, hi[r + s]);
          n_ok += b0[s] < hi[r + s];
        }
        if (n_ok == 0) break;
        if (n_ok == S) {
          fs(b0, b1);
        } else {
          for (int s = 0; s < S; ++s)
            if (b0[s] < hi[r + s]) f1(b0[s], b1[s]);
        }
      }
    }
  }
};
// Blocks per claim: about this many bytes of W.
constexpr int64_t kGemvClaimBytes = 65536;

// The part i of a job of several matrices that index t (a block or a task)
// falls in: parts are [first[i], first[i + 1]), t < the last bound.
inline int part_of(const int64_t* first, int64_t t) {
  int i = 0;
  while (t >= first[i + 1]) ++i;
  return i;
}


// One block of one matrix in a BlockJob: the matrix's context and the
// block's index in it.
template <typename Ctx>
struct BlockOf {
  const Ctx* c;
  int64_t b;
};

// The decode step's job over several matrices of one x (q/k/v, gate/up):
// their blocks, one after the other, split over the threads as OwnedRanges,
// so the group is one pool job (gate on one thread and up on the other,
// say). Run1 computes one block, Run2 two side by side, Run3 three and Run4
// four (two to four streams of weight lines: OwnedRanges::work_streams).
// Without a Run4 (the default, Run2) four streams are read as two, without
// a Run3 (the default, none) three are read as two.
template <typename Ctx, int MaxMatrices, void (*Run1)(const BlockOf<Ctx>*), void (*Run2)(const BlockOf<Ctx>*),
          void (*Run4)(const BlockOf<Ctx>*) = Run2, void (*Run3)(const BlockOf<Ctx>*) = nullptr>
struct BlockJob {
  Ctx ctx[MaxMatrices];
  int64_t first_block[MaxMatrices + 1] = {0};  // matrix i: [first_block[i], first_block[i + 1])
  int n_matrices = 0;
  OwnedRanges ranges;  // not value-initialized: run() sets what is used

  // Appends a matrix of n_blocks blocks (at most MaxMatrices).
  void add(const Ctx& c, int64_t n_blocks) {
    ctx[n_matrices] = c;
    first_block[n_matrices + 1] = first_block[n_matrices] + n_blocks;
    ++n_matrices;
  }
  int64_t n_blocks() const { return first_block[n_matrices]; }
  BlockOf<Ctx> locate(int64_t gb) const {
    const int i = part_of(first_block, gb);
    return BlockOf<Ctx>{&ctx[i], gb - first_block[i]};
  }
  void blocks(int64_t b0, int64_t b1) const {
    for (int64_t b = b0; b < b1; ++b) {
      const BlockOf<Ctx> blk = locate(b);
      Run1(&blk);
    }
  }
  // [b0[s], b1[s]) for s < S side by side, S streams; what is left of the
  // longer ones after the shortest ends, one block at a time.
  template <int S>
  void block_streams(int64_t* b0, const int64_t* b1) const {
    for (;;) {
      bool all = true;
      for (int s = 0; s < S; ++s) all = all && b0[s] < b1[s];
      if (!all) break;
      BlockOf<Ctx> blk[S];
      for (int s = 0; s < S; ++s) blk[s] = locate(b0[s]++);
      if constexpr (S == 2)
        Run2(blk);
      else if constexpr (S == 3)
        Run3(blk);  // only with a Run3: run() reads three streams as two without one
      else
        Run4(blk);
    }
    for (int s = 0; s < S; ++s) blocks(b0[s], b1[s]);
  }
  static void task(void* p, int64_t t, int) {
    auto& j = *static_cast<BlockJob*>(p);
    j.ranges.work(int(t), [&](int64_t b0, int64_t b1) { j.blocks(b0, b1); });
  }
  template <int S>
  static void task_streams(void* p, int64_t t, int) {
    auto& j = *static_cast<BlockJob*>(p);
    j.ranges.template work_streams<S>(
        int(t), [&](int64_t* b0, const int64_t* b1) { j.template block_streams<S>(b0, b1); },
        [&](int64_t b0, int64_t b1) { j.blocks(b0, b1); });
  }
  // Every block: on the caller with one thread or one block, else as one
  // pool job, claims of `claim` blocks; streams: 1, 2 or 4 per thread (the
  // caller checks there are at least that many blocks per thread).
  void run(const Runner& runner, int streams, int64_t claim) {
    const int64_t nb = n_blocks();
    if (streams == 4 && Run4 == Run2) streams = 2;
    if (streams == 3 && Run3 == nullptr) streams = 2;
    if (runner.n_threads == 1 || nb < 2) {
      if (streams == 1 || nb < streams) return blocks(0, nb);
      int64_t b0[4], b1[4];
      for (int s = 0; s < streams; ++s) {
        b0[s] = nb * s / streams;
        b1[s] = nb * (s + 1) / streams;
      }
      if constexpr (Run3 != nullptr) {
        if (streams == 3) return block_streams<3>(b0, b1);
      }
      return streams == 2 ? block_streams<2>(b0, b1) : block_streams<4>(b0, b1);
    }
    ranges.init(nb, runner.n_threads * streams, claim);
    if (streams == 1 || ranges.n_ranges % streams != 0)
      runner.run(runner.pool, ranges.n_ranges, &BlockJob::task, this);
    else if (streams == 2)
      runner.run(runner.pool, ranges.n_ranges / 2, &BlockJob::template task_streams<2>, this);
    else if (streams == 4)
      runner.run(runner.pool, ranges.n_ranges / 4, &BlockJob::template task_streams<4>, this);
    else if constexpr (Run3 != nullptr)  // streams == 3
      runner.run(runner.pool, ranges.n_ranges / 3, &BlockJob::template task_streams<3>, this);
  }
};

}  // namespace
}  // namespace rinfer::kernels::cpu::detail
