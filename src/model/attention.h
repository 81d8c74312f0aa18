#pragma once
// Grouped-query attention over the paged KV cache (MHA and MQA are the
// special cases n_kv_heads == n_heads and == 1). Position information is
// RoPE (any style, on all or part of each head) or ALiBi.
#include <memory>
#include <vector>

#include "model/blocks.h"
#include "model/layers.h"

namespace rinfer {

struct GqaShape {
  int64_t hidden = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
};

class GqaAttention : public AttentionBlock {
 public:
  // rope may be null (ALiBi models pass slopes instead); it is shared by all layers.
  GqaAttention(const GqaShape& shape, Linear q, Linear k, Linear v, Linear o,
               std::shared_ptr<const RotaryEmbedding> rope, std::vector<float> alibi_slopes = {});
  // The q/k/v/o projections prefix + q etc., whole or the shard's heads:
  // q, k, v column-parallel by heads (with fewer K/V heads than ranks, the
  // ranks that share one each hold it), o row-parallel over the same heads.
  static GqaAttention load(const GqaShape& s, const WeightStore& w, const std::string& prefix, bool qkv_bias,
                           bool o_bias, std::shared_ptr<const RotaryEmbedding> rope, std::vector<float> alibi = {},
                           const Shard& shard = {}, const char* q = "q_proj", const char* k = "k_proj",
                           const char* v = "v_proj", const char* o = "o_proj");
  int64_t n_local_heads() const { return n_heads_; }
  int64_t n_local_kv_heads() const { return n_kv_heads_; }
  int64_t cached_kv_heads() const override { return n_kv_heads_; }
  // Qwen3: RMSNorm over each q and k head (weights [head_dim]) before RoPE.
  void set_qk_norm(RMSNorm q_norm, RMSNorm k_norm) {
    q_norm_ = q_norm;
    k_norm_ = k_norm;
  }
  void forward(const float* h, const ForwardContext& ctx, int64_t layer, float* out) override;
  uint64_t weight_bytes() const override { return q_.bytes() + k_.bytes() + v_.bytes() + o_.bytes(); }

 private:
  GqaShape s_;
  Linear q_, k_, v_, o_;
  std::shared_ptr<const RotaryEmbedding> rope_;
  std::vector<float> alibi_;
  RMSNorm q_norm_, k_norm_;  // weight == nullptr: none
  float scale_;
  int64_t head0_ = 0;                   // the shard's first query head
  int64_t n_heads_ = 0, n_kv_heads_ = 0;  // the shard's query and K/V heads
};

// ALiBi slopes as in the ALiBi paper / HF Baichuan-13B and BLOOM: for a power
// of two n, 2^(-8(h+1)/n); otherwise the closest power of two plus every
// other slope of the next power (the "_get_interleave" rule).
std::vector<float> alibi_slopes(int64_t n_heads);

}  // namespace rinfer
