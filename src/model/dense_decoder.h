#pragma once
// DenseDecoder: the pre-norm decoder shared by LLaMA-style families —
//   x = embed(tokens)
//   per layer: x += o_proj(attention(rope(q), rope(k), v));  x += down(silu(gate(n(x))) * up(n(x)))
//   logits = lm_head(norm(x))
// with GQA over the paged KV cache. Families differ only in config parsing,
// tensor names and biases, so they reuse this forward pass.
#include <vector>

#include "core/buffer.h"
#include "model/architecture.h"
#include "model/layers.h"

namespace rinfer {

// Hugging Face LLaMA tensor names; the rinfer names of every dense family.
std::vector<TensorSpec> llama_tensor_specs(const ModelConfig& cfg, int64_t group);

class DenseDecoder : public Model {
 public:
  DenseDecoder(const ModelConfig& cfg, const WeightStore& w, ThreadPool& pool);

  const ModelConfig& config() const override { return cfg_; }
  KVCacheShape kv_shape() const override { return {cfg_.n_layers, cfg_.n_kv_heads, cfg_.head_dim}; }
  void forward(std::span<const BatchItem> batch, KVCache& kv, float* logits) override;
  uint64_t weight_bytes_per_token() const override;

 private:
  struct Layer {
    RMSNorm attn_norm, mlp_norm;
    Linear q, k, v, o, gate, up, down;
  };
  void ensure_workspace(int64_t n_tokens, int64_t max_ctx);
  void embed(std::span<const BatchItem> batch);
  void attention(std::span<const BatchItem> batch, KVCache& kv, int64_t layer);

  ModelConfig cfg_;
  ThreadPool& pool_;
  TensorView embed_tokens_;
  std::vector<Layer> layers_;
  RMSNorm final_norm_;
  Linear lm_head_;
  RotaryEmbedding rope_;

  // Activations, sized for the largest batch seen so far (grown, never per token).
  int64_t ws_tokens_ = 0, ws_ctx_ = 0;
  Buffer x_, h_, q_, k_, v_, attn_, gate_, up_, scores_, sel_;
  std::vector<int64_t> tok_pos_, tok_item_;
};

}  // namespace rinfer
