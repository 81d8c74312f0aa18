#include "runtime/kv_cache.h"

#include <cstring>

#include "core/error.h"

namespace rinfer {

KVCache::KVCache(const KVCacheShape& shape, const KVCacheOptions& opts) : shape_(shape), opts_(opts) {
  RINFER_CHECK(opts.block_size > 0, "--block-size must be positive, got ", opts.block_size);
  RINFER_CHECK(opts.n_blocks > 0, "KV cache needs at least one block");
  RINFER_CHECK(opts.dtype == DType::F32 || opts.dtype == DType::F16 || opts.dtype == DType::BF16 ||
                   opts.dtype == DType::I8,
               "KV cache dtype must be f32, f16, bf16 or int8, got ", dtype_user_name(opts.dtype));
  // The latent (MLA) cache kernel reads f32/f16/bf16 rows only.
  RINFER_CHECK(!(opts.dtype == DType::I8 && shape.v_head_dim == 0),
               "--kv-cache-dtype int8 is not supported for latent-attention (MLA) models; use bf16, f16 or f32");
  const int64_t v_dim = shape.v_head_dim < 0 ? shape.head_dim : shape.v_head_dim;
  const size_t slots = size_t(opts.n_blocks) * size_t(opts.block_size) * size_t(shape.n_kv_heads);
  k_bytes_ = slots * size_t(shape.head_dim) * dtype_size(opts.dtype);
  v_bytes_ = slots * size_t(v_dim) * dtype_size(opts.dtype);
  if (opts.dtype == DType::I8) {
    // One f32 scale per (slot, head) for K and for V (core/paged_kv.h).
    k_scale_floats_ = slots;
    v_scale_floats_ = v_dim > 0 ? slots : 0;
  }
  // Preallocated and touched once, so the first request does not pay page faults.
  storage_ = Buffer((k_bytes_ + v_bytes_) * size_t(shape.n_layers), /*zero=*/true);
  std::memset(storage_.data(), 0, storage_.size());
  if (k_scale_floats_) {
    scales_ = Buffer((k_scale_floats_ + v_scale_floats_) * sizeof(float) * size_t(shape.n_layers), /*zero=*/true);
    std::memset(scales_.data(), 0, scales_.size());
  }
  free_.reserve(opts.n_blocks);
  for (int64_t b = opts.n_blocks - 1; b >= 0; --b) free_.push_back(int32_t(b));
  for (int64_t l = 0; l < shape.n_layers; ++l) layers_.push_back(make_layer(l));
}

size_t KVCache::bytes_per_token(const KVCacheShape& shape, DType dtype) {
  const int64_t v_dim = shape.v_head_dim < 0 ? shape.head_dim : shape.v_head_dim;
  size_t n = size_t(shape.n_layers * shape.n_kv_heads * (shape.head_dim + v_dim)) * dtype_size(dtype);
  if (dtype == DType::I8)  // + one f32 scale per head for K (and V)
    n += size_t(shape.n_layers * shape.n_kv_heads * (v_dim > 0 ? 2 : 1)) * sizeof(float);
  return n;
}

PagedKV KVCache::make_layer(int64_t l) {
  PagedKV kv;
  auto* base = storage_.as<uint8_t>() + size_t(l) * (k_bytes_ + v_bytes_);
  kv.k = base;
  kv.v = v_bytes_ ? base + k_bytes_ : nullptr;
  kv.dtype = opts_.dtype;
  kv.block_size = opts_.block_size;
  kv.n_kv_heads = int(shape_.n_kv_heads);
  kv.head_dim = int(shape_.head_dim);
  kv.n_blocks = opts_.n_blocks;
  if (k_scale_floats_) {
    float* sb = scales_.as<float>() + size_t(l) * (k_scale_floats_ + v_scale_floats_);
    kv.k_scale = sb;
    kv.v_scale = v_scale_floats_ ? sb + k_scale_floats_ : nullptr;
  }
  return kv;
}

bool KVCache::can_reserve(const std::vector<int32_t>& table, int64_t n_tokens) const {
  int64_t need = blocks_for_tokens(n_tokens, opts_.block_size) - int64_t(table.size());
  return need <= int64_t(free_.size());
}

void KVCache::reserve(std::vector<int32_t>& table, int64_t n_tokens) {
  int64_t need = blocks_for_tokens(n_tokens, opts_.block_size) - int64_t(table.size());
  if (need <= 0) return;
  RINFER_CHECK(need <= int64_t(free_.size()), "KV cache is full: ", n_tokens, " tokens need ", need,
               " more blocks of ", opts_.block_size, " but only ", free_.size(), " of ", opts_.n_blocks,
               " are free (raise --kv-cache-tokens)");
  for (int64_t i = 0; i < need; ++i) {
    table.push_back(free_.back());
    free_.pop_back();
  }
}

void KVCache::release(std::vector<int32_t>& table) {
  for (auto b : table) free_.push_back(b);
  table.clear();
}

int32_t KVCache::allocate_block() {
  RINFER_CHECK(!free_.empty(), "KV cache is full: all ", opts_.n_blocks, " blocks of ", opts_.block_size,
               " tokens are in use");
  const int32_t b = free_.back();
  free_.pop_back();
  return b;
}

void KVCache::free_block(int32_t block) {
  RINFER_CHECK(block >= 0 && block < opts_.n_blocks, "KV cache: block ", block, " is outside the pool");
  free_.push_back(block);
}

}  // namespace rinfer
