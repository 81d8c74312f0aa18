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

// The ends of the layer stack a decoder (or its pipeline stage) holds: the
// token embeddings on the first stage, the final norm and output layer on
// the last (empty elsewhere).
struct DecoderEnds {
  // [vocab, hidden] (or BF16 blocked [V/8, H/32, 8, 32]), of which the shard
  // holds rows `vocab` (vocab-parallel: a token outside them embeds to zeros
  // and the ranks' rows are summed).
  TensorView embed;
  Range vocab;
  // Whole or column-parallel over the same vocabulary rows (the ranks'
  // logits are gathered).
  Linear lm_head;
  RMSNorm final_norm;
};

class Decoder : public Model {
 public:
  // Vocab-parallel shards are cut on 16 rows (a quantized output layer's blocks).
  static constexpr int64_t kVocabAlign = 16;
  // layers: the shard's pipeline stage's layers (all of them in one stage),
  // kv_shape: their cache. shard: which rank of how many the layers were
  // loaded for; forward() refuses a communicator of another world.
  Decoder(const ModelConfig& cfg, DecoderEnds ends, std::vector<DecoderLayer> layers, KVCacheShape kv_shape,
          const Shard& shard = {});

  const ModelConfig& config() const override { return cfg_; }
  KVCacheShape kv_shape() const override { return kv_shape_; }
  // A stage other than the first starts from run.stage_input, one other
  // than the last ends in run.stage_output (hidden states, [tokens, hidden]).
  void forward(std::span<const BatchItem> batch, const KvView& kv, float* logits, const RunContext& run) override;
  uint64_t weight_bytes_per_token() const override;
  std::vector<std::vector<uint64_t>> expert_counts() const override;
  std::vector<std::vector<uint64_t>> expert_rank_tokens() const override;
  void place_experts(const ExpertPlan& plan) override;

 private:
  template <typename Of>
  std::vector<std::vector<uint64_t>> per_moe_layer(Of of) const;

  ModelConfig cfg_;
  TensorView embed_;
  Range vocab_;  // the embedding rows (and logit columns) this shard holds
  bool embed_blocked_ = false;  // BF16 [V/8, H/32, 8, 32]
  std::vector<DecoderLayer> layers_;
  RMSNorm final_norm_;
  Linear lm_head_;
  KVCacheShape kv_shape_;
  Shard shard_;
  Workspace ws_;
  std::vector<int64_t> tok_pos_, tok_item_;
  std::vector<const int32_t*> block_tables_;
  std::vector<float> local_logits_;  // vocab-parallel: this shard's columns before the gather
};

}  // namespace rinfer
