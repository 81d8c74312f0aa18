#pragma once
// The two kinds of sub-layer a decoder layer is made of. A family picks
// implementations (GQA or latent attention; dense or mixture-of-experts
// feed-forward) and the Decoder runs them in its pre-norm residual loop.
#include <cstdint>

#include "model/forward_context.h"

namespace rinfer {

class AttentionBlock {
 public:
  virtual ~AttentionBlock() = default;
  // h: [n_tokens, hidden] normalized input; out: [n_tokens, hidden].
  virtual void forward(const float* h, const ForwardContext& ctx, int64_t layer, float* out) = 0;
  virtual uint64_t weight_bytes() const = 0;
  // K/V heads this shard caches per token (GQA: its share of them; 0: the
  // block does not say, the family gives the cache shape itself).
  virtual int64_t cached_kv_heads() const { return 0; }
};

class FeedForwardBlock {
 public:
  virtual ~FeedForwardBlock() = default;
  virtual void forward(const float* h, int64_t n_tokens, float* out, const ForwardContext& ctx) = 0;
  // Bytes of weights one token reads (for MoE: the router, top-k experts, shared experts).
  virtual uint64_t weight_bytes_per_token() const = 0;
};

}  // namespace rinfer
