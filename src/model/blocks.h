#pragma once
// The two kinds of sub-layer a decoder layer is made of. A family picks
// implementations (GQA or latent attention; dense or mixture-of-experts
// feed-forward) and the Decoder runs them in its pre-norm residual loop.
#include <cstdint>
#include <span>

#include "core/thread_pool.h"
#include "model/model.h"
#include "model/workspace.h"
#include "runtime/kv_cache.h"

namespace rinfer {

class RotaryEmbedding;

// Each token's rotary angles (RotaryEmbedding::angles) in one forward pass:
// the first layer that rotates fills them, the others reuse them (the layers
// share one RotaryEmbedding).
struct TokenAngles {
  const RotaryEmbedding* owner = nullptr;  // whose angles cs holds; null: none yet
  float* cs = nullptr;                     // [n_tokens][owner->rot_dim()]
};

// Everything a block needs to know about the tokens of one forward call.
struct ForwardContext {
  std::span<const BatchItem> batch;
  const int64_t* tok_pos = nullptr;   // position of each token
  const int64_t* tok_item = nullptr;  // index into batch of each token
  int64_t n_tokens = 0;
  int64_t max_ctx = 0;  // longest sequence (positions) in the batch
  KVCache* kv = nullptr;
  ThreadPool* pool = nullptr;
  Workspace* ws = nullptr;
  TokenAngles* angles = nullptr;  // the pass's; null: every call of token_angles takes them anew
};

// ctx's tokens' angles of `rope` ([n_tokens][rope.rot_dim()]), taken now
// (over the pool) unless ctx.angles holds them already.
const float* token_angles(const ForwardContext& ctx, const RotaryEmbedding& rope);

class AttentionBlock {
 public:
  virtual ~AttentionBlock() = default;
  // h: [n_tokens, hidden] normalized input; out: [n_tokens, hidden].
  virtual void forward(const float* h, const ForwardContext& ctx, int64_t layer, float* out) = 0;
  virtual uint64_t weight_bytes() const = 0;
};

class FeedForwardBlock {
 public:
  virtual ~FeedForwardBlock() = default;
  virtual void forward(const float* h, int64_t n_tokens, float* out, Workspace& ws, ThreadPool& pool) = 0;
  // Bytes of weights one token reads (for MoE: the router, top-k experts, shared experts).
  virtual uint64_t weight_bytes_per_token() const = 0;
};

}  // namespace rinfer
