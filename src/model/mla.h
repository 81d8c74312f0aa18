#pragma once
// DeepSeek-V2/V3 multi-head latent attention (MLA).
//   q      = q_b(norm(q_a(x)))  or  q_proj(x)            [heads, nope + rope]
//   c, kpe = kv_a_proj_with_mqa(x); c = norm(c)          latent + one shared rope key
//   cache  = [c | rope(kpe)] per token (not per head)
// Absorbed form: each head's q_nope is mapped into latent space with the K
// half of kv_b_proj (repacked transposed at load), attends over the cached
// rows, and the latent result is mapped to v with the V half of kv_b_proj.
// Same result as expanding K and V, with a cache of (latent + rope) values
// per token instead of heads * (nope + rope + v).
//
// Tensor parallelism splits the heads: q (q_proj, or q_b_proj after the
// replicated q_a_proj and its norm) and kv_b_proj hold the rank's heads'
// rows, o_proj their v columns (row-parallel, reduced once). kv_a_proj and
// its norm are replicated: the latent and the rope key are per token and
// read by every head, so every rank computes and caches the whole latent
// (the latent KV cache is replicated, not split).
#include <memory>
#include <vector>

#include "core/buffer.h"
#include "model/blocks.h"
#include "model/layers.h"

namespace rinfer {

struct MlaShape {
  int64_t hidden = 0, n_heads = 0, q_lora_rank = 0, kv_lora_rank = 0;
  int64_t nope_dim = 0, rope_dim = 0, v_dim = 0;
};

class MlaAttention : public AttentionBlock {
 public:
  MlaAttention(const MlaShape& s, const WeightStore& w, const std::string& prefix, double rms_eps,
               std::shared_ptr<const RotaryEmbedding> rope, float softmax_scale, const Shard& shard = {});
  int64_t n_local_heads() const { return n_heads_; }
  void forward(const float* h, const ForwardContext& ctx, int64_t layer, float* out) override;
  uint64_t weight_bytes() const override;

 private:
  MlaShape s_;
  int64_t n_heads_ = 0;  // this rank's heads (all of them unsharded)
  Linear q_a_, q_b_, q_proj_, kv_a_, kv_b_, o_;
  RMSNorm q_a_norm_, kv_a_norm_;
  Buffer w_uk_t_;  // per local head [kv_lora_rank, nope_dim], the K half of kv_b transposed, in kv_b's dtype
  std::shared_ptr<const RotaryEmbedding> rope_;
  float scale_;
  std::vector<ops::MatmulJob> head_jobs_;  // the per-head absorb / expand products of one forward
};

}  // namespace rinfer
