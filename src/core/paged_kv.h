#pragma once
// The paged KV cache as attention reads it: plain descriptors that every
// layer of the project shares (the runtime allocates the pools, the model
// says their shape, the kernels read them), so none of them owns the
// vocabulary.
#include <cstdint>

#include "core/dtype.h"

namespace rinfer {

// What a model asks of its cache, per layer.
struct KVCacheShape {
  int64_t n_layers = 0;
  int64_t n_kv_heads = 0;  // the heads this rank holds
  int64_t head_dim = 0;
  // Width of a V head: -1 means head_dim; 0 means no V at all (latent caches
  // such as DeepSeek's MLA, where the values are read from the K rows).
  int64_t v_head_dim = -1;
};

// One layer's pools: n_blocks blocks of block_size token slots, for K and for
// V. A sequence owns the blocks listed in its block table, in order; slot
// s = block * block_size + offset holds one token. The pools are head-major:
// head h of slot s is row (h * n_blocks + block) * block_size + offset of
// head_dim values of `dtype` (F32, F16, BF16 or I8), i.e.
// [n_kv_heads][n_blocks][block_size][head_dim], so that one head's rows of a
// sequence whose blocks are in order are one run the hardware prefetchers
// follow (attention streams one K/V head per task).
//
// I8: symmetric per-token, per-head quantization; values in [-127, 127] in
// the same layout, and k_scale / v_scale hold one f32 per row at the row's
// index (scale = max|x| / 127 over the head's head_dim values).
struct PagedKV {
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::F32;
  int block_size = 16;
  int n_kv_heads = 0;
  int head_dim = 0;
  float* k_scale = nullptr;  // I8 only: one per row
  float* v_scale = nullptr;  // I8 only: one per row
  int64_t n_blocks = 0;      // blocks in the pool (the row stride between heads is n_blocks * block_size)
};

// First row of head `head`'s part of pool block `block`; its block_size rows
// (and, for I8, their scales) follow one another. (Static: each file, the
// SIMD-flagged ones included, gets its own copy, so the linker cannot hand a
// scalar caller code built with -mavx512f; kernels/cpu/impl.h.)
static inline int64_t kv_block_row(const PagedKV& kv, int64_t block, int head) {
  return (int64_t(head) * kv.n_blocks + block) * kv.block_size;
}
// The row of head `head` of slot `slot`.
static inline int64_t kv_slot_row(const PagedKV& kv, int64_t slot, int head) {
  return kv_block_row(kv, slot / kv.block_size, head) + slot % kv.block_size;
}

}  // namespace rinfer
