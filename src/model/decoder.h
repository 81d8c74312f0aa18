#pragma once
// Decoder: the pre-norm transformer every supported family is an instance of
//   x = embed(tokens)
//   per layer: x += attention(norm1(x));  x += feed_forward(norm2(x))
//   logits = lm_head(norm(x))
// Families choose the blocks (GQA / latent attention, dense / MoE
// feed-forward) and the KV cache shape; the loop and the batching are here.
#include <memory>
#include <vector>

#include "model/blocks.h"
#include "model/layers.h"

namespace rinfer {

struct DecoderLayer {
  RMSNorm attn_norm, ffn_norm;
  std::unique_ptr<AttentionBlock> attn;
  std::unique_ptr<FeedForwardBlock> ffn;
};

class Decoder : public Model {
 public:
  Decoder(const ModelConfig& cfg, ThreadPool& pool, TensorView embed, std::vector<DecoderLayer> layers,
          RMSNorm final_norm, Linear lm_head, KVCacheShape kv_shape);

  const ModelConfig& config() const override { return cfg_; }
  KVCacheShape kv_shape() const override { return kv_shape_; }
  void forward(std::span<const BatchItem> batch, KVCache& kv, float* logits) override;
  uint64_t weight_bytes_per_token() const override;
  std::vector<std::vector<uint64_t>> expert_counts() const override;

 private:
  ModelConfig cfg_;
  ThreadPool& pool_;
  TensorView embed_;
  bool embed_blocked_ = false;  // BF16 [V/8, H/32, 8, 32]
  std::vector<DecoderLayer> layers_;
  RMSNorm final_norm_;
  Linear lm_head_;
  KVCacheShape kv_shape_;
  Workspace ws_;
  std::vector<int64_t> tok_pos_, tok_item_;
};

}  // namespace rinfer
