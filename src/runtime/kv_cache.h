#pragma once
// Paged KV cache: one preallocated pool of fixed-size blocks per layer (K and
// V separately), laid out head-major as PagedKV (core/paged_kv.h) describes
// ([n_kv_heads][n_blocks][block_size][head_dim]). A sequence
// owns a list of block ids (its block table); blocks are handed out and
// returned by a free list, so sequences of any length share one pool and
// nothing is allocated while generating.
#include <cstdint>
#include <vector>

#include "core/buffer.h"
#include "core/dtype.h"
#include "core/paged_kv.h"
#include "model/model.h"

namespace rinfer {

struct KVCacheOptions {
  int block_size = 16;
  int64_t n_blocks = 0;
  DType dtype = DType::F32;
};

class KVCache {
 public:
  KVCache(const KVCacheShape& shape, const KVCacheOptions& opts);

  const PagedKV& layer(int64_t l) const { return layers_.at(size_t(l)); }
  // Every layer's pools, as a forward pass reads them.
  KvView view() const { return {layers_, opts_.block_size}; }
  int block_size() const { return opts_.block_size; }
  int64_t n_blocks() const { return opts_.n_blocks; }
  int64_t n_free_blocks() const { return int64_t(free_.size()); }
  int64_t capacity_tokens() const { return opts_.n_blocks * opts_.block_size; }
  DType dtype() const { return opts_.dtype; }
  size_t bytes() const { return storage_.size() + scales_.size(); }
  size_t bytes_per_token() const { return bytes_per_token(shape_, opts_.dtype); }
  static size_t bytes_per_token(const KVCacheShape& shape, DType dtype);

  // Grow `table` so it covers n_tokens positions. Throws rinfer::Error when the
  // pool is exhausted (leaving the table as it was).
  void reserve(std::vector<int32_t>& table, int64_t n_tokens);
  bool can_reserve(const std::vector<int32_t>& table, int64_t n_tokens) const;
  // Return every block of the table to the pool and clear it.
  void release(std::vector<int32_t>& table);
  // Single blocks, for the serving engine's block manager (which shares
  // blocks between sequences and so cannot hand whole tables back).
  int32_t allocate_block();  // throws rinfer::Error when the pool is exhausted
  void free_block(int32_t block);

  static int64_t blocks_for_tokens(int64_t n_tokens, int block_size) {
    return (n_tokens + block_size - 1) / block_size;
  }

 private:
  KVCacheShape shape_;
  KVCacheOptions opts_;
  size_t k_bytes_ = 0, v_bytes_ = 0;  // bytes of K and of V for one layer
  Buffer storage_;
  size_t k_scale_floats_ = 0, v_scale_floats_ = 0;  // I8: scales per layer for K and V
  Buffer scales_;
  std::vector<int32_t> free_;
  std::vector<PagedKV> layers_;
  PagedKV make_layer(int64_t l);
};

}  // namespace rinfer
